/* log_verify.c - verify: checks a partition directory or a whole data directory,
 * read-only, and reports every problem with its file and byte position (the list
 * of checks is at the top of log_inspect.h).
 *
 * A partition is checked segment by segment: the batches and records of its .log
 * (framed by the scanner of log_inspect.c), then its .index and .timeindex
 * against the batches just framed. A data directory adds what lies around the
 * partitions: the topic configs in DATA_DIR/topics/, Kafka's checkpoint files,
 * and the leftovers of interrupted work.
 */
#include "engine/inspect/log_inspect.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/format/batch_reader.h"
#include "engine/inspect/log_inspect_internal.h"
#include "engine/ondisk.h"
#include "engine/topic_config.h"
#include "io/file_util.h"

#define MSG_CAP 1024
#define SMALL_FILE_MAX ((size_t)16 << 20)     /* checkpoint and config files */

static bool is_checkpoint_name(const char *name)
{
	return ends_with(name, "-checkpoint") && !ends_with(name, TFS_SUFFIX_TMP);
}

static void finding(struct tfs_verify_ctx *ctx, enum tfs_finding kind, const char *path,
                    tfs_pos_t pos, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void finding(struct tfs_verify_ctx *ctx, enum tfs_finding kind, const char *path,
                    tfs_pos_t pos, const char *fmt, ...)
{
	char msg[MSG_CAP];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (kind == TFS_FINDING_PROBLEM)
		ctx->stats.problems++;
	else
		ctx->stats.notes++;
	ctx->finding(ctx->arg, kind, path, pos, msg);
}

#define PROBLEM(ctx, path, pos, ...) finding(ctx, TFS_FINDING_PROBLEM, path, pos, __VA_ARGS__)
#define NOTE(ctx, path, pos, ...) finding(ctx, TFS_FINDING_NOTE, path, pos, __VA_ARGS__)

/* A framed batch of the segment being verified, for the index checks. */
struct vbatch {
	tfs_pos_t pos;
	tfs_offset_t base, last;
	int64_t max_ts;
};

struct vseg {
	struct vbatch *b;
	size_t n, cap;
	tfs_pos_t framed_end;       /* bytes before it were framed; index entries past it
	                             * cannot be checked */
	bool offsets_sorted;        /* bases strictly increase (binary search by offset) */
};

static int vseg_push(struct vseg *v, const struct vbatch *b)
{
	if (v->n == v->cap) {
		size_t nc = v->cap ? v->cap * 2 : 256;
		struct vbatch *nb = realloc(v->b, nc * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		v->b = nb;
		v->cap = nc;
	}
	v->b[v->n++] = *b;
	return 0;
}

static const struct vbatch *vseg_at_pos(const struct vseg *v, tfs_pos_t pos)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v->b[mid].pos == pos)
			return &v->b[mid];
		if (v->b[mid].pos < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static const struct vbatch *vseg_holding(const struct vseg *v, tfs_offset_t off)
{
	if (v->offsets_sorted) {
		size_t lo = 0, hi = v->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (v->b[mid].last < off)
				lo = mid + 1;
			else
				hi = mid;
		}
		return lo < v->n && v->b[lo].base <= off ? &v->b[lo] : NULL;
	}
	for (size_t i = 0; i < v->n; i++)
		if (v->b[i].base <= off && off <= v->b[i].last)
			return &v->b[i];
	return NULL;
}

static void progress(struct tfs_verify_ctx *ctx)
{
	if (ctx->progress)
		ctx->progress(ctx->arg, ctx->stats.bytes, ctx->progress_total);
}

/* The records of one CRC-valid batch: structure, count, offset deltas. Returns
 * false when they do not decode (the mount then cannot read the batch). */
static bool verify_records(struct tfs_verify_ctx *ctx, struct tfs_record_iter *it,
                           const char *path, const struct tfs_scan_batch *b)
{
	struct tfs_record r;
	const char *why = NULL;
	int32_t prev = -1, n = 0;
	int rc = tfs_record_iter_reset(it, b->bytes, b->size, &why);

	if (rc == TFS_EUNSUPPORTED) {
		NOTE(ctx, path, b->pos, "batch %" PRId64 "..%" PRId64 ": records not checked (%s)",
		     b->h.base_offset, tfs_batch_last_offset(&b->h), why ? why : "unsupported codec");
		return true;
	}
	while (rc == 0 && (rc = tfs_record_iter_next(it, &r, &why)) == 1) {
		if (r.offset_delta <= prev || r.offset_delta > b->h.last_offset_delta) {
			PROBLEM(ctx, path, b->pos, "batch %" PRId64 "..%" PRId64 ": record %" PRId32
			        " has offset delta %" PRId32 " (previous %" PRId32 ", last offset delta %"
			        PRId32 ")", b->h.base_offset, tfs_batch_last_offset(&b->h), n,
			        r.offset_delta, prev, b->h.last_offset_delta);
		}
		prev = r.offset_delta;
		n++;
		rc = 0;
	}
	if (rc < 0)
		PROBLEM(ctx, path, b->pos, "batch %" PRId64 "..%" PRId64 ": record %" PRId32 ": %s",
		        b->h.base_offset, tfs_batch_last_offset(&b->h), n,
		        why ? why : tfs_strerror(rc));
	ctx->stats.records += n;
	return rc >= 0;
}

/* Header fields that the CRC does not make trustworthy, and the offset order. */
static void verify_offsets(struct tfs_verify_ctx *ctx, const char *path, tfs_offset_t seg_base,
                           const struct tfs_batch_header *h, tfs_pos_t pos, tfs_offset_t *prev_last,
                           const char **prev_path)
{
	tfs_offset_t last = tfs_batch_last_offset(h);

	if (h->last_offset_delta < 0)
		PROBLEM(ctx, path, pos, "batch at offset %" PRId64 ": negative last offset delta %" PRId32,
		        h->base_offset, h->last_offset_delta);
	if (h->records_count < 0 || (int64_t)h->records_count > (int64_t)h->last_offset_delta + 1)
		PROBLEM(ctx, path, pos, "batch %" PRId64 "..%" PRId64 ": %" PRId32
		        " records do not fit its offsets", h->base_offset, last, h->records_count);
	if (h->base_offset < seg_base)
		PROBLEM(ctx, path, pos, "batch base offset %" PRId64 " is below the segment's base offset %"
		        PRId64, h->base_offset, seg_base);
	else if (last - seg_base > INT32_MAX)
		PROBLEM(ctx, path, pos, "offset %" PRId64 " is too far from the segment's base offset %"
		        PRId64 " for 32-bit relative offsets", last, seg_base);
	if (*prev_last != TFS_OFFSET_NONE && h->base_offset <= *prev_last)
		PROBLEM(ctx, path, pos, "offsets go backwards: batch base offset %" PRId64
		        " after offset %" PRId64 "%s%s", h->base_offset, *prev_last,
		        *prev_path && strcmp(*prev_path, path) ? " in " : "",
		        *prev_path && strcmp(*prev_path, path) ? *prev_path : "");
	if (*prev_last == TFS_OFFSET_NONE || last > *prev_last)
		*prev_last = last;
}

static void verify_index(struct tfs_verify_ctx *ctx, const char *path, tfs_offset_t base,
                         const struct vseg *v, const char *log_name, int64_t log_size)
{
	struct tfs_index_entry *e = NULL;
	size_t n = 0, tail = 0;
	int rc = tfs_inspect_read_index(ctx->io, path, &e, &n, &tail);

	if (rc == -ENOENT)
		return;         /* an index is optional: recovery rebuilds a missing one */
	if (rc < 0) {
		PROBLEM(ctx, path, -1, "cannot read: %s", tfs_strerror(rc));
		return;
	}
	if (tail)
		PROBLEM(ctx, path, (tfs_pos_t)(n * TFS_INDEX_ENTRY_BYTES),
		        "%zu trailing bytes are not a whole 8-byte entry", tail);
	for (size_t i = 0; i < n; i++) {
		tfs_pos_t at = (tfs_pos_t)(i * TFS_INDEX_ENTRY_BYTES);
		tfs_offset_t off = base + e[i].rel_offset;
		const struct vbatch *b;

		ctx->stats.index_entries++;
		if (e[i].rel_offset < 0 || e[i].pos < 0) {
			PROBLEM(ctx, path, at, "entry %zu: negative relative offset %" PRId32
			        " or position %" PRId32, i, e[i].rel_offset, e[i].pos);
			continue;
		}
		if (i > 0 && (e[i].rel_offset <= e[i - 1].rel_offset || e[i].pos <= e[i - 1].pos))
			PROBLEM(ctx, path, at, "entry %zu (offset %" PRId64 ", position %" PRId32
			        ") does not increase over entry %zu (offset %" PRId64 ", position %" PRId32 ")",
			        i, off, e[i].pos, i - 1, base + e[i - 1].rel_offset, e[i - 1].pos);
		if (e[i].pos >= log_size) {
			PROBLEM(ctx, path, at, "entry %zu: position %" PRId32 " is past the end of %s (%"
			        PRId64 " bytes)", i, e[i].pos, log_name, log_size);
			continue;
		}
		if (e[i].pos >= v->framed_end)
			continue;       /* past where the log could be framed: already reported */
		b = vseg_at_pos(v, e[i].pos);
		if (!b)
			PROBLEM(ctx, path, at, "entry %zu: position %" PRId32
			        " is not the start of a batch in %s", i, e[i].pos, log_name);
		else if (b->last != off)
			PROBLEM(ctx, path, at, "entry %zu: offset %" PRId64 ", but the batch at position %"
			        PRId32 " ends at offset %" PRId64, i, off, e[i].pos, b->last);
	}
	free(e);
}

static void verify_timeindex(struct tfs_verify_ctx *ctx, const char *path, tfs_offset_t base,
                             const struct vseg *v, const char *log_name, bool complete)
{
	struct tfs_timeindex_entry *e = NULL;
	size_t n = 0, tail = 0;
	int rc = tfs_inspect_read_timeindex(ctx->io, path, &e, &n, &tail);

	if (rc == -ENOENT)
		return;
	if (rc < 0) {
		PROBLEM(ctx, path, -1, "cannot read: %s", tfs_strerror(rc));
		return;
	}
	if (tail)
		PROBLEM(ctx, path, (tfs_pos_t)(n * TFS_TIMEINDEX_ENTRY_BYTES),
		        "%zu trailing bytes are not a whole 12-byte entry", tail);
	for (size_t i = 0; i < n; i++) {
		tfs_pos_t at = (tfs_pos_t)(i * TFS_TIMEINDEX_ENTRY_BYTES);
		tfs_offset_t off = base + e[i].rel_offset;
		const struct vbatch *b;

		ctx->stats.index_entries++;
		if (i > 0 && (e[i].timestamp < e[i - 1].timestamp ||
		              e[i].rel_offset < e[i - 1].rel_offset))
			PROBLEM(ctx, path, at, "entry %zu (timestamp %" PRId64 ", offset %" PRId64
			        ") goes backwards from entry %zu (timestamp %" PRId64 ", offset %" PRId64 ")",
			        i, e[i].timestamp, off, i - 1, e[i - 1].timestamp,
			        base + e[i - 1].rel_offset);
		if (e[i].rel_offset < 0) {
			PROBLEM(ctx, path, at, "entry %zu: negative relative offset %" PRId32, i,
			        e[i].rel_offset);
			continue;
		}
		b = vseg_holding(v, off);
		if (!b) {
			if (complete)
				PROBLEM(ctx, path, at, "entry %zu: offset %" PRId64 " is in no batch of %s",
				        i, off, log_name);
		} else if (b->max_ts != e[i].timestamp) {
			PROBLEM(ctx, path, at, "entry %zu: timestamp %" PRId64 ", but the batch holding offset %"
			        PRId64 " has max timestamp %" PRId64, i, e[i].timestamp, off, b->max_ts);
		}
	}
	free(e);
}

/* What the mount makes of a segment, by the rule of engine/format/batch_reader.h: the region of
 * unreadable batches being read through, or the torn tail of the last segment. */
struct vfate {
	bool last;                  /* the active segment: its first bad batch is cut */
	bool torn;                  /* ... and was reported */
	tfs_pos_t region_pos;       /* >= 0: a sealed segment's region starts here */
	tfs_offset_t region_first;
	const char *region_why;
};

static void report_region(struct tfs_verify_ctx *ctx, const char *path, const struct vfate *f,
                          tfs_pos_t end, tfs_offset_t next)
{
	if (next < f->region_first)
		next = f->region_first;
	PROBLEM(ctx, path, f->region_pos, "sealed segment damaged: bytes %" PRId64 "..%" PRId64
	        " unreadable (%s), offsets %" PRId64 "..%" PRId64 " unknown; the mount never "
	        "cuts it: it reads EIO there and for every key whose newest readable record "
	        "precedes offset %" PRId64 "; topicctl repair truncates the log at position %"
	        PRId64, f->region_pos, end - 1, f->region_why, f->region_first, next - 1,
	        f->region_first, f->region_pos);
}

/* One step of the mount's rule: fate of the batch b (good or not, why). */
static void vfate_step(struct tfs_verify_ctx *ctx, const char *path, struct vfate *f,
                       const struct tfs_scan_batch *b, enum tfs_batch_fate fate, const char *why,
                       tfs_offset_t *expect, int64_t file_size)
{
	if (fate == TFS_FATE_GOOD) {
		if (f->region_pos >= 0) {
			report_region(ctx, path, f, b->pos, b->h.base_offset);
			f->region_pos = -1;
		}
		*expect = tfs_batch_last_offset(&b->h) + 1;
		return;
	}
	if (f->last) {
		if (!f->torn)
			PROBLEM(ctx, path, b->pos, "the active segment's tail from here (%" PRId64
			        " bytes) is cut by the next mount: %s", file_size - b->pos, why);
		f->torn = true;
	} else if (f->region_pos < 0) {
		f->region_pos = b->pos;
		f->region_first = *expect;
		f->region_why = why;
	}
}

/* One segment: its batches and records, then its two indexes. expect: the
 * smallest offset the mount allows next (engine/format/batch_reader.h), carried across segments. */
static int verify_segment(struct tfs_verify_ctx *ctx, struct tfs_record_iter *it, const char *dir,
                          const struct tfs_dir_file *f, tfs_offset_t next_base,
                          tfs_offset_t *prev_last, char *prev_path, tfs_offset_t *expect)
{
	char path[PATH_CAP], ipath[PATH_CAP];
	struct tfs_segscan *s = NULL;
	struct tfs_scan_batch b;
	struct vseg v = { .offsets_sorted = true };
	struct vfate vf = { .last = next_base == INT64_MAX, .region_pos = -1 };
	tfs_offset_t seg_last = TFS_OFFSET_NONE;
	const char *pp = prev_path[0] ? prev_path : NULL;
	bool complete = true;
	int rc;

	join(path, sizeof(path), dir, f->name);
	rc = tfs_segscan_open(ctx->io, path, &s);
	if (rc < 0) {
		PROBLEM(ctx, path, -1, "cannot open: %s", tfs_strerror(rc));
		return 0;
	}
	if (*expect < f->base)
		*expect = f->base;
	ctx->stats.segments++;
	while ((rc = tfs_segscan_next(s, &b)) == 1) {
		enum tfs_batch_fate fate = TFS_FATE_GOOD;
		const char *why = b.why;
		struct vbatch vb;

		if (b.status == TFS_SCAN_BAD_HEADER) {
			PROBLEM(ctx, path, b.pos, "bad batch header: %s; the rest of the file (%" PRId64
			        " bytes) cannot be read", b.why,
			        tfs_segscan_file_size(s) - b.pos);
			vfate_step(ctx, path, &vf, &b, TFS_FATE_REST, b.why, expect, tfs_segscan_file_size(s));
			complete = false;
			break;
		}
		if (b.status == TFS_SCAN_TRUNCATED) {
			PROBLEM(ctx, path, b.pos, "truncated batch: %s (%zu of %zu bytes present)%s",
			        b.why, b.size, b.header_valid ? tfs_batch_size(&b.h) : (size_t)TFS_BATCH_HEADER_BYTES,
			        vf.last ? "; a torn tail, cut by the next mount" : "");
			vfate_step(ctx, path, &vf, &b, TFS_FATE_REST, b.why, expect, tfs_segscan_file_size(s));
			complete = false;
			break;
		}
		ctx->stats.batches++;
		ctx->stats.bytes += (int64_t)b.size;
		if (b.status == TFS_SCAN_BAD_BATCH) {
			PROBLEM(ctx, path, b.pos, "batch %" PRId64 "..%" PRId64 " (%zu bytes): %s",
			        b.h.base_offset, tfs_batch_last_offset(&b.h), b.size, b.why);
			fate = TFS_FATE_SKIP;
		} else if (!verify_records(ctx, it, path, &b)) {
			fate = TFS_FATE_SKIP;
			why = "records do not decode";
		} else {
			fate = tfs_batch_fate_offsets(&b.h, *expect, next_base, &why);
		}
		if (v.n && b.h.base_offset <= v.b[v.n - 1].last)
			v.offsets_sorted = false;
		verify_offsets(ctx, path, f->base, &b.h, b.pos, prev_last, &pp);
		pp = NULL;
		vfate_step(ctx, path, &vf, &b, fate, why, expect, tfs_segscan_file_size(s));
		if (seg_last == TFS_OFFSET_NONE || tfs_batch_last_offset(&b.h) > seg_last)
			seg_last = tfs_batch_last_offset(&b.h);
		vb = (struct vbatch){ b.pos, b.h.base_offset, tfs_batch_last_offset(&b.h),
		                      b.h.max_timestamp };
		if ((rc = vseg_push(&v, &vb)) < 0)
			goto out;
		v.framed_end = b.pos + (tfs_pos_t)b.size;
		if (ctx->stats.batches % PROGRESS_EVERY_BATCHES == 0)
			progress(ctx);
	}
	if (rc < 0) {
		PROBLEM(ctx, path, -1, "read failed: %s", tfs_strerror(rc));
		complete = false;
	}
	rc = 0;
	if (vf.region_pos >= 0)
		report_region(ctx, path, &vf, tfs_segscan_file_size(s),
		              next_base > *expect ? next_base : *expect);
	if (!complete) {
		/* count the unreadable rest as done for the progress bar */
		ctx->stats.bytes += tfs_segscan_file_size(s) - v.framed_end;
	}
	if (seg_last != TFS_OFFSET_NONE && seg_last >= next_base)
		PROBLEM(ctx, path, -1, "holds offset %" PRId64 " at or past the next segment's base offset %"
		        PRId64, seg_last, next_base);
	snprintf(prev_path, PATH_CAP, "%s", path);
	snprintf(ipath, sizeof(ipath), "%s/%0*" PRId64 TFS_SUFFIX_INDEX, dir, TFS_SEGMENT_NAME_DIGITS,
	         f->base);
	verify_index(ctx, ipath, f->base, &v, f->name, tfs_segscan_file_size(s));
	snprintf(ipath, sizeof(ipath), "%s/%0*" PRId64 TFS_SUFFIX_TIMEINDEX, dir, TFS_SEGMENT_NAME_DIGITS,
	         f->base);
	verify_timeindex(ctx, ipath, f->base, &v, f->name, complete);
	progress(ctx);
out:
	free(v.b);
	tfs_segscan_close(s);
	return rc;
}

static const char *leftover_reason(const char *name)
{
	if (ends_with(name, TFS_SUFFIX_CLEANED))
		return "leftover of an interrupted cleaning pass (the next mount removes it)";
	if (ends_with(name, TFS_SUFFIX_SWAP))
		return "leftover of an interrupted segment swap (the next mount finishes or discards it)";
	if (ends_with(name, TFS_SUFFIX_DELETED))
		return "leftover of an interrupted segment deletion (the next mount removes it)";
	return "leftover temporary file of an interrupted atomic replace (the next mount removes it)";
}

/* The partition's log end (last offset + 1), for the checkpoint checks. */
static int verify_partition(struct tfs_verify_ctx *ctx, const char *dir, tfs_offset_t *log_end)
{
	struct tfs_dir_listing l;
	struct tfs_record_iter it;
	char path[PATH_CAP];
	char *prev_path = NULL;
	tfs_offset_t prev_last = TFS_OFFSET_NONE, expect = 0;
	int rc = tfs_inspect_list_dir(dir, &l);

	if (log_end)
		*log_end = TFS_OFFSET_NONE;
	if (rc < 0)
		return rc;
	prev_path = calloc(1, PATH_CAP);
	if (!prev_path) {
		tfs_dir_listing_release(&l);
		return -ENOMEM;
	}
	tfs_record_iter_init(&it);
	ctx->stats.partitions++;
	for (size_t i = 0; i < l.count; i++) {
		const struct tfs_dir_file *f = &l.files[i];

		join(path, sizeof(path), dir, f->name);
		if (f->kind == TFS_FILE_TXNINDEX && f->size_bytes % TFS_TXNINDEX_ENTRY_BYTES != 0)
			PROBLEM(ctx, path, -1, ".txnindex of %" PRId64 " bytes: not whole %d-byte "
			        "entries (the next open rebuilds it)", f->size_bytes,
			        TFS_TXNINDEX_ENTRY_BYTES);
		switch (f->kind) {
		case TFS_FILE_LEFTOVER:
			PROBLEM(ctx, path, -1, "%s", leftover_reason(f->name));
			break;
		case TFS_FILE_TXNINDEX:               /* goes with its segment, as the others */
		case TFS_FILE_INDEX:
		case TFS_FILE_TIMEINDEX: {
			bool have_log = false;
			for (size_t j = 0; j < l.count && !have_log; j++)
				have_log = l.files[j].kind == TFS_FILE_LOG && l.files[j].base == f->base;
			if (!have_log)
				PROBLEM(ctx, path, -1, "index file without its segment (no %0*" PRId64 ".log)",
				        TFS_SEGMENT_NAME_DIGITS, f->base);
			break;
		}
		case TFS_FILE_OTHER:
			NOTE(ctx, path, -1, "not a topicfs or Kafka file; ignored");
			break;
		default:
			break;
		}
	}
	for (size_t i = 0; i < l.count && rc == 0; i++) {
		tfs_offset_t next_base = INT64_MAX;

		if (l.files[i].kind != TFS_FILE_LOG)
			continue;
		for (size_t j = i + 1; j < l.count; j++) {
			if (l.files[j].kind == TFS_FILE_LOG) {
				next_base = l.files[j].base;
				break;
			}
		}
		rc = verify_segment(ctx, &it, dir, &l.files[i], next_base, &prev_last, prev_path,
		                    &expect);
		if (log_end) {
			tfs_offset_t end = prev_last == TFS_OFFSET_NONE ? l.files[i].base : prev_last + 1;
			if (end > *log_end)
				*log_end = end;
		}
	}
	tfs_record_iter_release(&it);
	tfs_dir_listing_release(&l);
	free(prev_path);
	return rc;
}

int tfs_inspect_verify_partition(struct tfs_verify_ctx *ctx, const char *dir)
{
	if (ctx->progress && ctx->progress_total == 0) {
		struct tfs_dir_listing l;
		if (tfs_inspect_list_dir(dir, &l) == 0) {
			for (size_t i = 0; i < l.count; i++)
				if (l.files[i].kind == TFS_FILE_LOG && l.files[i].size_bytes > 0)
					ctx->progress_total += l.files[i].size_bytes;
			tfs_dir_listing_release(&l);
		}
	}
	return verify_partition(ctx, dir, NULL);
}

bool tfs_inspect_is_partition_dir(const char *dir)
{
	struct tfs_dir_listing l;
	const char *base = strrchr(dir, '/');
	char topic[256], path[PATH_CAP];
	int32_t part;
	bool segments = false, data_dir = false;
	struct stat st;
	DIR *d;
	struct dirent *de;

	if (tfs_inspect_list_dir(dir, &l) == 0) {
		for (size_t i = 0; i < l.count; i++) {
			enum tfs_file_kind k = l.files[i].kind;
			segments |= k == TFS_FILE_LOG || k == TFS_FILE_INDEX || k == TFS_FILE_TIMEINDEX;
			data_dir |= is_checkpoint_name(l.files[i].name);
		}
		tfs_dir_listing_release(&l);
	}
	if (segments)
		return true;
	/* a data directory holds the topics/ directory of configs and partition
	 * directories (a partition holds neither) */
	join(path, sizeof(path), dir, TFS_CONFIG_DIR);
	data_dir |= stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	if (!data_dir && (d = opendir(dir))) {
		while (!data_dir && (de = readdir(d)))
			data_dir = de->d_name[0] != '.' &&
			           tfs_partition_dir_parse(de->d_name, topic, sizeof(topic), &part) == 0;
		closedir(d);
	}
	if (data_dir)
		return false;
	base = base ? base + 1 : dir;
	return tfs_partition_dir_parse(base, topic, sizeof(topic), &part) == 0;
}

/* Finds the first line of a config file that tfs_topic_config_set (or the
 * topicfs.* ownership rules) refuses, to point at it. */
static tfs_pos_t config_bad_line(const char *text, size_t len, char *why, size_t cap,
                                 unsigned *lineno_out)
{
	struct tfs_topic_config scratch;
	const char *p = text, *end = text + len;
	unsigned lineno = 0;

	tfs_topic_config_defaults(&scratch);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *le = eol ? eol : end;
		const char *a = p, *b = le, *eq;
		char name[256], value[256];
		size_t nl, vl;

		lineno++;
		while (a < b && (*a == ' ' || *a == '\t' || *a == '\r'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
			b--;
		if (a == b || *a == '#' || *a == '!')
			goto next;
		eq = memchr(a, '=', (size_t)(b - a));
		if (!eq) {
			snprintf(why, cap, "no '=' on the line");
			goto bad;
		}
		{
			const char *ne = eq, *vs = eq + 1;
			while (ne > a && (ne[-1] == ' ' || ne[-1] == '\t'))
				ne--;
			while (vs < b && (*vs == ' ' || *vs == '\t'))
				vs++;
			nl = (size_t)(ne - a);
			vl = (size_t)(b - vs);
			if (nl >= sizeof(name) || vl >= sizeof(value)) {
				snprintf(why, cap, "name or value too long");
				goto bad;
			}
			memcpy(name, a, nl);
			name[nl] = '\0';
			memcpy(value, vs, vl);
			value[vl] = '\0';
		}
		if (!strncmp(name, "topicfs.", strlen("topicfs."))) {
			int64_t v;
			const char *k = name + strlen("topicfs.");
			bool ok;
			if (!strcmp(k, "uid") || !strcmp(k, "gid")) {
				ok = parse_int(value, vl, 0, UINT32_MAX - 1, &v);
			} else if (!strcmp(k, "mode")) {
				char *e = NULL;
				errno = 0;
				v = vl ? (int64_t)strtoll(value, &e, 8) : -1;
				ok = vl && !errno && e && !*e && value[0] >= '0' && value[0] <= '7' &&
				     v >= 0 && v <= 07777;
			} else if (!strcmp(k, "partitions")) {
				ok = parse_int(value, vl, 1, INT32_MAX, &v);
			} else {
				snprintf(why, cap, "unknown name %.100s", name);
				goto bad;
			}
			if (!ok) {
				snprintf(why, cap, "bad value for %.100s: \"%.100s\"", name, value);
				goto bad;
			}
		} else if (tfs_topic_config_set(&scratch, name, value) < 0) {
			bool known = false;
			for (const char *const *n = tfs_topic_config_names(); *n && !known; n++)
				known = !strcmp(*n, name);
			if (known)
				snprintf(why, cap, "bad value for %.100s: \"%.100s\"", name, value);
			else
				snprintf(why, cap, "unknown config name %.100s", name);
			goto bad;
		}
	next:
		p = eol ? eol + 1 : end;
		continue;
	bad:
		*lineno_out = lineno;
		return p - text;
	}
	return -1;
}

/* A topic's config file: returns its topicfs.partitions (0 when absent or
 * unreadable). */
static int32_t verify_config(struct tfs_verify_ctx *ctx, const char *path)
{
	struct tfs_topic_config c;
	struct tfs_topic_meta m = { 0 };
	char *text = NULL;
	size_t len = 0;
	int rc;

	tfs_topic_config_defaults(&c);
	rc = tfs_topic_config_load(path, &c, &m);
	if (rc == 0)
		return m.partitions;
	if (tfs_file_read_all(ctx->io, AT_FDCWD, path, SMALL_FILE_MAX, &text, &len) == 0) {
		char why[MSG_CAP / 2];
		unsigned lineno = 0;
		tfs_pos_t at;
		size_t body = len;
		int crc = strlen(text) == len ? tfs_topic_config_crc_check(text, len, &body) : 0;
		if (strlen(text) != len) {
			PROBLEM(ctx, path, (tfs_pos_t)strlen(text), "config file holds a NUL byte");
		} else if (crc == -EBADMSG) {
			PROBLEM(ctx, path, (tfs_pos_t)body, "config file does not match its "
			        "topicfs.crc32c line: damaged, or edited by hand (then delete that line)");
		} else if (crc < 0) {
			PROBLEM(ctx, path, -1, "config file has a damaged topicfs.crc32c line");
		} else if ((at = config_bad_line(text, body, why, sizeof(why), &lineno)) >= 0) {
			PROBLEM(ctx, path, at, "config line %u: %s", lineno, why);
		} else {
			PROBLEM(ctx, path, -1, "config file does not load: %s", tfs_strerror(rc));
		}
	} else {
		PROBLEM(ctx, path, -1, "config file does not load: %s", tfs_strerror(rc));
	}
	free(text);
	return 0;
}

struct seen_part {
	char topic[256];
	int32_t partition;
	tfs_offset_t log_end;
};

struct seen_topic {
	char topic[256];
	int32_t partitions;
	char path[PATH_CAP];
};

struct seen_topics {
	struct seen_topic *v;
	size_t n, cap;
};

static void verify_checkpoint(struct tfs_verify_ctx *ctx, const char *path, bool cleaner,
                              const struct seen_part *parts, size_t nparts)
{
	struct tfs_checkpoint_entry *e = NULL;
	char *text = NULL;
	size_t len = 0, n = 0;
	tfs_pos_t at;
	const char *why;
	int rc = tfs_file_read_all(ctx->io, AT_FDCWD, path, SMALL_FILE_MAX, &text, &len);

	if (rc < 0) {
		PROBLEM(ctx, path, -1, "cannot read: %s", tfs_strerror(rc));
		return;
	}
	rc = tfs_checkpoint_parse(text, len, &e, &n, &at, &why);
	if (rc == -ENOMEM) {
		PROBLEM(ctx, path, -1, "cannot check: out of memory");
	} else if (rc < 0) {
		PROBLEM(ctx, path, at, "not a Kafka offset checkpoint: %s", why);
	} else if (cleaner) {
		for (size_t i = 0; i < n; i++) {
			const struct seen_part *p = NULL;
			for (size_t j = 0; j < nparts && !p; j++)
				if (parts[j].partition == e[i].partition && !strcmp(parts[j].topic, e[i].topic))
					p = &parts[j];
			if (!p)
				NOTE(ctx, path, -1, "entry %s %" PRId32 " names a partition with no directory",
				     e[i].topic, e[i].partition);
			else if (p->log_end != TFS_OFFSET_NONE && e[i].offset > p->log_end)
				NOTE(ctx, path, -1, "entry %s %" PRId32 ": first dirty offset %" PRId64
				     " is past the log end %" PRId64 " (the cleaner starts over)",
				     e[i].topic, e[i].partition, e[i].offset, p->log_end);
		}
	}
	free(e);
	free(text);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The names in dir but the "." ones, sorted. Caller owns *out: free_names. */
static int list_names(const char *dir, char ***out, size_t *count)
{
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	*out = NULL;
	*count = 0;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			char **nn = realloc(names, nc * sizeof(*nn));
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
			cap = nc;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (rc < 0) {
		free_names(names, n);
		return rc;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	*out = names;
	*count = n;
	return 0;
}

/* DATA_DIR/topics/: one config file per committed topic, named after the topic.
 * A name engine.c's load_configs skips is reported: a leftover "<topic>.tmp" of
 * an interrupted replace as a problem, anything else as a note. Every config
 * found is appended to *topics for the partition-count check. */
static int verify_topics_dir(struct tfs_verify_ctx *ctx, const char *dir,
                             struct seen_topics *topics)
{
	char **names;
	size_t n;
	char path[PATH_CAP];
	int rc = list_names(dir, &names, &n);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct seen_topic *t;
		struct stat st;

		join(path, sizeof(path), dir, names[i]);
		if (lstat(path, &st) < 0)
			continue;       /* gone meanwhile (a topic deleted through a live mount) */
		if (ends_with(names[i], TFS_SUFFIX_TMP)) {
			PROBLEM(ctx, path, -1, "%s", leftover_reason(names[i]));
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			NOTE(ctx, path, -1, "not a topic config file; ignored");
			continue;
		}
		if (!tfs_topic_name_valid(names[i])) {
			NOTE(ctx, path, -1, "not a topic config (bad topic name); ignored");
			continue;
		}
		if (topics->n == topics->cap) {
			size_t nc = topics->cap ? topics->cap * 2 : 16;
			struct seen_topic *nv = realloc(topics->v, nc * sizeof(*nv));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			topics->v = nv;
			topics->cap = nc;
		}
		t = &topics->v[topics->n++];
		snprintf(t->topic, sizeof(t->topic), "%s", names[i]);
		snprintf(t->path, sizeof(t->path), "%s", path);
		t->partitions = verify_config(ctx, path);
	}
	free_names(names, n);
	return rc;
}

int tfs_inspect_verify_data_dir(struct tfs_verify_ctx *ctx, const char *dir)
{
	char **names = NULL;
	size_t n = 0;
	struct seen_part *parts = NULL;
	size_t nparts = 0;
	struct seen_topics topics = { 0 };
	char path[PATH_CAP];
	int rc = list_names(dir, &names, &n);

	if (rc < 0)
		return rc;
	parts = calloc(n ? n : 1, sizeof(*parts));
	if (!parts) {
		rc = -ENOMEM;
		goto out;
	}
	/* the progress total: every .log of every partition directory */
	if (ctx->progress) {
		for (size_t i = 0; i < n; i++) {
			struct tfs_dir_listing l;
			char topic[256];
			int32_t p;
			if (tfs_partition_dir_parse(names[i], topic, sizeof(topic), &p) < 0)
				continue;
			join(path, sizeof(path), dir, names[i]);
			if (tfs_inspect_list_dir(path, &l) < 0)
				continue;
			for (size_t j = 0; j < l.count; j++)
				if (l.files[j].kind == TFS_FILE_LOG && l.files[j].size_bytes > 0)
					ctx->progress_total += l.files[j].size_bytes;
			tfs_dir_listing_release(&l);
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct stat st;
		char topic[256];
		int32_t p;

		join(path, sizeof(path), dir, names[i]);
		if (lstat(path, &st) < 0)
			continue;       /* gone meanwhile */
		if (S_ISDIR(st.st_mode)) {
			if (!strcmp(names[i], TFS_CONFIG_DIR)) {
				rc = verify_topics_dir(ctx, path, &topics);
				if (rc < 0) {
					PROBLEM(ctx, path, -1, "cannot read the directory: %s", tfs_strerror(rc));
					rc = 0;
				}
			} else if (ends_with(names[i], "-delete")) {
				PROBLEM(ctx, path, -1, "directory of a deleted partition left behind "
				        "(the next mount removes it)");
			} else if (tfs_partition_dir_parse(names[i], topic, sizeof(topic), &p) == 0) {
				struct seen_part *sp = &parts[nparts++];
				snprintf(sp->topic, sizeof(sp->topic), "%s", topic);
				sp->partition = p;
				rc = verify_partition(ctx, path, &sp->log_end);
				if (rc < 0) {
					PROBLEM(ctx, path, -1, "cannot read the directory: %s", tfs_strerror(rc));
					rc = 0;
				}
			} else {
				NOTE(ctx, path, -1, "not a partition directory; ignored");
			}
		} else if (S_ISREG(st.st_mode)) {
			if (ends_with(names[i], TFS_SUFFIX_TMP)) {
				PROBLEM(ctx, path, -1, "%s", leftover_reason(names[i]));
			} else if (!strcmp(names[i], TFS_CONFIG_DIR)) {
				PROBLEM(ctx, path, -1, "a file where the directory of topic configs belongs "
				        "(%s/<topic>)", TFS_CONFIG_DIR);
			} else if (is_checkpoint_name(names[i]) || !strcmp(names[i], TFS_CLEANER_LOG_FILE) ||
			           !strcmp(names[i], "meta.properties")) {
				/* checkpoints are checked below, once every partition is known */
			} else {
				NOTE(ctx, path, -1, "not a topicfs or Kafka file; ignored");
			}
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!is_checkpoint_name(names[i]))
			continue;
		join(path, sizeof(path), dir, names[i]);
		verify_checkpoint(ctx, path, !strcmp(names[i], TFS_CHECKPOINT_FILE), parts, nparts);
	}
	for (size_t i = 0; i < topics.n; i++) {
		const struct seen_topic *t = &topics.v[i];
		for (int32_t p = 0; p < t->partitions; p++) {
			bool found = false;
			for (size_t j = 0; j < nparts && !found; j++)
				found = parts[j].partition == p && !strcmp(parts[j].topic, t->topic);
			if (!found)
				PROBLEM(ctx, t->path, -1, "topicfs.partitions is %" PRId32
				        " but there is no directory %s-%" PRId32, t->partitions, t->topic, p);
		}
	}
out:
	free_names(names, n);
	free(parts);
	free(topics.v);
	return rc;
}
