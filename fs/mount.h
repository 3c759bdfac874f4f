/* mount.h - the mount object: everything one topicfs mount owns, passed explicitly
 * to every handler (fuse_req_userdata). No globals.
 *
 * Owns: the engine (and through it every topic and partition), the node table,
 * the notifier thread, the list of open handles, the fs counters.
 *
 * Lifecycle (main.c):  tfs_mount_create (opens the engine) -> fuse_session_new ->
 *   mount -> tfs_mount_start_notifier -> loop -> unmount -> tfs_mount_stop_notifier
 *   -> fuse_session_destroy -> tfs_mount_destroy (closes the engine: flushes).
 *
 * Threads: every field is either immutable after create, atomic, or guarded by
 * the lock named beside it.
 * Errors: 0 or a negative errno / TFS_E* code.
 */
#ifndef TFS_FS_MOUNT_H
#define TFS_FS_MOUNT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "engine/engine.h"
#include "fs/inode.h"
#include "fs/notify.h"
#include "fs/readcache.h"
#include "fs/scratch.h"

struct fuse_session;
struct fuse_conn_info_opts;
struct tfs_opts;
struct tfs_fh;
struct tfs_key_handle;
struct tfs_kafka;

#define TFS_READCACHE_BYTES (16u << 20)  /* windows kept for opening keys: a cp -r
                                          * of 100,000 .put keys reads 63 windows of
                                          * ~150 KiB each */
#define TFS_DIR_TIMEOUT_S 3600.0    /* directories and control entries: they change
                                     * only through this mount, which invalidates */

/* Counters for .topicfs/metrics (relaxed atomics: statistics only). */
struct tfs_fs_stats {
	atomic_uint_fast64_t commits;          /* records committed by key handles */
	atomic_uint_fast64_t commit_errors;
	atomic_uint_fast64_t bulk_records;     /* records appended through .append/.put/.batches */
	atomic_uint_fast64_t bulk_writes;      /* write(2) calls on .append/.put/.batches */
	atomic_uint_fast64_t tombstones;       /* unlink + rename */
	atomic_uint_fast64_t dry_runs;         /* fate / next_pass (history_fate.c) */
	atomic_uint_fast64_t lookups;
	atomic_uint_fast64_t key_reads;        /* READ requests of keys (a page-cache
	                                        * re-read sends none) */
	atomic_uint_fast64_t write_seq;        /* orders writes of key handles */
	atomic_uint_fast64_t retired_nodes;    /* keys moved to a new inode for a writer
	                                        * (node_key.c) */
};

struct tfs_mount {
	struct tfs_engine *engine;
	struct fuse_session *se;               /* set once mounted */
	struct tfs_inode_table *inodes;
	struct tfs_notifier *notifier;         /* NULL until started */
	struct tfs_readcache *readcache;       /* windows for opening keys (node_key.c) */
	struct tfs_fate_cache *fates;          /* the last dry run (history_fate.c) */
	struct tfs_scratch *scratch;           /* the dot-named scratch files (scratch.h) */
	struct tfs_consumers *consumers;       /* bootstrap reports, .groups made by mkdir
	                                        * (consumers.h) */
	char *data_dir;                        /* absolute path */
	struct tfs_kafka *kafka;               /* the listener, for its metrics; set
	                                        * and cleared by main around the session */
	bool read_only;
	bool reader_cache;                     /* readers may use the page cache (node_key.c) */
	unsigned max_read;                     /* the max_read mount option (opts.c) */
	double key_timeout;                    /* keys and history entries */
	double dir_timeout;
	struct tfs_topic_config topic_defaults;/* the mount's defaults (removexattr) */
	uid_t root_uid;                        /* the root directory: the data dir's */
	gid_t root_gid;
	mode_t root_mode;
	struct timespec started;               /* times of directories */
	struct fuse_conn_info_opts *conn_opts; /* -o max_write=... (owned; main.c) */

	pthread_mutex_t handles_lock;          /* guards the list below */
	struct tfs_fh *handles;                /* every open handle (freed at unmount) */
	atomic_uint_fast64_t open_handles;

	/* Key writers whose only change is their creation or O_TRUNC and whose last
	 * event was a FLUSH: that close may have been the last, and their commit
	 * comes with the RELEASE the kernel sends after it (tfs_key_settle lets an
	 * observer wait a moment for it). node_key.c owns the list. */
	pthread_mutex_t deferred_lock;         /* a leaf, taken under node locks */
	pthread_cond_t deferred_cond;          /* a handle left the list */
	struct tfs_key_handle *deferred;
	atomic_uint deferred_count;

	struct tfs_fs_stats stats;
};

/* Opens the engine on o's data directory (absolute path abs_data_dir) and builds
 * the node table. Caller owns *out; tfs_mount_destroy. */
int tfs_mount_create(const struct tfs_opts *o, const char *abs_data_dir, struct tfs_mount **out);
/* Starts the notifier on the mounted session. */
int tfs_mount_start_notifier(struct tfs_mount *m, struct fuse_session *se);
void tfs_mount_stop_notifier(struct tfs_mount *m);
/* Frees open handles and nodes and closes the engine (flushing). NULL ok. */
void tfs_mount_destroy(struct tfs_mount *m);

/* The partition log a node of a partition refers to, or NULL if its topic was
 * deleted. Borrowed: valid while the node (which holds a topic ref) is. */
struct tfs_plog *tfs_mount_plog(struct tfs_node *n);

#endif
