/* topic_config.h - a topic's configuration with Kafka's names, defaults and checks,
 * and the mount-wide cleaner settings; parsing, validation and atomic persistence.
 *
 * Owns: plain values; no I/O except tfs_topic_config_load/save.
 *
 * File format (DATA_DIR/topics/<topic>), Java-properties style, one "name=value" per
 * line, '#' comments; written atomically (temp file, fsync, rename, fsync of the
 * directory). Besides the topic configs it carries the topic's ownership as
 * topicfs.uid, topicfs.gid, topicfs.mode (octal) and topicfs.partitions, and
 * topicfs.deleting=1 once the topic's deletion has begun (written only then: it is
 * the commit point of a deletion, which an open of the data directory finishes).
 *
 * Errors: 0, -EINVAL (unknown name or bad value: nothing changed), or an I/O errno.
 * Threads: plain data; the owner serialises changes.
 */
#ifndef TFS_TOPIC_CONFIG_H
#define TFS_TOPIC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/ondisk.h"          /* TFS_TOPIC_NAME_MAX */

struct tfs_io;

enum tfs_cleanup_policy {
	TFS_POLICY_DELETE = 1,
	TFS_POLICY_COMPACT = 2,        /* both bits: compact,delete */
};

enum tfs_ts_type { TFS_TS_CREATE_TIME = 0, TFS_TS_LOG_APPEND_TIME = 1 };

struct tfs_topic_config {
	unsigned cleanup_policy;       /* TFS_POLICY_* bits; default compact */
	int64_t segment_bytes;         /* default 100 MiB; >= 14 */
	int64_t segment_ms;            /* default 7 days; >= 1 */
	double min_cleanable_dirty_ratio;  /* [0,1], default 0.5 */
	int64_t delete_retention_ms;   /* >= 0, default 86400000 */
	int64_t min_compaction_lag_ms; /* >= 0, default 0 */
	int64_t max_compaction_lag_ms; /* >= 1, default INT64_MAX */
	int64_t retention_ms;          /* -1 = unlimited, default 604800000 */
	int64_t retention_bytes;       /* -1 = unlimited (default) */
	int32_t max_message_bytes;     /* >= 0, default 1048588 */
	int compression;               /* enum tfs_codec: none (default) or zstd */
	int zstd_level;                /* compression.zstd.level: default 3, within
	                                * ZSTD_minCLevel()..ZSTD_maxCLevel(); 0 is
	                                * zstd's own default (3) */
	enum tfs_ts_type timestamp_type;   /* default CreateTime */
	int32_t segment_index_bytes;   /* default 10485760, >= 8 */
	int32_t index_interval_bytes;  /* default 4096, >= 0 */
	int64_t flush_ms;              /* topicfs: bound on time in page cache only; default 1000 */
	int64_t producer_id_expiration_ms; /* producer.id.expiration.ms: idle producers are
	                                * forgotten after it; >= 1, default 86400000 */
};

/* Topic ownership kept beside the config. */
struct tfs_topic_meta {
	uid_t uid;
	gid_t gid;
	mode_t mode;                   /* permission bits of the topic and its partitions */
	int32_t partitions;
	bool deleting;                 /* topicfs.deleting=1: a deletion has committed */
};

/* Mount-wide cleaner settings (Kafka's broker names). */
struct tfs_cleaner_config {
	int threads;                   /* log.cleaner.threads, default 1, >= 0 */
	int64_t dedupe_buffer_size;    /* log.cleaner.dedupe.buffer.size, 128 MiB */
	int64_t io_buffer_size;        /* log.cleaner.io.buffer.size, 512 KiB */
	double io_buffer_load_factor;  /* log.cleaner.io.buffer.load.factor, 0.9, (0,1] */
	double io_max_bytes_per_second;/* log.cleaner.io.max.bytes.per.second, unbounded */
	int64_t backoff_ms;            /* log.cleaner.backoff.ms, 15000 */
};

/* Room for any value tfs_topic_config_get formats, its NUL included. */
#define TFS_TOPIC_CONFIG_VALUE_MAX 64

/* A topic's name, by Kafka's rule: 1..TFS_TOPIC_NAME_MAX of [A-Za-z0-9._-], not
 * "." or "..", not starting with '.'. Pure; any thread. */
bool tfs_topic_name_valid(const char *name);

void tfs_topic_config_defaults(struct tfs_topic_config *c);
void tfs_cleaner_config_defaults(struct tfs_cleaner_config *c);

/* Sets one topic config by its Kafka name ("cleanup.policy", ...). On -EINVAL, *c
 * is unchanged. */
int tfs_topic_config_set(struct tfs_topic_config *c, const char *name, const char *value);
/* Formats the value of name into buf (NUL-terminated). -EINVAL for an unknown name,
 * -ERANGE if buf is too small. */
int tfs_topic_config_get(const struct tfs_topic_config *c, const char *name, char *buf, size_t cap);
/* The names, in a stable order, NULL-terminated. */
const char *const *tfs_topic_config_names(void);
/* True if name's value in c differs from the default. */
bool tfs_topic_config_is_default(const struct tfs_topic_config *c, const char *name);

/* Sets one cleaner setting by its broker name ("log.cleaner.threads", ...). */
int tfs_cleaner_config_set(struct tfs_cleaner_config *c, const char *name, const char *value);
const char *const *tfs_cleaner_config_names(void);

/* Reads path into *c and *m, starting from the defaults in *c (so mount-wide
 * defaults apply to names the file does not mention). -ENOENT if missing; -EINVAL
 * with a log line naming the line for a malformed file (nothing changed). */
int tfs_topic_config_load(const char *path, struct tfs_topic_config *c, struct tfs_topic_meta *m);
/* Writes c and m to path atomically through io (see tfs_file_replace). */
int tfs_topic_config_save(struct tfs_io *io, const char *path, const struct tfs_topic_config *c,
                          const struct tfs_topic_meta *m);

/* A config file's checksum line (its last, topicfs.crc32c=<hex>, written by
 * tfs_topic_config_save over every byte before it): 0 when text[0, len) has
 * none (written by hand) or it matches, with *body the bytes before it (len
 * without one); -EBADMSG when it does not match (*body where it starts);
 * -EINVAL when the line is malformed or misplaced. text must be NUL-terminated at len. */
int tfs_topic_config_crc_check(const char *text, size_t len, size_t *body);

#endif
