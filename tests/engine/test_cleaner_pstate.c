/* test_cleaner_pstate.c - producer state and the cleaner, Kafka's
 * testCompactionDeletesProducerStateSnapshots and testDuplicateCheckAfterCleaning:
 * a pass that replaces segments takes their snapshots along, and a retry of a
 * producer's newest batch still dedupes after its records were cleaned away. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/engine/cleaner_fixture.h"

/* Producer pid's batch of one record key = value at sequence seq. */
static int send_one(struct fx *f, int64_t pid, int32_t seq, const char *key, const char *value,
                    tfs_offset_t *first, size_t *count)
{
	struct tfs_batch_builder b;
	struct tfs_batch_params p = { .leader_epoch = -1, .producer_id = pid, .producer_epoch = 0,
	                              .base_sequence = seq };
	struct tfs_record_in in = { .key = tfs_slice_make(key, strlen(key)),
	                            .value = tfs_slice_make(value, strlen(value)),
	                            .timestamp = tfs_now_ms() };
	const uint8_t *out;
	uint8_t *copy;
	size_t len;
	int rc;

	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add(&b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	copy = malloc(len);
	memcpy(copy, out, len);
	tfs_batch_builder_release(&b);
	rc = tfs_plog_append_batch(f->pl, copy, len, false, first, count, NULL, NULL);
	free(copy);
	return rc;
}

static void a_pass_takes_the_snapshots_of_replaced_segments(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first, dup;
	size_t count;
	int before;

	f->cfg.min_cleanable_dirty_ratio = 0.0;
	fx_open(f);
	for (int s = 0; s < 4; s++) {
		assert_int_equal(send_one(f, 9, s, "k", "v", &first, &count), 0);
		fx_put(f, "k", "plain");
		fx_roll(f);                       /* a snapshot at each new base */
	}
	before = fx_count_files(f->path, ".snapshot");
	assert_int_equal(before, 4);
	assert_int_equal(fx_clean(f), 0);
	assert_true(fx_segments(f->pl) < 5);
	/* one snapshot per remaining segment base at most, none for a vanished one */
	assert_true(fx_count_files(f->path, ".snapshot") < before);
	assert_true(fx_verify_files(f->path) > 0);   /* every batch left checks */
	/* the producer's newest batch (its record superseded) still dedupes */
	fx_reopen(f);
	assert_int_equal(send_one(f, 9, 3, "k", "v", &dup, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(dup, first);
	assert_int_equal(send_one(f, 9, 5, "k", "v", &dup, &count), TFS_ESEQUENCE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(a_pass_takes_the_snapshots_of_replaced_segments,
		                                fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
