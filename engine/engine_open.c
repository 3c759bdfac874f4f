/* engine_open.c - opening a data directory and closing it: the topics' configs
 * and partitions loaded, deletions and creations a crash left half done finished
 * or undone (the order is at the top of engine.c), the descriptor cache sized to
 * the process's limit, and the background flusher. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
	size_t at = tfs__engine_topic_pos(e, name, &found);
	struct tfs_topic *t;

	if (found)
		return e->topics[at];
	t = tfs__engine_topic_alloc(e, name);
	if (!t)
		return NULL;
	t->meta.partitions = 0;
	t->nparts = -1;                 /* "not loaded yet" marker during open */
	if (tfs__engine_registry_insert(e, t) < 0) {
		tfs__engine_topic_free(t);
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
		at = tfs__engine_topic_pos(e, topic, &found);
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
		if (tfs__engine_is_deleted_dir(de->d_name) && !e->cfg.read_only) {
			snprintf(path, sizeof(path), "%s/%s", e->data_dir, de->d_name);
			tfs_log_info("engine", "removing %s left by a topic deletion", path);
			tfs__engine_remove_partition_dir(e, path);
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
					tfs__engine_remove_partition_dir(e, path);
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
				tfs__engine_partition_path(path, sizeof(path), e, t->name, p);
				any |= dir_has_records(path);
			}
			if (!any && tfs__engine_creating_marked(e, t->name)) {
				if (!e->cfg.read_only) {
					bool gone = true;
					for (int32_t p = 0; p < want; p++) {
						tfs__engine_partition_path(path, sizeof(path), e, t->name, p);
						tfs__engine_remove_partition_dir(e, path);
						gone &= faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
					}
					/* the directories are gone for good before the marker goes */
					if (gone && tfs_io_fsync_dir(e->io, e->dirfd) == 0)
						tfs__engine_creating_unmark(e, t->name);
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
		if (tfs__engine_grow_parts(t, want) < 0)
			return -ENOMEM;
		for (int32_t p = 0; p < want; p++) {
			tfs__engine_partition_path(path, sizeof(path), e, t->name, p);
			rc = tfs__engine_open_partition(t, p, !e->cfg.read_only, &t->parts[p]);
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
			tfs__engine_topic_free(e->topics[i]);
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
			tfs__engine_cleaner_register(e, e->topics[i], 0);
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
