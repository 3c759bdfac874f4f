/* readcache.h - the windows of partition logs that opening keys read lately.
 *
 * Owns: up to a byte bound of windows (engine/log/partition_log.h: runs of whole,
 * checked batches with an index of their records), each with a reference to its
 * topic, so that the partition log it came from stays open and its pointer cannot
 * name another log while the window is kept.
 *
 * Why: `cp -r` and `cat` of many keys open them one after another; keys of one
 * .put share a batch of ~1,600 records and keys written one by one lie side by
 * side, so one read and one check of a window serve the next keys opened (a hit
 * costs the key directory lookup, a binary search and one record's parse).
 *
 * Why it stays true: a window holds copies of records by offset, and a record of
 * a log is never changed, renumbered or brought back, only dropped (by the
 * cleaner or retention). The key directory says which offset is a key's newest
 * record now; the window only supplies that record's bytes, exactly as they are
 * on disk. A window therefore never needs invalidating while its log is open;
 * windows whose records were dropped since just age out. A deleted topic's
 * windows are dropped (tfs_readcache_forget_topic, and whenever a lookup meets
 * one), so that its files are not held open.
 *
 * Invariants: (1) bytes (the sum of the windows' memory) <= the bound after every
 *   insertion; a window larger than a quarter of the bound is used once and not
 *   kept. (2) a window in the list holds one topic reference, dropped when it
 *   leaves the list and its last user is done. (3) windows of one log may
 *   overlap; a lookup takes the most recently used one that covers the offset.
 *   (4) at most TFS_READCACHE_MAX_WINDOWS windows are kept: a lookup walks the
 *   list, and reads spread over thousands of partitions (a window each, small
 *   enough that the byte bound keeps them all) would make every walk long.
 * Threads: every function may be called from any thread; the lock is a leaf
 *   (never held across an engine call).
 * Errors: 0 or a negative errno / TFS_E* code.
 */
#ifndef TFS_FS_READCACHE_H
#define TFS_FS_READCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/log/partition_log.h"
#include "fs/inode.h"

struct tfs_readcache;

#define TFS_READCACHE_MAX_WINDOWS 256

/* ops (copied) take and drop the topic references windows hold. Caller owns
 * *out; tfs_readcache_destroy. */
int tfs_readcache_create(const struct tfs_inode_topic_ops *ops, size_t max_bytes,
                         struct tfs_readcache **out);
/* Frees every window and drops their topic references: before the engine closes.
 * NULL ok. */
void tfs_readcache_destroy(struct tfs_readcache *c);

/* Reads the newest record of key in pl, partition log of topic t (both borrowed
 * for the call; the caller holds a reference on t), as tfs_plog_read_key does.
 * -ENOENT if the key is not live. */
int tfs_readcache_read_key(struct tfs_readcache *c, struct tfs_topic *t, struct tfs_plog *pl,
                           struct tfs_slice key, struct tfs_record_copy *out);

/* Drops every window of t (after deleting it). */
void tfs_readcache_forget_topic(struct tfs_readcache *c, struct tfs_topic *t);

struct tfs_readcache_stats {
	uint64_t hits, misses;
	size_t windows, bytes;
};
void tfs_readcache_stats(struct tfs_readcache *c, struct tfs_readcache_stats *st);

#endif
