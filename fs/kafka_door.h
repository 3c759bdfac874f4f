/* kafka_door.h - what the mount learns of the Kafka listener's changes (the
 * listener itself is kafka/, which knows nothing of FUSE): the kernel's cached
 * attributes of keys a client wrote, the names of keys a client's tombstone
 * removed and of topics a client deleted, are dropped, so that the files show
 * the log as it is the moment the client's request is answered.
 *
 * Threads: the hooks run on the listener's threads, never inside a FUSE request
 * handler, holding no lock of fs/, so they may send notifications to the kernel
 * directly (libfuse's rule for notifications, see notify.h).
 */
#ifndef TFS_FS_KAFKA_DOOR_H
#define TFS_FS_KAFKA_DOOR_H

#include "kafka/kafka.h"

struct tfs_mount;

/* Fills *h with hooks on m (borrowed until the listener stops). */
void tfs_kafka_door_hooks(struct tfs_mount *m, struct tfs_kafka_hooks *h);

/* Keys of a partition that DeleteRecords left without a record: their cached
 * attributes and the partition's listing go; with entries (never from inside a
 * request handler) their names leave the kernel's dentry cache too. */
void tfs_kafka_door_keys_gone(struct tfs_mount *m, struct tfs_topic *t, int32_t partition,
                              const struct tfs_slice *keys, size_t n, bool entries);

#endif
