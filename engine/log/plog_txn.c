/* plog_txn.c - transactions of the engine's own: transactional batches, the
 * COMMIT / ABORT marker, the last stable offset, the aborted transactions a
 * read_committed reader needs (partition_log.h, "transactions").
 *
 * A transaction is encoded by its owner, on an encoder of its own, exactly as a
 * transactional Kafka producer encodes its batches (producer id and epoch,
 * sequences from 0, the transactional bit), and goes through the group-commit
 * queue as a producer's batch does: the leader checks it against the producer
 * state (so a second writer with the same id is refused) and places it. What
 * differs is the key directory: the leader leaves a transaction's records out
 * of it, and the transaction keeps their key changes (keys copied into an arena
 * of its own) until its end. The COMMIT marker carries them to the leader,
 * which applies them under the same write lock that publishes the marker, so a
 * reader sees none of them before and all of them after. An ABORT drops them,
 * and the leader notes the aborted transaction on the segment that took the
 * marker, whose .txnindex it rewrites.
 *
 * Memory: a key change costs its key plus a keydir op (about 50 bytes) until
 * the end - 1M records of 10-byte keys hold ~60 MB.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log/plog_internal.h"
#include "io/log.h"

/* A marker's coordinator epoch: the engine is its own coordinator, of one epoch. */
#define ENGINE_COORDINATOR_EPOCH 0

struct tfs_plog_txn {
	struct tfs_plog *pl;
	int64_t producer_id;
	int16_t epoch;
	int32_t next_seq;
	size_t records;                 /* appended so far */
	struct tfs__encoder *enc;       /* own: one transaction's batches at a time */
	struct tfs_keydir_op *ops;      /* key changes; key.p an offset into keys until the end */
	size_t nops, opcap;
	uint8_t *keys;
	size_t klen, kcap;
	tfs_plog_keys_fn on_commit;
	void *on_commit_arg;
};

int tfs_plog_txn_begin(struct tfs_plog *pl, int64_t producer_id, int16_t epoch,
                       struct tfs_plog_txn **out)
{
	struct tfs_plog_txn *t;

	*out = NULL;
	if (pl->env.read_only)
		return TFS_EREADONLY;
	if (pl->internal)
		return tfs__plog_refuse_internal(pl);
	if (producer_id < 0)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->enc = tfs__encoder_new())) {
		free(t);
		return -ENOMEM;
	}
	t->pl = pl;
	t->producer_id = producer_id;
	t->epoch = epoch;
	*out = t;
	return 0;
}

size_t tfs_plog_txn_records(const struct tfs_plog_txn *t)
{
	return t->records;
}

static void txn_free(struct tfs_plog_txn *t)
{
	tfs__encoder_free(t->enc);
	free(t->ops);
	free(t->keys);
	free(t);
}

/* Keeps the key changes of count records appended from offset first. 0 or
 * -ENOMEM. */
static int hold_keys(struct tfs_plog_txn *t, const struct tfs_append_rec *recs, size_t count,
                     tfs_offset_t first, int64_t timestamp)
{
	size_t kneed = t->klen, oneed = t->nops;

	for (size_t i = 0; i < count; i++) {
		if (recs[i].key_null)
			continue;
		kneed += recs[i].key.len;
		oneed++;
	}
	if (kneed > t->kcap) {
		size_t cap = t->kcap ? t->kcap : 65536;
		uint8_t *p;
		while (cap < kneed)
			cap *= 2;
		if (!(p = realloc(t->keys, cap)))
			return -ENOMEM;
		t->keys = p;
		t->kcap = cap;
	}
	if (oneed > t->opcap) {
		size_t cap = t->opcap ? t->opcap : 1024;
		struct tfs_keydir_op *p;
		while (cap < oneed)
			cap *= 2;
		if (!(p = realloc(t->ops, cap * sizeof(*p))))
			return -ENOMEM;
		t->ops = p;
		t->opcap = cap;
	}
	for (size_t i = 0; i < count; i++) {
		const struct tfs_append_rec *r = &recs[i];
		if (r->key_null)
			continue;
		memcpy(t->keys + t->klen, r->key.p, r->key.len);
		t->ops[t->nops++] = (struct tfs_keydir_op){
			.key = { (const uint8_t *)(uintptr_t)t->klen, r->key.len },
			.hash = t->enc->hashes[i],
			.remove = r->value_null,
			.info = { first + (tfs_offset_t)i, timestamp, (uint32_t)r->value.len },
		};
		t->klen += r->key.len;
	}
	return 0;
}

/* Encodes one batch of t's on its encoder: data (recs) or, with marker, the
 * control batch of type marker_type. Fills *pre for the leader. */
static int encode(struct tfs_plog_txn *t, const struct tfs_append_rec *recs, size_t count,
                  bool marker, bool commit, struct tfs__preencoded *pre, size_t *bytes)
{
	struct tfs_plog *pl = t->pl;
	struct tfs__encoder *e = t->enc;
	struct tfs_batch_params p = {
		.leader_epoch = -1, .producer_id = t->producer_id, .producer_epoch = t->epoch,
		.base_sequence = marker ? -1 : t->next_seq,
	};
	uint8_t ckey[TFS_CONTROL_KEY_BYTES], cval[TFS_END_TXN_VALUE_BYTES];
	struct tfs_append_rec mrec;
	int64_t now = tfs_now_ms();
	const uint8_t *out = NULL;
	size_t len = 0;
	int32_t max_message_bytes;
	int rc;

	pthread_mutex_lock(&pl->q_lock);
	max_message_bytes = pl->cfg.max_message_bytes;
	p.zstd_level = pl->cfg.zstd_level;
	/* markers are never compressed (Kafka's EndTransactionMarker batches) */
	p.attributes = (int16_t)(TFS_ATTR_TRANSACTIONAL |
	                         (marker ? TFS_ATTR_CONTROL : pl->cfg.compression & TFS_ATTR_CODEC_MASK));
	pthread_mutex_unlock(&pl->q_lock);
	if (marker) {
		tfs_control_encode(commit ? TFS_CONTROL_COMMIT : TFS_CONTROL_ABORT,
		                   ENGINE_COORDINATOR_EPOCH, ckey, cval);
		mrec = (struct tfs_append_rec){ .key = { ckey, sizeof(ckey) },
		                                .value = { cval, sizeof(cval) } };
		recs = &mrec;
		count = 1;
	}
	*bytes = 0;
	for (size_t i = 0; i < count; i++)
		*bytes += tfs__plog_record_bytes(&recs[i]);
	/* a marker is never refused for its size: Kafka does not bound control
	 * batches by max.message.bytes, and a refused one would hold the last
	 * stable offset back for good */
	if (!marker && tfs__plog_unit_too_big(max_message_bytes, recs, count, *bytes))
		return -EFBIG;
	rc = tfs__encoder_reserve(e, count);
	if (rc < 0)
		return rc;
	tfs_batch_builder_reset(&e->builder, &p);
	rc = tfs_batch_builder_reserve(&e->builder, *bytes);
	if (rc == 0)
		rc = tfs__plog_add_unit(&e->builder, recs, count, now);
	for (size_t i = 0; i < count; i++)
		e->hashes[i] = recs[i].key_null || marker ? 0 : tfs_keydir_hash(recs[i].key);
	if (rc == 0)
		rc = tfs_batch_builder_finish(&e->builder, -1, &out, &len);
	if (rc < 0)
		return rc;
	*pre = (struct tfs__preencoded){
		.enc = e, .batch = (uint8_t *)out, .len = len,
		.hashes = e->hashes, .timestamp = now,
		.attributes = p.attributes, .zstd_level = p.zstd_level,
		.producer = true, .has_producer_id = true,
		.pin = {
			.producer_id = t->producer_id, .epoch = t->epoch,
			.base_seq = p.base_sequence, .last_offset_delta = (int32_t)count - 1,
			.max_timestamp = now, .transactional = true, .control = marker,
		},
		.txn_data = !marker, .marker = marker, .commit = commit,
	};
	return 0;
}

int tfs_plog_txn_append(struct tfs_plog_txn *t, const struct tfs_append_rec *recs, size_t count)
{
	struct tfs__preencoded pre = { 0 };
	tfs_offset_t first = 0;
	int64_t ts = 0;
	size_t bytes;
	int rc;

	if (count == 0)
		return -EINVAL;
	rc = encode(t, recs, count, false, false, &pre, &bytes);
	if (rc == 0)
		rc = tfs__plog_submit_encoded(t->pl, recs, count, bytes, false, &pre, &first, &ts);
	if (rc < 0)
		return rc;
	/* a producer's timestamps are its own (CreateTime); log-append time stamps
	 * the batch with the leader's clock, returned in ts */
	rc = hold_keys(t, recs, count, first, ts);
	t->next_seq = tfs_pstate_seq_add(t->next_seq, (int32_t)count);
	t->records += count;
	if (rc < 0) {
		/* appended, but its keys cannot be kept: the transaction cannot commit */
		tfs_log_error("plog", "%s: out of memory keeping the keys of transaction of producer %"
		              PRId64 "; it will be aborted", t->pl->path, t->producer_id);
	}
	return rc;
}

/* Tells the owner which keys the COMMIT made visible. */
static void tell_committed(struct tfs_plog_txn *t)
{
	struct tfs_slice *keys;

	if (!t->on_commit || t->nops == 0)
		return;
	if (!(keys = malloc(t->nops * sizeof(*keys)))) {
		tfs_log_error("plog", "%s: out of memory listing the keys a commit made visible",
		              t->pl->path);
		return;
	}
	for (size_t i = 0; i < t->nops; i++)
		keys[i] = t->ops[i].key;
	t->on_commit(t->on_commit_arg, keys, t->nops);
	free(keys);
}

int tfs_plog_txn_end(struct tfs_plog_txn *t, bool commit, bool durable)
{
	struct tfs__preencoded pre = { 0 };
	struct tfs_append_rec none = { .key_null = true };
	size_t bytes;
	int rc;

	if (!t)
		return 0;
	if (t->records == 0) {
		txn_free(t);
		return 0;
	}
	rc = encode(t, NULL, 0, true, commit, &pre, &bytes);
	if (rc == 0 && commit) {
		for (size_t i = 0; i < t->nops; i++)   /* the arena has stopped moving */
			t->ops[i].key.p = t->keys + (uintptr_t)t->ops[i].key.p;
		pre.txn_ops = t->ops;
		pre.txn_nops = t->nops;
	}
	/* the leader reads no record of a marker: one keyless stand-in for the count */
	if (rc == 0)
		rc = tfs__plog_submit_encoded(t->pl, &none, 1, bytes, durable, &pre, NULL, NULL);
	if (rc < 0)
		tfs_log_error("plog", "%s: cannot write the %s marker of producer %" PRId64 ": %s; "
		              "the transaction stays open until the next open aborts it", t->pl->path,
		              commit ? "COMMIT" : "ABORT", t->producer_id, tfs_strerror(rc));
	else if (commit)
		tell_committed(t);
	txn_free(t);
	return rc;
}

void tfs_plog_txn_on_commit(struct tfs_plog_txn *t, tfs_plog_keys_fn fn, void *arg)
{
	t->on_commit = fn;
	t->on_commit_arg = arg;
}

void tfs_plog_txn_discard(struct tfs_plog_txn *t)
{
	if (t)
		txn_free(t);
}

tfs_offset_t tfs_plog_last_stable_offset(struct tfs_plog *pl)
{
	tfs_offset_t end, first;

	pthread_rwlock_rdlock(&pl->lock);
	end = pl->end_offset;
	pthread_rwlock_unlock(&pl->lock);
	first = tfs_pstate_first_unstable(pl->pstate);
	return first >= 0 && first < end ? first : end;
}

size_t tfs_plog_aborted_txns(struct tfs_plog *pl, tfs_offset_t from, tfs_offset_t upto,
                             struct tfs_aborted_txn *out, size_t cap)
{
	size_t n = 0;

	pthread_rwlock_rdlock(&pl->lock);
	for (int i = 0; i < pl->segs->count; i++) {
		const struct tfs_segment *s = pl->segs->seg[i];
		if (i + 1 < pl->segs->count && pl->segs->seg[i + 1]->base_offset <= from)
			continue;               /* every marker here is before from */
		for (uint32_t k = 0; k < s->aborted_count; k++) {
			const struct tfs_aborted_txn *a = &s->aborted[k];
			if (a->last_offset < from || a->first_offset >= upto)
				continue;
			if (n < cap)
				out[n] = *a;
			n++;
		}
	}
	pthread_rwlock_unlock(&pl->lock);
	return n;
}

enum tfs_txn_state tfs_plog_txn_state(struct tfs_plog *pl, int64_t producer_id,
                                      tfs_offset_t offset)
{
	struct tfs_pstate_entry e;
	enum tfs_txn_state st = TFS_TXN_COMMITTED;

	if (tfs_pstate_get(pl->pstate, producer_id, &e) == 0 && e.txn_first_offset >= 0 &&
	    offset >= e.txn_first_offset)
		return TFS_TXN_OPEN;
	pthread_rwlock_rdlock(&pl->lock);
	for (int i = pl->segs->count - 1; i >= 0 && st == TFS_TXN_COMMITTED; i--) {
		const struct tfs_segment *s = pl->segs->seg[i];
		if (s->next_offset <= offset && s->aborted_count == 0)
			continue;
		for (uint32_t k = 0; k < s->aborted_count; k++) {
			const struct tfs_aborted_txn *a = &s->aborted[k];
			if (a->producer_id == producer_id && a->first_offset <= offset &&
			    offset <= a->last_offset) {
				st = TFS_TXN_ABORTED;
				break;
			}
		}
	}
	pthread_rwlock_unlock(&pl->lock);
	return st;
}

/* Ends with an ABORT every transaction the log holds open (tfs_plog_open, after
 * recovery): their writers were this process's, before a crash or a kill. */
int tfs__plog_abort_open_txns(struct tfs_plog *pl)
{
	struct tfs_pstate_entry *v = NULL;
	size_t n = tfs_pstate_count(pl->pstate);
	int rc = 0;

	if (pl->env.read_only || n == 0)
		return 0;
	if (!(v = malloc(n * sizeof(*v))))
		return -ENOMEM;
	n = tfs_pstate_list(pl->pstate, v, n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct tfs_plog_txn *t;
		if (v[i].txn_first_offset < 0)
			continue;
		rc = tfs_plog_txn_begin(pl, v[i].producer_id, v[i].epoch, &t);
		if (rc < 0)
			break;
		t->records = 1;             /* it has data in the log: the marker is due */
		tfs_log_warn("plog", "%s: aborting the transaction of producer %" PRId64
		             " open since offset %" PRId64 ": its writer is gone", pl->path,
		             v[i].producer_id, v[i].txn_first_offset);
		rc = tfs_plog_txn_end(t, false, true);
	}
	free(v);
	return rc;
}
