/* producer_state.h - one partition's idempotent-producer state, as a Kafka
 * broker keeps it (its ProducerStateManager).
 *
 * Owns: for every producer id that wrote to the partition, its epoch, the last
 * TFS_PSTATE_BATCHES batches it appended (first/last sequence, first/last
 * offset, max timestamp), its newest timestamp, and the first offset of its open
 * transaction; and the offset the state reflects the log up to (end offset).
 * Nothing on disk: the partition log writes and reads snapshots through
 * tfs_pstate_snapshot_encode/decode.
 *
 * What a batch with a producer id meets on append (origin CLIENT, Kafka's
 * ProducerAppendInfo), in this order:
 *   1. the same epoch as the producer's and the same first and last sequence as
 *      one of its last five batches: a duplicate (a retry whose acknowledgement
 *      was lost); nothing is appended, the original offsets are returned;
 *   2. an epoch older than the producer's: TFS_EFENCED;
 *   3. a newer epoch: its first sequence must be 0 (TFS_ESEQUENCE otherwise),
 *      unless the producer's epoch is unknown (-1);
 *   4. the same epoch: its first sequence must follow the last one (INT32_MAX is
 *      followed by 0), else TFS_ESEQUENCE;
 *   an unknown producer (new, expired, or its batches gone) is accepted at any
 *   sequence, as Kafka accepts it since KIP-360.
 * Replaying the log at open (origin REPLICATION) checks nothing.
 *
 * Snapshot file (`<20-digit end offset>.snapshot`, Kafka's ProducerSnapshot
 * version 1), big-endian:
 *   OFFSET     SIZE  DESCRIPTION
 *   0          2     version = 1
 *   2          4     CRC-32C of bytes [6, end)
 *   6          4     entry count N
 *   10 + 46*i  8     producer id
 *              2     epoch
 *              4     last sequence
 *              8     last offset (-1: no batch)
 *              4     offset delta (last offset - first offset of that batch)
 *              8     timestamp
 *              4     coordinator epoch
 *              8     current transaction's first offset (-1: none)
 * A snapshot is valid if and only if its size is 10 + 46*N, its version is 1 and
 * its CRC matches. Only each producer's newest batch is kept in it; the older
 * ones come back by replaying the log after the snapshot's offset.
 *
 * Invariants: (1) a producer's batches are kept oldest first, at most
 *   TFS_PSTATE_BATCHES, all of its current epoch. (2) entries are sorted by
 *   producer id, ids unique.
 * Threads: every function takes the state's own mutex; the partition log calls
 *   the mutating ones from its group-commit leader or from recovery only.
 * Errors: 0 or a negative errno / TFS_E* code (engine/types.h).
 */
#ifndef TFS_PRODUCER_STATE_H
#define TFS_PRODUCER_STATE_H

#include "engine/types.h"

#define TFS_PSTATE_BATCHES 5             /* Kafka's NUM_BATCHES_TO_RETAIN */
#define TFS_PSTATE_SNAPSHOT_VERSION 1
#define TFS_PSTATE_SNAPSHOT_HEADER 10
#define TFS_PSTATE_SNAPSHOT_ENTRY 46

struct tfs_pstate;

/* One batch a producer appended. */
struct tfs_pstate_batch {
	int32_t first_seq, last_seq;
	tfs_offset_t first_offset, last_offset;
	int64_t timestamp;
};

/* One producer's state (a copy when returned). */
struct tfs_pstate_entry {
	int64_t producer_id;
	int16_t epoch;                    /* -1: unknown */
	int32_t coordinator_epoch;        /* -1: none */
	int64_t last_timestamp;
	tfs_offset_t txn_first_offset;    /* -1: no open transaction */
	int nbatches;
	struct tfs_pstate_batch batch[TFS_PSTATE_BATCHES];   /* oldest first */
};

/* What the state needs of a batch's header. */
struct tfs_pstate_in {
	int64_t producer_id;              /* >= 0 */
	int16_t epoch;
	int32_t base_seq;
	int32_t last_offset_delta;
	int64_t max_timestamp;
	bool transactional;
	bool control;                     /* an end-transaction marker (replay only) */
};

/* What a check decided. */
enum tfs_pstate_verdict {
	TFS_PSTATE_APPEND = 0,            /* append it, then tfs_pstate_apply */
	TFS_PSTATE_DUPLICATE = 1,         /* append nothing; *dup has the original */
};

/* A batch's last sequence: base + delta, wrapping past INT32_MAX to 0. */
int32_t tfs_pstate_seq_add(int32_t seq, int32_t delta);

/* Caller owns *out; free with tfs_pstate_destroy. 0 or -ENOMEM. */
int tfs_pstate_create(struct tfs_pstate **out);
void tfs_pstate_destroy(struct tfs_pstate *ps);

/* Checks a client's batch (rules 1-4 above). Returns TFS_PSTATE_APPEND,
 * TFS_PSTATE_DUPLICATE (*dup filled), TFS_EFENCED or TFS_ESEQUENCE; *why (static)
 * says why when refused. Changes nothing. */
int tfs_pstate_check(struct tfs_pstate *ps, const struct tfs_pstate_in *in,
                     struct tfs_pstate_batch *dup, const char **why);

/* A producer's entry before a change, to undo it (tfs_pstate_undo). */
struct tfs_pstate_undo {
	bool existed;
	struct tfs_pstate_entry entry;
};

/* Records a batch appended at first_offset (a checked one, or one replayed from
 * the log: no checks) and moves the end offset past it. A control batch ends the
 * producer's transaction. undo (may be NULL) gets what to restore. 0 or -ENOMEM
 * (nothing changed). */
int tfs_pstate_apply(struct tfs_pstate *ps, const struct tfs_pstate_in *in,
                     tfs_offset_t first_offset, struct tfs_pstate_undo *undo);
/* Restores a producer's entry as apply found it (the append failed). */
void tfs_pstate_undo(struct tfs_pstate *ps, int64_t producer_id,
                     const struct tfs_pstate_undo *undo);

/* The offset the state reflects the log up to (exclusive). */
tfs_offset_t tfs_pstate_end_offset(struct tfs_pstate *ps);
void tfs_pstate_set_end_offset(struct tfs_pstate *ps, tfs_offset_t end);

/* The first offset of the oldest open transaction, or -1 when none is open:
 * the last stable offset is this, else the end offset. */
tfs_offset_t tfs_pstate_first_unstable(struct tfs_pstate *ps);

/* Removes producers idle for expiration_ms (now - last timestamp >= it) that have
 * no open transaction (Kafka's producer.id.expiration.ms). Returns how many. */
size_t tfs_pstate_expire(struct tfs_pstate *ps, int64_t now_ms, int64_t expiration_ms);

/* Copies up to cap entries (by producer id) into out; returns how many exist. */
size_t tfs_pstate_list(struct tfs_pstate *ps, struct tfs_pstate_entry *out, size_t cap);
/* Copies producer_id's entry into *out: 0 or -ENOENT. */
int tfs_pstate_get(struct tfs_pstate *ps, int64_t producer_id, struct tfs_pstate_entry *out);
size_t tfs_pstate_count(struct tfs_pstate *ps);

/* Encodes the state as a snapshot file's bytes. Caller owns *buf (free). 0 or
 * -ENOMEM. */
int tfs_pstate_snapshot_encode(struct tfs_pstate *ps, uint8_t **buf, size_t *len);
/* Replaces the state with a snapshot's (len bytes at buf) taken at end offset
 * end, leaving out producers expired at now_ms (expiration_ms <= 0: none).
 * Returns 0, TFS_ECORRUPT (*why says what; the state is then empty) or -ENOMEM. */
int tfs_pstate_snapshot_decode(struct tfs_pstate *ps, const uint8_t *buf, size_t len,
                               tfs_offset_t end, int64_t now_ms, int64_t expiration_ms,
                               const char **why);
/* Empties the state (end offset 0). */
void tfs_pstate_clear(struct tfs_pstate *ps);

#endif
