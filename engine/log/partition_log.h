/* partition_log.h - one partition: its ordered segments, the active segment, the
 * key directory, appends with group commit, reads, rolls and recovery.
 *
 * Owns: its segments (refcounted, see segment.h), its key directory, its directory
 * fd. Borrows the io context, the fd cache and the topic config from the topic.
 *
 * State of the log:
 *
 *   base of seg[0] ......... seg[n-2] | active seg[n-1] ....... | end
 *   log_start_offset                                               log_end_offset
 *   [ sealed segments, immutable, replaced only by the cleaner ][ appends go here ]
 *
 * Invariants:
 *   (1) segment base offsets strictly increase; the active segment is the last.
 *   (2) log_end_offset is one past the last offset ever assigned; offsets are never
 *       reused, even after the cleaner removes records.
 *   (3) readers see only whole batches: the active segment's committed size is
 *       published (release) after its bytes are written and before the key
 *       directory names them.
 *   (4) the key directory maps each live key to the offset of its newest record;
 *       a tombstone removes the key; keyless records are never in it.
 *   (5) only the active segment can hold a torn tail: a segment is fsynced before
 *       the next one is created.
 *   (6) a sealed segment's bytes never change; the cleaner replaces whole segments
 *       by publishing a new segment list (readers holding the old list keep it).
 *
 * Group commit: appenders queue their requests; the first in line becomes the
 * leader, takes every request queued behind it (up to a byte budget), encodes them
 * into batches (one request never spans two batches), writes them with one
 * write, fsyncs once if any of them asked for durability, publishes the new size
 * and end offset, hands the queue to the next leader, then updates the key
 * directory (after every group written before, in that order) and wakes the
 * others: a request is answered once its keys are in the directory. An appender that finds a leader at work encodes
 * a large request as a batch of its own while it waits (the CRC does not cover
 * the base offset, which the leader fills in), so that two writers use two cores.
 * Every FLUSH_AHEAD_BYTES of non-durable appends start a background fdatasync of
 * the active segment (segment.h), so that rolls and syncs wait for little.
 *
 * Lock order (the only place it is written): the engine's log-start lock
 * (engine.c, tfs_engine_delete_records) -> topic registry lock (engine.c) ->
 * topic lock -> cleaner checkpoint-file lock -> cleaner manager lock
 * (cleaner_manager.c; never held while calling into a partition log) ;
 * pl->q_lock (group-commit queue, key-directory tickets) -> pl->lock (rwlock:
 * key directory, segment list, sizes) -> fd cache lock. The cleaner's swaps and
 * retention run as the group-commit leader (tfs__plog_run_exclusive), once every
 * group before them is in the key directory, and take pl->lock for writing
 * only to publish; the cleaner's throttler and log locks are leaves.
 *
 * Threads: every function may be called from any thread.
 * Errors: 0 or a negative errno / TFS_E* code; every failure is logged once.
 */
#ifndef TFS_PARTITION_LOG_H
#define TFS_PARTITION_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/format/batch_codec.h"
#include "engine/log/keydir.h"
#include "engine/topic_config.h"
#include "engine/types.h"

struct tfs_io;
struct tfs_fdcache;
struct tfs_plog;
struct tfs_segment;

/* Everything a partition needs from its surroundings; all borrowed for the life
 * of the partition. */
struct tfs_plog_env {
	struct tfs_io *io;
	struct tfs_fdcache *fdcache;
	const struct tfs_topic_config *config;  /* read under the topic's config lock;
	                                         * the partition copies what it needs */
	bool read_only;
};

/* Opens (creating if create) the partition directory path: recovers leftover
 * files, truncates a torn tail (logging what was cut), rebuilds missing or corrupt
 * indexes, and rebuilds the key directory. Caller owns *out; tfs_plog_close. */
int tfs_plog_open(const struct tfs_plog_env *env, const char *path, bool create,
                  struct tfs_plog **out);
/* DeleteRecords in memory (plog_start.c): moves the log start offset up to
 * offset, at most log_end_offset; records below it are gone for every reader
 * (cursors, reads by offset, fetches), and every key whose newest record is
 * below it leaves the key directory (no tombstone: nothing is appended). Then
 * gone (if not NULL) is called with those keys, holding no lock. *start gets the
 * log start offset after (unchanged when offset is not above it). Segments wholly
 * below it are left to retention. Persisting it is the engine's
 * (tfs_engine_delete_records). 0, -ERANGE for an offset past the log end, or
 * -ENOMEM (nothing changed). */
int tfs_plog_delete_below(struct tfs_plog *pl, tfs_offset_t offset,
                          void (*gone)(void *arg, const struct tfs_slice *keys, size_t n),
                          void *arg, tfs_offset_t *start);

/* Seals nothing, writes the active segment's indexes, fsyncs, frees. NULL ok. */
void tfs_plog_close(struct tfs_plog *pl);
/* fn(arg, pl) is called after each group of appends is published (readers see
 * it), on the appending thread with no partition lock held (long polls of a
 * Kafka listener wake on it). Set once, before the partition is shared. */
void tfs_plog_set_append_hook(struct tfs_plog *pl, void (*fn)(void *arg, struct tfs_plog *pl),
                              void *arg);
/* The requests in the partition's group-commit queue, the leader's included:
 * lets a test hold a leader (in its append hook) until others have queued. */
size_t tfs_plog_queued(struct tfs_plog *pl);
/* Marks the partition an internal topic's (__consumer_offsets): the append
 * calls below refuse with -EPERM (logged); its owner writes with
 * tfs__plog_append_internal. Set once, before the partition is shared. */
void tfs_plog_set_internal(struct tfs_plog *pl);
/* Applies a changed topic config (segment.bytes, compression, ...). */
void tfs_plog_set_config(struct tfs_plog *pl, const struct tfs_topic_config *config);

/* One record to append. Slices are borrowed for the call. */
struct tfs_append_rec {
	struct tfs_slice key;
	bool key_null;
	struct tfs_slice value;
	bool value_null;                 /* tombstone */
	const struct tfs_header *headers;
	uint32_t header_count;
};

/* Appends count records as one unit: they land in one batch, consecutive offsets,
 * all or none. durable: return only once they are fsynced. On success *first gets
 * the first record's offset and *timestamp the records' timestamp (either may be
 * NULL). Errors: -EFBIG when the unit's batch would exceed max.message.bytes,
 * -ENOSPC/-EIO from the disk (nothing becomes visible), TFS_EREADONLY. */
int tfs_plog_append(struct tfs_plog *pl, const struct tfs_append_rec *recs, size_t count,
                    bool durable, tfs_offset_t *first, int64_t *timestamp);
/* tfs_plog_append for the owner of an internal topic (engine/groups/groups.c),
 * which every other append path refuses. */
int tfs__plog_append_internal(struct tfs_plog *pl, const struct tfs_append_rec *recs, size_t count,
                              bool durable, tfs_offset_t *first, int64_t *timestamp);
/* Kafka's bound on one value: the largest value a record with a key of key_len
 * bytes (key_null: no key) may carry so that a batch holding it alone,
 * uncompressed and without headers, is at most max_message_bytes (Kafka compares
 * the batch's size with max.message.bytes). tfs_plog_append accepts exactly
 * that much in a one-record unit and refuses a byte more with -EFBIG. -1 if not
 * even an empty value fits. */
int64_t tfs_plog_value_max(int32_t max_message_bytes, size_t key_len, bool key_null);
/* Appends one record for key: its newest value (empty when it has none) followed
 * by suffix, read and appended with no other append of this partition in between,
 * so concurrent appenders to one key lose nothing (POSIX O_APPEND). durable,
 * *first, *timestamp: as tfs_plog_append. Errors: as tfs_plog_append (-EFBIG when
 * the joined record would exceed max.message.bytes), or the error reading the
 * newest value (nothing appended then). */
int tfs_plog_append_onto(struct tfs_plog *pl, struct tfs_slice key, struct tfs_slice suffix,
                         bool durable, tfs_offset_t *first, int64_t *timestamp);
/* Called by tfs_plog_append_batch once the batch is committed, with its records
 * (borrowed for the call), so that a caller can act on the keys without
 * decoding the batch again. */
typedef void (*tfs_plog_records_fn)(void *arg, const struct tfs_append_rec *recs, size_t count);

/* Appends one RecordBatch v2 as its producer encoded it, compression included:
 * Kafka's produce path. The batch (len bytes, exactly one batch) is checked as a
 * Kafka broker checks a client's - magic 2, CRC, 1..n records at offset deltas
 * 0..n-1, no control or transactional batch - and every record is decoded once
 * to prove its structure and index its key. Only what a broker sets is changed,
 * in place in batch: the base offset, the partition leader epoch (-1), and the
 * max timestamp - now under LogAppendTime, else the records' newest if the
 * producer's said otherwise (and so the CRC). Records keep their CreateTime
 * timestamps and headers; producer fields are kept as they are. A batch with a
 * producer id meets the partition's producer state (producer_state.h) before
 * it gets offsets: a retry of one of its producer's last five batches appends
 * nothing and succeeds with *first the original first offset and *count 0;
 * an older epoch is TFS_EFENCED (Kafka's INVALID_PRODUCER_EPOCH), a sequence
 * that does not follow or a new epoch not at 0 TFS_ESEQUENCE (Kafka's
 * OUT_OF_ORDER_SEQUENCE_NUMBER), both logged, appending nothing; an unknown
 * producer is accepted at any sequence. Producer ids come from
 * tfs_engine_producer_id (engine.h). A batch whose codec is
 * not the topic's compression.type is re-encoded with it. A config change that
 * races the append applies from the next batch. durable, *first: as
 * tfs_plog_append; *count gets the number of records (either may be NULL);
 * committed (NULL ok) is called with the records once they are. Refusals change
 * nothing and are logged with their reason: -EINVAL (not one whole batch,
 * control, transactional, log-append-time or delete-horizon batch, no records,
 * a record count other than last offset delta + 1, a producer id without a
 * sequence), -EBADMSG (a CRC or record structure that does not check, offset
 * deltas that do not rise from 0 to the last offset delta), -EFBIG (larger than
 * max.message.bytes), TFS_EUNSUPPORTED (magic 0/1). Otherwise
 * as tfs_plog_append. */
int tfs_plog_append_batch(struct tfs_plog *pl, uint8_t *batch, size_t len, bool durable,
                          tfs_offset_t *first, size_t *count, tfs_plog_records_fn committed,
                          void *arg);
/* ---- transactions of the engine's own (plog_txn.c) ----
 *
 * A transaction is Kafka's, written as a broker writes a transactional
 * producer's: data batches with the transactional bit, the producer id and
 * epoch it was begun with and consecutive sequences from 0, then one control
 * batch, COMMIT or ABORT. Its records name no key until the COMMIT is written;
 * the key directory then takes them with the marker, in the same publish (an
 * ABORT's never do). So readers of keys see all of a transaction or none of it.
 * An ABORT is noted in the .txnindex of the segment that holds it (segment.h).
 * The last stable offset (tfs_plog_last_stable_offset) is the first offset of
 * the oldest open transaction, else the log end. A transaction left open by a
 * crash is aborted when the partition next opens (not read-only): its writer
 * is gone and nothing can commit it any more.
 *
 *   begin --append*--> open --commit--> COMMIT written, keys visible, freed
 *                           \--abort---> ABORT written (nothing if no data), freed
 *
 * A key also written outside the transaction while it is open: its newest
 * record by offset wins, as in the log (Kafka's rule for compaction), except
 * that a tombstone written outside after the transaction's record and before
 * its COMMIT is not remembered by the key directory: the COMMIT then brings
 * the key back until the cleaner or the next open settles it.
 * Threads: one transaction is used by one thread at a time (its owner's lock). */
struct tfs_plog_txn;

/* Begins a transaction of producer_id (>= 0, from tfs_engine_producer_id) and
 * epoch on pl. Nothing is written yet. Caller owns *out: end it with
 * tfs_plog_txn_end. -ENOMEM, TFS_EREADONLY. */
int tfs_plog_txn_begin(struct tfs_plog *pl, int64_t producer_id, int16_t epoch,
                       struct tfs_plog_txn **out);
/* Appends count records as one transactional batch (one unit, all or none, as
 * tfs_plog_append). Keys stay unseen until the commit. Errors: as
 * tfs_plog_append; TFS_EFENCED / TFS_ESEQUENCE if another writer took the
 * producer id. A failed append leaves the transaction open (abort it). */
int tfs_plog_txn_append(struct tfs_plog_txn *t, const struct tfs_append_rec *recs, size_t count);
/* Records appended by t so far. */
size_t tfs_plog_txn_records(const struct tfs_plog_txn *t);
/* Ends t: commit writes COMMIT and makes its keys visible, else ABORT (a
 * transaction that appended nothing writes no marker). durable: as
 * tfs_plog_append. Frees t whatever the result (NULL ok: 0). Errors: the
 * marker's append errors; the transaction then stays open in the log until the
 * next open aborts it, and its keys stay unseen. */
int tfs_plog_txn_end(struct tfs_plog_txn *t, bool commit, bool durable);

/* fn(arg, keys, n) is called by tfs_plog_txn_end once a COMMIT is written,
 * with the keys the transaction wrote (borrowed for the call; a key written
 * twice is there twice), so that a caller can act on them. */
typedef void (*tfs_plog_keys_fn)(void *arg, const struct tfs_slice *keys, size_t n);
void tfs_plog_txn_on_commit(struct tfs_plog_txn *t, tfs_plog_keys_fn fn, void *arg);
/* Frees t without writing anything: its transaction, if it appended, stays
 * open in the log until the next open aborts it. Touches no partition (it may
 * follow the log's close). NULL ok. */
void tfs_plog_txn_discard(struct tfs_plog_txn *t);

/* The last stable offset: the first offset of the oldest open transaction,
 * else the log end offset. Any thread. */
tfs_offset_t tfs_plog_last_stable_offset(struct tfs_plog *pl);
/* Copies into out[0, cap) the aborted transactions whose ABORT marker is at or
 * past from and whose first offset is below upto, in marker order (what a
 * read_committed fetch of [from, upto) needs); returns how many exist. */
size_t tfs_plog_aborted_txns(struct tfs_plog *pl, tfs_offset_t from, tfs_offset_t upto,
                             struct tfs_aborted_txn *out, size_t cap);
/* The state of the transactional record at offset of producer_id: open (no
 * marker yet), committed, or aborted. */
enum tfs_txn_state { TFS_TXN_NONE = 0, TFS_TXN_OPEN, TFS_TXN_COMMITTED, TFS_TXN_ABORTED };
enum tfs_txn_state tfs_plog_txn_state(struct tfs_plog *pl, int64_t producer_id,
                                      tfs_offset_t offset);

/* Makes every record appended so far durable. */
int tfs_plog_sync(struct tfs_plog *pl);
/* Fsyncs if the oldest unsynced append is older than max_age_ms (flush.ms). */
int tfs_plog_flush_if_older(struct tfs_plog *pl, int64_t max_age_ms);
/* Closes the active segment now (it becomes cleanable); a no-op on an empty one. */
int tfs_plog_roll(struct tfs_plog *pl);

/* Key directory access (under the partition's read lock). */
int tfs_plog_lookup(struct tfs_plog *pl, struct tfs_slice key, struct tfs_keyinfo *info);
size_t tfs_plog_live_keys(struct tfs_plog *pl);
/* false once a key-directory update ran out of memory: the directory misses
 * records of the log (lookups and scans say -EIO), so its count means nothing
 * either, until a reopen rebuilds it. */
bool tfs_plog_keys_trusted(struct tfs_plog *pl);
/* Visits live keys in cursor order; see tfs_keydir_scan. The visitor runs under the
 * partition's read lock: it must not call back into this partition. */
int tfs_plog_scan_keys(struct tfs_plog *pl, bool after_valid, uint64_t after_hash,
                       tfs_keydir_visit_fn fn, void *arg);

/* A record copied out of the log: owns its bytes. */
struct tfs_record_copy {
	tfs_offset_t offset;
	int64_t timestamp;
	uint8_t *key;                  /* NULL if key_null; malloc'd */
	size_t key_len;
	bool key_null;
	uint8_t *value;                /* malloc'd (may be NULL when value_len == 0) */
	size_t value_len;
	bool value_null;
	uint8_t *headers;              /* raw encoded headers (walk with tfs_header_next) */
	size_t headers_len;
	uint32_t header_count;
	struct tfs_batch_header batch; /* the header of the batch that holds it */
};
void tfs_record_copy_release(struct tfs_record_copy *rc);

/* Reads the newest record of key into *out (pinned: later appends or a cleaner
 * swap do not change it). -ENOENT if the key is not live; TFS_EDAMAGED (not
 * logged: the open logged the damage once) if its newest readable record
 * precedes an unreadable region of a sealed segment, which may hold a newer
 * one (see tfs_plog_damage). */
int tfs_plog_read_key(struct tfs_plog *pl, struct tfs_slice key, struct tfs_record_copy *out);
/* tfs_plog_read_key with the record at the key's offset fetched by read(arg, pl,
 * offset, out) instead of tfs_plog_read_offset (a caller's cache of windows, say);
 * read returns what tfs_plog_read_offset would. The lookup, the retries when the
 * key's record was cleaned away between lookup and read, and the check that the
 * record holds the key stay here. */
typedef int (*tfs_plog_offset_reader)(void *arg, struct tfs_plog *pl, tfs_offset_t offset,
                                      struct tfs_record_copy *out);
int tfs_plog_read_key_via(struct tfs_plog *pl, struct tfs_slice key, tfs_plog_offset_reader read,
                          void *arg, struct tfs_record_copy *out);
/* Reads the record at exactly offset. -ENOENT if it is not on disk (never
 * written, cleaned away, or below the log start). */
int tfs_plog_read_offset(struct tfs_plog *pl, tfs_offset_t offset, struct tfs_record_copy *out);

/* A cursor over the records on disk from an offset on (history views, dump,
 * verify, the cleaner's readers). It pins the segment list it started with. */
struct tfs_plog_cursor;
int tfs_plog_cursor_open(struct tfs_plog *pl, tfs_offset_t from, struct tfs_plog_cursor **out);
/* Returns 1 with *r filled (slices valid until the next call), 0 at the end, or an
 * error (TFS_ECORRUPT names the segment and position in the log). bh, if not NULL,
 * receives the header of the record's batch. */
int tfs_plog_cursor_next(struct tfs_plog_cursor *c, struct tfs_record *r,
                         struct tfs_batch_header *bh);
void tfs_plog_cursor_close(struct tfs_plog_cursor *c);

/* Offsets of key's records still on disk, ascending; *out malloc'd (caller frees).
 * Control records (transaction markers) never count, whatever their key bytes. */
int tfs_plog_key_versions(struct tfs_plog *pl, struct tfs_slice key, tfs_offset_t **out,
                          size_t *count);

/* An unreadable region of a sealed segment, found when the partition opened
 * (rules in engine/format/batch_reader.h). Its bytes read as TFS_ECORRUPT; nothing cuts it but
 * topicctl repair. */
struct tfs_plog_damage {
	tfs_offset_t segment_base;       /* of the segment: <segment_base>.log */
	tfs_pos_t pos, end;              /* the unreadable bytes [pos, end) of that file */
	tfs_offset_t first, next;        /* the offsets [first, next) that may have been there */
	const char *why;                 /* static: what the first bad batch failed */
};
/* Copies the regions of the current segments, in log order, into out[0, cap)
 * and returns how many there are (0: the log reads whole). */
size_t tfs_plog_damage(struct tfs_plog *pl, struct tfs_plog_damage *out, size_t cap);

struct tfs_plog_stats {
	tfs_offset_t log_start_offset;
	tfs_offset_t log_end_offset;
	int64_t size_bytes;
	int segments;
	size_t live_keys;                  /* too low when keys_failed: not to be shown */
	bool keys_failed;                  /* the key directory missed an update (out of
	                                    * memory): key reads fail until a reopen */
	int64_t active_segment_bytes;
	tfs_offset_t active_base_offset;
	int64_t keydir_memory_bytes;
};
void tfs_plog_stats(struct tfs_plog *pl, struct tfs_plog_stats *st);

struct tfs_pstate_entry;
/* Copies up to cap of the partition's producers (producer_state.h), by id, into
 * out; returns how many there are. Any thread. */
size_t tfs_plog_producers(struct tfs_plog *pl, struct tfs_pstate_entry *out, size_t cap);

/* The directory path (borrowed, valid until close). */
const char *tfs_plog_path(const struct tfs_plog *pl);

/* ---- point reads through verified windows (plog_read.c) ----
 *
 * A window is a private copy of a run of whole batches of one segment, read with
 * one I/O around a wanted offset, each batch checked (CRC and record structure)
 * once, with an index from offset to record: copying one record out of it costs
 * a binary search and the parse of that record. It covers the offsets
 * [first, last] of its batches, and stays true for this partition log for as long
 * as the log is open: records are never changed, renumbered or brought back, only
 * dropped (a record the cleaner dropped since is still in an older window, which
 * is harmless: the key directory no longer names it). So a caller may keep
 * windows and reuse them, keyed by the partition log and an offset range, as long
 * as it also holds what keeps the log open (a topic reference): a pointer to a
 * closed log may be reused by a new one.
 * tfs_plog_read_key and tfs_plog_read_offset are built on windows too.
 * Threads: a window is immutable; any number of threads may copy from it. */
struct tfs_plog_window;

/* Reads the window that holds offset. Caller owns *out; tfs_plog_window_free.
 * -ENOENT if offset is not in the log (never written, cleaned away, below the log
 * start), TFS_ECORRUPT (logged) if the batches on the way to it cannot be read. */
int tfs_plog_window_read(struct tfs_plog *pl, tfs_offset_t offset, struct tfs_plog_window **out);
void tfs_plog_window_free(struct tfs_plog_window *w);
/* The offsets the window's batches cover; a record in [first, last] that the
 * window lacks is not in the log. */
void tfs_plog_window_range(const struct tfs_plog_window *w, tfs_offset_t *first,
                           tfs_offset_t *last);
/* Bytes of memory the window holds (for a cache's bound). */
size_t tfs_plog_window_memory(const struct tfs_plog_window *w);
/* Copies the record at offset (inside the window's range) into *out. -ENOENT if
 * the log has no record there, TFS_ECORRUPT (logged) if its batch failed its checks.
 * out->batch is the header of the batch as the window read it: a cleaning pass
 * since may have rewritten that batch (same base offset, other CRC, count and
 * attributes); callers that show batch fields read the log instead. */
int tfs_plog_window_copy(const struct tfs_plog_window *w, tfs_offset_t offset,
                         struct tfs_record_copy *out);

#endif
