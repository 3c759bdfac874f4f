/* fz.h - what the fuzz harnesses (tests/fuzz/fuzz_*.c) share: a reader of the
 * fuzzer's bytes, scratch directories, a mount object with no kernel behind it,
 * and the replies its handlers send.
 *
 * Each harness defines LLVMFuzzerTestOneInput (and may define
 * LLVMFuzzerInitialize). Built with clang and -fsanitize=fuzzer it is a libFuzzer
 * target; built with fuzz_main.c instead it replays files and directories named
 * on its command line (the committed corpus and regression inputs) under ctest.
 *
 * The mount: fz_mount_open builds a real struct tfs_mount (engine, node table,
 * read cache) on a scratch data directory, without a FUSE session. Handlers of
 * fs/ are called through their kind's ops (fs/node.h) with a request that is
 * only a token: this file defines the fuse_reply_* functions those handlers call
 * (the executable's definitions take precedence over libfuse's), and each stores
 * what was replied in the request's struct fz_reply.
 *
 * A failed property is reported by FZ_CHECK: a message and abort(), which both
 * libFuzzer and the replay driver record as a crash.
 *
 * Threads: one harness thread; the engine's own threads run behind it.
 */
#ifndef TFS_FUZZ_FZ_H
#define TFS_FUZZ_FZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fuse_ll.h"

struct tfs_fh;
struct tfs_mount;
struct tfs_node;
struct tfs_plog;
struct tfs_topic;
enum tfs_node_kind;

/* What libFuzzer calls (each harness defines the first, optionally the second). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FZ_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond))                                                   \
			fz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);       \
	} while (0)

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));

/* ---- reading the fuzzer's bytes --------------------------------------------- */

struct fz_in {
	const uint8_t *p;
	size_t len;
};

/* The next byte (0 once the input is used up). */
uint8_t fz_u8(struct fz_in *in);
/* The next two bytes, little-endian (missing bytes read as 0). */
uint16_t fz_u16(struct fz_in *in);
/* The next n bytes (fewer at the end of the input); *got gets how many. */
const uint8_t *fz_take(struct fz_in *in, size_t n, size_t *got);

/* Rewrites the CRC-32C of every batch that can be framed in p[0, len) (length
 * field at least the header's, batch inside len), walking from the start until
 * one cannot: lets a fuzzer change a batch's records and still reach what is
 * checked after the CRC. */
void fz_fix_crcs(uint8_t *p, size_t len);

/* Makes room for need elements of elem bytes in *p (capacity *cap, doubling;
 * aborts when memory runs out). */
void fz_reserve(void **p, size_t *cap, size_t need, size_t elem);

/* ---- scratch files ------------------------------------------------------------ */

/* A fresh empty directory under $TFS_FUZZ_TMP, else /dev/shm when it exists (a
 * tmpfs: fsync is free), else $TMPDIR or /tmp. malloc'd; aborts on failure. */
char *fz_mkdtemp(const char *tag);
/* Removes dir (rm -rf) when the process exits: for the scratch directory of a
 * mount that lives as long as the fuzzing run. At most a few per process. */
void fz_remove_at_exit(const char *dir);
/* rm -rf path. NULL ok. */
void fz_rmtree(const char *path);
/* Writes a whole file (creating or truncating it); aborts on failure. */
void fz_write_file(const char *path, const void *data, size_t len);
/* Reads a whole file into a malloc'd buffer; returns its length, -1 if absent. */
long fz_read_file(const char *path, uint8_t **out);
/* Sends the log lines to /dev/null (fuzz inputs make many), unless
 * $FUZZ_VERBOSE is set. */
void fz_quiet_logs(void);

/* ---- a mount without a kernel ----------------------------------------------- */

/* What a handler replied. kind is 0 until it replies; replies counts them (a
 * handler must reply exactly once). */
enum fz_reply_kind { FZ_REPLY_NONE = 0, FZ_REPLY_ERR, FZ_REPLY_WRITE, FZ_REPLY_OPEN,
                     FZ_REPLY_BUF, FZ_REPLY_XATTR };
struct fz_reply {
	enum fz_reply_kind kind;
	int replies;
	int err;                 /* FZ_REPLY_ERR: the positive errno (0: success) */
	size_t count;            /* FZ_REPLY_WRITE: bytes; FZ_REPLY_XATTR: size */
	uint8_t *buf;            /* FZ_REPLY_BUF: a malloc'd copy */
	size_t buf_len;
	uint64_t fh;             /* FZ_REPLY_OPEN: fi->fh */
};

/* A request token for a handler; fz_req_reply reads what it replied. */
fuse_req_t fz_req(struct fz_reply *r);
/* Resets r for the next request (frees a stored buffer). */
void fz_reply_reset(struct fz_reply *r);
/* The single reply of a finished request: aborts unless there was exactly one. */
void fz_reply_check_once(const struct fz_reply *r, const char *what);

/* Opens a mount object on a fresh scratch data directory (-o defaults; io=sync
 * unless $TFS_IO names a backend).
 * Caller owns *dir (fz_mount_close removes it). */
struct tfs_mount *fz_mount_open(char **dir);
void fz_mount_close(struct tfs_mount *m, char *dir);

/* A reference to topic name (one partition) for the next input: the same topic
 * while its partition 0 holds less than recreate_bytes (creating a topic costs
 * more than most inputs), else a fresh one. tfs_topic_unref it. */
struct tfs_topic *fz_topic(struct tfs_mount *m, const char *name, int64_t recreate_bytes);

/* The node of (kind, topic, partition) with one lookup and a temporary reference:
 * release it with fz_node_drop. Aborts if it cannot be made. */
struct tfs_node *fz_node(struct tfs_mount *m, enum tfs_node_kind kind, struct tfs_topic *t,
                         int32_t partition);
void fz_node_drop(struct tfs_mount *m, struct tfs_node *n);

/* Opens n write-only through its kind's open (which must succeed); fi gets the
 * handle as the kernel keeps it. */
struct tfs_fh *fz_open_wronly(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi);
/* The kernel's last close of fh: RELEASE, which must reply 0. */
void fz_release(struct tfs_mount *m, struct tfs_fh *fh, struct fuse_file_info *fi);

/* The partition's log end offset. */
int64_t fz_log_end(struct tfs_plog *pl);

#endif
