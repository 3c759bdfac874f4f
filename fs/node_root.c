/* node_root.c - the mount's root: lists topics; mkdir creates a topic, rmdir
 * deletes one. Its control entries are .topicfs (node_meta.c) and .groups
 * (node_groups.c), never listed.
 *
 * Listing: a snapshot of the topic names is taken at opendir (and again on
 * rewinddir); entry i's cookie is TFS_DIR_FIRST + i.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/node.h"
#include "io/log.h"

#define META_DIR_NAME ".topicfs"
#define GROUPS_DIR_NAME ".groups"       /* consumer groups (node_groups.c) */

struct root_dir_fh {
	struct tfs_fh base;
	pthread_mutex_t lock;           /* readdir calls on one handle may overlap */
	char **names;                   /* one block; free(names) frees all */
	size_t count;
};

static int root_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                     struct stat *st)
{
	char **names = NULL;
	size_t count = 0;

	/* nlink = 2 + subdirectories: tools that trust it (fts leaf optimisation)
	 * must not think the root has none. */
	if (tfs_engine_topic_names(m->engine, &names, &count) < 0)
		count = 0;
	free(names);
	tfs_stat_dir(m, n, m->root_mode, m->root_uid, m->root_gid, 2 + (nlink_t)count, st);
	return 0;
}

static void root_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                        const char *name)
{
	struct tfs_node_ident id = { .partition = -1 };
	struct tfs_topic *t;

	if (!strcmp(name, META_DIR_NAME)) {
		id.kind = TFS_NODE_META_DIR;
		tfs_reply_entry(req, m, &id);
		return;
	}
	if (!strcmp(name, GROUPS_DIR_NAME)) {
		id.kind = TFS_NODE_GROUPS_DIR;
		tfs_reply_entry(req, m, &id);
		return;
	}
	if (name[0] == '.' || !(t = tfs_engine_topic_get(m->engine, name))) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	id.kind = TFS_NODE_TOPIC;
	id.topic = t;
	id.topic_name = tfs_topic_name(t);
	tfs_reply_entry(req, m, &id);
	tfs_topic_unref(t);
}

static void root_mkdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                       const char *name, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int rc;

	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!tfs_topic_name_valid(name)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = tfs_engine_topic_create(m->engine, name, 0, ctx->uid, ctx->gid, mode & 07777);
	if (rc < 0) {
		tfs_reply_err(req, rc, "topic");
		return;
	}
	root_lookup(req, m, dir, name);
}

static void root_rmdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                       const char *name)
{
	struct tfs_node_ident id = { .kind = TFS_NODE_TOPIC, .partition = -1 };
	struct tfs_node *n = NULL;
	struct tfs_topic *t;
	int rc;

	if (!strcmp(name, META_DIR_NAME) || !strcmp(name, GROUPS_DIR_NAME)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	t = name[0] == '.' ? NULL : tfs_engine_topic_get(m->engine, name);
	if (!t) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	id.topic = t;
	id.topic_name = tfs_topic_name(t);
	n = tfs_inode_find(m->inodes, &id);
	rc = tfs_engine_topic_delete(m->engine, name, false);
	if (rc == 0) {
		tfs_readcache_forget_topic(m->readcache, t);   /* let its files go */
		tfs_scratch_forget_topic(m->scratch, t);       /* and its scratch files */
	}
	if (rc == 0 && n)
		tfs_inode_unhash(m->inodes, n);
	tfs_inode_put(m->inodes, n);
	tfs_topic_unref(t);
	tfs_reply_err(req, rc, "topic");
}

static void root_dir_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct root_dir_fh *d = (struct root_dir_fh *)fh;

	tfs_fh_unregister(m, fh);
	pthread_mutex_destroy(&d->lock);
	free(d->names);
	free(d);
}

static void root_opendir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                         struct fuse_file_info *fi)
{
	struct root_dir_fh *d = calloc(1, sizeof(*d));
	int rc;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = tfs_engine_topic_names(m->engine, &d->names, &d->count);
	if (rc < 0) {
		free(d);
		tfs_reply_err(req, rc, "root directory");
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	tfs_fh_register(m, &d->base, n, root_dir_free);
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0)
		root_dir_free(m, &d->base);
}

static void root_releasedir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                            struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);

	fuse_reply_err(req, 0);
	if (fh)
		tfs_fh_put(m, fh);
}

static void root_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, size_t size,
                         off_t off, struct fuse_file_info *fi, bool plus)
{
	struct root_dir_fh *d = (struct root_dir_fh *)tfs_fh_of(fi);
	char *buf = malloc(size ? size : 1);
	size_t used;

	if (!buf || !d) {
		free(buf);
		fuse_reply_err(req, buf ? EBADF : ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (off == 0) {                       /* (re)start: a fresh snapshot */
		char **names;
		size_t count;
		if (tfs_engine_topic_names(m->engine, &names, &count) == 0) {
			free(d->names);
			d->names = names;
			d->count = count;
		}
	}
	used = tfs_dir_add_dots(req, buf, size, &off, plus, dir);
	for (size_t i = off >= TFS_DIR_FIRST - 1 ? (size_t)off - (TFS_DIR_FIRST - 1) : 0;
	     i < d->count && off >= TFS_DIR_FIRST - 1; i++) {
		const char *name = d->names[i];
		off_t next = (off_t)(i + TFS_DIR_FIRST);
		struct tfs_node_ident id = { .kind = TFS_NODE_TOPIC, .partition = -1,
		                             .topic_name = name };
		struct tfs_topic *t = NULL;
		int added;

		/* a full entry needs the topic itself; the inode number its name only */
		if (plus && !(t = tfs_engine_topic_get(m->engine, name)))
			continue;                 /* deleted since the snapshot */
		id.topic = t;
		added = tfs_dir_add_entry(req, m, buf, size, &used, plus, &id, S_IFDIR, name, next);
		tfs_topic_unref(t);
		if (added == 0)
			break;
	}
	pthread_mutex_unlock(&d->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void root_fsyncdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, int datasync,
                          struct fuse_file_info *fi)
{
	tfs_reply_err(req, tfs_engine_sync(m->engine), "data directory");
}

static void root_setattr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                         struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	/* The root is the data directory's stand-in: its owner and mode are not ours
	 * to change; times are accepted and ignored (cp -a, tar). */
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	tfs_reply_attr(req, m, n, fi);
}

const struct tfs_node_ops tfs_kind_root = {
	.name = "root directory",
	.is_dir = true,
	.stat = root_stat,
	.lookup = root_lookup,
	.setattr = root_setattr,
	.mkdir = root_mkdir,
	.rmdir = root_rmdir,
	.opendir = root_opendir,
	.readdir = root_readdir,
	.releasedir = root_releasedir,
	.fsyncdir = root_fsyncdir,
};
