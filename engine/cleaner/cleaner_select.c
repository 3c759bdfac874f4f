/* cleaner_select.c - what a pass cleans (steps 2 and 4 of cleaner_pass.c,
 * docs/cleaner.md §3, §5): the cleanable range of a pinned segment list (Kafka's
 * cleanableOffsets and LogToClean, also the manager's choice and its figures) and
 * the grouping of the segments to recopy (groupSegmentsBySize). Pure functions of
 * the list and the config: no I/O, no lock. */
#include <stdint.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"

static int64_t largest_timestamp(const struct tfs_segment *s)
{
	return s->max_timestamp >= 0 ? s->max_timestamp : s->created_ms;
}

void tfs__log_to_clean(const struct tfs_seglist *l, tfs_offset_t log_end,
                       const struct tfs_topic_config *cfg, tfs_offset_t checkpoint,
                       tfs_offset_t first_unstable, int64_t now_ms,
                       struct tfs__log_to_clean *out)
{
	int active = l->count - 1, idx;
	tfs_offset_t fd, fu;

	memset(out, 0, sizeof(*out));
	out->log_start = l->seg[0]->base_offset;
	out->log_end = log_end;
	fd = checkpoint < 0 ? out->log_start : checkpoint;
	if (checkpoint >= 0 && (checkpoint < out->log_start || checkpoint > log_end)) {
		fd = out->log_start;
		out->checkpoint_reset = true;
	}
	fu = l->seg[active]->base_offset;
	out->why = TFS_NC_ACTIVE_SEGMENT;
	if (first_unstable >= 0 && first_unstable < fu) {
		fu = first_unstable;
		out->why = TFS_NC_OPEN_TRANSACTION;
	}
	idx = tfs__seglist_find(l, fd);
	if (idx < 0)
		idx = 0;
	if (cfg->min_compaction_lag_ms > 0) {
		for (int i = idx; i < active; i++) {
			if (largest_timestamp(l->seg[i]) > now_ms - cfg->min_compaction_lag_ms) {
				if (l->seg[i]->base_offset < fu) {
					fu = l->seg[i]->base_offset;
					out->why = TFS_NC_COMPACTION_LAG;
				}
				break;
			}
		}
	}
	if (fu < fd)
		fu = fd;
	/* round down to the base of the segment holding it, never below first dirty */
	idx = tfs__seglist_find(l, fu);
	if (idx >= 0 && l->seg[idx]->base_offset < fu)
		fu = l->seg[idx]->base_offset > fd ? l->seg[idx]->base_offset : fd;
	out->first_dirty = fd;
	out->first_uncleanable = fu;

	for (int i = 0; i < active; i++) {
		const struct tfs_segment *s = l->seg[i];
		tfs_offset_t next = l->seg[i + 1]->base_offset;
		int64_t size = tfs_segment_size(s);
		if (s->base_offset < fd)
			out->clean_bytes += size;
		if (s->base_offset < fu && next > fd && fd < fu)
			out->cleanable_bytes += size;
	}
	out->total_bytes = out->clean_bytes + out->cleanable_bytes;
	out->ratio = out->total_bytes > 0 ? (double)out->cleanable_bytes / (double)out->total_bytes : 0;

	/* max.compaction.lag.ms: the oldest first batch among the dirty closed segments */
	if (cfg->max_compaction_lag_ms > 0 && cfg->max_compaction_lag_ms < INT64_MAX) {
		int64_t earliest = INT64_MAX, bound = now_ms - cfg->max_compaction_lag_ms;
		idx = tfs__seglist_find(l, fd);
		for (int i = idx < 0 ? 0 : idx; i < active; i++) {
			int64_t ts = l->seg[i]->first_batch_timestamp;
			if (ts > 0 && ts < earliest)
				earliest = ts;
		}
		if (earliest != INT64_MAX && earliest < bound) {
			out->compaction_delay_ms = bound - earliest;
			out->need_compaction_now = true;
		}
	}
}

int tfs__group_segments(struct tfs_segment *const *segs, int n, int64_t max_bytes,
                        int64_t max_index_bytes, tfs_offset_t first_uncleanable, int *ends)
{
	int groups = 0, i = 0;

	while (i < n) {
		int64_t log = tfs_segment_size(segs[i]);
		int64_t idx = (int64_t)segs[i]->index_count * TFS_INDEX_ENTRY_BYTES;
		int64_t tidx = (int64_t)segs[i]->tindex_count * TFS_TIMEINDEX_ENTRY_BYTES;
		int j = i + 1;

		while (j < n) {
			const struct tfs_segment *s = segs[j];
			int64_t size = tfs_segment_size(s);
			int64_t sidx = (int64_t)s->index_count * TFS_INDEX_ENTRY_BYTES;
			int64_t stidx = (int64_t)s->tindex_count * TFS_TIMEINDEX_ENTRY_BYTES;
			tfs_offset_t last_estimate = j + 1 < n ? segs[j + 1]->base_offset - 1 :
			                             first_uncleanable - 1;
			if (log + size > max_bytes || idx + sidx > max_index_bytes ||
			    tidx + stidx > max_index_bytes)
				break;
			/* an empty segment always joins, so emptied segments merge over time */
			if (size != 0 && last_estimate - segs[i]->base_offset > INT32_MAX)
				break;
			log += size;
			idx += sidx;
			tidx += stidx;
			j++;
		}
		ends[groups++] = j;
		i = j;
	}
	return groups;
}
