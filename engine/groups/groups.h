/* groups.h - consumer groups' committed offsets, kept as Kafka keeps them: records
 * of the compacted topic __consumer_offsets of the data directory.
 *
 * Owns: the in-memory view of every group (its committed offsets, generation,
 * protocol type, state and member count) and the writes to __consumer_offsets.
 * The topic itself is an ordinary topic of the engine (created at the first
 * write, with cleanup.policy=compact, 100 MiB segments and
 * offsets.topic.num.partitions partitions); its records use the schemas of
 * groups_codec.h, so a Kafka broker given the directory understands them.
 * Owned by the engine (tfs_engine_groups); shared by the Kafka coordinator and
 * the filesystem's .groups/ view.
 *
 * A group lives on partition abs(javaHashCode(group id)) % partitions, as Kafka
 * places it; the partition count is the topic's when it exists, else the
 * configured one.
 *
 * Invariants:
 *   (1) what the store answers is what a rebuild from __consumer_offsets would
 *       answer: every change is appended (durably, fsynced) before it is applied
 *       in memory, and changes of one group are appended in the order they are
 *       applied (the group's partition lock is held from check to apply).
 *   (2) a group is known while it has offsets, a group record or members; a
 *       delete or expiry that leaves it with none forgets it.
 *   (3) a simple commit (generation < 0) is refused while the group has members;
 *       a member's commit (generation >= 0) is refused unless the group has
 *       members and that generation.
 *   (4) member count, state and generation are set by the coordinator
 *       (tfs_groups_set_state); members are not stored across a restart: a group
 *       rebuilt at open has no members and is Empty (its members rejoin, as they
 *       do after a broker fails over), with its last generation kept.
 *
 * Expiry (offsets.retention.minutes, Kafka's rules): a group with a protocol
 * type (a consumer group) that has no members loses all its offsets once it has
 * been Empty for the retention time; a simple group (no group record) loses each
 * offset the retention time after its commit; an offset with an explicit expire
 * timestamp (value version 1, written by old clients) expires then. A group with
 * members keeps its offsets. Expiry writes a tombstone per offset, and one for the
 * group record of a group left with nothing.
 *
 * Threads: every function may be called from any thread. Lock order: a group
 * partition's lock (held across a durable append) -> the map lock; both before
 * any partition log lock (partition_log.h), never the other way round.
 *
 * Errors: 0 or a negative errno / TFS_E* code, logged once:
 *   -EINVAL           a group id that is empty, over 32767 bytes or not UTF-8; a
 *                     topic name Kafka would refuse; a partition < 0; an offset < 0
 *   -EMSGSIZE         metadata over TFS_GROUP_METADATA_MAX (Kafka's
 *                     OFFSET_METADATA_TOO_LARGE)
 *   -ENOENT           no such group / no offset for that partition / no such topic
 *                     or partition to commit for
 *   TFS_EGROUPBUSY    the group has members: a simple commit or a delete refused
 *   TFS_EGENERATION   a member's commit with no members or another generation
 *   TFS_EREADONLY     a read-only data directory
 *   -EFBIG            more offsets in one commit than one batch may hold
 *   -ENOSPC, -EIO     the append failed (nothing changed)
 */
#ifndef TFS_GROUPS_H
#define TFS_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

struct tfs_engine;
struct tfs_groups;

#define TFS_GROUPS_TOPIC "__consumer_offsets"
#define TFS_GROUPS_PARTITIONS_DEFAULT 50          /* offsets.topic.num.partitions */
#define TFS_GROUPS_RETENTION_MS_DEFAULT (10080LL * 60 * 1000) /* offsets.retention.minutes: 7 days */
#define TFS_GROUPS_CHECK_MS_DEFAULT 600000        /* offsets.retention.check.interval.ms */
#define TFS_GROUP_METADATA_MAX 4096               /* offset.metadata.max.bytes */
#define TFS_GROUPS_SEGMENT_BYTES (100LL * 1024 * 1024)  /* offsets.topic.segment.bytes */

struct tfs_groups_config {
	int32_t partitions;        /* for a new __consumer_offsets; >= 1 */
	int64_t retention_ms;      /* offsets.retention.minutes in ms; >= 1 */
	int64_t check_interval_ms; /* how often the engine runs the expiry; >= 1 */
};
void tfs_groups_config_defaults(struct tfs_groups_config *c);

enum tfs_group_state {
	TFS_GROUP_EMPTY = 0,
	TFS_GROUP_PREPARING_REBALANCE,
	TFS_GROUP_COMPLETING_REBALANCE,
	TFS_GROUP_STABLE,
	TFS_GROUP_DEAD,
};
/* Kafka's name of the state ("Empty", "PreparingRebalance", ...); static. */
const char *tfs_group_state_name(enum tfs_group_state s);

/* Opens the store of engine e: rebuilds it from __consumer_offsets if the topic
 * exists. Called by tfs_engine_open once the topics are open; caller owns *out,
 * tfs_groups_close. Records that do not decode are logged (one line per
 * partition) and skipped; a partition that cannot be read fails the open. */
int tfs_groups_open(struct tfs_engine *e, const struct tfs_groups_config *cfg,
                    struct tfs_groups **out);
void tfs_groups_close(struct tfs_groups *g);    /* NULL ok */

/* Where group lives in __consumer_offsets under this store (its partition count).
 * -EINVAL for an id that is not valid (see Errors). */
int tfs_groups_partition_of(struct tfs_groups *g, const char *group, int32_t *partition);
/* Kafka's placement, for any partition count >= 1. */
int tfs_groups_partition_for(const char *group, int32_t partitions, int32_t *partition);

/* One offset to commit; borrowed for the call. */
struct tfs_group_commit {
	const char *topic;
	int32_t partition;
	tfs_offset_t offset;       /* the next offset the group will consume; >= 0 */
	int32_t leader_epoch;      /* -1 when unknown */
	struct tfs_slice metadata; /* the client's string, <= TFS_GROUP_METADATA_MAX */
};

/* Commits count offsets of group as one batch of __consumer_offsets (all or
 * none), durable before it returns, stamped commit_ms (< 0: now). generation < 0
 * is a simple commit (admin tools, the shell): it creates the group if unknown
 * and is refused with TFS_EGROUPBUSY while the group has members. generation >= 0
 * is a member's commit, refused with TFS_EGENERATION unless the group has members
 * and that generation (the coordinator checks the member itself). Every topic
 * and partition must exist (-ENOENT). */
int tfs_groups_commit(struct tfs_groups *g, const char *group, int32_t generation,
                      const struct tfs_group_commit *offsets, size_t count, int64_t commit_ms);

/* A committed offset, copied out: caller owns topic and metadata;
 * tfs_group_offset_release (or tfs_group_offsets_free for an array). */
struct tfs_group_offset {
	char *topic;
	int32_t partition;
	tfs_offset_t offset;
	int32_t leader_epoch;
	uint8_t *metadata;         /* may be NULL when metadata_len == 0 */
	size_t metadata_len;
	int64_t commit_ms;
	int64_t expire_ms;         /* explicit expiry (value v1), else -1 */
};
void tfs_group_offset_release(struct tfs_group_offset *o);
void tfs_group_offsets_free(struct tfs_group_offset *v, size_t count);

/* The committed offset of one partition. -ENOENT if the group has none there
 * (Kafka's OffsetFetch answers -1 then). */
int tfs_groups_fetch(struct tfs_groups *g, const char *group, const char *topic, int32_t partition,
                     struct tfs_group_offset *out);
/* Every committed offset of group, sorted by topic then partition; *out is
 * malloc'd (NULL when *count is 0), free with tfs_group_offsets_free. -ENOENT if
 * the group is not known. */
int tfs_groups_offsets(struct tfs_groups *g, const char *group, struct tfs_group_offset **out,
                       size_t *count);
/* Ids of all known groups, sorted bytewise; *names is one malloc'd block of
 * pointers and strings (free(*names) frees all). */
int tfs_groups_list(struct tfs_groups *g, char ***names, size_t *count);

/* A group's state as the store knows it; protocol_type is malloc'd (NULL: a
 * simple group without a group record), free with tfs_group_info_release. */
struct tfs_group_info {
	enum tfs_group_state state;
	int32_t member_count;
	int32_t generation;        /* 0 for a group that never had one */
	int64_t state_ms;          /* when it entered its state (ms), -1 unknown */
	char *protocol_type;
	size_t offset_count;
};
int tfs_groups_info(struct tfs_groups *g, const char *group, struct tfs_group_info *out);
void tfs_group_info_release(struct tfs_group_info *i);

/* Deletes every offset of group and its group record (a tombstone per key), then
 * forgets it: Kafka's DeleteGroups. TFS_EGROUPBUSY while it has members; -ENOENT
 * if unknown. Large groups take several batches; an error in between leaves the
 * offsets not yet deleted in place (a retry finishes). */
int tfs_groups_delete(struct tfs_groups *g, const char *group);
/* The same, when may(topic, arg) holds for the topic of every offset the group has:
 * otherwise -EACCES and nothing is deleted. The question is asked under the lock
 * that commits to group take, so no offset committed meanwhile escapes it. */
int tfs_groups_delete_if(struct tfs_groups *g, const char *group,
                         bool (*may)(const char *topic, void *arg), void *arg);
/* Deletes one partition's offset (Kafka's OffsetDelete): TFS_EGROUPBUSY while the
 * group has members, -ENOENT if there is none. */
int tfs_groups_delete_offset(struct tfs_groups *g, const char *group, const char *topic,
                             int32_t partition);

/* Sets the coordinator's view of group (created if unknown): state, member
 * count and generation. Entering Empty (or any change of state) stamps
 * state_ms = now. In memory only (the coordinator writes group records with
 * tfs_groups_store_group); never blocks on I/O. */
int tfs_groups_set_state(struct tfs_groups *g, const char *group, enum tfs_group_state state,
                         int32_t member_count, int32_t generation);

/* One member of a group record; slices borrowed for the call. */
struct tfs_group_member {
	struct tfs_slice member_id;
	struct tfs_slice instance_id;      /* group.instance.id; instance_id_null: none */
	bool instance_id_null;
	struct tfs_slice client_id;
	struct tfs_slice client_host;
	int32_t rebalance_timeout_ms;
	int32_t session_timeout_ms;
	struct tfs_slice subscription;     /* the member's metadata for the chosen protocol */
	struct tfs_slice assignment;       /* its SyncGroup assignment */
};

/* A group record as the coordinator writes it after a rebalance (and an empty
 * one, protocol and leader NULL, when the group becomes Empty). */
struct tfs_group_record {
	const char *protocol_type;         /* "consumer", ... */
	int32_t generation;
	const char *protocol;              /* NULL: none */
	const char *leader;                /* NULL: none */
	int64_t state_ms;                  /* < 0: now */
	const struct tfs_group_member *members;
	int32_t member_count;
};
/* Appends group's record (group metadata key v2, value v3), durable before it
 * returns, and keeps its protocol type and generation. */
int tfs_groups_store_group(struct tfs_groups *g, const char *group,
                           const struct tfs_group_record *rec);

/* Applies offsets.retention.minutes as of now_ms (see Expiry above); the engine
 * calls it every check interval. Returns how many offsets expired, or an error
 * (those expired before it stay expired). */
int tfs_groups_expire(struct tfs_groups *g, int64_t now_ms);

#endif
