/* lag.c - counting what a consumer has left (lag.h).
 *
 * One state machine, fed batch by batch, decides which records count:
 *
 *   data, not transactional   counted at once
 *   data, transactional       pending[pid] += records
 *   control COMMIT for pid    counted += pending[pid]; pending[pid] = 0
 *   control ABORT for pid     pending[pid] = 0
 *   anything left pending     an open transaction: not counted
 *
 * A segment's tally is that machine run over the segment alone, kept in a form
 * that can be applied to whatever was pending when the segment began: per
 * producer id, the type of its first marker in the segment (which settles what
 * came before) and what is pending after its last marker. Applying the tallies of
 * consecutive segments in order gives the same count as running the machine over
 * all of them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"
#include "engine/log/lag.h"
#include "engine/log/plog_internal.h"

#define LAG_READ_CHUNK (1u << 20)       /* tallies read segments sequentially */
#define LAG_CHECKPOINT_BYTES 65536      /* at most this much is read to answer from
                                         * inside a segment without transactions */
#define CONTROL_KEY_BYTES 4             /* version int16, type int16 */
#define MARKER_NONE (-1)

struct tally_pid {
	int64_t pid;
	int first_marker;               /* TFS_CONTROL_ABORT / TFS_CONTROL_COMMIT / MARKER_NONE */
	int64_t pending;                /* transactional records since its last marker */
};

/* A batch boundary of a segment and what the batches before it count: a
 * question from inside the segment starts at the nearest one instead of the
 * segment's start (only while the segment has no transaction or marker). */
struct checkpoint {
	tfs_pos_t pos;                  /* a batch's position */
	tfs_offset_t base;              /* its base offset */
	int64_t before;                 /* counted in [0, pos) */
};

struct tfs__tally {
	tfs_pos_t pos;                  /* whole batches in [0, pos) are counted */
	int64_t counted;                /* settled within the segment */
	int64_t keyless;                /* data records without a key, any transaction */
	int64_t control;                /* control records */
	struct tally_pid *pids;
	size_t n, cap;
	struct checkpoint *cks;         /* whole-segment tallies: every LAG_CHECKPOINT_BYTES */
	size_t ncks, cks_cap;
};

/* What one read needs, reused across the segments of one question. */
struct lag_io {
	uint8_t *buf;
	size_t cap;
	struct tfs_record_iter it;
};

void tfs__tally_free(struct tfs__tally *t)
{
	if (!t)
		return;
	free(t->pids);
	free(t->cks);
	free(t);
}

static int note_checkpoint(struct tfs__tally *t, tfs_pos_t at, tfs_offset_t base)
{
	if (t->ncks && at - t->cks[t->ncks - 1].pos < LAG_CHECKPOINT_BYTES)
		return 0;
	if (t->ncks == t->cks_cap) {
		size_t cap = t->cks_cap ? t->cks_cap * 2 : 16;
		struct checkpoint *c = realloc(t->cks, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		t->cks = c;
		t->cks_cap = cap;
	}
	t->cks[t->ncks++] = (struct checkpoint){ at, base, t->counted };
	return 0;
}

static struct tally_pid *tally_pid(struct tfs__tally *t, int64_t pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->pids[i].pid == pid)
			return &t->pids[i];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4;
		struct tally_pid *p = realloc(t->pids, cap * sizeof(*p));
		if (!p)
			return NULL;
		t->pids = p;
		t->cap = cap;
	}
	t->pids[t->n] = (struct tally_pid){ pid, MARKER_NONE, 0 };
	return &t->pids[t->n++];
}

/* Records of a data batch at or after from, and (keyless_wanted) how many of them
 * have no key: only then, or for a batch that straddles from, are its records
 * decoded. */
static int records_from(struct tfs_record_iter *it, const struct tfs_batch_header *h,
                        const uint8_t *batch, tfs_offset_t from, bool keyless_wanted,
                        int64_t *out, int64_t *keyless)
{
	struct tfs_record r;
	const char *why = NULL;
	int64_t n = 0, nk = 0;
	int rc;

	*out = *keyless = 0;
	if (tfs_batch_last_offset(h) < from || h->records_count == 0)
		return 0;
	if (!keyless_wanted && h->base_offset >= from) {
		*out = h->records_count;        /* the header says; no record to decode */
		return 0;
	}
	rc = tfs_record_iter_reset(it, batch, tfs_batch_size(h), &why);
	while (rc == 0 && (rc = tfs_record_iter_next(it, &r, &why)) == 1) {
		if (r.offset >= from) {
			n++;
			nk += r.key_null;
		}
		rc = 0;
	}
	if (rc < 0)
		return rc;
	*out = n;
	*keyless = nk;
	return 0;
}

/* Runs the machine over seg's whole batches from t->pos to its committed size,
 * counting only records at or after from. */
static int tally_extend(struct tfs__tally *t, struct tfs_segment *seg, tfs_offset_t from,
                        bool keyless_wanted, struct lag_io *io)
{
	struct tfs__seg_reader r;
	struct tfs_batch_header h;
	const uint8_t *batch;
	tfs_pos_t at;
	int rc;

	tfs__seg_reader_init(&r, seg, t->pos, &io->buf, &io->cap, LAG_READ_CHUNK, NULL, NULL);
	while ((rc = tfs__seg_reader_next(&r, &h, &batch, &at)) == 1) {
		struct tally_pid *p = NULL;
		int64_t n = 0, nk = 0;

		if (keyless_wanted && (rc = note_checkpoint(t, at, h.base_offset)) < 0)
			return rc;

		if (h.attributes & (TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL)) {
			p = tally_pid(t, h.producer_id);
			if (!p)
				return -ENOMEM;
		}
		if (h.attributes & TFS_ATTR_CONTROL) {
			int type = h.records_count > 0 ? tfs__control_type(&io->it, batch, tfs_batch_size(&h)) : -1;
			if (h.base_offset >= from)
				t->control += h.records_count;
			if (type == TFS_CONTROL_ABORT || type == TFS_CONTROL_COMMIT) {
				if (p->first_marker == MARKER_NONE)
					p->first_marker = type;
				if (type == TFS_CONTROL_COMMIT)
					t->counted += p->pending;
				p->pending = 0;
			}
		} else {
			rc = records_from(&io->it, &h, batch, from, keyless_wanted, &n, &nk);
			if (rc < 0)
				return rc;
			t->keyless += nk;
			if (p)
				p->pending += n;
			else
				t->counted += n;
		}
		t->pos = at + (tfs_pos_t)tfs_batch_size(&h);
	}
	return rc;
}

/* What is pending, per producer id, between segments. */
struct carry {
	struct tfs__tally t;            /* only pids[] is used */
	int64_t counted, keyless, control;
};

/* Applies a segment's tally to what was pending before it. */
static int carry_apply(struct carry *c, const struct tfs__tally *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct tally_pid *s = &t->pids[i];
		struct tally_pid *p = tally_pid(&c->t, s->pid);

		if (!p)
			return -ENOMEM;
		if (s->first_marker != MARKER_NONE) {
			if (s->first_marker == TFS_CONTROL_COMMIT)
				c->counted += p->pending;
			p->pending = 0;
		}
		p->pending += s->pending;
	}
	c->counted += t->counted;
	c->keyless += t->keyless;
	c->control += t->control;
	return 0;
}

static bool damaged_from(const struct tfs_segment *seg, tfs_offset_t from)
{
	for (uint32_t i = 0; i < seg->damage_count; i++)
		if (seg->damage[i].next > from)
			return true;
	return false;
}

/* Makes seg's own tally (tally_lock held) and brings it up to the committed size. */
static int tally_current(struct tfs_segment *seg, struct lag_io *io)
{
	if (!seg->tally && !(seg->tally = calloc(1, sizeof(*seg->tally))))
		return -ENOMEM;
	return tally_extend(seg->tally, seg, seg->base_offset, true, io);
}

/* The segment's own tally, brought up to its committed size, applied to c. */
static int apply_segment(struct carry *c, struct tfs_segment *seg, struct lag_io *io)
{
	int rc;

	pthread_mutex_lock(&seg->tally_lock);
	rc = tally_current(seg, io);
	if (rc == 0)
		rc = carry_apply(c, seg->tally);
	pthread_mutex_unlock(&seg->tally_lock);
	return rc;
}

/* Counted in seg's batches before from, from the last checkpoint at or below it:
 * t is seg's whole tally (under its lock), with no transaction in it. */
static int counted_before(const struct tfs__tally *t, struct tfs_segment *seg,
                          tfs_offset_t from, struct lag_io *io, int64_t *out)
{
	size_t lo = 0, hi = t->ncks;
	struct tfs__seg_reader r;
	struct tfs_batch_header h;
	const uint8_t *batch;
	tfs_pos_t at;
	int64_t before;
	int rc;

	while (hi - lo > 1) {                   /* the last checkpoint with base <= from */
		size_t mid = lo + (hi - lo) / 2;
		if (t->cks[mid].base <= from)
			lo = mid;
		else
			hi = mid;
	}
	before = t->cks[lo].before;
	tfs__seg_reader_init(&r, seg, t->cks[lo].pos, &io->buf, &io->cap, LAG_CHECKPOINT_BYTES, NULL,
	                     NULL);
	while ((rc = tfs__seg_reader_next(&r, &h, &batch, &at)) == 1 && at < t->pos &&
	       h.base_offset < from) {
		int64_t n, nk;
		rc = records_from(&io->it, &h, batch, from, false, &n, &nk);
		if (rc < 0)
			return rc;
		before += h.records_count - n;
	}
	if (rc < 0)
		return rc;
	*out = before;
	return 0;
}

/* The part of the segment holding from, counted from from on: through its whole
 * tally's checkpoints when it has no transaction, else by a scan from the index
 * entry at or below from. */
static int apply_partial(struct carry *c, struct tfs_plog *pl, struct tfs_segment *seg,
                         tfs_offset_t from, struct lag_io *io)
{
	struct tfs__tally t = { 0 };
	int64_t before;
	int rc;

	pthread_mutex_lock(&seg->tally_lock);
	rc = tally_current(seg, io);
	if (rc == 0 && seg->tally->n == 0 && seg->tally->ncks > 0) {
		rc = counted_before(seg->tally, seg, from, io, &before);
		if (rc == 0)
			c->counted += seg->tally->counted - before;
		pthread_mutex_unlock(&seg->tally_lock);
		return rc;
	}
	pthread_mutex_unlock(&seg->tally_lock);
	if (rc < 0)
		return rc;
	pthread_rwlock_rdlock(&pl->lock);   /* the active segment's index may grow */
	t.pos = tfs_segment_lookup(seg, from);
	pthread_rwlock_unlock(&pl->lock);
	rc = tally_extend(&t, seg, from, false, io);   /* keyless: whole segments only */
	if (rc == 0)
		rc = carry_apply(c, &t);
	free(t.pids);
	return rc;
}

static int count_from(struct tfs_plog *pl, tfs_offset_t from, struct carry *out)
{
	struct tfs_seglist *l = tfs__seglist_get(pl);
	struct carry c = { { 0 }, 0, 0, 0 };
	struct lag_io io = { 0 };
	int i = tfs__seglist_find(l, from), rc = 0;

	tfs_record_iter_init(&io.it);
	if (i < 0)
		i = 0;
	for (int j = i; j < l->count && rc == 0; j++) {
		struct tfs_segment *seg = l->seg[j];

		if (damaged_from(seg, from))
			rc = TFS_EDAMAGED;
		else if (j == i && from > seg->base_offset)
			rc = apply_partial(&c, pl, seg, from, &io);
		else
			rc = apply_segment(&c, seg, &io);
	}
	*out = c;
	free(c.t.pids);
	out->t.pids = NULL;
	free(io.buf);
	tfs_record_iter_release(&io.it);
	tfs__seglist_put(l);
	return rc;
}

/* ---- the first record a consumer at from is given ----
 * Walks the records from from on. A plain data record is the answer unless an
 * earlier transactional record is still waiting for its marker: then the walk
 * goes on until each such transaction is settled (a COMMIT makes its first
 * record a candidate, an ABORT drops it) or the log ends (still open: not
 * delivered yet). */

struct open_txn {
	int64_t pid;
	tfs_offset_t offset;            /* its first record at or after from */
	int64_t timestamp;
};

struct first_walk {
	struct open_txn *open;
	size_t n, cap;
	tfs_offset_t offset;            /* the best so far, TFS_OFFSET_NONE */
	int64_t timestamp;
};

static void walk_candidate(struct first_walk *w, tfs_offset_t off, int64_t ts)
{
	if (w->offset == TFS_OFFSET_NONE || off < w->offset) {
		w->offset = off;
		w->timestamp = ts;
	}
}

static struct open_txn *walk_open(struct first_walk *w, int64_t pid)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->open[i].pid == pid)
			return &w->open[i];
	return NULL;
}

static void walk_settle(struct first_walk *w, int64_t pid, bool commit)
{
	struct open_txn *o = walk_open(w, pid);

	if (!o)
		return;
	if (commit)
		walk_candidate(w, o->offset, o->timestamp);
	*o = w->open[--w->n];
}

/* True once no open transaction began before the best candidate. */
static bool walk_done(const struct first_walk *w)
{
	if (w->offset == TFS_OFFSET_NONE)
		return false;
	for (size_t i = 0; i < w->n; i++)
		if (w->open[i].offset < w->offset)
			return false;
	return true;
}

static int first_from(struct tfs_plog *pl, tfs_offset_t from, struct tfs_lag *out)
{
	struct first_walk w = { NULL, 0, 0, TFS_OFFSET_NONE, -1 };
	struct tfs_plog_cursor *cur;
	struct tfs_batch_header bh;
	struct tfs_record r;
	int rc = tfs_plog_cursor_open(pl, from, &cur);

	if (rc < 0)
		return rc;
	while (!walk_done(&w) && (rc = tfs_plog_cursor_next(cur, &r, &bh)) == 1) {
		if (bh.attributes & TFS_ATTR_CONTROL) {
			if (!r.key_null && r.key.len >= CONTROL_KEY_BYTES &&
			    (int16_t)(r.key.p[0] << 8 | r.key.p[1]) >= 0) {
				int type = (int16_t)(r.key.p[2] << 8 | r.key.p[3]);
				if (type == TFS_CONTROL_ABORT || type == TFS_CONTROL_COMMIT)
					walk_settle(&w, bh.producer_id, type == TFS_CONTROL_COMMIT);
			}
		} else if (!(bh.attributes & TFS_ATTR_TRANSACTIONAL)) {
			walk_candidate(&w, r.offset, r.timestamp);
		} else if (!walk_open(&w, bh.producer_id)) {
			if (w.n == w.cap) {
				size_t cap = w.cap ? w.cap * 2 : 4;
				struct open_txn *p = realloc(w.open, cap * sizeof(*p));
				if (!p) {
					rc = -ENOMEM;
					break;
				}
				w.open = p;
				w.cap = cap;
			}
			w.open[w.n++] = (struct open_txn){ bh.producer_id, r.offset, r.timestamp };
		}
		rc = 0;
	}
	tfs_plog_cursor_close(cur);
	free(w.open);
	if (rc < 0)
		return rc;
	out->first_offset = w.offset;
	out->first_timestamp = w.offset == TFS_OFFSET_NONE ? -1 : w.timestamp;
	return 0;
}

int tfs_plog_lag(struct tfs_plog *pl, tfs_offset_t position, struct tfs_lag *out)
{
	struct tfs_plog_stats st;
	struct carry c;
	int rc;

	memset(out, 0, sizeof(*out));
	out->first_offset = TFS_OFFSET_NONE;
	out->first_timestamp = -1;
	tfs_plog_stats(pl, &st);
	if (position < st.log_start_offset)
		position = st.log_start_offset;   /* what DeleteRecords or retention removed */
	rc = count_from(pl, position, &c);
	out->lag_records = c.counted;
	if (rc == 0 && out->lag_records > 0)
		rc = first_from(pl, position, out);
	if (rc < 0)
		return rc;
	tfs_plog_stats(pl, &st);
	out->log_end_offset = st.log_end_offset;
	out->lag_offsets = position < st.log_end_offset ? st.log_end_offset - position : 0;
	return 0;
}

int64_t tfs_lag_ms(const struct tfs_lag *lag, int64_t now_ms)
{
	if (lag->lag_records == 0 || lag->first_timestamp < 0 || lag->first_timestamp > now_ms)
		return 0;
	return now_ms - lag->first_timestamp;
}

int tfs_plog_tally(struct tfs_plog *pl, struct tfs_log_tally *out)
{
	struct carry c;
	int rc = count_from(pl, 0, &c);

	memset(out, 0, sizeof(*out));
	if (rc < 0)
		return rc;
	out->delivered = c.counted;
	out->keyless = c.keyless;
	out->control = c.control;
	return 0;
}
