/* fuzz_segment.c - segment and index files at open: recovery (engine/
 * log_recovery.c, segment.c), the key directory rebuild, point reads, history
 * cursors and verify (engine/inspect/log_verify.c) on files made of fuzz bytes.
 *
 * Input layout: chunks of [selector][3-byte little-endian length][bytes] until
 * the input ends (a short last chunk takes what is left). Selector bits 0-1:
 * what the bytes are (0 .log, 1 .index, 2 .timeindex, 3 the topic's config file
 * DATA_DIR/topics/s); bits 2-4: which segment (base offsets 0, 3, 10, 20, 50,
 * 100, 1000, 100000); bit 5: for a .log, the CRC of every batch that can be
 * framed is made right first (so that changed records reach the record
 * checks). A later chunk for the same file replaces an earlier one.
 * The files go into a fresh data directory as topic "s", partition 0.
 *
 * Then, and each must end without a crash, leak or undefined behaviour:
 *   1. verify the data directory as it is (what `topicctl verify` does);
 *   2. open an engine on it (recovery); for topic s, if it opened: every key the
 *      key directory lists reads either a record of that key at an offset below
 *      the log end or an error; every key's versions ascend; the history read
 *      from the start has strictly ascending offsets inside [log start, log end);
 *   3. close and open again: recovery is idempotent, the second open sees the
 *      same log start, log end and live keys as the first;
 *   4. verify again (after recovery's repairs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "engine/inspect/log_inspect.h"
#include "io/io.h"
#include "tests/fuzz/fz.h"

#define TOPIC "s"
#define SEGMENTS 8
static const tfs_offset_t seg_bases[SEGMENTS] = { 0, 3, 10, 20, 50, 100, 1000, 100000 };
static const char *const exts[3] = { "log", "index", "timeindex" };

static void on_finding(void *arg, enum tfs_finding kind, const char *path, tfs_pos_t pos,
                       const char *msg)
{
	(void)arg;
	(void)kind;
	FZ_CHECK(path != NULL && msg != NULL && pos >= -1, "a finding without its file or text");
}

static void verify(const char *dir)
{
	struct tfs_io *io = NULL;
	struct tfs_verify_ctx ctx = { 0 };
	int rc = tfs_io_create(TFS_IO_SYNC, &io);

	FZ_CHECK(rc == 0, "io: %s", tfs_strerror(rc));
	ctx.io = io;
	ctx.finding = on_finding;
	rc = tfs_inspect_verify_data_dir(&ctx, dir);
	FZ_CHECK(rc == 0, "verify of %s: %s", dir, tfs_strerror(rc));
	FZ_CHECK(ctx.stats.problems >= 0 && ctx.stats.records >= 0, "negative verify counts");
	tfs_io_destroy(io);
}

/* What one open saw. */
struct view {
	bool opened;
	tfs_offset_t log_start, log_end;
	size_t live_keys;
	size_t records;                 /* in the history from the start */
	struct fz_key { uint8_t *p; size_t len; } *keys;   /* the live keys, as listed */
	size_t count, cap;
};

static int collect_key(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                       uint64_t hash)
{
	struct view *v = arg;

	(void)info;
	(void)hash;
	fz_reserve((void **)&v->keys, &v->cap, v->count + 1, sizeof(*v->keys));
	v->keys[v->count].p = malloc(key.len + 1);
	if (!v->keys[v->count].p)
		abort();
	if (key.len)
		memcpy(v->keys[v->count].p, key.p, key.len);
	v->keys[v->count++].len = key.len;
	return 0;
}

static void view_release(struct view *v)
{
	for (size_t i = 0; i < v->count; i++)
		free(v->keys[i].p);
	free(v->keys);
}

static void read_everything(struct tfs_plog *pl, struct view *v)
{
	struct tfs_plog_stats st;
	struct tfs_plog_cursor *c = NULL;
	struct tfs_record r;
	tfs_offset_t prev = -1;
	int rc;

	tfs_plog_stats(pl, &st);
	FZ_CHECK(st.log_start_offset <= st.log_end_offset, "log start %lld past log end %lld",
	         (long long)st.log_start_offset, (long long)st.log_end_offset);
	v->log_start = st.log_start_offset;
	v->log_end = st.log_end_offset;
	v->live_keys = st.live_keys;
	rc = tfs_plog_scan_keys(pl, false, 0, collect_key, v);
	FZ_CHECK(rc == 0, "key scan: %s", tfs_strerror(rc));
	FZ_CHECK(v->count == st.live_keys, "%zu keys listed, %zu live", v->count, st.live_keys);
	for (size_t i = 0; i < v->count; i++) {
		struct tfs_slice key = tfs_slice_make(v->keys[i].p, v->keys[i].len);
		struct tfs_record_copy rec;
		tfs_offset_t *offs = NULL;
		size_t n = 0;
		rc = tfs_plog_read_key(pl, key, &rec);
		if (rc == 0) {
			FZ_CHECK(!rec.key_null && rec.key_len == key.len &&
			         (key.len == 0 || memcmp(rec.key, key.p, key.len) == 0),
			         "a key read another key's record");
			FZ_CHECK(rec.offset >= st.log_start_offset && rec.offset < st.log_end_offset,
			         "a key's record at %lld, outside [%lld, %lld)", (long long)rec.offset,
			         (long long)st.log_start_offset, (long long)st.log_end_offset);
			FZ_CHECK(!rec.value_null, "a live key reads a tombstone");
			tfs_record_copy_release(&rec);
		}
		rc = tfs_plog_key_versions(pl, key, &offs, &n);
		if (rc == 0)
			for (size_t j = 1; j < n; j++)
				FZ_CHECK(offs[j] > offs[j - 1], "key versions out of order");
		free(offs);
	}
	rc = tfs_plog_cursor_open(pl, 0, &c);
	if (rc < 0)
		return;
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1) {
		FZ_CHECK(r.offset > prev, "history offset %lld after %lld", (long long)r.offset,
		         (long long)prev);
		FZ_CHECK(r.offset >= st.log_start_offset && r.offset < st.log_end_offset,
		         "history offset %lld outside [%lld, %lld)", (long long)r.offset,
		         (long long)st.log_start_offset, (long long)st.log_end_offset);
		prev = r.offset;
		v->records++;
	}
	tfs_plog_cursor_close(c);
}

static void open_and_read(const char *dir, struct view *v)
{
	struct tfs_engine_config cfg;
	struct tfs_engine *e = NULL;
	struct tfs_topic *t;
	int rc;

	memset(v, 0, sizeof(*v));
	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = dir;
	cfg.io_kind = TFS_IO_SYNC;
	cfg.cleaner.threads = 0;            /* no pass behind the harness's back */
	rc = tfs_engine_open(&cfg, &e);
	FZ_CHECK(rc == 0, "engine open: %s", tfs_strerror(rc));
	t = tfs_engine_topic_get(e, TOPIC);
	if (t) {
		struct tfs_plog *pl = tfs_topic_partition(t, 0);
		if (pl) {
			v->opened = true;
			read_everything(pl, v);
		}
		tfs_topic_unref(t);
	}
	tfs_engine_close(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	char *dir, path[4096];
	struct view first, second;
	bool config = false;

	fz_quiet_logs();
	dir = fz_mkdtemp("segment");
	snprintf(path, sizeof(path), "%s/%s-0", dir, TOPIC);
	if (mkdir(path, 0755) < 0)
		abort();
	while (in.len > 0) {
		uint8_t sel = fz_u8(&in);
		uint32_t len = fz_u8(&in);
		const uint8_t *p;
		size_t got;
		len |= (uint32_t)fz_u8(&in) << 8;
		len |= (uint32_t)fz_u8(&in) << 16;
		p = fz_take(&in, len, &got);
		if ((sel & 3) == 3) {
			config = true;
			snprintf(path, sizeof(path), "%s/topics", dir);
			mkdir(path, 0755);
			snprintf(path, sizeof(path), "%s/topics/%s", dir, TOPIC);
		} else {
			snprintf(path, sizeof(path), "%s/%s-0/%020lld.%s", dir, TOPIC,
			         (long long)seg_bases[(sel >> 2) & (SEGMENTS - 1)], exts[sel & 3]);
		}
		if ((sel & 3) == 0 && (sel & 32)) {
			uint8_t *fixed = malloc(got + 1);
			if (!fixed)
				abort();
			memcpy(fixed, p, got);
			fz_fix_crcs(fixed, got);
			fz_write_file(path, fixed, got);
			free(fixed);
		} else {
			fz_write_file(path, p, got);
		}
	}

	verify(dir);
	open_and_read(dir, &first);
	open_and_read(dir, &second);
	/* A partition directory without a config and without a record is an
	 * uncommitted creation (docs/format.md): the first open may truncate a
	 * copy's unreadable tail down to that, and the second then removes it. */
	FZ_CHECK(first.opened == second.opened ||
	         (first.opened && !config && first.records == 0 && first.live_keys == 0),
	         "the partition opened once of two times");
	if (first.opened && second.opened) {
		FZ_CHECK(first.log_start == second.log_start && first.log_end == second.log_end,
		         "a second open sees log [%lld, %lld), the first [%lld, %lld)",
		         (long long)second.log_start, (long long)second.log_end,
		         (long long)first.log_start, (long long)first.log_end);
		FZ_CHECK(first.live_keys == second.live_keys,
		         "a second open sees %zu live keys, the first %zu", second.live_keys,
		         first.live_keys);
	}
	verify(dir);

	view_release(&first);
	view_release(&second);
	fz_rmtree(dir);
	free(dir);
	return 0;
}
