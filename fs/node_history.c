/* node_history.c - T/P/.history/ and its views: one read-only file per record still on disk
 * (clean, dirty and active regions alike, keyed or not), named by its offset as
 * 20 zero-padded digits, in ascending order. A file holds the record's value
 * (empty for a tombstone; the xattr `tombstone` tells them apart).
 *
 * Listing opens a cursor at the resume point on every readdir call: record at
 * offset o has cookie o + TFS_DIR_FIRST, and resuming after cookie c reopens at
 * offset c - TFS_DIR_FIRST + 1. Offsets are never renumbered, so the cookies stay
 * valid while the cleaner removes records (the gaps are the point).
 *
 * Unlisted views narrow the listing by region or by key (see "which records a
 * directory lists" below); their entries are the same nodes.
 *
 * A history file's content never changes for its offset, so opens keep the page
 * cache; the handle copies the record at open (at most max.message.bytes, as a
 * key's handle does, rather than pinning whole segments that a forgotten
 * descriptor would keep on disk), so a file open when its record is cleaned away
 * keeps reading the old bytes until it is closed, and its fstat answers from that
 * copy while its name is already gone.
 *
 * What the kernel may cache, given that the cleaner removes records without
 * telling the fs (background passes and retention send no notification, and the
 * notifier has no entry invalidation to drop a name with): listings are never
 * cached (no cache_readdir), and entries get entry and attr timeouts of 0
 * (`uncached`), so every path walk to an entry asks again and a record that is
 * gone is ENOENT at once, whoever removed it. An explicit `clean` therefore needs
 * no invalidation either. The cost is one LOOKUP per access to a history entry,
 * acceptable for a diagnostic view.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner.h"
#include "fs/keyname.h"
#include "fs/node.h"
#include "io/log.h"

#define OFFSET_DIGITS 20            /* "%020" PRId64: 2^63-1 has 19 digits */

struct hist_fh {
	struct tfs_fh base;
	struct tfs_record_copy rec;
};

/* Parses a canonical history name: exactly 20 decimal digits. */
static bool parse_offset(const char *name, tfs_offset_t *out)
{
	int64_t v = 0;

	if (strlen(name) != OFFSET_DIGITS)
		return false;
	for (int i = 0; i < OFFSET_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return false;
		if (v > (INT64_MAX - (name[i] - '0')) / 10)
			return false;
		v = v * 10 + (name[i] - '0');
	}
	*out = v;
	return true;
}

static void hist_attr(struct tfs_node *n, size_t value_len, int64_t timestamp, struct stat *st)
{
	uid_t uid;
	gid_t gid;
	mode_t mode;

	tfs_topic_owner(n, &uid, &gid, &mode);
	tfs_stat_file(n, mode & 0444, uid, gid, (off_t)value_len, timestamp, st);
}

/* A LOOKUP or readdirplus entry for the record at offset, whose value is
 * value_len bytes and whose timestamp is timestamp (from the caller's read: no
 * second one). */
static int hist_entry_param(struct tfs_mount *m, struct tfs_node *dir, tfs_offset_t offset,
                            size_t value_len, int64_t timestamp, struct fuse_entry_param *e)
{
	struct tfs_node_ident id;
	struct tfs_node *n;
	int rc;

	tfs_child_ident(dir, TFS_NODE_HIST_ENTRY, offset, tfs_slice_make(NULL, 0), &id);
	memset(e, 0, sizeof(*e));
	rc = tfs_inode_lookup(m->inodes, &id, &n);
	if (rc < 0)
		return rc;
	atomic_store_explicit(&n->attrs_cached, true, memory_order_release);
	hist_attr(n, value_len, timestamp, &e->attr);
	e->ino = n->nodeid;
	e->attr_timeout = e->entry_timeout = 0.0;     /* `uncached`: see the top */
	tfs_inode_put(m->inodes, n);
	return 0;
}

/* ---- which records a directory lists ---------------------------------------- */

/* The views (unlisted, like every control entry, so `ls .history` lists offsets
 * only):
 *   .history/.clean/        [log start, first dirty)       what the pass recopies
 *   .history/.dirty/        [first dirty, first uncleanable) what its map reads
 *   .history/.uncleanable/  [first uncleanable, log end)   what it may not touch
 *   .history/.keys/KEY/     the records of one key (KEY spelled as its file name)
 * Their entries are .history's own nodes (same inode, bytes, attributes and
 * pinning), found through the same offset names. A region's bounds are read from
 * the cleaner at each readdir call and each lookup: a pass that moves them between
 * two calls of one listing only narrows what is left of it, and as cookies are
 * offsets a listing never goes back, so it never repeats an offset. */

enum hist_region { REGION_CLEAN, REGION_DIRTY, REGION_UNCLEANABLE, REGION_COUNT };

static const char *const view_names[REGION_COUNT] = { ".clean", ".dirty", ".uncleanable" };
#define KEYS_NAME ".keys"

/* What a directory lists: offsets in [from, to), of one key if by_key. */
struct hist_filter {
	tfs_offset_t from, to;
	bool by_key;
	uint8_t key[TFS_NODE_KEY_CAP];
	size_t key_len;
};

static int region_bounds(struct tfs_mount *m, struct tfs_plog *pl, int region,
                         struct hist_filter *f)
{
	struct tfs_cleaner_partition_info ci;
	struct tfs_plog_stats st;
	int rc = tfs_cleaner_partition_info(tfs_engine_cleaner(m->engine), pl, &ci);

	if (rc < 0)
		return rc == TFS_EREADONLY ? -ENOENT : rc;   /* no cleaner, no regions */
	tfs_plog_stats(pl, &st);
	f->from = region == REGION_CLEAN ? st.log_start_offset :
	          region == REGION_DIRTY ? ci.first_dirty_offset : ci.first_uncleanable_offset;
	f->to = region == REGION_CLEAN ? ci.first_dirty_offset :
	        region == REGION_DIRTY ? ci.first_uncleanable_offset : INT64_MAX;
	return 0;
}

/* The filter of dir (a .history directory or one of its views). */
static int filter_of(struct tfs_mount *m, struct tfs_node *dir, struct tfs_plog *pl,
                     struct hist_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->to = INT64_MAX;
	switch (dir->kind) {
	case TFS_NODE_HIST_VIEW:
		return region_bounds(m, pl, (int)dir->num, f);
	case TFS_NODE_HIST_KEY:
		pthread_mutex_lock(&dir->lock);
		f->key_len = dir->key_len < sizeof(f->key) ? dir->key_len : sizeof(f->key);
		if (f->key_len)
			memcpy(f->key, dir->key, f->key_len);
		pthread_mutex_unlock(&dir->lock);
		f->by_key = true;
		return 0;
	default:
		return 0;
	}
}

/* Whether f lists the record at offset; control is its batch's control bit (a
 * transaction marker's key bytes are its type, so no key's view lists it). */
static bool filter_takes(const struct hist_filter *f, tfs_offset_t offset, bool key_null,
                         struct tfs_slice key, bool control)
{
	if (offset < f->from || offset >= f->to)
		return false;
	return !f->by_key || (!key_null && !control && key.len == f->key_len &&
	                      (key.len == 0 || !memcmp(key.p, f->key, key.len)));
}

/* ---- the directories ---------------------------------------------------------- */

static int hist_dir_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                         struct stat *st)
{
	uid_t uid;
	gid_t gid;
	mode_t mode;

	if (!tfs_mount_plog(n))
		return -ENOENT;
	tfs_topic_owner(n, &uid, &gid, &mode);
	tfs_stat_dir(m, n, mode & 0555, uid, gid, 2, st);
	return 0;
}

/* Replies to the LOOKUP of offset's entry in dir: the record must be on disk now
 * (even if a handle opened before a pass still reads its copy, the name is gone)
 * and be one dir lists. */
static void hist_reply_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                              struct tfs_plog *pl, tfs_offset_t off)
{
	struct fuse_entry_param e;
	struct tfs_record_copy rec;
	struct hist_filter f;
	int rc = filter_of(m, dir, pl, &f);

	if (rc < 0) {
		tfs_reply_err(req, rc, ".history view");
		return;
	}
	if (off < f.from || off >= f.to) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = tfs_plog_read_offset(pl, off, &rec);
	if (rc < 0) {
		tfs_reply_err(req, rc, ".history entry");
		return;
	}
	if (!filter_takes(&f, off, rec.key_null, tfs_slice_make(rec.key, rec.key_len),
	                  rec.batch.attributes & TFS_ATTR_CONTROL))
		rc = -ENOENT;
	else
		rc = hist_entry_param(m, dir, off, rec.value_null ? 0 : rec.value_len, rec.timestamp,
		                      &e);
	tfs_record_copy_release(&rec);
	if (rc < 0) {
		tfs_reply_err(req, rc, ".history entry");
		return;
	}
	if (fuse_reply_entry(req, &e) != 0)
		tfs_inode_forget(m->inodes, e.ino, 1);   /* the kernel never got it */
}

static void hist_dir_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_node_ident id;
	tfs_offset_t off;

	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (dir->kind == TFS_NODE_HIST_DIR) {
		for (int i = 0; i < REGION_COUNT; i++) {
			if (strcmp(name, view_names[i]) != 0)
				continue;
			if (!tfs_engine_cleaner(m->engine)) {
				fuse_reply_err(req, ENOENT);  /* a read-only mount has no regions */
				return;
			}
			tfs_child_ident(dir, TFS_NODE_HIST_VIEW, i, tfs_slice_make(NULL, 0), &id);
			tfs_reply_entry(req, m, &id);
			return;
		}
		if (!strcmp(name, KEYS_NAME)) {
			tfs_child_ident(dir, TFS_NODE_HIST_KEYS, 0, tfs_slice_make(NULL, 0), &id);
			tfs_reply_entry(req, m, &id);
			return;
		}
	}
	if (!parse_offset(name, &off)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	hist_reply_lookup(req, m, dir, pl, off);
}

static void hist_dir_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct tfs_plog_cursor *c = NULL;
	char name[OFFSET_DIGITS + 1];
	struct hist_filter f;
	struct tfs_batch_header bh;
	struct tfs_record r;
	tfs_offset_t start;
	char *buf;
	size_t used;
	int rc = 0;

	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	tfs_key_settle(m, dir);
	used = tfs_dir_add_dots(req, buf, size, &off, plus, dir);
	if (off < TFS_DIR_FIRST - 1)
		goto reply;
	rc = filter_of(m, dir, pl, &f);
	if (rc < 0)
		goto reply;
	start = off >= TFS_DIR_FIRST ? off - TFS_DIR_FIRST + 1 : 0;
	if (start < f.from)
		start = f.from;
	if (start >= f.to)
		goto reply;
	rc = tfs_plog_cursor_open(pl, start, &c);
	if (rc < 0)
		goto reply;
	while ((rc = tfs_plog_cursor_next(c, &r, &bh)) == 1) {
		off_t next = (off_t)r.offset + TFS_DIR_FIRST;
		size_t len;

		if (r.offset >= f.to) {
			rc = 0;
			break;
		}
		if (r.offset < start ||
		    !filter_takes(&f, r.offset, r.key_null, r.key, bh.attributes & TFS_ATTR_CONTROL))
			continue;                   /* the cursor may start inside a batch */
		snprintf(name, sizeof(name), "%020" PRId64, r.offset);
		if (plus) {
			struct fuse_entry_param e;
			if (fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0) > size - used)
				break;
			rc = hist_entry_param(m, dir, r.offset, r.value_null ? 0 : r.value.len,
			                      r.timestamp, &e);
			if (rc < 0)
				break;
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, next);
		} else {
			struct tfs_node_ident id;
			struct stat st = { .st_mode = S_IFREG };
			tfs_child_ident(dir, TFS_NODE_HIST_ENTRY, r.offset, tfs_slice_make(NULL, 0), &id);
			st.st_ino = tfs_inode_ident_hash(&id);
			len = fuse_add_direntry(req, buf + used, size - used, name, &st, next);
			if (len > size - used)
				break;
		}
		used += len;
	}
reply:
	tfs_plog_cursor_close(c);
	/* A corrupt batch ends the listing where it is, with what came before it;
	 * an error before any entry is reported. */
	if (rc < 0 && used == 0) {
		free(buf);
		tfs_reply_err(req, rc, ".history");
		return;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

const struct tfs_node_ops tfs_kind_hist_dir = {
	.name = ".history directory",
	.is_dir = true,
	.volatile_attrs = false,
	.stat = hist_dir_stat,
	.lookup = hist_dir_lookup,
	.readdir = hist_dir_readdir,
};

const struct tfs_node_ops tfs_kind_hist_view = {
	.name = ".history view",
	.is_dir = true,
	.volatile_attrs = false,
	.stat = hist_dir_stat,
	.lookup = hist_dir_lookup,
	.readdir = hist_dir_readdir,
};

/* .history/.keys: a name is a key's directory; nothing is listed (the keys with
 * records on disk are every key the log ever held: `ls` of the partition lists
 * the live ones). */
static void hist_keys_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	uint8_t key[TFS_NODE_KEY_CAP];
	struct tfs_node_ident id;
	struct tfs_keyinfo info;
	ssize_t klen;
	int rc;

	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	klen = tfs_keyname_decode(name, strlen(name), key, sizeof(key));
	if (klen < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* a live key has records; a deleted one may still have its tombstone */
	rc = tfs_plog_lookup(pl, tfs_slice_make(key, (size_t)klen), &info);
	if (rc == -ENOENT) {
		tfs_offset_t *v = NULL;
		size_t n = 0;
		rc = tfs_plog_key_versions(pl, tfs_slice_make(key, (size_t)klen), &v, &n);
		free(v);
		if (rc == 0 && n == 0)
			rc = -ENOENT;
	}
	if (rc < 0) {
		tfs_reply_err(req, rc, ".history/.keys");
		return;
	}
	tfs_child_ident(dir, TFS_NODE_HIST_KEY, 0, tfs_slice_make(key, (size_t)klen), &id);
	tfs_reply_entry(req, m, &id);
}

static void hist_keys_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                              size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	char *buf = malloc(size ? size : 1);
	size_t used;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	used = tfs_dir_add_dots(req, buf, size, &off, plus, dir);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

const struct tfs_node_ops tfs_kind_hist_keys = {
	.name = ".history/.keys",
	.is_dir = true,
	.volatile_attrs = false,
	.stat = hist_dir_stat,
	.lookup = hist_keys_lookup,
	.readdir = hist_keys_readdir,
};

const struct tfs_node_ops tfs_kind_hist_key = {
	.name = ".history/.keys entry",
	.is_dir = true,
	.volatile_attrs = false,
	.uncached = true,             /* its last record may be cleaned away */
	.stat = hist_dir_stat,
	.lookup = hist_dir_lookup,
	.readdir = hist_dir_readdir,
};

/* ---- the entries ---------------------------------------------------------- */

static void hist_fh_free(struct tfs_mount *m, struct tfs_fh *fh);

/* The record of n is gone, but a handle open on it still holds its copy: the
 * kernel's fstat (which sends no handle) must see that copy's size, or `cat <&7`
 * on a descriptor opened before the pass fails with ENOENT before it reads. A
 * handle's copy never changes while it is on the mount's list, and it leaves the
 * list (under handles_lock) before it is freed. */
static bool open_copy_stat(struct tfs_mount *m, struct tfs_node *n, struct stat *st)
{
	bool found = false;
	size_t len = 0;
	int64_t ts = 0;

	pthread_mutex_lock(&n->lock);
	found = n->open_count > 0;
	pthread_mutex_unlock(&n->lock);
	if (!found)
		return false;
	found = false;
	pthread_mutex_lock(&m->handles_lock);
	for (struct tfs_fh *fh = m->handles; fh; fh = fh->next) {
		if (fh->node == n && fh->free_fn == hist_fh_free) {
			const struct hist_fh *h = (const struct hist_fh *)fh;
			len = h->rec.value_len;
			ts = h->rec.timestamp;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&m->handles_lock);
	if (found)
		hist_attr(n, len, ts, st);
	return found;
}

static int hist_entry_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                           struct stat *st)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_record_copy rec;
	int rc;

	if (fi && fi->fh) {                   /* open: its copy, even if cleaned away */
		struct hist_fh *h = (struct hist_fh *)tfs_fh_of(fi);
		hist_attr(n, h->rec.value_len, h->rec.timestamp, st);
		return 0;
	}
	if (!pl)
		return -ENOENT;
	rc = tfs_plog_read_offset(pl, n->num, &rec);
	if (rc == -ENOENT && open_copy_stat(m, n, st))
		return TFS_STAT_VOLATILE;
	if (rc < 0)
		return rc;
	hist_attr(n, rec.value_null ? 0 : rec.value_len, rec.timestamp, st);
	tfs_record_copy_release(&rec);
	return 0;
}

static void hist_fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct hist_fh *h = (struct hist_fh *)fh;

	tfs_fh_unregister(m, fh);
	tfs_record_copy_release(&h->rec);
	free(h);
}

static void hist_entry_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                            struct fuse_file_info *fi)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct hist_fh *h;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, m->read_only ? EROFS : EACCES);
		return;
	}
	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = tfs_plog_read_offset(pl, n->num, &h->rec);
	if (rc < 0) {
		free(h);
		tfs_reply_err(req, rc, ".history entry");
		return;
	}
	if (h->rec.value_null) {
		free(h->rec.value);
		h->rec.value = NULL;
		h->rec.value_len = 0;
	}
	tfs_fh_register(m, &h->base, n, hist_fh_free);
	fi->fh = (uintptr_t)h;
	fi->keep_cache = 1;                   /* an offset's record never changes */
	fi->noflush = 1;
	if (fuse_reply_open(req, fi) != 0)
		hist_fh_free(m, &h->base);
}

static void hist_entry_read(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, size_t size,
                            off_t off, struct fuse_file_info *fi)
{
	struct hist_fh *h = (struct hist_fh *)fh;

	if (off < 0 || (uint64_t)off >= h->rec.value_len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->rec.value_len - (size_t)off)
		size = h->rec.value_len - (size_t)off;
	fuse_reply_buf(req, (const char *)h->rec.value + off, size);
}

static void hist_entry_fsync(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                             int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);                /* nothing of ours to make durable */
}

const struct tfs_node_ops tfs_kind_hist_entry = {
	.name = ".history entry",
	.volatile_attrs = true,
	.uncached = true,
	.stat = hist_entry_stat,
	.open = hist_entry_open,
	.read = hist_entry_read,
	.fsync = hist_entry_fsync,
};
