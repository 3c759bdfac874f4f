/* bench_open.c - opening a partition: recovery scan and key-directory rebuild.
 *
 * What it measures: the wall time of tfs_plog_open on a partition of --records
 * records (key "user-%07d" over --keys distinct keys, --value-bytes values; the
 * same generator as bench_append). Opening reads every segment from position 0,
 * checks every batch's CRC, decodes every record into the key directory and
 * rebuilds the in-memory indexes, so the figure is a scan rate: log bytes / open
 * time.
 *
 * The log is built first, untimed, by a child process (batches of --batch records,
 * then tfs_plog_close), so the peak RSS reported is that of the open alone. With
 * --reuse PATH an existing partition directory is opened instead (nothing is
 * built or removed).
 *
 * Page cache: by default nothing is dropped, so the open reads from memory (the
 * build just wrote the log): that is the CPU cost of recovery. --drop-caches adds
 * a second, cold open after `sync; echo 3 > /proc/sys/vm/drop_caches`, which
 * needs root; both are reported.
 *
 * Output: "# ..." lines describe the run; every other line is "name value unit":
 *   open_seconds, scan_gb_per_s (log bytes / open time, GB = 10^9 bytes),
 *   open_records_per_s, log_bytes, segments, live_keys, keydir_bytes (keydir
 *   memory from tfs_plog_stats), key_bytes (sum of live keys' lengths),
 *   keydir_bytes_per_key (net: (keydir_bytes - key_bytes) / live_keys),
 *   keydir_bytes_per_key_raw (keydir_bytes / live_keys), peak_rss_mb;
 *   with --drop-caches also open_seconds_cold and scan_gb_per_s_cold.
 * The target is scan_gb_per_s >= 1 (warm).
 *
 * --producers N: the log is built as N idempotent producers write it: batch i
 * (of --batch records) carries producer id i % N + 1, epoch 0 and that
 * producer's next base sequence, appended as it came through
 * tfs_plog_append_batch (so the producer state checks and records every one),
 * and the rolls and the close leave their `<offset>.snapshot` files. The open is
 * then timed --rounds times in pairs: with the build's snapshots in place (the
 * producer state is loaded from the newest one; the scan replays nothing) and
 * with every snapshot removed (the scan replays every batch of every segment
 * into the producer state). Both opens of a pair find the page cache alike:
 * warm (the pair runs back to back on a log just read), or, with --drop-caches,
 * each one after its own drop. Each open's producer state is checked against
 * the first one's (every producer's epoch and newest batch), so both ways
 * recover the same state. Prints, as medians over the rounds,
 * open_seconds_snapshot, open_seconds_scan, scan_over_snapshot (their ratio),
 * the per-round figures as "# round" lines, producers and snapshots (files
 * the build left); with --drop-caches the same with a _cold suffix. With
 * --reuse, the directory's own snapshots are the ones timed: they are read
 * first, removed for the opens without, and put back at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "engine/producer/producer_state.h"
#include "engine/topic_config.h"
#include "io/file_util.h"
#include "io/io.h"
#include "io/log.h"

#include "bench/bench_batch.h"
#include "bench/bench_util.h"

#define DEFAULT_RECORDS 10000000u
#define DEFAULT_KEYS 1000000u
#define DEFAULT_VALUE_BYTES 100u
#define DEFAULT_BATCH 1000u
#define DEFAULT_DIR "/var/tmp"
#define MAX_KEYS 10000000ull              /* 10^BENCH_KEY_DIGITS */
#define POOL_STRIDE 131u                  /* > value size: neighbours never overlap */
#define MAX_BATCH 100000u
#define FDCACHE_MAX 1024u
#define PATH_CAP 4096
#define PART_NAME "/bench-0"        /* the partition directory under the fresh root */
#define BYTES_PER_MB 1e6
#define BYTES_PER_GB 1e9
#define NFTW_FDS 16
#define MAX_ROUNDS 99
#define DEFAULT_ROUNDS 3
#define MAX_SNAPSHOTS 4096
#define SNAPSHOT_SUFFIX ".snapshot"
#define SNAPSHOT_MAX_BYTES (64u << 20)

struct opts {
	uint64_t records;
	uint64_t keys;
	unsigned value_bytes;
	unsigned batch;
	bool zstd;
	bool keep;
	bool drop_caches;
	uint64_t producers;               /* --producers: 0 = plain appends */
	unsigned rounds;
	const char *dir;
	const char *reuse;
	enum tfs_io_kind io_kind;
};

/* What one timed open found. */
struct open_result {
	double seconds;
	struct tfs_plog_stats st;
	uint64_t key_bytes;
	size_t producers;
	uint64_t pstate_sum;              /* over every producer's epoch and newest batch */
};

/* A snapshot file the build left, kept to put back before each timed open. */
struct snapshot_file {
	char name[64];
	char *data;
	size_t len;
};

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int env_make(const struct opts *o, struct tfs_io **io, struct tfs_fdcache **fdc,
                    struct tfs_topic_config *cfg)
{
	int rc = tfs_io_create(o->io_kind, io);

	if (rc < 0) {
		fprintf(stderr, "bench_open: cannot create io (%s): %s\n", tfs_io_kind_name(o->io_kind),
		        tfs_strerror(rc));
		return rc;
	}
	*fdc = tfs_fdcache_create(*io, FDCACHE_MAX);
	if (!*fdc) {
		tfs_io_destroy(*io);
		*io = NULL;
		return -ENOMEM;
	}
	tfs_topic_config_defaults(cfg);
	if (o->zstd)
		cfg->compression = TFS_CODEC_ZSTD;
	return 0;
}

/* --producers: recs[0, n) as batch number nbatch of the build, written by producer
 * nbatch % producers + 1 at its next sequence, appended as a producer's batch. */
static int append_producer_batch(const struct opts *o, const struct tfs_topic_config *cfg,
                                 struct tfs_plog *pl, struct tfs_batch_builder *b,
                                 int32_t *next_seq,
                                 uint64_t nbatch, const struct tfs_append_rec *recs, size_t n)
{
	uint64_t p = nbatch % o->producers;
	struct tfs_batch_params params = {
		.attributes = (int16_t)(cfg->compression & TFS_ATTR_CODEC_MASK),
		.leader_epoch = -1, .producer_id = (int64_t)p + 1, .producer_epoch = 0,
		.base_sequence = next_seq[p], .zstd_level = cfg->zstd_level,
	};
	const uint8_t *out;
	uint8_t *copy;
	size_t len;
	int rc = bench_build_batch(b, &params, recs, n, &out, &len);

	if (rc < 0)
		return rc;
	/* the append takes the batch as a producer's buffer: its own copy */
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, out, len);
	rc = tfs_plog_append_batch(pl, copy, len, false, NULL, NULL, NULL, NULL);
	free(copy);
	next_seq[p] = tfs_pstate_seq_add(next_seq[p], (int32_t)n);
	return rc;
}

/* Builds the log at path (run in a child): 0 or a negative errno. */
static int build_log(const struct opts *o, const char *path)
{
	struct tfs_io *io = NULL;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_topic_config cfg;
	struct tfs_plog *pl = NULL;
	struct tfs_append_rec *recs = calloc(o->batch, sizeof(*recs));
	uint8_t *keys = malloc((size_t)o->batch * BENCH_KEY_BYTES);
	uint8_t *pool = bench_make_pool();
	int32_t *next_seq = o->producers ? calloc(o->producers, sizeof(*next_seq)) : NULL;
	struct tfs_batch_builder builder;
	uint64_t nbatch = 0;
	int rc;

	tfs_batch_builder_init(&builder);
	if (!recs || !keys || !pool || (o->producers && !next_seq)) {
		rc = -ENOMEM;
		goto out;
	}
	rc = env_make(o, &io, &fdc, &cfg);
	if (rc < 0)
		goto out;
	{
		struct tfs_plog_env env = { io, fdc, &cfg, false };
		rc = tfs_plog_open(&env, path, true, &pl);
	}
	if (rc < 0)
		goto out;
	for (uint64_t i = 0; i < o->records;) {
		size_t n = 0;
		for (; n < o->batch && i < o->records; n++, i++) {
			uint8_t *kp = keys + n * BENCH_KEY_BYTES;
			bench_format_key(kp, i % o->keys);
			recs[n].key = tfs_slice_make(kp, BENCH_KEY_BYTES);
			recs[n].value = tfs_slice_make(pool + (i * POOL_STRIDE) % BENCH_POOL_BYTES, o->value_bytes);
		}
		if (o->producers)
			rc = append_producer_batch(o, &cfg, pl, &builder, next_seq, nbatch++, recs, n);
		else
			rc = tfs_plog_append(pl, recs, n, false, NULL, NULL);
		if (rc < 0)
			goto out;
	}
	rc = tfs_plog_sync(pl);
out:
	if (rc < 0)
		fprintf(stderr, "bench_open: building %s failed: %s\n", path, tfs_strerror(rc));
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	tfs_batch_builder_release(&builder);
	free(next_seq);
	free(recs);
	free(keys);
	free(pool);
	return rc;
}

static int sum_key_bytes(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                         uint64_t hash)
{
	(void)info;
	(void)hash;
	*(uint64_t *)arg += key.len;
	return 0;
}

/* r->producers and a checksum of every producer's epoch and newest batch (what a
 * snapshot keeps), to tell whether two opens recovered the same state. */
static int pstate_summary(struct tfs_plog *pl, struct open_result *r)
{
	size_t n = tfs_plog_producers(pl, NULL, 0);
	struct tfs_pstate_entry *e = n ? calloc(n, sizeof(*e)) : NULL;
	uint64_t sum = 0;

	if (n && !e)
		return -ENOMEM;
	n = tfs_plog_producers(pl, e, n);
	for (size_t i = 0; i < n; i++) {
		const struct tfs_pstate_batch *last = e[i].nbatches ? &e[i].batch[e[i].nbatches - 1] : NULL;
		uint64_t v = (uint64_t)e[i].producer_id * 0x9e3779b97f4a7c15ull ^ (uint64_t)e[i].epoch;
		if (last)
			v = bench_mix64(v ^ (uint64_t)last->first_seq << 32 ^ (uint32_t)last->last_seq) ^
			    bench_mix64((uint64_t)last->first_offset ^ (uint64_t)last->last_offset << 20);
		sum += bench_mix64(v);
	}
	free(e);
	r->producers = n;
	r->pstate_sum = sum;
	return 0;
}

/* One timed tfs_plog_open of path, then stats and close. */
static int timed_open(const struct opts *o, const char *path, struct open_result *r)
{
	struct tfs_io *io = NULL;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_topic_config cfg;
	struct tfs_plog *pl = NULL;
	double t0;
	int rc = env_make(o, &io, &fdc, &cfg);

	if (rc < 0)
		return rc;
	{
		struct tfs_plog_env env = { io, fdc, &cfg, false };
		t0 = bench_now_s();
		rc = tfs_plog_open(&env, path, false, &pl);
		r->seconds = bench_now_s() - t0;
	}
	if (rc < 0) {
		fprintf(stderr, "bench_open: cannot open %s: %s\n", path, tfs_strerror(rc));
		goto out;
	}
	tfs_plog_stats(pl, &r->st);
	rc = pstate_summary(pl, r);
	if (rc < 0)
		goto out;
	r->key_bytes = 0;
	rc = tfs_plog_scan_keys(pl, false, 0, sum_key_bytes, &r->key_bytes);
out:
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	return rc;
}

static bool is_snapshot(const char *name)
{
	size_t n = strlen(name), s = sizeof(SNAPSHOT_SUFFIX) - 1;

	return n > s && strcmp(name + n - s, SNAPSHOT_SUFFIX) == 0;
}

/* Removes every snapshot file of the partition at path: 0 or a negative errno. */
static int snapshots_remove(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (is_snapshot(de->d_name) && unlinkat(dirfd(d), de->d_name, 0) < 0) {
			rc = -errno;
			break;
		}
	}
	closedir(d);
	if (rc < 0)
		fprintf(stderr, "bench_open: cannot remove a snapshot in %s: %s\n", path, strerror(-rc));
	return rc;
}

/* Reads every snapshot file of the partition at path into *out (*n of them;
 * caller frees each data and *out, also on an error). */
static int snapshots_save(const char *path, struct snapshot_file **out, size_t *n)
{
	DIR *d = opendir(path);
	int rc = d ? 0 : -errno;
	struct dirent *de;
	struct snapshot_file *f = calloc(MAX_SNAPSHOTS, sizeof(*f));
	char file[PATH_CAP + 80];

	*out = f;
	*n = 0;
	if (rc == 0 && !f)
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	while ((de = readdir(d)) && rc == 0) {
		FILE *in;
		long len;
		if (!is_snapshot(de->d_name))
			continue;
		if (*n == MAX_SNAPSHOTS ||
		    snprintf(f[*n].name, sizeof(f[*n].name), "%s", de->d_name) >= (int)sizeof(f->name) ||
		    snprintf(file, sizeof(file), "%s/%s", path, de->d_name) >= (int)sizeof(file)) {
			rc = -E2BIG;
			break;
		}
		in = fopen(file, "rb");
		if (!in) {
			rc = -errno;
		} else if (fseek(in, 0, SEEK_END) < 0 || (len = ftell(in)) < 0 ||
		           fseek(in, 0, SEEK_SET) < 0) {
			rc = -EIO;
		} else if (len > (long)SNAPSHOT_MAX_BYTES) {
			rc = -EFBIG;
		} else if (!(f[*n].data = malloc((size_t)len + 1))) {
			rc = -ENOMEM;
		} else if (fread(f[*n].data, 1, (size_t)len, in) != (size_t)len) {
			rc = -EIO;
			free(f[*n].data);
			f[*n].data = NULL;
		} else {
			f[*n].len = (size_t)len;
			(*n)++;
		}
		if (in)
			fclose(in);
	}
out:
	if (d)
		closedir(d);
	if (rc < 0)
		fprintf(stderr, "bench_open: cannot read the snapshots of %s: %s\n", path,
		        tfs_strerror(rc));
	return rc;
}

/* Puts the saved snapshots back as the only ones in path. */
static int snapshots_restore(const char *path, const struct snapshot_file *f, size_t n)
{
	char file[PATH_CAP + 80];
	int rc = snapshots_remove(path);

	for (size_t i = 0; i < n && rc == 0; i++) {
		FILE *out;
		if (snprintf(file, sizeof(file), "%s/%s", path, f[i].name) >= (int)sizeof(file)) {
			rc = -ENAMETOOLONG;
			fprintf(stderr, "bench_open: path too long: %s\n", path);
			break;
		}
		out = fopen(file, "wb");
		if (!out || fwrite(f[i].data, 1, f[i].len, out) != f[i].len)
			rc = out ? -EIO : -errno;
		if (out && fclose(out) != 0 && rc == 0)
			rc = -errno;
		if (rc < 0)
			fprintf(stderr, "bench_open: cannot write %s: %s\n", file, strerror(-rc));
	}
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median_of(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(n - 1) / 2];
}

/* --producers: o->rounds pairs of timed opens of path, with its snapshots and
 * without, warm or (cold) each after a drop of the page cache; prints the
 * medians. *ref is the state every open must recover: the first open's, taken
 * when *have_ref is still false. */
static int snapshot_rounds(const struct opts *o, const char *path, const struct snapshot_file *f,
                           size_t nf, bool cold, struct open_result *ref, bool *have_ref)
{
	double snap[MAX_ROUNDS], scan[MAX_ROUNDS];
	const char *suffix = cold ? "_cold" : "";

	for (unsigned r = 0; r < o->rounds; r++) {
		/* alternate which goes first, so neither always follows the other */
		for (int k = 0; k < 2; k++) {
			bool with = (k == 0) == (r % 2 == 0);
			struct open_result res;
			int rc = with ? snapshots_restore(path, f, nf) : snapshots_remove(path);
			if (rc == 0 && cold)
				rc = bench_drop_caches("bench_open");
			if (rc == 0)
				rc = timed_open(o, path, &res);
			if (rc < 0)
				return rc;
			if (!*have_ref) {
				*ref = res;
				*have_ref = true;
			} else if (res.producers != ref->producers || res.pstate_sum != ref->pstate_sum) {
				fprintf(stderr, "bench_open: the open %s snapshots recovered another producer "
				        "state (%zu producers, sum %016" PRIx64 "; first open: %zu, %016" PRIx64
				        ")\n", with ? "with" : "without", res.producers, res.pstate_sum,
				        ref->producers, ref->pstate_sum);
				return -EPROTO;
			}
			(with ? snap : scan)[r] = res.seconds;
		}
		printf("# round %u%s: with snapshots %.3f s, without (full replay) %.3f s\n", r + 1,
		       cold ? " (cold)" : "", snap[r], scan[r]);
	}
	{
		double ms = median_of(snap, o->rounds), mf = median_of(scan, o->rounds);
		printf("open_seconds_snapshot%s %.3f s\n", suffix, ms);
		printf("open_seconds_scan%s %.3f s\n", suffix, mf);
		printf("scan_over_snapshot%s %.3f x\n", suffix, mf / ms);
	}
	return 0;
}

/* --producers: the paired opens, warm and (--drop-caches) cold; leaves the
 * build's snapshots in place. */
static int producer_opens(const struct opts *o, const char *path)
{
	struct snapshot_file *f;
	struct open_result ref = { 0 };
	bool have_ref = false;
	size_t nf;
	int rc = snapshots_save(path, &f, &nf);
	bool saved = rc == 0;         /* all of them: the rounds may remove them */

	if (rc == 0 && nf == 0) {
		fprintf(stderr, "bench_open: %s has no snapshot to load\n", path);
		rc = -ENOENT;
	}
	if (rc == 0) {
		printf("# bench_open path=%s producers: opens with the %zu snapshots the build left vs "
		       "without any, %u rounds, page cache warm%s\n", path, nf, o->rounds,
		       o->drop_caches ? ", then dropped before each open (cold)" : "");
		rc = snapshot_rounds(o, path, f, nf, false, &ref, &have_ref);
	}
	if (rc == 0 && o->drop_caches)
		rc = snapshot_rounds(o, path, f, nf, true, &ref, &have_ref);
	if (rc == 0) {
		printf("producers %zu producers\n", ref.producers);
		printf("snapshots %zu files\n", nf);
		printf("log_bytes %" PRId64 " bytes\n", ref.st.size_bytes);
		printf("segments %d segments\n", ref.st.segments);
		printf("records %" PRId64 " records\n", ref.st.log_end_offset - ref.st.log_start_offset);
		printf("peak_rss_mb %.1f MB\n", bench_peak_rss_mb());
	}
	if (saved && nf && snapshots_restore(path, f, nf) < 0 && rc == 0)
		rc = -EIO;
	for (size_t i = 0; i < nf; i++)
		free(f[i].data);
	free(f);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: bench_open [options]\n"
	        "  --records N      records in the log (default %u)\n"
	        "  --keys K         distinct keys \"user-%%07d\", round-robin (default %u)\n"
	        "  --value-bytes V  value size (default %u, at most %u)\n"
	        "  --batch B        records per append while building (default %u)\n"
	        "  --zstd           build with compression.type zstd\n"
	        "  --dir DIR        parent of the fresh data directory (default %s)\n"
	        "  --reuse PATH     open this existing partition directory; build nothing\n"
	        "  --keep           keep the built data directory\n"
	        "  --drop-caches    also time a cold open after dropping the page cache (root)\n"
	        "  --producers N    build as N idempotent producers (batches of --batch) and time\n"
	        "                   the open with the snapshots vs without them (full replay)\n"
	        "  --rounds R       --producers: pairs of opens, median reported (default %u)\n"
	        "  --io KIND        auto, uring or sync (default $TFS_IO, else auto)\n",
	        DEFAULT_RECORDS, DEFAULT_KEYS, DEFAULT_VALUE_BYTES, BENCH_MAX_VALUE_BYTES, DEFAULT_BATCH,
	        DEFAULT_DIR, DEFAULT_ROUNDS);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_RECORDS = 256, O_KEYS, O_VALUE, O_BATCH, O_ZSTD, O_DIR, O_REUSE, O_KEEP,
	       O_DROP, O_IO, O_PRODUCERS, O_ROUNDS, O_HELP };
	static const struct option longopts[] = {
		{ "records", required_argument, NULL, O_RECORDS },
		{ "keys", required_argument, NULL, O_KEYS },
		{ "value-bytes", required_argument, NULL, O_VALUE },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "zstd", no_argument, NULL, O_ZSTD },
		{ "dir", required_argument, NULL, O_DIR },
		{ "reuse", required_argument, NULL, O_REUSE },
		{ "keep", no_argument, NULL, O_KEEP },
		{ "drop-caches", no_argument, NULL, O_DROP },
		{ "io", required_argument, NULL, O_IO },
		{ "producers", required_argument, NULL, O_PRODUCERS },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	*o = (struct opts){ .records = DEFAULT_RECORDS, .keys = DEFAULT_KEYS,
	                    .value_bytes = DEFAULT_VALUE_BYTES, .batch = DEFAULT_BATCH,
	                    .dir = DEFAULT_DIR, .rounds = DEFAULT_ROUNDS,
	                    .io_kind = tfs_io_kind_from_env() };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_RECORDS:
			if (bench_parse_u64("bench_open", "--records", optarg, 1, UINT64_MAX, &o->records) < 0)
				return -EINVAL;
			break;
		case O_KEYS:
			if (bench_parse_u64("bench_open", "--keys", optarg, 1, MAX_KEYS, &o->keys) < 0)
				return -EINVAL;
			break;
		case O_VALUE:
			if (bench_parse_u64("bench_open", "--value-bytes", optarg, 0, BENCH_MAX_VALUE_BYTES, &v) < 0)
				return -EINVAL;
			o->value_bytes = (unsigned)v;
			break;
		case O_BATCH:
			if (bench_parse_u64("bench_open", "--batch", optarg, 1, MAX_BATCH, &v) < 0)
				return -EINVAL;
			o->batch = (unsigned)v;
			break;
		case O_ZSTD:
			o->zstd = true;
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_REUSE:
			o->reuse = optarg;
			break;
		case O_KEEP:
			o->keep = true;
			break;
		case O_DROP:
			o->drop_caches = true;
			break;
		case O_IO:
			if (tfs_io_kind_parse(optarg, &o->io_kind) < 0) {
				fprintf(stderr, "bench_open: bad --io: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case O_PRODUCERS:
			/* producer ids 1..N; sequences per producer fit Kafka's int32 */
			if (bench_parse_u64("bench_open", "--producers", optarg, 1, 1000000, &o->producers) < 0)
				return -EINVAL;
			break;
		case O_ROUNDS:
			if (bench_parse_u64("bench_open", "--rounds", optarg, 1, MAX_ROUNDS, &v) < 0)
				return -EINVAL;
			o->rounds = (unsigned)v;
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static void print_open(const char *suffix, const struct open_result *r)
{
	printf("open_seconds%s %.3f s\n", suffix, r->seconds);
	printf("scan_gb_per_s%s %.3f GB/s\n", suffix,
	       (double)r->st.size_bytes / BYTES_PER_GB / r->seconds);
	printf("open_records_per_s%s %.0f records/s\n", suffix,
	       (double)(r->st.log_end_offset - r->st.log_start_offset) / r->seconds);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct open_result warm, cold;
	char root[PATH_CAP], part[PATH_CAP + sizeof(PART_NAME)];
	const char *path;
	bool have_root = false, have_cold = false;
	int rc, status = 1;

	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	tfs_log_set_level(TFS_LOG_WARN);   /* rolls and opens log at info level */
	if (o.reuse) {
		path = o.reuse;
	} else {
		pid_t pid;
		int wstatus;
		double t0;

		if (snprintf(root, sizeof(root), "%s/tfs-bench-XXXXXX", o.dir) >= (int)sizeof(root) ||
		    !mkdtemp(root)) {
			fprintf(stderr, "bench_open: cannot create a directory in %s: %s\n", o.dir,
			        strerror(errno));
			return 1;
		}
		have_root = true;
		if (snprintf(part, sizeof(part), "%s" PART_NAME, root) >= (int)sizeof(part)) {
			fprintf(stderr, "bench_open: path too long: %s\n", root);
			goto out;
		}
		path = part;
		fflush(stdout);
		t0 = bench_now_s();
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "bench_open: fork: %s\n", strerror(errno));
			goto out;
		}
		if (pid == 0)
			_exit(build_log(&o, part) < 0 ? 1 : 0);
		if (waitpid(pid, &wstatus, 0) < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) {
			fprintf(stderr, "bench_open: building the log failed\n");
			goto out;
		}
		printf("# built %" PRIu64 " records over %" PRIu64 " keys, value_bytes=%u, batch=%u, "
		       "compression=%s, producers=%" PRIu64 " in %.1f s (untimed)\n", o.records, o.keys,
		       o.value_bytes, o.batch, o.zstd ? "zstd" : "none", o.producers,
		       bench_now_s() - t0);
	}

	if (o.producers) {
		status = producer_opens(&o, path) < 0;
		goto out;
	}
	rc = timed_open(&o, path, &warm);
	if (rc < 0)
		goto out;
	if (o.drop_caches && bench_drop_caches("bench_open") == 0) {
		rc = timed_open(&o, path, &cold);
		if (rc < 0)
			goto out;
		have_cold = true;
	}
	{
		struct tfs_io *io = NULL;
		const char *kind = tfs_io_create(o.io_kind, &io) == 0 ?
			tfs_io_kind_name(tfs_io_kind_of(io)) : "?";
		printf("# bench_open path=%s io=%s page_cache=%s\n", path, kind,
		       have_cold ? "warm, then dropped (cold)" : "warm (as left by the build)");
		tfs_io_destroy(io);
	}
	print_open("", &warm);
	if (have_cold)
		print_open("_cold", &cold);
	printf("log_bytes %" PRId64 " bytes\n", warm.st.size_bytes);
	printf("segments %d segments\n", warm.st.segments);
	printf("live_keys %zu keys\n", warm.st.live_keys);
	printf("keydir_bytes %" PRId64 " bytes\n", warm.st.keydir_memory_bytes);
	printf("key_bytes %" PRIu64 " bytes\n", warm.key_bytes);
	if (warm.st.live_keys) {
		printf("keydir_bytes_per_key %.1f bytes\n",
		       (double)(warm.st.keydir_memory_bytes - (int64_t)warm.key_bytes) /
		       (double)warm.st.live_keys);
		printf("keydir_bytes_per_key_raw %.1f bytes\n",
		       (double)warm.st.keydir_memory_bytes / (double)warm.st.live_keys);
	}
	printf("peak_rss_mb %.1f MB\n", bench_peak_rss_mb());
	status = 0;
out:
	if (have_root && !o.keep)
		nftw(root, rm_entry, NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	else if (have_root)
		printf("# kept %s\n", root);
	fflush(stdout);
	return status;
}
