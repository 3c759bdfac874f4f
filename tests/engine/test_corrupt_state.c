/* test_corrupt_state.c - every byte of the files beside the segments flipped in
 * turn: a partition's .txnindex and <offset>.snapshot files, the segments of
 * __consumer_offsets, the cleaner's checkpoint and a topic's config.
 * tests/engine/test_corrupt.c does the same for the .log, .index and .timeindex
 * files, tests/kafka/test_config.c for meta.properties.
 *
 * Partition files. A deterministic workload of plain puts and a tombstone, two
 * committed and two aborted transactions (one of them spread over two batches
 * with a plain append and another transaction between them), and an idempotent
 * producer fills a sealed segment and the active one; a model remembers every
 * record. Then, for each byte of each .txnindex and .snapshot (two masks), the
 * pristine files come back, that byte is flipped, and the partition opens:
 *   - every key reads the model's newest value, or is absent when its newest
 *     record is a tombstone: a deleted key never comes back, an aborted
 *     transaction's value never shows, a committed one's never goes;
 *   - every record of an aborted transaction is ABORTED (the .history attribute)
 *     and lies in an aborted range that a read_committed Kafka consumer is given;
 *     every record of a committed one is COMMITTED;
 *   - the idempotent producer's last batch sent again is a duplicate (nothing
 *     appended), a batch past a gap is refused (EILSEQ at the mount), the next is
 *     appended: a damaged snapshot is never believed, the scan rebuilds it;
 *   - a flipped snapshot is always found out (its CRC) and logged.
 *
 * __consumer_offsets. Three groups commit offsets of two partitions, one is
 * deleted, with a roll after every commit; then each byte of each sealed
 * segment is flipped and the engine opens: every (group, topic, partition)
 * fetches its newest committed offset, or nothing when its newest record may be
 * in the damage; never an older offset, never a deleted one.
 *
 * cleaner-offset-checkpoint. A pass cleans four keys, then a tombstone over one
 * of them and more records are written; each byte of the checkpoint is flipped
 * and two passes run a delete.retention.ms apart, then the partition reopens:
 * every key reads its newest value, a deleted key stays deleted. (A checkpoint
 * one higher than the truth passes the file's checks; its pass must not stamp
 * the tombstone below it that no map held.)
 *
 * topics/<topic>. Each byte of a two-partition topic's config is flipped and the
 * engine opens: the topic is there with both partitions whole and every key its
 * value; a config that does not parse is logged and the topic refused (read-only,
 * its owner only); one that parses is another valid config (a text file: a digit
 * flipped into another digit cannot be told apart).
 *
 * T_ONLY=NAME runs one case.
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
#include <unistd.h>

#include "engine/cleaner/cleaner.h"
#include "engine/engine.h"
#include "engine/format/batch_codec.h"
#include "engine/groups/groups.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"
#include "io/log.h"
#include "tests/t_util.h"

#define MAX_RECS 64
#define MAX_FILES 32
#define MAX_ABORTED 8
#define NKEYS 6
#define PATH_CAP 4096
#define PID_IDEM 200               /* the idempotent producer */
#define LOG_CAP 65536              /* of the captured log of one open */

struct mrec {                      /* one data record of the model */
	tfs_offset_t offset;
	int key;                       /* index in key_names; -1: the idempotent "k" */
	bool tombstone;
	int64_t pid;                   /* -1: not transactional */
	bool aborted;                  /* of an aborted transaction */
	char value[16];
};

struct file {
	char name[256];
	uint8_t *bytes;
	long len;
};

struct files {
	char dir[PATH_CAP];
	struct file f[MAX_FILES];
	size_t n;
};

struct fx {
	struct tfs_io *io;
	struct tfs_fdcache *fdc;
	struct tfs_topic_config cfg;
	struct tfs_batch_builder b;
	char *dir;
	char path[PATH_CAP], logpath[PATH_CAP];
	int log_fd;
	struct mrec recs[MAX_RECS];
	size_t nrecs;
	int32_t idem_next_seq;         /* the idempotent producer's next sequence */
	tfs_offset_t idem_last;        /* the offset of its last batch */
	struct files pristine;
	/* what one flip did, for the report of a failure */
	const char *file;
	long pos;
	unsigned mask;
	long flips, noticed;
};

static const char *const key_names[NKEYS] = { "k0", "k1", "k2", "k3", "k4", "k5" };

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	/* each flip logs what it found: kept in a file each open reads back */
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	f->dir = t_mkdtemp("corrupt-state");
	snprintf(f->path, sizeof(f->path), "%s/t-0", f->dir);
	snprintf(f->logpath, sizeof(f->logpath), "%s/log", f->dir);
	f->log_fd = open(f->logpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(f->log_fd >= 0);
	tfs_log_set_fd(f->log_fd, 0);
	tfs_log_set_level(TFS_LOG_INFO);
	f->io = t_io();
	f->fdc = tfs_fdcache_create(f->io, 64);
	tfs_topic_config_defaults(&f->cfg);
	tfs_batch_builder_init(&f->b);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < f->pristine.n; i++)
		free(f->pristine.f[i].bytes);
	tfs_batch_builder_release(&f->b);
	tfs_fdcache_destroy(f->fdc);
	tfs_io_destroy(f->io);
	tfs_log_set_fd(STDERR_FILENO, 0);
	tfs_log_set_level(TFS_LOG_ERROR);
	close(f->log_fd);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* Empties the captured log. */
static void log_reset(struct fx *f)
{
	assert_int_equal(ftruncate(f->log_fd, 0), 0);
	assert_int_equal(lseek(f->log_fd, 0, SEEK_SET), 0);
}

/* Whether the captured log since log_reset holds s. */
static bool logged(struct fx *f, const char *s)
{
	static char buf[LOG_CAP + 1];
	ssize_t n = pread(f->log_fd, buf, LOG_CAP, 0);

	assert_true(n >= 0);
	buf[n] = '\0';
	return strstr(buf, s) != NULL;
}

/* ---- the pristine files ------------------------------------------------------ */

static void save_files(struct files *s, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[PATH_CAP + 260];

	assert_non_null(d);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	while ((de = readdir(d))) {
		struct file *fl;
		if (de->d_name[0] == '.')
			continue;
		assert_true(s->n < MAX_FILES);
		fl = &s->f[s->n++];
		snprintf(fl->name, sizeof(fl->name), "%s", de->d_name);
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		fl->len = t_read_file(p, &fl->bytes);
		assert_true(fl->len >= 0);
	}
	closedir(d);
}

/* Puts every pristine file back, removes anything else, then flips byte pos of
 * file fl with mask (fl NULL: nothing flipped). */
static void restore_flipped(const struct files *s, const struct file *fl, long pos, unsigned mask)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	char p[PATH_CAP + 260];

	assert_non_null(d);
	while ((de = readdir(d))) {
		bool known = false;
		if (de->d_name[0] == '.')
			continue;
		for (size_t i = 0; i < s->n && !known; i++)
			known = !strcmp(s->f[i].name, de->d_name);
		if (!known) {
			snprintf(p, sizeof(p), "%s/%s", s->dir, de->d_name);
			assert_int_equal(unlink(p), 0);
		}
	}
	closedir(d);
	for (size_t i = 0; i < s->n; i++) {
		const struct file *c = &s->f[i];
		snprintf(p, sizeof(p), "%s/%s", s->dir, c->name);
		if (c == fl) {
			uint8_t *b = malloc((size_t)c->len);
			assert_non_null(b);
			memcpy(b, c->bytes, (size_t)c->len);
			b[pos] ^= (uint8_t)mask;
			assert_int_equal(t_write_file(p, b, (size_t)c->len), 0);
			free(b);
		} else {
			assert_int_equal(t_write_file(p, c->bytes, (size_t)c->len), 0);
		}
	}
}

/* The pristine files with byte pos of fl flipped by mask, noted for a failure's
 * report. */
static void flip_at(struct fx *f, const struct file *fl, long pos, unsigned mask)
{
	f->file = fl->name;
	f->pos = pos;
	f->mask = mask;
	restore_flipped(&f->pristine, fl, pos, mask);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* ---- the partition workload and its model ------------------------------------ */

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

static struct mrec *model_add(struct fx *f, tfs_offset_t off, int key, bool tomb, int64_t pid,
                              const char *value)
{
	struct mrec *m;

	assert_true(f->nrecs < MAX_RECS);
	m = &f->recs[f->nrecs++];
	*m = (struct mrec){ off, key, tomb, pid, false, "" };
	snprintf(m->value, sizeof(m->value), "%s", value);
	return m;
}

static void put(struct fx *f, struct tfs_plog *pl, int key, const char *value)
{
	struct tfs_append_rec r = { .key = tfs_slice_make(key_names[key], strlen(key_names[key])),
	                            .value = tfs_slice_make(value, value ? strlen(value) : 0),
	                            .value_null = value == NULL };
	tfs_offset_t first;

	assert_int_equal(tfs_plog_append(pl, &r, 1, false, &first, NULL), 0);
	model_add(f, first, key, value == NULL, -1, value ? value : "");
}

static struct tfs_plog_txn *txn_begin(struct tfs_plog *pl, int64_t pid)
{
	struct tfs_plog_txn *t = NULL;
	assert_int_equal(tfs_plog_txn_begin(pl, pid, 0, &t), 0);
	return t;
}

/* One batch of t: key = value, its offset learnt from the log end. */
static void txn_put(struct fx *f, struct tfs_plog *pl, struct tfs_plog_txn *t, int64_t pid,
                    int key, const char *value)
{
	struct tfs_append_rec r = { .key = tfs_slice_make(key_names[key], strlen(key_names[key])),
	                            .value = tfs_slice_make(value, strlen(value)) };
	struct tfs_plog_stats st;

	tfs_plog_stats(pl, &st);
	assert_int_equal(tfs_plog_txn_append(t, &r, 1), 0);
	model_add(f, st.log_end_offset, key, false, pid, value);
}

static void txn_end(struct fx *f, struct tfs_plog_txn *t, int64_t pid, bool commit)
{
	assert_int_equal(tfs_plog_txn_end(t, commit, true), 0);
	for (size_t i = 0; i < f->nrecs; i++)
		if (f->recs[i].pid == pid)
			f->recs[i].aborted = !commit;
}

/* The idempotent producer's batch of one record "200:seq" at seq; the result of
 * the append, *first and *count as the log says. */
static int idem_send(struct fx *f, struct tfs_plog *pl, int32_t seq, tfs_offset_t *first,
                     size_t *count)
{
	struct tfs_batch_params p = { .leader_epoch = -1, .producer_id = PID_IDEM,
	                              .producer_epoch = 0, .base_sequence = seq };
	char v[32];
	const uint8_t *out;
	uint8_t *copy;
	size_t len;
	int rc;

	snprintf(v, sizeof(v), "%d:%" PRId32, PID_IDEM, seq);
	tfs_batch_builder_reset(&f->b, &p);
	struct tfs_record_in in = { .key = tfs_slice_make("k", 1),
	                            .value = tfs_slice_make(v, strlen(v)), .timestamp = tfs_now_ms() };
	assert_int_equal(tfs_batch_builder_add(&f->b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&f->b, -1, &out, &len), 0);
	copy = malloc(len);
	assert_non_null(copy);
	memcpy(copy, out, len);
	rc = tfs_plog_append_batch(pl, copy, len, true, first, count, NULL, NULL);
	free(copy);
	return rc;
}

static void idem_put(struct fx *f, struct tfs_plog *pl)
{
	tfs_offset_t first;
	size_t count;
	char v[32];

	assert_int_equal(idem_send(f, pl, f->idem_next_seq, &first, &count), 0);
	assert_int_equal(count, 1);
	snprintf(v, sizeof(v), "%d:%" PRId32, PID_IDEM, f->idem_next_seq);
	model_add(f, first, -1, false, -1, v);
	f->idem_next_seq++;
	f->idem_last = first;
}

static void write_partition(struct fx *f)
{
	struct tfs_plog *pl = open_pl(f);
	struct tfs_plog_txn *a, *b;

	put(f, pl, 0, "p0");
	put(f, pl, 1, "p1");
	idem_put(f, pl);
	/* 101 aborts, spread over two batches with a plain append and all of 100
	 * (committed) between them: its first offset is well below its marker */
	a = txn_begin(pl, 101);
	txn_put(f, pl, a, 101, 1, "a1");
	put(f, pl, 5, "p5");
	b = txn_begin(pl, 100);
	txn_put(f, pl, b, 100, 0, "c0");
	txn_put(f, pl, b, 100, 2, "c2");
	txn_end(f, b, 100, true);
	txn_put(f, pl, a, 101, 3, "a3");
	idem_put(f, pl);
	txn_end(f, a, 101, false);
	put(f, pl, 2, NULL);                        /* k2 deleted */
	assert_int_equal(tfs_plog_roll(pl), 0);     /* a snapshot at the new base */
	a = txn_begin(pl, 102);
	txn_put(f, pl, a, 102, 2, "a2");            /* never brings k2 back */
	txn_put(f, pl, a, 102, 4, "a4");
	b = txn_begin(pl, 103);
	txn_put(f, pl, b, 103, 4, "c4");
	txn_end(f, a, 102, false);
	txn_end(f, b, 103, true);
	idem_put(f, pl);
	put(f, pl, 5, "p5b");
	assert_int_equal(tfs_plog_sync(pl), 0);
	tfs_plog_close(pl);                         /* a snapshot at the log end */
}

/* The model's newest record of key (-1: "k"), or NULL; aborted ones never count. */
static const struct mrec *newest(const struct fx *f, int key)
{
	const struct mrec *m = NULL;

	for (size_t i = 0; i < f->nrecs; i++)
		if (f->recs[i].key == key && !f->recs[i].aborted)
			m = &f->recs[i];
	return m;
}

/* ---- the partition checks ------------------------------------------------------ */

static void check_key(struct fx *f, struct tfs_plog *pl, int key)
{
	const char *name = key < 0 ? "k" : key_names[key];
	const struct mrec *m = newest(f, key);
	struct tfs_record_copy rc;
	int r = tfs_plog_read_key(pl, tfs_slice_make(name, strlen(name)), &rc);

	if (r == 0) {
		bool same = m && !m->tombstone && rc.value_len == strlen(m->value) &&
		            !memcmp(rc.value, m->value, rc.value_len);
		if (!same)
			fail_msg("%s byte %ld ^ 0x%x: %s reads \"%.*s\", its newest is %s", f->file,
			         f->pos, f->mask, name, (int)rc.value_len, (const char *)rc.value,
			         m && !m->tombstone ? m->value : "a tombstone");
		tfs_record_copy_release(&rc);
	} else if (r != -ENOENT || (m && !m->tombstone)) {
		fail_msg("%s byte %ld ^ 0x%x: %s: %s, its newest is %s", f->file, f->pos, f->mask, name,
		         tfs_strerror(r), m && !m->tombstone ? m->value : "a tombstone");
	}
}

static void check_txns(struct fx *f, struct tfs_plog *pl)
{
	struct tfs_aborted_txn a[MAX_ABORTED];
	size_t na = tfs_plog_aborted_txns(pl, 0, INT64_MAX, a, MAX_ABORTED);

	assert_true(na <= MAX_ABORTED);
	for (size_t i = 0; i < f->nrecs; i++) {
		const struct mrec *m = &f->recs[i];
		enum tfs_txn_state st;
		bool covered = false;
		if (m->pid < 0)
			continue;
		st = tfs_plog_txn_state(pl, m->pid, m->offset);
		if (st != (m->aborted ? TFS_TXN_ABORTED : TFS_TXN_COMMITTED))
			fail_msg("%s byte %ld ^ 0x%x: offset %" PRId64 " of producer %" PRId64 " (%s) "
			         "reads as state %d", f->file, f->pos, f->mask, m->offset, m->pid,
			         m->aborted ? "aborted" : "committed", (int)st);
		for (size_t k = 0; k < na; k++)
			covered |= a[k].producer_id == m->pid && a[k].first_offset <= m->offset &&
			           m->offset <= a[k].last_offset;
		if (covered != m->aborted)
			fail_msg("%s byte %ld ^ 0x%x: offset %" PRId64 " of producer %" PRId64 " (%s) is "
			         "%sin the aborted ranges a read_committed consumer gets", f->file, f->pos,
			         f->mask, m->offset, m->pid, m->aborted ? "aborted" : "committed",
			         covered ? "" : "not ");
	}
}

/* A retry of the last batch is a duplicate, a gap refused, the next appended. */
static void check_producer(struct fx *f, struct tfs_plog *pl)
{
	struct tfs_plog_stats st;
	tfs_offset_t end, first = -1;
	size_t count = 99;
	int rc;

	tfs_plog_stats(pl, &st);
	end = st.log_end_offset;
	rc = idem_send(f, pl, f->idem_next_seq - 1, &first, &count);
	tfs_plog_stats(pl, &st);
	if (rc != 0 || first != f->idem_last || st.log_end_offset != end)
		fail_msg("%s byte %ld ^ 0x%x: the retry of the last batch: %s, offset %" PRId64
		         " (its own %" PRId64 "), log end %" PRId64 " -> %" PRId64, f->file, f->pos,
		         f->mask, tfs_strerror(rc), first, f->idem_last, end, st.log_end_offset);
	rc = idem_send(f, pl, f->idem_next_seq + 1, &first, &count);
	tfs_plog_stats(pl, &st);
	if (rc != TFS_ESEQUENCE || st.log_end_offset != end)
		fail_msg("%s byte %ld ^ 0x%x: a batch past a gap: %s, log end %" PRId64 " -> %" PRId64,
		         f->file, f->pos, f->mask, tfs_strerror(rc), end, st.log_end_offset);
	rc = idem_send(f, pl, f->idem_next_seq, &first, &count);
	tfs_plog_stats(pl, &st);
	if (rc != 0 || first != end || st.log_end_offset != end + 1)
		fail_msg("%s byte %ld ^ 0x%x: the next batch: %s at %" PRId64 " (log end was %" PRId64
		         ")", f->file, f->pos, f->mask, tfs_strerror(rc), first, end);
}

static void check_partition(struct fx *f)
{
	struct tfs_plog *pl = open_pl(f);

	for (int k = -1; k < NKEYS; k++)
		check_key(f, pl, k);
	check_txns(f, pl);
	check_producer(f, pl);
	tfs_plog_close(pl);
}

static void every_byte_of_txnindex_and_snapshot(void **state)
{
	struct fx *f = *state;
	static const unsigned masks[] = { 0xff, 0x01 };
	int txnindexes = 0, snapshots = 0;
	tfs_offset_t newest_snap = -1;

	write_partition(f);
	save_files(&f->pristine, f->path);
	f->file = "none";
	restore_flipped(&f->pristine, NULL, 0, 0);
	check_partition(f);
	for (size_t i = 0; i < f->pristine.n; i++)
		if (ends_with(f->pristine.f[i].name, ".snapshot") &&
		    strtoll(f->pristine.f[i].name, NULL, 10) > newest_snap)
			newest_snap = strtoll(f->pristine.f[i].name, NULL, 10);
	for (size_t i = 0; i < f->pristine.n; i++) {
		const struct file *fl = &f->pristine.f[i];
		bool snap = ends_with(fl->name, ".snapshot");
		if (!snap && !ends_with(fl->name, ".txnindex"))
			continue;
		txnindexes += !snap;
		snapshots += snap;
		for (long pos = 0; pos < fl->len; pos++)
			for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
				flip_at(f, fl, pos, masks[m]);
				log_reset(f);
				check_partition(f);
				/* the newest snapshot is the one read; its CRC, size and
				 * version catch every flip */
				if (snap && strtoll(fl->name, NULL, 10) == newest_snap &&
				    !logged(f, "is corrupt"))
					fail_msg("%s byte %ld ^ 0x%x: not logged as corrupt", fl->name, pos,
					         masks[m]);
				f->noticed += logged(f, "is corrupt") || logged(f, "rebuilt .txnindex");
				f->flips++;
			}
	}
	print_message("%ld flips of %d .txnindex and %d .snapshot files: %ld found out\n", f->flips,
	              txnindexes, snapshots, f->noticed);
	assert_int_equal(txnindexes, 2);
	assert_int_equal(snapshots, 2);
}

/* ---- __consumer_offsets ---------------------------------------------------------- */

#define NGROUPS 3
#define NTOPICS 2

struct gmodel {                    /* the newest committed offset; -1: none or deleted */
	tfs_offset_t off[NGROUPS][NTOPICS];
};

static const char *const group_names[NGROUPS] = { "ga", "gb", "gc" };

static void open_engine(struct fx *f, struct tfs_engine **e)
{
	struct tfs_engine_config cfg;
	int rc;

	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = f->dir;
	cfg.io_kind = tfs_io_kind_from_env();
	cfg.cleaner.threads = 0;
	cfg.groups.partitions = 1;     /* every group in __consumer_offsets-0 */
	rc = tfs_engine_open(&cfg, e);
	if (rc != 0)
		fail_msg("%s byte %ld ^ 0x%x: the engine does not open: %s", f->file, f->pos, f->mask,
		         tfs_strerror(rc));
}

static void roll_offsets(struct tfs_engine *e)
{
	struct tfs_topic *t = tfs_engine_topic_get(e, TFS_GROUPS_TOPIC);

	assert_non_null(t);
	assert_int_equal(tfs_plog_roll(tfs_topic_partition(t, 0)), 0);
	tfs_topic_unref(t);
}

static void commit(struct tfs_engine *e, struct gmodel *gm, int g, int p, tfs_offset_t off)
{
	struct tfs_group_commit c = { .topic = "t", .partition = p, .offset = off,
	                              .leader_epoch = -1, .metadata = tfs_slice_make("m", 1) };

	assert_int_equal(tfs_groups_commit(tfs_engine_groups(e), group_names[g], -1, &c, 1,
	                                   tfs_now_ms()), 0);
	gm->off[g][p] = off;
	roll_offsets(e);
}

static void check_groups(struct fx *f, const struct gmodel *gm)
{
	struct tfs_engine *e;

	open_engine(f, &e);
	for (int g = 0; g < NGROUPS; g++)
		for (int p = 0; p < NTOPICS; p++) {
			struct tfs_group_offset o;
			int rc = tfs_groups_fetch(tfs_engine_groups(e), group_names[g], "t", p, &o);
			if (rc == 0) {
				if (o.offset != gm->off[g][p])
					fail_msg("%s byte %ld ^ 0x%x: %s t/%d fetches offset %" PRId64 ", its "
					         "newest commit is %" PRId64, f->file, f->pos, f->mask,
					         group_names[g], p, o.offset, gm->off[g][p]);
				tfs_group_offset_release(&o);
			} else if (rc != -ENOENT || (!f->pos && !f->mask && gm->off[g][p] >= 0)) {
				fail_msg("%s byte %ld ^ 0x%x: %s t/%d: %s", f->file, f->pos, f->mask,
				         group_names[g], p, tfs_strerror(rc));
			}
		}
	tfs_engine_close(e);
}

static void every_byte_of_consumer_offsets(void **state)
{
	struct fx *f = *state;
	struct tfs_engine *e;
	struct gmodel gm;
	char dir[PATH_CAP + 32];
	/* one mask: every flip of a batch is caught the same way, its CRC or its
	 * framing (test_corrupt.c tries both on every byte) */
	static const unsigned masks[] = { 0xff };
	tfs_offset_t last_base = -1;
	int sealed = 0;

	memset(gm.off, 0xff, sizeof(gm.off));
	open_engine(f, &e);
	assert_int_equal(tfs_engine_topic_create(e, "t", NTOPICS, 0, 0, 0755), 0);
	commit(e, &gm, 0, 0, 10);
	commit(e, &gm, 1, 0, 5);
	commit(e, &gm, 0, 0, 20);               /* ga's newer offset */
	commit(e, &gm, 0, 1, 7);
	commit(e, &gm, 2, 1, 3);
	assert_int_equal(tfs_groups_delete_offset(tfs_engine_groups(e), "gc", "t", 1), 0);
	gm.off[2][1] = -1;                      /* never comes back */
	roll_offsets(e);
	commit(e, &gm, 1, 0, 6);
	tfs_engine_close(e);

	snprintf(dir, sizeof(dir), "%s/%s-0", f->dir, TFS_GROUPS_TOPIC);
	save_files(&f->pristine, dir);
	for (size_t i = 0; i < f->pristine.n; i++)
		if (ends_with(f->pristine.f[i].name, ".log")) {
			tfs_offset_t b = strtoll(f->pristine.f[i].name, NULL, 10);
			if (b > last_base)
				last_base = b;
		}
	f->file = "none";            /* unflipped: every offset is known */
	check_groups(f, &gm);
	for (size_t i = 0; i < f->pristine.n; i++) {
		const struct file *fl = &f->pristine.f[i];
		if (!ends_with(fl->name, ".log") || strtoll(fl->name, NULL, 10) == last_base ||
		    fl->len == 0)
			continue;
		sealed++;
		for (long pos = 0; pos < fl->len; pos++)
			for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
				flip_at(f, fl, pos, masks[m]);
				check_groups(f, &gm);
				f->flips++;
			}
	}
	print_message("%ld flips of %d sealed __consumer_offsets segments\n", f->flips, sealed);
	assert_true(sealed >= 5);
}

/* ---- cleaner-offset-checkpoint ----------------------------------------------------- */

struct ckmodel {
	const char *key;
	const char *value;             /* NULL: deleted */
};

static int64_t fake_now;           /* the cleaner's clock */

static int64_t fake_clock(void *arg)
{
	(void)arg;
	return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

static struct tfs_cleaner *open_cleaner(struct fx *f, struct tfs_plog *pl)
{
	struct tfs_cleaner_config ccfg;
	struct tfs_cleaner *c = NULL;

	tfs_cleaner_config_defaults(&ccfg);
	ccfg.threads = 0;
	ccfg.dedupe_buffer_size = 1 << 20;
	assert_int_equal(tfs_cleaner_create(f->io, f->dir, &ccfg, &c), 0);
	tfs_cleaner_set_clock(c, fake_clock, NULL);
	assert_int_equal(tfs_cleaner_register(c, pl, "t", 0), 0);
	return c;
}

static void close_cleaned(struct fx *f, struct tfs_cleaner *c, struct tfs_plog *pl)
{
	tfs_cleaner_destroy(c);
	tfs_plog_close(pl);
	tfs_io_unlink_drain(f->io);
}

static void ck_put(struct tfs_plog *pl, const char *key, const char *value)
{
	struct tfs_append_rec r = { .key = tfs_slice_make(key, strlen(key)),
	                            .value = tfs_slice_make(value, value ? strlen(value) : 0),
	                            .value_null = value == NULL };

	assert_int_equal(tfs_plog_append(pl, &r, 1, false, NULL, NULL), 0);
}

/* Two passes a delete.retention.ms apart (so that the first stamps the kept
 * tombstones' horizon and the second may drop them), then every key against
 * the model. */
static void check_cleaned(struct fx *f, const struct ckmodel *want, size_t n)
{
	struct tfs_plog *pl = open_pl(f);
	struct tfs_cleaner *c = open_cleaner(f, pl);
	int rc;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {               /* something for the second pass to clean */
			ck_put(pl, "k6", "e6");
			ck_put(pl, "k6", "e6b");
			assert_int_equal(tfs_plog_roll(pl), 0);
		}
		fake_now += f->cfg.delete_retention_ms + 1;
		if ((rc = tfs_cleaner_clean_now(c, pl)) != 0)
			fail_msg("%s byte %ld ^ 0x%x: pass %d: %s", f->file, f->pos, f->mask, pass,
			         tfs_strerror(rc));
	}
	close_cleaned(f, c, pl);
	pl = open_pl(f);                /* what the log says, not what the keydir remembers */
	for (size_t i = 0; i < n; i++) {
		struct tfs_record_copy rcp;
		int r = tfs_plog_read_key(pl, tfs_slice_make(want[i].key, strlen(want[i].key)), &rcp);
		if (r == 0) {
			if (!want[i].value || rcp.value_len != strlen(want[i].value) ||
			    memcmp(rcp.value, want[i].value, rcp.value_len))
				fail_msg("%s byte %ld ^ 0x%x: after two passes %s reads \"%.*s\", its newest "
				         "is %s", f->file, f->pos, f->mask, want[i].key, (int)rcp.value_len,
				         (const char *)rcp.value, want[i].value ? want[i].value : "a tombstone");
			tfs_record_copy_release(&rcp);
		} else if (r != -ENOENT || want[i].value) {
			fail_msg("%s byte %ld ^ 0x%x: after two passes %s: %s", f->file, f->pos, f->mask,
			         want[i].key, tfs_strerror(r));
		}
	}
	tfs_plog_close(pl);
}

static void every_byte_of_the_cleaner_checkpoint(void **state)
{
	struct fx *f = *state;
	static const unsigned masks[] = { 0xff, 0x01 };
	static const struct ckmodel want[] = {
		{ "k0", "c0" }, { "k1", NULL }, { "k2", "b2" }, { "k3", NULL }, { "k4", "b4" },
		{ "k5", "d5" }, { "k6", "e6b" },
	};
	struct tfs_plog *pl;
	struct tfs_cleaner *c;
	char ckpath[PATH_CAP + 32];
	uint8_t *ck = NULL, flipped[256];
	long cklen;

	f->cfg.delete_retention_ms = 1000;
	fake_now = tfs_now_ms();
	pl = open_pl(f);
	c = open_cleaner(f, pl);
	ck_put(pl, "k0", "a0");
	ck_put(pl, "k1", "a1");
	ck_put(pl, "k2", "a2");
	ck_put(pl, "k3", "a3");
	assert_int_equal(tfs_plog_roll(pl), 0);
	assert_int_equal(tfs_cleaner_clean_now(c, pl), 0);   /* the checkpoint: 4 */
	ck_put(pl, "k1", NULL);                  /* dirty: a tombstone over a clean value */
	ck_put(pl, "k2", "b2");
	ck_put(pl, "k4", "b4");
	assert_int_equal(tfs_plog_roll(pl), 0);
	ck_put(pl, "k0", "c0");
	ck_put(pl, "k3", NULL);
	assert_int_equal(tfs_plog_roll(pl), 0);
	ck_put(pl, "k5", "d5");
	assert_int_equal(tfs_plog_sync(pl), 0);
	close_cleaned(f, c, pl);

	save_files(&f->pristine, f->path);
	snprintf(ckpath, sizeof(ckpath), "%s/cleaner-offset-checkpoint", f->dir);
	cklen = t_read_file(ckpath, &ck);
	assert_true(cklen > 0 && cklen <= (long)sizeof(flipped));
	f->file = "none";
	restore_flipped(&f->pristine, NULL, 0, 0);
	check_cleaned(f, want, sizeof(want) / sizeof(want[0]));
	for (long pos = 0; pos < cklen; pos++)
		for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
			f->file = "cleaner-offset-checkpoint";
			f->pos = pos;
			f->mask = masks[m];
			restore_flipped(&f->pristine, NULL, 0, 0);
			memcpy(flipped, ck, (size_t)cklen);
			flipped[pos] ^= (uint8_t)masks[m];
			assert_int_equal(t_write_file(ckpath, flipped, (size_t)cklen), 0);
			check_cleaned(f, want, sizeof(want) / sizeof(want[0]));
			f->flips++;
		}
	print_message("%ld flips of the %ld-byte cleaner checkpoint\n", f->flips, cklen);
	free(ck);
}

/* ---- topics/<topic> ------------------------------------------------------------------ */

#define CFG_PARTS 2
#define CFG_KEYS 3

/* Opens the engine and checks topic t: its partitions hold what they held, every
 * key its value; a refused config is logged and leaves the topic read-only.
 * Returns whether the config was refused. */
static bool check_topic(struct fx *f, const tfs_offset_t *ends)
{
	struct tfs_engine *e;
	struct tfs_topic *t;
	bool refused;

	log_reset(f);
	open_engine(f, &e);
	t = tfs_engine_topic_get(e, "t");
	if (!t)
		fail_msg("%s byte %ld ^ 0x%x: topic t is gone", f->file, f->pos, f->mask);
	refused = tfs_topic_config_refused(t);
	if (refused != logged(f, "cannot load"))
		fail_msg("%s byte %ld ^ 0x%x: refused %d, but the log %s", f->file, f->pos, f->mask,
		         refused, refused ? "does not say why" : "says it cannot load it");
	if (tfs_topic_partition_count(t) < CFG_PARTS)
		fail_msg("%s byte %ld ^ 0x%x: %d partitions", f->file, f->pos, f->mask,
		         tfs_topic_partition_count(t));
	for (int p = 0; p < CFG_PARTS; p++) {
		struct tfs_plog *pl = tfs_topic_partition(t, p);
		struct tfs_plog_stats st;
		if (!pl)
			fail_msg("%s byte %ld ^ 0x%x: partition %d is not open", f->file, f->pos, f->mask, p);
		tfs_plog_stats(pl, &st);
		if (st.log_end_offset != ends[p])
			fail_msg("%s byte %ld ^ 0x%x: partition %d ends at %" PRId64 ", not %" PRId64,
			         f->file, f->pos, f->mask, p, st.log_end_offset, ends[p]);
		for (int k = 0; k < CFG_KEYS; k++) {
			char v[16];
			struct tfs_record_copy rc;
			int r = tfs_plog_read_key(pl, tfs_slice_make(key_names[k], 2), &rc);
			snprintf(v, sizeof(v), "v%d.%d", p, k);
			if (r != 0 || rc.value_len != strlen(v) || memcmp(rc.value, v, rc.value_len))
				fail_msg("%s byte %ld ^ 0x%x: %d/%s: %s", f->file, f->pos, f->mask, p,
				         key_names[k], r ? tfs_strerror(r) : "another value");
			tfs_record_copy_release(&rc);
		}
	}
	tfs_topic_unref(t);
	tfs_engine_close(e);
	return refused;
}

static void every_byte_of_a_topic_config(void **state)
{
	struct fx *f = *state;
	/* 0x01 turns digits into digits (another valid value, but for the CRC) and
	 * letters into letters (an unknown name) */
	static const unsigned masks[] = { 0x01 };
	struct tfs_engine *e;
	struct tfs_topic *t;
	tfs_offset_t ends[CFG_PARTS];
	char cfgdir[PATH_CAP + 16];
	long refused = 0;

	open_engine(f, &e);
	assert_int_equal(tfs_engine_topic_create(e, "t", CFG_PARTS, 0, 0, 0750), 0);
	t = tfs_engine_topic_get(e, "t");
	for (int p = 0; p < CFG_PARTS; p++) {
		struct tfs_plog *pl = tfs_topic_partition(t, p);
		struct tfs_plog_stats st;
		for (int k = 0; k < CFG_KEYS; k++) {
			char v[16];
			struct tfs_append_rec r = { .key = tfs_slice_make(key_names[k], 2) };
			snprintf(v, sizeof(v), "v%d.%d", p, k);
			r.value = tfs_slice_make(v, strlen(v));
			assert_int_equal(tfs_plog_append(pl, &r, 1, true, NULL, NULL), 0);
		}
		tfs_plog_stats(pl, &st);
		ends[p] = st.log_end_offset;
	}
	tfs_topic_unref(t);
	tfs_engine_close(e);

	snprintf(cfgdir, sizeof(cfgdir), "%s/topics", f->dir);
	save_files(&f->pristine, cfgdir);
	assert_int_equal(f->pristine.n, 1);
	f->file = "none";
	assert_false(check_topic(f, ends));
	for (long pos = 0; pos < f->pristine.f[0].len; pos++)
		for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
			char extra[PATH_CAP + 32];
			flip_at(f, &f->pristine.f[0], pos, masks[m]);
			refused += check_topic(f, ends);
			/* a flipped partition count made more partitions: gone for the next */
			for (int p = CFG_PARTS; p < 10; p++) {
				snprintf(extra, sizeof(extra), "%s/t-%d", f->dir, p);
				t_rmtree(extra);
			}
			f->flips++;
		}
	print_message("%ld flips of a %ld-byte topic config: %ld refused (read-only)\n", f->flips,
	              f->pristine.f[0].len, refused);
	/* its last line's CRC-32C: no flip reads as another valid config */
	assert_int_equal(refused, f->flips);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(every_byte_of_txnindex_and_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(every_byte_of_consumer_offsets, setup, teardown),
		cmocka_unit_test_setup_teardown(every_byte_of_the_cleaner_checkpoint, setup, teardown),
		cmocka_unit_test_setup_teardown(every_byte_of_a_topic_config, setup, teardown),
	};
	if (getenv("T_ONLY"))              /* one case by name, to replay a failure */
		cmocka_set_test_filter(getenv("T_ONLY"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
