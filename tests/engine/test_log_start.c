/* test_log_start.c - DeleteRecords in the engine (tfs_engine_delete_records,
 * engine/log/plog_start.c, engine/log/log_start.c): the log start moves inside
 * a segment, readers stop below it, keys with nothing left go, bad offsets
 * change nothing, it survives a reopen, and an appender running meanwhile loses
 * nothing above it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/log/partition_log.h"
#include "io/log.h"
#include "tests/t_util.h"

#define APPENDS 400                     /* records the concurrent appender writes */

struct fx {
	char *dir;
	struct tfs_engine_config cfg;
	struct tfs_engine *e;
	struct tfs_topic *t;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	tfs_log_set_level(TFS_LOG_ERROR);
	f->dir = t_mkdtemp("logstart");
	tfs_engine_config_defaults(&f->cfg);
	f->cfg.data_dir = f->dir;
	f->cfg.io_kind = tfs_io_kind_from_env();
	f->cfg.cleaner.threads = 0;
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), 0);
	assert_int_equal(tfs_engine_topic_create(f->e, "t", 1, 0, 0, 0755), 0);
	f->t = tfs_engine_topic_get(f->e, "t");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tfs_topic_unref(f->t);
	tfs_engine_close(f->e);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void reopen(struct fx *f)
{
	tfs_topic_unref(f->t);
	tfs_engine_close(f->e);
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), 0);
	f->t = tfs_engine_topic_get(f->e, "t");
	assert_non_null(f->t);
}

static struct tfs_plog *part(struct fx *f)
{
	return tfs_topic_partition(f->t, 0);
}

static void put(struct tfs_plog *pl, const char *k, const char *v)
{
	struct tfs_append_rec r = { .key = tfs_slice_make(k, strlen(k)),
	                            .value = tfs_slice_make(v, strlen(v)) };
	assert_int_equal(tfs_plog_append(pl, &r, 1, false, NULL, NULL), 0);
}

static void count_gone(void *arg, const struct tfs_slice *keys, size_t n)
{
	(void)keys;
	*(size_t *)arg += n;
}

static tfs_offset_t first_readable(struct tfs_plog *pl)
{
	struct tfs_plog_cursor *c = NULL;
	struct tfs_record r;
	tfs_offset_t o = -1;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	if (tfs_plog_cursor_next(c, &r, NULL) == 1)
		o = r.offset;
	tfs_plog_cursor_close(c);
	return o;
}

static bool has_key(struct tfs_plog *pl, const char *k)
{
	struct tfs_keyinfo info;
	return tfs_plog_lookup(pl, tfs_slice_make(k, strlen(k)), &info) == 0;
}

static void the_start_moves_inside_a_segment_and_survives_a_reopen(void **state)
{
	struct fx *f = *state;
	struct tfs_record_copy rec;
	struct tfs_plog_stats st;
	tfs_offset_t low;
	size_t gone = 0;

	put(part(f), "a", "1");                  /* 0 */
	put(part(f), "b", "1");                  /* 1 */
	put(part(f), "c", "1");                  /* 2 */
	put(part(f), "b", "2");                  /* 3 */
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, 2, count_gone, &gone, &low), 0);
	assert_int_equal(low, 2);
	assert_int_equal(gone, 1);               /* a: its one record is below 2 */
	assert_false(has_key(part(f), "a"));
	assert_true(has_key(part(f), "b") && has_key(part(f), "c"));
	assert_int_equal(first_readable(part(f)), 2);
	assert_int_equal(tfs_plog_read_offset(part(f), 1, &rec), -ENOENT);
	tfs_plog_stats(part(f), &st);
	assert_int_equal(st.log_start_offset, 2);
	assert_int_equal(st.log_end_offset, 4);  /* nothing appended */
	assert_int_equal(st.segments, 1);

	/* past the end, below -1, lower than the start, another partition */
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, 5, NULL, NULL, &low), -ERANGE);
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, -2, NULL, NULL, &low), -ERANGE);
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, 1, NULL, NULL, &low), 0);
	assert_int_equal(low, 2);
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 3, 1, NULL, NULL, &low), -ENOENT);

	reopen(f);
	tfs_plog_stats(part(f), &st);
	assert_int_equal(st.log_start_offset, 2);
	assert_false(has_key(part(f), "a"));
	assert_int_equal(first_readable(part(f)), 2);
	/* -1: the log end; then everything is gone and new records count on */
	gone = 0;
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, -1, count_gone, &gone, &low), 0);
	assert_int_equal(low, 4);
	assert_int_equal(gone, 2);
	assert_int_equal(tfs_plog_live_keys(part(f)), 0);
	put(part(f), "d", "1");
	assert_int_equal(first_readable(part(f)), 4);
	reopen(f);
	assert_true(has_key(part(f), "d"));
	assert_int_equal(tfs_plog_live_keys(part(f)), 1);
}

/* A transaction open across a DeleteRecords past its first record: the COMMIT
 * after it brings back no key below the start, and a read below the start is
 * ENOENT even for an offset a key named a moment before. */
static void a_commit_after_the_start_moved_brings_nothing_back(void **state)
{
	struct fx *f = *state;
	struct tfs_append_rec r = { .key = tfs_slice_make("k", 1), .value = tfs_slice_make("v", 1) };
	struct tfs_plog_window *w = NULL;
	struct tfs_plog_txn *t = NULL;
	tfs_offset_t low;

	put(part(f), "a", "1");                  /* 0 */
	assert_int_equal(tfs_plog_txn_begin(part(f), 7, 0, &t), 0);
	assert_int_equal(tfs_plog_txn_append(t, &r, 1), 0);   /* 1, unseen until the COMMIT */
	put(part(f), "b", "1");                  /* 2 */
	assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, 2, NULL, NULL, &low), 0);
	assert_int_equal(tfs_plog_txn_end(t, true, false), 0);   /* COMMIT at 3 */
	assert_false(has_key(part(f), "k"));
	assert_false(has_key(part(f), "a"));
	assert_true(has_key(part(f), "b"));
	assert_int_equal(tfs_plog_window_read(part(f), 1, &w), -ENOENT);
	assert_null(w);
	reopen(f);
	assert_false(has_key(part(f), "k"));
}

/* An entry for a topic that is no more (its deletion's rewrite cut short) is
 * dropped at the next open, and a new topic of that name starts at 0. */
static void a_stale_entry_never_reaches_a_new_topic_of_its_name(void **state)
{
	struct fx *f = *state;
	char path[4096];
	struct tfs_topic *u;
	struct tfs_plog_stats st;
	FILE *fp;

	tfs_topic_unref(f->t);
	tfs_engine_close(f->e);
	snprintf(path, sizeof(path), "%s/log-start-offset-checkpoint", f->dir);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("0\n1\nu 0 5\n", fp);
	fclose(fp);
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), 0);
	f->t = tfs_engine_topic_get(f->e, "t");
	assert_int_equal(tfs_engine_topic_create(f->e, "u", 1, 0, 0, 0755), 0);
	u = tfs_engine_topic_get(f->e, "u");
	for (int i = 0; i < 8; i++)
		put(tfs_topic_partition(u, 0), "k", "v");
	tfs_topic_unref(u);
	reopen(f);
	u = tfs_engine_topic_get(f->e, "u");
	tfs_plog_stats(tfs_topic_partition(u, 0), &st);
	assert_int_equal(st.log_start_offset, 0);
	assert_int_equal(st.log_end_offset, 8);
	tfs_topic_unref(u);
}

static void *appender(void *arg)
{
	struct tfs_plog *pl = arg;
	char k[16];

	for (int i = 0; i < APPENDS; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		put(pl, k, "v");
	}
	return NULL;
}

/* Moves the start up to the end again and again while records arrive: every
 * record at or above the last start stays, every key below it goes. */
static void an_appender_meanwhile_keeps_what_is_above(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_stats st;
	tfs_offset_t low = 0, prev = 0;
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, appender, part(f)), 0);
	for (int i = 0; i < APPENDS / 4; i++) {
		assert_int_equal(tfs_engine_delete_records(f->e, f->t, 0, -1, NULL, NULL, &low), 0);
		assert_true(low >= prev);
		prev = low;
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	tfs_plog_stats(part(f), &st);
	assert_int_equal(st.log_end_offset, APPENDS);
	assert_int_equal(st.log_start_offset, low);
	assert_int_equal(tfs_plog_live_keys(part(f)), (size_t)(APPENDS - low));
	reopen(f);
	assert_int_equal(tfs_plog_live_keys(part(f)), (size_t)(APPENDS - low));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(the_start_moves_inside_a_segment_and_survives_a_reopen,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(a_commit_after_the_start_moved_brings_nothing_back, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(a_stale_entry_never_reaches_a_new_topic_of_its_name, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(an_appender_meanwhile_keeps_what_is_above, setup,
		                                teardown),
	};
	return cmocka_run_group_tests_name("engine_log_start", tests, NULL, NULL);
}
