/* txn_tombs.h - the keys removed while a transaction was open, and the offset of
 * each one's newest removal (docs/engine.md §5, "A COMMIT after a tombstone").
 *
 * A transaction's key changes reach the key directory at its COMMIT, with the
 * offsets of its records. A key the log deleted after those records, outside the
 * transaction (or in another transaction committed first), is then absent from the
 * directory, which forgets removed keys, so the COMMIT's older put would bring it
 * back: the directory would serve a value the log's newest record for the key
 * deleted, which the cleaner and every consumer reading in offset order agree on.
 * While any transaction is open, the partition's key-directory phase and the
 * open-time scan note each removal here; a COMMIT's put of a key noted at a later
 * offset is dropped; once no transaction is open, the set is emptied.
 *
 * Owns: a copy of every noted key, with its slot 100-200 bytes a removal (a
 * 32-byte slot in a table kept 1/4 to 1/2 full, and the key's own allocation).
 * Removals no pending put can precede are pruned as the set grows
 * (tfs_tombs_prune), so a transaction left open keeps only what it may need.
 * Threads: none; the partition log uses it only in its key-directory phase, in
 * ticket order under the partition's write lock, and the scan on its own thread.
 * Errors: tfs_tombs_note returns -ENOMEM, noting nothing.
 */
#ifndef TFS_TXN_TOMBS_H
#define TFS_TXN_TOMBS_H

#include <stdbool.h>

#include "engine/types.h"

struct tfs_tombs;

/* Notes a removal of key (hash = tfs_keydir_hash(key)) at offset; *t is created on
 * first use. The newest removal of a key is kept. */
int tfs_tombs_note(struct tfs_tombs **t, struct tfs_slice key, uint64_t hash, tfs_offset_t offset);
/* Whether key was noted as removed at an offset above offset. t may be NULL. */
bool tfs_tombs_after(const struct tfs_tombs *t, struct tfs_slice key, uint64_t hash,
                     tfs_offset_t offset);
/* Whether the set is due a prune: past TFS_TOMBS_PRUNE_MIN removals and twice
 * what the last prune kept, so that pruning costs O(1) a note over time. */
#define TFS_TOMBS_PRUNE_MIN 1024
bool tfs_tombs_prune_due(const struct tfs_tombs *t);
/* Forgets the removals below offset: once no put still to be committed can
 * precede them, they can drop nothing. An emptied set is freed (*t NULL). */
void tfs_tombs_prune(struct tfs_tombs **t, tfs_offset_t below);
/* Forgets everything and frees the set (*t becomes NULL). */
void tfs_tombs_clear(struct tfs_tombs **t);
/* Keys noted (0 for NULL). */
size_t tfs_tombs_count(const struct tfs_tombs *t);

#endif
