/* history_fate.c - `fate`, `superseded_by` and `next_pass` (see history_fate.h).
 *
 * `fate` comes from the dry run of the whole next pass: a record's fate depends on
 * every newer record of its key in the dirty region, on its batch (producer state,
 * transactions) and on where the dedupe buffer would fill, so nothing short of the
 * pass's own decisions answers it exactly. The dry run's summary and the fates of
 * the records it read (up to FATE_CACHE_RECORDS of them) stay in the mount's cache
 * (history_fate.h); the cache's lock is held across a dry run, so at most one runs
 * at a time and a caller that waited finds the answer made for it.
 */
#include "fs/history_fate.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cleaner/cleaner.h"
#include "fs/mount.h"
#include "fs/node.h"

#define NEXT_PASS_TEXT_CAP 512
#define FATE_CACHE_MS 1000               /* time-based rules (horizons, compaction
                                          * lags) move on; a second is the most an
                                          * answer may lag them */
#define FATE_CACHE_RECORDS ((size_t)1 << 20)  /* 48 MiB of fates at most; past it a
                                               * fate is one dry run of its own */

/* What identifies a state of the log the cached run answers for. */
struct fate_stamp {
	const struct tfs_plog *pl;           /* compared only, never dereferenced */
	tfs_offset_t log_start, log_end, active_base;
	int64_t size_bytes;
	int segments;
};

struct tfs_fate_cache {
	pthread_mutex_t lock;                /* held across a dry run and every use */
	bool valid;
	struct fate_stamp stamp;
	int64_t at_ms;                       /* CLOCK_MONOTONIC of the run */
	struct tfs_cleaner_dry_run d;
	struct tfs_cleaner_record_fate *fates;   /* offset order; all of them iff complete */
	size_t n, cap;
	bool complete;
	bool for_next_pass;                  /* made by a next_pass request */
	tfs_offset_t want;                   /* a run over the cap keeps only this one */
};

int tfs_fate_cache_create(struct tfs_fate_cache **out)
{
	struct tfs_fate_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void tfs_fate_cache_destroy(struct tfs_fate_cache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->fates);
	free(c);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stamp_of(struct tfs_plog *pl, struct fate_stamp *s)
{
	struct tfs_plog_stats st;

	tfs_plog_stats(pl, &st);
	memset(s, 0, sizeof(*s));
	s->pl = pl;
	s->log_start = st.log_start_offset;
	s->log_end = st.log_end_offset;
	s->active_base = st.active_base_offset;
	s->size_bytes = st.size_bytes;
	s->segments = st.segments;
}

static bool same_stamp(const struct fate_stamp *a, const struct fate_stamp *b)
{
	return a->pl == b->pl && a->log_start == b->log_start && a->log_end == b->log_end &&
	       a->active_base == b->active_base && a->size_bytes == b->size_bytes &&
	       a->segments == b->segments;
}

/* Keeps the fates of the run while they fit the cap; past it, only `want`'s. */
static void keep_fate(void *arg, const struct tfs_cleaner_record_fate *f)
{
	struct tfs_fate_cache *c = arg;

	if (!c->complete) {
		if (f->offset == c->want && c->n == 0) {
			if (c->cap == 0) {
				c->fates = malloc(sizeof(*c->fates));
				c->cap = c->fates ? 1 : 0;
			}
			if (c->cap)
				c->fates[c->n++] = *f;
		}
		return;
	}
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 1024;
		struct tfs_cleaner_record_fate *nf;
		if (c->n >= FATE_CACHE_RECORDS ||
		    !(nf = realloc(c->fates, (ncap > FATE_CACHE_RECORDS ? FATE_CACHE_RECORDS : ncap) *
		                                 sizeof(*nf)))) {
			/* too many to keep: keep `want`'s alone, if it is still to come or
			 * among those kept so far */
			struct tfs_cleaner_record_fate *hit = NULL;
			for (size_t i = 0; i < c->n; i++)
				if (c->fates[i].offset == c->want)
					hit = &c->fates[i];
			c->complete = false;
			if (hit) {
				c->fates[0] = *hit;
				c->n = 1;
			} else {
				c->n = 0;
				keep_fate(c, f);
			}
			return;
		}
		c->fates = nf;
		c->cap = ncap > FATE_CACHE_RECORDS ? FATE_CACHE_RECORDS : ncap;
	}
	c->fates[c->n++] = *f;
}

void tfs_fate_cache_invalidate(struct tfs_fate_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->valid = false;
	pthread_mutex_unlock(&c->lock);
}

/* Makes c answer for pl now (with c->lock held): the cached run if it still does,
 * else a new dry run. want is the offset a `fate` asks about (-1 for none). A
 * next_pass request (fresh) takes only a run another next_pass made: getfattr
 * asks twice (the size, then the value), and both must get the same answer, but a
 * run made for fates earlier is not "now" enough to predict the pass. */
static int cache_fill(struct tfs_mount *m, struct tfs_cleaner *cl, struct tfs_plog *pl,
                      tfs_offset_t want, bool fresh)
{
	struct tfs_fate_cache *c = m->fates;
	struct fate_stamp s;
	int64_t now = mono_ms();
	bool have_want = false;
	int rc;

	stamp_of(pl, &s);
	if (c->valid && same_stamp(&c->stamp, &s) && now - c->at_ms < FATE_CACHE_MS &&
	    (!fresh || c->for_next_pass)) {
		if (c->complete || want < 0)
			return 0;
		for (size_t i = 0; i < c->n; i++)
			have_want |= c->fates[i].offset == want;
		if (have_want)
			return 0;
	}
	c->valid = false;
	c->n = 0;
	c->complete = true;
	c->want = want;
	atomic_fetch_add_explicit(&m->stats.dry_runs, 1, memory_order_relaxed);
	rc = tfs_cleaner_dry_run(cl, pl, keep_fate, c, &c->d);
	if (rc < 0)
		return rc;
	c->stamp = s;
	c->at_ms = now;
	c->for_next_pass = fresh;
	c->valid = true;
	return 0;
}

/* The cached fate of offset, or NULL (the run did not read it). */
static const struct tfs_cleaner_record_fate *cached_fate(const struct tfs_fate_cache *c,
                                                         tfs_offset_t offset)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {                    /* fates are in offset order */
		size_t mid = lo + (hi - lo) / 2;
		if (c->fates[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->n && c->fates[lo].offset == offset ? &c->fates[lo] : NULL;
}

static int dup_text(const char *text, char **out)
{
	*out = strdup(text);
	return *out ? 0 : -ENOMEM;
}

static int record_exists(struct tfs_plog *pl, tfs_offset_t offset, struct tfs_record_copy *rec)
{
	int rc = tfs_plog_read_offset(pl, offset, rec);

	return rc == -ENOENT ? -ENODATA : rc;
}

int tfs_history_fate(struct tfs_mount *m, struct tfs_node *n, char **out)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(m->engine);
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_fate_cache *c = m->fates;
	struct tfs_record_copy rec;
	char text[TFS_CLEANER_FATE_TEXT_CAP];
	int rc;

	*out = NULL;
	if (!pl)
		return -ENOENT;
	if (!cl)
		return -ENODATA;
	rc = record_exists(pl, n->num, &rec);
	if (rc < 0)
		return rc;
	tfs_record_copy_release(&rec);
	pthread_mutex_lock(&c->lock);
	rc = cache_fill(m, cl, pl, n->num, false);
	if (rc == 0)
		tfs_cleaner_fate_text(&c->d, cached_fate(c, n->num), n->num, text, sizeof(text));
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc == -ENOENT ? -ENODATA : rc;
	if (!text[0])
		return -ENODATA;    /* cleaned away by a pass that ran meanwhile */
	return dup_text(text, out);
}

/* 1 if the record at offset is a value of its key, 0 if it is data of an
 * aborted transaction or of one still open (neither replaces the key's value,
 * and the pass never lets either supersede a record) or gone since, or the
 * read's error. */
static int is_a_value(struct tfs_plog *pl, tfs_offset_t offset)
{
	struct tfs_record_copy rec;
	enum tfs_txn_state st = TFS_TXN_NONE;
	int rc = tfs_plog_read_offset(pl, offset, &rec);

	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	if ((rec.batch.attributes & TFS_ATTR_TRANSACTIONAL) && rec.batch.producer_id >= 0)
		st = tfs_plog_txn_state(pl, rec.batch.producer_id, offset);
	tfs_record_copy_release(&rec);
	return st != TFS_TXN_ABORTED && st != TFS_TXN_OPEN;
}

int tfs_history_superseded_by(struct tfs_mount *m, struct tfs_node *n, tfs_offset_t *out)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_record_copy rec;
	tfs_offset_t *v = NULL;
	size_t count = 0;
	int rc;

	if (!pl)
		return -ENOENT;
	rc = record_exists(pl, n->num, &rec);
	if (rc < 0)
		return rc;
	if (rec.key_null) {
		tfs_record_copy_release(&rec);
		return -ENODATA;
	}
	rc = tfs_plog_key_versions(pl, tfs_slice_make(rec.key, rec.key_len), &v, &count);
	tfs_record_copy_release(&rec);
	if (rc < 0)
		return rc;
	rc = -ENODATA;          /* the newest: superseded by nothing */
	for (size_t i = 0; i < count && rc == -ENODATA; i++) {
		int value = v[i] > n->num ? is_a_value(pl, v[i]) : 0;
		if (value < 0)
			rc = value;
		else if (value) {
			*out = v[i];
			rc = 0;
		}
	}
	free(v);
	return rc;
}

int tfs_history_next_pass(struct tfs_mount *m, struct tfs_node *n, char **out)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(m->engine);
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_cleaner_dry_run d;
	char text[NEXT_PASS_TEXT_CAP];
	int rc, len;

	*out = NULL;
	if (!pl)
		return -ENOENT;
	if (!cl)
		return -ENODATA;
	pthread_mutex_lock(&m->fates->lock);
	rc = cache_fill(m, cl, pl, -1, true);
	d = m->fates->d;
	pthread_mutex_unlock(&m->fates->lock);
	if (rc < 0)
		return rc == -ENOENT ? -ENODATA : rc;
	/* range: the offsets recopied, [log start, end offset), inclusive here; the
	 * map reads [first_dirty, end_offset). The reason goes last: it has spaces. */
	if (d.nothing_to_do || d.end_offset <= d.log_start)
		len = snprintf(text, sizeof(text), "range=none");
	else
		len = snprintf(text, sizeof(text), "range=%" PRId64 "-%" PRId64, d.log_start,
		               d.end_offset - 1);
	snprintf(text + len, sizeof(text) - (size_t)len,
	         " first_dirty=%" PRId64 " end_offset=%" PRId64 " first_uncleanable=%" PRId64
	         " records_read=%" PRId64 " records_dropped=%" PRId64 " bytes_freed=%" PRId64
	         " tombstones_to_stamp=%" PRId64 " tombstones_dropped=%" PRId64
	         " size_before=%" PRId64 " size_after=%" PRId64 " map_full=%d"
	         " uncleanable_reason=%s",
	         d.first_dirty, d.end_offset, d.first_uncleanable, d.records_read,
	         d.records_dropped, d.bytes_freed, d.tombstones_to_stamp, d.tombstones_dropped,
	         d.bytes_before, d.bytes_after, d.map_full ? 1 : 0,
	         tfs_cleaner_not_cleanable_name(d.uncleanable_why));
	return dup_text(text, out);
}
