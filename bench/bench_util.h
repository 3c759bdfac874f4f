/* bench_util.h - small helpers every benchmark driver shares: a monotonic clock in
 * seconds, peak RSS, and a stateless 64-bit mix for deterministic data. */
#ifndef TFS_BENCH_UTIL_H
#define TFS_BENCH_UTIL_H

#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_BYTES_PER_MB 1e6
#define BENCH_BYTES_PER_KIB 1024.0

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

#endif
