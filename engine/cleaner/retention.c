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
 * (tfs__plog_publish_drop_keys, which also removes from the key directory, in the
 * same step, every key whose newest record was in the deleted segments: its file
 * vanishes with them),
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

/* Number of segments at the start of l that retention deletes; l->count when the
 * active segment goes too. Under the partition's lock (tfs__plog_with_segments)
 * or as the leader (the active segment's size and timestamps move). */
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
	tfs_offset_t start, end;          /* the log's bounds, for the first look */
};

/* Under the partition's read lock: how many segments would go, and the log start
 * offset as it is. */
static int first_look(const struct tfs_seglist *l, void *varg)
{
	struct retention_arg *a = varg;

	a->out->log_start = l->seg[0]->base_offset;
	return deletable_prefix(l, a->cfg, a->now_ms, a->start, a->end);
}

static int retention_exclusive(struct tfs_plog *pl, void *varg)
{
	struct retention_arg *a = varg;
	const struct tfs_seglist *cur = tfs__plog_exclusive_segments(pl);
	struct tfs_seglist *nl, *prev;
	tfs_offset_t below, start, end;
	size_t removed;
	int k, rc = 0, dirfd;

	tfs__plog_bounds(pl, &start, &end);
	k = deletable_prefix(cur, a->cfg, a->now_ms, start, end);

	if (k == 0)
		return 0;
	if (k == cur->count) {
		/* the whole log expired: an empty active segment at the end offset first */
		rc = tfs__plog_roll_locked(pl);
		if (rc < 0)
			return rc;
		cur = tfs__plog_exclusive_segments(pl);
		a->out->rolled = true;
	}
	/* before the commit: a partition holds no descriptor (plog_cleaning.h) */
	dirfd = tfs__plog_dir_open(pl);
	if (dirfd < 0)
		return dirfd;
	nl = tfs__seglist_splice(cur, 0, k, NULL);
	if (!nl) {
		close(dirfd);
		return -ENOMEM;
	}
	below = nl->seg[0]->base_offset;
	rc = tfs__plog_publish_drop_keys(pl, nl, below, &removed, &prev);
	if (rc < 0)
		goto out;
	for (int i = 0; i < k; i++) {
		a->out->bytes += tfs_segment_size(prev->seg[i]);
		(void)tfs_segment_pin(prev->seg[i]);   /* readers keep reading it */
		int r = tfs_segment_mark_deleted(prev->seg[i], dirfd);
		if (r < 0 && rc == 0)
			rc = r;
	}
	a->out->segments = k;
	a->out->keys_removed = removed;
	a->out->log_start = below;
	tfs__seglist_put(prev);
	if (rc == 0)
		rc = tfs_io_fsync_dir(tfs__plog_env(pl)->io, dirfd);
	if (rc == 0)
		tfs__pstate_prune(pl, dirfd);   /* the deleted segments' producer snapshots */
	if (rc < 0)
		tfs_log_error("retention", "deleting old segments of %s: %s; the next open finishes it",
		              tfs_plog_path(pl), tfs_strerror(rc));
out:
	close(dirfd);
	return rc;
}

int tfs__retention_apply(struct tfs_plog *pl, const struct tfs_topic_config *cfg, int64_t now_ms,
                         struct tfs__retention_result *out)
{
	struct retention_arg a = { .cfg = cfg, .now_ms = now_ms, .out = out };
	int k;

	memset(out, 0, sizeof(*out));
	if (tfs__plog_env(pl)->read_only)
		return 0;
	/* cheap look first: only lead the append queue when something goes */
	tfs__plog_bounds(pl, &a.start, &a.end);
	k = tfs__plog_with_segments(pl, first_look, &a);
	if (k == 0)
		return 0;
	return tfs__plog_run_exclusive(pl, retention_exclusive, &a);
}
