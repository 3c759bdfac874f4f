/* errmap.c - the one mapping from engine errors to errnos (see errmap.h). */
#include "fs/errmap.h"

#include <errno.h>

#include "engine/types.h"
#include "io/log.h"

int tfs_errno(int err, const char *what)
{
	if (err >= 0)
		return 0;
	switch (err) {
	case TFS_ECORRUPT:
		/* The engine logged where; say which file operation hit it. */
		tfs_log_error("fs", "corrupt data behind %s: reporting EIO", what ? what : "?");
		return EIO;
	case TFS_EUNSUPPORTED:
		tfs_log_warn("fs", "unsupported record format behind %s", what ? what : "?");
		return EOPNOTSUPP;
	case TFS_EREADONLY:
		return EROFS;
	case TFS_ESEQUENCE:
		return EILSEQ;          /* README: .batches, producer state */
	case TFS_EFENCED:
		return EPERM;
	case TFS_EDAMAGED:
		return EIO;                     /* logged once, when the partition opened */
	case TFS_EGROUPBUSY:
		return EBUSY;                   /* a consumer group with members */
	case TFS_EGENERATION:
		return ESTALE;
	default:
		break;
	}
	if (err > -4096)
		return -err;
	tfs_log_error("fs", "unknown engine error %d behind %s: reporting EIO", err,
	              what ? what : "?");
	return EIO;
}
