/* history_fate.h - the cleaner's forecast as attributes: `fate` and `superseded_by`
 * of a history entry, `next_pass` of a partition (history_fate.c). Each is a dry
 * run of the next pass (engine/cleaner/cleaner.h, tfs_cleaner_dry_run) or a walk of the
 * log. A dry run reads the whole dirty region and takes a cleaner thread's offset
 * map, so any reader could otherwise make the daemon do one per getfattr: the mount
 * runs one dry run at a time (tfs_fate_cache), and its result answers every `fate`
 * of that partition for FATE_CACHE_MS while the log is unchanged (same start, end,
 * size, segments and active segment, no config change, roll or clean through the
 * mount since). So `getfattr -R` over `.history` is one pass, and a fate is at most
 * that old. `next_pass` takes only a run made by a `next_pass` request (so the
 * size and value reads of one getfattr agree and a fate's earlier run is never
 * taken for the next pass), and refreshes the cache.
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
struct tfs_fate_cache;

/* The mount's dry-run cache; caller owns it, tfs_fate_cache_destroy (NULL ok). */
int tfs_fate_cache_create(struct tfs_fate_cache **out);
void tfs_fate_cache_destroy(struct tfs_fate_cache *c);
/* Forgets the cached run: a topic config, roll or clean may change every fate. */
void tfs_fate_cache_invalidate(struct tfs_fate_cache *c);

/* The fate of history entry n's record: "keep", "drop", "keep-tombstone until
 * <ms>", "drop-tombstone", "keep-keyless", "keep-producer-state", or
 * "not-cleanable <reason>". */
int tfs_history_fate(struct tfs_mount *m, struct tfs_node *n, char **out);
/* The offset of the next record of the same key still on disk that is a value
 * of the key: transaction markers, whatever their key bytes, and data of aborted
 * or still open transactions are skipped. */
int tfs_history_superseded_by(struct tfs_mount *m, struct tfs_node *n, tfs_offset_t *out);
/* The dry run of partition n's next pass, one line of NAME=VALUE fields. */
int tfs_history_next_pass(struct tfs_mount *m, struct tfs_node *n, char **out);

#endif
