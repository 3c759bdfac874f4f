/* test_offset_map.c - the cleaner's offset map (engine/cleaner/offset_map.c), porting Kafka's
 * OffsetMapTest plus the topicfs rules: 24-byte entries, the full rule, max offset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/offset_map.h"

#define ENTRY_BYTES 24
#define DEFAULT_LOAD_FACTOR 0.9
#define KEY_CAP 32

/* Key i as bytes "key-<i>" (Kafka's test uses the decimal string of i). */
struct tkey {
	char buf[KEY_CAP];
	size_t len;
};

static struct tkey key_of(long i)
{
	struct tkey k;
	int n = snprintf(k.buf, sizeof(k.buf), "key-%ld", i);
	assert_true(n > 0 && (size_t)n < sizeof(k.buf));
	k.len = (size_t)n;
	return k;
}

static struct tfs_slice sl(const struct tkey *k)
{
	return tfs_slice_make(k->buf, k->len);
}

static int put_i(struct tfs_offset_map *m, long i, tfs_offset_t off)
{
	struct tkey k = key_of(i);
	return tfs_offset_map_put(m, sl(&k), off);
}

static tfs_offset_t get_i(const struct tfs_offset_map *m, long i)
{
	struct tkey k = key_of(i);
	return tfs_offset_map_get(m, sl(&k));
}

static struct tfs_offset_map *make(size_t bytes, double lf)
{
	struct tfs_offset_map *m = NULL;
	assert_int_equal(tfs_offset_map_create(bytes, lf, &m), 0);
	assert_non_null(m);
	return m;
}

static void test_entry_bytes_is_24(void **state)
{
	(void)state;
	assert_int_equal(tfs_offset_map_entry_bytes(), ENTRY_BYTES);
	struct tfs_offset_map *m = make(ENTRY_BYTES * 1000 + 23, DEFAULT_LOAD_FACTOR);
	assert_int_equal(tfs_offset_map_slots(m), 1000);     /* remainder bytes unused */
	assert_int_equal(tfs_offset_map_max_entries(m), 900);
	tfs_offset_map_destroy(m);
}

/* Kafka's testBasicValidation: memory = items × 48, i.e. two slots per item. */
static void basic_validation(long items, double lf)
{
	struct tfs_offset_map *m = make((size_t)items * 2 * ENTRY_BYTES, lf);

	for (long i = 0; i < items; i++)
		assert_int_equal(put_i(m, i, i), 0);
	for (long i = 0; i < items; i++)
		assert_int_equal(get_i(m, i), i);
	assert_int_equal(tfs_offset_map_size(m), items);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

static void test_basic_validation(void **state)
{
	static const long sizes[] = { 10, 100, 1000, 5000 };
	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		basic_validation(sizes[i], 0.5);
		basic_validation(sizes[i], 1.0);   /* fills every slot: probing wraps */
	}
}

static void test_clear(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, 0.5);

	for (long i = 0; i < 10; i++)
		assert_int_equal(put_i(m, i, i), 0);
	for (long i = 0; i < 10; i++)
		assert_int_equal(get_i(m, i), i);
	tfs_offset_map_clear(m);
	for (long i = 0; i < 10; i++)
		assert_int_equal(get_i(m, i), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_size(m), 0);
	assert_int_equal(tfs_offset_map_latest_offset(m), TFS_OFFSET_NONE);
	assert_true(tfs_offset_map_utilization(m) == 0.0);
	assert_int_equal(tfs_offset_map_check(m), 0);

	/* The next pass reuses the arena. */
	for (long i = 100; i < 110; i++)
		assert_int_equal(put_i(m, i, i * 2), 0);
	for (long i = 100; i < 110; i++)
		assert_int_equal(get_i(m, i), i * 2);
	assert_int_equal(get_i(m, 5), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_size(m), 10);
	tfs_offset_map_clear(m);
	tfs_offset_map_clear(m);            /* clearing an empty map is fine */
	assert_int_equal(tfs_offset_map_size(m), 0);
	tfs_offset_map_destroy(m);
}

/* Kafka's testGetWhenFull: a lookup of a missing key ends on a map with no empty slot. */
static void test_get_when_full(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, 1.0);
	long i = 37;   /* any start would do */

	while (tfs_offset_map_size(m) < tfs_offset_map_slots(m)) {
		assert_int_equal(put_i(m, i, i), 0);
		i++;
	}
	assert_true(tfs_offset_map_full(m));
	assert_int_equal(get_i(m, i), TFS_OFFSET_NONE);
	assert_int_equal(get_i(m, i - 1), i - 1);
	assert_int_equal(get_i(m, 37), 37);
	assert_int_equal(put_i(m, i, i), -ENOSPC);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

/* The map fills at floor(slots × load factor); further puts fail and change nothing. */
static void test_full_at_load_factor(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(100 * ENTRY_BYTES, DEFAULT_LOAD_FACTOR);
	size_t cap = tfs_offset_map_max_entries(m);
	long i;

	assert_int_equal(cap, 90);
	for (i = 0; i < (long)cap; i++) {
		assert_false(tfs_offset_map_full(m));
		assert_int_equal(put_i(m, i, 1000 + i), 0);
	}
	assert_true(tfs_offset_map_full(m));
	assert_int_equal(tfs_offset_map_size(m), cap);
	tfs_offset_t latest = tfs_offset_map_latest_offset(m);
	assert_int_equal(latest, 1000 + (long)cap - 1);

	/* A new key and, as in Kafka's buildOffsetMap, even a present key are refused. */
	assert_int_equal(put_i(m, i, 5000), -ENOSPC);
	assert_int_equal(put_i(m, 0, 5000), -ENOSPC);
	assert_int_equal(tfs_offset_map_size(m), cap);
	assert_int_equal(tfs_offset_map_latest_offset(m), latest);
	assert_int_equal(get_i(m, i), TFS_OFFSET_NONE);
	for (long j = 0; j < (long)cap; j++)
		assert_int_equal(get_i(m, j), 1000 + j);
	assert_int_equal(tfs_offset_map_check(m), 0);

	tfs_offset_map_clear(m);
	assert_false(tfs_offset_map_full(m));
	assert_int_equal(put_i(m, i, 5000), 0);
	tfs_offset_map_destroy(m);
}

/* Kafka's testLatestOffset / testUpdateLatestOffset. */
static void test_latest_offset(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, DEFAULT_LOAD_FACTOR);

	assert_int_equal(tfs_offset_map_latest_offset(m), TFS_OFFSET_NONE);
	for (long i = 0; i < 10; i++) {
		assert_int_equal(put_i(m, i, i * 3), 0);
		assert_int_equal(tfs_offset_map_latest_offset(m), i * 3);
	}
	/* Raised past the keys without storing one (gap at a segment's end). */
	tfs_offset_map_update_latest_offset(m, 100);
	assert_int_equal(tfs_offset_map_latest_offset(m), 100);
	assert_int_equal(tfs_offset_map_size(m), 10);
	/* Never lowered: it stays >= every stored offset. */
	tfs_offset_map_update_latest_offset(m, 50);
	assert_int_equal(tfs_offset_map_latest_offset(m), 100);
	assert_int_equal(put_i(m, 3, 60), 0);
	assert_int_equal(tfs_offset_map_latest_offset(m), 100);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

/* A put for a present fingerprint keeps the larger offset; size does not change. */
static void test_put_keeps_max(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, DEFAULT_LOAD_FACTOR);

	assert_int_equal(put_i(m, 7, 5), 0);
	assert_int_equal(put_i(m, 7, 3), 0);
	assert_int_equal(get_i(m, 7), 5);
	assert_int_equal(put_i(m, 7, 9), 0);
	assert_int_equal(get_i(m, 7), 9);
	assert_int_equal(tfs_offset_map_size(m), 1);
	assert_int_equal(put_i(m, 8, 0), 0);   /* offset 0 is a real offset, not "empty" */
	assert_int_equal(get_i(m, 8), 0);
	assert_int_equal(tfs_offset_map_size(m), 2);
	tfs_offset_map_destroy(m);
}

/* Kafka's testUtilization: size / slots after each put. */
static void test_utilization(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, DEFAULT_LOAD_FACTOR);
	double slots = (double)tfs_offset_map_slots(m);

	assert_true(tfs_offset_map_utilization(m) == 0.0);
	for (long i = 0; i < 50; i++) {
		assert_int_equal(put_i(m, i, i), 0);
		assert_true(fabs(tfs_offset_map_utilization(m) - (double)(i + 1) / slots) < 1e-12);
	}
	assert_int_equal(put_i(m, 0, 99), 0);   /* an update adds no entry */
	assert_true(fabs(tfs_offset_map_utilization(m) - 50.0 / slots) < 1e-12);
	tfs_offset_map_destroy(m);
}

/* The empty key is a key; absent keys are absent; keys are bytes, not C strings. */
static void test_empty_key_and_binary_keys(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, DEFAULT_LOAD_FACTOR);
	static const uint8_t a[] = { 'a', 0, 'x' };
	static const uint8_t b[] = { 'a', 0, 'y' };
	static const uint8_t zero = 0;

	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(NULL, 0)), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make("", 0)), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_put(m, tfs_slice_make("", 0), 4), 0);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make("", 0)), 4);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(NULL, 0)), 4);   /* same key */
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(&zero, 1)), TFS_OFFSET_NONE);

	assert_int_equal(tfs_offset_map_put(m, tfs_slice_make(a, sizeof(a)), 10), 0);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(b, sizeof(b))), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_put(m, tfs_slice_make(b, sizeof(b)), 11), 0);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(a, sizeof(a))), 10);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(b, sizeof(b))), 11);
	assert_int_equal(tfs_offset_map_get(m, tfs_slice_make(a, 1)), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_size(m), 3);
	tfs_offset_map_destroy(m);
}

static void test_bad_arguments(void **state)
{
	(void)state;
	struct tfs_offset_map *m = NULL;

	assert_int_equal(tfs_offset_map_create(4096, 0.0, &m), -EINVAL);
	assert_int_equal(tfs_offset_map_create(4096, -0.5, &m), -EINVAL);
	assert_int_equal(tfs_offset_map_create(4096, 1.0000001, &m), -EINVAL);
	assert_int_equal(tfs_offset_map_create(4096, NAN, &m), -EINVAL);
	assert_int_equal(tfs_offset_map_create(0, DEFAULT_LOAD_FACTOR, &m), -EINVAL);
	assert_int_equal(tfs_offset_map_create(ENTRY_BYTES - 1, 1.0, &m), -EINVAL);
	/* One slot at 0.9 holds floor(0.9) = 0 keys: no progress possible. */
	assert_int_equal(tfs_offset_map_create(ENTRY_BYTES, DEFAULT_LOAD_FACTOR, &m), -EINVAL);
	/* Two slots at 0.5 hold exactly one. */
	assert_int_equal(tfs_offset_map_create(2 * ENTRY_BYTES, 0.5, &m), 0);
	assert_int_equal(tfs_offset_map_max_entries(m), 1);
	assert_int_equal(put_i(m, 1, 1), 0);
	assert_int_equal(put_i(m, 2, 2), -ENOSPC);
	tfs_offset_map_destroy(m);
	m = NULL;

	assert_int_equal(tfs_offset_map_create(ENTRY_BYTES, 1.0, &m), 0);
	assert_int_equal(tfs_offset_map_slots(m), 1);
	assert_int_equal(put_i(m, 1, -1), -EINVAL);
	assert_int_equal(put_i(m, 1, -2), -EINVAL);
	assert_int_equal(tfs_offset_map_put(m, tfs_slice_make(NULL, 3), 1), -EINVAL);
	assert_int_equal(tfs_offset_map_size(m), 0);
	assert_int_equal(tfs_offset_map_latest_offset(m), TFS_OFFSET_NONE);
	assert_int_equal(put_i(m, 1, 1), 0);
	assert_int_equal(get_i(m, 2), TFS_OFFSET_NONE);   /* one full slot, miss ends */
	tfs_offset_map_destroy(m);
	tfs_offset_map_destroy(NULL);
}

/* One million keys into a map sized for them at the default load factor: every key
 * found with its offset, no absent key found, nothing refused. */
static void test_million_keys(void **state)
{
	(void)state;
	enum { N = 1000000 };
	size_t slots = (size_t)ceil(N / DEFAULT_LOAD_FACTOR) + 1;
	struct tfs_offset_map *m = make(slots * ENTRY_BYTES, DEFAULT_LOAD_FACTOR);
	long lost = 0, phantom = 0;

	assert_true(tfs_offset_map_max_entries(m) >= N);
	for (long i = 0; i < N; i++)
		assert_int_equal(put_i(m, i, 2 * i), 0);
	assert_int_equal(tfs_offset_map_size(m), N);
	assert_int_equal(tfs_offset_map_latest_offset(m), 2 * (long)(N - 1));
	for (long i = 0; i < N; i++)
		lost += get_i(m, i) != 2 * i;
	for (long i = N; i < 2 * N; i++)
		phantom += get_i(m, i) != TFS_OFFSET_NONE;
	assert_int_equal(lost, 0);
	assert_int_equal(phantom, 0);
	assert_true(tfs_offset_map_utilization(m) > 0.89);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

/* A pass over a small dirty region gets a small live table: enough slots for the
 * bound at the load factor, rounded up to a power of two; the whole arena again
 * after clear. */
static void a_small_bound_gets_a_small_live_table(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(1 << 20, DEFAULT_LOAD_FACTOR);   /* 43690 slots */

	assert_int_equal(tfs_offset_map_live_slots(m), tfs_offset_map_slots(m));
	tfs_offset_map_reset(m, 100);                 /* 100 / 0.9 = 112 -> 128 */
	assert_int_equal(tfs_offset_map_live_slots(m), 128);
	assert_int_equal(tfs_offset_map_max_entries(m), 39321);   /* unchanged */
	for (long i = 0; i < 100; i++)
		assert_int_equal(put_i(m, i, i), 0);
	for (long i = 0; i < 100; i++)
		assert_int_equal(get_i(m, i), i);
	assert_int_equal(get_i(m, 100), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_live_slots(m), 128);     /* no growth needed */
	assert_int_equal(tfs_offset_map_check(m), 0);

	tfs_offset_map_reset(m, 0);                   /* an empty range: one slot */
	assert_int_equal(tfs_offset_map_live_slots(m), 1);
	assert_int_equal(get_i(m, 5), TFS_OFFSET_NONE);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_reset(m, 39321);               /* as many as max_entries: all */
	assert_int_equal(tfs_offset_map_live_slots(m), tfs_offset_map_slots(m));
	tfs_offset_map_reset(m, 30000);               /* 2^15 < 33334 needed: all 43690 */
	assert_int_equal(tfs_offset_map_live_slots(m), tfs_offset_map_slots(m));
	tfs_offset_map_clear(m);
	assert_int_equal(tfs_offset_map_live_slots(m), tfs_offset_map_slots(m));
	for (long i = 0; i < 100; i++)
		assert_int_equal(get_i(m, i), TFS_OFFSET_NONE);   /* the small round is gone */
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

/* More keys than the bound promised: the live table grows into the arena and keeps
 * every key; the map still fills at max_entries, at the same put as a map that was
 * never confined. */
static void the_full_rule_ignores_the_live_table(void **state)
{
	(void)state;
	struct tfs_offset_map *small = make(1000 * ENTRY_BYTES, DEFAULT_LOAD_FACTOR);
	struct tfs_offset_map *whole = make(1000 * ENTRY_BYTES, DEFAULT_LOAD_FACTOR);
	long i, refused_small = -1, refused_whole = -1;

	tfs_offset_map_reset(small, 4);
	assert_int_equal(tfs_offset_map_live_slots(small), 8);
	for (i = 0; i < 2000; i++) {
		int a = put_i(small, i % 1500, i), b = put_i(whole, i % 1500, i);
		assert_int_equal(a, b);
		if (a == -ENOSPC && refused_small < 0)
			refused_small = i;
		if (b == -ENOSPC && refused_whole < 0)
			refused_whole = i;
	}
	assert_int_equal(refused_small, 900);           /* floor(1000 × 0.9) keys went in */
	assert_int_equal(refused_whole, refused_small);
	assert_int_equal(tfs_offset_map_live_slots(small), 1000);
	assert_int_equal(tfs_offset_map_size(small), 900);
	assert_int_equal(tfs_offset_map_latest_offset(small), 899);
	for (i = 0; i < 900; i++)
		assert_int_equal(get_i(small, i), i);
	assert_int_equal(tfs_offset_map_check(small), 0);
	assert_int_equal(tfs_offset_map_check(whole), 0);
	tfs_offset_map_destroy(small);
	tfs_offset_map_destroy(whole);
}

/* put_fp says which offset a put made obsolete; the _fp calls and the key calls are
 * the same map. */
static void put_fp_reports_the_superseded_offset(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, DEFAULT_LOAD_FACTOR);
	struct tkey k = key_of(7);
	struct tfs_offset_map_fp fp = tfs_offset_map_fingerprint(sl(&k));
	struct tfs_offset_map_fp fp2 = tfs_offset_map_fingerprint(sl(&k));
	tfs_offset_t gone = 123;

	assert_true(fp.lo == fp2.lo && fp.hi == fp2.hi);
	tfs_offset_map_prefetch(m, fp);                   /* a hint: changes nothing */
	assert_int_equal(tfs_offset_map_size(m), 0);
	assert_int_equal(tfs_offset_map_put_fp(m, fp, 10, &gone), 0);
	assert_int_equal(gone, TFS_OFFSET_NONE);           /* a new key */
	assert_int_equal(tfs_offset_map_put_fp(m, fp, 20, &gone), 0);
	assert_int_equal(gone, 10);                        /* 10 is no longer the newest */
	assert_int_equal(tfs_offset_map_put_fp(m, fp, 15, &gone), 0);
	assert_int_equal(gone, 15);                        /* an older one than stored */
	assert_int_equal(tfs_offset_map_put_fp(m, fp, 20, &gone), 0);
	assert_int_equal(gone, TFS_OFFSET_NONE);           /* the same offset again */
	assert_int_equal(tfs_offset_map_put_fp(m, fp, -1, &gone), -EINVAL);
	assert_int_equal(tfs_offset_map_get_fp(m, fp), 20);
	assert_int_equal(get_i(m, 7), 20);
	assert_int_equal(put_i(m, 7, 30), 0);
	assert_int_equal(tfs_offset_map_get_fp(m, fp), 30);
	assert_int_equal(tfs_offset_map_size(m), 1);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

/* The largest offset an int64 holds is stored and found like any other. */
static void the_largest_offset_fits(void **state)
{
	(void)state;
	struct tfs_offset_map *m = make(4096, DEFAULT_LOAD_FACTOR);

	assert_int_equal(put_i(m, 1, INT64_MAX), 0);
	assert_int_equal(put_i(m, 2, 0), 0);
	assert_true(get_i(m, 1) == INT64_MAX);
	assert_int_equal(get_i(m, 2), 0);
	assert_true(tfs_offset_map_latest_offset(m) == INT64_MAX);
	assert_int_equal(tfs_offset_map_check(m), 0);
	tfs_offset_map_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entry_bytes_is_24),
		cmocka_unit_test(test_basic_validation),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_get_when_full),
		cmocka_unit_test(test_full_at_load_factor),
		cmocka_unit_test(test_latest_offset),
		cmocka_unit_test(test_put_keeps_max),
		cmocka_unit_test(test_utilization),
		cmocka_unit_test(test_empty_key_and_binary_keys),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_million_keys),
		cmocka_unit_test(a_small_bound_gets_a_small_live_table),
		cmocka_unit_test(the_full_rule_ignores_the_live_table),
		cmocka_unit_test(put_fp_reports_the_superseded_offset),
		cmocka_unit_test(the_largest_offset_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
