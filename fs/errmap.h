/* errmap.h - engine error -> errno for FUSE, in exactly one function.
 * Threads: reentrant. */
#ifndef TFS_FS_ERRMAP_H
#define TFS_FS_ERRMAP_H

/* err: a negative errno or TFS_E* code (0 maps to 0). Returns a positive errno for
 * fuse_reply_err. TFS_ECORRUPT -> EIO (logged with what), TFS_EREADONLY -> EROFS,
 * TFS_EUNSUPPORTED -> EOPNOTSUPP, ... what names the object for the log line. */
int tfs_errno(int err, const char *what);

#endif
