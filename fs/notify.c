/* notify.c - the invalidation thread (see notify.h).
 *
 * The queue is a FIFO of heap entries, also indexed by nodeid in a chained hash so
 * that a burst of changes to one key (a .put of many lines naming it) costs one
 * notification.
 */
#include "fs/notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fuse_ll.h"
#include "io/log.h"

#define PENDING_BUCKETS 4096        /* power of two; chains stay short in practice */

struct entry {
	struct entry *next;             /* FIFO */
	struct entry *hnext;            /* nodeid index (inode entries only) */
	uint64_t nodeid;
	bool data;                      /* drop cached pages too */
};

struct tfs_notifier {
	struct fuse_session *se;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;            /* queue non-empty or stop */
	pthread_cond_t idle;            /* queue empty and nothing in flight */
	struct entry *head, *tail;
	struct entry *pending[PENDING_BUCKETS];
	bool stop;
	bool busy;                      /* an entry is being sent */
	uint64_t sent;
};

static inline size_t bucket(uint64_t nodeid)
{
	return (size_t)((nodeid * 0x9E3779B97F4A7C15ull) >> 32) & (PENDING_BUCKETS - 1);
}

static void unindex(struct tfs_notifier *n, struct entry *e)
{
	struct entry **pp = &n->pending[bucket(e->nodeid)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			return;
		}
	}
}

static void send_one(struct tfs_notifier *n, struct entry *e)
{
	int rc;

	rc = fuse_lowlevel_notify_inval_inode(n->se, e->nodeid, e->data ? 0 : -1, 0);
	/* -ENOENT: the kernel holds nothing for it. -ENOTCONN/-EBADF: unmounting. */
	if (rc < 0 && rc != -ENOENT && rc != -ENOTCONN && rc != -EBADF && rc != -ENODEV)
		tfs_log_warn("fs", "cannot invalidate node %llu: %s",
		             (unsigned long long)e->nodeid, strerror(-rc));
}

static void *notifier_main(void *arg)
{
	struct tfs_notifier *n = arg;
	struct entry *e;

	pthread_mutex_lock(&n->lock);
	for (;;) {
		while (!n->head && !n->stop)
			pthread_cond_wait(&n->wake, &n->lock);
		if (!n->head)
			break;
		e = n->head;
		n->head = e->next;
		if (!n->head)
			n->tail = NULL;
		unindex(n, e);
		n->busy = true;
		pthread_mutex_unlock(&n->lock);
		send_one(n, e);
		free(e);
		pthread_mutex_lock(&n->lock);
		n->busy = false;
		n->sent++;
		if (!n->head)
			pthread_cond_broadcast(&n->idle);
	}
	pthread_cond_broadcast(&n->idle);
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

int tfs_notifier_start(struct fuse_session *se, struct tfs_notifier **out)
{
	struct tfs_notifier *n = calloc(1, sizeof(*n));
	int rc;

	*out = NULL;
	if (!n)
		return -ENOMEM;
	n->se = se;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->wake, NULL);
	pthread_cond_init(&n->idle, NULL);
	rc = pthread_create(&n->thread, NULL, notifier_main, n);
	if (rc) {
		pthread_cond_destroy(&n->idle);
		pthread_cond_destroy(&n->wake);
		pthread_mutex_destroy(&n->lock);
		free(n);
		return -rc;
	}
	*out = n;
	return 0;
}

void tfs_notifier_stop(struct tfs_notifier *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->stop = true;
	pthread_cond_signal(&n->wake);
	pthread_mutex_unlock(&n->lock);
	pthread_join(n->thread, NULL);
	pthread_cond_destroy(&n->idle);
	pthread_cond_destroy(&n->wake);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static void enqueue(struct tfs_notifier *n, struct entry *e)
{
	e->next = NULL;
	if (n->tail)
		n->tail->next = e;
	else
		n->head = e;
	n->tail = e;
	pthread_cond_signal(&n->wake);
}

void tfs_notify_inode(struct tfs_notifier *n, uint64_t nodeid, int data)
{
	struct entry *e;

	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	for (e = n->pending[bucket(nodeid)]; e; e = e->hnext) {
		if (e->nodeid == nodeid) {
			e->data = e->data || data;
			pthread_mutex_unlock(&n->lock);
			return;
		}
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&n->lock);
		tfs_log_error("fs", "cannot queue invalidation of node %llu: out of memory",
		              (unsigned long long)nodeid);
		return;
	}
	e->nodeid = nodeid;
	e->data = data;
	e->hnext = n->pending[bucket(nodeid)];
	n->pending[bucket(nodeid)] = e;
	enqueue(n, e);
	pthread_mutex_unlock(&n->lock);
}

void tfs_notifier_drain(struct tfs_notifier *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	while ((n->head || n->busy) && !n->stop)
		pthread_cond_wait(&n->idle, &n->lock);
	pthread_mutex_unlock(&n->lock);
}

uint64_t tfs_notifier_sent(struct tfs_notifier *n)
{
	uint64_t s;

	if (!n)
		return 0;
	pthread_mutex_lock(&n->lock);
	s = n->sent;
	pthread_mutex_unlock(&n->lock);
	return s;
}
