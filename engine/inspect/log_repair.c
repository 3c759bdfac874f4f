/* log_repair.c - the plan and the cut of topicctl repair (see log_repair.h). */
#include "engine/inspect/log_repair.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/format/batch_reader.h"
#include "engine/inspect/log_inspect.h"
#include "engine/inspect/log_inspect_internal.h"
#include "io/file_util.h"
#include "io/io.h"

#define COPY_CHUNK_BYTES ((size_t)1 << 20)

/* Decodes every record of a CRC-valid batch: the count, or -1 if they do not. */
static int64_t count_records(struct tfs_record_iter *it, const struct tfs_scan_batch *b)
{
	struct tfs_record r;
	const char *why = NULL;
	int64_t n = 0;
	int rc = tfs_record_iter_reset(it, b->bytes, b->size, &why);

	while (rc == 0 && (rc = tfs_record_iter_next(it, &r, &why)) == 1) {
		n++;
		rc = 0;
	}
	return rc < 0 ? -1 : n;
}

static int push_seg(struct tfs_repair_plan *p, tfs_offset_t base, tfs_pos_t from, int64_t size)
{
	struct tfs_repair_seg *ns = realloc(p->segs, (p->count + 1) * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	p->segs = ns;
	p->segs[p->count++] = (struct tfs_repair_seg){ base, from, size, 0, 0, TFS_OFFSET_NONE,
	                                               TFS_OFFSET_NONE, 0 };
	return 0;
}

/* Counts what the lost batch b holds into s. */
static void note_lost(struct tfs_repair_plan *p, struct tfs_repair_seg *s,
                      struct tfs_record_iter *it, const struct tfs_scan_batch *b, int64_t file_size)
{
	int64_t n = -1;

	if (b->status == TFS_SCAN_OK)
		n = count_records(it, b);
	if (n < 0) {
		s->unreadable_bytes += b->status == TFS_SCAN_BAD_BATCH ? (int64_t)b->size
		                                                       : file_size - b->pos;
		return;
	}
	s->readable_batches++;
	s->readable_records += n;
	if (s->first == TFS_OFFSET_NONE)
		s->first = b->h.base_offset;
	if (tfs_batch_last_offset(&b->h) > s->last)
		s->last = tfs_batch_last_offset(&b->h);
	if (tfs_batch_last_offset(&b->h) + 1 > p->lost_end)
		p->lost_end = tfs_batch_last_offset(&b->h) + 1;
}

int tfs_repair_plan(struct tfs_io *io, const char *dir, struct tfs_repair_plan *plan)
{
	struct tfs_dir_listing l;
	struct tfs_record_iter it;
	tfs_offset_t expect = 0;
	size_t nlogs = 0;
	int rc;

	memset(plan, 0, sizeof(*plan));
	plan->cut_base = plan->keep_end = plan->lost_end = TFS_OFFSET_NONE;
	rc = tfs_inspect_list_dir(dir, &l);
	if (rc < 0)
		return rc;
	tfs_record_iter_init(&it);
	for (size_t i = 0; i < l.count && rc == 0; i++) {
		const struct tfs_dir_file *f = &l.files[i];
		tfs_offset_t next_base = INT64_MAX;
		struct tfs_segscan *s = NULL;
		struct tfs_scan_batch b;
		char path[PATH_CAP];

		if (f->kind != TFS_FILE_LOG)
			continue;
		nlogs++;
		for (size_t j = i + 1; j < l.count && next_base == INT64_MAX; j++)
			if (l.files[j].kind == TFS_FILE_LOG)
				next_base = l.files[j].base;
		join(path, sizeof(path), dir, f->name);
		rc = tfs_segscan_open(io, path, &s);
		if (rc < 0)
			break;
		if (plan->needed) {
			/* a whole segment after the cut */
			rc = push_seg(plan, f->base, 0, tfs_segscan_file_size(s));
			if (rc == 0 && f->base > plan->lost_end)
				plan->lost_end = f->base;
		}
		if (expect < f->base)
			expect = f->base;
		while (rc == 0 && (rc = tfs_segscan_next(s, &b)) == 1) {
			enum tfs_batch_fate fate;
			const char *why = b.why;

			rc = 0;
			if (plan->needed) {
				note_lost(plan, &plan->segs[plan->count - 1], &it, &b,
				          tfs_segscan_file_size(s));
				continue;
			}
			if (b.status == TFS_SCAN_BAD_HEADER || b.status == TFS_SCAN_TRUNCATED)
				fate = TFS_FATE_REST;
			else if (b.status == TFS_SCAN_BAD_BATCH)
				fate = TFS_FATE_SKIP;
			else if (count_records(&it, &b) < 0) {
				fate = TFS_FATE_SKIP;
				why = "records do not decode";
			} else {
				fate = tfs_batch_fate_offsets(&b.h, expect, next_base, &why);
			}
			if (fate == TFS_FATE_GOOD) {
				expect = tfs_batch_last_offset(&b.h) + 1;
				continue;
			}
			plan->needed = true;
			plan->cut_base = f->base;
			plan->cut_pos = b.pos;
			plan->why = why ? why : "invalid batch";
			plan->keep_end = plan->lost_end = expect;
			rc = push_seg(plan, f->base, b.pos, tfs_segscan_file_size(s));
			if (rc == 0)
				note_lost(plan, &plan->segs[0], &it, &b, tfs_segscan_file_size(s));
		}
		tfs_segscan_close(s);
	}
	tfs_record_iter_release(&it);
	tfs_dir_listing_release(&l);
	if (rc == 0 && nlogs == 0)
		rc = -ENOENT;
	if (rc < 0)
		tfs_repair_plan_release(plan);
	return rc;
}

void tfs_repair_plan_release(struct tfs_repair_plan *plan)
{
	if (!plan)
		return;
	free(plan->segs);
	plan->segs = NULL;
	plan->count = 0;
}

static void seg_name(char *buf, size_t cap, const char *dir, tfs_offset_t base, const char *suffix)
{
	int n = snprintf(buf, cap, "%s/%0*" PRId64 "%s", dir, TFS_SEGMENT_NAME_DIGITS, base, suffix);

	if (n < 0 || (size_t)n >= cap)
		buf[0] = '\0';
}

/* Every change to the disk goes through io, so that a fault spec can crash the
 * cut at each of its steps (test_corrupt.c sweeps them). */
static int unlink_indexes(struct tfs_io *io, const char *dir, tfs_offset_t base)
{
	static const char *const sfx[] = { ".index", ".timeindex" };
	char path[PATH_CAP];

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		int rc;
		seg_name(path, sizeof(path), dir, base, sfx[i]);
		rc = tfs_io_unlinkat(io, AT_FDCWD, path, 0);
		if (rc < 0 && rc != -ENOENT)
			return rc;
	}
	return 0;
}

static int fsync_dir(struct tfs_io *io, const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = tfs_io_fsync_dir(io, fd);
	close(fd);
	return rc;
}

/* Copies [from, size) of the file at src into a new file dst, fsynced. */
static int copy_tail(struct tfs_io *io, const char *src, tfs_pos_t from, int64_t size,
                     const char *dst)
{
	uint8_t *buf = malloc(COPY_CHUNK_BYTES);
	int in = -1, out = -1, rc = 0;

	if (!buf)
		return -ENOMEM;
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = -errno;
		goto out;
	}
	out = tfs_io_openat(io, AT_FDCWD, dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = out;
		goto out;
	}
	for (tfs_pos_t at = from; at < size;) {
		size_t want = (size_t)(size - at) < COPY_CHUNK_BYTES ? (size_t)(size - at) : COPY_CHUNK_BYTES;
		ssize_t n = tfs_io_read(io, in, buf, want, (uint64_t)at);
		if (n <= 0) {
			rc = n < 0 ? (int)n : -ESTALE;
			goto out;
		}
		rc = tfs_io_write(io, out, buf, (size_t)n, (uint64_t)(at - from));
		if (rc < 0)
			goto out;
		at += n;
	}
	rc = tfs_io_fsync(io, out, false);
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(buf);
	return rc;
}

/* Cuts the file at path to len bytes, durably. */
static int cut_file(struct tfs_io *io, const char *path, tfs_pos_t len)
{
	int fd = tfs_io_openat(io, AT_FDCWD, path, O_WRONLY | O_CLOEXEC, 0), rc;

	if (fd < 0)
		return fd;
	rc = tfs_io_ftruncate(io, fd, (uint64_t)len);
	if (rc == 0)
		rc = tfs_io_fsync(io, fd, false);
	close(fd);
	return rc;
}

int tfs_repair_apply(struct tfs_io *io, const char *dir, const struct tfs_repair_plan *plan,
                     const char *aside_dir)
{
	char path[PATH_CAP], aside[PATH_CAP];
	int rc = 0;

	if (!plan->needed)
		return 0;
	for (size_t i = 0; i < plan->count; i++) {
		struct stat st;
		seg_name(path, sizeof(path), dir, plan->segs[i].base, ".log");
		if (stat(path, &st) < 0)
			return -errno;
		if (st.st_size != plan->segs[i].size_bytes)
			return -ESTALE;
	}
	/* later segments first, highest base first: a crash leaves a shorter log */
	for (size_t i = plan->count; i-- > 1 && rc == 0;) {
		seg_name(path, sizeof(path), dir, plan->segs[i].base, ".log");
		seg_name(aside, sizeof(aside), aside_dir, plan->segs[i].base, ".log");
		rc = tfs_io_renameat(io, AT_FDCWD, path, AT_FDCWD, aside);
		if (rc == 0)
			rc = unlink_indexes(io, dir, plan->segs[i].base);
	}
	if (rc == 0 && plan->count > 1)
		rc = fsync_dir(io, aside_dir);
	if (rc == 0 && plan->count > 1)
		rc = fsync_dir(io, dir);
	if (rc == 0) {
		const struct tfs_repair_seg *s = &plan->segs[0];
		seg_name(path, sizeof(path), dir, s->base, ".log");
		seg_name(aside, sizeof(aside), aside_dir, s->base, ".log.cut");
		rc = copy_tail(io, path, s->from, s->size_bytes, aside);
		if (rc == 0)
			rc = fsync_dir(io, aside_dir);
		if (rc == 0)
			rc = unlink_indexes(io, dir, s->base);
		if (rc == 0)
			rc = cut_file(io, path, s->from);
		if (rc == 0)
			rc = fsync_dir(io, dir);
	}
	return rc;
}
