/* node_groups.c - /.groups: consumer groups' committed offsets as files.
 *
 *   .groups/                  unlisted at the root; lists every group the store
 *                             knows (engine/groups/groups.h) and those made by mkdir
 *     GROUP/                  one directory per group; mkdir makes one, rmdir
 *                             deletes its offsets (EBUSY while it has members)
 *       TOPIC.PARTITION       its committed offset, "N\n"; writing a number
 *                             commits it, unlink deletes it; attributes
 *                             user.topicfs.lag_offsets, lag_records, lag_ms,
 *                             log_end_offset, commit_timestamp
 *
 * A file's name splits at its last '.', so topics with dots work; the partition
 * is spelled without leading zeros. A group id that holds '/' or is longer than a
 * file name has no directory here (Kafka clients still see it).
 *
 * Commits are Kafka's simple commits (generation -1): refused with EBUSY while the
 * group has members, as a broker refuses them. A handle commits at flush (every
 * close) when it was written, so `echo 42 > .groups/g/t.0 || handle` sees the
 * error: EINVAL (logged) for anything but a decimal offset >= 0 with optional
 * surrounding blanks, EBUSY, ENOENT when the topic or partition is gone.
 *
 * Permissions follow the topic's: a file has the topic's owner, group and
 * read/write bits (the kernel checks opens and attribute reads against them), and
 * creating, unlinking and rmdir, which the kernel checks only against the
 * directory (mode 0777 for .groups/ and the groups, so anyone may make a group),
 * are checked here against write permission on every topic concerned.
 *
 * Listings take a snapshot at opendir (and rewinddir); entry i has cookie
 * TFS_DIR_FIRST + i. Attributes get short timeouts (volatile_attrs): a Kafka
 * client's commit changes a file behind the kernel.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/groups/groups.h"
#include "engine/log/lag.h"
#include "fs/consumers.h"
#include "fs/node.h"
#include "fs/node_groups.h"
#include "io/log.h"
#include "io/parse.h"

#define GROUPS_DIR_MODE 0777
#define GROUP_DIR_MODE 0777
#define GROUP_FILE_CAP 32          /* "9223372036854775807\n" and some blanks */
#define GROUP_NAME_MAX 255         /* a file name */
#define PARTITION_DIGITS_MAX 10
#define GROUPS_MAX_SUPPLEMENTARY 64

/* ---- names and checks ------------------------------------------------------ */

static struct tfs_groups *groups_of(struct tfs_mount *m)
{
	return tfs_engine_groups(m->engine);
}

static bool group_name_ok(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= GROUP_NAME_MAX && strcmp(name, ".") && strcmp(name, "..") &&
	       !strchr(name, '/');
}

/* The group of a GROUP_DIR or GROUP_FILE node, NUL-terminated into buf. */
static const char *node_group(struct tfs_node *n, char buf[GROUP_NAME_MAX + 1])
{
	size_t len;

	pthread_mutex_lock(&n->lock);
	len = n->key_len > GROUP_NAME_MAX ? GROUP_NAME_MAX : n->key_len;
	memcpy(buf, n->key, len);
	pthread_mutex_unlock(&n->lock);
	buf[len] = '\0';
	return buf;
}

/* Splits "TOPIC.PARTITION" into its topic (a reference, caller unrefs) and
 * partition; -ENOENT unless both exist, -EINVAL when it is not such a name. */
static int parse_file_name(struct tfs_mount *m, const char *name, struct tfs_topic **topic,
                           int32_t *partition)
{
	const char *dot = strrchr(name, '.');
	char tname[GROUP_NAME_MAX + 1];
	size_t tlen;
	int64_t p;
	struct tfs_topic *t;

	*topic = NULL;
	if (!dot || dot == name || !dot[1] || strlen(dot + 1) > PARTITION_DIGITS_MAX ||
	    (dot[1] == '0' && dot[2]) || !tfs_parse_i64(dot + 1, 0, INT32_MAX, &p) ||
	    dot[1] == '+' || dot[1] == '-' || dot[1] == ' ')
		return -EINVAL;
	tlen = (size_t)(dot - name);
	if (tlen > GROUP_NAME_MAX)
		return -EINVAL;
	memcpy(tname, name, tlen);
	tname[tlen] = '\0';
	if (!tfs_topic_name_valid(tname))
		return -EINVAL;
	t = tfs_engine_topic_get(m->engine, tname);
	if (!t)
		return -ENOENT;
	if (p >= tfs_topic_partition_count(t)) {
		tfs_topic_unref(t);
		return -ENOENT;
	}
	*topic = t;
	*partition = (int32_t)p;
	return 0;
}

/* Whether the caller of req may write to topic t (as the kernel would decide
 * for its partition directories). */
static bool may_write_topic(fuse_req_t req, struct tfs_topic *t)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct tfs_topic_meta meta;
	gid_t groups[GROUPS_MAX_SUPPLEMENTARY];
	int n;

	if (ctx->uid == 0)
		return true;
	tfs_topic_get_meta(t, &meta);
	if (ctx->uid == meta.uid)
		return meta.mode & 0200;
	if (ctx->gid == meta.gid)
		return meta.mode & 0020;
	n = fuse_req_getgroups(req, GROUPS_MAX_SUPPLEMENTARY, groups);
	for (int i = 0; i < n && i < GROUPS_MAX_SUPPLEMENTARY; i++)
		if (groups[i] == meta.gid)
			return meta.mode & 0020;
	return meta.mode & 0002;
}

static bool group_known(struct tfs_mount *m, const char *group)
{
	struct tfs_group_info info;
	struct tfs_groups *g = groups_of(m);

	if (g && tfs_groups_info(g, group, &info) == 0) {
		tfs_group_info_release(&info);
		return true;
	}
	return tfs_consumers_group_has(m->consumers, group);
}

static void file_ident(const char *group, struct tfs_topic *t, int32_t partition,
                       struct tfs_node_ident *id)
{
	memset(id, 0, sizeof(*id));
	id->kind = TFS_NODE_GROUP_FILE;
	id->topic = t;
	id->topic_name = tfs_topic_name(t);
	id->partition = partition;
	id->key = tfs_slice_make(group, strlen(group));
}

static void dir_ident(const char *group, struct tfs_node_ident *id)
{
	memset(id, 0, sizeof(*id));
	id->kind = TFS_NODE_GROUP_DIR;
	id->partition = -1;
	id->key = tfs_slice_make(group, strlen(group));
}

/* ---- lag, for the attributes (node_groups.h) ------------------------------- */

int tfs_group_file_lag(struct tfs_mount *m, struct tfs_node *n, struct tfs_group_lag *out)
{
	char group[GROUP_NAME_MAX + 1];
	struct tfs_group_offset o;
	struct tfs_groups *g = groups_of(m);
	struct tfs_plog *pl = tfs_mount_plog(n);
	int rc;

	if (!g || !pl)
		return -ENOENT;
	rc = tfs_groups_fetch(g, node_group(n, group), tfs_topic_name(n->topic), n->partition, &o);
	if (rc < 0)
		return rc;
	out->committed = o.offset;
	out->commit_ms = o.commit_ms;
	tfs_group_offset_release(&o);
	rc = tfs_plog_lag(pl, out->committed, &out->lag);
	if (rc == 0)
		out->lag_ms = tfs_lag_ms(&out->lag, tfs_now_ms());
	return rc;
}

/* ---- .groups/ --------------------------------------------------------------- */

/* A listing's snapshot: names (and for files, their topic and partition). */
struct snap_entry {
	char *name;
	char *topic;                    /* GROUP_DIR listings only */
	int32_t partition;
};

struct groups_dir_fh {
	struct tfs_fh base;
	pthread_mutex_t lock;           /* readdir calls on one handle may overlap */
	struct snap_entry *e;
	size_t count;
};

static void snap_free(struct snap_entry *e, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		free(e[i].name);
		free(e[i].topic);
	}
	free(e);
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct snap_entry *)a)->name, ((const struct snap_entry *)b)->name);
}

/* Every group with a directory: the store's and mkdir's, sorted, once each. */
static int snap_groups(struct tfs_mount *m, struct snap_entry **out, size_t *count)
{
	struct tfs_groups *g = groups_of(m);
	char **stored = NULL, **made = NULL;
	size_t ns = 0, nm = 0, n = 0;
	struct snap_entry *e;
	int rc = g ? tfs_groups_list(g, &stored, &ns) : 0;

	if (rc == 0)
		rc = tfs_consumers_group_names(m->consumers, &made, &nm);
	e = rc == 0 ? calloc(ns + nm + 1, sizeof(*e)) : NULL;
	if (rc == 0 && !e)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < ns + nm; i++) {
		const char *name = i < ns ? stored[i] : made[i - ns];
		if (!group_name_ok(name))
			continue;
		if (!(e[n].name = strdup(name)))
			rc = -ENOMEM;
		else
			n++;
	}
	for (size_t i = 0; i < nm; i++)
		free(made[i]);
	free(made);
	free(stored);
	if (rc < 0) {
		snap_free(e, n);
		return rc;
	}
	qsort(e, n, sizeof(*e), cmp_entry);
	for (size_t i = 1; i < n;) {               /* a stored group also made by mkdir */
		if (!strcmp(e[i].name, e[i - 1].name)) {
			free(e[i].name);
			memmove(&e[i], &e[i + 1], (n - i - 1) * sizeof(*e));
			n--;
		} else {
			i++;
		}
	}
	*out = e;
	*count = n;
	return 0;
}

/* A group's files: its committed offsets whose topic still exists. */
static int snap_files(struct tfs_mount *m, const char *group, struct snap_entry **out,
                      size_t *count)
{
	struct tfs_groups *g = groups_of(m);
	struct tfs_group_offset *o = NULL;
	struct snap_entry *e;
	size_t no = 0, n = 0;
	int rc = g ? tfs_groups_offsets(g, group, &o, &no) : -ENOENT;

	if (rc == -ENOENT) {
		rc = 0;
		no = 0;
	}
	if (rc < 0)
		return rc;
	e = calloc(no + 1, sizeof(*e));
	if (!e) {
		tfs_group_offsets_free(o, no);
		return -ENOMEM;
	}
	for (size_t i = 0; i < no && rc == 0; i++) {
		struct tfs_topic *t = tfs_engine_topic_get(m->engine, o[i].topic);
		if (!t)
			continue;
		tfs_topic_unref(t);
		if (asprintf(&e[n].name, "%s.%" PRId32, o[i].topic, o[i].partition) < 0) {
			e[n].name = NULL;
			rc = -ENOMEM;
		} else if (!(e[n].topic = strdup(o[i].topic))) {
			n++;
			rc = -ENOMEM;
		} else {
			e[n++].partition = o[i].partition;
		}
	}
	tfs_group_offsets_free(o, no);
	if (rc < 0) {
		snap_free(e, n);
		return rc;
	}
	*out = e;
	*count = n;
	return 0;
}

static int snap_take(struct tfs_mount *m, struct tfs_node *n, struct snap_entry **e, size_t *count)
{
	char group[GROUP_NAME_MAX + 1];

	if (n->kind == TFS_NODE_GROUPS_DIR)
		return snap_groups(m, e, count);
	return snap_files(m, node_group(n, group), e, count);
}

static void groups_dir_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct groups_dir_fh *d = (struct groups_dir_fh *)fh;

	tfs_fh_unregister(m, fh);
	pthread_mutex_destroy(&d->lock);
	snap_free(d->e, d->count);
	free(d);
}

static void groups_opendir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                           struct fuse_file_info *fi)
{
	struct groups_dir_fh *d = calloc(1, sizeof(*d));
	int rc;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = snap_take(m, n, &d->e, &d->count);
	if (rc < 0) {
		free(d);
		tfs_reply_err(req, rc, ".groups");
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	tfs_fh_register(m, &d->base, n, groups_dir_free);
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0)
		groups_dir_free(m, &d->base);
}

static void groups_releasedir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                              struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);

	fuse_reply_err(req, 0);
	if (fh)
		tfs_fh_put(m, fh);
}

static void groups_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, size_t size,
                           off_t off, struct fuse_file_info *fi, bool plus)
{
	struct groups_dir_fh *d = (struct groups_dir_fh *)tfs_fh_of(fi);
	char group[GROUP_NAME_MAX + 1];
	char *buf = malloc(size ? size : 1);
	size_t used;

	if (!buf || !d) {
		free(buf);
		fuse_reply_err(req, buf ? EBADF : ENOMEM);
		return;
	}
	if (dir->kind == TFS_NODE_GROUP_DIR)
		node_group(dir, group);
	pthread_mutex_lock(&d->lock);
	if (off == 0) {                       /* (re)start: a fresh snapshot */
		struct snap_entry *e;
		size_t count;
		if (snap_take(m, dir, &e, &count) == 0) {
			snap_free(d->e, d->count);
			d->e = e;
			d->count = count;
		}
	}
	used = tfs_dir_add_dots(req, buf, size, &off, plus, dir);
	for (size_t i = off >= TFS_DIR_FIRST - 1 ? (size_t)off - (TFS_DIR_FIRST - 1) : 0;
	     i < d->count && off >= TFS_DIR_FIRST - 1; i++) {
		const struct snap_entry *e = &d->e[i];
		off_t next = (off_t)(i + TFS_DIR_FIRST);
		struct tfs_node_ident id;
		struct tfs_topic *t = NULL;
		int added;

		if (dir->kind == TFS_NODE_GROUPS_DIR) {
			dir_ident(e->name, &id);
			added = tfs_dir_add_entry(req, m, buf, size, &used, plus, &id, S_IFDIR, e->name,
			                          next);
		} else {
			if (!(t = tfs_engine_topic_get(m->engine, e->topic)))
				continue;         /* deleted since the snapshot */
			file_ident(group, t, e->partition, &id);
			added = tfs_dir_add_entry(req, m, buf, size, &used, plus, &id, S_IFREG, e->name,
			                          next);
			tfs_topic_unref(t);
		}
		if (added == 0)
			break;
	}
	pthread_mutex_unlock(&d->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static int groups_dir_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                           struct stat *st)
{
	/* nlink 1: "not counted", so that find and fts never take it for a leaf
	 * (counting the groups would cost a listing per stat) */
	tfs_stat_dir(m, n, GROUPS_DIR_MODE, m->root_uid, m->root_gid, 1, st);
	return 0;
}

static void groups_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                          const char *name)
{
	struct tfs_node_ident id;

	if (!group_name_ok(name) || !group_known(m, name)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	dir_ident(name, &id);
	tfs_reply_entry(req, m, &id);
}

static void groups_mkdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                         const char *name, mode_t mode)
{
	int rc;

	if (m->read_only || !groups_of(m)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!group_name_ok(name)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (group_known(m, name)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	rc = tfs_consumers_group_add(m->consumers, name);
	if (rc < 0) {
		tfs_reply_err(req, rc, "group");
		return;
	}
	groups_lookup(req, m, dir, name);
}

/* Deletes a group's offsets (every topic it has offsets for must be writable by
 * the caller) and forgets a group made by mkdir. */
struct rmdir_caller {
	fuse_req_t req;
	struct tfs_mount *m;
};

/* Asked by the store for each topic the group has offsets of; a topic deleted
 * since asks nothing of anybody. */
static bool caller_may_write(const char *topic, void *arg)
{
	struct rmdir_caller *c = arg;
	struct tfs_topic *t = tfs_engine_topic_get(c->m->engine, topic);
	bool may = !t || may_write_topic(c->req, t);

	tfs_topic_unref(t);
	return may;
}

static void groups_rmdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                         const char *name)
{
	struct tfs_groups *g = groups_of(m);
	struct rmdir_caller caller = { req, m };
	int rc;

	if (!group_name_ok(name) || !group_known(m, name)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = g ? tfs_groups_delete_if(g, name, caller_may_write, &caller) : -ENOENT;
	if (rc == -ENOENT && tfs_consumers_group_has(m->consumers, name))
		rc = 0;
	if (rc == 0)
		tfs_consumers_group_remove(m->consumers, name);
	if (rc == TFS_EGROUPBUSY)
		tfs_log_warn("fs", ".groups/%s: not removed: the group has members", name);
	tfs_reply_err(req, rc, "group");
}

const struct tfs_node_ops tfs_kind_groups_dir = {
	.name = ".groups directory",
	.is_dir = true,
	.volatile_attrs = true,
	.stat = groups_dir_stat,
	.lookup = groups_lookup,
	.mkdir = groups_mkdir,
	.rmdir = groups_rmdir,
	.opendir = groups_opendir,
	.readdir = groups_readdir,
	.releasedir = groups_releasedir,
};

/* ---- .groups/GROUP/ ---------------------------------------------------------- */

static int group_dir_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                          struct stat *st)
{
	char group[GROUP_NAME_MAX + 1];

	if (!group_known(m, node_group(n, group)))
		return -ENOENT;
	tfs_stat_dir(m, n, GROUP_DIR_MODE, m->root_uid, m->root_gid, 2, st);
	return 0;
}

static void group_dir_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	char group[GROUP_NAME_MAX + 1];
	struct tfs_group_offset o;
	struct tfs_node_ident id;
	struct tfs_topic *t;
	int32_t p;
	int rc = parse_file_name(m, name, &t, &p);

	if (rc < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	node_group(dir, group);
	rc = groups_of(m) ? tfs_groups_fetch(groups_of(m), group, tfs_topic_name(t), p, &o) : -ENOENT;
	if (rc == 0) {
		tfs_group_offset_release(&o);
		file_ident(group, t, p, &id);
		tfs_reply_entry(req, m, &id);
	} else {
		fuse_reply_err(req, rc == -ENOENT ? ENOENT : EIO);
	}
	tfs_topic_unref(t);
}

static void group_dir_unlink(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	char group[GROUP_NAME_MAX + 1];
	struct tfs_node_ident id;
	struct tfs_node *n;
	struct tfs_topic *t;
	int32_t p;
	int rc = parse_file_name(m, name, &t, &p);

	if (rc < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	node_group(dir, group);
	if (m->read_only)
		rc = TFS_EREADONLY;
	else if (!may_write_topic(req, t))
		rc = -EACCES;
	else
		rc = groups_of(m) ? tfs_groups_delete_offset(groups_of(m), group, tfs_topic_name(t), p)
		                  : -ENOENT;
	if (rc == 0) {
		/* the directory stays until rmdir, as a directory emptied by rm does */
		if (!group_known(m, group))
			(void)tfs_consumers_group_add(m->consumers, group);
		file_ident(group, t, p, &id);
		n = tfs_inode_find(m->inodes, &id);
		if (n)
			tfs_inode_unhash(m->inodes, n);
		tfs_inode_put(m->inodes, n);
	}
	tfs_topic_unref(t);
	tfs_reply_err(req, rc, "group offset");
}

/* ---- .groups/GROUP/TOPIC.PARTITION --------------------------------------------- */

static bool offset_prefix(const char *buf, size_t len);

struct gfile_fh {
	struct tfs_fh base;
	pthread_mutex_t lock;
	char buf[GROUP_FILE_CAP];
	size_t len;
	bool written;                   /* changed since the last commit */
};

static int gfile_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                      struct stat *st)
{
	char group[GROUP_NAME_MAX + 1], num[GROUP_FILE_CAP];
	struct tfs_group_offset o;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	int64_t mtime = 0;
	off_t size = 0;

	if (!tfs_mount_plog(n))
		return -ENOENT;
	if (fi && tfs_fh_of(fi)) {
		struct gfile_fh *h = (struct gfile_fh *)tfs_fh_of(fi);
		pthread_mutex_lock(&h->lock);
		size = (off_t)h->len;
		pthread_mutex_unlock(&h->lock);
	} else if (groups_of(m) && tfs_groups_fetch(groups_of(m), node_group(n, group),
	                                            tfs_topic_name(n->topic), n->partition, &o) == 0) {
		size = snprintf(num, sizeof(num), "%" PRId64 "\n", o.offset);
		mtime = o.commit_ms;
		tfs_group_offset_release(&o);
	}
	tfs_topic_owner(n, &uid, &gid, &mode);
	tfs_stat_file(n, mode & 0666, uid, gid, size, mtime, st);
	return fi ? TFS_STAT_VOLATILE : 0;
}

static void gfile_fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct gfile_fh *h = (struct gfile_fh *)fh;

	tfs_fh_unregister(m, fh);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* Opens n: its committed offset as the content, unless truncated or new. */
static int gfile_fh_open(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                         bool created, struct gfile_fh **out)
{
	char group[GROUP_NAME_MAX + 1];
	struct tfs_group_offset o;
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	struct gfile_fh *h;
	int rc = 0;

	if (writing && (m->read_only || !groups_of(m)))
		return -EROFS;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	if (!created && !(writing && (fi->flags & O_TRUNC))) {
		rc = groups_of(m) ? tfs_groups_fetch(groups_of(m), node_group(n, group),
		                                     tfs_topic_name(n->topic), n->partition, &o)
		                  : -ENOENT;
		if (rc == 0) {
			h->len = (size_t)snprintf(h->buf, sizeof(h->buf), "%" PRId64 "\n", o.offset);
			tfs_group_offset_release(&o);
		}
	}
	if (rc < 0) {
		pthread_mutex_destroy(&h->lock);
		free(h);
		return rc;
	}
	/* a new or truncated file is a commit to come: of nothing, if nothing is
	 * written, which is refused (EINVAL) rather than dropped */
	h->written = created || (writing && (fi->flags & O_TRUNC));
	tfs_fh_register(m, &h->base, n, gfile_fh_free);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	*out = h;
	return 0;
}

static void gfile_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                       struct fuse_file_info *fi)
{
	struct gfile_fh *h;
	int rc = gfile_fh_open(m, n, fi, false, &h);

	if (rc < 0) {
		tfs_reply_err(req, rc, "group offset");
		return;
	}
	if (fuse_reply_open(req, fi) != 0)
		gfile_fh_free(m, &h->base);
}

static void group_dir_create(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, mode_t mode, struct fuse_file_info *fi)
{
	char group[GROUP_NAME_MAX + 1];
	struct fuse_entry_param e;
	struct tfs_node_ident id;
	struct tfs_node *n = NULL;
	struct gfile_fh *h;
	struct tfs_topic *t;
	int32_t p;
	int rc = parse_file_name(m, name, &t, &p);

	if (rc < 0) {
		if (rc == -EINVAL)
			tfs_log_warn("fs", ".groups/%s/%s: not TOPIC.PARTITION of an existing topic",
			             node_group(dir, group), name);
		tfs_reply_err(req, rc, "group offset");
		return;
	}
	node_group(dir, group);
	if (m->read_only || !groups_of(m))
		rc = -EROFS;
	else if (!may_write_topic(req, t))
		rc = -EACCES;
	if (rc == 0) {
		file_ident(group, t, p, &id);
		rc = tfs_make_entry(m, &id, &e, &n);
	}
	tfs_topic_unref(t);
	if (rc < 0) {
		tfs_reply_err(req, rc, "group offset");
		return;
	}
	rc = gfile_fh_open(m, n, fi, true, &h);
	if (rc < 0) {
		tfs_inode_forget(m->inodes, n->nodeid, 1);
		tfs_inode_put(m->inodes, n);
		tfs_reply_err(req, rc, "group offset");
		return;
	}
	if (fuse_reply_create(req, &e, fi) != 0) {
		gfile_fh_free(m, &h->base);
		tfs_inode_forget(m->inodes, n->nodeid, 1);
	}
	tfs_inode_put(m->inodes, n);
}

static void gfile_read(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, size_t size,
                       off_t off, struct fuse_file_info *fi)
{
	struct gfile_fh *h = (struct gfile_fh *)fh;
	char out[GROUP_FILE_CAP];
	size_t n = 0;

	pthread_mutex_lock(&h->lock);
	if (off >= 0 && (size_t)off < h->len) {
		n = h->len - (size_t)off < size ? h->len - (size_t)off : size;
		memcpy(out, h->buf + off, n);
	}
	pthread_mutex_unlock(&h->lock);
	fuse_reply_buf(req, out, n);
}

static void gfile_write(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, const char *buf,
                        size_t size, off_t off, struct fuse_file_info *fi)
{
	struct gfile_fh *h = (struct gfile_fh *)fh;
	char group[GROUP_NAME_MAX + 1];
	int rc = 0;

	pthread_mutex_lock(&h->lock);
	if (fi->flags & O_APPEND)
		off = (off_t)h->len;
	if (off < 0 || (size_t)off > sizeof(h->buf) || size > sizeof(h->buf) - (size_t)off) {
		rc = -EINVAL;
	} else {
		if ((size_t)off > h->len)
			memset(h->buf + h->len, ' ', (size_t)off - h->len);
		memcpy(h->buf + off, buf, size);
		if ((size_t)off + size > h->len)
			h->len = (size_t)off + size;
		h->written = true;
		if (!offset_prefix(h->buf, h->len)) {
			rc = -EINVAL;           /* refused at once: a shell ignores close's error */
			h->written = false;
		}
	}
	pthread_mutex_unlock(&h->lock);
	if (rc < 0) {
		tfs_log_warn("fs", ".groups/%s/%s.%d: %zu bytes at %lld is no offset",
		             node_group(fh->node, group), tfs_topic_name(fh->node->topic),
		             (int)fh->node->partition, size, (long long)off);
		tfs_reply_err(req, rc, "group offset");
		return;
	}
	fuse_reply_write(req, size);
}

/* Whether buf can still become an offset as more is written: blanks, digits,
 * blanks and newlines, in that order. */
static bool offset_prefix(const char *buf, size_t len)
{
	int part = 0;                   /* 0 leading blanks, 1 digits, 2 trailing blanks */

	for (size_t i = 0; i < len; i++) {
		bool digit = buf[i] >= '0' && buf[i] <= '9';
		bool blank = buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n';
		if (!digit && !blank)
			return false;
		if (digit && part == 2)
			return false;
		if (digit)
			part = 1;
		else if (part == 1)
			part = 2;
	}
	return true;
}

/* The offset in buf: blanks, decimal digits, blanks (a final newline included). */
static bool parse_offset(const char *buf, size_t len, int64_t *out)
{
	char num[GROUP_FILE_CAP + 1];
	size_t a = 0, b = len;

	while (a < b && (buf[a] == ' ' || buf[a] == '\t'))
		a++;
	while (b > a && (buf[b - 1] == ' ' || buf[b - 1] == '\t' || buf[b - 1] == '\n'))
		b--;
	if (a == b)
		return false;
	for (size_t i = a; i < b; i++)
		if (buf[i] < '0' || buf[i] > '9')
			return false;
	memcpy(num, buf + a, b - a);
	num[b - a] = '\0';
	return tfs_parse_i64(num, 0, INT64_MAX, out);
}

/* Commits what the handle holds, if it was written. Handle lock held. */
static int gfile_commit(struct tfs_mount *m, struct gfile_fh *h)
{
	struct tfs_node *n = h->base.node;
	char group[GROUP_NAME_MAX + 1];
	struct tfs_group_commit c = { 0 };
	int64_t offset;
	int rc;

	if (!h->written)
		return 0;
	node_group(n, group);
	if (!parse_offset(h->buf, h->len, &offset)) {
		tfs_log_warn("fs", ".groups/%s/%s.%d: not an offset: '%.*s'", group,
		             tfs_topic_name(n->topic), (int)n->partition, (int)h->len, h->buf);
		h->written = false;
		return -EINVAL;
	}
	c.topic = tfs_topic_name(n->topic);
	c.partition = n->partition;
	c.offset = offset;
	c.leader_epoch = -1;
	rc = groups_of(m) ? tfs_groups_commit(groups_of(m), group, -1, &c, 1, -1) : -EROFS;
	h->written = false;
	if (rc == TFS_EGROUPBUSY)
		tfs_log_warn("fs", ".groups/%s/%s.%d: commit of %" PRId64 " refused: the group has members",
		             group, c.topic, (int)c.partition, offset);
	if (rc == 0) {
		tfs_consumers_group_remove(m->consumers, group);    /* the store knows it now */
		tfs_notify_changed(m, n);
	}
	return rc;
}

static int gfile_commit_locking(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct gfile_fh *h = (struct gfile_fh *)fh;
	int rc;

	pthread_mutex_lock(&h->lock);
	rc = gfile_commit(m, h);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static void gfile_flush(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                        struct fuse_file_info *fi)
{
	tfs_reply_err(req, gfile_commit_locking(m, fh), "group offset");
}

static void gfile_fsync(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, int datasync,
                        struct fuse_file_info *fi)
{
	gfile_flush(req, m, fh, fi);     /* a commit is durable when it returns */
}

static void gfile_release(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                          struct fuse_file_info *fi)
{
	int rc = gfile_commit_locking(m, fh);

	if (rc < 0)
		tfs_log_error("fs", "group offset written but not committed at release: %s",
		              tfs_strerror(rc));
	fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

/* ftruncate on a handle (O_TRUNC is the open's); mode, owner and times are the
 * topic's and are accepted without effect, as on keys. */
static void gfile_setattr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                          struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	if (to_set & FUSE_SET_ATTR_SIZE) {
		struct gfile_fh *h = fi ? (struct gfile_fh *)tfs_fh_of(fi) : NULL;
		if (!h || attr->st_size < 0 || (size_t)attr->st_size > sizeof(h->buf)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		pthread_mutex_lock(&h->lock);
		if ((size_t)attr->st_size > h->len)
			memset(h->buf + h->len, ' ', (size_t)attr->st_size - h->len);
		h->len = (size_t)attr->st_size;
		h->written = true;
		pthread_mutex_unlock(&h->lock);
	}
	tfs_reply_attr(req, m, n, fi);
}

const struct tfs_node_ops tfs_kind_group_dir = {
	.name = "group directory",
	.is_dir = true,
	.volatile_attrs = true,
	.stat = group_dir_stat,
	.lookup = group_dir_lookup,
	.create = group_dir_create,
	.unlink = group_dir_unlink,
	.opendir = groups_opendir,
	.readdir = groups_readdir,
	.releasedir = groups_releasedir,
};

const struct tfs_node_ops tfs_kind_group_file = {
	.name = "group offset",
	.volatile_attrs = true,
	.stat = gfile_stat,
	.setattr = gfile_setattr,
	.open = gfile_open,
	.read = gfile_read,
	.write = gfile_write,
	.flush = gfile_flush,
	.release = gfile_release,
	.fsync = gfile_fsync,
};
