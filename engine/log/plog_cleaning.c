/* plog_cleaning.c - the partition log's side of plog_cleaning.h: snapshots of the
 * segment list, the facts a pass reads, and publishing a replacement list from an
 * exclusive section, with the key-directory removals that go with it (retention).
 * The exclusive section itself (tfs__plog_run_exclusive) and the roll are the
 * group-commit leader's, in partition_log.c. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log/plog_internal.h"

#define KEY_BYTES_INITIAL (4u << 10)   /* first arena for the keys that go */
#define KEY_COUNT_INITIAL 256

struct tfs_seglist *tfs__plog_snapshot(struct tfs_plog *pl, tfs_offset_t *end_offset)
{
	struct tfs_seglist *l;

	pthread_rwlock_rdlock(&pl->lock);
	l = pl->segs;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	if (end_offset)
		*end_offset = pl->end_offset;
	pthread_rwlock_unlock(&pl->lock);
	return l;
}

int tfs__plog_with_segments(struct tfs_plog *pl, int (*fn)(const struct tfs_seglist *l, void *arg),
                            void *arg)
{
	int rc;

	pthread_rwlock_rdlock(&pl->lock);
	rc = fn(pl->segs, arg);
	pthread_rwlock_unlock(&pl->lock);
	return rc;
}

void tfs__plog_bounds(struct tfs_plog *pl, tfs_offset_t *start, tfs_offset_t *end)
{
	pthread_rwlock_rdlock(&pl->lock);
	*start = tfs__plog_start(pl);
	*end = pl->end_offset;
	pthread_rwlock_unlock(&pl->lock);
}

bool tfs__plog_start_moved(struct tfs_plog *pl)
{
	bool moved;

	pthread_rwlock_rdlock(&pl->lock);
	moved = pl->deleted_below > pl->segs->seg[0]->base_offset;
	pthread_rwlock_unlock(&pl->lock);
	return moved;
}

void tfs__plog_config(struct tfs_plog *pl, struct tfs_topic_config *out)
{
	pthread_rwlock_rdlock(&pl->lock);
	*out = pl->cfg;
	pthread_rwlock_unlock(&pl->lock);
}

const struct tfs_plog_env *tfs__plog_env(const struct tfs_plog *pl)
{
	return &pl->env;
}

const char *tfs__plog_uncleanable_reason(const struct tfs_plog *pl)
{
	return pl->uncleanable_reason;
}

const struct tfs_seglist *tfs__plog_exclusive_segments(const struct tfs_plog *pl)
{
	return pl->segs;   /* only a section's own publish or roll changes it (C2) */
}

/* Debug check of C3 (P1) on a list made to be published: base offsets strictly
 * increase. */
static void seglist_check(const struct tfs_seglist *l)
{
#ifndef NDEBUG
	for (int i = 1; i < l->count; i++)
		assert(l->seg[i - 1]->base_offset < l->seg[i]->base_offset);
#else
	(void)l;
#endif
}

struct tfs_seglist *tfs__seglist_splice(const struct tfs_seglist *l, int at, int n,
                                        struct tfs_segment *fresh)
{
	struct tfs_seglist *nl = tfs__seglist_alloc(l->count - n + (fresh ? 1 : 0));

	if (!nl)
		return NULL;
	for (int i = 0, j = 0; i < l->count; i++) {
		if (i == at && fresh)
			nl->seg[j++] = tfs_segment_ref(fresh);
		if (i >= at && i < at + n)
			continue;
		nl->seg[j++] = tfs_segment_ref(l->seg[i]);
	}
	seglist_check(nl);
	return nl;
}

/* Debug check of C3 as nl replaces the current list: the active segment stays. */
static void publish_check(const struct tfs_plog *pl, const struct tfs_seglist *nl)
{
	assert(nl->count > 0 && nl->seg[nl->count - 1] == pl->segs->seg[pl->segs->count - 1]);
	(void)pl;
	(void)nl;
}

struct tfs_seglist *tfs__plog_publish_segments(struct tfs_plog *pl, struct tfs_seglist *nl)
{
	struct tfs_seglist *prev;

	publish_check(pl, nl);
	pthread_rwlock_wrlock(&pl->lock);
	prev = pl->segs;
	pl->segs = nl;
	pthread_rwlock_unlock(&pl->lock);
	return prev;
}

/* ---- keys that leave with the segments ---- */

struct doomed_keys {
	tfs_offset_t below;            /* keys whose newest offset is below this go */
	uint8_t *bytes;                /* key bytes back to back */
	size_t len, cap;
	size_t *ends;                  /* end of each key in bytes */
	size_t n, ncap;
	int err;
};

static int collect_key(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                       uint64_t hash)
{
	struct doomed_keys *d = arg;

	(void)hash;
	if (info->offset >= d->below)
		return 0;
	if (d->len + key.len > d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : KEY_BYTES_INITIAL;
		while (ncap < d->len + key.len)
			ncap *= 2;
		uint8_t *p = realloc(d->bytes, ncap);
		if (!p)
			goto nomem;
		d->bytes = p;
		d->cap = ncap;
	}
	if (d->n == d->ncap) {
		size_t ncap = d->ncap ? d->ncap * 2 : KEY_COUNT_INITIAL;
		size_t *p = realloc(d->ends, ncap * sizeof(*p));
		if (!p)
			goto nomem;
		d->ends = p;
		d->ncap = ncap;
	}
	if (key.len)
		memcpy(d->bytes + d->len, key.p, key.len);
	d->len += key.len;
	d->ends[d->n++] = d->len;
	return 0;
nomem:
	d->err = -ENOMEM;
	return 1;
}

int tfs__plog_publish_drop_keys(struct tfs_plog *pl, struct tfs_seglist *nl, tfs_offset_t below,
                                size_t *keys_removed, struct tfs_seglist **prev)
{
	struct doomed_keys d = { .below = below };
	size_t from = 0;

	*keys_removed = 0;
	*prev = NULL;
	/* No append runs (the caller leads the queue), so the directory cannot change
	 * between the scan and the removal; readers may still look while we collect. */
	tfs__plog_kd_lock(pl, false);
	(void)tfs_keydir_scan(pl->kd, false, 0, collect_key, &d);
	tfs__plog_kd_unlock(pl);
	if (d.err < 0) {
		tfs__seglist_put(nl);
		goto out;
	}

	publish_check(pl, nl);
	pthread_rwlock_wrlock(&pl->lock);
	*prev = pl->segs;
	pl->segs = nl;
	tfs__plog_kd_lock(pl, true);
	for (size_t i = 0; i < d.n; i++) {
		tfs_keydir_remove(pl->kd, tfs_slice_make(d.bytes + from, d.ends[i] - from), d.below);
		from = d.ends[i];
	}
	tfs__plog_kd_unlock(pl);
	pthread_rwlock_unlock(&pl->lock);
	*keys_removed = d.n;
out:
	free(d.bytes);
	free(d.ends);
	return d.err;
}
