/* cleaner_fate.c - the words of the `fate` attribute and the reasons a record is
 * outside the next pass (cleaner.h, "the next pass, before it runs"). The
 * verdicts themselves are cleaner_pass.c's record_fate: this file only names them
 * and places a record the dry run did not read. */
#include "engine/cleaner.h"

const char *tfs_cleaner_fate_name(enum tfs_cleaner_fate f)
{
	switch (f) {
	case TFS_FATE_KEEP:
		return "keep";
	case TFS_FATE_DROP:
		return "drop";
	case TFS_FATE_KEEP_TOMBSTONE:
		return "keep-tombstone";
	case TFS_FATE_DROP_TOMBSTONE:
		return "drop-tombstone";
	case TFS_FATE_KEEP_KEYLESS:
		return "keep-keyless";
	case TFS_FATE_KEEP_PRODUCER_STATE:
		return "keep-producer-state";
	case TFS_FATE_NOT_CLEANABLE:
		return "not-cleanable";
	}
	return "?";
}

const char *tfs_cleaner_not_cleanable_name(enum tfs_cleaner_not_cleanable w)
{
	switch (w) {
	case TFS_NC_NONE:
		return "";
	case TFS_NC_ACTIVE_SEGMENT:
		return "active segment";
	case TFS_NC_COMPACTION_LAG:
		return "younger than min.compaction.lag.ms";
	case TFS_NC_OPEN_TRANSACTION:
		return "open transaction";
	case TFS_NC_BUFFER_FULL:
		return "past a full dedupe buffer";
	case TFS_NC_NOT_COMPACTED:
		return "cleanup.policy without compact";
	}
	return "?";
}

enum tfs_cleaner_not_cleanable tfs_cleaner_not_cleanable_of(const struct tfs_cleaner_dry_run *d,
                                                            tfs_offset_t offset)
{
	if (!d->compacted)
		return TFS_NC_NOT_COMPACTED;
	if (offset >= d->active_base)
		return TFS_NC_ACTIVE_SEGMENT;
	if (offset >= d->first_uncleanable)
		return d->uncleanable_why;
	if (offset >= d->end_offset)
		return TFS_NC_BUFFER_FULL;
	return TFS_NC_NONE;
}
