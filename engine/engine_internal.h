/* engine_internal.h - what engine.c (the registry, creation, deletion, configs)
 * and engine_open.c (open, close, the flusher) share: the engine and topic structs
 * and the registry helpers. Nothing outside engine/engine*.c includes it; the
 * rules of both files (creation and deletion order, lock order) are at the top of
 * engine.c. */
#ifndef TFS_ENGINE_INTERNAL_H
#define TFS_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"

#define DEFAULT_MAX_OPEN_FILES 4096
/* Of the process's descriptor limit, the share the segment fd cache may take: the
 * rest is for what is not cached (FUSE, io_uring rings, directories opened for a
 * roll or a pass, temporary index files, the cleaner's files). */
#define FDCACHE_LIMIT_SHARE_PERCENT 75
#define FDCACHE_MIN_OPEN 16
#define DEFAULT_TOPIC_MODE 0755
#define DATA_DIR_MODE 0755          /* the data directory and topics/ */
#define REFUSED_TOPIC_MODE 0500      /* its real mode is unknown: the owner only */
#define PATH_CAP 4096
#define FLUSH_TICK_MS 100            /* how often the flusher looks at flush.ms */
#define DELETE_SUFFIX "-delete"        /* Kafka's suffix for a deleted partition dir */
#define FILE_NAME_MAX 255              /* bytes of one name (NAME_MAX of ext4, xfs, ...) */
#define DELETE_ID_BYTES 16             /* random id of a deleted directory, as hex */
#define CREATING_PREFIX ".new-"          /* topics/.new-<topic>: a creation under way */

struct tfs_topic {
	atomic_int refs;
	struct tfs_engine *e;
	char *name;
	pthread_mutex_t lock;            /* cfg, meta, parts growth */
	struct tfs_topic_config cfg;
	struct tfs_topic_meta meta;
	struct tfs_plog **parts;
	int32_t nparts;                  /* read with acquire: grows only */
	atomic_bool deleted;
	bool config_refused;             /* topics/<topic> did not load: read-only */
	/* No topics/<topic> yet (a partition directory copied out of a broker):
	 * whatever policy the defaults say, the cleaner leaves it alone until a
	 * change writes that file (a config, owner, mode or partition count).
	 * Cleared under lock; read by status without it. */
	atomic_bool unconfigured;
};

struct tfs_engine {
	struct tfs_engine_config cfg;
	char *data_dir;
	int dirfd;
	int cfgfd;                       /* DATA_DIR/topics, -1 if absent (read-only) */
	struct tfs_io *io;
	struct tfs_fdcache *fdcache;
	pthread_rwlock_t lock;           /* topics */
	struct tfs_topic **topics;       /* sorted by name */
	size_t ntopics, captopics;

	struct tfs_cleaner *cleaner;     /* NULL when read-only */
	struct tfs_pids *pids;           /* producer ids; NULL when read-only */
	struct tfs_groups *groups;       /* consumer groups' offsets (groups.h) */
	int64_t groups_checked_mono_ms;  /* the flusher's last expiry run */

	pthread_t flusher;
	bool flusher_running;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	bool stopping;

	pthread_rwlock_t hook_lock;      /* the append hook below: read to call it */
	void (*append_hook)(void *arg, struct tfs_plog *pl);
	void *append_hook_arg;

	pthread_mutex_t start_lock;      /* log-start-offset-checkpoint's writers */
};

/* The registry's helpers, each described at its definition in engine.c. */
void tfs__engine_topic_free(struct tfs_topic *t);
struct tfs_topic *tfs__engine_topic_alloc(struct tfs_engine *e, const char *name);
void tfs__engine_partition_path(char *buf, size_t cap, struct tfs_engine *e, const char *topic, int32_t p);
void tfs__engine_cleaner_register(struct tfs_engine *e, struct tfs_topic *t, int32_t from);
int tfs__engine_open_partition(struct tfs_topic *t, int32_t p, bool create, struct tfs_plog **out);
int tfs__engine_grow_parts(struct tfs_topic *t, int32_t n);
size_t tfs__engine_topic_pos(struct tfs_engine *e, const char *name, bool *found);
int tfs__engine_registry_insert(struct tfs_engine *e, struct tfs_topic *t);
bool tfs__engine_is_deleted_dir(const char *name);
void tfs__engine_remove_partition_dir(struct tfs_engine *e, const char *path);
void tfs__engine_creating_unmark(struct tfs_engine *e, const char *topic);
bool tfs__engine_creating_marked(struct tfs_engine *e, const char *topic);

#endif
