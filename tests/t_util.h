/* t_util.h - helpers shared by the cmocka suites (t_* names).
 * Include after <setjmp.h>, <stdarg.h>, <stddef.h> and <cmocka.h>. */
#ifndef TFS_T_UTIL_H
#define TFS_T_UTIL_H

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

#endif
