/* cleaner.h - the log cleaner: Kafka's log compaction over the partitions of a data
 * directory, crash-safe segment swaps, and retention of the delete policy.
 *
 * Owns: a pool of log.cleaner.threads threads, each with its own offset map (the
 * dedupe buffer split among them, allocated at its first pass), I/O buffers, batch
 * builder and record iterator; the per-partition cleaning state; the throttler; the
 * files DATA_DIR/cleaner-offset-checkpoint and DATA_DIR/log-cleaner.log.
 * Borrows: the io context and every registered partition log (the engine keeps a
 * partition open until tfs_cleaner_unregister has returned for it).
 *
 * What a pass does (docs/cleaner.md; the code is in cleaner_pass.c and its phases):
 *
 *   log start        first dirty (checkpoint)     first uncleanable     active base
 *   |---- clean ---------|------- dirty --------------|--- uncleanable ----|-- active --|
 *                         offset map over this range   (min.compaction.lag, open
 *                         (stops early if it fills)     transactions) never cleaned
 *   |<--------- recopied, segment group by segment group, up to the map's end -->|
 *
 * A record survives if the map holds no newer offset for its key; keyless records
 * survive; a tombstone survives until its delete horizon (stamped into its batch
 * as pass start + delete.retention.ms by the pass that first keeps it); the last
 * batch of each producer id survives (empty if need be); records of aborted
 * transactions go; markers go once their transaction has no data left and their
 * horizon passed. Offsets are never renumbered. A dry run (tfs_cleaner_dry_run)
 * is the same pass with nothing written: what the next pass would do with each
 * record, and what it would free.
 *
 * Selection (cleaner_manager.c): among registered partitions whose cleanup.policy
 * has compact, not being cleaned and not uncleanable, the one with the highest
 * dirty ratio = dirty bytes / (clean + dirty bytes) wins if that ratio is above
 * min.cleanable.dirty.ratio, or if its oldest dirty segment passed
 * max.compaction.lag.ms. After each round the threads apply retention (delete
 * policy) to every registered partition. A thread sleeps log.cleaner.backoff.ms
 * when there was nothing to do.
 *
 * Per-partition state machine (under the manager lock):
 *
 *        register                      pass / retention done
 *   ---------------> IDLE  <-------------------------------- BUSY
 *                     |  \------ selected, clean_now, -------->^
 *                     |          retention                     |
 *                     |  pass failed (not aborted)             |
 *                     +<-- UNCLEANABLE (skipped until clean_now |
 *                     |     clears it, or a restart)           |
 *   unregister: sets abort, waits for BUSY to end, forgets the partition.
 *
 * Invariants:
 *   (1) at most one pass or retention run per partition at a time (BUSY);
 *   (2) the checkpoint of a partition only moves to the end of a pass that
 *       completed every swap, and is written after those swaps;
 *   (3) a partition's segment list changes only as the group-commit leader
 *       (tfs__plog_run_exclusive) with pl->lock held for writing;
 *   (4) on disk, at every instant, the old or the new files of a group are whole
 *       (.cleaned -> .swap -> swap in; recovery finishes or discards, §2.9).
 *
 * Threads: every function may be called from any thread, except that
 * tfs_cleaner_destroy must not race the others. Lock order: the engine's topic
 * registry lock -> topic lock -> checkpoint-file lock -> manager lock; the manager
 * lock is never held while calling into a partition log. The throttler's and the
 * cleaner log's locks are leaves (see also partition_log.h).
 *
 * Errors: 0 or a negative errno / TFS_E* code; -ENOENT for a partition that is not
 * registered; TFS_EREADONLY when c is NULL (a read-only mount has no cleaner).
 */
#ifndef TFS_CLEANER_H
#define TFS_CLEANER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/format/batch_codec.h"
#include "engine/topic_config.h"
#include "engine/types.h"

struct tfs_io;
struct tfs_plog;
struct tfs_cleaner;

/* Creates a stopped cleaner for data_dir (borrowed string is copied; io borrowed
 * until destroy): reads DATA_DIR/cleaner-offset-checkpoint (a malformed file is
 * logged and ignored: every partition then starts fully dirty) and opens
 * DATA_DIR/log-cleaner.log. Caller owns *out; free with tfs_cleaner_destroy.
 * Errors: -EINVAL (bad config), -ENOMEM, an I/O errno opening the directory. */
int tfs_cleaner_create(struct tfs_io *io, const char *data_dir,
                       const struct tfs_cleaner_config *cfg, struct tfs_cleaner **out);
/* Starts cfg->threads threads (0: no background cleaning or retention; clean_now
 * still works on the caller's thread). Errors: -EALREADY, a pthread errno. */
int tfs_cleaner_start(struct tfs_cleaner *c);
/* Stops the threads: a pass in flight is aborted at its next check (its .cleaned
 * files are removed, the log is unchanged); waiting clean_now calls return
 * -ECANCELED. Idempotent. */
void tfs_cleaner_stop(struct tfs_cleaner *c);
/* Stops and frees. Every partition may still be registered (it is forgotten, not
 * touched). NULL ok. */
void tfs_cleaner_destroy(struct tfs_cleaner *c);

/* Starts managing pl (borrowed until tfs_cleaner_unregister returns) as partition
 * `partition` of `topic` (copied; the name used in the checkpoint and the log). The
 * topic config is read from the partition log itself (tfs_plog_set_config keeps
 * it current), so a config change applies from the next selection on. A partition
 * that recovery found corrupt starts uncleanable with recovery's reason.
 * Errors: -EEXIST (already registered), -ENOMEM. */
int tfs_cleaner_register(struct tfs_cleaner *c, struct tfs_plog *pl, const char *topic,
                         int32_t partition);
/* Stops managing pl: asks an in-flight pass or retention run on it to abort, waits
 * for it to end, forgets the partition and drops its checkpoint entry (the file is
 * rewritten). After it returns the cleaner never touches pl again. No-op if not
 * registered. */
void tfs_cleaner_unregister(struct tfs_cleaner *c, struct tfs_plog *pl);

/* Runs one cleaning pass of pl now and returns when it is done: ignores
 * min.cleanable.dirty.ratio but honours every other rule (active segment,
 * min.compaction.lag.ms, open transactions, the dedupe buffer's capacity - a pass
 * that fills the map cleans up to where it stopped). Clears the uncleanable mark
 * first. Then applies retention if the policy has delete. Runs on a cleaner thread
 * (waiting for one to be free) or, when no thread runs, on the caller's. A topic
 * without compact only gets retention. Returns 0, the pass's error (the partition
 * is then uncleanable again, with the reason), -ECANCELED if the cleaner stopped
 * or pl was unregistered meanwhile, -ENOENT, TFS_EREADONLY. */
int tfs_cleaner_clean_now(struct tfs_cleaner *c, struct tfs_plog *pl);
/* Applies retention.ms / retention.bytes to pl now (delete policy only; whole
 * segments from the log start, the active one too once it holds records and has
 * expired, after a roll that keeps the log end offset; the log start offset moves;
 * keys whose newest record went leave the key directory). *deleted_segments may be NULL.
 * Waits while a pass runs on pl. Errors as tfs_cleaner_clean_now. */
int tfs_cleaner_enforce_retention(struct tfs_cleaner *c, struct tfs_plog *pl,
                                  int *deleted_segments);

/* ---- per-partition state (the partition directory's xattrs) ---- */

#define TFS_CLEANER_LINE_MAX 512    /* last_clean and uncleanable_reason, with NUL */

struct tfs_cleaner_partition_info {
	double dirty_ratio;                    /* dirty bytes / (clean + dirty); 0 if none */
	tfs_offset_t first_dirty_offset;       /* the checkpoint, reset as Kafka does */
	tfs_offset_t first_uncleanable_offset; /* min(active base, min-lag bound, first
	                                        * unstable offset), rounded down to a
	                                        * segment base, >= first_dirty_offset;
	                                        * = first_dirty_offset if uncleanable */
	int64_t clean_bytes, dirty_bytes;
	bool compacted;                        /* cleanup.policy has compact */
	bool in_progress;                      /* a pass or retention is running */
	bool uncleanable;
	char uncleanable_reason[TFS_CLEANER_LINE_MAX];  /* "" unless uncleanable */
	char last_clean[TFS_CLEANER_LINE_MAX];          /* "" before the first pass */
};

/* Fills *out. For a partition without compact, first_dirty_offset =
 * first_uncleanable_offset = the log start and the ratio is 0 (every record is
 * "uncleanable": the cleaner never compacts it). While a transaction is open, reads
 * the headers of segments that hold producer ids (to find the first open one, as
 * the pass does). Errors: -ENOENT,
 * TFS_EREADONLY, -ENOMEM, an I/O error. */
int tfs_cleaner_partition_info(struct tfs_cleaner *c, struct tfs_plog *pl,
                               struct tfs_cleaner_partition_info *out);
/* Shorthands for single attributes; same errors. buf gets a NUL-terminated line
 * (truncated to cap), "" when there is none. */
int tfs_cleaner_last_clean(struct tfs_cleaner *c, struct tfs_plog *pl, char *buf, size_t cap);
int tfs_cleaner_uncleanable_reason(struct tfs_cleaner *c, struct tfs_plog *pl, char *buf,
                                   size_t cap);

/* ---- per-record attributes (history entries) ---- */

/* "clean" if offset < first_dirty, "dirty" if < first_uncleanable, else
 * "uncleanable" (static strings). Take the two bounds from one
 * tfs_cleaner_partition_info call to label a whole listing consistently. */
const char *tfs_cleaner_region_of(tfs_offset_t offset, tfs_offset_t first_dirty,
                                  tfs_offset_t first_uncleanable);
/* The same for one offset of pl (one partition_info call). *out is static. */
int tfs_cleaner_region(struct tfs_cleaner *c, struct tfs_plog *pl, tfs_offset_t offset,
                       const char **out);
/* The delete horizon stamped into a batch (attribute bit 6): 0 and *out_ms, or
 * -ENODATA when the batch has none. A tombstone or marker in such a batch goes at
 * the first pass that starts at or after it. Needs no cleaner. */
int tfs_cleaner_delete_horizon(const struct tfs_batch_header *h, int64_t *out_ms);

/* ---- the next pass, before it runs (a dry run) ---- */

/* What the next pass would do with one record (the `fate` attribute). Each is
 * decided by the one per-record verdict of cleaner_fate.c, so the dry run and the
 * pass cannot disagree. */
enum tfs_cleaner_fate {
	TFS_FATE_KEEP,                 /* the newest record of its key, or a marker kept */
	TFS_FATE_DROP,                 /* superseded inside the cleaned range, or data
	                                * of an aborted transaction */
	TFS_FATE_KEEP_TOMBSTONE,       /* a tombstone (or an emptied transaction's
	                                * marker) before its delete horizon */
	TFS_FATE_DROP_TOMBSTONE,       /* its delete horizon passed */
	TFS_FATE_KEEP_KEYLESS,         /* no key: never compacted away */
	TFS_FATE_KEEP_PRODUCER_STATE,  /* the record goes, but its batch stays (empty)
	                                * as its producer's last batch */
	TFS_FATE_NOT_CLEANABLE,        /* outside what the pass cleans: see the reason */
};

/* Why a record is outside what the next pass cleans. */
enum tfs_cleaner_not_cleanable {
	TFS_NC_NONE,
	TFS_NC_ACTIVE_SEGMENT,         /* the active segment is never cleaned */
	TFS_NC_COMPACTION_LAG,         /* a segment younger than min.compaction.lag.ms */
	TFS_NC_OPEN_TRANSACTION,       /* at or past the first unstable offset */
	TFS_NC_BUFFER_FULL,            /* past where the dedupe buffer filled: the pass
	                                * after it goes on from there */
	TFS_NC_NOT_COMPACTED,          /* cleanup.policy has no compact */
};

/* One record of the recopied range, as the pass would decide it. */
struct tfs_cleaner_record_fate {
	tfs_offset_t offset;
	enum tfs_cleaner_fate fate;
	enum tfs_cleaner_not_cleanable why;   /* TFS_FATE_NOT_CLEANABLE only */
	int64_t horizon_ms;            /* KEEP_TOMBSTONE: its delete horizon: the one
	                                * stamped in its batch, or the one the pass
	                                * would stamp (pass start + delete.retention.ms) */
	bool horizon_stamped;          /* horizon_ms is already in the batch */
	bool tombstone;                /* a keyed record with a null value */
	size_t record_bytes;           /* key + value bytes (for "would free" figures) */
};

/* Called for every record the pass would read in its recopy, in offset order.
 * f is valid for the call only. */
typedef void (*tfs_cleaner_fate_fn)(void *arg, const struct tfs_cleaner_record_fate *f);

/* True if the record is still on disk after the pass. */
bool tfs_cleaner_fate_keeps(enum tfs_cleaner_fate f);
/* "keep", "drop", "keep-tombstone", ... ; "active segment", ... (static strings) */
const char *tfs_cleaner_fate_name(enum tfs_cleaner_fate f);
const char *tfs_cleaner_not_cleanable_name(enum tfs_cleaner_not_cleanable w);

struct tfs_cleaner_dry_run {
	bool compacted;                /* cleanup.policy has compact */
	bool nothing_to_do;            /* no closed segment below the pass's end */
	bool map_full;                 /* the dedupe buffer would fill: the pass ends early */
	int64_t now_ms;                /* the pass start assumed */
	tfs_offset_t log_start, log_end;
	tfs_offset_t first_dirty, first_uncleanable;
	tfs_offset_t end_offset;       /* the checkpoint after the pass */
	tfs_offset_t active_base;
	enum tfs_cleaner_not_cleanable uncleanable_why;  /* what set first_uncleanable */
	int64_t records_read, records_kept, records_dropped;
	int64_t tombstones_to_stamp;   /* kept tombstones and markers not yet stamped */
	int64_t tombstones_dropped;    /* tombstones and markers whose horizon passed */
	int64_t bytes_before, bytes_after;      /* of the whole log */
	int64_t bytes_freed;           /* bytes_before - bytes_after */
	int64_t batches_dropped, batches_emptied, batches_rebuilt;
};

/* A dry run of the next pass of pl, now: the same code as tfs_cleaner_clean_now's
 * pass (selection figures, offset map of a cleaner thread's size, every decision,
 * every re-encoded batch measured) with nothing written, swapped or checkpointed.
 * The partition's uncleanable mark is ignored, as `clean` clears it. fn (may be
 * NULL) gets every record of the recopied range; a record past it is
 * TFS_FATE_NOT_CLEANABLE for tfs_cleaner_not_cleanable_of's reason. Runs on the
 * caller's thread without throttling. A pass running at the same time is no
 * problem: each pins its own segment list. Errors: -ENOENT (not registered),
 * TFS_EREADONLY, -ENOMEM, an I/O error, TFS_ECORRUPT. */
int tfs_cleaner_dry_run(struct tfs_cleaner *c, struct tfs_plog *pl, tfs_cleaner_fate_fn fn,
                        void *arg, struct tfs_cleaner_dry_run *out);
/* The same dry run without a cleaner (topicctl dump --fate, on a partition opened
 * read-only): cfg is the topic's config, ccfg the cleaner config whose thread's
 * dedupe buffer the map gets, checkpoint the first dirty offset (-1: none, as
 * tfs_cleaner_checkpoint_read gives it), now_ms the pass start. Errors as above,
 * but for -ENOENT. */
int tfs_cleaner_dry_run_log(struct tfs_plog *pl, const struct tfs_topic_config *cfg,
                            const struct tfs_cleaner_config *ccfg, tfs_offset_t checkpoint,
                            int64_t now_ms, tfs_cleaner_fate_fn fn, void *arg,
                            struct tfs_cleaner_dry_run *out);
/* The checkpoint of topic's partition in DATA_DIR/cleaner-offset-checkpoint (the
 * first dirty offset), read without writing anything: -1 in *out when the file
 * or the entry is missing. Errors: TFS_ECORRUPT (a malformed file), an I/O errno. */
int tfs_cleaner_checkpoint_read(struct tfs_io *io, int data_dirfd, const char *topic,
                                int32_t partition, tfs_offset_t *out);
/* The words of the `fate` attribute: for f (a record the dry run d reported), or
 * when f is NULL for offset, which d did not report ("not-cleanable REASON").
 * Writes a NUL-terminated line into buf (cap >= TFS_CLEANER_FATE_TEXT_CAP is
 * never cut) and returns buf; "" if offset is inside what d read (d did not see
 * it: a record appended or cleaned away meanwhile). */
#define TFS_CLEANER_FATE_TEXT_CAP 96
const char *tfs_cleaner_fate_text(const struct tfs_cleaner_dry_run *d,
                                  const struct tfs_cleaner_record_fate *f, tfs_offset_t offset,
                                  char *buf, size_t cap);
/* Why offset, past the dry run's recopied range (or in a log without compact), is
 * not cleaned; TFS_NC_NONE if the dry run reported it. */
enum tfs_cleaner_not_cleanable tfs_cleaner_not_cleanable_of(const struct tfs_cleaner_dry_run *d,
                                                            tfs_offset_t offset);

/* ---- metrics ---- */

/* Renders the cleaner's metrics in Prometheus text format into *out (malloc'd,
 * NUL-terminated, caller frees; *len without the NUL). Kafka's names with the
 * prefix topicfs_cleaner_ (each HELP line names the Kafka metric):
 * max_dirty_percent, uncleanable_partitions_count, uncleanable_bytes,
 * time_since_last_run_ms, max_buffer_utilization_percent, max_clean_time_secs,
 * recopy_percent, max_compaction_delay_secs, dead_thread_count, io_bytes_total
 * (the throttler's meter), passes_total, failures_total, txn_scans_total (the
 * times tfs_cleaner_partition_info read a log's headers), and per partition
 * topicfs_cleaner_partition_{first_dirty_offset,uncleanable} with topic and partition
 * labels. Errors: -ENOMEM. */
int tfs_cleaner_metrics(struct tfs_cleaner *c, char **out, size_t *len);

/* Tests only: the wall clock the cleaner uses for selection, horizons, lags and
 * retention (default tfs_now_ms). Set before start. */
void tfs_cleaner_set_clock(struct tfs_cleaner *c, int64_t (*now_ms)(void *arg), void *arg);

/* Tests only: events of the cleaner's threads, for a test to sequence itself on
 * instead of sleeping. Each is called on the thread concerned, selected without a
 * lock, throttled holding the throttler's: neither may block or call the
 * cleaner (post a semaphore, count). NULL members are left out. Set before start;
 * the hooks are copied. */
struct tfs_cleaner_hooks {
	/* a cleaner thread's round of selection ended; found: it took a partition */
	void (*selected)(void *arg, bool found);
	/* the throttler begins to put a pass to sleep (the pass is mid-flight) */
	void (*throttled)(void *arg);
	void *arg;
};
void tfs_cleaner_set_hooks(struct tfs_cleaner *c, const struct tfs_cleaner_hooks *hooks);

#endif
