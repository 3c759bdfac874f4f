/* retention.c - the delete policy: whole segments leave the log from its start
 * once they are past retention.ms or beyond retention.bytes (Kafka's
 * deleteRetentionMsBreachedSegments and deleteRetentionSizeBreachedSegments;
 * compact,delete applies this and compaction both).
 *
 * Which segments: a prefix of the log (Kafka's LocalLog.deletableSegments). By time:
 * while the segment's largest timestamp (its max record timestamp, or its .log's
 * modification time if it has none) is more than retention.ms before now. By size:
 * while the log without the segment is still at least retention.bytes. The prefix
 * is the longer of the two. The active segment belongs to it when it holds records
 * and the rule reaches it; an empty active segment never does. Whatever the
 * policy (compact too), the segments wholly below a log start offset that
 * DeleteRecords moved (engine/log/plog_start.c) belong to it as well, as in
 * Kafka's deleteLogStartOffsetBreachedSegments.
 *
 * How: as the group-commit leader. When the prefix is the whole log, first roll
 * (Kafka does the same: a log always keeps a segment), so that a fresh, empty active
 * segment starts at the log end offset: offsets keep counting from there and the
 * log start offset becomes the log end offset. Then publish the shorter list
 * (pl->lock held for writing, which also removes from the key directory every key
 * whose newest record was in the deleted segments: its file vanishes with them),
 * rename each deleted segment's files .deleted, ascending (unlinked when the last
 * reader lets go), and fsync the directory. A crash part way leaves a shorter prefix
 * deleted (recovery removes *.deleted files and orphan indexes): never a hole; a
 * crash after the roll leaves a sealed expired segment that the next run deletes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

#define KEY_BYTES_INITIAL (4u << 10)   /* first arena for the keys that go */
#define KEY_COUNT_INITIAL 256

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

/* Number of segments at the start of l that retention deletes; l->count when the
 * active segment goes too. Under pl->lock or as the leader (the active segment's
 * size and timestamps move). */
static int deletable_prefix(const struct tfs_seglist *l, const struct tfs_topic_config *cfg,
                            int64_t now_ms, tfs_offset_t start, tfs_offset_t end)
{
	int eligible = l->count, by_time = 0, by_size = 0, by_start = 0;

	if (tfs_segment_size(l->seg[l->count - 1]) == 0)
		eligible--;                    /* an empty active segment stays */
	/* a segment ends where the next begins; the last at the log end */
	while (by_start < eligible &&
	       (by_start + 1 < l->count ? l->seg[by_start + 1]->base_offset : end) <= start)
		by_start++;
	if (!(cfg->cleanup_policy & TFS_POLICY_DELETE))
		return by_start;
	if (cfg->retention_ms >= 0)
		while (by_time < eligible &&
		       now_ms - tfs_segment_largest_timestamp(l->seg[by_time]) > cfg->retention_ms)
			by_time++;
	if (cfg->retention_bytes >= 0) {
		int64_t diff = -cfg->retention_bytes;
		for (int i = 0; i < l->count; i++)
			diff += tfs_segment_size(l->seg[i]);
		while (by_size < eligible && diff - tfs_segment_size(l->seg[by_size]) >= 0)
			diff -= tfs_segment_size(l->seg[by_size++]);
	}
	if (by_size > by_time)
		by_time = by_size;
	return by_start > by_time ? by_start : by_time;
}

struct retention_arg {
	const struct tfs_topic_config *cfg;
	int64_t now_ms;
	struct tfs__retention_result *out;
};

static int retention_exclusive(struct tfs_plog *pl, void *varg)
{
	struct retention_arg *a = varg;
	struct tfs_seglist *cur = pl->segs, *nl;
	struct doomed_keys d = { 0 };
	tfs_offset_t start;
	int k, rc = 0, dirfd;

	pthread_rwlock_rdlock(&pl->lock);
	start = tfs__plog_start(pl);
	pthread_rwlock_unlock(&pl->lock);
	k = deletable_prefix(cur, a->cfg, a->now_ms, start, pl->end_offset);

	if (k == 0)
		return 0;
	if (k == cur->count) {
		/* the whole log expired: an empty active segment at the end offset first */
		rc = tfs__plog_roll_locked(pl);
		if (rc < 0)
			return rc;
		cur = pl->segs;
		a->out->rolled = true;
	}
	/* before the commit: a partition holds no descriptor (plog_internal.h) */
	dirfd = tfs__plog_dir_open(pl);
	if (dirfd < 0)
		return dirfd;
	nl = tfs__seglist_alloc(cur->count - k);
	if (!nl) {
		close(dirfd);
		return -ENOMEM;
	}
	for (int i = k; i < cur->count; i++)
		nl->seg[i - k] = tfs_segment_ref(cur->seg[i]);
	d.below = nl->seg[0]->base_offset;

	/* No append runs (we lead the queue), so the directory cannot change between
	 * the scan and the removal; readers may still look while we collect. */
	pthread_rwlock_rdlock(&pl->lock);
	(void)tfs_keydir_scan(pl->kd, false, 0, collect_key, &d);
	pthread_rwlock_unlock(&pl->lock);
	if (d.err < 0) {
		rc = d.err;
		tfs__seglist_put(nl);
		goto out;
	}

	pthread_rwlock_wrlock(&pl->lock);
	{
		struct tfs_seglist *prev = pl->segs;
		size_t from = 0;
		pl->segs = nl;
		for (size_t i = 0; i < d.n; i++) {
			tfs_keydir_remove(pl->kd, tfs_slice_make(d.bytes + from, d.ends[i] - from), d.below);
			from = d.ends[i];
		}
		pthread_rwlock_unlock(&pl->lock);
		for (int i = 0; i < k; i++) {
			a->out->bytes += tfs_segment_size(prev->seg[i]);
			(void)tfs_segment_pin(prev->seg[i]);   /* readers keep reading it */
			int r = tfs_segment_mark_deleted(prev->seg[i], dirfd);
			if (r < 0 && rc == 0)
				rc = r;
		}
		a->out->segments = k;
		a->out->keys_removed = d.n;
		a->out->log_start = d.below;
		tfs__seglist_put(prev);
	}
	if (rc == 0)
		rc = tfs_io_fsync_dir(pl->env.io, dirfd);
	if (rc == 0)
		tfs__pstate_prune(pl, dirfd);   /* the deleted segments' producer snapshots */
	if (rc < 0)
		tfs_log_error("retention", "deleting old segments of %s: %s; the next open finishes it",
		              pl->path, tfs_strerror(rc));
out:
	close(dirfd);
	free(d.bytes);
	free(d.ends);
	return rc;
}

int tfs__retention_apply(struct tfs_plog *pl, const struct tfs_topic_config *cfg, int64_t now_ms,
                         struct tfs__retention_result *out)
{
	struct retention_arg a = { cfg, now_ms, out };
	struct tfs_seglist *l;
	int k;

	memset(out, 0, sizeof(*out));
	if (pl->env.read_only)
		return 0;
	/* cheap look first: only lead the append queue when something goes */
	pthread_rwlock_rdlock(&pl->lock);
	l = pl->segs;
	k = deletable_prefix(l, cfg, now_ms, tfs__plog_start(pl), pl->end_offset);
	out->log_start = l->seg[0]->base_offset;
	pthread_rwlock_unlock(&pl->lock);
	if (k == 0)
		return 0;
	return tfs__plog_run_exclusive(pl, retention_exclusive, &a);
}
