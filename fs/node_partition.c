/* node_partition.c - a partition directory: lists live keys; its control entries
 * .history, .append, .put and .batches open by name and are never listed. Every
 * other name with a leading dot is a scratch file (node_scratch.c): never a key
 * (a key's leading dot is spelled %2E), never listed, never logged.
 *
 * Listing walks the key directory in hash order (tfs_plog_scan_keys), so a
 * listing that runs while others write never repeats a key and never misses one
 * that was live throughout (keydir.h). Cookies: the kernel reserves 1 and 2 for
 * "." and ".."; a key with hash h gets cookie (h >> GROUP_SHIFT) + TFS_DIR_FIRST,
 * which stays below 2^63 (seekdir/telldir need a positive off_t). Keys whose hashes
 * share a cookie form a group that is always emitted whole: a buffer never ends in
 * the middle of a group, and resuming after a cookie resumes after the whole group.
 *
 * A partition with an unreadable region (found at open, see partition_log.h) lists
 * every key it knows and then fails with EIO instead of the end of the listing.
 *
 * The visitor runs under the partition's read lock, so it only copies names out
 * (no fs lock, no node creation there: see the lock order in inode.h); entries and
 * readdirplus nodes are made after the scan returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/keyname.h"
#include "fs/node.h"
#include "fs/node_scratch.h"
#include "io/log.h"

#define GROUP_SHIFT 2               /* 64-bit hash -> 62-bit cookie space */

static const char *const control_names[] = { ".history", ".append", ".put", ".batches" };
static const enum tfs_node_kind control_kinds[] = {
	TFS_NODE_HIST_DIR, TFS_NODE_APPEND, TFS_NODE_PUT, TFS_NODE_BATCHES,
};
#define CONTROL_COUNT (sizeof(control_names) / sizeof(control_names[0]))

static inline uint64_t group_of(uint64_t hash)
{
	return hash >> GROUP_SHIFT;
}

static inline off_t cookie_of(uint64_t hash)
{
	return (off_t)group_of(hash) + TFS_DIR_FIRST;
}

/* The last hash of the group a cookie names: resume strictly after it. */
static inline uint64_t resume_after(off_t cookie)
{
	return ((uint64_t)(cookie - TFS_DIR_FIRST) << GROUP_SHIFT) | ((1u << GROUP_SHIFT) - 1);
}

static int partition_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                          struct stat *st)
{
	uid_t uid;
	gid_t gid;
	mode_t mode;

	if (!tfs_mount_plog(n))
		return -ENOENT;
	tfs_topic_owner(n, &uid, &gid, &mode);
	tfs_stat_dir(m, n, mode, uid, gid, 2, st);
	return 0;
}

static bool is_control(const char *name)
{
	for (size_t i = 0; i < CONTROL_COUNT; i++)
		if (!strcmp(name, control_names[i]))
			return true;
	return false;
}

/* A dot name that is not a control entry: a scratch file's (control names win). */
static bool is_scratch(const char *name)
{
	return name[0] == '.' && !is_control(name);
}

static void partition_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	if (is_scratch(name)) {
		tfs_scratch_node_lookup(req, m, dir, name);
		return;
	}
	for (size_t i = 0; i < CONTROL_COUNT; i++) {
		if (!strcmp(name, control_names[i])) {
			struct tfs_node_ident id;
			if (!tfs_mount_plog(dir)) {
				fuse_reply_err(req, ENOENT);
				return;
			}
			tfs_child_ident(dir, control_kinds[i], 0, tfs_slice_make(NULL, 0), &id);
			tfs_reply_entry(req, m, &id);
			return;
		}
	}
	tfs_key_lookup(req, m, dir, name);
}

static void partition_create(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, mode_t mode, struct fuse_file_info *fi)
{
	if (is_control(name))
		fuse_reply_err(req, EEXIST);    /* the kernel found it already */
	else if (is_scratch(name))
		tfs_scratch_node_create(req, m, dir, name, mode, fi);
	else
		tfs_key_create(req, m, dir, name, mode, fi);
}

static void partition_mknod(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name, mode_t mode)
{
	if (is_scratch(name))
		tfs_scratch_node_mknod(req, m, dir, name, mode);
	else
		fuse_reply_err(req, is_control(name) ? EEXIST : EPERM);
}

static void partition_unlink(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name)
{
	if (is_control(name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (is_scratch(name))
		tfs_scratch_node_unlink(req, m, dir, name);
	else
		tfs_key_unlink(req, m, dir, name);
}

static void partition_rmdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name)
{
	if (is_scratch(name))
		tfs_scratch_node_rmdir(req, m, dir, name);
	else
		fuse_reply_err(req, is_control(name) ? EPERM : ENOENT);
}

static void partition_rename(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, struct tfs_node *newdir, const char *newname,
                             unsigned flags)
{
	if (is_control(name) || is_control(newname)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (is_scratch(name))
		tfs_scratch_node_rename(req, m, dir, name, newdir, newname, flags,
		                        is_scratch(newname));
	else if (is_scratch(newname))
		fuse_reply_err(req, EXDEV);     /* out of the log: mv copies, then unlinks */
	else
		tfs_key_rename(req, m, dir, name, newdir, newname, flags);
}

/* ---- readdir -------------------------------------------------------------- */

struct scan_entry {
	uint64_t hash;
	uint64_t ino;
	size_t name_at, key_at;         /* offsets into the arena */
	size_t key_len;
	size_t entry_bytes;             /* what the entry takes in the reply */
};

struct scan {
	fuse_req_t req;
	bool plus;
	size_t size, used;              /* reply buffer budget and estimate */
	uint64_t seed_topic_hash;
	struct tfs_node_ident id;       /* template for st_ino */
	struct scan_entry *ents;
	size_t n, cap;
	char *arena;
	size_t arena_len, arena_cap;
	int err;
};

static int arena_put(struct scan *s, const void *p, size_t len, size_t *at)
{
	if (s->arena_len + len > s->arena_cap) {
		size_t nc = s->arena_cap ? s->arena_cap * 2 : 4096;
		char *na;
		while (nc < s->arena_len + len)
			nc *= 2;
		na = realloc(s->arena, nc);
		if (!na)
			return -ENOMEM;
		s->arena = na;
		s->arena_cap = nc;
	}
	*at = s->arena_len;
	if (len)
		memcpy(s->arena + s->arena_len, p, len);
	s->arena_len += len;
	return 0;
}

static int scan_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                      uint64_t hash)
{
	struct scan *s = arg;
	char name[TFS_KEYNAME_MAX + 1];
	ssize_t nlen = tfs_keyname_encode(key, name, sizeof(name));
	struct scan_entry *e;
	size_t bytes;

	if (nlen < 0)
		return 0;                       /* name too long: only in .history */
	bytes = s->plus ? fuse_add_direntry_plus(s->req, NULL, 0, name, NULL, 0)
	                : fuse_add_direntry(s->req, NULL, 0, name, NULL, 0);
	if (s->used + bytes > s->size) {
		/* Full. Never end inside a group: drop its members already taken (unless
		 * that would leave nothing, which needs 4+ keys in one 62-bit group). */
		size_t keep = s->n;
		while (keep > 0 && group_of(s->ents[keep - 1].hash) == group_of(hash))
			keep--;
		if (keep == 0 && s->n > 0)
			tfs_log_warn("fs", "readdir: a hash group larger than the buffer; "
			             "listing may skip part of it");
		else
			for (; s->n > keep; s->n--)
				s->used -= s->ents[s->n - 1].entry_bytes;
		return 1;
	}
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 64;
		struct scan_entry *ne = realloc(s->ents, nc * sizeof(*ne));
		if (!ne) {
			s->err = -ENOMEM;
			return 1;
		}
		s->ents = ne;
		s->cap = nc;
	}
	e = &s->ents[s->n];
	e->hash = hash;
	e->entry_bytes = bytes;
	s->id.key = key;
	e->ino = tfs_inode_ident_hash(&s->id);
	e->key_len = key.len;
	if (arena_put(s, name, (size_t)nlen + 1, &e->name_at) < 0 ||
	    (s->plus && arena_put(s, key.p, key.len, &e->key_at) < 0)) {
		s->err = -ENOMEM;
		return 1;
	}
	s->n++;
	s->used += bytes;
	(void)info;
	return 0;
}

static void partition_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                              size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct tfs_plog *pl = tfs_mount_plog(dir);
	struct scan s = { .req = req, .plus = plus, .size = size };
	char *buf = NULL;
	size_t used;
	int rc;

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
		goto reply;                     /* not even the dots fit */
	s.used = used;
	tfs_child_ident(dir, TFS_NODE_KEY, 0, tfs_slice_make(NULL, 0), &s.id);
	rc = tfs_plog_scan_keys(pl, off >= TFS_DIR_FIRST, off >= TFS_DIR_FIRST ? resume_after(off) : 0,
	                        scan_visit, &s);
	if (rc < 0 && rc != 1) {
		free(buf);
		free(s.ents);
		free(s.arena);
		tfs_reply_err(req, rc, "partition directory");
		return;
	}
	if (s.err < 0 && s.n == 0) {
		free(buf);
		free(s.ents);
		free(s.arena);
		tfs_reply_err(req, s.err, "partition directory");
		return;
	}
	for (size_t i = 0; i < s.n; i++) {
		const struct scan_entry *e = &s.ents[i];
		const char *name = s.arena + e->name_at;
		size_t len;

		if (plus) {
			struct tfs_node_ident id = s.id;
			struct fuse_entry_param ep;
			id.key = tfs_slice_make(s.arena + e->key_at, e->key_len);
			if (tfs_make_entry(m, &id, &ep, NULL) < 0)
				continue;               /* removed since the scan */
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &ep,
			                             cookie_of(e->hash));
			if (len > size - used) {        /* cannot happen: sizes were counted */
				tfs_inode_forget(m->inodes, ep.ino, 1);
				break;
			}
		} else {
			struct stat st = { .st_ino = e->ino, .st_mode = S_IFREG };
			len = fuse_add_direntry(req, buf + used, size - used, name, &st,
			                        cookie_of(e->hash));
			if (len > size - used)
				break;
		}
		used += len;
	}
	if (rc == 0 && used == 0 && tfs_plog_damage(pl, NULL, 0) > 0) {
		/* Every known key was listed, but an unreadable region may hold keys
		 * nobody can name: the listing cannot be called complete (logged at
		 * open). ls shows what came and fails; cp -r and tar fail. */
		tfs_reply_err(req, TFS_EDAMAGED, "partition directory");
		used = 0;
		goto out;
	}
reply:
	fuse_reply_buf(req, buf, used);
out:
	free(buf);
	free(s.ents);
	free(s.arena);
}

static void partition_fsyncdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                               int datasync, struct fuse_file_info *fi)
{
	struct tfs_plog *pl = tfs_mount_plog(n);

	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	tfs_key_settle(m, n);
	tfs_reply_err(req, tfs_plog_sync(pl), "partition");
}

const struct tfs_node_ops tfs_kind_partition = {
	.name = "partition directory",
	.is_dir = true,
	.stat = partition_stat,
	.lookup = partition_lookup,
	.setattr = tfs_topic_setattr,
	.unlink = partition_unlink,
	.rmdir = partition_rmdir,
	.rename = partition_rename,
	.create = partition_create,
	.mknod = partition_mknod,
	.readdir = partition_readdir,
	.fsyncdir = partition_fsyncdir,
};
