/* test_plog_txn.c - transactions of the engine's own (plog_txn.c): keys at the
 * COMMIT only, aborted records never, markers as Kafka writes them, the last
 * stable offset, .txnindex files, a transaction a crash left open. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define FX_DIR_PREFIX "txn"
#include "tests/engine/produce_fixture.h"

static struct tfs_append_rec rec(const char *k, const char *v)
{
	return (struct tfs_append_rec){ .key = tfs_slice_make(k, strlen(k)),
	                                .value = tfs_slice_make(v, strlen(v)) };
}

static bool live(struct tfs_plog *pl, const char *k)
{
	struct tfs_keyinfo info;
	return tfs_plog_lookup(pl, tfs_slice_make(k, strlen(k)), &info) == 0;
}

static char *value_of(struct tfs_plog *pl, const char *k)
{
	struct tfs_record_copy c;
	char *s;

	if (tfs_plog_read_key(pl, tfs_slice_make(k, strlen(k)), &c) != 0)
		return NULL;
	s = strndup((const char *)c.value, c.value_len);
	tfs_record_copy_release(&c);
	return s;
}

static struct tfs_plog_txn *begin(struct fx *f, int64_t pid)
{
	struct tfs_plog_txn *t = NULL;
	assert_int_equal(tfs_plog_txn_begin(f->pl, pid, 0, &t), 0);
	return t;
}

static void txn_put(struct tfs_plog_txn *t, const char *k, const char *v)
{
	struct tfs_append_rec r = rec(k, v);
	assert_int_equal(tfs_plog_txn_append(t, &r, 1), 0);
}

/* Every batch header in the log, in order, into out[0, cap); returns how many. */
static size_t batches(struct tfs_plog *pl, struct tfs_batch_header *out, size_t cap,
                      struct tfs_record *last_marker, uint8_t marker_kv[10])
{
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	struct tfs_batch_header h;
	size_t n = 0;
	tfs_offset_t prev = -1;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	while (tfs_plog_cursor_next(c, &r, &h) == 1) {
		if (h.base_offset != prev && n < cap)
			out[n++] = h;
		prev = h.base_offset;
		if ((h.attributes & TFS_ATTR_CONTROL) && last_marker) {
			*last_marker = r;
			assert_int_equal(r.key.len, 4);
			assert_int_equal(r.value.len, 6);
			memcpy(marker_kv, r.key.p, 4);
			memcpy(marker_kv + 4, r.value.p, 6);
		}
	}
	tfs_plog_cursor_close(c);
	return n;
}

static void keys_appear_at_the_commit_and_never_before(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t;
	struct tfs_batch_header h[8];
	struct tfs_record m;
	uint8_t kv[10];
	static const uint8_t commit_kv[10] = { 0, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	char *v;

	open_pl(f);
	struct tfs_append_rec plain = rec("before", "1");
	assert_int_equal(tfs_plog_append(f->pl, &plain, 1, false, NULL, NULL), 0);
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 1);
	t = begin(f, 7);
	txn_put(t, "a", "x");
	txn_put(t, "b", "y");
	assert_false(live(f->pl, "a"));
	assert_false(live(f->pl, "b"));
	assert_int_equal(tfs_plog_live_keys(f->pl), 1);
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 1);    /* the open one's first */
	assert_int_equal(tfs_plog_txn_state(f->pl, 7, 2), TFS_TXN_OPEN);
	assert_int_equal(tfs_plog_txn_end(t, true, true), 0);
	assert_true(live(f->pl, "a") && live(f->pl, "b"));
	v = value_of(f->pl, "b");
	assert_string_equal(v, "y");
	free(v);
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 4);
	assert_int_equal(tfs_plog_txn_state(f->pl, 7, 2), TFS_TXN_COMMITTED);

	/* as Kafka writes them: data transactional with sequences 0, 1; the marker
	 * 0x30, sequence -1, key (0, COMMIT), value (0, coordinator epoch 0) */
	assert_int_equal(batches(f->pl, h, 8, &m, kv), 4);
	assert_int_equal(h[0].producer_id, -1);
	assert_int_equal(h[1].attributes, TFS_ATTR_TRANSACTIONAL);
	assert_int_equal(h[1].producer_id, 7);
	assert_int_equal(h[1].base_sequence, 0);
	assert_int_equal(h[2].base_sequence, 1);
	assert_int_equal(h[3].attributes, TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL);
	assert_int_equal(h[3].base_sequence, -1);
	assert_int_equal(h[3].producer_id, 7);
	assert_int_equal(h[3].producer_epoch, 0);
	assert_int_equal(h[3].records_count, 1);
	assert_memory_equal(kv, commit_kv, sizeof(kv));

	/* and so after a reopen */
	open_pl(f);
	assert_true(live(f->pl, "a") && live(f->pl, "b"));
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 4);
}

static void aborted_records_never_name_a_key(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t;
	struct tfs_aborted_txn a[4];
	char *v;

	open_pl(f);
	struct tfs_append_rec old = rec("k", "old");
	assert_int_equal(tfs_plog_append(f->pl, &old, 1, false, NULL, NULL), 0);
	t = begin(f, 9);
	txn_put(t, "k", "new");
	txn_put(t, "gone", "z");
	assert_int_equal(tfs_plog_txn_end(t, false, true), 0);
	assert_false(live(f->pl, "gone"));
	v = value_of(f->pl, "k");
	assert_string_equal(v, "old");
	free(v);
	assert_int_equal(tfs_plog_txn_state(f->pl, 9, 1), TFS_TXN_ABORTED);
	assert_int_equal(tfs_plog_aborted_txns(f->pl, 0, 100, a, 4), 1);
	assert_int_equal(a[0].producer_id, 9);
	assert_int_equal(a[0].first_offset, 1);
	assert_int_equal(a[0].last_offset, 3);
	assert_int_equal(a[0].last_stable_offset, 4);
	assert_int_equal(tfs_plog_aborted_txns(f->pl, 4, 100, a, 4), 0);   /* marker before */
	assert_int_equal(tfs_plog_aborted_txns(f->pl, 0, 1, a, 4), 0);     /* data after */
	open_pl(f);
	assert_false(live(f->pl, "gone"));
	v = value_of(f->pl, "k");
	assert_string_equal(v, "old");
	free(v);
	assert_int_equal(tfs_plog_txn_state(f->pl, 9, 2), TFS_TXN_ABORTED);
}

/* A marker's key is its type: 00 00 00 01 for a COMMIT, 00 00 00 00 for an
 * ABORT. A key of those very bytes does not count the markers among its records. */
static void markers_are_no_records_of_a_key_of_their_bytes(void **state)
{
	static const char commit_key[4] = { 0, 0, 0, 1 }, abort_key[4] = { 0, 0, 0, 0 };
	struct fx *f = *state;
	struct tfs_plog_txn *t;
	tfs_offset_t *v = NULL;
	size_t n = 0;

	open_pl(f);
	struct tfs_append_rec r = { .key = tfs_slice_make(commit_key, 4),
	                            .value = tfs_slice_make("v1", 2) };
	assert_int_equal(tfs_plog_append(f->pl, &r, 1, false, NULL, NULL), 0);   /* 0 */
	t = begin(f, 5);
	txn_put(t, "x", "y");                                                     /* 1 */
	assert_int_equal(tfs_plog_txn_end(t, true, false), 0);                    /* 2: COMMIT */
	t = begin(f, 6);
	txn_put(t, "x", "z");                                                     /* 3 */
	assert_int_equal(tfs_plog_txn_end(t, false, false), 0);                   /* 4: ABORT */
	r.key = tfs_slice_make(abort_key, 4);
	assert_int_equal(tfs_plog_append(f->pl, &r, 1, false, NULL, NULL), 0);   /* 5 */
	assert_int_equal(tfs_plog_key_versions(f->pl, tfs_slice_make(commit_key, 4), &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0], 0);
	free(v);
	assert_int_equal(tfs_plog_key_versions(f->pl, tfs_slice_make(abort_key, 4), &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0], 5);
	free(v);
}

static void an_empty_transaction_writes_nothing(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_stats st;

	open_pl(f);
	assert_int_equal(tfs_plog_txn_end(begin(f, 3), true, false), 0);
	assert_int_equal(tfs_plog_txn_end(begin(f, 4), false, false), 0);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.log_end_offset, 0);
}

/* The .txnindex of the segment holding the ABORT: Kafka's 34-byte entries. */
static void the_txnindex_holds_the_aborts_and_is_rebuilt(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t, *u;
	char path[4200];
	uint8_t want[68] = { 0 }, *got;
	long size;

	open_pl(f);
	t = begin(f, 0x0102);
	u = begin(f, 0x0304);
	txn_put(t, "a", "1");            /* 0 */
	txn_put(u, "b", "2");            /* 1 */
	assert_int_equal(tfs_plog_txn_end(t, false, false), 0);   /* 2: LSO then 1 (u open) */
	txn_put(u, "c", "3");            /* 3 */
	assert_int_equal(tfs_plog_txn_end(u, false, false), 0);   /* 4: LSO 5 */
	/* version 0, pid, first, last, lso */
	want[9] = 0x02; want[8] = 0x01; want[17] = 0; want[25] = 2; want[33] = 1;
	want[34 + 9] = 0x04; want[34 + 8] = 0x03; want[34 + 17] = 1; want[34 + 25] = 4;
	want[34 + 33] = 5;
	snprintf(path, sizeof(path), "%s/%020d.txnindex", f->path, 0);
	assert_int_equal(t_file_size(path), 68);
	size = t_read_file(path, &got);
	assert_memory_equal(got, want, sizeof(want));
	free(got);

	/* gone, torn or wrong: rebuilt from the log at the next open */
	for (int damage = 0; damage < 3; damage++) {
		tfs_plog_close(f->pl);
		f->pl = NULL;
		if (damage == 0)
			assert_int_equal(unlink(path), 0);
		else if (damage == 1)
			assert_int_equal(truncate(path, 40), 0);
		else
			assert_int_equal(t_write_file(path, want + 34, 34), 0);   /* one entry */
		open_pl(f);
		size = t_read_file(path, &got);
		assert_int_equal(size, 68);
		assert_memory_equal(got, want, sizeof(want));
		free(got);
	}
	/* and a stale one of a segment without aborts goes */
	tfs_plog_close(f->pl);
	f->pl = NULL;
	snprintf(path, sizeof(path), "%s/%020d.txnindex", f->path, 77);
	assert_int_equal(t_write_file(path, want, 34), 0);
	open_pl(f);
	assert_int_equal(t_file_size(path), -1);
}

/* A transaction its writer never ended (the process died): the next open
 * aborts it, its records never seen. */
static void an_open_transaction_is_aborted_at_open(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t;
	struct tfs_aborted_txn a[2];
	struct tfs_plog_stats st;

	open_pl(f);
	t = begin(f, 5);
	txn_put(t, "x", "1");
	txn_put(t, "y", "2");
	assert_int_equal(tfs_plog_sync(f->pl), 0);
	/* the writer vanishes: the log is closed under the open transaction */
	tfs_plog_close(f->pl);
	f->pl = NULL;
	open_pl(f);
	assert_false(live(f->pl, "x") || live(f->pl, "y"));
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.log_end_offset, 3);            /* the ABORT marker at 2 */
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 3);
	assert_int_equal(tfs_plog_aborted_txns(f->pl, 0, 10, a, 2), 1);
	assert_int_equal(a[0].first_offset, 0);
	assert_int_equal(a[0].last_offset, 2);
	open_pl(f);                                        /* nothing more to abort */
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.log_end_offset, 3);
	tfs_plog_txn_discard(t);
}

/* A key a transaction wrote and the log then deleted outside it stays deleted
 * when the transaction commits: the tombstone is the newer record (the cleaner
 * and every consumer in offset order agree), so the COMMIT must not bring the
 * key back - at once or at the next open. The same for a second transaction's
 * tombstone committed first, and a plain write after the tombstone wins. */
static void a_commit_does_not_bring_back_a_key_deleted_after_its_records(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t, *u;
	struct tfs_append_rec tomb = { .key = tfs_slice_make("k", 1), .value_null = true };
	struct tfs_append_rec tomb_m = { .key = tfs_slice_make("m", 1), .value_null = true };
	struct tfs_append_rec again = rec("n", "plain");
	struct tfs_append_rec tomb_n = { .key = tfs_slice_make("n", 1), .value_null = true };
	char *v;

	open_pl(f);
	t = begin(f, 5);
	u = begin(f, 6);
	txn_put(t, "k", "txn");                             /* 0 */
	txn_put(t, "m", "txn");                             /* 1 */
	txn_put(t, "n", "txn");                             /* 2 */
	txn_put(t, "keep", "txn");                          /* 3 */
	assert_int_equal(tfs_plog_append(f->pl, &tomb, 1, false, NULL, NULL), 0);   /* 4 */
	assert_int_equal(tfs_plog_txn_append(u, &tomb_m, 1), 0);                    /* 5 */
	assert_int_equal(tfs_plog_txn_end(u, true, true), 0);                       /* 6 */
	assert_int_equal(tfs_plog_append(f->pl, &tomb_n, 1, false, NULL, NULL), 0); /* 7 */
	assert_int_equal(tfs_plog_append(f->pl, &again, 1, false, NULL, NULL), 0);  /* 8 */
	assert_int_equal(tfs_plog_txn_end(t, true, true), 0);                       /* 9 */
	for (int round = 0; round < 2; round++) {
		assert_false(live(f->pl, "k"));
		assert_false(live(f->pl, "m"));
		v = value_of(f->pl, "n");
		assert_non_null(v);
		assert_string_equal(v, "plain");
		free(v);
		assert_true(live(f->pl, "keep"));
		assert_int_equal(tfs_plog_live_keys(f->pl), 2);
		open_pl(f);                                     /* the scan agrees */
	}
}

/* Two COMMITs in one group: the first one's tombstone of a key must keep the
 * second's older put of it out, though no transaction is open after the group.
 * A plain append leads a group and, in the append hook, holds it until both
 * ends have queued behind it, so that they are written together. */
struct hold {
	struct fx *f;
	size_t want;                    /* queued requests to wait for, once */
	struct tfs_plog_txn *t;
	pthread_t thread;
};

static void hold_leader(void *arg, struct tfs_plog *pl)
{
	struct hold *h = arg;

	while (h->want && tfs_plog_queued(pl) < h->want)
		sched_yield();
	h->want = 0;
}

static void *end_main(void *arg)
{
	struct hold *h = arg;
	assert_int_equal(tfs_plog_txn_end(h->t, true, false), 0);
	return NULL;
}

static void *plain_main(void *arg)
{
	struct hold *h = arg;
	struct tfs_append_rec r = rec("other", "1");
	assert_int_equal(tfs_plog_append(h->f->pl, &r, 1, false, NULL, NULL), 0);
	return NULL;
}

static void two_commits_in_one_group_keep_a_tombstone(void **state)
{
	struct fx *f = *state;
	struct tfs_append_rec tomb = { .key = tfs_slice_make("k", 1), .value_null = true };
	struct hold lead = { f, 3, NULL, 0 }, del = { f, 0, NULL, 0 }, put = { f, 0, NULL, 0 };

	open_pl(f);
	put.t = begin(f, 5);
	txn_put(put.t, "k", "v");                                /* 0 */
	del.t = begin(f, 6);
	assert_int_equal(tfs_plog_txn_append(del.t, &tomb, 1), 0);  /* 1 */
	tfs_plog_set_append_hook(f->pl, hold_leader, &lead);
	assert_int_equal(pthread_create(&lead.thread, NULL, plain_main, &lead), 0);  /* 2 */
	while (tfs_plog_queued(f->pl) < 1)
		sched_yield();
	assert_int_equal(pthread_create(&del.thread, NULL, end_main, &del), 0);      /* 3 */
	while (tfs_plog_queued(f->pl) < 2)
		sched_yield();
	assert_int_equal(pthread_create(&put.thread, NULL, end_main, &put), 0);      /* 4 */
	pthread_join(lead.thread, NULL);
	pthread_join(del.thread, NULL);
	pthread_join(put.thread, NULL);
	assert_false(live(f->pl, "k"));
	assert_true(live(f->pl, "other"));
	open_pl(f);
	assert_false(live(f->pl, "k"));
}

/* Transactions that overlap one another for ever, each writing a key that a
 * plain tombstone deletes before its COMMIT: no moment without an open
 * transaction, so the removals noted are pruned as they pile up (past 1024),
 * never those a pending put may precede. Every such key stays deleted, also
 * after a reopen. */
#define CHAIN 1100

static void overlapping_transactions_prune_what_they_no_longer_need(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *cur, *next;
	char k[16], n[16];

	open_pl(f);
	cur = begin(f, 1000);
	for (int i = 0; i < CHAIN; i++) {
		struct tfs_append_rec tomb = { .value_null = true };
		snprintf(k, sizeof(k), "d%d", i);
		snprintf(n, sizeof(n), "n%d", i);
		tomb.key = tfs_slice_make(k, strlen(k));
		txn_put(cur, k, "txn");
		assert_int_equal(tfs_plog_append(f->pl, &tomb, 1, false, NULL, NULL), 0);
		next = begin(f, 1001 + i);
		txn_put(next, n, "kept");
		assert_int_equal(tfs_plog_txn_end(cur, true, false), 0);
		assert_false(live(f->pl, k));
		cur = next;
	}
	assert_int_equal(tfs_plog_txn_end(cur, true, false), 0);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(tfs_plog_live_keys(f->pl), CHAIN);
		for (int i = 0; i < CHAIN; i += 97) {
			snprintf(k, sizeof(k), "d%d", i);
			snprintf(n, sizeof(n), "n%d", i);
			assert_false(live(f->pl, k));
			assert_true(live(f->pl, n));
		}
		open_pl(f);
	}
}

/* Random plain writes, tombstones and transactions (some committed, some
 * aborted, up to three open at once) on a few keys, against a model: a key's
 * value is its newest record by offset among the plain ones and those of
 * committed transactions. Checked after every step and after a reopen. */
#define MODEL_KEYS 6
#define MODEL_TXNS 3
#define MODEL_STEPS 400

struct model_rec {
	int key;
	int value;                      /* -1: a tombstone */
	int txn;                        /* -1: plain */
};

static void model_check(struct fx *f, const struct model_rec *log, size_t n,
                        const int *txn_state)
{
	for (int k = 0; k < MODEL_KEYS; k++) {
		char name[8], want[16], *got;
		int v = -1;
		snprintf(name, sizeof(name), "k%d", k);
		for (size_t i = 0; i < n; i++)
			if (log[i].key == k && (log[i].txn < 0 || txn_state[log[i].txn] == 1))
				v = log[i].value;
		got = value_of(f->pl, name);
		if (v < 0) {
			assert_null(got);
			continue;
		}
		snprintf(want, sizeof(want), "%d", v);
		assert_non_null(got);
		assert_string_equal(got, want);
		free(got);
	}
}

static void commits_and_tombstones_agree_with_offset_order(void **state)
{
	struct fx *f = *state;
	struct model_rec log[MODEL_STEPS];
	int txn_state[MODEL_STEPS];    /* by transaction: 0 open, 1 committed, 2 aborted */
	struct tfs_plog_txn *open[MODEL_TXNS] = { NULL };
	int open_id[MODEL_TXNS];
	size_t n = 0;
	int ntxn = 0;
	unsigned seed = 13;

	open_pl(f);
	for (int step = 0; step < MODEL_STEPS; step++) {
		int what = rand_r(&seed) % 10, slot = rand_r(&seed) % MODEL_TXNS;
		int k = rand_r(&seed) % MODEL_KEYS, v = what % 3 == 0 ? -1 : step;
		char name[8], val[16];
		struct tfs_append_rec r;

		snprintf(name, sizeof(name), "k%d", k);
		snprintf(val, sizeof(val), "%d", v);
		r = v < 0 ? (struct tfs_append_rec){ .key = tfs_slice_make(name, strlen(name)),
		                                     .value_null = true }
		          : rec(name, val);
		if (what < 4) {                                 /* plain */
			assert_int_equal(tfs_plog_append(f->pl, &r, 1, false, NULL, NULL), 0);
			log[n++] = (struct model_rec){ k, v, -1 };
		} else if (what < 8) {                          /* in a transaction */
			if (!open[slot]) {
				open[slot] = begin(f, 100 + ntxn);
				open_id[slot] = ntxn;
				txn_state[ntxn++] = 0;
			}
			assert_int_equal(tfs_plog_txn_append(open[slot], &r, 1), 0);
			log[n++] = (struct model_rec){ k, v, open_id[slot] };
		} else if (open[slot]) {                        /* its end */
			bool commit = what == 8;
			assert_int_equal(tfs_plog_txn_end(open[slot], commit, false), 0);
			txn_state[open_id[slot]] = commit ? 1 : 2;
			open[slot] = NULL;
		}
		model_check(f, log, n, txn_state);
	}
	for (int i = 0; i < MODEL_TXNS; i++) {
		if (open[i]) {
			assert_int_equal(tfs_plog_txn_end(open[i], true, false), 0);
			txn_state[open_id[i]] = 1;
		}
	}
	model_check(f, log, n, txn_state);
	open_pl(f);
	model_check(f, log, n, txn_state);
}

/* ---- threads ---- */

#define THREAD_TXNS 40

struct writer {
	struct fx *f;
	int64_t pid;
};

/* Transactions of three keys "<pid>-<u>-<i>", committed, or plain appends. */
static void *txn_writer(void *arg)
{
	struct writer *w = arg;

	for (int u = 0; u < THREAD_TXNS; u++) {
		char k[3][32];
		struct tfs_append_rec r[3];
		struct tfs_plog_txn *t;
		for (int i = 0; i < 3; i++) {
			snprintf(k[i], sizeof(k[i]), "%d-%d-%d", (int)w->pid, u, i);
			r[i] = rec(k[i], "v");
		}
		if (w->pid < 0) {
			assert_int_equal(tfs_plog_append(w->f->pl, r, 3, false, NULL, NULL), 0);
			continue;
		}
		assert_int_equal(tfs_plog_txn_begin(w->f->pl, w->pid, 0, &t), 0);
		assert_int_equal(tfs_plog_txn_append(t, r, 1), 0);
		assert_int_equal(tfs_plog_txn_append(t, r + 1, 2), 0);
		assert_int_equal(tfs_plog_txn_end(t, u % 4 != 3, false), 0);   /* every 4th aborts */
	}
	return NULL;
}

/* Two transactional writers and a plain one on one partition while a reader
 * looks: a transaction's keys are seen all or none, an aborted one's never,
 * and the last stable offset never passes the log end. */
static void readers_see_transactions_whole_while_writers_run(void **state)
{
	struct fx *f = *state;
	struct writer w[3] = { { f, 1 }, { f, 2 }, { f, -1 } };
	pthread_t th[3];

	open_pl(f);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, txn_writer, &w[i]), 0);
	for (int round = 0; round < 200; round++) {
		struct tfs_plog_stats st;
		tfs_offset_t lso = tfs_plog_last_stable_offset(f->pl);
		tfs_plog_stats(f->pl, &st);
		assert_true(lso <= st.log_end_offset);
		for (int pid = 1; pid <= 2; pid++) {
			int u = round % THREAD_TXNS, seen = 0;
			for (int i = 0; i < 3; i++) {
				char k[32];
				snprintf(k, sizeof(k), "%d-%d-%d", pid, u, i);
				seen += live(f->pl, k);
			}
			/* the reads are not one snapshot: a commit may land between them,
			 * but never takes a key away */
			assert_true(seen == 0 || seen == 3 || (u % 4 != 3));
			if (u % 4 == 3)
				assert_int_equal(seen, 0);
		}
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (int pid = 1; pid <= 2; pid++)
		for (int u = 0; u < THREAD_TXNS; u++) {
			char k[32];
			snprintf(k, sizeof(k), "%d-%d-2", pid, u);
			assert_int_equal(live(f->pl, k), u % 4 != 3);
		}
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), t_plog_dense(f->pl));
}

/* ---- crashes ---- */

#define CRASH_TXNS 6
#define CRASH_TXN_RECORDS 3

/* Transaction u: CRASH_TXN_RECORDS keys "u<u>-<i>" over two batches, then its
 * COMMIT, durable, acknowledged once tfs_plog_txn_end returned; small segments,
 * so rolls fall among them. */
static int crash_workload(void *arg, const char *fault_spec, int fd)
{
	struct fx *f = arg;

	open_pl(f);
	tfs_io_set_fault(f->io, fault_spec);
	for (int u = 0; u < CRASH_TXNS; u++) {
		struct tfs_plog_txn *t;
		char k[CRASH_TXN_RECORDS][16];
		struct tfs_append_rec r[CRASH_TXN_RECORDS];
		for (int i = 0; i < CRASH_TXN_RECORDS; i++) {
			snprintf(k[i], sizeof(k[i]), "u%d-%d", u, i);
			r[i] = rec(k[i], "v");
		}
		if (tfs_plog_txn_begin(f->pl, 100 + u, 0, &t) != 0 ||
		    tfs_plog_txn_append(t, r, 1) != 0 ||
		    tfs_plog_txn_append(t, r + 1, CRASH_TXN_RECORDS - 1) != 0 ||
		    tfs_plog_txn_end(t, true, true) != 0)
			return 3;
		if (write(fd, &u, sizeof(u)) != sizeof(u))
			return 4;
	}
	tfs_plog_close(f->pl);
	f->pl = NULL;
	return 0;
}

/* Killed at the n-th mutating operation, then reopened: every transaction is
 * there whole or not at all, every acknowledged one whole; none stays open. */
static bool crash_at(struct fx *f, int n)
{
	int acked[CRASH_TXNS];
	size_t nacked;
	bool finished;

	t_rmtree(f->path);
	f->cfg.segment_bytes = 300;
	nacked = t_crash_run(crash_workload, f, n, acked, sizeof(acked[0]), CRASH_TXNS, &finished);
	open_pl(f);
	for (int u = 0; u < CRASH_TXNS; u++) {
		int seen = 0;
		for (int i = 0; i < CRASH_TXN_RECORDS; i++) {
			char k[16];
			snprintf(k, sizeof(k), "u%d-%d", u, i);
			seen += live(f->pl, k);
		}
		assert_true(seen == 0 || seen == CRASH_TXN_RECORDS);
		if ((size_t)u < nacked)
			assert_int_equal(seen, CRASH_TXN_RECORDS);
	}
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), t_plog_dense(f->pl));
	tfs_plog_close(f->pl);
	f->pl = NULL;
	return finished;
}

static void a_crash_at_every_io_step_leaves_whole_transactions(void **state)
{
	sweep_crash_points(*state, crash_at, 3000);
}

/* Regression: a marker was bounded by max.message.bytes like data. A bound
 * lowered while a transaction was open made its COMMIT fail with EFBIG, and the
 * transaction then held the last stable offset back for good (the abort at the
 * next open failed the same way). Kafka bounds no control batch. */
static void a_marker_is_not_bounded_by_max_message_bytes(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t;
	char *v;

	open_pl(f);
	t = begin(f, 9);
	txn_put(t, "a", "x");
	f->cfg.max_message_bytes = 1;
	tfs_plog_set_config(f->pl, &f->cfg);
	assert_int_equal(tfs_plog_txn_end(t, true, false), 0);
	v = value_of(f->pl, "a");
	assert_string_equal(v, "x");
	free(v);
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 2);
	f->cfg.max_message_bytes = 1048588;
	tfs_plog_set_config(f->pl, &f->cfg);
	t = begin(f, 10);
	txn_put(t, "b", "y");
	f->cfg.max_message_bytes = 1;
	tfs_plog_set_config(f->pl, &f->cfg);
	assert_int_equal(tfs_plog_txn_end(t, false, false), 0);
	assert_false(live(f->pl, "b"));
	assert_int_equal(tfs_plog_last_stable_offset(f->pl), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(keys_appear_at_the_commit_and_never_before, setup, teardown),
		cmocka_unit_test_setup_teardown(aborted_records_never_name_a_key, setup, teardown),
		cmocka_unit_test_setup_teardown(an_empty_transaction_writes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(markers_are_no_records_of_a_key_of_their_bytes, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(the_txnindex_holds_the_aborts_and_is_rebuilt, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(an_open_transaction_is_aborted_at_open, setup, teardown),
		cmocka_unit_test_setup_teardown(a_commit_does_not_bring_back_a_key_deleted_after_its_records,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(commits_and_tombstones_agree_with_offset_order, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(two_commits_in_one_group_keep_a_tombstone, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(overlapping_transactions_prune_what_they_no_longer_need,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(a_marker_is_not_bounded_by_max_message_bytes, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(readers_see_transactions_whole_while_writers_run, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(a_crash_at_every_io_step_leaves_whole_transactions, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
