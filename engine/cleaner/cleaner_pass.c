/* cleaner_pass.c - one cleaning pass over one partition (Kafka's Cleaner.doClean,
 * docs/cleaner.md §3-§6).
 *
 * A pass, step by step:
 *
 *   1. read producer and transaction state from the segments that hold producer
 *      ids (tfs__txn_scan): each producer's last data batch and epoch, the aborted
 *      transactions [first data offset, ABORT marker], the first unstable offset;
 *   2. cleanable range (tfs__log_to_clean): [first dirty, first uncleanable), the
 *      latter = min(active base, first segment younger than min.compaction.lag.ms,
 *      first unstable offset), rounded down to a segment base;
 *   3. offset map over that range: every keyed record of a non-aborted data batch;
 *      control batches never enter it. When the map is full the build stops at the
 *      first keyed record that does not fit, even mid-segment (KAFKA-3894): the
 *      pass's end offset is then the map's latest offset + 1, else the range's end
 *      (gaps at segment ends are jumped, KAFKA-8764). Keys are hashed and their
 *      slots prefetched a few records before they are put (struct map_queue), and
 *      the build leaves behind which offsets it superseded ("Verdicts");
 *   4. the segments overlapping [log start, end offset) are grouped
 *      (tfs__group_segments: segment.bytes, segment.index.bytes, int32 offset span);
 *   5. each group is recopied into <base>.log.cleaned (decisions below) and swapped
 *      in (cleaner_swap.c) before the next group is read, so the extra disk space
 *      is about one segment; a group of one segment is written only from its first
 *      change on, and one that came through unchanged is neither written nor
 *      swapped (struct out_seg).
 *
 * Decisions for one batch (Kafka's checkBatchRetention and shouldRetainRecord):
 *
 *   can_discard   data: it belongs to an aborted transaction (the transaction is
 *                 then "observed"); a transactional batch of a committed one marks
 *                 its producer's transaction "open". control: empty -> yes; ABORT
 *                 -> yes unless data of its transaction was observed this pass;
 *                 COMMIT -> yes unless data of its transaction was seen this pass.
 *   drop records  data: can_discard. control: can_discard and its horizon passed.
 *   batch fate    last batch of an active producer -> kept, empty if need be;
 *                 else the batch ending just before the first uncleanable offset ->
 *                 kept, empty if need be; else drop records -> gone unread; else
 *                 kept only if some record survives.
 *   a record      survives unless the batch drops its records; markers survive;
 *                 past the map's latest offset -> survives; keyless -> survives
 *                 (topicfs keeps .append's records; Kafka drops them as invalid);
 *                 else it survives if its offset >= the map's offset for its key
 *                 and it has a value or its batch's horizon has not passed (or it
 *                 has none yet). For a record the build put, the first half is
 *                 read from its dead bit; a batch whose bits say "all dead" or
 *                 "all newest, no tombstone" is decided without decoding it.
 *   writing       every record survives and no horizon is needed -> the batch's
 *                 bytes are copied as they are; some survive -> re-encoded with the
 *                 topic's codec and zstd level (markers keep their codec), same
 *                 base offset, offset deltas, last offset delta, producer
 *                 fields; a batch that keeps a
 *                 tombstone (or a marker of an emptied transaction) and has no
 *                 horizon gets hasDeleteHorizonMs with pass start +
 *                 delete.retention.ms; none survive -> a 61-byte empty batch or
 *                 nothing.
 *
 * Offsets are never renumbered: survivors keep their batch and offset delta.
 *
 * Where each step lives: 1 and the per-batch transaction rules in cleaner_txn.c;
 * 2 and 4 in cleaner_select.c; 3 and its verdict bits in cleaner_map.c; the
 * decision on each record in cleaner_fate.c; the recopy, the output segment and
 * the pass itself here.
 *
 * One verdict. Whatever path a record takes (its dead bit, a map lookup, or no
 * question at all), what happens to it is decided by record_fate, which also says
 * why (keep, drop, keep-tombstone, ...). The dry run (cleaner_dry_run.c) is this
 * same pass with `dry` set: no file is created, written or swapped, but every
 * batch is decided and every re-encoded batch built and measured, so what it
 * predicts is what the pass does; its observer gets each record's fate, which is
 * why a dry run decides records one by one where the pass may take a batch whole
 * from its bits (both ask record_fate's rule, tested against each other by
 * tests/engine/test_cleaner_dryrun.c).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

/* ---- the per-thread context ---- */

int tfs__cleaner_ctx_init(struct tfs__cleaner_ctx *x, struct tfs_cleaner *c, int slot,
                          size_t map_bytes, double load_factor, size_t io_bytes)
{
	memset(x, 0, sizeof(*x));
	x->c = c;
	x->slot = slot;
	x->map_bytes = map_bytes;
	x->load_factor = load_factor;
	x->rchunk = io_bytes;
	x->wcap = io_bytes;
	tfs_batch_builder_init(&x->builder);
	tfs_record_iter_init(&x->it);
	tfs__txn_state_init(&x->txn);
	return 0;
}

void tfs__cleaner_ctx_release(struct tfs__cleaner_ctx *x)
{
	tfs_offset_map_destroy(x->map);
	free(x->rbuf);
	free(x->wbuf);
	free(x->hdrs);
	free(x->rv);
	free(x->v.dead);
	free(x->v.tomb);
	tfs_batch_builder_release(&x->builder);
	tfs_record_iter_release(&x->it);
	tfs__txn_state_release(&x->txn);
	memset(x, 0, sizeof(*x));
}

/* Back to the default read buffer after a segment that needed a big one. */
void tfs__ctx_shrink_rbuf(struct tfs__cleaner_ctx *x)
{
	if (x->rcap > x->rchunk) {
		free(x->rbuf);
		x->rbuf = NULL;
		x->rcap = 0;
	}
}

bool tfs__pass_aborted(const struct tfs__pass_in *in)
{
	return atomic_load_explicit(in->abort, memory_order_relaxed) ||
	       (in->stop && atomic_load_explicit(in->stop, memory_order_relaxed));
}

/* ---- recopying one group ---- */

/* The cleaned segment being written. A group of one segment is written lazily:
 * while every batch comes through as it was (changed false), the output is the
 * source's own prefix [0, pos), so nothing is written; at the first difference that
 * prefix is copied in (out_diverge) and writing goes on from there. A segment that
 * comes through whole is then neither written nor swapped. */
struct out_seg {
	struct tfs_segment *seg;  /* NULL in a dry run: nothing is written */
	struct tfs_segment *src;  /* the group's one source (read while !changed) */
	int fd;
	int dirfd;              /* the partition directory, for the pass of one group */
	tfs_pos_t pos;          /* bytes accepted (in the file, the buffer, or held back) */
	tfs_pos_t flushed;      /* bytes in the file */
	bool changed;           /* differs from a plain copy of the single source */
};

static int out_flush(struct tfs__cleaner_ctx *x, struct out_seg *o, struct tfs__clean_stats *st)
{
	int rc;

	if (x->wlen == 0)
		return 0;
	rc = tfs_io_write(o->seg->io, o->fd, x->wbuf, x->wlen, (uint64_t)o->flushed);
	if (rc < 0)
		return rc;
	o->flushed += (tfs_pos_t)x->wlen;
	st->bytes_written += (int64_t)x->wlen;
	tfs__throttle(tfs__cleaner_throttler(x->c), (int64_t)x->wlen, x->abort);
	x->wlen = 0;
	return 0;
}

/* The output is about to differ from its one source: write the prefix held back. */
static int out_diverge(struct tfs__cleaner_ctx *x, struct out_seg *o, struct tfs__clean_stats *st)
{
	tfs_pos_t done = 0;

	if (o->changed)
		return 0;
	o->changed = true;
	if (!o->seg)
		return 0;               /* a dry run: the prefix would be copied as it is */
	/* nothing is buffered while unchanged, so wbuf is free to carry the copy */
	while (done < o->pos) {
		size_t want = (size_t)(o->pos - done) < x->wcap ? (size_t)(o->pos - done) : x->wcap;
		ssize_t n = tfs_segment_read(o->src, x->wbuf, want, done);
		int rc;

		if (n < 0)
			return (int)n;
		if ((size_t)n != want)
			return -EIO;    /* a sealed segment shorter than it was read */
		st->bytes_read += n;
		tfs__throttle(tfs__cleaner_throttler(x->c), n, x->abort);
		x->wlen = (size_t)n;
		rc = out_flush(x, o, st);
		if (rc < 0)
			return rc;
		done += n;
	}
	return 0;
}

/* Appends one output batch (h describes it) to the cleaned segment. */
static int out_emit(struct tfs__cleaner_ctx *x, struct out_seg *o, const uint8_t *bytes, size_t len,
                    const struct tfs_batch_header *h, struct tfs__clean_stats *st)
{
	int rc;

	if (o->pos + (tfs_pos_t)len > INT32_MAX) {
		tfs_log_error("cleaner", "cleaned segment %s/%020" PRId64 " would pass 2 GiB",
		              o->src->dir, o->src->base_offset);
		return -EFBIG;
	}
	if (!o->seg) {
		o->pos += (tfs_pos_t)len;   /* a dry run measures what it would write */
		return 0;
	}
	rc = tfs_segment_note_batch(o->seg, o->pos, len, h->base_offset, tfs_batch_last_offset(h),
	                            h->max_timestamp);
	if (rc < 0)
		return rc;
	if (h->producer_id >= 0)
		o->seg->has_producer_ids = true;
	if (!o->changed) {
		o->pos += (tfs_pos_t)len;   /* the source's bytes, at the same position */
		return 0;
	}
	if (x->wlen + len > x->wcap) {
		rc = out_flush(x, o, st);
		if (rc < 0)
			return rc;
	}
	if (len > x->wcap) {
		/* larger than the buffer: straight to the file */
		rc = tfs_io_write(o->seg->io, o->fd, bytes, len, (uint64_t)o->flushed);
		if (rc < 0)
			return rc;
		o->flushed += (tfs_pos_t)len;
		st->bytes_written += (int64_t)len;
		tfs__throttle(tfs__cleaner_throttler(x->c), (int64_t)len, x->abort);
	} else {
		memcpy(x->wbuf + x->wlen, bytes, len);
		x->wlen += len;
	}
	o->pos += (tfs_pos_t)len;
	return 0;
}

/* Where a source batch sits: its segment's index in the pass's list, its position. */
struct batch_at {
	int seg;
	tfs_pos_t pos;
};

/* Writes the survivors of h, b (x->rv[].keep, from decide_records) as one batch
 * re-encoded with the topic's codec (a marker keeps its own), its offsets, producer
 * fields and horizon as they were; need_horizon stamps one (pass start +
 * delete.retention.ms). */
static int rebuild_batch(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                         struct out_seg *o, const struct tfs_batch_header *h, const uint8_t *b,
                         bool need_horizon, struct tfs__clean_stats *st)
{
	int64_t now = in->now_ms;
	bool control = tfs__batch_is_control(h);
	int64_t horizon = (h->attributes & TFS_ATTR_DELETE_HORIZON) ? h->base_timestamp : 0;
	size_t size = tfs_batch_size(h);
	struct tfs_record r;
	const char *why = NULL;
	int rc, i = 0;
	struct tfs_batch_params p = {
		.base_offset = h->base_offset,
		.attributes = (int16_t)(h->attributes & (TFS_ATTR_LOG_APPEND_TIME |
		              TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL | TFS_ATTR_DELETE_HORIZON)),
		.leader_epoch = h->leader_epoch,
		.producer_id = h->producer_id,
		.producer_epoch = h->producer_epoch,
		.base_sequence = h->base_sequence,
		.base_timestamp = horizon,
		.zstd_level = in->cfg.zstd_level,
	};
	const uint8_t *out;
	size_t len;
	struct tfs_batch_header oh;

	p.attributes |= (int16_t)(control ? (h->attributes & TFS_ATTR_CODEC_MASK) :
	                          (in->cfg.compression & TFS_ATTR_CODEC_MASK));
	if (need_horizon) {
		p.attributes |= TFS_ATTR_DELETE_HORIZON;
		p.base_timestamp = tfs__sat_add(now, in->cfg.delete_retention_ms);
		st->tombstones_stamped++;
	}
	tfs_batch_builder_reset(&x->builder, &p);
	rc = tfs_record_iter_reset(&x->it, b, size, &why);
	while (rc == 0 && (rc = tfs_record_iter_next(&x->it, &r, &why)) == 1) {
		struct tfs_record_in ri;
		rc = 0;
		if (!x->rv[i++].keep)
			continue;
		rc = tfs_record_headers(&r, &x->hdrs, &x->hcap);
		if (rc < 0)
			break;
		ri = (struct tfs_record_in){
			.key = r.key, .key_null = r.key_null, .value = r.value,
			.value_null = r.value_null, .timestamp = r.timestamp,
			.offset_delta = r.offset_delta, .headers = x->hdrs,
			.header_count = r.header_count,
		};
		rc = tfs_batch_builder_add_at(&x->builder, &ri);
	}
	if (rc < 0)
		return rc;
	rc = tfs_batch_builder_finish(&x->builder, h->last_offset_delta, &out, &len);
	if (rc < 0)
		return rc;
	rc = tfs_batch_header_decode(out, len, &oh, NULL);
	if (rc < 0)
		return rc;
	st->batches_rebuilt++;
	return out_emit(x, o, out, len, &oh, st);
}

/* Decides and writes one source batch (at where in the source). */
static int filter_batch(struct tfs__cleaner_ctx *x, struct tfs__group_ctx *g, struct out_seg *o,
                        const struct tfs_batch_header *h, const uint8_t *b, struct batch_at where,
                        struct tfs__clean_stats *st)
{
	const struct tfs__pass_in *in = g->in;
	const struct tfs__verdicts *v = &x->v;
	int64_t now = in->now_ms;
	bool control = tfs__batch_is_control(h);
	bool has_horizon = h->attributes & TFS_ATTR_DELETE_HORIZON;
	int64_t horizon = has_horizon ? h->base_timestamp : 0;
	bool can_discard = tfs__txn_can_discard(x, h, b);
	struct tfs__batch_rules br = {
		.control = control,
		.can_discard = can_discard,
		.drop_records = control ? (can_discard && has_horizon && horizon <= now) : can_discard,
		.retain_deletes = !has_horizon || now < horizon,
		.has_horizon = has_horizon,
		.horizon = horizon,
	};
	bool drop_records = br.drop_records, retain_empty = false, producer_last = false;
	tfs_offset_t last = tfs_batch_last_offset(h);
	size_t size = tfs_batch_size(h);
	int32_t count = h->records_count, kept = -1;
	bool tombstone_kept = false, need_horizon, use_bits, by_bits = false;
	int rc;

	st->records_read += count;
	if (h->producer_id >= 0 && tfs__txn_last_batch_of_producer(x, h, now))
		retain_empty = producer_last = true;
	else if (last + 1 == g->upper_bound)
		retain_empty = true;     /* keeps the offset just before the uncleanable part */
	else if (drop_records) {
		st->records_dropped += count;
		st->batches_dropped++;
		if (in->fate_fn) {
			rc = tfs__decide_records(x, g, h, b, &br, false, &kept, &tombstone_kept);
			if (rc < 0)
				return rc;
			tfs__report_fates(x, in, &br, false);
		}
		return out_diverge(x, o, st);
	}

	use_bits = v->ok && !control && !drop_records &&
	           tfs__verdict_read_whole(v, where.seg, where.pos);
	/* The whole-batch shortcut skips the records, so a dry run that reports each
	 * record's fate decides them one by one (the same verdicts, bit by bit). */
	if (use_bits && !in->fate_fn && count > 0 && h->base_offset >= v->start &&
	    last <= g->latest && tfs__verdict_covers(v, last)) {
		/* every record of it went into the map: its bits decide it whole */
		int64_t dead, live_tombs;
		tfs__verdict_count(v, (uint64_t)(h->base_offset - v->start), (uint64_t)(last - v->start),
		                   &dead, &live_tombs);
		if (dead == count)
			kept = 0;
		else if (dead == 0 && live_tombs == 0)
			kept = count;
		by_bits = kept >= 0;
	}
	if (kept < 0) {
		rc = tfs__decide_records(x, g, h, b, &br, use_bits, &kept, &tombstone_kept);
		if (rc < 0)
			return rc;
		if (in->fate_fn)
			tfs__report_fates(x, in, &br, kept == 0 && producer_last);
	}
	st->records_kept += kept;
	st->records_dropped += count - kept;
	need_horizon = (tombstone_kept || (control && can_discard)) && !has_horizon;
	if (need_horizon && !control && h->base_offset < st->first_dirty) {
		/* A tombstone the map never held: its key's older values below it may
		 * still be on disk, so a horizon would let a later pass drop it and
		 * bring one of them back. Kept as it is; the checkpoint is reset. */
		need_horizon = false;
		st->tombstones_unstamped++;
	}

	if (kept == count && count > 0 && !need_horizon) {
		st->batches_copied++;
		return out_emit(x, o, b, size, h, st);
	}
	if (kept == 0) {
		uint8_t empty[TFS_BATCH_HEADER_BYTES];
		struct tfs_batch_header eh;
		if (!retain_empty) {
			st->batches_dropped++;
			return out_diverge(x, o, st);
		}
		tfs_batch_write_empty(h, empty);
		(void)tfs_batch_header_decode(empty, sizeof(empty), &eh, NULL);
		/* an empty batch kept as it was is no change */
		if (!(count == 0 && size == sizeof(empty) && !memcmp(empty, b, size))) {
			rc = out_diverge(x, o, st);
			if (rc < 0)
				return rc;
		}
		st->batches_emptied++;
		return out_emit(x, o, empty, sizeof(empty), &eh, st);
	}
	rc = out_diverge(x, o, st);
	if (rc < 0)
		return rc;

	/* some survive: re-encode them. x->rv[].keep is decide_records': a batch decided
	 * by its bits keeps all (no tombstone, so no horizon) or nothing. */
	assert(!by_bits);
	(void)by_bits;               /* read by the assert only */
	return rebuild_batch(x, in, o, h, b, need_horizon, st);
}

static void discard_cleaned(struct tfs_plog *pl, struct out_seg *o)
{
	if (!o->seg)
		return;
	(void)tfs_segment_unlink_files(tfs__plog_env(pl)->io, o->dirfd, o->seg->base_offset,
	                               ".cleaned");
	tfs_segment_unpin(o->seg);
	tfs_segment_unref(o->seg);
	o->seg = NULL;
}

/* Whether the written output o holds the batch at base offset (a marker: one
 * record). Reads headers from the index's nearest entry on. */
static bool marker_kept(const struct out_seg *o, tfs_offset_t offset)
{
	uint8_t hdr[TFS_BATCH_HEADER_BYTES];
	tfs_pos_t pos = tfs_segment_lookup(o->seg, offset);

	while (pos + (tfs_pos_t)sizeof(hdr) <= o->pos) {
		struct tfs_batch_header h;
		if (pread(o->fd, hdr, sizeof(hdr), pos) != (ssize_t)sizeof(hdr) ||
		    tfs_batch_header_decode(hdr, sizeof(hdr), &h, NULL) < 0)
			return false;
		if (h.base_offset >= offset)
			return h.base_offset == offset;
		pos += (tfs_pos_t)tfs_batch_size(&h);
	}
	return false;
}

/* Step 5 for one group segs[0..n), which start at index first of the pass's
 * list; dirfd is the partition directory. */
static int clean_group_in(struct tfs__cleaner_ctx *x, struct tfs__group_ctx *g,
                          struct tfs_segment *const *segs, int n, int first,
                          struct tfs__clean_stats *st, int dirfd)
{
	struct tfs_plog *pl = g->in->pl;
	const struct tfs_plog_env *env = tfs__plog_env(pl);
	struct out_seg o = { .dirfd = dirfd };
	bool committed = false;
	int rc;

	if (g->in->dry)
		goto read;
	rc = tfs_segment_create_cleaned(env->io, env->fdcache, dirfd, tfs_plog_path(pl),
	                                segs[0]->base_offset, g->in->cfg.index_interval_bytes, &o.seg);
	if (rc < 0)
		return rc;
	rc = tfs_segment_pin(o.seg);
	if (rc < 0) {
		tfs_segment_unref(o.seg);
		(void)tfs_segment_unlink_files(env->io, dirfd, segs[0]->base_offset, ".cleaned");
		return rc;
	}
	o.fd = tfs_segment_fd(o.seg);
	o.seg->sealed = true;
	o.seg->created_ms = segs[n - 1]->created_ms;
read:
	o.changed = n > 1;
	o.src = segs[0];
	x->wlen = 0;

	for (int k = 0; k < n; k++) {
		struct tfs__seg_reader r;
		struct tfs_batch_header h;
		const uint8_t *b = NULL;
		tfs_pos_t at = 0;

		st->size_before += tfs_segment_size(segs[k]);
		tfs__seg_reader_init(&r, segs[k], 0, &x->rbuf, &x->rcap, x->rchunk, x->c, &st->bytes_read);
		r.abort = g->in->abort;
		r.why = x->why;
		r.why_cap = sizeof(x->why);
		while ((rc = tfs__seg_reader_next(&r, &h, &b, &at)) == 1) {
			if (tfs__pass_aborted(g->in)) {
				rc = -ECANCELED;
				break;
			}
			rc = filter_batch(x, g, &o, &h, b, (struct batch_at){ first + k, at }, st);
			if (rc < 0) {
				if (rc == TFS_ECORRUPT) {
					r.pos = at;
					(void)tfs__seg_reader_corrupt(&r, "records do not decode");
				}
				break;
			}
		}
		tfs__ctx_shrink_rbuf(x);
		if (rc < 0)
			goto fail;
	}
	rc = out_flush(x, &o, st);
	if (rc < 0)
		goto fail;
	if (!o.seg) {
		/* a dry run: what the group would take after the swap */
		st->size_after += o.changed ? o.pos : tfs_segment_size(segs[0]);
		return 0;
	}
	/* pairs with tfs_segment_size's acquire in readers of the published list */
	atomic_store_explicit(&o.seg->size, o.pos, memory_order_release);
	if (!o.changed) {
		/* one segment, every batch as it was: nothing to swap */
		discard_cleaned(pl, &o);
		st->size_after += tfs_segment_size(segs[0]);
		return 0;
	}
	/* The aborted transactions of the sources whose ABORT marker the output
	 * kept, as they were written (Kafka keeps the AbortedTxn entries it read
	 * for the markers it retains); a marker that went takes its entry along. */
	for (int k = 0; k < n; k++)
		for (uint32_t i = 0; i < segs[k]->aborted_count; i++)
			if (marker_kept(&o, segs[k]->aborted[i].last_offset) &&
			    (rc = tfs_segment_add_aborted(o.seg, &segs[k]->aborted[i])) < 0)
				goto fail;
	rc = tfs_segment_write_indexes_to(o.seg, dirfd, ".cleaned");
	if (rc == 0)
		rc = tfs_segment_write_txnindex(o.seg, dirfd, ".cleaned");
	if (rc < 0)
		goto fail;
	if (tfs__pass_aborted(g->in)) {
		rc = -ECANCELED;
		goto fail;
	}
	rc = tfs__swap_group(pl, segs, n, o.seg, &committed);
	if (rc < 0 && !committed)
		goto fail;      /* the swap removed its files; the log is as it was */
	st->size_after += o.pos;
	st->groups_swapped++;
	tfs_segment_unpin(o.seg);
	tfs_segment_unref(o.seg);   /* the published list holds its own reference */
	return rc;
fail:
	discard_cleaned(pl, &o);
	return rc;
}

/* clean_group_in with the directory opened for the group's files: a partition
 * holds no descriptor between operations (plog_cleaning.h). */
static int clean_group(struct tfs__cleaner_ctx *x, struct tfs__group_ctx *g,
                       struct tfs_segment *const *segs, int n, int first,
                       struct tfs__clean_stats *st)
{
	int dirfd = tfs__plog_dir_open(g->in->pl), rc;

	if (dirfd < 0)
		return dirfd;
	rc = clean_group_in(x, g, segs, n, first, st, dirfd);
	close(dirfd);
	return rc;
}

/* ---- the pass ---- */

int tfs__clean_pass(struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                    struct tfs__clean_stats *st)
{
	struct tfs_plog *pl = in->pl;
	struct tfs_seglist *l;
	struct tfs__log_to_clean lc;
	struct tfs__group_ctx g = { .in = in };
	tfs_offset_t log_end, end, latest;
	int64_t t0 = tfs_mono_us();
	int k, ngroups, *ends = NULL, rc;

	memset(st, 0, sizeof(*st));
	st->start_ms = in->now_ms;
	x->abort = in->abort;
	x->why[0] = '\0';
	if (!x->map) {
		rc = tfs_offset_map_create(x->map_bytes, x->load_factor, &x->map);
		if (rc < 0) {
			tfs_log_error("cleaner", "cannot allocate a %zu-byte dedupe buffer: %s",
			              x->map_bytes, tfs_strerror(rc));
			return rc;
		}
	}
	if (!x->wbuf && !(x->wbuf = malloc(x->wcap)))
		return -ENOMEM;
	l = tfs__plog_snapshot(pl, &log_end);

	for (k = 0; k < l->count; k++)
		st->log_bytes += tfs_segment_size(l->seg[k]);
	st->active_base = l->seg[l->count - 1]->base_offset;
	rc = tfs__txn_scan(&x->txn, l, &x->rbuf, &x->rcap, x->rchunk, &x->it, x->c);
	tfs__ctx_shrink_rbuf(x);
	if (rc < 0)
		goto out;
	tfs__log_to_clean(l, log_end, &in->cfg, in->checkpoint, x->txn.first_unstable, in->now_ms, &lc);
	st->first_dirty = lc.first_dirty;
	st->first_uncleanable = lc.first_uncleanable;
	st->uncleanable_why = lc.why;
	st->log_start = lc.log_start;
	st->log_end = lc.log_end;

	/* The map build puts records of [first dirty, first uncleanable) only, one per
	 * offset, so that span bounds the keys it can meet. */
	tfs_offset_map_reset(x->map, (size_t)(lc.first_uncleanable - lc.first_dirty));
	if (lc.first_dirty > 0)
		tfs_offset_map_update_latest_offset(x->map, lc.first_dirty - 1);
	tfs__verdicts_begin(x, lc.first_dirty, lc.first_uncleanable);
	if (lc.first_dirty < lc.first_uncleanable) {
		rc = tfs__build_map(x, in, l, lc.first_dirty, lc.first_uncleanable, st);
		if (rc < 0)
			goto out;
	}
	latest = tfs_offset_map_latest_offset(x->map);
	end = latest + 1 > lc.first_dirty ? latest + 1 : lc.first_dirty;
	st->end_offset = end;
	st->buffer_utilization = tfs_offset_map_utilization(x->map);

	/* the segments overlapping [log start, end): never the active one */
	for (k = 0; k < l->count - 1 && l->seg[k]->base_offset < end; k++)
		;
	if (k == 0) {
		st->nothing_to_do = true;
		goto out;
	}
	ends = malloc(sizeof(*ends) * (size_t)k);
	if (!ends) {
		rc = -ENOMEM;
		goto out;
	}
	ngroups = tfs__group_segments(l->seg, k, in->cfg.segment_bytes, in->cfg.segment_index_bytes,
	                              lc.first_uncleanable, ends);
	g.latest = latest;
	g.upper_bound = lc.first_uncleanable;
	for (int gi = 0, from = 0; gi < ngroups; from = ends[gi], gi++) {
		if (tfs__pass_aborted(in)) {
			rc = -ECANCELED;
			goto out;
		}
		st->groups++;
		rc = clean_group(x, &g, l->seg + from, ends[gi] - from, from, st);
		if (rc < 0)
			goto out;
	}
out:
	free(ends);
	tfs__seglist_put(l);
	x->abort = NULL;
	st->elapsed_us = tfs_mono_us() - t0;
	return rc;
}
