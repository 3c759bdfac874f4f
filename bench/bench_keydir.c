/* bench_keydir.c - memory and speed of the key directory (engine/log/keydir.h).
 *
 * Usage: bench_keydir [KEYS]    (default 1000000; 10000000 for the large run)
 *
 * Inserts KEYS keys "user-%08u" (13 bytes below 10^8), then looks each one up in a
 * scattered order, then scans the whole directory. Prints one "name value unit" per
 * line:
 *   keydir_keys                          keys inserted
 *   keydir_key_bytes                     sum of their lengths
 *   keydir_bytes_per_key_accounted       (tfs_keydir_memory_bytes - key bytes) / keys
 *   keydir_bytes_per_key_rss             (resident-set growth - key bytes) / keys
 *   keydir_insert_rate, keydir_lookup_rate, keydir_scan_rate   keys/s
 * and last "keydir_bytes_per_key_target 48 PASS|FAIL": PASS when both per-key
 * figures are within the budget of keydir.h. Exit status 0 on PASS, 1 on FAIL, 2 on
 * a usage or setup error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/log/keydir.h"

#include "bench/bench_util.h"

#define DEFAULT_KEYS 1000000ull
/* keydir.h: at most ~48 bytes per live key beyond the key's own bytes. */
#define BYTES_PER_KEY_TARGET 48.0
#define KEY_BUF_BYTES 32
#define NS_PER_S 1e9
/* Lookups visit key i * LOOKUP_STRIDE mod n: a prime, so every key once, scattered. */
#define LOOKUP_STRIDE 2654435761ull

/* Resident set size in bytes, from /proc/self/statm; 0 if unavailable. */
static size_t rss_bytes(void)
{
	unsigned long size_pages = 0, resident_pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size_pages, &resident_pages) != 2)
		resident_pages = 0;
	fclose(f);
	return (size_t)resident_pages * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t make_key(uint64_t i, char *buf)
{
	return (size_t)snprintf(buf, KEY_BUF_BYTES, "user-%08" PRIu64, i);
}

struct scan_sum {
	uint64_t keys;
	uint64_t bytes;
};

static int scan_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                      uint64_t hash)
{
	struct scan_sum *s = arg;
	(void)info;
	(void)hash;
	s->keys++;
	s->bytes += key.len;
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t n = DEFAULT_KEYS, found = 0;
	struct tfs_keydir *kd = NULL;
	struct tfs_keyinfo info = { 0 };
	struct scan_sum sum = { 0, 0 };
	char key[KEY_BUF_BYTES];
	size_t rss_before, rss_after, key_bytes, mem;
	double t0, t_insert, t_lookup, t_scan, per_key_acct, per_key_rss;
	char *end = NULL;
	bool pass;
	int rc;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [keys]\n", argv[0]);
		return 2;
	}
	if (argc == 2) {
		errno = 0;
		n = strtoull(argv[1], &end, 10);
		if (errno || end == argv[1] || *end || n == 0) {
			fprintf(stderr, "bench_keydir: bad key count '%s'\n", argv[1]);
			return 2;
		}
	}

	rss_before = rss_bytes();
	kd = tfs_keydir_create();
	if (!kd) {
		fprintf(stderr, "bench_keydir: cannot create keydir: out of memory\n");
		return 2;
	}

	t0 = bench_now_s();
	for (uint64_t i = 0; i < n; i++) {
		info.offset = (tfs_offset_t)i;
		info.timestamp = (int64_t)i;
		info.value_bytes = (uint32_t)i;
		rc = tfs_keydir_put(kd, tfs_slice_make(key, make_key(i, key)), &info);
		if (rc) {
			fprintf(stderr, "bench_keydir: put of key %" PRIu64 " failed: %s\n", i,
			        tfs_strerror(rc));
			tfs_keydir_destroy(kd);
			return 2;
		}
	}
	t_insert = bench_now_s() - t0;
	rss_after = rss_bytes();
	key_bytes = tfs_keydir_key_bytes(kd);
	mem = tfs_keydir_memory_bytes(kd);

	t0 = bench_now_s();
	for (uint64_t j = 0; j < n; j++) {
		uint64_t i = (uint64_t)(((unsigned __int128)j * LOOKUP_STRIDE) % n);
		found += (uint64_t)tfs_keydir_get(kd, tfs_slice_make(key, make_key(i, key)), &info);
	}
	t_lookup = bench_now_s() - t0;

	t0 = bench_now_s();
	tfs_keydir_scan(kd, false, 0, scan_visit, &sum);
	t_scan = bench_now_s() - t0;

	/* LOOKUP_STRIDE is prime, so j -> i is a permutation unless n is a multiple of it */
	if (tfs_keydir_count(kd) != n || sum.keys != n || sum.bytes != key_bytes ||
	    (n % LOOKUP_STRIDE != 0 && found != n)) {
		fprintf(stderr, "bench_keydir: inconsistent directory: count %zu, scanned %" PRIu64
		        ", found %" PRIu64 " of %" PRIu64 "\n", tfs_keydir_count(kd), sum.keys,
		        found, n);
		tfs_keydir_destroy(kd);
		return 2;
	}

	per_key_acct = ((double)mem - (double)key_bytes) / (double)n;
	per_key_rss = ((double)rss_after - (double)rss_before - (double)key_bytes) / (double)n;
	pass = per_key_acct <= BYTES_PER_KEY_TARGET && per_key_rss <= BYTES_PER_KEY_TARGET;

	printf("keydir_keys %" PRIu64 " keys\n", n);
	printf("keydir_key_bytes %zu bytes\n", key_bytes);
	printf("keydir_memory_bytes %zu bytes\n", mem);
	printf("keydir_bytes_per_key_accounted %.2f bytes/key\n", per_key_acct);
	printf("keydir_bytes_per_key_rss %.2f bytes/key\n", per_key_rss);
	printf("keydir_insert_rate %.0f keys/s\n", (double)n / t_insert);
	printf("keydir_lookup_rate %.0f keys/s\n", (double)n / t_lookup);
	printf("keydir_scan_rate %.0f keys/s\n", (double)n / t_scan);
	printf("keydir_bytes_per_key_target %.0f %s\n", BYTES_PER_KEY_TARGET,
	       pass ? "PASS" : "FAIL");

	tfs_keydir_destroy(kd);
	return pass ? 0 : 1;
}
