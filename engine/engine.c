/* engine.c - a data directory's topics: the registry, creation, deletion, configs
 * (opening, closing and the background flusher are in engine_open.c).
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
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cleaner/cleaner.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "engine/groups/groups.h"
#include "engine/log/log_start.h"
#include "engine/ondisk.h"
#include "engine/producer/producer_ids.h"
#include "io/file_util.h"
#include "io/log.h"

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

void tfs__engine_topic_free(struct tfs_topic *t)
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
		tfs__engine_topic_free(t);
}

struct tfs_topic *tfs__engine_topic_alloc(struct tfs_engine *e, const char *name)
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

void tfs__engine_partition_path(char *buf, size_t cap, struct tfs_engine *e, const char *topic, int32_t p)
{
	snprintf(buf, cap, "%s/%s-%" PRId32, e->data_dir, topic, p);
}

struct tfs_cleaner *tfs_engine_cleaner(struct tfs_engine *e)
{
	return e->cleaner;
}

/* Hands partitions [from, t->nparts) to the cleaner; a failure only costs cleaning. */
void tfs__engine_cleaner_register(struct tfs_engine *e, struct tfs_topic *t, int32_t from)
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

int tfs__engine_open_partition(struct tfs_topic *t, int32_t p, bool create, struct tfs_plog **out)
{
	struct tfs_plog_env env = {
		.io = t->e->io, .fdcache = t->e->fdcache, .config = &t->cfg,
		.read_only = t->e->cfg.read_only || t->config_refused,
	};
	char path[PATH_CAP];

	int rc;

	tfs__engine_partition_path(path, sizeof(path), t->e, t->name, p);
	rc = tfs_plog_open(&env, path, create, out);
	if (rc == 0)
		tfs_plog_set_append_hook(*out, engine_appended, t->e);
	if (rc == 0 && tfs_topic_internal(t))
		tfs_plog_set_internal(*out);
	return rc;
}

int tfs__engine_grow_parts(struct tfs_topic *t, int32_t n)
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
size_t tfs__engine_topic_pos(struct tfs_engine *e, const char *name, bool *found)
{
	return tfs_sorted_pos(e->topics, e->ntopics, sizeof(e->topics[0]), name, topic_cmp, found);
}

int tfs__engine_registry_insert(struct tfs_engine *e, struct tfs_topic *t)
{
	bool found;
	size_t at = tfs__engine_topic_pos(e, t->name, &found);

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
	at = tfs__engine_topic_pos(e, name, &found);
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
bool tfs__engine_is_deleted_dir(const char *name)
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
void tfs__engine_remove_partition_dir(struct tfs_engine *e, const char *path)
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
void tfs__engine_creating_unmark(struct tfs_engine *e, const char *topic)
{
	char name[PATH_CAP];
	int rc;

	creating_name(name, sizeof(name), topic);
	rc = tfs_io_unlinkat(e->io, e->cfgfd, name, 0);
	if (rc < 0 && rc != -ENOENT)
		tfs_log_warn("engine", "cannot remove %s/%s/%s: %s; removed at the next open",
		             e->data_dir, TFS_CONFIG_DIR, name, tfs_strerror(rc));
}

bool tfs__engine_creating_marked(struct tfs_engine *e, const char *topic)
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
		tfs__engine_topic_pos(e, name, &found);
		if (found) {
			rc = -EEXIST;
			goto out;
		}
	}
	t = tfs__engine_topic_alloc(e, name);
	if (!t || tfs__engine_grow_parts(t, partitions) < 0) {
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
		rc = tfs__engine_open_partition(t, made, true, &t->parts[made]);
		if (rc < 0)
			goto out;
		t->nparts = made + 1;
	}
	rc = tfs_io_fsync_dir(e->io, e->dirfd);
	if (rc == 0)
		rc = save_topic(t);              /* the commit point */
	if (rc == 0)
		rc = tfs__engine_registry_insert(e, t);
	if (rc == 0)
		tfs__engine_cleaner_register(e, t, 0);
	if (rc == 0)
		tfs__engine_creating_unmark(e, name);
out:
	pthread_rwlock_unlock(&e->lock);
	if (rc < 0 && t) {
		bool gone = true;
		for (int32_t i = 0; i <= t->nparts && i < partitions; i++) {
			if (i < t->nparts)
				tfs_plog_close(t->parts[i]);
			tfs__engine_partition_path(path, sizeof(path), e, name, i);
			tfs__engine_remove_partition_dir(e, path);
			gone &= faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
		}
		/* the marker goes only with the last directory: what a failed removal
		 * left is removed at the next open, which the marker asks for */
		if (marked && gone && tfs_io_fsync_dir(e->io, e->dirfd) == 0)
			tfs__engine_creating_unmark(e, name);
		t->nparts = 0;
		tfs__engine_topic_free(t);
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
		tfs__engine_partition_path(path, sizeof(path), e, t->name, i);
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
	at = tfs__engine_topic_pos(e, name, &found);
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
		tfs__engine_remove_partition_dir(e, path);
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
	rc = tfs__engine_grow_parts(t, t->nparts + 1);
	if (rc == 0)
		rc = tfs__engine_open_partition(t, partition, true, &pl);
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
		tfs__engine_cleaner_register(t->e, t, configured_now(t, partition));
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
		tfs__engine_cleaner_register(t->e, t, 0);
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
