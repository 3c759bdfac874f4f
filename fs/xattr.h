/* xattr.h - the user.topicfs.* attributes of every node kind (docs/semantics.md §6).
 *
 * Owns: the attribute table (xattr.c): one row per name with the node kinds it
 * applies to and its get/set functions, plus "families" whose names are dynamic
 * (header.NAME, the topic configs). A row whose value does not exist for a given
 * node (the key of a keyless record) answers -ENODATA and is not listed. The
 * cleaner's attributes (engine/cleaner/cleaner.h) are rows of the same table; on a
 * read-only mount (no cleaner) they are absent and writing `clean` is EROFS.
 * Writing `clean` blocks the request until the pass is done.
 *
 * security.*, system.*, trusted.*: ENODATA at once, without touching any lock:
 * the kernel asks for security.capability before writes (see ops.c).
 *
 * Threads: any. Every function replies to req exactly once.
 */
#ifndef TFS_FS_XATTR_H
#define TFS_FS_XATTR_H

#include <stddef.h>

#include "fs/fuse_ll.h"

struct tfs_mount;
struct tfs_node;

#define TFS_XATTR_PREFIX "user.topicfs."

void tfs_xattr_get(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, const char *name,
                   size_t size);
void tfs_xattr_list(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, size_t size);
void tfs_xattr_set(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, const char *name,
                   const char *value, size_t size, int flags);
void tfs_xattr_remove(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, const char *name);

#endif
