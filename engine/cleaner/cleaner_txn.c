/* cleaner_txn.c - producer and transaction state as a pass reads it from the log
 * (step 1 of cleaner_pass.c): each producer's last data batch and epoch, the
 * aborted transactions [first data offset, ABORT marker] and the first unstable
 * offset (tfs__txn_scan), and the per-batch bookkeeping of the recopy (Kafka's
 * CleanedTransactionMetadata): whether a batch belongs to an aborted transaction,
 * whether a marker may go, whether a batch is its producer's last. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

#define PROD_INITIAL_CAP 16

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
struct tfs__aborted_txn *tfs__txn_aborted_find(const struct tfs__txn_state *t, int64_t pid,
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
			if (h.producer_id < 0 || (tfs__batch_is_control(&h) && h.records_count == 0))
				continue;   /* a cleaned, empty marker says nothing (Kafka ignores it) */
			p = prod_get(t, h.producer_id, h.producer_epoch);
			if (!p)
				return -ENOMEM;
			if (p->epoch != h.producer_epoch) {
				p->epoch = h.producer_epoch;    /* a new epoch forgets the batches */
				p->last_data = TFS_OFFSET_NONE;
			}
			p->last_ts = h.max_timestamp;
			if (!tfs__batch_is_control(&h)) {
				p->last_data = tfs_batch_last_offset(&h);
				if (tfs__batch_is_transactional(&h) && p->txn_first < 0)
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

bool tfs__txn_last_batch_of_producer(const struct tfs__cleaner_ctx *x,
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
	return tfs__batch_is_control(h) && h->producer_epoch == p->epoch;
}

/* Transaction bookkeeping for one batch: can it be discarded? (Kafka's
 * CleanedTransactionMetadata.onBatchRead / onControlBatchRead.) */
bool tfs__txn_can_discard(struct tfs__cleaner_ctx *x, const struct tfs_batch_header *h,
                          const uint8_t *b)
{
	struct tfs__producer *p;
	struct tfs__aborted_txn *a;

	if (h->producer_id < 0)
		return false;
	if (!tfs__batch_is_control(h)) {
		if (!tfs__batch_is_transactional(h))
			return false;
		a = tfs__txn_aborted_find(&x->txn, h->producer_id, h->base_offset);
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
		a = tfs__txn_aborted_find(&x->txn, h->producer_id, h->base_offset);
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
