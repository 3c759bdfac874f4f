/* node_scratch.c - the scratch file node kind and its namespace operations (see
 * node_scratch.h; the files themselves are scratch.c's).
 *
 * A scratch node names one file of the store by (partition, name) and holds a
 * reference on it (node->scratch), so that fstat of a file that was unlinked or
 * renamed away while open still answers (nlink 0; the kernel sends it without the
 * handle). Handles hold their own reference: a handle reads and writes the file it
 * opened, whatever happens to the name, exactly as with a local file. Once a file
 * has neither a name nor an open handle the node lets it go (drop_unnamed), so its
 * bytes leave the bound at once, not when the kernel forgets the node (which, for
 * a node renamed onto a key, may be never while mounted).
 *
 * Entries and attributes are never cached by the kernel (timeouts 0). That is
 * what makes a rename onto a key correct: the kernel moves the scratch node's
 * dentry to the key's name, but as the dentry is never trusted, the next path
 * lookup of that name asks again and gets the key's node. The scratch node never
 * becomes a key; it stays an unnamed scratch file for its open handles, whose
 * later writes reach no record (as writes to an unlinked key reach none).
 *
 * Nothing here appends to the log except a rename onto a key, which appends
 * exactly one record: the key with the file's content, under the file's lock, so
 * that no write lands between the record and the loss of the scratch name.
 *
 * Permissions are the kernel's (default_permissions), from the attributes given
 * here: a file belongs to its creator's uid and gid with the mode of its create,
 * and creating, removing or renaming one needs write permission on the partition
 * directory, as for keys. As for keys, no mode has execute, set-id or sticky bits
 * (SCRATCH_MODE_MASK): a scratch file is never a program, let alone a set-id one
 * (with the checks turned off, anyone could chown one to root).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/keyname.h"
#include "fs/node.h"
#include "fs/node_scratch.h"
#include "fs/scratch.h"
#include "io/log.h"

#define SCRATCH_MODE_MASK 0666        /* read and write bits only, as a key's */

struct scratch_fh {
	struct tfs_fh base;
	struct tfs_scratch_file *file;  /* a reference */
	bool append;                    /* O_APPEND: writes go to the end */
};

static inline struct scratch_fh *fh_of(struct tfs_fh *fh)
{
	return (struct scratch_fh *)fh;
}

static void ident_of(const struct tfs_node *dir, const char *name, struct tfs_node_ident *id)
{
	tfs_child_ident(dir, TFS_NODE_SCRATCH, 0, tfs_slice_make(name, strlen(name)), id);
}

/* The file n names, with a reference, or NULL. */
static struct tfs_scratch_file *node_file(struct tfs_node *n)
{
	struct tfs_scratch_file *f;

	pthread_mutex_lock(&n->lock);
	f = n->scratch;
	if (f)
		tfs_scratch_ref(f);
	pthread_mutex_unlock(&n->lock);
	return f;
}

/* The file of fi's handle when the kernel sent one for n, else n's; a reference. */
static struct tfs_scratch_file *file_for(struct tfs_node *n, struct fuse_file_info *fi)
{
	if (fi && fi->fh) {
		struct scratch_fh *h = fh_of(tfs_fh_of(fi));
		if (h->base.node == n) {
			tfs_scratch_ref(h->file);
			return h->file;
		}
	}
	return node_file(n);
}

/* n names f from now on (the store's file of n's name). */
static void attach(struct tfs_node *n, struct tfs_scratch_file *f)
{
	struct tfs_scratch_file *old;

	tfs_scratch_ref(f);
	pthread_mutex_lock(&n->lock);
	old = n->scratch;
	n->scratch = f;
	pthread_mutex_unlock(&n->lock);
	tfs_scratch_put(old);
}

/* n lets its file go if nobody can reach it any more: no name, no open handle.
 * Lock order: node lock -> store lock (tfs_scratch_named). */
static void drop_unnamed(struct tfs_node *n)
{
	struct tfs_scratch_file *gone = NULL;

	pthread_mutex_lock(&n->lock);
	if (n->scratch && n->open_count == 0 && !tfs_scratch_named(n->scratch)) {
		gone = n->scratch;
		n->scratch = NULL;
	}
	pthread_mutex_unlock(&n->lock);
	tfs_scratch_put(gone);
}

/* Drops f's name (a create that cannot be replied to). */
static int no_op(void *arg, const uint8_t *p, size_t len)
{
	(void)arg, (void)p, (void)len;
	return 0;
}

static void log_full(struct tfs_mount *m, const struct tfs_node *dir, const char *name,
                     const char *what)
{
	uint64_t bytes, max_bytes;
	uint32_t files, max_files;

	tfs_scratch_usage(m->scratch, &bytes, &files, &max_bytes, &max_files);
	tfs_log_warn("fs", "%s of scratch file %s in %s/%d refused: the mount's scratch files "
	             "hold %llu of scratch_max_bytes=%llu bytes, %u of scratch_max_files=%u",
	             what, name, tfs_topic_name(dir->topic), (int)dir->partition,
	             (unsigned long long)bytes, (unsigned long long)max_bytes, files, max_files);
}

/* The node of name (creating it), naming f, and the entry to reply with. *out gets
 * a temporary reference; one lookup is counted. */
static int make_entry(struct tfs_mount *m, struct tfs_node *dir, const char *name,
                      struct tfs_scratch_file *f, struct fuse_entry_param *e,
                      struct tfs_node **out)
{
	struct tfs_node_ident id;
	struct tfs_node *n;
	int rc;

	ident_of(dir, name, &id);
	rc = tfs_inode_lookup(m->inodes, &id, &n);
	if (rc < 0)
		return rc;
	attach(n, f);
	memset(e, 0, sizeof(*e));
	tfs_scratch_stat(f, &e->attr);
	e->attr.st_ino = n->ino;
	e->ino = n->nodeid;
	e->attr_timeout = e->entry_timeout = 0.0;       /* see the top of this file */
	atomic_fetch_add_explicit(&m->stats.lookups, 1, memory_order_relaxed);
	*out = n;
	return 0;
}

/* Replies with make_entry's result (rc, and e for node n, whose temporary
 * reference it drops). */
static void reply_entry(fuse_req_t req, struct tfs_mount *m, int rc,
                        const struct fuse_entry_param *e, struct tfs_node *n)
{
	if (rc < 0) {
		tfs_reply_err(req, rc, "scratch file");
		return;
	}
	if (fuse_reply_entry(req, e) != 0)
		tfs_inode_forget(m->inodes, n->nodeid, 1);
	tfs_inode_put(m->inodes, n);
}

/* ---- namespace (through the partition directory) --------------------------- */

void tfs_scratch_node_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	struct tfs_scratch_file *f;
	struct fuse_entry_param e;
	struct tfs_node *n = NULL;
	int rc;

	if (!tfs_mount_plog(dir) ||
	    tfs_scratch_lookup(m->scratch, dir->topic, dir->partition, name, &f) < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = make_entry(m, dir, name, f, &e, &n);
	tfs_scratch_put(f);
	reply_entry(req, m, rc, &e, n);
}

/* Creates (or, unless excl, finds) the file name; a reference in *out. */
static int make_file(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
                     mode_t mode, bool excl, struct tfs_scratch_file **out, bool *created)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int rc;

	if (m->read_only)
		return -EROFS;
	if (!tfs_mount_plog(dir))
		return -ENOENT;
	rc = tfs_scratch_make(m->scratch, dir->topic, dir->partition, name,
	                      mode & SCRATCH_MODE_MASK, ctx->uid,
	                      ctx->gid, excl, out, created);
	if (rc == -ENOSPC)
		log_full(m, dir, name, "create");
	return rc;
}

static void fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct scratch_fh *h = fh_of(fh);
	struct tfs_node *n = fh->node;

	tfs_inode_ref(n);                       /* past the handle's own reference */
	tfs_fh_unregister(m, fh);
	tfs_scratch_put(h->file);
	drop_unnamed(n);
	tfs_inode_put(m->inodes, n);
	free(h);
}

void tfs_scratch_node_create(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, mode_t mode, struct fuse_file_info *fi)
{
	struct tfs_scratch_file *f = NULL;
	struct fuse_entry_param e;
	struct scratch_fh *h = NULL;
	struct tfs_node *n = NULL;
	bool created = false;
	int rc;

	rc = make_file(req, m, dir, name, mode, (fi->flags & O_EXCL) != 0, &f, &created);
	if (rc == 0 && !created && (fi->flags & O_TRUNC))
		rc = tfs_scratch_truncate(f, 0);
	if (rc == 0 && !(h = calloc(1, sizeof(*h))))
		rc = -ENOMEM;
	if (rc == 0)
		rc = make_entry(m, dir, name, f, &e, &n);
	if (rc < 0) {
		if (created)
			tfs_scratch_consume(f, no_op, NULL);
		tfs_scratch_put(f);
		free(h);
		tfs_reply_err(req, rc, "scratch file");
		return;
	}
	h->file = f;                            /* the reference of make_file */
	h->append = (fi->flags & O_APPEND) != 0;
	tfs_fh_register(m, &h->base, n, fh_free);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;                      /* every byte through the store */
	fi->noflush = 1;                        /* nothing to commit at close */
	if (fuse_reply_create(req, &e, fi) != 0) {
		fh_free(m, &h->base);
		tfs_inode_forget(m->inodes, n->nodeid, 1);
	}
	tfs_inode_put(m->inodes, n);
}

void tfs_scratch_node_mknod(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name, mode_t mode)
{
	struct tfs_scratch_file *f = NULL;
	struct fuse_entry_param e;
	struct tfs_node *n = NULL;
	bool created;
	int rc;

	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);     /* device nodes and fifos, as for keys */
		return;
	}
	rc = make_file(req, m, dir, name, mode, true, &f, &created);
	if (rc == 0) {
		rc = make_entry(m, dir, name, f, &e, &n);
		if (rc < 0)
			tfs_scratch_consume(f, no_op, NULL);
	}
	tfs_scratch_put(f);
	reply_entry(req, m, rc, &e, n);
}

/* The node named name in dir loses its name (it was unlinked or replaced). */
static void unhash_name(struct tfs_mount *m, struct tfs_node *dir, enum tfs_node_kind kind,
                        struct tfs_slice key)
{
	struct tfs_node_ident id;
	struct tfs_node *n;

	tfs_child_ident(dir, kind, 0, key, &id);
	n = tfs_inode_find(m->inodes, &id);
	if (n) {
		tfs_inode_unhash(m->inodes, n);
		if (kind == TFS_NODE_SCRATCH)
			drop_unnamed(n);
	}
	tfs_inode_put(m->inodes, n);
}

void tfs_scratch_node_unlink(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	int rc;

	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = tfs_mount_plog(dir) ? tfs_scratch_unlink(m->scratch, dir->topic, dir->partition, name)
	                         : -ENOENT;
	if (rc == 0)
		unhash_name(m, dir, TFS_NODE_SCRATCH, tfs_slice_make(name, strlen(name)));
	tfs_reply_err(req, rc, "scratch file");
}

void tfs_scratch_node_rmdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name)
{
	struct tfs_scratch_file *f;
	int rc = tfs_mount_plog(dir) ? tfs_scratch_lookup(m->scratch, dir->topic, dir->partition,
	                                                  name, &f)
	                             : -ENOENT;

	if (rc == 0)
		tfs_scratch_put(f);
	fuse_reply_err(req, rc == 0 ? ENOTDIR : ENOENT);
}

/* What a rename onto a key appends: one record, the key with the file's bytes. */
struct key_commit {
	struct tfs_plog *pl;
	struct tfs_slice key;
	size_t payload_max;             /* key + value bound from max.message.bytes */
};

static int commit_to_key(void *arg, const uint8_t *p, size_t len)
{
	static const uint8_t empty[1];
	struct key_commit *c = arg;
	struct tfs_append_rec rec = { 0 };

	if (c->key.len + len > c->payload_max)
		return -EFBIG;
	rec.key = tfs_slice_make(c->key.len ? c->key.p : empty, c->key.len);
	rec.value = tfs_slice_make(len ? p : empty, len);
	return tfs_plog_append(c->pl, &rec, 1, false, NULL, NULL);
}

static int rename_to_key(struct tfs_mount *m, struct tfs_node *dir, const char *name,
                         const char *newname, bool noreplace)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_scratch_file *f = NULL;
	struct tfs_topic_config cfg;
	struct key_commit c = { .pl = pl };
	struct tfs_node_ident kid;
	struct tfs_keyinfo info;
	struct tfs_node *kn;
	uint8_t kb[TFS_NODE_KEY_CAP];
	ssize_t klen;
	int rc;

	klen = tfs_keyname_decode(newname, strlen(newname), kb, sizeof(kb));
	if (klen < 0)
		return klen == -ENAMETOOLONG ? -ENAMETOOLONG : -EINVAL;   /* not a key's name */
	if (tfs_scratch_lookup(m->scratch, dir->topic, dir->partition, name, &f) < 0)
		return -ENOENT;
	c.key = tfs_slice_make(kb, (size_t)klen);
	tfs_child_ident(dir, TFS_NODE_KEY, 0, c.key, &kid);
	kn = tfs_inode_find(m->inodes, &kid);
	if (noreplace) {
		int lrc = tfs_plog_lookup(pl, c.key, &info);
		bool target = lrc == 0;
		if (lrc < 0 && lrc != -ENOENT) {
			rc = lrc;
			goto out;
		}
		if (!target && kn) {
			pthread_mutex_lock(&kn->lock);
			target = kn->writers != NULL;   /* created, not committed yet */
			pthread_mutex_unlock(&kn->lock);
		}
		if (target) {
			rc = -EEXIST;
			goto out;
		}
	}
	tfs_topic_get_config(dir->topic, &cfg);
	c.payload_max = tfs_record_payload_max(cfg.max_message_bytes);
	rc = tfs_scratch_consume(f, commit_to_key, &c);
	if (rc < 0)
		goto out;
	atomic_fetch_add_explicit(&m->stats.commits, 1, memory_order_relaxed);
	unhash_name(m, dir, TFS_NODE_SCRATCH, tfs_slice_make(name, strlen(name)));
	/* The key's old node is replaced, as by a rename over it: its open writers
	 * commit nothing any more, and the next lookup gets a fresh node. */
	if (kn)
		tfs_inode_unhash(m->inodes, kn);
out:
	tfs_inode_put(m->inodes, kn);
	tfs_scratch_put(f);
	return rc;
}

/* Before on takes the name nid: the node that has it loses its file if that was
 * the file's last way in (rename over a scratch file nobody has open). */
static void drop_replaced(struct tfs_mount *m, const struct tfs_node_ident *nid,
                          struct tfs_node *on)
{
	struct tfs_node *old = tfs_inode_find(m->inodes, nid);

	if (old && old != on)
		drop_unnamed(old);
	tfs_inode_put(m->inodes, old);
}

void tfs_scratch_node_rename(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, struct tfs_node *newdir, const char *newname,
                             unsigned flags, bool to_scratch)
{
	struct tfs_node_ident oid, nid;
	struct tfs_node *on;
	int rc;

	if (flags & ~(unsigned)RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);    /* RENAME_EXCHANGE, RENAME_WHITEOUT */
		return;
	}
	if (newdir->kind != TFS_NODE_PARTITION || newdir->topic != dir->topic ||
	    newdir->partition != dir->partition) {
		fuse_reply_err(req, EXDEV);     /* a scratch file belongs to its partition */
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!tfs_mount_plog(dir)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!to_scratch) {
		rc = rename_to_key(m, dir, name, newname, (flags & RENAME_NOREPLACE) != 0);
		if (rc == -EFBIG)
			tfs_log_warn("fs", "rename of scratch file %s onto key %s in %s/%d refused: "
			             "larger than max.message.bytes", name, newname,
			             tfs_topic_name(dir->topic), (int)dir->partition);
		tfs_reply_err(req, rc, "scratch file");
		return;
	}
	rc = tfs_scratch_rename(m->scratch, dir->topic, dir->partition, name, newname,
	                        (flags & RENAME_NOREPLACE) != 0);
	if (rc == 0 && strcmp(name, newname) != 0) {
		ident_of(dir, name, &oid);
		ident_of(dir, newname, &nid);
		on = tfs_inode_find(m->inodes, &oid);
		if (on)
			drop_replaced(m, &nid, on);
		if (on && tfs_inode_rename(m->inodes, on, &nid) < 0) {
			/* The store has renamed: let both names be looked up afresh. */
			tfs_inode_unhash(m->inodes, on);
			unhash_name(m, dir, TFS_NODE_SCRATCH, nid.key);
		} else if (!on) {
			unhash_name(m, dir, TFS_NODE_SCRATCH, nid.key);
		}
		tfs_inode_put(m->inodes, on);
	}
	tfs_reply_err(req, rc, "scratch file");
}

/* ---- the node kind ---------------------------------------------------------- */

static int scratch_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                        struct stat *st)
{
	struct tfs_scratch_file *f = file_for(n, fi);

	(void)m;
	if (!f)
		return -ENOENT;
	tfs_scratch_stat(f, st);
	st->st_ino = n->ino;
	tfs_scratch_put(f);
	return TFS_STAT_VOLATILE;
}

static void scratch_setattr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                            struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct tfs_scratch_file *f = file_for(n, fi);
	int rc = 0;

	if (!f) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (m->read_only) {
		rc = -EROFS;
		goto out;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		rc = tfs_scratch_truncate(f, attr->st_size);
		if (rc == -ENOSPC)
			tfs_log_warn("fs", "truncate of a scratch file in %s/%d to %lld bytes refused: "
			             "past scratch_max_bytes", tfs_topic_name(n->topic),
			             (int)n->partition, (long long)attr->st_size);
		if (rc < 0)
			goto out;
	}
	if (to_set & FUSE_SET_ATTR_MODE)
		tfs_scratch_set_mode(f, attr->st_mode & SCRATCH_MODE_MASK);
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		tfs_scratch_set_owner(f, (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1,
		                      (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1);
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec now = { .tv_nsec = UTIME_NOW };
		const struct timespec *at = NULL, *mt = NULL;
		if (to_set & FUSE_SET_ATTR_ATIME)
			at = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? &now : &attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME)
			mt = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? &now : &attr->st_mtim;
		tfs_scratch_set_times(f, at, mt);
	}
out:
	tfs_scratch_put(f);
	if (rc < 0)
		tfs_reply_err(req, rc, "scratch file");
	else
		tfs_reply_attr(req, m, n, fi);
}

static void scratch_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                         struct fuse_file_info *fi)
{
	struct tfs_scratch_file *f = node_file(n);
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	struct scratch_fh *h = NULL;
	int rc = 0;

	if (!f) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (writing && m->read_only)
		rc = -EROFS;
	else if (writing && (fi->flags & O_TRUNC))
		rc = tfs_scratch_truncate(f, 0);
	if (rc == 0 && !(h = calloc(1, sizeof(*h))))
		rc = -ENOMEM;
	if (rc < 0) {
		tfs_scratch_put(f);
		tfs_reply_err(req, rc, "scratch file");
		return;
	}
	h->file = f;
	h->append = (fi->flags & O_APPEND) != 0;
	tfs_fh_register(m, &h->base, n, fh_free);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	fi->noflush = 1;
	if (fuse_reply_open(req, fi) != 0)
		fh_free(m, &h->base);
}

static void scratch_read(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, size_t size,
                         off_t off, struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	ssize_t got;

	(void)m, (void)fi;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = tfs_scratch_read(fh_of(fh)->file, buf, size, off);
	if (got < 0)
		tfs_reply_err(req, (int)got, "scratch file");
	else
		fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}

static void scratch_write(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                          const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct scratch_fh *h = fh_of(fh);
	ssize_t rc;

	(void)fi;
	rc = tfs_scratch_write(h->file, buf, size, off, h->append);
	if (rc == -ENOSPC) {
		uint64_t max_bytes;
		tfs_scratch_usage(m->scratch, NULL, NULL, &max_bytes, NULL);
		tfs_log_warn("fs", "write of %zu bytes at %lld to a scratch file in %s/%d refused: "
		             "past scratch_max_bytes=%llu", size, (long long)off,
		             tfs_topic_name(fh->node->topic), (int)fh->node->partition,
		             (unsigned long long)max_bytes);
	}
	if (rc < 0)
		tfs_reply_err(req, (int)rc, "scratch file");
	else
		fuse_reply_write(req, (size_t)rc);
}

static void scratch_release(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                            struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

const struct tfs_node_ops tfs_kind_scratch = {
	.name = "scratch file",
	.volatile_attrs = true,
	.uncached = true,
	.stat = scratch_stat,
	.setattr = scratch_setattr,
	.open = scratch_open,
	.read = scratch_read,
	.write = scratch_write,
	.release = scratch_release,
	/* fsync: ops.c's default 0. A scratch file is never durable (like tmpfs). */
};
