/* group.h - the listener's group coordinator: Kafka's classic consumer-group
 * protocol (members, generations, rebalances, session and rebalance timeouts)
 * over the engine's offsets store (engine/groups/groups.h).
 *
 * Owns: every group's members in memory and a timer thread that expires silent
 * members. Positions and group records live in the store; members do not
 * survive a restart (they rejoin, as after a broker fail-over).
 *
 * States (Kafka's GroupMetadata):
 *
 *   Empty --join--> PreparingRebalance --all joined / rebalance timeout-->
 *   CompletingRebalance --leader's SyncGroup--> Stable --join, leave, expiry-->
 *   PreparingRebalance ...; PreparingRebalance with nobody left --> Empty.
 *
 * A JoinGroup or SyncGroup that must wait is parked by the listener
 * (KAFKA_PARK) and handled again when the coordinator wakes the loops
 * (tfs__kafka_wake) or at its wake_at: the handler finds its member by the
 * connection and correlation id of the request, so a retry never joins twice.
 * No call blocks on another member.
 *
 * Threads: every function takes the coordinator's lock; any loop thread may call.
 * Errors: the functions answer Kafka error codes (int16), 0 for none.
 */
#ifndef TFS_KAFKA_GROUP_H
#define TFS_KAFKA_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

struct tfs_kafka;
struct tfs_groups;
struct tfs_kgroups;

/* Kafka's group error codes (Errors.java). */
enum {
	KE_NONE = 0,
	KE_OFFSET_METADATA_TOO_LARGE = 12,
	KE_COORDINATOR_NOT_AVAILABLE = 15,
	KE_ILLEGAL_GENERATION = 22,
	KE_INCONSISTENT_GROUP_PROTOCOL = 23,
	KE_INVALID_GROUP_ID = 24,
	KE_UNKNOWN_MEMBER_ID = 25,
	KE_INVALID_SESSION_TIMEOUT = 26,
	KE_REBALANCE_IN_PROGRESS = 27,
	KE_INVALID_COMMIT_OFFSET_SIZE = 28,
	KE_GROUP_AUTHORIZATION_FAILED = 30,
	KE_NON_EMPTY_GROUP = 68,
	KE_GROUP_ID_NOT_FOUND = 69,
	KE_MEMBER_ID_REQUIRED = 79,
	KE_INVALID_REQUEST = 42,
	KE_GROUP_MAX_SIZE_REACHED = 81,
};

#define TFS_KGROUP_MIN_SESSION_MS 6000        /* group.min.session.timeout.ms */
#define TFS_KGROUP_MAX_SESSION_MS 1800000     /* group.max.session.timeout.ms */
#define TFS_KGROUP_INITIAL_DELAY_MS 3000      /* group.initial.rebalance.delay.ms */

/* What clients can make the coordinator hold (docs/kafka.md, "Consumer
 * groups"). Kafka bounds none of these but group.max.size (default 2^31-1) and,
 * through message.max.bytes, the group record a SyncGroup stores; a mount
 * daemon shares its memory with the filesystem, so each is bounded here:
 *   members and pending member ids of one group: group.max.size, else
 *     GROUP_MAX_SIZE_REACHED;
 *   protocols one member names, and the bytes of their metadata; the bytes of
 *     one member's assignment; a group.instance.id's length: else INVALID_REQUEST;
 *   groups held in memory at once (a group without members or pending ids is
 *     dropped from memory; its record stays in the store), and the bytes of all
 *     members' ids, metadata and assignments together: else
 *     COORDINATOR_NOT_AVAILABLE, which clients retry. */
#define TFS_KGROUP_MAX_SIZE_DEFAULT 1000          /* group.max.size */
#define TFS_KGROUP_MAX_PROTOCOLS 64
#define TFS_KGROUP_MAX_METADATA_BYTES (1024 * 1024)   /* Kafka's message.max.bytes */
#define TFS_KGROUP_MAX_ASSIGNMENT_BYTES (1024 * 1024)
#define TFS_KGROUP_MAX_INSTANCE_ID_BYTES 249      /* as Kafka's clients check it */
#define TFS_KGROUP_MAX_GROUPS 10000
#define TFS_KGROUP_MAX_STATE_BYTES (256 * 1024 * 1024)

/* initial_delay_ms: group.initial.rebalance.delay.ms; max_size: group.max.size
 * (>= 1). Caller owns *out. */
int tfs_kgroups_create(struct tfs_kafka *k, struct tfs_groups *store, int64_t initial_delay_ms,
                       int32_t max_size, struct tfs_kgroups **out);
/* Groups held in memory, and the bytes their members hold (tests, logs). */
size_t tfs_kgroups_count(struct tfs_kgroups *kg, size_t *state_bytes);
/* Tests: hold at most n (<= TFS_KGROUP_MAX_GROUPS) busy groups. */
void tfs__kgroups_set_max_groups(struct tfs_kgroups *kg, size_t n);
void tfs_kgroups_destroy(struct tfs_kgroups *kg);    /* NULL ok */

/* Where a parked request comes from, so its retries find their member. */
struct tfs_kreq {
	uint64_t conn;
	int32_t correlation;
	bool retry;                      /* a parked request handled again */
	int64_t now_ms;                  /* monotonic */
	struct tfs_slice client_id;
	const char *client_host;
	int16_t version;
};

struct tfs_kproto {
	struct tfs_slice name;
	struct tfs_slice metadata;
};

struct tfs_kjoin {
	const char *group;
	int32_t session_ms, rebalance_ms;
	const char *member_id;
	const char *instance_id;         /* NULL: none */
	const char *protocol_type;
	const struct tfs_kproto *protos;
	size_t nprotos;
};

/* A JoinGroup answer: caller owns the strings and members; tfs_kjoin_answer_release. */
struct tfs_kmember_meta {
	char *member_id;
	char *instance_id;               /* NULL */
	uint8_t *metadata;
	size_t metadata_len;
};
struct tfs_kjoin_answer {
	int32_t generation;
	char *protocol;                  /* "" when none */
	char *leader;
	char *member_id;
	struct tfs_kmember_meta *members;    /* the leader's answer only */
	size_t nmembers;
};
void tfs_kjoin_answer_release(struct tfs_kjoin_answer *a);

/* Returns the error, or 0 with *a filled; *park: wait until *wake_at_ms. */
int16_t tfs_kgroups_join(struct tfs_kgroups *kg, const struct tfs_kreq *rq,
                         const struct tfs_kjoin *j, struct tfs_kjoin_answer *a, bool *park,
                         int64_t *wake_at_ms);

struct tfs_kassign {
	struct tfs_slice member_id;
	struct tfs_slice assignment;
};
/* SyncGroup: *assignment malloc'd (NULL when empty), caller frees. */
int16_t tfs_kgroups_sync(struct tfs_kgroups *kg, const struct tfs_kreq *rq, const char *group,
                         int32_t generation, const char *member_id,
                         const struct tfs_kassign *as, size_t nas, uint8_t **assignment,
                         size_t *assignment_len, bool *park, int64_t *wake_at_ms);
int16_t tfs_kgroups_heartbeat(struct tfs_kgroups *kg, const struct tfs_kreq *rq, const char *group,
                              int32_t generation, const char *member_id);
/* LeaveGroup of one member: UNKNOWN_MEMBER_ID if unknown. */
int16_t tfs_kgroups_leave(struct tfs_kgroups *kg, const struct tfs_kreq *rq, const char *group,
                          const char *member_id);
/* Whether an OffsetCommit of (generation, member_id) may go to the store now
 * (Kafka's validateOffsetCommit); a member's commit counts as a heartbeat.
 * *store_generation: what to hand tfs_groups_commit. */
int16_t tfs_kgroups_commit_check(struct tfs_kgroups *kg, const struct tfs_kreq *rq,
                                 const char *group, int32_t generation, const char *member_id,
                                 int32_t *store_generation);

/* DescribeGroups of one group (caller owns the strings; tfs_kdescribe_release). */
struct tfs_kdescribe_member {
	char *member_id, *instance_id, *client_id, *client_host;
	uint8_t *metadata, *assignment;
	size_t metadata_len, assignment_len;
};
struct tfs_kdescribe {
	const char *state;               /* static */
	char *protocol_type;
	char *protocol;
	struct tfs_kdescribe_member *members;
	size_t nmembers;
};
int16_t tfs_kgroups_describe(struct tfs_kgroups *kg, const char *group, struct tfs_kdescribe *d);
void tfs_kdescribe_release(struct tfs_kdescribe *d);
/* A group's protocol type for ListGroups: malloc'd, "" for a simple group. */
char *tfs_kgroups_protocol_type(struct tfs_kgroups *kg, const char *group);
/* DeleteGroups of one group; may (NULL: anyone) is asked for each topic it has
 * offsets of, under the store's lock (tfs_groups_delete_if): a refusal is
 * GROUP_AUTHORIZATION_FAILED. */
int16_t tfs_kgroups_delete(struct tfs_kgroups *kg, const char *group,
                           bool (*may)(const char *topic, void *arg), void *arg);

#endif
