/* bench_append.c - append throughput of a partition log (or of a few).
 *
 * What it measures: records (key "user-%07d" over --keys distinct keys, a value of
 * --value-bytes bytes) appended to ONE partition by --writers threads through
 * tfs_plog_append, --batch records per call, followed by one tfs_plog_sync. With
 * --partitions P there are P partitions and writer i appends to partition i mod
 * P (its records, and so its keys, are its own share of --records); the figures
 * are then totals over the partitions, every one synced before the clock stops. The
 * clock starts when every writer is ready and stops when the sync returns, so the
 * figure includes every fsync the engine does (rolls, --durable-every, the last
 * sync). The partition is opened with tfs_plog_open directly (no engine threads);
 * the I/O backend is --io (default: $TFS_IO, else auto).
 *
 * Values (--values): "letters" (default) are random characters from a 64-letter
 * alphabet (6 bits of entropy per byte) taken from a 1 MiB pool at a stride wider
 * than a value, so no two values of one batch share bytes: zstd finds the keys'
 * redundancy and little else, and, matching at every key, searches every byte of
 * every value (its slowest case: ~80 MB/s a core at level 3 here). "json" are
 * JSON objects of account state (bench_make_json_pool: fixed field names, random
 * field values, no value repeated within a batch), the shape a keyed topic holds.
 *
 * --encode-only: each writer builds its batches with the engine's batch builder
 * (record encoding, compression, CRC: what an appender does before it queues) and
 * drops them; nothing is written. With zstd that is the ceiling of one writer:
 * all an append adds to it is the write and the key directory.
 *
 * --producer-batches: each writer is a Kafka producer. Before the clock starts it
 * builds all its batches with the engine's batch builder at the topic's codec and
 * level (encoding, compression, CRC: a producer's work, done on its own machine);
 * then it appends them with tfs_plog_append_batch, which checks each batch,
 * decodes every record (decompressing) to index its key, and writes the batch as
 * it came. The figure is the broker's side of a produce. peak_rss_mb then
 * includes the batches held in memory. With --idempotent each writer is an
 * idempotent producer (producer id = writer + 1, epoch 0, base sequences
 * counting its records), so every batch also meets the partition's producer
 * state, which checks its sequence and records it; without, the batches carry
 * producer id -1 and nothing is checked.
 *
 * Output: "# ..." lines describe the run; every other line is "name value unit",
 * for bench/engine.sh to parse:
 *   records_per_s, mb_per_s (log bytes on disk / s, from tfs_plog_stats
 *   size_bytes), payload_mb_per_s (key + value bytes / s), seconds, log_bytes,
 *   payload_bytes, segments, live_keys, producers (in the partition's producer
 *   state: --idempotent makes one a writer), peak_rss_mb (getrusage ru_maxrss),
 *   cpu_cores (this process's CPU seconds, every thread, over the run's seconds)
 *   and machine_busy_cores (the same for the whole machine from /proc/stat, kernel
 *   writeback included; other jobs too, so read it on an idle machine), of which
 *   machine_steal_cores is a hypervisor's (steal: a CPU the guest had work for,
 *   running something else).
 * MB is 10^6 bytes, as dd prints it.
 *
 * The data lives in a fresh directory DIR/tfs-bench-XXXXXX (DIR: --dir, default
 * /var/tmp), removed at exit unless --keep.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "engine/topic_config.h"
#include "io/file_util.h"
#include "io/io.h"
#include "io/log.h"

#include "bench/bench_batch.h"
#include "bench/bench_util.h"

#define DEFAULT_RECORDS 1000000u
#define DEFAULT_KEYS 1000000u
#define DEFAULT_VALUE_BYTES 100u
#define DEFAULT_BATCH 1000u
#define DEFAULT_DIR "/var/tmp"
#define MAX_WRITERS 64
#define POOL_STRIDE 131u                  /* > value size: neighbours never overlap */
#define FDCACHE_MAX 1024u
#define PATH_CAP 4096
#define PART_NAME "/bench-"         /* partition directories under the fresh root, + i */
#define BYTES_PER_MB 1e6
#define NFTW_FDS 16

struct opts {
	uint64_t records;
	uint64_t keys;
	unsigned value_bytes;
	unsigned writers;
	unsigned partitions;
	unsigned batch;
	bool zstd;
	bool zstd_level_set;
	int zstd_level;                   /* compression.zstd.level, if zstd_level_set */
	bool random_keys;
	bool json_values;
	bool encode_only;
	bool producer_batches;
	bool idempotent;                  /* --idempotent: batches carry producer ids */
	bool keep;
	uint64_t durable_every;           /* records; 0 = only the final sync */
	const char *dir;
	enum tfs_io_kind io_kind;
};

struct writer {
	pthread_t thread;
	unsigned id;
	const struct opts *o;
	struct tfs_plog *pl;
	const uint8_t *pool;
	size_t pool_values;               /* json: values in pool; letters: 0 */
	pthread_barrier_t *start;
	uint64_t first, end;              /* record indexes [first, end) */
	uint64_t payload_bytes;
	uint64_t encoded_bytes;           /* --encode-only: bytes of the batches built */
	uint64_t encoded_records;         /* --idempotent: the next base sequence */
	int16_t attributes;               /* --encode-only: the codec bits */
	int zstd_level;                   /* --encode-only: the topic's level */
	uint8_t *batches;                 /* --producer-batches: built before the clock */
	size_t batches_cap;
	size_t *batch_end;                /* end of batch i in batches */
	size_t nbatches;
	int rc;
};

static uint64_t key_of(const struct opts *o, uint64_t i)
{
	return (o->random_keys ? bench_mix64(i) : i) % o->keys;
}

static const uint8_t *value_of(const struct writer *w, uint64_t i)
{
	if (w->pool_values)
		return w->pool + (i % w->pool_values) * w->o->value_bytes;
	return w->pool + (i * POOL_STRIDE) % BENCH_POOL_BYTES;
}

/* --encode-only: builds recs[0, n) as the appender would, then drops the batch.
 * --producer-batches: keeps it, to append later. */
static int encode_batch(struct writer *w, struct tfs_batch_builder *b,
                        const struct tfs_append_rec *recs, size_t n)
{
	struct tfs_batch_params params = {
		.attributes = w->attributes, .leader_epoch = -1, .producer_id = -1,
		.producer_epoch = -1, .base_sequence = -1, .zstd_level = w->zstd_level,
	};

	if (w->o->idempotent) {
		/* writer id + 1 as its producer id; sequences count its records */
		params.producer_id = (int64_t)w->id + 1;
		params.producer_epoch = 0;
		params.base_sequence = (int32_t)(w->encoded_records % ((uint64_t)INT32_MAX + 1));
		w->encoded_records += n;
	}
	const uint8_t *out;
	size_t len;
	int rc = bench_build_batch(b, &params, recs, n, &out, &len);

	if (rc < 0)
		return rc;
	w->encoded_bytes += len;
	if (!w->o->producer_batches)
		return 0;
	if (w->encoded_bytes > w->batches_cap) {
		size_t ncap = w->batches_cap ? w->batches_cap : 1 << 20;
		uint8_t *p;
		while (ncap < w->encoded_bytes)
			ncap *= 2;
		if (!(p = realloc(w->batches, ncap)))
			return -ENOMEM;
		w->batches = p;
		w->batches_cap = ncap;
	}
	memcpy(w->batches + w->encoded_bytes - len, out, len);
	w->batch_end[w->nbatches++] = w->encoded_bytes;
	return 0;
}

/* What each_unit does with a unit of n records. */
typedef int (*unit_fn)(struct writer *w, struct tfs_batch_builder *b, struct tfs_append_rec *recs,
                       size_t n, bool durable);

/* The writer's records [first, end) in units of o->batch records, each handed to
 * unit: appended, or built as a batch (--encode-only, --producer-batches). */
static int each_unit(struct writer *w, struct tfs_append_rec *recs, uint8_t *keys,
                     struct tfs_batch_builder *b, unit_fn unit)
{
	const struct opts *o = w->o;
	uint64_t since_durable = 0;

	for (uint64_t i = w->first; i < w->end;) {
		size_t n = 0;
		bool durable = false;

		for (; n < o->batch && i < w->end; n++, i++) {
			uint8_t *kp = keys + n * BENCH_KEY_BYTES;
			bench_format_key(kp, key_of(o, i));
			recs[n].key = tfs_slice_make(kp, BENCH_KEY_BYTES);
			recs[n].value = tfs_slice_make(value_of(w, i), o->value_bytes);
			w->payload_bytes += BENCH_KEY_BYTES + o->value_bytes;
		}
		since_durable += n;
		if (o->durable_every && since_durable >= o->durable_every) {
			durable = true;
			since_durable = 0;
		}
		w->rc = unit(w, b, recs, n, durable);
		if (w->rc < 0)
			return w->rc;
	}
	return 0;
}

static int build_unit(struct writer *w, struct tfs_batch_builder *b, struct tfs_append_rec *recs,
                      size_t n, bool durable)
{
	(void)durable;
	return encode_batch(w, b, recs, n);
}

static int append_unit(struct writer *w, struct tfs_batch_builder *b, struct tfs_append_rec *recs,
                       size_t n, bool durable)
{
	(void)b;
	return tfs_plog_append(w->pl, recs, n, durable, NULL, NULL);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	const struct opts *o = w->o;
	struct tfs_append_rec *recs = calloc(o->batch, sizeof(*recs));
	uint8_t *keys = malloc((size_t)o->batch * BENCH_KEY_BYTES);
	struct tfs_batch_builder builder;
	const char *what = "append";

	tfs_batch_builder_init(&builder);
	if (o->producer_batches) {
		/* the producer's work, before the clock starts */
		w->batch_end = malloc(sizeof(*w->batch_end) * ((w->end - w->first) / o->batch + 1));
		if (!recs || !keys || !w->batch_end)
			w->rc = -ENOMEM;
		else
			each_unit(w, recs, keys, &builder, build_unit);
		what = "building a producer batch";
	}
	pthread_barrier_wait(w->start);
	if (w->rc < 0)
		goto out;
	if (!recs || !keys) {
		w->rc = -ENOMEM;
	} else if (o->producer_batches) {
		uint64_t since_durable = 0, per_batch = o->batch;
		what = "append_batch";
		for (size_t i = 0; i < w->nbatches && w->rc == 0; i++) {
			size_t at = i ? w->batch_end[i - 1] : 0;
			bool durable = false;
			since_durable += per_batch;
			if (o->durable_every && since_durable >= o->durable_every) {
				durable = true;
				since_durable = 0;
			}
			w->rc = tfs_plog_append_batch(w->pl, w->batches + at, w->batch_end[i] - at,
			                              durable, NULL, NULL, NULL, NULL);
		}
	} else if (o->encode_only) {
		what = "encoding";
		each_unit(w, recs, keys, &builder, build_unit);
	} else {
		each_unit(w, recs, keys, &builder, append_unit);
	}
out:
	if (w->rc < 0)
		fprintf(stderr, "bench_append: writer %u: %s failed: %s\n", w->id, what,
		        tfs_strerror(w->rc));
	tfs_batch_builder_release(&builder);
	free(recs);
	free(keys);
	return NULL;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

/* Options of this driver have no upper bound of their own beyond their checks. */
static int parse_u64(const char *name, const char *s, uint64_t min, uint64_t *out)
{
	return bench_parse_u64("bench_append", name, s, min, UINT64_MAX, out);
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: bench_append [options]\n"
	        "  --records N        records to append (default %u)\n"
	        "  --keys K           distinct keys \"user-%%07d\" (default %u)\n"
	        "  --random-keys      key of record i is random over K (default: i %% K)\n"
	        "  --value-bytes V    value size (default %u, at most %u)\n"
	        "  --values KIND      letters (random, default) or json (account state)\n"
	        "  --writers W        threads appending to the same partition (default 1)\n"
	        "  --partitions P     P partitions, writer i appending to partition i mod P\n"
	        "                     (default 1; at most W)\n"
	        "  --batch B          records per tfs_plog_append call (default %u)\n"
	        "  --zstd             compression.type zstd\n"
	        "  --zstd-level N     compression.zstd.level N (implies --zstd; default: the\n"
	        "                     topic default, 3)\n"
	        "  --durable-every N  a durable append after each N records of a writer\n"
	        "  --encode-only      build each batch (encode, compress, CRC) and drop it:\n"
	        "                     what one writer can do before anything is written\n"
	        "  --producer-batches build every batch first, as a producer does, then append\n"

	        "                     them as they are (tfs_plog_append_batch)\n"
	        "  --idempotent       with --producer-batches: each writer an idempotent producer\n"
	        "                     (producer id, epoch 0, sequences), checked by producer state\n"
	        "  --dir DIR          parent of the fresh data directory (default %s)\n"
	        "  --io KIND          auto, uring or sync (default $TFS_IO, else auto)\n"
	        "  --keep             keep the data directory\n",
	        DEFAULT_RECORDS, DEFAULT_KEYS, DEFAULT_VALUE_BYTES, BENCH_MAX_VALUE_BYTES,
	        DEFAULT_BATCH, DEFAULT_DIR);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_RECORDS = 256, O_KEYS, O_RANDOM, O_VALUE, O_VALUES, O_WRITERS, O_BATCH, O_ZSTD,
	       O_ZSTD_LEVEL, O_DURABLE, O_ENCODE_ONLY, O_PRODUCER, O_IDEMPOTENT, O_DIR, O_IO, O_KEEP, O_HELP,
	       O_PARTITIONS };
	static const struct option longopts[] = {
		{ "records", required_argument, NULL, O_RECORDS },
		{ "keys", required_argument, NULL, O_KEYS },
		{ "random-keys", no_argument, NULL, O_RANDOM },
		{ "value-bytes", required_argument, NULL, O_VALUE },
		{ "values", required_argument, NULL, O_VALUES },
		{ "writers", required_argument, NULL, O_WRITERS },
		{ "partitions", required_argument, NULL, O_PARTITIONS },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "zstd", no_argument, NULL, O_ZSTD },
		{ "zstd-level", required_argument, NULL, O_ZSTD_LEVEL },
		{ "durable-every", required_argument, NULL, O_DURABLE },
		{ "dir", required_argument, NULL, O_DIR },
		{ "io", required_argument, NULL, O_IO },
		{ "keep", no_argument, NULL, O_KEEP },
		{ "encode-only", no_argument, NULL, O_ENCODE_ONLY },
		{ "producer-batches", no_argument, NULL, O_PRODUCER },
		{ "idempotent", no_argument, NULL, O_IDEMPOTENT },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	*o = (struct opts){ .records = DEFAULT_RECORDS, .keys = DEFAULT_KEYS,
	                    .value_bytes = DEFAULT_VALUE_BYTES, .writers = 1, .partitions = 1,
	                    .batch = DEFAULT_BATCH, .dir = DEFAULT_DIR,
	                    .io_kind = tfs_io_kind_from_env() };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_RECORDS:
			if (parse_u64("--records", optarg, 1, &o->records) < 0)
				return -EINVAL;
			break;
		case O_KEYS:
			if (parse_u64("--keys", optarg, 1, &o->keys) < 0)
				return -EINVAL;
			if (o->keys > 10000000ull) {    /* BENCH_KEY_DIGITS */
				fprintf(stderr, "bench_append: --keys is at most 10000000\n");
				return -EINVAL;
			}
			break;
		case O_RANDOM:
			o->random_keys = true;
			break;
		case O_VALUE:
			if (parse_u64("--value-bytes", optarg, 0, &v) < 0 || v > BENCH_MAX_VALUE_BYTES)
				return -EINVAL;
			o->value_bytes = (unsigned)v;
			break;
		case O_VALUES:
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "letters") != 0) {
				fprintf(stderr, "bench_append: --values is letters or json, not %s\n",
				        optarg);
				return -EINVAL;
			}
			o->json_values = strcmp(optarg, "json") == 0;
			break;
		case O_WRITERS:
			if (parse_u64("--writers", optarg, 1, &v) < 0 || v > MAX_WRITERS)
				return -EINVAL;
			o->writers = (unsigned)v;
			break;
		case O_BATCH:
			if (parse_u64("--batch", optarg, 1, &v) < 0 || v > UINT_MAX / BENCH_KEY_BYTES)
				return -EINVAL;
			o->batch = (unsigned)v;
			break;
		case O_ZSTD:
			o->zstd = true;
			break;
		case O_ZSTD_LEVEL: {
			/* checked as the topic config checks it, when it is set */
			char *end;
			long level;
			errno = 0;
			level = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || level < INT_MIN || level > INT_MAX) {
				fprintf(stderr, "bench_append: bad --zstd-level: %s\n", optarg);
				return -EINVAL;
			}
			o->zstd = true;
			o->zstd_level_set = true;
			o->zstd_level = (int)level;
			break;
		}
		case O_DURABLE:
			if (parse_u64("--durable-every", optarg, 1, &o->durable_every) < 0)
				return -EINVAL;
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_IO:
			if (tfs_io_kind_parse(optarg, &o->io_kind) < 0) {
				fprintf(stderr, "bench_append: bad --io: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case O_PARTITIONS:
			if (parse_u64("--partitions", optarg, 1, &v) < 0 || v > MAX_WRITERS)
				return -EINVAL;
			o->partitions = (unsigned)v;
			break;
		case O_KEEP:
			o->keep = true;
			break;
		case O_ENCODE_ONLY:
			o->encode_only = true;
			break;
		case O_IDEMPOTENT:
			o->idempotent = true;
			break;
		case O_PRODUCER:
			o->producer_batches = true;
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
	if (o->partitions > o->writers) {
		fprintf(stderr, "bench_append: --partitions %u is more than --writers %u\n",
		        o->partitions, o->writers);
		return -EINVAL;
	}
	if (o->idempotent && !o->producer_batches) {
		fprintf(stderr, "bench_append: --idempotent needs --producer-batches\n");
		return -EINVAL;
	}
	if (o->encode_only && o->producer_batches) {
		fprintf(stderr, "bench_append: --encode-only and --producer-batches exclude each other\n");
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct tfs_io *io = NULL;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_topic_config cfg;
	struct tfs_plog *pls[MAX_WRITERS] = { NULL };
	struct tfs_plog_stats st = { 0 };
	struct writer w[MAX_WRITERS];
	pthread_barrier_t start;
	uint8_t *pool = NULL;
	size_t pool_values = 0;
	char root[PATH_CAP], part[PATH_CAP + sizeof(PART_NAME) + 16];
	size_t producers = 0;
	uint64_t payload = 0, encoded = 0;
	double t0, t_joined, secs;
	struct bench_cpu cpu0, cpu1;
	int rc, status = 1;
	bool have_root = false, barrier = false;
	unsigned started = 0;

	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	tfs_log_set_level(TFS_LOG_WARN);   /* rolls log at info level */
	if (snprintf(root, sizeof(root), "%s/tfs-bench-XXXXXX", o.dir) >= (int)sizeof(root) ||
	    !mkdtemp(root)) {
		fprintf(stderr, "bench_append: cannot create a directory in %s: %s\n", o.dir,
		        strerror(errno));
		return 1;
	}
	have_root = true;
	pool = o.json_values ? bench_make_json_pool(o.value_bytes, &pool_values) : bench_make_pool();
	if (!pool) {
		fprintf(stderr, "bench_append: out of memory\n");
		goto out;
	}
	rc = tfs_io_create(o.io_kind, &io);
	if (rc < 0) {
		fprintf(stderr, "bench_append: cannot create io (%s): %s\n", tfs_io_kind_name(o.io_kind),
		        tfs_strerror(rc));
		goto out;
	}
	fdc = tfs_fdcache_create(io, FDCACHE_MAX);
	if (!fdc) {
		fprintf(stderr, "bench_append: out of memory\n");
		goto out;
	}
	tfs_topic_config_defaults(&cfg);
	if (o.zstd)
		cfg.compression = TFS_CODEC_ZSTD;
	if (o.zstd_level_set) {
		char level[32];
		snprintf(level, sizeof(level), "%d", o.zstd_level);
		if (tfs_topic_config_set(&cfg, "compression.zstd.level", level) < 0) {
			fprintf(stderr, "bench_append: --zstd-level %s is out of zstd's range\n", level);
			goto out;
		}
	}
	for (unsigned p = 0; p < o.partitions; p++) {
		struct tfs_plog_env env = { io, fdc, &cfg, false };
		snprintf(part, sizeof(part), "%s" PART_NAME "%u", root, p);
		rc = tfs_plog_open(&env, part, true, &pls[p]);
		if (rc < 0) {
			fprintf(stderr, "bench_append: cannot open %s: %s\n", part, tfs_strerror(rc));
			goto out;
		}
	}
	printf("# bench_append records=%" PRIu64 " keys=%" PRIu64 " key_order=%s value_bytes=%u "
	       "values=%s writers=%u partitions=%u batch=%u compression=%s zstd_level=%d durable_every=%" PRIu64
	       " io=%s dir=%s%s\n",
	       o.records, o.keys, o.random_keys ? "random" : "round-robin", o.value_bytes,
	       o.json_values ? "json" : "letters", o.writers, o.partitions, o.batch, o.zstd ? "zstd" : "none",
	       cfg.zstd_level, o.durable_every, tfs_io_kind_name(tfs_io_kind_of(io)), root,
	       o.encode_only ? " encode-only (nothing written)"
	                     : o.producer_batches ? " producer-batches (built before the clock)" : "");

	pthread_barrier_init(&start, NULL, o.writers + 1);
	barrier = true;
	for (unsigned i = 0; i < o.writers; i++) {
		w[i] = (struct writer){ .id = i, .o = &o, .pl = pls[i % o.partitions], .pool = pool,
		                        .pool_values = pool_values, .start = &start,
		                        .attributes = (int16_t)(cfg.compression & TFS_ATTR_CODEC_MASK),
		                        .zstd_level = cfg.zstd_level,
		                        .first = o.records * i / o.writers,
		                        .end = o.records * (i + 1) / o.writers };
		rc = pthread_create(&w[i].thread, NULL, writer_main, &w[i]);
		if (rc != 0) {
			fprintf(stderr, "bench_append: cannot start a writer: %s\n", strerror(rc));
			/* the started ones wait at the barrier forever: exit without joining */
			exit(1);
		}
		started++;
	}
	pthread_barrier_wait(&start);
	bench_cpu_now(&cpu0);
	t0 = bench_now_s();
	for (unsigned i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	t_joined = bench_now_s();
	rc = 0;
	for (unsigned p = 0; p < o.partitions && rc == 0; p++)
		rc = tfs_plog_sync(pls[p]);
	secs = bench_now_s() - t0;
	bench_cpu_now(&cpu1);
	for (unsigned i = 0; i < started; i++) {
		free(w[i].batches);
		free(w[i].batch_end);
	}
	for (unsigned i = 0; i < started; i++) {
		if (w[i].rc < 0)
			goto out;
		payload += w[i].payload_bytes;
		encoded += w[i].encoded_bytes;
	}
	if (rc < 0) {
		fprintf(stderr, "bench_append: sync failed: %s\n", tfs_strerror(rc));
		goto out;
	}
	for (unsigned p = 0; p < o.partitions; p++) {
		struct tfs_plog_stats one;
		tfs_plog_stats(pls[p], &one);
		st.size_bytes += one.size_bytes;
		st.segments += one.segments;
		st.live_keys += one.live_keys;
		producers += tfs_plog_producers(pls[p], NULL, 0);
	}
	if (o.encode_only)
		st.size_bytes = (int64_t)encoded;    /* the log these batches would make */
	printf("seconds %.3f s\n", secs);
	printf("final_sync_seconds %.3f s\n", secs - (t_joined - t0));
	printf("records %" PRIu64 " records\n", o.records);
	printf("records_per_s %.0f records/s\n", (double)o.records / secs);
	printf("mb_per_s %.1f MB/s\n", (double)st.size_bytes / BYTES_PER_MB / secs);
	printf("payload_mb_per_s %.1f MB/s\n", (double)payload / BYTES_PER_MB / secs);
	printf("log_bytes %" PRId64 " bytes\n", st.size_bytes);
	printf("payload_bytes %" PRIu64 " bytes\n", payload);
	printf("segments %d segments\n", st.segments);
	printf("live_keys %zu keys\n", st.live_keys);
	printf("producers %zu producers\n", producers);
	printf("peak_rss_mb %.1f MB\n", bench_peak_rss_mb());
	printf("cpu_cores %.2f cores\n", (cpu1.process_s - cpu0.process_s) / secs);
	if (cpu0.machine_busy_s >= 0 && cpu1.machine_busy_s >= 0) {
		printf("machine_busy_cores %.2f cores\n",
		       (cpu1.machine_busy_s - cpu0.machine_busy_s) / secs);
		printf("machine_steal_cores %.2f cores\n",
		       (cpu1.machine_steal_s - cpu0.machine_steal_s) / secs);
	}
	status = 0;
out:
	if (barrier)
		pthread_barrier_destroy(&start);
	for (unsigned p = 0; p < o.partitions; p++)
		tfs_plog_close(pls[p]);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	free(pool);
	if (have_root && !o.keep)
		nftw(root, rm_entry, NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	else if (have_root)
		printf("# kept %s\n", root);
	fflush(stdout);
	return status;
}
