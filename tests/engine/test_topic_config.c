/* test_topic_config.c - Kafka config names, defaults, validation, formatting and the
 * atomic <topic>.config file (engine/topic_config.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "engine/format/batch_codec.h"
#include "engine/topic_config.h"
#include "io/log.h"
#include "tests/t_util.h"

#define BUF_CAP 64
#define N_TOPIC_NAMES 17
#define N_CLEANER_NAMES 6

/* ---- helpers ------------------------------------------------------------------------ */

struct fixture {
	char *dir;
	char *path;          /* dir/users.config */
	struct tfs_io *io;
	char *log_path;      /* log lines of the test go here */
	int log_fd;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->dir = t_mkdtemp("topic_config");
	assert_true(asprintf(&f->path, "%s/users.config", f->dir) > 0);
	assert_true(asprintf(&f->log_path, "%s.log", f->dir) > 0);
	f->log_fd = open(f->log_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(f->log_fd >= 0);
	tfs_log_set_fd(f->log_fd, 0);
	f->io = t_io();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	tfs_log_set_fd(2, 0);
	close(f->log_fd);
	unlink(f->log_path);
	tfs_io_destroy(f->io);
	t_rmtree(f->dir);
	free(f->log_path);
	free(f->path);
	free(f->dir);
	free(f);
	return 0;
}

/* The log lines written since the fixture started (caller frees). */
static char *log_text(const struct fixture *f)
{
	uint8_t *buf = NULL;
	long n = t_read_file(f->log_path, &buf);
	assert_true(n >= 0);
	char *s = malloc((size_t)n + 1);
	assert_non_null(s);
	if (n)
		memcpy(s, buf, (size_t)n);
	s[n] = '\0';
	free(buf);
	return s;
}

static void log_reset(const struct fixture *f)
{
	assert_int_equal(ftruncate(f->log_fd, 0), 0);
	assert_int_equal(lseek(f->log_fd, 0, SEEK_SET), 0);
}

static void expect_get(const struct tfs_topic_config *c, const char *name, const char *want)
{
	char buf[BUF_CAP];
	assert_int_equal(tfs_topic_config_get(c, name, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

/* set(name, value) fails with -EINVAL and leaves c byte-identical. */
static void expect_topic_reject(struct tfs_topic_config *c, const char *name, const char *value)
{
	struct tfs_topic_config before;
	memcpy(&before, c, sizeof(before));
	int rc = tfs_topic_config_set(c, name, value);
	if (rc != -EINVAL)
		fail_msg("%s=\"%s\" gave %d, want -EINVAL", name, value, rc);
	assert_memory_equal(&before, c, sizeof(before));
}

static void expect_cleaner_reject(struct tfs_cleaner_config *c, const char *name, const char *value)
{
	struct tfs_cleaner_config before;
	memcpy(&before, c, sizeof(before));
	int rc = tfs_cleaner_config_set(c, name, value);
	if (rc != -EINVAL)
		fail_msg("%s=\"%s\" gave %d, want -EINVAL", name, value, rc);
	assert_memory_equal(&before, c, sizeof(before));
}

/* Every topic config value and the ownership are equal (compared by value, so that
 * struct padding plays no part). */
static void expect_same_config(const struct tfs_topic_config *a, const struct tfs_topic_config *b)
{
	char x[BUF_CAP], y[BUF_CAP];
	for (const char *const *n = tfs_topic_config_names(); *n; n++) {
		assert_int_equal(tfs_topic_config_get(a, *n, x, sizeof(x)), 0);
		assert_int_equal(tfs_topic_config_get(b, *n, y, sizeof(y)), 0);
		if (strcmp(x, y) != 0)
			fail_msg("%s: %s != %s", *n, x, y);
	}
}

static void expect_same_meta(const struct tfs_topic_meta *a, const struct tfs_topic_meta *b)
{
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->partitions, b->partitions);
}

/* A config with every value away from its default. */
static void non_default(struct tfs_topic_config *c)
{
	static const char *const kv[][2] = {
		{ "cleanup.policy", "compact,delete" },
		{ "segment.bytes", "1048576" },
		{ "segment.ms", "3600000" },
		{ "min.cleanable.dirty.ratio", "0.1" },
		{ "delete.retention.ms", "1000" },
		{ "min.compaction.lag.ms", "5000" },
		{ "max.compaction.lag.ms", "86400000" },
		{ "retention.ms", "-1" },
		{ "retention.bytes", "1073741824" },
		{ "max.message.bytes", "65536" },
		{ "compression.type", "zstd" },
		{ "compression.zstd.level", "-7" },
		{ "message.timestamp.type", "LogAppendTime" },
		{ "segment.index.bytes", "4096" },
		{ "index.interval.bytes", "0" },
		{ "flush.ms", "0" },
	};
	tfs_topic_config_defaults(c);
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		assert_int_equal(tfs_topic_config_set(c, kv[i][0], kv[i][1]), 0);
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		assert_false(tfs_topic_config_is_default(c, kv[i][0]));
}

static const struct tfs_topic_meta some_meta = { 1234, 5678, 0750, 12, false };

/* ---- defaults and names ------------------------------------------------------------- */

static void test_topic_defaults(void **state)
{
	(void)state;
	struct tfs_topic_config c;
	tfs_topic_config_defaults(&c);

	assert_int_equal(c.cleanup_policy, TFS_POLICY_COMPACT);
	assert_int_equal(c.segment_bytes, 104857600);
	assert_int_equal(c.segment_ms, 604800000);
	assert_true(c.min_cleanable_dirty_ratio == 0.5);
	assert_int_equal(c.delete_retention_ms, 86400000);
	assert_int_equal(c.min_compaction_lag_ms, 0);
	assert_true(c.max_compaction_lag_ms == INT64_MAX);
	assert_int_equal(c.retention_ms, 604800000);
	assert_int_equal(c.retention_bytes, -1);
	assert_int_equal(c.max_message_bytes, 1048588);
	assert_int_equal(c.compression, TFS_CODEC_NONE);
	assert_int_equal(c.zstd_level, 3);
	assert_int_equal(c.timestamp_type, TFS_TS_CREATE_TIME);
	assert_int_equal(c.segment_index_bytes, 10485760);
	assert_int_equal(c.index_interval_bytes, 4096);
	assert_int_equal(c.flush_ms, 1000);

	expect_get(&c, "cleanup.policy", "compact");
	expect_get(&c, "segment.bytes", "104857600");
	expect_get(&c, "segment.ms", "604800000");
	expect_get(&c, "min.cleanable.dirty.ratio", "0.5");
	expect_get(&c, "delete.retention.ms", "86400000");
	expect_get(&c, "min.compaction.lag.ms", "0");
	expect_get(&c, "max.compaction.lag.ms", "9223372036854775807");
	expect_get(&c, "retention.ms", "604800000");
	expect_get(&c, "retention.bytes", "-1");
	expect_get(&c, "max.message.bytes", "1048588");
	expect_get(&c, "compression.type", "none");
	expect_get(&c, "compression.zstd.level", "3");
	expect_get(&c, "message.timestamp.type", "CreateTime");
	expect_get(&c, "segment.index.bytes", "10485760");
	expect_get(&c, "index.interval.bytes", "4096");
	expect_get(&c, "flush.ms", "1000");
	expect_get(&c, "producer.id.expiration.ms", "86400000");

	size_t n = 0;
	for (const char *const *p = tfs_topic_config_names(); *p; p++, n++)
		assert_true(tfs_topic_config_is_default(&c, *p));
	assert_int_equal(n, N_TOPIC_NAMES);
}

static void test_cleaner_defaults(void **state)
{
	(void)state;
	struct tfs_cleaner_config c;
	tfs_cleaner_config_defaults(&c);

	assert_int_equal(c.threads, 1);
	assert_int_equal(c.dedupe_buffer_size, 134217728);
	assert_int_equal(c.io_buffer_size, 524288);
	assert_true(c.io_buffer_load_factor == 0.9);
	assert_true(c.io_max_bytes_per_second == DBL_MAX);   /* Kafka's Double.MAX_VALUE */
	assert_int_equal(c.backoff_ms, 15000);

	size_t n = 0;
	for (const char *const *p = tfs_cleaner_config_names(); *p; p++, n++) {
		/* each name is known: setting it to garbage is -EINVAL for the value */
		assert_int_equal(tfs_cleaner_config_set(&c, *p, "x"), -EINVAL);
	}
	assert_int_equal(n, N_CLEANER_NAMES);
}

/* ---- boundaries --------------------------------------------------------------------- */

struct bound {
	const char *name;
	const char *lo_ok, *lo_bad, *hi_ok, *hi_bad;
};

#define I64MAX "9223372036854775807"
#define I64OVF "9223372036854775808"
#define I32MAX "2147483647"
#define I32OVF "2147483648"

static const struct bound topic_bounds[] = {
	{ "segment.bytes", "14", "13", I32MAX, I32OVF },
	{ "segment.ms", "1", "0", I64MAX, I64OVF },
	{ "min.cleanable.dirty.ratio", "0", "-0.0001", "1", "1.0000001" },
	{ "delete.retention.ms", "0", "-1", I64MAX, I64OVF },
	{ "min.compaction.lag.ms", "0", "-1", I64MAX, I64OVF },
	{ "max.compaction.lag.ms", "1", "0", I64MAX, I64OVF },
	{ "retention.ms", "-1", "-2", I64MAX, I64OVF },
	{ "retention.bytes", "-1", "-2", I64MAX, I64OVF },
	{ "max.message.bytes", "0", "-1", I32MAX, I32OVF },
	{ "segment.index.bytes", "8", "7", I32MAX, I32OVF },
	{ "index.interval.bytes", "0", "-1", I32MAX, I32OVF },
	{ "flush.ms", "0", "-1", I64MAX, I64OVF },
};

static const struct bound cleaner_bounds[] = {
	{ "log.cleaner.threads", "0", "-1", "64", "65" },
	{ "log.cleaner.dedupe.buffer.size", "1048576", "1048575", I64MAX, I64OVF },
	{ "log.cleaner.io.buffer.size", "4096", "4095", I32MAX, I32OVF },
	{ "log.cleaner.io.buffer.load.factor", "1e-9", "0", "1", "1.0000001" },
	{ "log.cleaner.io.max.bytes.per.second", "1e-9", "0", "1.7976931348623157e+308",
	  "1.8e308" },
	{ "log.cleaner.backoff.ms", "0", "-1", I64MAX, I64OVF },
};

static void test_topic_boundaries(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(topic_bounds) / sizeof(topic_bounds[0]); i++) {
		const struct bound *b = &topic_bounds[i];
		struct tfs_topic_config c;
		tfs_topic_config_defaults(&c);

		assert_int_equal(tfs_topic_config_set(&c, b->name, b->lo_ok), 0);
		expect_get(&c, b->name, b->lo_ok);
		expect_topic_reject(&c, b->name, b->lo_bad);
		expect_get(&c, b->name, b->lo_ok);
		assert_int_equal(tfs_topic_config_set(&c, b->name, b->hi_ok), 0);
		expect_get(&c, b->name, b->hi_ok);
		expect_topic_reject(&c, b->name, b->hi_bad);
		expect_get(&c, b->name, b->hi_ok);
	}
	/* The ones that are not obvious from the table. */
	struct tfs_topic_config c;
	tfs_topic_config_defaults(&c);
	assert_int_equal(tfs_topic_config_set(&c, "retention.ms", "-1"), 0);
	assert_int_equal(c.retention_ms, -1);
	assert_int_equal(tfs_topic_config_set(&c, "max.message.bytes", I32MAX), 0);
	assert_int_equal(c.max_message_bytes, INT32_MAX);
	assert_int_equal(tfs_topic_config_set(&c, "segment.bytes", "+14"), 0);   /* as Long.parseLong */
	assert_int_equal(c.segment_bytes, 14);
}

static void test_cleaner_boundaries(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cleaner_bounds) / sizeof(cleaner_bounds[0]); i++) {
		const struct bound *b = &cleaner_bounds[i];
		struct tfs_cleaner_config c;
		tfs_cleaner_config_defaults(&c);

		assert_int_equal(tfs_cleaner_config_set(&c, b->name, b->lo_ok), 0);
		expect_cleaner_reject(&c, b->name, b->lo_bad);
		assert_int_equal(tfs_cleaner_config_set(&c, b->name, b->hi_ok), 0);
		expect_cleaner_reject(&c, b->name, b->hi_bad);
	}
	struct tfs_cleaner_config c;
	tfs_cleaner_config_defaults(&c);
	assert_int_equal(tfs_cleaner_config_set(&c, "log.cleaner.threads", "8"), 0);
	assert_int_equal(c.threads, 8);
	assert_int_equal(tfs_cleaner_config_set(&c, "log.cleaner.dedupe.buffer.size", "268435456"), 0);
	assert_int_equal(c.dedupe_buffer_size, 268435456);
	assert_int_equal(tfs_cleaner_config_set(&c, "log.cleaner.io.buffer.size", "1048576"), 0);
	assert_int_equal(c.io_buffer_size, 1048576);
	assert_int_equal(tfs_cleaner_config_set(&c, "log.cleaner.io.buffer.load.factor", "0.75"), 0);
	assert_true(c.io_buffer_load_factor == 0.75);
	assert_int_equal(tfs_cleaner_config_set(&c, "log.cleaner.io.max.bytes.per.second",
	                                        "1048576.5"), 0);
	assert_true(c.io_max_bytes_per_second == 1048576.5);
	assert_int_equal(tfs_cleaner_config_set(&c, "log.cleaner.backoff.ms", "250"), 0);
	assert_int_equal(c.backoff_ms, 250);
	expect_cleaner_reject(&c, "log.cleaner.enable", "true");
	expect_cleaner_reject(&c, "segment.bytes", "1048576");   /* a topic name, not a cleaner one */
}

/* ---- garbage ------------------------------------------------------------------------ */

static void test_garbage_numbers(void **state)
{
	(void)state;
	static const char *const junk[] = {
		"", "12x", "1e999", "-", "+", " 12", "12 ", "12\n", "0x10", "1.5", "1,000",
		"99999999999999999999", "-99999999999999999999", "nan", "inf", "--1",
	};
	static const char *const djunk[] = {
		"", "12x", "1e999", "-1e999", "-", "+", " 0.5", "0.5 ", "nan", "inf", "-inf",
		"0.5.5", "1/2", ".", "e1",
	};
	struct tfs_topic_config c;
	struct tfs_cleaner_config cc;
	non_default(&c);
	tfs_cleaner_config_defaults(&cc);

	for (size_t i = 0; i < sizeof(topic_bounds) / sizeof(topic_bounds[0]); i++) {
		const char *name = topic_bounds[i].name;
		bool is_double = strcmp(name, "min.cleanable.dirty.ratio") == 0;
		const char *const *list = is_double ? djunk : junk;
		size_t n = is_double ? sizeof(djunk) / sizeof(djunk[0]) : sizeof(junk) / sizeof(junk[0]);
		for (size_t j = 0; j < n; j++)
			expect_topic_reject(&c, name, list[j]);
	}
	for (size_t i = 0; i < sizeof(cleaner_bounds) / sizeof(cleaner_bounds[0]); i++) {
		const char *name = cleaner_bounds[i].name;
		bool is_double = strstr(name, "factor") || strstr(name, "per.second");
		const char *const *list = is_double ? djunk : junk;
		size_t n = is_double ? sizeof(djunk) / sizeof(djunk[0]) : sizeof(junk) / sizeof(junk[0]);
		for (size_t j = 0; j < n; j++)
			expect_cleaner_reject(&cc, name, list[j]);
	}
	/* Unknown names, including near misses and a cleaner name on a topic. */
	expect_topic_reject(&c, "segment.byte", "1048576");
	expect_topic_reject(&c, "Segment.bytes", "1048576");
	expect_topic_reject(&c, "", "1");
	expect_topic_reject(&c, "log.cleaner.threads", "1");
	expect_topic_reject(&c, "topicfs.partitions", "3");
	char buf[BUF_CAP];
	assert_int_equal(tfs_topic_config_get(&c, "segment.byte", buf, sizeof(buf)), -EINVAL);
}

static void test_cleanup_policy(void **state)
{
	(void)state;
	static const struct { const char *in; unsigned bits; const char *out; } ok[] = {
		{ "delete", TFS_POLICY_DELETE, "delete" },
		{ "compact", TFS_POLICY_COMPACT, "compact" },
		{ "compact,delete", TFS_POLICY_COMPACT | TFS_POLICY_DELETE, "compact,delete" },
		{ "delete,compact", TFS_POLICY_COMPACT | TFS_POLICY_DELETE, "compact,delete" },
		{ "compact , delete", TFS_POLICY_COMPACT | TFS_POLICY_DELETE, "compact,delete" },
		{ " delete,\tcompact ", TFS_POLICY_COMPACT | TFS_POLICY_DELETE, "compact,delete" },
	};
	static const char *const bad[] = {
		"", " ", ",", "compact,", ",delete", "compact,,delete", "compact,compact",
		"delete,delete", "Compact", "DELETE", "compact;delete", "compact delete",
		"compact,delete,compact", "none", "compactdelete",
	};
	struct tfs_topic_config c;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		tfs_topic_config_defaults(&c);
		assert_int_equal(tfs_topic_config_set(&c, "cleanup.policy", ok[i].in), 0);
		assert_int_equal(c.cleanup_policy, ok[i].bits);
		expect_get(&c, "cleanup.policy", ok[i].out);
	}
	tfs_topic_config_defaults(&c);
	assert_int_equal(tfs_topic_config_set(&c, "cleanup.policy", "delete"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_topic_reject(&c, "cleanup.policy", bad[i]);
}

static void test_compression_and_timestamp(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config c;
	tfs_topic_config_defaults(&c);

	assert_int_equal(tfs_topic_config_set(&c, "compression.type", "zstd"), 0);
	assert_int_equal(c.compression, TFS_CODEC_ZSTD);
	expect_get(&c, "compression.type", "zstd");
	assert_int_equal(tfs_topic_config_set(&c, "compression.type", "uncompressed"), 0);
	assert_int_equal(c.compression, TFS_CODEC_NONE);
	expect_get(&c, "compression.type", "none");
	assert_int_equal(tfs_topic_config_set(&c, "compression.type", "zstd"), 0);
	assert_int_equal(tfs_topic_config_set(&c, "compression.type", "producer"), 0);
	assert_int_equal(c.compression, TFS_CODEC_NONE);   /* documented: producer -> none */
	assert_int_equal(tfs_topic_config_set(&c, "compression.type", "none"), 0);
	assert_int_equal(c.compression, TFS_CODEC_NONE);

	/* Kafka's other three codecs, by their names. */
	static const struct { const char *name; int codec; } kafka_codecs[] = {
		{ "gzip", TFS_CODEC_GZIP }, { "snappy", TFS_CODEC_SNAPPY }, { "lz4", TFS_CODEC_LZ4 },
	};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(tfs_topic_config_set(&c, "compression.type", kafka_codecs[i].name), 0);
		assert_int_equal(c.compression, kafka_codecs[i].codec);
		expect_get(&c, "compression.type", kafka_codecs[i].name);
	}
	log_reset(f);
	expect_topic_reject(&c, "compression.type", "lz5");
	expect_get(&c, "compression.type", "lz4");        /* a refusal changes nothing */
	expect_topic_reject(&c, "compression.type", "ZSTD");
	expect_topic_reject(&c, "compression.type", "");
	expect_topic_reject(&c, "compression.type", "zstd ");
	expect_topic_reject(&c, "compression.type", "brotli");

	assert_int_equal(tfs_topic_config_set(&c, "message.timestamp.type", "LogAppendTime"), 0);
	assert_int_equal(c.timestamp_type, TFS_TS_LOG_APPEND_TIME);
	expect_get(&c, "message.timestamp.type", "LogAppendTime");
	assert_int_equal(tfs_topic_config_set(&c, "message.timestamp.type", "CreateTime"), 0);
	assert_int_equal(c.timestamp_type, TFS_TS_CREATE_TIME);
	expect_topic_reject(&c, "message.timestamp.type", "createtime");
	expect_topic_reject(&c, "message.timestamp.type", "");
	expect_topic_reject(&c, "message.timestamp.type", "LogAppendTime ");
}

/* compression.zstd.level (KIP-390): default 3, any level the linked libzstd takes
 * (ZSTD_minCLevel()..ZSTD_maxCLevel(), as Kafka asks zstd-jni), 0 included
 * (zstd's own default); anything else is refused and changes nothing. */
static void test_zstd_level(void **state)
{
	(void)state;
	static const char *const junk[] = {
		"", " 1", "1 ", "1.0", "3x", "fast", "0x3", "--1", "99999999999999999999",
	};
	struct tfs_topic_config c;
	char min[BUF_CAP], max[BUF_CAP], below[BUF_CAP], above[BUF_CAP];

	snprintf(min, sizeof(min), "%d", ZSTD_minCLevel());
	snprintf(max, sizeof(max), "%d", ZSTD_maxCLevel());
	snprintf(below, sizeof(below), "%d", ZSTD_minCLevel() - 1);
	snprintf(above, sizeof(above), "%d", ZSTD_maxCLevel() + 1);
	assert_true(ZSTD_minCLevel() < 0);   /* the negative (fast) levels exist */

	tfs_topic_config_defaults(&c);
	assert_int_equal(c.zstd_level, 3);
	assert_true(tfs_topic_config_is_default(&c, "compression.zstd.level"));
	static const struct { const char *in; int level; } ok[] = {
		{ "1", 1 }, { "-1", -1 }, { "0", 0 }, { "19", 19 }, { "+7", 7 }, { "-50", -50 },
		{ "3", 3 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char want[BUF_CAP];
		assert_int_equal(tfs_topic_config_set(&c, "compression.zstd.level", ok[i].in), 0);
		assert_int_equal(c.zstd_level, ok[i].level);
		snprintf(want, sizeof(want), "%d", ok[i].level);
		expect_get(&c, "compression.zstd.level", want);
		assert_int_equal(tfs_topic_config_is_default(&c, "compression.zstd.level"),
		                 ok[i].level == 3);
	}
	assert_int_equal(tfs_topic_config_set(&c, "compression.zstd.level", min), 0);
	expect_get(&c, "compression.zstd.level", min);
	expect_topic_reject(&c, "compression.zstd.level", below);
	expect_get(&c, "compression.zstd.level", min);
	assert_int_equal(tfs_topic_config_set(&c, "compression.zstd.level", max), 0);
	expect_get(&c, "compression.zstd.level", max);
	expect_topic_reject(&c, "compression.zstd.level", above);
	expect_get(&c, "compression.zstd.level", max);
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
		expect_topic_reject(&c, "compression.zstd.level", junk[i]);
	expect_get(&c, "compression.zstd.level", max);

	/* The level is its own setting: the codec does not move it, nor it the codec. */
	assert_int_equal(tfs_topic_config_set(&c, "compression.type", "zstd"), 0);
	assert_int_equal(c.zstd_level, ZSTD_maxCLevel());
	assert_int_equal(tfs_topic_config_set(&c, "compression.zstd.level", "1"), 0);
	assert_int_equal(c.compression, TFS_CODEC_ZSTD);
}

/* ---- get ---------------------------------------------------------------------------- */

static void test_get_set_round_trip(void **state)
{
	(void)state;
	struct tfs_topic_config a, b;
	char buf[BUF_CAP];

	/* From the defaults and from a config with every value changed. */
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0)
			tfs_topic_config_defaults(&a);
		else
			non_default(&a);
		tfs_topic_config_defaults(&b);
		if (pass == 0)
			non_default(&b);   /* so that every set below changes something */
		for (const char *const *n = tfs_topic_config_names(); *n; n++) {
			assert_int_equal(tfs_topic_config_get(&a, *n, buf, sizeof(buf)), 0);
			assert_int_equal(tfs_topic_config_set(&b, *n, buf), 0);
		}
		expect_same_config(&a, &b);
		assert_true(a.min_cleanable_dirty_ratio == b.min_cleanable_dirty_ratio);
	}

	/* Doubles come back exactly, in the shortest form. */
	static const double ratios[] = { 0.1, 1.0 / 3.0, 0.30000000000000004, 1e-300, 0.0, 1.0 };
	for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
		tfs_topic_config_defaults(&a);
		a.min_cleanable_dirty_ratio = ratios[i];
		assert_int_equal(tfs_topic_config_get(&a, "min.cleanable.dirty.ratio", buf, sizeof(buf)), 0);
		assert_int_equal(tfs_topic_config_set(&b, "min.cleanable.dirty.ratio", buf), 0);
		assert_true(b.min_cleanable_dirty_ratio == ratios[i]);
	}
	tfs_topic_config_defaults(&a);
	a.min_cleanable_dirty_ratio = 0.1;
	expect_get(&a, "min.cleanable.dirty.ratio", "0.1");
}

static void test_get_buffer_too_small(void **state)
{
	(void)state;
	struct tfs_topic_config c;
	char buf[BUF_CAP];
	tfs_topic_config_defaults(&c);

	/* "9223372036854775807" needs 20 bytes with its NUL. */
	assert_int_equal(tfs_topic_config_get(&c, "max.compaction.lag.ms", buf, 19), -ERANGE);
	assert_int_equal(tfs_topic_config_get(&c, "max.compaction.lag.ms", buf, 20), 0);
	assert_string_equal(buf, I64MAX);
	assert_int_equal(tfs_topic_config_get(&c, "cleanup.policy", buf, 7), -ERANGE);
	assert_int_equal(tfs_topic_config_get(&c, "cleanup.policy", buf, 8), 0);
	assert_int_equal(tfs_topic_config_get(&c, "cleanup.policy", buf, 0), -ERANGE);
}

static void test_is_default(void **state)
{
	(void)state;
	struct tfs_topic_config c;
	tfs_topic_config_defaults(&c);

	assert_int_equal(tfs_topic_config_set(&c, "segment.bytes", "1048576"), 0);
	assert_false(tfs_topic_config_is_default(&c, "segment.bytes"));
	assert_true(tfs_topic_config_is_default(&c, "segment.ms"));
	assert_int_equal(tfs_topic_config_set(&c, "segment.bytes", "104857600"), 0);
	assert_true(tfs_topic_config_is_default(&c, "segment.bytes"));
	assert_int_equal(tfs_topic_config_set(&c, "cleanup.policy", "delete"), 0);
	assert_false(tfs_topic_config_is_default(&c, "cleanup.policy"));
	assert_false(tfs_topic_config_is_default(&c, "no.such.name"));
}

/* ---- the file ----------------------------------------------------------------------- */

static void test_save_load_round_trip(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config a, b;
	struct tfs_topic_meta ma = some_meta, mb = { 0, 0, 0, 1, false };

	non_default(&a);
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &ma), 0);
	tfs_topic_config_defaults(&b);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
	expect_same_config(&a, &b);
	expect_same_meta(&ma, &mb);

	/* The file is for people too: Kafka names, one per line, octal mode. */
	uint8_t *text = NULL;
	long n = t_read_file(f->path, &text);
	assert_true(n > 0);
	char *s = strndup((const char *)text, (size_t)n);
	assert_non_null(strstr(s, "\ncleanup.policy=compact,delete\n"));
	assert_non_null(strstr(s, "\nmin.cleanable.dirty.ratio=0.1\n"));
	assert_non_null(strstr(s, "\ntopicfs.mode=0750\n"));
	assert_non_null(strstr(s, "\ntopicfs.partitions=12\n"));
	free(s);
	free(text);

	/* Saving the defaults over it round-trips too (the replace really replaces). */
	struct tfs_topic_meta m0 = { 0, 0, 0644, 1, false };
	tfs_topic_config_defaults(&a);
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &m0), 0);
	non_default(&b);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
	expect_same_config(&a, &b);
	expect_same_meta(&m0, &mb);

	/* A relative path (no directory part) works as well. */
	char *cwd = getcwd(NULL, 0);
	assert_non_null(cwd);
	assert_int_equal(chdir(f->dir), 0);
	assert_int_equal(tfs_topic_config_save(f->io, "rel.config", &a, &ma), 0);
	assert_int_equal(tfs_topic_config_load("rel.config", &b, &mb), 0);
	assert_int_equal(chdir(cwd), 0);
	free(cwd);
	expect_same_meta(&ma, &mb);
}

/* compression.zstd.level survives save and load, negative levels included; a file
 * written before the setting existed loads with the default; an out-of-range level
 * in a file fails the load and changes nothing. */
static void test_zstd_level_persisted(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config a, b, before;
	struct tfs_topic_meta m = some_meta, mb = some_meta;
	static const char *const levels[] = { "1", "-5", "19", "0" };

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		char *want = NULL;
		tfs_topic_config_defaults(&a);
		assert_int_equal(tfs_topic_config_set(&a, "compression.type", "zstd"), 0);
		assert_int_equal(tfs_topic_config_set(&a, "compression.zstd.level", levels[i]), 0);
		assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &m), 0);
		tfs_topic_config_defaults(&b);
		assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
		assert_int_equal(b.zstd_level, a.zstd_level);
		assert_int_equal(b.compression, TFS_CODEC_ZSTD);
		expect_same_config(&a, &b);

		uint8_t *text = NULL;
		long n = t_read_file(f->path, &text);
		assert_true(n > 0);
		char *s = strndup((const char *)text, (size_t)n);
		assert_true(asprintf(&want, "\ncompression.zstd.level=%s\n", levels[i]) > 0);
		assert_non_null(strstr(s, want));
		free(want);
		free(s);
		free(text);
	}

	/* A file from before the setting: the (mount-wide) default stays. */
	static const char old[] = "compression.type=zstd\ntopicfs.partitions=2\n";
	assert_int_equal(t_write_file(f->path, old, sizeof(old) - 1), 0);
	tfs_topic_config_defaults(&b);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
	assert_int_equal(b.compression, TFS_CODEC_ZSTD);
	assert_int_equal(b.zstd_level, 3);

	/* Out of range in the file: refused, nothing changed. */
	char bad[BUF_CAP * 2];
	snprintf(bad, sizeof(bad), "compression.type=none\ncompression.zstd.level=%d\n",
	         ZSTD_maxCLevel() + 1);
	assert_int_equal(t_write_file(f->path, bad, strlen(bad)), 0);
	non_default(&b);
	memcpy(&before, &b, sizeof(b));
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), -EINVAL);
	assert_memory_equal(&before, &b, sizeof(b));

	/* save refuses a level set by hand that set() would refuse */
	tfs_topic_config_defaults(&a);
	a.zstd_level = ZSTD_maxCLevel() + 1;
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &m), -EINVAL);
}

/* Names the file leaves out keep the caller's (mount-wide) defaults; comments, blank
 * lines, blanks around '=' and CRLF are fine; a repeated name's last value wins. */
static void test_load_partial_file(void **state)
{
	struct fixture *f = *state;
	static const char text[] =
		"# written by hand\r\n"
		"\n"
		"  ! also a comment\n"
		"cleanup.policy = compact, delete\r\n"
		"\tsegment.ms=1000\n"
		"segment.ms=2000\n"
		"topicfs.partitions=3\n"
		"topicfs.mode=755";   /* no final newline */
	struct tfs_topic_config c;
	struct tfs_topic_meta m = some_meta;

	assert_int_equal(t_write_file(f->path, text, strlen(text)), 0);
	tfs_topic_config_defaults(&c);
	c.segment_bytes = 1073741824;   /* a mount-wide default of 1 GiB */
	assert_int_equal(tfs_topic_config_load(f->path, &c, &m), 0);
	assert_int_equal(c.cleanup_policy, TFS_POLICY_COMPACT | TFS_POLICY_DELETE);
	assert_int_equal(c.segment_ms, 2000);
	assert_int_equal(c.segment_bytes, 1073741824);
	assert_int_equal(c.retention_ms, 604800000);
	assert_int_equal(m.partitions, 3);
	assert_int_equal(m.mode, 0755);
	assert_int_equal(m.uid, some_meta.uid);
	assert_int_equal(m.gid, some_meta.gid);

	/* An empty file is a valid file that changes nothing. */
	assert_int_equal(t_write_file(f->path, "", 0), 0);
	assert_int_equal(tfs_topic_config_load(f->path, &c, &m), 0);
	assert_int_equal(c.segment_ms, 2000);
}

static void test_load_malformed(void **state)
{
	struct fixture *f = *state;
	static const struct { const char *text; size_t len; const char *where; } bad[] = {
#define BAD(s, line) { s, sizeof(s) - 1, line }
		BAD("segment.bytes=1048576\nno.such.name=1\n", " line 2:"),
		BAD("segment.bytes=13\n", " line 1:"),
		BAD("# c\nsegment.bytes=12x\n", " line 2:"),
		BAD("\n\nsegment.bytes\n", " line 3:"),
		BAD("compression.type=brotli\n", " line 1:"),
		BAD("cleanup.policy=compact,\n", " line 1:"),
		BAD("min.cleanable.dirty.ratio=nan\n", " line 1:"),
		BAD("retention.ms=-2\n", " line 1:"),
		BAD("topicfs.mode=0999\n", " line 1:"),
		BAD("topicfs.mode=017777\n", " line 1:"),
		BAD("topicfs.partitions=0\n", " line 1:"),
		BAD("topicfs.partitions=-3\n", " line 1:"),
		BAD("topicfs.uid=4294967295\n", " line 1:"),
		BAD("topicfs.gid=12a\n", " line 1:"),
		BAD("topicfs.owner=root\n", " line 1:"),
		BAD("=5\n", " line 1:"),
		BAD("segment.ms=5\nsegment.ms=0\n", " line 2:"),
		BAD("segment.ms=5\0\n", ""),
#undef BAD
	};
	struct tfs_topic_config c, before_c;
	struct tfs_topic_meta m = some_meta, before_m;

	non_default(&c);
	memcpy(&before_c, &c, sizeof(c));
	memcpy(&before_m, &m, sizeof(m));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		log_reset(f);
		assert_int_equal(t_write_file(f->path, bad[i].text, bad[i].len), 0);
		int rc = tfs_topic_config_load(f->path, &c, &m);
		if (rc != -EINVAL)
			fail_msg("file %zu gave %d, want -EINVAL", i, rc);
		assert_memory_equal(&before_c, &c, sizeof(c));
		assert_memory_equal(&before_m, &m, sizeof(m));
		/* one log line naming the file and the line */
		char *log = log_text(f);
		char *want = NULL;
		assert_true(asprintf(&want, "%s%s", f->path, bad[i].where) > 0);
		if (!strstr(log, want))
			fail_msg("file %zu: log \"%s\" does not name \"%s\"", i, log, want);
		assert_non_null(strchr(log, '\n'));
		assert_null(strchr(strchr(log, '\n') + 1, '\n'));
		free(want);
		free(log);
	}
}

static void test_load_missing(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config c, before_c;
	struct tfs_topic_meta m = some_meta, before_m;

	non_default(&c);
	memcpy(&before_c, &c, sizeof(c));
	memcpy(&before_m, &m, sizeof(m));
	assert_int_equal(tfs_topic_config_load(f->path, &c, &m), -ENOENT);
	assert_memory_equal(&before_c, &c, sizeof(c));
	assert_memory_equal(&before_m, &m, sizeof(m));
}

/* A crash inside tfs_file_replace can leave "<name>.tmp": load never reads it and the
 * next save overwrites it. */
static void test_stale_tmp_ignored(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config a, b;
	struct tfs_topic_meta m = some_meta, mb = { 0, 0, 0, 1, false };
	static const char junk[] = "segment.bytes=garbage\nhalf a li";
	char *tmp = NULL;

	assert_true(asprintf(&tmp, "%s.tmp", f->path) > 0);

	/* Only a .tmp: the config does not exist. */
	assert_int_equal(t_write_file(tmp, junk, sizeof(junk) - 1), 0);
	tfs_topic_config_defaults(&b);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), -ENOENT);

	/* The real file beside a stale .tmp. */
	non_default(&a);
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &m), 0);
	assert_true(t_file_size(tmp) < 0);   /* the save consumed it */
	assert_int_equal(t_write_file(tmp, junk, sizeof(junk) - 1), 0);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
	expect_same_config(&a, &b);
	expect_same_meta(&m, &mb);

	/* The next save replaces both. */
	assert_int_equal(tfs_topic_config_set(&a, "segment.ms", "42"), 0);
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &m), 0);
	assert_true(t_file_size(tmp) < 0);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
	assert_int_equal(b.segment_ms, 42);
	free(tmp);
}

/* save refuses what load would refuse, and writes nothing then. */
static void test_save_rejects_invalid(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config c;
	struct tfs_topic_meta m = some_meta;

	tfs_topic_config_defaults(&c);
	c.segment_bytes = 5;
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &c, &m), -EINVAL);
	tfs_topic_config_defaults(&c);
	c.compression = TFS_CODEC_ZSTD + 1;   /* no such codec */
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &c, &m), -EINVAL);
	tfs_topic_config_defaults(&c);
	c.cleanup_policy = 0;
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &c, &m), -EINVAL);
	tfs_topic_config_defaults(&c);
	m.partitions = 0;
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &c, &m), -EINVAL);
	m = some_meta;
	m.mode = 0100644;   /* file-type bits are not permission bits */
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &c, &m), -EINVAL);
	assert_true(t_file_size(f->path) < 0);

	/* A directory that does not exist is the directory's errno. */
	char *p = NULL;
	assert_true(asprintf(&p, "%s/nope/users.config", f->dir) > 0);
	assert_int_equal(tfs_topic_config_save(f->io, p, &c, &some_meta), -ENOENT);
	free(p);
}

/* An I/O failure during save leaves the previous file whole. */
static void test_save_failure_keeps_old_file(void **state)
{
	struct fixture *f = *state;
	struct tfs_topic_config a, b;
	struct tfs_topic_meta m = some_meta, mb = some_meta;

	tfs_topic_config_defaults(&a);
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &a, &m), 0);
	non_default(&b);
	assert_int_equal(tfs_io_set_fault(f->io, "rename:1:EIO"), 0);
	assert_int_equal(tfs_topic_config_save(f->io, f->path, &b, &m), -EIO);
	assert_int_equal(tfs_io_set_fault(f->io, NULL), 0);
	non_default(&b);
	assert_int_equal(tfs_topic_config_load(f->path, &b, &mb), 0);
	expect_same_config(&a, &b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topic_defaults),
		cmocka_unit_test(test_cleaner_defaults),
		cmocka_unit_test(test_topic_boundaries),
		cmocka_unit_test(test_cleaner_boundaries),
		cmocka_unit_test(test_garbage_numbers),
		cmocka_unit_test(test_cleanup_policy),
		cmocka_unit_test_setup_teardown(test_compression_and_timestamp, setup, teardown),
		cmocka_unit_test(test_zstd_level),
		cmocka_unit_test(test_get_set_round_trip),
		cmocka_unit_test(test_get_buffer_too_small),
		cmocka_unit_test(test_is_default),
		cmocka_unit_test_setup_teardown(test_save_load_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zstd_level_persisted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_partial_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_tmp_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_rejects_invalid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_failure_keeps_old_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
