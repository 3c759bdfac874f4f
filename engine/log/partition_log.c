/* partition_log.c - appends (group commit), rolls, sync, and the partition's
 * lifecycle. Reads live in plog_read.c, open-time recovery in log_recovery.c.
 *
 * An append, step by step:
 *
 *   caller                      leader (first waiter in the queue)
 *   ------                      ----------------------------------
 *   check size (EFBIG)
 *   a big unit and a leader at
 *     work (or a codec): encode
 *     it as a batch at base
 *     offset 0, hash keys
 *   enqueue, wait  ---------->  take the waiters queued now (byte budget)
 *                               roll if the active segment is full or old
 *                               encode: one batch per max.message.bytes, a unit
 *                                 never split; a pre-encoded unit is placed as
 *                                 it is; offsets assigned here
 *                               one write (+ linked fdatasync if any durable)
 *                               every 8 MiB not made durable: a background
 *                                 fdatasync (segment.h, flushing ahead)
 *                               under pl->lock: index entries, committed size,
 *                                 end offset
 *                               hand leadership on: the next leader starts
 *                               key directory, shard by shard, each after the
 *                                 group before (ticket order), under the
 *                                 shard's lock (plog_keyphase.c)
 *   woken with result  <------  complete the group
 *
 * The key directory is the costliest step for a batch of small records (a cache
 * miss or two a key), so it runs beside the next group's encoding and write
 * instead of before them, under locks of its own (pl->kd_lock[]), not pl->lock,
 * so that the next leader's publishing does not wait for it, and a shard at a
 * time, so that two groups update two shards on two cores. It still precedes
 * every acknowledgement of its group, and groups reach each shard in the order
 * they were written, so a key's changes arrive in offset order. An
 * exclusive request (a roll, the cleaner's swap, retention) waits until every
 * group before it is in the directory (tfs__keydir_drain).
 *
 * On a write error the tail is truncated back to the committed size, so nothing
 * of the failed group is ever visible, and every waiter of the group gets the
 * error.
 *
 * Why appenders encode: with two writers, the one waiting would otherwise sit
 * idle while the leader encodes for both; a batch's CRC starts after its base
 * offset (batch_codec.h), so a batch encoded before its offsets are known is
 * placed by writing eight bytes. Records keep the appender's clock, which Kafka's
 * CreateTime allows; under LogAppendTime the leader encodes. With zstd the
 * appender compresses too, on an encoder (builder and zstd context) the
 * partition lends it (TFS__PLOG_ENCODERS), and does so even when no leader is at
 * work, before it queues: a leader that compressed would hold the queue for it,
 * and two writers would take turns on one core instead of compressing on two. A
 * unit encoded under a compression.type or compression.zstd.level that has
 * changed since is re-encoded by the leader.
 *
 * A producer's batch (tfs_plog_append_batch) takes the same road: its appender
 * checks and decodes it (plog_produce.c), and the leader places it as it is,
 * whatever the config says by then, stamping it first under LogAppendTime.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/log/plog_internal.h"
#include "io/log.h"

#define GROUP_BUDGET_BYTES (8u << 20)   /* most bytes one leader commits at once */
/* A background fdatasync of the active segment starts each time this much more was
 * written (segment.h, flushing ahead): large enough that the fsyncs cost little
 * next to the bytes, small enough that a roll or a sync waits for ~20 ms of disk
 * at most instead of a whole segment's worth. */
#define FLUSH_AHEAD_BYTES (8 << 20)
/* An appender encodes its own unit as a batch while a leader works (submit) from
 * this size on: a 61-byte header costs at most 1.5% of it. */
#define PREENCODE_MIN_BYTES 4096
/* Pre-encoded units one group takes: each is an iovec of the group's one write,
 * which holds at most IOV_MAX (1024). */
#define GROUP_MAX_PREENCODED 256
#define DIR_MODE 0755
/* Buffers an encoder keeps after a producer's batch (encoder_trim). */
#define ENCODER_KEEP_BYTES (8u << 20)

/* ---- segment lists ---- */

struct tfs_seglist *tfs__seglist_alloc(int count)
{
	struct tfs_seglist *l = calloc(1, sizeof(*l) + sizeof(l->seg[0]) * (size_t)(count + 1));

	if (!l)
		return NULL;
	atomic_init(&l->refs, 1);
	l->count = count;
	return l;
}

struct tfs_seglist *tfs__seglist_get(struct tfs_plog *pl)
{
	struct tfs_seglist *l;

	pthread_rwlock_rdlock(&pl->lock);
	l = pl->segs;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	pthread_rwlock_unlock(&pl->lock);
	return l;
}

void tfs__seglist_put(struct tfs_seglist *l)
{
	if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (int i = 0; i < l->count; i++)
		tfs_segment_unref(l->seg[i]);
	free(l);
}

int tfs__seglist_find(const struct tfs_seglist *l, tfs_offset_t offset)
{
	int lo = 0, hi = l->count - 1, found = -1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		if (l->seg[mid]->base_offset <= offset) {
			found = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

static struct tfs_segment *active_segment(struct tfs_plog *pl)
{
	return pl->segs->seg[pl->segs->count - 1];
}

/* ---- the directory ---- */

int tfs__plog_dir_open(struct tfs_plog *pl)
{
	int fd = open(pl->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		fd = -errno;
		tfs_log_error("plog", "cannot open %s: %s", pl->path, tfs_strerror(fd));
	}
	return fd;
}

/* ---- open / close ---- */

int tfs_plog_open(const struct tfs_plog_env *env, const char *path, bool create,
                  struct tfs_plog **out)
{
	struct tfs_plog *pl = NULL;
	int rc;

	*out = NULL;
	if (create && !env->read_only) {
		rc = tfs_io_mkdirat(env->io, AT_FDCWD, path, DIR_MODE);
		if (rc < 0 && rc != -EEXIST) {
			tfs_log_error("plog", "cannot create %s: %s", path, tfs_strerror(rc));
			return rc;
		}
	}
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return -ENOMEM;
	pl->dirfd = -1;
	pl->env = *env;
	pl->cfg = *env->config;
	pl->path = strdup(path);
	pl->kd = tfs_keydir_create();
	if (!pl->path || !pl->kd || tfs_pstate_create(&pl->pstate) < 0) {
		rc = -ENOMEM;
		goto fail;
	}
	pthread_rwlock_init(&pl->lock, NULL);
	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		pthread_rwlock_init(&pl->kd_lock[s], NULL);
	pthread_mutex_init(&pl->q_lock, NULL);
	pthread_cond_init(&pl->kd_cond, NULL);
	tfs_batch_builder_init(&pl->builder);
	atomic_init(&pl->unsynced_since_ms, 0);
	atomic_init(&pl->q_seq, 0);
	atomic_init(&pl->q_spinning, false);
	pl->dirfd = tfs__plog_dir_open(pl);
	if (pl->dirfd < 0) {
		rc = pl->dirfd;
		goto fail_locks;
	}
	rc = tfs__pstate_load(pl, pl->dirfd);
	if (rc == 0)
		rc = tfs__plog_recover(pl);
	if (rc < 0)
		goto fail_locks;
	tfs__pstate_recovered(pl, pl->dirfd);
	close(pl->dirfd);          /* held only while recovery runs (plog_internal.h) */
	pl->dirfd = -1;
	/* a transaction left open has lost its writer; a failure leaves it open
	 * (logged), its records unseen, for the next open to try again */
	(void)tfs__plog_abort_open_txns(pl);
	*out = pl;
	return 0;
fail_locks:
	pthread_rwlock_destroy(&pl->lock);
	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		pthread_rwlock_destroy(&pl->kd_lock[s]);
	pthread_mutex_destroy(&pl->q_lock);
	pthread_cond_destroy(&pl->kd_cond);
	tfs_batch_builder_release(&pl->builder);
fail:
	if (pl) {
		tfs__seglist_put(pl->segs);
		if (pl->dirfd >= 0)
			close(pl->dirfd);
		tfs_keydir_destroy(pl->kd);
		free(pl->uncleanable_reason);   /* recovery may have set it */
		tfs_pstate_destroy(pl->pstate);
		free(pl->path);
		free(pl);
	}
	return rc;
}

void tfs_plog_close(struct tfs_plog *pl)
{
	if (!pl)
		return;
	if (pl->segs) {
		struct tfs_segment *s = active_segment(pl);
		int rc = tfs_segment_flush_wait(s);   /* logged where it failed */
		/* an active segment nothing was appended to since the open is as recovery
		 * found it: at 100,000 partitions, rewriting every one's indexes would make
		 * an unmount cost four fsyncs per idle partition. Its producer state is
		 * then its newest snapshot's, unless recovery replayed batches past it:
		 * a snapshot now spares the next open that replay. */
		if (!pl->env.read_only && pl->failed == 0 && rc == 0 &&
		    (pl->appended || pl->pstate_replayed)) {
			/* a deleted topic's partition closes after its directory is gone:
			 * nothing to keep, nothing to report */
			int dirfd = open(pl->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dirfd < 0 && errno != ENOENT)
				tfs_log_error("plog", "cannot open %s: %s", pl->path, strerror(errno));
			if (dirfd >= 0) {
				/* Kafka's close: the active segment's time index gets its
				 * final entry too */
				if (!pl->appended || (tfs_segment_timeindex_final(s) == 0 &&
				                      tfs_segment_write_indexes(s, dirfd, true) == 0))
					(void)tfs__pstate_snapshot(pl, dirfd);   /* logged where it failed */
				close(dirfd);
			}
		}
	}
	tfs__seglist_put(pl->segs);
	tfs_keydir_destroy(pl->kd);
	tfs_tombs_clear(&pl->tombs);
	tfs_pstate_destroy(pl->pstate);
	tfs_batch_builder_release(&pl->builder);
	for (int i = 0; i < pl->nidle_enc; i++)   /* all idle: no append is in flight */
		tfs__encoder_free(pl->idle_enc[i]);
	free(pl->wbuf);
	for (size_t i = 0; i < sizeof(pl->kops_idle) / sizeof(pl->kops_idle[0]); i++)
		free(pl->kops_idle[i]);
	free(pl->uncleanable_reason);
	pthread_rwlock_destroy(&pl->lock);
	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		pthread_rwlock_destroy(&pl->kd_lock[s]);
	pthread_mutex_destroy(&pl->q_lock);
	pthread_cond_destroy(&pl->kd_cond);
	free(pl->path);
	free(pl);
}

/* cfg is read by the leader without a lock, by appenders under q_lock, and by
 * the cleaner under pl->lock: so it changes as an exclusive request (no leader at
 * work) holding both. */
static int set_config_exclusive(struct tfs_plog *pl, void *arg)
{
	pthread_mutex_lock(&pl->q_lock);
	pthread_rwlock_wrlock(&pl->lock);
	pl->cfg = *(const struct tfs_topic_config *)arg;
	pthread_rwlock_unlock(&pl->lock);
	pthread_mutex_unlock(&pl->q_lock);
	return 0;
}

void tfs_plog_set_config(struct tfs_plog *pl, const struct tfs_topic_config *config)
{
	(void)tfs__plog_run_exclusive(pl, set_config_exclusive, (void *)config);
}

const char *tfs_plog_path(const struct tfs_plog *pl)
{
	return pl->path;
}

/* ---- appends ---- */

/* Rolls when the active segment cannot take the incoming bytes (the group's
 * encoded batches; into an empty segment they go whatever their size), is older than
 * segment.ms, or its index is full (Kafka's LogSegment.shouldRoll). Age is the
 * incoming records' newest timestamp (incoming_ts) less the first batch's, as in
 * Kafka: a producer's old CreateTime timestamps do not roll every batch. Leader
 * only. */
static bool should_roll(struct tfs_plog *pl, size_t incoming, tfs_offset_t last_offset,
                        int64_t incoming_ts)
{
	struct tfs_segment *s = active_segment(pl);
	int64_t size = tfs_segment_size(s);
	int64_t seg_ms = pl->cfg.segment_ms;

	if (size == 0)
		return false;
	if ((pl->cfg.cleanup_policy & TFS_POLICY_COMPACT) && pl->cfg.max_compaction_lag_ms > 0 &&
	    pl->cfg.max_compaction_lag_ms < seg_ms)
		seg_ms = pl->cfg.max_compaction_lag_ms;
	if (size > pl->cfg.segment_bytes - (int64_t)incoming)
		return true;
	/* timeWaitedForRoll: from the first batch's timestamp when it has one (0 is a
	 * timestamp), else from the segment's creation */
	if (s->first_batch_timestamp >= 0) {
		/* a client's timestamps may be anything: a difference past int64 is
		 * a wait past any segment.ms, or none, by its sign */
		int64_t waited;
		if (__builtin_sub_overflow(incoming_ts, s->first_batch_timestamp, &waited)
		        ? incoming_ts > s->first_batch_timestamp : waited > seg_ms)
			return true;
	} else if (tfs_now_ms() - s->created_ms > seg_ms) {
		return true;
	}
	if (tfs_segment_index_full(s, pl->cfg.segment_index_bytes))
		return true;
	return last_offset - s->base_offset > INT32_MAX;
}

/* Rolls as the leader (plog_internal.h). What must be durable before the next
 * segment exists (invariant (5)) is the old .log; its indexes and the producer
 * snapshot at its end need only be whole once they carry their names. So every
 * file is written first, and their fsyncs, the .log's included, are waited for
 * together (tfs_io_fsync_all) while a background flush of the .log may still be
 * running; then the renames, the next segment's creation, and one directory
 * fsync for all of them (docs/engine.md, "Rolls"). */
int tfs__plog_roll_locked(struct tfs_plog *pl)
{
	struct tfs_segment *old = active_segment(pl), *fresh = NULL;
	struct tfs_seglist *nl;
	struct tfs_io_fsync_req req[4];
	int rc, dirfd = -1, idx[2] = { -1, -1 }, snap = -1, logfd = -1, n = 0;
	tfs_offset_t snap_at = -1;

	old->sealed = true;
	pthread_rwlock_wrlock(&pl->lock);     /* time lookups read the array */
	rc = tfs_segment_timeindex_final(old);
	pthread_rwlock_unlock(&pl->lock);
	if (rc < 0)
		goto fail;
	dirfd = tfs__plog_dir_open(pl);
	if (dirfd < 0) {
		rc = dirfd;
		goto fail;
	}
	rc = tfs_segment_stage_indexes(old, dirfd, idx);
	if (rc < 0)
		goto fail;
	/* the state of every record before the new segment; a failure only costs
	 * a longer replay at the next open */
	snap = tfs__pstate_stage(pl, dirfd, &snap_at);
	logfd = tfs_segment_fd_get(old);
	if (logfd < 0) {
		rc = logfd;
		goto fail;
	}
	/* this fdatasync starts after the segment's last write: it alone makes all
	 * of the .log durable, whatever a background flush still in flight does */
	req[n++] = (struct tfs_io_fsync_req){ .fd = logfd, .datasync = true };
	req[n++] = (struct tfs_io_fsync_req){ .fd = idx[0] };
	req[n++] = (struct tfs_io_fsync_req){ .fd = idx[1] };
	if (snap >= 0)
		req[n++] = (struct tfs_io_fsync_req){ .fd = snap };
	rc = tfs_io_fsync_all(pl->env.io, req, n);
	tfs_segment_fd_put(old);
	if (req[0].result < 0) {
		/* the kernel may have dropped the dirty pages with the error, and a
		 * later fdatasync would then succeed over a hole: no later roll may
		 * trust the .log, so nothing more is appended until a remount */
		pl->failed = req[0].result;
		tfs_log_error("plog", "cannot fsync %s/%020" PRId64 ".log: %s; partition is "
		              "read-only until remount", pl->path, old->base_offset,
		              tfs_strerror(req[0].result));
	}
	if (rc < 0 && req[0].result == 0 && req[1].result == 0 && req[2].result == 0)
		rc = 0;          /* only the snapshot's failed: it is dropped below */
	if (rc < 0)
		goto fail;
	/* invariant (5): the old segment is whole on disk before the next exists; a
	 * failed background flush means it may not be (its error can have dropped
	 * dirty pages that the fdatasync above then did not see) */
	rc = tfs_segment_flush_wait(old);
	if (rc < 0)
		goto fail;
	rc = tfs_segment_commit_indexes(old, dirfd, idx);
	if (rc < 0)
		goto fail;
	nl = tfs__seglist_alloc(pl->segs->count + 1);
	if (!nl) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = tfs_segment_create(pl->env.io, pl->env.fdcache, dirfd, pl->path, pl->end_offset,
	                        pl->cfg.index_interval_bytes, false, &fresh);
	if (rc < 0) {
		tfs__seglist_put(nl);
		goto fail;
	}
	if (snap >= 0) {
		close(snap);
		snap = -1;
		if (req[n - 1].result < 0 || tfs__pstate_commit(pl, dirfd, snap_at) < 0)
			tfs__pstate_unstage(dirfd, snap_at);   /* logged where it failed */
	}
	/* the renames and the creation, durable at once. Past the creation a
	 * failure cannot go back: the next segment's file may be on disk, and the
	 * old segment taking offsets past its base would hide them from the next
	 * open, so the partition takes nothing more until a remount */
	rc = tfs_io_fsync_dir(pl->env.io, dirfd);
	if (rc < 0) {
		tfs_log_error("plog", "cannot fsync %s: %s; partition is read-only until remount",
		              pl->path, tfs_strerror(rc));
		pl->failed = rc;
		tfs__seglist_put(nl);
		goto fail;
	}
	for (int i = 0; i < pl->segs->count; i++)
		nl->seg[i] = tfs_segment_ref(pl->segs->seg[i]);
	nl->seg[pl->segs->count] = fresh;
	pthread_rwlock_wrlock(&pl->lock);
	{
		struct tfs_seglist *prev = pl->segs;
		pl->segs = nl;
		pthread_rwlock_unlock(&pl->lock);
		tfs__seglist_put(prev);
	}
	/* everything up to the roll was fsynced with the old segment */
	atomic_store(&pl->unsynced_since_ms, 0);
	tfs__pstate_prune(pl, dirfd);
	close(dirfd);
	tfs_log_info("plog", "rolled %s at offset %" PRId64, pl->path, pl->end_offset);
	return 0;
fail:
	old->sealed = false;
	if (dirfd >= 0) {
		tfs_segment_unstage_indexes(old, dirfd, idx);
		if (snap >= 0) {
			close(snap);
			tfs__pstate_unstage(dirfd, snap_at);
		}
		close(dirfd);
	}
	tfs_segment_unref(fresh);
	tfs_log_error("plog", "cannot roll %s: %s", pl->path, tfs_strerror(rc));
	return rc;
}

static int wbuf_reserve(struct tfs_plog *pl, size_t need)
{
	if (need <= pl->wcap)
		return 0;
	size_t cap = pl->wcap ? pl->wcap : 65536;
	while (cap < need)
		cap *= 2;
	uint8_t *p = realloc(pl->wbuf, cap);
	if (!p)
		return -ENOMEM;
	pl->wbuf = p;
	pl->wcap = cap;
	return 0;
}

/* Where each encoded batch of the group landed, for the index. */
struct batch_span {
	size_t at, size;
	tfs_offset_t base, last;
	int64_t max_ts;
};

/* A run of the group's bytes: of wbuf (p NULL: wbuf[at, at + len)), or of a buffer
 * that outlives the write (a pre-encoded unit, the builder's last batch). */
struct piece {
	const uint8_t *p;
	size_t at, len;
};

/* The group's bytes in write order, and its batches. */
struct group_out {
	struct batch_span *spans;
	int nspans;
	struct piece *pieces;
	int npieces;
	size_t wlen;                  /* bytes copied into wbuf */
	size_t total;                 /* bytes of the group */
};

static void batch_params(struct tfs_plog *pl, tfs_offset_t base, struct tfs_batch_params *p)
{
	memset(p, 0, sizeof(*p));
	p->base_offset = base;
	p->attributes = (int16_t)(pl->cfg.compression & TFS_ATTR_CODEC_MASK);
	if (pl->cfg.timestamp_type == TFS_TS_LOG_APPEND_TIME)
		p->attributes |= TFS_ATTR_LOG_APPEND_TIME;
	p->zstd_level = pl->cfg.zstd_level;
	p->leader_epoch = -1;
	p->producer_id = -1;
	p->producer_epoch = -1;
	p->base_sequence = -1;
}

int tfs__plog_add_unit(struct tfs_batch_builder *b, const struct tfs_append_rec *recs,
                       size_t count, int64_t ts)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < count; i++) {
		const struct tfs_append_rec *r = &recs[i];
		struct tfs_record_in in = {
			.key = r->key, .key_null = r->key_null,
			.value = r->value, .value_null = r->value_null,
			.timestamp = ts, .headers = r->headers, .header_count = r->header_count,
		};
		rc = tfs_batch_builder_add(b, &in);
	}
	return rc;
}

/* Adds a batch of len bytes at p to the group; copied into wbuf unless keep says
 * p stays valid until the write. */
static int out_add(struct tfs_plog *pl, struct group_out *g, const uint8_t *p, size_t len,
                   bool keep, tfs_offset_t base, tfs_offset_t last, int64_t ts)
{
	struct piece *prev = g->npieces ? &g->pieces[g->npieces - 1] : NULL;
	int rc;

	g->spans[g->nspans++] = (struct batch_span){ g->total, len, base, last, ts };
	g->total += len;
	if (keep) {
		g->pieces[g->npieces++] = (struct piece){ p, 0, len };
		return 0;
	}
	rc = wbuf_reserve(pl, g->wlen + len);
	if (rc < 0)
		return rc;
	memcpy(pl->wbuf + g->wlen, p, len);
	if (prev && !prev->p)
		prev->len += len;       /* wbuf pieces are contiguous */
	else
		g->pieces[g->npieces++] = (struct piece){ NULL, g->wlen, len };
	g->wlen += len;
	return 0;
}

/* Finishes the builder's batch. Every batch but a group's last is copied into
 * wbuf (the builder is reused for the next one); the last is left in the builder
 * and written from there, saving a copy of the common one-batch group. */
static int finish_batch(struct tfs_plog *pl, struct group_out *g, tfs_offset_t base,
                        tfs_offset_t last, int64_t ts, bool group_last)
{
	const uint8_t *out;
	size_t len;
	int rc = tfs_batch_builder_finish(&pl->builder, -1, &out, &len);

	if (rc < 0)
		return rc;
	return out_add(pl, g, out, len, group_last, base, last, ts);
}

/* Whether a unit its appender encoded matches what the leader would write now,
 * p being the group's batch parameters: the same codec and flags, and for zstd
 * the same level. */
static bool preencoded_current(const struct tfs__preencoded *pre, const struct tfs_batch_params *p)
{
	if (pre->attributes != p->attributes)
		return false;
	return (p->attributes & TFS_ATTR_CODEC_MASK) != TFS_CODEC_ZSTD ||
	       pre->zstd_level == p->zstd_level;
}

/* A producer-state change made for a unit of the group being written. */
struct producer_change {
	const struct tfs_pstate_in *in;
	tfs_offset_t first;              /* the unit's first offset */
	struct tfs_pstate_undo undo;     /* the producer's entry before it */
};

/* An end-transaction marker of the engine's own (plog_txn.c) at offset next:
 * its producer's epoch must be current (else TFS_EFENCED, for its waiter
 * alone); it ends the open transaction, and an ABORT notes the transaction's
 * .txnindex entry in w->pre->aborted. Returns 1 if recorded, 0 if refused, or
 * -ENOMEM. */
static int marker_check(struct tfs_plog *pl, struct tfs__waiter *w, tfs_offset_t next,
                        struct producer_change *c)
{
	struct tfs_pstate_entry e;
	tfs_offset_t txn_first = -1, unstable;
	int rc;

	if (tfs_pstate_get(pl->pstate, w->pre->pin.producer_id, &e) == 0) {
		if (e.epoch > w->pre->pin.epoch) {
			tfs_log_warn("plog", "%s: refused the marker of producer %" PRId64 " epoch %d: "
			             "fenced by epoch %d", pl->path, w->pre->pin.producer_id,
			             w->pre->pin.epoch, e.epoch);
			w->refused = TFS_EFENCED;
			w->skip = true;
			return 0;
		}
		txn_first = e.txn_first_offset;
	}
	*c = (struct producer_change){ .in = &w->pre->pin, .first = next };
	rc = tfs_pstate_apply(pl->pstate, c->in, next, &c->undo);
	if (rc < 0)
		return rc;
	unstable = tfs_pstate_first_unstable(pl->pstate);
	w->pre->aborted = (struct tfs_aborted_txn){
		.producer_id = w->pre->pin.producer_id,
		.first_offset = txn_first >= 0 ? txn_first : next,
		.last_offset = next,
		.last_stable_offset = unstable >= 0 ? unstable : next + 1,
	};
	return 1;
}

/* A producer's batch meets its producer's state (producer_state.h) before it is
 * given offsets: a duplicate is answered with the original offsets, a refusal
 * goes to its waiter alone, and either way nothing of it is written. An accepted
 * one is recorded at offset next, what it changed kept in *c for undo_producers
 * should the write fail. Returns 1 if recorded, 0 if skipped, or -ENOMEM. */
static int producer_check(struct tfs_plog *pl, struct tfs__waiter *w, tfs_offset_t next,
                          struct producer_change *c)
{
	struct tfs_pstate_batch dup;
	const char *why = NULL;
	int rc;

	if (w->pre->marker)
		return marker_check(pl, w, next, c);
	rc = tfs_pstate_check(pl->pstate, &w->pre->pin, &dup, &why);

	if (rc == TFS_PSTATE_DUPLICATE) {
		tfs_log_info("plog", "%s: producer %" PRId64 " resent sequence %" PRId32
		             " (offsets %" PRId64 "-%" PRId64 "): appended once", pl->path,
		             w->pre->pin.producer_id, dup.first_seq, dup.first_offset,
		             dup.last_offset);
		w->pre->duplicate = true;
		w->first = dup.first_offset;
		w->timestamp = dup.timestamp;
		w->skip = true;
		return 0;
	}
	if (rc < 0) {
		tfs_log_warn("plog", "%s: refused producer %" PRId64 " epoch %d sequence %" PRId32
		             ": %s (%s)", pl->path, w->pre->pin.producer_id, w->pre->pin.epoch,
		             w->pre->pin.base_seq, why ? why : "?", tfs_strerror(rc));
		w->refused = rc;
		w->skip = true;
		return 0;
	}
	*c = (struct producer_change){ .in = &w->pre->pin, .first = next };
	rc = tfs_pstate_apply(pl->pstate, c->in, next, &c->undo);
	return rc < 0 ? rc : 1;
}

/* Takes back the group's n producer-state changes, newest first. */
static void undo_producers(struct tfs_plog *pl, const struct producer_change *c, size_t n)
{
	while (n-- > 0)
		tfs_pstate_undo(pl->pstate, c[n].in->producer_id, &c[n].undo);
}

/* Makes the group's n changes again, after undo_producers. 0, or -ENOMEM with
 * none of them made. */
static int redo_producers(struct tfs_plog *pl, struct producer_change *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = tfs_pstate_apply(pl->pstate, c[i].in, c[i].first, &c[i].undo);
		if (rc < 0) {
			undo_producers(pl, c, i);
			return rc;
		}
	}
	return 0;
}

/* Encodes, writes and publishes the group's n waiters from head: the batches,
 * their index entries, the committed size and the end offset, but not the key
 * directory (tfs__keydir_phase, plog_keyphase.c, after the queue is handed on). Leader only; called
 * without q_lock, so it walks exactly n links: the last member's next may be set
 * by a new arrival at any moment. *marks says whether a transaction was open
 * while the group was written, for tfs__keydir_phase. Returns 0 or the error every
 * waiter of the group gets. */
static int commit_group(struct tfs_plog *pl, struct tfs__waiter *head, size_t n,
                        struct tfs__txn_marks *marks)
{
	struct tfs__waiter *w;
	size_t incoming = 0, batch_bytes = 0;
	size_t nunits = 0;
	bool durable = false;
	int64_t now = tfs_now_ms();
	tfs_offset_t next = pl->end_offset, batch_base = next;
	struct group_out g = { 0 };
	int rc = 0;
	struct tfs_segment *seg;
	tfs_pos_t pos;
	int fd;
	bool in_batch = false;
	struct tfs_batch_params params;
	size_t k;
	struct iovec *iov = NULL;
	bool has_pid = false;
	int64_t incoming_ts = INT64_MIN;     /* the newest timestamp of the group */
	struct producer_change *chg = NULL;  /* by producer unit recorded, in order */
	size_t nchg = 0;
	bool txnindex_changed = false;

	marks->floor = tfs_pstate_first_unstable(pl->pstate);
	marks->during = marks->after = marks->floor >= 0;
	if (marks->floor < 0)
		marks->floor = next;
	for (w = head, k = 0; k < n; k++, w = k < n ? w->next : NULL) {
		int64_t ts = w->pre && w->pre->producer &&
		             pl->cfg.timestamp_type != TFS_TS_LOG_APPEND_TIME ? w->pre->timestamp : now;
		incoming += w->bytes;
		durable |= w->durable;
		nunits++;
		if (w->count > 0 && ts > incoming_ts)
			incoming_ts = ts;
	}
	if (incoming == 0)
		goto sync_only;
	if (pl->failed < 0) {
		rc = pl->failed;
		goto out;
	}
	/* a unit adds at most a batch and the wbuf run before it; then the tail */
	g.spans = malloc(sizeof(*g.spans) * nunits);
	g.pieces = malloc(sizeof(*g.pieces) * (2 * nunits + 1));
	iov = malloc(sizeof(*iov) * (2 * nunits + 1));
	if (!g.spans || !g.pieces || !iov) {
		rc = -ENOMEM;
		goto out;
	}
	batch_params(pl, 0, &params);
	/* One batch per max.message.bytes; a unit never spans two batches. A unit its
	 * appender encoded is placed as it is, unless the config changed since. */
	for (w = head, k = 0; k < n; k++, w = k < n ? w->next : NULL) {
		if (w->count == 0)
			continue;
		if (in_batch && (w->pre || batch_bytes + w->bytes > (size_t)pl->cfg.max_message_bytes)) {
			rc = finish_batch(pl, &g, batch_base, next - 1, now, false);
			if (rc < 0)
				goto out;
			in_batch = false;
		}
		if (w->pre && !w->pre->producer && !preencoded_current(w->pre, &params))
			w->pre = NULL;        /* its appender still gives it back */
		if (w->pre && w->pre->has_producer_id) {
			if (!chg && !(chg = malloc(sizeof(*chg) * nunits))) {
				rc = -ENOMEM;
				goto out;
			}
			rc = producer_check(pl, w, next, &chg[nchg]);
			if (rc < 0)
				goto out;
			if (rc == 0)
				continue;
			nchg++;
			rc = 0;
		}
		if (w->pre) {
			if (w->pre->producer && pl->cfg.timestamp_type == TFS_TS_LOG_APPEND_TIME) {
				/* stamped here, so that timestamps follow offsets */
				tfs_batch_set_max_timestamp(w->pre->batch, w->pre->len, true, now);
				w->pre->timestamp = now;
				w->pre->timestamps = NULL;
			}
			tfs_batch_set_base_offset(w->pre->batch, next);
			w->first = next;
			w->timestamp = w->pre->timestamp;
			has_pid |= w->pre->has_producer_id;
			next += (tfs_offset_t)w->count;
			rc = out_add(pl, &g, w->pre->batch, w->pre->len, true, w->first, next - 1,
			             w->timestamp);
			if (rc < 0)
				goto out;
			continue;
		}
		if (!in_batch) {
			batch_base = next;
			batch_params(pl, batch_base, &params);
			tfs_batch_builder_reset(&pl->builder, &params);
			batch_bytes = TFS_BATCH_HEADER_BYTES;
			in_batch = true;
		}
		w->first = next;
		w->timestamp = now;
		rc = tfs__plog_add_unit(&pl->builder, w->recs, w->count, now);
		if (rc < 0)
			goto out;
		next += (tfs_offset_t)w->count;
		batch_bytes += w->bytes;
	}
	if (in_batch) {
		rc = finish_batch(pl, &g, batch_base, next - 1, now, true);
		if (rc < 0)
			goto out;
	}
	if (g.total == 0)
		goto sync_only;       /* only duplicates and refusals */
	/* Kafka's UnifiedLog.maybeRoll, with the exact bytes about to be written (the
	 * group is one append, like the batches of one produce request): encoding
	 * depends on offsets only, and a roll keeps end_offset. The roll's producer
	 * snapshot is of every record before the new segment, so not of this group's
	 * batches, which go into it: their state changes are taken back for it and
	 * made again after. */
	if (should_roll(pl, g.total, next, incoming_ts)) {
		undo_producers(pl, chg, nchg);
		rc = tfs__plog_roll_locked(pl);
		if (rc < 0) {
			nchg = 0;
			goto out;
		}
		rc = redo_producers(pl, chg, nchg);
		if (rc < 0) {
			nchg = 0;
			goto out;
		}
	}
	for (int i = 0; i < g.npieces; i++)   /* wbuf has stopped moving */
		iov[i] = (struct iovec){ (void *)(g.pieces[i].p ? g.pieces[i].p : pl->wbuf + g.pieces[i].at),
		                         g.pieces[i].len };

	seg = active_segment(pl);
	pos = tfs_segment_size(seg);
	if (durable) {
		/* the fdatasync below vouches for every byte before the group too */
		rc = tfs_segment_flush_wait(seg);
		if (rc < 0)
			goto out;
	}
	/* Reopened if the cache closed it: an fdatasync through the new fd still
	 * covers every dirty page of the file, and a writeback error nobody has seen
	 * yet is reported to it too (Linux samples the error state unseen-first). */
	fd = tfs_segment_fd_get(seg);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	rc = tfs_io_writev(pl->env.io, fd, iov, g.npieces, (uint64_t)pos, durable);
	if (rc < 0) {
		/* Cut whatever part of the group reached the file: nothing of it may be
		 * seen, by readers now or by recovery later. */
		int trc = tfs_io_ftruncate(pl->env.io, fd, (uint64_t)pos);
		tfs_segment_fd_put(seg);
		tfs_log_error("plog", "cannot append %zu bytes to %s at %" PRId64 ": %s", g.total,
		              pl->path, pos, tfs_strerror(rc));
		if (trc < 0) {
			tfs_log_error("plog", "cannot cut the failed append from %s: %s; "
			              "partition is read-only until remount", pl->path, tfs_strerror(trc));
			pl->failed = rc;
		}
		goto out;
	}
	tfs_segment_fd_put(seg);
	pl->appended = true;
	if (durable)
		tfs_segment_note_flushed(seg, pos + (tfs_pos_t)g.total);
	else
		tfs_segment_flush_ahead(seg, FLUSH_AHEAD_BYTES);

	pthread_rwlock_wrlock(&pl->lock);
	for (int i = 0; i < g.nspans; i++) {
		/* -ENOMEM here only costs an index entry: lookups scan a little further */
		tfs_segment_note_batch(seg, pos + (tfs_pos_t)g.spans[i].at, g.spans[i].size,
		                       g.spans[i].base, g.spans[i].last, g.spans[i].max_ts);
	}
	/* Invariant (3): publish the size before the key directory names the records. */
	atomic_store_explicit(&seg->size, pos + (tfs_pos_t)g.total, memory_order_release);
	pl->end_offset = next;
	if (has_pid)
		seg->has_producer_ids = true;   /* the cleaner reads producer state here */
	/* An ABORT's entry goes to the segment that holds it (its .txnindex, written
	 * below); the key directory follows in the group's second phase
	 * (tfs__keydir_phase), a COMMIT's keys with their marker. */
	for (w = head, k = 0; k < n; k++, w = k < n ? w->next : NULL) {
		if (w->skip || !w->pre || !w->pre->marker || w->pre->commit)
			continue;
		if (tfs_segment_add_aborted(seg, &w->pre->aborted) < 0) {
			tfs_log_error("plog", "out of memory noting an aborted transaction of %s; "
			              "the next open rebuilds its .txnindex", pl->path);
		} else {
			txnindex_changed = true;
		}
	}
	pthread_rwlock_unlock(&pl->lock);
	if (txnindex_changed) {
		/* derived data: a failure (logged) is mended by the next open's scan */
		int dirfd = tfs__plog_dir_open(pl);
		if (dirfd >= 0) {
			(void)tfs_segment_write_txnindex(seg, dirfd, "");
			close(dirfd);
		}
	}
	marks->after = tfs_pstate_first_unstable(pl->pstate) >= 0;
	marks->during |= marks->after;
	if (pl->append_hook)
		pl->append_hook(pl->append_hook_arg, pl);       /* long polls wake */
	if (!durable) {
		int_fast64_t zero = 0;
		atomic_compare_exchange_strong(&pl->unsynced_since_ms, &zero, now);
	} else {
		atomic_store(&pl->unsynced_since_ms, 0);
	}
	goto out;

sync_only:
	if (durable && atomic_load(&pl->unsynced_since_ms) != 0) {
		struct tfs_segment *active = active_segment(pl);
		tfs_pos_t size = tfs_segment_size(active);
		atomic_store(&pl->unsynced_since_ms, 0);
		rc = tfs_segment_flush_wait(active);
		if (rc == 0) {
			fd = tfs_segment_fd_get(active);
			rc = fd < 0 ? fd : tfs_io_fsync(pl->env.io, fd, true);
			if (fd >= 0)
				tfs_segment_fd_put(active);
		}
		if (rc == 0)
			tfs_segment_note_flushed(active, size);
		if (rc < 0) {
			int_fast64_t zero = 0;
			atomic_compare_exchange_strong(&pl->unsynced_since_ms, &zero, now);
			tfs_log_error("plog", "cannot fsync %s: %s", pl->path, tfs_strerror(rc));
		}
	}
out:
	if (rc < 0)
		undo_producers(pl, chg, nchg);
	free(chg);
	free(g.spans);
	free(g.pieces);
	free(iov);
	return rc;
}

void tfs_plog_set_internal(struct tfs_plog *pl)
{
	pl->internal = true;
}

void tfs_plog_set_append_hook(struct tfs_plog *pl, void (*fn)(void *arg, struct tfs_plog *pl),
                              void *arg)
{
	pl->append_hook = fn;
	pl->append_hook_arg = arg;
}

/* Lends an idle encoder, making one if fewer than TFS__PLOG_ENCODERS exist;
 * NULL when all are lent or memory is short (the leader encodes). Under q_lock. */
static struct tfs__encoder *encoder_take(struct tfs_plog *pl)
{
	struct tfs__encoder *e;

	if (pl->nidle_enc > 0)
		return pl->idle_enc[--pl->nidle_enc];
	if (pl->made_enc == TFS__PLOG_ENCODERS)
		return NULL;
	e = tfs__encoder_new();
	if (e)
		pl->made_enc++;
	return e;
}

/* Takes back an encoder lent by encoder_take. Under q_lock. */
static void encoder_give(struct tfs_plog *pl, struct tfs__encoder *e)
{
	pl->idle_enc[pl->nidle_enc++] = e;
}

/* Encodes a unit as a batch of its own on pre->enc with params (taken under
 * q_lock; base offset 0) and the records' key hashes, for the leader to place
 * (tfs_batch_set_base_offset). Returns 0, -ENOMEM (the leader will encode it), or
 * the error the leader would have hit. */
static int preencode(struct tfs__preencoded *pre, const struct tfs_batch_params *params,
                     const struct tfs_append_rec *recs, size_t count, size_t bytes)
{
	struct tfs__encoder *e = pre->enc;
	const uint8_t *out = NULL;
	int rc = tfs__encoder_reserve(e, count);

	pre->attributes = params->attributes;
	pre->zstd_level = params->zstd_level;
	pre->timestamp = tfs_now_ms();
	pre->hashes = e->hashes;
	tfs_batch_builder_reset(&e->builder, params);
	if (rc == 0)
		rc = tfs_batch_builder_reserve(&e->builder, bytes);
	if (rc == 0)
		rc = tfs__plog_add_unit(&e->builder, recs, count, pre->timestamp);
	for (size_t i = 0; rc == 0 && i < count; i++)
		if (!recs[i].key_null)
			e->hashes[i] = tfs_keydir_hash(recs[i].key);
	if (rc == 0)
		rc = tfs_batch_builder_finish(&e->builder, -1, &out, &pre->len);
	pre->batch = (uint8_t *)out;   /* the builder's buffer, ours until the reset */
	return rc;
}

/* Whether an appender that finds a leader at work encodes its unit itself, on its
 * own core, while it waits: for units big enough to be a batch of their own
 * without wasting space on headers, and not under log-append time (its
 * timestamps must follow offset order, so only the leader can take them). */
static bool preencode_worth(const struct tfs_plog *pl, size_t bytes)
{
	return bytes >= PREENCODE_MIN_BYTES && pl->cfg.timestamp_type != TFS_TS_LOG_APPEND_TIME;
}

/* Runs one append unit through the group-commit queue. given: a unit already
 * encoded and checked (a producer's batch), placed as it is. */
static int submit(struct tfs_plog *pl, const struct tfs_append_rec *recs, size_t count,
                  size_t bytes, bool durable, int (*fn)(struct tfs_plog *, void *), void *fn_arg,
                  struct tfs__preencoded *given, tfs_offset_t *first, int64_t *timestamp)
{
	struct tfs__waiter self = { .recs = recs, .count = count, .durable = durable,
	                            .exclusive = fn, .exclusive_arg = fn_arg };
	struct tfs__waiter *stop, *w, *next;
	struct tfs__preencoded pre = { .enc = NULL };
	size_t budget = 0, n = 0, npre = 0;
	uint64_t ticket = 0;
	struct tfs__kops_buf kops = { NULL, 0 };
	struct tfs__txn_marks marks = { false, false, 0 };
	int rc;

	self.bytes = bytes;
	pthread_cond_init(&self.cond, NULL);
	pthread_mutex_lock(&pl->q_lock);
	/* max.message.bytes bounds a batch; this unit alone must fit in one (the
	 * estimate is the uncompressed size, so zstd never changes the answer). The
	 * config is read under q_lock, which tfs_plog_set_config takes. */
	if (given) {
		self.pre = given;
	} else if (count > 0 && tfs__plog_unit_too_big(pl->cfg.max_message_bytes, recs, count, bytes)) {
		pthread_mutex_unlock(&pl->q_lock);
		self.result = -EFBIG;
		goto release;
	}
	/* A leader is at work: encode while it does (config read under q_lock, which
	 * tfs_plog_set_config takes). An empty queue means leading at once, and then
	 * the leader's own builder does it without a copy - unless the unit is to be
	 * compressed: then it is compressed before it queues, so that no leader holds
	 * the queue for a compression and a second writer compresses meanwhile. */
	if (count > 0 && !fn && !given && (pl->q_head || pl->cfg.compression != TFS_CODEC_NONE) &&
	    preencode_worth(pl, bytes) && (pre.enc = encoder_take(pl)) != NULL) {
		struct tfs_batch_params params;
		batch_params(pl, 0, &params);   /* no log-append time: preencode_worth */
		pthread_mutex_unlock(&pl->q_lock);
		rc = preencode(&pre, &params, recs, count, bytes);
		pthread_mutex_lock(&pl->q_lock);
		if (rc < 0 && rc != -ENOMEM) {
			self.result = rc;
			goto done;
		}
		if (rc == 0)
			self.pre = &pre;
	}
	if (pl->q_tail)
		pl->q_tail->next = &self;
	else
		pl->q_head = &self;
	pl->q_tail = &self;
	while (!self.done && pl->q_head != &self)
		tfs__q_wait(pl, &self.cond);
	if (self.done)
		goto done;

	/* Leader: take everyone queued now, up to the budget (at least ourselves);
	 * an exclusive request (roll, cleaner swap) runs alone. */
	if (self.exclusive) {
		stop = self.next;
		n = 1;
	} else {
		for (stop = &self; stop && !stop->exclusive &&
		     (stop == &self || (budget + stop->bytes <= GROUP_BUDGET_BYTES &&
		                        npre + !!stop->pre <= GROUP_MAX_PREENCODED));
		     stop = stop->next) {
			budget += stop->bytes;
			npre += !!stop->pre;
			n++;
		}
	}
	if (self.exclusive) {
		tfs__keydir_drain(pl);
		pthread_mutex_unlock(&pl->q_lock);
		rc = self.exclusive(pl, self.exclusive_arg);
		pthread_mutex_lock(&pl->q_lock);
	} else {
		pthread_mutex_unlock(&pl->q_lock);
		rc = commit_group(pl, &self, n, &marks);
		pthread_mutex_lock(&pl->q_lock);
		ticket = pl->kd_issued++;
		kops = tfs__kops_take(pl);
	}
	stop = &self;
	for (size_t k = 0; k < n; k++)
		stop = stop->next;      /* re-read under q_lock: arrivals may have linked on */
	/* the next leader starts while this group's keys go into the directory */
	pl->q_head = stop;
	if (!stop) {
		pl->q_tail = NULL;
	} else {
		tfs__q_bump(pl);
		pthread_cond_signal(&stop->cond);
	}
	if (!self.exclusive) {
		pthread_mutex_unlock(&pl->q_lock);
		tfs__keydir_phase(pl, &self, n, rc, &ticket, &kops, &marks);
		pthread_mutex_lock(&pl->q_lock);
		tfs__kops_give(pl, kops);
	}
	/* n links: stop may be a leader at work by now, its next links its own */
	w = &self;
	for (size_t k = 0; k < n; k++, w = next) {
		next = w->next;
		w->result = rc < 0 ? rc : w->refused;
		w->done = true;
		if (w != &self) {
			tfs__q_bump(pl);
			pthread_cond_signal(&w->cond);
		}
	}
done:
	/* the group that wrote the batch is complete: the encoder is free again */
	if (pre.enc)
		encoder_give(pl, pre.enc);
	pthread_mutex_unlock(&pl->q_lock);
release:
	pthread_cond_destroy(&self.cond);
	if (self.result == 0) {
		if (first)
			*first = self.first;
		if (timestamp)
			*timestamp = self.timestamp;
	}
	return self.result;
}

int tfs__plog_submit_encoded(struct tfs_plog *pl, const struct tfs_append_rec *recs,
                             size_t count, size_t bytes, bool durable,
                             struct tfs__preencoded *pre, tfs_offset_t *first,
                             int64_t *timestamp)
{
	return submit(pl, recs, count, bytes, durable, NULL, NULL, pre, first, timestamp);
}

int tfs__plog_refuse_internal(const struct tfs_plog *pl)
{
	tfs_log_warn("plog", "refusing a write to %s: an internal topic, written only by its "
	             "owner", pl->path);
	return -EPERM;
}

int tfs_plog_append(struct tfs_plog *pl, const struct tfs_append_rec *recs, size_t count,
                    bool durable, tfs_offset_t *first, int64_t *timestamp)
{
	if (pl->internal)
		return tfs__plog_refuse_internal(pl);
	return tfs__plog_append_internal(pl, recs, count, durable, first, timestamp);
}

int tfs__plog_append_internal(struct tfs_plog *pl, const struct tfs_append_rec *recs, size_t count,
                              bool durable, tfs_offset_t *first, int64_t *timestamp)
{
	size_t bytes = 0;

	if (pl->env.read_only)
		return TFS_EREADONLY;
	if (count == 0)
		return -EINVAL;
	for (size_t i = 0; i < count; i++)
		bytes += tfs__plog_record_bytes(&recs[i]);
	return submit(pl, recs, count, bytes, durable, NULL, NULL, NULL, first, timestamp);
}

struct onto {
	struct tfs_slice key, suffix;
	bool durable;
	tfs_offset_t first;
	int64_t timestamp;
};

/* tfs_plog_append_onto's read and append, run alone in the queue: no append of
 * this partition (and so no newer value of the key) can come between the two. */
static int append_onto_exclusive(struct tfs_plog *pl, void *arg)
{
	struct onto *a = arg;
	struct tfs_record_copy cur = { 0 };
	struct tfs__waiter w = { 0 };
	struct tfs__txn_marks marks = { false, false, 0 };
	struct tfs_append_rec rec = { .key = a->key };
	uint8_t *joined = NULL;
	size_t base = 0;
	int rc = tfs_plog_read_key(pl, a->key, &cur);

	if (rc == 0)
		base = cur.value_len;
	else if (rc != -ENOENT)
		return rc;
	joined = malloc(base + a->suffix.len + 1);
	if (!joined) {
		rc = -ENOMEM;
		goto out;
	}
	if (base)
		memcpy(joined, cur.value, base);
	if (a->suffix.len)
		memcpy(joined + base, a->suffix.p, a->suffix.len);
	rec.value = tfs_slice_make(joined, base + a->suffix.len);
	w.recs = &rec;
	w.count = 1;
	w.bytes = tfs__plog_record_bytes(&rec);
	w.durable = a->durable;
	/* the config only changes in an exclusive request of its own */
	if (w.bytes + TFS_BATCH_HEADER_BYTES > (size_t)pl->cfg.max_message_bytes)
		rc = -EFBIG;
	else
		rc = commit_group(pl, &w, 1, &marks);
	if (rc == 0) {
		struct tfs__kops_buf b = { NULL, 0 };
		tfs__keydir_phase(pl, &w, 1, rc, NULL, &b, &marks);
		free(b.ops);
	}
	a->first = w.first;
	a->timestamp = w.timestamp;
out:
	free(joined);
	tfs_record_copy_release(&cur);
	return rc;
}

int tfs_plog_append_onto(struct tfs_plog *pl, struct tfs_slice key, struct tfs_slice suffix,
                         bool durable, tfs_offset_t *first, int64_t *timestamp)
{
	struct onto a = { .key = key, .suffix = suffix, .durable = durable };
	int rc;

	if (pl->env.read_only)
		return TFS_EREADONLY;
	if (pl->internal)
		return tfs__plog_refuse_internal(pl);
	rc = tfs__plog_run_exclusive(pl, append_onto_exclusive, &a);
	if (rc == 0) {
		if (first)
			*first = a.first;
		if (timestamp)
			*timestamp = a.timestamp;
	}
	return rc;
}

/* Gives back to the heap what a producer's batch grew an encoder to beyond what
 * appends need: a zstd body may inflate to the decoder's bound (64 MiB), and the
 * record arrays follow the record count. */
static void encoder_trim(struct tfs__encoder *e)
{
	size_t per_record = sizeof(*e->hashes) + sizeof(*e->recs) + sizeof(*e->timestamps);

	tfs_record_iter_trim(&e->iter, ENCODER_KEEP_BYTES);
	if (e->hashes_cap * per_record > ENCODER_KEEP_BYTES) {
		free(e->hashes);
		free(e->recs);
		free(e->timestamps);
		e->hashes = NULL;
		e->recs = NULL;
		e->timestamps = NULL;
		e->hashes_cap = 0;
	}
}

int tfs_plog_append_batch(struct tfs_plog *pl, uint8_t *batch, size_t len, bool durable,
                          tfs_offset_t *first, size_t *count, tfs_plog_records_fn committed,
                          void *arg)
{
	struct tfs__produce_cfg cfg;
	struct tfs__encoder *e, *own = NULL;
	struct tfs__preencoded pre;
	const char *why = NULL;
	size_t n = 0;
	int rc;

	if (pl->env.read_only)
		return TFS_EREADONLY;
	if (pl->internal)
		return tfs__plog_refuse_internal(pl);
	pthread_mutex_lock(&pl->q_lock);
	cfg = (struct tfs__produce_cfg){
		.compression = pl->cfg.compression,
		.zstd_level = pl->cfg.zstd_level,
		.max_message_bytes = pl->cfg.max_message_bytes,
	};
	e = encoder_take(pl);
	pthread_mutex_unlock(&pl->q_lock);
	if (!e && !(e = own = tfs__encoder_new()))
		return -ENOMEM;
	rc = tfs__producer_unit(&cfg, e, batch, len, &pre, &n, &why);
	if (rc == 0)
		rc = submit(pl, e->recs, n, pre.len, durable, NULL, NULL, &pre, first, NULL);
	else
		tfs_log_warn("plog", "%s: refused a producer's batch of %zu bytes: %s (%s)", pl->path,
		             len, why ? why : "no reason given", tfs_strerror(rc));
	if (rc == 0 && pre.duplicate)
		n = 0;                         /* a retry: nothing appended */
	if (rc == 0 && committed && n > 0)
		committed(arg, e->recs, n);
	if (own) {
		tfs__encoder_free(own);
	} else {
		encoder_trim(e);
		pthread_mutex_lock(&pl->q_lock);
		encoder_give(pl, e);
		pthread_mutex_unlock(&pl->q_lock);
	}
	if (rc == 0 && count)
		*count = n;
	return rc;
}

size_t tfs_plog_producers(struct tfs_plog *pl, struct tfs_pstate_entry *out, size_t cap)
{
	return tfs_pstate_list(pl->pstate, out, cap);
}

int tfs_plog_sync(struct tfs_plog *pl)
{
	if (pl->env.read_only)
		return 0;
	return submit(pl, NULL, 0, 0, true, NULL, NULL, NULL, NULL, NULL);
}

int tfs_plog_flush_if_older(struct tfs_plog *pl, int64_t max_age_ms)
{
	int64_t since = atomic_load(&pl->unsynced_since_ms);

	if (since == 0 || tfs_now_ms() - since < max_age_ms)
		return 0;
	return tfs_plog_sync(pl);
}

static int roll_exclusive(struct tfs_plog *pl, void *arg)
{
	(void)arg;
	return tfs_segment_size(active_segment(pl)) > 0 ? tfs__plog_roll_locked(pl) : 0;
}

size_t tfs_plog_queued(struct tfs_plog *pl)
{
	size_t n = 0;

	pthread_mutex_lock(&pl->q_lock);
	for (struct tfs__waiter *w = pl->q_head; w; w = w->next)
		n++;
	pthread_mutex_unlock(&pl->q_lock);
	return n;
}

int tfs_plog_roll(struct tfs_plog *pl)
{
	if (pl->env.read_only)
		return TFS_EREADONLY;
	return submit(pl, NULL, 0, 0, false, roll_exclusive, NULL, NULL, NULL, NULL);
}

int tfs__plog_run_exclusive(struct tfs_plog *pl, int (*fn)(struct tfs_plog *, void *), void *arg)
{
	return submit(pl, NULL, 0, 0, false, fn, arg, NULL, NULL, NULL);
}
