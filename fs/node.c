/* node.c - helpers shared by the node kinds (see node.h). */
#include "fs/node.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "fs/errmap.h"

const struct tfs_node_ops *tfs_kind_ops(enum tfs_node_kind kind)
{
	static const struct tfs_node_ops *const kinds[TFS_NODE_KINDS] = {
		[TFS_NODE_ROOT] = &tfs_kind_root,
		[TFS_NODE_META_DIR] = &tfs_kind_meta_dir,
		[TFS_NODE_META_FILE] = &tfs_kind_meta_file,
		[TFS_NODE_TOPIC] = &tfs_kind_topic,
		[TFS_NODE_PARTITION] = &tfs_kind_partition,
		[TFS_NODE_KEY] = &tfs_kind_key,
		[TFS_NODE_HIST_DIR] = &tfs_kind_hist_dir,
		[TFS_NODE_HIST_ENTRY] = &tfs_kind_hist_entry,
		[TFS_NODE_APPEND] = &tfs_kind_append,
		[TFS_NODE_PUT] = &tfs_kind_put,
		[TFS_NODE_BATCHES] = &tfs_kind_batches,
		[TFS_NODE_SCRATCH] = &tfs_kind_scratch,
		[TFS_NODE_HIST_VIEW] = &tfs_kind_hist_view,
		[TFS_NODE_HIST_KEYS] = &tfs_kind_hist_keys,
		[TFS_NODE_HIST_KEY] = &tfs_kind_hist_key,
		[TFS_NODE_GROUPS_DIR] = &tfs_kind_groups_dir,
		[TFS_NODE_GROUP_DIR] = &tfs_kind_group_dir,
		[TFS_NODE_GROUP_FILE] = &tfs_kind_group_file,
	};
	return kinds[kind];
}

void tfs_fh_register(struct tfs_mount *m, struct tfs_fh *fh, struct tfs_node *n,
                     void (*free_fn)(struct tfs_mount *, struct tfs_fh *))
{
	tfs_inode_ref(n);
	fh->node = n;
	fh->free_fn = free_fn;
	atomic_init(&fh->refs, 1);
	fh->prev = NULL;
	pthread_mutex_lock(&n->lock);
	n->open_count++;
	pthread_mutex_unlock(&n->lock);
	pthread_mutex_lock(&m->handles_lock);
	fh->next = m->handles;
	if (m->handles)
		m->handles->prev = fh;
	m->handles = fh;
	pthread_mutex_unlock(&m->handles_lock);
	atomic_fetch_add_explicit(&m->open_handles, 1, memory_order_relaxed);
}

void tfs_fh_hold(struct tfs_fh *fh)
{
	atomic_fetch_add_explicit(&fh->refs, 1, memory_order_relaxed);
}

void tfs_fh_put(struct tfs_mount *m, struct tfs_fh *fh)
{
	/* acq_rel: the freeing thread sees every use made under other refs. */
	if (atomic_fetch_sub_explicit(&fh->refs, 1, memory_order_acq_rel) == 1)
		fh->free_fn(m, fh);
}

void tfs_fh_unregister(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct tfs_node *n = fh->node;

	pthread_mutex_lock(&m->handles_lock);
	if (fh->prev)
		fh->prev->next = fh->next;
	else
		m->handles = fh->next;
	if (fh->next)
		fh->next->prev = fh->prev;
	pthread_mutex_unlock(&m->handles_lock);
	atomic_fetch_sub_explicit(&m->open_handles, 1, memory_order_relaxed);
	pthread_mutex_lock(&n->lock);
	n->open_count--;
	pthread_mutex_unlock(&n->lock);
	fh->node = NULL;
	tfs_inode_put(m->inodes, n);
}

void tfs_notify_changed(struct tfs_mount *m, struct tfs_node *n)
{
	/* acq_rel: pairs with the store before a stat (tfs_make_entry, tfs_reply_attr). */
	if (atomic_exchange_explicit(&n->attrs_cached, false, memory_order_acq_rel))
		tfs_notify_inode(m->notifier, n->nodeid, 0);
}

void tfs_reply_err(fuse_req_t req, int err, const char *what)
{
	fuse_reply_err(req, tfs_errno(err, what));
}

static double timeout_of(const struct tfs_mount *m, const struct tfs_node_ops *ops)
{
	if (ops->uncached)
		return 0.0;
	return ops->volatile_attrs ? m->key_timeout : m->dir_timeout;
}

int tfs_make_entry(struct tfs_mount *m, const struct tfs_node_ident *id,
                   struct fuse_entry_param *e, struct tfs_node **out)
{
	const struct tfs_node_ops *ops = tfs_kind_ops(id->kind);
	struct tfs_node *n = NULL;
	int rc;

	if (out)
		*out = NULL;
	memset(e, 0, sizeof(*e));
	rc = tfs_inode_lookup(m->inodes, id, &n);
	if (rc < 0)
		return rc;
	atomic_store_explicit(&n->attrs_cached, true, memory_order_release);
	rc = ops->stat(m, n, NULL, &e->attr);
	if (rc < 0) {
		tfs_inode_forget(m->inodes, n->nodeid, 1);
		tfs_inode_put(m->inodes, n);
		return rc;
	}
	e->ino = n->nodeid;
	e->generation = 0;
	e->attr_timeout = e->entry_timeout = timeout_of(m, ops);
	if (rc == TFS_STAT_VOLATILE)
		e->attr_timeout = 0;
	atomic_fetch_add_explicit(&m->stats.lookups, 1, memory_order_relaxed);
	if (out)
		*out = n;
	else
		tfs_inode_put(m->inodes, n);
	return 0;
}

void tfs_reply_entry(fuse_req_t req, struct tfs_mount *m, const struct tfs_node_ident *id)
{
	struct fuse_entry_param e;
	int rc = tfs_make_entry(m, id, &e, NULL);

	if (rc < 0) {
		tfs_reply_err(req, rc, tfs_kind_ops(id->kind)->name);
		return;
	}
	if (fuse_reply_entry(req, &e) != 0)
		tfs_inode_forget(m->inodes, e.ino, 1);   /* the kernel never got it */
}

void tfs_reply_attr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                    struct fuse_file_info *fi)
{
	const struct tfs_node_ops *ops = tfs_kind_ops(n->kind);
	struct stat st;
	int rc;

	atomic_store_explicit(&n->attrs_cached, true, memory_order_release);
	rc = ops->stat(m, n, fi, &st);

	if (rc < 0) {
		tfs_reply_err(req, rc, ops->name);
		return;
	}
	fuse_reply_attr(req, &st, rc == TFS_STAT_VOLATILE ? 0.0 : timeout_of(m, ops));
}

void tfs_child_ident(const struct tfs_node *dir, enum tfs_node_kind kind, int64_t num,
                     struct tfs_slice key, struct tfs_node_ident *id)
{
	memset(id, 0, sizeof(*id));
	id->kind = kind;
	id->topic = dir->topic;
	id->topic_name = dir->topic ? tfs_topic_name(dir->topic) : NULL;
	id->partition = dir->partition;
	id->num = num;
	id->key = key;
}

static void set_times(struct stat *st, const struct timespec *ts)
{
	st->st_atim = *ts;
	st->st_mtim = *ts;
	st->st_ctim = *ts;
}

void tfs_stat_dir(struct tfs_mount *m, const struct tfs_node *n, mode_t perm, uid_t uid,
                  gid_t gid, nlink_t nlink, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = S_IFDIR | (perm & 07777);
	st->st_nlink = nlink;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_blksize = 4096;
	set_times(st, &m->started);
}

void tfs_stat_file(const struct tfs_node *n, mode_t perm, uid_t uid, gid_t gid, off_t size,
                   int64_t mtime_ms, struct stat *st)
{
	struct timespec ts = { .tv_sec = mtime_ms / 1000, .tv_nsec = (mtime_ms % 1000) * 1000000 };

	if (mtime_ms < 0)
		ts.tv_sec = 0, ts.tv_nsec = 0;
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = S_IFREG | (perm & 07777);
	st->st_nlink = 1;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_size = size;
	st->st_blksize = 4096;
	st->st_blocks = (size + 511) / 512;
	set_times(st, &ts);
}

void tfs_topic_owner(struct tfs_node *n, uid_t *uid, gid_t *gid, mode_t *mode)
{
	struct tfs_topic_meta meta;

	tfs_topic_get_meta(n->topic, &meta);
	*uid = meta.uid;
	*gid = meta.gid;
	*mode = meta.mode & 07777;
}

/* st_ino of a directory's parent (readdir's ".."; glibc skips d_ino 0). */
static uint64_t parent_ino(const struct tfs_node *dir)
{
	struct tfs_node_ident id = { .partition = -1 };

	switch (dir->kind) {
	case TFS_NODE_PARTITION:
		id.kind = TFS_NODE_TOPIC;
		break;
	case TFS_NODE_HIST_DIR:
		id.kind = TFS_NODE_PARTITION;
		id.partition = dir->partition;
		break;
	case TFS_NODE_HIST_VIEW:
	case TFS_NODE_HIST_KEYS:
		id.kind = TFS_NODE_HIST_DIR;
		id.partition = dir->partition;
		break;
	case TFS_NODE_HIST_KEY:
		id.kind = TFS_NODE_HIST_KEYS;
		id.partition = dir->partition;
		break;
	case TFS_NODE_GROUP_DIR:
		id.kind = TFS_NODE_GROUPS_DIR;
		return tfs_inode_ident_hash(&id);
	default:
		return FUSE_ROOT_ID;            /* the root, and what sits in it */
	}
	id.topic_name = tfs_topic_name(dir->topic);
	return tfs_inode_ident_hash(&id);
}

int tfs_dir_add_entry(fuse_req_t req, struct tfs_mount *m, char *buf, size_t size, size_t *used,
                      bool plus, const struct tfs_node_ident *id, mode_t mode, const char *name,
                      off_t next)
{
	size_t room = size - *used, len;

	if (plus) {
		struct fuse_entry_param e;
		/* sized first: an entry that does not fit counts no lookup */
		if (fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0) > room)
			return 0;
		if (tfs_make_entry(m, id, &e, NULL) < 0)
			return -1;
		len = fuse_add_direntry_plus(req, buf + *used, room, name, &e, next);
	} else {
		struct stat st = { .st_ino = tfs_inode_ident_hash(id), .st_mode = mode & S_IFMT };
		len = fuse_add_direntry(req, buf + *used, room, name, &st, next);
		if (len > room)
			return 0;
	}
	*used += len;
	return 1;
}

size_t tfs_dir_add_dots(fuse_req_t req, char *buf, size_t size, off_t *off, bool plus,
                        const struct tfs_node *dir)
{
	static const char *const dots[2] = { ".", ".." };
	size_t used = 0;

	while (*off < TFS_DIR_FIRST - 1) {
		const char *name = dots[*off];
		struct stat st = { .st_ino = *off == 0 ? dir->ino : parent_ino(dir),
		                   .st_mode = S_IFDIR };
		size_t len;

		if (plus) {
			/* ino 0: a plain entry, no lookup counted. */
			struct fuse_entry_param e = { .ino = 0, .attr = st };
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, *off + 1);
		} else {
			len = fuse_add_direntry(req, buf + used, size - used, name, &st, *off + 1);
		}
		if (len > size - used)
			break;
		used += len;
		(*off)++;
	}
	return used;
}

bool tfs_parse_partition(const char *name, int32_t *out)
{
	long long v = 0;

	if (!name[0] || (name[0] == '0' && name[1]))
		return false;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (*p - '0');
		if (v > INT32_MAX)
			return false;
	}
	*out = (int32_t)v;
	return true;
}
