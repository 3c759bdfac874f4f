/* plog_read.c - reading a partition: by key, by offset, and with a cursor over
 * every record on disk.
 *
 * Readers take the partition lock only to copy what they need (the key's offset,
 * a new reference to the segment list, an index position); the I/O itself runs
 * unlocked against the pinned list, so a cleaner swap or a roll never waits for a
 * reader and a reader never sees a half-swapped log (invariant 6).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plog_internal.h"
#include "io/log.h"

#define POINT_READ_CHUNK (16u << 10)    /* a key read: one index interval and then some */
#define SCAN_READ_CHUNK (1u << 20)      /* cursors read sequentially in big chunks */
#define MAX_BATCH_BYTES (256u << 20)    /* a larger declared batch is corrupt */
#define KEY_READ_RETRIES 3              /* a key rewritten and cleaned between lookup and read */

/* A window [start, start + len) of one segment's bytes. */
struct window {
	uint8_t *p;
	size_t cap, len;
	tfs_pos_t start;
	size_t chunk;
};

/* Makes [pos, pos + need) of seg available; limit is the committed size.
 * Returns a pointer into the window, or NULL with *err set (-ENODATA past limit). */
static const uint8_t *window_get(struct window *w, struct tfs_segment *seg, tfs_pos_t pos,
                                 size_t need, tfs_pos_t limit, int *err)
{
	size_t want;
	ssize_t n;

	if (pos + (tfs_pos_t)need > limit) {
		*err = -ENODATA;
		return NULL;
	}
	if (pos >= w->start && pos + (tfs_pos_t)need <= w->start + (tfs_pos_t)w->len)
		return w->p + (pos - w->start);
	want = need > w->chunk ? need : w->chunk;
	if ((tfs_pos_t)want > limit - pos)
		want = (size_t)(limit - pos);
	if (want > w->cap) {
		uint8_t *np = realloc(w->p, want);
		if (!np) {
			*err = -ENOMEM;
			return NULL;
		}
		w->p = np;
		w->cap = want;
	}
	n = tfs_segment_read(seg, w->p, want, pos);
	if (n < 0) {
		*err = (int)n;
		w->len = 0;
		return NULL;
	}
	w->start = pos;
	w->len = (size_t)n;
	if (w->len < need) {
		*err = TFS_ECORRUPT;    /* the file is shorter than its committed size */
		return NULL;
	}
	return w->p;
}

struct tfs_plog_cursor {
	struct tfs_plog *pl;
	struct tfs_seglist *list;
	int seg_idx;
	tfs_pos_t pos;
	tfs_offset_t from;
	struct window win;
	struct tfs_record_iter it;
	bool in_batch;
	struct tfs_batch_header bh;
};

static tfs_pos_t start_pos(struct tfs_plog *pl, struct tfs_segment *seg, tfs_offset_t from)
{
	tfs_pos_t pos;

	pthread_rwlock_rdlock(&pl->lock);   /* the active segment's index may grow */
	pos = tfs_segment_lookup(seg, from);
	pthread_rwlock_unlock(&pl->lock);
	return pos;
}

static int cursor_open(struct tfs_plog *pl, tfs_offset_t from, size_t chunk,
                       struct tfs_plog_cursor **out)
{
	struct tfs_plog_cursor *c = calloc(1, sizeof(*c));
	int idx;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->pl = pl;
	c->list = tfs__seglist_get(pl);
	c->from = from;
	c->win.chunk = chunk;
	tfs_record_iter_init(&c->it);
	idx = tfs__seglist_find(c->list, from);
	c->seg_idx = idx < 0 ? 0 : idx;
	c->pos = idx < 0 ? 0 : start_pos(pl, c->list->seg[idx], from);
	*out = c;
	return 0;
}

int tfs_plog_cursor_open(struct tfs_plog *pl, tfs_offset_t from, struct tfs_plog_cursor **out)
{
	return cursor_open(pl, from, SCAN_READ_CHUNK, out);
}

void tfs_plog_cursor_close(struct tfs_plog_cursor *c)
{
	if (!c)
		return;
	tfs__seglist_put(c->list);
	tfs_record_iter_release(&c->it);
	free(c->win.p);
	free(c);
}

static int corrupt(struct tfs_plog_cursor *c, struct tfs_segment *seg, const char *why)
{
	tfs_log_error("plog", "corrupt batch in %s/%020" PRId64 ".log at position %" PRId64 ": %s",
	              c->pl->path, seg->base_offset, c->pos, why ? why : "invalid");
	return TFS_ECORRUPT;
}

int tfs_plog_cursor_next(struct tfs_plog_cursor *c, struct tfs_record *r,
                         struct tfs_batch_header *bh)
{
	for (;;) {
		struct tfs_segment *seg;
		tfs_pos_t limit;
		const uint8_t *p;
		const char *why = NULL;
		size_t size;
		int rc, err = 0;

		if (c->in_batch) {
			rc = tfs_record_iter_next(&c->it, r, &why);
			if (rc < 0)
				return corrupt(c, c->list->seg[c->seg_idx], why);
			if (rc == 1) {
				if (r->offset < c->from)
					continue;
				if (bh)
					*bh = c->bh;
				return 1;
			}
			c->in_batch = false;
		}
		if (c->seg_idx >= c->list->count)
			return 0;
		seg = c->list->seg[c->seg_idx];
		limit = tfs_segment_size(seg);
		if (seg->corrupt_at >= 0 && c->pos >= seg->corrupt_at)
			return corrupt(c, seg, "past a corrupt batch found at open");
		if (c->pos >= limit) {
			c->seg_idx++;
			c->pos = 0;
			c->win.len = 0;     /* the window held the previous segment's bytes */
			if (c->seg_idx < c->list->count)
				c->pos = start_pos(c->pl, c->list->seg[c->seg_idx], c->from);
			continue;
		}
		p = window_get(&c->win, seg, c->pos, TFS_BATCH_HEADER_BYTES, limit, &err);
		if (!p)
			return err == -ENODATA ? corrupt(c, seg, "truncated batch header") :
			       err == TFS_ECORRUPT ? corrupt(c, seg, "segment shorter than its size") : err;
		rc = tfs_batch_header_decode(p, TFS_BATCH_HEADER_BYTES, &c->bh, &why);
		if (rc < 0)
			return rc == TFS_EUNSUPPORTED ? rc : corrupt(c, seg, why);
		size = tfs_batch_size(&c->bh);
		if (size > MAX_BATCH_BYTES)
			return corrupt(c, seg, "batch larger than any valid batch");
		if (tfs_batch_last_offset(&c->bh) < c->from) {
			c->pos += (tfs_pos_t)size;
			continue;
		}
		p = window_get(&c->win, seg, c->pos, size, limit, &err);
		if (!p)
			return err == -ENODATA || err == TFS_ECORRUPT ?
			       corrupt(c, seg, "batch extends past the segment") : err;
		rc = tfs_batch_check_crc(p, size, &why);
		if (rc == 0)
			rc = tfs_record_iter_reset(&c->it, p, size, &why);
		if (rc < 0)
			return rc == TFS_EUNSUPPORTED ? rc : corrupt(c, seg, why);
		c->pos += (tfs_pos_t)size;
		c->in_batch = true;
	}
}

static int copy_record(const struct tfs_record *r, const struct tfs_batch_header *bh,
                       struct tfs_record_copy *out)
{
	memset(out, 0, sizeof(*out));
	out->offset = r->offset;
	out->timestamp = r->timestamp;
	out->key_null = r->key_null;
	out->value_null = r->value_null;
	out->header_count = r->header_count;
	out->batch = *bh;
	out->key_len = r->key.len;
	out->value_len = r->value.len;
	out->headers_len = r->headers_raw.len;
	if (!r->key_null && !(out->key = malloc(r->key.len + 1)))
		goto nomem;
	if (!(out->value = malloc(r->value.len + 1)))
		goto nomem;
	if (!(out->headers = malloc(r->headers_raw.len + 1)))
		goto nomem;
	if (out->key && r->key.len)
		memcpy(out->key, r->key.p, r->key.len);
	if (r->value.len)
		memcpy(out->value, r->value.p, r->value.len);
	if (r->headers_raw.len)
		memcpy(out->headers, r->headers_raw.p, r->headers_raw.len);
	return 0;
nomem:
	tfs_record_copy_release(out);
	return -ENOMEM;
}

void tfs_record_copy_release(struct tfs_record_copy *rc)
{
	if (!rc)
		return;
	free(rc->key);
	free(rc->value);
	free(rc->headers);
	rc->key = rc->value = rc->headers = NULL;
}

int tfs_plog_read_offset(struct tfs_plog *pl, tfs_offset_t offset, struct tfs_record_copy *out)
{
	struct tfs_plog_cursor *c = NULL;
	struct tfs_record r;
	struct tfs_batch_header bh;
	int rc;

	if (offset < 0)
		return -ENOENT;
	rc = cursor_open(pl, offset, POINT_READ_CHUNK, &c);
	if (rc < 0)
		return rc;
	rc = tfs_plog_cursor_next(c, &r, &bh);
	if (rc == 1)
		rc = r.offset == offset ? copy_record(&r, &bh, out) : -ENOENT;
	else if (rc == 0)
		rc = -ENOENT;
	tfs_plog_cursor_close(c);
	return rc;
}

int tfs_plog_lookup(struct tfs_plog *pl, struct tfs_slice key, struct tfs_keyinfo *info)
{
	int found;

	pthread_rwlock_rdlock(&pl->lock);
	found = tfs_keydir_get(pl->kd, key, info);
	pthread_rwlock_unlock(&pl->lock);
	return found ? 0 : -ENOENT;
}

int tfs_plog_read_key(struct tfs_plog *pl, struct tfs_slice key, struct tfs_record_copy *out)
{
	struct tfs_keyinfo info;
	int rc = -ENOENT;

	for (int attempt = 0; attempt < KEY_READ_RETRIES; attempt++) {
		rc = tfs_plog_lookup(pl, key, &info);
		if (rc < 0)
			return rc;
		rc = tfs_plog_read_offset(pl, info.offset, out);
		if (rc != -ENOENT)
			break;
	}
	if (rc == 0 && (out->key_null || out->key_len != key.len ||
	                (key.len && memcmp(out->key, key.p, key.len) != 0))) {
		tfs_log_error("plog", "key directory of %s names offset %" PRId64
		              " for a different key", pl->path, out->offset);
		tfs_record_copy_release(out);
		rc = TFS_ECORRUPT;
	}
	return rc;
}

size_t tfs_plog_live_keys(struct tfs_plog *pl)
{
	size_t n;

	pthread_rwlock_rdlock(&pl->lock);
	n = tfs_keydir_count(pl->kd);
	pthread_rwlock_unlock(&pl->lock);
	return n;
}

int tfs_plog_scan_keys(struct tfs_plog *pl, bool after_valid, uint64_t after_hash,
                       tfs_keydir_visit_fn fn, void *arg)
{
	int rc;

	pthread_rwlock_rdlock(&pl->lock);
	rc = tfs_keydir_scan(pl->kd, after_valid, after_hash, fn, arg);
	pthread_rwlock_unlock(&pl->lock);
	return rc;
}

int tfs_plog_key_versions(struct tfs_plog *pl, struct tfs_slice key, tfs_offset_t **out,
                          size_t *count)
{
	struct tfs_plog_cursor *c = NULL;
	struct tfs_record r;
	tfs_offset_t *v = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*out = NULL;
	*count = 0;
	rc = tfs_plog_cursor_open(pl, 0, &c);
	if (rc < 0)
		return rc;
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1) {
		if (r.key_null || r.key.len != key.len || (key.len && memcmp(r.key.p, key.p, key.len)))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			tfs_offset_t *nv = realloc(v, ncap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[n++] = r.offset;
	}
	tfs_plog_cursor_close(c);
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*count = n;
	return 0;
}

void tfs_plog_stats(struct tfs_plog *pl, struct tfs_plog_stats *st)
{
	struct tfs_seglist *l;

	memset(st, 0, sizeof(*st));
	pthread_rwlock_rdlock(&pl->lock);
	l = pl->segs;
	st->log_start_offset = l->seg[0]->base_offset;
	st->log_end_offset = pl->end_offset;
	st->segments = l->count;
	for (int i = 0; i < l->count; i++)
		st->size_bytes += tfs_segment_size(l->seg[i]);
	st->active_segment_bytes = tfs_segment_size(l->seg[l->count - 1]);
	st->active_base_offset = l->seg[l->count - 1]->base_offset;
	st->live_keys = tfs_keydir_count(pl->kd);
	st->keydir_memory_bytes = (int64_t)tfs_keydir_memory_bytes(pl->kd);
	pthread_rwlock_unlock(&pl->lock);
}
