/* cleaner_swap.c - replacing a group of segments by its cleaned copy, crash-safely.
 *
 * Kafka's LocalLog.replaceSegments (docs/cleaner.md §7) with one more directory fsync,
 * at the commit point. For a group old[0..n) replaced by fresh (base = old[0]'s):
 *
 *   step  on disk                                   in memory          a crash here
 *   ----  ----------------------------------------  -----------------  ------------------------
 *    0    <b>.log/.index/.timeindex.cleaned written  (pass)             .cleaned removed at open:
 *         and fsynced                                                   the old group stays
 *    1    .cleaned -> .swap  (.log, .index, .timeindex)                 a .cleaned of base b is
 *                                                                       left, so every .swap with
 *                                                                       offset >= b is removed:
 *                                                                       the old group stays
 *    2    fsync(dir)   == the commit point ==                           all .swap: recovery
 *    3                                              publish new list    removes the originals in
 *                                                   (write-locked)      the swap's range and
 *    4    old files -> .deleted, ascending                               renames the .swap files:
 *         (fds stay open for readers; unlinked at the last unref)       the new group
 *    5    .swap -> final names (.log first)                             remaining .swap renamed
 *    6    fsync(dir)                                                     done
 *
 * All of it runs as the partition's group-commit leader, so no append is in flight
 * and none starts until the swap is over; readers are never blocked: they keep
 * the list they pinned, and the old segments' fds stay open until they let go.
 * The new segment's fd is pinned by the pass while it is renamed, so no reader
 * ever has to reopen it by a name that is changing.
 *
 * Every step goes through io/, so the crash suite can stop the process at each.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

struct swap_arg {
	struct tfs_segment *const *old;
	int n;
	struct tfs_segment *fresh;
	bool *committed;
};

/* Index of old[0] in l, if old[0..n) are consecutive there; else -1. */
static int find_group(const struct tfs_seglist *l, struct tfs_segment *const *old, int n)
{
	for (int i = 0; i + n <= l->count - 1; i++) {   /* never the active segment */
		if (l->seg[i] != old[0])
			continue;
		for (int k = 1; k < n; k++)
			if (l->seg[i + k] != old[k])
				return -1;
		return i;
	}
	return -1;
}

static int swap_in(struct tfs_plog *pl, struct swap_arg *a, int dirfd)
{
	const struct tfs_seglist *cur = tfs__plog_exclusive_segments(pl);
	struct tfs_seglist *nl;
	struct tfs_io *io = tfs__plog_env(pl)->io;
	const char *path = tfs_plog_path(pl);
	int at, rc;

	at = find_group(cur, a->old, a->n);
	if (at < 0) {
		tfs_log_error("cleaner", "segments of %s changed under a pass; swap abandoned", path);
		return -ESTALE;
	}
	/* Everything that can fail for want of memory happens before the commit point. */
	nl = tfs__seglist_splice(cur, at, a->n, a->fresh);
	if (!nl)
		return -ENOMEM;

	rc = tfs_segment_rename_files(a->fresh, dirfd, ".cleaned", ".swap");
	if (rc == 0)
		rc = tfs_io_fsync_dir(io, dirfd);
	if (rc < 0) {
		tfs__seglist_put(nl);
		goto undo;
	}
	*a->committed = true;

	tfs__seglist_put(tfs__plog_publish_segments(pl, nl));

	for (int k = 0; k < a->n; k++) {
		/* Keep the fd open so readers of the old list never reopen by a name
		 * that the next swap of the same base may take. */
		(void)tfs_segment_pin(a->old[k]);
		rc = tfs_segment_mark_deleted(a->old[k], dirfd);
		if (rc < 0)
			goto half;
	}
	rc = tfs_segment_rename_files(a->fresh, dirfd, ".swap", "");
	if (rc < 0)
		goto half;
	rc = tfs_io_fsync_dir(io, dirfd);
	if (rc < 0)
		goto half;
	tfs__pstate_prune(pl, dirfd);   /* snapshots of the replaced segments' bases */
	return 0;

half:
	tfs_log_error("cleaner", "swap of %s/%020" PRId64 " stopped after its commit point: %s; "
	              "the partition reads the new segment, the next open finishes the files",
	              path, a->fresh->base_offset, tfs_strerror(rc));
	return rc;
undo:
	tfs_log_error("cleaner", "swap of %s/%020" PRId64 " abandoned before its commit point: %s",
	              path, a->fresh->base_offset, tfs_strerror(rc));
	(void)tfs_segment_unlink_files(io, dirfd, a->fresh->base_offset, ".swap");
	(void)tfs_segment_unlink_files(io, dirfd, a->fresh->base_offset, ".cleaned");
	return rc;
}

static int swap_exclusive(struct tfs_plog *pl, void *varg)
{
	int dirfd = tfs__plog_dir_open(pl), rc;   /* held by no partition (plog_cleaning.h) */

	if (dirfd < 0)
		return dirfd;
	rc = swap_in(pl, varg, dirfd);
	close(dirfd);
	return rc;
}

int tfs__swap_group(struct tfs_plog *pl, struct tfs_segment *const *old, int n,
                    struct tfs_segment *fresh, bool *committed)
{
	struct swap_arg a = { old, n, fresh, committed };

	*committed = false;
	return tfs__plog_run_exclusive(pl, swap_exclusive, &a);
}
