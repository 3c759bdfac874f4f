/* bench_util.h - what every benchmark driver shares: a monotonic clock in seconds,
 * peak RSS, a stateless 64-bit mix, the same keys ("user-%07u") and value pool,
 * so that topicfs and RocksDB ingest byte-identical streams, the process's disk
 * write counters, dropping the page cache, and number options. */
#ifndef TFS_BENCH_UTIL_H
#define TFS_BENCH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BENCH_BYTES_PER_MB 1e6
#define BENCH_BYTES_PER_KIB 1024.0
#define BENCH_KEY_PREFIX "user-"
#define BENCH_KEY_DIGITS 7                 /* "user-%07u": 1M keys fit */
#define BENCH_KEY_BYTES (sizeof(BENCH_KEY_PREFIX) - 1 + BENCH_KEY_DIGITS)
#define BENCH_POOL_BYTES (1u << 20)        /* random value bytes the values are cut from */
#define BENCH_MAX_VALUE_BYTES 4096u

static inline double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Peak resident set of this process in MB (ru_maxrss is KiB). */
static inline double bench_peak_rss_mb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss * BENCH_BYTES_PER_KIB / BENCH_BYTES_PER_MB;
}

/* splitmix64: a stateless mix for value pools and random key orders. */
static inline uint64_t bench_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Writes "user-%07u" of k into out (BENCH_KEY_BYTES bytes, no NUL) without printf. */
static inline void bench_format_key(uint8_t *out, uint64_t k)
{
	memcpy(out, BENCH_KEY_PREFIX, sizeof(BENCH_KEY_PREFIX) - 1);
	for (int i = (int)BENCH_KEY_BYTES - 1; i >= (int)sizeof(BENCH_KEY_PREFIX) - 1; i--) {
		out[i] = (uint8_t)('0' + k % 10);
		k /= 10;
	}
}

/* BENCH_POOL_BYTES + BENCH_MAX_VALUE_BYTES of base64-alphabet bytes, the same on
 * every run; values are cut from it. Caller frees; NULL on ENOMEM. */
static inline uint8_t *bench_make_pool(void)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	enum { BITS_PER_CHAR = 6, CHARS_PER_WORD = 8, CHAR_MASK = 63 };
	uint8_t *p = malloc(BENCH_POOL_BYTES + BENCH_MAX_VALUE_BYTES);

	if (!p)
		return NULL;
	for (size_t i = 0; i < BENCH_POOL_BYTES + BENCH_MAX_VALUE_BYTES; i += CHARS_PER_WORD) {
		uint64_t r = bench_mix64(i);
		for (size_t j = 0; j < CHARS_PER_WORD; j++, r >>= BITS_PER_CHAR)
			p[i + j] = (uint8_t)alphabet[r & CHAR_MASK];
	}
	return p;
}

/* /proc/self/io: write_bytes and cancelled_write_bytes (every thread, live or not).
 * 0, or a negative errno (-EIO when the file lacks write_bytes). */
static inline int bench_proc_io(int64_t *write_bytes, int64_t *cancelled)
{
	char name[64];
	long long v;
	FILE *f = fopen("/proc/self/io", "r");

	*write_bytes = *cancelled = -1;
	if (!f)
		return -errno;
	while (fscanf(f, "%63[^:]: %lld\n", name, &v) == 2) {
		if (strcmp(name, "write_bytes") == 0)
			*write_bytes = v;
		else if (strcmp(name, "cancelled_write_bytes") == 0)
			*cancelled = v;
	}
	fclose(f);
	return *write_bytes >= 0 ? 0 : -EIO;
}

/* sync, then drops the page cache, dentries and inodes (root only). 0 or a negative
 * errno, reported on stderr under prog's name. */
static inline int bench_drop_caches(const char *prog)
{
	static const char path[] = "/proc/sys/vm/drop_caches";
	int fd, rc = 0;

	sync();
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "3\n", 2) != 2)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		fprintf(stderr, "%s: cannot drop caches (%s): %s\n", prog, path, strerror(-rc));
	return rc;
}

/* Parses option name's decimal value s into *out, within [min, max]; -EINVAL,
 * reported on stderr under prog's name, otherwise. */
static inline int bench_parse_u64(const char *prog, const char *name, const char *s,
                                  uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "%s: bad %s: %s\n", prog, name, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

#endif
