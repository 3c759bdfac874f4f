/* log_damage.h - which bytes of a segment are unreadable: the one rule that the
 * mount's open-time scan (log_recovery.c), topicctl verify (log_verify.c) and
 * topicctl repair (log_repair.c) apply, so that all three say the same thing
 * about the same file.
 *
 * Owns: nothing; inline helpers only.
 *
 * A batch is framed by its first 12 bytes (base offset, length) and its magic
 * byte; the CRC-32C covers everything from byte 21 on, but not the base offset,
 * the length, the leader epoch or the magic (batch_codec.h). So:
 *
 *   GOOD  the magic is 2, the length frames a batch inside the file, the header
 *         decodes, the CRC matches, every record decodes, and the batch's offsets
 *         lie at or above the smallest offset allowed (past the previous readable
 *         batch and the segment's own base) and below the next segment's base.
 *   SKIP  the framing holds (magic 2, a length that ends inside the file and
 *         within TFS_MAX_BATCH_BYTES) but something else fails. Its
 *         records are unreadable; the next batch starts right after it and is
 *         judged on its own.
 *   REST  the magic or the length is garbage, or the file ends inside the batch:
 *         nothing from here to the end of the file can be framed.
 *
 * A run of SKIP batches, and a REST with everything after it, is one unreadable
 * region: its bytes [pos, end) and the offsets [first, next) that may have been
 * there, first being the smallest offset allowed where it starts and next the
 * base of the first GOOD batch after it (or of the next segment). A batch whose
 * damage sits in its base offset field can pass as GOOD with other offsets, as in
 * Kafka; the offset checks above keep the order of the log, so that no record
 * can pass for newer than a record it precedes.
 *
 * What follows from the fate (README "Corruption in a sealed segment"): in the
 * last (active) segment the first batch that is not GOOD starts a torn tail,
 * truncated at open; in a sealed segment nothing is cut: the region reads EIO, a
 * key whose newest readable record precedes a region reads EIO, and only
 * `topicctl repair` truncates.
 *
 * Threads: reentrant. Errors: none; a reason is a static string. */
#ifndef TFS_LOG_DAMAGE_H
#define TFS_LOG_DAMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/format/batch_codec.h"
#include "engine/ondisk.h"
#include "engine/types.h"

/* Bytes of the header that frame a batch: base offset, length, epoch, magic. */
#define TFS_DAMAGE_FRAME_BYTES 17

enum tfs_batch_fate {
	TFS_FATE_GOOD = 0,
	TFS_FATE_SKIP,
	TFS_FATE_REST,
};

/* Frames the batch at the start of p (avail bytes there, left bytes to the end
 * of the file). Returns its size (12 + length), or 0 with *why when it cannot be
 * framed (REST); *torn then says whether it is because the file ends inside the
 * batch (what a crash leaves) rather than garbage. Magic 0 or 1 is not garbage
 * but another format: the caller checks for TFS_EUNSUPPORTED with
 * tfs_batch_header_decode first. */
static inline size_t tfs_damage_frame(const uint8_t *p, size_t avail, int64_t left,
                                      const char **why, bool *torn)
{
	uint32_t length;
	size_t size;

	*torn = false;
	if (left < TFS_DAMAGE_FRAME_BYTES || avail < TFS_DAMAGE_FRAME_BYTES) {
		*why = "the file ends inside a batch header";
		*torn = left < TFS_DAMAGE_FRAME_BYTES;
		return 0;
	}
	if (p[16] != TFS_BATCH_MAGIC) {
		*why = "bad magic byte";
		return 0;
	}
	length = (uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 | (uint32_t)p[10] << 8 | p[11];
	size = (size_t)length + TFS_BATCH_LOG_OVERHEAD;
	if (length > INT32_MAX || size < TFS_BATCH_HEADER_BYTES) {
		*why = "batch length below the header size";
		return 0;
	}
	if (size > TFS_MAX_BATCH_BYTES) {
		*why = "batch length above 256 MiB";
		return 0;
	}
	if ((int64_t)size > left) {
		*why = "the file ends inside the batch";
		*torn = true;
		return 0;
	}
	return size;
}

/* Whether the batch at p failed tfs_damage_frame only for its size: magic 2, a
 * length past TFS_MAX_BATCH_BYTES, and the whole of it in the file. A
 * broker whose max.message.bytes is larger may have written it; it is a bound of
 * topicfs's, never a torn tail (log_recovery.c refuses the partition instead of
 * cutting it). */
static inline bool tfs_damage_over_bound(const uint8_t *p, size_t avail, int64_t left)
{
	uint64_t size;

	if (avail < TFS_DAMAGE_FRAME_BYTES || p[16] != TFS_BATCH_MAGIC)
		return false;
	size = ((uint64_t)p[8] << 24 | (uint64_t)p[9] << 16 | (uint64_t)p[10] << 8 | p[11]) +
	       TFS_BATCH_LOG_OVERHEAD;
	return size > TFS_MAX_BATCH_BYTES && size <= (uint64_t)INT32_MAX +
	       TFS_BATCH_LOG_OVERHEAD && (int64_t)size <= left;
}

/* The offset checks of a framed batch whose header decoded and whose CRC and
 * records check out: expect is the smallest offset allowed, next_base the next
 * segment's base (INT64_MAX for the last segment). GOOD, or SKIP with *why. */
static inline enum tfs_batch_fate tfs_damage_offsets(const struct tfs_batch_header *h,
                                                     tfs_offset_t expect, tfs_offset_t next_base,
                                                     const char **why)
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

#endif
