/* segment.h - one log segment: a .log file of record batches, its in-memory offset
 * and time indexes, and their Kafka-format .index / .timeindex files.
 *
 * Owns: the fd slot of its .log (through the fd cache: no descriptor is held
 * between operations unless pinned) and its index arrays, allocated at the first
 * index entry (an idle partition's segment costs its struct and two paths).
 *
 * Files (base = base offset printed as 20 zero-padded decimal digits):
 *   <base>.log        record batches back to back, no header, no padding
 *   <base>.index      OFFSET SIZE DESCRIPTION (8 bytes an entry, big-endian)
 *                          0    4 relative offset (batch's last offset - base)
 *                          4    4 position of that batch in the .log
 *   <base>.timeindex       0    8 max timestamp seen so far
 *                          8    4 relative offset of the record with it
 *   <base>.txnindex        0    2 version = 0  (34 bytes an entry, Kafka's AbortedTxn)
 *                          2    8 producer id
 *                         10    8 first offset of the aborted transaction
 *                         18    8 last offset: the offset of its ABORT marker
 *                         26    8 last stable offset once the marker was written
 *     One entry per aborted transaction whose ABORT marker is in this segment, in
 *     marker order; no file when there is none. Derived data like the other two:
 *     the open-time scan rebuilds it, and a file is valid if and only if its size
 *     is 34 * N, every version is 0 and it names the transactions (producer id,
 *     marker offset) whose ABORT marker the scan met here, in order.
 *
 * An index entry is added before appending a batch once more than
 * index.interval.bytes (4096) were appended since the last entry (Kafka's rule, so
 * the first batch of a segment is never indexed). Lookup: the largest entry whose
 * offset is <= the target, else position 0; then scan forward.
 *
 * Invariants: (1) batch base offsets strictly increase; gaps are normal after
 *   cleaning. (2) size counts only whole batches that were written completely; a
 *   torn tail is never counted. (3) a sealed segment is never written again, only
 *   replaced. (4) index entries strictly increase in offset and position.
 *
 * Threads: tfs_segment_append_index and the size/next_offset updates happen under
 * the partition's write lock; lookups under its read lock; reads from any thread
 * holding a reference. Errors: 0 or a negative errno / TFS_E*.
 */
#ifndef TFS_SEGMENT_H
#define TFS_SEGMENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/types.h"
#include "io/file_util.h"

#define TFS_SEGMENT_NAME_DIGITS 20
#define TFS_INDEX_ENTRY_BYTES 8
#define TFS_TIMEINDEX_ENTRY_BYTES 12
#define TFS_TXNINDEX_ENTRY_BYTES 34
#define TFS_TXNINDEX_VERSION 0

struct tfs__tally;

struct tfs_index_entry {
	int32_t rel_offset;
	int32_t pos;
};

struct tfs_timeindex_entry {
	int64_t timestamp;
	int32_t rel_offset;
};

/* An unreadable run of a sealed segment's .log, found by the open-time scan
 * (log_recovery.c, rules in engine/format/batch_reader.h): bytes [pos, end) cannot be read, and
 * the offsets [first, next) that were there are unknown. next is the base offset
 * of the first readable batch after it (or the next segment's base). */
struct tfs_seg_damage {
	tfs_pos_t pos, end;
	tfs_offset_t first, next;
	const char *why;                   /* static */
};

struct tfs_segment {
	tfs_offset_t base_offset;
	atomic_int refs;
	char *dir;                         /* owned copy of the partition directory */
	struct tfs_fdslot log;             /* the .log file, through the fd cache */
	struct tfs_fdcache *fdcache;       /* borrowed */
	struct tfs_io *io;                 /* borrowed */

	atomic_int_fast64_t size;          /* bytes of whole batches (release/acquire) */
	tfs_offset_t next_offset;          /* last offset + 1; base when empty */
	int64_t max_timestamp;             /* -1 when empty */
	tfs_offset_t max_timestamp_offset;
	int64_t first_batch_timestamp;     /* max timestamp of the first batch, -1 */
	int64_t created_ms;                /* wall clock at creation or open */

	struct tfs_index_entry *index;
	uint32_t index_count, index_cap;
	struct tfs_timeindex_entry *tindex;
	uint32_t tindex_count, tindex_cap;
	/* Aborted transactions whose marker is here, by marker offset: appended
	 * under the partition's write lock, read under its read lock. */
	struct tfs_aborted_txn *aborted;
	uint32_t aborted_count, aborted_cap;
	int64_t bytes_since_index;
	int64_t index_interval_bytes;

	tfs_pos_t corrupt_at;              /* >= 0: the first unreadable byte (damage[0]);
	                                    * the cleaner reads nothing from here on */
	struct tfs_seg_damage *damage;     /* malloc'd, by position; set at open only */
	uint32_t damage_count;
	bool sealed;
	bool deleted;                      /* files renamed .deleted; unlinked after the
	                                    * last unref (tfs_io_unlink_later) */
	bool pinned;                       /* tfs_segment_pin holds a pin */
	/* Some batch carries a producer id (>= 0). Set by recovery's scan and by the
	 * cleaner's output; an append path that writes producer ids must set it too:
	 * the cleaner reads producer and transaction state only from such segments. */
	atomic_bool has_producer_ids;

	/* Flushing ahead (tfs_segment_flush_ahead); the partition's writer only. */
	pthread_t flush_thread;
	bool flush_running;                /* flush_thread started and not yet joined */
	int flush_err;                     /* first failure of a background flush; sticky */
	int flush_admit;                   /* the running flush's fault gate (io.h) */
	tfs_pos_t flush_mark;              /* committed size the last flush started at */

	/* What consumer lag counts in this segment's batches (lag.c), built on the
	 * first question and extended as the segment grows. */
	pthread_mutex_t tally_lock;        /* a leaf */
	struct tfs__tally *tally;          /* under tally_lock; NULL until asked */
};

/* Formats "<dir>/<20 digits><suffix>" into buf. */
void tfs_segment_file_name(char *buf, size_t cap, const char *dir, tfs_offset_t base,
                           const char *suffix);
/* Parses a file name "<20 digits>.<suffix...>": returns 0 and *base, or -EINVAL. */
int tfs_segment_parse_name(const char *name, tfs_offset_t *base, const char **suffix);

/* Creates an empty <base>.log and, with sync_dir, fsyncs the directory (without:
 * the caller's next directory fsync makes it durable). Caller owns the ref. */
int tfs_segment_create(struct tfs_io *io, struct tfs_fdcache *fdc, int dirfd, const char *dir,
                       tfs_offset_t base, int64_t index_interval_bytes, bool sync_dir,
                       struct tfs_segment **out);
/* Opens an existing <base>.log without scanning it (log_recovery.c scans). */
int tfs_segment_open(struct tfs_io *io, struct tfs_fdcache *fdc, const char *dir,
                     tfs_offset_t base, int64_t index_interval_bytes, struct tfs_segment **out);

struct tfs_segment *tfs_segment_ref(struct tfs_segment *s);
/* Drops a reference; the last one closes the fd, frees memory and, if the segment
 * was marked deleted, hands its files to tfs_io_unlink_later. NULL ok. */
void tfs_segment_unref(struct tfs_segment *s);

/* The .log fd for one operation (an append's write, an fsync): opened through the
 * fd cache if it was evicted, and pinned until tfs_segment_fd_put. Returns the fd
 * or -errno (-EMFILE / -ENFILE at the descriptor limit). The active segment holds
 * no fd between operations, so descriptors do not grow with partitions. */
int tfs_segment_fd_get(struct tfs_segment *s);
void tfs_segment_fd_put(struct tfs_segment *s);
/* Pins the .log fd until tfs_segment_unpin or the last unref: for the cleaner's
 * output while a pass writes it, and for a deleted segment still read through an
 * old list (its name may be taken by the next swap of the same base). */
int tfs_segment_pin(struct tfs_segment *s);
void tfs_segment_unpin(struct tfs_segment *s);
/* The pinned fd (after tfs_segment_pin). */
int tfs_segment_fd(struct tfs_segment *s);

/* Reads len bytes at pos (short only past the committed size). */
ssize_t tfs_segment_read(struct tfs_segment *s, void *buf, size_t len, tfs_pos_t pos);
/* The same as a source of the batch reader (tfs_batch_read_fn, batch_reader.h):
 * seg is the struct tfs_segment, borrowed. */
ssize_t tfs_segment_read_fn(void *seg, void *buf, size_t len, tfs_pos_t pos);

/* Records a batch [base..last] of size bytes appended at pos with max_ts, adding
 * index entries by Kafka's rule (LogSegment.append): the segment's max timestamp
 * takes in max_ts (with last as its offset) first, then, if an entry is due, the
 * offset index gets (last, pos) and the time index (max timestamp so far, its
 * offset) when that timestamp is greater than its last entry's. -ENOMEM leaves the
 * indexes unchanged. */
int tfs_segment_note_batch(struct tfs_segment *s, tfs_pos_t pos, size_t size,
                           tfs_offset_t base, tfs_offset_t last, int64_t max_ts);
/* Kafka's final time-index entry (maybeAppend with skipFullCheck, made at roll,
 * at close and after recovery's scan): (max timestamp, its offset) when greater
 * than the last entry's. 0 or -ENOMEM (nothing changed). */
int tfs_segment_timeindex_final(struct tfs_segment *s);
/* Where a search for the first record with a timestamp >= timestamp may start
 * (Kafka's TimeIndex.lookup): one past the offset of the last time-index entry
 * older than timestamp, else the base offset. */
tfs_offset_t tfs_segment_time_lookup(const struct tfs_segment *s, int64_t timestamp);
/* Kafka's largestTimestamp: the largest record timestamp, or, when no record has
 * one, the .log's modification time in ms (now when it cannot be read). Under the
 * partition's lock or as its leader (the active segment's maximum moves). */
int64_t tfs_segment_largest_timestamp(struct tfs_segment *s);
/* Position to start scanning for target (largest index entry <= target). */
tfs_pos_t tfs_segment_lookup(const struct tfs_segment *s, tfs_offset_t target);
/* True when the offset index or the time index can take no more entries
 * (segment.index.bytes; Kafka's isFull of either rolls). */
bool tfs_segment_index_full(const struct tfs_segment *s, int64_t index_bytes);
/* Drops the in-memory indexes (before a rebuild scan). */
void tfs_segment_reset_index(struct tfs_segment *s);

/* Writes .index and .timeindex from memory (tmp + rename, then the directory
 * fsynced) and, with sync, fdatasyncs the .log too: the three fsyncs are waited
 * for together (tfs_io_fsync_all), before either rename. */
int tfs_segment_write_indexes(struct tfs_segment *s, int dirfd, bool sync);
/* tfs_segment_write_indexes in steps, for a roll that adds fsyncs of its own to
 * the same wait: stage writes <base>.index.tmp and .timeindex.tmp whole, fds[]
 * gets their descriptors (not yet fsynced); once the caller has fsynced them,
 * commit closes them and renames both over the old files (the directory fsync
 * is the caller's); unstage closes them and removes the temporary files. On a
 * failure stage leaves nothing behind (fds[] -1). 0 or a negative errno. */
int tfs_segment_stage_indexes(struct tfs_segment *s, int dirfd, int fds[2]);
int tfs_segment_commit_indexes(struct tfs_segment *s, int dirfd, int fds[2]);
void tfs_segment_unstage_indexes(struct tfs_segment *s, int dirfd, int fds[2]);
/* Loads .index/.timeindex and checks them against the in-memory ones built by a
 * scan: returns 1 if the files match, 0 if missing or different. */
int tfs_segment_indexes_match(struct tfs_segment *s);
/* Adds an aborted transaction (marker offset past every one held) to the
 * in-memory list. 0 or -ENOMEM (nothing changed). */
int tfs_segment_add_aborted(struct tfs_segment *s, const struct tfs_aborted_txn *a);
/* Writes <base>.txnindex<suffix> from the in-memory list (suffix "": tmp +
 * rename, else straight, as tfs_segment_write_indexes_to), or removes it when
 * the list is empty. 0 or a negative errno (logged). */
int tfs_segment_write_txnindex(struct tfs_segment *s, int dirfd, const char *suffix);
/* Whether <base>.txnindex names exactly the transactions of the in-memory list
 * (a scan's: producer id and marker offset, in order; no file for an empty
 * one), with first offsets and LSOs no later than the scan's: 1, and the list
 * takes the file's first offsets and LSOs (a cleaned log's scan may no longer
 * see a transaction's first batch); else 0. */
int tfs_segment_txnindex_match(struct tfs_segment *s, int dirfd);
/* Truncates the .log to size (a torn tail). */
int tfs_segment_truncate(struct tfs_segment *s, tfs_pos_t size);
/* Renames the files to *.deleted; they are unlinked, on the io context's thread,
 * once the last ref goes. */
int tfs_segment_mark_deleted(struct tfs_segment *s, int dirfd);

/* ---- flushing ahead (the append path) ----
 * Writes go to the page cache; an fsync then waits for every dirty byte, at the
 * disk's pace. So that a roll, a sync or a durable append does not wait for a whole
 * segment's worth, the writer starts a background fdatasync of the active segment
 * each time flush_ahead_bytes more were committed: the disk works while the writer
 * goes on encoding. It promises nothing: a record is durable only once an fsync
 * that started after it was written returned, as before. A failed background
 * flush is remembered (fsync errors may drop the dirty pages, so a later fsync
 * can succeed without the bytes being on disk) and returned by every later
 * tfs_segment_flush_wait. Each flush is a short-lived thread holding a reference to
 * the segment until it is joined (by the next flush_ahead or by flush_wait, which
 * the writer calls before a roll, a durable write and close).
 * Threads: the partition's writer (the group-commit leader) only. */

/* Starts a background fdatasync when none runs and at least flush_ahead_bytes were
 * committed since the last one started (or since tfs_segment_note_flushed). Not
 * being able to start one is not an error: the next fsync does the work. */
void tfs_segment_flush_ahead(struct tfs_segment *s, int64_t flush_ahead_bytes);
/* Waits for a background flush in flight. Returns 0, or the sticky error of any
 * background flush of this segment that failed. */
int tfs_segment_flush_wait(struct tfs_segment *s);
/* Notes that an fsync made the first upto bytes durable in the foreground. */
void tfs_segment_note_flushed(struct tfs_segment *s, tfs_pos_t upto);

/* ---- the cleaner's output (cleaner_swap.c) ----
 * A cleaned segment is written as <base>.log.cleaned with .index.cleaned and
 * .timeindex.cleaned, renamed to .swap, then to its final names (docs/cleaner.md §7). */

/* Creates an empty <base>.log.cleaned (replacing a stale one); the segment's fd
 * slot names that file. Caller owns the ref. */
int tfs_segment_create_cleaned(struct tfs_io *io, struct tfs_fdcache *fdc, int dirfd,
                               const char *dir, tfs_offset_t base,
                               int64_t index_interval_bytes, struct tfs_segment **out);
/* Writes <base>.index<suffix> and <base>.timeindex<suffix> straight (no temp file:
 * recovery discards unfinished .cleaned files) and fsyncs them and the .log. */
int tfs_segment_write_indexes_to(struct tfs_segment *s, int dirfd, const char *suffix);
/* Renames <base>{.log,.index,.timeindex}<from> to ...<to>, .log first, and points the
 * fd slot at the new .log name after its rename, then .txnindex<from> if there
 * is one. Stops at the first error. */
int tfs_segment_rename_files(struct tfs_segment *s, int dirfd, const char *from, const char *to);
/* Unlinks <base>{.log,.index,.timeindex,.txnindex}<suffix>; missing files are fine. Returns
 * the first other error. */
int tfs_segment_unlink_files(struct tfs_io *io, int dirfd, tfs_offset_t base, const char *suffix);

static inline int64_t tfs_segment_size(const struct tfs_segment *s)
{
	return atomic_load_explicit(&((struct tfs_segment *)s)->size, memory_order_acquire);
}

#endif
