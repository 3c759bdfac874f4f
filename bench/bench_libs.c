/* bench_libs.c - what topicfs computes itself against well-kept libraries that do the
 * same job, on the same bytes in the same run:
 *
 *   CRC-32C   ISA-L's crc32_iscsi, which tfs_crc32c calls  vs  the SSE4.2 crc32
 *             instruction in one plain loop (the CPU's own rate, for scale). Before
 *             the switch this row compared topicfs's hand-written three-lane SSE4.2
 *             code with ISA-L: 1.00-1.19x (4 KiB .. 1 MiB), so that code went.
 *   gzip      zlib (deflate at Kafka's default level, inflate)  vs  ISA-L's igzip
 *             (isal_deflate at each of its levels, isal_inflate), which topicfs uses
 *
 * Buffers: the records region of a batch of JSON account states (bench_util.h's
 * pool), at 4 KiB (a small batch), 64 KiB and 1 MiB (a large one). Each row prints
 * throughput in MB/s and the ratio against topicfs's current choice; gzip rows also
 * print the compressed size, since igzip trades ratio for speed.
 *
 *   bench_libs [--seconds S]     (default 1 s per row)
 */
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include "bench/bench_util.h"
#include "engine/format/batch_codec.h"

#define GZIP_WINDOW_BITS (15 + 16)

static const size_t sizes[] = { 4096, 65536, 1 << 20 };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

/* JSON account states back to back, as a batch of records would carry them. */
static uint8_t *json_block(size_t n)
{
	uint8_t *p = malloc(n);
	size_t o = 0;
	uint64_t i = 0;

	while (o < n) {
		char line[160];
		uint64_t r = bench_mix64(i++);
		int len = snprintf(line, sizeof(line),
		                   "{\"account\":\"user-%07llu\",\"balance\":%llu,\"currency\":\"EUR\","
		                   "\"status\":\"%s\",\"updated\":%llu}",
		                   (unsigned long long)(r % 1000000), (unsigned long long)(r >> 40),
		                   r & 1 ? "active" : "frozen", 1700000000000ull + (r & 0xffff));
		size_t take = (size_t)len < n - o ? (size_t)len : n - o;
		memcpy(p + o, line, take);
		o += take;
	}
	return p;
}

/* Runs fn(arg) until seconds pass; returns bytes per second for n bytes a call. */
static double rate(void (*fn)(void *), void *arg, size_t n, double seconds)
{
	double t0 = bench_now_s(), t;
	uint64_t calls = 0;

	do {
		for (int i = 0; i < 16; i++)
			fn(arg);
		calls += 16;
		t = bench_now_s() - t0;
	} while (t < seconds);
	return (double)calls * (double)n / t;
}

struct job {
	uint8_t *src, *dst, *back;
	size_t n, cap, clen;
	int level;
	volatile uint32_t sink;
};

/* One lane of the crc32 instruction, 8 bytes at a time. */
__attribute__((target("sse4.2"))) static void crc_one_lane(void *a)
{
	struct job *j = a;
	uint64_t reg = 0xffffffffu, w;
	size_t i = 0;

	for (; i + 8 <= j->n; i += 8) {
		memcpy(&w, j->src + i, 8);
		reg = __builtin_ia32_crc32di(reg, w);
	}
	for (; i < j->n; i++)
		reg = __builtin_ia32_crc32qi((uint32_t)reg, j->src[i]);
	j->sink ^= ~(uint32_t)reg;
}

static void crc_isal(void *a)
{
	struct job *j = a;
	j->sink ^= ~crc32_iscsi(j->src, (int)j->n, ~0u);
}

/* zlib with its streams reused (deflateReset/inflateReset), as a codec worker
 * keeps them; set up once in main. */
static z_stream zdef, zinf;

static void zlib_deflate(void *a)
{
	struct job *j = a;

	deflateReset(&zdef);
	zdef.next_in = j->src;
	zdef.avail_in = (uInt)j->n;
	zdef.next_out = j->dst;
	zdef.avail_out = (uInt)j->cap;
	deflate(&zdef, Z_FINISH);
	j->clen = j->cap - zdef.avail_out;
}

static void zlib_inflate(void *a)
{
	struct job *j = a;

	inflateReset(&zinf);
	zinf.next_in = j->dst;
	zinf.avail_in = (uInt)j->clen;
	zinf.next_out = j->back;
	zinf.avail_out = (uInt)j->n;
	inflate(&zinf, Z_FINISH);
}

static uint8_t isal_level_buf[ISAL_DEF_LVL3_LARGE];

static void isal_deflate_job(void *a)
{
	struct job *j = a;
	struct isal_zstream s;

	isal_deflate_init(&s);
	s.gzip_flag = IGZIP_GZIP;
	s.level = (uint32_t)j->level;
	s.level_buf = isal_level_buf;
	s.level_buf_size = sizeof(isal_level_buf);
	s.end_of_stream = 1;
	s.flush = NO_FLUSH;
	s.next_in = j->src;
	s.avail_in = (uint32_t)j->n;
	s.next_out = j->dst;
	s.avail_out = (uint32_t)j->cap;
	isal_deflate(&s);
	j->clen = j->cap - s.avail_out;
}

static void isal_inflate_job(void *a)
{
	struct job *j = a;
	struct inflate_state s;

	isal_inflate_init(&s);
	s.crc_flag = ISAL_GZIP;
	s.next_in = j->dst;
	s.avail_in = (uint32_t)j->clen;
	s.next_out = j->back;
	s.avail_out = (uint32_t)j->n;
	isal_inflate(&s);
}

int main(int argc, char **argv)
{
	double seconds = 1.0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_libs [--seconds S]\n");
			return 2;
		}
	}
	deflateInit2(&zdef, Z_DEFAULT_COMPRESSION, Z_DEFLATED, GZIP_WINDOW_BITS, 8, Z_DEFAULT_STRATEGY);
	inflateInit2(&zinf, GZIP_WINDOW_BITS);
	printf("%-44s %8s %12s %8s %10s\n", "row", "bytes", "MB/s", "ratio", "out bytes");
	for (size_t k = 0; k < N_SIZES; k++) {
		struct job j = { 0 };
		double base, r;

		j.n = sizes[k];
		j.cap = compressBound(j.n) + 64;
		j.src = json_block(j.n);
		j.dst = malloc(j.cap);
		j.back = malloc(j.n);
		if (tfs_crc32c(0, j.src, j.n) != ~crc32_iscsi(j.src, (int)j.n, ~0u)) {
			fprintf(stderr, "bench_libs: the two CRC-32Cs disagree\n");
			return 1;
		}
		base = rate(crc_one_lane, &j, j.n, seconds);
		printf("%-44s %8zu %12.0f %8.2f %10s\n", "crc32c: one SSE4.2 lane (baseline)", j.n,
		       base / BENCH_BYTES_PER_MB, 1.0, "-");
		r = rate(crc_isal, &j, j.n, seconds);
		printf("%-44s %8zu %12.0f %8.2f %10s\n", "crc32c: ISA-L crc32_iscsi (tfs_crc32c)", j.n,
		       r / BENCH_BYTES_PER_MB, r / base, "-");

		base = rate(zlib_deflate, &j, j.n, seconds);
		printf("%-44s %8zu %12.0f %8.2f %10zu\n", "gzip deflate: zlib level 6 (baseline)", j.n,
		       base / BENCH_BYTES_PER_MB, 1.0, j.clen);
		{
			double ib = rate(zlib_inflate, &j, j.n, seconds), ir;
			for (int lvl = 0; lvl <= 3; lvl++) {
				char name[64];
				j.level = lvl;
				r = rate(isal_deflate_job, &j, j.n, seconds);
				snprintf(name, sizeof(name), "gzip deflate: ISA-L igzip level %d", lvl);
				printf("%-44s %8zu %12.0f %8.2f %10zu\n", name, j.n, r / BENCH_BYTES_PER_MB,
				       r / base, j.clen);
			}
			zlib_deflate(&j);   /* inflate both from zlib's stream */
			printf("%-44s %8zu %12.0f %8.2f %10s\n", "gzip inflate: zlib (baseline)", j.n,
			       ib / BENCH_BYTES_PER_MB, 1.0, "-");
			ir = rate(isal_inflate_job, &j, j.n, seconds);
			if (memcmp(j.back, j.src, j.n) != 0) {
				fprintf(stderr, "bench_libs: isal_inflate did not give the input back\n");
				return 1;
			}
			printf("%-44s %8zu %12.0f %8.2f %10s\n", "gzip inflate: ISA-L isal_inflate", j.n,
			       ir / BENCH_BYTES_PER_MB, ir / ib, "-");
		}
		free(j.src);
		free(j.dst);
		free(j.back);
	}
	deflateEnd(&zdef);
	inflateEnd(&zinf);
	return 0;
}
