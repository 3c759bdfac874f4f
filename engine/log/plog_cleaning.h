/* plog_cleaning.h - what the partition log offers the cleaner and retention
 * (engine/cleaner/): a pinned snapshot of the segment list to read, exclusive
 * sections in which that list may be replaced, and the few facts of a partition
 * a pass needs. The cleaner reaches a struct tfs_plog through this header only;
 * the log's own state (plog_internal.h) is private to engine/log/, which
 * tests/check_includes.sh checks in CI (docs/engine.md §10).
 *
 * Owns: nothing beyond the references it hands out. A snapshot is a reference to
 * the log's immutable list; the segments in it are the log's (segment.h), kept
 * open by the list.
 *
 * Invariants (docs/engine.md §10, C1-C5; P1-P6 are partition_log.h's):
 *   (C1) a snapshot never changes: count and seg[] stay as they were while a
 *        reference is held, whatever rolls, swaps or retention publish meanwhile
 *        (P6); its segments stay readable even once their files are .deleted.
 *   (C2) the segment list changes only inside an exclusive section
 *        (tfs__plog_run_exclusive): a roll, a cleaner's swap, retention. No append
 *        is in flight and none starts until the section ends, so the list
 *        tfs__plog_exclusive_segments returns there is the current one until the
 *        section publishes another.
 *   (C3) a published list keeps P1: base offsets strictly increase, the active
 *        segment is the last and is the same segment as before (only a roll,
 *        tfs__plog_roll_locked, changes it). Debug builds assert both when a list
 *        is made (tfs__seglist_splice) and when it is published.
 *   (C4) keys leave the key directory in the same write-locked step that
 *        publishes the list no longer holding their newest record
 *        (tfs__plog_publish_drop_keys): a reader never finds a key whose newest
 *        record has gone (P4).
 *   (C5) the log end offset a snapshot comes with is read with it, under the same
 *        lock: every offset the list holds is below it.
 *
 * Threads: tfs__plog_snapshot, tfs__plog_with_segments, tfs__plog_config,
 * tfs__plog_env, tfs__plog_uncleanable_reason and the tfs__seglist_* functions from
 * any thread;
 * tfs__plog_exclusive_segments, tfs__plog_publish_*, tfs__plog_roll_locked and
 * tfs__pstate_prune only from fn of tfs__plog_run_exclusive (or a group-commit
 * leader inside engine/log/). Lock order: partition_log.h.
 * Errors: 0 or a negative errno, logged where it happens.
 */
#ifndef TFS_PLOG_CLEANING_H
#define TFS_PLOG_CLEANING_H

#include <stdatomic.h>
#include <stddef.h>

#include "engine/log/partition_log.h"
#include "engine/log/segment.h"
#include "engine/topic_config.h"
#include "engine/types.h"

/* An immutable, reference-counted list of segments (C1): seg[0..count), bases
 * ascending, the active segment last. A new list is published for every roll,
 * swap or retention; readers keep the one they took. Read count and seg[] only;
 * refs belongs to the log. */
struct tfs_seglist {
	atomic_int refs;
	int count;
	struct tfs_segment *seg[];
};

/* ---- snapshots: any thread ---- */

/* A new reference to the current list (release it with tfs__seglist_put); with
 * *end_offset (may be NULL) the log end offset, read under the same lock (C5). */
struct tfs_seglist *tfs__plog_snapshot(struct tfs_plog *pl, tfs_offset_t *end_offset);
/* Runs fn(l, arg) on the current list under the partition's read lock, where the
 * active segment's size, timestamps and indexes stand still (appends change them
 * under the write lock): for a look at the active segment that a snapshot, read
 * without the lock, cannot give. fn must not call into pl. Returns fn's result. */
int tfs__plog_with_segments(struct tfs_plog *pl, int (*fn)(const struct tfs_seglist *l, void *arg),
                            void *arg);
/* The log start offset (at least the first segment's base; DeleteRecords moves it
 * inside a segment) and the log end offset, read together under the partition's
 * read lock. Not from fn of tfs__plog_with_segments. */
void tfs__plog_bounds(struct tfs_plog *pl, tfs_offset_t *start, tfs_offset_t *end);
/* Whether the log start is past the first segment's base (DeleteRecords moved
 * it): retention then has segments to look at whatever the policy. */
bool tfs__plog_start_moved(struct tfs_plog *pl);
/* Releases a reference; the last one drops the list's references to its segments.
 * Takes NULL. */
void tfs__seglist_put(struct tfs_seglist *l);
/* Index of the last segment of l with base <= offset, or -1. */
int tfs__seglist_find(const struct tfs_seglist *l, tfs_offset_t offset);

/* A copy of the topic config the partition works with (it changes under the
 * partition's lock, which this takes). */
void tfs__plog_config(struct tfs_plog *pl, struct tfs_topic_config *out);
/* The partition's surroundings: io context, fd cache, read-only flag. Borrowed,
 * valid for the life of the partition. */
const struct tfs_plog_env *tfs__plog_env(const struct tfs_plog *pl);
/* Why recovery found the sealed segments unfit to clean (a corrupt batch past
 * the torn-tail rule), or NULL. Set at open, then constant: borrowed, valid for
 * the life of the partition. */
const char *tfs__plog_uncleanable_reason(const struct tfs_plog *pl);
/* Opens the partition directory (O_DIRECTORY) for a section's renames and fsyncs:
 * a partition holds no descriptor between operations. The fd (the caller closes
 * it) or -errno (logged). */
int tfs__plog_dir_open(struct tfs_plog *pl);

/* ---- exclusive sections ---- */

/* Runs fn(pl, arg) as the group-commit leader: in queue order, with no append in
 * flight and none starting until it returns (C2). Returns fn's result. */
int tfs__plog_run_exclusive(struct tfs_plog *pl, int (*fn)(struct tfs_plog *, void *), void *arg);

/* In fn only: the current list. Borrowed: valid until fn publishes a list or
 * rolls, or returns. */
const struct tfs_seglist *tfs__plog_exclusive_segments(const struct tfs_plog *pl);

/* A new list: l with seg[at, at + n) replaced by fresh, or removed when fresh is
 * NULL. Every segment in it gets a new reference; l is unchanged. NULL when out
 * of memory. The result must keep C3 (asserted in debug builds). */
struct tfs_seglist *tfs__seglist_splice(const struct tfs_seglist *l, int at, int n,
                                        struct tfs_segment *fresh);

/* In fn only: publishes nl (takes ownership) as the partition's list and returns
 * the list it replaced (caller owns that reference: tfs__seglist_put once done
 * with its segments). Cannot fail. */
struct tfs_seglist *tfs__plog_publish_segments(struct tfs_plog *pl, struct tfs_seglist *nl);
/* In fn only, for a list that starts at below: as tfs__plog_publish_segments,
 * and every key whose newest record is below offset below leaves the key
 * directory in the same step (C4); *keys_removed gets their number. -ENOMEM
 * while collecting those keys: nothing published, nl released. */
int tfs__plog_publish_drop_keys(struct tfs_plog *pl, struct tfs_seglist *nl, tfs_offset_t below,
                                size_t *keys_removed, struct tfs_seglist **prev);

/* In fn only: seals the active segment (indexes written, everything fsynced) and
 * publishes a list with a fresh, empty active segment at the log end offset;
 * takes a producer snapshot there. 0 or a negative errno (logged); on failure the
 * old segment stays active. */
int tfs__plog_roll_locked(struct tfs_plog *pl);

/* In fn only, after segments left the list and the directory was fsynced: removes
 * the producer snapshots no segment base names any more (the newest past the last
 * base stays). dirfd: the partition directory (borrowed). */
void tfs__pstate_prune(struct tfs_plog *pl, int dirfd);

#endif
