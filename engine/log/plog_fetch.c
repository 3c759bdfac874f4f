/* plog_fetch.c - batches as stored, for consumers (see plog_fetch.h). */
#include "engine/log/plog_fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/format/batch_reader.h"
#include "engine/log/plog_internal.h"
#include "engine/log/segment.h"
#include "io/log.h"

#define SCAN_CHUNK (64u << 10)          /* headers are read a chunk at a time */

/* Batch headers of one segment read through a buffer of SCAN_CHUNK bytes. */
struct scan {
	struct tfs_segment *seg;
	uint8_t *buf;
	tfs_pos_t at;                       /* file position of buf[0] */
	size_t have;
};

/* Decodes the header of the batch at pos (< end) into *h. */
static int scan_header(struct scan *s, tfs_pos_t pos, tfs_pos_t end, struct tfs_batch_header *h)
{
	struct tfs_batch_frame f;

	if (pos < s->at || pos + TFS_BATCH_HEADER_BYTES > s->at + (tfs_pos_t)s->have) {
		size_t want = SCAN_CHUNK;
		ssize_t n;
		if ((tfs_pos_t)want > end - pos)
			want = (size_t)(end - pos);
		n = tfs_segment_read(s->seg, s->buf, want, pos);
		if (n < 0)
			return (int)n;
		s->at = pos;
		s->have = (size_t)n;
	}
	tfs_batch_frame(s->buf + (pos - s->at), s->have - (size_t)(pos - s->at), end - pos, pos, &f);
	if (f.fate != TFS_FATE_GOOD) {
		tfs_log_error("plog", "segment %020lld.log of %s: no batch header at byte %lld: %s",
		              (long long)s->seg->base_offset, s->seg->dir, (long long)pos,
		              f.why ? f.why : "invalid");
		return TFS_ECORRUPT;
	}
	*h = f.h;
	return 0;
}

void tfs_plog_fetch_release(struct tfs_plog_fetch *f)
{
	for (int i = 0; i < f->nspans; i++)
		tfs_segment_unref(f->span[i].seg);
	f->nspans = 0;
	f->bytes = 0;
}

/* The batches from offset from on, up to the high watermark or, with
 * committed, the last stable offset. */
static int fetch(struct tfs_plog *pl, tfs_offset_t from, size_t max_bytes, bool min_one,
                 bool committed, struct tfs_plog_fetch *out)
{
	tfs_offset_t bound, unstable;
	struct tfs_seglist *l;
	struct scan sc = { 0 };
	tfs_pos_t active_size, pos;
	bool done = false;
	int idx, rc = 0;

	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&pl->lock);   /* (3): the watermark with the sizes */
	l = pl->segs;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	out->high_watermark = pl->end_offset;
	unstable = tfs_pstate_first_unstable(pl->pstate);   /* read with the watermark */
	out->last_stable = unstable >= 0 && unstable < pl->end_offset ? unstable : pl->end_offset;
	bound = committed ? out->last_stable : out->high_watermark;
	active_size = tfs_segment_size(l->seg[l->count - 1]);
	idx = tfs__seglist_find(l, from);
	if (idx < 0)
		idx = 0;
	pos = tfs_segment_lookup(l->seg[idx], from);
	out->log_start = tfs__plog_start(pl);
	pthread_rwlock_unlock(&pl->lock);
	out->next = from;
	if (from < out->log_start || from > out->high_watermark) {
		tfs__seglist_put(l);
		return -ERANGE;
	}
	if (from >= bound) {
		tfs__seglist_put(l);
		return 0;
	}
	sc.buf = malloc(SCAN_CHUNK);
	if (!sc.buf) {
		tfs__seglist_put(l);
		return -ENOMEM;
	}
	for (; idx < l->count && !done && out->nspans < TFS_FETCH_SPANS_MAX; idx++, pos = 0) {
		struct tfs_segment *seg = l->seg[idx];
		tfs_pos_t end = idx == l->count - 1 ? active_size : tfs_segment_size(seg);
		tfs_pos_t start = -1;
		size_t len = 0;

		if (seg->corrupt_at >= 0 && end > seg->corrupt_at)
			end = seg->corrupt_at;      /* (4) */
		sc.seg = seg;
		sc.have = 0;
		while (pos + TFS_BATCH_HEADER_BYTES <= end) {
			struct tfs_batch_header h = { .base_offset = 0 };  /* set by scan_header */
			size_t size;

			rc = scan_header(&sc, pos, end, &h);
			if (rc < 0)
				goto out;
			size = tfs_batch_size(&h);
			if (tfs_batch_last_offset(&h) < from) {
				pos += (tfs_pos_t)size;     /* (1): before the wanted offset */
				continue;
			}
			if (h.base_offset >= bound) {
				done = true;
				break;
			}
			if (out->bytes + len + size > max_bytes && !(min_one && out->bytes + len == 0)) {
				done = true;                /* (2) */
				break;
			}
			if (start < 0)
				start = pos;
			len += size;
			out->next = tfs_batch_last_offset(&h) + 1;
			pos += (tfs_pos_t)size;
		}
		if (len) {
			out->span[out->nspans++] = (struct tfs_plog_span){ tfs_segment_ref(seg), start, len };
			out->bytes += len;
		}
	}
out:
	free(sc.buf);
	if (rc < 0)
		tfs_plog_fetch_release(out);
	tfs__seglist_put(l);
	return rc;
}

int tfs_plog_fetch(struct tfs_plog *pl, tfs_offset_t from, size_t max_bytes, bool min_one,
                   struct tfs_plog_fetch *out)
{
	return fetch(pl, from, max_bytes, min_one, false, out);
}

int tfs_plog_fetch_committed(struct tfs_plog *pl, tfs_offset_t from, size_t max_bytes,
                             bool min_one, struct tfs_plog_fetch *out)
{
	return fetch(pl, from, max_bytes, min_one, true, out);
}

int tfs_plog_span_fd(const struct tfs_plog_span *s)
{
	int fd = tfs_segment_fd_get(s->seg), dupfd;

	if (fd < 0)
		return fd;
	dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	tfs_segment_fd_put(s->seg);
	return dupfd < 0 ? -errno : dupfd;
}

int tfs_plog_span_read(const struct tfs_plog_span *s, void *buf)
{
	ssize_t n = tfs_segment_read(s->seg, buf, s->len, s->pos);

	if (n < 0)
		return (int)n;
	return (size_t)n == s->len ? 0 : -EIO;
}

int tfs_plog_offset_for_time(struct tfs_plog *pl, int64_t ts, tfs_offset_t *offset,
                             int64_t *timestamp)
{
	struct tfs_plog_cursor *c = NULL;
	struct tfs_seglist *l;
	tfs_offset_t hw, from = -1;
	struct tfs_record r;
	int rc;

	pthread_rwlock_rdlock(&pl->lock);   /* the active segment's max timestamp moves */
	l = pl->segs;
	hw = pl->end_offset;
	/* Kafka's fetchOffsetByTimestamp: the first segment with a record that new,
	 * from where its time index says the search may start */
	for (int i = 0; i < l->count && from < 0; i++)
		if (l->seg[i]->max_timestamp >= ts)
			from = tfs_segment_time_lookup(l->seg[i], ts);
	pthread_rwlock_unlock(&pl->lock);
	if (from < 0)
		return -ENOENT;
	rc = tfs_plog_cursor_open(pl, from, &c);
	if (rc < 0)
		return rc;
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1) {
		if (r.offset >= hw)
			break;
		if (r.timestamp >= ts) {
			*offset = r.offset;
			*timestamp = r.timestamp;
			tfs_plog_cursor_close(c);
			return 0;
		}
	}
	tfs_plog_cursor_close(c);
	return rc < 0 ? rc : -ENOENT;
}
