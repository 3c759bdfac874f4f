/* batch_reader.c - framing, bounding and checking batches of a segment file, and
 * reading them in order (batch_reader.h). */
#include "engine/format/batch_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SHORT_READ_WHY "the file is shorter than its size"

void tfs_batch_frame(const uint8_t *p, size_t avail, int64_t left, tfs_pos_t pos,
                     struct tfs_batch_frame *f)
{
	uint64_t size;
	int hrc;

	memset(f, 0, sizeof(*f));
	f->pos = pos;
	f->fate = TFS_FATE_REST;
	hrc = tfs_batch_header_decode(p, avail, &f->h, &f->why);
	f->header_ok = hrc == 0;
	if (hrc == TFS_EUNSUPPORTED) {
		f->unsupported = true;
		return;
	}
	if (left < TFS_BATCH_FRAME_BYTES || avail < TFS_BATCH_FRAME_BYTES) {
		f->why = "the file ends inside a batch header";
		f->torn = left < TFS_BATCH_FRAME_BYTES;
		return;
	}
	if (p[16] != TFS_BATCH_MAGIC) {
		f->why = "bad magic byte";
		return;
	}
	size = ((uint64_t)p[8] << 24 | (uint64_t)p[9] << 16 | (uint64_t)p[10] << 8 | p[11]) +
	       TFS_BATCH_LOG_OVERHEAD;
	if (size > (uint64_t)INT32_MAX + TFS_BATCH_LOG_OVERHEAD || size < TFS_BATCH_HEADER_BYTES) {
		f->why = "batch length below the header size";
		return;
	}
	if (size > TFS_MAX_BATCH_BYTES) {
		f->why = "batch length above 256 MiB";
		f->over_bound = (int64_t)size <= left;
		return;
	}
	if ((int64_t)size > left) {
		f->why = "the file ends inside the batch";
		f->torn = true;
		return;
	}
	if (hrc == -EAGAIN) {
		f->why = SHORT_READ_WHY;        /* framed, but the header did not come */
		return;
	}
	f->size = (size_t)size;
	if (hrc < 0) {
		f->fate = TFS_FATE_SKIP;        /* framed, but header fields are bad */
		return;
	}
	f->fate = TFS_FATE_GOOD;
	f->why = NULL;
}

void tfs_batch_frame_check(struct tfs_batch_frame *f, const uint8_t *p)
{
	f->bytes = p;
	f->checked = true;
	if (f->fate == TFS_FATE_GOOD && tfs_batch_check_crc(p, f->size, &f->why) < 0)
		f->fate = TFS_FATE_SKIP;
}

void tfs_batch_reader_init(struct tfs_batch_reader *r, tfs_batch_read_fn read, void *arg,
                           tfs_pos_t from, tfs_pos_t limit, size_t chunk, uint8_t **buf,
                           size_t *cap)
{
	memset(r, 0, sizeof(*r));
	r->chunk = chunk;
	r->buf = buf ? buf : &r->own;
	r->cap = buf ? cap : &r->own_cap;
	tfs_batch_reader_retarget(r, read, arg, from, limit);
}

void tfs_batch_reader_release(struct tfs_batch_reader *r)
{
	if (!r)
		return;
	free(r->own);
	r->own = NULL;
	r->own_cap = 0;
}

void tfs_batch_reader_retarget(struct tfs_batch_reader *r, tfs_batch_read_fn read, void *arg,
                               tfs_pos_t from, tfs_pos_t limit)
{
	r->read = read;
	r->arg = arg;
	r->pos = from;
	r->limit = limit;
	r->win_start = 0;
	r->win_len = 0;
}

void tfs_batch_reader_seek(struct tfs_batch_reader *r, tfs_pos_t pos)
{
	r->pos = pos;
}

/* Makes [pos, pos + need) available in the window (need <= limit - pos); *got is
 * how much of it is there (less only when the file is shorter than the limit).
 * What the window holds from pos on moves to the front of the buffer first. */
static int fill(struct tfs_batch_reader *r, size_t need, const uint8_t **out, size_t *got)
{
	tfs_pos_t pos = r->pos, win_end = r->win_start + (tfs_pos_t)r->win_len;
	size_t want = need > r->chunk ? need : r->chunk, keep = 0;

	if (pos >= r->win_start && pos + (tfs_pos_t)need <= win_end) {
		*out = *r->buf + (pos - r->win_start);
		*got = need;
		return 0;
	}
	if ((tfs_pos_t)want > r->limit - pos)
		want = (size_t)(r->limit - pos);
	if (pos >= r->win_start && pos < win_end)
		keep = (size_t)(win_end - pos);         /* < need <= want */
	if (want > *r->cap) {
		uint8_t *p = realloc(*r->buf, want);
		if (!p)
			return -ENOMEM;
		*r->buf = p;
		*r->cap = want;
	}
	if (keep > 0)
		memmove(*r->buf, *r->buf + (pos - r->win_start), keep);
	r->win_start = pos;
	r->win_len = keep;
	while (r->win_len < want) {
		ssize_t n = r->read(r->arg, *r->buf + r->win_len, want - r->win_len,
		                    pos + (tfs_pos_t)r->win_len);
		if (n < 0) {
			r->win_len = 0;
			return (int)n;
		}
		if (n == 0)
			break;
		r->win_len += (size_t)n;
	}
	*out = *r->buf;
	*got = r->win_len < need ? r->win_len : need;
	return 0;
}

int tfs_batch_reader_frame(struct tfs_batch_reader *r, struct tfs_batch_frame *f)
{
	int64_t left = r->limit - r->pos;
	size_t head = left < TFS_BATCH_HEADER_BYTES ? (size_t)left : TFS_BATCH_HEADER_BYTES, got;
	const uint8_t *p;
	int rc;

	if (r->pos >= r->limit)
		return 0;
	rc = fill(r, head, &p, &got);
	if (rc < 0)
		return rc;
	tfs_batch_frame(p, got, left, r->pos, f);
	if (got < head && !f->unsupported) {
		f->fate = TFS_FATE_REST;
		f->size = 0;
		f->torn = false;
		f->over_bound = false;
		f->header_ok = false;
		f->why = SHORT_READ_WHY;
	}
	return 1;
}

int tfs_batch_reader_load(struct tfs_batch_reader *r, struct tfs_batch_frame *f)
{
	const uint8_t *p;
	size_t got;
	int rc;

	if (f->size == 0)
		return 0;
	r->pos = f->pos;
	rc = fill(r, f->size, &p, &got);
	if (rc < 0)
		return rc;
	if (got < f->size) {
		f->fate = TFS_FATE_REST;
		f->why = SHORT_READ_WHY;
		return 0;
	}
	tfs_batch_frame_check(f, p);
	return 0;
}

void tfs_batch_reader_skip(struct tfs_batch_reader *r, const struct tfs_batch_frame *f)
{
	r->pos = f->fate == TFS_FATE_REST || f->size == 0 ? r->limit : f->pos + (tfs_pos_t)f->size;
}

int tfs_batch_reader_next(struct tfs_batch_reader *r, struct tfs_batch_frame *f)
{
	int rc = tfs_batch_reader_frame(r, f);

	if (rc <= 0)
		return rc;
	rc = tfs_batch_reader_load(r, f);
	if (rc < 0)
		return rc;
	tfs_batch_reader_skip(r, f);
	return 1;
}
