/* batch_reader.h - THE way a segment file is read batch by batch: frame the batch
 * at a position (decode its header, bound its declared size), read it whole, check
 * its CRC, and say which of three fates it has. The mount's open-time scan
 * (log_recovery.c), its cursors and point reads (plog_read.c), fetches
 * (plog_fetch.c), the cleaner's reader (cleaner_reader.c) and topicctl's dump,
 * verify, estimate and repair (engine/inspect/) all frame batches here, so that
 * none of them can call a batch good that another calls bad (docs/engine.md §6,
 * docs/format.md §8).
 *
 * Owns: a reader owns its window buffer unless it was given the caller's; it
 * borrows its source (a read function and its argument).
 *
 * The rule. A batch is framed by its first 12 bytes (base offset, length) and its
 * magic byte; the CRC-32C covers everything from byte 21 on, but not the base
 * offset, the length, the leader epoch or the magic (batch_codec.h). So:
 *
 *   GOOD  the magic is 2, the length frames a batch inside the file, the header
 *         decodes, the CRC matches, every record decodes, and the batch's offsets
 *         lie at or above the smallest offset allowed (past the previous readable
 *         batch and the segment's own base) and below the next segment's base.
 *   SKIP  the framing holds (magic 2, a length that ends inside the file and
 *         within TFS_MAX_BATCH_BYTES) but something else fails. Its records are
 *         unreadable; the next batch starts right after it and is judged on its
 *         own.
 *   REST  the magic or the length is garbage, or the file ends inside the batch:
 *         nothing from here to the end of the file can be framed.
 *
 * The reader decides the framing and the CRC; records and offsets are the
 * caller's to check (tfs_batch_fate_offsets), as only it knows the segment's
 * neighbours and decodes the records anyway.
 *
 * A run of SKIP batches, and a REST with everything after it, is one unreadable
 * region: its bytes [pos, end) and the offsets [first, next) that may have been
 * there, first being the smallest offset allowed where it starts and next the
 * base of the first GOOD batch after it (or of the next segment). A batch whose
 * damage sits in its base offset field can pass as GOOD with other offsets, as in
 * Kafka; the offset checks keep the order of the log, so that no record can pass
 * for newer than a record it precedes.
 *
 * What follows from the fate (README "Corruption in a sealed segment"): in the
 * last (active) segment the first batch that is not GOOD starts a torn tail,
 * truncated at open; in a sealed segment nothing is cut: the region reads EIO, a
 * key whose newest readable record precedes a region reads EIO, and only
 * `topicctl repair` truncates. Readers of committed bytes (cursors, the cleaner)
 * treat any batch that is not GOOD as TFS_ECORRUPT.
 *
 * Threads: one reader per thread; tfs_batch_frame is reentrant.
 * Errors: 0 or a negative errno (the source's read errors, -ENOMEM); a bad batch
 * is a fate with a static reason, never an error. */
#ifndef TFS_BATCH_READER_H
#define TFS_BATCH_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/format/batch_codec.h"
#include "engine/ondisk.h"
#include "engine/types.h"

/* Bytes of the header that frame a batch: base offset, length, epoch, magic. */
#define TFS_BATCH_FRAME_BYTES 17

enum tfs_batch_fate {
	TFS_FATE_GOOD = 0,
	TFS_FATE_SKIP,
	TFS_FATE_REST,
};

/* One batch as framed at pos. */
struct tfs_batch_frame {
	tfs_pos_t pos;              /* where it starts in the file */
	size_t size;                /* 12 + length; 0 when it cannot be framed (REST) */
	enum tfs_batch_fate fate;   /* GOOD until a check fails */
	const char *why;            /* static reason unless GOOD */
	bool header_ok;             /* h holds the decoded 61-byte header (GOOD always;
	                             * SKIP and REST when only the rest failed) */
	bool unsupported;           /* magic 0 or 1: another format, not garbage (REST) */
	bool torn;                  /* REST because the file ends inside the batch */
	bool over_bound;            /* REST only for its size: magic 2 and the whole of
	                             * it in the file, but above TFS_MAX_BATCH_BYTES */
	bool checked;               /* the CRC was checked (GOOD or SKIP after it) */
	struct tfs_batch_header h;  /* as decoded; meaningful when header_ok */
	const uint8_t *bytes;       /* the whole batch once loaded, else NULL; borrows
	                             * the reader's window until its next call */
};

/* Frames the batch at the start of p: avail bytes there, left bytes from there to
 * the end of the file (or to the limit the caller trusts). Fills *f (bytes NULL,
 * not checked). GOOD means only that the framing and the header hold. */
void tfs_batch_frame(const uint8_t *p, size_t avail, int64_t left, tfs_pos_t pos,
                     struct tfs_batch_frame *f);
/* Checks the CRC of a framed GOOD batch whose f->size bytes are at p: stays GOOD,
 * or becomes SKIP with the reason. Sets f->bytes = p. */
void tfs_batch_frame_check(struct tfs_batch_frame *f, const uint8_t *p);

/* The offset checks of a framed batch whose header decoded and whose CRC and
 * records check out: expect is the smallest offset allowed, next_base the next
 * segment's base (INT64_MAX for the last segment). GOOD, or SKIP with *why. */
static inline enum tfs_batch_fate tfs_batch_fate_offsets(const struct tfs_batch_header *h,
                                                         tfs_offset_t expect,
                                                         tfs_offset_t next_base, const char **why)
{
	if (h->base_offset < expect) {
		*why = "batch offsets go backwards";
		return TFS_FATE_SKIP;
	}
	if (tfs_batch_last_offset(h) >= next_base) {
		*why = "batch holds offsets at or past the next segment's base offset";
		return TFS_FATE_SKIP;
	}
	return TFS_FATE_GOOD;
}

/* ---- the sequential reader ---- */

/* Reads up to len bytes at pos into buf: the bytes read (fewer only at the end of
 * the file) or a negative errno. */
typedef ssize_t (*tfs_batch_read_fn)(void *arg, void *buf, size_t len, tfs_pos_t pos);

/* Batch by batch through a window of the file, refilled chunk bytes at a time (a
 * batch larger than chunk is read whole); a batch cut by the end of one read
 * moves to the front of the window, so that no byte is read twice. Embedded;
 * never copied once initialised (buf may point at own). */
struct tfs_batch_reader {
	tfs_batch_read_fn read;
	void *arg;
	tfs_pos_t pos;              /* where the next batch starts */
	tfs_pos_t limit;            /* bytes [0, limit) are read; nothing past it */
	size_t chunk;
	uint8_t **buf;              /* the window's memory: the caller's, or &own */
	size_t *cap;
	tfs_pos_t win_start;        /* file bytes [win_start, win_start + win_len) */
	size_t win_len;
	uint8_t *own;
	size_t own_cap;
};

/* Starts at from, reading no byte at or past limit. buf/cap: a buffer the caller
 * keeps across readers (grown with realloc; stays the caller's), or NULL for one
 * of the reader's own (tfs_batch_reader_release frees it). */
void tfs_batch_reader_init(struct tfs_batch_reader *r, tfs_batch_read_fn read, void *arg,
                           tfs_pos_t from, tfs_pos_t limit, size_t chunk, uint8_t **buf,
                           size_t *cap);
/* Frees the reader's own buffer, if any. NULL ok. */
void tfs_batch_reader_release(struct tfs_batch_reader *r);
/* Reads another file (or the same one again) from from up to limit, keeping the
 * buffer; what the window held is dropped. */
void tfs_batch_reader_retarget(struct tfs_batch_reader *r, tfs_batch_read_fn read, void *arg,
                               tfs_pos_t from, tfs_pos_t limit);
/* The next batch starts at pos (a batch start the caller knows: an index entry,
 * the end of an unreadable region). The window is kept. */
void tfs_batch_reader_seek(struct tfs_batch_reader *r, tfs_pos_t pos);

/* Frames the batch at the reader's position, reading its header only: 1 with *f,
 * 0 at the limit, or a negative errno. The position does not move. A read that
 * comes back short (the file shrank) is REST. */
int tfs_batch_reader_frame(struct tfs_batch_reader *r, struct tfs_batch_frame *f);
/* Reads the whole of a framed batch (size > 0) into the window (f->bytes) and,
 * if it is GOOD, checks its CRC. 0, or a negative errno; a short read is REST. */
int tfs_batch_reader_load(struct tfs_batch_reader *r, struct tfs_batch_frame *f);
/* Moves past a framed batch (to the limit after a REST), without reading it. */
void tfs_batch_reader_skip(struct tfs_batch_reader *r, const struct tfs_batch_frame *f);
/* Frame, load and skip in one: 1 with *f (bytes set unless its size is 0), 0 at
 * the limit, or a negative errno. After a REST the reader is at its limit. */
int tfs_batch_reader_next(struct tfs_batch_reader *r, struct tfs_batch_frame *f);

#endif
