/* test_cleaner_manager.c - the cleaner manager: choosing the dirtiest log, the
 * thread pool, the checkpoint file, the cleaner log, metrics, the throttler and
 * the engine's use of it (Kafka's LogCleanerManagerTest and the integration tests
 * of docs/engine.md §9 that apply). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "tests/engine/cleaner_fixture.h"

#define WAIT_MS 10000            /* how long a background effect may take */
#define POLL_US (10 * 1000)

static void write_dups_to(struct tfs_plog *pl, int keys, int rounds)
{
	char k[32], v[32];
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < keys; i++) {
			snprintf(k, sizeof(k), "k%d", i);
			snprintf(v, sizeof(v), "v%d.%d", i, r);
			fx_put_to(pl, k, v);
		}
		assert_int_equal(tfs_plog_roll(pl), 0);
	}
}

static tfs_offset_t checkpoint_of(struct tfs_cleaner *c, struct tfs_plog *pl)
{
	struct tfs_cleaner_partition_info info;
	assert_int_equal(tfs_cleaner_partition_info(c, pl, &info), 0);
	return info.first_dirty_offset;
}

/* Waits until pl's first dirty offset reaches want; false on timeout. */
static bool wait_checkpoint(struct tfs_cleaner *c, struct tfs_plog *pl, tfs_offset_t want)
{
	for (int i = 0; i < WAIT_MS * 1000 / POLL_US; i++) {
		if (checkpoint_of(c, pl) >= want)
			return true;
		usleep(POLL_US);
	}
	return false;
}

/* The cleaner log once it holds needle (lines follow the state they report). */
static char *wait_log(struct fx *f, const char *needle)
{
	char *log = NULL;
	for (int i = 0; i < WAIT_MS * 1000 / POLL_US; i++) {
		free(log);
		log = fx_read_text(f->dir, "log-cleaner.log");
		if (log && strstr(log, needle))
			break;
		usleep(POLL_US);
	}
	assert_non_null(log);
	return log;
}

/* ---- the checkpoint file ---- */

static void the_checkpoint_file_is_kafkas_text_format_and_survives_a_restart(void **state)
{
	struct fx *f = *state;
	char *text;

	fx_open(f);
	write_dups_to(f->pl, 4, 3);
	assert_int_equal(fx_clean(f), 0);
	text = fx_read_text(f->dir, "cleaner-offset-checkpoint");
	assert_non_null(text);
	assert_string_equal(text, "0\n1\nt 0 12\n");
	free(text);
	fx_reopen(f);
	assert_int_equal(fx_info(f).first_dirty_offset, 12);
}

static void malformed_checkpoint_files_are_refused(void **state)
{
	struct tfs__ckpt_entry *e = NULL;
	size_t n = 0;
	static const char *const bad[] = {
		"1\n0\n",                         /* version */
		"0\n2\nt 0 5\n",                  /* fewer entries than counted */
		"0\n1\nt 0 5\nu 1 6\n",           /* more */
		"0\n1\nt x 5\n",                  /* partition */
		"0\n1\nt 0 -5\n",                 /* offset */
		"0\n1\n.bad 0 5\n",               /* topic name */
		"0\n1\nt 0\n",                    /* missing field */
		"",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tfs__ckpt_parse(bad[i], strlen(bad[i]), &e, &n), TFS_ECORRUPT);
		assert_null(e);
	}
	assert_int_equal(tfs__ckpt_parse("0\n2\na.b-c_d 3 17\ne 0 0\n\n", 24, &e, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(e[0].topic, "a.b-c_d");
	assert_int_equal(e[0].partition, 3);
	assert_int_equal(e[0].offset, 17);
	{
		size_t len;
		char *text = tfs__ckpt_format(e, n, &len);
		assert_string_equal(text, "0\n2\na.b-c_d 3 17\ne 0 0\n");
		free(text);
	}
	tfs__ckpt_free(e, n);
}

/* The cleaner and topicctl verify read a checkpoint with one parser: texts the
 * two used to judge apart (a blank line after the entries, CRLF line ends, a
 * partition listed twice, a "+1", a NUL) get one verdict from both. */
static void the_cleaner_and_verify_agree_on_checkpoint_files(void **state)
{
	static const struct {
		const char *text;
		size_t len;
		bool valid;
	} cases[] = {
		{ "0\n1\nt 0 1\n\n", 0, true },
		{ "0\r\n1\r\nt 0 1\r\n", 0, true },
		{ "0\n2\nt 0 1\nt 0 2\n", 0, false },
		{ "0\n1\nt +1 5\n", 0, false },
		{ "0\n1\nt 0 5\n\0\n", 12, false },
		{ "0\n1\n t\t0  7 \n", 0, true },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
		struct tfs__ckpt_entry *e = NULL;
		struct tfs_checkpoint_entry *v = NULL;
		const char *why = NULL;
		tfs_pos_t at;
		size_t n = 0, m = 0;
		int a = tfs__ckpt_parse(cases[i].text, len, &e, &n);
		int b = tfs_checkpoint_parse(cases[i].text, len, &v, &m, &at, &why);

		if (a != b || (a == 0) != cases[i].valid)
			fail_msg("case %zu: cleaner %d, verify %d (%s)", i, a, b, why ? why : "valid");
		assert_int_equal(n, m);
		for (size_t j = 0; j < n; j++) {
			assert_string_equal(e[j].topic, v[j].topic);
			assert_int_equal(e[j].offset, v[j].offset);
		}
		tfs__ckpt_free(e, n);
		free(v);
	}
}

/* A malformed file is ignored (logged): every partition starts fully dirty. */
static void a_corrupt_checkpoint_file_only_costs_a_full_recopy(void **state)
{
	struct fx *f = *state;
	char p[8192];

	snprintf(p, sizeof(p), "%s/cleaner-offset-checkpoint", f->dir);
	assert_int_equal(t_write_file(p, "garbage", 7), 0);
	fx_open(f);
	write_dups_to(f->pl, 4, 3);
	assert_int_equal(fx_info(f).first_dirty_offset, 0);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_info(f).first_dirty_offset, 12);
}

/* testDirtyOffsetResetIfLargerThanEndOffset + the forced update: a checkpoint past
 * the log end means the log start, and the file is rewritten by the next
 * selection even if the log is not picked. */
static void a_checkpoint_past_the_log_end_is_reset_and_rewritten(void **state)
{
	struct fx *f = *state;
	char p[8192], *text = NULL;

	snprintf(p, sizeof(p), "%s/cleaner-offset-checkpoint", f->dir);
	assert_int_equal(t_write_file(p, "0\n1\nt 0 1000\n", 13), 0);
	f->cfg.min_cleanable_dirty_ratio = 1.0;          /* never picked */
	f->ccfg.threads = 1;
	fx_open(f);
	write_dups_to(f->pl, 4, 3);
	assert_int_equal(fx_info(f).first_dirty_offset, 0);
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	for (int i = 0; i < WAIT_MS * 1000 / POLL_US; i++) {
		free(text);
		text = fx_read_text(f->dir, "cleaner-offset-checkpoint");
		if (text && !strcmp(text, "0\n1\nt 0 0\n"))
			break;
		usleep(POLL_US);
	}
	assert_string_equal(text, "0\n1\nt 0 0\n");
	free(text);
	free(fx_offsets(f->pl, &(size_t){ 0 }));
}

/* testUpdateCheckpointsShouldRemovePartitionData. */
static void unregistering_drops_the_checkpoint_entry(void **state)
{
	struct fx *f = *state;
	char *text;

	fx_open(f);
	write_dups_to(f->pl, 2, 2);
	assert_int_equal(fx_clean(f), 0);
	tfs_cleaner_unregister(f->c, f->pl);
	text = fx_read_text(f->dir, "cleaner-offset-checkpoint");
	assert_string_equal(text, "0\n0\n");
	free(text);
	assert_int_equal(tfs_cleaner_partition_info(f->c, f->pl, &(struct tfs_cleaner_partition_info){ 0 }),
	                 -ENOENT);
	tfs_cleaner_unregister(f->c, f->pl);        /* no-op */
}

/* ---- selection and threads ---- */

struct two {
	struct tfs_plog *a, *b;
	char pa[4096], pb[4096];
};

static void open_two(struct fx *f, struct two *t)
{
	snprintf(t->pa, sizeof(t->pa), "%s/t-0", f->dir);
	snprintf(t->pb, sizeof(t->pb), "%s/t-1", f->dir);
	t->a = fx_open_path(f, t->pa);
	t->b = fx_open_path(f, t->pb);
	assert_int_equal(tfs_cleaner_create(f->io, f->dir, &f->ccfg, &f->c), 0);
	tfs_cleaner_set_clock(f->c, fx_clock, f);
	assert_int_equal(tfs_cleaner_register(f->c, t->a, "t", 0), 0);
	assert_int_equal(tfs_cleaner_register(f->c, t->b, "t", 1), 0);
	assert_int_equal(tfs_cleaner_register(f->c, t->b, "t", 1), -EEXIST);
}

static void close_two(struct fx *f, struct two *t)
{
	tfs_cleaner_destroy(f->c);
	f->c = NULL;
	tfs_plog_close(t->a);
	tfs_plog_close(t->b);
}

/* testGrabFilthiestCompactedLogReturnsLogWithDirtiestRatio. */
static void the_dirtiest_log_is_cleaned_first(void **state)
{
	struct fx *f = *state;
	struct two t;
	char *log, *a, *b;

	f->ccfg.threads = 1;
	open_two(f, &t);
	/* b: cleaned once, then dirtied to a ratio between 0.5 and 1 */
	write_dups_to(t.b, 4, 1);
	assert_int_equal(tfs_cleaner_clean_now(f->c, t.b), 0);
	write_dups_to(t.b, 4, 3);
	write_dups_to(t.a, 4, 3);                      /* a: ratio 1 */
	{
		struct tfs_cleaner_partition_info ia, ib;
		assert_int_equal(tfs_cleaner_partition_info(f->c, t.a, &ia), 0);
		assert_int_equal(tfs_cleaner_partition_info(f->c, t.b, &ib), 0);
		assert_true(ia.dirty_ratio == 1.0);
		assert_true(ib.dirty_ratio > 0.5 && ib.dirty_ratio < 1.0);
	}
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	assert_int_equal(tfs_cleaner_start(f->c), -EALREADY);
	assert_true(wait_checkpoint(f->c, t.a, 12));
	assert_true(wait_checkpoint(f->c, t.b, 16));
	log = wait_log(f, "t-1: cleaned offsets [4, 16)");
	a = strstr(log, "t-0: cleaned offsets [0, 12)");
	b = strstr(log, "t-1: cleaned offsets [4, 16)");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(a < b);
	free(log);
	close_two(f, &t);
}

/* testGrabFilthiestCompactedLogIgnoresUncleanablePartitions. */
static void an_uncleanable_log_is_skipped_and_the_others_go_on(void **state)
{
	struct fx *f = *state;
	struct two t;
	char p[8192];
	uint8_t *buf = NULL;
	long n;
	char *m = NULL;
	size_t len;

	f->ccfg.threads = 1;
	snprintf(t.pa, sizeof(t.pa), "%s/t-0", f->dir);
	t.a = fx_open_path(f, t.pa);
	write_dups_to(t.a, 4, 3);
	tfs_plog_close(t.a);
	snprintf(p, sizeof(p), "%s/%020d.log", t.pa, 0);
	n = t_read_file(p, &buf);
	buf[n / 2] ^= 0xff;
	assert_int_equal(t_write_file(p, buf, (size_t)n), 0);
	free(buf);
	open_two(f, &t);
	write_dups_to(t.b, 4, 3);
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	assert_true(wait_checkpoint(f->c, t.b, 12));
	assert_int_equal(checkpoint_of(f->c, t.a), 0);
	assert_int_equal(tfs_cleaner_metrics(f->c, &m, &len), 0);
	assert_non_null(strstr(m, "topicfs_cleaner_uncleanable_partitions_count 1\n"));
	assert_non_null(strstr(m, "topicfs_cleaner_partition_uncleanable{topic=\"t\",partition=\"0\"} 1\n"));
	assert_non_null(strstr(m, "topicfs_cleaner_partition_uncleanable{topic=\"t\",partition=\"1\"} 0\n"));
	assert_null(strstr(m, "topicfs_cleaner_uncleanable_bytes 0\n"));
	free(m);
	/* clean_now retries it on a thread and reports the error again */
	assert_int_equal(tfs_cleaner_clean_now(f->c, t.a), TFS_ECORRUPT);
	close_two(f, &t);
}

static sem_t idle_rounds;

static void count_idle_round(void *arg, bool found)
{
	(void)arg;
	if (!found)
		sem_post(&idle_rounds);
}

/* testMaxLogCompactionLag: with min.cleanable.dirty.ratio 1 nothing is cleaned
 * until the oldest dirty segment passes max.compaction.lag.ms. */
static void max_compaction_lag_cleans_a_log_below_the_ratio(void **state)
{
	struct fx *f = *state;
	char *m = NULL;
	size_t len;

	f->cfg.min_cleanable_dirty_ratio = 1.0;
	f->cfg.max_compaction_lag_ms = 3600 * 1000;
	f->ccfg.threads = 1;
	fx_open(f);
	write_dups_to(f->pl, 4, 3);
	f->now = tfs_now_ms();
	assert_int_equal(sem_init(&idle_rounds, 0, 0), 0);
	tfs_cleaner_set_hooks(f->c, &(struct tfs_cleaner_hooks){ .selected = count_idle_round });
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	for (int i = 0; i < 3; i++)                  /* three selections that took nothing */
		while (sem_wait(&idle_rounds) != 0)
			assert_int_equal(errno, EINTR);
	assert_int_equal(checkpoint_of(f->c, f->pl), 0);
	__atomic_store_n(&f->now, f->now + 2 * 3600 * 1000, __ATOMIC_RELAXED);
	assert_true(wait_checkpoint(f->c, f->pl, 12));
	assert_int_equal(tfs_cleaner_metrics(f->c, &m, &len), 0);
	assert_non_null(strstr(m, "topicfs_cleaner_max_compaction_delay_secs "));
	free(m);
	tfs_cleaner_stop(f->c);            /* no hook runs past the semaphore's life */
	sem_destroy(&idle_rounds);
}

/* clean_now runs on a cleaner thread when threads run; with threads stopped it
 * reports -ECANCELED. */
static void clean_now_runs_on_a_thread_and_stop_cancels(void **state)
{
	struct fx *f = *state;
	char line[TFS_CLEANER_LINE_MAX];
	size_t n;

	f->ccfg.threads = 2;
	f->cfg.min_cleanable_dirty_ratio = 1.0;
	fx_open(f);
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	write_dups_to(f->pl, 4, 3);
	assert_int_equal(fx_clean(f), 0);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 4);
	assert_int_equal(tfs_cleaner_last_clean(f->c, f->pl, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "records kept 4, dropped 8"));
	tfs_cleaner_stop(f->c);
	tfs_cleaner_stop(f->c);
	assert_int_equal(fx_clean(f), -ECANCELED);
	assert_int_equal(tfs_cleaner_clean_now(NULL, f->pl), TFS_EREADONLY);
}

/* ---- metrics, log, throttler ---- */

static double metric(const char *text, const char *name)
{
	char pat[256];
	const char *p;
	snprintf(pat, sizeof(pat), "\n%s ", name);
	p = strstr(text, pat);
	assert_non_null(p);
	return strtod(p + strlen(pat), NULL);
}

static void metrics_carry_kafkas_cleaner_gauges(void **state)
{
	struct fx *f = *state;
	char *m = NULL;
	size_t len;
	static const char *const names[] = {
		"topicfs_cleaner_max_dirty_percent", "topicfs_cleaner_uncleanable_partitions_count",
		"topicfs_cleaner_uncleanable_bytes", "topicfs_cleaner_time_since_last_run_ms",
		"topicfs_cleaner_max_buffer_utilization_percent", "topicfs_cleaner_max_clean_time_secs",
		"topicfs_cleaner_recopy_percent", "topicfs_cleaner_max_compaction_delay_secs",
		"topicfs_cleaner_dead_thread_count", "topicfs_cleaner_io_bytes_total",
		"topicfs_cleaner_passes_total",
	};

	fx_open(f);
	assert_int_equal(tfs_cleaner_metrics(f->c, &m, &len), 0);
	assert_true(metric(m, "topicfs_cleaner_max_clean_time_secs") == 0);   /* testMaxCleanTimeSecs */
	free(m);
	write_dups_to(f->pl, 4, 3);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(tfs_cleaner_metrics(f->c, &m, &len), 0);
	assert_int_equal(strlen(m), len);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char help[256];
		snprintf(help, sizeof(help), "# TYPE %s ", names[i]);
		assert_non_null(strstr(m, help));
		(void)metric(m, names[i]);
	}
	assert_non_null(strstr(m, "(Kafka: cleaner-recopy-percent)"));
	assert_non_null(strstr(m, "(Kafka: DeadThreadCount)"));
	assert_true(metric(m, "topicfs_cleaner_passes_total") == 1);
	assert_true(metric(m, "topicfs_cleaner_max_buffer_utilization_percent") > 0);
	assert_true(metric(m, "topicfs_cleaner_recopy_percent") > 0);
	assert_true(metric(m, "topicfs_cleaner_recopy_percent") < 100);
	assert_true(metric(m, "topicfs_cleaner_io_bytes_total") > 0);
	assert_true(metric(m, "topicfs_cleaner_dead_thread_count") == 0);
	assert_non_null(strstr(m, "topicfs_cleaner_partition_first_dirty_offset{topic=\"t\",partition=\"0\"} 12\n"));
	free(m);
	assert_int_equal(tfs_cleaner_metrics(NULL, &m, &len), TFS_EREADONLY);
}

static void the_cleaner_log_has_a_line_per_pass(void **state)
{
	struct fx *f = *state;
	char *log;

	fx_open(f);
	write_dups_to(f->pl, 4, 3);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_clean(f), 0);
	log = fx_read_text(f->dir, "log-cleaner.log");
	assert_non_null(log);
	assert_non_null(strstr(log, "Z t-0: cleaned offsets [0, 12) in "));
	assert_non_null(strstr(log, "MB/s; records read 12, kept 4, dropped 8"));
	assert_non_null(strstr(log, "dedupe buffer "));
	assert_null(strstr(log, "too small"));
	/* the second pass found nothing to change and says how much it looked at */
	assert_non_null(strstr(log, "t-0: cleaned offsets [12, 12)"));
	free(log);
}

/* Kafka's Throttler: a pass over ~640 KB at 256 KiB/s takes seconds. */
static void the_throttler_holds_the_io_rate(void **state)
{
	struct fx *f = *state;
	struct timespec t0, t1;
	int64_t ms, io;
	char *m = NULL;
	size_t len;

	f->ccfg.io_max_bytes_per_second = 256 * 1024;
	fx_open(f);
	fx_put_filled(f, 300, 40, 1023, 'x');
	usleep(400 * 1000);       /* start past the throttler's first period */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fx_clean(f), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_int_equal(tfs_cleaner_metrics(f->c, &m, &len), 0);
	io = (int64_t)metric(m, "topicfs_cleaner_io_bytes_total");
	free(m);
	assert_true(io > 600 * 1000);
	print_message("throttled pass: %" PRId64 " bytes in %" PRId64 " ms\n", io, ms);
	/* all of it is paid for but the first chunk (the idle period before it) and
	 * the unchecked tail (under 300 ms of budget plus one chunk) */
	assert_true(ms * 256 * 1024 / 1000 >= io - 2 * 256 * 1024 - 300 * 256);
}

/* ---- everything at once ---- */

struct stress {
	struct fx *f;
	int stop;            /* __atomic */
	int errors;          /* __atomic */
};

static void *stress_writer(void *arg)
{
	struct stress *s = arg;
	uint64_t rng = 42;
	char k[32], v[64];
	for (int i = 0; i < 3000; i++) {
		uint64_t r = t_rand(&rng);
		snprintf(k, sizeof(k), "k%d", (int)(r % 200));
		snprintf(v, sizeof(v), "value %d", i);
		fx_put_to(s->f->pl, k, r % 8 == 0 ? NULL : v);
	}
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *stress_retention(void *arg)
{
	struct stress *s = arg;
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		if (tfs_cleaner_enforce_retention(s->f->c, s->f->pl, NULL) != 0)
			__atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
		usleep(1000);
	}
	return NULL;
}

/* testLogsUnderCleanupIneligibleForCompaction and friends: background passes,
 * clean_now, retention and appends on one compact,delete partition never overlap
 * a pass with a retention run, and the log stays whole and consistent with its
 * key directory. */
static void passes_retention_and_appends_run_together_safely(void **state)
{
	struct fx *f = *state;
	struct stress s = { .f = f };
	pthread_t w, r;
	int passes = 0;

	f->cfg.cleanup_policy = TFS_POLICY_COMPACT | TFS_POLICY_DELETE;
	f->cfg.segment_bytes = 4096;
	f->cfg.retention_bytes = 64 * 1024;
	f->cfg.retention_ms = -1;
	f->cfg.min_cleanable_dirty_ratio = 0.1;
	f->cfg.delete_retention_ms = 0;
	f->ccfg.threads = 2;
	f->ccfg.backoff_ms = 5;
	fx_open(f);
	assert_int_equal(tfs_cleaner_start(f->c), 0);
	assert_int_equal(pthread_create(&w, NULL, stress_writer, &s), 0);
	assert_int_equal(pthread_create(&r, NULL, stress_retention, &s), 0);
	while (!__atomic_load_n(&s.stop, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&f->now, 1, __ATOMIC_RELAXED);
		assert_int_equal(fx_clean(f), 0);
		passes++;
	}
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	assert_int_equal(__atomic_load_n(&s.errors, __ATOMIC_RELAXED), 0);
	assert_false(fx_info(f).uncleanable);
	tfs_cleaner_stop(f->c);
	fx_digest_equal(fx_log_digest(f->pl), fx_kd_digest(f->pl));
	fx_verify_files(f->path);
	free(fx_offsets(f->pl, &(size_t){ 0 }));
	{
		struct fx_digest d = fx_log_digest(f->pl);
		fx_reopen(f);
		fx_digest_equal(d, fx_log_digest(f->pl));
		fx_digest_equal(d, fx_kd_digest(f->pl));
	}
	fx_no_leftovers(f);
	print_message("%d clean_now passes alongside the threads, retention and a writer\n", passes);
}

/* ---- the engine ---- */

static void the_engine_runs_a_cleaner_over_its_topics(void **state)
{
	struct fx *f = *state;
	struct tfs_engine_config cfg;
	struct tfs_engine *e = NULL;
	struct tfs_topic *t;
	struct tfs_plog *pl;
	char line[TFS_CLEANER_LINE_MAX];
	size_t n;

	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = f->dir;
	cfg.io_kind = tfs_io_kind_from_env();
	cfg.cleaner.threads = 1;
	cfg.cleaner.dedupe_buffer_size = 1 << 20;
	cfg.cleaner.backoff_ms = 20;
	assert_int_equal(tfs_engine_open(&cfg, &e), 0);
	assert_non_null(tfs_engine_cleaner(e));
	assert_int_equal(tfs_engine_topic_create(e, "users", 2, 0, 0, 0755), 0);
	t = tfs_engine_topic_get(e, "users");
	/* the thread may clean part way while we write: any dirt must qualify */
	assert_int_equal(tfs_topic_set_config(t, "min.cleanable.dirty.ratio", "0.01"), 0);
	pl = tfs_topic_partition(t, 1);
	write_dups_to(pl, 4, 3);
	/* the background thread picks it up */
	assert_true(wait_checkpoint(tfs_engine_cleaner(e), pl, 12));
	free(fx_offsets(pl, &n));
	assert_int_equal(n, 4);
	assert_int_equal(tfs_topic_add_partition(t, 2), 0);
	assert_int_equal(tfs_cleaner_clean_now(tfs_engine_cleaner(e), tfs_topic_partition(t, 2)), 0);
	assert_int_equal(tfs_cleaner_last_clean(tfs_engine_cleaner(e), pl, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "records kept 4"));
	tfs_topic_unref(t);
	tfs_engine_close(e);

	/* the checkpoint survives the restart */
	e = NULL;
	assert_int_equal(tfs_engine_open(&cfg, &e), 0);
	t = tfs_engine_topic_get(e, "users");
	assert_int_equal(checkpoint_of(tfs_engine_cleaner(e), tfs_topic_partition(t, 1)), 12);
	pl = tfs_topic_partition(t, 0);
	write_dups_to(pl, 50, 4);
	tfs_topic_unref(t);
	/* deleting a topic unregisters its partitions first, waiting for a pass */
	assert_int_equal(tfs_engine_topic_delete(e, "users", true), 0);
	{
		char *text = fx_read_text(f->dir, "cleaner-offset-checkpoint");
		assert_null(strstr(text, "users"));
		free(text);
	}
	tfs_engine_close(e);

	/* read-only: no cleaner */
	cfg.read_only = true;
	e = NULL;
	assert_int_equal(tfs_engine_open(&cfg, &e), 0);
	assert_null(tfs_engine_cleaner(e));
	tfs_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(the_checkpoint_file_is_kafkas_text_format_and_survives_a_restart),
		T(malformed_checkpoint_files_are_refused),
		T(the_cleaner_and_verify_agree_on_checkpoint_files),
		T(a_corrupt_checkpoint_file_only_costs_a_full_recopy),
		T(a_checkpoint_past_the_log_end_is_reset_and_rewritten),
		T(unregistering_drops_the_checkpoint_entry),
		T(the_dirtiest_log_is_cleaned_first),
		T(an_uncleanable_log_is_skipped_and_the_others_go_on),
		T(max_compaction_lag_cleans_a_log_below_the_ratio),
		T(clean_now_runs_on_a_thread_and_stop_cancels),
		T(metrics_carry_kafkas_cleaner_gauges),
		T(the_cleaner_log_has_a_line_per_pass),
		T(the_throttler_holds_the_io_rate),
		T(passes_retention_and_appends_run_together_safely),
		T(the_engine_runs_a_cleaner_over_its_topics),
#undef T
	};
	return cmocka_run_group_tests_name("cleaner_manager", tests, NULL, NULL);
}
