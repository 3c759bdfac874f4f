/* readcache.c - recently read windows of partition logs (see readcache.h).
 *
 * One list in most-recently-used order under one mutex. A lookup walks it from
 * the front: key opens come in runs over the same few windows (a cp -r of a
 * partition of 15,000 .put keys uses ten), so the walk is short; invariant (4)
 * keeps the list at a few hundred windows at most whatever the partitions.
 *
 * Using a window happens outside the lock: a lookup takes a reference on the
 * entry, copies the record, and drops it; an entry evicted meanwhile is freed by
 * whoever drops its last reference.
 */
#include "fs/readcache.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "io/log.h"

#define MAX_SHARE 4             /* a window above bound / MAX_SHARE is not kept */

struct entry {
	struct entry *prev, *next;      /* the list, most recently used first */
	struct tfs_topic *topic;        /* a reference */
	const struct tfs_plog *pl;      /* compared only */
	tfs_offset_t first, last;
	struct tfs_plog_window *w;
	size_t memory;
	unsigned users;                 /* lookups copying from it (under the lock) */
	bool listed;
};

struct tfs_readcache {
	pthread_mutex_t lock;
	struct tfs_inode_topic_ops ops;
	size_t max_bytes, bytes, count;
	struct entry *head, *tail;
	uint64_t hits, misses;
};

int tfs_readcache_create(const struct tfs_inode_topic_ops *ops, size_t max_bytes,
                         struct tfs_readcache **out)
{
	struct tfs_readcache *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->ops = *ops;
	c->max_bytes = max_bytes;
	*out = c;
	return 0;
}

static void entry_free(struct tfs_readcache *c, struct entry *e)
{
	tfs_plog_window_free(e->w);
	if (e->topic)
		c->ops.unref(c->ops.arg, e->topic);
	free(e);
}

static void unlink_locked(struct tfs_readcache *c, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void push_front_locked(struct tfs_readcache *c, struct entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	else
		c->tail = e;
	c->head = e;
}

/* Takes e out of the list. Lock held. Returns true when nobody uses it: the
 * caller frees it once the lock is released. */
static bool unlist_locked(struct tfs_readcache *c, struct entry *e)
{
	unlink_locked(c, e);
	e->listed = false;
	c->bytes -= e->memory;
	c->count--;
	return e->users == 0;
}

static void free_list(struct tfs_readcache *c, struct entry *doomed)
{
	while (doomed) {
		struct entry *next = doomed->next;
		entry_free(c, doomed);
		doomed = next;
	}
}

/* Moves e onto the doomed list (linked through next) if nobody uses it. */
static void doom_locked(struct tfs_readcache *c, struct entry *e, struct entry **doomed)
{
	if (unlist_locked(c, e)) {
		e->next = *doomed;
		*doomed = e;
	}
}

void tfs_readcache_destroy(struct tfs_readcache *c)
{
	struct entry *doomed = NULL;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	while (c->head)
		doom_locked(c, c->head, &doomed);
	pthread_mutex_unlock(&c->lock);
	free_list(c, doomed);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The most recently used window of pl covering offset, with a use counted, or
 * NULL. Drops windows of deleted topics on the way. */
static struct entry *find(struct tfs_readcache *c, const struct tfs_plog *pl, tfs_offset_t offset)
{
	struct entry *e, *next, *doomed = NULL;

	pthread_mutex_lock(&c->lock);
	for (e = c->head; e; e = next) {
		next = e->next;
		if (tfs_topic_deleted(e->topic)) {
			doom_locked(c, e, &doomed);
			continue;
		}
		if (e->pl == pl && offset >= e->first && offset <= e->last)
			break;
	}
	if (e) {
		e->users++;
		if (e != c->head) {
			unlink_locked(c, e);
			push_front_locked(c, e);
		}
		c->hits++;
	} else {
		c->misses++;
	}
	pthread_mutex_unlock(&c->lock);
	free_list(c, doomed);
	return e;
}

static void release(struct tfs_readcache *c, struct entry *e)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	last = --e->users == 0 && !e->listed;
	pthread_mutex_unlock(&c->lock);
	if (last)
		entry_free(c, e);
}

/* Keeps w (taking it over) as the newest window of pl, unless it is too large or
 * the topic is going. Evicts from the old end down to the bound. */
static void keep(struct tfs_readcache *c, struct tfs_topic *t, const struct tfs_plog *pl,
                 struct tfs_plog_window *w)
{
	struct entry *e = NULL, *doomed = NULL;
	size_t memory = tfs_plog_window_memory(w);

	if (memory > c->max_bytes / MAX_SHARE || !(e = calloc(1, sizeof(*e)))) {
		tfs_plog_window_free(w);
		return;
	}
	e->w = w;
	e->pl = pl;
	e->memory = memory;
	tfs_plog_window_range(w, &e->first, &e->last);
	e->topic = c->ops.ref(c->ops.arg, t);
	if (!e->topic) {
		entry_free(c, e);               /* deleted meanwhile */
		return;
	}
	pthread_mutex_lock(&c->lock);
	push_front_locked(c, e);
	e->listed = true;
	c->bytes += memory;
	c->count++;
	while ((c->bytes > c->max_bytes || c->count > TFS_READCACHE_MAX_WINDOWS) && c->tail != e)
		doom_locked(c, c->tail, &doomed);
	pthread_mutex_unlock(&c->lock);
	free_list(c, doomed);
}

/* The record at offset of pl: from a kept window, else from a new one (kept). */
static int read_at(struct tfs_readcache *c, struct tfs_topic *t, struct tfs_plog *pl,
                   tfs_offset_t offset, struct tfs_record_copy *out)
{
	struct tfs_plog_window *w = NULL;
	struct entry *e = find(c, pl, offset);
	int rc;

	if (e) {
		/* A kept window that lacks an offset in its range says the log lacks it
		 * (records are never brought back): ENOENT from it is the log's answer,
		 * and tfs_plog_read_key_via looks the key up again. */
		rc = tfs_plog_window_copy(e->w, offset, out);
		release(c, e);
		return rc;
	}
	rc = tfs_plog_window_read(pl, offset, &w);
	if (rc < 0)
		return rc;
	rc = tfs_plog_window_copy(w, offset, out);
	keep(c, t, pl, w);
	return rc;
}

struct read_at_arg {
	struct tfs_readcache *c;
	struct tfs_topic *t;
};

static int read_at_reader(void *arg, struct tfs_plog *pl, tfs_offset_t offset,
                          struct tfs_record_copy *out)
{
	struct read_at_arg *a = arg;

	return read_at(a->c, a->t, pl, offset, out);
}

int tfs_readcache_read_key(struct tfs_readcache *c, struct tfs_topic *t, struct tfs_plog *pl,
                           struct tfs_slice key, struct tfs_record_copy *out)
{
	struct read_at_arg a = { c, t };

	return tfs_plog_read_key_via(pl, key, read_at_reader, &a, out);
}

void tfs_readcache_forget_topic(struct tfs_readcache *c, struct tfs_topic *t)
{
	struct entry *e, *next, *doomed = NULL;

	pthread_mutex_lock(&c->lock);
	for (e = c->head; e; e = next) {
		next = e->next;
		if (e->topic == t)
			doom_locked(c, e, &doomed);
	}
	pthread_mutex_unlock(&c->lock);
	free_list(c, doomed);
}

void tfs_readcache_stats(struct tfs_readcache *c, struct tfs_readcache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	st->hits = c->hits;
	st->misses = c->misses;
	st->windows = c->count;
	st->bytes = c->bytes;
	pthread_mutex_unlock(&c->lock);
}
