/* test_producer_state.c - a partition's producer state: the cases of Kafka's
 * ProducerStateManagerTest (and UnifiedLogTest's duplicate checks) that apply to
 * a client's idempotent batches, replay, expiration and snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/producer/producer_state.h"

#define PID 1L
#define NOW 1000000L

static struct tfs_pstate_in batch(int64_t pid, int16_t epoch, int32_t seq, int32_t count,
                                  int64_t ts)
{
	return (struct tfs_pstate_in){
		.producer_id = pid, .epoch = epoch, .base_seq = seq,
		.last_offset_delta = count - 1, .max_timestamp = ts,
	};
}

/* Checks in as a client's batch and, if it is to be appended, applies it at
 * *next. Returns the verdict or error. */
static int append(struct tfs_pstate *ps, struct tfs_pstate_in in, tfs_offset_t *next,
                  struct tfs_pstate_batch *dup)
{
	const char *why;
	struct tfs_pstate_batch d;
	int rc = tfs_pstate_check(ps, &in, dup ? dup : &d, &why);

	if (rc == TFS_PSTATE_APPEND) {
		assert_int_equal(tfs_pstate_apply(ps, &in, *next, NULL), 0);
		*next += in.last_offset_delta + 1;
	} else if (rc < 0) {
		assert_non_null(why);
	}
	return rc;
}

static int setup(void **state)
{
	struct tfs_pstate *ps;

	assert_int_equal(tfs_pstate_create(&ps), 0);
	*state = ps;
	return 0;
}

static int teardown(void **state)
{
	tfs_pstate_destroy(*state);
	return 0;
}

/* testBasicIdMapping */
static void basic_id_mapping(void **state)
{
	struct tfs_pstate *ps = *state;
	tfs_offset_t next = 0;

	assert_int_equal(append(ps, batch(PID, 0, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(append(ps, batch(PID, 0, 1, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	/* a gap */
	assert_int_equal(append(ps, batch(PID, 0, 3, 1, NOW), &next, NULL), TFS_ESEQUENCE);
	assert_int_equal(append(ps, batch(PID, 0, 2, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	/* a new epoch at 0, then the older one is fenced */
	assert_int_equal(append(ps, batch(PID, 1, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(append(ps, batch(PID, 0, 3, 1, NOW), &next, NULL), TFS_EFENCED);
	/* a new epoch not at sequence 0 */
	assert_int_equal(append(ps, batch(PID, 2, 1, 1, NOW), &next, NULL), TFS_ESEQUENCE);
	assert_int_equal(append(ps, batch(PID, 2, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_end_offset(ps), 5);
	assert_int_equal(next, 5);
}

/* testDuplicateAppends: each of the last five is a duplicate with its offsets;
 * the sixth oldest is then out of order, as Kafka finds it. */
static void duplicates_of_last_five(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_batch dup;
	tfs_offset_t next = 100;

	for (int i = 0; i < 7; i++)
		assert_int_equal(append(ps, batch(PID, 0, i * 3, 3, NOW + i), &next, NULL),
		                 TFS_PSTATE_APPEND);
	for (int i = 2; i < 7; i++) {
		assert_int_equal(append(ps, batch(PID, 0, i * 3, 3, NOW), &next, &dup),
		                 TFS_PSTATE_DUPLICATE);
		assert_int_equal(dup.first_offset, 100 + i * 3);
		assert_int_equal(dup.last_offset, 100 + i * 3 + 2);
		assert_int_equal(dup.timestamp, NOW + i);
	}
	assert_int_equal(append(ps, batch(PID, 0, 3, 3, NOW), &next, NULL), TFS_ESEQUENCE);
	/* the same first sequence with another length is no duplicate */
	assert_int_equal(append(ps, batch(PID, 0, 18, 2, NOW), &next, NULL), TFS_ESEQUENCE);
	assert_int_equal(tfs_pstate_end_offset(ps), 121);
	/* the same sequences under a newer epoch are no duplicate */
	assert_int_equal(append(ps, batch(PID, 1, 18, 3, NOW), &next, NULL), TFS_ESEQUENCE);
}

/* testProducerSequenceWrapAround */
static void sequence_wrap_around(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_in in = batch(PID, 15, INT32_MAX - 1, 2, NOW);
	struct tfs_pstate_entry e;
	tfs_offset_t next = 9;

	assert_int_equal(tfs_pstate_apply(ps, &in, next, NULL), 0);   /* replayed */
	next += 2;
	assert_int_equal(append(ps, batch(PID, 15, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_get(ps, PID, &e), 0);
	assert_int_equal(e.batch[e.nbatches - 1].last_seq, 0);
	assert_int_equal(e.batch[e.nbatches - 1].last_offset, 11);
	/* a batch that wraps inside itself */
	assert_int_equal(tfs_pstate_seq_add(INT32_MAX - 1, 3), 1);
}

/* testProducerSequenceInvalidWrapAround */
static void sequence_invalid_wrap_around(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_in in = batch(PID, 15, INT32_MAX - 2, 2, NOW);
	tfs_offset_t next = 11;

	assert_int_equal(tfs_pstate_apply(ps, &in, 9, NULL), 0);
	assert_int_equal(append(ps, batch(PID, 15, 0, 1, NOW), &next, NULL), TFS_ESEQUENCE);
}

/* testNoValidationOnFirstEntryWhenLoadingLog and an unknown producer on a
 * client append: any first sequence is taken. */
static void unknown_producer_any_sequence(void **state)
{
	struct tfs_pstate *ps = *state;
	tfs_offset_t next = 0;
	struct tfs_pstate_entry e;

	assert_int_equal(append(ps, batch(PID, 5, 1234, 3, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_get(ps, PID, &e), 0);
	assert_int_equal(e.epoch, 5);
	assert_int_equal(e.batch[0].first_seq, 1234);
	assert_int_equal(e.batch[0].last_seq, 1236);
	assert_int_equal(append(ps, batch(PID, 5, 1237, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_get(ps, 2, &e), -ENOENT);
}

/* testAcceptAppendWithSequenceGapsOnReplica: replay takes gaps (compaction). */
static void replay_accepts_gaps(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_in a = batch(PID, 0, 0, 1, NOW), b = batch(PID, 0, 5, 1, NOW);
	struct tfs_pstate_entry e;

	assert_int_equal(tfs_pstate_apply(ps, &a, 0, NULL), 0);
	assert_int_equal(tfs_pstate_apply(ps, &b, 7, NULL), 0);
	assert_int_equal(tfs_pstate_get(ps, PID, &e), 0);
	assert_int_equal(e.nbatches, 2);
	assert_int_equal(tfs_pstate_end_offset(ps), 8);
}

/* testControlRecordBumpsProducerEpoch, testOutOfSequenceAfterControlRecordEpochBump */
static void control_record_bumps_epoch(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_in marker = { .producer_id = PID, .epoch = 1, .control = true,
	                                .max_timestamp = NOW };
	struct tfs_pstate_entry e;
	tfs_offset_t next = 0;

	assert_int_equal(append(ps, batch(PID, 0, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_apply(ps, &marker, next++, NULL), 0);
	assert_int_equal(tfs_pstate_get(ps, PID, &e), 0);
	assert_int_equal(e.epoch, 1);
	assert_int_equal(e.nbatches, 0);
	/* the old epoch is fenced; the new one must not continue the old sequence */
	assert_int_equal(append(ps, batch(PID, 0, 1, 1, NOW), &next, NULL), TFS_EFENCED);
	assert_int_equal(append(ps, batch(PID, 1, 1, 1, NOW), &next, NULL), TFS_ESEQUENCE);
	assert_int_equal(append(ps, batch(PID, 1, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
}

/* testPidExpirationTimeout, testProducersWithOngoingTransactionsDontExpire */
static void expiration(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_in txn = batch(2, 0, 0, 1, NOW - 5000);
	tfs_offset_t next = 0;

	txn.transactional = true;
	assert_int_equal(append(ps, batch(PID, 0, 0, 1, NOW - 5000), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_apply(ps, &txn, next++, NULL), 0);
	assert_int_equal(append(ps, batch(3, 0, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_expire(ps, NOW, 5001), 0);
	assert_int_equal(tfs_pstate_expire(ps, NOW, 5000), 1);    /* only PID: 2 is in a txn */
	assert_int_equal(tfs_pstate_count(ps), 2);
	/* an expired producer is unknown again: any sequence */
	assert_int_equal(append(ps, batch(PID, 0, 77, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
}

/* A failed append is undone: the producer is as before, or gone if new. */
static void undo_restores(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_undo u1, u2;
	struct tfs_pstate_in a = batch(PID, 0, 0, 1, NOW), b = batch(PID, 0, 1, 1, NOW);
	struct tfs_pstate_entry e;

	assert_int_equal(tfs_pstate_apply(ps, &a, 0, &u1), 0);
	assert_int_equal(tfs_pstate_apply(ps, &b, 1, &u2), 0);
	tfs_pstate_undo(ps, PID, &u2);
	assert_int_equal(tfs_pstate_get(ps, PID, &e), 0);
	assert_int_equal(e.nbatches, 1);
	tfs_pstate_undo(ps, PID, &u1);
	assert_int_equal(tfs_pstate_get(ps, PID, &e), -ENOENT);
}

/* testTakeSnapshot / testReadWriteSnapshot / testRecoverFromSnapshot*: the newest
 * batch of each producer survives; duplicates of it are still found. */
static void snapshot_round_trip(void **state)
{
	struct tfs_pstate *ps = *state, *back;
	struct tfs_pstate_in txn = batch(7, 3, 10, 2, NOW);
	struct tfs_pstate_batch dup;
	struct tfs_pstate_entry e;
	tfs_offset_t next = 0;
	uint8_t *buf;
	size_t len;
	const char *why;

	txn.transactional = true;
	assert_int_equal(append(ps, batch(PID, 0, 0, 4, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(append(ps, batch(PID, 0, 4, 2, NOW + 1), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_apply(ps, &txn, next, NULL), 0);
	next += 2;
	assert_int_equal(tfs_pstate_snapshot_encode(ps, &buf, &len), 0);
	assert_int_equal(len, 10 + 46 * 2);
	assert_int_equal(buf[0], 0);
	assert_int_equal(buf[1], 1);
	assert_int_equal(tfs_pstate_create(&back), 0);
	assert_int_equal(tfs_pstate_snapshot_decode(back, buf, len, next, NOW, 0, &why), 0);
	assert_int_equal(tfs_pstate_end_offset(back), 8);
	assert_int_equal(tfs_pstate_get(back, PID, &e), 0);
	assert_int_equal(e.nbatches, 1);
	assert_int_equal(e.batch[0].first_seq, 4);
	assert_int_equal(e.batch[0].last_offset, 5);
	assert_int_equal(e.batch[0].first_offset, 4);
	assert_int_equal(append(back, batch(PID, 0, 4, 2, NOW), &next, &dup), TFS_PSTATE_DUPLICATE);
	assert_int_equal(dup.first_offset, 4);
	assert_int_equal(append(back, batch(PID, 0, 6, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_get(back, 7, &e), 0);
	assert_int_equal(e.epoch, 3);
	assert_int_equal(e.txn_first_offset, 6);
	tfs_pstate_destroy(back);
	free(buf);
}

/* testLoadFromEmptySnapshotFile, testLoadFromTruncatedSnapshotFile,
 * testLoadFromCorruptSnapshotFile, testRemoveExpiredPidsOnReload */
static void snapshot_corrupt_and_expired(void **state)
{
	struct tfs_pstate *ps = *state;
	tfs_offset_t next = 0;
	uint8_t *buf;
	size_t len;
	const char *why;

	assert_int_equal(append(ps, batch(PID, 0, 0, 1, NOW - 10000), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(append(ps, batch(2, 0, 0, 1, NOW), &next, NULL), TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_snapshot_encode(ps, &buf, &len), 0);

	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, 0, 2, NOW, 0, &why), TFS_ECORRUPT);
	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, len - 1, 2, NOW, 0, &why), TFS_ECORRUPT);
	assert_int_equal(tfs_pstate_count(ps), 0);
	buf[len - 3] ^= 1;
	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, len, 2, NOW, 0, &why), TFS_ECORRUPT);
	assert_non_null(why);
	buf[len - 3] ^= 1;
	buf[1] = 2;
	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, len, 2, NOW, 0, &why), TFS_ECORRUPT);
	buf[1] = 1;
	/* a count that would overflow the size */
	buf[6] = 0x7f;
	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, len, 2, NOW, 0, &why), TFS_ECORRUPT);
	buf[6] = 0;

	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, len, 2, NOW, 5000, &why), 0);
	assert_int_equal(tfs_pstate_count(ps), 1);
	free(buf);
	/* an empty state's snapshot is the bare header */
	tfs_pstate_clear(ps);
	assert_int_equal(tfs_pstate_snapshot_encode(ps, &buf, &len), 0);
	assert_int_equal(len, 10);
	assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, len, 0, NOW, 0, &why), 0);
	free(buf);
}

/* Many producers stay sorted and found. */
static void many_producers(void **state)
{
	struct tfs_pstate *ps = *state;
	struct tfs_pstate_entry *all = calloc(1000, sizeof(*all));
	tfs_offset_t next = 0;

	assert_non_null(all);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(append(ps, batch((i * 7919) % 1000, 0, 0, 1, NOW), &next, NULL),
		                 TFS_PSTATE_APPEND);
	assert_int_equal(tfs_pstate_list(ps, all, 1000), 1000);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(all[i].producer_id, i);
	free(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(basic_id_mapping, setup, teardown),
		cmocka_unit_test_setup_teardown(duplicates_of_last_five, setup, teardown),
		cmocka_unit_test_setup_teardown(sequence_wrap_around, setup, teardown),
		cmocka_unit_test_setup_teardown(sequence_invalid_wrap_around, setup, teardown),
		cmocka_unit_test_setup_teardown(unknown_producer_any_sequence, setup, teardown),
		cmocka_unit_test_setup_teardown(replay_accepts_gaps, setup, teardown),
		cmocka_unit_test_setup_teardown(control_record_bumps_epoch, setup, teardown),
		cmocka_unit_test_setup_teardown(expiration, setup, teardown),
		cmocka_unit_test_setup_teardown(undo_restores, setup, teardown),
		cmocka_unit_test_setup_teardown(snapshot_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(snapshot_corrupt_and_expired, setup, teardown),
		cmocka_unit_test_setup_teardown(many_producers, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
