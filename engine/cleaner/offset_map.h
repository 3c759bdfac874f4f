/* offset_map.h - the cleaner's fixed-memory map from a key's fingerprint to the newest
 * offset seen for that key in the dirty region (Kafka's SkimpyOffsetMap).
 *
 * A cleaning pass first reads the dirty region of a log and puts every keyed record's
 * (key, offset) here; it then recopies the log, keeping a record only if the map holds
 * no larger offset for its key. The map never grows past its arena: when it reaches
 * its load factor the pass ends at the last mapped offset
 * (tfs_offset_map_latest_offset) and the next pass continues from there (KAFKA-3894).
 *
 * Owns: one arena of slots × 24 bytes, reserved once by tfs_offset_map_create and
 * reused by every pass (tfs_offset_map_reset); keys are not copied or kept. The arena
 * is anonymous memory touched only where a pass uses it, so a thread whose passes
 * are small never pays for the whole dedupe buffer.
 *
 * Entry (in memory only, host byte order; never written to disk):
 *
 *   OFFSET  SIZE  DESCRIPTION
 *        0     8  fp_lo   low 64 bits of XXH3_128bits(key bytes)
 *        8     8  fp_hi   high 64 bits of XXH3_128bits(key bytes)
 *       16     8  stored  uint64: the largest offset put for this fingerprint, plus
 *                         one; 0 marks an empty slot
 *
 * A slot is occupied if and only if stored != 0. The fingerprint alone cannot mark
 * emptiness: every 128-bit value, all-zero included, may be some key's hash; storing
 * offset + 1 lets fresh zero pages and a memset(0) mean "empty".
 * Keys are compared by fingerprint only, as in Kafka: two keys with the same 128-bit
 * hash are one key (for n keys the chance is about n^2 / 2^129, i.e. nil).
 *
 * The live table. A pass rarely needs every slot: a dirty region of n offsets holds at
 * most n distinct keys. tfs_offset_map_reset(m, max_keys) confines the pass to the
 * first `live` slots, live = min(slots, max_keys / load_factor rounded up to a power
 * of two), so the probes of a small pass stay in a small, cache-friendly table and
 * the next reset clears only that much. The full rule never looks at `live`: it is
 * always floor(slots × load_factor) of the whole arena, so a pass stops at exactly
 * the same offset whatever the live size. Should more keys arrive than the caller
 * promised, the live table grows to the whole arena first (a rehash; never needed
 * when max_keys is a true bound).
 *
 * Probing: open addressing with linear probing over the live table. A fingerprint's
 * home slot is fp_hi scaled onto [0, live) (multiply-shift, no modulo); a lookup walks
 * forward, wrapping, until it finds the fingerprint or an empty slot, and never more
 * than `live` steps, so it ends even on a table filled to load factor 1.0. There are
 * no deletions, so no tombstones. A caller that holds many keys at once hashes them
 * first (tfs_offset_map_fingerprint), prefetches their home slots
 * (tfs_offset_map_prefetch) and probes afterwards (the _fp calls), so that the cache
 * misses of a batch overlap instead of queueing one behind the other.
 *
 * Invariants (tfs_offset_map_check verifies all of them):
 *   (1) a slot is empty iff stored == 0; slots at or past `live` are empty.
 *   (2) size == number of occupied slots <= max_entries <= slots, where
 *       max_entries = floor(slots × load_factor) >= 1; live <= slots.
 *   (3) no two occupied slots hold the same fingerprint.
 *   (4) every slot from an entry's home slot up to the entry itself (cyclically,
 *       within the live table) is occupied, so a lookup may stop at the first empty
 *       slot.
 *   (5) latest_offset is the largest offset given to put or update_latest_offset
 *       since the last reset (TFS_OFFSET_NONE if none), hence >= every stored offset.
 *
 * Full rule (Kafka's buildOffsetMap): the map is full once size >= max_entries. A full
 * map refuses every put with -ENOSPC, even for a fingerprint it already holds, so the
 * caller ends the pass exactly at the first keyed record that did not fit and
 * checkpoints latest_offset + 1. A refused put changes nothing.
 *
 * Life of a map (one round per cleaning pass):
 *
 *   create --> EMPTY --put--> FILLING --size reaches max_entries--> FULL (put: -ENOSPC)
 *                 ^              |                                    |
 *                 +-clear/reset--+--------------clear/reset-----------+
 *
 * Threads: a map belongs to one cleaner thread (the dedupe buffer is split among
 * threads). No locking inside: put, clear, reset and update_latest_offset need
 * exclusive access; get, prefetch and the accessors may run concurrently with each
 * other only.
 *
 * Errors: 0 or a negative errno (-EINVAL, -ENOMEM, -ENOSPC), as listed per function.
 */
#ifndef TFS_OFFSET_MAP_H
#define TFS_OFFSET_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

struct tfs_offset_map;

/* A key's fingerprint: XXH3-128 of its bytes. */
struct tfs_offset_map_fp {
	uint64_t lo, hi;
};

/* Creates a map using at most buffer_bytes of memory for its arena: slots =
 * buffer_bytes / 24, holding at most floor(slots × load_factor) keys. The map starts
 * empty with the whole arena live (as after tfs_offset_map_clear). Caller owns *out;
 * free with tfs_offset_map_destroy.
 * Errors: -EINVAL if load_factor is not in (0, 1] or the map could not hold a single
 * key (floor(slots × load_factor) < 1); -ENOMEM. *out is untouched on error. */
int tfs_offset_map_create(size_t buffer_bytes, double load_factor, struct tfs_offset_map **out);
/* Frees the map and its arena. Takes NULL. */
void tfs_offset_map_destroy(struct tfs_offset_map *m);

/* Empties the map for the next pass: size 0, latest_offset TFS_OFFSET_NONE, the whole
 * arena live. Costs one pass over the slots the last round used (as Kafka's clear),
 * and nothing if the map is already empty. */
void tfs_offset_map_clear(struct tfs_offset_map *m);
/* tfs_offset_map_clear, then confines the next round to a live table sized for
 * max_keys distinct keys (see "The live table"; SIZE_MAX: the whole arena). Changes
 * neither max_entries nor the full rule. */
void tfs_offset_map_reset(struct tfs_offset_map *m, size_t max_keys);

/* The fingerprint of key (borrowed for the call; len 0 is the empty key, a legal
 * key; key.p may be NULL only when len is 0). */
struct tfs_offset_map_fp tfs_offset_map_fingerprint(struct tfs_slice key);
/* Hints the CPU to fetch fp's home slot: a later put or get of fp then finds it in
 * the cache. No effect on the map's content. */
void tfs_offset_map_prefetch(const struct tfs_offset_map *m, struct tfs_offset_map_fp fp);

/* Records that key (borrowed for the call only; len 0 is the empty key, a legal key)
 * has a record at offset. If the fingerprint is present its offset becomes the larger
 * of the two. latest_offset becomes max(latest_offset, offset).
 * Errors: -EINVAL if offset < 0 or key.p is NULL with key.len > 0; -ENOSPC if the map
 * is full (see "Full rule"); -ENOMEM if the live table had to grow and could not.
 * The map is unchanged on error. */
int tfs_offset_map_put(struct tfs_offset_map *m, struct tfs_slice key, tfs_offset_t offset);
/* tfs_offset_map_put by fingerprint. *superseded (may be NULL) gets the offset this
 * put proves is no longer its key's newest: the offset that was stored if the new
 * one is larger, offset itself if a larger one was stored, else TFS_OFFSET_NONE (a
 * new key, or the same offset again). Errors as tfs_offset_map_put (-EINVAL only for
 * offset < 0). */
int tfs_offset_map_put_fp(struct tfs_offset_map *m, struct tfs_offset_map_fp fp,
                          tfs_offset_t offset, tfs_offset_t *superseded);

/* The offset stored for key's fingerprint, or TFS_OFFSET_NONE if absent. */
tfs_offset_t tfs_offset_map_get(const struct tfs_offset_map *m, struct tfs_slice key);
tfs_offset_t tfs_offset_map_get_fp(const struct tfs_offset_map *m, struct tfs_offset_map_fp fp);

/* Raises latest_offset to offset if it is larger (Kafka's updateLatestOffset, used
 * after each batch and to jump over the offset gap at a segment's end). Stores no key. */
void tfs_offset_map_update_latest_offset(struct tfs_offset_map *m, tfs_offset_t offset);

/* Number of distinct fingerprints stored. */
size_t tfs_offset_map_size(const struct tfs_offset_map *m);
/* Number of slots (buffer_bytes / 24). */
size_t tfs_offset_map_slots(const struct tfs_offset_map *m);
/* Slots of the live table this round (<= slots). */
size_t tfs_offset_map_live_slots(const struct tfs_offset_map *m);
/* The most keys the map takes before it is full: floor(slots × load_factor). */
size_t tfs_offset_map_max_entries(const struct tfs_offset_map *m);
/* size / slots, in [0, 1] (Kafka's utilization; the max-buffer-utilization metric). */
double tfs_offset_map_utilization(const struct tfs_offset_map *m);
/* Largest offset put or given to update_latest_offset since the last clear, or
 * TFS_OFFSET_NONE. */
tfs_offset_t tfs_offset_map_latest_offset(const struct tfs_offset_map *m);
/* True once size >= max_entries: every further put fails with -ENOSPC. */
bool tfs_offset_map_full(const struct tfs_offset_map *m);
/* Bytes per entry: 24 (16-byte fingerprint + 8-byte offset). */
size_t tfs_offset_map_entry_bytes(void);

/* Debug check of invariants (1)-(5); O(slots). Returns 0, or the number of the first
 * invariant found broken. */
int tfs_offset_map_check(const struct tfs_offset_map *m);

#endif
