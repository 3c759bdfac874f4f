/* consumers.h - what the mount knows about its consumers beyond the engine's
 * group store: the bootstrap times reported by `topicctl follow`, the groups made
 * by mkdir in .groups/ that have no offset yet, and the consumer-health metrics
 * (lag of each group against the tombstone window, the cleaner falling behind,
 * keyless records in compacted topics, the age of each partition's oldest record,
 * bootstrap times) for .topicfs/metrics and .topicfs/status.
 *
 * Owns: its two small tables, under one mutex (a leaf: never held across an
 * engine call). Threads: any. Errors: 0 or a negative errno.
 */
#ifndef TFS_FS_CONSUMERS_H
#define TFS_FS_CONSUMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct tfs_mount;
struct tfs_consumers;

/* Caller owns *out; tfs_consumers_destroy (NULL ok). */
int tfs_consumers_create(struct tfs_consumers **out);
void tfs_consumers_destroy(struct tfs_consumers *c);

/* A consumer of topic took ms to bootstrap it from offset 0 to the end offsets it
 * recorded (setfattr user.topicfs.bootstrap_ms on the topic directory). */
int tfs_consumers_note_bootstrap(struct tfs_consumers *c, const char *topic, int64_t ms);
/* The last one reported for topic, or -1. */
int64_t tfs_consumers_bootstrap_ms(struct tfs_consumers *c, const char *topic);

/* Groups that exist in .groups/ only because mkdir made them (no offset yet, or
 * every offset deleted by unlink): they live until rmdir or unmount. */
int tfs_consumers_group_add(struct tfs_consumers *c, const char *group);
bool tfs_consumers_group_has(struct tfs_consumers *c, const char *group);
void tfs_consumers_group_remove(struct tfs_consumers *c, const char *group);
/* Their names, copied; caller frees each and the array. */
int tfs_consumers_group_names(struct tfs_consumers *c, char ***names, size_t *count);

/* The consumer-health metrics (Prometheus text) and their lines for people. */
void tfs_consumers_write_metrics(FILE *f, struct tfs_mount *m);
void tfs_consumers_write_status(FILE *f, struct tfs_mount *m);

/* Thresholds of the monitoring list (docs/consumers.md): a group is flagged when
 * its lag in time passes this fraction of delete.retention.ms; a compacted
 * partition when more than this fraction of its records have no key. */
#define TFS_GROUP_LAG_WINDOW_FRACTION 0.5
#define TFS_KEYLESS_FRACTION_LIMIT 0.01

#endif
