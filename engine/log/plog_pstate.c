/* plog_pstate.c - a partition's producer state on disk: `<offset>.snapshot`
 * files (their format in producer_state.h), and the state's part of open-time
 * recovery.
 *
 * When snapshots are written: at each roll, named by the new segment's base
 * offset (the state then reflects every record before it), and at a clean
 * close, named by the log end. Each is written whole to a temporary file,
 * fsynced and renamed over (tfs_file_replace; a roll does those steps itself,
 * tfs__pstate_stage and _commit, to fsync it beside the segment's files), so a
 * crash leaves the old set of snapshots or the new one, never a torn file under
 * a snapshot's name.
 *
 * At open the newest snapshot that decodes is loaded (a corrupt one is logged,
 * removed, and the next older tried; none: an empty state) and the scan that
 * recovery makes anyway replays only the batches from its offset on. A
 * snapshot past the recovered log end (the tail it covered was lost) cannot be
 * trusted: the state is then dropped and every producer is unknown, which
 * Kafka also accepts at any sequence.
 *
 * Which are kept (Kafka's removeStraySnapshots): those named by a segment's
 * base offset, and the newest if it lies past the last base (the clean-close
 * one); the rest, and any below the log start, are removed at open, at each
 * roll, and once retention or a cleaner's swap has removed segments (their
 * snapshots go with them, as in Kafka).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log/plog_internal.h"
#include "engine/ondisk.h"
#include "io/file_util.h"
#include "io/log.h"

#define SNAPSHOT_NAME_BYTES 32
#define SNAPSHOT_MAX_BYTES (64u << 20)

static void snapshot_name(char *buf, tfs_offset_t offset)
{
	snprintf(buf, SNAPSHOT_NAME_BYTES, "%020" PRId64 TFS_SUFFIX_SNAPSHOT, offset);
}

/* Whether name is `<20 digits>.snapshot`; *offset gets its offset. */
static bool parse_name(const char *name, tfs_offset_t *offset)
{
	char *end;
	long long v;

	if (strlen(name) != 20 + strlen(TFS_SUFFIX_SNAPSHOT) || strcmp(name + 20, TFS_SUFFIX_SNAPSHOT))
		return false;
	for (int i = 0; i < 20; i++)
		if (name[i] < '0' || name[i] > '9')
			return false;
	errno = 0;
	v = strtoll(name, &end, 10);
	if (errno || end != name + 20 || v < 0)
		return false;
	*offset = v;
	return true;
}

static int cmp_desc(const void *a, const void *b)
{
	tfs_offset_t x = *(const tfs_offset_t *)a, y = *(const tfs_offset_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The snapshots in the directory, newest first. Caller frees *out. */
static int list_snapshots(int dirfd, tfs_offset_t **out, size_t *n)
{
	DIR *d = tfs_dir_stream(dirfd);
	struct dirent *de;
	tfs_offset_t *v = NULL, off;
	size_t cnt = 0, cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		if (!parse_name(de->d_name, &off))
			continue;
		if (cnt == cap) {
			tfs_offset_t *p = realloc(v, (cap = cap ? cap * 2 : 8) * sizeof(*v));
			if (!p) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = p;
		}
		v[cnt++] = off;
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_desc);
	*out = v;
	*n = cnt;
	return 0;
}

static void remove_snapshot(struct tfs_plog *pl, int dirfd, tfs_offset_t offset,
                            const char *why)
{
	char name[SNAPSHOT_NAME_BYTES];

	snapshot_name(name, offset);
	if (tfs_io_unlinkat(pl->env.io, dirfd, name, 0) == 0)
		tfs_log_info("pstate", "%s: removed %s (%s)", pl->path, name, why);
}

/* Reads one snapshot into the state: 0, TFS_ECORRUPT (logged) or an I/O error. */
static int load_one(struct tfs_plog *pl, int dirfd, tfs_offset_t offset)
{
	char name[SNAPSHOT_NAME_BYTES];
	char *buf = NULL;
	size_t len = 0;
	const char *why = NULL;
	int rc;

	snapshot_name(name, offset);
	rc = tfs_file_read_all(pl->env.io, dirfd, name, SNAPSHOT_MAX_BYTES, &buf, &len);
	if (rc == -EFBIG) {
		why = "larger than any snapshot this state writes";
		rc = TFS_ECORRUPT;
	} else if (rc == 0) {
		rc = tfs_pstate_snapshot_decode(pl->pstate, (const uint8_t *)buf, len, offset,
		                                tfs_now_ms(), pl->cfg.producer_id_expiration_ms, &why);
	}
	if (rc == TFS_ECORRUPT)
		tfs_log_warn("pstate", "%s/%s is corrupt (%s): ignored, the log is replayed "
		             "from an older snapshot or its start", pl->path, name, why ? why : "?");
	free(buf);
	return rc;
}

int tfs__pstate_load(struct tfs_plog *pl, int dirfd)
{
	tfs_offset_t *snaps;
	size_t n;
	int rc = list_snapshots(dirfd, &snaps, &n);

	tfs_pstate_clear(pl->pstate);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		rc = load_one(pl, dirfd, snaps[i]);
		if (rc == 0) {
			tfs_log_info("pstate", "%s: producer state from offset %" PRId64 " (%zu producers)",
			             pl->path, snaps[i], tfs_pstate_count(pl->pstate));
			break;
		}
		if (rc == -ENOMEM)
			break;
		if (rc == TFS_ECORRUPT && !pl->env.read_only)
			remove_snapshot(pl, dirfd, snaps[i], "corrupt");
		tfs_pstate_clear(pl->pstate);
		rc = 0;
	}
	free(snaps);
	return rc;
}

void tfs__pstate_replay(struct tfs_plog *pl, const struct tfs_batch_header *h)
{
	struct tfs_pstate_in in;

	if (h->producer_id < 0 || h->base_offset < tfs_pstate_end_offset(pl->pstate))
		return;
	if ((h->attributes & TFS_ATTR_CONTROL) && h->records_count == 0)
		return;                            /* an empty control batch (cleaned) */
	in = (struct tfs_pstate_in){
		.producer_id = h->producer_id, .epoch = h->producer_epoch,
		.base_seq = h->base_sequence, .last_offset_delta = h->last_offset_delta,
		.max_timestamp = h->max_timestamp,
		.transactional = (h->attributes & TFS_ATTR_TRANSACTIONAL) != 0,
		.control = (h->attributes & TFS_ATTR_CONTROL) != 0,
	};
	if (tfs_pstate_apply(pl->pstate, &in, h->base_offset, NULL) < 0)
		tfs_log_error("pstate", "%s: out of memory replaying producer %" PRId64, pl->path,
		              h->producer_id);
	else
		pl->pstate_replayed = true;
}

/* Removes snapshots that are neither at a segment's base nor the newest past the
 * last base, and those below the log start. */
void tfs__pstate_prune(struct tfs_plog *pl, int dirfd)
{
	const struct tfs_seglist *l = pl->segs;
	tfs_offset_t *snaps, last_base;
	size_t n;

	if (pl->env.read_only || !l || l->count == 0 || list_snapshots(dirfd, &snaps, &n) < 0)
		return;
	last_base = l->seg[l->count - 1]->base_offset;
	for (size_t i = 0; i < n; i++) {
		int at = tfs__seglist_find(l, snaps[i]);
		bool keep = (i == 0 && snaps[i] > last_base) ||
		            (at >= 0 && l->seg[at]->base_offset == snaps[i]);
		if (snaps[i] < l->seg[0]->base_offset || snaps[i] > pl->end_offset)
			keep = false;
		if (!keep)
			remove_snapshot(pl, dirfd, snaps[i], "no segment starts there");
	}
	free(snaps);
}

void tfs__pstate_recovered(struct tfs_plog *pl, int dirfd)
{
	tfs_offset_t end = tfs_pstate_end_offset(pl->pstate);

	if (end > pl->end_offset) {
		tfs_log_warn("pstate", "%s: the producer snapshot reaches offset %" PRId64
		             " past the log end %" PRId64 ": producer state dropped, every producer "
		             "starts unknown", pl->path, end, pl->end_offset);
		tfs_pstate_clear(pl->pstate);
	}
	tfs_pstate_set_end_offset(pl->pstate, pl->end_offset);
	tfs_pstate_expire(pl->pstate, tfs_now_ms(), pl->cfg.producer_id_expiration_ms);
	tfs__pstate_prune(pl, dirfd);
}

/* The state at the log end, encoded; caller frees *buf. */
static int encode_at_end(struct tfs_plog *pl, uint8_t **buf, size_t *len)
{
	tfs_pstate_expire(pl->pstate, tfs_now_ms(), pl->cfg.producer_id_expiration_ms);
	tfs_pstate_set_end_offset(pl->pstate, pl->end_offset);
	return tfs_pstate_snapshot_encode(pl->pstate, buf, len);
}

int tfs__pstate_snapshot(struct tfs_plog *pl, int dirfd)
{
	char name[SNAPSHOT_NAME_BYTES];
	uint8_t *buf;
	size_t len;
	int rc;

	if (pl->env.read_only)
		return 0;
	rc = encode_at_end(pl, &buf, &len);
	if (rc < 0)
		return rc;
	snapshot_name(name, pl->end_offset);
	rc = tfs_file_replace(pl->env.io, dirfd, name, buf, len);
	free(buf);
	if (rc < 0) {
		tfs_log_error("pstate", "cannot write %s/%s: %s", pl->path, name, tfs_strerror(rc));
		return rc;
	}
	tfs__pstate_prune(pl, dirfd);
	return 0;
}

int tfs__pstate_stage(struct tfs_plog *pl, int dirfd, tfs_offset_t *at)
{
	char name[SNAPSHOT_NAME_BYTES];
	uint8_t *buf;
	size_t len;
	int fd;

	*at = pl->end_offset;
	if (pl->env.read_only)
		return -EROFS;
	fd = encode_at_end(pl, &buf, &len);
	if (fd < 0)
		return fd;
	snapshot_name(name, *at);
	fd = tfs_file_stage(pl->env.io, dirfd, name, buf, len);
	free(buf);
	if (fd < 0)
		tfs_log_error("pstate", "cannot write %s/%s: %s", pl->path, name, tfs_strerror(fd));
	return fd;
}

int tfs__pstate_commit(struct tfs_plog *pl, int dirfd, tfs_offset_t at)
{
	char name[SNAPSHOT_NAME_BYTES];
	int rc;

	snapshot_name(name, at);
	rc = tfs_file_commit(pl->env.io, dirfd, name);
	if (rc < 0)
		tfs_log_error("pstate", "cannot write %s/%s: %s", pl->path, name, tfs_strerror(rc));
	return rc;
}

void tfs__pstate_unstage(int dirfd, tfs_offset_t at)
{
	char name[SNAPSHOT_NAME_BYTES];

	snapshot_name(name, at);
	tfs_file_unstage(dirfd, name);
}
