/* test_cleaner_dryrun.c - tfs_cleaner_dry_run against the pass that follows it.
 *
 * The property: on any log, the records the dry run says the next pass drops are
 * exactly the records that pass then drops, offset for offset, and the sizes it
 * predicts are the sizes the log then has. Random logs mix keyed records,
 * tombstones, keyless records, producer batches (tfs_plog_append_batch) and
 * transactions (tfs_plog_txn_*: committed, aborted, and some still open when a
 * pass comes, so that the first unstable offset bounds it), with rolls at random
 * points, several passes in a row (so tombstones get their horizon and later lose
 * it), a clock that jumps past delete.retention.ms and the producer expiry,
 * min.compaction.lag.ms, and dedupe buffers small enough to fill; every fate and
 * every reason a record is not cleanable must come up in the family. A second
 * family is hand-built segment files with transactional batches and ABORT/COMMIT
 * markers in orders of their own. Each failure prints its seed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/engine/cleaner_fixture.h"

#define LOGS_PER_FAMILY 25
#define PASSES_PER_LOG 4
#define KEYS 24
#define MAX_OPS 260
#define RETENTION_MS 1000

static uint64_t rnd_next(uint64_t *s)
{
	uint64_t x = *s;               /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static unsigned rnd_below(uint64_t *s, unsigned n)
{
	return (unsigned)(rnd_next(s) % n);
}

/* ---- what the dry run said ---- */

struct fates {
	struct tfs_cleaner_record_fate *v;
	size_t n, cap;
};

/* How often each fate came up over a family: each must, or the family proves
 * nothing about it. */
static int64_t seen_fates[TFS_FATE_NOT_CLEANABLE + 1];
/* And each reason a record was outside the pass (reported, or past the range). */
static int64_t seen_why[TFS_NC_NOT_COMPACTED + 1];

static void collect(void *arg, const struct tfs_cleaner_record_fate *f)
{
	struct fates *fs = arg;
	seen_fates[f->fate]++;
	if (fs->n == fs->cap) {
		fs->cap = fs->cap ? fs->cap * 2 : 64;
		fs->v = realloc(fs->v, fs->cap * sizeof(*fs->v));
		assert_non_null(fs->v);
	}
	if (fs->n)
		assert_true(f->offset > fs->v[fs->n - 1].offset);   /* in offset order */
	fs->v[fs->n++] = *f;
	if (f->fate == TFS_FATE_NOT_CLEANABLE)
		seen_why[f->why]++;
}

static bool contains(const tfs_offset_t *v, size_t n, tfs_offset_t o)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < o)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == o;
}

/* One dry run, then the pass: every record on disk before is either reported with
 * a fate or past the recopied range (and then survives); the reported drops are
 * exactly the offsets gone after the pass; the figures match. */
static void dry_run_then_pass(struct fx *f, uint64_t seed, int pass)
{
	struct tfs_cleaner_dry_run d;
	struct fates fs = { 0 };
	struct tfs_plog_stats ps;
	tfs_offset_t *before, *after;
	size_t nb, na, j = 0;
	int64_t dropped = 0, kept = 0;

	before = fx_offsets(f->pl, &nb);
	assert_int_equal(tfs_cleaner_dry_run(f->c, f->pl, collect, &fs, &d), 0);
	assert_int_equal(fx_clean(f), 0);
	after = fx_offsets(f->pl, &na);
	tfs_plog_stats(f->pl, &ps);

	for (size_t i = 0; i < nb; i++) {
		tfs_offset_t o = before[i];
		bool survives = contains(after, na, o), predicted;
		if (j < fs.n && fs.v[j].offset == o) {
			predicted = tfs_cleaner_fate_keeps(fs.v[j].fate);
			if (predicted)
				kept++;
			else
				dropped++;
			j++;
		} else {
			/* not read by the recopy: outside the range, it stays */
			enum tfs_cleaner_not_cleanable why = tfs_cleaner_not_cleanable_of(&d, o);
			seen_why[why]++;
			if (why == TFS_NC_NONE) {
				print_error("seed %" PRIu64 " pass %d: offset %" PRId64
				            " neither reported nor outside the range\n", seed, pass, o);
				fail();
			}
			predicted = true;
		}
		if (survives != predicted) {
			print_error("seed %" PRIu64 " pass %d: offset %" PRId64 " predicted %s, %s\n",
			            seed, pass, o, predicted ? "kept" : "dropped",
			            survives ? "kept" : "dropped");
			fail();
		}
	}
	assert_int_equal(j, fs.n);             /* every reported record was on disk */
	if (d.records_dropped != dropped || d.records_kept != kept ||
	    d.bytes_after != ps.size_bytes) {
		print_error("seed %" PRIu64 " pass %d: predicted dropped %" PRId64 " kept %" PRId64
		            " size %" PRId64 ", fates say %" PRId64 "/%" PRId64 ", size after %" PRId64
		            "\n", seed, pass, d.records_dropped, d.records_kept, d.bytes_after,
		            dropped, kept, ps.size_bytes);
		fail();
	}
	assert_int_equal(d.bytes_freed, d.bytes_before - d.bytes_after);
	free(before);
	free(after);
	free(fs.v);
}

/* ---- family 1: logs made through the partition log ---- */

static void key_of(char *buf, size_t cap, unsigned k)
{
	snprintf(buf, cap, "key-%02u", k);
}

/* A producer batch of 1..4 records (keyed, some tombstones, some keyless). */
static void producer_batch(struct fx *f, uint64_t *s, int64_t pid, int32_t *seq)
{
	struct fx_rec recs[4];
	char keys[4][16], vals[4][24];
	int n = 1 + (int)rnd_below(s, 4);
	struct fx_raw r;

	for (int i = 0; i < n; i++) {
		unsigned roll = rnd_below(s, 10);
		key_of(keys[i], sizeof(keys[i]), rnd_below(s, KEYS));
		snprintf(vals[i], sizeof(vals[i]), "p%" PRId64 "-%u", pid, rnd_below(s, 1000));
		recs[i].key = roll == 0 ? NULL : keys[i];
		recs[i].value = roll == 1 ? NULL : vals[i];
		if (!recs[i].key)
			recs[i].value = vals[i];
	}
	fx_raw_init(&r);
	fx_raw_batch(&r, 0, pid, 0, *seq, false, f->now, recs, n);
	assert_int_equal(tfs_plog_append_batch(f->pl, r.buf, r.len, false, NULL, NULL, NULL, NULL), 0);
	fx_raw_release(&r);
	*seq += n;
}

/* Up to two transactions open at once, each of a producer id of its own (as a
 * .put takes one); one may stay open across passes. */
struct txns {
	struct tfs_plog_txn *open[2];
	int64_t next_pid;
};

/* One step of transaction slot p: begin it, append 1..3 records to it (keyed,
 * some tombstones, some keyless), or end it with a COMMIT or an ABORT. */
static void txn_step(struct fx *f, uint64_t *s, struct txns *tx, unsigned p)
{
	struct tfs_append_rec recs[3];
	char keys[3][16], vals[3][24];
	unsigned op = rnd_below(s, 8);
	size_t n = 1 + rnd_below(s, 3);

	if (!tx->open[p]) {
		assert_int_equal(tfs_plog_txn_begin(f->pl, tx->next_pid++, 0, &tx->open[p]), 0);
		return;
	}
	if (op < 2) {
		assert_int_equal(tfs_plog_txn_end(tx->open[p], op == 0, false), 0);
		tx->open[p] = NULL;
		return;
	}
	memset(recs, 0, sizeof(recs));
	for (size_t i = 0; i < n; i++) {
		unsigned roll = rnd_below(s, 8);
		key_of(keys[i], sizeof(keys[i]), rnd_below(s, KEYS));
		snprintf(vals[i], sizeof(vals[i]), "t%u", rnd_below(s, 1000));
		recs[i].key = tfs_slice_make(keys[i], strlen(keys[i]));
		recs[i].key_null = roll == 0;
		recs[i].value = tfs_slice_make(vals[i], strlen(vals[i]));
		recs[i].value_null = roll == 1;
	}
	assert_int_equal(tfs_plog_txn_append(tx->open[p], recs, n), 0);
}

static void random_appends(struct fx *f, uint64_t *s, int32_t *seqs, struct txns *tx)
{
	int ops = 20 + (int)rnd_below(s, MAX_OPS);
	char key[16], val[48];

	for (int i = 0; i < ops; i++) {
		unsigned op = rnd_below(s, 100);
		size_t vlen = rnd_below(s, 40);
		key_of(key, sizeof(key), rnd_below(s, KEYS));
		memset(val, 'a' + (int)rnd_below(s, 26), vlen);
		val[vlen] = '\0';
		if (op < 50)
			fx_put(f, key, val);
		else if (op < 61)
			fx_put(f, key, NULL);
		else if (op < 70)
			fx_put(f, NULL, val);
		else if (op < 83) {
			unsigned p = rnd_below(s, 3);
			producer_batch(f, s, 100 + p, &seqs[p]);
		} else if (op < 93)
			txn_step(f, s, tx, rnd_below(s, 2));
		else
			fx_roll(f);
	}
}

static void one_random_log(struct fx *f, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	int32_t seqs[3] = { 0, 0, 0 };
	struct txns tx = { .open = { NULL, NULL }, .next_pid = 1000 };

	f->now = FX_T0;
	f->cfg.segment_bytes = 512 + (int)rnd_below(&s, 4096);
	f->cfg.delete_retention_ms = RETENTION_MS;
	f->cfg.min_compaction_lag_ms = rnd_below(&s, 4) == 0 ? 500 : 0;
	f->ccfg.dedupe_buffer_size = rnd_below(&s, 3) == 0 ? (int64_t)(8 + rnd_below(&s, 30)) * 24 :
	                             1 << 20;
	fx_open(f);
	fx_set_config(f);
	for (int pass = 0; pass < PASSES_PER_LOG; pass++) {
		random_appends(f, &s, seqs, &tx);
		if (rnd_below(&s, 2))
			fx_roll(f);
		switch (rnd_below(&s, 4)) {
		case 0:
			f->now += RETENTION_MS + 1;      /* stamped horizons pass */
			break;
		case 1:
			f->now += TFS_PRODUCER_EXPIRATION_MS;   /* producers expire */
			break;
		default:
			f->now += rnd_below(&s, 600);
		}
		dry_run_then_pass(f, seed, pass);
	}
	for (int p = 0; p < 2; p++)
		if (tx.open[p])
			assert_int_equal(tfs_plog_txn_end(tx.open[p], false, false), 0);
	fx_close(f);
	t_rmtree(f->path);
}

static void dry_run_predicts_the_pass_on_random_logs(void **state)
{
	struct fx *f = *state;

	memset(seen_fates, 0, sizeof(seen_fates));
	memset(seen_why, 0, sizeof(seen_why));
	for (uint64_t seed = 1; seed <= LOGS_PER_FAMILY; seed++)
		one_random_log(f, seed);
	for (int i = 0; i <= TFS_FATE_NOT_CLEANABLE; i++) {
		print_message("%s: %" PRId64 "\n", tfs_cleaner_fate_name(i), seen_fates[i]);
		assert_true(seen_fates[i] > 0);
	}
	/* each reason but a policy without compact (no pass to check it against:
	 * the_reasons_a_record_is_not_cleanable) */
	for (int i = TFS_NC_ACTIVE_SEGMENT; i < TFS_NC_NOT_COMPACTED; i++) {
		print_message("not-cleanable, %s: %" PRId64 "\n", tfs_cleaner_not_cleanable_name(i),
		              seen_why[i]);
		assert_true(seen_why[i] > 0);
	}
}

/* ---- family 2: hand-built segments with transactions ---- */

static void one_transactional_log(struct fx *f, uint64_t seed)
{
	uint64_t s = seed * 0xD1B54A32D192ED03ull + 7;
	struct fx_raw r;
	tfs_offset_t off = 0, seg_base = 0;
	int32_t seq[2] = { 0, 0 };
	bool open_txn[2] = { false, false };
	char keys[8][16], vals[8][16];
	int batches = 10 + (int)rnd_below(&s, 40);

	f->now = FX_T0;
	f->cfg.delete_retention_ms = RETENTION_MS;
	fx_raw_init(&r);
	for (int b = 0; b < batches; b++) {
		unsigned op = rnd_below(&s, 10);
		int p = (int)rnd_below(&s, 2);
		if (op < 2 && open_txn[p]) {
			fx_raw_marker(&r, off++, 200 + p, 0,
			              rnd_below(&s, 2) ? TFS_CONTROL_ABORT : TFS_CONTROL_COMMIT, FX_T0);
			open_txn[p] = false;
		} else {
			struct fx_rec recs[8];
			int n = 1 + (int)rnd_below(&s, 5);
			bool txn = op < 6;
			int64_t pid = op < 8 ? 200 + p : -1;
			for (int i = 0; i < n; i++) {
				key_of(keys[i], sizeof(keys[i]), rnd_below(&s, 8));
				snprintf(vals[i], sizeof(vals[i]), "v%u", rnd_below(&s, 100));
				recs[i].key = rnd_below(&s, 8) ? keys[i] : NULL;
				recs[i].value = recs[i].key && !rnd_below(&s, 6) ? NULL : vals[i];
			}
			if (pid < 0)
				txn = false;
			fx_raw_batch(&r, off, pid, pid < 0 ? -1 : 0, pid < 0 ? -1 : seq[p], txn, FX_T0,
			             recs, n);
			if (pid >= 0)
				seq[p] += n;
			if (txn)
				open_txn[p] = true;
			off += n;
		}
		if (rnd_below(&s, 6) == 0) {
			fx_raw_segment(f, &r, seg_base);
			seg_base = off;
		}
	}
	/* the last segment is the active one */
	fx_raw_segment(f, &r, seg_base);
	fx_raw_release(&r);
	fx_open(f);
	fx_set_config(f);
	for (int pass = 0; pass < PASSES_PER_LOG; pass++) {
		dry_run_then_pass(f, seed, pass);
		f->now += rnd_below(&s, 2) ? RETENTION_MS + 1 : 10;
	}
	fx_close(f);
	t_rmtree(f->path);
}

static void dry_run_predicts_the_pass_on_transactional_logs(void **state)
{
	struct fx *f = *state;

	memset(seen_fates, 0, sizeof(seen_fates));
	for (uint64_t seed = 1; seed <= LOGS_PER_FAMILY; seed++)
		one_transactional_log(f, seed);
	for (int i = 0; i <= TFS_FATE_NOT_CLEANABLE; i++)
		print_message("%s: %" PRId64 "\n", tfs_cleaner_fate_name(i), seen_fates[i]);
	/* aborted data and markers past their horizon */
	assert_true(seen_fates[TFS_FATE_DROP] > 0 && seen_fates[TFS_FATE_DROP_TOMBSTONE] > 0);
	assert_true(seen_fates[TFS_FATE_KEEP_TOMBSTONE] > 0);
}

/* ---- the words, on a log small enough to read ---- */

struct one_fate {
	tfs_offset_t offset;
	struct tfs_cleaner_record_fate got;
	bool seen;
};

static void pick(void *arg, const struct tfs_cleaner_record_fate *f)
{
	struct one_fate *o = arg;
	if (f->offset == o->offset) {
		o->got = *f;
		o->seen = true;
	}
}

static const char *fate_at(struct fx *f, tfs_offset_t off, struct tfs_cleaner_dry_run *d)
{
	struct one_fate o = { .offset = off };
	assert_int_equal(tfs_cleaner_dry_run(f->c, f->pl, pick, &o, d), 0);
	if (!o.seen)
		return tfs_cleaner_not_cleanable_name(tfs_cleaner_not_cleanable_of(d, off));
	return tfs_cleaner_fate_name(o.got.fate);
}

/* The A/B/C log: A=10 B=20 A=11 C=30 A=12 B=21 A=13 B=22 closed, C=31 active. */
static void fates_of_a_small_log(void **state)
{
	struct fx *f = *state;
	static const char *const kv[][2] = { { "A", "10" }, { "B", "20" }, { "A", "11" },
		{ "C", "30" }, { "A", "12" }, { "B", "21" }, { "A", "13" }, { "B", "22" } };
	static const char *const want[] = { "drop", "drop", "drop", "keep", "drop", "drop",
	                                    "keep", "keep" };
	struct tfs_cleaner_dry_run d;

	f->now = FX_T0;
	fx_open(f);
	for (size_t i = 0; i < 8; i++)
		fx_put(f, kv[i][0], kv[i][1]);
	fx_roll(f);
	fx_put(f, "C", "31");
	for (tfs_offset_t o = 0; o < 8; o++)
		assert_string_equal(fate_at(f, o, &d), want[o]);
	/* C=30 stays: C=31 is in the active segment, which the map never reads */
	assert_string_equal(fate_at(f, 8, &d), "active segment");
	assert_int_equal(d.records_dropped, 5);
	assert_int_equal(d.first_dirty, 0);
	assert_int_equal(d.first_uncleanable, 8);
	assert_true(d.bytes_freed > 0);
	assert_int_equal(fx_clean(f), 0);
	/* and once 8 is closed too, C=30 goes */
	fx_roll(f);
	assert_string_equal(fate_at(f, 3, &d), "drop");
	assert_string_equal(fate_at(f, 8, &d), "keep");
	assert_string_equal(fate_at(f, 6, &d), "keep");

	/* a tombstone: kept until the horizon the pass stamps, then dropped */
	fx_put(f, "A", NULL);                  /* offset 9 */
	fx_roll(f);
	{
		struct one_fate o = { .offset = 9 };
		assert_int_equal(tfs_cleaner_dry_run(f->c, f->pl, pick, &o, &d), 0);
		assert_true(o.seen);
		assert_string_equal(tfs_cleaner_fate_name(o.got.fate), "keep-tombstone");
		assert_false(o.got.horizon_stamped);
		assert_int_equal(o.got.horizon_ms, f->now + f->cfg.delete_retention_ms);
		assert_int_equal(d.tombstones_to_stamp, 1);
	}
	assert_int_equal(fx_clean(f), 0);
	f->now += f->cfg.delete_retention_ms;
	assert_string_equal(fate_at(f, 9, &d), "drop-tombstone");
	assert_int_equal(d.tombstones_dropped, 1);
	/* keyless records stay */
	fx_put(f, NULL, "x");
	fx_roll(f);
	assert_string_equal(fate_at(f, 10, &d), "keep-keyless");
}

/* A producer's only batch, superseded: its record goes, its batch stays empty. */
static void a_producers_last_batch_is_kept_for_its_state(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec k1 = { "k", "1" };
	struct tfs_cleaner_dry_run d;

	fx_open(f);
	f->now = FX_T0;
	fx_raw_init(&r);
	fx_raw_batch(&r, 0, 1, 0, 5, false, FX_T0, &k1, 1);
	assert_int_equal(tfs_plog_append_batch(f->pl, r.buf, r.len, false, NULL, NULL, NULL, NULL), 0);
	fx_raw_release(&r);
	fx_put(f, "k", "2");
	fx_roll(f);
	assert_string_equal(fate_at(f, 0, &d), "keep-producer-state");
	assert_false(tfs_cleaner_fate_keeps(TFS_FATE_KEEP_PRODUCER_STATE));
	assert_int_equal(d.batches_emptied, 1);
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 0));
}

/* The `fate` words of offset off, from one dry run. */
static const char *fate_words(struct fx *f, tfs_offset_t off, char *buf, size_t cap)
{
	struct tfs_cleaner_dry_run d;
	struct one_fate o = { .offset = off };

	assert_int_equal(tfs_cleaner_dry_run(f->c, f->pl, pick, &o, &d), 0);
	return tfs_cleaner_fate_text(&d, o.seen ? &o.got : NULL, off, buf, cap);
}

/* Each reason a record is outside the next pass, in the words of `fate`, and the
 * record's verdict once the reason is gone. */
static void the_reasons_a_record_is_not_cleanable(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t = NULL;
	struct tfs_append_rec r = { .key = tfs_slice_make("k", 1), .value = tfs_slice_make("t", 1) };
	char w[TFS_CLEANER_FATE_TEXT_CAP];

	f->cfg.min_compaction_lag_ms = 3600 * 1000;
	fx_open(f);
	fx_set_config(f);
	fx_put(f, "k", "1");
	fx_put(f, "k", "2");
	fx_roll(f);
	fx_put(f, "k", "3");                   /* offset 2, the active segment */
	assert_string_equal(fate_words(f, 0, w, sizeof(w)),
	                    "not-cleanable younger than min.compaction.lag.ms");
	assert_string_equal(fate_words(f, 2, w, sizeof(w)), "not-cleanable active segment");
	f->now += 2 * 3600 * 1000;
	assert_string_equal(fate_words(f, 0, w, sizeof(w)), "drop");
	assert_string_equal(fate_words(f, 1, w, sizeof(w)), "keep");

	/* a transaction open from offset 3: nothing from there on is cleanable */
	assert_int_equal(tfs_plog_txn_begin(f->pl, 7, 0, &t), 0);
	assert_int_equal(tfs_plog_txn_append(t, &r, 1), 0);        /* 3 */
	fx_roll(f);
	fx_put(f, "k", "5");                                        /* 4 */
	fx_roll(f);
	/* 2 too: the range ends where the segment holding the first unstable offset
	 * begins, so k=2 at offset 1 is the newest the map reads */
	for (tfs_offset_t o = 2; o <= 4; o++)
		assert_string_equal(fate_words(f, o, w, sizeof(w)), "not-cleanable open transaction");
	assert_string_equal(fate_words(f, 1, w, sizeof(w)), "keep");
	assert_int_equal(tfs_plog_txn_end(t, true, false), 0);      /* 5: COMMIT */
	fx_roll(f);
	for (tfs_offset_t o = 0; o <= 2; o++)
		assert_string_equal(fate_words(f, o, w, sizeof(w)), "drop");
	/* superseded, but producer 7's last batch: it stays, emptied */
	assert_string_equal(fate_words(f, 3, w, sizeof(w)), "keep-producer-state");
	assert_string_equal(fate_words(f, 4, w, sizeof(w)), "keep");

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	fx_set_config(f);
	assert_string_equal(fate_words(f, 0, w, sizeof(w)),
	                    "not-cleanable cleanup.policy without compact");
}

/* A dry run writes nothing: same files, same checkpoint, same figures. */
static void a_dry_run_changes_nothing(void **state)
{
	struct fx *f = *state;
	struct tfs_cleaner_dry_run d1, d2;
	struct tfs_cleaner_partition_info i1, i2;
	size_t n1, n2;

	fx_open(f);
	for (int i = 0; i < 50; i++) {
		char k[8];
		snprintf(k, sizeof(k), "k%d", i % 7);
		fx_put(f, k, "value");
	}
	fx_roll(f);
	i1 = fx_info(f);
	free(fx_offsets(f->pl, &n1));
	assert_int_equal(tfs_cleaner_dry_run(f->c, f->pl, NULL, NULL, &d1), 0);
	assert_int_equal(tfs_cleaner_dry_run(f->c, f->pl, NULL, NULL, &d2), 0);
	i2 = fx_info(f);
	free(fx_offsets(f->pl, &n2));
	assert_int_equal(n1, n2);
	assert_int_equal(i1.first_dirty_offset, i2.first_dirty_offset);
	assert_int_equal(d1.records_dropped, 43);
	assert_int_equal(d1.records_dropped, d2.records_dropped);
	assert_int_equal(d1.bytes_after, d2.bytes_after);
	assert_int_equal(fx_count_files(f->path, ".cleaned"), 0);
	assert_true(i2.last_clean[0] == '\0');  /* no pass was recorded */
	fx_no_leftovers(f);
}

/* Dry runs on one thread while another appends, rolls and cleans: each dry run
 * reads the segment list it pinned and succeeds (TSan checks the sharing). */
struct dry_loop {
	struct fx *f;
	atomic_bool stop;
	int runs, failures;
};

static void *dry_loop_main(void *arg)
{
	struct dry_loop *d = arg;

	while (!atomic_load(&d->stop) || d->runs == 0) {
		struct tfs_cleaner_dry_run r;
		struct fates fs = { 0 };
		if (tfs_cleaner_dry_run(d->f->c, d->f->pl, collect, &fs, &r) != 0 ||
		    r.records_dropped < 0 || r.bytes_after > r.bytes_before)
			d->failures++;
		free(fs.v);
		d->runs++;
	}
	return NULL;
}

static void dry_runs_race_passes_and_appends(void **state)
{
	struct fx *f = *state;
	struct dry_loop d = { .f = f, .runs = 0, .failures = 0 };
	pthread_t t;

	atomic_init(&d.stop, false);
	f->cfg.segment_bytes = 2048;
	fx_open(f);
	fx_set_config(f);
	assert_int_equal(pthread_create(&t, NULL, dry_loop_main, &d), 0);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 40; i++) {
			char k[8];
			snprintf(k, sizeof(k), "k%d", i % 9);
			fx_put(f, k, i % 7 ? "value" : NULL);
		}
		fx_roll(f);
		assert_int_equal(fx_clean(f), 0);
	}
	atomic_store(&d.stop, true);
	pthread_join(t, NULL);
	assert_int_equal(d.failures, 0);
	assert_true(d.runs > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(fates_of_a_small_log),
		T(a_producers_last_batch_is_kept_for_its_state),
		T(a_dry_run_changes_nothing),
		T(the_reasons_a_record_is_not_cleanable),
		T(dry_run_predicts_the_pass_on_random_logs),
		T(dry_run_predicts_the_pass_on_transactional_logs),
		T(dry_runs_race_passes_and_appends),
#undef T
	};
	return cmocka_run_group_tests_name("cleaner_dryrun", tests, NULL, NULL);
}
