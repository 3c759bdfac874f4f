/* cleaner_internal.h - what the cleaner's files share: the manager
 * (cleaner_manager.c), one pass (cleaner_pass.c and its phases: cleaner_txn.c,
 * cleaner_select.c, cleaner_map.c, cleaner_fate.c), the swap (cleaner_swap.c), the
 * checkpoint file (cleaner_checkpoint.c), the cleaner log and the throttler
 * (cleaner_log.c) and retention (retention.c). Not for use outside them (tests
 * excepted: they check grouping and the checkpoint format directly).
 * A partition log is reached only through engine/log/plog_cleaning.h (its
 * contract C1-C5, docs/engine.md §10), never its private state.
 */
#ifndef TFS_CLEANER_INTERNAL_H
#define TFS_CLEANER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/format/batch_codec.h"
#include "engine/cleaner/cleaner.h"
#include "engine/cleaner/offset_map.h"
#include "engine/log/plog_cleaning.h"
#include "engine/log/segment.h"
#include "engine/ondisk.h"
#include "engine/topic_config.h"

/* Kafka's producer.id.expiration.ms default: a producer idle this long is no longer
 * "active", and its last batch need not be kept. */
#define TFS_PRODUCER_EXPIRATION_MS 86400000LL

/* ---- one pass's figures ---- */

struct tfs__clean_stats {
	int64_t start_ms;              /* wall clock: the pass's "now" */
	int64_t elapsed_us;            /* monotonic */
	int64_t map_us;                /* time spent building the offset map */
	tfs_offset_t first_dirty;      /* range indexed: [first_dirty, end_offset) */
	tfs_offset_t end_offset;       /* the new checkpoint */
	tfs_offset_t first_uncleanable;
	int64_t map_bytes_read, map_records_read;
	int64_t bytes_read, bytes_written;      /* recopy */
	int64_t records_read, records_kept, records_dropped;
	int64_t batches_rebuilt, batches_copied, batches_emptied, batches_dropped;
	int64_t tombstones_stamped;
	/* kept tombstones below first_dirty without a delete horizon: no pass had
	 * them in its map (each stamps those it keeps), so the checkpoint was past
	 * offsets never cleaned; left unstamped, and the next pass starts over */
	int64_t tombstones_unstamped;
	int64_t size_before, size_after;        /* of the recopied groups */
	int64_t log_bytes;             /* every segment of the pass's list, before */
	tfs_offset_t log_start, log_end, active_base;   /* of the pass's list */
	enum tfs_cleaner_not_cleanable uncleanable_why; /* what set first_uncleanable */
	int groups, groups_swapped;
	double buffer_utilization;     /* map size / slots */
	bool map_full;                 /* the dedupe buffer filled: the pass stopped early */
	bool nothing_to_do;
};

/* ---- producer and transaction state read from the log (cleaner_txn.c) ---- */

struct tfs__producer {
	int64_t pid;                   /* -1: empty slot */
	int16_t epoch;
	tfs_offset_t last_data;        /* last offset of the last data batch (this epoch), -1 */
	int64_t last_ts;
	tfs_offset_t txn_first;        /* first offset of the open transaction, -1 */
	bool committed_open;           /* recopy: a committed txn's data seen, marker not yet */
};

struct tfs__aborted_txn {
	int64_t pid;
	tfs_offset_t first, last;      /* data from first; the ABORT marker at last */
	bool observed;                 /* recopy: a data batch of it was seen this pass */
};

struct tfs__txn_state {
	struct tfs__producer *prod;    /* open addressing by pid */
	size_t prod_cap, prod_count;
	struct tfs__aborted_txn *aborted;   /* sorted by (pid, first) after the scan */
	size_t aborted_count, aborted_cap;
	tfs_offset_t first_unstable;   /* first offset of the oldest open txn, or -1 */
	bool any;                      /* some segment had producer ids */
};

/* The type of the transaction marker in a control batch (TFS_CONTROL_ABORT,
 * TFS_CONTROL_COMMIT, ...), or -1 when its first record is no marker. it is
 * reset on the batch. (cleaner_txn.c; lag.c counts by it too.) */
int tfs__control_type(struct tfs_record_iter *it, const uint8_t *batch, size_t len);
void tfs__txn_state_init(struct tfs__txn_state *t);
void tfs__txn_state_release(struct tfs__txn_state *t);

/* A sequential reader of one segment's whole batches through a reusable buffer. */
struct tfs__seg_reader {
	struct tfs_segment *seg;
	tfs_pos_t pos, limit;          /* next batch; committed size */
	uint8_t **buf;                 /* the owner's buffer, grown as needed */
	size_t *cap;
	size_t chunk;
	tfs_pos_t win_start;
	size_t win_len;
	struct tfs_cleaner *c;         /* for throttling; may be NULL */
	int64_t *bytes_read;           /* counter to add to; may be NULL */
	const atomic_bool *abort;      /* cuts a throttle sleep short; may be NULL */
	char *why;                     /* gets "<file> at position <n>: <reason>" on
	                                * TFS_ECORRUPT; may be NULL */
	size_t why_cap;
};

void tfs__seg_reader_init(struct tfs__seg_reader *r, struct tfs_segment *seg, tfs_pos_t from,
                          uint8_t **buf, size_t *cap, size_t chunk, struct tfs_cleaner *c,
                          int64_t *bytes_read);
/* 1 with *h and *batch (the whole batch, CRC-checked, valid until the next call;
 * *at its position), 0 at the end, TFS_ECORRUPT (logged), or an I/O error. */
/* Logs a corrupt batch at the reader's position (and keeps the reason in r->why);
 * returns TFS_ECORRUPT. */
int tfs__seg_reader_corrupt(struct tfs__seg_reader *r, const char *why);
int tfs__seg_reader_next(struct tfs__seg_reader *r, struct tfs_batch_header *h,
                         const uint8_t **batch, tfs_pos_t *at);

/* Reads every segment of l flagged has_producer_ids: producers, aborted
 * transactions and the first unstable offset, as Kafka's producer state would hold
 * them after replaying the log. buf/cap: a reusable read buffer. */
int tfs__txn_scan(struct tfs__txn_state *t, const struct tfs_seglist *l, uint8_t **buf,
                  size_t *cap, size_t chunk, struct tfs_record_iter *it, struct tfs_cleaner *c);

/* ---- choosing what to clean (cleaner_select.c) ---- */

struct tfs__log_to_clean {
	tfs_offset_t log_start, log_end;
	tfs_offset_t first_dirty;      /* after the checkpoint reset rule */
	tfs_offset_t first_uncleanable;/* rounded down to a segment base */
	int64_t clean_bytes, cleanable_bytes, total_bytes;
	double ratio;
	bool need_compaction_now;      /* max.compaction.lag.ms passed */
	int64_t compaction_delay_ms;
	bool checkpoint_reset;         /* checkpoint was < log start or > log end */
	enum tfs_cleaner_not_cleanable why;   /* what set first_uncleanable */
};

/* Kafka's cleanableOffsets + LogToClean for l (the caller's pinned list):
 * checkpoint < 0 means none. first_unstable: from tfs__txn_scan, or -1. */
void tfs__log_to_clean(const struct tfs_seglist *l, tfs_offset_t log_end,
                       const struct tfs_topic_config *cfg, tfs_offset_t checkpoint,
                       tfs_offset_t first_unstable, int64_t now_ms,
                       struct tfs__log_to_clean *out);

/* Kafka's groupSegmentsBySize over segs[0..n) (the segments overlapping
 * [log start, end offset)): writes the exclusive end index of each group into
 * ends[] (capacity n) and returns the number of groups. */
int tfs__group_segments(struct tfs_segment *const *segs, int n, int64_t max_bytes,
                        int64_t max_index_bytes, tfs_offset_t first_uncleanable, int *ends);

/* ---- the per-thread context ---- */

/* What the map build learnt about each offset of [start, start + len), so that the
 * recopy can decide most records without hashing their keys again (cleaner_map.c,
 * "Verdicts"). Valid for the pass that filled it, and only if ok. */
struct tfs__verdicts {
	uint64_t *dead;                /* bit i: offset start + i was put and superseded */
	uint64_t *tomb;                /* bit i: offset start + i was put as a tombstone */
	size_t words_cap;              /* words allocated in each */
	tfs_offset_t start;
	size_t len;                    /* offsets covered, <= words_cap * 64 */
	/* the batches the build read whole, by (index in the pass's segment list,
	 * position): [from, to) in that order */
	int seg_from, seg_to;
	tfs_pos_t pos_from, pos_to;
	bool ok;                       /* offsets rose strictly: every bit is one record's */
};

/* One record of the batch being decided by the recopy. */
struct tfs__rec_verdict {
	struct tfs_offset_map_fp fp;   /* when lookup */
	tfs_offset_t offset;
	size_t record_bytes;           /* key + value */
	bool lookup;                   /* the map decides it */
	bool tombstone;
	enum tfs_cleaner_fate fate;    /* the decision (after the lookups, if any) */
	bool keep;                     /* tfs_cleaner_fate_keeps(fate) */
};

struct tfs__cleaner_ctx {
	struct tfs_cleaner *c;
	int slot;                      /* index into the cleaner's per-thread figures */
	size_t map_bytes;              /* this thread's share of the dedupe buffer */
	double load_factor;
	struct tfs_offset_map *map;    /* created at the first pass, reused */
	uint8_t *rbuf;                 /* read buffer, grows up to a batch, shrinks back */
	size_t rcap, rchunk;
	uint8_t *wbuf;                 /* output buffer */
	size_t wcap, wlen;
	struct tfs_batch_builder builder;
	struct tfs_record_iter it;
	struct tfs_header *hdrs;       /* a record's headers, for re-encoding */
	size_t hcap;
	struct tfs__rec_verdict *rv;   /* per-record decisions of the current batch */
	size_t rv_cap, rv_count;
	struct tfs__verdicts v;
	struct tfs__txn_state txn;
	const atomic_bool *abort;      /* the current pass's, for throttle sleeps */
	char why[TFS_CLEANER_LINE_MAX];/* where and why the last pass failed, or "" */
};

/* Sizes come from the cleaner config: the map is created at the first pass. */
int tfs__cleaner_ctx_init(struct tfs__cleaner_ctx *x, struct tfs_cleaner *c, int slot,
                          size_t map_bytes, double load_factor, size_t io_bytes);
void tfs__cleaner_ctx_release(struct tfs__cleaner_ctx *x);

/* What one pass works on. */
struct tfs__pass_in {
	struct tfs_plog *pl;
	const char *name;              /* "<topic>-<partition>" for log lines */
	struct tfs_topic_config cfg;   /* a copy taken at the start */
	int64_t now_ms;
	tfs_offset_t checkpoint;       /* -1: none */
	atomic_bool *abort;            /* set by unregister */
	atomic_bool *stop;             /* set by tfs_cleaner_stop */
	/* A dry run (tfs_cleaner_dry_run): every decision is made and every output
	 * batch built and measured, but no file is created, written or swapped. */
	bool dry;
	tfs_cleaner_fate_fn fate_fn;   /* may be NULL: each recopied record's fate */
	void *fate_arg;
};

/* One cleaning pass (docs/cleaner.md §3-§6): selection figures, offset map, recopy of every
 * group up to the map's end, a swap per group. On success st->end_offset is the new
 * checkpoint. -ECANCELED when aborted (nothing of the current group is left behind;
 * groups already swapped stay swapped, which is harmless). */
int tfs__clean_pass(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                    struct tfs__clean_stats *st);

/* ---- the phases of a pass, one file each ---- */

/* The reader's buffer back to its default size after a segment that needed a big
 * one; whether the pass was aborted (unregister) or the cleaner stopped
 * (cleaner_pass.c). */
void tfs__ctx_shrink_rbuf(struct tfs__cleaner_ctx *x);
bool tfs__pass_aborted(const struct tfs__pass_in *in);

static inline int64_t tfs__sat_add(int64_t a, int64_t b)
{
	return (b > 0 && a > INT64_MAX - b) ? INT64_MAX : a + b;
}

static inline bool tfs__batch_is_control(const struct tfs_batch_header *h)
{
	return h->attributes & TFS_ATTR_CONTROL;
}

static inline bool tfs__batch_is_transactional(const struct tfs_batch_header *h)
{
	return h->attributes & TFS_ATTR_TRANSACTIONAL;
}

/* cleaner_txn.c. The aborted transaction of pid whose range holds offset, or
 * NULL. Whether h (a batch of producer data or a marker) is its producer's last,
 * which keeps it (empty if need be) while the producer is active at now_ms.
 * Whether h may be discarded for its transaction (Kafka's
 * CleanedTransactionMetadata.onBatchRead / onControlBatchRead); marks what it saw
 * in x->txn. b is the batch's bytes. */
struct tfs__aborted_txn *tfs__txn_aborted_find(const struct tfs__txn_state *t, int64_t pid,
                                             tfs_offset_t offset);
bool tfs__txn_last_batch_of_producer(const struct tfs__cleaner_ctx *x,
                                     const struct tfs_batch_header *h, int64_t now_ms);
bool tfs__txn_can_discard(struct tfs__cleaner_ctx *x, const struct tfs_batch_header *h,
                          const uint8_t *b);

/* cleaner_map.c: the verdict bitmaps over [start, end), as many offsets as their
 * share of the dedupe buffer allows (x->v.ok false when none); the offset map over
 * [start, end) of l, 0 (full or not: st->map_full) or an error. */
#define TFS__BITS_PER_WORD 64
void tfs__verdicts_begin(struct tfs__cleaner_ctx *x, tfs_offset_t start, tfs_offset_t end);
int tfs__build_map(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                   const struct tfs_seglist *l, tfs_offset_t start, tfs_offset_t end,
                   struct tfs__clean_stats *st);

static inline bool tfs__verdict_covers(const struct tfs__verdicts *v, tfs_offset_t o)
{
	return o >= v->start && (uint64_t)(o - v->start) < v->len;
}

static inline bool tfs__bit_get(const uint64_t *w, uint64_t i)
{
	return (w[i / TFS__BITS_PER_WORD] >> (i % TFS__BITS_PER_WORD)) & 1;
}

/* Over bits [a, b]: how many are dead, and how many are tombstones not dead. */
void tfs__verdict_count(const struct tfs__verdicts *v, uint64_t a, uint64_t b, int64_t *dead,
                        int64_t *live_tombs);
/* Whether the build read the batch at position pos of segment seg (index in the
 * pass's list) whole. */
bool tfs__verdict_read_whole(const struct tfs__verdicts *v, int seg, tfs_pos_t pos);

/* What every batch of a group is decided against. */
struct tfs__group_ctx {
	const struct tfs__pass_in *in;
	tfs_offset_t latest;            /* the map's latest offset */
	tfs_offset_t upper_bound;       /* first uncleanable offset of the pass */
};

/* What the rules say about a batch as a whole (Kafka's checkBatchRetention). */
struct tfs__batch_rules {
	bool control;
	bool can_discard;           /* tfs__txn_can_discard */
	bool drop_records;          /* every record goes */
	bool retain_deletes;        /* a tombstone survives: no horizon yet, or not passed */
	bool has_horizon;
	int64_t horizon;            /* when has_horizon */
};

/* cleaner_fate.c. Decides every record of the batch h, b (x->rv[0..rv_count)):
 * fills x->rv[].fate and .keep and returns 0 with *kept and *tombstone_kept, or
 * an error; use_bits: the verdict bits may answer for the records they cover.
 * report_fates tells the dry run's observer (in->fate_fn) each fate decided;
 * producer_state: the batch stays (empty) only as its producer's last. */
int tfs__decide_records(struct tfs__cleaner_ctx *x, const struct tfs__group_ctx *g,
                        const struct tfs_batch_header *h, const uint8_t *b,
                        const struct tfs__batch_rules *br, bool use_bits, int32_t *kept,
                        bool *tombstone_kept);
void tfs__report_fates(const struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                       const struct tfs__batch_rules *br, bool producer_state);

/* ---- swap (cleaner_swap.c) ---- */

/* Replaces old[0..n) (consecutive in pl's list) by fresh, whose .cleaned files are
 * written and fsynced: .cleaned -> .swap, directory fsync (the commit point),
 * publish the new list, old files -> .deleted (unlinked at their last unref, their
 * fds kept open for readers), .swap -> final names, directory fsync. Runs as the
 * group-commit leader. On an error before the commit point the .swap/.cleaned files
 * are removed and the log is unchanged; after it, the in-memory log is the new one
 * and recovery finishes the disk side at the next open. */
int tfs__swap_group(struct tfs_plog *pl, struct tfs_segment *const *old, int n,
                    struct tfs_segment *fresh, bool *committed);

/* ---- checkpoint file (cleaner_checkpoint.c) ---- */

struct tfs__ckpt_entry {
	char *topic;                   /* owned */
	int32_t partition;
	tfs_offset_t offset;
};

/* Parses Kafka's text format ("0\n<N>\n<topic> <partition> <offset>\n"...). *out is
 * malloc'd (free with tfs__ckpt_free). -ENOENT if missing, TFS_ECORRUPT (logged) if
 * malformed: wrong version, count mismatch, bad line. */
int tfs__ckpt_read(struct tfs_io *io, int dirfd, struct tfs__ckpt_entry **out, size_t *n);
/* Formats / parses without I/O. Format returns a malloc'd string, which the
 * manager writes with tfs_file_replace once it has let go of its lock. */
char *tfs__ckpt_format(const struct tfs__ckpt_entry *e, size_t n, size_t *len);
int tfs__ckpt_parse(const char *text, size_t len, struct tfs__ckpt_entry **out, size_t *n);
void tfs__ckpt_free(struct tfs__ckpt_entry *e, size_t n);

/* ---- the cleaner log and the throttler (cleaner_log.c) ---- */

struct tfs__cleaner_log {
	pthread_mutex_t lock;          /* leaf */
	struct tfs_io *io;
	int dirfd;                     /* borrowed */
	int fd;                        /* -1 when it could not be opened */
	uint64_t pos;
};

int tfs__cleaner_log_open(struct tfs__cleaner_log *l, struct tfs_io *io, int dirfd);
void tfs__cleaner_log_close(struct tfs__cleaner_log *l);
/* Appends one line (timestamp prefix and newline added). Failures are logged once
 * to the process log and otherwise ignored: the cleaner log is informational. */
void tfs__cleaner_log_line(struct tfs__cleaner_log *l, int64_t now_ms, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Kafka's Throttler: one for all threads; sleeps (holding its lock, so the threads
 * are throttled together) when the rate observed over a period of at least 300 ms
 * exceeds the desired rate. A stop request cuts a sleep short. */
struct tfs__throttler {
	pthread_mutex_t lock;          /* leaf */
	pthread_cond_t wake;
	double rate;                   /* bytes per second; <= 0 or >= DBL_MAX: unbounded */
	int64_t period_start_ms;       /* monotonic */
	int64_t observed;
	atomic_int_fast64_t total;     /* every byte seen (the io meter) */
	atomic_int_fast64_t slept_ms;
	bool stopping;
	void (*on_sleep)(void *arg);   /* tests: a sleep begins (tfs_cleaner_hooks) */
	void *on_sleep_arg;
};

void tfs__throttler_init(struct tfs__throttler *t, double rate);
void tfs__throttler_release(struct tfs__throttler *t);
void tfs__throttler_stop(struct tfs__throttler *t, bool stopping);
/* Counts bytes and sleeps if the rate is over; abort (may be NULL) cuts the
 * sleep short within THROTTLE_POLL_MS, for a pass whose partition goes away. */
void tfs__throttle(struct tfs__throttler *t, int64_t bytes, const atomic_bool *abort);

/* A cleaner thread's share of the dedupe buffer and of the I/O buffers
 * (cleaner_dry_run.c): what every pass of a cleaner built from cfg works with. */
void tfs__cleaner_thread_sizes(const struct tfs_cleaner_config *cfg, size_t *map_bytes,
                               size_t *io_bytes);

/* The manager's entry points used by the pass. */
struct tfs__throttler *tfs__cleaner_throttler(struct tfs_cleaner *c);
int64_t tfs__cleaner_now(struct tfs_cleaner *c);

/* ---- retention (retention.c) ---- */

struct tfs__retention_result {
	int segments;
	int64_t bytes;
	tfs_offset_t log_start;        /* after */
	size_t keys_removed;
	bool rolled;                   /* the active segment went: a roll came first */
};

/* Deletes the prefix of segments past retention.ms (largest timestamp older than
 * now - retention.ms) or beyond retention.bytes, as the group-commit leader; keys
 * whose newest record was in them leave the key directory. A non-empty active
 * segment that expires is rolled and deleted too: the log end offset stays, and the
 * log start offset becomes it. No-op unless the policy has delete. */
int tfs__retention_apply(struct tfs_plog *pl, const struct tfs_topic_config *cfg, int64_t now_ms,
                         struct tfs__retention_result *out);

#endif
