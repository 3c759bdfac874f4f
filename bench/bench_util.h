/* bench_util.h - what every benchmark driver shares: a monotonic clock in seconds,
 * peak RSS, a stateless 64-bit mix, and the same keys ("user-%07u") and value pool,
 * so that topicfs and RocksDB ingest byte-identical streams. */
#ifndef TFS_BENCH_UTIL_H
#define TFS_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

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

#endif
