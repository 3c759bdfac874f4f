/* keydir_feed.c - the open-time scan's second thread: it applies key-directory
 * changes while the scanning thread reads, checks and decodes the next batches.
 *
 * With a million keys, each change costs a few cache misses in the key directory,
 * about as long as reading, CRC-checking and decoding its record; doing the two on
 * two cores roughly doubles the scan rate (bench/bench_open).
 *
 *   scanner (tfs__kdfeed_add)           applier thread
 *   fill slab[i]: copy key, hash it     wait for a full slab
 *   slab full -> hand over, take next   tfs_keydir_apply(slab), hand back
 *
 * Slabs own copies of their keys, because the scanner's buffers are reused.
 * Changes are applied in the order they were added (the directory needs each
 * key's records in offset order).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log/plog_internal.h"

#define FEED_SLABS 4                     /* in flight between the two threads */
#define SLAB_OPS 8192                    /* changes per hand-over */
#define SLAB_KEY_BYTES (1u << 20)        /* key bytes per slab, unless one key is larger */

struct slab {
	struct tfs_keydir_op *ops;
	size_t n;
	uint8_t *keys;
	size_t klen, kcap;
};

struct tfs__kdfeed {
	struct tfs_keydir *kd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct slab slabs[FEED_SLABS];
	unsigned produce, consume;           /* slab indexes, mod FEED_SLABS */
	unsigned full;                       /* slabs handed over, not yet applied */
	bool closing;
	int err;                             /* first error of the applier */
};

static void *applier_main(void *arg)
{
	struct tfs__kdfeed *f = arg;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		struct slab *s;
		int rc;

		while (f->full == 0 && !f->closing)
			pthread_cond_wait(&f->cond, &f->lock);
		if (f->full == 0)
			break;
		s = &f->slabs[f->consume];
		pthread_mutex_unlock(&f->lock);
		rc = f->err ? 0 : tfs_keydir_apply(f->kd, s->ops, s->n);
		s->n = 0;
		s->klen = 0;
		pthread_mutex_lock(&f->lock);
		if (rc < 0 && f->err == 0)
			f->err = rc;
		f->consume = (f->consume + 1) % FEED_SLABS;
		f->full--;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int tfs__kdfeed_start(struct tfs_keydir *kd, struct tfs__kdfeed **out)
{
	struct tfs__kdfeed *f = calloc(1, sizeof(*f));
	int rc;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->kd = kd;
	for (int i = 0; i < FEED_SLABS; i++) {
		f->slabs[i].ops = malloc(SLAB_OPS * sizeof(*f->slabs[i].ops));
		f->slabs[i].keys = malloc(SLAB_KEY_BYTES);
		f->slabs[i].kcap = SLAB_KEY_BYTES;
		if (!f->slabs[i].ops || !f->slabs[i].keys) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	rc = -pthread_create(&f->thread, NULL, applier_main, f);
	if (rc < 0) {
		pthread_mutex_destroy(&f->lock);
		pthread_cond_destroy(&f->cond);
		goto fail;
	}
	*out = f;
	return 0;
fail:
	for (int i = 0; i < FEED_SLABS; i++) {
		free(f->slabs[i].ops);
		free(f->slabs[i].keys);
	}
	free(f);
	return rc;
}

/* Hands the producing slab over and waits for a free one. */
static void hand_over(struct tfs__kdfeed *f)
{
	pthread_mutex_lock(&f->lock);
	f->full++;
	f->produce = (f->produce + 1) % FEED_SLABS;
	pthread_cond_broadcast(&f->cond);
	while (f->full == FEED_SLABS)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

int tfs__kdfeed_add(struct tfs__kdfeed *f, struct tfs_slice key, bool remove,
                    const struct tfs_keyinfo *info)
{
	struct slab *s = &f->slabs[f->produce];
	struct tfs_keydir_op *op;

	if (s->n == SLAB_OPS || s->klen + key.len > s->kcap) {
		if (s->n > 0) {
			hand_over(f);
			s = &f->slabs[f->produce];
		}
		if (key.len > s->kcap) {           /* an empty slab grows for one huge key */
			uint8_t *p = realloc(s->keys, key.len);
			if (!p)
				return -ENOMEM;
			s->keys = p;
			s->kcap = key.len;
		}
	}
	op = &s->ops[s->n++];
	if (key.len)
		memcpy(s->keys + s->klen, key.p, key.len);
	op->key = tfs_slice_make(s->keys + s->klen, key.len);
	s->klen += key.len;
	op->hash = tfs_keydir_hash(key);
	op->remove = remove;
	op->info = *info;
	return 0;
}

int tfs__kdfeed_finish(struct tfs__kdfeed *f)
{
	int rc;

	if (!f)
		return 0;
	if (f->slabs[f->produce].n > 0)
		hand_over(f);
	pthread_mutex_lock(&f->lock);
	f->closing = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	rc = f->err;
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	for (int i = 0; i < FEED_SLABS; i++) {
		free(f->slabs[i].ops);
		free(f->slabs[i].keys);
	}
	free(f);
	return rc;
}
