/* keydir.h - a partition's key directory: key -> newest record (offset, timestamp,
 * value size).
 *
 * Owns: a copy of every live key's bytes and one fixed-size entry per live key.
 * It stores offsets, never file positions, so a cleaner swap never invalidates it.
 *
 * Iteration order and cursors: every key has a 64-bit hash h = XXH3-64(key). The
 * table's buckets are chosen by the HIGH bits of h and each bucket's chain is kept
 * sorted by h, so walking buckets in index order visits keys in ascending h,
 * whatever the table's size. A cursor is therefore just "the last h returned"
 * (tfs_keydir_cookie): resuming finds the first key with a larger h. Growing or
 * shrinking the table between two calls neither repeats nor skips a key that was
 * live throughout (the property Redis's SCAN gets from its reverse-binary cursor;
 * here it falls out of the order). Two distinct keys with the same 64-bit hash are
 * returned together by one tfs_keydir_scan call (see there).
 *
 * Invariants: (1) each chain is sorted by h, ties by key bytes; (2) count equals the
 * number of entries reachable from the buckets; (3) a key is present iff its newest
 * record is not a tombstone.
 *
 * Shards: the directory is TFS_KEYDIR_SHARDS tables, the keys with hash h in
 * table tfs_keydir_shard(h) (its top bits), so that shards hold consecutive hash
 * ranges and walking them in index order still visits ascending h.
 *
 * Threads: not internally locked. Changes to different shards may run at the
 * same time (tfs_keydir_apply_shard, put/remove/get of keys in other shards);
 * anything else needs the whole directory alone, or read-only. The partition log
 * keeps a lock per shard (docs/engine.md §4).
 * Errors: 0 or -ENOMEM.
 *
 * Memory: at most ~48 bytes per live key beyond the key's own bytes (bench/keydir).
 */
#ifndef TFS_KEYDIR_H
#define TFS_KEYDIR_H

#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

struct tfs_keydir;

#define TFS_KEYDIR_SHARDS 2

/* The shard of a key with hash h: its top bit. */
static inline unsigned tfs_keydir_shard(uint64_t hash)
{
	return (unsigned)(hash >> 63);
}

/* What the directory remembers of a key's newest record. */
struct tfs_keyinfo {
	tfs_offset_t offset;
	int64_t timestamp;
	uint32_t value_bytes;
};

/* Caller owns the result; free with tfs_keydir_destroy. NULL on ENOMEM. */
struct tfs_keydir *tfs_keydir_create(void);
void tfs_keydir_destroy(struct tfs_keydir *kd);

/* The key's hash, as used for ordering and cookies. */
uint64_t tfs_keydir_hash(struct tfs_slice key);

/* Inserts or replaces. A record at an offset lower than the stored one is ignored
 * (returns 0). The directory forgets removed keys, so callers feed each key's
 * records in offset order (appends and the open-time scan both do).
 * -ENOMEM leaves the table unchanged. */
int tfs_keydir_put(struct tfs_keydir *kd, struct tfs_slice key, const struct tfs_keyinfo *info);
/* Removes the key if its stored offset is < offset (a tombstone at offset). */
void tfs_keydir_remove(struct tfs_keydir *kd, struct tfs_slice key, tfs_offset_t offset);
/* 1 and *info filled if present, 0 if not. */
int tfs_keydir_get(const struct tfs_keydir *kd, struct tfs_slice key, struct tfs_keyinfo *info);
/* The same, with hash = tfs_keydir_hash(key) already known (to pick the shard). */
int tfs_keydir_get_hashed(const struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                          struct tfs_keyinfo *info);

/* One change for tfs_keydir_apply: hash = tfs_keydir_hash(key). */
struct tfs_keydir_op {
	struct tfs_slice key;
	uint64_t hash;
	bool remove;                  /* a tombstone at info.offset */
	struct tfs_keyinfo info;
};

/* Applies n changes in order, as n calls of put/remove would, but with the
 * memory of the next changes prefetched while the current one is applied: a
 * table of a million keys costs two or three cache misses a change, and this
 * overlaps them (the open-time scan and group commit use it). -ENOMEM stops
 * the failing change's shard at it: the shard's changes before it stay applied,
 * the other shards take all of theirs. */
int tfs_keydir_apply(struct tfs_keydir *kd, const struct tfs_keydir_op *ops, size_t n);
/* The changes of ops[0, n) in shard `shard`, in order; the others are left for
 * their shards' calls. -ENOMEM stops at the failing change. */
int tfs_keydir_apply_shard(struct tfs_keydir *kd, unsigned shard,
                           const struct tfs_keydir_op *ops, size_t n);

size_t tfs_keydir_count(const struct tfs_keydir *kd);
/* Bytes of memory held (tables, entries, key arena), for metrics and the bench. */
size_t tfs_keydir_memory_bytes(const struct tfs_keydir *kd);
/* Sum of the live keys' lengths. */
size_t tfs_keydir_key_bytes(const struct tfs_keydir *kd);

/* Called for each key in ascending hash order. key borrows the directory's copy:
 * valid only during the call. Return 0 to go on, non-zero to stop (that value is
 * returned by tfs_keydir_scan; the key it was called for counts as NOT consumed,
 * so the next scan resumes at it). The visitor must not change the directory. */
typedef int (*tfs_keydir_visit_fn)(void *arg, struct tfs_slice key,
                                   const struct tfs_keyinfo *info, uint64_t hash);

/* Visits keys whose hash is > after_hash (after_valid = false: from the
 * start). Use the hash of the last key the visitor accepted as the next cursor.
 * Keys with equal hashes are visited back to back; a caller that must stop in the
 * middle of such a run should stop before its first member. Returns 0 when the
 * end was reached, or the visitor's non-zero value. */
int tfs_keydir_scan(const struct tfs_keydir *kd, bool after_valid, uint64_t after_hash,
                    tfs_keydir_visit_fn fn, void *arg);

#endif
