/* test_cleaner.c - one cleaning pass and its rules: Kafka's LogCleanerTest
 * behaviours that apply to topicfs (docs/engine.md §9), on the backend named by
 * $TFS_IO. Passes run through tfs_cleaner_clean_now with no threads, on a fake
 * clock, so every test is deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>
#include <zstd.h>

#include "tests/engine/cleaner_fixture.h"

#define DAY_MS 86400000LL

/* Three sealed segments where each of four keys was written three times. */
static void write_dups(struct fx *f)
{
	char k[16], v[16];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 4; i++) {
			snprintf(k, sizeof(k), "k%d", i);
			snprintf(v, sizeof(v), "v%d.%d", i, round);
			fx_put(f, k, v);
		}
		fx_roll(f);
	}
}

/* testCleanSegments: only superseded records go; survivors keep their offsets. */
static void cleaning_keeps_the_newest_record_of_each_key_at_its_offset(void **state)
{
	struct fx *f = *state;
	struct fx_digest before;
	tfs_offset_t *offs;
	size_t n;

	fx_open(f);
	write_dups(f);
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(offs[i], 8 + (tfs_offset_t)i);   /* the last round, unrenumbered */
	free(offs);
	fx_value_is(f->pl, "k2", "v2.2");
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_digest_equal(before, fx_kd_digest(f->pl));
	assert_false(fx_has_offset(f->pl, 0));
	assert_true(fx_has_offset(f->pl, 9));
	fx_no_leftovers(f);
	fx_reopen(f);
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_digest_equal(before, fx_kd_digest(f->pl));
	assert_int_equal(fx_info(f).first_dirty_offset, 12);
}

/* testCleanableOffsetsActiveSegment: the active segment is never touched. */
static void the_active_segment_is_never_cleaned(void **state)
{
	struct fx *f = *state;
	size_t n;
	tfs_offset_t *offs;

	fx_open(f);
	for (int i = 0; i < 5; i++)
		fx_put(f, "k", "v");
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 5);
	free(offs);
	assert_int_equal(fx_info(f).first_uncleanable_offset, 0);
	fx_roll(f);
	fx_put(f, "k", "w");                  /* active again */
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 2);               /* offset 4 (last of the closed part) and 5 */
	assert_int_equal(offs[0], 4);
	assert_int_equal(offs[1], 5);
	free(offs);
}

/* topicfs keeps keyless records (.append); Kafka would count them invalid. */
static void keyless_records_survive(void **state)
{
	struct fx *f = *state;
	size_t n;
	tfs_offset_t *offs;

	fx_open(f);
	fx_put(f, NULL, "line 1");
	fx_put(f, "k", "a");
	fx_put(f, NULL, "line 2");
	fx_put(f, "k", "b");
	fx_roll(f);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 3);
	assert_int_equal(offs[0], 0);
	assert_int_equal(offs[1], 2);
	assert_int_equal(offs[2], 3);
	free(offs);
}

/* Looks up the batch holding offset among hdrs. */
static const struct tfs_batch_header *batch_of(const struct tfs_batch_header *h, size_t n,
                                               tfs_offset_t off)
{
	for (size_t i = 0; i < n; i++)
		if (h[i].base_offset <= off && off <= tfs_batch_last_offset(&h[i]))
			return &h[i];
	return NULL;
}

/* testCleaningWithDeletes + KIP-534: a tombstone is stamped with pass start +
 * delete.retention.ms by the first pass, kept until then, dropped after. */
static void a_tombstone_lives_until_its_delete_horizon(void **state)
{
	struct fx *f = *state;
	struct tfs_batch_header *h;
	const struct tfs_batch_header *b;
	int64_t horizon;
	size_t n;

	f->cfg.delete_retention_ms = 1000;
	fx_open(f);
	fx_put(f, "k", "v1");
	fx_put(f, "k", "v2");
	fx_put(f, "k", NULL);
	fx_put(f, "other", "x");
	fx_roll(f);
	f->now = FX_T0;
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 0));
	assert_false(fx_has_offset(f->pl, 1));
	assert_true(fx_has_offset(f->pl, 2));
	fx_value_is(f->pl, "k", NULL);
	h = fx_batches(f->pl, &n);
	b = batch_of(h, n, 2);
	assert_non_null(b);
	assert_int_equal(tfs_cleaner_delete_horizon(b, &horizon), 0);
	assert_int_equal(horizon, FX_T0 + 1000);
	b = batch_of(h, n, 3);
	assert_int_equal(tfs_cleaner_delete_horizon(b, &horizon), -ENODATA);
	free(h);

	f->now = FX_T0 + 999;                 /* not yet */
	assert_int_equal(fx_clean(f), 0);
	assert_true(fx_has_offset(f->pl, 2));
	h = fx_batches(f->pl, &n);
	assert_int_equal(tfs_cleaner_delete_horizon(batch_of(h, n, 2), &horizon), 0);
	assert_int_equal(horizon, FX_T0 + 1000);   /* a batch keeps its horizon */
	free(h);

	f->now = FX_T0 + 1000;
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 2));
	assert_true(fx_has_offset(f->pl, 3));
	fx_reopen(f);
	fx_value_is(f->pl, "k", NULL);
	fx_value_is(f->pl, "other", "x");
}

/* testCleanTombstone: an old record timestamp does not shorten the horizon. */
static void the_horizon_comes_from_the_pass_not_the_record_timestamp(void **state)
{
	struct fx *f = *state;

	f->cfg.delete_retention_ms = DAY_MS;
	fx_open(f);
	fx_put(f, "k", "v");
	fx_put(f, "k", NULL);
	fx_roll(f);
	f->now = tfs_now_ms() + 10 * DAY_MS;   /* the records are 10 days old by now */
	assert_int_equal(fx_clean(f), 0);
	assert_true(fx_has_offset(f->pl, 1));
	f->now += DAY_MS - 1;
	assert_int_equal(fx_clean(f), 0);
	assert_true(fx_has_offset(f->pl, 1));
	f->now += 1;
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 1));
}

/* A batch whose records all survive and needs no horizon is copied byte for byte;
 * a one-segment group that comes through unchanged is not even swapped. */
static void untouched_batches_are_copied_byte_for_byte(void **state)
{
	struct fx *f = *state;
	char p0[8192], p1[8192];
	uint8_t *a = NULL, *b = NULL, *c = NULL;
	long na, nb, nc;
	struct stat st0, st1;

	fx_open(f);
	fx_put(f, "a", "1");
	fx_put(f, "b", "2");
	fx_roll(f);
	fx_put(f, "c", "3");
	fx_put(f, "d", "4");
	fx_roll(f);
	snprintf(p0, sizeof(p0), "%s/%020d.log", f->path, 0);
	snprintf(p1, sizeof(p1), "%s/%020d.log", f->path, 2);
	na = t_read_file(p0, &a);
	nb = t_read_file(p1, &b);
	assert_int_equal(fx_clean(f), 0);
	/* the two segments were merged into one group: old bytes back to back */
	nc = t_read_file(p0, &c);
	assert_int_equal(nc, na + nb);
	assert_memory_equal(c, a, (size_t)na);
	assert_memory_equal(c + na, b, (size_t)nb);
	assert_int_equal(t_file_size(p1), -1);
	free(a);
	free(b);
	free(c);
	/* a second pass finds nothing to change: same file, not replaced */
	assert_int_equal(stat(p0, &st0), 0);
	fx_put(f, "e", "5");
	fx_roll(f);
	f->cfg.segment_bytes = nc + 1;                 /* keep the old segment alone */
	fx_set_config(f);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(stat(p0, &st1), 0);
	assert_true(st0.st_ino == st1.st_ino);
	fx_no_leftovers(f);
}

/* A rewritten batch keeps its base offset, last offset delta and the offsets of
 * its survivors; it is re-encoded with the topic's codec. */
static void rewritten_batches_keep_offsets_and_use_the_topic_codec(void **state)
{
	struct fx *f = *state;
	struct tfs_append_rec recs[5];
	const char *keys[5] = { "a", "b", "c", "d", "e" };
	struct tfs_batch_header *h;
	size_t n;
	tfs_offset_t *offs;

	f->cfg.compression = TFS_CODEC_ZSTD;
	fx_open(f);
	memset(recs, 0, sizeof(recs));
	for (int i = 0; i < 5; i++) {
		recs[i].key = tfs_slice_make(keys[i], 1);
		recs[i].value = tfs_slice_make("old", 3);
	}
	assert_int_equal(tfs_plog_append(f->pl, recs, 5, false, NULL, NULL), 0);
	fx_put(f, "a", "new");
	fx_put(f, "c", "new");
	fx_put(f, "e", "new");
	fx_roll(f);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 5);
	assert_int_equal(offs[0], 1);
	assert_int_equal(offs[1], 3);
	assert_int_equal(offs[2], 5);
	free(offs);
	h = fx_batches(f->pl, &n);
	assert_int_equal(h[0].base_offset, 0);
	assert_int_equal(h[0].last_offset_delta, 4);
	assert_int_equal(h[0].records_count, 2);
	assert_int_equal(tfs_batch_codec(&h[0]), TFS_CODEC_ZSTD);
	free(h);
	fx_value_is(f->pl, "b", "old");
	fx_value_is(f->pl, "a", "new");
	assert_true(fx_verify_files(f->path) > 0);
}

/* Builds a fresh log (one zstd batch of 200 compressible records written at
 * level 1, then every even key overwritten), cleans it with the topic's
 * compression.zstd.level set to level, and returns the length of the batch the
 * pass re-encoded (base offset 0, the 100 odd keys). */
static int32_t cleaned_batch_length_at_level(struct fx *f, int level)
{
	enum { N = 200 };
	struct tfs_append_rec recs[N];
	char keys[N][16], vals[N][96], lvl[16], ckpt[4096];
	struct tfs_batch_header *h;
	size_t n;
	int32_t len;

	fx_close(f);
	t_rmtree(f->path);
	snprintf(ckpt, sizeof(ckpt), "%s/cleaner-offset-checkpoint", f->dir);
	unlink(ckpt);                    /* or the new log would count as cleaned */
	f->cfg.compression = TFS_CODEC_ZSTD;
	assert_int_equal(tfs_topic_config_set(&f->cfg, "compression.zstd.level", "1"), 0);
	fx_open(f);
	memset(recs, 0, sizeof(recs));
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "acct-%03d", i);
		snprintf(vals[i], sizeof(vals[i]),
		         "{\"id\":%d,\"balance\":%d,\"status\":\"active\",\"region\":\"eu-west\"}",
		         i, i * 7919 % 100000);
		recs[i].key = tfs_slice_make(keys[i], strlen(keys[i]));
		recs[i].value = tfs_slice_make(vals[i], strlen(vals[i]));
	}
	assert_int_equal(tfs_plog_append(f->pl, recs, N, false, NULL, NULL), 0);
	for (int i = 0; i < N; i += 2)
		fx_put(f, keys[i], "closed");
	fx_roll(f);
	snprintf(lvl, sizeof(lvl), "%d", level);
	assert_int_equal(tfs_topic_config_set(&f->cfg, "compression.zstd.level", lvl), 0);
	fx_set_config(f);
	assert_int_equal(fx_clean(f), 0);
	h = fx_batches(f->pl, &n);
	assert_true(n > 0);
	assert_int_equal(h[0].base_offset, 0);
	assert_int_equal(h[0].records_count, N / 2);
	assert_int_equal(tfs_batch_codec(&h[0]), TFS_CODEC_ZSTD);
	len = h[0].length;
	free(h);
	fx_value_is(f->pl, "acct-001", vals[1]);
	fx_value_is(f->pl, "acct-002", "closed");
	return len;
}

/* Re-encoding uses the topic's codec at the topic's compression.zstd.level: the
 * same survivors come out smaller at level 19 than at zstd's fastest level. */
static void rewritten_batches_use_the_topic_zstd_level(void **state)
{
	struct fx *f = *state;
	int32_t fast = cleaned_batch_length_at_level(f, ZSTD_minCLevel());
	int32_t strong = cleaned_batch_length_at_level(f, 19);

	print_message("re-encoded batch: %d bytes at level %d, %d at level 19\n", fast,
	              ZSTD_minCLevel(), strong);
	assert_true(strong < fast);
}

/* testBuildPartialOffsetMap: a map of 3 slots x 0.75 takes 2 keys; the pass stops
 * at the third key, mid-segment, and says so. */
static void a_full_map_stops_the_pass_at_the_last_mapped_offset(void **state)
{
	struct fx *f = *state;
	char *log;

	f->ccfg.dedupe_buffer_size = 3 * 24;
	f->ccfg.io_buffer_load_factor = 0.75;
	fx_open(f);
	fx_put(f, "a", "1");
	fx_put(f, "b", "1");
	fx_put(f, "c", "1");
	fx_put(f, "a", "2");
	fx_roll(f);
	fx_put(f, "z", "1");
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_info(f).first_dirty_offset, 2);
	{
		char line[TFS_CLEANER_LINE_MAX];
		assert_int_equal(tfs_cleaner_last_clean(f->c, f->pl, line, sizeof(line)), 0);
		assert_non_null(strstr(line, "dedupe buffer too small for the dirty region"));
	}
	log = fx_read_text(f->dir, "log-cleaner.log");
	assert_non_null(log);
	assert_non_null(strstr(log, "dedupe buffer too small for the dirty region"));
	free(log);
	/* a(0) is not superseded within the mapped range [0, 2): everything stays */
	assert_true(fx_has_offset(f->pl, 0));
	assert_int_equal(fx_clean(f), 0);     /* maps c, a(3): a(0) goes */
	assert_false(fx_has_offset(f->pl, 0));
	assert_int_equal(fx_info(f).first_dirty_offset, 4);
}

/* testPartialSegmentClean / KAFKA-3894: with room for one key, every pass makes
 * progress and repeated passes reach the fully compacted log. */
static void a_map_of_one_key_still_makes_progress(void **state)
{
	struct fx *f = *state;
	struct fx_digest before;
	tfs_offset_t last = -1;
	size_t n;
	int passes = 0;

	f->ccfg.dedupe_buffer_size = 2 * 24;
	f->ccfg.io_buffer_load_factor = 0.5;
	fx_open(f);
	write_dups(f);
	before = fx_log_digest(f->pl);
	for (;;) {
		tfs_offset_t fd;
		assert_int_equal(fx_clean(f), 0);
		fd = fx_info(f).first_dirty_offset;
		assert_true(fd > last);
		last = fd;
		passes++;
		if (fd == 12)
			break;
	}
	assert_true(passes >= 4);
	fx_digest_equal(before, fx_log_digest(f->pl));
	assert_int_equal(fx_clean(f), 0);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 4);
}

/* testCleaningBeyondMissingOffsets: offset gaps at segment ends do not stall the
 * checkpoint. */
static void offset_gaps_between_segments_do_not_stall_the_checkpoint(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec a = { "k", "1" }, b = { "k", "2" }, c = { "j", "3" };

	fx_raw_init(&r);
	fx_raw_batch(&r, 0, -1, -1, -1, false, FX_T0, &a, 1);
	fx_raw_segment(f, &r, 0);
	fx_raw_batch(&r, 7206178, -1, -1, -1, false, FX_T0, &b, 1);
	fx_raw_segment(f, &r, 7206178);
	fx_raw_batch(&r, 9000000, -1, -1, -1, false, FX_T0, &c, 1);
	fx_raw_segment(f, &r, 9000000);
	fx_raw_release(&r);
	fx_open(f);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_info(f).first_dirty_offset, 9000000);
	assert_false(fx_has_offset(f->pl, 0));
	assert_true(fx_has_offset(f->pl, 7206178));
}

/* testCleanSegmentsRetainingLastEmptyBatch: the last batch before the first
 * uncleanable offset stays, empty if need be, so its offset is not forgotten. */
static void the_batch_before_the_uncleanable_part_is_kept_empty(void **state)
{
	struct fx *f = *state;
	struct tfs_batch_header *h;
	size_t n;

	f->cfg.delete_retention_ms = 0;
	fx_open(f);
	fx_put(f, "k", "v");
	fx_put(f, "k", NULL);
	fx_roll(f);
	f->now = FX_T0;
	assert_int_equal(fx_clean(f), 0);    /* stamps the tombstone */
	f->now = FX_T0 + 1;
	assert_int_equal(fx_clean(f), 0);    /* its horizon passed */
	assert_false(fx_has_offset(f->pl, 1));
	h = fx_batches(f->pl, &n);
	assert_int_equal(n, 1);
	assert_int_equal(h[0].base_offset, 1);
	assert_int_equal(h[0].records_count, 0);
	assert_int_equal(h[0].length, TFS_BATCH_HEADER_BYTES - TFS_BATCH_LOG_OVERHEAD);
	free(h);
	fx_reopen(f);
	assert_int_equal(fx_put(f, "n", "next"), 2);
}

/* Empty segments left by cleaning merge into their neighbours on later passes. */
static void emptied_segments_merge_into_their_group(void **state)
{
	struct fx *f = *state;

	fx_open(f);
	for (int s = 0; s < 5; s++) {
		fx_put(f, "k", "v");
		fx_roll(f);
	}
	assert_int_equal(fx_segments(f->pl), 6);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_segments(f->pl), 2);
	assert_int_equal(fx_info(f).first_dirty_offset, 5);
	fx_digest_equal(fx_log_digest(f->pl), fx_kd_digest(f->pl));
}

/* testSegmentGrouping / ...WithSparseOffsets: limits on bytes, index bytes and the
 * int32 offset span; empty segments always join. */
static void segments_group_by_size_index_size_and_offset_span(void **state)
{
	struct tfs_segment s[6];
	struct tfs_segment *p[6];
	int ends[6], g;

	(void)state;
	memset(s, 0, sizeof(s));
	for (int i = 0; i < 6; i++) {
		s[i].base_offset = i * 10;
		atomic_init(&s[i].size, 100);
		s[i].index_count = 2;
		s[i].tindex_count = 2;
		p[i] = &s[i];
	}
	g = tfs__group_segments(p, 6, 1000000, 1000000, 60, ends);
	assert_int_equal(g, 1);
	assert_int_equal(ends[0], 6);
	g = tfs__group_segments(p, 6, 250, 1000000, 60, ends);   /* two segments a group */
	assert_int_equal(g, 3);
	assert_int_equal(ends[0], 2);
	assert_int_equal(ends[2], 6);
	g = tfs__group_segments(p, 6, 1, 1000000, 60, ends);     /* singletons */
	assert_int_equal(g, 6);
	g = tfs__group_segments(p, 6, 1000000, 3 * 8, 60, ends); /* 3 offset-index entries */
	assert_int_equal(g, 6);
	g = tfs__group_segments(p, 6, 1000000, 4 * 12, 60, ends);/* 4 time-index entries */
	assert_int_equal(g, 3);
	/* sparse offsets: segment 2 ends past base 0 + INT32_MAX */
	s[3].base_offset = (tfs_offset_t)INT32_MAX + 5;
	s[4].base_offset = (tfs_offset_t)INT32_MAX + 6;
	s[5].base_offset = (tfs_offset_t)INT32_MAX + 7;
	g = tfs__group_segments(p, 6, 1000000, 1000000, (tfs_offset_t)INT32_MAX + 9, ends);
	assert_int_equal(g, 2);
	assert_int_equal(ends[0], 2);
	/* ... unless that segment is empty */
	atomic_store(&s[2].size, 0);
	g = tfs__group_segments(p, 6, 1000000, 1000000, (tfs_offset_t)INT32_MAX + 9, ends);
	assert_int_equal(g, 2);
	assert_int_equal(ends[0], 3);
}

/* ---- producers and transactions (segments built by hand) ---- */

static void open_raw(struct fx *f)
{
	fx_open(f);
	f->now = FX_T0;
}

/* testLogCleanerRetainsProducerLastSequence: a producer's last batch survives as an
 * empty batch that keeps its producer id, epoch, base sequence and last offset. */
static void the_last_batch_of_a_producer_is_kept_empty(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec k1 = { "k", "1" }, k2 = { "k", "2" }, k3 = { "k", "3" }, z = { "z", "z" };
	struct tfs_batch_header *h;
	size_t n;

	fx_raw_init(&r);
	fx_raw_batch(&r, 0, 1, 0, 0, false, FX_T0, &k1, 1);
	fx_raw_batch(&r, 1, 1, 0, 1, false, FX_T0, &k2, 1);
	fx_raw_batch(&r, 2, 2, 0, 0, false, FX_T0, &k3, 1);
	fx_raw_segment(f, &r, 0);
	fx_raw_batch(&r, 3, -1, -1, -1, false, FX_T0, &z, 1);
	fx_raw_segment(f, &r, 3);
	fx_raw_release(&r);
	open_raw(f);
	assert_int_equal(fx_clean(f), 0);
	h = fx_batches(f->pl, &n);
	assert_int_equal(n, 3);                 /* pid 1's last (empty), pid 2's, z */
	assert_int_equal(h[0].base_offset, 1);
	assert_int_equal(h[0].records_count, 0);
	assert_int_equal(h[0].producer_id, 1);
	assert_int_equal(h[0].base_sequence, 1);
	assert_int_equal(h[0].last_offset_delta, 0);
	assert_int_equal(h[1].base_offset, 2);
	assert_int_equal(h[1].records_count, 1);
	free(h);
	fx_value_is(f->pl, "k", "3");
	fx_reopen(f);
	h = fx_batches(f->pl, &n);
	assert_int_equal(n, 3);
	free(h);
}

/* The same for a producer's batch appended to the live log (tfs_plog_append_batch)
 * rather than found at open: the append marks its segment as one with producer
 * ids, so the cleaner reads producer state there. */
static void a_producer_batch_appended_live_keeps_its_producer_state(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec k1 = { "k", "1" };
	struct tfs_batch_header *h;
	size_t n;

	fx_open(f);
	f->now = FX_T0;
	fx_raw_init(&r);
	fx_raw_batch(&r, 0, 1, 0, 5, false, FX_T0, &k1, 1);
	assert_int_equal(tfs_plog_append_batch(f->pl, r.buf, r.len, false, NULL, NULL, NULL, NULL), 0);
	fx_raw_release(&r);
	fx_put(f, "k", "2");
	fx_put(f, "z", "z");
	fx_roll(f);
	assert_int_equal(fx_clean(f), 0);
	h = fx_batches(f->pl, &n);
	assert_int_equal(n, 3);                 /* pid 1's last (empty), k=2, z */
	assert_int_equal(h[0].base_offset, 0);
	assert_int_equal(h[0].records_count, 0);
	assert_int_equal(h[0].producer_id, 1);
	assert_int_equal(h[0].base_sequence, 5);
	free(h);
	fx_value_is(f->pl, "k", "2");
}

/* testLogCleanerRetainsLastSequenceEvenIfTransactionAborted + testAbortMarkerRemoval:
 * aborted records go at once; the marker stays while data of its transaction is
 * seen, then gets a horizon, then goes. */
static void aborted_records_go_and_their_marker_follows_the_tombstone_rule(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec a = { "k", "aborted" }, c = { "k", "committed" }, z = { "z", "z" };
	struct tfs_batch_header *h;
	const struct tfs_batch_header *m;
	int64_t horizon;
	size_t n;

	f->cfg.delete_retention_ms = 100;
	fx_raw_init(&r);
	fx_raw_batch(&r, 0, 7, 0, 0, true, FX_T0, &a, 1);      /* txn of pid 7 */
	fx_raw_marker(&r, 1, 7, 0, TFS_CONTROL_ABORT, FX_T0);
	fx_raw_batch(&r, 2, 8, 0, 0, false, FX_T0, &c, 1);
	fx_raw_segment(f, &r, 0);
	fx_raw_batch(&r, 3, 7, 0, 1, false, FX_T0, &z, 1);     /* pid 7 moves on */
	fx_raw_segment(f, &r, 3);
	fx_raw_release(&r);
	open_raw(f);
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 0));      /* aborted data gone */
	assert_true(fx_has_offset(f->pl, 1));       /* marker kept: its data was seen */
	h = fx_batches(f->pl, &n);
	m = batch_of(h, n, 1);
	assert_non_null(m);
	assert_true(m->attributes & TFS_ATTR_CONTROL);
	assert_int_equal(tfs_cleaner_delete_horizon(m, &horizon), -ENODATA);
	free(h);

	assert_int_equal(fx_clean(f), 0);          /* no data left: stamp it */
	h = fx_batches(f->pl, &n);
	assert_int_equal(tfs_cleaner_delete_horizon(batch_of(h, n, 1), &horizon), 0);
	assert_int_equal(horizon, FX_T0 + 100);
	free(h);
	f->now = FX_T0 + 100;
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 1));
	fx_value_is(f->pl, "k", "committed");
}

/* testCommitMarkerRemoval: a COMMIT marker stays while its transaction has data. */
static void a_commit_marker_stays_while_its_transaction_has_data(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec t1 = { "k", "txn" }, t2 = { "j", "txn" }, k2 = { "k", "later" },
	              z = { "z", "z" };

	f->cfg.delete_retention_ms = 100;
	fx_raw_init(&r);
	fx_raw_batch(&r, 0, 7, 0, 0, true, FX_T0, &t1, 1);
	fx_raw_marker(&r, 1, 7, 0, TFS_CONTROL_COMMIT, FX_T0);
	fx_raw_batch(&r, 2, 8, 0, 0, true, FX_T0, &t2, 1);     /* pid 8's open-then-committed txn */
	fx_raw_marker(&r, 3, 8, 0, TFS_CONTROL_COMMIT, FX_T0);
	fx_raw_batch(&r, 4, -1, -1, -1, false, FX_T0, &k2, 1);
	fx_raw_segment(f, &r, 0);
	fx_raw_batch(&r, 5, 7, 0, 1, false, FX_T0, &z, 1);
	fx_raw_batch(&r, 6, 8, 0, 1, false, FX_T0, &z, 1);
	fx_raw_segment(f, &r, 5);
	fx_raw_release(&r);
	open_raw(f);
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 0));     /* superseded by offset 4 */
	assert_true(fx_has_offset(f->pl, 1));      /* its data was seen in this pass */
	assert_true(fx_has_offset(f->pl, 2));
	assert_true(fx_has_offset(f->pl, 3));      /* its data is still there */
	assert_int_equal(fx_clean(f), 0);          /* stamps marker 1 */
	assert_true(fx_has_offset(f->pl, 1));
	f->now = FX_T0 + 100;
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 1));
	assert_true(fx_has_offset(f->pl, 3));
	fx_value_is(f->pl, "j", "txn");
}

/* testCleaningWithKeysConflictingWithTxnMarkerKeys: a data record whose key is the
 * bytes of a COMMIT marker key is data, and the marker is still a marker. */
static void data_keys_that_look_like_marker_keys_are_data(void **state)
{
	struct fx *f = *state;
	struct fx_raw r;
	struct fx_rec t1 = { "k", "txn" }, z = { "z", "z" };

	fx_raw_init(&r);
	fx_raw_batch(&r, 0, 7, 0, 0, true, FX_T0, &t1, 1);
	{
		/* a keyed data record whose key is the 4-byte COMMIT control key */
		struct tfs_batch_params p = { .base_offset = 1, .producer_id = -1, .producer_epoch = -1,
		                              .base_sequence = -1 };
		uint8_t key[4] = { 0, 0, 0, 1 };
		struct tfs_record_in in = { .key = tfs_slice_make(key, 4),
		                            .value = tfs_slice_make("data", 4), .timestamp = FX_T0 };
		const uint8_t *out;
		size_t len;
		tfs_batch_builder_reset(&r.b, &p);
		assert_int_equal(tfs_batch_builder_add(&r.b, &in), 0);
		assert_int_equal(tfs_batch_builder_finish(&r.b, -1, &out, &len), 0);
		fx_raw_bytes(&r, out, len);
	}
	fx_raw_marker(&r, 2, 7, 0, TFS_CONTROL_COMMIT, FX_T0);
	fx_raw_segment(f, &r, 0);
	fx_raw_batch(&r, 3, 7, 0, 1, false, FX_T0, &z, 1);
	fx_raw_segment(f, &r, 3);
	fx_raw_release(&r);
	open_raw(f);
	assert_int_equal(fx_clean(f), 0);
	assert_true(fx_has_offset(f->pl, 0));
	assert_true(fx_has_offset(f->pl, 1));
	assert_true(fx_has_offset(f->pl, 2));
}

/* testUndecidedTransactionalDataNotCleanable: an open transaction pins the first
 * uncleanable offset to its first offset. Written by the engine itself: an open
 * transaction found in a log at open is aborted there (its writer is gone), so
 * the undecided one must be live. */
static void an_open_transaction_pins_the_first_uncleanable_offset(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_txn *t;
	struct tfs_append_rec open = { .key = tfs_slice_make("t", 1), .value = tfs_slice_make("open", 4) };

	fx_open(f);
	fx_put(f, "k", "1");
	fx_put(f, "k", "2");
	fx_roll(f);
	assert_int_equal(tfs_plog_txn_begin(f->pl, 5, 0, &t), 0);
	assert_int_equal(tfs_plog_txn_append(t, &open, 1), 0);   /* offset 2, no marker yet */
	fx_put(f, "k", "1");
	fx_roll(f);
	fx_put(f, "z", "z");
	fx_roll(f);
	assert_int_equal(fx_info(f).first_uncleanable_offset, 2);
	assert_int_equal(fx_clean(f), 0);
	assert_false(fx_has_offset(f->pl, 0));     /* [0, 2) was cleaned */
	assert_true(fx_has_offset(f->pl, 1));      /* offset 3 was not in the map */
	assert_true(fx_has_offset(f->pl, 2));
	assert_int_equal(fx_info(f).first_dirty_offset, 2);
	{
		const char *region;
		assert_int_equal(tfs_cleaner_region(f->c, f->pl, 1, &region), 0);
		assert_string_equal(region, "clean");
		assert_int_equal(tfs_cleaner_region(f->c, f->pl, 3, &region), 0);
		assert_string_equal(region, "uncleanable");
	}
	/* committed, it is cleanable like any record */
	assert_int_equal(tfs_plog_txn_end(t, true, false), 0);
	fx_roll(f);
	assert_true(fx_info(f).first_uncleanable_offset > 2);
}

/* ---- readers and aborts ---- */

/* A reader that started before a swap keeps reading the old records (its segments
 * stay open), even with a tiny fd cache. */
static void a_reader_keeps_reading_what_it_started_with_across_a_swap(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	int got = 0, rc;

	tfs_fdcache_destroy(f->fdc);
	f->fdc = tfs_fdcache_create(f->io, 2);
	fx_open(f);
	write_dups(f);
	assert_int_equal(tfs_plog_cursor_open(f->pl, 0, &c), 0);
	assert_int_equal(tfs_plog_cursor_next(c, &r, NULL), 1);
	got++;
	assert_int_equal(fx_clean(f), 0);
	fx_put(f, "x", "y");
	assert_int_equal(fx_clean(f), 0);
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1)
		got++;
	assert_int_equal(rc, 0);
	assert_int_equal(got, 13);                 /* the old log, and what was appended since */
	tfs_plog_cursor_close(c);
	fx_no_leftovers(f);                        /* old files went with the last reader */
}

struct bg_clean {
	struct fx *f;
	int rc;
};

static sem_t throttled;

static void post_throttled(void *arg)
{
	(void)arg;
	sem_post(&throttled);
}

static void *bg_clean_main(void *arg)
{
	struct bg_clean *b = arg;
	b->rc = fx_clean(b->f);
	return NULL;
}

/* testCleanSegmentsWithAbort: unregistering a partition aborts its pass, which
 * leaves no .cleaned file and the log as it was. */
static void unregister_aborts_a_pass_and_waits_for_it(void **state)
{
	struct fx *f = *state;
	struct bg_clean b = { f, 1 };
	struct fx_digest before;
	pthread_t t;

	f->ccfg.io_max_bytes_per_second = 64 * 1024;    /* slow enough to catch mid-pass */
	fx_open(f);
	fx_put_filled(f, 400, 50, 511, 'v');
	before = fx_log_digest(f->pl);
	/* the throttler's first check finds the pass far over the rate and puts it
	 * to sleep for seconds: that is where the partition goes */
	assert_int_equal(sem_init(&throttled, 0, 0), 0);
	tfs_cleaner_set_hooks(f->c, &(struct tfs_cleaner_hooks){ .throttled = post_throttled });
	assert_int_equal(pthread_create(&t, NULL, bg_clean_main, &b), 0);
	while (sem_wait(&throttled) != 0)
		assert_int_equal(errno, EINTR);
	tfs_cleaner_unregister(f->c, f->pl);
	pthread_join(t, NULL);
	sem_destroy(&throttled);
	assert_int_equal(b.rc, -ECANCELED);
	assert_int_equal(fx_count_files(f->path, ".cleaned"), 0);
	assert_int_equal(fx_count_files(f->path, ".swap"), 0);
	fx_digest_equal(before, fx_log_digest(f->pl));
	assert_int_equal(tfs_cleaner_clean_now(f->c, f->pl), -ENOENT);
	tfs_cleaner_destroy(f->c);
	f->c = NULL;
}

/* A corrupt sealed segment makes the partition uncleanable with a reason;
 * clean_now retries it and reports the error again. */
static void a_corrupt_segment_makes_the_partition_uncleanable(void **state)
{
	struct fx *f = *state;
	char p[8192], reason[TFS_CLEANER_LINE_MAX];
	uint8_t *buf = NULL;
	long n;

	fx_open(f);
	write_dups(f);
	fx_close(f);
	snprintf(p, sizeof(p), "%s/%020d.log", f->path, 4);
	n = t_read_file(p, &buf);
	buf[n - 3] ^= 0x5a;                         /* inside the last batch's records */
	assert_int_equal(t_write_file(p, buf, (size_t)n), 0);
	free(buf);
	fx_open(f);
	assert_true(fx_info(f).uncleanable);
	assert_int_equal(tfs_cleaner_uncleanable_reason(f->c, f->pl, reason, sizeof(reason)), 0);
	assert_non_null(strstr(reason, "00000000000000000004.log"));
	assert_int_equal(fx_clean(f), TFS_ECORRUPT);
	assert_true(fx_info(f).uncleanable);
	{
		const char *region;
		assert_int_equal(tfs_cleaner_region(f->c, f->pl, 5, &region), 0);
		assert_string_equal(region, "uncleanable");
	}
	assert_int_equal(tfs_cleaner_uncleanable_reason(f->c, f->pl, reason, sizeof(reason)), 0);
	assert_non_null(strstr(reason, "corrupt batch in "));
	assert_non_null(strstr(reason, "00000000000000000004.log at position "));
	assert_int_equal(tfs_cleaner_last_clean(f->c, f->pl, reason, sizeof(reason)), 0);
	assert_non_null(strstr(reason, " error: corrupt batch in "));
	fx_no_leftovers(f);
	{
		char *m = NULL;
		size_t len;
		assert_int_equal(tfs_cleaner_metrics(f->c, &m, &len), 0);
		assert_non_null(strstr(m, "topicfs_cleaner_uncleanable_partitions_count 1\n"));
		free(m);
	}
}

/* The region of each offset and the partition's figures (testLogToClean). */
static void regions_and_dirty_ratio_follow_the_checkpoint(void **state)
{
	struct fx *f = *state;
	struct tfs_cleaner_partition_info info;
	struct tfs_plog_stats st;

	fx_open(f);
	write_dups(f);
	fx_put(f, "a", "active");
	info = fx_info(f);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(info.first_dirty_offset, 0);
	assert_int_equal(info.first_uncleanable_offset, 12);
	assert_int_equal(info.clean_bytes, 0);
	assert_int_equal(info.dirty_bytes, st.size_bytes - st.active_segment_bytes);
	assert_true(info.dirty_ratio == 1.0);
	assert_string_equal(tfs_cleaner_region_of(3, 0, 12), "dirty");
	assert_int_equal(fx_clean(f), 0);
	info = fx_info(f);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(info.first_dirty_offset, 12);
	assert_int_equal(info.clean_bytes, st.size_bytes - st.active_segment_bytes);
	assert_true(info.dirty_ratio == 0.0);
	assert_string_equal(tfs_cleaner_region_of(9, info.first_dirty_offset,
	                                          info.first_uncleanable_offset), "clean");
	assert_string_equal(tfs_cleaner_region_of(12, info.first_dirty_offset,
	                                          info.first_uncleanable_offset), "uncleanable");
	fx_roll(f);
	fx_put(f, "a", "x");
	info = fx_info(f);
	assert_true(info.dirty_ratio > 0.0 && info.dirty_ratio < 1.0);
	{
		const char *region;
		assert_int_equal(tfs_cleaner_region(f->c, f->pl, 12, &region), 0);
		assert_string_equal(region, "dirty");
	}
}

/* testCleanableOffsetsForTime / ForShortTime: segments younger than
 * min.compaction.lag.ms stay dirty until they are old enough. */
static void min_compaction_lag_keeps_young_segments_dirty(void **state)
{
	struct fx *f = *state;
	size_t n;

	f->cfg.min_compaction_lag_ms = 3600 * 1000;
	fx_open(f);
	write_dups(f);
	f->now = tfs_now_ms();
	assert_int_equal(fx_info(f).first_uncleanable_offset, 0);
	assert_int_equal(fx_clean(f), 0);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 12);
	f->now += 3600 * 1000 + 1000;
	assert_int_equal(fx_info(f).first_uncleanable_offset, 12);
	assert_int_equal(fx_clean(f), 0);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 4);
}

/* A topic without compact is never compacted: its records are "uncleanable". */
static void a_delete_only_topic_is_not_compacted(void **state)
{
	struct fx *f = *state;
	size_t n;

	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_ms = -1;
	fx_open(f);
	write_dups(f);
	assert_int_equal(fx_clean(f), 0);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 12);
	assert_int_equal(fx_info(f).first_uncleanable_offset, 0);
	assert_false(fx_info(f).compacted);
}

/* Appends n records as one batch: keys[i] = values[i] (a NULL value: a tombstone). */
static void put_batch(struct fx *f, int n, const char *const *keys, const char *const *values)
{
	struct tfs_append_rec r[64];

	assert_true(n > 0 && n <= 64);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < n; i++) {
		r[i].key = tfs_slice_make(keys[i], strlen(keys[i]));
		r[i].value = tfs_slice_make(values[i], values[i] ? strlen(values[i]) : 0);
		r[i].value_null = values[i] == NULL;
	}
	assert_int_equal(tfs_plog_append(f->pl, r, (size_t)n, false, NULL, NULL), 0);
}

/* A batch of n records "<prefix><first + i>" = "<value>.<first + i>". */
static void put_run(struct fx *f, const char *prefix, int first, int n, const char *value)
{
	char kb[64][32], vb[64][48];
	const char *k[64], *v[64];

	for (int i = 0; i < n; i++) {
		snprintf(kb[i], sizeof(kb[i]), "%s%d", prefix, first + i);
		snprintf(vb[i], sizeof(vb[i]), "%s.%d", value, first + i);
		k[i] = kb[i];
		v[i] = vb[i];
	}
	put_batch(f, n, k, v);
}

static void last_clean_has(struct fx *f, const char *what)
{
	char line[TFS_CLEANER_LINE_MAX];

	assert_int_equal(tfs_cleaner_last_clean(f->c, f->pl, line, sizeof(line)), 0);
	if (!strstr(line, what))
		fail_msg("last_clean \"%s\" lacks \"%s\"", line, what);
}

/* Batches of many records, decided whole where the map build's bits allow (all
 * superseded: dropped; all newest and no tombstone: copied) and record by record
 * where they do not (some superseded; a live tombstone to stamp). */
static void batches_die_survive_or_split_by_their_records(void **state)
{
	struct fx *f = *state;
	const char *tk[2] = { "k9", "x" }, *tv[2] = { NULL, "y" };
	struct fx_digest before;
	struct tfs_batch_header *h;
	const struct tfs_batch_header *b;
	tfs_offset_t *offs;
	size_t n;

	fx_open(f);
	put_run(f, "k", 0, 10, "r0");                 /* 0..9: all superseded */
	put_run(f, "k", 0, 10, "r1");                 /* 10..19: all superseded */
	put_run(f, "k", 0, 10, "r2");                 /* 20..29: k5..k8 survive */
	put_run(f, "k", 0, 5, "r3");                  /* 30..34: all survive */
	put_batch(f, 2, tk, tv);                      /* 35, 36: a tombstone and x */
	fx_roll(f);
	fx_put(f, "active", "a");
	f->now = FX_T0;
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 12);                      /* with "active" at 37 */
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(offs[i], 25 + (tfs_offset_t)i);
	for (size_t i = 4; i < 12; i++)
		assert_int_equal(offs[i], 30 + (tfs_offset_t)(i - 4));
	free(offs);
	last_clean_has(f, "records kept 11, dropped 26");
	fx_value_is(f->pl, "k3", "r3.3");
	fx_value_is(f->pl, "k7", "r2.7");
	fx_value_is(f->pl, "k9", NULL);
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_digest_equal(before, fx_kd_digest(f->pl));
	h = fx_batches(f->pl, &n);
	b = batch_of(h, n, 25);
	assert_non_null(b);
	assert_int_equal(b->base_offset, 20);         /* rebuilt in place, deltas kept */
	assert_int_equal(b->records_count, 4);
	assert_int_equal(b->last_offset_delta, 9);
	assert_int_equal(batch_of(h, n, 30)->records_count, 5);
	b = batch_of(h, n, 35);
	assert_true(b->attributes & TFS_ATTR_DELETE_HORIZON);
	assert_int_equal(b->base_timestamp, FX_T0 + f->cfg.delete_retention_ms);
	assert_null(batch_of(h, n, 5));
	free(h);
	assert_true(fx_verify_files(f->path) > 0);
	fx_reopen(f);
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_digest_equal(before, fx_kd_digest(f->pl));
}

/* A map that is larger than one key but smaller than the dirty region still stops
 * exactly after floor(slots × load factor) distinct keys, whatever table it uses. */
static void a_full_map_stops_after_exactly_max_entries_keys(void **state)
{
	struct fx *f = *state;
	struct fx_digest before;
	size_t n;

	f->ccfg.dedupe_buffer_size = 100 * 24;        /* 100 slots, 90 keys at 0.9 */
	fx_open(f);
	for (int i = 0; i < 200; i += 20)
		put_run(f, "key-", i, 20, "v");
	fx_roll(f);
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_info(f).first_dirty_offset, 90);   /* key-90 did not fit */
	last_clean_has(f, "dedupe buffer too small");
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_info(f).first_dirty_offset, 180);
	assert_int_equal(fx_clean(f), 0);
	assert_int_equal(fx_info(f).first_dirty_offset, 200);
	free(fx_offsets(f->pl, &n));
	assert_int_equal(n, 200);                     /* no key was written twice */
	fx_digest_equal(before, fx_log_digest(f->pl));
}

/* The map fills inside a batch: what it mapped is decided by it, the rest of the
 * batch is kept, and the next pass goes on from the first unmapped offset. */
static void a_map_that_fills_inside_a_batch(void **state)
{
	struct fx *f = *state;
	const char *k[6] = { "a", "b", "a", "c", "d", "a" };
	const char *v[6] = { "1", "1", "2", "1", "1", "3" };
	struct fx_digest before;
	tfs_offset_t *offs;
	size_t n;

	f->ccfg.dedupe_buffer_size = 3 * 24;
	f->ccfg.io_buffer_load_factor = 1.0;
	fx_open(f);
	put_batch(f, 6, k, v);
	fx_roll(f);
	fx_put(f, "z", "1");
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);             /* maps a, b, a, c; d does not fit */
	assert_int_equal(fx_info(f).first_dirty_offset, 4);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 6);                       /* a(0) went; z(6) is active */
	assert_int_equal(offs[0], 1);
	free(offs);
	assert_int_equal(fx_clean(f), 0);             /* maps d, a(5): a(2) goes */
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 5);
	assert_int_equal(offs[0], 1);
	assert_int_equal(offs[1], 3);
	assert_int_equal(offs[2], 4);
	assert_int_equal(offs[3], 5);
	free(offs);
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_value_is(f->pl, "a", "3");
}

/* Offsets beyond what the pass's bitmaps cover (1/24 of a tiny dedupe buffer: 800
 * offsets) and the clean region of a later pass are decided by the map. */
static void offsets_past_the_bitmaps_are_decided_by_the_map(void **state)
{
	struct fx *f = *state;
	struct fx_digest before;
	tfs_offset_t *offs;
	size_t n;

	f->ccfg.dedupe_buffer_size = 100 * 24;
	fx_open(f);
	for (int round = 0; round < 20; round++) {
		char v[16];
		snprintf(v, sizeof(v), "r%d", round);
		put_run(f, "k", 0, 50, v);
	}
	fx_roll(f);
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 50);
	assert_int_equal(offs[0], 950);
	free(offs);
	fx_digest_equal(before, fx_log_digest(f->pl));
	/* a second pass: 20 of the 50 clean records are superseded (their batch is
	 * split by the map), the new batch is copied on its bits */
	put_run(f, "k", 0, 20, "r20");
	fx_roll(f);
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 50);
	assert_int_equal(offs[0], 970);
	assert_int_equal(offs[30], 1000);
	free(offs);
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_digest_equal(before, fx_kd_digest(f->pl));
	assert_true(fx_verify_files(f->path) > 0);
}

/* A group of one segment is written only from its first change on: a segment that
 * comes through whole is neither written nor replaced, one that changes gets the
 * unchanged prefix copied in. */
static void only_changed_segments_are_written(void **state)
{
	struct fx *f = *state;
	char p0[8192], p1[8192];
	uint8_t *a = NULL, *c = NULL;
	long na, nc;
	struct stat st0, st1;
	struct fx_digest before;
	tfs_offset_t *offs;
	size_t n;
	char want[64];

	fx_open(f);
	fx_put(f, "a", "1");
	fx_put(f, "b", "1");
	fx_put(f, "c", "1");
	fx_roll(f);
	fx_put(f, "d", "1");
	fx_put(f, "e", "1");
	fx_roll(f);
	fx_put(f, "b", "2");
	fx_roll(f);
	snprintf(p0, sizeof(p0), "%s/%020d.log", f->path, 0);
	snprintf(p1, sizeof(p1), "%s/%020d.log", f->path, 3);
	na = t_read_file(p0, &a);
	assert_int_equal(stat(p1, &st0), 0);
	f->cfg.segment_bytes = 1;                     /* every segment a group of its own */
	fx_set_config(f);
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 5);
	assert_int_equal(offs[0], 0);
	assert_int_equal(offs[1], 2);
	free(offs);
	nc = t_read_file(p0, &c);
	/* a's batch is the old prefix, then c's batch, which followed b's */
	assert_int_equal(nc, na - na / 3);
	assert_memory_equal(c, a, (size_t)(na / 3));
	assert_memory_equal(c + na / 3, a + 2 * (na / 3), (size_t)(na / 3));
	assert_int_equal(stat(p1, &st1), 0);
	assert_true(st0.st_ino == st1.st_ino);        /* d, e: untouched */
	snprintf(want, sizeof(want), "wrote %ld bytes", nc);
	last_clean_has(f, want);                      /* nothing else was written */
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_no_leftovers(f);
	free(a);
	free(c);
	fx_reopen(f);
	fx_digest_equal(before, fx_log_digest(f->pl));
}

/* Read and write buffers far smaller than a batch (log.cleaner.io.buffer.size 1 KiB:
 * 512 bytes each): batches straddle every read, and output goes around the write
 * buffer; the result is the same as with room to spare. */
static void batches_larger_than_the_io_buffers(void **state)
{
	struct fx *f = *state;
	struct fx_digest before;
	tfs_offset_t *offs;
	size_t n;

	f->ccfg.io_buffer_size = 1024;
	fx_open(f);
	for (int round = 0; round < 6; round++) {
		char v[24];
		snprintf(v, sizeof(v), "r%d-padding", round);
		fx_put(f, "small", v);                    /* so that a read starts mid-window */
		put_run(f, "key-with-some-length-", round % 2 ? 0 : 3, 20, v);
	}
	fx_roll(f);
	before = fx_log_digest(f->pl);
	assert_int_equal(fx_clean(f), 0);
	offs = fx_offsets(f->pl, &n);
	assert_int_equal(n, 24);                      /* keys 0..22 and small, each once */
	free(offs);
	fx_digest_equal(before, fx_log_digest(f->pl));
	fx_digest_equal(before, fx_kd_digest(f->pl));
	assert_true(fx_verify_files(f->path) > 0);
	fx_no_leftovers(f);
	fx_reopen(f);
	fx_digest_equal(before, fx_log_digest(f->pl));
}

/* Runs one pass of f's partition on a context of its own (as a cleaner thread
 * does), so that the test can look at the context's offset map afterwards. */
static void pass_on_ctx(struct fx *f, struct tfs__cleaner_ctx *x, tfs_offset_t checkpoint,
                        struct tfs__clean_stats *st)
{
	atomic_bool abort_flag = false;
	struct tfs__pass_in in = { .pl = f->pl, .name = "t-0", .cfg = f->cfg, .now_ms = f->now,
	                           .checkpoint = checkpoint, .abort = &abort_flag, .stop = NULL };

	assert_int_equal(tfs__clean_pass(x, &in, st), 0);
}

/* The map's live table fits the dirty region: a pass over 10 offsets uses 16 slots
 * of a 43690-slot buffer (10 / 0.9 rounded up to a power of two), one over more
 * offsets than the buffer holds keys uses the whole buffer and stops where the
 * full rule says. */
static void a_small_dirty_range_gets_a_small_table(void **state)
{
	struct fx *f = *state;
	struct tfs__cleaner_ctx x;
	struct tfs__clean_stats st;

	fx_open(f);
	put_run(f, "k", 0, 10, "v");
	fx_roll(f);
	assert_int_equal(tfs__cleaner_ctx_init(&x, f->c, 0, 1 << 20, 0.9, 1 << 16), 0);
	pass_on_ctx(f, &x, -1, &st);
	assert_int_equal(tfs_offset_map_slots(x.map), 43690);
	assert_int_equal(tfs_offset_map_live_slots(x.map), 16);
	assert_int_equal(tfs_offset_map_size(x.map), 10);
	assert_int_equal(st.end_offset, 10);
	assert_false(st.map_full);
	assert_int_equal(tfs_offset_map_check(x.map), 0);
	tfs__cleaner_ctx_release(&x);

	/* 200 new keys for a buffer of 100 slots (90 keys): all of it, full at key 90 */
	for (int i = 0; i < 200; i += 20)
		put_run(f, "key-", i, 20, "w");
	fx_roll(f);
	assert_int_equal(tfs__cleaner_ctx_init(&x, f->c, 0, 100 * 24, 0.9, 1 << 16), 0);
	pass_on_ctx(f, &x, 10, &st);
	assert_int_equal(tfs_offset_map_live_slots(x.map), 100);
	assert_true(st.map_full);
	assert_int_equal(st.end_offset, 10 + 90);
	assert_int_equal(tfs_offset_map_check(x.map), 0);
	tfs__cleaner_ctx_release(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(cleaning_keeps_the_newest_record_of_each_key_at_its_offset),
		T(the_active_segment_is_never_cleaned),
		T(keyless_records_survive),
		T(a_tombstone_lives_until_its_delete_horizon),
		T(the_horizon_comes_from_the_pass_not_the_record_timestamp),
		T(untouched_batches_are_copied_byte_for_byte),
		T(rewritten_batches_keep_offsets_and_use_the_topic_codec),
		T(rewritten_batches_use_the_topic_zstd_level),
		T(a_full_map_stops_the_pass_at_the_last_mapped_offset),
		T(a_map_of_one_key_still_makes_progress),
		T(offset_gaps_between_segments_do_not_stall_the_checkpoint),
		T(the_batch_before_the_uncleanable_part_is_kept_empty),
		T(emptied_segments_merge_into_their_group),
		T(segments_group_by_size_index_size_and_offset_span),
		T(the_last_batch_of_a_producer_is_kept_empty),
		T(a_producer_batch_appended_live_keeps_its_producer_state),
		T(aborted_records_go_and_their_marker_follows_the_tombstone_rule),
		T(a_commit_marker_stays_while_its_transaction_has_data),
		T(data_keys_that_look_like_marker_keys_are_data),
		T(an_open_transaction_pins_the_first_uncleanable_offset),
		T(a_reader_keeps_reading_what_it_started_with_across_a_swap),
		T(unregister_aborts_a_pass_and_waits_for_it),
		T(a_corrupt_segment_makes_the_partition_uncleanable),
		T(regions_and_dirty_ratio_follow_the_checkpoint),
		T(min_compaction_lag_keeps_young_segments_dirty),
		T(a_delete_only_topic_is_not_compacted),
		T(batches_die_survive_or_split_by_their_records),
		T(a_full_map_stops_after_exactly_max_entries_keys),
		T(a_map_that_fills_inside_a_batch),
		T(offsets_past_the_bitmaps_are_decided_by_the_map),
		T(only_changed_segments_are_written),
		T(batches_larger_than_the_io_buffers),
		T(a_small_dirty_range_gets_a_small_table),
#undef T
	};
	return cmocka_run_group_tests_name("cleaner", tests, NULL, NULL);
}
