/* test_log_inspect.c - the read-only inspection module: the segment scanner on
 * good, corrupt and torn files; Kafka's checkpoint format; the index checks of
 * verify, and its checks of the topic configs in topics/; distinct-key counting
 * (exact and HyperLogLog); the estimate's formula, its occupancy model, and
 * sampling against a log with a known answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/format/batch_codec.h"
#include "engine/inspect/log_inspect.h"
#include "io/io.h"
#include "tests/t_util.h"

#define T0 INT64_C(1700000000000)

/* ---- building segments with the engine's encoder ------------------------------------ */

struct seg {
	uint8_t *buf;
	size_t len, cap;
	size_t pos[4096];              /* positions of the batches */
	int n;
};

static void seg_add(struct seg *s, const uint8_t *p, size_t len)
{
	if (s->len + len > s->cap) {
		s->cap = (s->len + len) * 2;
		s->buf = realloc(s->buf, s->cap);
		assert_non_null(s->buf);
	}
	assert_true(s->n < 4096);
	s->pos[s->n++] = s->len;
	memcpy(s->buf + s->len, p, len);
	s->len += len;
}

/* A batch at base of count records; key "k<id % keys>" (keys 0: keyless). */
static void add_batch(struct seg *s, struct tfs_batch_builder *b, tfs_offset_t base, int count,
                      int first_id, int keys, size_t value_len)
{
	struct tfs_batch_params p = { .base_offset = base, .leader_epoch = -1, .producer_id = -1,
	                              .producer_epoch = -1, .base_sequence = -1 };
	uint8_t value[512];
	const uint8_t *out;
	size_t len;

	assert_true(value_len <= sizeof(value));
	memset(value, 'v', value_len);
	tfs_batch_builder_reset(b, &p);
	for (int i = 0; i < count; i++) {
		char key[32];
		struct tfs_record_in r = { 0 };
		int kl = snprintf(key, sizeof(key), "k%d", keys ? (first_id + i) % keys : 0);
		r.key = tfs_slice_make(key, (size_t)kl);
		r.key_null = keys == 0;
		r.value = tfs_slice_make(value, value_len);
		r.timestamp = T0 + first_id + i;
		assert_int_equal(tfs_batch_builder_add(b, &r), 0);
	}
	assert_int_equal(tfs_batch_builder_finish(b, -1, &out, &len), 0);
	seg_add(s, out, len);
}

static void write_file(const char *dir, const char *name, const void *p, size_t len)
{
	char path[4096];

	assert_true(snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path));
	assert_int_equal(t_write_file(path, p, len), 0);
}

/* The backend named by $TFS_IO: the suite runs on both. */
static struct tfs_io *test_io(void)
{
	return t_io();
}

/* ---- the scanner ------------------------------------------------------------------- */

static void scan_frames_good_bad_and_torn_batches(void **state)
{
	struct tfs_batch_builder b;
	struct seg s = { 0 };
	struct tfs_io *io = test_io();
	struct tfs_segscan *sc;
	struct tfs_scan_batch sb;
	char *dir = t_mkdtemp("inspect-scan"), path[4096];
	(void)state;

	tfs_batch_builder_init(&b);
	add_batch(&s, &b, 0, 3, 0, 5, 20);
	add_batch(&s, &b, 3, 2, 3, 5, 20);
	add_batch(&s, &b, 10, 4, 5, 5, 20);
	s.buf[s.pos[1] + 70] ^= 0x40;                 /* inside batch 1's CRC range */
	write_file(dir, "00000000000000000000.log", s.buf, s.len - 7);   /* and a torn tail */
	snprintf(path, sizeof(path), "%s/00000000000000000000.log", dir);

	assert_int_equal(tfs_segscan_open(io, path, &sc), 0);
	assert_int_equal(tfs_segscan_file_size(sc), (int64_t)s.len - 7);
	assert_int_equal(tfs_segscan_next(sc, &sb), 1);
	assert_int_equal(sb.status, TFS_SCAN_OK);
	assert_int_equal(sb.pos, 0);
	assert_int_equal(sb.size, s.pos[1]);
	assert_int_equal(sb.h.base_offset, 0);
	assert_int_equal(tfs_batch_last_offset(&sb.h), 2);
	assert_int_equal(tfs_segscan_next(sc, &sb), 1);
	assert_int_equal(sb.status, TFS_SCAN_BAD_BATCH);       /* framed: the scan goes on */
	assert_int_equal(sb.pos, (int64_t)s.pos[1]);
	assert_non_null(sb.why);
	assert_int_equal(tfs_segscan_next(sc, &sb), 1);
	assert_int_equal(sb.status, TFS_SCAN_TRUNCATED);
	assert_int_equal(sb.pos, (int64_t)s.pos[2]);
	assert_int_equal(sb.size, s.len - 7 - s.pos[2]);
	assert_int_equal(tfs_segscan_next(sc, &sb), 0);
	/* seeking back to a known batch start reads it again */
	tfs_segscan_seek(sc, (tfs_pos_t)s.pos[1]);
	assert_int_equal(tfs_segscan_next(sc, &sb), 1);
	assert_int_equal(sb.h.base_offset, 3);
	tfs_segscan_close(sc);

	/* a wrong magic ends the scan: the rest cannot be framed */
	s.buf[s.pos[1] + 16] = 7;
	write_file(dir, "00000000000000000000.log", s.buf, s.len);
	assert_int_equal(tfs_segscan_open(io, path, &sc), 0);
	assert_int_equal(tfs_segscan_next(sc, &sb), 1);
	assert_int_equal(tfs_segscan_next(sc, &sb), 1);
	assert_int_equal(sb.status, TFS_SCAN_BAD_HEADER);
	assert_int_equal(tfs_segscan_next(sc, &sb), 0);
	tfs_segscan_close(sc);

	/* an empty file, and a missing one */
	write_file(dir, "00000000000000000000.log", "", 0);
	assert_int_equal(tfs_segscan_open(io, path, &sc), 0);
	assert_int_equal(tfs_segscan_next(sc, &sb), 0);
	tfs_segscan_close(sc);
	snprintf(path, sizeof(path), "%s/nothing.log", dir);
	assert_int_equal(tfs_segscan_open(io, path, &sc), -ENOENT);

	tfs_batch_builder_release(&b);
	free(s.buf);
	tfs_io_destroy(io);
	t_rmtree(dir);
	free(dir);
}

/* ---- names ------------------------------------------------------------------------- */

static void file_kinds_and_partition_names(void **state)
{
	tfs_offset_t base;
	char topic[256];
	int32_t p;
	(void)state;

	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.log", &base), TFS_FILE_LOG);
	assert_int_equal(base, 42);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.index", &base), TFS_FILE_INDEX);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.timeindex", NULL),
	                 TFS_FILE_TIMEINDEX);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.snapshot", NULL), TFS_FILE_SNAPSHOT);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.txnindex", NULL), TFS_FILE_TXNINDEX);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.log.cleaned", NULL),
	                 TFS_FILE_LEFTOVER);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.index.swap", NULL),
	                 TFS_FILE_LEFTOVER);
	assert_int_equal(tfs_inspect_file_kind("00000000000000000042.log.deleted", NULL),
	                 TFS_FILE_LEFTOVER);
	assert_int_equal(tfs_inspect_file_kind("users.tmp", NULL), TFS_FILE_LEFTOVER);
	assert_int_equal(tfs_inspect_file_kind("leader-epoch-checkpoint", NULL), TFS_FILE_KAFKA);
	assert_int_equal(tfs_inspect_file_kind("42.log", NULL), TFS_FILE_OTHER);

	assert_int_equal(tfs_partition_dir_parse("users-12", topic, sizeof(topic), &p), 0);
	assert_string_equal(topic, "users");
	assert_int_equal(p, 12);
	assert_int_equal(tfs_partition_dir_parse("my-topic-0", topic, sizeof(topic), &p), 0);
	assert_string_equal(topic, "my-topic");
	assert_int_equal(p, 0);
	assert_int_equal(tfs_partition_dir_parse("users-01", topic, sizeof(topic), &p), -EINVAL);
	assert_int_equal(tfs_partition_dir_parse("users-0.1700-delete", topic, sizeof(topic), &p),
	                 -EINVAL);
	assert_int_equal(tfs_partition_dir_parse("users", topic, sizeof(topic), &p), -EINVAL);
	assert_int_equal(tfs_partition_dir_parse("-3", topic, sizeof(topic), &p), -EINVAL);
	assert_int_equal(tfs_partition_dir_parse("u-99999999999", topic, sizeof(topic), &p),
	                 -EINVAL);
}

/* ---- checkpoints --------------------------------------------------------------------- */

static void checkpoint_parses_kafkas_format(void **state)
{
	static const char text[] = "0\n3\nusers 0 120\n__consumer_offsets\t17  5\nusers 1 0\n";
	struct tfs_checkpoint_entry *e;
	size_t n;
	tfs_pos_t at;
	const char *why;
	(void)state;

	assert_int_equal(tfs_checkpoint_parse(text, strlen(text), &e, &n, &at, &why), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].topic, "users");
	assert_int_equal(e[0].partition, 0);
	assert_int_equal(e[0].offset, 120);
	assert_string_equal(e[1].topic, "__consumer_offsets");
	assert_int_equal(e[1].partition, 17);
	assert_int_equal(e[1].offset, 5);
	free(e);
	/* no final newline; an empty checkpoint */
	assert_int_equal(tfs_checkpoint_parse("0\n1\nt 0 1", 9, &e, &n, &at, &why), 0);
	assert_int_equal(n, 1);
	free(e);
	assert_int_equal(tfs_checkpoint_parse("0\n0\n", 4, &e, &n, &at, &why), 0);
	assert_int_equal(n, 0);
	free(e);
}

static void checkpoint_errors_name_their_line(void **state)
{
	static const struct {
		const char *text;
		tfs_pos_t pos;
		const char *why;
	} cases[] = {
		{ "", 0, "empty file" },
		{ "0\n", 2, "no entry count line" },
		{ "1\n0\n", 0, "unknown version" },
		{ "x\n0\n", 0, "not a version number" },
		{ "0\n-1\n", 2, "not an entry count" },
		{ "0\n2\nt 0 1\n", 10, "fewer entries" },
		{ "0\n1\nt 0 1\nt 1 1\n", 10, "more entries" },
		{ "0\n1\nt 0\n", 4, "not \"topic partition offset\"" },
		{ "0\n1\nt 0 1 2\n", 4, "not \"topic partition offset\"" },
		{ "0\n1\n.bad 0 1\n", 4, "invalid topic name" },
		{ "0\n1\nt x 1\n", 4, "partition" },
		{ "0\n1\nt 0 -1\n", 4, "offset" },
		{ "0\n2\nt 0 1\nt 0 2\n", 10, "listed twice" },
		{ "0\n1\n\n", 4, "not \"topic partition offset\"" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tfs_checkpoint_entry *e = (void *)1;
		size_t n = 99;
		tfs_pos_t at = -7;
		const char *why = NULL;
		int rc = tfs_checkpoint_parse(cases[i].text, strlen(cases[i].text), &e, &n, &at,
		                                      &why);
		if (rc != TFS_ECORRUPT || at != cases[i].pos || !why || !strstr(why, cases[i].why))
			fail_msg("case %zu \"%s\": rc %d pos %ld why \"%s\"", i, cases[i].text, rc,
			         (long)at, why ? why : "(null)");
		assert_null(e);
		assert_int_equal(n, 0);
	}
}

/* ---- verify --------------------------------------------------------------------------- */

struct found {
	char text[64][512];
	int n, problems;
};

static void collect(void *arg, enum tfs_finding kind, const char *path, tfs_pos_t pos,
                    const char *msg)
{
	struct found *f = arg;
	const char *base = strrchr(path, '/');

	if (kind == TFS_FINDING_PROBLEM)
		f->problems++;
	if (f->n < 64)
		snprintf(f->text[f->n++], sizeof(f->text[0]), "%s%s:%ld: %s", kind ? "note " : "",
		         base ? base + 1 : path, (long)pos, msg);
}

static bool found_has(const struct found *f, const char *s)
{
	for (int i = 0; i < f->n; i++)
		if (strstr(f->text[i], s))
			return true;
	return false;
}

static void put_be32(uint8_t *p, int32_t v)
{
	p[0] = (uint8_t)((uint32_t)v >> 24);
	p[1] = (uint8_t)((uint32_t)v >> 16);
	p[2] = (uint8_t)((uint32_t)v >> 8);
	p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, int64_t v)
{
	put_be32(p, (int32_t)((uint64_t)v >> 32));
	put_be32(p + 4, (int32_t)v);
}

/* The mount (the engine's open) and topicctl verify read partition directories
 * by one rule: a name that only a looser parser reads as a partition (a sign, a
 * blank, a leading zero, a number past the engine's bound) is a partition for
 * neither, and the open makes no directory for it. */
static void verify_and_the_mount_agree_on_partition_directory_names(void **state)
{
	static const char *const odd[] = { "t-+5", "t- 5", "t-05", "t-100001", "t-2147483647" };
	struct tfs_engine_config cfg;
	struct tfs_engine *e = NULL;
	struct tfs_topic *t;
	struct tfs_verify_ctx ctx = { 0 };
	struct found f = { 0 };
	char *dir = t_mkdtemp("inspect-names"), path[4096], want[512];
	(void)state;

	snprintf(path, sizeof(path), "%s/t-0", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, odd[i]);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = dir;
	assert_int_equal(tfs_engine_open(&cfg, &e), 0);
	t = tfs_engine_topic_get(e, "t");
	assert_non_null(t);
	assert_int_equal(tfs_topic_partition_count(t), 1);
	tfs_topic_unref(t);
	tfs_engine_close(e);
	snprintf(path, sizeof(path), "%s/t-5", dir);
	assert_int_not_equal(access(path, F_OK), 0);

	ctx.io = t_io();
	ctx.finding = collect;
	ctx.arg = &f;
	assert_int_equal(tfs_inspect_verify_data_dir(&ctx, dir), 0);
	assert_int_equal(ctx.stats.partitions, 1);
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		snprintf(want, sizeof(want), "note %s:-1: not a partition directory", odd[i]);
		if (!found_has(&f, want))
			fail_msg("verify took %s for a partition", odd[i]);
	}
	tfs_io_destroy(ctx.io);
	t_rmtree(dir);
	free(dir);
}

static void verify_checks_indexes_against_the_log(void **state)
{
	struct tfs_batch_builder b;
	struct seg s = { 0 };
	struct tfs_verify_ctx ctx = { 0 };
	struct found f = { 0 };
	char *dir = t_mkdtemp("inspect-verify");
	uint8_t idx[3 * TFS_INDEX_ENTRY_BYTES], tix[2 * TFS_TIMEINDEX_ENTRY_BYTES];
	(void)state;

	tfs_batch_builder_init(&b);
	add_batch(&s, &b, 0, 2, 0, 3, 30);     /* offsets 0..1 */
	add_batch(&s, &b, 2, 2, 2, 3, 30);     /* 2..3 */
	add_batch(&s, &b, 7, 1, 4, 3, 30);     /* 7, after a gap */
	write_file(dir, "00000000000000000000.log", s.buf, s.len);
	/* good entries for batches 1 and 2, then one pointing inside batch 2 */
	put_be32(idx, 3);
	put_be32(idx + 4, (int32_t)s.pos[1]);
	put_be32(idx + 8, 7);
	put_be32(idx + 12, (int32_t)s.pos[2]);
	put_be32(idx + 16, 8);
	put_be32(idx + 20, (int32_t)s.pos[2] + 5);
	write_file(dir, "00000000000000000000.index", idx, sizeof(idx));
	put_be64(tix, T0 + 3);
	put_be32(tix + 8, 3);
	put_be64(tix + 12, T0 + 3);             /* batch 7's max timestamp is T0 + 4 */
	put_be32(tix + 20, 7);
	write_file(dir, "00000000000000000000.timeindex", tix, sizeof(tix));

	ctx.io = test_io();
	ctx.finding = collect;
	ctx.arg = &f;
	assert_int_equal(tfs_inspect_verify_partition(&ctx, dir), 0);
	assert_int_equal(ctx.stats.batches, 3);
	assert_int_equal(ctx.stats.records, 5);
	assert_int_equal(ctx.stats.segments, 1);
	assert_int_equal(ctx.stats.index_entries, 5);
	if (f.problems != 2 || !found_has(&f, "00000000000000000000.index:16: entry 2: position") ||
	    !found_has(&f, "00000000000000000000.timeindex:12: entry 1: timestamp")) {
		for (int i = 0; i < f.n; i++)
			print_message("%s\n", f.text[i]);
		fail_msg("expected exactly the two index problems");
	}
	assert_true(tfs_inspect_is_partition_dir(dir));

	tfs_io_destroy(ctx.io);
	tfs_batch_builder_release(&b);
	free(s.buf);
	t_rmtree(dir);
	free(dir);
}

/* A data directory keeps each topic's config in topics/<topic>: each is loaded (a
 * bad line reported with its position), counted against the partition
 * directories, and a leftover topics/<topic>.tmp is a problem; topics/ itself is
 * part of the layout, never an unknown file. */
static void verify_data_dir_checks_the_topic_configs_in_topics(void **state)
{
	struct tfs_batch_builder b;
	struct seg s = { 0 };
	struct tfs_verify_ctx ctx = { 0 };
	struct found f = { 0 };
	char *dir = t_mkdtemp("inspect-topics"), *fresh = t_mkdtemp("inspect-fresh");
	char sub[4096];
	static const char t_config[] = "segment.bytes=1048576\ntopicfs.partitions=2\n";
	static const char u_config[] = "# u\nsegment.bytes=lots\n";
	(void)state;

	/* a new data directory holds only topics/, which tells it from a partition
	 * directory of the same name */
	snprintf(sub, sizeof(sub), "%s/users-0", fresh);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_true(tfs_inspect_is_partition_dir(sub));
	snprintf(sub, sizeof(sub), "%s/users-0/%s", fresh, TFS_CONFIG_DIR);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof(sub), "%s/users-0", fresh);
	assert_false(tfs_inspect_is_partition_dir(sub));

	tfs_batch_builder_init(&b);
	add_batch(&s, &b, 0, 2, 0, 3, 30);
	snprintf(sub, sizeof(sub), "%s/t-0", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	write_file(sub, "00000000000000000000.log", s.buf, s.len);
	snprintf(sub, sizeof(sub), "%s/%s", dir, TFS_CONFIG_DIR);
	assert_int_equal(mkdir(sub, 0755), 0);
	write_file(sub, "t", t_config, strlen(t_config));
	write_file(sub, "t.tmp", t_config, strlen(t_config));
	write_file(sub, "u", u_config, strlen(u_config));
	write_file(sub, "not a topic", "x=1\n", 4);
	assert_false(tfs_inspect_is_partition_dir(dir));

	ctx.io = test_io();
	ctx.finding = collect;
	ctx.arg = &f;
	assert_int_equal(tfs_inspect_verify_data_dir(&ctx, dir), 0);
	assert_int_equal(ctx.stats.partitions, 1);
	if (f.problems != 3 || ctx.stats.notes != 1 ||
	    !found_has(&f, "t:-1: topicfs.partitions is 2 but there is no directory t-1") ||
	    !found_has(&f, "t.tmp:-1: leftover temporary file") ||
	    !found_has(&f, "u:4: config line 2: bad value for segment.bytes") ||
	    !found_has(&f, "note not a topic:-1: not a topic config") || found_has(&f, "topics:")) {
		for (int i = 0; i < f.n; i++)
			print_message("%s\n", f.text[i]);
		fail_msg("expected the three problems of topics/ and one note");
	}

	tfs_io_destroy(ctx.io);
	tfs_batch_builder_release(&b);
	free(s.buf);
	t_rmtree(dir);
	t_rmtree(fresh);
	free(dir);
	free(fresh);
}

/* ---- distinct keys -------------------------------------------------------------------- */

static void keycount_is_exact_then_hyperloglog(void **state)
{
	struct tfs_keycount *k;
	bool exact;
	char key[32];
	double v;
	(void)state;

	assert_int_equal(tfs_keycount_create(0, &k), 0);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 5000; i++) {
			int n = snprintf(key, sizeof(key), "key-%d", i);
			tfs_keycount_add(k, tfs_slice_make(key, (size_t)n));
		}
	}
	tfs_keycount_add(k, tfs_slice_make("", 0));          /* the empty key is a key */
	v = tfs_keycount_value(k, &exact);
	assert_true(exact);
	assert_true(v == 5001.0);
	tfs_keycount_reset(k);
	assert_true(tfs_keycount_value(k, &exact) == 0.0 && exact);
	tfs_keycount_destroy(k);

	/* past max_exact the set gives way to HyperLogLog (about 0.8% standard error) */
	assert_int_equal(tfs_keycount_create(1000, &k), 0);
	for (int i = 0; i < 200000; i++) {
		int n = snprintf(key, sizeof(key), "user-%d", i % 100000);
		tfs_keycount_add(k, tfs_slice_make(key, (size_t)n));
	}
	v = tfs_keycount_value(k, &exact);
	assert_false(exact);
	if (fabs(v - 100000) > 100000 * 0.04)
		fail_msg("HyperLogLog says %.0f distinct keys for 100000", v);
	/* small cardinalities use linear counting */
	tfs_keycount_reset(k);
	for (int i = 0; i < 600; i++) {
		int n = snprintf(key, sizeof(key), "small-%d", i);
		tfs_keycount_add(k, tfs_slice_make(key, (size_t)n));
	}
	v = tfs_keycount_value(k, &exact);
	assert_true(exact);
	assert_true(v == 600.0);
	tfs_keycount_destroy(k);
}

/* ---- the estimate ------------------------------------------------------------------------ */

static void estimate_formula_term_by_term(void **state)
{
	struct tfs_estimate_input in = {
		.current_bytes = 1000, .active_bytes = 100, .cleanable_bytes = 900,
		.sampled_bytes = 900, .records = 80, .keyed_records = 60, .keyless_records = 20,
		.keyed_bytes = 600, .keyless_bytes = 300, .distinct_keys = 20,
		.distinct_exact = true, .dirty_ratio = 0.2,
	};
	struct tfs_estimate e, t;
	(void)state;

	tfs_estimate_compute(&in, &e);
	assert_true(e.sample_fraction == 1.0);
	assert_true(e.events_per_key == 3.0);           /* 60 / 20 */
	assert_true(e.surviving_bytes == 500.0);        /* 300 + 600 / 3 */
	assert_true(e.dirt_bytes == 125.0);             /* 500 * 0.2 / 0.8 */
	assert_true(e.estimate_bytes == 725.0);         /* 500 + 125 + 100 */
	assert_true(fabs(e.savings - 0.275) < 1e-12);
	assert_true(e.worth_it);                        /* E >= 3, savings > 20% */
	assert_true(e.keyless_share == 0.25);
	assert_true(e.keyless_warning);

	/* r = 0.5: 500 of dirt; the estimate would pass the current size: capped */
	in.dirty_ratio = 0.5;
	tfs_estimate_compute(&in, &e);
	assert_true(e.estimate_bytes == 1000.0);
	assert_true(e.savings == 0.0);
	assert_false(e.worth_it);
	/* r = 1: the ratio never starts a pass */
	in.dirty_ratio = 1.0;
	tfs_estimate_compute(&in, &e);
	assert_true(isinf(e.dirt_bytes));
	assert_true(e.estimate_bytes == 1000.0);
	/* E below 3 is never worth it, whatever the savings */
	in.dirty_ratio = 0;
	in.keyed_records = 40;
	tfs_estimate_compute(&in, &e);
	assert_true(e.events_per_key == 2.0);
	assert_true(e.estimate_bytes == 700.0);         /* 300 + 300 + 0 + 100 */
	assert_false(e.worth_it);
	/* nothing keyed: the keyless bytes and the active segment survive */
	memset(&in, 0, sizeof(in));
	in.current_bytes = 500;
	in.active_bytes = 50;
	in.cleanable_bytes = in.sampled_bytes = 450;
	in.records = in.keyless_records = 9;
	in.keyless_bytes = 450;
	tfs_estimate_compute(&in, &e);
	assert_true(e.events_per_key == 0);
	assert_true(e.estimate_bytes == 500.0);
	assert_false(e.worth_it);
	assert_true(e.keyless_warning);

	/* totals: sums of bytes and keys; E of the sums */
	{
		struct tfs_estimate_input ins[2] = {
			{ .current_bytes = 1000, .active_bytes = 100, .cleanable_bytes = 900,
			  .sampled_bytes = 900, .records = 60, .keyed_records = 60, .keyed_bytes = 900,
			  .distinct_keys = 10, .distinct_exact = true },
			{ .current_bytes = 500, .cleanable_bytes = 500, .sampled_bytes = 500,
			  .records = 40, .keyed_records = 30, .keyless_records = 10, .keyed_bytes = 400,
			  .keyless_bytes = 100, .distinct_keys = 10, .distinct_exact = true },
		};
		struct tfs_estimate parts[2];
		tfs_estimate_compute(&ins[0], &parts[0]);       /* 900/6 + 100 = 250 */
		tfs_estimate_compute(&ins[1], &parts[1]);       /* 100 + 400/3 */
		tfs_estimate_total(parts, ins, 2, &t);
		assert_true(t.current_bytes == 1500.0);
		assert_true(t.estimate_bytes == parts[0].estimate_bytes + parts[1].estimate_bytes);
		assert_true(t.events_per_key == 90.0 / 20.0);
		assert_true(t.keyless_share == 0.1);
		assert_false(t.keyless_warning);                /* "more than 10%" */
		assert_true(t.worth_it);
	}
}

static void occupancy_model_recovers_events_per_key(void **state)
{
	(void)state;
	/* everything read: the count is the count */
	assert_true(tfs_estimate_scale_distinct(700, 10000, 1.0) == 700);
	/* every sampled key seen once: as many keys as records (E = 1) */
	assert_true(tfs_estimate_scale_distinct(1000, 10000, 0.1) == 10000);
	/* D keys of E records each, seen through a fraction f */
	for (int e = 2; e <= 50; e *= 5) {
		double D = 1000, f = 0.1, n = D * e;
		double d = D * (1 - pow(1 - f, e));
		double got = tfs_estimate_scale_distinct(d, n, f);
		if (fabs(got - D) > 1e-6 * D)
			fail_msg("E=%d: %.6f keys, want %.0f", e, got, D);
	}
	assert_true(tfs_estimate_scale_distinct(0, 100, 0.1) == 0);
}

/* A 2-segment partition of 3000 two-record batches, every tenth keyless: record i
 * has key i % 500, and the keyless batches hold the records with i % 20 in {18, 19},
 * so the truth is 450 keys and E = 5400 / 450 = 12 in the cleanable segment. */
static void estimate_scan_whole_and_sampled(void **state)
{
	struct tfs_batch_builder b;
	struct seg s0 = { 0 }, s1 = { 0 };
	struct tfs_estimate_opts o;
	struct tfs_estimate_input in;
	struct tfs_estimate e;
	struct tfs_io *io = test_io();
	char *dir = t_mkdtemp("inspect-est");
	int id = 0;
	(void)state;

	tfs_batch_builder_init(&b);
	for (int i = 0; i < 3000; i++) {
		if (i % 10 == 9) {
			add_batch(&s0, &b, id, 2, id, 0, 40);       /* keyless */
		} else {
			add_batch(&s0, &b, id, 2, id, 500, 40);
		}
		id += 2;
	}
	/* the active segment, never read */
	add_batch(&s1, &b, id, 3, id, 7, 10);
	write_file(dir, "00000000000000000000.log", s0.buf, s0.len);
	{
		char name[64];
		snprintf(name, sizeof(name), "%020d.log", id);
		write_file(dir, name, s1.buf, s1.len);
	}

	tfs_estimate_opts_defaults(&o);
	assert_int_equal(tfs_inspect_estimate_scan(io, dir, &o, &in), 0);
	assert_false(in.sampled);
	assert_int_equal(in.segments, 2);
	assert_int_equal(in.current_bytes, (int64_t)(s0.len + s1.len));
	assert_int_equal(in.active_bytes, (int64_t)s1.len);
	assert_int_equal(in.sampled_bytes, (int64_t)s0.len);
	assert_int_equal(in.records, 6000);
	assert_int_equal(in.keyless_records, 600);
	assert_int_equal(in.keyed_records, 5400);
	assert_true(in.distinct_exact);
	assert_true(in.distinct_keys == 450.0);
	assert_true(fabs(in.keyed_bytes + in.keyless_bytes - (double)s0.len) < 1e-6);
	tfs_estimate_compute(&in, &e);
	assert_true(e.events_per_key == 12.0);

	/* sampled: about 20% of the bytes in 8 KiB windows; the keys are scaled up by
	 * the occupancy model (the keys are spread evenly: the model's own case) */
	o.sample_above_bytes = 0;
	o.sample_fraction = 0.2;
	o.sample_chunk_bytes = 8192;
	assert_int_equal(tfs_inspect_estimate_scan(io, dir, &o, &in), 0);
	assert_true(in.sampled);
	tfs_estimate_compute(&in, &e);
	if (e.sample_fraction < 0.15 || e.sample_fraction > 0.25)
		fail_msg("read %.3f of the log, asked 0.2", e.sample_fraction);
	if (in.distinct_keys >= 450 || fabs(e.distinct_keys_total - 450) > 450 * 0.15)
		fail_msg("saw %.0f keys, estimated %.1f, truth 450", in.distinct_keys,
		         e.distinct_keys_total);
	if (fabs(e.events_per_key - 12) > 12 * 0.15)
		fail_msg("events per key %.2f, truth 12", e.events_per_key);
	print_message("sampled %.3f: saw %.0f keys of %" PRId64 " keyed records; estimated %.1f keys, "
	              "E %.2f (truth 450, 12)\n", e.sample_fraction, in.distinct_keys, in.keyed_records,
	              e.distinct_keys_total, e.events_per_key);
	if (fabs(e.keyless_share - 0.1) > 0.03)
		fail_msg("keyless share %.3f, truth 0.1", e.keyless_share);

	/* a bad index hint (pointing into a batch) falls back to walking */
	{
		uint8_t idx[8];
		put_be32(idx, 100);
		put_be32(idx + 4, (int32_t)s0.pos[1500] + 3);
		write_file(dir, "00000000000000000000.index", idx, sizeof(idx));
		assert_int_equal(tfs_inspect_estimate_scan(io, dir, &o, &in), 0);
		assert_int_equal(in.bad_batches, 0);
		assert_true(in.records > 0);
	}
	{
		char empty[4096];
		snprintf(empty, sizeof(empty), "%s/none", dir);
		assert_int_equal(mkdir(empty, 0755), 0);
		assert_int_equal(tfs_inspect_estimate_scan(io, empty, &o, &in), -ENOENT);
	}

	tfs_batch_builder_release(&b);
	free(s0.buf);
	free(s1.buf);
	tfs_io_destroy(io);
	t_rmtree(dir);
	free(dir);
}

/* Bytes the scan cannot frame (a bad header half way) count as surviving: a
 * damaged log must never look compactable. */
static void estimate_counts_unreadable_bytes_as_surviving(void **state)
{
	struct tfs_batch_builder b;
	struct seg s0 = { 0 }, s1 = { 0 };
	struct tfs_estimate_opts o;
	struct tfs_estimate_input in;
	struct tfs_estimate e;
	struct tfs_io *io = test_io();
	char *dir = t_mkdtemp("inspect-bad");
	(void)state;

	tfs_batch_builder_init(&b);
	for (int i = 0; i < 20; i++)
		add_batch(&s0, &b, i * 4, 4, i * 4, 2, 30);     /* 2 keys, E = 40 */
	add_batch(&s1, &b, 80, 1, 0, 2, 30);
	s0.buf[s0.pos[10] + 16] = 9;                         /* batch 10's magic */
	write_file(dir, "00000000000000000000.log", s0.buf, s0.len);
	write_file(dir, "00000000000000000080.log", s1.buf, s1.len);
	tfs_estimate_opts_defaults(&o);
	assert_int_equal(tfs_inspect_estimate_scan(io, dir, &o, &in), 0);
	assert_int_equal(in.bad_batches, 1);
	assert_int_equal(in.sampled_bytes, (int64_t)s0.len);
	assert_int_equal(in.keyed_records, 40);
	assert_true(in.keyless_bytes == (double)(s0.len - s0.pos[10]));
	tfs_estimate_compute(&in, &e);
	assert_true(e.surviving_bytes >= (double)(s0.len - s0.pos[10]));

	tfs_batch_builder_release(&b);
	free(s0.buf);
	free(s1.buf);
	tfs_io_destroy(io);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(scan_frames_good_bad_and_torn_batches),
		cmocka_unit_test(file_kinds_and_partition_names),
		cmocka_unit_test(checkpoint_parses_kafkas_format),
		cmocka_unit_test(checkpoint_errors_name_their_line),
		cmocka_unit_test(verify_checks_indexes_against_the_log),
		cmocka_unit_test(verify_and_the_mount_agree_on_partition_directory_names),
		cmocka_unit_test(verify_data_dir_checks_the_topic_configs_in_topics),
		cmocka_unit_test(keycount_is_exact_then_hyperloglog),
		cmocka_unit_test(estimate_formula_term_by_term),
		cmocka_unit_test(occupancy_model_recovers_events_per_key),
		cmocka_unit_test(estimate_scan_whole_and_sampled),
		cmocka_unit_test(estimate_counts_unreadable_bytes_as_surviving),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
