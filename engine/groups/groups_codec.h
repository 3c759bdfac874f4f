/* groups_codec.h - the keys and values of __consumer_offsets, byte for byte as
 * Kafka writes them, so that a broker (or Burrow, or kafka-consumer-groups.sh)
 * given the data directory reads what topicfs wrote, and topicfs reads what a
 * broker wrote.
 *
 * Owns: nothing; pure functions over bytes.
 *
 * Every key and value is an int16 schema version followed by that schema's fields
 * in Kafka's classic (non-flexible) encoding, big-endian: int16/int32/int64 as
 * two's complement; a string is an int16 length and that many UTF-8 bytes; a
 * nullable string has length -1 for null; bytes are an int32 length and the
 * bytes; an array is an int32 count and its elements. A null value (a tombstone)
 * deletes its key.
 *
 * Offset commit key, version 1 (version 0 is identical; Kafka writes 1):
 *   OFFSET  SIZE  DESCRIPTION
 *        0     2  version = 1
 *        2   2+g  group id (string)
 *      4+g   2+t  topic (string)
 *    6+g+t     4  partition (int32)
 *
 * Offset commit value, version 3 (Kafka's since 2.1; what topicfs writes):
 *        0     2  version = 3
 *        2     8  committed offset (int64): the next offset to consume
 *       10     4  leader epoch (int32), -1 when unknown
 *       14   2+m  metadata (string), the client's, at most 4096 bytes as written here
 *     16+m     8  commit timestamp (int64, ms since the epoch)
 * Versions read besides: 0 and 2 (offset, metadata, commit timestamp), 1 (the same
 * plus an int64 expire timestamp). Version 4 is flexible and not decoded.
 *
 * Group metadata key, version 2:
 *        0     2  version = 2
 *        2   2+g  group id (string)
 *
 * Group metadata value, version 3:
 *        0     2  version = 3
 *        2   2+p  protocol type (string), e.g. "consumer"
 *      4+p     4  generation (int32)
 *      8+p  2+q   protocol (nullable string), null for an empty group
 *          2+l   leader member id (nullable string)
 *            8   current state timestamp (int64, ms; versions 2+)
 *            4   member count, then per member:
 *                  member id (string), group instance id (nullable string, v3+),
 *                  client id (string), client host (string), rebalance timeout
 *                  (int32, v1+), session timeout (int32), subscription (bytes),
 *                  assignment (bytes)
 * Versions 0-2 are read too (v0 lacks the rebalance timeout, v0-1 the state
 * timestamp, v0-2 the instance id).
 *
 * A key or value is valid if and only if it is exactly as long as its fields say:
 * no byte missing, no byte left over, no negative length but the nullable -1.
 *
 * Errors: 0, -EINVAL (a field out of range for encoding: a string over 32767
 * bytes), -ENOMEM, TFS_ECORRUPT (a key or value that is not valid), TFS_EUNSUPPORTED
 * (a version this codec does not read: newer group record types).
 */
#ifndef TFS_GROUPS_CODEC_H
#define TFS_GROUPS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

#define TFS_GKEY_OFFSET_V0 0
#define TFS_GKEY_OFFSET_V1 1
#define TFS_GKEY_GROUP 2
#define TFS_GVALUE_OFFSET_WRITTEN 3
#define TFS_GVALUE_GROUP_WRITTEN 3
#define TFS_GSTRING_MAX 32767     /* an int16 length */

/* A decoded key; slices point into the key bytes. */
struct tfs_gkey {
	int16_t version;           /* 0/1: an offset commit; 2: group metadata */
	struct tfs_slice group;
	struct tfs_slice topic;    /* offset commits only */
	int32_t partition;         /* offset commits only */
};

/* A decoded offset commit value; metadata points into the value bytes. */
struct tfs_goffset_value {
	int16_t version;
	tfs_offset_t offset;
	int32_t leader_epoch;      /* -1 before version 3 */
	struct tfs_slice metadata;
	int64_t commit_ms;
	int64_t expire_ms;         /* version 1 only; else -1 */
};

/* One member of a group record, for encoding; slices borrowed for the call. */
struct tfs_gmember {
	struct tfs_slice member_id;
	struct tfs_slice instance_id;
	bool instance_id_null;
	struct tfs_slice client_id;
	struct tfs_slice client_host;
	int32_t rebalance_timeout_ms;
	int32_t session_timeout_ms;
	struct tfs_slice subscription;
	struct tfs_slice assignment;
};

/* A group metadata value. Encoding reads members[0, member_count); decoding fills
 * the slices (into the value bytes) and member_count, leaving members NULL: the
 * members are checked for structure but not copied out. */
struct tfs_ggroup_value {
	int16_t version;
	struct tfs_slice protocol_type;
	int32_t generation;
	struct tfs_slice protocol;
	bool protocol_null;
	struct tfs_slice leader;
	bool leader_null;
	int64_t state_ms;          /* -1 before version 2 */
	int32_t member_count;
	const struct tfs_gmember *members;
};

/* Encoders: *out is malloc'd (caller frees), *len its length. */
int tfs_gcodec_offset_key(struct tfs_slice group, struct tfs_slice topic, int32_t partition,
                          uint8_t **out, size_t *len);
int tfs_gcodec_offset_value(tfs_offset_t offset, int32_t leader_epoch, struct tfs_slice metadata,
                            int64_t commit_ms, uint8_t **out, size_t *len);
int tfs_gcodec_group_key(struct tfs_slice group, uint8_t **out, size_t *len);
int tfs_gcodec_group_value(const struct tfs_ggroup_value *v, uint8_t **out, size_t *len);

/* Decoders (borrowing from the bytes given). */
int tfs_gcodec_key_decode(struct tfs_slice key, struct tfs_gkey *out);
int tfs_gcodec_offset_value_decode(struct tfs_slice value, struct tfs_goffset_value *out);
int tfs_gcodec_group_value_decode(struct tfs_slice value, struct tfs_ggroup_value *out);

/* Java's String.hashCode of the group id (UTF-8 decoded to UTF-16 units, int32
 * arithmetic), which Kafka uses to place a group: abs(hash) % partitions, with
 * abs(INT32_MIN) taken as 0. -EINVAL if group is not valid UTF-8 (Java would see
 * other characters, and so another partition). */
int tfs_gcodec_java_hash(struct tfs_slice group, int32_t *hash);

#endif
