/* cleaner_map.c - the offset map a pass builds (step 3 of cleaner_pass.c,
 * docs/cleaner.md §4) and the verdicts it leaves behind for the recopy: every
 * keyed record of a non-aborted data batch of [first dirty, first uncleanable) is
 * put, in offset order, hashed and prefetched a few puts ahead (struct
 * map_queue); the build stops at the first record that does not fit (KAFKA-3894). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"

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

void tfs__verdicts_begin(struct tfs__cleaner_ctx *x, tfs_offset_t start, tfs_offset_t end)
{
	struct tfs__verdicts *v = &x->v;
	uint64_t span = (uint64_t)(end - start);
	uint64_t cap = (uint64_t)(x->map_bytes / VERDICT_BUFFER_SHARE) * CHAR_BIT;
	size_t len = (size_t)(span < cap ? span : cap);
	size_t words = (len + TFS__BITS_PER_WORD - 1) / TFS__BITS_PER_WORD;

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

static inline void bit_set(uint64_t *w, uint64_t i)
{
	w[i / TFS__BITS_PER_WORD] |= 1ull << (i % TFS__BITS_PER_WORD);
}

/* Over bits [a, b]: how many are dead, and how many are tombstones not dead. */
void tfs__verdict_count(const struct tfs__verdicts *v, uint64_t a, uint64_t b, int64_t *dead,
                        int64_t *live_tombs)
{
	uint64_t wa = a / TFS__BITS_PER_WORD, wb = b / TFS__BITS_PER_WORD;

	*dead = *live_tombs = 0;
	for (uint64_t w = wa; w <= wb; w++) {
		uint64_t mask = ~0ull;
		if (w == wa)
			mask &= ~0ull << (a % TFS__BITS_PER_WORD);
		if (w == wb && b % TFS__BITS_PER_WORD != TFS__BITS_PER_WORD - 1)
			mask &= (1ull << (b % TFS__BITS_PER_WORD + 1)) - 1;
		*dead += __builtin_popcountll(v->dead[w] & mask);
		*live_tombs += __builtin_popcountll(v->tomb[w] & ~v->dead[w] & mask);
	}
}

/* Whether the build read the batch at position pos of segment seg (index in the
 * pass's list) whole. */
bool tfs__verdict_read_whole(const struct tfs__verdicts *v, int seg, tfs_pos_t pos)
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
		if (p->kind == PEND_TOMBSTONE && tfs__verdict_covers(v, p->offset))
			bit_set(v->tomb, (uint64_t)(p->offset - v->start));
		if (gone >= 0 && tfs__verdict_covers(v, gone))
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
int tfs__build_map(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                   const struct tfs_seglist *l, tfs_offset_t start, tfs_offset_t end,
                   struct tfs__clean_stats *st)
{
	int64_t t0 = tfs_mono_us();
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

		if (tfs__pass_aborted(in)) {
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

			if (tfs__pass_aborted(in)) {
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
			if (!tfs__batch_is_control(&h) &&
			    !(tfs__batch_is_transactional(&h) &&
			      tfs__txn_aborted_find(&x->txn, h.producer_id, h.base_offset))) {
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
		tfs__ctx_shrink_rbuf(x);
	}
	goto out;
full:
	st->map_full = true;   /* the pass ends here */
	rc = 0;
out:
	tfs__ctx_shrink_rbuf(x);
	st->map_us += tfs_mono_us() - t0;
	return rc < 0 ? rc : 0;
}
