/* plog_fetch.h - batches as they are stored, for a consumer: the byte ranges of a
 * partition's segment files that hold the batches from an offset on, and the
 * offset of the first record at or after a timestamp.
 *
 * What a fetch returns (Kafka's rules for a consumer's read):
 *   (1) the first batch returned is the first batch on disk whose last offset is
 *       >= the wanted offset: an offset inside a batch, or inside a gap the
 *       cleaner left, is answered from the start of the batch that holds it or
 *       comes next (crossing into the next segment when the gap ends one);
 *   (2) only whole batches, as they are in the file, up to max_bytes; the first
 *       is whole even when it alone is larger (min_one);
 *   (3) nothing at or past the high watermark returned with it: the watermark and
 *       the segment sizes are read together under the partition's lock, and a
 *       segment's size counts only batches written whole (partition_log.h (3));
 *   (4) an unreadable region of a sealed segment (engine/format/batch_reader.h) ends the spans of
 *       that segment; the fetch goes on at the next segment.
 *
 * Owns: the segment references of its spans until tfs_plog_fetch_release; the
 * spans stay readable after a cleaner swap (a descriptor taken with
 * tfs_plog_span_fd keeps the file it opened, whatever its name becomes).
 * Threads: any. Errors: 0 or a negative errno / TFS_E* code.
 */
#ifndef TFS_PLOG_FETCH_H
#define TFS_PLOG_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

struct tfs_plog;
struct tfs_segment;

#define TFS_FETCH_SPANS_MAX 8          /* segments one fetch may cross */

struct tfs_plog_span {
	struct tfs_segment *seg;           /* a reference */
	tfs_pos_t pos;                     /* bytes [pos, pos + len) of its .log */
	size_t len;
};

struct tfs_plog_fetch {
	tfs_offset_t log_start;            /* first offset still on disk */
	tfs_offset_t high_watermark;       /* next offset to assign */
	tfs_offset_t last_stable;          /* first offset of the oldest open transaction,
	                                    * else high_watermark (partition_log.h) */
	tfs_offset_t next;                 /* after the last batch returned (from when none) */
	size_t bytes;                      /* sum of the spans' lengths */
	int nspans;
	struct tfs_plog_span span[TFS_FETCH_SPANS_MAX];
};

/* Fills *out with the spans of whole batches from offset from on, at most
 * max_bytes of them (the first batch whole even past it when min_one). from ==
 * the high watermark gives no span. -ERANGE (not logged) when from is below the
 * log start or above the high watermark (out->log_start and high_watermark are
 * still set); TFS_ECORRUPT (logged) when a batch header on the way does not
 * parse; -EIO. On error no span is held. */
int tfs_plog_fetch(struct tfs_plog *pl, tfs_offset_t from, size_t max_bytes, bool min_one,
                   struct tfs_plog_fetch *out);
/* tfs_plog_fetch for a read_committed consumer: no batch at or past the last
 * stable offset is returned (a fetch from it gives no span). The aborted
 * transactions the returned range overlaps come from tfs_plog_aborted_txns
 * (from, out->next). */
int tfs_plog_fetch_committed(struct tfs_plog *pl, tfs_offset_t from, size_t max_bytes,
                             bool min_one, struct tfs_plog_fetch *out);
/* Drops the spans' references. Idempotent. */
void tfs_plog_fetch_release(struct tfs_plog_fetch *f);

/* A new descriptor of the span's .log file (caller closes it), opened through the
 * fd cache and duplicated, so that it outlives the cache's slot and any rename
 * of the file. -errno (-EMFILE at the descriptor limit). */
int tfs_plog_span_fd(const struct tfs_plog_span *s);
/* Copies the span's bytes into buf (s->len bytes). 0 or -EIO. */
int tfs_plog_span_read(const struct tfs_plog_span *s, void *buf);

/* The offset and timestamp of the first record (in offset order) whose timestamp
 * is >= ts, below the high watermark; -ENOENT (not logged) when there is none.
 * Segments whose newest timestamp is older are skipped whole, and the search in
 * the first other one starts where its time index points. */
int tfs_plog_offset_for_time(struct tfs_plog *pl, int64_t ts, tfs_offset_t *offset,
                             int64_t *timestamp);

#endif
