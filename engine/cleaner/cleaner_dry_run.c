/* cleaner_dry_run.c - the next pass, before it runs (cleaner.h): the pass of
 * cleaner_pass.c run with `dry` set, so that every decision and every output
 * batch is the pass's own while nothing is written; the words of the `fate`
 * attribute; the reasons a record is outside the next pass. The verdicts
 * themselves are cleaner_fate.c's record_fate: nothing here decides a record. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"

#define MIN_IO_BUFFER_BYTES 4096

void tfs__cleaner_thread_sizes(const struct tfs_cleaner_config *cfg, size_t *map_bytes,
                               size_t *io_bytes)
{
	int threads = cfg->threads > 0 ? cfg->threads : 1;

	*map_bytes = (size_t)(cfg->dedupe_buffer_size / threads);
	*io_bytes = (size_t)(cfg->io_buffer_size / threads / 2);
	if (*io_bytes < MIN_IO_BUFFER_BYTES)
		*io_bytes = MIN_IO_BUFFER_BYTES;
}

/* Counts what the pass would do to tombstones and markers, then hands the record
 * on to the caller's observer. */
struct dry_tally {
	struct tfs_cleaner_dry_run *out;
	tfs_cleaner_fate_fn fn;
	void *arg;
};

static void dry_tally_fate(void *arg, const struct tfs_cleaner_record_fate *f)
{
	struct dry_tally *t = arg;

	if (f->fate == TFS_FATE_KEEP_TOMBSTONE && !f->horizon_stamped)
		t->out->tombstones_to_stamp++;
	else if (f->fate == TFS_FATE_DROP_TOMBSTONE)
		t->out->tombstones_dropped++;
	if (t->fn)
		t->fn(t->arg, f);
}

int tfs_cleaner_dry_run_log(struct tfs_plog *pl, const struct tfs_topic_config *cfg,
                            const struct tfs_cleaner_config *ccfg, tfs_offset_t checkpoint,
                            int64_t now_ms, tfs_cleaner_fate_fn fn, void *arg,
                            struct tfs_cleaner_dry_run *out)
{
	atomic_bool never = false;
	struct tfs__pass_in in = { .pl = pl, .name = "dry run", .cfg = *cfg, .now_ms = now_ms,
	                           .checkpoint = checkpoint, .abort = &never, .dry = true };
	struct dry_tally tally = { .out = out, .fn = fn, .arg = arg };
	struct tfs__cleaner_ctx x;
	struct tfs__clean_stats st;
	size_t map_bytes, io_bytes;
	int rc;

	memset(out, 0, sizeof(*out));
	out->now_ms = now_ms;
	out->compacted = cfg->cleanup_policy & TFS_POLICY_COMPACT;
	if (!out->compacted) {
		struct tfs_plog_stats ps;
		tfs_plog_stats(pl, &ps);
		out->log_start = out->first_dirty = out->first_uncleanable = out->end_offset =
			ps.log_start_offset;
		out->log_end = ps.log_end_offset;
		out->active_base = ps.active_base_offset;
		out->bytes_before = out->bytes_after = ps.size_bytes;
		out->nothing_to_do = true;
		out->uncleanable_why = TFS_NC_NOT_COMPACTED;
		return 0;
	}
	in.fate_fn = dry_tally_fate;
	in.fate_arg = &tally;
	/* a context like a cleaner thread's (its share of the dedupe buffer, so the map
	 * fills where the pass's would), but no throttler: it writes nothing */
	tfs__cleaner_thread_sizes(ccfg, &map_bytes, &io_bytes);
	tfs__cleaner_ctx_init(&x, NULL, -1, map_bytes, ccfg->io_buffer_load_factor, io_bytes);
	rc = tfs__clean_pass(&x, &in, &st);
	tfs__cleaner_ctx_release(&x);
	if (rc < 0)
		return rc;
	out->nothing_to_do = st.nothing_to_do;
	out->map_full = st.map_full;
	out->log_start = st.log_start;
	out->log_end = st.log_end;
	out->first_dirty = st.first_dirty;
	out->first_uncleanable = st.first_uncleanable;
	out->uncleanable_why = st.uncleanable_why;
	out->end_offset = st.end_offset;
	out->active_base = st.active_base;
	out->records_read = st.records_read;
	out->records_kept = st.records_kept;
	out->records_dropped = st.records_dropped;
	out->bytes_before = st.log_bytes;
	out->bytes_after = st.log_bytes - st.size_before + st.size_after;
	out->bytes_freed = out->bytes_before - out->bytes_after;
	out->batches_dropped = st.batches_dropped;
	out->batches_emptied = st.batches_emptied;
	out->batches_rebuilt = st.batches_rebuilt;
	return 0;
}

int tfs_cleaner_checkpoint_read(struct tfs_io *io, int data_dirfd, const char *topic,
                                int32_t partition, tfs_offset_t *out)
{
	struct tfs__ckpt_entry *e = NULL;
	size_t n = 0;
	int rc = tfs__ckpt_read(io, data_dirfd, &e, &n);

	*out = TFS_OFFSET_NONE;
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (e[i].partition == partition && !strcmp(e[i].topic, topic))
			*out = e[i].offset;
	tfs__ckpt_free(e, n);
	return 0;
}

const char *tfs_cleaner_fate_name(enum tfs_cleaner_fate f)
{
	switch (f) {
	case TFS_FATE_KEEP:
		return "keep";
	case TFS_FATE_DROP:
		return "drop";
	case TFS_FATE_KEEP_TOMBSTONE:
		return "keep-tombstone";
	case TFS_FATE_DROP_TOMBSTONE:
		return "drop-tombstone";
	case TFS_FATE_KEEP_KEYLESS:
		return "keep-keyless";
	case TFS_FATE_KEEP_PRODUCER_STATE:
		return "keep-producer-state";
	case TFS_FATE_NOT_CLEANABLE:
		return "not-cleanable";
	}
	return "?";
}

const char *tfs_cleaner_not_cleanable_name(enum tfs_cleaner_not_cleanable w)
{
	switch (w) {
	case TFS_NC_NONE:
		return "";
	case TFS_NC_ACTIVE_SEGMENT:
		return "active segment";
	case TFS_NC_COMPACTION_LAG:
		return "younger than min.compaction.lag.ms";
	case TFS_NC_OPEN_TRANSACTION:
		return "open transaction";
	case TFS_NC_BUFFER_FULL:
		return "past a full dedupe buffer";
	case TFS_NC_NOT_COMPACTED:
		return "cleanup.policy without compact";
	}
	return "?";
}

enum tfs_cleaner_not_cleanable tfs_cleaner_not_cleanable_of(const struct tfs_cleaner_dry_run *d,
                                                            tfs_offset_t offset)
{
	if (!d->compacted)
		return TFS_NC_NOT_COMPACTED;
	if (offset >= d->active_base)
		return TFS_NC_ACTIVE_SEGMENT;
	if (offset >= d->first_uncleanable)
		return d->uncleanable_why;
	if (offset >= d->end_offset)
		return TFS_NC_BUFFER_FULL;
	return TFS_NC_NONE;
}

const char *tfs_cleaner_fate_text(const struct tfs_cleaner_dry_run *d,
                                  const struct tfs_cleaner_record_fate *f, tfs_offset_t offset,
                                  char *buf, size_t cap)
{
	enum tfs_cleaner_not_cleanable why;

	if (f && f->fate == TFS_FATE_KEEP_TOMBSTONE) {
		snprintf(buf, cap, "keep-tombstone until %" PRId64 "%s", f->horizon_ms,
		         f->horizon_stamped ? "" : " (stamped by the pass)");
		return buf;
	}
	if (f && f->fate != TFS_FATE_NOT_CLEANABLE) {
		snprintf(buf, cap, "%s", tfs_cleaner_fate_name(f->fate));
		return buf;
	}
	why = f ? f->why : tfs_cleaner_not_cleanable_of(d, offset);
	if (why == TFS_NC_NONE)
		buf[0] = '\0';
	else
		snprintf(buf, cap, "%s %s", tfs_cleaner_fate_name(TFS_FATE_NOT_CLEANABLE),
		         tfs_cleaner_not_cleanable_name(why));
	return buf;
}
