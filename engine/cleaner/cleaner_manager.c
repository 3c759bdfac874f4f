/* cleaner_manager.c - the cleaner object: registered partitions and their state,
 * choosing the dirtiest log, the thread pool, clean_now requests, the checkpoint
 * file, queries and metrics (Kafka's LogCleaner + LogCleanerManager).
 *
 * A thread's loop:
 *
 *   +--> a clean_now request whose partition is idle?  -- yes --> pass (+ retention)
 *   |        | no
 *   |    grab the filthiest log (ratio > min.cleanable.dirty.ratio, or
 *   |    max.compaction.lag.ms overdue): pass, checkpoint, log line
 *   |    retention sweep (at most once per backoff period, by one thread)
 *   |    nothing done? sleep log.cleaner.backoff.ms (a request or stop wakes it)
 *   +----+
 *
 * Partition states are in cleaner.h. `busy` (invariant 1) is taken under c->lock
 * by whoever runs a pass or retention; `pins` counts threads that look at a
 * partition log without running anything on it (selection, metrics), so that
 * unregister can wait for both before the engine closes the log. c->lock is never
 * held while calling into a partition log or doing I/O.
 *
 * Selection reads what it needs from the partitions outside c->lock (their segment
 * lists, and for segments with producer ids, a header scan for open transactions),
 * then picks under the lock among the candidates still idle. A checkpoint that is
 * below the log start or past the log end is reset to the log start and written
 * at once, even if the log is not picked (Kafka's forced update).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

#define NAME_MAX_BYTES 300            /* "<topic>-<partition>" */
#define MS_PER_S 1000
#define US_PER_S 1000000.0
#define BYTES_PER_MB (1024.0 * 1024.0)
#define PERCENT 100.0

struct part {
	struct tfs_plog *pl;                 /* borrowed until unregister */
	char *topic;
	int32_t partition;
	char name[NAME_MAX_BYTES];
	/* under c->lock */
	tfs_offset_t checkpoint;             /* first dirty offset, -1 if none yet */
	bool busy;
	int pins;
	bool removed;
	char *uncleanable;                   /* reason, or NULL */
	char last_clean[TFS_CLEANER_LINE_MAX];
	atomic_bool abort;                   /* unregister asks the pass to stop (a flag) */
};

enum req_kind { REQ_CLEAN, REQ_RETENTION };

struct request {
	struct part *p;
	enum req_kind kind;
	bool taken, done;
	int rc;
	int deleted;
	pthread_cond_t cond;
	struct request *next;
};

struct thread_slot {
	struct tfs_cleaner *c;
	pthread_t tid;
	bool created;
	bool dead;
	struct tfs__cleaner_ctx ctx;
	/* under c->lock: the figures of its last pass, for the metrics */
	bool have_last;
	struct tfs__clean_stats last;
};

struct tfs_cleaner {
	struct tfs_io *io;
	char *data_dir;
	int dirfd;
	struct tfs_cleaner_config cfg;
	size_t map_bytes, io_bytes;          /* per thread */

	pthread_mutex_t lock;                /* the manager lock: everything below */
	pthread_cond_t wake;                 /* threads: work or stop */
	pthread_cond_t idle;                 /* a partition stopped being busy/pinned */
	struct part **parts;
	size_t nparts, capparts;
	/* parts by partition log: open addressing, linear probing, at most half full
	 * (a mount registers every partition; a linear search made that quadratic) */
	struct part **by_pl;
	size_t by_pl_cap;                    /* a power of two, or 0 */
	struct tfs__ckpt_entry *orphans;     /* checkpoint entries not yet registered, */
	size_t norphans;                     /* sorted by topic, then partition */
	struct request *req_head;
	struct thread_slot *slots;           /* cfg.threads + 1 (the inline slot) */
	int nthreads, live_threads;
	bool started;
	atomic_bool stop;                    /* set once by stop; read by passes (relaxed:
	                                      * a flag, and c->lock orders the rest) */
	double max_dirty_ratio;              /* of the last selection */
	int64_t max_compaction_delay_ms;
	int64_t last_run_mono_ms;
	int64_t next_retention_mono_ms;
	uint64_t passes, failures;
	atomic_uint_fast64_t txn_scans;      /* partition_info's reads of the log
	                                      * (relaxed: a count, nothing pairs with it) */

	pthread_mutex_t ckpt_lock;           /* serialises checkpoint file writes */
	pthread_mutex_t inline_lock;         /* the inline slot's context */
	bool inline_ready;

	struct tfs__throttler thr;
	struct tfs__cleaner_log log;
	int64_t (*now_fn)(void *);
	void *now_arg;
	struct tfs_cleaner_hooks hooks;      /* tests only; set before start */
};

static int64_t default_now(void *arg)
{
	(void)arg;
	return tfs_now_ms();
}

int64_t tfs__cleaner_now(struct tfs_cleaner *c)
{
	return c->now_fn(c->now_arg);
}

struct tfs__throttler *tfs__cleaner_throttler(struct tfs_cleaner *c)
{
	return c ? &c->thr : NULL;
}

void tfs_cleaner_set_clock(struct tfs_cleaner *c, int64_t (*now_ms)(void *arg), void *arg)
{
	c->now_fn = now_ms ? now_ms : default_now;
	c->now_arg = arg;
}

void tfs_cleaner_set_hooks(struct tfs_cleaner *c, const struct tfs_cleaner_hooks *hooks)
{
	c->hooks = *hooks;
	c->thr.on_sleep = hooks->throttled;
	c->thr.on_sleep_arg = hooks->arg;
}

static void format_time(int64_t ms, char *buf, size_t cap)
{
	time_t secs = (time_t)(ms / MS_PER_S);
	struct tm tm;
	size_t n;

	gmtime_r(&secs, &tm);
	n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%03dZ", (int)(ms % MS_PER_S));
}

/* ---- registry (under c->lock) ---- */

/* Debug check of the manager's invariants (cleaner.h): every registered partition
 * is live and registered once, at most one taker per partition (a taken request implies its partition
 * is busy), checkpoints are offsets or -1. Under c->lock. */
static struct part *find_part(struct tfs_cleaner *c, struct tfs_plog *pl);

static void check_locked(struct tfs_cleaner *c)
{
#ifndef NDEBUG
	/* each partition once: the index finds every part as itself (two parts of
	 * one log could not both be found) */
	for (size_t i = 0; i < c->nparts; i++) {
		struct part *p = c->parts[i];
		assert(!p->removed && p->pins >= 0 && p->checkpoint >= TFS_OFFSET_NONE);
		assert(find_part(c, p->pl) == p);
	}
	for (const struct request *r = c->req_head; r; r = r->next)
		assert(!r->taken || r->done || r->p->busy);
	assert(c->live_threads >= 0 && c->live_threads <= c->nthreads);
#else
	(void)c;
#endif
}

static size_t pl_slot(const struct tfs_cleaner *c, const struct tfs_plog *pl)
{
	uint64_t h = (uint64_t)(uintptr_t)pl * 0x9e3779b97f4a7c15ull;   /* Fibonacci hashing */
	return (size_t)(h >> 32) & (c->by_pl_cap - 1);
}

static struct part *find_part(struct tfs_cleaner *c, struct tfs_plog *pl)
{
	if (c->by_pl_cap == 0)
		return NULL;
	for (size_t i = pl_slot(c, pl);; i = (i + 1) & (c->by_pl_cap - 1)) {
		if (!c->by_pl[i])
			return NULL;
		if (c->by_pl[i]->pl == pl)
			return c->by_pl[i];
	}
}

/* Takes c->lock and returns pl's part, or releases the lock again and returns
 * NULL when pl is not registered. */
static struct part *lock_part(struct tfs_cleaner *c, struct tfs_plog *pl)
{
	struct part *p;

	pthread_mutex_lock(&c->lock);
	p = find_part(c, pl);
	if (!p)
		pthread_mutex_unlock(&c->lock);
	return p;
}

static void index_put(struct tfs_cleaner *c, struct part *p)
{
	size_t i = pl_slot(c, p->pl);

	while (c->by_pl[i])
		i = (i + 1) & (c->by_pl_cap - 1);
	c->by_pl[i] = p;
}

/* Makes room for one more part in the index (keeping it at most half full). */
static int index_reserve(struct tfs_cleaner *c)
{
	enum { INDEX_MIN_CAP = 64 };
	size_t cap = c->by_pl_cap ? c->by_pl_cap * 2 : INDEX_MIN_CAP;
	struct part **old = c->by_pl;
	size_t old_cap = c->by_pl_cap;

	if (2 * (c->nparts + 1) <= c->by_pl_cap)
		return 0;
	c->by_pl = calloc(cap, sizeof(*c->by_pl));
	if (!c->by_pl) {
		c->by_pl = old;
		return -ENOMEM;
	}
	c->by_pl_cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i])
			index_put(c, old[i]);
	free(old);
	return 0;
}

/* Takes p out of the index, shifting back the entries of its probe run. */
static void index_remove(struct tfs_cleaner *c, struct part *p)
{
	size_t mask = c->by_pl_cap - 1, i = pl_slot(c, p->pl), j;

	while (c->by_pl[i] != p)
		i = (i + 1) & mask;
	c->by_pl[i] = NULL;
	for (j = (i + 1) & mask; c->by_pl[j]; j = (j + 1) & mask) {
		size_t home = pl_slot(c, c->by_pl[j]->pl);
		/* the entry at j may move to the hole at i unless its home lies in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			c->by_pl[i] = c->by_pl[j];
			c->by_pl[j] = NULL;
			i = j;
		}
	}
}

static int orphan_cmp(const void *a, const void *b)
{
	const struct tfs__ckpt_entry *x = a, *y = b;
	int c = strcmp(x->topic, y->topic);

	return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static void part_free(struct part *p)
{
	if (!p)
		return;
	free(p->topic);
	free(p->uncleanable);
	free(p);
}

static void set_uncleanable(struct part *p, const char *why)
{
	free(p->uncleanable);
	p->uncleanable = strdup(why ? why : "unknown error");
}

static void release_busy(struct tfs_cleaner *c, struct part *p)
{
	pthread_mutex_lock(&c->lock);
	p->busy = false;
	pthread_cond_broadcast(&c->idle);
	pthread_cond_broadcast(&c->wake);    /* a request may have waited for it */
	pthread_mutex_unlock(&c->lock);
}

/* ---- the checkpoint file ---- */

/* Writes every registered partition's checkpoint (Kafka drops the others). */
static int write_checkpoints(struct tfs_cleaner *c)
{
	struct tfs__ckpt_entry *e = NULL;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&c->ckpt_lock);
	pthread_mutex_lock(&c->lock);
	e = calloc(c->nparts + 1, sizeof(*e));
	if (e) {
		for (size_t i = 0; i < c->nparts; i++) {
			struct part *p = c->parts[i];
			if (p->checkpoint < 0)
				continue;
			e[n].topic = p->topic;   /* borrowed: formatted before the unlock below */
			e[n].partition = p->partition;
			e[n].offset = p->checkpoint;
			n++;
		}
	}
	tfs__ckpt_free(c->orphans, c->norphans);
	c->orphans = NULL;
	c->norphans = 0;
	{
		size_t len = 0;
		char *text = e ? tfs__ckpt_format(e, n, &len) : NULL;
		pthread_mutex_unlock(&c->lock);
		if (!text) {
			rc = -ENOMEM;
		} else {
			rc = tfs_file_replace(c->io, c->dirfd, TFS_CHECKPOINT_FILE, text, len);
			free(text);
		}
	}
	free(e);
	pthread_mutex_unlock(&c->ckpt_lock);
	if (rc < 0)
		tfs_log_error("cleaner", "cannot write %s/%s: %s", c->data_dir, TFS_CHECKPOINT_FILE,
		              tfs_strerror(rc));
	return rc;
}

/* ---- create / destroy ---- */

int tfs_cleaner_create(struct tfs_io *io, const char *data_dir,
                       const struct tfs_cleaner_config *cfg, struct tfs_cleaner **out)
{
	struct tfs_cleaner *c;
	int rc;

	*out = NULL;
	if (cfg->threads < 0 || cfg->dedupe_buffer_size <= 0 || cfg->io_buffer_size <= 0 ||
	    !(cfg->io_buffer_load_factor > 0 && cfg->io_buffer_load_factor <= 1) || cfg->backoff_ms < 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->io = io;
	c->cfg = *cfg;
	c->dirfd = -1;
	c->now_fn = default_now;
	tfs__cleaner_thread_sizes(cfg, &c->map_bytes, &c->io_bytes);
	c->data_dir = strdup(data_dir);
	c->slots = calloc((size_t)cfg->threads + 1, sizeof(*c->slots));
	if (!c->data_dir || !c->slots) {
		free(c->data_dir);
		free(c->slots);
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->idle, NULL);
	pthread_mutex_init(&c->ckpt_lock, NULL);
	pthread_mutex_init(&c->inline_lock, NULL);
	atomic_init(&c->stop, false);
	atomic_init(&c->txn_scans, 0);
	c->last_run_mono_ms = tfs_mono_ms();
	tfs__throttler_init(&c->thr, cfg->io_max_bytes_per_second);
	c->dirfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dirfd < 0) {
		rc = -errno;
		tfs_log_error("cleaner", "cannot open %s: %s", data_dir, tfs_strerror(rc));
		tfs__cleaner_log_open(&c->log, io, -1);
		tfs_cleaner_destroy(c);
		return rc;
	}
	tfs__cleaner_log_open(&c->log, io, c->dirfd);
	rc = tfs__ckpt_read(io, c->dirfd, &c->orphans, &c->norphans);
	if (rc == 0 && c->norphans)
		qsort(c->orphans, c->norphans, sizeof(*c->orphans), orphan_cmp);
	if (rc < 0 && rc != -ENOENT)
		tfs_log_warn("cleaner", "ignoring %s/%s (%s): every partition starts fully dirty",
		             data_dir, TFS_CHECKPOINT_FILE, tfs_strerror(rc));
	for (int i = 0; i <= cfg->threads; i++)
		c->slots[i].c = c;
	*out = c;
	return 0;
}

static void *thread_main(void *arg);

int tfs_cleaner_start(struct tfs_cleaner *c)
{
	int rc = 0;

	if (!c)
		return TFS_EREADONLY;
	pthread_mutex_lock(&c->lock);
	if (c->started || atomic_load(&c->stop)) {
		pthread_mutex_unlock(&c->lock);
		return -EALREADY;
	}
	c->started = true;
	for (int i = 0; i < c->cfg.threads; i++) {
		struct thread_slot *s = &c->slots[i];
		tfs__cleaner_ctx_init(&s->ctx, c, i, c->map_bytes, c->cfg.io_buffer_load_factor,
		                      c->io_bytes);
		rc = pthread_create(&s->tid, NULL, thread_main, s);
		if (rc != 0) {
			tfs__cleaner_ctx_release(&s->ctx);
			s->dead = true;
			tfs_log_error("cleaner", "cannot start cleaner thread %d: %s", i, strerror(rc));
			rc = -rc;
			break;
		}
		s->created = true;
		c->nthreads++;
		c->live_threads++;
	}
	pthread_mutex_unlock(&c->lock);
	tfs_log_info("cleaner", "started %d cleaner threads, %zu-byte dedupe buffer each", c->nthreads,
	             c->map_bytes);
	return rc;
}

void tfs_cleaner_stop(struct tfs_cleaner *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->stop, true);
	for (struct request *r = c->req_head; r; r = r->next) {
		if (!r->taken) {
			r->rc = -ECANCELED;
			r->done = true;
			pthread_cond_signal(&r->cond);
		}
	}
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->lock);
	tfs__throttler_stop(&c->thr, true);
	for (int i = 0; i < c->cfg.threads; i++) {
		if (c->slots[i].created) {
			pthread_join(c->slots[i].tid, NULL);
			c->slots[i].created = false;
		}
	}
}

void tfs_cleaner_destroy(struct tfs_cleaner *c)
{
	if (!c)
		return;
	tfs_cleaner_stop(c);
	for (int i = 0; i <= c->cfg.threads; i++)
		tfs__cleaner_ctx_release(&c->slots[i].ctx);
	for (size_t i = 0; i < c->nparts; i++)
		part_free(c->parts[i]);
	free(c->parts);
	free(c->by_pl);
	tfs__ckpt_free(c->orphans, c->norphans);
	tfs__cleaner_log_close(&c->log);
	tfs__throttler_release(&c->thr);
	if (c->dirfd >= 0)
		close(c->dirfd);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->ckpt_lock);
	pthread_mutex_destroy(&c->inline_lock);
	free(c->slots);
	free(c->data_dir);
	free(c);
}

/* ---- register / unregister ---- */

int tfs_cleaner_register(struct tfs_cleaner *c, struct tfs_plog *pl, const char *topic,
                         int32_t partition)
{
	struct part *p;
	int rc = 0;

	if (!c)
		return TFS_EREADONLY;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->topic = strdup(topic))) {
		free(p);
		return -ENOMEM;
	}
	p->pl = pl;
	p->partition = partition;
	p->checkpoint = TFS_OFFSET_NONE;
	atomic_init(&p->abort, false);
	snprintf(p->name, sizeof(p->name), "%s-%" PRId32, topic, partition);
	if (tfs__plog_uncleanable_reason(pl))
		p->uncleanable = strdup(tfs__plog_uncleanable_reason(pl));
	pthread_mutex_lock(&c->lock);
	if (find_part(c, pl)) {
		rc = -EEXIST;
		goto out;
	}
	rc = index_reserve(c);
	if (rc < 0)
		goto out;
	if (c->nparts == c->capparts) {
		size_t cap = c->capparts ? c->capparts * 2 : 16;
		struct part **np = realloc(c->parts, cap * sizeof(*np));
		if (!np) {
			rc = -ENOMEM;
			goto out;
		}
		c->parts = np;
		c->capparts = cap;
	}
	if (c->norphans) {
		struct tfs__ckpt_entry key = { .topic = (char *)topic, .partition = partition };
		const struct tfs__ckpt_entry *o = bsearch(&key, c->orphans, c->norphans,
		                                          sizeof(*c->orphans), orphan_cmp);
		if (o)
			p->checkpoint = o->offset;
	}
	c->parts[c->nparts++] = p;
	index_put(c, p);
	p = NULL;
out:
	pthread_mutex_unlock(&c->lock);
	part_free(p);
	return rc;
}

void tfs_cleaner_unregister(struct tfs_cleaner *c, struct tfs_plog *pl)
{
	struct part *p;

	if (!c)
		return;
	if (!(p = lock_part(c, pl)))
		return;
	index_remove(c, p);
	for (size_t i = 0; i < c->nparts; i++) {
		if (c->parts[i] == p) {
			memmove(&c->parts[i], &c->parts[i + 1], (c->nparts - i - 1) * sizeof(*c->parts));
			c->nparts--;
			break;
		}
	}
	p->removed = true;
	atomic_store(&p->abort, true);
	for (struct request *r = c->req_head; r; r = r->next) {
		if (r->p == p && !r->taken) {
			r->rc = -ECANCELED;
			r->done = true;
			pthread_cond_signal(&r->cond);
		}
	}
	while (p->busy || p->pins > 0)
		pthread_cond_wait(&c->idle, &c->lock);
	pthread_mutex_unlock(&c->lock);
	part_free(p);
	(void)write_checkpoints(c);
}

/* ---- one pass, with its bookkeeping ---- */

static void pass_line(const struct tfs__clean_stats *st, char *buf, size_t cap)
{
	char when[40];

	format_time(st->start_ms, when, sizeof(when));
	snprintf(buf, cap, "%s duration %.3f s, read %" PRId64 " bytes, wrote %" PRId64
	         " bytes, records kept %" PRId64 ", dropped %" PRId64 ", offsets [%" PRId64
	         ", %" PRId64 ")%s",
	         when, (double)st->elapsed_us / US_PER_S, st->bytes_read + st->map_bytes_read,
	         st->bytes_written, st->records_kept, st->records_dropped, st->first_dirty,
	         st->end_offset, st->map_full ? ", dedupe buffer too small for the dirty region" : "");
}

static void log_pass(struct tfs_cleaner *c, const struct part *p, const struct tfs__clean_stats *st)
{
	double secs = (double)st->elapsed_us / US_PER_S;
	double mb_read = (double)(st->bytes_read + st->map_bytes_read) / BYTES_PER_MB;
	double mb_written = (double)st->bytes_written / BYTES_PER_MB;

	if (st->nothing_to_do) {
		tfs__cleaner_log_line(&c->log, tfs__cleaner_now(c),
		                      "%s: nothing to clean below offset %" PRId64, p->name,
		                      st->first_uncleanable);
		return;
	}
	tfs__cleaner_log_line(&c->log, tfs__cleaner_now(c),
	    "%s: cleaned offsets [%" PRId64 ", %" PRId64 ") in %.3f s (map %.3f s): "
	    "%.3f MB read (%" PRId64 " bytes for the map), %.3f MB written, %.1f%% recopied, "
	    "%.3f MB/s; records read %" PRId64 ", kept %" PRId64 ", dropped %" PRId64
	    "; size %" PRId64 " -> %" PRId64 " bytes in %d of %d groups; tombstones stamped %"
	    PRId64 "; dedupe buffer %.1f%% full%s%s",
	    p->name, st->first_dirty, st->end_offset, secs, (double)st->map_us / US_PER_S, mb_read,
	    st->map_bytes_read, mb_written,
	    PERCENT * (double)st->bytes_written / (double)(st->bytes_read > 0 ? st->bytes_read : 1),
	    secs > 0 ? (mb_read + mb_written) / secs : 0.0, st->records_read, st->records_kept,
	    st->records_dropped, st->size_before, st->size_after, st->groups_swapped, st->groups,
	    st->tombstones_stamped, PERCENT * st->buffer_utilization,
	    st->map_full ? "; dedupe buffer too small for the dirty region: the pass stopped at "
	                   "the last mapped offset and the next one goes on from there" : "",
	    "");
}

/* Runs a pass on p (busy, taken by the caller) with slot's context. */
static int run_pass(struct tfs_cleaner *c, struct thread_slot *s, struct part *p)
{
	struct tfs__pass_in in = { .pl = p->pl, .name = p->name, .abort = &p->abort, .stop = &c->stop };
	struct tfs__clean_stats st;
	int rc;

	tfs__plog_config(p->pl, &in.cfg);
	pthread_mutex_lock(&c->lock);
	in.checkpoint = p->checkpoint;
	pthread_mutex_unlock(&c->lock);
	in.now_ms = tfs__cleaner_now(c);
	rc = tfs__clean_pass(&s->ctx, &in, &st);

	pthread_mutex_lock(&c->lock);
	if (rc == 0) {
		/* a checkpoint past offsets no pass indexed (a damaged file): the next
		 * pass indexes the whole log */
		p->checkpoint = st.tombstones_unstamped ? st.log_start : st.end_offset;
		pass_line(&st, p->last_clean, sizeof(p->last_clean));
		s->last = st;
		s->have_last = true;
		c->passes++;
	} else {
		char when[40];
		format_time(in.now_ms, when, sizeof(when));
		if (rc == -ECANCELED) {
			snprintf(p->last_clean, sizeof(p->last_clean), "%s aborted", when);
		} else if (rc == -ENOMEM && !s->ctx.map) {
			/* the thread's dedupe buffer, not the partition, is the problem */
			snprintf(p->last_clean, sizeof(p->last_clean), "%s error: cannot allocate the "
			         "dedupe buffer", when);
		} else {
			char why[TFS_CLEANER_LINE_MAX];
			if (s->ctx.why[0])
				snprintf(why, sizeof(why), "%s", s->ctx.why);
			else if (rc == TFS_ECORRUPT && tfs__plog_uncleanable_reason(p->pl))
				snprintf(why, sizeof(why), "%s", tfs__plog_uncleanable_reason(p->pl));
			else
				snprintf(why, sizeof(why), "cleaning failed: %s", tfs_strerror(rc));
			set_uncleanable(p, why);
			snprintf(p->last_clean, sizeof(p->last_clean), "%s error: %.*s", when,
			         (int)(sizeof(p->last_clean) - sizeof(when) - sizeof(" error: ")), why);
			c->failures++;
		}
	}
	pthread_mutex_unlock(&c->lock);

	if (rc == 0) {
		log_pass(c, p, &st);
		if (st.tombstones_unstamped) {
			tfs_log_warn("cleaner", "%s: %" PRId64 " tombstones below the checkpoint %" PRId64
			             " were never indexed by a pass: the checkpoint is wrong (a damaged "
			             "%s?); the next pass cleans from the log start", p->name,
			             st.tombstones_unstamped, in.checkpoint, TFS_CHECKPOINT_FILE);
		}
		if (!st.nothing_to_do)
			(void)write_checkpoints(c);
	} else if (rc == -ECANCELED) {
		tfs__cleaner_log_line(&c->log, tfs__cleaner_now(c), "%s: pass aborted", p->name);
	} else {
		tfs__cleaner_log_line(&c->log, tfs__cleaner_now(c),
		                      "%s: cleaning failed: %s; partition marked uncleanable "
		                      "(setfattr -n user.topicfs.clean retries it)",
		                      p->name, tfs_strerror(rc));
	}
	return rc;
}

static int run_retention(struct tfs_cleaner *c, struct part *p, int *deleted)
{
	struct tfs_topic_config cfg;
	struct tfs__retention_result res;
	int rc;

	tfs__plog_config(p->pl, &cfg);
	rc = tfs__retention_apply(p->pl, &cfg, tfs__cleaner_now(c), &res);
	if (deleted)
		*deleted = res.segments;
	if (res.segments > 0)
		tfs__cleaner_log_line(&c->log, tfs__cleaner_now(c),
		                      "%s: retention deleted %d segments%s (%" PRId64 " bytes, %zu keys); "
		                      "log start offset now %" PRId64 "%s%s", p->name, res.segments,
		                      res.rolled ? ", the active one rolled first" : "",
		                      res.bytes, res.keys_removed, res.log_start,
		                      rc < 0 ? "; error: " : "", rc < 0 ? tfs_strerror(rc) : "");
	else if (rc < 0)
		tfs__cleaner_log_line(&c->log, tfs__cleaner_now(c), "%s: retention failed: %s",
		                      p->name, tfs_strerror(rc));
	return rc;
}

/* ---- selection ---- */

struct candidate {
	struct part *p;
	tfs_offset_t checkpoint;
	struct tfs__log_to_clean lc;
	double min_ratio;
	bool compact;
	bool ok;
};

/* Evaluates one partition outside c->lock (p pinned). */
static int evaluate(struct tfs_cleaner *c, struct tfs__cleaner_ctx *x, struct candidate *cd,
                    int64_t now)
{
	struct tfs_topic_config cfg;
	struct tfs_seglist *l;
	tfs_offset_t log_end;
	int rc;

	tfs__plog_config(cd->p->pl, &cfg);
	cd->compact = cfg.cleanup_policy & TFS_POLICY_COMPACT;
	cd->min_ratio = cfg.min_cleanable_dirty_ratio;
	if (!cd->compact)
		return 0;
	l = tfs__plog_snapshot(cd->p->pl, &log_end);
	rc = tfs__txn_scan(&x->txn, l, &x->rbuf, &x->rcap, x->rchunk, &x->it, c);
	if (rc == 0) {
		tfs__log_to_clean(l, log_end, &cfg, cd->checkpoint, x->txn.first_unstable, now, &cd->lc);
		cd->ok = true;
	}
	tfs__seglist_put(l);
	return rc;
}

/* Picks the dirtiest eligible partition and marks it busy; NULL if none. */
static struct part *grab_filthiest(struct tfs_cleaner *c, struct thread_slot *s)
{
	struct candidate *cand = NULL;
	struct part *best = NULL;
	size_t n = 0;
	int64_t now = tfs__cleaner_now(c);
	bool reset = false;
	double best_ratio = -1, max_ratio = 0;
	int64_t max_delay = 0;

	pthread_mutex_lock(&c->lock);
	c->last_run_mono_ms = tfs_mono_ms();
	cand = calloc(c->nparts + 1, sizeof(*cand));
	if (!cand) {
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	for (size_t i = 0; i < c->nparts; i++) {
		struct part *p = c->parts[i];
		if (p->busy || p->uncleanable)
			continue;
		p->pins++;
		cand[n].p = p;
		cand[n].checkpoint = p->checkpoint;
		n++;
	}
	pthread_mutex_unlock(&c->lock);

	for (size_t i = 0; i < n; i++) {
		int rc = evaluate(c, &s->ctx, &cand[i], now);
		if (rc < 0) {
			pthread_mutex_lock(&c->lock);
			set_uncleanable(cand[i].p, tfs_strerror(rc));
			pthread_mutex_unlock(&c->lock);
			tfs__cleaner_log_line(&c->log, now, "%s: cannot evaluate for cleaning: %s; "
			                      "partition marked uncleanable", cand[i].p->name,
			                      tfs_strerror(rc));
		}
	}

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		struct candidate *cd = &cand[i];
		struct part *p = cd->p;
		if (--p->pins == 0 && p->removed)
			pthread_cond_broadcast(&c->idle);
		if (!cd->ok || !cd->compact || p->removed)
			continue;
		if (cd->lc.checkpoint_reset && p->checkpoint == cd->checkpoint) {
			p->checkpoint = cd->lc.first_dirty;
			reset = true;
		}
		if (cd->lc.total_bytes == 0)
			continue;
		if (cd->lc.ratio > max_ratio)
			max_ratio = cd->lc.ratio;
		if (cd->lc.compaction_delay_ms > max_delay)
			max_delay = cd->lc.compaction_delay_ms;
		if (p->busy || p->uncleanable)
			continue;
		if (!((cd->lc.need_compaction_now && cd->lc.cleanable_bytes > 0) ||
		      cd->lc.ratio > cd->min_ratio))
			continue;
		if (cd->lc.ratio > best_ratio) {
			best_ratio = cd->lc.ratio;
			best = p;
		}
	}
	c->max_dirty_ratio = max_ratio;
	c->max_compaction_delay_ms = max_delay;
	if (best)
		best->busy = true;
	pthread_mutex_unlock(&c->lock);
	free(cand);
	if (reset)
		(void)write_checkpoints(c);
	return best;
}

/* Applies retention to every idle registered partition whose policy has delete. */
static bool retention_sweep(struct tfs_cleaner *c)
{
	struct part **ps;
	size_t n = 0;
	bool did = false;
	int64_t mono = tfs_mono_ms();

	pthread_mutex_lock(&c->lock);
	if (mono < c->next_retention_mono_ms || !(ps = calloc(c->nparts + 1, sizeof(*ps)))) {
		pthread_mutex_unlock(&c->lock);
		return false;
	}
	c->next_retention_mono_ms = mono + c->cfg.backoff_ms;
	for (size_t i = 0; i < c->nparts; i++) {
		ps[n] = c->parts[i];
		ps[n++]->pins++;
	}
	pthread_mutex_unlock(&c->lock);

	for (size_t i = 0; i < n; i++) {
		struct part *p = ps[i];
		struct tfs_topic_config cfg;
		int deleted = 0;
		bool mine = false;

		bool wanted;

		tfs__plog_config(p->pl, &cfg);
		/* a compacted topic too, once DeleteRecords left whole segments below
		 * its log start (retention.c) */
		wanted = (cfg.cleanup_policy & TFS_POLICY_DELETE) || tfs__plog_start_moved(p->pl);
		pthread_mutex_lock(&c->lock);
		if (!p->removed && !p->busy && !atomic_load(&c->stop) && wanted) {
			p->busy = true;
			mine = true;
		}
		pthread_mutex_unlock(&c->lock);
		if (mine) {
			(void)run_retention(c, p, &deleted);
			did |= deleted > 0;
			release_busy(c, p);
		}
	}
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n; i++)
		if (--ps[i]->pins == 0 && ps[i]->removed)
			pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
	free(ps);
	return did;
}

/* ---- requests (clean_now, enforce_retention) ---- */

/* Runs a request's work on p (busy). */
static int serve(struct tfs_cleaner *c, struct thread_slot *s, struct part *p, enum req_kind kind,
                 int *deleted)
{
	struct tfs_topic_config cfg;
	int rc = 0, rrc;

	tfs__plog_config(p->pl, &cfg);
	if (kind == REQ_CLEAN && (cfg.cleanup_policy & TFS_POLICY_COMPACT))
		rc = run_pass(c, s, p);
	if (rc == 0) {
		rrc = run_retention(c, p, deleted);
		rc = rrc;
	}
	return rc;
}

/* The first queued request whose partition is idle: taken, partition busy. */
static struct request *take_request(struct tfs_cleaner *c)
{
	for (struct request *r = c->req_head; r; r = r->next) {
		if (!r->taken && !r->done && !r->p->busy) {
			r->taken = true;
			r->p->busy = true;
			return r;
		}
	}
	return NULL;
}

/* Is there a request some thread could take now? */
static bool request_pending(struct tfs_cleaner *c)
{
	for (struct request *r = c->req_head; r; r = r->next)
		if (!r->taken && !r->done && !r->p->busy)
			return true;
	return false;
}

static void unlink_request(struct tfs_cleaner *c, struct request *r)
{
	struct request **pp = &c->req_head;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
}

static int submit(struct tfs_cleaner *c, struct tfs_plog *pl, enum req_kind kind, int *deleted)
{
	struct request req = { .kind = kind };
	struct thread_slot *s = NULL;
	struct part *p;
	int rc;

	if (deleted)
		*deleted = 0;
	if (!c)
		return TFS_EREADONLY;
	if (!(p = lock_part(c, pl)))
		return -ENOENT;
	if (kind == REQ_CLEAN && p->uncleanable) {
		free(p->uncleanable);
		p->uncleanable = NULL;
	}
	if (atomic_load(&c->stop)) {
		pthread_mutex_unlock(&c->lock);
		return -ECANCELED;
	}
	if (kind == REQ_CLEAN && c->live_threads > 0) {
		/* a cleaner thread runs it with its own context */
		req.p = p;
		pthread_cond_init(&req.cond, NULL);
		req.next = c->req_head;
		c->req_head = &req;
		pthread_cond_broadcast(&c->wake);
		while (!req.done)
			pthread_cond_wait(&req.cond, &c->lock);
		unlink_request(c, &req);
		pthread_mutex_unlock(&c->lock);
		pthread_cond_destroy(&req.cond);
		if (deleted)
			*deleted = req.deleted;
		return req.rc;
	}
	/* no thread: the caller's own thread does it */
	while (p->busy && !p->removed)
		pthread_cond_wait(&c->idle, &c->lock);
	if (p->removed) {
		pthread_mutex_unlock(&c->lock);
		return -ECANCELED;
	}
	p->busy = true;
	pthread_mutex_unlock(&c->lock);
	if (kind == REQ_CLEAN) {
		pthread_mutex_lock(&c->inline_lock);
		s = &c->slots[c->cfg.threads];
		if (!c->inline_ready) {
			tfs__cleaner_ctx_init(&s->ctx, c, c->cfg.threads, c->map_bytes,
			                      c->cfg.io_buffer_load_factor, c->io_bytes);
			c->inline_ready = true;
		}
	}
	rc = serve(c, s, p, kind, deleted);
	if (s)
		pthread_mutex_unlock(&c->inline_lock);
	release_busy(c, p);
	return rc;
}

int tfs_cleaner_clean_now(struct tfs_cleaner *c, struct tfs_plog *pl)
{
	return submit(c, pl, REQ_CLEAN, NULL);
}

int tfs_cleaner_enforce_retention(struct tfs_cleaner *c, struct tfs_plog *pl,
                                  int *deleted_segments)
{
	return submit(c, pl, REQ_RETENTION, deleted_segments);
}

/* ---- the threads ---- */

static void *thread_main(void *arg)
{
	struct thread_slot *s = arg;
	struct tfs_cleaner *c = s->c;

	pthread_mutex_lock(&c->lock);
	while (!atomic_load(&c->stop)) {
		struct request *r;

		check_locked(c);
		r = take_request(c);
		struct part *p;
		bool did = false;

		if (r) {
			int deleted = 0, rc;
			pthread_mutex_unlock(&c->lock);
			rc = serve(c, s, r->p, r->kind, &deleted);
			pthread_mutex_lock(&c->lock);
			r->p->busy = false;
			r->rc = rc;
			r->deleted = deleted;
			r->done = true;
			pthread_cond_signal(&r->cond);
			pthread_cond_broadcast(&c->idle);
			if (rc == -ENOMEM && !s->ctx.map)
				break;      /* could not even allocate the dedupe buffer */
			continue;
		}
		pthread_mutex_unlock(&c->lock);

		p = grab_filthiest(c, s);
		if (c->hooks.selected)
			c->hooks.selected(c->hooks.arg, p != NULL);
		if (p) {
			int rc = run_pass(c, s, p);
			if (rc == 0) {
				int deleted = 0;
				(void)run_retention(c, p, &deleted);
			}
			release_busy(c, p);
			did = true;
			if (rc == -ENOMEM && !s->ctx.map) {
				pthread_mutex_lock(&c->lock);
				break;
			}
		}
		did |= retention_sweep(c);

		pthread_mutex_lock(&c->lock);
		if (!did && !atomic_load(&c->stop) && !request_pending(c)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += c->cfg.backoff_ms / MS_PER_S;
			ts.tv_nsec += (c->cfg.backoff_ms % MS_PER_S) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&c->wake, &c->lock, &ts);
		}
	}
	if (!atomic_load(&c->stop)) {
		s->dead = true;
		tfs_log_error("cleaner", "cleaner thread %d stopped: cannot allocate its %zu-byte "
		              "dedupe buffer", s->ctx.slot, c->map_bytes);
	}
	c->live_threads--;
	/* requests waiting for a thread that will never come: fail them */
	if (c->live_threads == 0) {
		for (struct request *q = c->req_head; q; q = q->next) {
			if (!q->taken && !q->done) {
				q->rc = -ECANCELED;
				q->done = true;
				pthread_cond_signal(&q->cond);
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- queries ---- */

int tfs_cleaner_partition_info(struct tfs_cleaner *c, struct tfs_plog *pl,
                               struct tfs_cleaner_partition_info *out)
{
	struct tfs_topic_config cfg;
	struct tfs__log_to_clean lc;
	struct tfs_seglist *l;
	tfs_offset_t checkpoint, log_end, first_unstable = TFS_OFFSET_NONE;
	struct part *p;
	bool scan = false;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!c)
		return TFS_EREADONLY;
	if (!(p = lock_part(c, pl)))
		return -ENOENT;
	checkpoint = p->checkpoint;
	out->in_progress = p->busy;
	out->uncleanable = p->uncleanable != NULL;
	if (p->uncleanable)
		snprintf(out->uncleanable_reason, sizeof(out->uncleanable_reason), "%s", p->uncleanable);
	snprintf(out->last_clean, sizeof(out->last_clean), "%s", p->last_clean);
	pthread_mutex_unlock(&c->lock);

	tfs__plog_config(pl, &cfg);
	out->compacted = cfg.cleanup_policy & TFS_POLICY_COMPACT;
	l = tfs__plog_snapshot(pl, &log_end);
	if (!out->compacted) {
		out->first_dirty_offset = out->first_uncleanable_offset = l->seg[0]->base_offset;
		goto out;
	}
	for (int i = 0; i < l->count; i++)
		scan |= l->seg[i]->has_producer_ids;
	/* The scan finds the first open transaction as the pass does; with none open
	 * in the producer state (which opens one with its first batch and closes it
	 * with its marker, and never expires an open one) it has nothing to find, and
	 * every .put leaves producer ids in its segment: skip it, or each history view
	 * and `region` would read the whole log per call. */
	if (scan && tfs_plog_last_stable_offset(pl) >= log_end)
		scan = false;
	if (scan) {
		struct tfs__txn_state t;
		struct tfs_record_iter it;
		uint8_t *buf = NULL;
		size_t cap = 0;
		atomic_fetch_add_explicit(&c->txn_scans, 1, memory_order_relaxed);
		tfs__txn_state_init(&t);
		tfs_record_iter_init(&it);
		rc = tfs__txn_scan(&t, l, &buf, &cap, c->io_bytes, &it, NULL);
		first_unstable = t.first_unstable;
		tfs__txn_state_release(&t);
		tfs_record_iter_release(&it);
		free(buf);
		if (rc < 0)
			goto out;
	}
	tfs__log_to_clean(l, log_end, &cfg, checkpoint, first_unstable, tfs__cleaner_now(c), &lc);
	out->dirty_ratio = lc.ratio;
	out->first_dirty_offset = lc.first_dirty;
	/* the cleaner gave up: nothing past the clean part will be cleaned */
	out->first_uncleanable_offset = out->uncleanable ? lc.first_dirty : lc.first_uncleanable;
	out->clean_bytes = lc.clean_bytes;
	out->dirty_bytes = lc.cleanable_bytes;
out:
	tfs__seglist_put(l);
	return rc;
}

/* Copies one of the part's lines without touching the partition log. */
static int copy_line(struct tfs_cleaner *c, struct tfs_plog *pl, bool reason, char *buf, size_t cap)
{
	struct part *p;

	if (!c)
		return TFS_EREADONLY;
	pthread_mutex_lock(&c->lock);
	p = find_part(c, pl);
	if (p && cap > 0)
		snprintf(buf, cap, "%s", reason ? (p->uncleanable ? p->uncleanable : "") : p->last_clean);
	pthread_mutex_unlock(&c->lock);
	return p ? 0 : -ENOENT;
}

int tfs_cleaner_last_clean(struct tfs_cleaner *c, struct tfs_plog *pl, char *buf, size_t cap)
{
	return copy_line(c, pl, false, buf, cap);
}

int tfs_cleaner_uncleanable_reason(struct tfs_cleaner *c, struct tfs_plog *pl, char *buf,
                                   size_t cap)
{
	return copy_line(c, pl, true, buf, cap);
}

const char *tfs_cleaner_region_of(tfs_offset_t offset, tfs_offset_t first_dirty,
                                  tfs_offset_t first_uncleanable)
{
	if (offset < first_dirty)
		return "clean";
	if (offset < first_uncleanable)
		return "dirty";
	return "uncleanable";
}

int tfs_cleaner_region(struct tfs_cleaner *c, struct tfs_plog *pl, tfs_offset_t offset,
                       const char **out)
{
	struct tfs_cleaner_partition_info info;
	int rc = tfs_cleaner_partition_info(c, pl, &info);

	if (rc == 0)
		*out = tfs_cleaner_region_of(offset, info.first_dirty_offset,
		                             info.first_uncleanable_offset);
	return rc;
}

int tfs_cleaner_delete_horizon(const struct tfs_batch_header *h, int64_t *out_ms)
{
	if (!(h->attributes & TFS_ATTR_DELETE_HORIZON))
		return -ENODATA;
	*out_ms = h->base_timestamp;
	return 0;
}

/* ---- metrics ---- */

struct part_figures {
	struct part *p;
	char name[NAME_MAX_BYTES];
	char *topic;
	int32_t partition;
	tfs_offset_t checkpoint;
	bool uncleanable;
	int64_t cleanable_bytes;
};

static void gauge(FILE *f, const char *name, const char *kafka, const char *help, double v)
{
	fprintf(f, "# HELP topicfs_cleaner_%s %s (Kafka: %s)\n# TYPE topicfs_cleaner_%s gauge\n"
	        "topicfs_cleaner_%s %.17g\n", name, help, kafka, name, name, v);
}

int tfs_cleaner_metrics(struct tfs_cleaner *c, char **out, size_t *len)
{
	struct part_figures *pf = NULL;
	size_t n = 0;
	double max_util = 0, max_secs = 0, max_dirty;
	int64_t sum_read = 0, sum_written = 0, since_ms, delay_ms;
	uint64_t passes, failures;
	int dead = 0, uncleanable = 0;
	int64_t uncleanable_bytes = 0;
	FILE *f;

	*out = NULL;
	*len = 0;
	if (!c)
		return TFS_EREADONLY;
	pthread_mutex_lock(&c->lock);
	pf = calloc(c->nparts + 1, sizeof(*pf));
	if (!pf) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	for (int i = 0; i <= c->cfg.threads; i++) {
		const struct thread_slot *s = &c->slots[i];
		if (i < c->cfg.threads && s->dead)
			dead++;
		if (!s->have_last)
			continue;
		if (PERCENT * s->last.buffer_utilization > max_util)
			max_util = PERCENT * s->last.buffer_utilization;
		if ((double)s->last.elapsed_us / US_PER_S > max_secs)
			max_secs = (double)s->last.elapsed_us / US_PER_S;
		sum_read += s->last.bytes_read;
		sum_written += s->last.bytes_written;
	}
	for (size_t i = 0; i < c->nparts; i++) {
		struct part *p = c->parts[i];
		pf[n].p = p;
		memcpy(pf[n].name, p->name, sizeof(pf[n].name));
		pf[n].topic = p->topic;
		pf[n].partition = p->partition;
		pf[n].checkpoint = p->checkpoint;
		pf[n].uncleanable = p->uncleanable != NULL;
		uncleanable += pf[n].uncleanable;
		p->pins++;          /* keeps p (and its topic string) until we are done */
		n++;
	}
	max_dirty = c->max_dirty_ratio;
	since_ms = tfs_mono_ms() - c->last_run_mono_ms;
	delay_ms = c->max_compaction_delay_ms;
	passes = c->passes;
	failures = c->failures;
	pthread_mutex_unlock(&c->lock);

	/* uncleanable-bytes: the cleanable bytes of the uncleanable partitions */
	for (size_t i = 0; i < n; i++) {
		struct tfs_topic_config cfg;
		struct tfs__log_to_clean lc;
		struct tfs_seglist *l;
		tfs_offset_t log_end;
		if (!pf[i].uncleanable)
			continue;
		tfs__plog_config(pf[i].p->pl, &cfg);
		l = tfs__plog_snapshot(pf[i].p->pl, &log_end);
		tfs__log_to_clean(l, log_end, &cfg, pf[i].checkpoint, TFS_OFFSET_NONE,
		                  tfs__cleaner_now(c), &lc);
		tfs__seglist_put(l);
		pf[i].cleanable_bytes = lc.cleanable_bytes;
		uncleanable_bytes += lc.cleanable_bytes;
	}

	f = open_memstream(out, len);
	if (f) {
		gauge(f, "max_dirty_percent", "max-dirty-percent",
		      "100 x the highest dirty ratio seen by the last selection", PERCENT * max_dirty);
		gauge(f, "uncleanable_partitions_count", "uncleanable-partitions-count",
		      "partitions the cleaner gave up on", uncleanable);
		gauge(f, "uncleanable_bytes", "uncleanable-bytes",
		      "dirty bytes of the uncleanable partitions", (double)uncleanable_bytes);
		gauge(f, "time_since_last_run_ms", "time-since-last-run-ms",
		      "milliseconds since a cleaner thread last chose a log", (double)since_ms);
		gauge(f, "max_buffer_utilization_percent", "max-buffer-utilization-percent",
		      "highest dedupe buffer use of the threads' last passes", max_util);
		gauge(f, "max_clean_time_secs", "max-clean-time-secs",
		      "longest of the threads' last passes, in seconds", max_secs);
		gauge(f, "recopy_percent", "cleaner-recopy-percent",
		      "100 x bytes written / bytes read by the threads' last passes",
		      PERCENT * (double)sum_written / (double)(sum_read > 0 ? sum_read : 1));
		gauge(f, "max_compaction_delay_secs", "max-compaction-delay-secs",
		      "how far past max.compaction.lag.ms the most overdue log is", (double)delay_ms / MS_PER_S);
		gauge(f, "dead_thread_count", "DeadThreadCount", "cleaner threads that died",
		      (double)dead);
		fprintf(f, "# HELP topicfs_cleaner_io_bytes_total bytes read and written by the cleaner "
		        "(Kafka: kafka.utils:type=Throttler,name=cleaner-io)\n"
		        "# TYPE topicfs_cleaner_io_bytes_total counter\n"
		        "topicfs_cleaner_io_bytes_total %" PRId64 "\n",
		        (int64_t)atomic_load(&c->thr.total));
		fprintf(f, "# HELP topicfs_cleaner_passes_total cleaning passes completed\n"
		        "# TYPE topicfs_cleaner_passes_total counter\n"
		        "topicfs_cleaner_passes_total %" PRIu64 "\n", passes);
		fprintf(f, "# HELP topicfs_cleaner_failures_total cleaning passes that failed\n"
		        "# TYPE topicfs_cleaner_failures_total counter\n"
		        "topicfs_cleaner_failures_total %" PRIu64 "\n", failures);
		fprintf(f, "# HELP topicfs_cleaner_txn_scans_total reads of a log's batch headers "
		        "for its open transactions, outside passes (partition attributes, views)\n"
		        "# TYPE topicfs_cleaner_txn_scans_total counter\n"
		        "topicfs_cleaner_txn_scans_total %" PRIu64 "\n",
		        (uint64_t)atomic_load_explicit(&c->txn_scans, memory_order_relaxed));
		fprintf(f, "# HELP topicfs_cleaner_partition_first_dirty_offset the partition's "
		        "checkpoint (-1: never cleaned)\n"
		        "# TYPE topicfs_cleaner_partition_first_dirty_offset gauge\n");
		for (size_t i = 0; i < n; i++)
			fprintf(f, "topicfs_cleaner_partition_first_dirty_offset{topic=\"%s\",partition=\"%"
			        PRId32 "\"} %" PRId64 "\n", pf[i].topic, pf[i].partition, pf[i].checkpoint);
		fprintf(f, "# HELP topicfs_cleaner_partition_uncleanable 1 if the cleaner gave up on "
		        "the partition\n# TYPE topicfs_cleaner_partition_uncleanable gauge\n");
		for (size_t i = 0; i < n; i++)
			fprintf(f, "topicfs_cleaner_partition_uncleanable{topic=\"%s\",partition=\"%"
			        PRId32 "\"} %d\n", pf[i].topic, pf[i].partition, pf[i].uncleanable);
	}
	/* pf[i].topic borrows the part's string: print before unpinning */
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < n; i++)
		if (--pf[i].p->pins == 0 && pf[i].p->removed)
			pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
	free(pf);
	if (!f || fclose(f) != 0) {
		free(*out);
		*out = NULL;
		*len = 0;
		return -ENOMEM;
	}
	return 0;
}

/* ---- the next pass, dry ---- */

int tfs_cleaner_dry_run(struct tfs_cleaner *c, struct tfs_plog *pl, tfs_cleaner_fate_fn fn,
                        void *arg, struct tfs_cleaner_dry_run *out)
{
	struct tfs_topic_config cfg;
	tfs_offset_t checkpoint;
	struct part *p;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!c)
		return TFS_EREADONLY;
	if (!(p = lock_part(c, pl)))
		return -ENOENT;
	p->pins++;              /* unregister waits for us: pl stays open */
	checkpoint = p->checkpoint;
	pthread_mutex_unlock(&c->lock);

	tfs__plog_config(pl, &cfg);
	rc = tfs_cleaner_dry_run_log(pl, &cfg, &c->cfg, checkpoint, tfs__cleaner_now(c), fn, arg, out);

	pthread_mutex_lock(&c->lock);
	if (--p->pins == 0 && p->removed)
		pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
