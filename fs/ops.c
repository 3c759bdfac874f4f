/* ops.c - the fuse_lowlevel_ops table: resolve the nodeid or handle, dispatch to
 * the node kind (node_*.c) or to xattr.c, and nothing else.
 *
 * Defaults when a kind does not implement an operation: directory operations on
 * a non-directory ENOTDIR, namespace changes EPERM (link, symlink, mknod, mkdir in
 * a partition, ...), file operations on a directory EISDIR.
 */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs/mount.h"
#include "fs/node.h"
#include "fs/ops.h"
#include "fs/xattr.h"
#include "fs/keyname.h"
#include "io/log.h"

static inline struct tfs_mount *mount_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of ino with a temporary reference, or NULL after replying ESTALE (the
 * kernel named a node it was told to forget: a kernel/daemon disagreement). */
static struct tfs_node *node_or_reply(fuse_req_t req, struct tfs_mount *m, fuse_ino_t ino)
{
	struct tfs_node *n = tfs_inode_get(m->inodes, ino);

	if (!n) {
		tfs_log_warn("fs", "request for unknown node %llu", (unsigned long long)ino);
		fuse_reply_err(req, ESTALE);
	}
	return n;
}

/* FUSE passes names up to 1024 bytes (FUSE_NAME_MAX); a Linux filesystem answers
 * ENAMETOOLONG past NAME_MAX, as ext4 and tmpfs do, and statfs says 255. */
static bool name_too_long(fuse_req_t req, const char *name)
{
	if (strlen(name) <= TFS_KEYNAME_MAX)
		return false;
	fuse_reply_err(req, ENAMETOOLONG);
	return true;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct tfs_mount *m = userdata;

	if (m->conn_opts)
		fuse_apply_conn_info_opts(m->conn_opts, conn);
	/* The kernel must not own sizes or O_APPEND: other nodes change keys. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* libfuse requires the mount option's value here too (see opts.c). */
	conn->max_read = m->max_read;
	/* Parallel readers of large values: the default of 12 caps them (FAST'17). */
	if (conn->max_background < 64)
		conn->max_background = 64;
	if (conn->congestion_threshold < 48)
		conn->congestion_threshold = 48;
}

static void op_destroy(void *userdata)
{
	(void)userdata;
}

/* The directory a name operation runs in, with a temporary reference, and its
 * kind's operations; NULL (replied) if the name is too long or the node unknown. */
static struct tfs_node *name_dir(fuse_req_t req, struct tfs_mount *m, fuse_ino_t parent,
                                 const char *name, const struct tfs_node_ops **ops)
{
	struct tfs_node *dir;

	if (name_too_long(req, name))
		return NULL;
	dir = node_or_reply(req, m, parent);
	if (dir)
		*ops = tfs_kind_ops(dir->kind);
	return dir;
}

/* A name operation the directory's kind does not have: EPERM in a directory
 * (a partition refuses mkdir, the root refuses unlink), ENOTDIR elsewhere. */
static void reply_no_name_op(fuse_req_t req, const struct tfs_node_ops *ops)
{
	fuse_reply_err(req, ops->is_dir ? EPERM : ENOTDIR);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops;
	struct tfs_node *dir = name_dir(req, m, parent, name, &ops);

	if (!dir)
		return;
	if (ops->lookup)
		ops->lookup(req, m, dir, name);
	else
		fuse_reply_err(req, ENOTDIR);
	tfs_inode_put(m->inodes, dir);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	tfs_inode_forget(mount_of(req)->inodes, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct tfs_mount *m = mount_of(req);

	for (size_t i = 0; i < count; i++)
		tfs_inode_forget(m->inodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);

	if (!n)
		return;
	tfs_reply_attr(req, m, n, fi);
	tfs_inode_put(m->inodes, n);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);
	const struct tfs_node_ops *ops;

	if (!n)
		return;
	ops = tfs_kind_ops(n->kind);
	if (ops->setattr)
		ops->setattr(req, m, n, attr, to_set, fi);
	else
		fuse_reply_err(req, EPERM);
	tfs_inode_put(m->inodes, n);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops;
	struct tfs_node *dir = name_dir(req, m, parent, name, &ops);

	if (!dir)
		return;
	if (ops->mkdir)
		ops->mkdir(req, m, dir, name, mode);
	else
		reply_no_name_op(req, ops);
	tfs_inode_put(m->inodes, dir);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops;
	struct tfs_node *dir = name_dir(req, m, parent, name, &ops);

	if (!dir)
		return;
	if (ops->unlink)
		ops->unlink(req, m, dir, name);
	else
		reply_no_name_op(req, ops);
	tfs_inode_put(m->inodes, dir);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops;
	struct tfs_node *dir = name_dir(req, m, parent, name, &ops);

	if (!dir)
		return;
	if (ops->rmdir)
		ops->rmdir(req, m, dir, name);
	else
		reply_no_name_op(req, ops);
	tfs_inode_put(m->inodes, dir);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *dir, *newdir;
	const struct tfs_node_ops *ops;

	if (name_too_long(req, name) || name_too_long(req, newname))
		return;
	dir = node_or_reply(req, m, parent);
	if (!dir)
		return;
	newdir = node_or_reply(req, m, newparent);
	if (!newdir) {
		tfs_inode_put(m->inodes, dir);
		return;
	}
	ops = tfs_kind_ops(dir->kind);
	if (ops->rename)
		ops->rename(req, m, dir, name, newdir, newname, flags);
	else
		fuse_reply_err(req, EPERM);
	tfs_inode_put(m->inodes, newdir);
	tfs_inode_put(m->inodes, dir);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EPERM);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EPERM);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops;
	struct tfs_node *dir = name_dir(req, m, parent, name, &ops);

	(void)rdev;
	if (!dir)
		return;
	if (ops->mknod)
		ops->mknod(req, m, dir, name, mode);
	else
		reply_no_name_op(req, ops);
	tfs_inode_put(m->inodes, dir);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops;
	struct tfs_node *dir = name_dir(req, m, parent, name, &ops);

	if (!dir)
		return;
	if (ops->create)
		ops->create(req, m, dir, name, mode, fi);
	else
		reply_no_name_op(req, ops);
	tfs_inode_put(m->inodes, dir);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);
	const struct tfs_node_ops *ops;

	if (!n)
		return;
	ops = tfs_kind_ops(n->kind);
	if (ops->open)
		ops->open(req, m, n, fi);
	else
		fuse_reply_err(req, ops->is_dir ? EISDIR : EACCES);
	tfs_inode_put(m->inodes, n);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops = tfs_kind_ops(fh->node->kind);

	tfs_fh_hold(fh);
	if (ops->read)
		ops->read(req, m, fh, size, off, fi);
	else
		fuse_reply_err(req, EBADF);
	tfs_fh_put(m, fh);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops = tfs_kind_ops(fh->node->kind);

	tfs_fh_hold(fh);
	if (ops->write)
		ops->write(req, m, fh, buf, size, off, fi);
	else
		fuse_reply_err(req, EBADF);
	tfs_fh_put(m, fh);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops = tfs_kind_ops(fh->node->kind);

	tfs_fh_hold(fh);
	if (ops->flush)
		ops->flush(req, m, fh, fi);
	else
		fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops = tfs_kind_ops(fh->node->kind);

	if (ops->release) {
		ops->release(req, m, fh, fi);
	} else {
		fuse_reply_err(req, 0);
		tfs_fh_put(m, fh);
	}
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct tfs_fh *fh = tfs_fh_of(fi);
	struct tfs_mount *m = mount_of(req);
	const struct tfs_node_ops *ops = tfs_kind_ops(fh->node->kind);

	tfs_fh_hold(fh);
	if (ops->fsync)
		ops->fsync(req, m, fh, datasync, fi);
	else
		fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);
	const struct tfs_node_ops *ops;

	if (!n)
		return;
	ops = tfs_kind_ops(n->kind);
	if (!ops->is_dir) {
		fuse_reply_err(req, ENOTDIR);
	} else if (ops->opendir) {
		ops->opendir(req, m, n, fi);
	} else {
		fi->fh = 0;
		fuse_reply_open(req, fi);
	}
	tfs_inode_put(m->inodes, n);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi, bool plus)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);
	const struct tfs_node_ops *ops;

	if (!n)
		return;
	ops = tfs_kind_ops(n->kind);
	if (ops->readdir)
		ops->readdir(req, m, n, size, off, fi, plus);
	else
		fuse_reply_err(req, ENOTDIR);
	tfs_inode_put(m->inodes, n);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = tfs_inode_get(m->inodes, ino);
	const struct tfs_node_ops *ops = n ? tfs_kind_ops(n->kind) : NULL;

	if (ops && ops->releasedir)
		ops->releasedir(req, m, n, fi);
	else
		fuse_reply_err(req, 0);
	tfs_inode_put(m->inodes, n);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);
	const struct tfs_node_ops *ops;

	if (!n)
		return;
	ops = tfs_kind_ops(n->kind);
	if (ops->fsyncdir)
		ops->fsyncdir(req, m, n, datasync, fi);
	else
		fuse_reply_err(req, 0);
	tfs_inode_put(m->inodes, n);
}

/* statfs: the data directory's filesystem, since that is where records go. */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs_mount *m = mount_of(req);
	struct statvfs sv;

	if (statvfs(m->data_dir, &sv) < 0) {
		int err = errno;
		tfs_log_error("fs", "statfs of %s failed: %s", m->data_dir, strerror(err));
		fuse_reply_err(req, err);
		return;
	}
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n;

	/* Before any lookup or lock: the kernel asks for security.capability on the
	 * write path of page-cache handles (see node_key.c). topicfs keeps only user.*
	 * attributes, so other namespaces are not supported at all: EOPNOTSUPP (not
	 * ENODATA) lets ls -l remember that for the device instead of asking for
	 * security.selinux and system.posix_acl_access on every entry, which cost two
	 * round trips a key (bench/fs.sh: ls -l 0.65x passthrough_ll before). */
	if (strncmp(name, "user.", 5) != 0) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	n = node_or_reply(req, m, ino);
	if (!n)
		return;
	tfs_xattr_get(req, m, n, name, size);
	tfs_inode_put(m->inodes, n);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);

	if (!n)
		return;
	tfs_xattr_list(req, m, n, size);
	tfs_inode_put(m->inodes, n);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);

	if (!n)
		return;
	tfs_xattr_set(req, m, n, name, value, size, flags);
	tfs_inode_put(m->inodes, n);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct tfs_mount *m = mount_of(req);
	struct tfs_node *n = node_or_reply(req, m, ino);

	if (!n)
		return;
	tfs_xattr_remove(req, m, n, name);
	tfs_inode_put(m->inodes, n);
}

const struct fuse_lowlevel_ops tfs_fuse_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
};
