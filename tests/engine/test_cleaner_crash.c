/* test_cleaner_crash.c - the cleaner under fire.
 *
 * Compaction equivalence (Redis's AOF-rewrite test, STYLE.md): the digest of
 * key -> newest value is the same before a pass, after it and after a reopen,
 * while writer threads append (and roll segments) during the passes.
 *
 * Crash sweep (SQLite's way, docs/cleaner.md §7: Kafka's testRecoveryAfterCrash taken to every
 * step): a child process runs one pass with the io fault spec "all:N:crash" for
 * N = 1, 2, ... until the pass completes. After each crash the partition is
 * reopened and checked: every batch is valid, every offset appears at most once,
 * nothing outside the old log appeared and nothing the finished pass keeps is
 * missing, the key digest is unchanged, recovery left no .cleaned/.swap/.deleted
 * file, and a new pass on the recovered log reaches the same log as an
 * uninterrupted one. Two passes are swept: the first (drops superseded records,
 * stamps tombstones) and a later one (drops tombstones past their horizon).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/engine/cleaner_fixture.h"

/* ---- compaction equivalence ---- */

#define WRITERS 3
#define WRITER_OPS 2500
#define WRITER_KEYS 300
#define STATIC_KEYS 200

struct writer {
	struct fx *f;
	int id;
	struct fx_table expect;
	volatile int *stop;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t rng = (uint64_t)w->id * 7919 + 1;
	char k[32], v[64];

	for (int i = 0; i < WRITER_OPS; i++) {
		uint64_t r = t_rand(&rng);
		bool tomb = r % 10 == 0;
		snprintf(k, sizeof(k), "w%d-%d", w->id, (int)(r >> 8) % WRITER_KEYS);
		snprintf(v, sizeof(v), "value %d of writer %d", i, w->id);
		fx_put_to(w->f->pl, k, tomb ? NULL : v);
		fx_table_set(&w->expect, k, strlen(k), v, strlen(v), tomb);
	}
	return NULL;
}

/* Digest of the keys with a prefix, replaying the log. */
static struct fx_digest prefix_digest(struct tfs_plog *pl, const char *prefix)
{
	struct fx_table t = { 0 };
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	struct fx_digest d;
	size_t pl_len = strlen(prefix);
	int rc;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1) {
		if (r.key_null || r.key.len < pl_len || memcmp(r.key.p, prefix, pl_len))
			continue;
		fx_table_set(&t, r.key.p, r.key.len, r.value.p, r.value.len, r.value_null);
	}
	assert_int_equal(rc, 0);
	tfs_plog_cursor_close(c);
	d = fx_table_digest(&t);
	fx_table_free(&t);
	return d;
}

static void compaction_keeps_the_key_digest_while_writers_append(void **state)
{
	struct fx *f = *state;
	struct writer w[WRITERS];
	pthread_t tid[WRITERS];
	struct fx_table statics = { 0 };
	struct fx_digest before, expect;
	int passes = 0;
	char k[32], v[32];

	f->cfg.segment_bytes = 8 * 1024;
	f->cfg.delete_retention_ms = 0;          /* tombstones go on their second pass */
	f->ccfg.dedupe_buffer_size = 24 * 512;   /* ~460 keys: some passes stop early */
	fx_open(f);
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < STATIC_KEYS; i++) {
			bool tomb = r == 2 && i % 7 == 0;
			snprintf(k, sizeof(k), "static-%d", i);
			snprintf(v, sizeof(v), "s%d.%d", i, r);
			fx_put(f, k, tomb ? NULL : v);
			fx_table_set(&statics, k, strlen(k), v, strlen(v), tomb);
		}
	}
	fx_roll(f);
	before = prefix_digest(f->pl, "static-");
	fx_digest_equal(before, fx_table_digest(&statics));

	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){ .f = f, .id = i };
		assert_int_equal(pthread_create(&tid[i], NULL, writer_main, &w[i]), 0);
	}
	/* passes while they write; the fake clock moves so horizons pass */
	for (int i = 0; i < 40; i++) {
		__atomic_add_fetch(&f->now, 1, __ATOMIC_RELAXED);
		assert_int_equal(fx_clean(f), 0);
		passes++;
		fx_digest_equal(before, prefix_digest(f->pl, "static-"));
	}
	for (int i = 0; i < WRITERS; i++)
		pthread_join(tid[i], NULL);
	fx_roll(f);
	for (int i = 0; i < 6; i++) {
		__atomic_add_fetch(&f->now, 1, __ATOMIC_RELAXED);
		assert_int_equal(fx_clean(f), 0);
		passes++;
	}

	expect = fx_table_digest(&statics);
	for (int i = 0; i < WRITERS; i++) {
		struct fx_digest d = fx_table_digest(&w[i].expect);
		expect.x ^= d.x;
		expect.count += d.count;
	}
	fx_digest_equal(before, prefix_digest(f->pl, "static-"));
	fx_digest_equal(expect, fx_log_digest(f->pl));
	fx_digest_equal(expect, fx_kd_digest(f->pl));
	{
		/* the log did shrink to about one record per live key */
		size_t n;
		free(fx_offsets(f->pl, &n));
		assert_true(n < expect.count + expect.count / 2);
	}
	fx_no_leftovers(f);
	fx_reopen(f);
	fx_digest_equal(before, prefix_digest(f->pl, "static-"));
	fx_digest_equal(expect, fx_log_digest(f->pl));
	fx_digest_equal(expect, fx_kd_digest(f->pl));
	fx_verify_files(f->path);
	print_message("equivalence held over %d passes with %d writers\n", passes, WRITERS);
	for (int i = 0; i < WRITERS; i++)
		fx_table_free(&w[i].expect);
	fx_table_free(&statics);
}

/* ---- crash sweep ---- */

#define SWEEP_MAX 2000

/* A deterministic log: ~10 segments of ~500 bytes, superseded values, keyless
 * records, a multi-record batch, tombstones (key 7 ends deleted), and an active
 * segment. */
static void build_scenario(struct fx *f)
{
	char k[16], v[32], p[8192];

	t_rmtree(f->path);
	snprintf(p, sizeof(p), "%s/cleaner-offset-checkpoint", f->dir);
	unlink(p);
	f->cfg.segment_bytes = 500;
	f->cfg.delete_retention_ms = 1000;
	f->pl = fx_open_path(f, f->path);
	for (int round = 0; round < 6; round++) {
		for (int key = 0; key < 8; key++) {
			bool tomb = (round == 3 && key % 3 == 0) || (round == 5 && key == 7);
			snprintf(k, sizeof(k), "key%d", key);
			snprintf(v, sizeof(v), "v%d.%d", key, round);
			if (round == 2 && key == 1) {
				struct tfs_append_rec recs[3];
				const char *ks[3] = { "key1", "key2", "key5" };
				memset(recs, 0, sizeof(recs));
				for (int i = 0; i < 3; i++) {
					recs[i].key = tfs_slice_make(ks[i], 4);
					recs[i].value = tfs_slice_make(v, strlen(v));
				}
				assert_int_equal(tfs_plog_append(f->pl, recs, 3, false, NULL, NULL), 0);
				continue;
			}
			fx_put(f, k, tomb ? NULL : v);
			if (key == 4)
				fx_put(f, NULL, "a keyless line");
		}
	}
	fx_roll(f);
	fx_put(f, "tail", "in the active segment");
	tfs_plog_close(f->pl);
	f->pl = NULL;
}

/* A saved copy of the partition directory and the checkpoint file, restored
 * before each crash point (rebuilding would cost dozens of fsyncs per point). */
#define SNAPSHOT_FILES 128   /* a segment's .log, .index, .timeindex, producer .snapshot */

struct snapshot {
	int n;
	char *name[SNAPSHOT_FILES];
	uint8_t *data[SNAPSHOT_FILES];
	long len[SNAPSHOT_FILES];
	char *ckpt;
};

static void snapshot_take(struct fx *f, struct snapshot *s)
{
	DIR *d = opendir(f->path);
	struct dirent *de;
	char p[8192];

	memset(s, 0, sizeof(*s));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		assert_true(s->n < SNAPSHOT_FILES);
		snprintf(p, sizeof(p), "%s/%s", f->path, de->d_name);
		s->name[s->n] = strdup(de->d_name);
		s->len[s->n] = t_read_file(p, &s->data[s->n]);
		assert_true(s->len[s->n] >= 0);
		s->n++;
	}
	closedir(d);
	s->ckpt = fx_read_text(f->dir, "cleaner-offset-checkpoint");
}

static void snapshot_restore(struct fx *f, const struct snapshot *s)
{
	char p[8192];

	t_rmtree(f->path);
	assert_int_equal(mkdir(f->path, 0755), 0);
	for (int i = 0; i < s->n; i++) {
		snprintf(p, sizeof(p), "%s/%s", f->path, s->name[i]);
		assert_int_equal(t_write_file(p, s->data[i], (size_t)s->len[i]), 0);
	}
	snprintf(p, sizeof(p), "%s/cleaner-offset-checkpoint", f->dir);
	unlink(p);
	if (s->ckpt)
		assert_int_equal(t_write_file(p, s->ckpt, strlen(s->ckpt)), 0);
}

static void snapshot_free(struct snapshot *s)
{
	for (int i = 0; i < s->n; i++) {
		free(s->name[i]);
		free(s->data[i]);
	}
	free(s->ckpt);
}

struct offset_set {
	tfs_offset_t *v;
	size_t n;
};

static bool set_has(const struct offset_set *s, tfs_offset_t o)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->v[mid] == o)
			return true;
		if (s->v[mid] < o)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* recovered within [keep, old]: nothing invented, nothing kept by the pass lost */
static void offsets_between(struct tfs_plog *pl, const struct offset_set *old,
                            const struct offset_set *keep)
{
	struct offset_set got;
	got.v = fx_offsets(pl, &got.n);         /* also: strictly ascending, batches whole */
	for (size_t i = 0; i < got.n; i++)
		assert_true(set_has(old, got.v[i]));
	for (size_t i = 0; i < keep->n; i++)
		assert_true(set_has(&got, keep->v[i]));
	free(got.v);
}

static bool same_offsets(struct tfs_plog *pl, const struct offset_set *want)
{
	struct offset_set got;
	bool same;
	got.v = fx_offsets(pl, &got.n);
	same = got.n == want->n && !memcmp(got.v, want->v, got.n * sizeof(*got.v));
	free(got.v);
	return same;
}

static bool snapshot_same(const struct snapshot *a, const struct snapshot *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++) {
		int j = 0;
		while (j < b->n && strcmp(a->name[i], b->name[j]))
			j++;
		if (j == b->n || a->len[i] != b->len[j] ||
		    memcmp(a->data[i], b->data[j], (size_t)a->len[i]))
			return false;
	}
	return true;
}

/* A read-only open of whatever a crash left (the files of a read-only
 * filesystem) reads the same keys as a read-write one will, and changes no
 * file: a completed swap is read from its .swap file, leftovers stay. */
static void read_only_open_reads_the_same(struct fx *f, struct fx_digest digest)
{
	struct tfs_fdcache *fdc = tfs_fdcache_create(f->io, 8);
	struct tfs_plog_env env = { f->io, fdc, &f->cfg, true };
	struct snapshot before, after;
	struct tfs_plog *pl = NULL;

	tfs_fdcache_set_read_only(fdc);
	snapshot_take(f, &before);
	assert_int_equal(tfs_plog_open(&env, f->path, false, &pl), 0);
	fx_digest_equal(digest, fx_log_digest(pl));
	fx_digest_equal(digest, fx_kd_digest(pl));
	fx_value_is(pl, "key7", NULL);
	fx_value_is(pl, "key6", "v6.5");
	tfs_plog_close(pl);
	snapshot_take(f, &after);
	assert_true(snapshot_same(&before, &after));
	snapshot_free(&before);
	snapshot_free(&after);
	tfs_fdcache_destroy(fdc);
}

/* Sweeps the pass that runs at clock `at` after `prior` uncrashed passes (each at
 * FX_T0). Returns the number of crash points. */
static int sweep(struct fx *f, int prior, int64_t at)
{
	struct offset_set before, after;
	struct fx_digest digest;
	struct snapshot snap;
	int n, points = 0;

	/* the reference run */
	build_scenario(f);
	f->now = FX_T0;
	fx_open(f);
	for (int i = 0; i < prior; i++)
		assert_int_equal(fx_clean(f), 0);
	fx_close(f);
	snapshot_take(f, &snap);
	fx_open(f);
	digest = fx_log_digest(f->pl);
	fx_digest_equal(digest, fx_kd_digest(f->pl));
	before.v = fx_offsets(f->pl, &before.n);
	f->now = at;
	assert_int_equal(fx_clean(f), 0);
	after.v = fx_offsets(f->pl, &after.n);
	assert_true(after.n < before.n);
	fx_close(f);

	for (n = 1; n < SWEEP_MAX; n++) {
		pid_t pid;
		int status;

		snapshot_restore(f, &snap);
		f->now = at;
		pid = fork();
		if (pid == 0) {
			char spec[64];
			fx_open(f);
			snprintf(spec, sizeof(spec), "all:%d:crash", n);
			tfs_io_set_fault(f->io, spec);
			(void)fx_clean(f);
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_true(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == TFS_IO_CRASH_STATUS);
		points++;

		read_only_open_reads_the_same(f, digest);
		fx_open(f);
		fx_no_leftovers(f);
		fx_verify_files(f->path);
		offsets_between(f->pl, &before, &after);
		fx_digest_equal(digest, fx_log_digest(f->pl));
		fx_digest_equal(digest, fx_kd_digest(f->pl));
		fx_value_is(f->pl, "key7", NULL);
		fx_value_is(f->pl, "key6", "v6.5");
		/* the recovered log cleans on to the same result */
		assert_int_equal(fx_clean(f), 0);
		assert_true(same_offsets(f->pl, &after));
		fx_digest_equal(digest, fx_log_digest(f->pl));
		fx_close(f);
		if (WEXITSTATUS(status) == 0)
			break;
	}
	assert_true(n < SWEEP_MAX);
	snapshot_free(&snap);
	free(before.v);
	free(after.v);
	return points;
}

static void a_crash_at_every_step_of_a_first_pass_loses_nothing(void **state)
{
	int points = sweep(*state, 0, FX_T0);
	assert_true(points > 30);
	print_message("first pass: %d crash points, all recovered\n", points);
}

static void a_crash_at_every_step_of_a_tombstone_dropping_pass_loses_nothing(void **state)
{
	int points = sweep(*state, 1, FX_T0 + 1000);
	assert_true(points > 30);
	print_message("tombstone-dropping pass: %d crash points, all recovered\n", points);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(compaction_keeps_the_key_digest_while_writers_append),
		T(a_crash_at_every_step_of_a_first_pass_loses_nothing),
		T(a_crash_at_every_step_of_a_tombstone_dropping_pass_loses_nothing),
#undef T
	};
	return cmocka_run_group_tests_name("cleaner_crash", tests, NULL, NULL);
}
