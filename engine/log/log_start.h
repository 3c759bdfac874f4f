/* log_start.h - DATA_DIR/log-start-offset-checkpoint: the log start offsets
 * DeleteRecords moved, in Kafka's checkpoint text format, so that they survive a
 * restart (engine.c calls these; tfs_engine_delete_records is the public door).
 *
 * Format (UTF-8, '\n' line ends; Kafka's CheckpointFile, as its log directories
 * keep it):
 *
 *   LINE  CONTENT                                    DESCRIPTION
 *      1  0                                          version, must be 0
 *      2  N                                          number of entries
 *    3..  <topic> <partition> <log start offset>     one per partition, blanks
 *                                                    between the fields
 *
 * The text is the cleaner checkpoint's and is read by the same parser, with the
 * same rule of validity (engine/ondisk.h, tfs_checkpoint_parse); anything else is
 * TFS_ECORRUPT (logged, and the mount fails rather than serve records
 * DeleteRecords removed). Written whole on every
 * change with tfs_file_replace (temporary file, fsync, rename, directory fsync),
 * so a crash leaves the old file or the new one.
 *
 * Threads: the caller serializes writers (the engine's log-start lock).
 * Errors: 0 or a negative errno / TFS_E* code, logged.
 */
#ifndef TFS_LOG_START_H
#define TFS_LOG_START_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/types.h"

#define TFS_LOG_START_FILE "log-start-offset-checkpoint"

struct tfs_engine;
struct tfs_io;

/* At open: moves each partition the file names to its log start offset (one
 * past the log end is clamped to the end, logged; unknown topics and
 * partitions are skipped), then, on a writable mount, rewrites the file if it
 * named either. A missing file is no error. */
int tfs__log_start_load(struct tfs_engine *e, struct tfs_io *io, int dirfd, bool read_only);

/* Rewrites the file from every partition whose log start offset is above 0,
 * topic's partition taken at offset (topic NULL: none overridden). */
int tfs__log_start_write(struct tfs_engine *e, struct tfs_io *io, int dirfd, const char *topic,
                         int32_t partition, tfs_offset_t offset);

#endif
