/* cleaner_reader.c - the cleaner's sequential reader of a segment, batch by batch
 * (struct tfs__seg_reader, cleaner_internal.h): a window of the segment's bytes
 * refilled in chunks counted by the throttler, each batch's header bounded and its
 * CRC checked before it is handed out. Used by the pass (cleaner_pass.c) and the
 * transaction scan. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

void tfs__seg_reader_init(struct tfs__seg_reader *r, struct tfs_segment *seg, tfs_pos_t from,
                          uint8_t **buf, size_t *cap, size_t chunk, struct tfs_cleaner *c,
                          int64_t *bytes_read)
{
	memset(r, 0, sizeof(*r));
	r->seg = seg;
	r->pos = from;
	r->limit = tfs_segment_size(seg);
	r->buf = buf;
	r->cap = cap;
	r->chunk = chunk;
	r->c = c;
	r->bytes_read = bytes_read;
}

int tfs__seg_reader_corrupt(struct tfs__seg_reader *r, const char *why)
{
	tfs_log_error("cleaner", "corrupt batch in %s/%020" PRId64 ".log at position %" PRId64 ": %s",
	              r->seg->dir, r->seg->base_offset, r->pos, why ? why : "invalid");
	if (r->why)
		snprintf(r->why, r->why_cap, "corrupt batch in %s/%020" PRId64 ".log at position %"
		         PRId64 ": %s", r->seg->dir, r->seg->base_offset, r->pos, why ? why : "invalid");
	return TFS_ECORRUPT;
}

/* Makes [pos, pos + need) available in the window; returns a pointer to pos. The
 * part of it already in the window (a batch cut by the end of the last read) moves
 * to the front of the buffer, so no byte of the segment is read twice. */
static const uint8_t *reader_fill(struct tfs__seg_reader *r, size_t need, int *err)
{
	size_t want = need > r->chunk ? need : r->chunk, keep = 0;
	tfs_pos_t win_end = r->win_start + (tfs_pos_t)r->win_len;
	ssize_t n;

	if (r->pos >= r->win_start && r->pos + (tfs_pos_t)need <= win_end)
		return *r->buf + (r->pos - r->win_start);
	if ((tfs_pos_t)want > r->limit - r->pos)
		want = (size_t)(r->limit - r->pos);
	if (r->pos >= r->win_start && r->pos < win_end)
		keep = (size_t)(win_end - r->pos);    /* < need <= want */
	if (want > *r->cap) {
		uint8_t *p = realloc(*r->buf, want);
		if (!p) {
			*err = -ENOMEM;
			return NULL;
		}
		*r->buf = p;
		*r->cap = want;
	}
	if (keep > 0)
		memmove(*r->buf, *r->buf + (r->pos - r->win_start), keep);
	n = tfs_segment_read(r->seg, *r->buf + keep, want - keep, r->pos + (tfs_pos_t)keep);
	if (n < 0) {
		*err = (int)n;
		r->win_len = 0;
		return NULL;
	}
	r->win_start = r->pos;
	r->win_len = keep + (size_t)n;
	if (r->bytes_read)
		*r->bytes_read += n;
	if (r->c)
		tfs__throttle(tfs__cleaner_throttler(r->c), n, r->abort);
	if (r->win_len < need) {
		*err = tfs__seg_reader_corrupt(r, "segment shorter than its size");
		return NULL;
	}
	return *r->buf;
}

int tfs__seg_reader_next(struct tfs__seg_reader *r, struct tfs_batch_header *h,
                         const uint8_t **batch, tfs_pos_t *at)
{
	const uint8_t *p;
	const char *why = NULL;
	size_t size;
	int rc, err = 0;

	if (r->seg->corrupt_at >= 0 && r->pos >= r->seg->corrupt_at)
		return tfs__seg_reader_corrupt(r, "past a corrupt batch found at open");
	if (r->pos >= r->limit)
		return 0;
	if (r->limit - r->pos < TFS_BATCH_HEADER_BYTES)
		return tfs__seg_reader_corrupt(r, "truncated batch header");
	p = reader_fill(r, TFS_BATCH_HEADER_BYTES, &err);
	if (!p)
		return err;
	rc = tfs_batch_header_decode(p, TFS_BATCH_HEADER_BYTES, h, &why);
	if (rc == TFS_EUNSUPPORTED)
		return rc;
	if (rc < 0)
		return tfs__seg_reader_corrupt(r, why);
	size = tfs_batch_size(h);
	if (size > TFS_MAX_BATCH_BYTES || (tfs_pos_t)size > r->limit - r->pos)
		return tfs__seg_reader_corrupt(r, "batch extends past the segment");
	p = reader_fill(r, size, &err);
	if (!p)
		return err;
	rc = tfs_batch_check_crc(p, size, &why);
	if (rc < 0)
		return rc == TFS_EUNSUPPORTED ? rc : tfs__seg_reader_corrupt(r, why);
	*batch = p;
	*at = r->pos;
	r->pos += (tfs_pos_t)size;
	return 1;
}
