/* scratch.h - scratch files: the dot names of partition directories that are not
 * control entries, kept in memory only (README "rsync, editors and temporary files").
 *
 * A name with a leading '.' can never be a key (a key with a leading dot is spelled
 * %2E...), so these names are free for the temporaries that tools make beside the
 * files they write: rsync's ".name.XXXXXX", vim's ".name.swp", emacs's ".#name",
 * mkstemp(".XXXXXX"). Nothing here is ever logged; everything is lost at unmount.
 *
 * Owns: every scratch file (bytes and attributes) and the namespace that names
 * them, (directory, name) -> file, a directory being a (topic, partition) pair.
 * Knows nothing of FUSE or of nodes (node_scratch.c is the node kind).
 *
 * Invariants:
 *   (1) bytes_used is the sum of the sizes of every file alive, named or only
 *       open; it never passes max_bytes: a write or truncate that would is
 *       -ENOSPC and changes nothing.
 *   (2) files_used counts the files alive; it never passes max_files: a create
 *       that would is -ENOSPC.
 *   (3) a (directory, name) names at most one file, and a file is named by at
 *       most one; "named" (linked) iff the map holds it, and the map's reference
 *       is the one that unlink and rename-over drop.
 *   (4) a file holds a reference on its topic (taken through the topic ops at
 *       create, dropped when the file is freed), so its directory cannot be
 *       reused by another topic while the file lives.
 *
 * Lock order: file lock -> store lock. The store lock guards the map only and is
 * never held across an allocation of file data or an engine call; counts are
 * atomics.
 * Threads: every function may be called from any thread.
 * Errors: 0 or a negative errno.
 */
#ifndef TFS_FS_SCRATCH_H
#define TFS_FS_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "fs/inode.h"

struct tfs_scratch;
struct tfs_scratch_file;

#define TFS_SCRATCH_DEFAULT_MAX_BYTES (64ull << 20)   /* a few editors' swap files
                                                     * and rsync temporaries of
                                                     * values up to Kafka's 1 MiB */
#define TFS_SCRATCH_DEFAULT_MAX_FILES 1024u
#define TFS_SCRATCH_NAME_MAX 255                     /* NAME_MAX */

/* Caller owns *out; tfs_scratch_destroy. tops is copied. */
int tfs_scratch_create(const struct tfs_inode_topic_ops *tops, uint64_t max_bytes,
                       uint32_t max_files, struct tfs_scratch **out);
/* Drops every name and frees every file. Every other reference (nodes, handles)
 * must be gone. NULL ok. */
void tfs_scratch_destroy(struct tfs_scratch *s);

/* The file named name in (topic, partition), with a reference for the caller
 * (tfs_scratch_put). -ENOENT. */
int tfs_scratch_lookup(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                       const char *name, struct tfs_scratch_file **out);
/* Creates the file (size 0, mode & 07777, owner uid:gid) or, unless excl, returns
 * the one already named so (*created false). Caller owns a reference to *out.
 * -EEXIST (excl), -ENOSPC (max_files), -ENAMETOOLONG, -ENOENT (topic deleted),
 * -ENOMEM. */
int tfs_scratch_make(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                     const char *name, mode_t mode, uid_t uid, gid_t gid, bool excl,
                     struct tfs_scratch_file **out, bool *created);
/* Removes the name; the file lives on while referenced. -ENOENT. */
int tfs_scratch_unlink(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                       const char *name);
/* Renames from -> to in one directory; a file named to before loses its name.
 * -ENOENT (no from), -EEXIST (noreplace and to exists), -ENAMETOOLONG. Renaming a
 * name onto itself is 0. */
int tfs_scratch_rename(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                       const char *from, const char *to, bool noreplace);
/* Calls fn(arg, bytes, len) with f's content under f's lock (no write can come
 * between); if fn returns 0, f loses its name (if it still has one) before the
 * lock is released. Returns fn's result. The bytes are borrowed for the call. */
int tfs_scratch_consume(struct tfs_scratch_file *f,
                        int (*fn)(void *arg, const uint8_t *p, size_t len), void *arg);
/* Removes the names of every file of topic (the topic is being deleted). */
void tfs_scratch_forget_topic(struct tfs_scratch *s, struct tfs_topic *topic);

void tfs_scratch_ref(struct tfs_scratch_file *f);
/* Drops a reference; the last frees the file and its bytes. NULL ok. */
void tfs_scratch_put(struct tfs_scratch_file *f);
/* Whether f still has a name. */
bool tfs_scratch_named(struct tfs_scratch_file *f);

/* Copies up to size bytes at off into buf; returns the count (0 past the end). */
ssize_t tfs_scratch_read(struct tfs_scratch_file *f, void *buf, size_t size, off_t off);
/* Writes size bytes at off (at the end with append), zero-filling a gap.
 * Returns size, or -ENOSPC (max_bytes), -EINVAL (off < 0), -ENOMEM; nothing
 * changes on error. */
ssize_t tfs_scratch_write(struct tfs_scratch_file *f, const void *buf, size_t size, off_t off,
                          bool append);
/* Cuts or zero-extends to size. -ENOSPC, -EINVAL, -ENOMEM. */
int tfs_scratch_truncate(struct tfs_scratch_file *f, off_t size);

/* Clears *st and fills type, mode, nlink (1 if named, else 0), owner, size,
 * blocks and times; st_ino is left to the caller. */
void tfs_scratch_stat(struct tfs_scratch_file *f, struct stat *st);
void tfs_scratch_set_mode(struct tfs_scratch_file *f, mode_t mode);
/* (uid_t)-1 / (gid_t)-1 leave that one unchanged. */
void tfs_scratch_set_owner(struct tfs_scratch_file *f, uid_t uid, gid_t gid);
/* NULL leaves that time unchanged; tv_nsec UTIME_NOW means now. */
void tfs_scratch_set_times(struct tfs_scratch_file *f, const struct timespec *atime,
                           const struct timespec *mtime);

/* Bytes and files in use now, and the bounds. */
void tfs_scratch_usage(struct tfs_scratch *s, uint64_t *bytes, uint32_t *files,
                       uint64_t *max_bytes, uint32_t *max_files);

#endif
