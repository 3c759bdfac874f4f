/* log_estimate.c - what compaction would save, from the segment files: distinct
 * keys (an exact set, then HyperLogLog), the scan of a partition (whole, or
 * sampled in windows), and the formula (log_inspect.h, README "topicctl
 * estimate"). Reads through the scanner of log_inspect.c.
 */
#include "engine/inspect/log_inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/inspect/log_inspect_internal.h"

#define BISECT_STEPS 200                      /* bound of the occupancy model's solver */
#define BISECT_PRECISION 1e-9                 /* relative width at which it stops */

/* ================================================================================
 * Distinct keys
 * ================================================================================ */

#define HLL_BITS 14
#define HLL_REGISTERS (1u << HLL_BITS)
#define KEYSET_MIN_SLOTS 1024u

struct fp {
	uint64_t lo, hi;            /* lo has bit 0 forced on: {0,0} marks an empty slot */
};

struct tfs_keycount {
	struct fp *slots;           /* NULL once the exact set gave up */
	size_t nslots, used, max_exact;
	bool overflowed;
	uint8_t hll[HLL_REGISTERS];
};

int tfs_keycount_create(size_t max_exact, struct tfs_keycount **out)
{
	struct tfs_keycount *k = calloc(1, sizeof(*k));

	*out = NULL;
	if (!k)
		return -ENOMEM;
	k->max_exact = max_exact ? max_exact : TFS_KEYCOUNT_DEFAULT_EXACT;
	k->nslots = KEYSET_MIN_SLOTS;
	k->slots = calloc(k->nslots, sizeof(*k->slots));
	if (!k->slots) {
		free(k);
		return -ENOMEM;
	}
	*out = k;
	return 0;
}

void tfs_keycount_destroy(struct tfs_keycount *k)
{
	if (!k)
		return;
	free(k->slots);
	free(k);
}

void tfs_keycount_reset(struct tfs_keycount *k)
{
	if (!k->slots || k->overflowed) {
		free(k->slots);
		k->nslots = KEYSET_MIN_SLOTS;
		k->slots = calloc(k->nslots, sizeof(*k->slots));
		/* without memory the count stays HyperLogLog-only */
		k->overflowed = k->slots == NULL;
	} else {
		memset(k->slots, 0, k->nslots * sizeof(*k->slots));
	}
	k->used = 0;
	memset(k->hll, 0, sizeof(k->hll));
}

static size_t slot_of(uint64_t hi, size_t nslots)
{
	return (size_t)(hi & (nslots - 1));
}

static void set_insert(struct fp *slots, size_t nslots, struct fp f, bool *added)
{
	size_t i = slot_of(f.hi, nslots);

	*added = false;
	for (;;) {
		if (slots[i].lo == 0) {
			slots[i] = f;
			*added = true;
			return;
		}
		if (slots[i].lo == f.lo && slots[i].hi == f.hi)
			return;
		i = (i + 1) & (nslots - 1);
	}
}

static void keyset_add(struct tfs_keycount *k, struct fp f)
{
	bool added;

	if (!k->slots)
		return;
	if ((k->used + 1) * 2 > k->nslots) {
		size_t nn = k->nslots * 2;
		struct fp *ns = k->used < k->max_exact ? calloc(nn, sizeof(*ns)) : NULL;
		if (!ns) {
			free(k->slots);
			k->slots = NULL;
			k->overflowed = true;
			return;
		}
		for (size_t i = 0; i < k->nslots; i++)
			if (k->slots[i].lo)
				set_insert(ns, nn, k->slots[i], &added);
		free(k->slots);
		k->slots = ns;
		k->nslots = nn;
	}
	set_insert(k->slots, k->nslots, f, &added);
	if (added && ++k->used > k->max_exact) {
		free(k->slots);
		k->slots = NULL;
		k->overflowed = true;
	}
}

void tfs_keycount_add(struct tfs_keycount *k, struct tfs_slice key)
{
	XXH128_hash_t h = XXH3_128bits(key.p, key.len);
	struct fp f = { h.low64 | 1, h.high64 };
	/* HyperLogLog: the top HLL_BITS bits of high64 pick the register, the rank is
	 * one plus the leading zeros of low64 (64 more independent bits) */
	unsigned reg = (unsigned)(h.high64 >> (64 - HLL_BITS));
	uint8_t rank = (uint8_t)(h.low64 ? __builtin_clzll(h.low64) + 1 : 65);

	if (rank > k->hll[reg])
		k->hll[reg] = rank;
	keyset_add(k, f);
}

double tfs_keycount_value(const struct tfs_keycount *k, bool *exact)
{
	const double m = HLL_REGISTERS;
	const double alpha = 0.7213 / (1.0 + 1.079 / m);
	double sum = 0, e;
	unsigned zeros = 0;

	if (!k->overflowed && k->slots) {
		*exact = true;
		return (double)k->used;
	}
	*exact = false;
	for (unsigned i = 0; i < HLL_REGISTERS; i++) {
		sum += ldexp(1.0, -(int)k->hll[i]);
		zeros += k->hll[i] == 0;
	}
	e = alpha * m * m / sum;
	if (e <= 2.5 * m && zeros > 0)
		e = m * log(m / zeros);         /* linear counting for small cardinalities */
	return e;
}

/* ================================================================================
 * The compaction estimate
 * ================================================================================ */

void tfs_estimate_opts_defaults(struct tfs_estimate_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sample_above_bytes = TFS_ESTIMATE_SAMPLE_ABOVE_BYTES;
	o->sample_fraction = TFS_ESTIMATE_SAMPLE_FRACTION;
	o->sample_chunk_bytes = TFS_ESTIMATE_SAMPLE_CHUNK_BYTES;
	o->exact_keys_max = TFS_KEYCOUNT_DEFAULT_EXACT;
}

#define SAMPLE_SEED UINT64_C(0x9e3779b97f4a7c15)

/* xorshift64*: deterministic, good enough to place sample windows. */
static uint64_t next_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(2685821657736338717);
}

/* Where window k's chunk starts: anywhere in the window that leaves room for the
 * chunk; the last, shorter window too (a region smaller than a chunk is read whole). */
static int64_t window_start(int64_t k, int64_t window, int64_t chunk, int64_t total,
                            uint64_t *seed)
{
	int64_t lo = k * window, hi = lo + window, span;
	uint64_t r = next_rand(seed);

	if (hi > total)
		hi = total;
	span = hi - lo - chunk;
	return span > 0 ? lo + (int64_t)(r % (uint64_t)(span + 1)) : lo;
}

struct escan {
	bool active;                /* reading the active segment: records only */
	struct tfs_io *io;
	const struct tfs_estimate_opts *o;
	struct tfs_estimate_input *in;
	struct tfs_keycount *keys;
	struct tfs_record_iter it;
	int64_t done, total;        /* for progress */
};

/* Accounts one batch read by the scan. */
static void account(struct escan *e, const struct tfs_scan_batch *b)
{
	struct tfs_estimate_input *in = e->in;
	struct tfs_record r;
	const char *why;
	double raw_keyed = 0, raw_all = 0;
	int64_t keyed = 0, keyless = 0, tomb = 0;
	int rc;

	in->sampled_bytes += (int64_t)b->size;
	e->done += (int64_t)b->size;
	if (b->status != TFS_SCAN_OK) {
		in->bad_batches++;
		in->keyless_bytes += (double)b->size;
		return;
	}
	if ((b->h.attributes & TFS_ATTR_CONTROL) || b->h.records_count == 0) {
		in->keyless_bytes += (double)b->size;
		return;
	}
	rc = tfs_record_iter_reset(&e->it, b->bytes, b->size, &why);
	while (rc == 0 && (rc = tfs_record_iter_next(&e->it, &r, &why)) == 1) {
		raw_all += (double)r.raw.len;
		if (r.key_null) {
			keyless++;
		} else {
			keyed++;
			raw_keyed += (double)r.raw.len;
			tomb += r.value_null;
			tfs_keycount_add(e->keys, r.key);
		}
		rc = 0;
	}
	if (rc < 0 || raw_all <= 0) {
		in->bad_batches += rc < 0;
		in->keyless_bytes += (double)b->size;
		return;
	}
	in->records += keyed + keyless;
	in->keyed_records += keyed;
	in->keyless_records += keyless;
	in->tombstones += tomb;
	in->keyed_bytes += (double)b->size * raw_keyed / raw_all;
	in->keyless_bytes += (double)b->size * (raw_all - raw_keyed) / raw_all;
}

/* Counts the records of one batch of the active segment. */
static void account_active(struct escan *e, const struct tfs_scan_batch *b)
{
	struct tfs_record r;
	const char *why;
	int rc;

	if (b->status != TFS_SCAN_OK || (b->h.attributes & TFS_ATTR_CONTROL))
		return;
	rc = tfs_record_iter_reset(&e->it, b->bytes, b->size, &why);
	while (rc == 0 && (rc = tfs_record_iter_next(&e->it, &r, &why)) == 1) {
		e->in->active_records++;
		if (r.key_null)
			e->in->active_keyless_records++;
		else
			tfs_keycount_add(e->keys, r.key);
		rc = 0;
	}
}

/* Reads the active segment s whole; a tail that cannot be framed (being written
 * on a live mount, or damaged: verify's business) ends it. */
static int scan_active(struct escan *e, struct tfs_segscan *s)
{
	struct tfs_scan_batch b;
	int rc;

	while ((rc = tfs_segscan_next(s, &b)) == 1) {
		if (b.status == TFS_SCAN_BAD_HEADER || b.status == TFS_SCAN_TRUNCATED)
			return 0;
		account_active(e, &b);
	}
	return rc;
}

static void eprogress(struct escan *e)
{
	if (e->o->progress)
		e->o->progress(e->o->arg, e->done, e->total);
}

/* Reads the batches of s from its current position on until `until` (a file
 * position; batches starting before it are read) or the end. */
static int scan_until(struct escan *e, struct tfs_segscan *s, tfs_pos_t until, tfs_pos_t *end)
{
	struct tfs_scan_batch b;
	int rc, n = 0;

	while ((rc = tfs_segscan_next(s, &b)) == 1) {
		if (b.status == TFS_SCAN_BAD_HEADER || b.status == TFS_SCAN_TRUNCATED) {
			/* The rest cannot be framed (damage, or a tail still being written):
			 * what this read would have covered counts as surviving bytes, so an
			 * unreadable log never looks compactable. */
			int64_t stop = tfs_segscan_file_size(s) < until ? tfs_segscan_file_size(s) : until;
			if (stop > b.pos) {
				e->in->bad_batches++;
				e->in->sampled_bytes += stop - b.pos;
				e->in->keyless_bytes += (double)(stop - b.pos);
				e->done += stop - b.pos;
			}
			if (end)
				*end = INT64_MAX;
			return 0;
		}
		account(e, &b);
		if (end)
			*end = b.pos + (tfs_pos_t)b.size;
		if (++n % PROGRESS_EVERY_BATCHES == 0)
			eprogress(e);
		if (b.pos + (tfs_pos_t)b.size >= until)
			return 0;
	}
	return rc;
}

/* Positions s at the batch that holds file position `target` (or the first one
 * after it), starting from the largest index entry at or below it; a hint that
 * does not frame a batch is dropped for a walk from the start of the file.
 * Returns 1 when positioned, 0 when no batch is left, or an errno. */
static int seek_near(struct tfs_segscan *s, const struct tfs_index_entry *idx, size_t nidx,
                     tfs_pos_t target)
{
	struct tfs_scan_batch b;
	tfs_pos_t hint = 0;
	size_t lo = 0, hi = nidx;
	int rc;

	while (lo < hi) {               /* the first entry past target */
		size_t mid = lo + (hi - lo) / 2;
		if (idx[mid].pos <= target)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && idx[lo - 1].pos > 0)
		hint = idx[lo - 1].pos;
	tfs_segscan_seek(s, hint);
	while ((rc = tfs_segscan_next(s, &b)) == 1) {
		if (b.status == TFS_SCAN_BAD_HEADER && b.pos == hint && hint > 0) {
			hint = 0;
			tfs_segscan_seek(s, 0);
			continue;
		}
		if (b.status == TFS_SCAN_BAD_HEADER || b.status == TFS_SCAN_TRUNCATED)
			return 0;
		if (b.pos + (tfs_pos_t)b.size > target) {
			tfs_segscan_seek(s, b.pos);
			return 1;
		}
	}
	return rc;
}

int tfs_inspect_estimate_scan(struct tfs_io *io, const char *dir,
                              const struct tfs_estimate_opts *o, struct tfs_estimate_input *in)
{
	struct tfs_dir_listing l;
	struct escan e = { .io = io, .o = o, .in = in };
	struct tfs_dir_file **logs = NULL;
	size_t nlogs = 0;
	char path[PATH_CAP];
	int rc;

	memset(in, 0, sizeof(*in));
	rc = tfs_inspect_list_dir(dir, &l);
	if (rc < 0)
		return rc;
	logs = calloc(l.count ? l.count : 1, sizeof(*logs));
	if (!logs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < l.count; i++) {
		if (l.files[i].kind == TFS_FILE_LOG) {
			logs[nlogs++] = &l.files[i];
			in->current_bytes += l.files[i].size_bytes > 0 ? l.files[i].size_bytes : 0;
		}
	}
	if (nlogs == 0) {
		rc = -ENOENT;
		goto out;
	}
	in->segments = (int)nlogs;
	in->active_bytes = logs[nlogs - 1]->size_bytes > 0 ? logs[nlogs - 1]->size_bytes : 0;
	in->cleanable_bytes = in->current_bytes - in->active_bytes;
	in->sampled = in->cleanable_bytes > o->sample_above_bytes && o->sample_fraction < 1.0;
	rc = tfs_keycount_create(o->exact_keys_max, &e.keys);
	if (rc < 0)
		goto out;
	tfs_record_iter_init(&e.it);
	e.total = in->sampled ? (int64_t)((double)in->cleanable_bytes * o->sample_fraction)
	                      : in->cleanable_bytes;
	if (!in->sampled) {
		for (size_t i = 0; i + 1 < nlogs && rc == 0; i++) {
			struct tfs_segscan *s;
			join(path, sizeof(path), dir, logs[i]->name);
			if ((rc = tfs_segscan_open(io, path, &s)) < 0)
				break;
			rc = scan_until(&e, s, INT64_MAX, NULL);
			tfs_segscan_close(s);
		}
	} else {
		/* Stratified sampling: the cleanable segments, end to end, are cut into
		 * windows of `window` bytes, and `chunk` bytes are read from a
		 * pseudo-random place in each (a fixed seed: the same log gives the same
		 * estimate). Reading at the same place of every window would alias with a
		 * producer that rewrites its keys in a fixed order every `window` bytes. */
		double frac = o->sample_fraction > 0 ? o->sample_fraction : TFS_ESTIMATE_SAMPLE_FRACTION;
		int64_t chunk = o->sample_chunk_bytes > 0 ? o->sample_chunk_bytes
		                                          : TFS_ESTIMATE_SAMPLE_CHUNK_BYTES;
		int64_t window = (int64_t)((double)chunk / frac);
		uint64_t seed = SAMPLE_SEED;
		int64_t g0 = 0, k = 0, start;

		if (window < chunk)
			window = chunk;
		start = window_start(0, window, chunk, in->cleanable_bytes, &seed);
		for (size_t i = 0; i + 1 < nlogs && rc == 0; i++) {
			int64_t size = logs[i]->size_bytes > 0 ? logs[i]->size_bytes : 0;
			int64_t g1 = g0 + size;
			struct tfs_index_entry *idx = NULL;
			size_t nidx = 0, tail;
			struct tfs_segscan *s;

			if (start >= g1) {
				g0 = g1;
				continue;
			}
			join(path, sizeof(path), dir, logs[i]->name);
			if ((rc = tfs_segscan_open(io, path, &s)) < 0)
				break;
			snprintf(path, sizeof(path), "%s/%0*" PRId64 ".index", dir, TFS_SEGMENT_NAME_DIGITS,
			         logs[i]->base);
			if (tfs_inspect_read_index(io, path, &idx, &nidx, &tail) < 0)
				nidx = 0;
			for (tfs_pos_t read_end = 0; start < g1 && rc >= 0;) {
				/* a batch larger than a window may cover the next window's start */
				tfs_pos_t at = start - g0 > read_end ? start - g0 : read_end;
				k++;
				start = window_start(k, window, chunk, in->cleanable_bytes, &seed);
				if (at >= size)
					continue;
				rc = seek_near(s, idx, nidx, at);
				if (rc < 0)
					break;
				if (rc == 0)
					continue;
				rc = scan_until(&e, s, at + chunk, &read_end);
			}
			free(idx);
			tfs_segscan_close(s);
			g0 = g1;
		}
	}
	if (rc >= 0) {
		struct tfs_segscan *s;
		bool exact_all;
		in->distinct_keys = tfs_keycount_value(e.keys, &in->distinct_exact);
		/* the same key count goes on over the active segment, for the simple formula */
		e.active = true;
		join(path, sizeof(path), dir, logs[nlogs - 1]->name);
		rc = tfs_segscan_open(io, path, &s);
		if (rc == 0) {
			rc = scan_active(&e, s);
			tfs_segscan_close(s);
		}
		in->distinct_keys_all = tfs_keycount_value(e.keys, &exact_all);
	}
	if (rc >= 0) {
		rc = 0;
		eprogress(&e);
	}
	tfs_record_iter_release(&e.it);
	tfs_keycount_destroy(e.keys);
out:
	free(logs);
	tfs_dir_listing_release(&l);
	return rc;
}

double tfs_estimate_scale_distinct(double d, double n, double f)
{
	double lo, hi, q;

	if (d <= 0 || n <= 0)
		return 0;
	if (f >= 1.0 || d >= n * f)
		return f >= 1.0 ? d : n;        /* all read, or every key seen once: E = 1 */
	q = log1p(-f);                      /* ln(1 - f) */
	lo = d;
	hi = n;
	/* g(D) = D * (1 - (1 - f)^(n / D)) increases with D; find g(D) = d */
	for (int i = 0; i < BISECT_STEPS && hi - lo > BISECT_PRECISION * hi; i++) {
		double mid = 0.5 * (lo + hi);
		double g = mid * -expm1(q * n / mid);
		if (g < d)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

static void finish(struct tfs_estimate *out, double r, double active)
{
	out->surviving_bytes = out->keyless_bytes_total +
	                       (out->events_per_key > 0 ? out->keyed_bytes_total / out->events_per_key : 0);
	out->dirt_bytes = r < 1.0 ? out->surviving_bytes * r / (1.0 - r) : INFINITY;
	out->estimate_bytes = out->surviving_bytes + out->dirt_bytes + active;
	if (!(out->estimate_bytes <= out->current_bytes))
		out->estimate_bytes = out->current_bytes;    /* cleaning never grows a log */
	out->savings = out->current_bytes > 0 ? 1.0 - out->estimate_bytes / out->current_bytes : 0;
	out->worth_it = out->events_per_key >= TFS_ESTIMATE_MIN_EVENTS_PER_KEY &&
	                out->savings > TFS_ESTIMATE_MIN_SAVINGS;
	out->keyless_warning = out->keyless_share > TFS_ESTIMATE_KEYLESS_WARN;
}

/* The simple formula, in its order of operations (see struct tfs_estimate_simple). */
static void simple_figure(double n, double distinct, double keyless, double current,
                        double active_per_partition, double partitions, double r,
                        struct tfs_estimate_simple *out)
{
	double keyed = n - keyless, keyed_share, keyed_after, dirt;

	memset(out, 0, sizeof(*out));
	if (!(n > 0) || !(current > 0) || !(r < 1.0))
		return;                         /* the essay divides by zero here */
	out->defined = true;
	out->events_per_key = keyed / (distinct > 1 ? distinct : 1);
	out->keyless_share = keyless / n;
	keyed_share = 1 - out->keyless_share;
	keyed_after = out->events_per_key > 0 ? current * keyed_share / out->events_per_key : 0;
	out->surviving_bytes = current * out->keyless_share + keyed_after;
	dirt = out->surviving_bytes * (r / (1 - r));
	out->estimate_bytes = out->surviving_bytes + dirt + active_per_partition * partitions;
	out->savings = 1 - out->estimate_bytes / current;
	out->worth_it = out->events_per_key >= TFS_ESTIMATE_MIN_EVENTS_PER_KEY &&
	                out->savings > TFS_ESTIMATE_MIN_SAVINGS;
	out->keyless_warning = out->keyless_share > TFS_ESTIMATE_KEYLESS_WARN;
}

static void new_keyless(struct tfs_estimate *out, double active_records, double active_keyless)
{
	out->new_keyless_share = active_records > 0 ? active_keyless / active_records : 0;
	out->new_keyless_warning = out->new_keyless_share > TFS_ESTIMATE_NEW_KEYLESS_WARN;
}

void tfs_estimate_compute(const struct tfs_estimate_input *in, struct tfs_estimate *out)
{
	double scale;

	memset(out, 0, sizeof(*out));
	out->current_bytes = (double)in->current_bytes;
	if (!in->sampled)
		out->sample_fraction = 1.0;
	else if (in->cleanable_bytes > 0)
		out->sample_fraction = (double)in->sampled_bytes / (double)in->cleanable_bytes;
	scale = out->sample_fraction > 0 && in->sampled_bytes > 0 ? 1.0 / out->sample_fraction : 0;
	out->keyed_records_total = (double)in->keyed_records * scale;
	out->distinct_keys_total = in->sampled
		? tfs_estimate_scale_distinct(in->distinct_keys, out->keyed_records_total,
		                              out->sample_fraction)
		: in->distinct_keys;
	out->events_per_key = out->distinct_keys_total > 0
		? out->keyed_records_total / out->distinct_keys_total : 0;
	out->keyless_share = in->records > 0 ? (double)in->keyless_records / (double)in->records : 0;
	out->keyed_bytes_total = in->keyed_bytes * scale;
	out->keyless_bytes_total = in->keyless_bytes * scale;
	if (in->cleanable_bytes > 0 && in->sampled_bytes == 0)
		out->keyless_bytes_total = (double)in->cleanable_bytes;   /* nothing known: all stays */
	finish(out, in->dirty_ratio, (double)in->active_bytes);
	new_keyless(out, (double)in->active_records, (double)in->active_keyless_records);
	simple_figure((double)(in->records + in->active_records), in->distinct_keys_all,
	            (double)(in->keyless_records + in->active_keyless_records),
	            (double)in->current_bytes, (double)in->active_bytes, 1, in->dirty_ratio,
	            &out->simple);
}

void tfs_estimate_total(const struct tfs_estimate *parts, const struct tfs_estimate_input *ins,
                        size_t n, struct tfs_estimate *out)
{
	double records = 0, keyless = 0, estimate = 0, sampled = 0, cleanable = 0;
	double act_records = 0, act_keyless = 0, active = 0, distinct_all = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		act_records += (double)ins[i].active_records;
		act_keyless += (double)ins[i].active_keyless_records;
		active += (double)ins[i].active_bytes;
		distinct_all += ins[i].distinct_keys_all;
		out->current_bytes += parts[i].current_bytes;
		out->keyed_records_total += parts[i].keyed_records_total;
		out->distinct_keys_total += parts[i].distinct_keys_total;
		out->keyed_bytes_total += parts[i].keyed_bytes_total;
		out->keyless_bytes_total += parts[i].keyless_bytes_total;
		out->surviving_bytes += parts[i].surviving_bytes;
		out->dirt_bytes += parts[i].dirt_bytes;
		estimate += parts[i].estimate_bytes;
		records += (double)ins[i].records;
		keyless += (double)ins[i].keyless_records;
		sampled += (double)ins[i].sampled_bytes;
		cleanable += (double)ins[i].cleanable_bytes;
	}
	out->sample_fraction = cleanable > 0 ? sampled / cleanable : 1.0;
	out->events_per_key = out->distinct_keys_total > 0
		? out->keyed_records_total / out->distinct_keys_total : 0;
	out->keyless_share = records > 0 ? keyless / records : 0;
	out->estimate_bytes = estimate;
	out->savings = out->current_bytes > 0 ? 1.0 - estimate / out->current_bytes : 0;
	out->worth_it = out->events_per_key >= TFS_ESTIMATE_MIN_EVENTS_PER_KEY &&
	                out->savings > TFS_ESTIMATE_MIN_SAVINGS;
	out->keyless_warning = out->keyless_share > TFS_ESTIMATE_KEYLESS_WARN;
	new_keyless(out, act_records, act_keyless);
	if (n > 0)
		simple_figure(records + act_records, distinct_all, keyless + act_keyless,
		            out->current_bytes, active / (double)n, (double)n,
		            ins[0].dirty_ratio, &out->simple);
}
