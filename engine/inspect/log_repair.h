/* log_repair.h - truncating a damaged partition log at its first unreadable
 * batch, as Kafka's recovery does (topicctl repair).
 *
 * Owns: a plan owns its arrays; nothing else.
 *
 * The mount never cuts a sealed segment (engine/format/batch_reader.h): it reads EIO for what may
 * be stale until an operator chooses to lose the damaged part. A plan says what
 * that costs; applying it does it:
 *   1. the first batch of the partition that the mount could not read (by the
 *      rule of engine/format/batch_reader.h, in any segment) is the cut: its segment is truncated
 *      there and every later segment goes, so that the log ends where its
 *      readable prefix ends and no key can read a value older than one that
 *      followed it. Kafka deletes the later segments; here the cut bytes (as
 *      <base>.log.cut) and the later segments' .log files are moved into
 *      aside_dir, so that nothing is destroyed that an expert might still read.
 *   2. the .index and .timeindex of the cut and later segments are removed (the
 *      next mount rebuilds them from the log).
 *   3. the directories are fsynced; a crash part way leaves a log that is cut at
 *      the same place or not yet cut, never one with a hole: the later segments
 *      go first, highest base first, then the truncation.
 *
 * Threads: reentrant; the partition must not be mounted (the caller checks).
 * Errors: 0 or a negative errno / TFS_E* code. */
#ifndef TFS_LOG_REPAIR_H
#define TFS_LOG_REPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

struct tfs_io;

/* A segment file that the cut shortens or removes. */
struct tfs_repair_seg {
	tfs_offset_t base;               /* of <base>.log */
	tfs_pos_t from;                  /* the bytes lost are [from, size): 0 for a whole file */
	int64_t size_bytes;              /* of the file */
	int64_t readable_batches;        /* batches in the lost bytes that read whole */
	int64_t readable_records;        /* records in them */
	tfs_offset_t first, last;        /* offsets of those records; TFS_OFFSET_NONE if none */
	int64_t unreadable_bytes;        /* lost bytes that no rule could read */
};

struct tfs_repair_plan {
	bool needed;                     /* the log has a batch the mount cannot read */
	tfs_offset_t cut_base;           /* the segment the cut falls in */
	tfs_pos_t cut_pos;               /* ... and the position */
	const char *why;                 /* static: what the batch there failed */
	tfs_offset_t keep_end;           /* offsets below this stay; the log end after */
	tfs_offset_t lost_end;           /* one past the last offset the lost bytes hold */
	struct tfs_repair_seg *segs;     /* [0] the cut one, then each later segment */
	size_t count;
};

/* Reads the partition directory dir (read-only) and fills *plan; needed is
 * false when every batch reads. Caller releases the plan. -ENOENT if dir holds
 * no .log. */
int tfs_repair_plan(struct tfs_io *io, const char *dir, struct tfs_repair_plan *plan);
void tfs_repair_plan_release(struct tfs_repair_plan *plan);
/* Applies plan to dir (see above). aside_dir must exist on the same filesystem.
 * Refuses (-ESTALE) if a file's size changed since the plan. */
int tfs_repair_apply(struct tfs_io *io, const char *dir, const struct tfs_repair_plan *plan,
                     const char *aside_dir);

#endif
