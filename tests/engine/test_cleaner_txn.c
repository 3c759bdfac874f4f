/* test_cleaner_txn.c - the cleaner's transaction rules on logs the engine wrote
 * itself (plog_txn.c), Kafka's LogCleanerTest testAbortMarkerRemoval and
 * testCommittedTransactionSpanningSegments in spirit: aborted data goes, its
 * marker and .txnindex entry stay until the horizon, the keys read the same
 * before a pass, after it and after a reopen, and the .txnindex a pass writes
 * is the one the next open finds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/engine/cleaner_fixture.h"

static void txn_put(struct tfs_plog_txn *t, const char *k, const char *v)
{
	struct tfs_append_rec r = { .key = tfs_slice_make(k, strlen(k)),
	                            .value = tfs_slice_make(v, strlen(v)) };
	assert_int_equal(tfs_plog_txn_append(t, &r, 1), 0);
}

static struct tfs_plog_txn *begin(struct fx *f, int64_t pid)
{
	struct tfs_plog_txn *t = NULL;
	assert_int_equal(tfs_plog_txn_begin(f->pl, pid, 0, &t), 0);
	return t;
}

static long txnindex_bytes(struct fx *f, tfs_offset_t base, uint8_t **out)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".txnindex", f->path, base);
	return t_read_file(path, out);
}

static void aborted_data_goes_and_its_index_entry_follows_the_marker(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *a, *c;
	struct tfs_aborted_txn at[2];
	struct fx_digest before;
	uint8_t *idx = NULL, *again = NULL;
	long len, len2;

	f->cfg.delete_retention_ms = 100;
	f->cfg.min_cleanable_dirty_ratio = 0.0;
	fx_open(f);
	fx_put(f, "k", "plain");                     /* 0 */
	a = begin(f, 11);
	c = begin(f, 12);
	txn_put(a, "k", "aborted");                  /* 1 */
	txn_put(c, "j", "committed");                /* 2 */
	txn_put(a, "gone", "aborted");               /* 3 */
	assert_int_equal(tfs_plog_txn_end(a, false, false), 0);   /* 4: ABORT */
	assert_int_equal(tfs_plog_txn_end(c, true, false), 0);    /* 5: COMMIT */
	fx_put(f, "z", "z");                         /* 6 */
	fx_roll(f);
	fx_put(f, "tail", "t");                      /* 7: the active segment */
	before = fx_kd_digest(f->pl);
	fx_value_is(f->pl, "k", "plain");
	fx_value_is(f->pl, "j", "committed");

	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 1));       /* aborted data gone */
	assert_false(fx_has_offset(f->pl, 3));
	assert_true(fx_has_offset(f->pl, 2));        /* committed data stays */
	assert_true(fx_has_offset(f->pl, 4));        /* the marker: its data was seen */
	fx_digest_equal(before, fx_kd_digest(f->pl));
	assert_int_equal(tfs_plog_aborted_txns(f->pl, 0, 100, at, 2), 1);
	assert_int_equal(at[0].first_offset, 1);     /* as written, not as seen now */
	assert_int_equal(at[0].last_offset, 4);
	len = txnindex_bytes(f, 0, &idx);
	assert_int_equal(len, TFS_TXNINDEX_ENTRY_BYTES);

	/* the next open finds the pass's .txnindex as it is, and the same keys */
	fx_reopen(f);
	len2 = txnindex_bytes(f, 0, &again);
	assert_int_equal(len2, len);
	assert_memory_equal(again, idx, (size_t)len);
	free(again);
	again = NULL;
	fx_digest_equal(before, fx_kd_digest(f->pl));
	assert_int_equal(tfs_plog_txn_state(f->pl, 11, 1), TFS_TXN_ABORTED);

	/* The producer's last batch (emptied) keeps the marker while the producer
	 * is active (Kafka's rule); once it expired, its batch goes, the marker gets
	 * its horizon, and then goes with its entry. */
	assert_int_equal(fx_clean(f), 0);
	assert_true(fx_has_offset(f->pl, 4));
	f->now = tfs_now_ms() + TFS_PRODUCER_EXPIRATION_MS;
	assert_int_equal(fx_clean(f), 0);           /* its empty batch goes */
	assert_true(fx_has_offset(f->pl, 4));
	assert_int_equal(fx_clean(f), 0);           /* horizon now + 100 */
	assert_true(fx_has_offset(f->pl, 4));
	f->now += 100;
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 4));
	assert_int_equal(tfs_plog_aborted_txns(f->pl, 0, 100, at, 2), 0);
	assert_int_equal(txnindex_bytes(f, 0, &again), -1);
	fx_value_is(f->pl, "j", "committed");
	fx_reopen(f);
	assert_int_equal(txnindex_bytes(f, 0, &again), -1);
	fx_digest_equal(before, fx_kd_digest(f->pl));
	free(idx);
}

/* Retention takes a segment's .txnindex with it. */
static void retention_takes_the_txnindex_along(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *a;
	uint8_t *idx = NULL;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = 1000;
	fx_open(f);
	a = begin(f, 21);
	txn_put(a, "x", "1");
	assert_int_equal(tfs_plog_txn_end(a, false, false), 0);
	fx_roll(f);
	fx_put(f, "y", "2");
	assert_int_equal(txnindex_bytes(f, 0, &idx), TFS_TXNINDEX_ENTRY_BYTES);
	free(idx);
	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = 1000;
	fx_set_config(f);
	f->now = tfs_now_ms() + 60000;
	{
		int deleted = -1;
		assert_int_equal(tfs_cleaner_enforce_retention(f->c, f->pl, &deleted), 0);
		/* the aborted transaction's segment, and the active one, expired too
		 * (rolled first, as Kafka does) */
		assert_int_equal(deleted, 2);
	}
	fx_close(f);
	assert_int_equal(txnindex_bytes(f, 0, &idx), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(aborted_data_goes_and_its_index_entry_follows_the_marker,
		                                fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(retention_takes_the_txnindex_along, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
