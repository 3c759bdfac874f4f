/* lag.h - what a consumer has left: the records still on disk from an offset on,
 * and the timestamp of the first of them.
 *
 * On a compacted topic the difference log_end_offset - position is only an upper
 * bound on what a consumer at position will still be given: the cleaner has made
 * holes in the offsets, control batches (transaction markers) are never handed to
 * an application, and records of aborted transactions are skipped by Kafka's
 * read_committed consumers. This module counts exactly the records such a consumer
 * would be delivered from position on, as the log stands now:
 *
 *   counted    every record of a non-control batch that is not transactional, and
 *              every record of a transactional batch whose transaction has its
 *              COMMIT marker on disk;
 *   not        control records; records of a transaction that was aborted; records
 *              of a transaction still open (past the last stable offset, a
 *              read_committed consumer does not see them yet); records the cleaner
 *              removed (they are not on disk).
 *
 * Cost: each segment keeps a tally of what its batches hold (counted records, and
 * per producer id the transaction records still waiting for a marker), built on the
 * first question by one sequential read and extended from where it stopped as the
 * active segment grows, so a question reads at most the part of the active
 * segment written since the last one, plus, in the segment that holds position,
 * the batches from the tally's nearest checkpoint (one every 64 KiB) to position
 * (from its index entry to its end when it holds transactions). bench/bench_lag.c
 * measures it on a million records. A segment is never rewritten (the cleaner replaces it by a new
 * segment, which gets its own tally), so a tally never goes stale.
 *
 * Invariants: (1) a segment's tally covers exactly its whole batches in
 *   [0, tally->pos) and never shrinks; (2) lag_records <= lag_offsets.
 * Threads: any thread; a segment's tally is under its tally_lock (a leaf lock,
 *   taken with no partition lock held).
 * Errors: 0 or a negative errno / TFS_E* code: TFS_ECORRUPT (logged) when a batch
 *   on the way cannot be read, TFS_EDAMAGED when an unreadable region found at open
 *   lies at or after position (the count is unknown), -ENOMEM.
 */
#ifndef TFS_LAG_H
#define TFS_LAG_H

#include <stdint.h>

#include "engine/types.h"

struct tfs_plog;
struct tfs__tally;

struct tfs_lag {
	tfs_offset_t log_end_offset;    /* read after counting */
	int64_t lag_offsets;            /* log_end_offset - position, 0 when past it */
	int64_t lag_records;            /* records a consumer at position is still given */
	tfs_offset_t first_offset;      /* the first of them, TFS_OFFSET_NONE when none */
	int64_t first_timestamp;        /* its timestamp (ms), -1 when none */
};

/* Counts what a consumer whose next offset is position (Kafka's committed offset)
 * has left in pl. position below the log start counts from the log start. */
int tfs_plog_lag(struct tfs_plog *pl, tfs_offset_t position, struct tfs_lag *out);

/* Kafka's lag in time: now_ms minus the first remaining record's timestamp, 0 when
 * nothing is left (or the timestamp is in the future). */
int64_t tfs_lag_ms(const struct tfs_lag *lag, int64_t now_ms);

/* What the whole log holds now, from the same tallies. */
struct tfs_log_tally {
	int64_t delivered;              /* records a consumer from 0 is given */
	int64_t keyless;                /* data records without a key (the cleaner never
	                                 * drops them: on a compact-only topic, every
	                                 * keyless record produced since the log start) */
	int64_t control;                /* control records (transaction markers) */
};
int tfs_plog_tally(struct tfs_plog *pl, struct tfs_log_tally *out);

/* For segment.c: frees a segment's tally (NULL ok). */
void tfs__tally_free(struct tfs__tally *t);

#endif
