/* plog_internal.h - the partition log's private state, shared by the files of
 * engine/log/: partition_log.c (appends, rolls), plog_read.c (reads, cursors),
 * log_recovery.c (open-time recovery), plog_fetch.c (consumers' reads), the
 * producer and transaction paths, lag.c and plog_cleaning.c. Nothing outside
 * engine/log/ includes it (tests/check_includes.sh): the cleaner and retention
 * use plog_cleaning.h, everyone else partition_log.h. */
#ifndef TFS_PLOG_INTERNAL_H
#define TFS_PLOG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/format/batch_codec.h"
#include "engine/log/keydir.h"
#include "engine/log/txn_tombs.h"
#include "engine/log/partition_log.h"
#include "engine/log/plog_cleaning.h"
#include "engine/producer/producer_state.h"
#include "engine/log/segment.h"

struct tfs__waiter;
struct tfs__encoder;

/* Encoders (a builder and a key-hash array) lent to appenders that encode their
 * own unit while a leader works (partition_log.c, submit). Made on first need and
 * kept, since a zstd context costs too much to make per unit; one per appender
 * that can be encoding or have its batch in the group being written, so a few
 * beyond the cores keep every writer busy. */
#define TFS__PLOG_ENCODERS 4

struct tfs_plog {
	char *path;
	/* The directory's fd while the partition opens (tfs__plog_recover), -1 after:
	 * a partition holds no descriptor between operations, so that descriptors stay
	 * bounded by the fd cache whatever the number of partitions. Rolls, swaps,
	 * retention and close open the directory when they need it
	 * (tfs__plog_dir_open). */
	int dirfd;
	struct tfs_plog_env env;
	struct tfs_topic_config cfg;        /* copy; changed under append leadership + lock */

	pthread_rwlock_t lock;              /* segs, end_offset, active indexes */
	/* kd_lock[s]: shard s of kd (keydir.h); all of them: tombs. The key
	 * directory's phase of group commit writes a shard under its lock alone,
	 * so that the next group publishes its records under pl->lock meanwhile and
	 * applies its changes to one shard while this group does the next one. An
	 * exclusive request takes them inside pl->lock. Lock order: lock, then
	 * kd_lock[0], kd_lock[1], ... (tfs__plog_kd_lock). */
	pthread_rwlock_t kd_lock[TFS_KEYDIR_SHARDS];
	struct tfs_keydir *kd;
	struct tfs_tombs *tombs;            /* removals while a transaction is open
	                                     * (txn_tombs.h); the keydir phase's */
	struct tfs_seglist *segs;
	struct tfs_pstate *pstate;          /* its own lock; changed by the leader */
	tfs_offset_t end_offset;            /* next offset to assign */

	pthread_mutex_t q_lock;             /* the group-commit queue */
	struct tfs__waiter *q_head, *q_tail;
	/* under q_lock: idle encoders in idle_enc[0, nidle_enc); made_enc made so far */
	struct tfs__encoder *idle_enc[TFS__PLOG_ENCODERS];
	int nidle_enc, made_enc;

	/* used only by the current group-commit leader */
	struct tfs_batch_builder builder;
	uint8_t *wbuf;
	size_t wcap;
	struct tfs__kdfeed *kdfeed;         /* during the open-time scan only */

	atomic_int_fast64_t unsynced_since_ms;  /* 0 when everything is durable */
	int failed;                         /* < 0: a write error left the tail unknown */
	atomic_bool kd_failed;              /* a key-directory update ran out of memory:
	                                     * it misses records of the log, so reads by
	                                     * key fail with EIO until a remount rebuilds it */
	bool appended;                      /* a group was written since the open (leader) */
	bool pstate_replayed;               /* recovery replayed producer batches past the
	                                     * newest snapshot (then constant) */
	char *uncleanable_reason;           /* set by recovery on sealed corruption */
	/* Set by recovery, then constant: the largest first offset of an unreadable
	 * region (0: none). A key whose newest readable record is below it may have
	 * a newer record in that region, so it reads TFS_EDAMAGED. */
	tfs_offset_t stale_below;
	void (*append_hook)(void *arg, struct tfs_plog *pl);    /* set before sharing */
	void *append_hook_arg;
	bool internal;                  /* tfs_plog_set_internal: set before sharing */
	/* The log start offset DeleteRecords moved (plog_start.c), under pl->lock;
	 * 0 until then. The log starts at the larger of it and seg[0]'s base. */
	tfs_offset_t deleted_below;
	/* The key directory's phase of group commit (partition_log.c, submit): a
	 * leader hands the queue on once its group is written and published, then
	 * applies the group's key changes in ticket order, the order the groups were
	 * written, shard by shard. Under q_lock: kd_issued, the next ticket;
	 * kd_done[s], the ticket whose changes go next into shard s (every ticket
	 * below it is applied there); kd_cond announces each step of a kd_done.
	 * Idle buffers of key changes (kops_idle, their capacities in
	 * kops_idle_cap) too. q_seq counts the queue's hand-overs (leadership,
	 * answers, kd_done), for the waits that spin before they sleep. */
	uint64_t kd_issued, kd_done[TFS_KEYDIR_SHARDS];
	pthread_cond_t kd_cond;
	atomic_uint q_seq;
	atomic_bool q_spinning;           /* a waiter spins on q_seq (tfs__q_wait) */
	struct tfs_keydir_op *kops_idle[2];
	size_t kops_idle_cap[2];
};

/* The segment list (struct tfs_seglist, tfs__seglist_put, tfs__seglist_find,
 * tfs__plog_dir_open: plog_cleaning.h). */

/* The log start offset: records below it are gone for every reader. Under
 * pl->lock (either mode), of pl->segs. */
static inline tfs_offset_t tfs__plog_start(const struct tfs_plog *pl)
{
	tfs_offset_t base = pl->segs->seg[0]->base_offset;
	return pl->deleted_below > base ? pl->deleted_below : base;
}

/* Every shard of pl->kd, read or write, in lock order; and their release. */
static inline void tfs__plog_kd_lock(struct tfs_plog *pl, bool write)
{
	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++) {
		if (write)
			pthread_rwlock_wrlock(&pl->kd_lock[s]);
		else
			pthread_rwlock_rdlock(&pl->kd_lock[s]);
	}
}

static inline void tfs__plog_kd_unlock(struct tfs_plog *pl)
{
	for (unsigned s = TFS_KEYDIR_SHARDS; s-- > 0;)
		pthread_rwlock_unlock(&pl->kd_lock[s]);
}

struct tfs_seglist *tfs__seglist_get(struct tfs_plog *pl);   /* a new ref */
struct tfs_seglist *tfs__seglist_alloc(int count);

/* An internal topic's partitions take records from their owner only: every
 * other append path calls this, which logs and returns -EPERM. */
int tfs__plog_refuse_internal(const struct tfs_plog *pl);
/* Exclusive sections (tfs__plog_run_exclusive) and the roll: plog_cleaning.h.
 * Inside engine/log/, fn may read pl->segs without the lock and publishes
 * changes under pl->lock held for writing. */

/* A reusable encoder, lent to one appender at a time (partition_log.c, submit):
 * the builder and key hashes of a unit it encodes, and for a producer's batch
 * (tfs_plog_append_batch) the decoder and the records found in it. */
struct tfs__encoder {
	struct tfs_batch_builder builder;
	uint64_t *hashes;                  /* by record: its key's hash */
	struct tfs_append_rec *recs;       /* a producer batch's records */
	int64_t *timestamps;               /* and their timestamps */
	size_t hashes_cap;                 /* of hashes, recs and timestamps */
	struct tfs_record_iter iter;
	struct tfs_header *hdrs;           /* one record's headers, to re-encode it */
	size_t hdrs_cap;
};

struct tfs__encoder *tfs__encoder_new(void);
void tfs__encoder_free(struct tfs__encoder *e);
/* Makes room for count records in hashes, recs and timestamps. 0 or -ENOMEM. */
int tfs__encoder_reserve(struct tfs__encoder *e, size_t count);

/* A unit encoded before it queued, for the leader to place by writing its base
 * offset: an appender's own records (encoded at base offset 0), or a producer's
 * batch. */
struct tfs__preencoded {
	struct tfs__encoder *enc;          /* lent; given back once the group is done */
	uint8_t *batch;
	size_t len;
	const uint64_t *hashes;            /* by record: its key's hash (keyless: unused) */
	const int64_t *timestamps;         /* by record; NULL: all have timestamp */
	int64_t timestamp;                 /* the batch's max timestamp */
	/* What an appender's unit was encoded under: the leader re-encodes it if the
	 * config has changed since. */
	int16_t attributes;
	int zstd_level;
	bool producer;                     /* a producer's batch: placed as it is */
	bool has_producer_id;              /* marks its segment for the cleaner */
	struct tfs_pstate_in pin;          /* has_producer_id: what the state checks */
	bool duplicate;                    /* set by the leader: nothing appended */
	/* A transaction's batches (plog_txn.c): data keeps its keys out of the key
	 * directory until the COMMIT marker, which carries them (txn_ops, applied
	 * with the marker); an ABORT marker adds a .txnindex entry. */
	bool txn_data;
	bool marker, commit;               /* an end-transaction marker, COMMIT or ABORT */
	const struct tfs_keydir_op *txn_ops;
	size_t txn_nops;
	struct tfs_aborted_txn aborted;    /* set by the leader for an ABORT marker */
};

/* ---- the group-commit queue (partition_log.c) and its key phase (plog_keyphase.c) ---- */

/* One append unit in the queue. */
struct tfs__waiter {
	const struct tfs_append_rec *recs;
	size_t count;
	size_t bytes;                 /* encoded size estimate of the unit's records */
	bool durable;
	struct tfs__preencoded *pre;  /* NULL: the leader encodes the unit */
	int (*exclusive)(struct tfs_plog *, void *);   /* runs alone, in queue order */
	void *exclusive_arg;
	bool done;
	int result;
	int refused;                  /* the producer state's refusal of this unit */
	bool skip;                    /* refused or a duplicate: nothing written */
	tfs_offset_t first;
	int64_t timestamp;
	pthread_cond_t cond;
	struct tfs__waiter *next;
};

/* Whether a transaction was open while a group was written (at its start or at
 * its end), and whether one still is after it: tfs__keydir_phase notes the group's
 * removals for a COMMIT to come while one is, and forgets them once none is
 * (txn_tombs.h). Both are read from the producer state by the leader, in offset
 * order, so they hold for the group whatever tfs__keydir_phase meets later. */
struct tfs__txn_marks {
	bool during, after;
	/* no put still to be committed can precede it: the oldest open
	 * transaction's first offset at the group's start, else the group's
	 * first; removals noted below it can go */
	tfs_offset_t floor;
};

/* A buffer of key-directory changes for one group's second phase. */
struct tfs__kops_buf {
	struct tfs_keydir_op *ops;
	size_t cap;
};

/* One of the partition's idle buffers (kops_idle) when there is one, else an
 * empty one; and its return (freed when the idle ones are all there). Under
 * q_lock. */
struct tfs__kops_buf tfs__kops_take(struct tfs_plog *pl);
void tfs__kops_give(struct tfs_plog *pl, struct tfs__kops_buf b);
/* The key directory learns what the group of n waiters from head wrote
 * (written < 0: it failed, nothing), in ticket order (ticket NULL: an exclusive
 * request's own group, no turn to wait for). Called without q_lock. */
void tfs__keydir_phase(struct tfs_plog *pl, struct tfs__waiter *head, size_t n, int written,
                       const uint64_t *ticket, struct tfs__kops_buf *b,
                       const struct tfs__txn_marks *marks);
/* Under q_lock, as the leader: until every group written is in the directory. */
void tfs__keydir_drain(struct tfs_plog *pl);
/* A hand-over in the queue happened: under q_lock, before its signal. */
void tfs__q_bump(struct tfs_plog *pl);
/* pthread_cond_wait(cond, &pl->q_lock), spinning first; may return early. */
void tfs__q_wait(struct tfs_plog *pl, pthread_cond_t *cond);

/* partition_log.c: runs a unit its appender encoded (pre: producer, with its
 * producer fields in pre->pin) through the group-commit queue, count records
 * at recs of about bytes. *first, *timestamp as tfs_plog_append. */
int tfs__plog_submit_encoded(struct tfs_plog *pl, const struct tfs_append_rec *recs,
                             size_t count, size_t bytes, bool durable,
                             struct tfs__preencoded *pre, tfs_offset_t *first,
                             int64_t *timestamp);
/* plog_txn.c: writes an ABORT for every transaction the recovered log holds
 * open (tfs_plog_open, after recovery). 0 or the marker's append error. */
int tfs__plog_abort_open_txns(struct tfs_plog *pl);
/* Adds a unit's records to b, every one with timestamp ts (partition_log.c). 0
 * or the builder's error. */
int tfs__plog_add_unit(struct tfs_batch_builder *b, const struct tfs_append_rec *recs,
                       size_t count, int64_t ts);
/* Upper bound of one record's encoded size; whether a unit cannot be one batch
 * of max_message_bytes (partition_log.c). */
size_t tfs__plog_record_bytes(const struct tfs_append_rec *r);
bool tfs__plog_unit_too_big(int32_t max_message_bytes, const struct tfs_append_rec *recs,
                            size_t count, size_t bytes);

/* What the producer path needs of the topic config, read under q_lock. */
struct tfs__produce_cfg {
	int compression;                   /* enum tfs_codec */
	int zstd_level;
	int32_t max_message_bytes;
};

/* plog_produce.c: checks a producer's batch (len bytes at batch) the way Kafka's
 * broker checks a client's, decodes its records into e (recs, hashes,
 * timestamps) and fills *pre for the leader; re-encodes it on e's builder if its
 * codec is not the topic's. Sets the leader epoch in place. *count gets the
 * number of records. Errors (nothing changed, *why says what): as
 * tfs_plog_append_batch. */
int tfs__producer_unit(const struct tfs__produce_cfg *cfg, struct tfs__encoder *e,
                       uint8_t *batch, size_t len, struct tfs__preencoded *pre, size_t *count,
                       const char **why);

/* keydir_feed.c: key-directory changes applied on a second thread while the
 * open-time scan goes on. add copies the key; finish waits for every change,
 * stops the thread and returns the first error (-ENOMEM). */
struct tfs__kdfeed;
int tfs__kdfeed_start(struct tfs_keydir *kd, struct tfs__kdfeed **out);
int tfs__kdfeed_add(struct tfs__kdfeed *f, struct tfs_slice key, bool remove,
                    const struct tfs_keyinfo *info);
int tfs__kdfeed_finish(struct tfs__kdfeed *f);

/* plog_pstate.c: producer-state snapshots. load (before recovery's scan) reads
 * the newest valid snapshot into pl->pstate; replay (by the scan) records a
 * batch from the snapshot's offset on; recovered (after it) checks the state
 * against the log end, expires idle producers and prunes snapshots; snapshot
 * writes one at pl->end_offset (leader, or at close). dirfd is the partition
 * directory (borrowed): the one recovery holds, or one opened for the roll or
 * close (tfs__plog_dir_open). 0 or a negative errno. */
int tfs__pstate_load(struct tfs_plog *pl, int dirfd);
void tfs__pstate_replay(struct tfs_plog *pl, const struct tfs_batch_header *h);
void tfs__pstate_recovered(struct tfs_plog *pl, int dirfd);
int tfs__pstate_snapshot(struct tfs_plog *pl, int dirfd);
/* tfs__pstate_snapshot in steps, for a roll that fsyncs it with the segment's
 * files (tfs_file_stage): stage writes the state at pl->end_offset to a
 * temporary file, *at gets that offset, and returns the file's fd (caller
 * fsyncs and closes it), or a negative errno (logged; nothing left behind);
 * commit renames it to its snapshot name (logged if it fails; the directory
 * fsync and tfs__pstate_prune are the caller's), unstage removes it. */
int tfs__pstate_stage(struct tfs_plog *pl, int dirfd, tfs_offset_t *at);
int tfs__pstate_commit(struct tfs_plog *pl, int dirfd, tfs_offset_t at);
void tfs__pstate_unstage(int dirfd, tfs_offset_t at);
/* tfs__pstate_prune (after segments went): plog_cleaning.h. */

/* log_recovery.c: fills pl->segs, pl->kd, pl->end_offset from the directory. */
int tfs__plog_recover(struct tfs_plog *pl);

#endif
