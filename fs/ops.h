/* ops.h - the libfuse low-level operations table of topicfs (ops.c). The session's
 * userdata must be the struct tfs_mount. */
#ifndef TFS_FS_OPS_H
#define TFS_FS_OPS_H

#include "fs/fuse_ll.h"

extern const struct fuse_lowlevel_ops tfs_fuse_ops;

#endif
