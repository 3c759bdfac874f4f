/* test_readcache.c - key reads through kept windows (fs/readcache.h, and the window
 * API of engine/log/partition_log.h under it): the same records as a plain read, the
 * newest value after overwrites, rolls and cleaning passes, corruption reported
 * (and confined to its batch), the byte bound, zstd batches, a deleted topic's
 * windows dropped, and readers running while a writer and the cleaner do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cleaner/cleaner.h"
#include "engine/engine.h"
#include "fs/readcache.h"
#include "io/log.h"
#include "tests/t_util.h"

#define BIG_BATCH 500           /* records per unit: one batch of ~30 KiB */
#define CACHE_BYTES (4u << 20)

struct fx {
	char *dir;
	struct tfs_engine *e;
	struct tfs_topic *t;
	struct tfs_plog *pl;
	struct tfs_readcache *rc;
	atomic_int refs;                /* topic references the cache holds */
};

static struct tfs_topic *fx_ref(void *arg, struct tfs_topic *t)
{
	struct fx *f = arg;
	struct tfs_topic *cur;

	if (tfs_topic_deleted(t))
		return NULL;
	cur = tfs_engine_topic_get(f->e, tfs_topic_name(t));
	if (cur != t) {
		tfs_topic_unref(cur);
		return NULL;
	}
	atomic_fetch_add(&f->refs, 1);
	return cur;
}

static void fx_unref(void *arg, struct tfs_topic *t)
{
	struct fx *f = arg;

	atomic_fetch_sub(&f->refs, 1);
	tfs_topic_unref(t);
}

static void open_engine(struct fx *f)
{
	struct tfs_engine_config cfg;

	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = f->dir;
	cfg.io_kind = tfs_io_kind_from_env();
	cfg.cleaner.threads = 0;        /* passes run when the test asks */
	assert_int_equal(tfs_engine_open(&cfg, &f->e), 0);
}

static void open_topic(struct fx *f, const char *name)
{
	struct tfs_inode_topic_ops ops = { fx_ref, fx_unref, f };

	if (!(f->t = tfs_engine_topic_get(f->e, name))) {
		assert_int_equal(tfs_engine_topic_create(f->e, name, 1, getuid(), getgid(), 0755), 0);
		f->t = tfs_engine_topic_get(f->e, name);
	}
	assert_non_null(f->t);
	f->pl = tfs_topic_partition(f->t, 0);
	assert_non_null(f->pl);
	if (!f->rc)
		assert_int_equal(tfs_readcache_create(&ops, CACHE_BYTES, &f->rc), 0);
}

static void close_all(struct fx *f)
{
	tfs_readcache_destroy(f->rc);
	f->rc = NULL;
	assert_int_equal(atomic_load(&f->refs), 0);    /* every reference returned */
	tfs_topic_unref(f->t);
	f->t = NULL;
	f->pl = NULL;
	tfs_engine_close(f->e);
	f->e = NULL;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	tfs_log_set_level(TFS_LOG_ERROR);
	f->dir = t_mkdtemp("readcache");
	open_engine(f);
	open_topic(f, "t");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->e)
		close_all(f);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void key_of(char *buf, size_t cap, int i)
{
	snprintf(buf, cap, "key-%06d", i);
}

/* Value i at version v: its key and version inside, a length that varies. */
static size_t value_of(char *buf, size_t cap, int i, int v)
{
	int n = snprintf(buf, cap, "key-%06d:v%d:", i, v);
	size_t len = (size_t)n + (size_t)((i * 7 + v * 13) % 90);

	memset(buf + n, 'a' + v % 26, len - (size_t)n);
	return len;
}

/* Puts keys [first, first + count) at version v as one unit (one batch). */
static void put_unit(struct tfs_plog *pl, int first, int count, int v)
{
	struct tfs_append_rec *recs = calloc((size_t)count, sizeof(*recs));
	char (*keys)[32] = calloc((size_t)count, sizeof(*keys));
	char (*vals)[160] = calloc((size_t)count, sizeof(*vals));

	for (int i = 0; i < count; i++) {
		key_of(keys[i], sizeof(keys[i]), first + i);
		recs[i].key = tfs_slice_make(keys[i], strlen(keys[i]));
		recs[i].value = tfs_slice_make(vals[i], value_of(vals[i], sizeof(vals[i]), first + i, v));
	}
	assert_int_equal(tfs_plog_append(pl, recs, (size_t)count, false, NULL, NULL), 0);
	free(recs);
	free(keys);
	free(vals);
}

/* Reads key i through the cache and checks it holds version v (v < 0: not live). */
static void expect(struct fx *f, int i, int v)
{
	struct tfs_record_copy got, plain;
	char key[32], want[160];
	size_t wlen;
	int rc;

	key_of(key, sizeof(key), i);
	rc = tfs_readcache_read_key(f->rc, f->t, f->pl, tfs_slice_make(key, strlen(key)), &got);
	if (v < 0) {
		assert_int_equal(rc, -ENOENT);
		return;
	}
	assert_int_equal(rc, 0);
	wlen = value_of(want, sizeof(want), i, v);
	assert_int_equal(got.value_len, wlen);
	assert_memory_equal(got.value, want, wlen);
	/* what a plain read gives; the batch header may be that of the batch before a
	 * pass rewrote it (its crc, count, attributes), whose base offset it keeps */
	assert_int_equal(tfs_plog_read_key(f->pl, tfs_slice_make(key, strlen(key)), &plain), 0);
	assert_int_equal(got.offset, plain.offset);
	assert_int_equal(got.timestamp, plain.timestamp);
	assert_int_equal(got.key_len, plain.key_len);
	assert_memory_equal(got.key, plain.key, plain.key_len);
	assert_int_equal(got.headers_len, plain.headers_len);
	assert_int_equal(got.batch.base_offset, plain.batch.base_offset);
	tfs_record_copy_release(&plain);
	tfs_record_copy_release(&got);
}

static void test_same_records_one_read_per_window(void **state)
{
	struct fx *f = *state;
	struct tfs_readcache_stats st;

	for (int b = 0; b < 3; b++)
		put_unit(f->pl, b * BIG_BATCH, BIG_BATCH, 1);
	for (int i = 0; i < 3 * BIG_BATCH; i++)
		expect(f, i, 1);
	tfs_readcache_stats(f->rc, &st);
	assert_true(st.misses <= 3);        /* one window per batch at most */
	assert_true(st.hits >= 3 * BIG_BATCH - 3);
	assert_true(st.windows >= 1 && st.bytes <= CACHE_BYTES);
	expect(f, 3 * BIG_BATCH, -1);       /* never written */
}

static void test_small_batches_share_a_window(void **state)
{
	struct fx *f = *state;
	struct tfs_readcache_stats st;

	for (int i = 0; i < 200; i++)
		put_unit(f->pl, i, 1, 2);
	for (int i = 0; i < 200; i++)
		expect(f, i, 2);
	tfs_readcache_stats(f->rc, &st);
	assert_true(st.misses < 20);        /* ~100 bytes a batch, 16 KiB a read */
}

static void test_newest_after_overwrites_and_tombstones(void **state)
{
	struct fx *f = *state;
	char key[32];
	struct tfs_append_rec del = { 0 };

	put_unit(f->pl, 0, BIG_BATCH, 1);
	expect(f, 7, 1);
	put_unit(f->pl, 7, 1, 2);           /* shorter or longer: value_of varies */
	expect(f, 7, 2);
	put_unit(f->pl, 0, 10, 3);
	for (int i = 0; i < 10; i++)
		expect(f, i, 3);
	expect(f, 10, 1);
	key_of(key, sizeof(key), 3);
	del.key = tfs_slice_make(key, strlen(key));
	del.value_null = true;
	assert_int_equal(tfs_plog_append(f->pl, &del, 1, false, NULL, NULL), 0);
	expect(f, 3, -1);
	put_unit(f->pl, 3, 1, 4);
	expect(f, 3, 4);
}

static void test_rolls_and_cleaning_passes(void **state)
{
	struct fx *f = *state;
	struct tfs_cleaner *c = tfs_engine_cleaner(f->e);
	struct tfs_plog_stats before, after;
	int n = 4 * BIG_BATCH;

	for (int b = 0; b < 4; b++)
		put_unit(f->pl, b * BIG_BATCH, BIG_BATCH, 1);
	for (int i = 0; i < n; i++)
		expect(f, i, 1);                /* every window is kept now */
	for (int round = 2; round < 5; round++) {
		for (int i = round % 2; i < n; i += 2)
			put_unit(f->pl, i, 1, round);
		assert_int_equal(tfs_plog_roll(f->pl), 0);
		tfs_plog_stats(f->pl, &before);
		assert_int_equal(tfs_cleaner_clean_now(c, f->pl), 0);
		tfs_plog_stats(f->pl, &after);
		assert_true(after.size_bytes < before.size_bytes);   /* the pass dropped records */
		for (int i = 0; i < n; i++)
			expect(f, i, i % 2 == round % 2 ? round : (round == 2 ? 1 : round - 1));
	}
}

/* Flips a byte of the records of the batch holding key i, in the segment file. */
static void damage_batch_of(struct fx *f, int i)
{
	struct tfs_record_copy rec;
	char key[32], path[4200];
	uint8_t *data = NULL;
	long len;
	int fd;

	key_of(key, sizeof(key), i);
	assert_int_equal(tfs_plog_read_key(f->pl, tfs_slice_make(key, strlen(key)), &rec), 0);
	snprintf(path, sizeof(path), "%s/00000000000000000000.log", tfs_plog_path(f->pl));
	len = t_read_file(path, &data);
	assert_true(len > 0);
	/* the value's bytes are unique in the file: flip the first of them */
	for (long p = 0; p + (long)rec.value_len <= len; p++) {
		if (!memcmp(data + p, rec.value, rec.value_len)) {
			uint8_t b = data[p] ^ 0x20;
			fd = open(path, O_WRONLY);
			assert_true(fd >= 0);
			assert_int_equal(pwrite(fd, &b, 1, p), 1);
			close(fd);
			break;
		}
	}
	free(data);
	tfs_record_copy_release(&rec);
}

static void test_corruption_is_reported_not_served(void **state)
{
	struct fx *f = *state;
	struct tfs_record_copy rec;
	char key[32];

	put_unit(f->pl, 0, 3, 1);           /* small batches: one window holds all three */
	put_unit(f->pl, 3, 3, 1);
	put_unit(f->pl, 6, 3, 1);
	damage_batch_of(f, 4);              /* before anything was read and kept */
	key_of(key, sizeof(key), 4);
	assert_int_equal(tfs_readcache_read_key(f->rc, f->t, f->pl, tfs_slice_make(key, strlen(key)),
	                                        &rec), TFS_ECORRUPT);
	key_of(key, sizeof(key), 5);
	assert_int_equal(tfs_plog_read_key(f->pl, tfs_slice_make(key, strlen(key)), &rec),
	                 TFS_ECORRUPT);
	expect(f, 0, 1);                    /* its neighbours in the same window are fine */
	expect(f, 8, 1);
	put_unit(f->pl, 4, 1, 2);           /* a newer record of the key reads again */
	expect(f, 4, 2);
}

/* Sets the magic byte of the log's batch number nth (from 0) to an unknown one. */
static void damage_header_of_batch(struct fx *f, int nth)
{
	char path[4200];
	uint8_t *data = NULL, bad = 0x7f;
	long len, at = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/00000000000000000000.log", tfs_plog_path(f->pl));
	len = t_read_file(path, &data);
	for (int k = 0; k < nth; k++) {               /* length: bytes 8-11, big-endian */
		assert_true(at + 12 <= len);
		at += 12 + (long)((uint32_t)data[at + 8] << 24 | (uint32_t)data[at + 9] << 16 |
		                  (uint32_t)data[at + 10] << 8 | data[at + 11]);
	}
	assert_true(at + 17 <= len);
	free(data);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &bad, 1, at + 16), 1);   /* magic */
	close(fd);
}

/* A bad header after the wanted batch ends the window; it does not fail the read. */
static void test_a_bad_header_past_the_record_is_not_its_problem(void **state)
{
	struct fx *f = *state;
	struct tfs_record_copy rec;
	char key[32];

	put_unit(f->pl, 0, 3, 1);
	put_unit(f->pl, 3, 3, 1);
	put_unit(f->pl, 6, 3, 1);
	damage_header_of_batch(f, 1);
	for (int i = 0; i < 3; i++)
		expect(f, i, 1);
	for (int i = 4; i < 9; i += 4) {    /* in the bad batch, and past it */
		key_of(key, sizeof(key), i);
		assert_int_equal(tfs_readcache_read_key(f->rc, f->t, f->pl,
		                                        tfs_slice_make(key, strlen(key)), &rec),
		                 TFS_ECORRUPT);
	}
}

static void test_bounded(void **state)
{
	struct fx *f = *state;
	struct tfs_inode_topic_ops ops = { fx_ref, fx_unref, f };
	struct tfs_readcache_stats st;
	const size_t small = 256u << 10;

	tfs_readcache_destroy(f->rc);
	assert_int_equal(tfs_readcache_create(&ops, small, &f->rc), 0);
	for (int b = 0; b < 20; b++)
		put_unit(f->pl, b * BIG_BATCH, BIG_BATCH, 1);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 20 * BIG_BATCH; i += 37)
			expect(f, i, 1);
	tfs_readcache_stats(f->rc, &st);
	assert_true(st.bytes <= small);
	assert_true(st.windows >= 1 && st.windows < 20);
}

/* Bug: reads spread over many partitions (a small window each) kept a window per
 * partition under the byte bound, and every lookup walked them all: reading one
 * key of each of 25,000 partitions took minutes. The count is bounded too. */
static void test_windows_of_many_partitions_are_bounded_in_number(void **state)
{
	struct fx *f = *state;
	enum { PARTS = TFS_READCACHE_MAX_WINDOWS + 64 };
	struct tfs_readcache_stats st;
	struct tfs_topic *wide;
	char key[32], want[160];

	assert_int_equal(tfs_engine_topic_create(f->e, "wide", PARTS, getuid(), getgid(), 0755), 0);
	wide = tfs_engine_topic_get(f->e, "wide");
	assert_non_null(wide);
	for (int p = 0; p < PARTS; p++)
		put_unit(tfs_topic_partition(wide, p), p, 1, 1);
	for (int pass = 0; pass < 2; pass++) {
		for (int p = 0; p < PARTS; p++) {
			struct tfs_record_copy got;
			size_t wlen = value_of(want, sizeof(want), p, 1);
			key_of(key, sizeof(key), p);
			assert_int_equal(tfs_readcache_read_key(f->rc, wide, tfs_topic_partition(wide, p),
			                                        tfs_slice_make(key, strlen(key)), &got), 0);
			assert_int_equal(got.value_len, wlen);
			assert_memory_equal(got.value, want, wlen);
			tfs_record_copy_release(&got);
			tfs_readcache_stats(f->rc, &st);
			assert_true(st.windows <= TFS_READCACHE_MAX_WINDOWS);
		}
	}
	tfs_readcache_forget_topic(f->rc, wide);
	tfs_topic_unref(wide);
}

static void test_zstd_batches(void **state)
{
	struct fx *f = *state;

	tfs_topic_unref(f->t);
	open_topic(f, "z");
	assert_int_equal(tfs_topic_set_config(f->t, "compression.type", "zstd"), 0);
	put_unit(f->pl, 0, BIG_BATCH, 1);
	put_unit(f->pl, BIG_BATCH, 5, 1);
	for (int i = 0; i < BIG_BATCH + 5; i++)
		expect(f, i, 1);
}

static void test_forget_topic_drops_its_windows(void **state)
{
	struct fx *f = *state;
	struct tfs_readcache_stats st;

	put_unit(f->pl, 0, BIG_BATCH, 1);
	expect(f, 1, 1);
	assert_true(atomic_load(&f->refs) > 0);
	tfs_readcache_forget_topic(f->rc, f->t);
	tfs_readcache_stats(f->rc, &st);
	assert_int_equal(st.windows, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(atomic_load(&f->refs), 0);
	expect(f, 1, 1);                    /* and reads on */
}

/* Readers of every key while one thread overwrites (each value names its key and
 * version) and passes clean and roll: a reader must get its own key's value, at a
 * version no older than one it saw before. */
struct race {
	struct fx *f;
	atomic_bool stop;
	atomic_int versions[BIG_BATCH];
	atomic_int errors;
};

struct race_arg {
	struct race *r;
	int seed;
};

/* The version a value of key names ("KEY:vN:..."), or -1. Values are not
 * NUL-terminated. */
static int version_in(const struct tfs_record_copy *got, const char *key)
{
	size_t klen = strlen(key), p = klen + 2;
	int v = 0;

	if (got->value_len <= p || memcmp(got->value, key, klen) || got->value[klen] != ':' ||
	    got->value[klen + 1] != 'v')
		return -1;
	for (; p < got->value_len && got->value[p] >= '0' && got->value[p] <= '9'; p++)
		v = v * 10 + (got->value[p] - '0');
	return p < got->value_len && got->value[p] == ':' ? v : -1;
}

static void *race_reader(void *arg)
{
	struct race *r = ((struct race_arg *)arg)->r;
	uint64_t s = (uint64_t)((struct race_arg *)arg)->seed * 7919 + 1;
	int seen[BIG_BATCH] = { 0 };

	while (!atomic_load(&r->stop)) {
		int i = (int)(t_rand(&s) % BIG_BATCH), v, committed;
		struct tfs_record_copy got;
		char key[32], want[160];
		size_t wlen;

		committed = atomic_load(&r->versions[i]);
		key_of(key, sizeof(key), i);
		if (tfs_readcache_read_key(r->f->rc, r->f->t, r->f->pl, tfs_slice_make(key, strlen(key)),
		                           &got) != 0) {
			atomic_fetch_add(&r->errors, 1);
			continue;
		}
		v = version_in(&got, key);
		if (v < 0 || v < committed || v < seen[i]) {
			atomic_fetch_add(&r->errors, 1);
		} else {
			wlen = value_of(want, sizeof(want), i, v);
			if (got.value_len != wlen || memcmp(got.value, want, wlen))
				atomic_fetch_add(&r->errors, 1);
			seen[i] = v;
		}
		tfs_record_copy_release(&got);
	}
	return NULL;
}

static void test_readers_during_writes_and_passes(void **state)
{
	struct fx *f = *state;
	struct tfs_cleaner *c = tfs_engine_cleaner(f->e);
	struct race *r = calloc(1, sizeof(*r));
	struct race_arg args[3];
	pthread_t th[3];
	uint64_t s = 42;

	r->f = f;
	put_unit(f->pl, 0, BIG_BATCH, 1);
	for (int i = 0; i < BIG_BATCH; i++)
		atomic_store(&r->versions[i], 1);
	for (int k = 0; k < 3; k++) {
		args[k] = (struct race_arg){ r, k + 1 };
		assert_int_equal(pthread_create(&th[k], NULL, race_reader, &args[k]), 0);
	}
	for (int round = 0; round < 30; round++) {
		for (int n = 0; n < 50; n++) {
			int i = (int)(t_rand(&s) % BIG_BATCH);
			int v = atomic_load(&r->versions[i]) + 1;
			put_unit(f->pl, i, 1, v);
			atomic_store(&r->versions[i], v);
		}
		if (round % 3 == 0) {
			int first = (int)(t_rand(&s) % (BIG_BATCH - 100));
			int v = 1000 + round;   /* a whole batch of newer versions */
			put_unit(f->pl, first, 100, v);
			for (int i = first; i < first + 100; i++)
				atomic_store(&r->versions[i], v);
		}
		assert_int_equal(tfs_plog_roll(f->pl), 0);
		assert_int_equal(tfs_cleaner_clean_now(c, f->pl), 0);
	}
	atomic_store(&r->stop, true);
	for (int k = 0; k < 3; k++)
		pthread_join(th[k], NULL);
	assert_int_equal(atomic_load(&r->errors), 0);
	for (int i = 0; i < BIG_BATCH; i++)
		expect(f, i, atomic_load(&r->versions[i]));
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_records_one_read_per_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_batches_share_a_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newest_after_overwrites_and_tombstones, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_rolls_and_cleaning_passes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corruption_is_reported_not_served, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_bad_header_past_the_record_is_not_its_problem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_windows_of_many_partitions_are_bounded_in_number, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zstd_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forget_topic_drops_its_windows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readers_during_writes_and_passes, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
