/* history_fate.c - `fate`, `superseded_by` and `next_pass` (see history_fate.h).
 *
 * `fate` runs the dry run of the whole next pass and keeps the one record it asks
 * about: a record's fate depends on every newer record of its key in the dirty
 * region, on its batch (producer state, transactions) and on where the dedupe
 * buffer would fill, so nothing short of the pass's own decisions answers it
 * exactly. That is a read of the log per request; `topicctl dump --fate` gets the
 * fates of a whole partition in one pass instead.
 */
#include "fs/history_fate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner.h"
#include "fs/node.h"

#define NEXT_PASS_TEXT_CAP 512

struct one_fate {
	tfs_offset_t offset;
	struct tfs_cleaner_record_fate got;
	bool seen;
};

static void pick(void *arg, const struct tfs_cleaner_record_fate *f)
{
	struct one_fate *o = arg;

	if (f->offset == o->offset) {
		o->got = *f;
		o->seen = true;
	}
}

static int dup_text(const char *text, char **out)
{
	*out = strdup(text);
	return *out ? 0 : -ENOMEM;
}

static int record_exists(struct tfs_plog *pl, tfs_offset_t offset, struct tfs_record_copy *rec)
{
	int rc = tfs_plog_read_offset(pl, offset, rec);

	return rc == -ENOENT ? -ENODATA : rc;
}

int tfs_history_fate(struct tfs_mount *m, struct tfs_node *n, char **out)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(m->engine);
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct one_fate o = { .offset = n->num };
	struct tfs_cleaner_dry_run d;
	struct tfs_record_copy rec;
	char text[TFS_CLEANER_FATE_TEXT_CAP];
	int rc;

	*out = NULL;
	if (!pl)
		return -ENOENT;
	if (!cl)
		return -ENODATA;
	rc = record_exists(pl, n->num, &rec);
	if (rc < 0)
		return rc;
	tfs_record_copy_release(&rec);
	rc = tfs_cleaner_dry_run(cl, pl, pick, &o, &d);
	if (rc < 0)
		return rc == -ENOENT ? -ENODATA : rc;
	tfs_cleaner_fate_text(&d, o.seen ? &o.got : NULL, n->num, text, sizeof(text));
	if (!text[0])
		return -ENODATA;    /* cleaned away by a pass that ran meanwhile */
	return dup_text(text, out);
}

int tfs_history_superseded_by(struct tfs_mount *m, struct tfs_node *n, tfs_offset_t *out)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_record_copy rec;
	tfs_offset_t *v = NULL;
	size_t count = 0;
	int rc;

	if (!pl)
		return -ENOENT;
	rc = record_exists(pl, n->num, &rec);
	if (rc < 0)
		return rc;
	if (rec.key_null) {
		tfs_record_copy_release(&rec);
		return -ENODATA;
	}
	rc = tfs_plog_key_versions(pl, tfs_slice_make(rec.key, rec.key_len), &v, &count);
	tfs_record_copy_release(&rec);
	if (rc < 0)
		return rc;
	rc = -ENODATA;          /* the newest: superseded by nothing */
	for (size_t i = 0; i < count; i++) {
		if (v[i] > n->num) {
			*out = v[i];
			rc = 0;
			break;
		}
	}
	free(v);
	return rc;
}

int tfs_history_next_pass(struct tfs_mount *m, struct tfs_node *n, char **out)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(m->engine);
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_cleaner_dry_run d;
	char text[NEXT_PASS_TEXT_CAP];
	int rc, len;

	*out = NULL;
	if (!pl)
		return -ENOENT;
	if (!cl)
		return -ENODATA;
	rc = tfs_cleaner_dry_run(cl, pl, NULL, NULL, &d);
	if (rc < 0)
		return rc == -ENOENT ? -ENODATA : rc;
	/* range: the offsets recopied, [log start, end offset), inclusive here; the
	 * map reads [first_dirty, end_offset). The reason goes last: it has spaces. */
	if (d.nothing_to_do || d.end_offset <= d.log_start)
		len = snprintf(text, sizeof(text), "range=none");
	else
		len = snprintf(text, sizeof(text), "range=%" PRId64 "-%" PRId64, d.log_start,
		               d.end_offset - 1);
	snprintf(text + len, sizeof(text) - (size_t)len,
	         " first_dirty=%" PRId64 " end_offset=%" PRId64 " first_uncleanable=%" PRId64
	         " records_read=%" PRId64 " records_dropped=%" PRId64 " bytes_freed=%" PRId64
	         " tombstones_to_stamp=%" PRId64 " tombstones_dropped=%" PRId64
	         " size_before=%" PRId64 " size_after=%" PRId64 " map_full=%d"
	         " uncleanable_reason=%s",
	         d.first_dirty, d.end_offset, d.first_uncleanable, d.records_read,
	         d.records_dropped, d.bytes_freed, d.tombstones_to_stamp, d.tombstones_dropped,
	         d.bytes_before, d.bytes_after, d.map_full ? 1 : 0,
	         tfs_cleaner_not_cleanable_name(d.uncleanable_why));
	return dup_text(text, out);
}
