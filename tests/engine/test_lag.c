/* test_lag.c - consumer lag in records and time (engine/log/lag.c) against a
 * brute-force count over every record on disk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>

#include "engine/log/lag.h"
#include "tests/engine/cleaner_fixture.h"

#define COMMIT 1

/* One record on disk as the oracle sees it. */
struct orec {
	tfs_offset_t offset;
	int64_t pid;
	int64_t ts;
	bool txn, control, keyless;
	int marker;                     /* control: its type */
};

static struct orec *all_records(struct tfs_plog *pl, size_t *n)
{
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	struct tfs_batch_header bh;
	struct orec *v = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	while ((rc = tfs_plog_cursor_next(c, &r, &bh)) == 1) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			v = realloc(v, cap * sizeof(*v));
		}
		v[cnt] = (struct orec){ r.offset, bh.producer_id, r.timestamp,
		                        (bh.attributes & TFS_ATTR_TRANSACTIONAL) != 0,
		                        (bh.attributes & TFS_ATTR_CONTROL) != 0, r.key_null, -1 };
		if (v[cnt].control)
			v[cnt].marker = r.key.p[3];
		cnt++;
	}
	assert_int_equal(rc, 0);
	tfs_plog_cursor_close(c);
	*n = cnt;
	return v;
}

/* Whether a read_committed consumer is given v[i]: not a marker, and either not
 * transactional or followed by its producer's COMMIT before any ABORT. */
static bool delivered(const struct orec *v, size_t n, size_t i)
{
	if (v[i].control)
		return false;
	if (!v[i].txn)
		return true;
	for (size_t j = i + 1; j < n; j++)
		if (v[j].control && v[j].pid == v[i].pid)
			return v[j].marker == COMMIT;
	return false;
}

/* Checks tfs_plog_lag at every position from 0 to past the end; returns how many
 * positions had lag_records < lag_offsets. */
static int check_all_positions(struct tfs_plog *pl)
{
	size_t n;
	struct orec *v = all_records(pl, &n);
	struct tfs_plog_stats st;
	struct tfs_log_tally tally;
	int64_t keyless = 0, control = 0, given = 0;
	int fewer = 0;

	tfs_plog_stats(pl, &st);
	for (size_t i = 0; i < n; i++) {
		control += v[i].control;
		keyless += !v[i].control && v[i].keyless;
		given += delivered(v, n, i);
	}
	assert_int_equal(tfs_plog_tally(pl, &tally), 0);
	assert_int_equal(tally.control, control);
	assert_int_equal(tally.keyless, keyless);
	assert_int_equal(tally.delivered, given);
	for (tfs_offset_t pos = 0; pos <= st.log_end_offset + 1; pos++) {
		struct tfs_lag lag;
		int64_t want = 0;
		tfs_offset_t first = TFS_OFFSET_NONE;
		int64_t first_ts = -1;

		for (size_t i = 0; i < n; i++) {
			if (v[i].offset < pos || !delivered(v, n, i))
				continue;
			if (first == TFS_OFFSET_NONE) {
				first = v[i].offset;
				first_ts = v[i].ts;
			}
			want++;
		}
		assert_int_equal(tfs_plog_lag(pl, pos, &lag), 0);
		if (lag.lag_records != want)
			fail_msg("position %lld: lag_records %lld, on disk %lld", (long long)pos,
			         (long long)lag.lag_records, (long long)want);
		assert_int_equal(lag.first_offset, first);
		assert_int_equal(lag.first_timestamp, first_ts);
		assert_int_equal(lag.log_end_offset, st.log_end_offset);
		assert_int_equal(lag.lag_offsets, pos < st.log_end_offset ? st.log_end_offset - pos : 0);
		assert_true(lag.lag_records <= lag.lag_offsets);
		if (lag.lag_records < lag.lag_offsets)
			fewer++;
	}
	free(v);
	return fewer;
}

/* A compacted log with gaps: three sealed segments cleaned, tombstones among
 * them, then a dirty segment and an active one that repeat keys. */
static void test_compacted_with_gaps(void **state)
{
	struct fx *f = *state;
	size_t before, after;
	tfs_offset_t *offs;
	struct tfs_lag lag;

	fx_open(f);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 40; i++) {
			char k[16], val[16];
			snprintf(k, sizeof(k), "k%d", i % 7);
			snprintf(val, sizeof(val), "v%d.%d", round, i);
			fx_put(f, k, i % 13 == 12 ? NULL : val);
		}
		fx_put(f, NULL, "keyless");
		fx_roll(f);
	}
	free(fx_offsets(f->pl, &before));
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &after);
	free(offs);
	assert_true(after < before / 3);         /* the cleaner made holes */
	for (int i = 0; i < 20; i++)
		fx_put(f, "k1", "dirty");
	fx_roll(f);
	for (int i = 0; i < 20; i++)
		fx_put(f, i % 2 ? "k2" : NULL, "active");

	/* a first question builds the tallies; the answers must not change when they
	 * are reused, nor when the active segment grows after they were built */
	assert_true(check_all_positions(f->pl) > 0);
	assert_int_equal(tfs_plog_lag(f->pl, 0, &lag), 0);
	assert_true(lag.lag_records < lag.lag_offsets);
	for (int i = 0; i < 5; i++)
		fx_put(f, "k3", "later");
	assert_true(check_all_positions(f->pl) > 0);

	/* and after a remount, which rebuilds nothing but the tallies */
	fx_reopen(f);
	assert_true(check_all_positions(f->pl) > 0);
}

/* Transactions: a committed one spanning two segments, an aborted one, one
 * still open at the end, interleaved with plain records of another producer. */
static void test_transactions(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec a[] = { { "a", "1" }, { "b", "2" } }, one[] = { { "p", "plain" } };
	int64_t t0 = 1700000000000LL;
	struct tfs_lag lag;

	fx_raw_init(&r);
	fx_raw_batch(&r, 0, -1, -1, -1, false, t0, one, 1);               /* 0 */
	fx_raw_batch(&r, 1, 7, 0, 0, true, t0 + 1, a, 2);                  /* 1-2 committed */
	fx_raw_batch(&r, 3, 8, 0, 0, true, t0 + 2, a, 2);                  /* 3-4 aborted */
	fx_raw_segment(f, &r, 0);
	fx_raw_batch(&r, 5, 7, 0, 2, true, t0 + 3, a, 2);                  /* 5-6 committed */
	fx_raw_marker(&r, 7, 8, 0, TFS_CONTROL_ABORT, t0 + 4);             /* 7 */
	fx_raw_batch(&r, 8, -1, -1, -1, false, t0 + 5, one, 1);            /* 8 */
	fx_raw_marker(&r, 9, 7, 0, COMMIT, t0 + 6);                        /* 9 */
	fx_raw_segment(f, &r, 5);
	fx_raw_batch(&r, 10, 9, 0, 0, true, t0 + 7, a, 2);                 /* 10-11 open */
	fx_raw_batch(&r, 12, -1, -1, -1, false, t0 + 8, one, 1);           /* 12 */
	fx_raw_batch(&r, 13, 7, 0, 4, true, t0 + 9, a, 1);                 /* 13 aborted */
	fx_raw_marker(&r, 14, 7, 0, TFS_CONTROL_ABORT, t0 + 10);           /* 14 */
	fx_raw_segment(f, &r, 10);
	fx_raw_release(&r);
	fx_open(f);

	/* the transaction left open (10-11) has no writer any more: the open
	 * aborted it, with a marker at 15 (docs/semantics.md) */
	struct tfs_log_tally tally;
	check_all_positions(f->pl);
	assert_int_equal(tfs_plog_tally(f->pl, &tally), 0);
	assert_int_equal(tally.control, 4);
	assert_int_equal(tfs_plog_lag(f->pl, 0, &lag), 0);
	assert_int_equal(lag.lag_records, 7);    /* 0, 1, 2, 5, 6, 8, 12 */
	assert_int_equal(lag.lag_offsets, 16);
	/* from inside the aborted one, the first given record is the committed 5 */
	assert_int_equal(tfs_plog_lag(f->pl, 3, &lag), 0);
	assert_int_equal(lag.first_offset, 5);
	assert_int_equal(lag.first_timestamp, t0 + 3);
	assert_int_equal(tfs_lag_ms(&lag, t0 + 1003), 1000);
	/* past everything given, only markers and aborted data are left: nothing */
	assert_int_equal(tfs_plog_lag(f->pl, 13, &lag), 0);
	assert_int_equal(lag.lag_records, 0);
	assert_int_equal(tfs_lag_ms(&lag, t0 + 1003), 0);

	/* a live transaction's records are not given until its commit */
	struct tfs_plog_txn *txn;
	struct tfs_append_rec live = { .key = tfs_slice_make("live", 4),
	                               .value = tfs_slice_make("v", 1) };
	assert_int_equal(tfs_plog_txn_begin(f->pl, 11, 0, &txn), 0);
	assert_int_equal(tfs_plog_txn_append(txn, &live, 1), 0);
	assert_int_equal(tfs_plog_lag(f->pl, 13, &lag), 0);
	assert_int_equal(lag.lag_records, 0);
	assert_int_equal(tfs_plog_txn_end(txn, true, false), 0);
	assert_int_equal(tfs_plog_lag(f->pl, 13, &lag), 0);
	assert_int_equal(lag.lag_records, 1);
}

/* Segments large enough for several checkpoints (a question from inside one
 * starts at the nearest), cleaned so that batches lost records, with batches of
 * several records so that positions fall inside batches. */
static void test_large_segments(void **state)
{
	struct fx *f = *state;
	char v[101];

	memset(v, 'x', 100);
	v[100] = '\0';
	fx_open(f);
	for (int seg = 0; seg < 3; seg++) {
		for (int i = 0; i < 700; i += 4) {
			struct tfs_append_rec r[4];
			memset(r, 0, sizeof(r));
			char k[4][16];
			for (int j = 0; j < 4; j++) {
				snprintf(k[j], sizeof(k[j]), "k%d", (i + j) % (seg == 1 ? 50 : 900));
				r[j].key = tfs_slice_make(k[j], strlen(k[j]));
				r[j].key_null = (i + j) % 97 == 0;
				r[j].value = tfs_slice_make(v, 100);
			}
			assert_int_equal(tfs_plog_append(f->pl, r, 4, false, NULL, NULL), 0);
		}
		if (seg == 1)
			assert_int_equal(fx_clean(f), 0);
		fx_roll(f);
	}
	assert_int_equal(fx_clean(f), 0);
	assert_true(check_all_positions(f->pl) > 0);
}

/* An empty log and positions past its end. */
static void test_empty_and_past_end(void **state)
{
	struct fx *f = *state;
	struct tfs_lag lag;

	fx_open(f);
	assert_int_equal(tfs_plog_lag(f->pl, 0, &lag), 0);
	assert_int_equal(lag.lag_records, 0);
	assert_int_equal(lag.lag_offsets, 0);
	assert_int_equal(lag.first_offset, TFS_OFFSET_NONE);
	fx_put(f, "k", "v");
	assert_int_equal(tfs_plog_lag(f->pl, -5, &lag), 0);
	assert_int_equal(lag.lag_records, 1);
	assert_int_equal(tfs_plog_lag(f->pl, 100, &lag), 0);
	assert_int_equal(lag.lag_records, 0);
	assert_int_equal(lag.lag_offsets, 0);
}

/* Questions from several threads while a writer appends and rolls: every answer
 * counts at most what was appended, never less than what was appended before the
 * question began, and the tallies end equal to a fresh count. */
#define LAG_THREADS 3
#define LAG_APPENDS 400

struct lag_reader {
	struct tfs_plog *pl;
	atomic_int *appended;
	atomic_bool *done;
	int questions;
};

static void *lag_reader_run(void *arg)
{
	struct lag_reader *r = arg;

	while (!atomic_load(r->done)) {
		int before = atomic_load(r->appended);
		struct tfs_lag lag;
		assert_int_equal(tfs_plog_lag(r->pl, 0, &lag), 0);
		assert_true(lag.lag_records >= before && lag.lag_records <= LAG_APPENDS);
		r->questions++;
	}
	return NULL;
}

static void test_concurrent_questions(void **state)
{
	struct fx *f = *state;
	struct lag_reader readers[LAG_THREADS];
	pthread_t th[LAG_THREADS];
	atomic_int appended = 0;
	atomic_bool done = false;
	struct tfs_lag lag;

	fx_open(f);
	for (int i = 0; i < LAG_THREADS; i++) {
		readers[i] = (struct lag_reader){ f->pl, &appended, &done, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, lag_reader_run, &readers[i]), 0);
	}
	for (int i = 0; i < LAG_APPENDS; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		fx_put(f, k, "v");
		atomic_fetch_add(&appended, 1);
		if (i % 100 == 99)
			fx_roll(f);
	}
	atomic_store(&done, true);
	for (int i = 0; i < LAG_THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(tfs_plog_lag(f->pl, 0, &lag), 0);
	assert_int_equal(lag.lag_records, LAG_APPENDS);
	check_all_positions(f->pl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_compacted_with_gaps, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_transactions, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_empty_and_past_end, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_questions, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_large_segments, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
