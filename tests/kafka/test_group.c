/* test_group.c - the group coordinator (kafka/group.c) without sockets: joins
 * that park and complete, KIP-394 member ids, generations, SyncGroup from the
 * leader, Heartbeat during a rebalance, LeaveGroup, session expiry, commits
 * checked against members and generations, and what the store is told. Time is
 * the request's own (now_ms), so no test waits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/groups/groups.h"
#include "io/log.h"
#include "kafka/group.h"
#include "kafka/kafka_internal.h"
#include "tests/t_util.h"

#define SESSION_MS 10000
#define REBALANCE_MS 30000
#define ASSIGNMENT_BYTES 1000
#define MAX_GROUPS 100          /* busy groups, for the bound's test */

struct fx {
	char *dir;
	struct tfs_engine *e;
	struct tfs_kafka k;
	struct tfs_kgroups *kg;
	int64_t now;               /* the requests' clock: ahead of the timer's */
	int32_t corr;
	int32_t join_corr;         /* of the last first-attempt JoinGroup: its retries' */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct tfs_engine_config cfg;

	tfs_log_set_level(TFS_LOG_ERROR);
	f->dir = t_mkdtemp("kgroup");
	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = f->dir;
	cfg.io_kind = tfs_io_kind_from_env();
	cfg.cleaner.threads = 0;
	cfg.groups.partitions = 3;
	assert_int_equal(tfs_engine_open(&cfg, &f->e), 0);
	assert_int_equal(tfs_engine_topic_create(f->e, "t", 2, 0, 0, 0755), 0);
	f->k.engine = f->e;
	assert_int_equal(tfs_kgroups_create(&f->k, tfs_engine_groups(f->e), 0, 0, &f->kg), 0);
	f->now = tfs_mono_ms() + 1000;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	tfs_kgroups_destroy(f->kg);
	tfs_engine_close(f->e);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static struct tfs_kreq req(struct fx *f, uint64_t conn, int16_t version, bool retry)
{
	return (struct tfs_kreq){ .conn = conn, .correlation = retry ? f->join_corr : ++f->corr,
	                          .retry = retry, .now_ms = f->now,
	                          .client_id = tfs_slice_make("c", 1), .client_host = "/127.0.0.1",
	                          .version = version };
}

static const struct tfs_kproto RANGE = { { (const uint8_t *)"range", 5 }, { (const uint8_t *)"m", 1 } };

/* A JoinGroup; *park says whether it waits. */
static int16_t join(struct fx *f, uint64_t conn, int16_t version, const char *member, bool retry,
                    struct tfs_kjoin_answer *a, bool *park)
{
	struct tfs_kjoin j = { .group = "g", .session_ms = SESSION_MS, .rebalance_ms = REBALANCE_MS,
	                       .member_id = member, .protocol_type = "consumer", .protos = &RANGE,
	                       .nprotos = 1 };
	struct tfs_kreq rq = req(f, conn, version, retry);
	int64_t wake = 0;

	if (!retry)
		f->join_corr = rq.correlation;
	return tfs_kgroups_join(f->kg, &rq, &j, a, park, &wake);
}

static int16_t sync_(struct fx *f, uint64_t conn, int32_t gen, const char *member,
                     const struct tfs_kassign *as, size_t n, bool *park)
{
	struct tfs_kreq rq = req(f, conn, 3, false);
	uint8_t *blob = NULL;
	size_t len = 0;
	int64_t wake = 0;
	int16_t err = tfs_kgroups_sync(f->kg, &rq, "g", gen, member, as, n, &blob, &len, park, &wake);
	free(blob);
	return err;
}

static int16_t heartbeat(struct fx *f, int32_t gen, const char *member)
{
	struct tfs_kreq rq = req(f, 9, 3, false);
	return tfs_kgroups_heartbeat(f->kg, &rq, "g", gen, member);
}

static void store_info(struct fx *f, struct tfs_group_info *info)
{
	assert_int_equal(tfs_groups_info(tfs_engine_groups(f->e), "g", info), 0);
	tfs_group_info_release(info);
}

/* One member: v4 asks for a member id first, then the join completes at once. */
static char *lone_member(struct fx *f, struct tfs_kjoin_answer *a)
{
	bool park = false;
	char *id;

	assert_int_equal(join(f, 1, 5, "", false, a, &park), KE_MEMBER_ID_REQUIRED);
	assert_false(park);
	assert_int_equal(a->generation, -1);
	id = strdup(a->member_id);
	assert_memory_equal(id, "c-", 2);
	tfs_kjoin_answer_release(a);
	assert_int_equal(join(f, 1, 5, id, false, a, &park), KE_NONE);
	assert_false(park);
	return id;
}

static void one_member_joins_syncs_and_heartbeats(void **state)
{
	struct fx *f = *state;
	struct tfs_kjoin_answer a;
	struct tfs_group_info info;
	bool park = false;
	char *id = lone_member(f, &a);
	struct tfs_kassign as = { tfs_slice_make(id, strlen(id)), tfs_slice_make("A", 1) };

	assert_int_equal(a.generation, 1);
	assert_string_equal(a.protocol, "range");
	assert_string_equal(a.leader, id);
	assert_int_equal(a.nmembers, 1);             /* the leader sees the members */
	tfs_kjoin_answer_release(&a);
	assert_int_equal(heartbeat(f, 1, id), KE_NONE);
	assert_int_equal(heartbeat(f, 0, id), KE_ILLEGAL_GENERATION);
	assert_int_equal(heartbeat(f, 1, "nobody"), KE_UNKNOWN_MEMBER_ID);
	assert_int_equal(sync_(f, 1, 1, id, &as, 1, &park), KE_NONE);
	assert_false(park);
	store_info(f, &info);
	assert_int_equal(info.state, TFS_GROUP_STABLE);
	assert_int_equal(info.member_count, 1);
	assert_int_equal(info.generation, 1);
	free(id);
}

static void a_second_member_rebalances_and_the_first_learns_by_heartbeat(void **state)
{
	struct fx *f = *state;
	struct tfs_kjoin_answer a, b;
	bool park = false;
	char *first = lone_member(f, &a), *second;
	struct tfs_kassign as[2];
	int32_t parked;

	tfs_kjoin_answer_release(&a);
	assert_int_equal(sync_(f, 1, 1, first, NULL, 0, &park), KE_NONE);
	/* a v0 member joins at once (no KIP-394) and waits */
	assert_int_equal(join(f, 2, 0, "", false, &b, &park), KE_NONE);
	assert_true(park);
	assert_int_equal(join(f, 2, 0, "", true, &b, &park), KE_NONE);   /* retried: still waits */
	assert_true(park);
	assert_int_equal(heartbeat(f, 1, first), KE_REBALANCE_IN_PROGRESS);
	parked = f->join_corr;
	assert_int_equal(join(f, 1, 5, first, false, &a, &park), KE_NONE); /* the last one in */
	assert_false(park);
	assert_int_equal(a.generation, 2);
	assert_int_equal(a.nmembers, 2);             /* the old leader stays leader */
	assert_string_equal(a.leader, first);
	f->join_corr = parked;
	assert_int_equal(join(f, 2, 0, "", true, &b, &park), KE_NONE);   /* the parked one */
	assert_false(park);
	assert_int_equal(b.generation, 2);
	assert_int_equal(b.nmembers, 0);             /* followers do not see members */
	second = strdup(b.member_id);
	/* the follower's SyncGroup waits for the leader's */
	assert_int_equal(sync_(f, 2, 2, second, NULL, 0, &park), KE_NONE);
	assert_true(park);
	assert_int_equal(tfs_kgroups_commit_check(f->kg, &(struct tfs_kreq){ .now_ms = f->now }, "g",
	                                          2, second, &(int32_t){ 0 }),
	                 KE_REBALANCE_IN_PROGRESS);
	as[0] = (struct tfs_kassign){ tfs_slice_make(first, strlen(first)), tfs_slice_make("A", 1) };
	as[1] = (struct tfs_kassign){ tfs_slice_make(second, strlen(second)), tfs_slice_make("B", 1) };
	assert_int_equal(sync_(f, 1, 2, first, as, 2, &park), KE_NONE);
	assert_false(park);
	assert_int_equal(sync_(f, 2, 2, second, NULL, 0, &park), KE_NONE);
	assert_false(park);
	assert_int_equal(sync_(f, 2, 1, second, NULL, 0, &park), KE_ILLEGAL_GENERATION);
	tfs_kjoin_answer_release(&a);
	tfs_kjoin_answer_release(&b);
	free(first);
	free(second);
}

static void commits_follow_members_and_generations(void **state)
{
	struct fx *f = *state;
	struct tfs_kjoin_answer a;
	struct tfs_kreq rq = { .now_ms = f->now };
	int32_t gen = 0;
	bool park = false;
	char *id;

	/* no members: a simple commit only */
	assert_int_equal(tfs_kgroups_commit_check(f->kg, &rq, "g", -1, "", &gen), KE_NONE);
	assert_int_equal(gen, -1);
	assert_int_equal(tfs_kgroups_commit_check(f->kg, &rq, "g", 3, "m", &gen), KE_ILLEGAL_GENERATION);
	id = lone_member(f, &a);
	tfs_kjoin_answer_release(&a);
	assert_int_equal(sync_(f, 1, 1, id, NULL, 0, &park), KE_NONE);
	assert_int_equal(tfs_kgroups_commit_check(f->kg, &rq, "g", -1, "", &gen), KE_UNKNOWN_MEMBER_ID);
	assert_int_equal(tfs_kgroups_commit_check(f->kg, &rq, "g", 2, id, &gen), KE_ILLEGAL_GENERATION);
	assert_int_equal(tfs_kgroups_commit_check(f->kg, &rq, "g", 1, id, &gen), KE_NONE);
	assert_int_equal(gen, 1);
	/* and the store agrees */
	{
		struct tfs_group_commit c = { .topic = "t", .partition = 0, .offset = 5, .leader_epoch = -1 };
		assert_int_equal(tfs_groups_commit(tfs_engine_groups(f->e), "g", -1, &c, 1, -1),
		                 TFS_EGROUPBUSY);
		assert_int_equal(tfs_groups_commit(tfs_engine_groups(f->e), "g", 1, &c, 1, -1), 0);
	}
	free(id);
}

static void leaving_and_expiring_empty_the_group(void **state)
{
	struct fx *f = *state;
	struct tfs_kjoin_answer a;
	struct tfs_group_info info;
	struct tfs_kdescribe d;
	bool park = false;
	char *id = lone_member(f, &a);
	struct tfs_kreq rq = req(f, 1, 3, false);

	tfs_kjoin_answer_release(&a);
	assert_int_equal(sync_(f, 1, 1, id, NULL, 0, &park), KE_NONE);
	assert_int_equal(tfs_kgroups_describe(f->kg, "g", &d), KE_NONE);
	assert_string_equal(d.state, "Stable");
	assert_int_equal(d.nmembers, 1);
	tfs_kdescribe_release(&d);
	assert_int_equal(tfs_kgroups_delete(f->kg, "g", NULL, NULL), KE_NON_EMPTY_GROUP);
	assert_int_equal(tfs_kgroups_leave(f->kg, &rq, "g", "nobody"), KE_UNKNOWN_MEMBER_ID);
	assert_int_equal(tfs_kgroups_leave(f->kg, &rq, "g", id), KE_NONE);
	store_info(f, &info);
	assert_int_equal(info.state, TFS_GROUP_EMPTY);
	assert_int_equal(info.member_count, 0);
	assert_int_equal(info.generation, 2);        /* the empty generation, as Kafka counts */
	free(id);

	/* a member that stops heartbeating is gone after its session timeout */
	id = lone_member(f, &a);
	tfs_kjoin_answer_release(&a);
	assert_int_equal(sync_(f, 1, 3, id, NULL, 0, &park), KE_NONE);
	f->now += SESSION_MS - 1;
	assert_int_equal(heartbeat(f, 3, id), KE_NONE);
	f->now += SESSION_MS;
	assert_int_equal(heartbeat(f, 3, id), KE_UNKNOWN_MEMBER_ID);
	store_info(f, &info);
	assert_int_equal(info.member_count, 0);
	assert_int_equal(tfs_kgroups_delete(f->kg, "g", NULL, NULL), KE_NONE);
	assert_int_equal(tfs_kgroups_describe(f->kg, "g", &d), KE_NONE);
	assert_string_equal(d.state, "Dead");
	tfs_kdescribe_release(&d);
	assert_int_equal(tfs_kgroups_delete(f->kg, "g", NULL, NULL), KE_GROUP_ID_NOT_FOUND);
	free(id);
}

static void bad_joins_get_kafkas_errors(void **state)
{
	struct fx *f = *state;
	struct tfs_kjoin_answer a;
	struct tfs_kreq rq = req(f, 1, 5, false);
	struct tfs_kjoin j = { .group = "g", .session_ms = 1000, .rebalance_ms = REBALANCE_MS,
	                       .member_id = "", .protocol_type = "consumer", .protos = &RANGE,
	                       .nprotos = 1 };
	bool park = false;
	int64_t wake = 0;

	assert_int_equal(tfs_kgroups_join(f->kg, &rq, &j, &a, &park, &wake), KE_INVALID_SESSION_TIMEOUT);
	j.session_ms = SESSION_MS;
	j.group = "";
	assert_int_equal(tfs_kgroups_join(f->kg, &rq, &j, &a, &park, &wake), KE_INVALID_GROUP_ID);
	j.group = "g";
	j.member_id = "stranger";
	assert_int_equal(tfs_kgroups_join(f->kg, &rq, &j, &a, &park, &wake), KE_UNKNOWN_MEMBER_ID);
	j.member_id = "";
	j.nprotos = 0;
	assert_int_equal(tfs_kgroups_join(f->kg, &rq, &j, &a, &park, &wake),
	                 KE_INCONSISTENT_GROUP_PROTOCOL);
}

/* A JoinGroup of group on kg with the protocols given; it must not park. */
static int16_t join_on(struct fx *f, struct tfs_kgroups *kg, const char *group, const char *member,
                       const struct tfs_kproto *protos, size_t n, const char *instance,
                       struct tfs_kjoin_answer *a)
{
	struct tfs_kjoin j = { .group = group, .session_ms = SESSION_MS, .rebalance_ms = REBALANCE_MS,
	                       .member_id = member, .instance_id = instance,
	                       .protocol_type = "consumer", .protos = protos, .nprotos = n };
	struct tfs_kreq rq = req(f, 1, 5, false);
	bool park = false;
	int64_t wake = 0;
	int16_t err = tfs_kgroups_join(kg, &rq, &j, a, &park, &wake);

	assert_false(park);
	return err;
}

/* group.max.size counts members and pending ids; a member's protocols, their
 * metadata, its instance id and its assignment are bounded; what members hold
 * is counted and given back when they go. */
static void one_groups_members_and_their_bytes_are_bounded(void **state)
{
	struct fx *f = *state;
	struct tfs_kgroups *kg;
	struct tfs_kjoin_answer a;
	struct tfs_kproto many[TFS_KGROUP_MAX_PROTOCOLS + 1];
	struct tfs_kproto big;
	uint8_t *blob = calloc(1, TFS_KGROUP_MAX_METADATA_BYTES + 1);
	char instance[TFS_KGROUP_MAX_INSTANCE_ID_BYTES + 2];
	struct tfs_kreq rq;
	char *ids[2];
	size_t bytes, before;
	bool park = false;
	int64_t wake = 0;

	assert_non_null(blob);
	assert_int_equal(tfs_kgroups_create(&f->k, tfs_engine_groups(f->e), 0, 2, &kg), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(join_on(f, kg, "g", "", &RANGE, 1, NULL, &a), KE_MEMBER_ID_REQUIRED);
		ids[i] = strdup(a.member_id);
		tfs_kjoin_answer_release(&a);
	}
	assert_int_equal(join_on(f, kg, "g", "", &RANGE, 1, NULL, &a), KE_GROUP_MAX_SIZE_REACHED);
	assert_int_equal(tfs_kgroups_count(kg, &bytes), 1);
	assert_int_equal(bytes, strlen(ids[0]) + strlen(ids[1]));

	/* too many protocols, too much metadata, too long an instance id */
	for (size_t i = 0; i < TFS_KGROUP_MAX_PROTOCOLS + 1; i++)
		many[i] = RANGE;
	assert_int_equal(join_on(f, kg, "g", ids[1], many, TFS_KGROUP_MAX_PROTOCOLS + 1, NULL, &a),
	                 KE_INVALID_REQUEST);
	big = (struct tfs_kproto){ RANGE.name, tfs_slice_make(blob, TFS_KGROUP_MAX_METADATA_BYTES + 1) };
	assert_int_equal(join_on(f, kg, "g", ids[1], &big, 1, NULL, &a), KE_INVALID_REQUEST);
	memset(instance, 'i', sizeof(instance) - 1);
	instance[sizeof(instance) - 1] = '\0';
	assert_int_equal(join_on(f, kg, "g", ids[1], &RANGE, 1, instance, &a), KE_INVALID_REQUEST);
	tfs_kgroups_count(kg, &before);
	assert_int_equal(before, bytes);                 /* the refusals changed nothing */

	/* the first pending id joins and waits for the second, which joins with the
	 * largest metadata and instance id allowed; the group is still full */
	rq = req(f, 2, 5, false);
	assert_int_equal(tfs_kgroups_join(kg, &rq, &(struct tfs_kjoin){ .group = "g",
	                 .session_ms = SESSION_MS, .rebalance_ms = REBALANCE_MS, .member_id = ids[0],
	                 .protocol_type = "consumer", .protos = &RANGE, .nprotos = 1 },
	                 &a, &park, &wake), KE_NONE);
	assert_true(park);
	instance[TFS_KGROUP_MAX_INSTANCE_ID_BYTES] = '\0';
	assert_int_equal(join_on(f, kg, "g", ids[1], &RANGE, 1, instance, &a), KE_NONE);
	assert_int_equal(a.generation, 1);
	tfs_kjoin_answer_release(&a);
	assert_int_equal(join_on(f, kg, "g", "", &RANGE, 1, NULL, &a), KE_GROUP_MAX_SIZE_REACHED);
	tfs_kgroups_count(kg, &bytes);
	assert_true(bytes > before + TFS_KGROUP_MAX_INSTANCE_ID_BYTES);

	/* the largest metadata is taken (a v0 member of another group, at once) */
	rq = req(f, 3, 0, false);
	big.metadata.len = TFS_KGROUP_MAX_METADATA_BYTES;
	assert_int_equal(tfs_kgroups_join(kg, &rq, &(struct tfs_kjoin){ .group = "g2",
	                 .session_ms = SESSION_MS, .rebalance_ms = REBALANCE_MS, .member_id = "",
	                 .protocol_type = "consumer", .protos = &big, .nprotos = 1 },
	                 &a, &park, &wake), KE_NONE);
	assert_false(park);
	tfs_kgroups_count(kg, &before);
	assert_true(before > bytes + TFS_KGROUP_MAX_METADATA_BYTES);
	assert_int_equal(tfs_kgroups_leave(kg, &rq, "g2", a.member_id), KE_NONE);
	tfs_kjoin_answer_release(&a);
	tfs_kgroups_count(kg, &before);
	assert_int_equal(before, bytes);

	/* the leader's assignment: one byte too many is refused; one that the group
	 * record can hold is counted */
	{
		struct tfs_kassign as = { tfs_slice_make(ids[1], strlen(ids[1])),
		                          tfs_slice_make(blob, TFS_KGROUP_MAX_ASSIGNMENT_BYTES + 1) };
		uint8_t *got = NULL;
		size_t got_len = 0;

		rq = req(f, 1, 3, false);
		assert_int_equal(tfs_kgroups_sync(kg, &rq, "g", 1, ids[0], &as, 1, &got, &got_len,
		                                  &park, &wake), KE_INVALID_REQUEST);
		tfs_kgroups_count(kg, &before);
		assert_int_equal(before, bytes);
		as.assignment.len = ASSIGNMENT_BYTES;
		assert_int_equal(tfs_kgroups_sync(kg, &rq, "g", 1, ids[0], &as, 1, &got, &got_len,
		                                  &park, &wake), KE_NONE);
		assert_false(park);
		free(got);
		tfs_kgroups_count(kg, &bytes);
		assert_int_equal(bytes, before + ASSIGNMENT_BYTES);
	}
	for (int i = 0; i < 2; i++) {
		rq = req(f, 1, 3, false);
		assert_int_equal(tfs_kgroups_leave(kg, &rq, "g", ids[i]), KE_NONE);
		free(ids[i]);
	}
	tfs_kgroups_count(kg, &bytes);
	assert_int_equal(bytes, 0);
	tfs_kgroups_destroy(kg);
	free(blob);
}

/* Groups with members or pending ids are bounded; idle ones make room. */
static void busy_groups_are_bounded_and_idle_ones_make_room(void **state)
{
	struct fx *f = *state;
	struct tfs_kjoin_answer a;
	char name[32];
	size_t bytes;

	/* pending ids outlive the run however slow it is: the timer's clock is real */
	f->now += 3600 * 1000;
	tfs__kgroups_set_max_groups(f->kg, MAX_GROUPS);
	/* idle groups (a join that failed left them behind) never refuse a new one */
	for (int i = 0; i < MAX_GROUPS + 1; i++) {
		snprintf(name, sizeof(name), "idle%d", i);
		assert_int_equal(join_on(f, f->kg, name, "", &RANGE, 0, NULL, &a),
		                 KE_INCONSISTENT_GROUP_PROTOCOL);
	}
	assert_true(tfs_kgroups_count(f->kg, &bytes) <= MAX_GROUPS);
	for (int i = 0; i < MAX_GROUPS; i++) {
		snprintf(name, sizeof(name), "busy%d", i);
		assert_int_equal(join_on(f, f->kg, name, "", &RANGE, 1, NULL, &a), KE_MEMBER_ID_REQUIRED);
		tfs_kjoin_answer_release(&a);
	}
	assert_int_equal(join_on(f, f->kg, "one-more", "", &RANGE, 1, NULL, &a),
	                 KE_COORDINATOR_NOT_AVAILABLE);
	assert_int_equal(tfs_kgroups_count(f->kg, &bytes), MAX_GROUPS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(one_member_joins_syncs_and_heartbeats, setup, teardown),
		cmocka_unit_test_setup_teardown(a_second_member_rebalances_and_the_first_learns_by_heartbeat,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(commits_follow_members_and_generations, setup, teardown),
		cmocka_unit_test_setup_teardown(leaving_and_expiring_empty_the_group, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_joins_get_kafkas_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(one_groups_members_and_their_bytes_are_bounded, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(busy_groups_are_bounded_and_idle_ones_make_room, setup,
		                                teardown),
	};
	return cmocka_run_group_tests_name("kafka_group", tests, NULL, NULL);
}
