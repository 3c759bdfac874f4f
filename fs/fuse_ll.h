/* fuse_ll.h - the one place that picks the libfuse API version for fs/.
 * 3.12 gives fuse_loop_cfg_* and fuse_session_loop_mt(se, cfg). */
#ifndef TFS_FS_FUSE_LL_H
#define TFS_FS_FUSE_LL_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#endif
