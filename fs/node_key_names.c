/* node_key_names.c - the key operations that go through a partition directory:
 * lookup, create, unlink (a tombstone) and rename (the new key's record and the
 * old key's tombstone as one unit). Handles themselves live in node_key.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/keyname.h"
#include "fs/node.h"
#include "fs/node_key.h"
#include "io/log.h"

void tfs_key_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_node_ident id;
	struct tfs_keyinfo info;
	struct tfs_node *n;
	uint8_t kb[TFS_NODE_KEY_CAP];
	ssize_t klen = tfs_key__decode_name(name, kb);
	int rc;

	if (klen < 0 || !pl) {
		fuse_reply_err(req, ENOENT);    /* a non-canonical name names no key */
		return;
	}
	tfs_child_ident(dir, TFS_NODE_KEY, 0, tfs_slice_make(kb, (size_t)klen), &id);
	n = tfs_inode_find(m->inodes, &id);
	rc = n ? 0 : tfs_plog_lookup(pl, id.key, &info);
	if (rc < 0) {
		/* no entry: the kernel caches nothing; EIO when the partition's key
		 * directory cannot be trusted (it would make up an absence) */
		fuse_reply_err(req, -rc);
		return;
	}
	tfs_inode_put(m->inodes, n);
	tfs_reply_entry(req, m, &id);
}

void tfs_key_create(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
                    mode_t mode, struct fuse_file_info *fi)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_key_handle *h = NULL;
	struct fuse_entry_param e;
	struct tfs_node_ident id;
	struct tfs_keyinfo info;
	struct tfs_node *n = NULL;
	uint8_t kb[TFS_NODE_KEY_CAP];
	ssize_t klen;
	bool live;
	int rc;

	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	klen = tfs_key__decode_name(name, kb);
	if (klen < 0) {
		fuse_reply_err(req, klen == -ENAMETOOLONG ? ENAMETOOLONG : EINVAL);
		return;
	}
	if (tfs_key__value_max(dir, (size_t)klen) < 0) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	tfs_child_ident(dir, TFS_NODE_KEY, 0, tfs_slice_make(kb, (size_t)klen), &id);
	rc = tfs_plog_lookup(pl, id.key, &info);
	if (rc < 0 && rc != -ENOENT) {
		tfs_reply_err(req, rc, "key");
		return;
	}
	live = rc == 0;
	if (live && (fi->flags & O_EXCL)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = tfs_inode_lookup(m->inodes, &id, &n);
	if (rc < 0) {
		free(h);
		tfs_reply_err(req, rc, "key");
		return;
	}
	/* A new key starts dirty (touch commits an empty value); an existing one that
	 * the kernel did not know yet opens as usual. */
	rc = tfs_key__writer_init(m, n, h, (fi->flags & O_TRUNC) || !live, (fi->flags & O_APPEND) != 0,
	                 !live);
	if (rc < 0)
		goto fail;
	tfs_key__set_opener(h, req);
	tfs_fh_register(m, &h->base, n, tfs_key__fh_free);
	while (tfs_key__link_writer(m, n, h) < 0) {
		/* n has page-cache readers and is now retired: the reply names a
		 * fresh node instead (retired nodes are passed by lookups). */
		struct tfs_node *fresh;
		tfs_key__fh_discard(m, h);
		tfs_inode_forget(m->inodes, n->nodeid, 1);
		tfs_inode_put(m->inodes, n);
		h = NULL;
		n = NULL;
		rc = tfs_inode_lookup(m->inodes, &id, &fresh);
		if (rc < 0)
			goto fail;
		n = fresh;
		h = calloc(1, sizeof(*h));
		if (!h) {
			rc = -ENOMEM;
			goto fail;
		}
		rc = tfs_key__writer_init(m, n, h, (fi->flags & O_TRUNC) || !live,
		                          (fi->flags & O_APPEND) != 0, !live);
		if (rc < 0)
			goto fail;
		tfs_key__set_opener(h, req);
		tfs_fh_register(m, &h->base, n, tfs_key__fh_free);
	}
	if (!h->pending) {                      /* link_writer numbered pending ones */
		pthread_mutex_lock(&n->lock);
		h->write_seq = atomic_fetch_add_explicit(&m->stats.write_seq, 1, memory_order_relaxed);
		pthread_mutex_unlock(&n->lock);
	}
	memset(&e, 0, sizeof(e));
	atomic_store_explicit(&n->attrs_cached, true, memory_order_release);
	rc = tfs_key__stat(m, n, NULL, &e.attr);
	if (rc < 0) {
		tfs_key__fh_free(m, &h->base);
		h = NULL;
		goto fail;
	}
	e.ino = n->nodeid;
	e.entry_timeout = m->key_timeout;
	e.attr_timeout = rc == TFS_STAT_VOLATILE ? 0 : m->key_timeout;
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) != 0) {
		tfs_key__fh_free(m, &h->base);
		tfs_inode_forget(m->inodes, n->nodeid, 1);
	}
	tfs_inode_put(m->inodes, n);
	return;
fail:
	if (h)
		free(h->buf);
	free(h);
	if (n) {
		tfs_inode_forget(m->inodes, n->nodeid, 1);
		tfs_inode_put(m->inodes, n);
	}
	tfs_reply_err(req, rc, "key");
}

void tfs_key_unlink(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_append_rec rec = { 0 };
	struct tfs_node_ident id;
	struct tfs_keyinfo info;
	struct tfs_node *n;
	uint8_t kb[TFS_NODE_KEY_CAP];
	ssize_t klen = tfs_key__decode_name(name, kb);
	bool pending = false;
	int rc = 0;

	if (klen < 0 || !pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* `touch k; rm k`: the creation commits at its RELEASE, which may still be on
	 * its way; without waiting, the tombstone would come first and the empty value
	 * after it, bringing k back. */
	tfs_key_settle(m, dir);
	tfs_child_ident(dir, TFS_NODE_KEY, 0, tfs_slice_make(kb, (size_t)klen), &id);
	n = tfs_inode_find(m->inodes, &id);
	if (n) {
		pthread_mutex_lock(&n->lock);
		pending = n->writers != NULL;
		pthread_mutex_unlock(&n->lock);
	}
	rc = tfs_plog_lookup(pl, id.key, &info);
	if (rc == 0) {
		rec.key = id.key;
		rec.value_null = true;
		rc = tfs_plog_append(pl, &rec, 1, false, NULL, NULL);
		if (rc == 0)
			atomic_fetch_add_explicit(&m->stats.tombstones, 1, memory_order_relaxed);
	} else if (rc == -ENOENT && pending) {
		rc = 0;                         /* created, not committed: the handle's */
	}                                       /* else no live value, or EIO */
	if (rc == 0 && n)
		tfs_inode_unhash(m->inodes, n);
	tfs_inode_put(m->inodes, n);
	tfs_reply_err(req, rc, "key");
}

void tfs_key_rename(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
                    struct tfs_node *newdir, const char *newname, unsigned flags)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_node_ident oid, nid;
	struct tfs_record_copy val = { 0 };
	struct tfs_append_rec recs[2];
	struct tfs_keyinfo info;
	struct tfs_node *on = NULL, *nn = NULL;
	uint8_t okb[TFS_NODE_KEY_CAP], nkb[TFS_NODE_KEY_CAP];
	static const uint8_t empty[1];
	ssize_t olen, nlen;
	bool pending = false, have_val = false;
	int rc = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);    /* RENAME_EXCHANGE, RENAME_WHITEOUT */
		return;
	}
	if (newdir->kind != TFS_NODE_PARTITION || newdir->topic != dir->topic ||
	    newdir->partition != dir->partition) {
		fuse_reply_err(req, EXDEV);     /* mv falls back to copy + unlink */
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	olen = tfs_key__decode_name(name, okb);
	if (olen < 0 || !pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	tfs_key_settle(m, dir);                /* `touch a; mv a b`: a's RELEASE first */
	nlen = tfs_key__decode_name(newname, nkb);
	if (nlen < 0) {
		fuse_reply_err(req, nlen == -ENAMETOOLONG ? ENAMETOOLONG : EINVAL);
		return;
	}
	tfs_child_ident(dir, TFS_NODE_KEY, 0, tfs_slice_make(okb, (size_t)olen), &oid);
	tfs_child_ident(dir, TFS_NODE_KEY, 0, tfs_slice_make(nkb, (size_t)nlen), &nid);
	if (olen == nlen && !memcmp(okb, nkb, (size_t)olen)) {
		fuse_reply_err(req, -tfs_plog_lookup(pl, oid.key, &info));
		return;
	}
	on = tfs_inode_find(m->inodes, &oid);
	nn = tfs_inode_find(m->inodes, &nid);
	if (on) {
		pthread_mutex_lock(&on->lock);
		pending = on->writers != NULL;
		pthread_mutex_unlock(&on->lock);
	}
	if (flags & RENAME_NOREPLACE) {
		int lrc = tfs_plog_lookup(pl, nid.key, &info);
		bool target = lrc == 0;
		if (lrc < 0 && lrc != -ENOENT) {
			rc = lrc;
			goto out;
		}
		if (!target && nn) {
			pthread_mutex_lock(&nn->lock);
			target = nn->writers != NULL;
			pthread_mutex_unlock(&nn->lock);
		}
		if (target) {
			rc = -EEXIST;
			goto out;
		}
	}
	rc = tfs_plog_read_key(pl, oid.key, &val);
	if (rc == 0) {
		have_val = true;
		if ((int64_t)val.value_len > tfs_key__value_max(dir, (size_t)nlen)) {
			rc = -EFBIG;
			goto out;
		}
		memset(recs, 0, sizeof(recs));
		recs[0].key = nid.key;
		recs[0].value = tfs_slice_make(val.value_len ? val.value : empty, val.value_len);
		recs[1].key = oid.key;
		recs[1].value_null = true;
		/* Both or neither: one unit, one batch. */
		rc = tfs_plog_append(pl, recs, 2, false, NULL, NULL);
		if (rc < 0)
			goto out;
		atomic_fetch_add_explicit(&m->stats.tombstones, 1, memory_order_relaxed);
	} else if (rc == -ENOENT && pending) {
		rc = 0;                         /* created, not committed: only the name moves */
	} else {
		goto out;
	}
	if (on) {
		rc = tfs_inode_rename(m->inodes, on, &nid);
		if (rc == 0)
			tfs_notify_changed(m, on);      /* mtime is the new record's */
		else
			tfs_log_error("fs", "rename in %s: node table update failed: %s",
			              tfs_topic_name(dir->topic), tfs_strerror(rc));
		rc = 0;                         /* the records are in: the rename happened */
	} else {
		tfs_inode_rename_retired(m->inodes, &oid, &nid);
		if (nn)
			tfs_inode_unhash(m->inodes, nn);
	}
out:
	if (have_val)
		tfs_record_copy_release(&val);
	tfs_inode_put(m->inodes, on);
	tfs_inode_put(m->inodes, nn);
	tfs_reply_err(req, rc, "key");
}
