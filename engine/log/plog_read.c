/* plog_read.c - reading a partition: by key and by offset (through windows of
 * verified batches, see the end of this file), and with a cursor over every
 * record on disk.
 *
 * Readers take the partition lock only to copy what they need (the key's offset,
 * a new reference to the segment list, an index position); the I/O itself runs
 * unlocked against the pinned list, so a cleaner swap or a roll never waits for a
 * reader and a reader never sees a half-swapped log (invariant 6).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/batch_reader.h"
#include "engine/log/plog_internal.h"
#include "engine/ondisk.h"
#include "io/log.h"

#define WINDOW_READ_BYTES (16u << 10)   /* a point read: the index interval (4 KiB by
                                         * default) around the offset and then some, so
                                         * that neighbours come along in the same I/O */
#define SCAN_READ_CHUNK (1u << 20)      /* cursors read sequentially in big chunks */
#define KEY_READ_RETRIES 3              /* a key rewritten and cleaned between lookup and read */

/* The first unreadable region of seg (found at open) that ends past pos, or
 * NULL: readers never use its bytes, and step over it only towards offsets at
 * or past its next. */
static const struct tfs_seg_damage *damage_from(const struct tfs_segment *seg, tfs_pos_t pos)
{
	for (uint32_t i = 0; i < seg->damage_count; i++)
		if (seg->damage[i].end > pos)
			return &seg->damage[i];
	return NULL;
}

struct tfs_plog_cursor {
	struct tfs_plog *pl;
	struct tfs_seglist *list;
	int seg_idx;
	tfs_offset_t from;
	struct tfs_batch_reader rd;     /* over seg[seg_idx]'s committed bytes */
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

/* Points the cursor's reader at seg[seg_idx] from pos. */
static void retarget(struct tfs_plog_cursor *c, tfs_pos_t pos)
{
	struct tfs_segment *seg = c->list->seg[c->seg_idx];

	tfs_batch_reader_retarget(&c->rd, tfs_segment_read_fn, seg, pos, tfs_segment_size(seg));
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
	pthread_rwlock_rdlock(&pl->lock);
	if (from < pl->deleted_below)
		from = pl->deleted_below;       /* records below the log start are gone */
	pthread_rwlock_unlock(&pl->lock);
	c->from = from;
	tfs_record_iter_init(&c->it);
	idx = tfs__seglist_find(c->list, from);
	c->seg_idx = idx < 0 ? 0 : idx;
	tfs_batch_reader_init(&c->rd, tfs_segment_read_fn, NULL, 0, 0, chunk, NULL, NULL);
	if (c->seg_idx < c->list->count)
		retarget(c, idx < 0 ? 0 : start_pos(pl, c->list->seg[idx], from));
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
	tfs_batch_reader_release(&c->rd);
	free(c);
}

static int seg_corrupt(struct tfs_plog *pl, struct tfs_segment *seg, tfs_pos_t pos,
                       const char *why)
{
	tfs_log_error("plog", "corrupt batch in %s/%020" PRId64 ".log at position %" PRId64 ": %s",
	              pl->path, seg->base_offset, pos, why ? why : "invalid");
	return TFS_ECORRUPT;
}

static int corrupt(struct tfs_plog_cursor *c, struct tfs_segment *seg, const char *why)
{
	return seg_corrupt(c->pl, seg, c->rd.pos, why);
}

int tfs_plog_cursor_next(struct tfs_plog_cursor *c, struct tfs_record *r,
                         struct tfs_batch_header *bh)
{
	for (;;) {
		const struct tfs_seg_damage *d;
		struct tfs_segment *seg;
		struct tfs_batch_frame f;
		const char *why = NULL;
		int rc;

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
		if ((d = damage_from(seg, c->rd.pos)) && d->pos <= c->rd.pos) {
			/* Step over it: a cursor that started past it has lost nothing;
			 * one that reads through it hears so once, then goes on. */
			bool lost = c->from < d->next;
			rc = lost ? corrupt(c, seg, d->why) : 0;
			tfs_batch_reader_seek(&c->rd, d->end);
			if (lost)
				return rc;
			continue;
		}
		rc = tfs_batch_reader_frame(&c->rd, &f);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (++c->seg_idx < c->list->count)
				retarget(c, start_pos(c->pl, c->list->seg[c->seg_idx], c->from));
			continue;
		}
		if (f.unsupported)
			return TFS_EUNSUPPORTED;
		if (f.fate == TFS_FATE_GOOD && tfs_batch_last_offset(&f.h) < c->from) {
			tfs_batch_reader_skip(&c->rd, &f);      /* by its header alone */
			continue;
		}
		if (f.fate == TFS_FATE_GOOD && (rc = tfs_batch_reader_load(&c->rd, &f)) < 0)
			return rc;
		if (f.fate != TFS_FATE_GOOD)
			return corrupt(c, seg, f.why);
		c->bh = f.h;
		rc = tfs_record_iter_reset(&c->it, f.bytes, f.size, &why);
		if (rc < 0)
			return rc == TFS_EUNSUPPORTED ? rc : corrupt(c, seg, why);
		tfs_batch_reader_skip(&c->rd, &f);
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
	struct tfs_plog_window *w = NULL;
	tfs_offset_t start;
	int rc;

	pthread_rwlock_rdlock(&pl->lock);
	start = pl->deleted_below;
	pthread_rwlock_unlock(&pl->lock);
	if (offset < start)
		return -ENOENT;                 /* below the log start: gone */
	rc = tfs_plog_window_read(pl, offset, &w);
	if (rc == 0)
		rc = tfs_plog_window_copy(w, offset, out);
	tfs_plog_window_free(w);
	return rc;
}

int tfs_plog_lookup(struct tfs_plog *pl, struct tfs_slice key, struct tfs_keyinfo *info)
{
	int found;

	uint64_t hash = tfs_keydir_hash(key);
	pthread_rwlock_t *lock = &pl->kd_lock[tfs_keydir_shard(hash)];

	if (atomic_load(&pl->kd_failed))
		return -EIO;                    /* the directory misses records (plog_keyphase.c) */
	pthread_rwlock_rdlock(lock);
	found = tfs_keydir_get_hashed(pl->kd, key, hash, info);
	pthread_rwlock_unlock(lock);
	return found ? 0 : -ENOENT;
}

static int read_offset_reader(void *arg, struct tfs_plog *pl, tfs_offset_t offset,
                              struct tfs_record_copy *out)
{
	(void)arg;
	return tfs_plog_read_offset(pl, offset, out);
}

int tfs_plog_read_key(struct tfs_plog *pl, struct tfs_slice key, struct tfs_record_copy *out)
{
	return tfs_plog_read_key_via(pl, key, read_offset_reader, NULL, out);
}

int tfs_plog_read_key_via(struct tfs_plog *pl, struct tfs_slice key, tfs_plog_offset_reader read,
                          void *arg, struct tfs_record_copy *out)
{
	struct tfs_keyinfo info;
	int rc = -ENOENT;

	for (int attempt = 0; attempt < KEY_READ_RETRIES; attempt++) {
		rc = tfs_plog_lookup(pl, key, &info);
		if (rc < 0)
			return rc;
		if (info.offset < pl->stale_below)
			return TFS_EDAMAGED;    /* a newer record may be in the damage */
		rc = read(arg, pl, info.offset, out);
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

bool tfs_plog_keys_trusted(struct tfs_plog *pl)
{
	return !atomic_load(&pl->kd_failed);
}

size_t tfs_plog_live_keys(struct tfs_plog *pl)
{
	size_t n;

	tfs__plog_kd_lock(pl, false);
	n = tfs_keydir_count(pl->kd);
	tfs__plog_kd_unlock(pl);
	return n;
}

int tfs_plog_scan_keys(struct tfs_plog *pl, bool after_valid, uint64_t after_hash,
                       tfs_keydir_visit_fn fn, void *arg)
{
	int rc;

	if (atomic_load(&pl->kd_failed))
		return -EIO;
	tfs__plog_kd_lock(pl, false);
	rc = tfs_keydir_scan(pl->kd, after_valid, after_hash, fn, arg);
	tfs__plog_kd_unlock(pl);
	return rc;
}

int tfs_plog_key_versions(struct tfs_plog *pl, struct tfs_slice key, tfs_offset_t **out,
                          size_t *count)
{
	struct tfs_plog_cursor *c = NULL;
	struct tfs_batch_header bh;
	struct tfs_record r;
	tfs_offset_t *v = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*out = NULL;
	*count = 0;
	rc = tfs_plog_cursor_open(pl, 0, &c);
	if (rc < 0)
		return rc;
	while ((rc = tfs_plog_cursor_next(c, &r, &bh)) == 1) {
		if (r.key_null || r.key.len != key.len || (key.len && memcmp(r.key.p, key.p, key.len)))
			continue;
		if (bh.attributes & TFS_ATTR_CONTROL)
			continue;       /* a marker's key is its type, not a key of the topic */
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

size_t tfs_plog_damage(struct tfs_plog *pl, struct tfs_plog_damage *out, size_t cap)
{
	struct tfs_seglist *l = tfs__seglist_get(pl);
	size_t n = 0;

	for (int i = 0; i < l->count; i++) {
		const struct tfs_segment *seg = l->seg[i];
		for (uint32_t j = 0; j < seg->damage_count; j++, n++) {
			const struct tfs_seg_damage *d = &seg->damage[j];
			if (n < cap)
				out[n] = (struct tfs_plog_damage){ seg->base_offset, d->pos, d->end,
				                                   d->first, d->next, d->why };
		}
	}
	tfs__seglist_put(l);
	return n;
}

void tfs_plog_stats(struct tfs_plog *pl, struct tfs_plog_stats *st)
{
	struct tfs_seglist *l;

	memset(st, 0, sizeof(*st));
	pthread_rwlock_rdlock(&pl->lock);
	l = pl->segs;
	st->log_start_offset = tfs__plog_start(pl);
	st->log_end_offset = pl->end_offset;
	st->segments = l->count;
	for (int i = 0; i < l->count; i++)
		st->size_bytes += tfs_segment_size(l->seg[i]);
	st->active_segment_bytes = tfs_segment_size(l->seg[l->count - 1]);
	st->active_base_offset = l->seg[l->count - 1]->base_offset;
	pthread_rwlock_unlock(&pl->lock);
	tfs__plog_kd_lock(pl, false);
	st->live_keys = tfs_keydir_count(pl->kd);
	st->keys_failed = atomic_load(&pl->kd_failed);
	st->keydir_memory_bytes = (int64_t)tfs_keydir_memory_bytes(pl->kd);
	tfs__plog_kd_unlock(pl);
}

/* ---- windows (see partition_log.h) --------------------------------------------
 *
 * A point read used to decode the whole batch around its record through a cursor:
 * a 16 KiB read, then the batch again in full, its CRC, and every one of its
 * records parsed, for each key opened (a batch of a .put holds ~1,600 records).
 * A window does the I/O and the checks once: the batches read along with the
 * wanted one are checked too (CRC, then every record, exactly as a cursor would),
 * and each record's position is kept, so that a caller that keeps the window
 * pays a binary search and one record's parse for the next key in it.
 *
 * Finding the batch: the segment's index gives the position of the last indexed
 * batch at or below the offset; from there a read of WINDOW_READ_BYTES holds the
 * wanted batch unless batches are large. A batch that does not fit is either
 * skipped by its header alone (it ends below the offset) or read whole. The
 * window is the run of whole batches of the last read. The bytes of a sealed
 * segment's unreadable regions (found at open) are never used, as for cursors:
 * an offset past a region is looked for after it, one inside it is TFS_ECORRUPT. A batch that fails its checks does not spoil the window: copying
 * from it reports (and logs) the error, as a cursor reaching it would have.
 */

struct win_rec {
	tfs_offset_t offset;
	uint32_t pos;                   /* of its encoding in its batch's records region */
	uint32_t len;                   /* of its encoding, length varint included */
};

struct win_batch {
	struct tfs_batch_header h;
	tfs_pos_t seg_pos;              /* where it starts in the segment (log lines) */
	const uint8_t *region;          /* its records: in the window's bytes, or zbody */
	uint8_t *zbody;                 /* owned decompressed region (zstd), or NULL */
	uint32_t first_rec, rec_count;  /* its records in the window's recs[] */
	bool sorted;                    /* offsets strictly increase (Kafka's rule) */
	int err;                        /* 0, or what copying from it returns */
	const char *why;                /* the static reason of err */
};

struct tfs_plog_window {
	tfs_offset_t first, last;
	char *log_name;                 /* "<dir>/<base>.log" of its segment */
	uint8_t *bytes;
	size_t len;
	struct win_batch *batches;
	uint32_t batch_count;
	struct win_rec *recs;
	uint32_t rec_count, rec_cap;
	size_t memory;
};

void tfs_plog_window_free(struct tfs_plog_window *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->batch_count; i++)
		free(w->batches[i].zbody);
	free(w->batches);
	free(w->recs);
	free(w->bytes);
	free(w->log_name);
	free(w);
}

static int push_rec(struct tfs_plog_window *w, tfs_offset_t offset, size_t pos, size_t len)
{
	if (w->rec_count == w->rec_cap) {
		uint32_t ncap = w->rec_cap ? w->rec_cap * 2 : 64;
		struct win_rec *nr = realloc(w->recs, (size_t)ncap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		w->recs = nr;
		w->rec_cap = ncap;
	}
	w->recs[w->rec_count++] = (struct win_rec){ offset, (uint32_t)pos, (uint32_t)len };
	return 0;
}

/* Checks one whole batch of the window and indexes its records. Only -ENOMEM
 * fails; a bad batch is marked (b->err) and left out of the index. */
static int index_batch(struct tfs_plog_window *w, struct win_batch *b, const uint8_t *p,
                       size_t size, struct tfs_record_iter *it)
{
	const uint8_t *end;
	struct tfs_record r;
	tfs_offset_t prev = -1;
	int rc;

	b->first_rec = w->rec_count;
	b->sorted = true;
	rc = tfs_batch_check_crc(p, size, &b->why);
	if (rc == 0)
		rc = tfs_record_iter_reset(it, p, size, &b->why);
	if (rc == 0) {
		b->region = it->p;
		end = it->end;
		while ((rc = tfs_record_iter_next(it, &r, &b->why)) == 1) {
			if (r.offset <= prev)
				b->sorted = false;
			prev = r.offset;
			rc = push_rec(w, r.offset, (size_t)(r.raw.p - b->region), r.raw.len);
			if (rc < 0)
				break;
		}
		/* zstd: the records live in the iterator's buffer, reused for the next
		 * batch; keep a copy of exactly this region. */
		if (rc == 0 && b->region != p + TFS_BATCH_HEADER_BYTES && end > b->region) {
			size_t rlen = (size_t)(end - b->region);
			b->zbody = malloc(rlen);
			if (!b->zbody)
				rc = -ENOMEM;
			else {
				memcpy(b->zbody, b->region, rlen);
				b->region = b->zbody;
				w->memory += rlen;
			}
		}
	}
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		b->err = rc;
		w->rec_count = b->first_rec;    /* none of a bad batch's records is served */
	}
	b->rec_count = w->rec_count - b->first_rec;
	return 0;
}

/* Builds a window out of buf[0, len): n whole batches whose headers were decoded
 * already. Takes buf over (also on failure). */
static int window_build(struct tfs_plog *pl, struct tfs_segment *seg, tfs_pos_t pos,
                        uint8_t *buf, size_t len, uint32_t n, struct tfs_plog_window **out)
{
	struct tfs_plog_window *w = calloc(1, sizeof(*w));
	struct tfs_record_iter it;
	size_t q, name_len;
	int rc = 0;

	*out = NULL;
	if (!w) {
		free(buf);
		return -ENOMEM;
	}
	w->bytes = buf;
	w->len = len;
	name_len = strlen(pl->path) + TFS_SEGMENT_NAME_DIGITS + sizeof("/.log");
	w->batches = calloc(n, sizeof(*w->batches));
	w->log_name = malloc(name_len);
	if (!w->batches || !w->log_name) {
		tfs_plog_window_free(w);
		return -ENOMEM;
	}
	snprintf(w->log_name, name_len, "%s/%020" PRId64 ".log", pl->path, seg->base_offset);
	tfs_record_iter_init(&it);
	for (q = 0; q < len && rc == 0; w->batch_count++) {
		struct win_batch *b = &w->batches[w->batch_count];
		size_t size;

		(void)tfs_batch_header_decode(buf + q, len - q, &b->h, NULL);
		size = tfs_batch_size(&b->h);
		b->seg_pos = pos + (tfs_pos_t)q;
		rc = index_batch(w, b, buf + q, size, &it);
		q += size;
	}
	tfs_record_iter_release(&it);
	if (rc < 0) {
		tfs_plog_window_free(w);
		return rc;
	}
	w->first = w->batches[0].h.base_offset;
	w->last = tfs_batch_last_offset(&w->batches[w->batch_count - 1].h);
	w->memory += sizeof(*w) + len + name_len + (size_t)n * sizeof(*w->batches) +
	             (size_t)w->rec_cap * sizeof(*w->recs);
	*out = w;
	return 0;
}

int tfs_plog_window_read(struct tfs_plog *pl, tfs_offset_t offset, struct tfs_plog_window **out)
{
	struct tfs_seglist *l;
	struct tfs_segment *seg;
	tfs_pos_t pos, limit;
	uint8_t *buf = NULL;
	size_t cap = 0, need = 0;
	int idx, rc;

	*out = NULL;
	if (offset < 0)
		return -ENOENT;
	pthread_rwlock_rdlock(&pl->lock);   /* the list and the active segment's index */
	l = pl->segs;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	/* below the log start the records are gone (DeleteRecords), whatever a key
	 * looked up a moment ago said */
	idx = offset < tfs__plog_start(pl) ? -1 : tfs__seglist_find(l, offset);
	pos = idx < 0 ? 0 : tfs_segment_lookup(l->seg[idx], offset);
	pthread_rwlock_unlock(&pl->lock);
	if (idx < 0) {
		rc = -ENOENT;
		goto out;
	}
	seg = l->seg[idx];
	for (;;) {
		const struct tfs_seg_damage *d = damage_from(seg, pos);
		size_t want, end = 0, next_size = 0;
		uint32_t whole = 0;             /* batches in [0, end) */
		tfs_offset_t last_whole = -1, next_last = -1;
		ssize_t n;

		if (d && d->pos <= pos) {       /* an unreadable region found at open */
			if (offset >= d->next) {
				pos = d->end;
				need = 0;
				continue;
			}
			rc = seg_corrupt(pl, seg, d->pos, d->why);
			goto out;
		}
		limit = tfs_segment_size(seg);
		if (d && d->pos < limit)
			limit = d->pos;         /* nothing from there on is trusted */
		if (pos >= limit) {
			rc = -ENOENT;
			goto out;
		}
		if ((tfs_pos_t)need > limit - pos) {
			rc = seg_corrupt(pl, seg, pos, "batch extends past the segment");
			goto out;
		}
		want = need > WINDOW_READ_BYTES ? need : WINDOW_READ_BYTES;
		if ((tfs_pos_t)want > limit - pos)
			want = (size_t)(limit - pos);
		if (want > cap) {
			uint8_t *nb = realloc(buf, want);
			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = want;
		}
		n = tfs_segment_read(seg, buf, want, pos);
		if (n < 0) {
			rc = (int)n;
			goto out;
		}
		if ((size_t)n < want) {
			rc = seg_corrupt(pl, seg, pos, "segment shorter than its size");
			goto out;
		}
		while (end + TFS_BATCH_HEADER_BYTES <= want) {
			struct tfs_batch_frame f;

			tfs_batch_frame(buf + end, want - end, limit - pos - (tfs_pos_t)end,
			                pos + (tfs_pos_t)end, &f);
			rc = f.unsupported ? TFS_EUNSUPPORTED : f.fate == TFS_FATE_GOOD ? 0 : TFS_ECORRUPT;
			if (rc < 0 && last_whole >= offset) {
				rc = 0;        /* the window ends before a bad header past the offset; */
				break;         /* a reader that gets there reports it */
			}
			if (rc < 0) {
				if (rc != TFS_EUNSUPPORTED)
					rc = seg_corrupt(pl, seg, f.pos, f.why);
				goto out;
			}
			if (f.size > want - end) {
				next_size = f.size;
				next_last = tfs_batch_last_offset(&f.h);
				break;
			}
			end += f.size;
			whole++;
			last_whole = tfs_batch_last_offset(&f.h);
		}
		if (end > 0 && last_whole >= offset) {
			if (end < cap / 2) {            /* a big chunk around small batches */
				uint8_t *nb = realloc(buf, end);
				if (nb)
					buf = nb;
			}
			rc = window_build(pl, seg, pos, buf, end, whole, out);
			buf = NULL;
			goto out;
		}
		/* The offset lies past every whole batch read. */
		if (next_size) {
			pos += (tfs_pos_t)end;
			if (next_last < offset)
				pos += (tfs_pos_t)next_size;    /* skipped by its header alone */
			else
				need = next_size;               /* read it whole */
			continue;
		}
		if (end == 0) {
			rc = seg_corrupt(pl, seg, pos, "truncated batch header");
			goto out;
		}
		pos += (tfs_pos_t)end;
		need = 0;
	}
out:
	free(buf);
	tfs__seglist_put(l);
	return rc;
}

void tfs_plog_window_range(const struct tfs_plog_window *w, tfs_offset_t *first,
                           tfs_offset_t *last)
{
	*first = w->first;
	*last = w->last;
}

size_t tfs_plog_window_memory(const struct tfs_plog_window *w)
{
	return w->memory;
}

int tfs_plog_window_copy(const struct tfs_plog_window *w, tfs_offset_t offset,
                         struct tfs_record_copy *out)
{
	const struct win_batch *b = NULL;
	const struct win_rec *rec = NULL;
	struct tfs_record r;
	const char *why = NULL;
	uint32_t lo, hi;
	int rc;

	if (offset < w->first || offset > w->last)
		return -ENOENT;
	lo = 0;
	hi = w->batch_count;
	while (lo < hi) {                       /* the last batch with base <= offset */
		uint32_t mid = lo + (hi - lo) / 2;
		if (w->batches[mid].h.base_offset <= offset) {
			b = &w->batches[mid];
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (!b || tfs_batch_last_offset(&b->h) < offset)
		return -ENOENT;                 /* a gap the cleaner left */
	if (b->err) {
		tfs_log_error("plog", "corrupt batch in %s at position %" PRId64 ": %s",
		              w->log_name, b->seg_pos, b->why ? b->why : "invalid");
		return b->err;
	}
	lo = b->first_rec;
	hi = b->first_rec + b->rec_count;
	if (b->sorted) {
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (w->recs[mid].offset < offset)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < b->first_rec + b->rec_count && w->recs[lo].offset == offset)
			rec = &w->recs[lo];
	} else {
		for (; lo < hi && !rec; lo++)
			if (w->recs[lo].offset == offset)
				rec = &w->recs[lo];
	}
	if (!rec)
		return -ENOENT;
	rc = tfs_record_decode_one(&b->h, b->region + rec->pos, rec->len, &r, &why);
	if (rc < 0) {
		tfs_log_error("plog", "corrupt batch in %s at position %" PRId64 ": %s",
		              w->log_name, b->seg_pos, why ? why : "invalid");
		return rc;
	}
	return copy_record(&r, &b->h, out);
}
