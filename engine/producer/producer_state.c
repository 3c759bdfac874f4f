/* producer_state.c - a partition's producer state (see producer_state.h).
 *
 * The producers are a sorted array searched by binary search: a partition has
 * few producers next to its records, an insert happens once per producer, and
 * a sorted array is what the snapshot and the attribute list walk anyway.
 */
#include "engine/producer/producer_state.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/batch_codec.h"

struct tfs_pstate {
	pthread_mutex_t lock;
	struct tfs_pstate_entry *e;     /* sorted by producer id (invariant 2) */
	size_t n, cap;
	tfs_offset_t end_offset;
};

int32_t tfs_pstate_seq_add(int32_t seq, int32_t delta)
{
	if (seq > INT32_MAX - delta)
		return delta - (INT32_MAX - seq) - 1;
	return seq + delta;
}

/* The inverse of tfs_pstate_seq_add (Kafka's decrementSequence). */
static int32_t seq_sub(int32_t seq, int32_t delta)
{
	if (seq < delta)
		return INT32_MAX - (delta - seq) + 1;
	return seq - delta;
}

static bool in_sequence(int32_t last, int32_t next)
{
	return (int64_t)next == (int64_t)last + 1 || (next == 0 && last == INT32_MAX);
}

int tfs_pstate_create(struct tfs_pstate **out)
{
	struct tfs_pstate *ps = calloc(1, sizeof(*ps));

	*out = NULL;
	if (!ps)
		return -ENOMEM;
	pthread_mutex_init(&ps->lock, NULL);
	*out = ps;
	return 0;
}

void tfs_pstate_destroy(struct tfs_pstate *ps)
{
	if (!ps)
		return;
	pthread_mutex_destroy(&ps->lock);
	free(ps->e);
	free(ps);
}

/* Index of pid, or -(insertion point) - 1. Under lock. */
static long find(const struct tfs_pstate *ps, int64_t pid)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ps->e[mid].producer_id < pid)
			lo = mid + 1;
		else if (ps->e[mid].producer_id > pid)
			hi = mid;
		else
			return (long)mid;
	}
	return -(long)lo - 1;
}

static int32_t entry_last_seq(const struct tfs_pstate_entry *e)
{
	return e->nbatches ? e->batch[e->nbatches - 1].last_seq : -1;
}

int tfs_pstate_check(struct tfs_pstate *ps, const struct tfs_pstate_in *in,
                     struct tfs_pstate_batch *dup, const char **why)
{
	int32_t last_seq = tfs_pstate_seq_add(in->base_seq, in->last_offset_delta);
	const struct tfs_pstate_entry *e;
	int rc = TFS_PSTATE_APPEND;
	long i;

	*why = NULL;
	pthread_mutex_lock(&ps->lock);
	i = find(ps, in->producer_id);
	if (i < 0)
		goto out;                /* unknown: any sequence (KIP-360) */
	e = &ps->e[i];
	if (e->epoch == in->epoch) {
		for (int k = 0; k < e->nbatches; k++) {
			if (e->batch[k].first_seq == in->base_seq && e->batch[k].last_seq == last_seq) {
				*dup = e->batch[k];
				rc = TFS_PSTATE_DUPLICATE;
				goto out;
			}
		}
	}
	if (in->epoch < e->epoch) {
		*why = "the producer's epoch is older than the partition's";
		rc = TFS_EFENCED;
	} else if (in->epoch != e->epoch) {
		if (in->base_seq != 0 && e->epoch != -1) {
			*why = "a new epoch must start at sequence 0";
			rc = TFS_ESEQUENCE;
		}
	} else if (e->epoch != -1 && !in_sequence(entry_last_seq(e), in->base_seq)) {
		*why = "the first sequence does not follow the producer's last";
		rc = TFS_ESEQUENCE;
	}
out:
	pthread_mutex_unlock(&ps->lock);
	return rc;
}

/* The entry for pid, inserted empty if new. Under lock. NULL: -ENOMEM. */
static struct tfs_pstate_entry *entry_for(struct tfs_pstate *ps, int64_t pid, bool *existed)
{
	long i = find(ps, pid);
	size_t at;

	*existed = i >= 0;
	if (i >= 0)
		return &ps->e[i];
	at = (size_t)(-i - 1);
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		struct tfs_pstate_entry *p = realloc(ps->e, cap * sizeof(*p));
		if (!p)
			return NULL;
		ps->e = p;
		ps->cap = cap;
	}
	memmove(&ps->e[at + 1], &ps->e[at], (ps->n - at) * sizeof(*ps->e));
	ps->n++;
	ps->e[at] = (struct tfs_pstate_entry){
		.producer_id = pid, .epoch = -1, .coordinator_epoch = -1,
		.last_timestamp = -1, .txn_first_offset = -1,
	};
	return &ps->e[at];
}

static void remove_at(struct tfs_pstate *ps, size_t at)
{
	memmove(&ps->e[at], &ps->e[at + 1], (ps->n - at - 1) * sizeof(*ps->e));
	ps->n--;
}

int tfs_pstate_apply(struct tfs_pstate *ps, const struct tfs_pstate_in *in,
                     tfs_offset_t first_offset, struct tfs_pstate_undo *undo)
{
	struct tfs_pstate_entry *e;
	tfs_offset_t last_offset = first_offset + in->last_offset_delta;
	bool existed;

	pthread_mutex_lock(&ps->lock);
	e = entry_for(ps, in->producer_id, &existed);
	if (!e) {
		pthread_mutex_unlock(&ps->lock);
		return -ENOMEM;
	}
	if (undo) {
		undo->existed = existed;
		undo->entry = *e;
	}
	if (in->control) {
		/* an end-transaction marker: batches kept only within one epoch */
		if (in->epoch != e->epoch)
			e->nbatches = 0;
		e->epoch = in->epoch;
		e->txn_first_offset = -1;
		e->last_timestamp = in->max_timestamp;
	} else {
		struct tfs_pstate_batch b = {
			.first_seq = in->base_seq,
			.last_seq = tfs_pstate_seq_add(in->base_seq, in->last_offset_delta),
			.first_offset = first_offset,
			.last_offset = last_offset,
			.timestamp = in->max_timestamp,
		};
		if (in->epoch != e->epoch) {
			e->nbatches = 0;        /* invariant (1) */
			e->epoch = in->epoch;
		}
		if (e->nbatches == TFS_PSTATE_BATCHES) {
			memmove(&e->batch[0], &e->batch[1], sizeof(e->batch[0]) * (TFS_PSTATE_BATCHES - 1));
			e->nbatches--;
		}
		e->batch[e->nbatches++] = b;
		e->last_timestamp = in->max_timestamp;
		if (in->transactional && e->txn_first_offset < 0)
			e->txn_first_offset = first_offset;
	}
	if (last_offset + 1 > ps->end_offset)
		ps->end_offset = last_offset + 1;
	pthread_mutex_unlock(&ps->lock);
	return 0;
}

tfs_offset_t tfs_pstate_first_unstable(struct tfs_pstate *ps)
{
	tfs_offset_t first = -1;

	pthread_mutex_lock(&ps->lock);
	for (size_t i = 0; i < ps->n; i++)
		if (ps->e[i].txn_first_offset >= 0 &&
		    (first < 0 || ps->e[i].txn_first_offset < first))
			first = ps->e[i].txn_first_offset;
	pthread_mutex_unlock(&ps->lock);
	return first;
}

void tfs_pstate_undo(struct tfs_pstate *ps, int64_t producer_id,
                     const struct tfs_pstate_undo *undo)
{
	long i;

	pthread_mutex_lock(&ps->lock);
	i = find(ps, producer_id);
	if (i >= 0) {
		if (undo->existed)
			ps->e[i] = undo->entry;
		else
			remove_at(ps, (size_t)i);
	}
	pthread_mutex_unlock(&ps->lock);
}

tfs_offset_t tfs_pstate_end_offset(struct tfs_pstate *ps)
{
	tfs_offset_t end;

	pthread_mutex_lock(&ps->lock);
	end = ps->end_offset;
	pthread_mutex_unlock(&ps->lock);
	return end;
}

void tfs_pstate_set_end_offset(struct tfs_pstate *ps, tfs_offset_t end)
{
	pthread_mutex_lock(&ps->lock);
	ps->end_offset = end;
	pthread_mutex_unlock(&ps->lock);
}

static bool expired(const struct tfs_pstate_entry *e, int64_t now_ms, int64_t expiration_ms)
{
	return expiration_ms > 0 && e->txn_first_offset < 0 &&
	       now_ms - e->last_timestamp >= expiration_ms;
}

size_t tfs_pstate_expire(struct tfs_pstate *ps, int64_t now_ms, int64_t expiration_ms)
{
	size_t kept = 0, gone;

	pthread_mutex_lock(&ps->lock);
	for (size_t i = 0; i < ps->n; i++)
		if (!expired(&ps->e[i], now_ms, expiration_ms))
			ps->e[kept++] = ps->e[i];
	gone = ps->n - kept;
	ps->n = kept;
	pthread_mutex_unlock(&ps->lock);
	return gone;
}

size_t tfs_pstate_list(struct tfs_pstate *ps, struct tfs_pstate_entry *out, size_t cap)
{
	size_t n;

	pthread_mutex_lock(&ps->lock);
	n = ps->n;
	if (n && cap)
		memcpy(out, ps->e, (n < cap ? n : cap) * sizeof(*out));
	pthread_mutex_unlock(&ps->lock);
	return n;
}

int tfs_pstate_get(struct tfs_pstate *ps, int64_t producer_id, struct tfs_pstate_entry *out)
{
	long i;

	pthread_mutex_lock(&ps->lock);
	i = find(ps, producer_id);
	if (i >= 0)
		*out = ps->e[i];
	pthread_mutex_unlock(&ps->lock);
	return i >= 0 ? 0 : -ENOENT;
}

size_t tfs_pstate_count(struct tfs_pstate *ps)
{
	size_t n;

	pthread_mutex_lock(&ps->lock);
	n = ps->n;
	pthread_mutex_unlock(&ps->lock);
	return n;
}

void tfs_pstate_clear(struct tfs_pstate *ps)
{
	pthread_mutex_lock(&ps->lock);
	ps->n = 0;
	ps->end_offset = 0;
	pthread_mutex_unlock(&ps->lock);
}

/* ---- snapshots ---- */

static uint8_t *put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	p = put16(p, (uint16_t)(v >> 16));
	return put16(p, (uint16_t)v);
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	p = put32(p, (uint32_t)(v >> 32));
	return put32(p, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return ((uint32_t)get16(p) << 16) | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

int tfs_pstate_snapshot_encode(struct tfs_pstate *ps, uint8_t **buf, size_t *len)
{
	uint8_t *b, *p;
	size_t size;

	pthread_mutex_lock(&ps->lock);
	size = TFS_PSTATE_SNAPSHOT_HEADER + TFS_PSTATE_SNAPSHOT_ENTRY * ps->n;
	b = malloc(size);
	if (!b) {
		pthread_mutex_unlock(&ps->lock);
		return -ENOMEM;
	}
	p = put16(b, TFS_PSTATE_SNAPSHOT_VERSION);
	p += 4;                               /* the CRC, below */
	p = put32(p, (uint32_t)ps->n);
	for (size_t i = 0; i < ps->n; i++) {
		const struct tfs_pstate_entry *e = &ps->e[i];
		const struct tfs_pstate_batch *last = e->nbatches ? &e->batch[e->nbatches - 1] : NULL;
		p = put64(p, (uint64_t)e->producer_id);
		p = put16(p, (uint16_t)e->epoch);
		p = put32(p, (uint32_t)(last ? last->last_seq : -1));
		p = put64(p, (uint64_t)(last ? last->last_offset : -1));
		p = put32(p, (uint32_t)(last ? (int32_t)(last->last_offset - last->first_offset) : 0));
		p = put64(p, (uint64_t)e->last_timestamp);
		p = put32(p, (uint32_t)e->coordinator_epoch);
		p = put64(p, (uint64_t)e->txn_first_offset);
	}
	pthread_mutex_unlock(&ps->lock);
	put32(b + 2, tfs_crc32c(0, b + 6, size - 6));
	*buf = b;
	*len = size;
	return 0;
}

int tfs_pstate_snapshot_decode(struct tfs_pstate *ps, const uint8_t *buf, size_t len,
                               tfs_offset_t end, int64_t now_ms, int64_t expiration_ms,
                               const char **why)
{
	struct tfs_pstate_entry *e = NULL;
	size_t n, kept = 0;
	const uint8_t *p;

	*why = NULL;
	tfs_pstate_clear(ps);
	if (len < TFS_PSTATE_SNAPSHOT_HEADER) {
		*why = "shorter than a snapshot header";
		return TFS_ECORRUPT;
	}
	if (get16(buf) != TFS_PSTATE_SNAPSHOT_VERSION) {
		*why = "unknown snapshot version";
		return TFS_ECORRUPT;
	}
	n = get32(buf + 6);
	if (n > (len - TFS_PSTATE_SNAPSHOT_HEADER) / TFS_PSTATE_SNAPSHOT_ENTRY ||
	    len != TFS_PSTATE_SNAPSHOT_HEADER + TFS_PSTATE_SNAPSHOT_ENTRY * n) {
		*why = "size does not match the entry count";
		return TFS_ECORRUPT;
	}
	if (get32(buf + 2) != tfs_crc32c(0, buf + 6, len - 6)) {
		*why = "CRC mismatch";
		return TFS_ECORRUPT;
	}
	if (n && !(e = malloc(n * sizeof(*e))))
		return -ENOMEM;
	p = buf + TFS_PSTATE_SNAPSHOT_HEADER;
	for (size_t i = 0; i < n; i++, p += TFS_PSTATE_SNAPSHOT_ENTRY) {
		struct tfs_pstate_entry x = {
			.producer_id = (int64_t)get64(p),
			.epoch = (int16_t)get16(p + 8),
			.last_timestamp = (int64_t)get64(p + 26),
			.coordinator_epoch = (int32_t)get32(p + 34),
			.txn_first_offset = (int64_t)get64(p + 38),
		};
		int32_t last_seq = (int32_t)get32(p + 10);
		tfs_offset_t last_offset = (int64_t)get64(p + 14);
		int32_t delta = (int32_t)get32(p + 22);
		if (x.producer_id < 0 || delta < 0 || (kept && x.producer_id <= e[kept - 1].producer_id)) {
			free(e);
			*why = "producer ids out of order, or a negative offset delta";
			return TFS_ECORRUPT;
		}
		if (last_offset >= 0) {
			x.nbatches = 1;
			x.batch[0] = (struct tfs_pstate_batch){
				.first_seq = seq_sub(last_seq, delta), .last_seq = last_seq,
				.first_offset = last_offset - delta, .last_offset = last_offset,
				.timestamp = x.last_timestamp,
			};
		}
		if (!expired(&x, now_ms, expiration_ms))
			e[kept++] = x;
	}
	pthread_mutex_lock(&ps->lock);
	free(ps->e);
	ps->e = e;
	ps->n = kept;
	ps->cap = n;
	ps->end_offset = end;
	pthread_mutex_unlock(&ps->lock);
	return 0;
}
