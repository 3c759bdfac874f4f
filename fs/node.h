/* node.h - what each node kind implements (one node_*.c file per kind), the open
 * handle base, and the helpers the kinds share (node.c).
 *
 * ops.c resolves the nodeid (or the handle) and calls the kind's function; a NULL
 * entry gets the kind's default error from ops.c. Every function here replies to
 * req exactly once, on every path.
 *
 * Threads: handlers run concurrently on the MT loop's threads. A handler holds a
 * temporary reference on every node it was given for its whole run.
 */
#ifndef TFS_FS_NODE_H
#define TFS_FS_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs/fuse_ll.h"
#include "fs/inode.h"
#include "fs/mount.h"

/* ---- open handles --------------------------------------------------------- */

/* The first member of every handle; fi->fh points at it.
 *
 * Lifetime: refs starts at 1 (the kernel's open); ops.c holds one more around
 * every read/write/flush/fsync it dispatches, and RELEASE drops the kernel's with
 * tfs_fh_put. The last put frees. So a reply still being copied out of a handle's
 * buffer (fuse_reply_buf: the kernel completes the READ, the caller closes, and
 * RELEASE can run before the writev returns) never sees that buffer freed. */
struct tfs_fh {
	struct tfs_node *node;          /* a reference, dropped by tfs_fh_unregister */
	atomic_uint refs;
	struct tfs_fh *prev, *next;     /* the mount's list (m->handles_lock) */
	/* Detaches fh from its node, tfs_fh_unregister()s and frees it: release and
	 * unmount both end here. */
	void (*free_fn)(struct tfs_mount *m, struct tfs_fh *fh);
};

static inline struct tfs_fh *tfs_fh_of(const struct fuse_file_info *fi)
{
	return (struct tfs_fh *)(uintptr_t)fi->fh;
}

/* Links fh into the mount's list and takes a reference on n (fh->node = n). */
void tfs_fh_register(struct tfs_mount *m, struct tfs_fh *fh, struct tfs_node *n,
                     void (*free_fn)(struct tfs_mount *, struct tfs_fh *));
void tfs_fh_hold(struct tfs_fh *fh);
/* Drops a reference; the last one calls fh->free_fn. */
void tfs_fh_put(struct tfs_mount *m, struct tfs_fh *fh);
/* Unlinks fh and drops its node reference (fh->node is NULL after); the caller
 * (its free_fn) frees fh's memory. */
void tfs_fh_unregister(struct tfs_mount *m, struct tfs_fh *fh);

/* ---- per-kind operations -------------------------------------------------- */

#define TFS_STAT_VOLATILE 1

struct tfs_node_ops {
	const char *name;               /* for log lines */
	bool is_dir;
	bool volatile_attrs;            /* attrs change behind the kernel: short timeout */
	bool uncached;                  /* the entry itself may vanish behind the fs
	                                 * (the cleaner): entry and attr timeouts 0 */
	/* Fills *st. fi is the open handle when the kernel sent one (fstat, or the
	 * read path refreshing i_size). Returns 0, TFS_STAT_VOLATILE when the answer
	 * comes from an open handle's state (reply with attr timeout 0, so that the
	 * next stat without that handle asks again), or a negative errno. */
	int (*stat)(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
	            struct stat *st);

	void (*lookup)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name);
	void (*setattr)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, struct stat *attr,
	                int to_set, struct fuse_file_info *fi);
	void (*mkdir)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
	              mode_t mode);
	void (*unlink)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name);
	void (*rmdir)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name);
	void (*rename)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
	               struct tfs_node *newdir, const char *newname, unsigned flags);
	void (*create)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
	               mode_t mode, struct fuse_file_info *fi);
	void (*mknod)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
	              mode_t mode);

	void (*open)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
	             struct fuse_file_info *fi);
	void (*read)(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, size_t size, off_t off,
	             struct fuse_file_info *fi);
	void (*write)(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, const char *buf,
	              size_t size, off_t off, struct fuse_file_info *fi);
	void (*flush)(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
	              struct fuse_file_info *fi);
	/* Must end with tfs_fh_put(m, fh) (after replying). */
	void (*release)(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
	                struct fuse_file_info *fi);
	void (*fsync)(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, int datasync,
	              struct fuse_file_info *fi);

	void (*opendir)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
	                struct fuse_file_info *fi);
	void (*readdir)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, size_t size,
	                off_t off, struct fuse_file_info *fi, bool plus);
	void (*releasedir)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
	                   struct fuse_file_info *fi);
	void (*fsyncdir)(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, int datasync,
	                 struct fuse_file_info *fi);
};

extern const struct tfs_node_ops tfs_kind_root, tfs_kind_meta_dir, tfs_kind_meta_file,
	tfs_kind_topic, tfs_kind_partition, tfs_kind_key, tfs_kind_hist_dir, tfs_kind_hist_entry,
	tfs_kind_append, tfs_kind_put, tfs_kind_batches, tfs_kind_scratch, tfs_kind_hist_view,
	tfs_kind_hist_keys, tfs_kind_hist_key, tfs_kind_groups_dir, tfs_kind_group_dir,
	tfs_kind_group_file;

const struct tfs_node_ops *tfs_kind_ops(enum tfs_node_kind kind);

/* ---- shared helpers (node.c) ---------------------------------------------- */

/* At least the key + value bytes any single record may have under
 * max_message_bytes (a bound for buffers; tfs_plog_value_max decides). */
static inline size_t tfs_record_payload_max(int32_t max_message_bytes)
{
	int64_t room = (int64_t)max_message_bytes - TFS_BATCH_HEADER_BYTES - TFS_RECORD_MIN_OVERHEAD;
	return room > 0 ? (size_t)room : 0;
}

/* Replies with the errno of err (see errmap.h); what names the object for logs. */
void tfs_reply_err(fuse_req_t req, int err, const char *what);

/* n's attributes changed behind the kernel: queue their invalidation if the
 * kernel may hold them (attrs_cached). Does not wait (see tfs_notifier_drain). */
void tfs_notify_changed(struct tfs_mount *m, struct tfs_node *n);

/* Finds or creates the node of id, stats it and fills *e (counting one lookup).
 * On error nothing is counted. *out (optional) gets a temporary reference. */
int tfs_make_entry(struct tfs_mount *m, const struct tfs_node_ident *id,
                   struct fuse_entry_param *e, struct tfs_node **out);
/* tfs_make_entry + fuse_reply_entry (forgetting the lookup if the reply fails). */
void tfs_reply_entry(fuse_req_t req, struct tfs_mount *m, const struct tfs_node_ident *id);
/* Replies with the attributes of n. */
void tfs_reply_attr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                    struct fuse_file_info *fi);

/* The identity of a child of dir: kind, dir's topic/partition, num and key. */
void tfs_child_ident(const struct tfs_node *dir, enum tfs_node_kind kind, int64_t num,
                     struct tfs_slice key, struct tfs_node_ident *id);

/* Fills a stat for a directory / regular file with the mount's directory times. */
void tfs_stat_dir(struct tfs_mount *m, const struct tfs_node *n, mode_t perm, uid_t uid,
                  gid_t gid, nlink_t nlink, struct stat *st);
void tfs_stat_file(const struct tfs_node *n, mode_t perm, uid_t uid, gid_t gid, off_t size,
                   int64_t mtime_ms, struct stat *st);

/* The topic's ownership, for its partitions, keys and control entries. */
void tfs_topic_owner(struct tfs_node *n, uid_t *uid, gid_t *gid, mode_t *mode);

/* readdir plumbing: the kernel's cookies 1 and 2 are "." and "..", so a listing's
 * own entries start at cookie TFS_DIR_FIRST. */
#define TFS_DIR_FIRST 3
/* Adds "." and ".." when off says they are still to come; returns the bytes used
 * in buf, and advances *off. */
size_t tfs_dir_add_dots(fuse_req_t req, char *buf, size_t size, off_t *off, bool plus,
                        const struct tfs_node *dir);
/* Adds the entry name (cookie next) of the node id to buf[*used, size): with
 * plus, the node's full entry (tfs_make_entry: one lookup counted); else its
 * inode number and the file type of mode. Returns 1 when added (*used grows), 0
 * when it does not fit (the listing ends there, nothing counted), -1 when the
 * node cannot be made (it went away since the listing began: skip it). */
int tfs_dir_add_entry(fuse_req_t req, struct tfs_mount *m, char *buf, size_t size, size_t *used,
                      bool plus, const struct tfs_node_ident *id, mode_t mode, const char *name,
                      off_t next);

/* chmod/chown/utimens on a topic or partition directory: mode and owner persist
 * in the topic (partitions and keys share them); times are accepted and ignored.
 * (node_topic.c) */
void tfs_topic_setattr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                       struct stat *attr, int to_set, struct fuse_file_info *fi);

/* Key operations reached through the partition directory (node_key.c). */
void tfs_key_create(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
                    mode_t mode, struct fuse_file_info *fi);
void tfs_key_unlink(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                    const char *name);
void tfs_key_rename(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir, const char *name,
                    struct tfs_node *newdir, const char *newname, unsigned flags);
void tfs_key_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                    const char *name);
/* Before an operation that shows a key's value or name (an open of a key, its
 * attributes, a listing of n's partition): waits, a moment at most, for the
 * RELEASE of created or truncated keys (n's, or any in partition n) that were
 * closed without a write, so that ": > k; cat k" reads the empty value. Commits
 * nothing itself (see node_key.c). Cheap when no such handle exists. */
void tfs_key_settle(struct tfs_mount *m, struct tfs_node *n);
/* At unmount: commits the creations and truncations whose close came but whose
 * RELEASE never did. */
void tfs_key_commit_closed(struct tfs_mount *m);
/* Initialises the condition variable of m->deferred (monotonic clock). */
void tfs_key_cond_init(pthread_cond_t *c);

/* 1 if name is a decimal partition number with no sign or leading zero. */
bool tfs_parse_partition(const char *name, int32_t *out);

#endif
