/* node_topic.c - a topic directory: lists its partitions 0..N-1; mkdir N adds
 * partition N (N must be the current count); rmdir of a partition is EBUSY (Kafka
 * cannot drop one: keys map to partitions by hash). Its mode and owner persist in
 * the topic's config file and are shared by its partitions and keys; the topic
 * configs are its xattrs (xattr.c).
 *
 * Listing: partition p has cookie TFS_DIR_FIRST + p; partitions only grow, so the
 * cookies never shift.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/node.h"
#include "io/log.h"

#define PARTITION_NAME_CAP 24       /* an int64 in decimal + NUL */

static int topic_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                      struct stat *st)
{
	uid_t uid;
	gid_t gid;
	mode_t mode;

	if (tfs_topic_deleted(n->topic))
		return -ENOENT;
	tfs_topic_owner(n, &uid, &gid, &mode);
	tfs_stat_dir(m, n, mode, uid, gid, 2 + (nlink_t)tfs_topic_partition_count(n->topic), st);
	return 0;
}

static void topic_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                         const char *name)
{
	struct tfs_node_ident id;
	int32_t p;

	if (tfs_topic_deleted(dir->topic) || !tfs_parse_partition(name, &p) ||
	    p >= tfs_topic_partition_count(dir->topic)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	tfs_child_ident(dir, TFS_NODE_PARTITION, 0, tfs_slice_make(NULL, 0), &id);
	id.partition = p;
	tfs_reply_entry(req, m, &id);
}

static void topic_mkdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                        const char *name, mode_t mode)
{
	int32_t p;
	int rc;

	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (tfs_topic_deleted(dir->topic)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!tfs_parse_partition(name, &p)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = tfs_topic_add_partition(dir->topic, p);
	if (rc < 0) {
		tfs_reply_err(req, rc, "partition");
		return;
	}
	topic_lookup(req, m, dir, name);
}

static void topic_rmdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                        const char *name)
{
	int32_t p;

	if (!tfs_topic_deleted(dir->topic) && tfs_parse_partition(name, &p) &&
	    p < tfs_topic_partition_count(dir->topic))
		fuse_reply_err(req, EBUSY);
	else
		fuse_reply_err(req, ENOENT);
}

void tfs_topic_setattr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                       struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct tfs_topic_meta meta;
	uint64_t *ids = NULL;
	ssize_t count;
	int rc = 0;

	if (tfs_topic_deleted(n->topic)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (!(to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		tfs_reply_attr(req, m, n, fi);      /* times only: accepted, ignored */
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	tfs_topic_get_meta(n->topic, &meta);
	if (to_set & FUSE_SET_ATTR_MODE)
		rc = tfs_topic_set_mode(n->topic, attr->st_mode & 07777);
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = tfs_topic_set_owner(n->topic,
		                         (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : meta.uid,
		                         (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : meta.gid);
	if (rc < 0) {
		tfs_reply_err(req, rc, "topic");
		return;
	}
	/* Every node of the topic shows these bits: the kernel must ask again. */
	count = tfs_inode_collect_topic(m->inodes, n->topic, &ids);
	for (ssize_t i = 0; i < count; i++)
		if (ids[i] != n->nodeid)
			tfs_notify_inode(m->notifier, ids[i], 0);
	free(ids);
	if (count > 1)
		tfs_notifier_drain(m->notifier);  /* "chmod t; stat t/0" sees it */
	tfs_reply_attr(req, m, n, fi);
}

static void topic_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                          size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	char *buf = malloc(size ? size : 1);
	char name[PARTITION_NAME_CAP];
	int32_t count;
	size_t used;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (tfs_topic_deleted(dir->topic)) {
		free(buf);
		fuse_reply_err(req, ENOENT);
		return;
	}
	count = tfs_topic_partition_count(dir->topic);
	used = tfs_dir_add_dots(req, buf, size, &off, plus, dir);
	for (int64_t p = off >= TFS_DIR_FIRST - 1 ? off - (TFS_DIR_FIRST - 1) : count; p < count;
	     p++) {
		struct tfs_node_ident id;
		off_t next = (off_t)p + TFS_DIR_FIRST;

		snprintf(name, sizeof(name), "%" PRId64, p);
		tfs_child_ident(dir, TFS_NODE_PARTITION, 0, tfs_slice_make(NULL, 0), &id);
		id.partition = (int32_t)p;
		if (tfs_dir_add_entry(req, m, buf, size, &used, plus, &id, S_IFDIR, name, next) == 0)
			break;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void topic_fsyncdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, int datasync,
                           struct fuse_file_info *fi)
{
	int32_t count = tfs_topic_partition_count(n->topic);
	int rc = 0;

	for (int32_t p = 0; p < count && rc == 0; p++) {
		struct tfs_plog *pl = tfs_topic_partition(n->topic, p);
		if (pl)
			rc = tfs_plog_sync(pl);
	}
	tfs_reply_err(req, rc, "topic");
}

static void topic_rename(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                         const char *name, struct tfs_node *newdir, const char *newname,
                         unsigned flags)
{
	/* Partitions cannot move: keys map to them by hash. */
	fuse_reply_err(req, EPERM);
}

const struct tfs_node_ops tfs_kind_topic = {
	.name = "topic directory",
	.is_dir = true,
	.stat = topic_stat,
	.lookup = topic_lookup,
	.setattr = tfs_topic_setattr,
	.mkdir = topic_mkdir,
	.rmdir = topic_rmdir,
	.rename = topic_rename,
	.readdir = topic_readdir,
	.fsyncdir = topic_fsyncdir,
};
