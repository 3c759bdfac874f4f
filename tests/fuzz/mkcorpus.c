/* mkcorpus.c - writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/),
 * in each harness's input layout (see the header comment of fuzz_NAME.c).
 *
 * Segment seeds are real logs: this program writes them through the engine
 * (keyed, keyless and tombstone records, headers, rolls at chosen offsets, an
 * uncompressed and a zstd topic) and copies the files out. Text seeds are short
 * inputs of the kinds each parser is meant to see. The output is deterministic
 * apart from timestamps (records carry the time they were written).
 *
 * Usage: fuzz_mkcorpus OUT_DIR     (normally tests/fuzz/corpus; run by hand when
 * a harness's input layout changes, then commit the result). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "io/log.h"
#include "tests/fuzz/fz.h"

/* Base offsets a fuzz_segment input can give a segment (fuzz_segment.c). */
static const tfs_offset_t seg_bases[8] = { 0, 3, 10, 20, 50, 100, 1000, 100000 };

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
	fz_reserve((void **)&b->p, &b->cap, b->len + n, 1);
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void put_u8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put_u16(struct buf *b, uint16_t v)
{
	uint8_t le[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	put(b, le, 2);
}

static void put_u24(struct buf *b, uint32_t v)
{
	uint8_t le[3] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16) };

	put(b, le, 3);
}

static void put_str(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void die(const char *what, const char *obj)
{
	fprintf(stderr, "mkcorpus: %s %s: %s\n", what, obj, strerror(errno));
	exit(1);
}

static void write_seed(const char *out, const char *harness, const char *name, const struct buf *b)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out, harness);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("cannot create", path);
	snprintf(path, sizeof(path), "%s/%s/%s", out, harness, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b->p, 1, b->len, f) != b->len || fclose(f) != 0)
		die("cannot write", path);
}

static void seed_text(const char *out, const char *harness, const char *name, const void *p,
                      size_t len)
{
	struct buf b = { 0 };

	put(&b, p, len);
	write_seed(out, harness, name, &b);
	free(b.p);
}

/* ---- logs written through the engine -------------------------------------------- */

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "mkcorpus: %s: %s\n", what, tfs_strerror(rc));
		exit(1);
	}
}

/* Appends records up to offset `to` (one unit per call of 1..3 records): keys
 * k<i % 7> (every fifth keyless, every ninth a tombstone), one header on every
 * fourth. */
static void fill(struct tfs_plog *pl, tfs_offset_t from, tfs_offset_t to)
{
	static const struct tfs_header hdr = { { (const uint8_t *)"h", 1 },
	                                       { (const uint8_t *)"hv", 2 }, false };

	for (tfs_offset_t o = from; o < to;) {
		struct tfs_append_rec recs[3];
		char keys[3][16], vals[3][48];
		size_t n = (size_t)(o % 3) + 1;
		if ((tfs_offset_t)n > to - o)
			n = (size_t)(to - o);
		memset(recs, 0, sizeof(recs));
		for (size_t i = 0; i < n; i++) {
			tfs_offset_t off = o + (tfs_offset_t)i;
			snprintf(keys[i], sizeof(keys[i]), "k%d", (int)(off % 7));
			snprintf(vals[i], sizeof(vals[i]), "value of offset %lld", (long long)off);
			recs[i].key = tfs_slice_make(keys[i], strlen(keys[i]));
			recs[i].key_null = off % 5 == 4;
			recs[i].value = tfs_slice_make(vals[i], strlen(vals[i]));
			recs[i].value_null = !recs[i].key_null && off % 9 == 8;
			if (off % 4 == 1) {
				recs[i].headers = &hdr;
				recs[i].header_count = 1;
			}
		}
		check(tfs_plog_append(pl, recs, n, false, NULL, NULL), "append");
		o += (tfs_offset_t)n;
	}
}

/* A data directory with topic `name` whose partition 0 has segments at
 * seg_bases[0..nseg) and an active one after them. */
static char *make_log(const char *name, bool zstd, int nseg, tfs_offset_t tail)
{
	char tmpl[] = "/tmp/tfs-mkcorpus-XXXXXX";
	char *dir = mkdtemp(tmpl) ? strdup(tmpl) : NULL;
	struct tfs_engine_config cfg;
	struct tfs_engine *e = NULL;
	struct tfs_topic *t;
	struct tfs_plog *pl;

	if (!dir)
		die("cannot create", tmpl);
	tfs_engine_config_defaults(&cfg);
	cfg.data_dir = dir;
	cfg.io_kind = TFS_IO_SYNC;
	cfg.cleaner.threads = 0;
	check(tfs_engine_open(&cfg, &e), "engine open");
	check(tfs_engine_topic_create(e, name, 1, 0, 0, 0755), "topic create");
	t = tfs_engine_topic_get(e, name);
	if (zstd)
		check(tfs_topic_set_config(t, "compression.type", "zstd"), "zstd");
	pl = tfs_topic_partition(t, 0);
	for (int i = 1; i <= nseg; i++) {
		fill(pl, seg_bases[i - 1], i < 8 ? seg_bases[i] : seg_bases[7] + 5);
		check(tfs_plog_roll(pl), "roll");
	}
	fill(pl, seg_bases[nseg], seg_bases[nseg] + tail);
	tfs_topic_unref(t);
	tfs_engine_close(e);
	return dir;
}

static void rm_log(const char *dir, const char *name)
{
	char cmd[4200];

	(void)name;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "mkcorpus: cannot remove %s\n", dir);
}

static const char *const exts[3] = { "log", "index", "timeindex" };

/* fuzz_segment's layout: chunks of [selector][u24 length][bytes], selector =
 * kind (bits 0-1: log, index, timeindex, topic config) | segment number << 2,
 * and for a .log, log_flags (32: its CRCs are fixed up before it is written). */
static void segment_seed(const char *out, const char *seed, const char *dir, const char *topic,
                         int nfiles, unsigned kinds, uint8_t log_flags)
{
	struct buf b = { 0 };

	for (int s = 0; s < nfiles; s++) {
		for (int k = 0; k < 3; k++) {
			char path[4096];
			uint8_t *data;
			long len;
			if (!(kinds & (1u << k)))
				continue;
			snprintf(path, sizeof(path), "%s/%s-0/%020lld.%s", dir, topic,
			         (long long)seg_bases[s], exts[k]);
			len = fz_read_file(path, &data);
			if (len < 0)
				continue;
			put_u8(&b, (uint8_t)(k | s << 2 | (k == 0 ? log_flags : 0)));
			put_u24(&b, (uint32_t)len);
			put(&b, data, (size_t)len);
			free(data);
		}
	}
	if (kinds & 8) {
		char path[4096];
		uint8_t *data;
		long len;
		snprintf(path, sizeof(path), "%s/topics/%s", dir, topic);
		len = fz_read_file(path, &data);
		if (len >= 0) {
			put_u8(&b, 3);
			put_u24(&b, (uint32_t)len);
			put(&b, data, (size_t)len);
			free(data);
		}
	}
	write_seed(out, "segment", seed, &b);
	free(b.p);
}

/* fuzz_batches's layout: [flags][mmb][S][S sizes][the .log files' bytes]. */
static void batches_seed(const char *out, const char *seed, const char *dir, const char *topic,
                         int nfiles, uint8_t flags, const uint16_t *sizes, int nsizes)
{
	struct buf b = { 0 };

	put_u8(&b, flags);
	put_u8(&b, 0);
	put_u8(&b, (uint8_t)nsizes);
	for (int i = 0; i < nsizes; i++)
		put_u16(&b, sizes[i]);
	for (int s = 0; s < nfiles; s++) {
		char path[4096];
		uint8_t *data;
		long len;
		snprintf(path, sizeof(path), "%s/%s-0/%020lld.log", dir, topic, (long long)seg_bases[s]);
		len = fz_read_file(path, &data);
		if (len < 0)
			continue;
		put(&b, data, (size_t)len);
		free(data);
	}
	write_seed(out, "batches", seed, &b);
	free(b.p);
}

static void log_seeds(const char *out)
{
	static const uint16_t split_small[] = { 1, 17, 61, 100 };
	static const uint16_t split_whole[] = { 0 };
	char *plain = make_log("s", false, 3, 4);   /* segments 0, 3, 10; active 20.. */
	char *zstd = make_log("s", true, 2, 6);     /* segments 0, 3; active 10.. */
	char *one = make_log("s", false, 0, 9);     /* only the active segment */

	segment_seed(out, "plain-all-files", plain, "s", 4, 1 | 2 | 4 | 8, 0);
	segment_seed(out, "plain-logs-only", plain, "s", 4, 1, 0);
	segment_seed(out, "plain-logs-crc-fixed", plain, "s", 4, 1, 32);
	segment_seed(out, "zstd-all-files", zstd, "s", 3, 1 | 2 | 4 | 8, 0);
	segment_seed(out, "zstd-logs-crc-fixed", zstd, "s", 3, 1, 32);
	segment_seed(out, "active-only", one, "s", 1, 1 | 2 | 4, 0);
	batches_seed(out, "plain-one-write", plain, "s", 4, 0, split_whole, 1);
	batches_seed(out, "plain-small-writes", plain, "s", 4, 0, split_small, 4);
	batches_seed(out, "zstd-into-plain-topic", zstd, "s", 3, 0, split_whole, 1);
	batches_seed(out, "plain-into-zstd-topic", plain, "s", 2, 1, split_small, 4);
	batches_seed(out, "log-append-time", one, "s", 1, 4, split_whole, 1);
	batches_seed(out, "plain-crc-fixed", plain, "s", 4, 8, split_small, 4);
	batches_seed(out, "zstd-crc-fixed", zstd, "s", 3, 8 | 1, split_whole, 1);
	rm_log(plain, "s");
	rm_log(zstd, "s");
	rm_log(one, "s");
	free(plain);
	free(zstd);
	free(one);
}

/* ---- text seeds ------------------------------------------------------------------ */

/* fuzz_bulk's layout: [flags][mmb][S | exponent << 4][S sizes][body]. */
static void bulk_seed(const char *out, const char *name, uint8_t flags, uint8_t mmb,
                      uint8_t exponent, const uint16_t *sizes, int nsizes, const char *body)
{
	struct buf b = { 0 };

	put_u8(&b, flags);
	put_u8(&b, mmb);
	put_u8(&b, (uint8_t)(nsizes | exponent << 4));
	for (int i = 0; i < nsizes; i++)
		put_u16(&b, sizes[i]);
	put_str(&b, body);
	write_seed(out, "bulk", name, &b);
	free(b.p);
}

static void bulk_seeds(const char *out)
{
	/* Splits fall on line ends or leave a partial line that the next, smaller
	 * write completes; a partial line followed by a larger write (the buffer growth
	 * that freed what records pointed into) is regress/bulk/put-partial-then-larger-write. */
	static const uint16_t lines6[] = { 6 }, two_units[] = { 64 };

	bulk_seed(out, "put-one-write", 1, 0, 0, NULL, 0,
	          "k1\tv1\nk2\tv2\n%2Edot\tvalue with\ttab\n%25\tpercent\n%\tempty key\n");
	bulk_seed(out, "append-lines", 0, 0, 0, NULL, 0,
	          "line one\nline two\n\nlast without newline");
	bulk_seed(out, "put-line-splits", 1, 0, 0, lines6, 1, "k1\tv1\nk2\tv2\nk3\tv3\nk4\tv4\n");
	bulk_seed(out, "put-bad-name", 1, 0, 0, NULL, 0, "ok\tv\nnotab\n%2e\tlower-case escape\n");
	bulk_seed(out, "put-small-mmb", 3, 2, 0, NULL, 0,
	          "k\txxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nk2\tyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
	          "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\n");
	bulk_seed(out, "append-small-mmb-units", 2, 4, 0, NULL, 0,
	          "aaaaaaaaaaaaaaaaaaaaaaaa\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\ncccccccccccccccccccc\n"
	          "dddddddddddddddddddddddddddddddddddd\neeeeeeeeeeeeeeeeeeeeeeee\n");
	bulk_seed(out, "append-amplified-1MiB", 4, 0, 14, two_units, 1,
	          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n");
	bulk_seed(out, "put-amplified-close-no-flush", 4 | 8 | 1, 0, 8, NULL, 0,
	          "key\tvalue value value value value value value value value value\n");
}

/* fuzz_xattr's layout: [op][name NUL][value]. */
static void xattr_seed(const char *out, const char *seed, uint8_t op, const char *name,
                       const char *value)
{
	struct buf b = { 0 };

	put_u8(&b, op);
	put_str(&b, name);
	put_u8(&b, 0);
	put_str(&b, value);
	write_seed(out, "xattr", seed, &b);
	free(b.p);
}

static void xattr_seeds(const char *out)
{
	xattr_seed(out, "segment-bytes", 0, "segment.bytes", "1024\n");
	xattr_seed(out, "policy-both", 0, "cleanup.policy", "compact,delete");
	xattr_seed(out, "dirty-ratio", 0, "min.cleanable.dirty.ratio", "0.01");
	xattr_seed(out, "zstd-level", 0, "compression.zstd.level", "-5");
	xattr_seed(out, "compression", 0, "compression.type", "zstd");
	xattr_seed(out, "timestamp-type", 0, "message.timestamp.type", "LogAppendTime");
	xattr_seed(out, "retention-unlimited", 0, "retention.ms", "-1");
	xattr_seed(out, "bad-number", 0, "segment.ms", "12abc");
	xattr_seed(out, "create-flag", 4, "max.message.bytes", "1000");
	xattr_seed(out, "roll", 1, "roll", "1");
	xattr_seed(out, "clean", 1, "clean", "");
	xattr_seed(out, "remove", 2, "segment.bytes", "");
	xattr_seed(out, "get-ratio", 3, "min.cleanable.dirty.ratio", "");
}

static void topic_config_seeds(const char *out)
{
	static const char rendered[] =
		"# topicfs topic config (Kafka names); rewritten atomically\n"
		"cleanup.policy=compact\nsegment.bytes=104857600\nsegment.ms=604800000\n"
		"min.cleanable.dirty.ratio=0.5\ndelete.retention.ms=86400000\n"
		"min.compaction.lag.ms=0\nmax.compaction.lag.ms=9223372036854775807\n"
		"retention.ms=604800000\nretention.bytes=-1\nmax.message.bytes=1048588\n"
		"compression.type=none\ncompression.zstd.level=3\n"
		"message.timestamp.type=CreateTime\nsegment.index.bytes=10485760\n"
		"index.interval.bytes=4096\nflush.ms=1000\n"
		"topicfs.uid=0\ntopicfs.gid=0\ntopicfs.mode=0755\ntopicfs.partitions=1\n";
	static const char partial[] = "  segment.bytes = 2048  \n\n! a comment\n"
	                              "cleanup.policy=compact,delete\ntopicfs.mode=0700\r\n";
	static const char bad[] = "segment.bytes=1\nnot a line\n";

	seed_text(out, "topic_config", "rendered-defaults", rendered, sizeof(rendered) - 1);
	seed_text(out, "topic_config", "partial-with-spaces", partial, sizeof(partial) - 1);
	seed_text(out, "topic_config", "refused", bad, sizeof(bad) - 1);
}

static void opts_seeds(const char *out)
{
	/* fuzz_opts's layout: the arguments after the program name, NUL-separated. */
	static const char basic[] = "-o\0partitions=3,segment.bytes=4096,ro\0/data\0/mnt";
	static const char policy[] = "-o\0cleanup.policy=compact,delete,io=sync\0/d\0/m";
	static const char cleaner[] = "-o\0log.cleaner.threads=2,log.cleaner.io.max.bytes.per.second"
	                              "=1e6,max_read=65536,cache_timeout=0.5,reader_cache\0/d\0/m";
	static const char fault[] = "-o\0fault=write:3:EIO,max_open_files=64\0-f\0/d\0/m";
	static const char bad[] = "-o\0partitions=0\0/d\0/m";

	seed_text(out, "opts", "basic", basic, sizeof(basic) - 1);
	seed_text(out, "opts", "policy-split-by-comma", policy, sizeof(policy) - 1);
	seed_text(out, "opts", "cleaner-and-fuse", cleaner, sizeof(cleaner) - 1);
	seed_text(out, "opts", "fault", fault, sizeof(fault) - 1);
	seed_text(out, "opts", "refused", bad, sizeof(bad) - 1);
}

static void keyname_seeds(const char *out)
{
	static const char *const names[] = { "plain", "%", "%2Ehidden", "a%2Fb%09c%25", "%7F%00",
	                                     "caf\xc3\xa9", "%2e-lower", "trailing%" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char seed[16];
		snprintf(seed, sizeof(seed), "name-%zu", i);
		seed_text(out, "keyname", seed, names[i], strlen(names[i]));
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
		return 2;
	}
	if (mkdir(argv[1], 0755) < 0 && errno != EEXIST)
		die("cannot create", argv[1]);
	tfs_log_set_level(TFS_LOG_WARN);
	log_seeds(argv[1]);
	bulk_seeds(argv[1]);
	xattr_seeds(argv[1]);
	topic_config_seeds(argv[1]);
	opts_seeds(argv[1]);
	keyname_seeds(argv[1]);
	return 0;
}
