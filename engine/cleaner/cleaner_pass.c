/* cleaner_pass.c - one cleaning pass over one partition (Kafka's Cleaner.doClean,
 * docs/cleaner.md §3-§6).
 *
 * A pass, step by step:
 *
 *   1. read producer and transaction state from the segments that hold producer
 *      ids (tfs__txn_scan): each producer's last data batch and epoch, the aborted
 *      transactions [first data offset, ABORT marker], the first unstable offset;
 *   2. cleanable range (tfs__log_to_clean): [first dirty, first uncleanable), the
 *      latter = min(active base, first segment younger than min.compaction.lag.ms,
 *      first unstable offset), rounded down to a segment base;
 *   3. offset map over that range: every keyed record of a non-aborted data batch;
 *      control batches never enter it. When the map is full the build stops at the
 *      first keyed record that does not fit, even mid-segment (KAFKA-3894): the
 *      pass's end offset is then the map's latest offset + 1, else the range's end
 *      (gaps at segment ends are jumped, KAFKA-8764). Keys are hashed and their
 *      slots prefetched a few records before they are put (struct map_queue), and
 *      the build leaves behind which offsets it superseded ("Verdicts");
 *   4. the segments overlapping [log start, end offset) are grouped
 *      (tfs__group_segments: segment.bytes, segment.index.bytes, int32 offset span);
 *   5. each group is recopied into <base>.log.cleaned (decisions below) and swapped
 *      in (cleaner_swap.c) before the next group is read, so the extra disk space
 *      is about one segment; a group of one segment is written only from its first
 *      change on, and one that came through unchanged is neither written nor
 *      swapped (struct out_seg).
 *
 * Decisions for one batch (Kafka's checkBatchRetention and shouldRetainRecord):
 *
 *   can_discard   data: it belongs to an aborted transaction (the transaction is
 *                 then "observed"); a transactional batch of a committed one marks
 *                 its producer's transaction "open". control: empty -> yes; ABORT
 *                 -> yes unless data of its transaction was observed this pass;
 *                 COMMIT -> yes unless data of its transaction was seen this pass.
 *   drop records  data: can_discard. control: can_discard and its horizon passed.
 *   batch fate    last batch of an active producer -> kept, empty if need be;
 *                 else the batch ending just before the first uncleanable offset ->
 *                 kept, empty if need be; else drop records -> gone unread; else
 *                 kept only if some record survives.
 *   a record      survives unless the batch drops its records; markers survive;
 *                 past the map's latest offset -> survives; keyless -> survives
 *                 (topicfs keeps .append's records; Kafka drops them as invalid);
 *                 else it survives if its offset >= the map's offset for its key
 *                 and it has a value or its batch's horizon has not passed (or it
 *                 has none yet). For a record the build put, the first half is
 *                 read from its dead bit; a batch whose bits say "all dead" or
 *                 "all newest, no tombstone" is decided without decoding it.
 *   writing       every record survives and no horizon is needed -> the batch's
 *                 bytes are copied as they are; some survive -> re-encoded with the
 *                 topic's codec and zstd level (markers keep their codec), same
 *                 base offset, offset deltas, last offset delta, producer
 *                 fields; a batch that keeps a
 *                 tombstone (or a marker of an emptied transaction) and has no
 *                 horizon gets hasDeleteHorizonMs with pass start +
 *                 delete.retention.ms; none survive -> a 61-byte empty batch or
 *                 nothing.
 *
 * Offsets are never renumbered: survivors keep their batch and offset delta.
 *
 * One verdict. Whatever path a record takes (its dead bit, a map lookup, or no
 * question at all), what happens to it is decided by record_fate, which also says
 * why (keep, drop, keep-tombstone, ...). The dry run (cleaner_dry_run.c) is this
 * same pass with `dry` set: no file is created, written or swapped, but every
 * batch is decided and every re-encoded batch built and measured, so what it
 * predicts is what the pass does; its observer gets each record's fate, which is
 * why a dry run decides records one by one where the pass may take a batch whole
 * from its bits (both ask record_fate's rule, tested against each other by
 * tests/engine/test_cleaner_dryrun.c).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

#define PROD_INITIAL_CAP 16
#define DECISIONS_INITIAL_CAP 64
#define US_PER_MS 1000
#define NS_PER_US 1000

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / NS_PER_US;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	return (b > 0 && a > INT64_MAX - b) ? INT64_MAX : a + b;
}

/* ---- producer and transaction state ---- */

void tfs__txn_state_init(struct tfs__txn_state *t)
{
	memset(t, 0, sizeof(*t));
	t->first_unstable = TFS_OFFSET_NONE;
}

void tfs__txn_state_release(struct tfs__txn_state *t)
{
	free(t->prod);
	free(t->aborted);
	tfs__txn_state_init(t);
}

static size_t pid_slot(int64_t pid, size_t cap)
{
	uint64_t x = (uint64_t)pid * 0x9e3779b97f4a7c15ull;   /* Fibonacci hashing */
	return (size_t)(x >> 32) & (cap - 1);
}

static struct tfs__producer *prod_find(const struct tfs__txn_state *t, int64_t pid)
{
	if (!t->prod_cap)
		return NULL;
	for (size_t i = pid_slot(pid, t->prod_cap);; i = (i + 1) & (t->prod_cap - 1)) {
		if (t->prod[i].pid == pid)
			return &t->prod[i];
		if (t->prod[i].pid < 0)
			return NULL;
	}
}

static int prod_grow(struct tfs__txn_state *t)
{
	size_t ncap = t->prod_cap ? t->prod_cap * 2 : PROD_INITIAL_CAP;
	struct tfs__producer *np = malloc(ncap * sizeof(*np)), *old = t->prod;
	size_t ocap = t->prod_cap;

	if (!np)
		return -ENOMEM;
	for (size_t i = 0; i < ncap; i++)
		np[i].pid = -1;
	t->prod = np;
	t->prod_cap = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].pid < 0)
			continue;
		size_t j = pid_slot(old[i].pid, ncap);
		while (np[j].pid >= 0)
			j = (j + 1) & (ncap - 1);
		np[j] = old[i];
	}
	free(old);
	return 0;
}

static struct tfs__producer *prod_get(struct tfs__txn_state *t, int64_t pid, int16_t epoch)
{
	struct tfs__producer *p = prod_find(t, pid);
	size_t i;

	if (p)
		return p;
	/* keep the load at or under one half */
	if ((t->prod_count + 1) * 2 > t->prod_cap && prod_grow(t) < 0)
		return NULL;
	for (i = pid_slot(pid, t->prod_cap); t->prod[i].pid >= 0; i = (i + 1) & (t->prod_cap - 1))
		;
	p = &t->prod[i];
	*p = (struct tfs__producer){ .pid = pid, .epoch = epoch, .last_data = TFS_OFFSET_NONE,
	                             .last_ts = -1, .txn_first = TFS_OFFSET_NONE };
	t->prod_count++;
	return p;
}

static int aborted_push(struct tfs__txn_state *t, int64_t pid, tfs_offset_t first, tfs_offset_t last)
{
	if (t->aborted_count == t->aborted_cap) {
		size_t ncap = t->aborted_cap ? t->aborted_cap * 2 : PROD_INITIAL_CAP;
		struct tfs__aborted_txn *p = realloc(t->aborted, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		t->aborted = p;
		t->aborted_cap = ncap;
	}
	t->aborted[t->aborted_count++] = (struct tfs__aborted_txn){ pid, first, last, false };
	return 0;
}

static int cmp_aborted(const void *a, const void *b)
{
	const struct tfs__aborted_txn *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* The aborted transaction of pid that holds offset (first <= offset <= last). */
static struct tfs__aborted_txn *aborted_find(const struct tfs__txn_state *t, int64_t pid,
                                             tfs_offset_t offset)
{
	size_t lo = 0, hi = t->aborted_count;

	/* first entry greater than (pid, offset) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct tfs__aborted_txn *m = &t->aborted[mid];
		if (m->pid < pid || (m->pid == pid && m->first <= offset))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	struct tfs__aborted_txn *e = &t->aborted[lo - 1];
	return e->pid == pid && offset <= e->last ? e : NULL;
}

/* Type of the control record of a control batch (ControlRecordType), or -1. */
int tfs__control_type(struct tfs_record_iter *it, const uint8_t *batch, size_t len)
{
	struct tfs_record r;

	if (tfs_record_iter_reset(it, batch, len, NULL) < 0 ||
	    tfs_record_iter_next(it, &r, NULL) != 1)
		return -1;
	return tfs_control_type(&r);
}

static bool is_control(const struct tfs_batch_header *h)
{
	return h->attributes & TFS_ATTR_CONTROL;
}

static bool is_transactional(const struct tfs_batch_header *h)
{
	return h->attributes & TFS_ATTR_TRANSACTIONAL;
}

int tfs__txn_scan(struct tfs__txn_state *t, const struct tfs_seglist *l, uint8_t **buf,
                  size_t *cap, size_t chunk, struct tfs_record_iter *it, struct tfs_cleaner *c)
{
	int rc = 0;

	for (size_t i = 0; i < t->prod_cap; i++)
		t->prod[i].pid = -1;
	t->prod_count = 0;
	t->aborted_count = 0;
	t->first_unstable = TFS_OFFSET_NONE;
	t->any = false;
	for (int i = 0; i < l->count; i++) {
		struct tfs__seg_reader r;
		struct tfs_batch_header h;
		const uint8_t *b = NULL;
		tfs_pos_t at = 0;

		if (!l->seg[i]->has_producer_ids)
			continue;
		t->any = true;
		tfs__seg_reader_init(&r, l->seg[i], 0, buf, cap, chunk, c, NULL);
		while ((rc = tfs__seg_reader_next(&r, &h, &b, &at)) == 1) {
			struct tfs__producer *p;
			if (h.producer_id < 0 || (is_control(&h) && h.records_count == 0))
				continue;   /* a cleaned, empty marker says nothing (Kafka ignores it) */
			p = prod_get(t, h.producer_id, h.producer_epoch);
			if (!p)
				return -ENOMEM;
			if (p->epoch != h.producer_epoch) {
				p->epoch = h.producer_epoch;    /* a new epoch forgets the batches */
				p->last_data = TFS_OFFSET_NONE;
			}
			p->last_ts = h.max_timestamp;
			if (!is_control(&h)) {
				p->last_data = tfs_batch_last_offset(&h);
				if (is_transactional(&h) && p->txn_first < 0)
					p->txn_first = h.base_offset;
				continue;
			}
			if (p->txn_first >= 0) {
				if (tfs__control_type(it, b, tfs_batch_size(&h)) == TFS_CONTROL_ABORT &&
				    aborted_push(t, p->pid, p->txn_first, tfs_batch_last_offset(&h)) < 0)
					return -ENOMEM;
				p->txn_first = TFS_OFFSET_NONE;
			}
		}
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < t->prod_cap; i++) {
		const struct tfs__producer *p = &t->prod[i];
		if (p->pid >= 0 && p->txn_first >= 0 &&
		    (t->first_unstable < 0 || p->txn_first < t->first_unstable))
			t->first_unstable = p->txn_first;
	}
	if (t->aborted_count > 1)
		qsort(t->aborted, t->aborted_count, sizeof(*t->aborted), cmp_aborted);
	return 0;
}

/* ---- what to clean ---- */

static int64_t largest_timestamp(const struct tfs_segment *s)
{
	return s->max_timestamp >= 0 ? s->max_timestamp : s->created_ms;
}

void tfs__log_to_clean(const struct tfs_seglist *l, tfs_offset_t log_end,
                       const struct tfs_topic_config *cfg, tfs_offset_t checkpoint,
                       tfs_offset_t first_unstable, int64_t now_ms,
                       struct tfs__log_to_clean *out)
{
	int active = l->count - 1, idx;
	tfs_offset_t fd, fu;

	memset(out, 0, sizeof(*out));
	out->log_start = l->seg[0]->base_offset;
	out->log_end = log_end;
	fd = checkpoint < 0 ? out->log_start : checkpoint;
	if (checkpoint >= 0 && (checkpoint < out->log_start || checkpoint > log_end)) {
		fd = out->log_start;
		out->checkpoint_reset = true;
	}
	fu = l->seg[active]->base_offset;
	out->why = TFS_NC_ACTIVE_SEGMENT;
	if (first_unstable >= 0 && first_unstable < fu) {
		fu = first_unstable;
		out->why = TFS_NC_OPEN_TRANSACTION;
	}
	idx = tfs__seglist_find(l, fd);
	if (idx < 0)
		idx = 0;
	if (cfg->min_compaction_lag_ms > 0) {
		for (int i = idx; i < active; i++) {
			if (largest_timestamp(l->seg[i]) > now_ms - cfg->min_compaction_lag_ms) {
				if (l->seg[i]->base_offset < fu) {
					fu = l->seg[i]->base_offset;
					out->why = TFS_NC_COMPACTION_LAG;
				}
				break;
			}
		}
	}
	if (fu < fd)
		fu = fd;
	/* round down to the base of the segment holding it, never below first dirty */
	idx = tfs__seglist_find(l, fu);
	if (idx >= 0 && l->seg[idx]->base_offset < fu)
		fu = l->seg[idx]->base_offset > fd ? l->seg[idx]->base_offset : fd;
	out->first_dirty = fd;
	out->first_uncleanable = fu;

	for (int i = 0; i < active; i++) {
		const struct tfs_segment *s = l->seg[i];
		tfs_offset_t next = l->seg[i + 1]->base_offset;
		int64_t size = tfs_segment_size(s);
		if (s->base_offset < fd)
			out->clean_bytes += size;
		if (s->base_offset < fu && next > fd && fd < fu)
			out->cleanable_bytes += size;
	}
	out->total_bytes = out->clean_bytes + out->cleanable_bytes;
	out->ratio = out->total_bytes > 0 ? (double)out->cleanable_bytes / (double)out->total_bytes : 0;

	/* max.compaction.lag.ms: the oldest first batch among the dirty closed segments */
	if (cfg->max_compaction_lag_ms > 0 && cfg->max_compaction_lag_ms < INT64_MAX) {
		int64_t earliest = INT64_MAX, bound = now_ms - cfg->max_compaction_lag_ms;
		idx = tfs__seglist_find(l, fd);
		for (int i = idx < 0 ? 0 : idx; i < active; i++) {
			int64_t ts = l->seg[i]->first_batch_timestamp;
			if (ts > 0 && ts < earliest)
				earliest = ts;
		}
		if (earliest != INT64_MAX && earliest < bound) {
			out->compaction_delay_ms = bound - earliest;
			out->need_compaction_now = true;
		}
	}
}

int tfs__group_segments(struct tfs_segment *const *segs, int n, int64_t max_bytes,
                        int64_t max_index_bytes, tfs_offset_t first_uncleanable, int *ends)
{
	int groups = 0, i = 0;

	while (i < n) {
		int64_t log = tfs_segment_size(segs[i]);
		int64_t idx = (int64_t)segs[i]->index_count * TFS_INDEX_ENTRY_BYTES;
		int64_t tidx = (int64_t)segs[i]->tindex_count * TFS_TIMEINDEX_ENTRY_BYTES;
		int j = i + 1;

		while (j < n) {
			const struct tfs_segment *s = segs[j];
			int64_t size = tfs_segment_size(s);
			int64_t sidx = (int64_t)s->index_count * TFS_INDEX_ENTRY_BYTES;
			int64_t stidx = (int64_t)s->tindex_count * TFS_TIMEINDEX_ENTRY_BYTES;
			tfs_offset_t last_estimate = j + 1 < n ? segs[j + 1]->base_offset - 1 :
			                             first_uncleanable - 1;
			if (log + size > max_bytes || idx + sidx > max_index_bytes ||
			    tidx + stidx > max_index_bytes)
				break;
			/* an empty segment always joins, so emptied segments merge over time */
			if (size != 0 && last_estimate - segs[i]->base_offset > INT32_MAX)
				break;
			log += size;
			idx += sidx;
			tidx += stidx;
			j++;
		}
		ends[groups++] = j;
		i = j;
	}
	return groups;
}

/* ---- the per-thread context ---- */

int tfs__cleaner_ctx_init(struct tfs__cleaner_ctx *x, struct tfs_cleaner *c, int slot,
                          size_t map_bytes, double load_factor, size_t io_bytes)
{
	memset(x, 0, sizeof(*x));
	x->c = c;
	x->slot = slot;
	x->map_bytes = map_bytes;
	x->load_factor = load_factor;
	x->rchunk = io_bytes;
	x->wcap = io_bytes;
	tfs_batch_builder_init(&x->builder);
	tfs_record_iter_init(&x->it);
	tfs__txn_state_init(&x->txn);
	return 0;
}

void tfs__cleaner_ctx_release(struct tfs__cleaner_ctx *x)
{
	tfs_offset_map_destroy(x->map);
	free(x->rbuf);
	free(x->wbuf);
	free(x->hdrs);
	free(x->rv);
	free(x->v.dead);
	free(x->v.tomb);
	tfs_batch_builder_release(&x->builder);
	tfs_record_iter_release(&x->it);
	tfs__txn_state_release(&x->txn);
	memset(x, 0, sizeof(*x));
}

/* Back to the default read buffer after a segment that needed a big one. */
static void shrink_rbuf(struct tfs__cleaner_ctx *x)
{
	if (x->rcap > x->rchunk) {
		free(x->rbuf);
		x->rbuf = NULL;
		x->rcap = 0;
	}
}

static bool aborted(const struct tfs__pass_in *in)
{
	return atomic_load_explicit(in->abort, memory_order_relaxed) ||
	       (in->stop && atomic_load_explicit(in->stop, memory_order_relaxed));
}

/* ---- verdicts ---- */

/* Verdicts. The map build sees every keyed record of the dirty region in offset
 * order, and each put tells which offset it made obsolete (tfs_offset_map_put_fp's
 * superseded). Two bitmaps over the dirty offsets keep that: `dead` (superseded:
 * the map holds a newer offset for the key) and `tomb` (a tombstone). For a record
 * that the build put, "offset >= map[key]" is then "its dead bit is clear", so the
 * recopy decides the dirty region without hashing a key or touching the map, and a
 * batch whose records are all dead, or all alive with no live tombstone, is decided
 * by counting its bits, without decoding a record.
 *
 * A bit stands for one record only if no offset was put twice and no batch's range
 * overlaps another's: the build checks that offsets rise strictly (each batch past
 * the last, each record past the previous one, inside its batch's range) and on any
 * doubt (a damaged or hand-made log) drops the bitmaps for the pass: the recopy
 * then asks the map for every record, as Kafka does. The bitmaps cover at most
 * VERDICT_BUFFER_SHARE-th of the dedupe buffer's bytes each; offsets past that, and
 * the clean region, are decided by the map. A bit is used only for batches that the
 * build read whole (before the record that filled the map), found by position. */

/* Each bitmap may take this fraction of the dedupe buffer's size: 1/24 is one bit
 * per 3 bytes, 44.7M offsets (5.3 MiB) for the default 128 MiB. */
#define VERDICT_BUFFER_SHARE 24
#define BITS_PER_WORD 64

static void verdicts_begin(struct tfs__cleaner_ctx *x, tfs_offset_t start, tfs_offset_t end)
{
	struct tfs__verdicts *v = &x->v;
	uint64_t span = (uint64_t)(end - start);
	uint64_t cap = (uint64_t)(x->map_bytes / VERDICT_BUFFER_SHARE) * CHAR_BIT;
	size_t len = (size_t)(span < cap ? span : cap);
	size_t words = (len + BITS_PER_WORD - 1) / BITS_PER_WORD;

	v->ok = false;
	v->start = start;
	v->len = 0;
	v->seg_from = v->seg_to = 0;
	v->pos_from = v->pos_to = 0;
	if (words == 0)
		return;
	if (words > v->words_cap) {
		free(v->dead);
		free(v->tomb);
		v->dead = malloc(words * sizeof(uint64_t));
		v->tomb = malloc(words * sizeof(uint64_t));
		if (!v->dead || !v->tomb) {
			/* not an error: the recopy asks the map instead */
			free(v->dead);
			free(v->tomb);
			v->dead = v->tomb = NULL;
			v->words_cap = 0;
			return;
		}
		v->words_cap = words;
	}
	memset(v->dead, 0, words * sizeof(uint64_t));
	memset(v->tomb, 0, words * sizeof(uint64_t));
	v->len = len;
	v->ok = true;
}

static inline bool verdict_covers(const struct tfs__verdicts *v, tfs_offset_t o)
{
	return o >= v->start && (uint64_t)(o - v->start) < v->len;
}

static inline void bit_set(uint64_t *w, uint64_t i)
{
	w[i / BITS_PER_WORD] |= 1ull << (i % BITS_PER_WORD);
}

static inline bool bit_get(const uint64_t *w, uint64_t i)
{
	return (w[i / BITS_PER_WORD] >> (i % BITS_PER_WORD)) & 1;
}

/* Over bits [a, b]: how many are dead, and how many are tombstones not dead. */
static void verdict_count(const struct tfs__verdicts *v, uint64_t a, uint64_t b, int64_t *dead,
                          int64_t *live_tombs)
{
	uint64_t wa = a / BITS_PER_WORD, wb = b / BITS_PER_WORD;

	*dead = *live_tombs = 0;
	for (uint64_t w = wa; w <= wb; w++) {
		uint64_t mask = ~0ull;
		if (w == wa)
			mask &= ~0ull << (a % BITS_PER_WORD);
		if (w == wb && b % BITS_PER_WORD != BITS_PER_WORD - 1)
			mask &= (1ull << (b % BITS_PER_WORD + 1)) - 1;
		*dead += __builtin_popcountll(v->dead[w] & mask);
		*live_tombs += __builtin_popcountll(v->tomb[w] & ~v->dead[w] & mask);
	}
}

/* Whether the build read the batch at position pos of segment seg (index in the
 * pass's list) whole. */
static bool verdict_read_whole(const struct tfs__verdicts *v, int seg, tfs_pos_t pos)
{
	if (seg < v->seg_from || (seg == v->seg_from && pos < v->pos_from))
		return false;
	return seg < v->seg_to || (seg == v->seg_to && pos < v->pos_to);
}

/* ---- the offset map ---- */

/* Keys are hashed and their slots prefetched this many puts ahead of the put that
 * needs them: enough cache misses in flight to hide most of the memory latency,
 * few enough that the prefetched lines are still there when their turn comes. */
#define MAP_AHEAD 16

enum pending_kind { PEND_KEY, PEND_TOMBSTONE, PEND_BATCH_END };

/* A put, or a batch's end, waiting its turn. Applying them strictly in order keeps
 * every rule of the build as without the queue: a batch's last offset counts only
 * once all its records went in, and the map fills at the same record. */
struct pending {
	struct tfs_offset_map_fp fp;
	tfs_offset_t offset;        /* the record's; a batch end's: the batch's last */
	tfs_pos_t end_pos;          /* batch end: position just past the batch */
	int seg;                    /* batch end: its segment's index in the list */
	enum pending_kind kind;
};

struct map_queue {
	struct pending q[MAP_AHEAD];
	unsigned head, n;
	tfs_offset_t order_hi;      /* the largest offset queued: offsets must rise past it */
};

/* 0, 1 when the map is full (the pass ends before this record), or an error. */
static int queue_apply(struct tfs__cleaner_ctx *x, const struct pending *p)
{
	struct tfs__verdicts *v = &x->v;
	tfs_offset_t gone;
	int rc;

	if (p->kind == PEND_BATCH_END) {
		tfs_offset_map_update_latest_offset(x->map, p->offset);
		v->seg_to = p->seg;
		v->pos_to = p->end_pos;
		return 0;
	}
	rc = tfs_offset_map_put_fp(x->map, p->fp, p->offset, &gone);
	if (rc == -ENOSPC)
		return 1;
	if (rc < 0)
		return rc;
	if (v->ok) {
		if (p->kind == PEND_TOMBSTONE && verdict_covers(v, p->offset))
			bit_set(v->tomb, (uint64_t)(p->offset - v->start));
		if (gone >= 0 && verdict_covers(v, gone))
			bit_set(v->dead, (uint64_t)(gone - v->start));
	}
	return 0;
}

static int queue_pop(struct tfs__cleaner_ctx *x, struct map_queue *q)
{
	int rc = queue_apply(x, &q->q[q->head]);

	q->head = (q->head + 1) % MAP_AHEAD;
	q->n--;
	return rc;
}

/* Queues p, applying the oldest entry first if the queue is full. 0, 1 (map full:
 * p is not queued, nothing more may be), or an error. */
static int queue_push(struct tfs__cleaner_ctx *x, struct map_queue *q, const struct pending *p)
{
	if (q->n == MAP_AHEAD) {
		int rc = queue_pop(x, q);
		if (rc != 0)
			return rc;
	}
	if (p->kind != PEND_BATCH_END)
		tfs_offset_map_prefetch(x->map, p->fp);
	q->q[(q->head + q->n) % MAP_AHEAD] = *p;
	q->n++;
	return 0;
}

static int queue_drain(struct tfs__cleaner_ctx *x, struct map_queue *q)
{
	while (q->n > 0) {
		int rc = queue_pop(x, q);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Queues the keyed records of one data batch (h, b) at or past start. 0, 1 (map
 * full), TFS_ECORRUPT with *why, or an error; on a damaged record, what came before
 * it is applied first, so that a map filling there still ends the pass cleanly. */
static int map_batch(struct tfs__cleaner_ctx *x, struct map_queue *q,
                     const struct tfs_batch_header *h, const uint8_t *b, tfs_offset_t start,
                     const char **why)
{
	tfs_offset_t last = tfs_batch_last_offset(h);
	struct tfs_record rec;
	int rc, qrc;

	rc = tfs_record_iter_reset(&x->it, b, tfs_batch_size(h), why);
	while (rc == 0 && (rc = tfs_record_iter_next(&x->it, &rec, why)) == 1) {
		struct pending p;

		rc = 0;
		if (rec.key_null || rec.offset < start)
			continue;
		if (rec.offset <= q->order_hi || rec.offset > last || rec.offset < h->base_offset)
			x->v.ok = false;
		else
			q->order_hi = rec.offset;
		p.fp = tfs_offset_map_fingerprint(rec.key);
		p.offset = rec.offset;
		p.kind = rec.value_null ? PEND_TOMBSTONE : PEND_KEY;
		p.seg = 0;
		p.end_pos = 0;
		qrc = queue_push(x, q, &p);
		if (qrc != 0)
			return qrc;
	}
	if (rc < 0) {
		qrc = queue_drain(x, q);
		return qrc != 0 ? qrc : rc;
	}
	return 0;
}

/* Step 3. Returns 0 (map full or not: see tfs_offset_map_full) or an error. */
static int build_map(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                     const struct tfs_seglist *l, tfs_offset_t start, tfs_offset_t end,
                     struct tfs__clean_stats *st)
{
	int64_t t0 = mono_us();
	int idx = tfs__seglist_find(l, start), rc = 0;
	struct map_queue q = { .head = 0, .n = 0, .order_hi = start - 1 };

	if (idx < 0)
		idx = 0;
	x->v.seg_from = x->v.seg_to = idx;
	for (int i = idx; i < l->count && l->seg[i]->base_offset < end; i++) {
		struct tfs_segment *seg = l->seg[i];
		tfs_offset_t next_start = i + 1 < l->count && l->seg[i + 1]->base_offset < end ?
		                          l->seg[i + 1]->base_offset : end;
		tfs_pos_t from = tfs_segment_lookup(seg, start);
		struct tfs__seg_reader r;
		struct tfs_batch_header h;
		const uint8_t *b = NULL;
		tfs_pos_t at = 0;

		if (aborted(in)) {
			rc = -ECANCELED;
			goto out;
		}
		if (i == idx)
			x->v.pos_from = x->v.pos_to = from;
		tfs__seg_reader_init(&r, seg, from, &x->rbuf, &x->rcap, x->rchunk, x->c,
		                     &st->map_bytes_read);
		r.abort = in->abort;
		r.why = x->why;
		r.why_cap = sizeof(x->why);
		while ((rc = tfs__seg_reader_next(&r, &h, &b, &at)) == 1) {
			tfs_offset_t last = tfs_batch_last_offset(&h);
			struct pending p = { .offset = last, .kind = PEND_BATCH_END, .seg = i,
			                     .end_pos = at + (tfs_pos_t)tfs_batch_size(&h) };
			const char *why = NULL;

			if (aborted(in)) {
				rc = -ECANCELED;
				goto out;
			}
			if (h.base_offset >= end)
				break;
			if (last < start)
				continue;
			st->map_records_read += h.records_count;
			if (h.base_offset >= start && h.base_offset <= q.order_hi)
				x->v.ok = false;       /* batches overlap: bits would mix them */
			if (!is_control(&h) &&
			    !(is_transactional(&h) && aborted_find(&x->txn, h.producer_id, h.base_offset))) {
				rc = map_batch(x, &q, &h, b, start, &why);
				if (rc == 1)
					goto full;
				if (rc < 0) {
					r.pos = at;
					rc = rc == TFS_ECORRUPT ? tfs__seg_reader_corrupt(&r, why) : rc;
					goto out;
				}
			}
			if (last > q.order_hi)
				q.order_hi = last;
			rc = queue_push(x, &q, &p);
			if (rc == 1)
				goto full;
			if (rc < 0)
				goto out;
		}
		if (rc < 0)
			goto out;
		/* the whole segment fitted: jump the offset gap up to the next one */
		rc = queue_drain(x, &q);
		if (rc == 1)
			goto full;
		if (rc < 0)
			goto out;
		tfs_offset_map_update_latest_offset(x->map, next_start - 1);
		if (next_start - 1 > q.order_hi)
			q.order_hi = next_start - 1;
		shrink_rbuf(x);
	}
	goto out;
full:
	st->map_full = true;   /* the pass ends here */
	rc = 0;
out:
	shrink_rbuf(x);
	st->map_us += mono_us() - t0;
	return rc < 0 ? rc : 0;
}

/* ---- recopying one group ---- */

/* The cleaned segment being written. A group of one segment is written lazily:
 * while every batch comes through as it was (changed false), the output is the
 * source's own prefix [0, pos), so nothing is written; at the first difference that
 * prefix is copied in (out_diverge) and writing goes on from there. A segment that
 * comes through whole is then neither written nor swapped. */
struct out_seg {
	struct tfs_segment *seg;  /* NULL in a dry run: nothing is written */
	struct tfs_segment *src;  /* the group's one source (read while !changed) */
	int fd;
	int dirfd;              /* the partition directory, for the pass of one group */
	tfs_pos_t pos;          /* bytes accepted (in the file, the buffer, or held back) */
	tfs_pos_t flushed;      /* bytes in the file */
	bool changed;           /* differs from a plain copy of the single source */
};

static int out_flush(struct tfs__cleaner_ctx *x, struct out_seg *o, struct tfs__clean_stats *st)
{
	int rc;

	if (x->wlen == 0)
		return 0;
	rc = tfs_io_write(o->seg->io, o->fd, x->wbuf, x->wlen, (uint64_t)o->flushed);
	if (rc < 0)
		return rc;
	o->flushed += (tfs_pos_t)x->wlen;
	st->bytes_written += (int64_t)x->wlen;
	tfs__throttle(tfs__cleaner_throttler(x->c), (int64_t)x->wlen, x->abort);
	x->wlen = 0;
	return 0;
}

/* The output is about to differ from its one source: write the prefix held back. */
static int out_diverge(struct tfs__cleaner_ctx *x, struct out_seg *o, struct tfs__clean_stats *st)
{
	tfs_pos_t done = 0;

	if (o->changed)
		return 0;
	o->changed = true;
	if (!o->seg)
		return 0;               /* a dry run: the prefix would be copied as it is */
	/* nothing is buffered while unchanged, so wbuf is free to carry the copy */
	while (done < o->pos) {
		size_t want = (size_t)(o->pos - done) < x->wcap ? (size_t)(o->pos - done) : x->wcap;
		ssize_t n = tfs_segment_read(o->src, x->wbuf, want, done);
		int rc;

		if (n < 0)
			return (int)n;
		if ((size_t)n != want)
			return -EIO;    /* a sealed segment shorter than it was read */
		st->bytes_read += n;
		tfs__throttle(tfs__cleaner_throttler(x->c), n, x->abort);
		x->wlen = (size_t)n;
		rc = out_flush(x, o, st);
		if (rc < 0)
			return rc;
		done += n;
	}
	return 0;
}

/* Appends one output batch (h describes it) to the cleaned segment. */
static int out_emit(struct tfs__cleaner_ctx *x, struct out_seg *o, const uint8_t *bytes, size_t len,
                    const struct tfs_batch_header *h, struct tfs__clean_stats *st)
{
	int rc;

	if (o->pos + (tfs_pos_t)len > INT32_MAX) {
		tfs_log_error("cleaner", "cleaned segment %s/%020" PRId64 " would pass 2 GiB",
		              o->src->dir, o->src->base_offset);
		return -EFBIG;
	}
	if (!o->seg) {
		o->pos += (tfs_pos_t)len;   /* a dry run measures what it would write */
		return 0;
	}
	rc = tfs_segment_note_batch(o->seg, o->pos, len, h->base_offset, tfs_batch_last_offset(h),
	                            h->max_timestamp);
	if (rc < 0)
		return rc;
	if (h->producer_id >= 0)
		o->seg->has_producer_ids = true;
	if (!o->changed) {
		o->pos += (tfs_pos_t)len;   /* the source's bytes, at the same position */
		return 0;
	}
	if (x->wlen + len > x->wcap) {
		rc = out_flush(x, o, st);
		if (rc < 0)
			return rc;
	}
	if (len > x->wcap) {
		/* larger than the buffer: straight to the file */
		rc = tfs_io_write(o->seg->io, o->fd, bytes, len, (uint64_t)o->flushed);
		if (rc < 0)
			return rc;
		o->flushed += (tfs_pos_t)len;
		st->bytes_written += (int64_t)len;
		tfs__throttle(tfs__cleaner_throttler(x->c), (int64_t)len, x->abort);
	} else {
		memcpy(x->wbuf + x->wlen, bytes, len);
		x->wlen += len;
	}
	o->pos += (tfs_pos_t)len;
	return 0;
}

static bool is_last_batch_of_producer(const struct tfs__cleaner_ctx *x,
                                      const struct tfs_batch_header *h, int64_t now_ms)
{
	const struct tfs__producer *p = prod_find(&x->txn, h->producer_id);

	if (!p)
		return false;
	/* an expired producer (idle, no open transaction) is no longer active */
	if (p->txn_first < 0 && now_ms - p->last_ts >= TFS_PRODUCER_EXPIRATION_MS)
		return false;
	if (p->last_data >= 0)
		return tfs_batch_last_offset(h) == p->last_data;
	return is_control(h) && h->producer_epoch == p->epoch;
}

/* Transaction bookkeeping for one batch: can it be discarded? (Kafka's
 * CleanedTransactionMetadata.onBatchRead / onControlBatchRead.) */
static bool txn_can_discard(struct tfs__cleaner_ctx *x, const struct tfs_batch_header *h,
                            const uint8_t *b)
{
	struct tfs__producer *p;
	struct tfs__aborted_txn *a;

	if (h->producer_id < 0)
		return false;
	if (!is_control(h)) {
		if (!is_transactional(h))
			return false;
		a = aborted_find(&x->txn, h->producer_id, h->base_offset);
		if (a) {
			a->observed = true;
			return true;
		}
		p = prod_find(&x->txn, h->producer_id);
		if (p)
			p->committed_open = true;
		return false;
	}
	if (h->records_count == 0)
		return true;
	switch (tfs__control_type(&x->it, b, tfs_batch_size(h))) {
	case TFS_CONTROL_ABORT:
		a = aborted_find(&x->txn, h->producer_id, h->base_offset);
		return !(a && a->observed);
	case TFS_CONTROL_COMMIT:
		p = prod_find(&x->txn, h->producer_id);
		if (p && p->committed_open) {
			p->committed_open = false;
			return false;
		}
		return true;
	default:
		return false;
	}
}

struct group_ctx {
	const struct tfs__pass_in *in;
	tfs_offset_t latest;            /* the map's latest offset */
	tfs_offset_t upper_bound;       /* first uncleanable offset of the pass */
};

/* Where a source batch sits: its segment's index in the pass's list, its position. */
struct batch_at {
	int seg;
	tfs_pos_t pos;
};

static int reserve_decisions(struct tfs__cleaner_ctx *x, size_t n)
{
	size_t ncap = x->rv_cap ? x->rv_cap : DECISIONS_INITIAL_CAP;
	struct tfs__rec_verdict *p;

	if (n <= x->rv_cap)
		return 0;
	while (ncap < n)
		ncap *= 2;
	p = realloc(x->rv, ncap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	x->rv = p;
	x->rv_cap = ncap;
	return 0;
}

/* What the rules say about a batch as a whole (Kafka's checkBatchRetention). */
struct batch_rules {
	bool control;
	bool can_discard;           /* txn_can_discard */
	bool drop_records;          /* every record goes */
	bool retain_deletes;        /* a tombstone survives: no horizon yet, or not passed */
	bool has_horizon;
	int64_t horizon;            /* when has_horizon */
};

/* Whether record_fate must be told if the map holds a newer offset for the key. */
static bool fate_needs_map(const struct batch_rules *br, tfs_offset_t latest,
                           tfs_offset_t offset, bool keyless)
{
	return !br->drop_records && !br->control && offset <= latest && !keyless;
}

/* The verdict on one record: what the pass does with it. Every record the pass
 * keeps or drops, and every fate its dry run reports, is decided here; the dead
 * bits and the map lookups only answer `superseded` (the map holds a newer offset
 * for the record's key: read only when fate_needs_map), and filter_batch's
 * whole-batch shortcuts only skip batches whose every record this function would
 * keep, or drop, alike. */
static enum tfs_cleaner_fate record_fate(const struct batch_rules *br, tfs_offset_t latest,
                                         tfs_offset_t offset, bool keyless, bool tombstone,
                                         bool superseded)
{
	if (br->drop_records)
		return br->control ? TFS_FATE_DROP_TOMBSTONE : TFS_FATE_DROP;
	if (br->control)            /* a marker stays until it may go, then follows horizons */
		return br->can_discard ? TFS_FATE_KEEP_TOMBSTONE : TFS_FATE_KEEP;
	if (offset > latest)
		return TFS_FATE_NOT_CLEANABLE;      /* past the map: the next pass decides */
	if (keyless)
		return TFS_FATE_KEEP_KEYLESS;
	if (superseded)
		return TFS_FATE_DROP;
	if (tombstone)
		return br->retain_deletes ? TFS_FATE_KEEP_TOMBSTONE : TFS_FATE_DROP_TOMBSTONE;
	return TFS_FATE_KEEP;
}

bool tfs_cleaner_fate_keeps(enum tfs_cleaner_fate f)
{
	return f == TFS_FATE_KEEP || f == TFS_FATE_KEEP_TOMBSTONE || f == TFS_FATE_KEEP_KEYLESS ||
	       f == TFS_FATE_NOT_CLEANABLE;
}

/* Decides every record of a batch (x->rv[0..rv_count)): fills x->rv[].fate and
 * .keep and returns 0 with *kept and *tombstone_kept, or an error. Records the map
 * must decide are hashed and prefetched on the way through and looked up
 * afterwards, so that their cache misses overlap. */
static int decide_records(struct tfs__cleaner_ctx *x, const struct group_ctx *g,
                          const struct tfs_batch_header *h, const uint8_t *b,
                          const struct batch_rules *br, bool use_bits, int32_t *kept,
                          bool *tombstone_kept)
{
	const struct tfs__verdicts *v = &x->v;
	struct tfs_record r;
	const char *why = NULL;
	size_t n = 0;
	int rc;

	*kept = 0;
	*tombstone_kept = false;
	x->rv_count = 0;
	rc = tfs_record_iter_reset(&x->it, b, tfs_batch_size(h), &why);
	while (rc == 0 && (rc = tfs_record_iter_next(&x->it, &r, &why)) == 1) {
		struct tfs__rec_verdict *rv;

		rc = reserve_decisions(x, n + 1);
		if (rc < 0)
			return rc;
		rv = &x->rv[n];
		rv->offset = r.offset;
		rv->tombstone = r.value_null && !br->control;
		rv->record_bytes = (r.key_null ? 0 : r.key.len) + (r.value_null ? 0 : r.value.len);
		rv->lookup = false;
		if (!fate_needs_map(br, g->latest, r.offset, r.key_null)) {
			rv->fate = record_fate(br, g->latest, r.offset, r.key_null, rv->tombstone, false);
		} else if (use_bits && verdict_covers(v, r.offset)) {
			rv->fate = record_fate(br, g->latest, r.offset, false, rv->tombstone,
			                       bit_get(v->dead, (uint64_t)(r.offset - v->start)));
		} else {
			rv->fp = tfs_offset_map_fingerprint(r.key);
			rv->lookup = true;
			tfs_offset_map_prefetch(x->map, rv->fp);
		}
		n++;
	}
	if (rc < 0)
		return rc;
	x->rv_count = n;
	for (size_t i = 0; i < n; i++) {
		struct tfs__rec_verdict *rv = &x->rv[i];
		if (rv->lookup)
			rv->fate = record_fate(br, g->latest, rv->offset, false, rv->tombstone,
			                       rv->offset < tfs_offset_map_get_fp(x->map, rv->fp));
		rv->keep = tfs_cleaner_fate_keeps(rv->fate);
		if (rv->keep) {
			(*kept)++;
			*tombstone_kept |= rv->tombstone;
		}
	}
	return 0;
}

/* Tells the dry run's observer the fate of every record decided in x->rv.
 * producer_state: the batch stays (empty) only as its producer's last. */
static void report_fates(const struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                         const struct batch_rules *br, bool producer_state)
{
	for (size_t i = 0; i < x->rv_count; i++) {
		const struct tfs__rec_verdict *rv = &x->rv[i];
		struct tfs_cleaner_record_fate f = {
			.offset = rv->offset, .fate = rv->fate, .why = TFS_NC_NONE,
			.tombstone = rv->tombstone, .record_bytes = rv->record_bytes,
		};
		if (f.fate == TFS_FATE_NOT_CLEANABLE)
			f.why = TFS_NC_BUFFER_FULL;
		if (f.fate == TFS_FATE_KEEP_TOMBSTONE) {
			f.horizon_stamped = br->has_horizon;
			f.horizon_ms = br->has_horizon ? br->horizon :
			               sat_add(in->now_ms, in->cfg.delete_retention_ms);
		}
		if (producer_state && !rv->keep)
			f.fate = TFS_FATE_KEEP_PRODUCER_STATE;
		in->fate_fn(in->fate_arg, &f);
	}
}

/* Decides and writes one source batch (at where in the source). */
static int filter_batch(struct tfs__cleaner_ctx *x, struct group_ctx *g, struct out_seg *o,
                        const struct tfs_batch_header *h, const uint8_t *b, struct batch_at where,
                        struct tfs__clean_stats *st)
{
	const struct tfs__pass_in *in = g->in;
	const struct tfs__verdicts *v = &x->v;
	int64_t now = in->now_ms;
	bool control = is_control(h);
	bool has_horizon = h->attributes & TFS_ATTR_DELETE_HORIZON;
	int64_t horizon = has_horizon ? h->base_timestamp : 0;
	bool can_discard = txn_can_discard(x, h, b);
	struct batch_rules br = {
		.control = control,
		.can_discard = can_discard,
		.drop_records = control ? (can_discard && has_horizon && horizon <= now) : can_discard,
		.retain_deletes = !has_horizon || now < horizon,
		.has_horizon = has_horizon,
		.horizon = horizon,
	};
	bool drop_records = br.drop_records, retain_empty = false, producer_last = false;
	tfs_offset_t last = tfs_batch_last_offset(h);
	size_t size = tfs_batch_size(h);
	int32_t count = h->records_count, kept = -1;
	bool tombstone_kept = false, need_horizon, use_bits, by_bits = false;
	struct tfs_record r;
	const char *why = NULL;
	int rc, i = 0;

	st->records_read += count;
	if (h->producer_id >= 0 && is_last_batch_of_producer(x, h, now))
		retain_empty = producer_last = true;
	else if (last + 1 == g->upper_bound)
		retain_empty = true;     /* keeps the offset just before the uncleanable part */
	else if (drop_records) {
		st->records_dropped += count;
		st->batches_dropped++;
		if (in->fate_fn) {
			rc = decide_records(x, g, h, b, &br, false, &kept, &tombstone_kept);
			if (rc < 0)
				return rc;
			report_fates(x, in, &br, false);
		}
		return out_diverge(x, o, st);
	}

	use_bits = v->ok && !control && !drop_records && verdict_read_whole(v, where.seg, where.pos);
	/* The whole-batch shortcut skips the records, so a dry run that reports each
	 * record's fate decides them one by one (the same verdicts, bit by bit). */
	if (use_bits && !in->fate_fn && count > 0 && h->base_offset >= v->start &&
	    last <= g->latest && verdict_covers(v, last)) {
		/* every record of it went into the map: its bits decide it whole */
		int64_t dead, live_tombs;
		verdict_count(v, (uint64_t)(h->base_offset - v->start), (uint64_t)(last - v->start),
		              &dead, &live_tombs);
		if (dead == count)
			kept = 0;
		else if (dead == 0 && live_tombs == 0)
			kept = count;
		by_bits = kept >= 0;
	}
	if (kept < 0) {
		rc = decide_records(x, g, h, b, &br, use_bits, &kept, &tombstone_kept);
		if (rc < 0)
			return rc;
		if (in->fate_fn)
			report_fates(x, in, &br, kept == 0 && producer_last);
	}
	st->records_kept += kept;
	st->records_dropped += count - kept;
	need_horizon = (tombstone_kept || (control && can_discard)) && !has_horizon;
	if (need_horizon && !control && h->base_offset < st->first_dirty) {
		/* A tombstone the map never held: its key's older values below it may
		 * still be on disk, so a horizon would let a later pass drop it and
		 * bring one of them back. Kept as it is; the checkpoint is reset. */
		need_horizon = false;
		st->tombstones_unstamped++;
	}

	if (kept == count && count > 0 && !need_horizon) {
		st->batches_copied++;
		return out_emit(x, o, b, size, h, st);
	}
	if (kept == 0) {
		uint8_t empty[TFS_BATCH_HEADER_BYTES];
		struct tfs_batch_header eh;
		if (!retain_empty) {
			st->batches_dropped++;
			return out_diverge(x, o, st);
		}
		tfs_batch_write_empty(h, empty);
		(void)tfs_batch_header_decode(empty, sizeof(empty), &eh, NULL);
		/* an empty batch kept as it was is no change */
		if (!(count == 0 && size == sizeof(empty) && !memcmp(empty, b, size))) {
			rc = out_diverge(x, o, st);
			if (rc < 0)
				return rc;
		}
		st->batches_emptied++;
		return out_emit(x, o, empty, sizeof(empty), &eh, st);
	}
	rc = out_diverge(x, o, st);
	if (rc < 0)
		return rc;

	/* some survive: re-encode them. x->rv[].keep is decide_records': a batch decided
	 * by its bits keeps all (no tombstone, so no horizon) or nothing. */
	assert(!by_bits);
	(void)by_bits;               /* read by the assert only */
	{
		struct tfs_batch_params p = {
			.base_offset = h->base_offset,
			.attributes = (int16_t)(h->attributes & (TFS_ATTR_LOG_APPEND_TIME |
			              TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL | TFS_ATTR_DELETE_HORIZON)),
			.leader_epoch = h->leader_epoch,
			.producer_id = h->producer_id,
			.producer_epoch = h->producer_epoch,
			.base_sequence = h->base_sequence,
			.base_timestamp = horizon,
			.zstd_level = in->cfg.zstd_level,
		};
		const uint8_t *out;
		size_t len;
		struct tfs_batch_header oh;

		p.attributes |= (int16_t)(control ? (h->attributes & TFS_ATTR_CODEC_MASK) :
		                          (in->cfg.compression & TFS_ATTR_CODEC_MASK));
		if (need_horizon) {
			p.attributes |= TFS_ATTR_DELETE_HORIZON;
			p.base_timestamp = sat_add(now, in->cfg.delete_retention_ms);
			st->tombstones_stamped++;
		}
		tfs_batch_builder_reset(&x->builder, &p);
		rc = tfs_record_iter_reset(&x->it, b, size, &why);
		while (rc == 0 && (rc = tfs_record_iter_next(&x->it, &r, &why)) == 1) {
			struct tfs_record_in ri;
			rc = 0;
			if (!x->rv[i++].keep)
				continue;
			rc = tfs_record_headers(&r, &x->hdrs, &x->hcap);
			if (rc < 0)
				break;
			ri = (struct tfs_record_in){
				.key = r.key, .key_null = r.key_null, .value = r.value,
				.value_null = r.value_null, .timestamp = r.timestamp,
				.offset_delta = r.offset_delta, .headers = x->hdrs,
				.header_count = r.header_count,
			};
			rc = tfs_batch_builder_add_at(&x->builder, &ri);
		}
		if (rc < 0)
			return rc;
		rc = tfs_batch_builder_finish(&x->builder, h->last_offset_delta, &out, &len);
		if (rc < 0)
			return rc;
		rc = tfs_batch_header_decode(out, len, &oh, NULL);
		if (rc < 0)
			return rc;
		st->batches_rebuilt++;
		return out_emit(x, o, out, len, &oh, st);
	}
}

static void discard_cleaned(struct tfs_plog *pl, struct out_seg *o)
{
	if (!o->seg)
		return;
	(void)tfs_segment_unlink_files(pl->env.io, o->dirfd, o->seg->base_offset, ".cleaned");
	tfs_segment_unpin(o->seg);
	tfs_segment_unref(o->seg);
	o->seg = NULL;
}

/* Whether the written output o holds the batch at base offset (a marker: one
 * record). Reads headers from the index's nearest entry on. */
static bool marker_kept(const struct out_seg *o, tfs_offset_t offset)
{
	uint8_t hdr[TFS_BATCH_HEADER_BYTES];
	tfs_pos_t pos = tfs_segment_lookup(o->seg, offset);

	while (pos + (tfs_pos_t)sizeof(hdr) <= o->pos) {
		struct tfs_batch_header h;
		if (pread(o->fd, hdr, sizeof(hdr), pos) != (ssize_t)sizeof(hdr) ||
		    tfs_batch_header_decode(hdr, sizeof(hdr), &h, NULL) < 0)
			return false;
		if (h.base_offset >= offset)
			return h.base_offset == offset;
		pos += (tfs_pos_t)tfs_batch_size(&h);
	}
	return false;
}

/* Step 5 for one group segs[0..n), which start at index first of the pass's
 * list; dirfd is the partition directory. */
static int clean_group_in(struct tfs__cleaner_ctx *x, struct group_ctx *g,
                          struct tfs_segment *const *segs, int n, int first,
                          struct tfs__clean_stats *st, int dirfd)
{
	struct tfs_plog *pl = g->in->pl;
	struct out_seg o = { .dirfd = dirfd };
	bool committed = false;
	int rc;

	if (g->in->dry)
		goto read;
	rc = tfs_segment_create_cleaned(pl->env.io, pl->env.fdcache, dirfd, pl->path,
	                                segs[0]->base_offset, g->in->cfg.index_interval_bytes, &o.seg);
	if (rc < 0)
		return rc;
	rc = tfs_segment_pin(o.seg);
	if (rc < 0) {
		tfs_segment_unref(o.seg);
		(void)tfs_segment_unlink_files(pl->env.io, dirfd, segs[0]->base_offset, ".cleaned");
		return rc;
	}
	o.fd = tfs_segment_fd(o.seg);
	o.seg->sealed = true;
	o.seg->created_ms = segs[n - 1]->created_ms;
read:
	o.changed = n > 1;
	o.src = segs[0];
	x->wlen = 0;

	for (int k = 0; k < n; k++) {
		struct tfs__seg_reader r;
		struct tfs_batch_header h;
		const uint8_t *b = NULL;
		tfs_pos_t at = 0;

		st->size_before += tfs_segment_size(segs[k]);
		tfs__seg_reader_init(&r, segs[k], 0, &x->rbuf, &x->rcap, x->rchunk, x->c, &st->bytes_read);
		r.abort = g->in->abort;
		r.why = x->why;
		r.why_cap = sizeof(x->why);
		while ((rc = tfs__seg_reader_next(&r, &h, &b, &at)) == 1) {
			if (aborted(g->in)) {
				rc = -ECANCELED;
				break;
			}
			rc = filter_batch(x, g, &o, &h, b, (struct batch_at){ first + k, at }, st);
			if (rc < 0) {
				if (rc == TFS_ECORRUPT) {
					r.pos = at;
					(void)tfs__seg_reader_corrupt(&r, "records do not decode");
				}
				break;
			}
		}
		shrink_rbuf(x);
		if (rc < 0)
			goto fail;
	}
	rc = out_flush(x, &o, st);
	if (rc < 0)
		goto fail;
	if (!o.seg) {
		/* a dry run: what the group would take after the swap */
		st->size_after += o.changed ? o.pos : tfs_segment_size(segs[0]);
		return 0;
	}
	/* pairs with tfs_segment_size's acquire in readers of the published list */
	atomic_store_explicit(&o.seg->size, o.pos, memory_order_release);
	if (!o.changed) {
		/* one segment, every batch as it was: nothing to swap */
		discard_cleaned(pl, &o);
		st->size_after += tfs_segment_size(segs[0]);
		return 0;
	}
	/* The aborted transactions of the sources whose ABORT marker the output
	 * kept, as they were written (Kafka keeps the AbortedTxn entries it read
	 * for the markers it retains); a marker that went takes its entry along. */
	for (int k = 0; k < n; k++)
		for (uint32_t i = 0; i < segs[k]->aborted_count; i++)
			if (marker_kept(&o, segs[k]->aborted[i].last_offset) &&
			    (rc = tfs_segment_add_aborted(o.seg, &segs[k]->aborted[i])) < 0)
				goto fail;
	rc = tfs_segment_write_indexes_to(o.seg, dirfd, ".cleaned");
	if (rc == 0)
		rc = tfs_segment_write_txnindex(o.seg, dirfd, ".cleaned");
	if (rc < 0)
		goto fail;
	if (aborted(g->in)) {
		rc = -ECANCELED;
		goto fail;
	}
	rc = tfs__swap_group(pl, segs, n, o.seg, &committed);
	if (rc < 0 && !committed)
		goto fail;      /* the swap removed its files; the log is as it was */
	st->size_after += o.pos;
	st->groups_swapped++;
	tfs_segment_unpin(o.seg);
	tfs_segment_unref(o.seg);   /* the published list holds its own reference */
	return rc;
fail:
	discard_cleaned(pl, &o);
	return rc;
}

/* clean_group_in with the directory opened for the group's files: a partition
 * holds no descriptor between operations (plog_internal.h). */
static int clean_group(struct tfs__cleaner_ctx *x, struct group_ctx *g,
                       struct tfs_segment *const *segs, int n, int first,
                       struct tfs__clean_stats *st)
{
	int dirfd = tfs__plog_dir_open(g->in->pl), rc;

	if (dirfd < 0)
		return dirfd;
	rc = clean_group_in(x, g, segs, n, first, st, dirfd);
	close(dirfd);
	return rc;
}

/* ---- the pass ---- */

int tfs__clean_pass(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                    struct tfs__clean_stats *st)
{
	struct tfs_plog *pl = in->pl;
	struct tfs_seglist *l;
	struct tfs__log_to_clean lc;
	struct group_ctx g = { .in = in };
	tfs_offset_t log_end, end, latest;
	int64_t t0 = mono_us();
	int k, ngroups, *ends = NULL, rc;

	memset(st, 0, sizeof(*st));
	st->start_ms = in->now_ms;
	x->abort = in->abort;
	x->why[0] = '\0';
	if (!x->map) {
		rc = tfs_offset_map_create(x->map_bytes, x->load_factor, &x->map);
		if (rc < 0) {
			tfs_log_error("cleaner", "cannot allocate a %zu-byte dedupe buffer: %s",
			              x->map_bytes, tfs_strerror(rc));
			return rc;
		}
	}
	if (!x->wbuf && !(x->wbuf = malloc(x->wcap)))
		return -ENOMEM;
	l = tfs__seglist_get(pl);
	pthread_rwlock_rdlock(&pl->lock);
	log_end = pl->end_offset;
	pthread_rwlock_unlock(&pl->lock);

	for (k = 0; k < l->count; k++)
		st->log_bytes += tfs_segment_size(l->seg[k]);
	st->active_base = l->seg[l->count - 1]->base_offset;
	rc = tfs__txn_scan(&x->txn, l, &x->rbuf, &x->rcap, x->rchunk, &x->it, x->c);
	shrink_rbuf(x);
	if (rc < 0)
		goto out;
	tfs__log_to_clean(l, log_end, &in->cfg, in->checkpoint, x->txn.first_unstable, in->now_ms, &lc);
	st->first_dirty = lc.first_dirty;
	st->first_uncleanable = lc.first_uncleanable;
	st->uncleanable_why = lc.why;
	st->log_start = lc.log_start;
	st->log_end = lc.log_end;

	/* The map build puts records of [first dirty, first uncleanable) only, one per
	 * offset, so that span bounds the keys it can meet. */
	tfs_offset_map_reset(x->map, (size_t)(lc.first_uncleanable - lc.first_dirty));
	if (lc.first_dirty > 0)
		tfs_offset_map_update_latest_offset(x->map, lc.first_dirty - 1);
	verdicts_begin(x, lc.first_dirty, lc.first_uncleanable);
	if (lc.first_dirty < lc.first_uncleanable) {
		rc = build_map(x, in, l, lc.first_dirty, lc.first_uncleanable, st);
		if (rc < 0)
			goto out;
	}
	latest = tfs_offset_map_latest_offset(x->map);
	end = latest + 1 > lc.first_dirty ? latest + 1 : lc.first_dirty;
	st->end_offset = end;
	st->buffer_utilization = tfs_offset_map_utilization(x->map);

	/* the segments overlapping [log start, end): never the active one */
	for (k = 0; k < l->count - 1 && l->seg[k]->base_offset < end; k++)
		;
	if (k == 0) {
		st->nothing_to_do = true;
		goto out;
	}
	ends = malloc(sizeof(*ends) * (size_t)k);
	if (!ends) {
		rc = -ENOMEM;
		goto out;
	}
	ngroups = tfs__group_segments(l->seg, k, in->cfg.segment_bytes, in->cfg.segment_index_bytes,
	                              lc.first_uncleanable, ends);
	g.latest = latest;
	g.upper_bound = lc.first_uncleanable;
	for (int gi = 0, from = 0; gi < ngroups; from = ends[gi], gi++) {
		if (aborted(in)) {
			rc = -ECANCELED;
			goto out;
		}
		st->groups++;
		rc = clean_group(x, &g, l->seg + from, ends[gi] - from, from, st);
		if (rc < 0)
			goto out;
	}
out:
	free(ends);
	tfs__seglist_put(l);
	x->abort = NULL;
	st->elapsed_us = mono_us() - t0;
	return rc;
}
