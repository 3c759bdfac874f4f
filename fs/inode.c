/* inode.c - the node table (see inode.h).
 *
 * Two chained hash tables with power-of-two bucket arrays, doubled when the load
 * passes one entry per bucket, both under one mutex: lookups are short (a hash and
 * a compare), and nothing slow ever runs under it.
 */
#include "fs/inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fs/fuse_ll.h"
#include "fs/scratch.h"

#define INITIAL_BUCKETS 1024        /* power of two; grows by doubling */
#define ROOT_INO 1                  /* st_ino of the root; hashes avoid it */
#define RETIRED_RING 32             /* recent retirements, for their successors */

struct map {
	struct tfs_node **b;
	size_t mask;                    /* buckets - 1 */
	size_t count;
};

struct tfs_inode_table {
	pthread_mutex_t lock;
	struct map ids;                 /* nodeid -> node, chained by next_id */
	struct map idents;              /* identity -> node, chained by next_ident */
	uint64_t next_nodeid;
	size_t key_idents;              /* KEY nodes in the identity map */
	struct tfs_inode_topic_ops ops;
	struct tfs_node root;
	/* The last RETIRED_RING retirements (identity hash, end of hold): a successor
	 * may be created after its retired node is forgotten (its readers closed), or
	 * twice (the kernel's FORGET of a revalidating lookup can come first). */
	struct {
		uint64_t hash;
		uint64_t until_ns;
	} retired[RETIRED_RING];
	unsigned retired_next;
};

/* ---- hashing ------------------------------------------------------------ */

/* The seed of a partition-level identity: kind, topic name, partition, number. */
static uint64_t ident_seed(enum tfs_node_kind kind, const char *topic_name, int32_t partition,
                           int64_t num)
{
	XXH64_hash_t h = XXH3_64bits_withSeed(topic_name ? topic_name : "",
	                                      topic_name ? strlen(topic_name) : 0,
	                                      (uint64_t)kind * 0x9E3779B97F4A7C15ull);
	uint8_t tail[12];

	memcpy(tail, &partition, sizeof(partition));
	memcpy(tail + 4, &num, sizeof(num));
	return XXH3_64bits_withSeed(tail, sizeof(tail), h);
}

static inline uint64_t fix_ino(uint64_t h)
{
	return h <= ROOT_INO ? h + 2 : h;
}

static uint64_t key_hash(uint64_t seed, struct tfs_slice key)
{
	return fix_ino(XXH3_64bits_withSeed(key.p, key.len, seed));
}

uint64_t tfs_inode_ident_hash(const struct tfs_node_ident *id)
{
	uint64_t seed;

	if (id->kind == TFS_NODE_ROOT)
		return ROOT_INO;
	seed = ident_seed(id->kind, id->topic_name, id->partition, id->num);
	if (tfs_node_kind_named(id->kind))
		return key_hash(seed, id->key);
	return fix_ino(seed);
}

static inline size_t id_bucket(const struct map *m, uint64_t nodeid)
{
	return (size_t)((nodeid * 0x9E3779B97F4A7C15ull) >> 20) & m->mask;
}

/* ---- maps ---------------------------------------------------------------- */

static int map_init(struct map *m)
{
	m->b = calloc(INITIAL_BUCKETS, sizeof(*m->b));
	m->mask = INITIAL_BUCKETS - 1;
	m->count = 0;
	return m->b ? 0 : -ENOMEM;
}

/* Doubles the bucket array of the identity map (chained by next_ident). A failed
 * allocation just leaves the map denser. */
static void grow_idents(struct map *m)
{
	size_t nb = (m->mask + 1) * 2;
	struct tfs_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i <= m->mask; i++) {
		struct tfs_node *n = m->b[i], *next;
		for (; n; n = next) {
			next = n->next_ident;
			size_t at = n->ident_hash & (nb - 1);
			n->next_ident = b[at];
			b[at] = n;
		}
	}
	free(m->b);
	m->b = b;
	m->mask = nb - 1;
}

static void grow_ids(struct map *m)
{
	size_t nb = (m->mask + 1) * 2;
	struct tfs_node **b = calloc(nb, sizeof(*b));
	struct map nm = { b, nb - 1, m->count };

	if (!b)
		return;
	for (size_t i = 0; i <= m->mask; i++) {
		struct tfs_node *n = m->b[i], *next;
		for (; n; n = next) {
			next = n->next_id;
			size_t at = id_bucket(&nm, n->nodeid);
			n->next_id = b[at];
			b[at] = n;
		}
	}
	free(m->b);
	*m = nm;
}

static void ids_insert(struct tfs_inode_table *t, struct tfs_node *n)
{
	size_t at;

	if (t->ids.count >= t->ids.mask + 1)
		grow_ids(&t->ids);
	at = id_bucket(&t->ids, n->nodeid);
	n->next_id = t->ids.b[at];
	t->ids.b[at] = n;
	t->ids.count++;
	n->in_ids = true;
}

static void ids_remove(struct tfs_inode_table *t, struct tfs_node *n)
{
	struct tfs_node **pp = &t->ids.b[id_bucket(&t->ids, n->nodeid)];

	for (; *pp; pp = &(*pp)->next_id) {
		if (*pp == n) {
			*pp = n->next_id;
			t->ids.count--;
			n->in_ids = false;
			return;
		}
	}
}

static struct tfs_node *ids_find(struct tfs_inode_table *t, uint64_t nodeid)
{
	struct tfs_node *n = t->ids.b[id_bucket(&t->ids, nodeid)];

	while (n && n->nodeid != nodeid)
		n = n->next_id;
	return n;
}

static void idents_insert(struct tfs_inode_table *t, struct tfs_node *n)
{
	size_t at;

	if (t->idents.count >= t->idents.mask + 1)
		grow_idents(&t->idents);
	at = n->ident_hash & t->idents.mask;
	n->next_ident = t->idents.b[at];
	t->idents.b[at] = n;
	t->idents.count++;
	t->key_idents += n->kind == TFS_NODE_KEY;
	n->in_ident = true;
}

static void idents_remove(struct tfs_inode_table *t, struct tfs_node *n)
{
	struct tfs_node **pp = &t->idents.b[n->ident_hash & t->idents.mask];

	for (; *pp; pp = &(*pp)->next_ident) {
		if (*pp == n) {
			*pp = n->next_ident;
			t->idents.count--;
			t->key_idents -= n->kind == TFS_NODE_KEY;
			n->in_ident = false;
			return;
		}
	}
}

static bool ident_matches(const struct tfs_node *n, const struct tfs_node_ident *id)
{
	if (n->kind != id->kind || n->topic != id->topic || n->partition != id->partition ||
	    n->num != id->num)
		return false;
	if (!tfs_node_kind_named(id->kind))
		return true;
	return n->key_len == id->key.len && (id->key.len == 0 ||
	                                     memcmp(n->key, id->key.p, id->key.len) == 0);
}

static struct tfs_node *idents_find(struct tfs_inode_table *t, uint64_t hash,
                                    const struct tfs_node_ident *id)
{
	struct tfs_node *n = t->idents.b[hash & t->idents.mask];

	for (; n; n = n->next_ident)
		if (n->ident_hash == hash && !n->retired && ident_matches(n, id))
			return n;
	return NULL;
}

/* ---- nodes --------------------------------------------------------------- */

/* A KEY node about to be created for hash: if it takes over from a node retired
 * moments ago, the end of that retirement's hold, else 0. A hash collision only
 * keeps another key's readers off the page cache for a while. Table lock held. */
static uint64_t successor_hold(struct tfs_inode_table *t, uint64_t hash)
{
	uint64_t until = 0;

	for (unsigned i = 0; i < RETIRED_RING; i++)
		if (t->retired[i].hash == hash && t->retired[i].until_ns > until)
			until = t->retired[i].until_ns;
	return until && until > tfs_inode_clock_ns() ? until : 0;
}

static void node_free(struct tfs_inode_table *t, struct tfs_node *n)
{
	if (n->topic)
		t->ops.unref(t->ops.arg, n->topic);
	tfs_scratch_put(n->scratch);
	pthread_mutex_destroy(&n->lock);
	free(n->key);
	free(n);
}

static void node_init_common(struct tfs_node *n)
{
	pthread_mutex_init(&n->lock, NULL);
	n->cache_offset = TFS_OFFSET_NONE;
	n->attrs_off = TFS_ATTRS_NONE;
}

int tfs_inode_table_create(const struct tfs_inode_topic_ops *ops, struct tfs_inode_table **out)
{
	struct tfs_inode_table *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	if (map_init(&t->ids) < 0 || map_init(&t->idents) < 0) {
		free(t->ids.b);
		free(t->idents.b);
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->ops = *ops;
	t->next_nodeid = FUSE_ROOT_ID + 1;
	node_init_common(&t->root);
	t->root.nodeid = FUSE_ROOT_ID;
	t->root.ino = ROOT_INO;
	t->root.kind = TFS_NODE_ROOT;
	t->root.partition = -1;
	t->root.nlookup = 1;
	atomic_init(&t->root.refs, 1);
	t->root.ident_hash = ROOT_INO;
	ids_insert(t, &t->root);
	*out = t;
	return 0;
}

void tfs_inode_table_destroy(struct tfs_inode_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i <= t->ids.mask; i++) {
		struct tfs_node *n = t->ids.b[i], *next;
		for (; n; n = next) {
			next = n->next_id;
			if (n != &t->root)
				node_free(t, n);
		}
	}
	pthread_mutex_destroy(&t->root.lock);
	pthread_mutex_destroy(&t->lock);
	free(t->ids.b);
	free(t->idents.b);
	free(t);
}

struct tfs_node *tfs_inode_get(struct tfs_inode_table *t, uint64_t nodeid)
{
	struct tfs_node *n;

	pthread_mutex_lock(&t->lock);
	n = ids_find(t, nodeid);
	if (n)
		atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tfs_inode_ref(struct tfs_node *n)
{
	atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
}

void tfs_inode_put(struct tfs_inode_table *t, struct tfs_node *n)
{
	/* acq_rel: the last put must see every write made under earlier refs. */
	if (n && atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1)
		node_free(t, n);
}

int tfs_inode_lookup(struct tfs_inode_table *t, const struct tfs_node_ident *id,
                     struct tfs_node **out)
{
	uint64_t hash = tfs_inode_ident_hash(id);
	struct tfs_node *n, *fresh = NULL;
	struct tfs_topic *topic = NULL;

	*out = NULL;
	if (id->kind == TFS_NODE_ROOT) {
		pthread_mutex_lock(&t->lock);
		t->root.nlookup++;
		atomic_fetch_add_explicit(&t->root.refs, 1, memory_order_relaxed);
		pthread_mutex_unlock(&t->lock);
		*out = &t->root;
		return 0;
	}
	for (;;) {
		pthread_mutex_lock(&t->lock);
		n = idents_find(t, hash, id);
		if (n || fresh)
			break;
		pthread_mutex_unlock(&t->lock);
		/* Allocate and take the topic reference outside the lock, then look again:
		 * another thread may have created the node meanwhile. */
		if (id->topic) {
			topic = t->ops.ref(t->ops.arg, id->topic);
			if (!topic)
				return -ENOENT;
		}
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh || (tfs_node_kind_named(id->kind) && id->key.len > 0 &&
		               !(fresh->key = malloc(id->key.len)))) {
			free(fresh);
			if (topic)
				t->ops.unref(t->ops.arg, topic);
			return -ENOMEM;
		}
		node_init_common(fresh);
		fresh->kind = id->kind;
		fresh->topic = topic;
		fresh->partition = id->partition;
		fresh->num = id->num;
		if (tfs_node_kind_named(id->kind)) {
			if (id->key.len)
				memcpy(fresh->key, id->key.p, id->key.len);
			fresh->key_len = id->key.len;
		}
		fresh->ino = hash;
		fresh->ident_hash = hash;
		atomic_init(&fresh->refs, 0);
	}
	if (!n) {
		n = fresh;
		fresh = NULL;
		n->nodeid = t->next_nodeid++;
		if (n->kind == TFS_NODE_KEY)
			n->successor_until_ns = successor_hold(t, hash);
		ids_insert(t, n);
		idents_insert(t, n);
		atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);  /* the map's */
	}
	n->nlookup++;
	atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);      /* the caller's */
	pthread_mutex_unlock(&t->lock);
	if (fresh)
		node_free(t, fresh);
	*out = n;
	return 0;
}

struct tfs_node *tfs_inode_find(struct tfs_inode_table *t, const struct tfs_node_ident *id)
{
	uint64_t hash = tfs_inode_ident_hash(id);
	struct tfs_node *n;

	pthread_mutex_lock(&t->lock);
	n = id->kind == TFS_NODE_ROOT ? &t->root : idents_find(t, hash, id);
	if (n)
		atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t tfs_inode_find_keys(struct tfs_inode_table *t, struct tfs_topic *topic,
                           const char *topic_name, int32_t partition,
                           const struct tfs_slice *keys, size_t count, uint64_t *nodeids)
{
	uint64_t seed = ident_seed(TFS_NODE_KEY, topic_name, partition, 0);
	struct tfs_node_ident id = {
		.kind = TFS_NODE_KEY, .topic = topic, .topic_name = topic_name,
		.partition = partition,
	};
	size_t found = 0;

	pthread_mutex_lock(&t->lock);
	if (t->key_idents > 0) {                /* else no key has a node: skip hashing */
		for (size_t i = 0; i < count; i++) {
			struct tfs_node *n;
			id.key = keys[i];
			n = idents_find(t, key_hash(seed, keys[i]), &id);
			/* acq_rel: pairs with the store before a stat in node.c. */
			if (n && atomic_exchange_explicit(&n->attrs_cached, false, memory_order_acq_rel))
				nodeids[found++] = n->nodeid;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return found;
}

void tfs_inode_forget(struct tfs_inode_table *t, uint64_t nodeid, uint64_t count)
{
	struct tfs_node *n;
	bool drop = false;

	pthread_mutex_lock(&t->lock);
	n = ids_find(t, nodeid);
	if (n && n != &t->root) {
		n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
		if (n->nlookup == 0) {
			if (n->in_ident)
				idents_remove(t, n);
			ids_remove(t, n);
			drop = true;
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (drop)
		tfs_inode_put(t, n);
}

void tfs_inode_unhash(struct tfs_inode_table *t, struct tfs_node *n)
{
	pthread_mutex_lock(&t->lock);
	if (n->in_ident)
		idents_remove(t, n);
	pthread_mutex_lock(&n->lock);
	n->unlinked = true;
	pthread_mutex_unlock(&n->lock);
	pthread_mutex_unlock(&t->lock);
}

void tfs_inode_retire(struct tfs_inode_table *t, struct tfs_node *n, unsigned hold_ms)
{
	pthread_mutex_lock(&t->lock);
	pthread_mutex_lock(&n->lock);
	if (!n->retired && !n->unlinked) {
		n->retired = true;
		t->retired[t->retired_next].hash = n->ident_hash;
		t->retired[t->retired_next].until_ns = tfs_inode_clock_ns() + (uint64_t)hold_ms * 1000000ull;
		t->retired_next = (t->retired_next + 1) % RETIRED_RING;
	}
	pthread_mutex_unlock(&n->lock);
	pthread_mutex_unlock(&t->lock);
}

/* Retired nodes named oldid now name newid (the kernel may have moved a dentry
 * that still points at one of them). A copy that cannot be made leaves a node with
 * its old key: it only serves reads of what its readers already hold. Table lock
 * held. */
static void rename_retired_locked(struct tfs_inode_table *t, uint64_t oldhash,
                                  const struct tfs_node_ident *oldid,
                                  const struct tfs_node_ident *newid, uint64_t newhash)
{
	for (;;) {
		struct tfs_node *r = t->idents.b[oldhash & t->idents.mask];
		uint8_t *copy = NULL, *prev;

		while (r && !(r->retired && r->ident_hash == oldhash && ident_matches(r, oldid)))
			r = r->next_ident;
		if (!r || (newid->key.len && !(copy = malloc(newid->key.len))))
			return;
		if (newid->key.len)
			memcpy(copy, newid->key.p, newid->key.len);
		idents_remove(t, r);
		pthread_mutex_lock(&r->lock);
		prev = r->key;
		r->key = copy;
		r->key_len = newid->key.len;
		pthread_mutex_unlock(&r->lock);
		free(prev);
		r->ident_hash = newhash;
		idents_insert(t, r);            /* may grow the map: rescan from its head */
	}
}

void tfs_inode_rename_retired(struct tfs_inode_table *t, const struct tfs_node_ident *oldid,
                              const struct tfs_node_ident *newid)
{
	pthread_mutex_lock(&t->lock);
	rename_retired_locked(t, tfs_inode_ident_hash(oldid), oldid, newid,
	                      tfs_inode_ident_hash(newid));
	pthread_mutex_unlock(&t->lock);
}

int tfs_inode_rename(struct tfs_inode_table *t, struct tfs_node *n,
                     const struct tfs_node_ident *newid)
{
	uint64_t hash = tfs_inode_ident_hash(newid);
	struct tfs_node *old;
	uint8_t *copy = NULL, *prev;

	if (newid->key.len && !(copy = malloc(newid->key.len)))
		return -ENOMEM;
	if (newid->key.len)
		memcpy(copy, newid->key.p, newid->key.len);
	pthread_mutex_lock(&t->lock);
	if (n->in_ident && tfs_node_kind_named(n->kind)) {
		struct tfs_node_ident oldid = {
			.kind = n->kind, .topic = n->topic, .partition = n->partition, .num = n->num,
			.key = tfs_slice_make(n->key, n->key_len),
		};
		rename_retired_locked(t, n->ident_hash, &oldid, newid, hash);
	}
	old = idents_find(t, hash, newid);
	if (old && old != n) {
		idents_remove(t, old);
		pthread_mutex_lock(&old->lock);
		old->unlinked = true;
		pthread_mutex_unlock(&old->lock);
	}
	if (n->in_ident)
		idents_remove(t, n);
	pthread_mutex_lock(&n->lock);
	prev = n->key;
	n->key = copy;
	n->key_len = newid->key.len;
	n->unlinked = false;
	pthread_mutex_unlock(&n->lock);
	n->ident_hash = hash;
	if (n->in_ids)
		idents_insert(t, n);
	pthread_mutex_unlock(&t->lock);
	free(prev);
	return 0;
}

ssize_t tfs_inode_collect_topic(struct tfs_inode_table *t, struct tfs_topic *topic,
                                uint64_t **out)
{
	uint64_t *v = NULL;
	size_t cnt = 0, cap = 0;

	*out = NULL;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i <= t->ids.mask; i++) {
		for (struct tfs_node *n = t->ids.b[i]; n; n = n->next_id) {
			if (n->topic != topic)
				continue;
			if (cnt == cap) {
				size_t nc = cap ? cap * 2 : 64;
				uint64_t *nv = realloc(v, nc * sizeof(*v));
				if (!nv) {
					pthread_mutex_unlock(&t->lock);
					free(v);
					return -ENOMEM;
				}
				v = nv;
				cap = nc;
			}
			v[cnt++] = n->nodeid;
		}
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	return (ssize_t)cnt;
}

size_t tfs_inode_count(struct tfs_inode_table *t)
{
	size_t c;

	pthread_mutex_lock(&t->lock);
	c = t->ids.count;
	pthread_mutex_unlock(&t->lock);
	return c;
}
