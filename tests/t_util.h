/* t_util.h - helpers shared by the cmocka suites (t_* names).
 * Include after <setjmp.h>, <stdarg.h>, <stddef.h> and <cmocka.h>. */
#ifndef TFS_T_UTIL_H
#define TFS_T_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/io.h"

/* A fresh empty directory under $TMPDIR (default /tmp); caller frees the string and
 * removes the tree with t_rmtree. Fails the test on error. */
char *t_mkdtemp(const char *tag);
/* rm -rf path (no error if missing). */
void t_rmtree(const char *path);
/* An io context of the kind named by $TFS_IO (uring / sync / auto); fails the test
 * if it cannot be created. */
struct tfs_io *t_io(void);
/* Deterministic pseudo-random numbers (xorshift64*). */
uint64_t t_rand(uint64_t *state);
/* Reads a whole file into a malloc'd buffer; returns its length or -1. */
long t_read_file(const char *path, uint8_t **out);
/* Writes a whole file (creating/truncating); 0 or -1. */
int t_write_file(const char *path, const void *data, size_t len);
/* Size of a file, or -1. */
long t_file_size(const char *path);

/* Out of memory. ASan and TSan reserve terabytes of shadow memory: an
 * address-space limit cannot work under them, so suites skip such tests when
 * T_SHADOW_SANITIZER is defined. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_SHADOW_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define T_SHADOW_SANITIZER 1
#endif
#endif
/* Limits this process's address space to what it uses now plus headroom bytes,
 * so that allocations past that fail; t_unlimit_address_space lifts it again.
 * For forked children only. 0, or -1 when it cannot (no /proc, or a hard limit
 * already lower): the test should be skipped, with T_SKIP_STATUS from the child. */
#define T_SKIP_STATUS 77
/* Runs child(arg) in a forked process and checks it exited with want; a child
 * that exits with T_SKIP_STATUS skips the test. */
void t_expect_child(int (*child)(uintptr_t), uintptr_t arg, int want);
int t_limit_address_space(size_t headroom);
int t_unlimit_address_space(void);

/* Crash sweeps. The child of t_crash_run: runs the workload in a forked process,
 * arming fault_spec (tfs_io_set_fault) where the workload starts, and writes one
 * report to fd after each step it had acknowledged. Returns 0 once it ran to the
 * end; anything else fails the test. */
typedef int (*t_crash_child)(void *arg, const char *fault_spec, int fd);
/* Forks child with the fault spec "all:N:crash" (the n-th mutating operation
 * kills it), reads at most max reports of size bytes into reports, waits, and
 * fails the test unless the child ran to its end or was killed by the fault
 * (TFS_IO_CRASH_STATUS). Returns how many reports came; *finished says whether
 * the child ran to its end, i.e. n is past the workload. */
size_t t_crash_run(t_crash_child child, void *arg, int n, void *reports, size_t size, size_t max,
                   bool *finished);

struct tfs_plog;
/* Reads pl from offset 0 and fails the test unless its records' offsets are 0,
 * 1, 2, ... (no holes, no duplicates); returns how many there are. */
int64_t t_plog_dense(struct tfs_plog *pl);

/* Number of descriptors this process holds open (/proc/self/fd). */
int t_open_fds(void);
/* Lowers this process's soft descriptor limit to n; returns the limit it was. */
long t_set_fd_limit(long n);
/* Takes descriptors (of /dev/null) until the process limit leaves exactly spare
 * free; returns how many it took. t_fds_release gives them back. */
int t_fds_exhaust(int spare, int *fds, int cap);
void t_fds_release(int *fds, int n);

#endif
