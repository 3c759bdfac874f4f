/* mount.c - the mount object's lifecycle (see mount.h). */
#include "fs/mount.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/consumers.h"
#include "fs/history_fate.h"
#include "fs/node.h"
#include "fs/opts.h"
#include "io/log.h"

/* The engine has no "take another reference" call for a topic pointer: the name
 * lookup returns the registry's current topic, which is ours unless it was
 * deleted (and maybe re-created) meanwhile. */
static struct tfs_topic *topic_ref(void *arg, struct tfs_topic *t)
{
	struct tfs_mount *m = arg;
	struct tfs_topic *cur;

	if (tfs_topic_deleted(t))
		return NULL;
	cur = tfs_engine_topic_get(m->engine, tfs_topic_name(t));
	if (cur != t) {
		tfs_topic_unref(cur);
		return NULL;
	}
	return cur;
}

static void topic_unref(void *arg, struct tfs_topic *t)
{
	(void)arg;
	tfs_topic_unref(t);
}

int tfs_mount_create(const struct tfs_opts *o, const char *abs_data_dir, struct tfs_mount **out)
{
	struct tfs_engine_config cfg = o->engine;
	struct tfs_mount *m = calloc(1, sizeof(*m));
	struct tfs_inode_topic_ops tops = { topic_ref, topic_unref, m };
	struct stat st;
	int rc;

	*out = NULL;
	if (!m || !(m->data_dir = strdup(abs_data_dir))) {
		free(m);
		return -ENOMEM;
	}
	pthread_mutex_init(&m->handles_lock, NULL);
	pthread_mutex_init(&m->deferred_lock, NULL);
	tfs_key_cond_init(&m->deferred_cond);
	m->read_only = o->read_only;
	m->reader_cache = o->reader_cache;
	m->max_read = o->max_read;
	m->key_timeout = o->cache_timeout;
	m->dir_timeout = o->cache_timeout > TFS_DIR_TIMEOUT_S ? o->cache_timeout : TFS_DIR_TIMEOUT_S;
	if (o->cache_timeout == 0.0)
		m->dir_timeout = 0.0;            /* "no caching" means none anywhere */
	m->topic_defaults = o->engine.topic_defaults;
	clock_gettime(CLOCK_REALTIME, &m->started);

	cfg.data_dir = m->data_dir;
	rc = tfs_engine_open(&cfg, &m->engine);
	if (rc < 0)
		goto fail;
	if (stat(m->data_dir, &st) == 0) {
		m->root_uid = st.st_uid;
		m->root_gid = st.st_gid;
		m->root_mode = st.st_mode & 07777;
	} else {
		m->root_uid = getuid();
		m->root_gid = getgid();
		m->root_mode = 0755;
	}
	rc = tfs_inode_table_create(&tops, &m->inodes);
	if (rc == 0)
		rc = tfs_readcache_create(&tops, TFS_READCACHE_BYTES, &m->readcache);
	if (rc == 0)
		rc = tfs_scratch_create(&tops, o->scratch_max_bytes, o->scratch_max_files,
		                        &m->scratch);
	if (rc == 0)
		rc = tfs_fate_cache_create(&m->fates);
	if (rc == 0)
		rc = tfs_consumers_create(&m->consumers);
	if (rc < 0)
		goto fail;
	*out = m;
	return 0;
fail:
	tfs_mount_destroy(m);
	return rc;
}

int tfs_mount_start_notifier(struct tfs_mount *m, struct fuse_session *se)
{
	m->se = se;
	return tfs_notifier_start(se, &m->notifier);
}

void tfs_mount_stop_notifier(struct tfs_mount *m)
{
	if (!m)
		return;
	tfs_notifier_stop(m->notifier);
	m->notifier = NULL;
}

void tfs_mount_destroy(struct tfs_mount *m)
{
	struct tfs_fh *fh;

	if (!m)
		return;
	tfs_mount_stop_notifier(m);
	/* Handles the kernel never released (a lazy or forced unmount). Their
	 * uncommitted bytes were never acknowledged by a close(); a creation or
	 * truncation that was closed (its RELEASE lost at the unmount) was. */
	tfs_key_commit_closed(m);
	while ((fh = m->handles) != NULL)
		fh->free_fn(m, fh);
	tfs_inode_table_destroy(m->inodes);
	tfs_scratch_destroy(m->scratch);       /* after the nodes and handles that use it:
	                                        * scratch files end with the mount */
	tfs_readcache_destroy(m->readcache);   /* its topic references, before the engine */
	tfs_fate_cache_destroy(m->fates);
	tfs_consumers_destroy(m->consumers);
	tfs_engine_close(m->engine);
	pthread_mutex_destroy(&m->handles_lock);
	pthread_mutex_destroy(&m->deferred_lock);
	pthread_cond_destroy(&m->deferred_cond);
	free(m->data_dir);
	free(m);
}

struct tfs_plog *tfs_mount_plog(struct tfs_node *n)
{
	if (!n->topic)
		return NULL;
	return tfs_topic_partition(n->topic, n->partition);
}
