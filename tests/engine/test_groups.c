/* test_groups.c - consumer groups' offsets in __consumer_offsets: Kafka's bytes,
 * Kafka's placement, commit/fetch/delete surviving a reopen and a crash, the
 * refusals (members, generation, bad input, the internal topic) and expiry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/groups/groups.h"
#include "engine/groups/groups_codec.h"
#include "io/log.h"
#include "tests/t_util.h"

#define NPARTS 5              /* __consumer_offsets partitions in these tests */
#define RETENTION_MS 60000

struct fx {
	char *dir;
	struct tfs_engine_config cfg;
	struct tfs_engine *e;
	struct tfs_groups *g;
};

static void open_engine(struct fx *f)
{
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), 0);
	f->g = tfs_engine_groups(f->e);
	assert_non_null(f->g);
}

static void reopen(struct fx *f)
{
	tfs_engine_close(f->e);
	open_engine(f);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tfs_log_set_level(TFS_LOG_ERROR);
	f->dir = t_mkdtemp("groups");
	tfs_engine_config_defaults(&f->cfg);
	f->cfg.data_dir = f->dir;
	f->cfg.io_kind = tfs_io_kind_from_env();
	f->cfg.cleaner.threads = 0;
	f->cfg.groups.partitions = NPARTS;
	f->cfg.groups.retention_ms = RETENTION_MS;
	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, "t", 2, 0, 0, 0755), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	tfs_engine_close(f->e);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static int commit1(struct fx *f, const char *group, int32_t gen, const char *topic, int32_t p,
                   tfs_offset_t off, int64_t ms)
{
	struct tfs_group_commit c = { .topic = topic, .partition = p, .offset = off,
	                              .leader_epoch = -1, .metadata = tfs_slice_make("", 0) };
	return tfs_groups_commit(f->g, group, gen, &c, 1, ms);
}

static tfs_offset_t fetched(struct fx *f, const char *group, const char *topic, int32_t p)
{
	struct tfs_group_offset o;
	tfs_offset_t off;
	int rc = tfs_groups_fetch(f->g, group, topic, p, &o);
	if (rc == -ENOENT)
		return -1;
	assert_int_equal(rc, 0);
	off = o.offset;
	tfs_group_offset_release(&o);
	return off;
}

/* Records in __consumer_offsets partition p (its log end: nothing is cleaned here). */
static tfs_offset_t records_in(struct fx *f, int32_t p)
{
	struct tfs_topic *t = tfs_engine_topic_get(f->e, TFS_GROUPS_TOPIC);
	struct tfs_plog_stats st = { 0 };
	if (!t)
		return 0;
	tfs_plog_stats(tfs_topic_partition(t, p), &st);
	tfs_topic_unref(t);
	return st.log_end_offset;
}

static int32_t part_of(struct fx *f, const char *group)
{
	int32_t p = -1;
	assert_int_equal(tfs_groups_partition_of(f->g, group, &p), 0);
	return p;
}

static size_t group_count(struct fx *f)
{
	char **names;
	size_t n;
	assert_int_equal(tfs_groups_list(f->g, &names, &n), 0);
	free(names);
	return n;
}

/* ---- bytes ---- */

static void assert_bytes(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len)
{
	assert_int_equal(got_len, want_len);
	assert_memory_equal(got, want, want_len);
}

/* The vectors below were worked out by hand from Kafka's message specs
 * (OffsetCommitKey v1, OffsetCommitValue v3, GroupMetadataKey v2,
 * GroupMetadataValue v3): group "g", topic "t", partition 0, offset 42, no
 * metadata, commit time 1700000000000 = 0x18bcfe56800. */
static const uint8_t KEY_G_T_0[] = { 0x00, 0x01, 0x00, 0x01, 'g', 0x00, 0x01, 't',
                                     0x00, 0x00, 0x00, 0x00 };
static const uint8_t VALUE_42[] = { 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0xff, 0xff, 0xff, 0xff,
                                    0x00, 0x00, 0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00 };
static const uint8_t GROUP_KEY_G[] = { 0x00, 0x02, 0x00, 0x01, 'g' };
static const uint8_t GROUP_VALUE_EMPTY[] = {
	0x00, 0x03, 0x00, 0x08, 'c', 'o', 'n', 's', 'u', 'm', 'e', 'r', 0x00, 0x00, 0x00, 0x05,
	0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static void encodings_are_kafkas_bytes(void **state)
{
	uint8_t *p;
	size_t n;
	struct tfs_ggroup_value gv = { .protocol_type = tfs_slice_make("consumer", 8), .generation = 5,
	                               .protocol_null = true, .leader_null = true,
	                               .state_ms = 1700000000000LL };
	(void)state;

	assert_int_equal(tfs_gcodec_offset_key(tfs_slice_make("g", 1), tfs_slice_make("t", 1), 0, &p, &n), 0);
	assert_bytes(p, n, KEY_G_T_0, sizeof(KEY_G_T_0));
	free(p);
	assert_int_equal(tfs_gcodec_offset_value(42, -1, tfs_slice_make("", 0), 1700000000000LL, &p, &n), 0);
	assert_bytes(p, n, VALUE_42, sizeof(VALUE_42));
	free(p);
	assert_int_equal(tfs_gcodec_group_key(tfs_slice_make("g", 1), &p, &n), 0);
	assert_bytes(p, n, GROUP_KEY_G, sizeof(GROUP_KEY_G));
	free(p);
	assert_int_equal(tfs_gcodec_group_value(&gv, &p, &n), 0);
	assert_bytes(p, n, GROUP_VALUE_EMPTY, sizeof(GROUP_VALUE_EMPTY));
	free(p);
}

static void one_member_group_value_round_trips(void **state)
{
	struct tfs_gmember m = {
		.member_id = tfs_slice_make("c-1", 3), .instance_id_null = true,
		.client_id = tfs_slice_make("c", 1), .client_host = tfs_slice_make("/127.0.0.1", 10),
		.rebalance_timeout_ms = 300000, .session_timeout_ms = 45000,
		.subscription = tfs_slice_make("\x00\x01", 2), .assignment = tfs_slice_make("", 0),
	};
	struct tfs_ggroup_value v = { .protocol_type = tfs_slice_make("consumer", 8), .generation = 7,
	                              .protocol = tfs_slice_make("range", 5),
	                              .leader = tfs_slice_make("c-1", 3), .state_ms = 9,
	                              .member_count = 1, .members = &m }, back;
	uint8_t *p;
	size_t n;
	(void)state;

	assert_int_equal(tfs_gcodec_group_value(&v, &p, &n), 0);
	/* 2 + 10 + 4 + 7 + 5 + 8 + 4, then the member: 5 + 2 + 3 + 12 + 4 + 4 + 6 + 4 */
	assert_int_equal(n, 40 + 40);
	assert_int_equal(tfs_gcodec_group_value_decode(tfs_slice_make(p, n), &back), 0);
	assert_int_equal(back.generation, 7);
	assert_int_equal(back.member_count, 1);
	assert_false(back.protocol_null);
	assert_memory_equal(back.leader.p, "c-1", 3);
	assert_int_equal(back.state_ms, 9);
	/* every shorter prefix and one byte more are refused */
	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(tfs_gcodec_group_value_decode(tfs_slice_make(p, cut), &back), TFS_ECORRUPT);
	p = realloc(p, n + 1);
	p[n] = 0;
	assert_int_equal(tfs_gcodec_group_value_decode(tfs_slice_make(p, n + 1), &back), TFS_ECORRUPT);
	free(p);
}

static void decoding_reads_old_versions_and_refuses_bad_bytes(void **state)
{
	/* value v1: offset 7, metadata "m", commit 1, expire 2 */
	static const uint8_t v1[] = { 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 'm',
	                              0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2 };
	static const uint8_t key_v5[] = { 0, 5, 0, 1, 'g' };
	static const uint8_t key_neg[] = { 0x00, 0x01, 0xff, 0xfe, 'g', 0, 1, 't', 0, 0, 0, 0 };
	struct tfs_goffset_value ov;
	struct tfs_gkey k;
	(void)state;

	assert_int_equal(tfs_gcodec_offset_value_decode(tfs_slice_make(v1, sizeof(v1)), &ov), 0);
	assert_int_equal(ov.offset, 7);
	assert_int_equal(ov.leader_epoch, -1);
	assert_int_equal(ov.commit_ms, 1);
	assert_int_equal(ov.expire_ms, 2);
	assert_int_equal(ov.metadata.len, 1);
	assert_int_equal(tfs_gcodec_offset_value_decode(tfs_slice_make(VALUE_42, sizeof(VALUE_42)), &ov), 0);
	assert_int_equal(ov.offset, 42);
	assert_int_equal(ov.commit_ms, 1700000000000LL);
	assert_int_equal(ov.expire_ms, -1);
	assert_int_equal(tfs_gcodec_key_decode(tfs_slice_make(KEY_G_T_0, sizeof(KEY_G_T_0)), &k), 0);
	assert_int_equal(k.version, 1);
	assert_int_equal(k.group.len, 1);
	assert_int_equal(k.topic.p[0], 't');
	assert_int_equal(tfs_gcodec_key_decode(tfs_slice_make(GROUP_KEY_G, sizeof(GROUP_KEY_G)), &k), 0);
	assert_int_equal(k.version, TFS_GKEY_GROUP);
	assert_int_equal(tfs_gcodec_key_decode(tfs_slice_make(key_v5, sizeof(key_v5)), &k), TFS_EUNSUPPORTED);
	assert_int_equal(tfs_gcodec_key_decode(tfs_slice_make(key_neg, sizeof(key_neg)), &k), TFS_ECORRUPT);
	for (size_t cut = 0; cut < sizeof(KEY_G_T_0); cut++)
		assert_int_equal(tfs_gcodec_key_decode(tfs_slice_make(KEY_G_T_0, cut), &k), TFS_ECORRUPT);
	for (size_t cut = 0; cut < sizeof(VALUE_42); cut++)
		assert_int_equal(tfs_gcodec_offset_value_decode(tfs_slice_make(VALUE_42, cut), &ov),
		                 TFS_ECORRUPT);
}

/* Java's "g".hashCode() is 103, "my-group"'s -1906497762, and that of
 * "polygenelubricants" Integer.MIN_VALUE, whose Utils.abs is 0; a character
 * outside the BMP counts as its two UTF-16 units. */
static void groups_land_where_kafka_puts_them(void **state)
{
	int32_t p;
	(void)state;

	assert_int_equal(tfs_groups_partition_for("g", 50, &p), 0);
	assert_int_equal(p, 3);
	assert_int_equal(tfs_groups_partition_for("my-group", 50, &p), 0);
	assert_int_equal(p, 12);
	assert_int_equal(tfs_groups_partition_for("polygenelubricants", 50, &p), 0);
	assert_int_equal(p, 0);
	assert_int_equal(tfs_groups_partition_for("gr\xf0\x9f\x98\x80p", 50, &p), 0);
	assert_int_equal(p, 18);
	assert_int_equal(tfs_groups_partition_for("caf\xc3\xa9", 50, &p), 0);
	assert_int_equal(p, 21);
	assert_int_equal(tfs_groups_partition_for("caf\xc3", 50, &p), -EINVAL);      /* cut short */
	assert_int_equal(tfs_groups_partition_for("\xc0\xaf", 50, &p), -EINVAL);     /* overlong */
	assert_int_equal(tfs_groups_partition_for("\xed\xa0\x80", 50, &p), -EINVAL); /* surrogate */
	assert_int_equal(tfs_groups_partition_for("", 50, &p), -EINVAL);
}

/* ---- the store ---- */

static void commits_are_records_and_survive_a_reopen(void **state)
{
	struct fx *f = *state;
	struct tfs_group_commit two[2] = {
		{ .topic = "t", .partition = 0, .offset = 42, .leader_epoch = -1,
		  .metadata = tfs_slice_make("", 0) },
		{ .topic = "t", .partition = 1, .offset = 7, .leader_epoch = 3,
		  .metadata = tfs_slice_make("meta", 4) },
	};
	struct tfs_group_offset *v;
	struct tfs_plog_cursor *c;
	struct tfs_topic *t;
	struct tfs_record r;
	size_t n;

	assert_null(tfs_engine_topic_get(f->e, TFS_GROUPS_TOPIC));  /* made at the first write */
	assert_int_equal(tfs_groups_commit(f->g, "g", -1, two, 2, 1700000000000LL), 0);
	t = tfs_engine_topic_get(f->e, TFS_GROUPS_TOPIC);
	assert_non_null(t);
	assert_int_equal(tfs_topic_partition_count(t), NPARTS);
	assert_true(tfs_topic_internal(t));
	{
		struct tfs_topic_config cfg;
		tfs_topic_get_config(t, &cfg);
		assert_int_equal(cfg.cleanup_policy, TFS_POLICY_COMPACT);
		assert_int_equal(cfg.segment_bytes, TFS_GROUPS_SEGMENT_BYTES);
	}
	/* the first record is Kafka's bytes for g/t/0 = 42 */
	assert_int_equal(tfs_plog_cursor_open(tfs_topic_partition(t, part_of(f, "g")), 0, &c), 0);
	assert_int_equal(tfs_plog_cursor_next(c, &r, NULL), 1);
	assert_bytes(r.key.p, r.key.len, KEY_G_T_0, sizeof(KEY_G_T_0));
	assert_bytes(r.value.p, r.value.len, VALUE_42, sizeof(VALUE_42));
	tfs_plog_cursor_close(c);
	tfs_topic_unref(t);

	assert_int_equal(commit1(f, "g", -1, "t", 0, 43, -1), 0);      /* newer wins */
	for (int round = 0; round < 2; round++) {
		assert_int_equal(fetched(f, "g", "t", 0), 43);
		assert_int_equal(tfs_groups_offsets(f->g, "g", &v, &n), 0);
		assert_int_equal(n, 2);
		assert_string_equal(v[1].topic, "t");
		assert_int_equal(v[1].partition, 1);
		assert_int_equal(v[1].offset, 7);
		assert_int_equal(v[1].leader_epoch, 3);
		assert_int_equal(v[1].metadata_len, 4);
		assert_memory_equal(v[1].metadata, "meta", 4);
		assert_int_equal(v[1].commit_ms, 1700000000000LL);
		tfs_group_offsets_free(v, n);
		assert_int_equal(group_count(f), 1);
		reopen(f);
	}
	assert_int_equal(fetched(f, "g", "t", 5), -1);
	assert_int_equal(fetched(f, "nobody", "t", 0), -1);
	assert_int_equal(tfs_groups_offsets(f->g, "nobody", &v, &n), -ENOENT);
}

static void delete_tombstones_every_key_and_forgets_the_group(void **state)
{
	struct fx *f = *state;
	int32_t p = part_of(f, "g");
	struct tfs_group_info info;

	assert_int_equal(commit1(f, "g", -1, "t", 0, 1, -1), 0);
	assert_int_equal(commit1(f, "g", -1, "t", 1, 2, -1), 0);
	assert_int_equal(commit1(f, "other", -1, "t", 1, 5, -1), 0);
	assert_int_equal(tfs_groups_delete_offset(f->g, "g", "t", 1), 0);
	assert_int_equal(tfs_groups_delete_offset(f->g, "g", "t", 1), -ENOENT);
	assert_int_equal(fetched(f, "g", "t", 1), -1);
	assert_int_equal(fetched(f, "g", "t", 0), 1);
	{
		struct tfs_group_record rec = { .protocol_type = "consumer", .generation = 4 };
		assert_int_equal(tfs_groups_store_group(f->g, "g", &rec), 0);
	}
	tfs_offset_t before = records_in(f, p);
	assert_int_equal(tfs_groups_delete(f->g, "g"), 0);
	/* one tombstone for the offset left, one for the group record */
	assert_int_equal(records_in(f, p), before + 2);
	assert_int_equal(tfs_groups_info(f->g, "g", &info), -ENOENT);
	assert_int_equal(tfs_groups_delete(f->g, "g"), -ENOENT);
	reopen(f);
	assert_int_equal(tfs_groups_info(f->g, "g", &info), -ENOENT);
	assert_int_equal(fetched(f, "g", "t", 0), -1);
	assert_int_equal(fetched(f, "other", "t", 1), 5);
	assert_int_equal(group_count(f), 1);
}

static bool all_but_secret(const char *topic, void *arg)
{
	(*(int *)arg)++;
	return strcmp(topic, "secret") != 0;
}

/* A delete asked under a condition: one refused topic keeps every key; the
 * question is put for each offset the group holds at the moment it is deleted. */
static void a_refused_topic_keeps_the_whole_group(void **state)
{
	struct fx *f = *state;
	int32_t p = part_of(f, "g");
	int asked = 0;
	tfs_offset_t before;

	assert_int_equal(tfs_engine_topic_create(f->e, "secret", 1, 0, 0, 0700), 0);
	assert_int_equal(commit1(f, "g", -1, "t", 0, 1, -1), 0);
	assert_int_equal(commit1(f, "g", -1, "secret", 0, 2, -1), 0);
	before = records_in(f, p);
	assert_int_equal(tfs_groups_delete_if(f->g, "g", all_but_secret, &asked), -EACCES);
	assert_int_equal(asked, 1);                          /* "secret" sorts first */
	assert_int_equal(records_in(f, p), before);          /* nothing appended */
	assert_int_equal(fetched(f, "g", "t", 0), 1);
	assert_int_equal(fetched(f, "g", "secret", 0), 2);
	assert_int_equal(tfs_groups_delete_offset(f->g, "g", "secret", 0), 0);
	asked = 0;
	assert_int_equal(tfs_groups_delete_if(f->g, "g", all_but_secret, &asked), 0);
	assert_int_equal(asked, 1);
	assert_int_equal(fetched(f, "g", "t", 0), -1);
	assert_int_equal(tfs_groups_delete_if(f->g, "g", all_but_secret, &asked), -ENOENT);
}

static void members_refuse_simple_commits_and_deletes(void **state)
{
	struct fx *f = *state;
	struct tfs_group_info info;
	int32_t p = part_of(f, "g");
	tfs_offset_t before;

	assert_int_equal(commit1(f, "g", -1, "t", 0, 10, -1), 0);
	assert_int_equal(tfs_groups_set_state(f->g, "g", TFS_GROUP_STABLE, 2, 3), 0);
	before = records_in(f, p);
	assert_int_equal(commit1(f, "g", -1, "t", 0, 11, -1), TFS_EGROUPBUSY);
	assert_int_equal(commit1(f, "g", 2, "t", 0, 11, -1), TFS_EGENERATION);
	assert_int_equal(tfs_groups_delete(f->g, "g"), TFS_EGROUPBUSY);
	assert_int_equal(tfs_groups_delete_offset(f->g, "g", "t", 0), TFS_EGROUPBUSY);
	assert_int_equal(records_in(f, p), before);          /* nothing appended */
	assert_int_equal(fetched(f, "g", "t", 0), 10);
	assert_int_equal(commit1(f, "g", 3, "t", 0, 12, -1), 0);
	assert_int_equal(fetched(f, "g", "t", 0), 12);
	/* a member's commit to a group without members */
	assert_int_equal(commit1(f, "fresh", 0, "t", 0, 1, -1), TFS_EGENERATION);
	assert_int_equal(tfs_groups_info(f->g, "fresh", &info), -ENOENT);

	assert_int_equal(tfs_groups_info(f->g, "g", &info), 0);
	assert_int_equal(info.state, TFS_GROUP_STABLE);
	assert_int_equal(info.member_count, 2);
	assert_int_equal(info.generation, 3);
	tfs_group_info_release(&info);
	assert_int_equal(tfs_groups_set_state(f->g, "g", TFS_GROUP_EMPTY, 0, 3), 0);
	assert_int_equal(commit1(f, "g", -1, "t", 0, 13, -1), 0);
	assert_int_equal(fetched(f, "g", "t", 0), 13);
}

static void a_group_record_keeps_its_generation_but_not_its_members(void **state)
{
	struct fx *f = *state;
	struct tfs_group_member m = {
		.member_id = tfs_slice_make("m-1", 3), .instance_id_null = true,
		.client_id = tfs_slice_make("c", 1), .client_host = tfs_slice_make("/h", 2),
		.rebalance_timeout_ms = 1000, .session_timeout_ms = 6000,
	};
	struct tfs_group_record rec = { .protocol_type = "consumer", .generation = 9,
	                                .protocol = "range", .leader = "m-1", .members = &m,
	                                .member_count = 1 };
	struct tfs_group_info info;

	assert_int_equal(tfs_groups_set_state(f->g, "g", TFS_GROUP_STABLE, 1, 9), 0);
	assert_int_equal(tfs_groups_store_group(f->g, "g", &rec), 0);
	reopen(f);
	assert_int_equal(tfs_groups_info(f->g, "g", &info), 0);
	assert_int_equal(info.state, TFS_GROUP_EMPTY);
	assert_int_equal(info.member_count, 0);
	assert_int_equal(info.generation, 9);
	assert_string_equal(info.protocol_type, "consumer");
	assert_int_equal(info.offset_count, 0);
	tfs_group_info_release(&info);
	assert_int_equal(commit1(f, "g", -1, "t", 0, 3, -1), 0);   /* no members now */
}

static void bad_input_is_refused_and_changes_nothing(void **state)
{
	struct fx *f = *state;
	static uint8_t meta[TFS_GROUP_METADATA_MAX + 1];
	struct tfs_group_commit c = { .topic = "t", .partition = 0, .offset = 1, .leader_epoch = -1,
	                              .metadata = tfs_slice_make(meta, sizeof(meta)) };

	assert_int_equal(commit1(f, "", -1, "t", 0, 1, -1), -EINVAL);
	assert_int_equal(commit1(f, "\xff", -1, "t", 0, 1, -1), -EINVAL);
	assert_int_equal(commit1(f, "g", -1, "nope", 0, 1, -1), -ENOENT);
	assert_int_equal(commit1(f, "g", -1, "t", 2, 1, -1), -ENOENT);
	assert_int_equal(commit1(f, "g", -1, "t", -1, 1, -1), -EINVAL);
	assert_int_equal(commit1(f, "g", -1, "t", 0, -1, -1), -EINVAL);
	assert_int_equal(commit1(f, "g", -1, "..", 0, 1, -1), -EINVAL);
	assert_int_equal(tfs_groups_commit(f->g, "g", -1, &c, 0, -1), -EINVAL);
	assert_int_equal(tfs_groups_commit(f->g, "g", -1, &c, 1, -1), -EMSGSIZE);
	assert_null(tfs_engine_topic_get(f->e, TFS_GROUPS_TOPIC));   /* nothing written at all */
	assert_int_equal(group_count(f), 0);
	c.metadata.len = TFS_GROUP_METADATA_MAX;                    /* the bound itself is fine */
	assert_int_equal(tfs_groups_commit(f->g, "g", -1, &c, 1, -1), 0);
}

static void the_internal_topic_is_the_stores_alone(void **state)
{
	struct fx *f = *state;
	struct tfs_topic *t;

	assert_int_equal(tfs_engine_topic_create(f->e, TFS_GROUPS_TOPIC, 1, 0, 0, 0755), -EPERM);
	assert_int_equal(commit1(f, "g", -1, "t", 0, 1, -1), 0);
	assert_int_equal(tfs_engine_topic_delete(f->e, TFS_GROUPS_TOPIC, true), -EPERM);
	for (int round = 0; round < 2; round++) {     /* as created, and as opened again */
		struct tfs_append_rec rec = { .key = tfs_slice_make("k", 1),
		                              .value = tfs_slice_make("v", 1) };
		uint8_t junk[64] = { 0 };
		struct tfs_plog *pl;
		t = tfs_engine_topic_get(f->e, TFS_GROUPS_TOPIC);
		pl = tfs_topic_partition(t, 0);
		assert_int_equal(tfs_topic_add_partition(t, NPARTS), -EPERM);
		assert_int_equal(tfs_plog_append(pl, &rec, 1, false, NULL, NULL), -EPERM);
		assert_int_equal(tfs_plog_append_onto(pl, rec.key, rec.value, false, NULL, NULL), -EPERM);
		assert_int_equal(tfs_plog_append_batch(pl, junk, sizeof(junk), false, NULL, NULL, NULL,
		                                       NULL), -EPERM);
		{       /* nor a transaction, nor a config that would stop compacting it */
			struct tfs_plog_txn *txn = NULL;
			const char *name = "cleanup.policy", *value = "delete";
			struct tfs_topic_config c;
			size_t bad;
			assert_int_equal(tfs_plog_txn_begin(pl, 5, 0, &txn), -EPERM);
			assert_int_equal(tfs_topic_set_config(t, name, value), -EPERM);
			assert_int_equal(tfs_topic_set_configs(t, true, &name, &value, 1, false, &bad),
			                 -EPERM);
			assert_int_equal(tfs_topic_set_configs(t, false, &name, &value, 1, true, &bad),
			                 -EPERM);
			tfs_topic_get_config(t, &c);
			assert_int_equal(c.cleanup_policy, TFS_POLICY_COMPACT);
		}
		assert_int_equal(records_in(f, 0), 0);
		tfs_topic_unref(t);
		reopen(f);
	}
	assert_int_equal(fetched(f, "g", "t", 0), 1);
	t = tfs_engine_topic_get(f->e, "t");
	assert_false(tfs_topic_internal(t));
	tfs_topic_unref(t);
}

static void a_simple_group_loses_each_offset_after_the_retention(void **state)
{
	struct fx *f = *state;
	int64_t now = tfs_now_ms();

	assert_int_equal(commit1(f, "g", -1, "t", 0, 1, now - RETENTION_MS), 0);
	assert_int_equal(commit1(f, "g", -1, "t", 1, 2, now - RETENTION_MS + 1), 0);
	assert_int_equal(tfs_groups_expire(f->g, now), 1);
	assert_int_equal(fetched(f, "g", "t", 0), -1);
	assert_int_equal(fetched(f, "g", "t", 1), 2);
	reopen(f);
	assert_int_equal(fetched(f, "g", "t", 0), -1);
	assert_int_equal(tfs_groups_expire(f->g, now + 1), 1);
	assert_int_equal(group_count(f), 0);
	reopen(f);
	assert_int_equal(group_count(f), 0);
}

static void an_empty_consumer_group_expires_whole_after_the_retention(void **state)
{
	struct fx *f = *state;
	int64_t since = tfs_now_ms();
	struct tfs_group_record rec = { .protocol_type = "consumer", .generation = 2,
	                                .state_ms = since };
	struct tfs_group_info info;

	assert_int_equal(tfs_groups_store_group(f->g, "g", &rec), 0);
	assert_int_equal(commit1(f, "g", -1, "t", 0, 1, since + RETENTION_MS * 2), 0);
	/* the commits are newer, but an Empty group counts from when it became Empty */
	assert_int_equal(tfs_groups_expire(f->g, since + RETENTION_MS - 1), 0);
	assert_int_equal(tfs_groups_set_state(f->g, "active", TFS_GROUP_STABLE, 1, 1), 0);
	assert_int_equal(commit1(f, "active", 1, "t", 0, 1, since - RETENTION_MS * 2), 0);
	assert_int_equal(tfs_groups_expire(f->g, since + RETENTION_MS), 1);
	assert_int_equal(tfs_groups_info(f->g, "g", &info), -ENOENT);   /* Dead: record gone */
	assert_int_equal(fetched(f, "active", "t", 0), 1);              /* members keep theirs */
	reopen(f);
	assert_int_equal(tfs_groups_info(f->g, "g", &info), -ENOENT);
	assert_int_equal(fetched(f, "active", "t", 0), 1);
}

/* Writers at once, on one group's key and on groups of their own: what the
 * store answers afterwards is what a rebuild answers (groups.h invariant 1). */
#define WRITERS 4
#define WRITES 40

struct writer {
	struct fx *f;
	int id;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char own[16];

	snprintf(own, sizeof(own), "own-%d", w->id);
	for (int i = 1; i <= WRITES; i++) {
		if (commit1(w->f, "shared", -1, "t", 0, w->id * 1000 + i, -1) < 0 ||
		    commit1(w->f, own, -1, "t", w->id % 2, i, -1) < 0)
			return (void *)1;
	}
	return NULL;
}

static void concurrent_commits_agree_with_the_rebuild(void **state)
{
	struct fx *f = *state;
	pthread_t th[WRITERS];
	struct writer w[WRITERS];
	tfs_offset_t shared;
	void *res;

	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){ f, i + 1 };
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++) {
		assert_int_equal(pthread_join(th[i], &res), 0);
		assert_null(res);
	}
	shared = fetched(f, "shared", "t", 0);
	assert_int_equal(shared % 1000, WRITES);      /* some writer's last */
	assert_int_equal(group_count(f), WRITERS + 1);
	reopen(f);
	assert_int_equal(fetched(f, "shared", "t", 0), shared);
	for (int i = 1; i <= WRITERS; i++) {
		char own[16];
		snprintf(own, sizeof(own), "own-%d", i);
		assert_int_equal(fetched(f, own, "t", i % 2), WRITES);
	}
}

/* A crash sweep: the child commits offsets 1..COMMITS of one partition and
 * reports each acknowledged commit; killed at any write, a reopen must hold the
 * last acknowledged offset or the one after it (in flight), never less. */
#define COMMITS 6

struct crash_arg {
	struct fx *f;
};

static int crash_child(void *arg, const char *spec, int fd)
{
	struct fx *f = ((struct crash_arg *)arg)->f;
	struct tfs_engine *e;

	if (tfs_engine_open(&f->cfg, &e) < 0 || tfs_io_set_fault(tfs_engine_io(e), spec) < 0)
		return 1;
	for (int32_t i = 1; i <= COMMITS; i++) {
		struct tfs_group_commit c = { .topic = "t", .partition = 0, .offset = i,
		                              .leader_epoch = -1, .metadata = tfs_slice_make("", 0) };
		if (tfs_groups_commit(tfs_engine_groups(e), "g", -1, &c, 1, -1) < 0)
			return 1;
		if (write(fd, &i, sizeof(i)) != sizeof(i))
			return 1;
	}
	tfs_engine_close(e);
	return 0;
}

static void an_acknowledged_commit_survives_a_crash_at_any_write(void **state)
{
	struct fx *f = *state;
	struct crash_arg a = { f };
	bool finished = false;

	tfs_engine_close(f->e);
	f->e = NULL;
	for (int n = 1; !finished; n++) {
		int32_t acked[COMMITS];
		size_t got = t_crash_run(crash_child, &a, n, acked, sizeof(acked[0]), COMMITS, &finished);
		tfs_offset_t want = got ? acked[got - 1] : -1;
		open_engine(f);
		tfs_offset_t have = fetched(f, "g", "t", 0);
		if (have != want && !(have == want + 1 || (want == -1 && have == 1)))
			fail_msg("crash at write %d: %zu commits acknowledged (last %" PRId64
			         "), the store has %" PRId64, n, got, want, have);
		tfs_engine_close(f->e);
		f->e = NULL;
		t_rmtree(f->dir);
		free(f->dir);
		f->dir = t_mkdtemp("groups");
		f->cfg.data_dir = f->dir;
		open_engine(f);
		assert_int_equal(tfs_engine_topic_create(f->e, "t", 2, 0, 0, 0755), 0);
		tfs_engine_close(f->e);
		f->e = NULL;
		assert_true(n < 400);
	}
	open_engine(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encodings_are_kafkas_bytes),
		cmocka_unit_test(one_member_group_value_round_trips),
		cmocka_unit_test(decoding_reads_old_versions_and_refuses_bad_bytes),
		cmocka_unit_test(groups_land_where_kafka_puts_them),
		cmocka_unit_test_setup_teardown(commits_are_records_and_survive_a_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(delete_tombstones_every_key_and_forgets_the_group, setup, teardown),
		cmocka_unit_test_setup_teardown(a_refused_topic_keeps_the_whole_group, setup, teardown),
		cmocka_unit_test_setup_teardown(members_refuse_simple_commits_and_deletes, setup, teardown),
		cmocka_unit_test_setup_teardown(a_group_record_keeps_its_generation_but_not_its_members,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(bad_input_is_refused_and_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(the_internal_topic_is_the_stores_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(a_simple_group_loses_each_offset_after_the_retention, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(an_empty_consumer_group_expires_whole_after_the_retention,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(concurrent_commits_agree_with_the_rebuild, setup, teardown),
		cmocka_unit_test_setup_teardown(an_acknowledged_commit_survives_a_crash_at_any_write, setup,
		                                teardown),
	};
	return cmocka_run_group_tests_name("groups", tests, NULL, NULL);
}
