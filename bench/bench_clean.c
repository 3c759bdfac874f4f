/* bench_clean.c - the log cleaner: pass throughput, passes with a small dedupe
 * buffer, key-read latency during a pass, and the full ingest + compaction cycle.
 *
 * One binary, four commands (bench/cleaner.sh drives them; see bench/README.md):
 *
 *   build  --path P     appends --records records (key "user-%07d" over --keys keys,
 *                       round-robin; --value-bytes values from the same pool as
 *                       bench_append) in batches of --batch with tfs_plog_append,
 *                       segment.bytes --segment-bytes, then rolls, syncs, closes.
 *                       Untimed setup for the others (its time is printed anyway).
 *   clean  --data D --path P
 *                       opens P (a partition directory "bench-0" under D), creates a
 *                       cleaner on D with log.cleaner.threads=0 (clean_now runs on
 *                       this thread) and --dedupe-bytes, and calls tfs_cleaner_clean_now
 *                       until first_dirty_offset reaches the cleanable end (or
 *                       --max-passes). One "pass ..." line per pass (from
 *                       tfs_cleaner_partition_info: offsets, and the pass's last_clean
 *                       line parsed for its duration and bytes read/written).
 *                       --drop-caches: sync and drop the page cache after the open
 *                       (whose recovery scan reads the whole log) so the passes read
 *                       the disk (root).
 *   latency --data D --path P
 *                       a reader thread does tfs_plog_read_key of random live keys in
 *                       a loop, timing each read (CLOCK_MONOTONIC): for --idle-seconds
 *                       with no pass, then while one clean_now pass runs on this
 *                       thread. p50, p99, max of each.
 *   cycle  --data D     the full cycle in a fresh D/bench-0, run as a user's engine
 *                       runs: the cleaner thread(s) are on (--threads, default 1 as
 *                       in Kafka; --backoff-ms, default Kafka's 15000) while the
 *                       stream is ingested (as build, batches of --batch), then roll,
 *                       clean_now until fully compacted, tfs_plog_sync, close, syncfs.
 *                       Total time, the passes run during and after ingest, and
 *                       /proc/self/io write_bytes and cancelled_write_bytes sampled
 *                       before and after (bytes this process dirtied for the block
 *                       layer; all its threads).
 *
 * Output: "# ..." lines describe; "pass ..." lines in clean; every other line is
 * "name value unit". MB = 10^6 bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/cleaner/cleaner.h"
#include "engine/log/partition_log.h"
#include "engine/topic_config.h"
#include "io/file_util.h"
#include "io/io.h"
#include "io/log.h"

#include "bench/bench_util.h"

#define DEFAULT_RECORDS 10000000u
#define DEFAULT_KEYS 1000000u
#define DEFAULT_VALUE_BYTES 100u
#define DEFAULT_BATCH 1000u
#define DEFAULT_SEGMENT_BYTES (100ll << 20)   /* this bench's choice (topicfs's default too);
                                           * Kafka's default segment.bytes is 1 GiB */
#define DEFAULT_IDLE_SECONDS 5.0
#define DEFAULT_MAX_PASSES 1000
#define MAX_KEYS 10000000ull              /* 10^BENCH_KEY_DIGITS */
#define POOL_STRIDE 131u                  /* > value size: neighbours never overlap */
#define MAX_BATCH 100000u
#define FDCACHE_MAX 1024u
#define MAX_THREADS 64                    /* --threads: enough for any machine here */
#define PATH_CAP 4096
#define TOPIC "bench"                     /* the partition directory is "bench-0" */
#define PARTITION 0
#define PART_NAME "bench-0"
#define BYTES_PER_MB 1e6
#define NS_PER_S 1000000000ull
#define NS_PER_US 1000.0
#define SAMPLES_MAX (32u << 20)           /* per-read latencies kept per phase (256 MiB) */
#define PERCENT_50 0.50
#define PERCENT_99 0.99
#define PROC_IO "/proc/self/io"

enum cmd { CMD_BUILD, CMD_CLEAN, CMD_LATENCY, CMD_CYCLE };

struct opts {
	enum cmd cmd;
	uint64_t records;
	uint64_t keys;
	unsigned value_bytes;
	unsigned batch;
	int64_t segment_bytes;
	int64_t dedupe_bytes;               /* 0: the default (128 MiB) */
	int threads;                        /* log.cleaner.threads; -1: the command's */
	int64_t backoff_ms;                 /* log.cleaner.backoff.ms; -1: the default */
	int max_passes;
	double idle_seconds;
	bool drop_caches;                   /* clean: drop the page cache after the open */
	const char *data;
	const char *path;
	enum tfs_io_kind io_kind;
};

/* The partition and its surroundings. */
struct bench {
	struct tfs_io *io;
	struct tfs_fdcache *fdc;
	struct tfs_topic_config cfg;
	struct tfs_plog *pl;
	struct tfs_cleaner *c;
};

/* What the clean loop did. */
struct clean_result {
	int passes;
	double wall_seconds;                /* sum of clean_now wall times */
	double pass_seconds;                /* sum of the passes' own durations */
	int64_t bytes_read, bytes_written;  /* sums over the passes */
	int passes_buffer_full;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static int bench_open_log(const struct opts *o, struct bench *b, const char *path, bool create)
{
	int rc = tfs_io_create(o->io_kind, &b->io);

	if (rc < 0) {
		fprintf(stderr, "bench_clean: cannot create io (%s): %s\n",
		        tfs_io_kind_name(o->io_kind), tfs_strerror(rc));
		return rc;
	}
	b->fdc = tfs_fdcache_create(b->io, FDCACHE_MAX);
	if (!b->fdc)
		return -ENOMEM;
	tfs_topic_config_defaults(&b->cfg);
	b->cfg.segment_bytes = o->segment_bytes;
	{
		struct tfs_plog_env env = { b->io, b->fdc, &b->cfg, false };
		rc = tfs_plog_open(&env, path, create, &b->pl);
	}
	if (rc < 0)
		fprintf(stderr, "bench_clean: cannot open %s: %s\n", path, tfs_strerror(rc));
	return rc;
}

/* threads: log.cleaner.threads unless --threads says otherwise (0: clean_now runs
 * on the caller's thread). */
static int bench_start_cleaner(const struct opts *o, struct bench *b, int threads)
{
	struct tfs_cleaner_config cc;
	int rc;

	tfs_cleaner_config_defaults(&cc);
	cc.threads = o->threads >= 0 ? o->threads : threads;
	if (o->backoff_ms >= 0)
		cc.backoff_ms = o->backoff_ms;
	if (o->dedupe_bytes > 0)
		cc.dedupe_buffer_size = o->dedupe_bytes;
	rc = tfs_cleaner_create(b->io, o->data, &cc, &b->c);
	if (rc == 0)
		rc = tfs_cleaner_start(b->c);
	if (rc == 0)
		rc = tfs_cleaner_register(b->c, b->pl, TOPIC, PARTITION);
	if (rc < 0)
		fprintf(stderr, "bench_clean: cannot start the cleaner on %s: %s\n", o->data,
		        tfs_strerror(rc));
	else
		printf("# cleaner: log.cleaner.threads=%d, log.cleaner.backoff.ms=%" PRId64
		       ", dedupe buffer %" PRId64 " bytes, io buffer %" PRId64 " bytes\n",
		       cc.threads, cc.backoff_ms, cc.dedupe_buffer_size, cc.io_buffer_size);
	return rc;
}

static void bench_close(struct bench *b)
{
	if (b->c) {
		tfs_cleaner_unregister(b->c, b->pl);
		tfs_cleaner_destroy(b->c);
	}
	tfs_plog_close(b->pl);
	tfs_fdcache_destroy(b->fdc);
	tfs_io_destroy(b->io);
	memset(b, 0, sizeof(*b));
}

/* Appends the stream: records i = 0.. with key i % keys, batches of o->batch. */
static int ingest(const struct opts *o, struct tfs_plog *pl)
{
	struct tfs_append_rec *recs = calloc(o->batch, sizeof(*recs));
	uint8_t *keys = malloc((size_t)o->batch * BENCH_KEY_BYTES);
	uint8_t *pool = bench_make_pool();
	int rc = 0;

	if (!recs || !keys || !pool) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < o->records;) {
		size_t n = 0;
		for (; n < o->batch && i < o->records; n++, i++) {
			uint8_t *kp = keys + n * BENCH_KEY_BYTES;
			bench_format_key(kp, i % o->keys);
			recs[n].key = tfs_slice_make(kp, BENCH_KEY_BYTES);
			recs[n].value = tfs_slice_make(pool + (i * POOL_STRIDE) % BENCH_POOL_BYTES,
			                               o->value_bytes);
		}
		rc = tfs_plog_append(pl, recs, n, false, NULL, NULL);
		if (rc < 0) {
			fprintf(stderr, "bench_clean: append failed: %s\n", tfs_strerror(rc));
			goto out;
		}
	}
	rc = tfs_plog_roll(pl);
	if (rc == 0)
		rc = tfs_plog_sync(pl);
	if (rc < 0)
		fprintf(stderr, "bench_clean: roll/sync failed: %s\n", tfs_strerror(rc));
out:
	free(recs);
	free(keys);
	free(pool);
	return rc;
}

/* Parses a last_clean line: "<time> duration 1.234 s, read N bytes, wrote M bytes,
 * ...[, dedupe buffer too small ...]". */
static int parse_last_clean(const char *line, double *secs, int64_t *rd, int64_t *wr, bool *full)
{
	const char *p = strstr(line, "duration ");

	if (!p || sscanf(p, "duration %lf s, read %" SCNd64 " bytes, wrote %" SCNd64, secs, rd,
	                 wr) != 3)
		return -EINVAL;
	*full = strstr(line, "dedupe buffer too small") != NULL;
	return 0;
}

/* clean_now until first_dirty reaches the cleanable end; one "pass" line each. */
static int clean_loop(const struct opts *o, struct bench *b, bool verbose, struct clean_result *r)
{
	struct tfs_cleaner_partition_info info;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = tfs_cleaner_partition_info(b->c, b->pl, &info);
	if (rc < 0)
		return rc;
	if (verbose)
		printf("# before: first_dirty_offset %" PRId64 ", cleanable end (first_uncleanable) %"
		       PRId64 ", dirty ratio %.3f\n", info.first_dirty_offset,
		       info.first_uncleanable_offset, info.dirty_ratio);
	while (info.first_dirty_offset < info.first_uncleanable_offset && r->passes < o->max_passes) {
		tfs_offset_t from = info.first_dirty_offset;
		double t0 = bench_now_s(), wall, secs;
		int64_t rd, wr;
		bool full;

		rc = tfs_cleaner_clean_now(b->c, b->pl);
		wall = bench_now_s() - t0;
		if (rc < 0) {
			fprintf(stderr, "bench_clean: clean_now failed: %s\n", tfs_strerror(rc));
			return rc;
		}
		rc = tfs_cleaner_partition_info(b->c, b->pl, &info);
		if (rc < 0)
			return rc;
		if (parse_last_clean(info.last_clean, &secs, &rd, &wr, &full) < 0) {
			fprintf(stderr, "bench_clean: cannot parse last_clean: %s\n", info.last_clean);
			return -EINVAL;
		}
		r->passes++;
		r->wall_seconds += wall;
		r->pass_seconds += secs;
		r->bytes_read += rd;
		r->bytes_written += wr;
		r->passes_buffer_full += full;
		if (verbose)
			printf("pass %d first_dirty %" PRId64 " -> %" PRId64 " of %" PRId64
			       " read %" PRId64 " wrote %" PRId64 " seconds %.3f wall %.3f%s\n",
			       r->passes, from, info.first_dirty_offset, info.first_uncleanable_offset,
			       rd, wr, secs, wall, full ? " buffer_too_small" : "");
		if (info.first_dirty_offset <= from) {
			fprintf(stderr, "bench_clean: pass %d made no progress (%s)\n", r->passes,
			        info.last_clean);
			return -EAGAIN;
		}
	}
	if (info.first_dirty_offset < info.first_uncleanable_offset) {
		fprintf(stderr, "bench_clean: not compacted after %d passes\n", r->passes);
		return -EAGAIN;
	}
	return 0;
}

static void print_stats(const char *prefix, struct tfs_plog *pl)
{
	struct tfs_plog_stats st;

	tfs_plog_stats(pl, &st);
	printf("%s_bytes %" PRId64 " bytes\n", prefix, st.size_bytes);
	printf("%s_segments %d segments\n", prefix, st.segments);
	printf("%s_live_keys %zu keys\n", prefix, st.live_keys);
}

static int cmd_build(const struct opts *o)
{
	struct bench b = { 0 };
	double t0 = bench_now_s();
	int rc = bench_open_log(o, &b, o->path, true);

	if (rc == 0)
		rc = ingest(o, b.pl);
	if (rc == 0) {
		printf("# built %" PRIu64 " records over %" PRIu64 " keys, %u-byte values, batches of %u,"
		       " segment.bytes %" PRId64 "\n", o->records, o->keys, o->value_bytes, o->batch,
		       o->segment_bytes);
		printf("build_seconds %.3f s\n", bench_now_s() - t0);
		print_stats("log", b.pl);
	}
	bench_close(&b);
	return rc;
}

static int cmd_clean(const struct opts *o)
{
	struct bench b = { 0 };
	struct clean_result r;
	int rc = bench_open_log(o, &b, o->path, false);

	if (rc == 0)
		rc = bench_start_cleaner(o, &b, 0);
	if (rc < 0)
		goto out;
	print_stats("before", b.pl);
	if (o->drop_caches) {
		rc = bench_drop_caches("bench_clean");
		if (rc < 0)
			goto out;
		printf("# page cache dropped after the open\n");
	}
	rc = clean_loop(o, &b, true, &r);
	if (rc < 0)
		goto out;
	print_stats("after", b.pl);
	printf("passes %d passes\n", r.passes);
	printf("passes_buffer_too_small %d passes\n", r.passes_buffer_full);
	printf("clean_wall_seconds %.3f s\n", r.wall_seconds);
	printf("clean_pass_seconds %.3f s\n", r.pass_seconds);
	printf("bytes_read %" PRId64 " bytes\n", r.bytes_read);
	printf("bytes_written %" PRId64 " bytes\n", r.bytes_written);
	printf("clean_mb_per_s %.1f MB/s\n",
	       (double)(r.bytes_read + r.bytes_written) / BYTES_PER_MB / r.pass_seconds);
out:
	bench_close(&b);
	return rc;
}

/* ---- latency ---- */

struct reader {
	struct tfs_plog *pl;
	uint64_t keys;
	atomic_bool stop;
	uint64_t *ns;                       /* per-read latencies */
	size_t n, cap;
	uint64_t seed;
	uint64_t errors;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	uint8_t key[BENCH_KEY_BYTES];
	uint64_t x = rd->seed;

	while (!atomic_load_explicit(&rd->stop, memory_order_relaxed)) {
		struct tfs_record_copy rc;
		uint64_t t0, t1;
		int err;

		x = bench_mix64(x);
		bench_format_key(key, x % rd->keys);
		t0 = now_ns();
		err = tfs_plog_read_key(rd->pl, tfs_slice_make(key, BENCH_KEY_BYTES), &rc);
		t1 = now_ns();
		if (err < 0) {
			rd->errors++;
			continue;
		}
		tfs_record_copy_release(&rc);
		if (rd->n < rd->cap)
			rd->ns[rd->n++] = t1 - t0;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void print_latency(const char *prefix, struct reader *rd, double secs)
{
	if (rd->n == 0) {
		printf("%s_reads 0 reads\n", prefix);
		return;
	}
	qsort(rd->ns, rd->n, sizeof(rd->ns[0]), cmp_u64);
	printf("%s_reads %zu reads\n", prefix, rd->n);
	printf("%s_seconds %.3f s\n", prefix, secs);
	printf("%s_errors %" PRIu64 " reads\n", prefix, rd->errors);
	printf("%s_p50_us %.2f us\n", prefix, (double)rd->ns[(size_t)((double)(rd->n - 1) * PERCENT_50)] / NS_PER_US);
	printf("%s_p99_us %.2f us\n", prefix, (double)rd->ns[(size_t)((double)(rd->n - 1) * PERCENT_99)] / NS_PER_US);
	printf("%s_max_us %.2f us\n", prefix, (double)rd->ns[rd->n - 1] / NS_PER_US);
}

static int start_reader(struct reader *rd, pthread_t *t)
{
	int rc;

	rd->n = 0;
	rd->errors = 0;
	atomic_store(&rd->stop, false);
	rc = pthread_create(t, NULL, reader_main, rd);
	return rc ? -rc : 0;
}

static void stop_reader(struct reader *rd, pthread_t t)
{
	atomic_store(&rd->stop, true);
	pthread_join(t, NULL);
}

static int cmd_latency(const struct opts *o)
{
	struct bench b = { 0 };
	struct reader rd = { .keys = o->keys, .cap = SAMPLES_MAX, .seed = 1 };
	struct clean_result r;
	struct timespec idle = { (time_t)o->idle_seconds,
	                         (long)((o->idle_seconds - (double)(time_t)o->idle_seconds) * 1e9) };
	pthread_t t;
	double t0;
	int rc = bench_open_log(o, &b, o->path, false);

	if (rc == 0)
		rc = bench_start_cleaner(o, &b, 0);
	if (rc < 0)
		goto out;
	rd.pl = b.pl;
	rd.ns = malloc(rd.cap * sizeof(rd.ns[0]));
	if (!rd.ns) {
		rc = -ENOMEM;
		goto out;
	}
	printf("# reader: 1 thread, tfs_plog_read_key of uniformly random keys of %" PRIu64
	       " (all live), each read timed with CLOCK_MONOTONIC\n", o->keys);
	rc = start_reader(&rd, &t);
	if (rc < 0)
		goto out;
	t0 = bench_now_s();
	nanosleep(&idle, NULL);
	stop_reader(&rd, t);
	print_latency("idle", &rd, bench_now_s() - t0);

	rc = start_reader(&rd, &t);
	if (rc < 0)
		goto out;
	t0 = bench_now_s();
	rc = clean_loop(o, &b, true, &r);      /* this thread cleans, the reader reads */
	stop_reader(&rd, t);
	if (rc < 0)
		goto out;
	print_latency("pass", &rd, bench_now_s() - t0);
	printf("pass_bytes_read %" PRId64 " bytes\n", r.bytes_read);
	printf("pass_bytes_written %" PRId64 " bytes\n", r.bytes_written);
out:
	bench_close(&b);
	free(rd.ns);
	return rc;
}

/* ---- full cycle ---- */

/* Passes the cleaner has logged in DATA_DIR/log-cleaner.log so far. */
static int passes_logged(const char *data)
{
	char path[PATH_CAP], line[1024];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/log-cleaner.log", data);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, ": cleaned offsets [") != NULL;
	fclose(f);
	return n;
}

static int cmd_cycle(const struct opts *o)
{
	struct bench b = { 0 };
	struct clean_result r = { 0 };
	char path[PATH_CAP];
	int64_t wb0, cw0, wb1, cw1;
	double t0, t_ingest = 0, t_clean = 0, t_sync = 0, t;
	int rc, dfd, during = 0;

	snprintf(path, sizeof(path), "%s/%s", o->data, PART_NAME);
	rc = bench_proc_io(&wb0, &cw0);
	if (rc < 0) {
		fprintf(stderr, "bench_clean: cannot read %s: %s\n", PROC_IO, strerror(-rc));
		return rc;
	}
	t0 = bench_now_s();
	rc = bench_open_log(o, &b, path, true);
	if (rc == 0)
		rc = bench_start_cleaner(o, &b, 1);   /* a user's engine runs its cleaner */
	if (rc == 0)
		rc = ingest(o, b.pl);
	t_ingest = bench_now_s() - t0;
	during = passes_logged(o->data);
	if (rc == 0)
		rc = clean_loop(o, &b, false, &r);
	t_clean = bench_now_s() - t0 - t_ingest;
	if (rc == 0) {
		print_stats("after", b.pl);
		rc = tfs_plog_sync(b.pl);
	}
	t = bench_now_s();
	bench_close(&b);                       /* closes (fsyncs) the partition */
	dfd = open(o->data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (syncfs(dfd) < 0 && rc == 0)
			rc = -errno;
		close(dfd);
	}
	t_sync = bench_now_s() - t;
	if (rc < 0)
		return rc;
	(void)bench_proc_io(&wb1, &cw1);
	printf("# topicfs cycle: %" PRIu64 " records over %" PRIu64 " keys, %u-byte values,"
	       " batches of %u, cleaner thread(s) on during ingest, roll, clean_now until"
	       " compacted, sync, close, syncfs\n",
	       o->records, o->keys, o->value_bytes, o->batch);
	printf("ingest_seconds %.3f s\n", t_ingest);
	printf("compact_seconds %.3f s\n", t_clean);
	printf("close_sync_seconds %.3f s\n", t_sync);
	printf("total_seconds %.3f s\n", t_ingest + t_clean + t_sync);
	printf("passes_during_ingest %d passes\n", during);
	printf("passes %d passes\n", passes_logged(o->data) - during);
	printf("write_bytes %" PRId64 " bytes\n", wb1 - wb0);
	printf("cancelled_write_bytes %" PRId64 " bytes\n", cw1 - cw0);
	printf("logical_bytes %" PRIu64 " bytes\n", o->records * (BENCH_KEY_BYTES + o->value_bytes));
	printf("live_bytes %" PRIu64 " bytes\n",
	       (o->records < o->keys ? o->records : o->keys) * (BENCH_KEY_BYTES + o->value_bytes));
	return 0;
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: bench_clean build   --path PARTITION_DIR [stream options]\n"
	        "       bench_clean clean   --data DATA_DIR --path DATA_DIR/" PART_NAME " [--dedupe-bytes B]\n"
	        "                           [--drop-caches]\n"
	        "       bench_clean latency --data DATA_DIR --path DATA_DIR/" PART_NAME " [--idle-seconds S]\n"
	        "       bench_clean cycle   --data DATA_DIR [stream options] [--dedupe-bytes B]\n"
	        "stream:  --records N (%u) --keys K (%u) --value-bytes V (%u) --batch B (%u)\n"
	        "         --segment-bytes S (%lld)\n"
	        "cleaner: --threads N (log.cleaner.threads; clean, latency: 0, cycle: 1)\n"
	        "         --backoff-ms MS (log.cleaner.backoff.ms; Kafka's 15000)\n"
	        "other:   --max-passes N (%d) --io auto|uring|sync\n",
	        DEFAULT_RECORDS, DEFAULT_KEYS, DEFAULT_VALUE_BYTES, DEFAULT_BATCH,
	        DEFAULT_SEGMENT_BYTES, DEFAULT_MAX_PASSES);
}

static int parse_i64(const char *name, const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "bench_clean: bad %s: %s\n", name, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_RECORDS = 256, OPT_KEYS, OPT_VALUE, OPT_BATCH, OPT_SEG, OPT_DEDUPE, OPT_PASSES, OPT_IDLE,
	       OPT_DATA, OPT_PATH, OPT_IO, OPT_DROP, OPT_THREADS, OPT_BACKOFF, OPT_HELP };
	static const struct option longopts[] = {
		{ "records", required_argument, NULL, OPT_RECORDS },
		{ "keys", required_argument, NULL, OPT_KEYS },
		{ "value-bytes", required_argument, NULL, OPT_VALUE },
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "segment-bytes", required_argument, NULL, OPT_SEG },
		{ "dedupe-bytes", required_argument, NULL, OPT_DEDUPE },
		{ "max-passes", required_argument, NULL, OPT_PASSES },
		{ "idle-seconds", required_argument, NULL, OPT_IDLE },
		{ "data", required_argument, NULL, OPT_DATA },
		{ "path", required_argument, NULL, OPT_PATH },
		{ "io", required_argument, NULL, OPT_IO },
		{ "drop-caches", no_argument, NULL, OPT_DROP },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "backoff-ms", required_argument, NULL, OPT_BACKOFF },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const cmds[] = { "build", "clean", "latency", "cycle" };
	int64_t v;
	int c;

	*o = (struct opts){ .records = DEFAULT_RECORDS, .keys = DEFAULT_KEYS,
	                    .value_bytes = DEFAULT_VALUE_BYTES, .batch = DEFAULT_BATCH,
	                    .segment_bytes = DEFAULT_SEGMENT_BYTES, .max_passes = DEFAULT_MAX_PASSES,
	                    .idle_seconds = DEFAULT_IDLE_SECONDS, .threads = -1, .backoff_ms = -1,
	                    .io_kind = tfs_io_kind_from_env() };
	if (argc < 2) {
		usage(stderr);
		return -EINVAL;
	}
	for (c = 0; c < (int)(sizeof(cmds) / sizeof(cmds[0])); c++)
		if (strcmp(argv[1], cmds[c]) == 0)
			break;
	if (c == (int)(sizeof(cmds) / sizeof(cmds[0]))) {
		usage(strcmp(argv[1], "--help") == 0 ? stdout : stderr);
		if (strcmp(argv[1], "--help") == 0)
			exit(0);
		return -EINVAL;
	}
	o->cmd = (enum cmd)c;
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_RECORDS:
		case OPT_KEYS:
			if (parse_i64(c == OPT_KEYS ? "--keys" : "--records", optarg, 1,
			              c == OPT_KEYS ? (int64_t)MAX_KEYS : INT64_MAX, &v) < 0)
				return -EINVAL;
			*(c == OPT_KEYS ? &o->keys : &o->records) = (uint64_t)v;
			break;
		case OPT_VALUE:
			if (parse_i64("--value-bytes", optarg, 0, BENCH_MAX_VALUE_BYTES, &v) < 0)
				return -EINVAL;
			o->value_bytes = (unsigned)v;
			break;
		case OPT_BATCH:
			if (parse_i64("--batch", optarg, 1, MAX_BATCH, &v) < 0)
				return -EINVAL;
			o->batch = (unsigned)v;
			break;
		case OPT_SEG:
			if (parse_i64("--segment-bytes", optarg, 1 << 20, INT32_MAX, &o->segment_bytes) < 0)
				return -EINVAL;
			break;
		case OPT_DEDUPE:
			if (parse_i64("--dedupe-bytes", optarg, 1, INT64_MAX, &o->dedupe_bytes) < 0)
				return -EINVAL;
			break;
		case OPT_PASSES:
			if (parse_i64("--max-passes", optarg, 1, INT32_MAX, &v) < 0)
				return -EINVAL;
			o->max_passes = (int)v;
			break;
		case OPT_IDLE:
			o->idle_seconds = strtod(optarg, NULL);
			if (o->idle_seconds <= 0) {
				fprintf(stderr, "bench_clean: bad --idle-seconds: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case OPT_DATA:
			o->data = optarg;
			break;
		case OPT_PATH:
			o->path = optarg;
			break;
		case OPT_IO:
			if (tfs_io_kind_parse(optarg, &o->io_kind) < 0) {
				fprintf(stderr, "bench_clean: bad --io: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case OPT_DROP:
			o->drop_caches = true;
			break;
		case OPT_THREADS:
			if (parse_i64("--threads", optarg, 0, MAX_THREADS, &v) < 0)
				return -EINVAL;
			o->threads = (int)v;
			break;
		case OPT_BACKOFF:
			if (parse_i64("--backoff-ms", optarg, 1, INT32_MAX, &o->backoff_ms) < 0)
				return -EINVAL;
			break;
		case 'h':
		case OPT_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc || (o->cmd != CMD_CYCLE && !o->path) || (o->cmd != CMD_BUILD && !o->data)) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc;

	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	tfs_log_set_level(TFS_LOG_WARN);   /* rolls, opens and passes log at info level */
	switch (o.cmd) {
	case CMD_BUILD:
		rc = cmd_build(&o);
		break;
	case CMD_CLEAN:
		rc = cmd_clean(&o);
		break;
	case CMD_LATENCY:
		rc = cmd_latency(&o);
		break;
	default:
		rc = cmd_cycle(&o);
		break;
	}
	if (rc < 0) {
		fprintf(stderr, "bench_clean: %s\n", tfs_strerror(rc));
		return 1;
	}
	return 0;
}
