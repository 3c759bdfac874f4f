/* plog_start.c - a log start offset inside the first segment: what Kafka's
 * DeleteRecords moves (partition_log.h, tfs_plog_delete_below).
 *
 * The records below the log start stay in their segment until retention
 * deletes the segments wholly below it (engine/cleaner/retention.c); until then
 * every reader skips them: cursors start at the log start, a read by offset
 * below it is -ENOENT, a fetch below it is -ERANGE (OFFSET_OUT_OF_RANGE). A key
 * whose newest record is below it leaves the key directory at once, so its file
 * vanishes without a tombstone, as the records are gone for Kafka's consumers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log/plog_cleaning.h"
#include "engine/log/plog_internal.h"
#include "io/log.h"

struct below {
	tfs_offset_t offset;
	tfs_offset_t start;              /* the log start offset after the request */
	struct tfs_slice *keys;          /* copies, each malloc'd */
	size_t n, cap;
	int err;
};

static int collect(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info, uint64_t hash)
{
	struct below *b = arg;
	uint8_t *copy;

	(void)hash;
	if (info->offset >= b->offset)
		return 0;
	if (b->n == b->cap) {
		size_t ncap = b->cap ? 2 * b->cap : 64;
		struct tfs_slice *v = realloc(b->keys, ncap * sizeof(*v));
		if (!v)
			goto nomem;
		b->keys = v;
		b->cap = ncap;
	}
	copy = malloc(key.len ? key.len : 1);
	if (!copy)
		goto nomem;
	if (key.len)
		memcpy(copy, key.p, key.len);
	b->keys[b->n++] = tfs_slice_make(copy, key.len);
	return 0;
nomem:
	b->err = -ENOMEM;
	return 1;
}

/* As an exclusive request: every group written before it is in the key
 * directory (a group's keys go in after its records are published), so none of
 * them can bring back a key below the new start. */
static int delete_below_exclusive(struct tfs_plog *pl, void *arg)
{
	struct below *b = arg;
	int rc = 0;

	pthread_rwlock_wrlock(&pl->lock);
	b->start = tfs__plog_start(pl);
	if (b->offset > pl->end_offset) {
		rc = -ERANGE;
	} else if (b->offset > b->start) {
		tfs__plog_kd_lock(pl, true);
		(void)tfs_keydir_scan(pl->kd, false, 0, collect, b);
		rc = b->err;
		if (rc == 0) {
			for (size_t i = 0; i < b->n; i++)
				tfs_keydir_remove(pl->kd, b->keys[i], b->offset);
			pl->deleted_below = b->offset;
			b->start = b->offset;
		}
		tfs__plog_kd_unlock(pl);
	}
	pthread_rwlock_unlock(&pl->lock);
	return rc;
}

int tfs_plog_delete_below(struct tfs_plog *pl, tfs_offset_t offset,
                          void (*gone)(void *arg, const struct tfs_slice *keys, size_t n),
                          void *arg, tfs_offset_t *start)
{
	struct below b = { .offset = offset };
	int rc = tfs__plog_run_exclusive(pl, delete_below_exclusive, &b);

	*start = b.start;
	if (rc == 0 && b.n)
		tfs_log_info("plog", "%s: log start offset %" PRId64 ": %zu keys had only older "
		             "records and are gone", pl->path, offset, b.n);
	if (rc == 0 && gone && b.n)
		gone(arg, b.keys, b.n);
	for (size_t i = 0; i < b.n; i++)
		free((void *)b.keys[i].p);
	free(b.keys);
	return rc;
}
