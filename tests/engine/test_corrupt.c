/* test_corrupt.c - every byte of a small log's sealed segments flipped in turn,
 * and every byte of their indexes, on the backend named by $TFS_IO.
 *
 * A deterministic workload (puts, tombstones, two-key units, a keyless record)
 * over a handful of keys fills a few sealed segments of a few hundred bytes;
 * a model remembers every record. Then, for each byte of each sealed .log (and
 * each byte of each .index and .timeindex), the pristine files come back, that
 * byte is flipped, and:
 *   - the partition opens, and no key reads a value other than its newest: a
 *     read either returns exactly the newest value, or ENOENT when the newest
 *     record is a tombstone (or when the key may exist only in the damage), or
 *     TFS_EDAMAGED when the log is damaged; never an older value, never a
 *     deleted key back;
 *   - the damage is reported whenever a byte the CRC covers (or the length or
 *     magic) was hit, and never for the leader epoch, which nothing reads;
 *   - verify reports exactly the regions the mount found (same file, bytes and
 *     offsets);
 *   - repair's plan cuts at the first region, and after it the log reads whole
 *     and every key reads the model's state at the cut;
 *   - a flipped index byte never shows: the indexes are rebuilt from the log,
 *     which reads whole.
 * T_CORRUPT_KEEP=DIR copies the pristine partition directory to DIR, to replay a
 * failing flip by hand (topicctl verify, a mount).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/inspect/log_inspect.h"
#include "engine/inspect/log_repair.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"
#include "io/io.h"
#include "io/log.h"
#include "tests/t_util.h"

#define KEYS 8
#define OPS 26
#define MAX_RECS 128
#define MAX_FILES 64
#define MAX_DAMAGE 16
#define SEGMENT_BYTES 420          /* a few batches a segment */
#define INDEX_INTERVAL_BYTES 90    /* so that sealed segments have index entries */
#define BATCH_LENGTH_AT 8          /* header fields by position (batch_codec.h) */
#define BATCH_EPOCH_AT 12
#define BATCH_MAGIC_AT 16

struct mrec {                      /* one record of the model */
	tfs_offset_t offset;
	int key;                       /* -1: keyless */
	bool tombstone;
	char value[48];
};

struct file {
	char name[256];
	uint8_t *bytes;
	long len;
	tfs_offset_t base;
	bool log, sealed;
};

struct fx {
	struct tfs_io *io;
	struct tfs_fdcache *fdc;
	struct tfs_topic_config cfg;
	char *dir;
	char path[4096], aside[4096];
	struct mrec recs[MAX_RECS];
	size_t nrecs;
	struct file files[MAX_FILES];
	size_t nfiles;
	/* what one flip did, for the report of a failure */
	const char *file;
	long pos;
	unsigned mask;
	long flips, damaged, repaired;
	int null_fd;
};

static char key_name[KEYS][8];

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	/* every flip logs its damage, by design: keep the output for the summary */
	f->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	tfs_log_set_fd(f->null_fd, 0);
	f->io = t_io();
	f->fdc = tfs_fdcache_create(f->io, 64);
	tfs_topic_config_defaults(&f->cfg);
	f->cfg.segment_bytes = SEGMENT_BYTES;
	f->cfg.index_interval_bytes = INDEX_INTERVAL_BYTES;
	/* Thousands of opens and closes, each fsyncing: on a RAM-backed directory
	 * where there is one, so that the disk does not set the pace. */
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	f->dir = t_mkdtemp("corrupt");
	snprintf(f->path, sizeof(f->path), "%s/t-0", f->dir);
	snprintf(f->aside, sizeof(f->aside), "%s/aside", f->dir);
	for (int k = 0; k < KEYS; k++)
		snprintf(key_name[k], sizeof(key_name[k]), "k%d", k);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < f->nfiles; i++)
		free(f->files[i].bytes);
	tfs_fdcache_destroy(f->fdc);
	tfs_io_destroy(f->io);
	t_rmtree(f->dir);
	free(f->dir);
	tfs_log_set_fd(STDERR_FILENO, 0);
	close(f->null_fd);
	free(f);
	return 0;
}

static struct tfs_plog *open_pl(struct fx *f)
{
	struct tfs_plog_env env = { f->io, f->fdc, &f->cfg, false };
	struct tfs_plog *pl = NULL;
	int rc = tfs_plog_open(&env, f->path, true, &pl);

	if (rc != 0)
		fail_msg("%s byte %ld ^ 0x%x: open failed: %s", f->file, f->pos, f->mask,
		         tfs_strerror(rc));
	return pl;
}

/* ---- the workload and its model --------------------------------------------- */

static void append(struct fx *f, struct tfs_plog *pl, const int *keys, const bool *tomb,
                   size_t n, uint64_t *rnd)
{
	struct tfs_append_rec r[2];
	struct mrec m[2];
	tfs_offset_t first;

	memset(r, 0, sizeof(r));
	for (size_t i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		m[i].key = keys[i];
		m[i].tombstone = tomb[i];
		if (!tomb[i]) {
			int len = snprintf(m[i].value, sizeof(m[i].value), "v%zu-", f->nrecs + i);
			int pad = (int)(t_rand(rnd) % 30);
			memset(m[i].value + len, 'a' + (int)(f->nrecs % 26), (size_t)pad);
			m[i].value[len + pad] = '\0';
		}
		r[i].key_null = keys[i] < 0;
		if (keys[i] >= 0)
			r[i].key = tfs_slice_make(key_name[keys[i]], strlen(key_name[keys[i]]));
		r[i].value_null = tomb[i];
		r[i].value = tfs_slice_make(m[i].value, strlen(m[i].value));
	}
	assert_int_equal(tfs_plog_append(pl, r, n, false, &first, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		m[i].offset = first + (tfs_offset_t)i;
		assert_true(f->nrecs < MAX_RECS);
		f->recs[f->nrecs++] = m[i];
	}
}

static void write_workload(struct fx *f)
{
	struct tfs_plog *pl = open_pl(f);
	uint64_t rnd = 0x5eed;

	for (int op = 0; op < OPS; op++) {
		uint64_t x = t_rand(&rnd);
		int keys[2] = { (int)(x % KEYS), (int)((x / KEYS + 1 + x % KEYS) % KEYS) };
		bool tomb[2] = { x % 5 == 0, false };
		if (op == OPS / 2)
			keys[0] = -1, tomb[0] = false;          /* a keyless record */
		append(f, pl, keys, tomb, (x >> 20) % 4 == 0 && keys[0] != keys[1] ? 2 : 1, &rnd);
	}
	assert_int_equal(tfs_plog_roll(pl), 0);
	{
		int k = 0;
		bool t = false;
		append(f, pl, &k, &t, 1, &rnd);             /* the active segment */
	}
	assert_int_equal(tfs_plog_sync(pl), 0);
	tfs_plog_close(pl);
}

/* The model's newest record of key k below offset end (or NULL). */
static const struct mrec *newest(const struct fx *f, int k, tfs_offset_t end)
{
	const struct mrec *m = NULL;

	for (size_t i = 0; i < f->nrecs; i++)
		if (f->recs[i].key == k && f->recs[i].offset < end)
			m = &f->recs[i];
	return m;
}

/* ---- the pristine files ----------------------------------------------------- */

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const struct file *)a)->name, ((const struct file *)b)->name);
}

static void save_files(struct fx *f)
{
	DIR *d = opendir(f->path);
	struct dirent *de;
	char p[4096 + 256 + 2];
	tfs_offset_t last_base = -1;

	assert_non_null(d);
	while ((de = readdir(d))) {
		struct file *fl;
		if (de->d_name[0] == '.')
			continue;
		assert_true(f->nfiles < MAX_FILES);
		fl = &f->files[f->nfiles++];
		snprintf(fl->name, sizeof(fl->name), "%s", de->d_name);
		snprintf(p, sizeof(p), "%s/%s", f->path, de->d_name);
		fl->len = t_read_file(p, &fl->bytes);
		assert_true(fl->len >= 0);
		fl->base = strtoll(de->d_name, NULL, 10);
		fl->log = strstr(de->d_name, ".log") != NULL;
		if (fl->log && fl->base > last_base)
			last_base = fl->base;
	}
	closedir(d);
	qsort(f->files, f->nfiles, sizeof(f->files[0]), cmp_file);
	for (size_t i = 0; i < f->nfiles; i++)
		f->files[i].sealed = f->files[i].base < last_base;
}

/* Puts every pristine file back and removes anything else. */
static void restore(struct fx *f)
{
	DIR *d = opendir(f->path);
	struct dirent *de;
	char p[4096 + 256 + 2];

	assert_non_null(d);
	while ((de = readdir(d))) {
		bool known = false;
		if (de->d_name[0] == '.')
			continue;
		for (size_t i = 0; i < f->nfiles && !known; i++)
			known = !strcmp(f->files[i].name, de->d_name);
		if (!known) {
			snprintf(p, sizeof(p), "%s/%s", f->path, de->d_name);
			unlink(p);
		}
	}
	closedir(d);
	for (size_t i = 0; i < f->nfiles; i++) {
		snprintf(p, sizeof(p), "%s/%s", f->path, f->files[i].name);
		assert_int_equal(t_write_file(p, f->files[i].bytes, (size_t)f->files[i].len), 0);
	}
	t_rmtree(f->aside);
}

static void write_flipped(struct fx *f, const struct file *fl, long pos, unsigned mask)
{
	char p[4096 + 256 + 2];
	uint8_t *b = malloc((size_t)fl->len);

	assert_non_null(b);
	memcpy(b, fl->bytes, (size_t)fl->len);
	b[pos] ^= (uint8_t)mask;
	snprintf(p, sizeof(p), "%s/%s", f->path, fl->name);
	assert_int_equal(t_write_file(p, b, (size_t)fl->len), 0);
	free(b);
}

/* The base offset the pristine log has for the batch at pos of segment base:
 * damage found by a walk starts at a batch boundary, but a flipped base offset
 * can pass for other offsets, so regions are compared by position. */
static tfs_offset_t pristine_offset_at(const struct fx *f, tfs_offset_t base, tfs_pos_t pos)
{
	for (size_t i = 0; i < f->nfiles; i++) {
		const struct file *fl = &f->files[i];
		long at = 0;
		if (!fl->log || fl->base != base)
			continue;
		while (at + 12 <= fl->len) {
			const uint8_t *h = fl->bytes + at;
			if (at == pos) {
				uint64_t v = 0;
				for (int b = 0; b < 8; b++)
					v = v << 8 | h[b];
				return (tfs_offset_t)v;
			}
			at += 12 + (long)((uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 |
			                  (uint32_t)h[10] << 8 | h[11]);
		}
	}
	fail_msg("no batch at position %" PRId64 " of segment %" PRId64, pos, base);
	return -1;
}

/* Where pos falls inside its batch of the pristine file fl. */
static long offset_in_batch(const struct file *fl, long pos)
{
	long at = 0;

	while (at + 12 <= fl->len) {
		const uint8_t *h = fl->bytes + at;
		long size = 12 + (long)((uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 |
		                        (uint32_t)h[10] << 8 | h[11]);
		if (pos < at + size)
			return pos - at;
		at += size;
	}
	fail_msg("position %ld outside the batches of %s", pos, fl->name);
	return -1;
}

/* ---- verify's view ---------------------------------------------------------- */

struct vregions {
	struct tfs_plog_damage d[MAX_DAMAGE];
	size_t n;
};

static void on_finding(void *arg, enum tfs_finding kind, const char *path, tfs_pos_t pos,
                       const char *msg)
{
	struct vregions *v = arg;
	const char *name = strrchr(path, '/'), *offs;
	int64_t a, b, c, e;

	if (kind != TFS_FINDING_PROBLEM || strncmp(msg, "sealed segment damaged", 22))
		return;
	assert_true(v->n < MAX_DAMAGE);
	assert_int_equal(sscanf(msg, "sealed segment damaged: bytes %" SCNd64 "..%" SCNd64, &a, &b), 2);
	offs = strstr(msg, "), offsets ");
	assert_non_null(offs);
	assert_int_equal(sscanf(offs, "), offsets %" SCNd64 "..%" SCNd64 " unknown", &c, &e), 2);
	assert_int_equal(pos, a);
	v->d[v->n++] = (struct tfs_plog_damage){ strtoll(name + 1, NULL, 10), a, b + 1, c, e + 1, NULL };
}

static void verify_regions(struct fx *f, struct vregions *v)
{
	struct tfs_verify_ctx ctx = { .io = f->io, .finding = on_finding, .arg = v };

	v->n = 0;
	assert_int_equal(tfs_inspect_verify_partition(&ctx, f->path), 0);
}

/* ---- the checks --------------------------------------------------------------- */

/* Every key of pl against the model: see the top of the file. */
static void check_keys(struct fx *f, struct tfs_plog *pl, const struct tfs_plog_damage *d,
                       size_t nd, tfs_offset_t end)
{
	for (int k = 0; k < KEYS; k++) {
		const struct mrec *m = newest(f, k, end);
		struct tfs_record_copy rc;
		int r = tfs_plog_read_key(pl, tfs_slice_make(key_name[k], strlen(key_name[k])), &rc);

		if (r == 0) {
			bool same = m && !m->tombstone && rc.value_len == strlen(m->value) &&
			            !memcmp(rc.value, m->value, rc.value_len);
			if (!same)
				fail_msg("%s byte %ld ^ 0x%x: %s reads \"%.*s\" (offset %" PRId64
				         "), its newest is %s%s", f->file, f->pos, f->mask, key_name[k],
				         (int)rc.value_len, (const char *)rc.value, rc.offset,
				         m && !m->tombstone ? m->value : "a tombstone", m ? "" : " (none)");
			tfs_record_copy_release(&rc);
			continue;
		}
		if (r == TFS_EDAMAGED && nd > 0)
			continue;               /* possibly stale: refused, as it must be */
		if (r == -ENOENT) {
			bool ok = !m || m->tombstone;
			/* a key whose newest record lies in a region, with no put of it
			 * before that region, cannot be known */
			for (size_t i = 0; i < nd && !ok; i++) {
				tfs_offset_t first = pristine_offset_at(f, d[i].segment_base, d[i].pos);
				const struct mrec *before = newest(f, k, first);
				ok = m->offset >= first && m->offset < d[i].next &&
				     (!before || before->tombstone);
			}
			if (ok)
				continue;
		}
		fail_msg("%s byte %ld ^ 0x%x: %s: %s (its newest is %s at %" PRId64 "; %zu regions)",
		         f->file, f->pos, f->mask, key_name[k], tfs_strerror(r),
		         m && !m->tombstone ? m->value : "a tombstone", m ? m->offset : -1, nd);
	}
}

static void check_same_regions(struct fx *f, const struct tfs_plog_damage *d, size_t nd,
                               const struct vregions *v)
{
	if (nd != v->n)
		fail_msg("%s byte %ld ^ 0x%x: the mount found %zu regions, verify %zu", f->file,
		         f->pos, f->mask, nd, v->n);
	for (size_t i = 0; i < nd; i++) {
		const struct tfs_plog_damage *a = &d[i], *b = &v->d[i];
		if (a->segment_base != b->segment_base || a->pos != b->pos || a->end != b->end ||
		    a->first != b->first || a->next != b->next)
			fail_msg("%s byte %ld ^ 0x%x: region %zu: mount %" PRId64 ".log [%" PRId64 ", %"
			         PRId64 ") offsets [%" PRId64 ", %" PRId64 "), verify %" PRId64 ".log [%"
			         PRId64 ", %" PRId64 ") offsets [%" PRId64 ", %" PRId64 ")", f->file,
			         f->pos, f->mask, i, a->segment_base, a->pos, a->end, a->first, a->next,
			         b->segment_base, b->pos, b->end, b->first, b->next);
	}
}

/* Cuts the log as topicctl repair would and checks what is left. */
static void check_repair(struct fx *f, const struct tfs_plog_damage *d, size_t nd)
{
	struct tfs_repair_plan plan;
	struct tfs_plog *pl;
	struct tfs_plog_damage after[1];

	assert_int_equal(tfs_repair_plan(f->io, f->path, &plan), 0);
	assert_int_equal(plan.needed, nd > 0);
	if (!plan.needed) {
		tfs_repair_plan_release(&plan);
		return;
	}
	assert_int_equal(plan.cut_base, d[0].segment_base);
	assert_int_equal(plan.cut_pos, d[0].pos);
	assert_int_equal(plan.keep_end, d[0].first);
	assert_int_equal(plan.lost_end >= plan.keep_end, true);
	assert_int_equal(mkdir(f->aside, 0700), 0);
	assert_int_equal(tfs_repair_apply(f->io, f->path, &plan, f->aside), 0);
	pl = open_pl(f);
	assert_int_equal(tfs_plog_damage(pl, after, 1), 0);
	/* what is left is every record before the cut's position */
	check_keys(f, pl, NULL, 0, pristine_offset_at(f, plan.cut_base, plan.cut_pos));
	tfs_plog_close(pl);
	tfs_repair_plan_release(&plan);
	f->repaired++;
}

/* The flips whose damage is also cut by a repair (half: the repair's own
 * opens cost as much as the flip's). */
static const unsigned masks_repaired = 0xff;

static void flip_one(struct fx *f, const struct file *fl, long pos, unsigned mask)
{
	struct tfs_plog_damage d[MAX_DAMAGE];
	struct vregions v;
	struct tfs_plog *pl;
	size_t nd;

	f->file = fl->name;
	f->pos = pos;
	f->mask = mask;
	restore(f);
	write_flipped(f, fl, pos, mask);
	verify_regions(f, &v);
	pl = open_pl(f);
	nd = tfs_plog_damage(pl, d, MAX_DAMAGE);
	assert_true(nd <= MAX_DAMAGE);
	check_keys(f, pl, d, nd, INT64_MAX);
	tfs_plog_close(pl);
	check_same_regions(f, d, nd, &v);
	if (fl->log) {
		long o = offset_in_batch(fl, pos);
		bool covered = (o >= BATCH_LENGTH_AT && o < BATCH_EPOCH_AT) || o >= BATCH_MAGIC_AT;
		if (covered && nd == 0)
			fail_msg("%s byte %ld ^ 0x%x: no damage reported", fl->name, pos, mask);
		if (o >= BATCH_EPOCH_AT && o < BATCH_MAGIC_AT && nd != 0)
			fail_msg("%s byte %ld ^ 0x%x: a leader epoch flip reported as damage", fl->name,
			         pos, mask);
		if (mask == masks_repaired)
			check_repair(f, d, nd);
	} else if (nd != 0) {
		fail_msg("%s byte %ld ^ 0x%x: an index flip reported as damage", fl->name, pos, mask);
	}
	f->flips++;
	f->damaged += nd > 0;
}

static void every_byte_of_every_sealed_segment(void **state)
{
	struct fx *f = *state;
	static const unsigned masks[] = { 0xff, 0x01 };
	int sealed_logs = 0;

	write_workload(f);
	save_files(f);
	if (getenv("T_CORRUPT_KEEP")) {
		char cmd[8300];
		snprintf(cmd, sizeof(cmd), "cp -a %s %s", f->path, getenv("T_CORRUPT_KEEP"));
		assert_int_equal(system(cmd), 0);
	}
	for (size_t i = 0; i < f->nfiles; i++) {
		struct file *fl = &f->files[i];
		if (!fl->sealed)
			continue;
		sealed_logs += fl->log;
		/* indexes are only read to be compared: one mask is enough */
		for (long pos = 0; pos < fl->len; pos++)
			for (size_t m = 0; m < (fl->log ? sizeof(masks) / sizeof(masks[0]) : 1); m++)
				flip_one(f, fl, pos, masks[m]);
	}
	assert_true(sealed_logs >= 3);
	/* the pristine log reads whole */
	f->file = "none";
	restore(f);
	{
		struct tfs_plog *pl = open_pl(f);
		assert_int_equal(tfs_plog_damage(pl, NULL, 0), 0);
		check_keys(f, pl, NULL, 0, INT64_MAX);
		tfs_plog_close(pl);
	}
	print_message("%ld flips of %d sealed segments and their indexes: %ld damaged, %ld repaired\n",
	              f->flips, sealed_logs, f->damaged, f->repaired);
	assert_true(f->damaged > 0 && f->repaired > 0 && f->repaired < f->damaged);
}

/* topicctl repair crashed at each of its steps in turn (a fault spec on the io
 * context, in a child process): whatever step it stopped at, the partition opens
 * as a prefix of the damaged log - every key reads the model's state at the log
 * end it opens with, or the refusals a damaged region brings - and a second
 * repair, into a fresh aside directory as topicctl makes one, leaves the log
 * whole with every key at the cut. */
#define REPAIR_SWEEP_MAX 200

static void a_crash_at_every_step_of_a_repair(void **state)
{
	struct fx *f = *state;
	const struct file *fl = NULL;
	long pos;
	int points = 0, n;

	write_workload(f);
	save_files(f);
	for (size_t i = 0; i < f->nfiles && !fl; i++)
		if (f->files[i].log && f->files[i].sealed)
			fl = &f->files[i];
	assert_non_null(fl);
	/* the CRC of the segment's second batch: the cut keeps the first */
	pos = 12 + (long)(((uint32_t)fl->bytes[8] << 24 | (uint32_t)fl->bytes[9] << 16 |
	                   (uint32_t)fl->bytes[10] << 8 | fl->bytes[11])) + 17;
	assert_true(pos < fl->len);
	f->file = fl->name;
	f->pos = pos;
	f->mask = 0xff;
	for (n = 1; n < REPAIR_SWEEP_MAX; n++) {
		struct tfs_repair_plan plan;
		struct tfs_plog_damage d[MAX_DAMAGE];
		struct tfs_plog_stats st;
		struct tfs_plog *pl;
		char aside2[4096 + 8];
		tfs_offset_t cut;
		pid_t pid;
		int status;
		size_t nd;

		restore(f);
		write_flipped(f, fl, pos, 0xff);
		assert_int_equal(tfs_repair_plan(f->io, f->path, &plan), 0);
		assert_true(plan.needed && plan.cut_base == fl->base);
		cut = pristine_offset_at(f, plan.cut_base, plan.cut_pos);
		tfs_repair_plan_release(&plan);
		assert_int_equal(mkdir(f->aside, 0700), 0);
		pid = fork();
		if (pid == 0) {
			char spec[64];
			struct tfs_repair_plan p;
			snprintf(spec, sizeof(spec), "all:%d:crash", n);
			if (tfs_repair_plan(f->io, f->path, &p) != 0)
				_exit(2);
			tfs_io_set_fault(f->io, spec);
			_exit(tfs_repair_apply(f->io, f->path, &p, f->aside) == 0 ? 0 : 3);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_true(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == TFS_IO_CRASH_STATUS);
		points++;

		pl = open_pl(f);
		tfs_plog_stats(pl, &st);
		nd = tfs_plog_damage(pl, d, MAX_DAMAGE);
		assert_true(st.log_end_offset >= cut);
		check_keys(f, pl, d, nd, st.log_end_offset);
		tfs_plog_close(pl);

		/* topicctl repair again, as a user would after the crash */
		assert_int_equal(tfs_repair_plan(f->io, f->path, &plan), 0);
		if (plan.needed) {
			snprintf(aside2, sizeof(aside2), "%s.2", f->aside);
			assert_int_equal(mkdir(aside2, 0700), 0);
			assert_int_equal(tfs_repair_apply(f->io, f->path, &plan, aside2), 0);
			t_rmtree(aside2);
		}
		tfs_repair_plan_release(&plan);
		pl = open_pl(f);
		tfs_plog_stats(pl, &st);
		assert_int_equal(tfs_plog_damage(pl, NULL, 0), 0);
		assert_int_equal(st.log_end_offset, cut);
		check_keys(f, pl, NULL, 0, cut);
		tfs_plog_close(pl);
		if (WEXITSTATUS(status) == 0)
			break;                  /* the n-th step is past the repair's last */
	}
	assert_true(n < REPAIR_SWEEP_MAX);
	print_message("a repair crashed at each of its %d steps\n", points - 1);
	assert_true(points > 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(every_byte_of_every_sealed_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(a_crash_at_every_step_of_a_repair, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
