/* test_retention.c - the delete policy: whole segments past retention.ms or beyond
 * retention.bytes leave the log from its start, an expired active segment too once
 * it holds records (rolled first, so the log end offset stays); compact,delete
 * applies both; a crash at any step leaves a whole log (LogCleanerManagerTest's
 * deletable-logs cases, LogCleanerParameterizedIntegrationTest's compact+delete,
 * UnifiedLogTest's retention of the active segment). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/wait.h>
#include <unistd.h>

#include "tests/engine/cleaner_fixture.h"

#define HOUR_MS 3600000LL

/* segments closed, each holding keys s<seg>-0 .. s<seg>-(per-1) */
static void write_segments(struct fx *f, int segs, int per)
{
	char k[32], v[32];
	for (int s = 0; s < segs; s++) {
		for (int i = 0; i < per; i++) {
			snprintf(k, sizeof(k), "s%d-%d", s, i);
			snprintf(v, sizeof(v), "v%d", s);
			fx_put(f, k, v);
		}
		fx_roll(f);
	}
}

static tfs_offset_t log_start(struct tfs_plog *pl)
{
	struct tfs_plog_stats st;
	tfs_plog_stats(pl, &st);
	return st.log_start_offset;
}

/* Appends key=value and returns the record's timestamp. */
static int64_t put_stamped(struct fx *f, const char *key, const char *value)
{
	struct tfs_append_rec r = { 0 };
	int64_t ts = -1;

	r.key = tfs_slice_make(key, strlen(key));
	r.value = tfs_slice_make(value, strlen(value));
	assert_int_equal(tfs_plog_append(f->pl, &r, 1, false, NULL, &ts), 0);
	return ts;
}

/* Waits for the wall clock to pass ts, so that the next record is newer than every
 * record so far: the wait ends on the clock's tick, whatever the machine's load. */
static void clock_past(int64_t ts)
{
	while (tfs_now_ms() <= ts)
		;
}

static int retain(struct fx *f)
{
	int deleted = -1;
	assert_int_equal(tfs_cleaner_enforce_retention(f->c, f->pl, &deleted), 0);
	return deleted;
}

static void retention_ms_deletes_old_closed_segments_and_their_keys(void **state)
{
	struct fx *f = *state;
	int64_t ts;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = HOUR_MS;
	fx_open(f);
	write_segments(f, 3, 4);
	clock_past(tfs_now_ms());
	ts = put_stamped(f, "s3-0", "active");
	f->now = ts;
	assert_int_equal(retain(f), 0);               /* nothing is an hour old */
	assert_int_equal(tfs_plog_live_keys(f->pl), 13);
	f->now = ts + HOUR_MS;                         /* the closed ones are older */
	assert_int_equal(retain(f), 3);               /* the active one is not past it */
	assert_int_equal(log_start(f->pl), 12);
	assert_int_equal(fx_segments(f->pl), 1);
	assert_int_equal(tfs_plog_live_keys(f->pl), 1);
	fx_value_is(f->pl, "s0-0", NULL);
	fx_value_is(f->pl, "s3-0", "active");
	assert_false(fx_has_offset(f->pl, 11));
	fx_no_leftovers(f);
	fx_reopen(f);
	assert_int_equal(log_start(f->pl), 12);
	assert_int_equal(tfs_plog_live_keys(f->pl), 1);
	assert_int_equal(fx_put(f, "n", "n"), 13);
}

/* UnifiedLog.deleteSegments: when every segment is past retention, the active one
 * included, the log rolls first and deletes them all; the empty active segment at
 * the log end offset stays (LocalLog.deletableSegments never takes an empty last
 * segment), so the log start offset becomes the end offset and offsets go on. */
static void an_expired_active_segment_is_rolled_and_deleted(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_stats st;
	char name[64];
	size_t n;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = HOUR_MS;
	fx_open(f);
	fx_put(f, "a", "1");
	fx_put(f, "b", "2");
	fx_put(f, "a", "3");
	assert_int_equal(fx_segments(f->pl), 1);
	f->now = tfs_now_ms() + 2 * HOUR_MS;
	assert_int_equal(retain(f), 1);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.segments, 1);
	assert_int_equal(st.log_start_offset, 3);
	assert_int_equal(st.log_end_offset, 3);
	assert_int_equal(tfs_plog_live_keys(f->pl), 0);
	fx_value_is(f->pl, "a", NULL);
	fx_value_is(f->pl, "b", NULL);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 0);
	fx_no_leftovers(f);
	snprintf(name, sizeof(name), "%020d.log", 0);
	assert_int_equal(fx_count_files(f->path, name), 0);
	snprintf(name, sizeof(name), "%020d.log", 3);
	assert_int_equal(fx_count_files(f->path, name), 1);
	assert_int_equal(retain(f), 0);               /* the empty active one stays */
	assert_int_equal(fx_segments(f->pl), 1);

	fx_reopen(f);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.log_start_offset, 3);
	assert_int_equal(st.log_end_offset, 3);
	assert_int_equal(fx_put(f, "c", "4"), 3);     /* offsets keep counting */
	fx_value_is(f->pl, "c", "4");
	fx_value_is(f->pl, "a", NULL);
}

/* The size rule reaches the active segment too (Kafka's
 * deleteRetentionSizeBreachedSegments): retention.bytes=0 empties the log, a bound
 * at the log's size keeps it. */
static void retention_bytes_reaches_the_active_segment(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_stats st;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = -1;
	fx_open(f);
	write_segments(f, 1, 2);
	fx_put(f, "x", "active");
	tfs_plog_stats(f->pl, &st);
	f->cfg.retention_bytes = st.size_bytes;
	fx_set_config(f);
	assert_int_equal(retain(f), 0);               /* the log is not beyond the bound */
	f->cfg.retention_bytes = 0;
	fx_set_config(f);
	assert_int_equal(retain(f), 2);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.segments, 1);
	assert_int_equal(st.size_bytes, 0);
	assert_int_equal(st.log_start_offset, 3);
	assert_int_equal(st.log_end_offset, 3);
	fx_value_is(f->pl, "x", NULL);
	assert_int_equal(fx_put(f, "y", "y"), 3);
}

/* Kafka's size rule: delete while the log without the segment is still at least
 * retention.bytes. */
static void retention_bytes_deletes_the_oldest_segments_beyond_the_limit(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_stats st;
	int64_t seg;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = -1;
	fx_open(f);
	write_segments(f, 5, 2);
	tfs_plog_stats(f->pl, &st);
	seg = st.size_bytes / 5;                      /* all closed segments are alike */
	f->cfg.retention_bytes = 2 * seg + seg / 2;
	fx_set_config(f);
	assert_int_equal(retain(f), 2);               /* 3 left >= 2.5; 2 would not be */
	assert_int_equal(log_start(f->pl), 4);
	tfs_plog_stats(f->pl, &st);
	assert_true(st.size_bytes >= f->cfg.retention_bytes);
	assert_int_equal(retain(f), 0);
	fx_value_is(f->pl, "s2-1", "v2");
	fx_value_is(f->pl, "s1-1", NULL);
}

/* testLogsWithSegmentsToDeleteShouldConsiderCleanupPolicyCompactDeleteLogs:
 * compact,delete compacts and applies retention; pure compact never deletes. */
static void compact_delete_applies_both_and_compact_alone_never_deletes(void **state)
{
	struct fx *f = *state;
	size_t n;

	f->cfg.cleanup_policy = TFS_POLICY_COMPACT;
	f->cfg.retention_ms = 0;
	fx_open(f);
	write_segments(f, 2, 2);
	fx_put(f, "s0-0", "again");
	fx_roll(f);
	f->now = tfs_now_ms() + HOUR_MS;
	assert_int_equal(retain(f), 0);               /* compact alone: no retention */
	assert_int_equal(fx_clean(f), 0);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 4);                       /* compacted, nothing deleted */

	f->cfg.cleanup_policy = TFS_POLICY_COMPACT | TFS_POLICY_DELETE;
	fx_set_config(f);
	clock_past(tfs_now_ms());
	f->now = put_stamped(f, "x", "y");           /* x is not past retention.ms=0 */
	assert_int_equal(fx_clean(f), 0);            /* compaction, then retention */
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 1);
	assert_int_equal(log_start(f->pl), 5);
	fx_value_is(f->pl, "x", "y");
	fx_value_is(f->pl, "s0-0", NULL);
}

/* testDirtyOffsetResetIfSmallerThanStartOffset: after retention moved the log
 * start past the checkpoint, the first dirty offset is the log start. */
static void a_checkpoint_below_the_log_start_is_reset(void **state)
{
	struct fx *f = *state;
	char p[8192];

	snprintf(p, sizeof(p), "%s/cleaner-offset-checkpoint", f->dir);
	assert_int_equal(t_write_file(p, "0\n1\nt 0 2\n", 10), 0);
	f->cfg.cleanup_policy = TFS_POLICY_COMPACT | TFS_POLICY_DELETE;
	f->cfg.retention_ms = HOUR_MS;
	fx_open(f);
	write_segments(f, 2, 4);
	assert_int_equal(fx_info(f).first_dirty_offset, 2);
	f->now = tfs_now_ms() + 2 * HOUR_MS;
	assert_int_equal(retain(f), 2);
	assert_int_equal(fx_info(f).first_dirty_offset, 8);
}

/* A reader holding the old list keeps reading deleted segments. */
static void a_reader_keeps_reading_deleted_segments(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	int got = 0, rc;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_bytes = 0;
	f->cfg.retention_ms = -1;
	fx_open(f);
	write_segments(f, 3, 3);
	assert_int_equal(tfs_plog_cursor_open(f->pl, 0, &c), 0);
	assert_int_equal(retain(f), 3);
	assert_int_equal(fx_count_files(f->path, ".log.deleted"), 3);
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1)
		got++;
	assert_int_equal(rc, 0);
	assert_int_equal(got, 9);
	tfs_plog_cursor_close(c);
	fx_no_leftovers(f);
}

/* The threads apply retention to delete-policy partitions in the background. */
static void cleaner_threads_apply_retention_in_the_background(void **state)
{
	struct fx *f = *state;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = HOUR_MS;
	f->ccfg.threads = 1;
	f->ccfg.backoff_ms = 10;
	fx_open(f);
	write_segments(f, 3, 2);
	__atomic_store_n(&f->now, tfs_now_ms() + 2 * HOUR_MS, __ATOMIC_RELAXED);
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	for (int i = 0; i < 1000 && log_start(f->pl) != 6; i++)
		usleep(10 * 1000);
	assert_int_equal(log_start(f->pl), 6);
	{
		/* the line follows the deletion */
		char *log = NULL;
		for (int i = 0; i < 1000; i++) {
			free(log);
			log = fx_read_text(f->dir, "log-cleaner.log");
			if (log && strstr(log, "t-0: retention deleted 3 segments"))
				break;
			usleep(10 * 1000);
		}
		assert_non_null(strstr(log, "t-0: retention deleted 3 segments"));
		free(log);
	}
}

/* A crash at every step of a retention run that deletes the whole log, the roll of
 * its active segment included: the log that reopens is a suffix of the old one
 * (never a hole), whole, with no leftovers, and ends where it ended. */
static void a_crash_at_every_step_of_retention_leaves_a_whole_suffix(void **state)
{
	struct fx *f = *state;
	int n, points = 0;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = -1;
	f->cfg.retention_bytes = 0;
	for (n = 1; n < 200; n++) {
		pid_t pid;
		int status;
		tfs_offset_t *offs, start;
		size_t cnt;

		t_rmtree(f->path);
		fx_open(f);
		write_segments(f, 4, 3);
		fx_put(f, "active", "12");
		fx_close(f);
		pid = fork();
		if (pid == 0) {
			char spec[64];
			fx_open(f);
			snprintf(spec, sizeof(spec), "all:%d:crash", n);
			tfs_io_set_fault(f->io, spec);
			(void)tfs_cleaner_enforce_retention(f->c, f->pl, NULL);
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_true(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == TFS_IO_CRASH_STATUS);
		fx_open(f);
		fx_no_leftovers(f);
		{
			/* no orphan index; only the active segment may lack one (a crash
			 * right after the roll created it: its indexes come at close) */
			int logs = fx_count_files(f->path, ".log");
			int indexes = fx_count_files(f->path, ".index");
			assert_true(indexes == logs || indexes == logs - 1);
		}
		fx_verify_files(f->path);
		offs = fx_offsets(f->pl, &cnt);
		start = log_start(f->pl);
		assert_true(start == 0 || start == 3 || start == 6 || start == 9 || start == 12 ||
		            start == 13);
		assert_int_equal(cnt, (size_t)(13 - start));
		{
			struct tfs_plog_stats st;
			tfs_plog_stats(f->pl, &st);
			assert_int_equal(st.log_end_offset, 13);
		}
		for (size_t i = 0; i < cnt; i++)
			assert_int_equal(offs[i], start + (tfs_offset_t)i);   /* a suffix, no hole */
		free(offs);
		assert_int_equal(tfs_plog_live_keys(f->pl), (size_t)(13 - start));
		fx_close(f);
		points++;
		if (WEXITSTATUS(status) == 0)
			break;
	}
	assert_true(points > 5);
	print_message("retention crash points: %d, all recovered\n", points);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(retention_ms_deletes_old_closed_segments_and_their_keys),
		T(an_expired_active_segment_is_rolled_and_deleted),
		T(retention_bytes_reaches_the_active_segment),
		T(retention_bytes_deletes_the_oldest_segments_beyond_the_limit),
		T(compact_delete_applies_both_and_compact_alone_never_deletes),
		T(a_checkpoint_below_the_log_start_is_reset),
		T(a_reader_keeps_reading_deleted_segments),
		T(cleaner_threads_apply_retention_in_the_background),
		T(a_crash_at_every_step_of_retention_leaves_a_whole_suffix),
#undef T
	};
	return cmocka_run_group_tests_name("retention", tests, NULL, NULL);
}
