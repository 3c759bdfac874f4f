/* file_util.h - whole-file helpers built on io.h, and the bounded fd cache.
 *
 * Owns: the fd cache owns every fd it opened; nothing else owns anything.
 *
 * tfs_dir_remove_tree removes a directory tree one io operation at a time.
 *
 * tfs_file_replace is the one crash-safe way to replace a small file: write
 * "<name>.tmp", fsync it, rename over <name>, fsync the directory. A crash at any
 * step leaves either the old or the new file whole (plus maybe a stale .tmp, which
 * readers ignore and the next replace overwrites).
 *
 * The fd cache bounds open segment files: machines here allow 20,000 descriptors
 * and a partition may have thousands of segments. A slot (embedded in its owner,
 * e.g. a segment) names a file by path; tfs_fdcache_get opens it if needed and pins
 * the fd; tfs_fdcache_put unpins. Unpinned fds are closed least-recently-used first
 * when the cache is over its limit. Renaming an owner's file must go through
 * tfs_fdcache_slot_set_path so a later reopen finds it.
 *
 * The bound holds whatever the number of partitions: an active segment is cached
 * like a sealed one (the partition's writer pins it around each write or fsync;
 * the busy partitions stay open because they are the most recently used), and
 * nothing else of a partition holds a descriptor between operations. Only pins
 * can take the count past max_open (each pin is one operation in flight, or a
 * deleted segment still read through its old list). When the process or system
 * limit is reached first, the cache closes its own idle fds before it gives up;
 * a limit it cannot make room under is reported as -EMFILE / -ENFILE.
 *
 * Threads: all functions are thread-safe.
 * Errors: 0 or a negative errno.
 */
#ifndef TFS_FILE_UTIL_H
#define TFS_FILE_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/io.h"

/* Atomically replaces dirfd/name with data (see above). */
int tfs_file_replace(struct tfs_io *io, int dirfd, const char *name, const void *data, size_t len);
/* tfs_file_replace in steps, for a caller that fsyncs several files at once
 * (tfs_io_fsync_all) and the directory once for all of them. tfs_file_stage
 * writes data whole to "<name>.tmp" and returns its fd, not yet fsynced (caller
 * closes it), or -errno with nothing left behind. Once that fd is fsynced,
 * tfs_file_commit renames the file over name (the directory fsync is the
 * caller's); tfs_file_unstage removes it instead. A crash in between leaves a
 * stale .tmp, as tfs_file_replace may. */
int tfs_file_stage(struct tfs_io *io, int dirfd, const char *name, const void *data, size_t len);
int tfs_file_commit(struct tfs_io *io, int dirfd, const char *name);
void tfs_file_unstage(int dirfd, const char *name);
/* Reads a whole small file (at most max bytes) into a malloc'd, NUL-terminated
 * buffer. Caller owns *out (free()). -ENOENT, -EFBIG past max. */
int tfs_file_read_all(struct tfs_io *io, int dirfd, const char *name, size_t max,
                      char **out, size_t *len);

/* A directory stream of its own over dirfd (a dup, rewound to the start): the
 * caller owns it, closedir(). NULL with errno set, the dup's EMFILE included (a
 * bare fdopendir(dup(fd)) would turn it into EBADF). */
DIR *tfs_dir_stream(int dirfd);

/* Removes dirfd/name (AT_FDCWD and an absolute name allowed) and everything in
 * it, every unlink and rmdir through io (so fault specs and crash sweeps see each
 * one). Symbolic links are removed, never followed. Goes on past a failure and
 * returns the first (a name already gone is no failure): what stays is left for
 * the caller to try again. -ENOTDIR if name is not a directory, -ELOOP for a tree
 * deeper than partition directories ever are. */
int tfs_dir_remove_tree(struct tfs_io *io, int dirfd, const char *name);

struct tfs_fdcache;

/* One cached file. Embedded in its owner; initialise with tfs_fdcache_slot_init. */
struct tfs_fdslot {
	char *path;                  /* absolute, owned */
	int flags;                   /* open(2) flags used on (re)open */
	int fd;                      /* -1 when closed */
	unsigned pins;
	struct tfs_fdslot *lru_prev, *lru_next;
	bool in_lru;
};

/* Caller owns the result; free with tfs_fdcache_destroy (all slots must be released
 * first). max_open >= 1. */
struct tfs_fdcache *tfs_fdcache_create(struct tfs_io *io, unsigned max_open);
void tfs_fdcache_destroy(struct tfs_fdcache *c);
unsigned tfs_fdcache_open_count(const struct tfs_fdcache *c);
/* From now on every file is opened O_RDONLY whatever its slot's flags say (a
 * read-only mount: the files may be on a read-only filesystem). */
void tfs_fdcache_set_read_only(struct tfs_fdcache *c);

/* path is copied. flags are those of open(2) (no O_CREAT: the file must exist). */
int tfs_fdcache_slot_init(struct tfs_fdslot *s, const char *path, int flags);
/* Closes the fd if open and frees the path. The slot must not be pinned. */
void tfs_fdcache_slot_release(struct tfs_fdcache *c, struct tfs_fdslot *s);
/* Records that the slot's file was renamed to path (the open fd stays valid). */
int tfs_fdcache_slot_set_path(struct tfs_fdcache *c, struct tfs_fdslot *s, const char *path);
/* Returns a pinned fd (>= 0), opening the file if needed, or -errno. */
int tfs_fdcache_get(struct tfs_fdcache *c, struct tfs_fdslot *s);
void tfs_fdcache_put(struct tfs_fdcache *c, struct tfs_fdslot *s);

#endif
