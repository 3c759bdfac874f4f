/* node_scratch.h - scratch files as seen from their partition directory
 * (node_scratch.c): the namespace operations that node_partition.c hands over for
 * a dot name that is not a control entry. The files themselves live in scratch.h;
 * the node kind is tfs_kind_scratch (node.h).
 *
 * Every function replies to req exactly once. dir is a partition directory node.
 */
#ifndef TFS_FS_NODE_SCRATCH_H
#define TFS_FS_NODE_SCRATCH_H

#include "fs/node.h"

void tfs_scratch_node_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name);
void tfs_scratch_node_create(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, mode_t mode, struct fuse_file_info *fi);
/* mknod(2) of a regular file; any other type is EPERM, as for keys. */
void tfs_scratch_node_mknod(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name, mode_t mode);
void tfs_scratch_node_unlink(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name);
/* rmdir of a scratch name: ENOTDIR if it names a file, else ENOENT. */
void tfs_scratch_node_rmdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name);
/* Renames the scratch file name: onto another scratch name (to_scratch), or onto
 * the key named newname, whose record then holds the file's content (one record,
 * appended before the scratch name goes). Another directory: EXDEV. */
void tfs_scratch_node_rename(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             const char *name, struct tfs_node *newdir, const char *newname,
                             unsigned flags, bool to_scratch);

#endif
