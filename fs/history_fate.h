/* history_fate.h - the cleaner's forecast as attributes: `fate` and `superseded_by`
 * of a history entry, `next_pass` of a partition (history_fate.c). Each is a dry
 * run of the next pass (engine/cleaner.h, tfs_cleaner_dry_run) or a walk of the
 * log, computed per request: nothing is cached, so nothing is stale.
 *
 * Threads: any. Errors: 0 or a negative errno: -ENODATA when the value does not
 * exist (a record cleaned away, the newest record of its key, a keyless record,
 * a read-only mount, which has no cleaner), -ENOENT for a partition that is gone,
 * or the engine's error. Strings are malloc'd, NUL-terminated; the caller frees.
 */
#ifndef TFS_FS_HISTORY_FATE_H
#define TFS_FS_HISTORY_FATE_H

#include "engine/types.h"

struct tfs_mount;
struct tfs_node;

/* The fate of history entry n's record: "keep", "drop", "keep-tombstone until
 * <ms>", "drop-tombstone", "keep-keyless", "keep-producer-state", or
 * "not-cleanable <reason>". */
int tfs_history_fate(struct tfs_mount *m, struct tfs_node *n, char **out);
/* The offset of the next record of the same key still on disk. */
int tfs_history_superseded_by(struct tfs_mount *m, struct tfs_node *n, tfs_offset_t *out);
/* The dry run of partition n's next pass, one line of NAME=VALUE fields. */
int tfs_history_next_pass(struct tfs_mount *m, struct tfs_node *n, char **out);

#endif
