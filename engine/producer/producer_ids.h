/* producer_ids.h - a data directory's producer id allocator: ids that never
 * repeat, across restarts and crashes. The engine owns the one of its data
 * directory; front ends take ids through tfs_engine_producer_id (engine.h).
 *
 * Owns: the file `producer_ids` in the data directory and the block of ids it
 * reserved. The file holds one decimal line, the first id not yet reserved.
 * Ids are handed out from a block of TFS_PIDS_BLOCK reserved by rewriting the
 * file (tfs_file_replace: temporary file, fsync, rename, fsync of the
 * directory) before the first id of the block is given, so a crash at any
 * point leaves a file whose value is above every id handed out; at worst the
 * rest of a block is skipped. A file that does not parse is an error
 * (TFS_ECORRUPT, logged), never a restart from 0. Every id comes with epoch 0:
 * it is new, so no batch of it exists yet.
 * Threads: tfs_pids_next from any thread (its own mutex).
 * Errors: 0 or a negative errno / TFS_E* code (engine/types.h). */
#ifndef TFS_PRODUCER_IDS_H
#define TFS_PRODUCER_IDS_H

#include "engine/types.h"

#define TFS_PIDS_BLOCK 1000
#define TFS_PIDS_FILE "producer_ids"

struct tfs_io;
struct tfs_pids;

/* Opens the allocator of the data directory dirfd (borrowed, valid until
 * tfs_pids_close); reads the file if it exists. Caller owns *out. */
int tfs_pids_open(struct tfs_io *io, int dirfd, struct tfs_pids **out);
void tfs_pids_close(struct tfs_pids *p);
/* A fresh producer id in *id (>= 0) and its epoch (0). Errors: the file's
 * write (-ENOSPC, -EIO, -EROFS), -EOVERFLOW
 * past INT64_MAX. */
int tfs_pids_next(struct tfs_pids *p, int64_t *id, int16_t *epoch);

#endif
