/* io.h - the only door to the disk: one interface, two backends.
 *
 * Owns: per-thread io_uring rings (liburing) or nothing (pread/pwrite backend), the
 * fault-injection counters used by the fault and crash suites, and a thread for
 * deferred unlinks (started on first use).
 *
 * Backends: TFS_IO_URING submits reads and fsyncs to a ring owned by the calling
 * thread (created on its first request, freed at thread exit or destroy), after a
 * non-blocking preadv2 has copied whatever the page cache already holds; buffered
 * writes are pwritev on both backends, because io_uring would punt each one to a
 * worker thread (measured: io_uring.c). TFS_IO_SYNC uses pread/pwrite/fsync. TFS_IO_AUTO
 * probes io_uring once and falls back to sync where it is unavailable (containers
 * often forbid it). Both give the same results; the whole engine suite runs on both.
 *
 * Every operation that changes the disk (write, fsync, rename, unlink, truncate,
 * directory fsync, create) goes through here, so a fault spec can fail or crash the
 * n-th one: that is how the crash suite moves the crash point one step at a time.
 * A directory counts as a file: mkdirat is a create, rmdir (tfs_io_unlinkat with
 * AT_REMOVEDIR, as tfs_dir_remove_tree does it) an unlink.
 *
 * Threads: every function may be called from any thread concurrently.
 * Errors: 0 / a byte count, or a negative errno captured right after the call.
 */
#ifndef TFS_IO_H
#define TFS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

enum tfs_io_kind { TFS_IO_AUTO = 0, TFS_IO_URING = 1, TFS_IO_SYNC = 2 };

/* Kinds of mutating operation, for fault specs. */
enum {
	TFS_IO_OP_WRITE = 1 << 0,
	TFS_IO_OP_FSYNC = 1 << 1,
	TFS_IO_OP_RENAME = 1 << 2,
	TFS_IO_OP_UNLINK = 1 << 3,
	TFS_IO_OP_TRUNCATE = 1 << 4,
	TFS_IO_OP_CREATE = 1 << 5,
	TFS_IO_OP_ALL = 0x3f,
};

/* Exit status of a process crashed by a fault spec (so a test can tell it apart). */
#define TFS_IO_CRASH_STATUS 86

struct tfs_io;

/* Creates an I/O context. TFS_IO_URING fails with the probe's errno if io_uring is
 * unavailable. Caller owns *out; free with tfs_io_destroy. */
int tfs_io_create(enum tfs_io_kind kind, struct tfs_io **out);
void tfs_io_destroy(struct tfs_io *io);
enum tfs_io_kind tfs_io_kind_of(const struct tfs_io *io);
const char *tfs_io_kind_name(enum tfs_io_kind kind);
/* "auto", "uring", "sync" -> kind; -EINVAL otherwise. */
int tfs_io_kind_parse(const char *s, enum tfs_io_kind *out);
/* The kind named by the environment variable TFS_IO, or AUTO (tests and tools). */
enum tfs_io_kind tfs_io_kind_from_env(void);

/* Fault injection. spec: "OPS:N:ACTION" where OPS is a '+'-joined list of
 * write,fsync,rename,unlink,truncate,create or "all"; N counts matching operations
 * from 1; ACTION is "crash" (the N-th op is not done; _exit(TFS_IO_CRASH_STATUS)),
 * "torn" (a write does its first half, then _exit) or an errno name such as
 * "ENOSPC"/"EIO" (the N-th op and every later matching one fail with it).
 * NULL or "" clears it. -EINVAL for a malformed spec. */
int tfs_io_set_fault(struct tfs_io *io, const char *spec);
/* Number of mutating operations done so far (all kinds), for crash-point sweeps. */
uint64_t tfs_io_op_count(const struct tfs_io *io);
/* Of those, the fsyncs and fdatasyncs (of files and directories): what a test of
 * durability counts. */
uint64_t tfs_io_fsync_count(const struct tfs_io *io);

/* Reads up to len bytes at off; returns the bytes read (fewer only at end of file)
 * or -errno. */
ssize_t tfs_io_read(struct tfs_io *io, int fd, void *buf, size_t len, uint64_t off);
/* Writes all of iov at off (retrying short writes); if sync, the data is durable
 * when it returns (fdatasync). 0 or -errno (-ENOSPC...). */
int tfs_io_writev(struct tfs_io *io, int fd, const struct iovec *iov, int iovcnt,
                  uint64_t off, bool sync);
int tfs_io_write(struct tfs_io *io, int fd, const void *buf, size_t len, uint64_t off);
/* fdatasync (datasync) or fsync. */
int tfs_io_fsync(struct tfs_io *io, int fd, bool datasync);
/* An fsync in two halves, for one issued on a thread of its own (a background
 * flush): tfs_io_fsync_admit passes the fault gate (0, a fault's errno, or the
 * crash) in the caller, so that a fault spec's n-th operation does not depend
 * on when the thread runs; tfs_io_fsync_admitted then makes the plain system
 * call on that thread (a ring of its own would cost more than the call). */
int tfs_io_fsync_admit(struct tfs_io *io);
int tfs_io_fsync_admitted(int fd, bool datasync);

/* One file of tfs_io_fsync_all. */
struct tfs_io_fsync_req {
	int fd;
	bool datasync;   /* fdatasync, else fsync */
	int result;      /* set by the call: 0 or -errno */
};
/* The n fsyncs of reqs, independent of each other, waited for together: the
 * io_uring backend submits them at once (the disk then works on all of them, so
 * a roll's fsyncs cost about one fsync's wait instead of n); the sync backend does
 * them in turn. Each passes the fault gate as one operation, in array order,
 * before any is issued: a crash spec ends the process at its step, an errno spec
 * fails its request and those after it. Returns 0 or the first request's error in
 * array order; every result is set. */
int tfs_io_fsync_all(struct tfs_io *io, struct tfs_io_fsync_req *reqs, int n);

/* Namespace operations relative to a directory fd (AT_FDCWD allowed). */
int tfs_io_openat(struct tfs_io *io, int dirfd, const char *name, int flags, mode_t mode);
int tfs_io_renameat(struct tfs_io *io, int olddir, const char *oldname, int newdir,
                    const char *newname);
int tfs_io_unlinkat(struct tfs_io *io, int dirfd, const char *name, int flags);
/* Unlinks path (absolute, or relative to the working directory) soon, on the
 * context's background thread, so that freeing a large file's blocks holds up no
 * caller; a failure other than ENOENT is logged there. Inline instead when a fault
 * spec is set (sweeps need one order of operations), in a process forked from the
 * one that started the thread, or when memory is short. tfs_io_destroy waits for
 * every queued unlink. */
void tfs_io_unlink_later(struct tfs_io *io, const char *path);
/* Returns once every unlink queued by tfs_io_unlink_later before the call is done. */
void tfs_io_unlink_drain(struct tfs_io *io);
int tfs_io_ftruncate(struct tfs_io *io, int fd, uint64_t len);
int tfs_io_mkdirat(struct tfs_io *io, int dirfd, const char *name, mode_t mode);
/* fsync of the directory dirfd (makes renames/creates/unlinks in it durable). */
int tfs_io_fsync_dir(struct tfs_io *io, int dirfd);

#endif
