/* engine.c - a data directory: the topic registry and the background flusher.
 *
 * Topics live in a sorted array under e->lock (rwlock). A topic is reference
 * counted; the registry holds one reference, every tfs_engine_topic_get another.
 * Deleting a topic removes it from the registry, marks it deleted, closes its
 * partitions and removes its files; holders of a reference see tfs_topic_deleted().
 *
 * Creation order (crash-safe): the marker topics/.new-<topic>, partition
 * directories, then topics/<topic>, whose appearance commits the topic, then the
 * marker goes. Deletion order: topics/<topic> is rewritten
 * with topicfs.deleting=1 (the commit point: from here on the topic is gone), the
 * partition directories are renamed "<topic>-<N>.<id>-delete" (Kafka's suffix; see
 * delete_dir_name), the config goes, then the renamed directories are removed. At
 * open, "-delete" directories are removed, a topic whose config says deleting is
 * finished (its partition directories and then its config removed), and the
 * empty partition directories of a marked creation without a config (one that did
 * not commit) too; unmarked ones without a config are broker copies, kept.
 *
 * Lock order: e->lock -> t->lock -> the partition's locks (partition_log.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine/cleaner/cleaner.h"
#include "engine/engine.h"
#include "engine/groups/groups.h"
#include "engine/log/log_start.h"
#include "engine/ondisk.h"
#include "engine/producer/producer_ids.h"
#include "io/file_util.h"
#include "io/log.h"

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

/* Every partition's env.appended: hands the append to the engine's hook. */
static void engine_appended(void *arg, struct tfs_plog *pl)
{
	struct tfs_engine *e = arg;

	pthread_rwlock_rdlock(&e->hook_lock);
	if (e->append_hook)
		e->append_hook(e->append_hook_arg, pl);
	pthread_rwlock_unlock(&e->hook_lock);
}

void tfs_engine_set_append_hook(struct tfs_engine *e, void (*fn)(void *arg, struct tfs_plog *pl),
                                void *arg)
{
	pthread_rwlock_wrlock(&e->hook_lock);
	e->append_hook = fn;
	e->append_hook_arg = arg;
	pthread_rwlock_unlock(&e->hook_lock);
}

void tfs_engine_config_defaults(struct tfs_engine_config *c)
{
	memset(c, 0, sizeof(*c));
	c->io_kind = TFS_IO_AUTO;
	c->default_partitions = 1;
	c->max_open_files = DEFAULT_MAX_OPEN_FILES;
	tfs_topic_config_defaults(&c->topic_defaults);
	tfs_cleaner_config_defaults(&c->cleaner);
	tfs_groups_config_defaults(&c->groups);
}

bool tfs_topic_internal(const struct tfs_topic *t)
{
	return strcmp(t->name, TFS_GROUPS_TOPIC) == 0;
}

struct tfs_groups *tfs_engine_groups(struct tfs_engine *e)
{
	return e->groups;
}

/* Logs and refuses a shell's or client's change to an internal topic. */
static int refuse_internal(const char *name, const char *what)
{
	tfs_log_warn("engine", "refusing to %s %s: an internal topic, written only by the "
	             "consumer groups' store", what, name);
	return -EPERM;
}

struct tfs_io *tfs_engine_io(struct tfs_engine *e) { return e->io; }
bool tfs_engine_read_only(const struct tfs_engine *e) { return e->cfg.read_only; }
const char *tfs_engine_data_dir(const struct tfs_engine *e) { return e->data_dir; }
const char *tfs_topic_name(const struct tfs_topic *t) { return t->name; }

int tfs_engine_producer_id(struct tfs_engine *e, int64_t *id, int16_t *epoch)
{
	if (!e->pids)
		return -EROFS;
	return tfs_pids_next(e->pids, id, epoch);
}
bool tfs_topic_deleted(const struct tfs_topic *t) { return atomic_load(&t->deleted); }
bool tfs_topic_config_refused(const struct tfs_topic *t) { return t->config_refused; }
bool tfs_topic_unconfigured(struct tfs_topic *t) { return atomic_load(&t->unconfigured); }

int32_t tfs_topic_partition_count(struct tfs_topic *t)
{
	return __atomic_load_n(&t->nparts, __ATOMIC_ACQUIRE);
}

struct tfs_plog *tfs_topic_partition(struct tfs_topic *t, int32_t p)
{
	struct tfs_plog *pl = NULL;

	if (p < 0 || atomic_load(&t->deleted))
		return NULL;
	pthread_mutex_lock(&t->lock);
	if (p < t->nparts)
		pl = t->parts[p];
	pthread_mutex_unlock(&t->lock);
	return pl;
}

static void topic_free(struct tfs_topic *t)
{
	for (int32_t i = 0; i < t->nparts; i++)
		tfs_plog_close(t->parts[i]);
	free(t->parts);
	pthread_mutex_destroy(&t->lock);
	free(t->name);
	free(t);
}

void tfs_topic_unref(struct tfs_topic *t)
{
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		topic_free(t);
}

static struct tfs_topic *topic_alloc(struct tfs_engine *e, const char *name)
{
	struct tfs_topic *t = calloc(1, sizeof(*t));

	if (!t || !(t->name = strdup(name))) {
		free(t);
		return NULL;
	}
	atomic_init(&t->refs, 1);
	atomic_init(&t->deleted, false);
	t->e = e;
	t->cfg = e->cfg.topic_defaults;
	t->meta.uid = getuid();
	t->meta.gid = getgid();
	t->meta.mode = DEFAULT_TOPIC_MODE;
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

static void partition_path(char *buf, size_t cap, struct tfs_engine *e, const char *topic, int32_t p)
{
	snprintf(buf, cap, "%s/%s-%" PRId32, e->data_dir, topic, p);
}

struct tfs_cleaner *tfs_engine_cleaner(struct tfs_engine *e)
{
	return e->cleaner;
}

/* Hands partitions [from, t->nparts) to the cleaner; a failure only costs cleaning. */
static void cleaner_register(struct tfs_engine *e, struct tfs_topic *t, int32_t from)
{
	if (atomic_load(&t->unconfigured))
		return;                      /* until its config file exists */
	for (int32_t p = from; e->cleaner && !t->config_refused && p < t->nparts; p++) {
		int rc = tfs_cleaner_register(e->cleaner, t->parts[p], t->name, p);
		if (rc < 0)
			tfs_log_error("engine", "cannot hand %s-%" PRId32 " to the cleaner: %s", t->name, p,
			              tfs_strerror(rc));
	}
}


/* After topics/<topic> was written: a topic that had none is the cleaner's
 * from now on, under the policy its config names. Under t->lock. Returns the
 * first partition the cleaner still has to be given (0 if it had none, else
 * from). */
static int32_t configured_now(struct tfs_topic *t, int32_t from)
{
	if (!atomic_exchange(&t->unconfigured, false))
		return from;
	tfs_log_info("engine", "topic %s has its %s/%s file now: compacted or trimmed as its "
	             "cleanup.policy says", t->name, TFS_CONFIG_DIR, t->name);
	return 0;
}

static int open_partition(struct tfs_topic *t, int32_t p, bool create, struct tfs_plog **out)
{
	struct tfs_plog_env env = {
		.io = t->e->io, .fdcache = t->e->fdcache, .config = &t->cfg,
		.read_only = t->e->cfg.read_only || t->config_refused,
	};
	char path[PATH_CAP];

	int rc;

	partition_path(path, sizeof(path), t->e, t->name, p);
	rc = tfs_plog_open(&env, path, create, out);
	if (rc == 0)
		tfs_plog_set_append_hook(*out, engine_appended, t->e);
	if (rc == 0 && tfs_topic_internal(t))
		tfs_plog_set_internal(*out);
	return rc;
}

static int grow_parts(struct tfs_topic *t, int32_t n)
{
	struct tfs_plog **p = realloc(t->parts, sizeof(*p) * (size_t)n);

	if (!p)
		return -ENOMEM;
	t->parts = p;
	return 0;
}

static int topic_cmp(const void *name, const void *elem)
{
	return strcmp(name, (*(struct tfs_topic *const *)elem)->name);
}

/* The index of name in the registry, or where it would go (*found). */
static size_t topic_pos(struct tfs_engine *e, const char *name, bool *found)
{
	return tfs_sorted_pos(e->topics, e->ntopics, sizeof(e->topics[0]), name, topic_cmp, found);
}

static int registry_insert(struct tfs_engine *e, struct tfs_topic *t)
{
	bool found;
	size_t at = topic_pos(e, t->name, &found);

	if (found)
		return -EEXIST;
	if (e->ntopics == e->captopics) {
		size_t cap = e->captopics ? e->captopics * 2 : 16;
		struct tfs_topic **p = realloc(e->topics, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		e->topics = p;
		e->captopics = cap;
	}
	memmove(&e->topics[at + 1], &e->topics[at], (e->ntopics - at) * sizeof(*e->topics));
	e->topics[at] = t;
	e->ntopics++;
	return 0;
}

struct tfs_topic *tfs_engine_topic_get(struct tfs_engine *e, const char *name)
{
	struct tfs_topic *t = NULL;
	bool found;
	size_t at;

	pthread_rwlock_rdlock(&e->lock);
	at = topic_pos(e, name, &found);
	if (found) {
		t = e->topics[at];
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	}
	pthread_rwlock_unlock(&e->lock);
	return t;
}

int tfs_engine_topic_names(struct tfs_engine *e, char ***names, size_t *count)
{
	size_t bytes = 0, n;
	char **arr, *at;

	pthread_rwlock_rdlock(&e->lock);
	n = e->ntopics;
	for (size_t i = 0; i < n; i++)
		bytes += strlen(e->topics[i]->name) + 1;
	arr = malloc(sizeof(*arr) * (n + 1) + bytes);
	if (!arr) {
		pthread_rwlock_unlock(&e->lock);
		return -ENOMEM;
	}
	at = (char *)(arr + n + 1);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(e->topics[i]->name) + 1;
		memcpy(at, e->topics[i]->name, len);
		arr[i] = at;
		at += len;
	}
	arr[n] = NULL;
	pthread_rwlock_unlock(&e->lock);
	*names = arr;
	*count = n;
	return 0;
}

static int save_topic(struct tfs_topic *t)
{
	char path[PATH_CAP];

	snprintf(path, sizeof(path), "%s/%s/%s", t->e->data_dir, TFS_CONFIG_DIR, t->name);
	return tfs_topic_config_save(t->e->io, path, &t->cfg, &t->meta);
}

/* "<topic>-<N>.<id>-delete" (delete_dir_name; Kafka's own have the same shape): a
 * partition directory always ends in "-<N>", so it never ends in the suffix. */
static bool is_deleted_dir(const char *name)
{
	size_t n = strlen(name);
	return n > strlen(DELETE_SUFFIX) && !strcmp(name + n - strlen(DELETE_SUFFIX), DELETE_SUFFIX);
}

/* The name partition p of topic goes by once its deletion began:
 * "<topic>-<p>.<id>-delete", with a random 128-bit id in hex, and the topic cut
 * short so that the whole stays within FILE_NAME_MAX: a topic name may have 249
 * characters and the suffix adds up to 46 (Kafka's UnifiedLog.logDeleteDirName
 * does the same since KAFKA-4893). The name only has to be unique and end in
 * DELETE_SUFFIX; which topic it was is in the log line, not in the name. */
static int delete_dir_name(char *buf, size_t cap, const char *topic, int32_t p)
{
	uint8_t id[DELETE_ID_BYTES];
	char suffix[64];
	size_t n = 0, keep;

	for (size_t got = 0; got < sizeof(id);) {
		ssize_t r = getrandom(id + got, sizeof(id) - got, 0);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			got += (size_t)r;
	}
	n = (size_t)snprintf(suffix, sizeof(suffix), "-%" PRId32 ".", p);
	for (size_t i = 0; i < sizeof(id); i++)
		n += (size_t)snprintf(suffix + n, sizeof(suffix) - n, "%02x", id[i]);
	n += (size_t)snprintf(suffix + n, sizeof(suffix) - n, "%s", DELETE_SUFFIX);
	keep = strlen(topic);
	if (keep > FILE_NAME_MAX - n)
		keep = FILE_NAME_MAX - n;
	if ((size_t)snprintf(buf, cap, "%.*s%s", (int)keep, topic, suffix) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

/* Removes a partition directory (absolute path) and its files through io/, so
 * that the fault and crash suites see each step. Whatever a failure leaves is
 * removed at the next open: a "-delete" directory always, an uncommitted one
 * once it holds no record. */
static void remove_partition_dir(struct tfs_engine *e, const char *path)
{
	int rc = tfs_dir_remove_tree(e->io, AT_FDCWD, path);

	if (rc < 0 && rc != -ENOENT)
		tfs_log_warn("engine", "cannot remove %s: %s; tried again at the next open", path,
		             tfs_strerror(rc));
}

static int topic_create(struct tfs_engine *e, const char *name, int32_t partitions,
                        uid_t uid, gid_t gid, mode_t mode, const struct tfs_topic_config *cfg);
/* topics/.new-<topic>: a creation in progress (docs/format.md §1). Written before
 * the first partition directory and removed after the commit point, it is what
 * tells a creation that never committed from a partition directory copied out of
 * a broker, which holds no topics/ file either and may be just as empty. The
 * leading '.' keeps it out of the topic configs (no topic name starts with '.'),
 * and the name stays within NAME_MAX for a 249-character topic. */
#define CREATING_PREFIX ".new-"

static void creating_name(char *buf, size_t cap, const char *topic)
{
	snprintf(buf, cap, "%s%s", CREATING_PREFIX, topic);
}

/* Writes the marker, durably: the file and its directory entry. */
static int creating_mark(struct tfs_engine *e, const char *topic)
{
	char name[PATH_CAP];
	int fd, rc;

	if (e->cfgfd < 0)
		return -ENOENT;
	creating_name(name, sizeof(name), topic);
	fd = tfs_io_openat(e->io, e->cfgfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return fd;
	rc = tfs_io_fsync(e->io, fd, false);
	close(fd);
	if (rc == 0)
		rc = tfs_io_fsync_dir(e->io, e->cfgfd);
	return rc;
}

/* Removes the marker. Not synced: if it comes back after a crash, the topic's
 * config or the absence of its directories says what it was, and the next open
 * removes it again. */
static void creating_unmark(struct tfs_engine *e, const char *topic)
{
	char name[PATH_CAP];
	int rc;

	creating_name(name, sizeof(name), topic);
	rc = tfs_io_unlinkat(e->io, e->cfgfd, name, 0);
	if (rc < 0 && rc != -ENOENT)
		tfs_log_warn("engine", "cannot remove %s/%s/%s: %s; removed at the next open",
		             e->data_dir, TFS_CONFIG_DIR, name, tfs_strerror(rc));
}

static bool creating_marked(struct tfs_engine *e, const char *topic)
{
	char name[PATH_CAP];

	if (e->cfgfd < 0)
		return false;
	creating_name(name, sizeof(name), topic);
	return faccessat(e->cfgfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int tfs_engine_topic_create(struct tfs_engine *e, const char *name, int32_t partitions,
                            uid_t uid, gid_t gid, mode_t mode)
{
	if (strcmp(name, TFS_GROUPS_TOPIC) == 0)
		return refuse_internal(name, "create");
	return topic_create(e, name, partitions, uid, gid, mode, NULL);
}

int tfs_engine_internal_topic_create(struct tfs_engine *e, const char *name, int32_t partitions,
                                     uid_t uid, gid_t gid, mode_t mode,
                                     const struct tfs_topic_config *cfg)
{
	return topic_create(e, name, partitions, uid, gid, mode, cfg);
}

/* cfg: the topic's config, NULL for the mount's defaults. */
static int topic_create(struct tfs_engine *e, const char *name, int32_t partitions,
                        uid_t uid, gid_t gid, mode_t mode, const struct tfs_topic_config *cfg)
{
	struct tfs_topic *t = NULL;
	char path[PATH_CAP];
	int32_t made = 0;
	bool marked = false;
	int rc;

	if (e->cfg.read_only)
		return TFS_EREADONLY;
	if (!tfs_topic_name_valid(name)) {
		tfs_log_warn("engine", "refusing topic name \"%s\": Kafka allows 1-249 of "
		             "[A-Za-z0-9._-], not starting with '.'", name);
		return -EINVAL;
	}
	if (partitions <= 0)
		partitions = e->cfg.default_partitions;
	if (partitions > TFS_MAX_PARTITIONS)
		return -EINVAL;
	/* A log start offset the file still holds for an older topic of this name (a
	 * deletion whose rewrite failed or was cut by a crash) must not apply to the
	 * new one: the file is rewritten from the topics that exist first. */
	if (faccessat(e->dirfd, TFS_LOG_START_FILE, F_OK, 0) == 0) {
		pthread_mutex_lock(&e->start_lock);
		rc = tfs__log_start_write(e, e->io, e->dirfd, NULL, 0, 0);
		pthread_mutex_unlock(&e->start_lock);
		if (rc < 0)
			return rc;
	}
	pthread_rwlock_wrlock(&e->lock);
	{
		bool found;
		topic_pos(e, name, &found);
		if (found) {
			rc = -EEXIST;
			goto out;
		}
	}
	t = topic_alloc(e, name);
	if (!t || grow_parts(t, partitions) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	if (cfg)
		t->cfg = *cfg;
	t->meta.uid = uid;
	t->meta.gid = gid;
	t->meta.mode = mode & 07777;
	t->meta.partitions = partitions;
	rc = creating_mark(e, name);
	if (rc < 0)
		goto out;
	marked = true;
	for (made = 0; made < partitions; made++) {
		rc = open_partition(t, made, true, &t->parts[made]);
		if (rc < 0)
			goto out;
		t->nparts = made + 1;
	}
	rc = tfs_io_fsync_dir(e->io, e->dirfd);
	if (rc == 0)
		rc = save_topic(t);              /* the commit point */
	if (rc == 0)
		rc = registry_insert(e, t);
	if (rc == 0)
		cleaner_register(e, t, 0);
	if (rc == 0)
		creating_unmark(e, name);
out:
	pthread_rwlock_unlock(&e->lock);
	if (rc < 0 && t) {
		bool gone = true;
		for (int32_t i = 0; i <= t->nparts && i < partitions; i++) {
			if (i < t->nparts)
				tfs_plog_close(t->parts[i]);
			partition_path(path, sizeof(path), e, name, i);
			remove_partition_dir(e, path);
			gone &= faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
		}
		/* the marker goes only with the last directory: what a failed removal
		 * left is removed at the next open, which the marker asks for */
		if (marked && gone && tfs_io_fsync_dir(e->io, e->dirfd) == 0)
			creating_unmark(e, name);
		t->nparts = 0;
		topic_free(t);
		tfs_log_error("engine", "cannot create topic %s: %s", name, tfs_strerror(rc));
	} else if (rc == 0) {
		tfs_log_info("engine", "created topic %s with %" PRId32 " partitions", name, partitions);
	}
	return rc;
}

/* The steps of a deletion after its commit point (topics/<topic> says deleting):
 * rename each partition directory of t, whose names were chosen beforehand, and
 * remove the config. Called with e->lock held for writing. Returns the first
 * error; what is left is finished at the next open. */
static int delete_committed(struct tfs_engine *e, struct tfs_topic *t, char (*doomed)[FILE_NAME_MAX + 1],
                            bool *renamed)
{
	char path[PATH_CAP];
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	/* no pass may run on a partition once its directory starts going (under
	 * t->lock: an add_partition that saw the topic alive has registered by now) */
	for (int32_t i = 0; e->cleaner && i < t->nparts; i++)
		tfs_cleaner_unregister(e->cleaner, t->parts[i]);
	for (int32_t i = 0; i < t->nparts; i++) {
		partition_path(path, sizeof(path), e, t->name, i);
		int r = tfs_io_renameat(e->io, AT_FDCWD, path, e->dirfd, doomed[i]);
		renamed[i] = r == 0;
		if (r < 0 && rc == 0)
			rc = r;
	}
	pthread_mutex_unlock(&t->lock);
	if (rc == 0)
		rc = tfs_io_fsync_dir(e->io, e->dirfd);
	if (rc == 0)
		rc = tfs_io_unlinkat(e->io, e->cfgfd, t->name, 0);
	if (rc == 0)
		rc = tfs_io_fsync_dir(e->io, e->cfgfd);
	return rc;
}

int tfs_engine_topic_delete(struct tfs_engine *e, const char *name, bool force)
{
	struct tfs_topic *t;
	char path[PATH_CAP];
	char (*doomed)[FILE_NAME_MAX + 1] = NULL;
	bool *renamed = NULL;
	int32_t nparts = 0;
	bool found;
	size_t at;
	int rc = 0;

	if (e->cfg.read_only)
		return TFS_EREADONLY;
	if (strcmp(name, TFS_GROUPS_TOPIC) == 0)
		return refuse_internal(name, "delete");
	pthread_rwlock_wrlock(&e->lock);
	at = topic_pos(e, name, &found);
	if (!found) {
		pthread_rwlock_unlock(&e->lock);
		return -ENOENT;
	}
	t = e->topics[at];
	if (t->config_refused) {
		pthread_rwlock_unlock(&e->lock);
		tfs_log_error("engine", "cannot delete topic %s: its config file did not load; fix "
		              "or remove %s/%s/%s and remount", name, e->data_dir, TFS_CONFIG_DIR, name);
		return TFS_EREADONLY;
	}
	if (!force) {
		for (int32_t i = 0; i < t->nparts; i++) {
			if (!tfs_plog_keys_trusted(t->parts[i])) {
				/* a count of zero could be keys the directory missed */
				pthread_rwlock_unlock(&e->lock);
				tfs_log_error("engine", "cannot delete topic %s: the key directory of "
				              "partition %d missed writes (out of memory); remount first",
				              name, i);
				return -EIO;
			}
			if (tfs_plog_live_keys(t->parts[i]) > 0) {
				pthread_rwlock_unlock(&e->lock);
				return -ENOTEMPTY;
			}
		}
	}
	/* Everything that can fail without touching a file comes first. */
	pthread_mutex_lock(&t->lock);
	nparts = t->nparts;
	doomed = calloc(nparts > 0 ? (size_t)nparts : 1, sizeof(*doomed));
	renamed = calloc(nparts > 0 ? (size_t)nparts : 1, sizeof(*renamed));
	rc = doomed && renamed ? 0 : -ENOMEM;
	for (int32_t i = 0; rc == 0 && i < nparts; i++)
		rc = delete_dir_name(doomed[i], sizeof(doomed[i]), name, i);
	/* The commit point: once the config says deleting, the deletion happens, now
	 * or at the next open. Holders of the topic stop using its partitions. */
	if (rc == 0) {
		t->meta.deleting = true;
		rc = save_topic(t);
		if (rc < 0)
			t->meta.deleting = false;
		else
			atomic_store(&t->deleted, true);
	}
	pthread_mutex_unlock(&t->lock);
	if (rc < 0) {
		pthread_rwlock_unlock(&e->lock);
		tfs_log_error("engine", "cannot delete topic %s: %s; nothing changed", name,
		              tfs_strerror(rc));
		free(doomed);
		free(renamed);
		return rc;
	}
	memmove(&e->topics[at], &e->topics[at + 1], (e->ntopics - at - 1) * sizeof(*e->topics));
	e->ntopics--;
	rc = delete_committed(e, t, doomed, renamed);
	pthread_rwlock_unlock(&e->lock);
	if (rc < 0)
		tfs_log_error("engine", "deleting topic %s failed half way: %s; the rest is "
		              "finished at the next mount", name, tfs_strerror(rc));
	else
		tfs_log_info("engine", "deleted topic %s", name);
	if (faccessat(e->dirfd, TFS_LOG_START_FILE, F_OK, 0) == 0) {
		/* its log start offsets go with it (a new topic of that name starts at 0) */
		pthread_mutex_lock(&e->start_lock);
		(void)tfs__log_start_write(e, e->io, e->dirfd, NULL, 0, 0);
		pthread_mutex_unlock(&e->start_lock);
	}
	/* Files go now: readers that still hold a partition keep their descriptors;
	 * what a failure leaves is removed at the next open. */
	for (int32_t i = 0; i < nparts; i++) {
		if (!renamed[i])
			continue;
		snprintf(path, sizeof(path), "%s/%s", e->data_dir, doomed[i]);
		remove_partition_dir(e, path);
	}
	free(doomed);
	free(renamed);
	tfs_topic_unref(t);
	return rc;
}

int tfs_topic_add_partition(struct tfs_topic *t, int32_t partition)
{
	struct tfs_plog *pl = NULL;
	int rc;

	if (t->e->cfg.read_only || t->config_refused)
		return TFS_EREADONLY;
	if (tfs_topic_internal(t))      /* a group's partition follows from the count */
		return refuse_internal(t->name, "add a partition to");
	pthread_mutex_lock(&t->lock);
	if (atomic_load(&t->deleted)) {
		rc = -ENOENT;
		goto out;
	}
	if (partition != t->nparts || partition >= TFS_MAX_PARTITIONS) {
		rc = -EINVAL;
		goto out;
	}
	rc = grow_parts(t, t->nparts + 1);
	if (rc == 0)
		rc = open_partition(t, partition, true, &pl);
	if (rc == 0)
		rc = tfs_io_fsync_dir(t->e->io, t->e->dirfd);
	if (rc == 0) {
		t->meta.partitions = partition + 1;
		rc = save_topic(t);
		if (rc < 0)
			t->meta.partitions = partition;
	}
	if (rc == 0) {
		t->parts[partition] = pl;
		__atomic_store_n(&t->nparts, partition + 1, __ATOMIC_RELEASE);
		cleaner_register(t->e, t, configured_now(t, partition));
		tfs_log_info("engine", "added partition %" PRId32 " to topic %s", partition, t->name);
	} else {
		tfs_plog_close(pl);
	}
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void tfs_topic_get_config(struct tfs_topic *t, struct tfs_topic_config *c)
{
	pthread_mutex_lock(&t->lock);
	*c = t->cfg;
	pthread_mutex_unlock(&t->lock);
}

void tfs_topic_get_meta(struct tfs_topic *t, struct tfs_topic_meta *m)
{
	pthread_mutex_lock(&t->lock);
	*m = t->meta;
	pthread_mutex_unlock(&t->lock);
}

/* Persists a candidate config/meta and, on success, makes it current. */
static int topic_commit(struct tfs_topic *t, const struct tfs_topic_config *c,
                        const struct tfs_topic_meta *m)
{
	struct tfs_topic_config old_c = t->cfg;
	struct tfs_topic_meta old_m = t->meta;
	int rc;

	if (t->e->cfg.read_only || t->config_refused)
		return TFS_EREADONLY;       /* the file that did not load stays as it is */
	if (atomic_load(&t->deleted))
		return -ENOENT;
	t->cfg = *c;
	t->meta = *m;
	rc = save_topic(t);
	if (rc < 0) {
		t->cfg = old_c;
		t->meta = old_m;
		return rc;
	}
	for (int32_t i = 0; i < t->nparts; i++)
		tfs_plog_set_config(t->parts[i], &t->cfg);
	if (configured_now(t, t->nparts) == 0)
		cleaner_register(t->e, t, 0);
	return 0;
}

int tfs_topic_set_config(struct tfs_topic *t, const char *name, const char *value)
{
	struct tfs_topic_config c;
	int rc;

	if (tfs_topic_internal(t))
		return refuse_internal(t->name, "change the config of");
	pthread_mutex_lock(&t->lock);
	c = t->cfg;
	rc = tfs_topic_config_set(&c, name, value);
	if (rc == 0)
		rc = topic_commit(t, &c, &t->meta);
	pthread_mutex_unlock(&t->lock);
	if (rc == 0)
		tfs_log_info("engine", "topic %s: %s=%s", t->name, name, value);
	return rc;
}

int tfs_topic_set_configs(struct tfs_topic *t, bool from_defaults, const char *const *names,
                          const char *const *values, size_t n, bool validate_only, size_t *bad)
{
	struct tfs_topic_config c;
	char def[TFS_TOPIC_CONFIG_VALUE_MAX];
	int rc = 0;

	*bad = n;
	if (tfs_topic_internal(t))
		return refuse_internal(t->name, "change the config of");
	pthread_mutex_lock(&t->lock);
	c = from_defaults ? t->e->cfg.topic_defaults : t->cfg;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *v = values[i];
		if (!v) {
			rc = tfs_topic_config_get(&t->e->cfg.topic_defaults, names[i], def, sizeof(def));
			v = def;
		}
		if (rc == 0)
			rc = tfs_topic_config_set(&c, names[i], v);
		if (rc < 0)
			*bad = i;
	}
	if (rc == 0 && !validate_only)
		rc = topic_commit(t, &c, &t->meta);
	else if (rc == 0 && (t->e->cfg.read_only || t->config_refused))
		rc = TFS_EREADONLY;
	pthread_mutex_unlock(&t->lock);
	if (rc == 0 && !validate_only)
		for (size_t i = 0; i < n; i++)
			tfs_log_info("engine", "topic %s: %s=%s", t->name, names[i],
			             values[i] ? values[i] : "(default)");
	return rc;
}

void tfs_engine_topic_defaults(const struct tfs_engine *e, struct tfs_topic_config *out)
{
	*out = e->cfg.topic_defaults;
}

int tfs_topic_set_owner(struct tfs_topic *t, uid_t uid, gid_t gid)
{
	struct tfs_topic_meta m;
	int rc;

	pthread_mutex_lock(&t->lock);
	m = t->meta;
	if (uid != (uid_t)-1)
		m.uid = uid;
	if (gid != (gid_t)-1)
		m.gid = gid;
	rc = topic_commit(t, &t->cfg, &m);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int tfs_topic_set_mode(struct tfs_topic *t, mode_t mode)
{
	struct tfs_topic_meta m;
	int rc;

	pthread_mutex_lock(&t->lock);
	m = t->meta;
	m.mode = mode & 07777;
	rc = topic_commit(t, &t->cfg, &m);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int tfs_engine_sync(struct tfs_engine *e)
{
	int rc = 0;

	pthread_rwlock_rdlock(&e->lock);
	for (size_t i = 0; i < e->ntopics; i++) {
		struct tfs_topic *t = e->topics[i];
		for (int32_t p = 0; p < tfs_topic_partition_count(t); p++) {
			struct tfs_plog *pl = tfs_topic_partition(t, p);   /* t->parts may grow */
			int r = pl ? tfs_plog_sync(pl) : 0;
			if (r < 0 && rc == 0)
				rc = r;
		}
	}
	pthread_rwlock_unlock(&e->lock);
	return rc;
}

/* ---- open ---- */

/* Whether a partition directory holds a record: a log file that is not empty. A
 * creation makes its segment files empty and writes nothing before its commit
 * point, so a directory without a config and without a record is one that never
 * committed, however far it got (docs/format.md). */
static bool dir_has_records(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	struct stat st;
	bool any = false;

	while (d && !any && (de = readdir(d)))
		if (strstr(de->d_name, ".log") && fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			any = st.st_size > 0;
	if (d)
		closedir(d);
	return any;
}

/* Finds the topic being assembled at open time, creating it. */
static struct tfs_topic *open_topic_entry(struct tfs_engine *e, const char *name)
{
	bool found;
	size_t at = topic_pos(e, name, &found);
	struct tfs_topic *t;

	if (found)
		return e->topics[at];
	t = topic_alloc(e, name);
	if (!t)
		return NULL;
	t->meta.partitions = 0;
	t->nparts = -1;                 /* "not loaded yet" marker during open */
	if (registry_insert(e, t) < 0) {
		topic_free(t);
		return NULL;
	}
	return t;
}

/* Whether topics/<name> is the temporary file of a config write that did not
 * finish ("<topic>.tmp", tfs_file_replace), not the config of a topic whose own
 * name ends in ".tmp" (whose partition 0 directory is there). */
static bool is_stale_tmp(const struct tfs_engine *e, const char *name)
{
	size_t n = strlen(name);
	char part0[FILE_NAME_MAX + 8];

	if (n <= 4 || strcmp(name + n - 4, ".tmp") != 0)
		return false;
	snprintf(part0, sizeof(part0), "%s-0", name);
	return faccessat(e->dirfd, part0, F_OK, AT_SYMLINK_NOFOLLOW) < 0;
}

/* Reads DATA_DIR/topics/: one file per committed topic. */
static int load_configs(struct tfs_engine *e)
{
	DIR *d;
	struct dirent *de;
	char path[PATH_CAP];
	int rc = 0;

	if (e->cfgfd < 0)
		return 0;
	d = tfs_dir_stream(e->cfgfd);
	if (!d)
		return -errno;
	rewinddir(d);
	while ((de = readdir(d))) {
		struct tfs_topic *t;
		if (!tfs_topic_name_valid(de->d_name) || strchr(de->d_name, '.') == de->d_name)
			continue;
		if (is_stale_tmp(e, de->d_name)) {
			/* a replace that did not finish: the file it replaced (if any)
			 * stands whole, so the copy goes */
			if (!e->cfg.read_only && tfs_io_unlinkat(e->io, e->cfgfd, de->d_name, 0) == 0)
				tfs_log_info("engine", "removed %s/%s/%s left by an unfinished write",
				             e->data_dir, TFS_CONFIG_DIR, de->d_name);
			continue;
		}
		t = open_topic_entry(e, de->d_name);
		if (!t) {
			rc = -ENOMEM;
			break;
		}
		snprintf(path, sizeof(path), "%s/%s/%s", e->data_dir, TFS_CONFIG_DIR, de->d_name);
		rc = tfs_topic_config_load(path, &t->cfg, &t->meta);
		if (rc < 0) {
			/* Its owner, mode and configs are unknown: guessing them would
			 * publish a private topic or let the next save overwrite the file.
			 * The topic is served read-only, to its owner only, as it is. */
			tfs_log_error("engine", "cannot load %s: %s; topic %s is read-only (mode %04o) "
			              "and the file is left as it is: fix it and remount", path,
			              tfs_strerror(rc), de->d_name, REFUSED_TOPIC_MODE);
			t->cfg = e->cfg.topic_defaults;
			t->meta.mode = REFUSED_TOPIC_MODE;
			t->config_refused = true;
			rc = 0;
		} else if (t->meta.deleting) {
			t->nparts = -3;     /* a deletion committed: finish_deletions */
		} else {
			t->nparts = -2;     /* has a config */
		}
	}
	closedir(d);
	return rc;
}

/* Removes creation markers that no longer mean anything: of a topic whose config
 * exists (the creation committed), or of which no partition directory exists (the
 * creation stopped before making one). A marker beside directories that are still
 * there (removal failed) stays, so the next open tries again. */
static void sweep_creating_marks(struct tfs_engine *e)
{
	size_t plen = strlen(CREATING_PREFIX);
	DIR *d;
	struct dirent *de;

	if (e->cfgfd < 0 || !(d = tfs_dir_stream(e->cfgfd)))
		return;
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *topic = de->d_name + plen;
		bool found = false;
		size_t at;

		if (strncmp(de->d_name, CREATING_PREFIX, plen) != 0)
			continue;
		at = topic_pos(e, topic, &found);
		if (found && (atomic_load(&e->topics[at]->unconfigured) ||
		              e->topics[at]->meta.partitions <= 0))
			continue;
		if (tfs_io_unlinkat(e->io, e->cfgfd, de->d_name, 0) == 0)
			tfs_log_info("engine", "removed %s/%s/%s left by a creation", e->data_dir,
			             TFS_CONFIG_DIR, de->d_name);
	}
	closedir(d);
}

/* Finishes the deletions that had committed (nparts == -3) when the data directory
 * was last closed: their partition directories went in load_topics' pass 1; the
 * config goes now, and the topic with it. A read-only open leaves them out. */
static void finish_deletions(struct tfs_engine *e)
{
	bool any = false;

	for (size_t i = 0; i < e->ntopics; i++) {
		struct tfs_topic *t = e->topics[i];
		int rc = 0;
		if (t->nparts != -3)
			continue;
		t->nparts = 0;
		t->meta.partitions = 0;
		if (e->cfg.read_only) {
			tfs_log_warn("engine", "topic %s was being deleted; left out (a writable mount "
			             "finishes the deletion)", t->name);
			continue;
		}
		rc = tfs_io_fsync_dir(e->io, e->dirfd);
		if (rc == 0)
			rc = tfs_io_unlinkat(e->io, e->cfgfd, t->name, 0);
		if (rc < 0)
			tfs_log_error("engine", "cannot finish deleting topic %s: %s; left out, tried "
			              "again at the next mount", t->name, tfs_strerror(rc));
		else
			tfs_log_info("engine", "finished deleting topic %s (interrupted before)", t->name);
		any |= rc == 0;
	}
	if (any)
		tfs_io_fsync_dir(e->io, e->cfgfd);
}

static int load_topics(struct tfs_engine *e)
{
	DIR *d = tfs_dir_stream(e->dirfd);
	struct dirent *de;
	char topic[TFS_TOPIC_NAME_MAX + 1], path[PATH_CAP];
	int rc = 0;

	if (!d)
		return -errno;
	/* pass 0: the config files name the committed topics */
	rc = load_configs(e);
	if (rc < 0) {
		closedir(d);
		return rc;
	}
	/* pass 1: partition directories; those of topics without a config are
	 * broker copies or creations that did not commit */
	while ((de = readdir(d))) {
		int32_t p;
		if (de->d_name[0] == '.')
			continue;
		if (is_deleted_dir(de->d_name) && !e->cfg.read_only) {
			snprintf(path, sizeof(path), "%s/%s", e->data_dir, de->d_name);
			tfs_log_info("engine", "removing %s left by a topic deletion", path);
			remove_partition_dir(e, path);
			continue;
		}
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
			struct tfs_topic *t;
			if (tfs_partition_dir_parse(de->d_name, topic, sizeof(topic), &p) < 0)
				continue;
			t = open_topic_entry(e, topic);
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			if (t->nparts == -3) {
				/* its topic's deletion committed: this directory goes first */
				if (!e->cfg.read_only) {
					snprintf(path, sizeof(path), "%s/%s", e->data_dir, de->d_name);
					tfs_log_info("engine", "removing %s: its topic %s was being deleted",
					             path, topic);
					remove_partition_dir(e, path);
				}
				continue;
			}
			/* with a config, its count rules: a directory past it is an add
			 * that did not commit, and stays unused */
			if (p + 1 > t->meta.partitions && t->nparts != -2)
				t->meta.partitions = p + 1;
		}
	}
	closedir(d);
	if (rc < 0)
		return rc;
	finish_deletions(e);
	/* pass 2: open the partitions of every topic */
	for (size_t i = 0; i < e->ntopics; i++) {
		struct tfs_topic *t = e->topics[i];
		bool has_config = t->nparts == -2;
		int32_t want = t->meta.partitions;

		if (e->cfg.progress)
			e->cfg.progress(e->cfg.progress_arg, i, e->ntopics);

		if (!has_config && !t->config_refused) {
			/* no config: a creation that never committed (its marker says so,
			 * and it wrote no record), or a topic copied from a Kafka broker,
			 * which is left as it is, empty or not */
			bool any = false;
			for (int32_t p = 0; p < want; p++) {
				partition_path(path, sizeof(path), e, t->name, p);
				any |= dir_has_records(path);
			}
			if (!any && creating_marked(e, t->name)) {
				if (!e->cfg.read_only) {
					bool gone = true;
					for (int32_t p = 0; p < want; p++) {
						partition_path(path, sizeof(path), e, t->name, p);
						remove_partition_dir(e, path);
						gone &= faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
					}
					/* the directories are gone for good before the marker goes */
					if (gone && tfs_io_fsync_dir(e->io, e->dirfd) == 0)
						creating_unmark(e, t->name);
				}
				tfs_log_info("engine", "removed uncommitted topic %s", t->name);
				t->nparts = 0;
				t->meta.partitions = 0;
				continue;
			}
			atomic_store(&t->unconfigured, true);
			tfs_log_warn("engine", "topic %s has no %s/%s file (a copy from a broker?): "
			             "read with the defaults, neither compacted nor trimmed until a "
			             "config is set", t->name, TFS_CONFIG_DIR, t->name);
		}
		t->nparts = 0;
		if (want <= 0)
			continue;
		if (grow_parts(t, want) < 0)
			return -ENOMEM;
		for (int32_t p = 0; p < want; p++) {
			partition_path(path, sizeof(path), e, t->name, p);
			rc = open_partition(t, p, !e->cfg.read_only, &t->parts[p]);
			if (rc < 0) {
				tfs_log_error("engine", "cannot open %s: %s; topic %s is left out", path,
				              tfs_strerror(rc), t->name);
				break;
			}
			t->nparts = p + 1;
		}
		if (rc < 0) {
			for (int32_t p = 0; p < t->nparts; p++)
				tfs_plog_close(t->parts[p]);
			t->nparts = 0;
			t->meta.partitions = 0;
			rc = 0;
		}
	}
	if (!e->cfg.read_only)
		sweep_creating_marks(e);
	/* drop topics that ended up with no partitions */
	for (size_t i = 0; i < e->ntopics;) {
		if (e->topics[i]->nparts == 0) {
			topic_free(e->topics[i]);
			memmove(&e->topics[i], &e->topics[i + 1], (e->ntopics - i - 1) * sizeof(*e->topics));
			e->ntopics--;
		} else {
			i++;
		}
	}
	return 0;
}

/* The fd cache's bound: the configured one, lowered to a share of the process's
 * descriptor limit (logged), so that the cache reaches its own bound before the
 * process reaches the kernel's. */
static unsigned fdcache_bound(unsigned want)
{
	struct rlimit rl;
	uint64_t cap;

	if (want == 0)
		want = DEFAULT_MAX_OPEN_FILES;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return want;
	cap = (uint64_t)rl.rlim_cur * FDCACHE_LIMIT_SHARE_PERCENT / 100;
	if (cap < FDCACHE_MIN_OPEN)
		cap = FDCACHE_MIN_OPEN;
	if (want <= cap)
		return want;
	tfs_log_warn("engine", "max_open_files=%u is above %d%% of the descriptor limit (%llu): "
	             "using %llu", want, FDCACHE_LIMIT_SHARE_PERCENT,
	             (unsigned long long)rl.rlim_cur, (unsigned long long)cap);
	return (unsigned)cap;
}

/* A writable open of a data directory on a read-only filesystem would fail file
 * by file; say so once instead, and name the way out. */
static int check_writable(const struct tfs_engine *e)
{
	struct statvfs vfs;

	if (fstatvfs(e->dirfd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) {
		tfs_log_error("engine", "data directory %s is on a read-only filesystem: mount "
		              "with -o ro to read it", e->data_dir);
		return -EROFS;
	}
	return 0;
}

static void *flusher_main(void *arg)
{
	struct tfs_engine *e = arg;

	pthread_mutex_lock(&e->stop_lock);
	while (!e->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += FLUSH_TICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&e->stop_cond, &e->stop_lock, &ts);
		if (e->stopping)
			break;
		pthread_mutex_unlock(&e->stop_lock);
		pthread_rwlock_rdlock(&e->lock);
		for (size_t i = 0; i < e->ntopics; i++) {
			struct tfs_topic *t = e->topics[i];
			int64_t flush_ms;
			pthread_mutex_lock(&t->lock);
			flush_ms = t->cfg.flush_ms;
			pthread_mutex_unlock(&t->lock);
			for (int32_t p = 0; p < tfs_topic_partition_count(t); p++) {
				struct tfs_plog *pl = tfs_topic_partition(t, p);   /* t->parts may grow */
				if (pl)
					tfs_plog_flush_if_older(pl, flush_ms);
			}
		}
		pthread_rwlock_unlock(&e->lock);
		if (tfs_mono_ms() - e->groups_checked_mono_ms >= e->cfg.groups.check_interval_ms) {
			e->groups_checked_mono_ms = tfs_mono_ms();
			tfs_groups_expire(e->groups, tfs_now_ms());   /* logs its own errors */
		}
		pthread_mutex_lock(&e->stop_lock);
	}
	pthread_mutex_unlock(&e->stop_lock);
	return NULL;
}

int tfs_engine_open(const struct tfs_engine_config *cfg, struct tfs_engine **out)
{
	struct tfs_engine *e = calloc(1, sizeof(*e));
	int rc;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	e->cfg = *cfg;
	e->dirfd = -1;
	e->cfgfd = -1;
	pthread_rwlock_init(&e->lock, NULL);
	pthread_rwlock_init(&e->hook_lock, NULL);
	pthread_mutex_init(&e->stop_lock, NULL);
	pthread_mutex_init(&e->start_lock, NULL);
	pthread_cond_init(&e->stop_cond, NULL);
	/* first, so that every change to the disk, the directories made here too,
	 * goes through it */
	rc = tfs_io_create(cfg->io_kind, &e->io);
	if (rc < 0) {
		tfs_log_error("engine", "cannot start the %s io backend: %s",
		              tfs_io_kind_name(cfg->io_kind), tfs_strerror(rc));
		goto fail;
	}
	if (cfg->fault_spec && (rc = tfs_io_set_fault(e->io, cfg->fault_spec)) < 0) {
		tfs_log_error("engine", "bad fault spec \"%s\"", cfg->fault_spec);
		goto fail;
	}
	e->data_dir = realpath(cfg->data_dir, NULL);
	rc = e->data_dir ? 0 : -errno;
	if (rc == -ENOENT && cfg->create_data_dir && !cfg->read_only) {
		rc = tfs_io_mkdirat(e->io, AT_FDCWD, cfg->data_dir, DATA_DIR_MODE);
		if (rc == 0) {
			tfs_log_info("engine", "created data directory %s", cfg->data_dir);
			e->data_dir = realpath(cfg->data_dir, NULL);
			rc = e->data_dir ? 0 : -errno;
		}
	}
	if (rc < 0) {
		if (rc == -ENOENT && !cfg->create_data_dir)
			tfs_log_error("engine", "data directory %s does not exist: create it, or ask "
			              "for it with create_data_dir", cfg->data_dir);
		else
			tfs_log_error("engine", "cannot open data directory %s: %s", cfg->data_dir,
			              tfs_strerror(rc));
		goto fail;
	}
	e->cfg.data_dir = e->data_dir;
	e->dirfd = open(e->data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (e->dirfd < 0) {
		rc = -errno;
		tfs_log_error("engine", "cannot open data directory %s: %s", e->data_dir,
		              tfs_strerror(rc));
		goto fail;
	}
	if (!cfg->read_only && (rc = check_writable(e)) < 0)
		goto fail;
	if (!cfg->read_only && (rc = tfs_io_mkdirat(e->io, e->dirfd, TFS_CONFIG_DIR, DATA_DIR_MODE)) < 0 &&
	    rc != -EEXIST) {
		tfs_log_error("engine", "cannot create %s/%s: %s", e->data_dir, TFS_CONFIG_DIR,
		              tfs_strerror(rc));
		goto fail;
	}
	rc = 0;
	e->cfgfd = openat(e->dirfd, TFS_CONFIG_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	e->fdcache = tfs_fdcache_create(e->io, fdcache_bound(cfg->max_open_files));
	if (!e->fdcache) {
		rc = -ENOMEM;
		goto fail;
	}
	if (cfg->read_only)
		tfs_fdcache_set_read_only(e->fdcache);
	rc = load_topics(e);
	if (rc == 0)
		rc = tfs__log_start_load(e, e->io, e->dirfd, cfg->read_only);
	if (rc < 0)
		goto fail;
	rc = tfs_groups_open(e, &cfg->groups, &e->groups);
	if (rc < 0)
		goto fail;
	e->groups_checked_mono_ms = tfs_mono_ms();
	if (!cfg->read_only) {
		rc = tfs_pids_open(e->io, e->dirfd, &e->pids);
		if (rc < 0)
			goto fail;
		rc = tfs_cleaner_create(e->io, e->data_dir, &cfg->cleaner, &e->cleaner);
		if (rc < 0) {
			tfs_log_error("engine", "cannot create the cleaner: %s", tfs_strerror(rc));
			goto fail;
		}
		for (size_t i = 0; i < e->ntopics; i++)
			cleaner_register(e, e->topics[i], 0);
		rc = tfs_cleaner_start(e->cleaner);
		if (rc < 0)
			goto fail;

		rc = pthread_create(&e->flusher, NULL, flusher_main, e);
		if (rc != 0) {
			rc = -rc;
			goto fail;
		}
		e->flusher_running = true;
	}
	tfs_log_info("engine", "opened %s (%zu topics, io %s%s)", e->data_dir, e->ntopics,
	             tfs_io_kind_name(tfs_io_kind_of(e->io)), cfg->read_only ? ", read-only" : "");
	*out = e;
	return 0;
fail:
	tfs_engine_close(e);
	return rc;
}

void tfs_engine_close(struct tfs_engine *e)
{
	if (!e)
		return;
	if (e->flusher_running) {
		pthread_mutex_lock(&e->stop_lock);
		e->stopping = true;
		pthread_cond_signal(&e->stop_cond);
		pthread_mutex_unlock(&e->stop_lock);
		pthread_join(e->flusher, NULL);
	}
	tfs_cleaner_destroy(e->cleaner);   /* before the partitions it borrows close */
	e->cleaner = NULL;
	tfs_groups_close(e->groups);       /* holds a reference to its topic */
	e->groups = NULL;
	for (size_t i = 0; i < e->ntopics; i++)
		tfs_topic_unref(e->topics[i]);
	free(e->topics);
	tfs_pids_close(e->pids);
	tfs_fdcache_destroy(e->fdcache);
	tfs_io_destroy(e->io);
	if (e->dirfd >= 0)
		close(e->dirfd);
	if (e->cfgfd >= 0)
		close(e->cfgfd);
	pthread_rwlock_destroy(&e->lock);
	pthread_rwlock_destroy(&e->hook_lock);
	pthread_mutex_destroy(&e->stop_lock);
	pthread_mutex_destroy(&e->start_lock);
	pthread_cond_destroy(&e->stop_cond);
	free(e->data_dir);
	free(e);
}

/* The keys tfs_plog_delete_below reports, copied, so that the caller hears of
 * them once e->start_lock is released: its callback may wait on the kernel (a
 * notification), and a request in the kernel may wait on that lock. */
struct gone_keys {
	struct tfs_slice *keys;
	size_t n;
	int err;
};

static void gone_copy(void *arg, const struct tfs_slice *keys, size_t n)
{
	struct gone_keys *g = arg;

	g->keys = calloc(n ? n : 1, sizeof(*g->keys));
	for (size_t i = 0; g->keys && i < n; i++) {
		uint8_t *p = malloc(keys[i].len ? keys[i].len : 1);
		if (!p) {
			g->err = -ENOMEM;
			break;
		}
		if (keys[i].len)
			memcpy(p, keys[i].p, keys[i].len);
		g->keys[g->n++] = tfs_slice_make(p, keys[i].len);
	}
	if (!g->keys || g->err)
		tfs_log_warn("engine", "out of memory: the mount may show %zu vanished keys until "
		             "its caches expire", n - g->n);
}

int tfs_engine_delete_records(struct tfs_engine *e, struct tfs_topic *t, int32_t partition,
                              tfs_offset_t offset,
                              void (*gone)(void *arg, const struct tfs_slice *keys, size_t n),
                              void *arg, tfs_offset_t *low)
{
	struct gone_keys g = { 0 };
	struct tfs_plog_stats st;
	struct tfs_plog *pl;
	int rc;

	*low = -1;
	if (e->cfg.read_only)
		return TFS_EREADONLY;
	if (tfs_topic_internal(t))
		return refuse_internal(t->name, "delete records of");
	if (partition < 0 || partition >= tfs_topic_partition_count(t) ||
	    !(pl = tfs_topic_partition(t, partition)))
		return -ENOENT;
	pthread_mutex_lock(&e->start_lock);
	tfs_plog_stats(pl, &st);
	*low = st.log_start_offset;
	if (offset == -1)
		offset = st.log_end_offset;     /* Kafka's HIGH_WATERMARK */
	if (offset < 0 || offset > st.log_end_offset) {
		rc = -ERANGE;
		tfs_log_warn("engine", "%s-%" PRId32 ": no DeleteRecords below %" PRId64
		             ": the log holds %" PRId64 " to %" PRId64, t->name, partition, offset,
		             st.log_start_offset, st.log_end_offset);
	} else if (offset <= st.log_start_offset) {
		rc = 0;                         /* nothing below it is left */
	} else if ((rc = tfs_plog_sync(pl)) == 0 &&  /* never a start past the durable end */
	           (rc = tfs__log_start_write(e, e->io, e->dirfd, t->name, partition, offset)) == 0) {
		rc = tfs_plog_delete_below(pl, offset, gone ? gone_copy : NULL, &g, low);
		if (rc == 0)
			tfs_log_info("engine", "%s-%" PRId32 ": records below %" PRId64 " deleted "
			             "(DeleteRecords); the log starts there", t->name, partition, *low);
	}
	pthread_mutex_unlock(&e->start_lock);
	if (gone && g.n)
		gone(arg, g.keys, g.n);
	for (size_t i = 0; i < g.n; i++)
		free((void *)g.keys[i].p);
	free(g.keys);
	return rc;
}
