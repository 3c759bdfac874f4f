/* cleaner_reader.c - the cleaner's sequential reader of a segment, batch by batch
 * (struct tfs__seg_reader, cleaner_internal.h): the one batch reader
 * (engine/format/batch_reader.h) over the segment's committed bytes, its reads
 * counted by the throttler; a batch that is not GOOD is TFS_ECORRUPT. Used by the
 * pass (cleaner_map.c, cleaner_pass.c), the transaction scan (cleaner_txn.c) and
 * lag.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"
#include "engine/format/batch_reader.h"
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

/* The shared reader's source: the segment, each read counted and throttled. */
static ssize_t reader_read(void *arg, void *buf, size_t len, tfs_pos_t pos)
{
	struct tfs__seg_reader *r = arg;
	ssize_t n = tfs_segment_read(r->seg, buf, len, pos);

	if (n > 0 && r->bytes_read)
		*r->bytes_read += n;
	if (n > 0 && r->c)
		tfs__throttle(tfs__cleaner_throttler(r->c), n, r->abort);
	return n;
}

/* The window and position live in struct tfs__seg_reader; each call lends them to
 * the one batch reader (engine/format/batch_reader.h), which frames, bounds and
 * checks every batch as the open-time scan does. */
int tfs__seg_reader_next(struct tfs__seg_reader *r, struct tfs_batch_header *h,
                         const uint8_t **batch, tfs_pos_t *at)
{
	struct tfs_batch_reader br;
	struct tfs_batch_frame f;
	int rc, load;

	if (r->seg->corrupt_at >= 0 && r->pos >= r->seg->corrupt_at)
		return tfs__seg_reader_corrupt(r, "past a corrupt batch found at open");
	tfs_batch_reader_init(&br, reader_read, r, r->pos, r->limit, r->chunk, r->buf, r->cap);
	br.win_start = r->win_start;
	br.win_len = r->win_len;
	rc = tfs_batch_reader_frame(&br, &f);
	if (rc > 0 && f.fate == TFS_FATE_GOOD && (load = tfs_batch_reader_load(&br, &f)) < 0)
		rc = load;
	r->win_start = br.win_start;
	r->win_len = br.win_len;
	if (rc <= 0)
		return rc;
	if (f.unsupported)
		return TFS_EUNSUPPORTED;
	if (f.fate != TFS_FATE_GOOD)
		return tfs__seg_reader_corrupt(r, f.why);
	*h = f.h;
	*batch = f.bytes;
	*at = r->pos;
	r->pos += (tfs_pos_t)f.size;
	return 1;
}
