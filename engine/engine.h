/* engine.h - a data directory: its topics, their partitions, and the background
 * threads (the flusher, the cleaner's pool) that serve them.
 *
 * Owns: the io context, the fd cache, every topic and partition log, the
 * background threads (flusher, the cleaner's pool). DATA_DIR layout:
 *
 *   DATA_DIR/<topic>-<partition>/      Kafka segment files (see partition_log.h)
 *   DATA_DIR/topics/<topic>            topic config + ownership (topic_config.h);
 *                                      its presence is the commit point of a
 *                                      topic's creation
 *   DATA_DIR/cleaner-offset-checkpoint Kafka's text format (cleaner_checkpoint.c)
 *   DATA_DIR/log-cleaner.log           a line per cleaning pass (cleaner_log.c)
 *
 * A partition directory without a config file (copied out of a Kafka broker) is
 * a topic with the mount's default config.
 *
 * Topics are reference counted: tfs_engine_topic_get returns a reference that keeps
 * the topic's memory (not its files) alive after a delete, so a FUSE inode can
 * outlive its topic and answer ENOENT.
 *
 * Threads: every function may be called from any thread.
 * Errors: 0 or a negative errno / TFS_E* code; every failure is logged once.
 */
#ifndef TFS_ENGINE_H
#define TFS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/groups/groups.h"
#include "engine/log/partition_log.h"
#include "engine/topic_config.h"
#include "io/io.h"

struct tfs_engine;
struct tfs_topic;
struct tfs_cleaner;

struct tfs_engine_config {
	const char *data_dir;
	enum tfs_io_kind io_kind;
	bool read_only;
	bool create_data_dir;                     /* mkdir data_dir (one level) if missing */
	int32_t default_partitions;               /* for new topics, >= 1 */
	struct tfs_topic_config topic_defaults;
	struct tfs_cleaner_config cleaner;
	struct tfs_groups_config groups;          /* consumer groups' offsets store */
	unsigned max_open_files;                  /* segment fd cache bound; 0 = 4096 */
	const char *fault_spec;                   /* io fault injection (tests); NULL */
	/* Called from tfs_engine_open after each topic's partitions are opened (done of
	 * total topics), so a daemon can say how recovery goes; NULL: nothing. */
	void (*progress)(void *arg, size_t done, size_t total);
	void *progress_arg;
};

void tfs_engine_config_defaults(struct tfs_engine_config *c);

/* Opens data_dir, opens every topic and partition. A missing data_dir is -ENOENT
 * (logged), unless create_data_dir asks for it to be made (never when read-only):
 * a typo must not become an empty log. A partition that fails to open is logged
 * and left out; others go on. */
int tfs_engine_open(const struct tfs_engine_config *cfg, struct tfs_engine **out);
/* Stops background threads, closes every partition (flushing). NULL ok. */
void tfs_engine_close(struct tfs_engine *e);

struct tfs_io *tfs_engine_io(struct tfs_engine *e);

/* A producer id never handed out before by this data directory, across restarts
 * and crashes (producer_ids.h), and its epoch (0): what Kafka's InitProducerId
 * gives a new idempotent producer, shared by every front end. Any thread.
 * Errors: -EROFS on a read-only engine; the allocator file's write errors
 * (-ENOSPC, -EIO); -EOVERFLOW past INT64_MAX. */
int tfs_engine_producer_id(struct tfs_engine *e, int64_t *id, int16_t *epoch);
bool tfs_engine_read_only(const struct tfs_engine *e);
const char *tfs_engine_data_dir(const struct tfs_engine *e);

/* Creates a topic with partitions partitions (<= 0: the default), owned by uid/gid
 * with permission bits mode. -EEXIST, -EINVAL (bad name), TFS_EREADONLY. */
int tfs_engine_topic_create(struct tfs_engine *e, const char *name, int32_t partitions,
                            uid_t uid, gid_t gid, mode_t mode);
/* Deletes a topic and its files. -ENOTEMPTY if any partition holds a live key
 * unless force (topicctl delete tombstones first, then deletes). */
int tfs_engine_topic_delete(struct tfs_engine *e, const char *name, bool force);

/* Returns a new reference to the named topic, or NULL. tfs_topic_unref. */
struct tfs_topic *tfs_engine_topic_get(struct tfs_engine *e, const char *name);
void tfs_topic_unref(struct tfs_topic *t);
/* Names of all topics, sorted; *names is one malloc'd array of pointers into the
 * same block (free(*names) frees all). */
int tfs_engine_topic_names(struct tfs_engine *e, char ***names, size_t *count);

const char *tfs_topic_name(const struct tfs_topic *t);
bool tfs_topic_deleted(const struct tfs_topic *t);
/* True when DATA_DIR/topics/<topic> did not load at open (logged with the line):
 * the topic is served read-only with mode 0500 and its defaults, and every change
 * (write, config, owner, mode, new partition, deletion) is TFS_EREADONLY, so the
 * file stays as the operator left it until it is fixed and the data directory
 * opened again. */
bool tfs_topic_config_refused(const struct tfs_topic *t);
/* Whether the topic has no topics/<topic> file (its partition directories came
 * from a broker): the cleaner neither compacts nor trims it until a change
 * writes that file (tfs_topic_set_config, _set_owner, _set_mode, a partition
 * added), whatever cleanup.policy the defaults name. Any thread. */
bool tfs_topic_unconfigured(struct tfs_topic *t);
int32_t tfs_topic_partition_count(struct tfs_topic *t);
/* Borrowed partition log, valid while the caller holds its topic reference and
 * the topic is not deleted. NULL if out of range. */
struct tfs_plog *tfs_topic_partition(struct tfs_topic *t, int32_t partition);
/* Adds partition number == current count. -EINVAL otherwise. */
int tfs_topic_add_partition(struct tfs_topic *t, int32_t partition);

/* Config and ownership: copies out / validates, applies to every partition and
 * persists atomically; on error nothing changes. An internal topic's config is
 * its owner's: changing it is -EPERM (logged). */
void tfs_topic_get_config(struct tfs_topic *t, struct tfs_topic_config *c);
int tfs_topic_set_config(struct tfs_topic *t, const char *name, const char *value);
void tfs_topic_get_meta(struct tfs_topic *t, struct tfs_topic_meta *m);
/* Several config changes as one (Kafka's AlterConfigs and IncrementalAlterConfigs):
 * each (names[i], values[i]) in turn, with tfs_topic_set_config's checks, onto the
 * topic's config, or onto the mount's topic defaults when from_defaults (a whole
 * new set); a NULL value puts the mount's default back. One atomic persist for
 * all; validate_only checks and changes nothing. On a refusal nothing changes and
 * *bad is the index of the pair refused (n otherwise). Errors: -EINVAL (a name or
 * value; *bad says which), -EPERM (an internal topic), TFS_EREADONLY, -ENOENT
 * (deleted), the file's errors. */
int tfs_topic_set_configs(struct tfs_topic *t, bool from_defaults, const char *const *names,
                          const char *const *values, size_t n, bool validate_only, size_t *bad);
/* The mount's topic defaults (tfs_engine_config.topic_defaults). */
void tfs_engine_topic_defaults(const struct tfs_engine *e, struct tfs_topic_config *out);
int tfs_topic_set_owner(struct tfs_topic *t, uid_t uid, gid_t gid);
int tfs_topic_set_mode(struct tfs_topic *t, mode_t mode);

/* Sets (fn != NULL) or clears the one listener told after every append to any
 * partition, with the partition (a Kafka listener's long polls). fn runs on the
 * appending thread holding no partition lock; it must not append. Once a clear
 * returns, no call of the old fn is running or will start. */
void tfs_engine_set_append_hook(struct tfs_engine *e, void (*fn)(void *arg, struct tfs_plog *pl),
                                void *arg);

/* Consumer groups' committed offsets (groups.h), kept in the internal topic
 * __consumer_offsets. Borrowed, valid until tfs_engine_close. */
struct tfs_groups *tfs_engine_groups(struct tfs_engine *e);
/* Whether t is internal (__consumer_offsets): tfs_engine_topic_create and
 * tfs_engine_topic_delete refuse its name, tfs_topic_add_partition refuses it
 * (-EPERM, logged); only the groups' store writes its records, and front ends
 * refuse writes to it. */
bool tfs_topic_internal(const struct tfs_topic *t);
/* For the groups' store: creates an internal topic with config cfg; otherwise
 * as tfs_engine_topic_create. */
int tfs_engine_internal_topic_create(struct tfs_engine *e, const char *name, int32_t partitions,
                                     uid_t uid, gid_t gid, mode_t mode,
                                     const struct tfs_topic_config *cfg);

/* Makes every partition of every topic durable. */
int tfs_engine_sync(struct tfs_engine *e);

/* The cleaner (engine/cleaner/cleaner.h) that compacts and applies retention to every
 * partition; NULL on a read-only engine. Borrowed, valid until tfs_engine_close. */
struct tfs_cleaner *tfs_engine_cleaner(struct tfs_engine *e);

/* Kafka's DeleteRecords of one partition: moves its log start offset up to
 * offset (-1: the log end, Kafka's high watermark), persisted in
 * DATA_DIR/log-start-offset-checkpoint (engine/log/log_start.h) before it takes
 * effect, then tfs_plog_delete_below (gone and arg as there). *low: the log
 * start offset after (Kafka's low watermark; unchanged for an offset at or below
 * it). gone is called after the engine's locks are released, so it may notify
 * the kernel. TFS_EREADONLY, -EPERM for an internal topic, -ERANGE for an offset
 * past the log end or below -1, -ENOENT for no such partition, or the file's
 * write error: then nothing changed. */
int tfs_engine_delete_records(struct tfs_engine *e, struct tfs_topic *t, int32_t partition,
                              tfs_offset_t offset,
                              void (*gone)(void *arg, const struct tfs_slice *keys, size_t n),
                              void *arg, tfs_offset_t *low);

#endif
