/* inode.h - the node table: FUSE nodeids <-> the things they name, lookup counts,
 * forget.
 *
 * Owns: every node (struct tfs_node) and the two maps that find them:
 *   nodeid   -> node   (every node the kernel may still name)
 *   identity -> node   (so that a second lookup of the same thing returns the same
 *                       nodeid; an unlinked or renamed-over node leaves this map)
 * A node's identity is (kind, topic, partition, key bytes or number). Topics are
 * compared by pointer (a deleted and re-created topic is a different thing) but
 * hashed by name, and that hash is the node's st_ino: stable across forget and
 * remount, never 0 or 1 (1 is the root).
 *
 * Invariants:
 *   (1) nodeids come from a 64-bit counter and are never reused; the root is
 *       FUSE_ROOT_ID (1) and lives as long as the table.
 *   (2) a node is in the nodeid map iff its lookup count is > 0 (root: always).
 *   (3) a node in the identity map is in the nodeid map; at most one node per
 *       identity is in the identity map and not retired (lookups find only it).
 *   (4) refs = (1 if in the nodeid map) + temporary refs of running handlers +
 *       one per open handle; the node is freed when refs reaches 0, never before.
 *   (5) a node holds its own reference on its topic (taken through the table's
 *       topic ops when it is created, dropped when it is freed).
 *
 * Lock order: table lock -> node lock -> (engine locks). The table lock is never
 * taken with a node lock held, and never held across an engine call.
 *
 * Threads: every function may be called from any thread.
 * Errors: 0 or a negative errno.
 */
#ifndef TFS_FS_INODE_H
#define TFS_FS_INODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "engine/types.h"

struct tfs_topic;
struct tfs_key_handle;
struct tfs_scratch_file;

/* A KEY node's key came from a file name (at most 255 bytes), so it is at most
 * 255 bytes: callers copy it into a buffer of this size. */
#define TFS_NODE_KEY_CAP 256

enum tfs_node_kind {
	TFS_NODE_ROOT = 0,
	TFS_NODE_META_DIR,      /* /.topicfs */
	TFS_NODE_META_FILE,     /* /.topicfs/metrics, /.topicfs/status (num = which) */
	TFS_NODE_TOPIC,
	TFS_NODE_PARTITION,
	TFS_NODE_KEY,
	TFS_NODE_HIST_DIR,      /* T/P/.history */
	TFS_NODE_HIST_ENTRY,    /* T/P/.history/<offset> (num = offset) */
	TFS_NODE_APPEND,        /* T/P/.append */
	TFS_NODE_PUT,           /* T/P/.put */
	TFS_NODE_BATCHES,       /* T/P/.batches */
	TFS_NODE_SCRATCH,       /* T/P/.name: a scratch file (scratch.h), key = name */
	TFS_NODE_HIST_VIEW,     /* T/P/.history/.clean .dirty .uncleanable (num = region) */
	TFS_NODE_HIST_KEYS,     /* T/P/.history/.keys */
	TFS_NODE_HIST_KEY,      /* T/P/.history/.keys/KEY (key = the key's bytes) */
	TFS_NODE_GROUPS_DIR,    /* /.groups */
	TFS_NODE_GROUP_DIR,     /* /.groups/GROUP (key = the group id) */
	TFS_NODE_GROUP_FILE,    /* /.groups/GROUP/TOPIC.P (key = the group id) */
	TFS_NODE_KINDS
};

/* What a node names; every pointer borrowed for the call. */
struct tfs_node_ident {
	enum tfs_node_kind kind;
	struct tfs_topic *topic;      /* NULL for root and meta nodes */
	const char *topic_name;       /* the topic's name (for the stable hash) */
	int32_t partition;            /* -1 where it does not apply */
	int64_t num;                  /* HIST_ENTRY: offset; META_FILE: index; else 0 */
	struct tfs_slice key;         /* KEY, HIST_KEY: the key bytes; SCRATCH: the name */
};

/* Kinds whose identity includes the key slice. */
static inline bool tfs_node_kind_named(enum tfs_node_kind kind)
{
	return kind == TFS_NODE_KEY || kind == TFS_NODE_SCRATCH || kind == TFS_NODE_HIST_KEY ||
	       kind == TFS_NODE_GROUP_DIR || kind == TFS_NODE_GROUP_FILE;
}

/* tfs_node.attrs_off values that are not offsets (node_key.c) */
#define TFS_ATTRS_NONE TFS_OFFSET_NONE
#define TFS_ATTRS_MIXED ((tfs_offset_t)-2)

struct tfs_node {
	/* Immutable after creation. */
	uint64_t nodeid;
	uint64_t ino;                 /* st_ino */
	enum tfs_node_kind kind;
	struct tfs_topic *topic;      /* owned reference, NULL for root and meta */
	int32_t partition;
	int64_t num;

	pthread_mutex_t lock;         /* protects the fields below */
	uint8_t *key;                 /* KEY: the key bytes, SCRATCH: the name (rename
	                               * changes them) */
	size_t key_len;
	bool unlinked;                /* unlink or rename-over took its name away */
	bool retired;                 /* KEY: gave its name to a fresh node so that a
	                               * writer never shares an inode with page-cache
	                               * readers (tfs_inode_retire); still names its key
	                               * for reading. Written under the table lock too. */
	uint64_t successor_until_ns;  /* KEY: took over from a retired node; until this
	                               * CLOCK_MONOTONIC time (or a writer opens it) no
	                               * reader uses its page cache, so the writer sent
	                               * back finds none */
	struct tfs_key_handle *writers;   /* KEY: open writing handles (node_key.c) */
	struct tfs_key_handle *readers;   /* KEY: open reading handles */
	tfs_offset_t cache_offset;    /* KEY: the value whose pages the kernel may hold */
	uint32_t cache_users;         /* KEY: open handles reading through the page cache */
	uint32_t cache_blocked;       /* KEY: page-cache joins refused meanwhile: a first
	                               * reader's invalidation not yet delivered, a
	                               * truncate(2) by path in flight (node_key.c) */
	bool cache_had_pages;         /* KEY: a page-cache reader has linked (the kernel
	                               * may hold some version's pages) */
	tfs_offset_t attrs_off;       /* KEY: the record whose length every attribute
	                               * reply since the first page-cache reader's last
	                               * invalidation carried: TFS_ATTRS_NONE (none
	                               * since), TFS_ATTRS_MIXED (several, a writer's,
	                               * or a writer was open), else its offset */
	uint32_t open_count;          /* open handles of any kind */
	struct tfs_scratch_file *scratch; /* SCRATCH: the file it names (a reference,
	                               * dropped when the node is freed) */

	/* Set before attributes are computed for a reply that lets the kernel cache
	 * them; cleared (exchange) by whoever queues their invalidation. A change
	 * to a node whose flag is clear needs no invalidation: the kernel holds no
	 * attributes of it, or is already told to ask again. Races are settled by
	 * the kernel: an invalidation that arrives after a GETATTR/LOOKUP was sent
	 * makes it discard that reply's attributes (fuse_inode attr_version). */
	atomic_bool attrs_cached;

	/* Table-private: under the table lock. */
	uint64_t nlookup;
	uint64_t ident_hash;
	bool in_ids, in_ident;
	struct tfs_node *next_id, *next_ident;
	atomic_uint refs;
};

struct tfs_inode_table;

/* How the table takes and drops topic references for the nodes it creates. ref
 * returns a new reference to t, or NULL if t is gone (deleted). */
struct tfs_inode_topic_ops {
	struct tfs_topic *(*ref)(void *arg, struct tfs_topic *t);
	void (*unref)(void *arg, struct tfs_topic *t);
	void *arg;
};

/* Caller owns *out; tfs_inode_table_destroy. ops is copied. */
int tfs_inode_table_create(const struct tfs_inode_topic_ops *ops, struct tfs_inode_table **out);
/* Frees every node, whatever its counts (unmount). NULL ok. */
void tfs_inode_table_destroy(struct tfs_inode_table *t);

/* The stable hash of an identity (the st_ino of its node). */
uint64_t tfs_inode_ident_hash(const struct tfs_node_ident *id);

/* The node with this nodeid with a temporary reference (tfs_inode_put), or NULL. */
struct tfs_node *tfs_inode_get(struct tfs_inode_table *t, uint64_t nodeid);
/* Takes another reference (the caller already holds one). */
void tfs_inode_ref(struct tfs_node *n);
/* Drops a reference; frees the node at zero. NULL ok. */
void tfs_inode_put(struct tfs_inode_table *t, struct tfs_node *n);

/* Finds or creates the node of id and counts one lookup (the caller then replies
 * with it: fuse_reply_entry / fuse_reply_create / a readdirplus entry; if that
 * reply fails, tfs_inode_forget it). *out gets a temporary reference as well.
 * -ENOENT if the topic is gone, -ENOMEM. */
int tfs_inode_lookup(struct tfs_inode_table *t, const struct tfs_node_ident *id,
                     struct tfs_node **out);
/* The node currently named by id, with a temporary reference, or NULL. */
struct tfs_node *tfs_inode_find(struct tfs_inode_table *t, const struct tfs_node_ident *id);
/* Batched lookup for many keys of one partition (the .put path): writes the
 * nodeids of the keys that have a node whose attributes the kernel may have
 * cached (attrs_cached, which this clears) into nodeids[] (no references) and
 * returns how many. One table lock for the whole batch. */
size_t tfs_inode_find_keys(struct tfs_inode_table *t, struct tfs_topic *topic,
                           const char *topic_name, int32_t partition,
                           const struct tfs_slice *keys, size_t count, uint64_t *nodeids);

/* The kernel forgets n lookups of nodeid (FORGET / BATCH_FORGET). */
void tfs_inode_forget(struct tfs_inode_table *t, uint64_t nodeid, uint64_t n);

/* unlink / rmdir: the node loses its name (leaves the identity map, unlinked). */
void tfs_inode_unhash(struct tfs_inode_table *t, struct tfs_node *n);
/* The clock of successor_until_ns and of tfs_inode_retire's hold: CLOCK_MONOTONIC
 * in nanoseconds. */
static inline uint64_t tfs_inode_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A KEY node with page-cache readers and a writer on its way (node_key.c): the
 * node stays in the identity map, retired (not unlinked: it keeps its key for
 * reading), and lookups pass it by, so the next lookup of its name makes a fresh
 * node with a new nodeid, and the kernel a fresh inode whose size and pages no
 * reader of the old one shares. A successor created within hold_ms gets
 * successor_until_ns. Renames carry retired nodes along (tfs_inode_rename, and
 * tfs_inode_rename_retired when the name has no live node). No-op if n is
 * already retired or unlinked. */
void tfs_inode_retire(struct tfs_inode_table *t, struct tfs_node *n, unsigned hold_ms);
void tfs_inode_rename_retired(struct tfs_inode_table *t, const struct tfs_node_ident *oldid,
                              const struct tfs_node_ident *newid);
/* rename of a KEY (or SCRATCH) node within its partition: the node now names
 * newid (an identity of the same kind, topic and partition); a node that named it before loses its
 * name (unlinked). The node keeps its nodeid and st_ino. -ENOMEM. */
int tfs_inode_rename(struct tfs_inode_table *t, struct tfs_node *n,
                     const struct tfs_node_ident *newid);

/* Nodeids of every node of topic (for invalidating attributes after chmod);
 * *out malloc'd, caller frees. Returns the count, or -ENOMEM. */
ssize_t tfs_inode_collect_topic(struct tfs_inode_table *t, struct tfs_topic *topic,
                                uint64_t **out);

/* Number of nodes in the nodeid map (metrics). */
size_t tfs_inode_count(struct tfs_inode_table *t);

#endif
