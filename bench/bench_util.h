/* bench_util.h - what every benchmark driver shares: a monotonic clock in seconds,
 * peak RSS, a stateless 64-bit mix, the same keys ("user-%07u") and value pools
 * (random letters, or JSON-shaped state), so that topicfs and RocksDB ingest byte-identical streams, the process's disk
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

/* CPU time: this process's (every thread, user + system) and the whole machine's
 * busy time (every CPU, from /proc/stat: all but idle and iowait, so kernel
 * writeback threads count), both in seconds, so that a run can say how many
 * cores it kept busy. */
struct bench_cpu {
	double process_s;
	double machine_busy_s;          /* negative: /proc/stat unreadable */
	double machine_steal_s;         /* of machine_busy_s: a hypervisor's (steal) */
};

static inline void bench_cpu_now(struct bench_cpu *c)
{
	struct rusage ru;
	unsigned long long v[8] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;

	getrusage(RUSAGE_SELF, &ru);
	c->process_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	c->machine_busy_s = -1;
	c->machine_steal_s = -1;
	f = fopen("/proc/stat", "r");
	if (!f)
		return;
	/* cpu user nice system idle iowait irq softirq steal */
	if (hz > 0 && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
	                     &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
		c->machine_busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
		c->machine_steal_s = (double)v[7] / (double)hz;
	}
	fclose(f);
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

/* Values shaped like the state a keyed topic holds: a JSON object per value, the same
 * field names in every value and random field values, with a "tags" string of
 * random words filling it to exactly value_bytes (a value too short for the fixed
 * fields is their first value_bytes bytes). BENCH_JSON_POOL_BYTES of them, at least
 * BENCH_JSON_MIN_VALUES; *count gets how many; value j is at j * value_bytes. The
 * same on every run; a batch of up to *count consecutive values repeats none, so
 * what zstd finds is the redundancy inside each value's shape, not copies.
 * Caller frees; NULL on ENOMEM. */
#define BENCH_JSON_POOL_BYTES (16u << 20)
#define BENCH_JSON_MIN_VALUES 4096u

static inline uint8_t *bench_make_json_pool(size_t value_bytes, size_t *count)
{
	static const char *const first[] = { "maria", "jan", "li", "ana", "omar", "eva", "ken",
	                                     "sara", "ivan", "noor", "paul", "mei" };
	static const char *const last[] = { "schmidt", "novak", "garcia", "chen", "kowalski",
	                                    "silva", "tanaka", "okafor", "berg", "moreau" };
	static const char *const status[] = { "active", "frozen", "closed", "pending" };
	static const char *const words[] = { "gold", "mobile", "eu", "promo", "vip", "web",
	                                     "retail", "b2b", "trial", "annual", "beta",
	                                     "north", "south", "priority", "legacy", "new" };
	enum { NFIRST = sizeof(first) / sizeof(first[0]), NLAST = sizeof(last) / sizeof(last[0]),
	       NSTATUS = sizeof(status) / sizeof(status[0]), NWORDS = sizeof(words) / sizeof(words[0]),
	       HEAD_CAP = 256, CLOSE_BYTES = 2 };
	const uint64_t ts0 = 1764460800000ull;      /* 2025-11-30 00:00:00 UTC, in ms */
	size_t n = value_bytes ? BENCH_JSON_POOL_BYTES / value_bytes : 0;
	uint8_t *p;

	if (n < BENCH_JSON_MIN_VALUES)
		n = BENCH_JSON_MIN_VALUES;
	p = malloc(n * value_bytes + 1);
	if (!p)
		return NULL;
	for (size_t j = 0; j < n; j++) {
		uint64_t r = bench_mix64(j ^ 0x6a736f6eull);    /* "json" */
		char head[HEAD_CAP];
		uint8_t *v = p + j * value_bytes;
		size_t len, at;
		int h = snprintf(head, sizeof(head),
		                 "{\"id\":%u,\"user\":\"%s.%s\",\"balance\":%u.%02u,\"status\":\"%s\","
		                 "\"ts\":%llu,\"tags\":\"",
		                 (unsigned)(r % 10000000u), first[(r >> 24) % NFIRST],
		                 last[(r >> 28) % NLAST], (unsigned)((r >> 32) % 100000u),
		                 (unsigned)((r >> 20) % 100u), status[(r >> 48) % NSTATUS],
		                 (unsigned long long)(ts0 + (r >> 40) % 86400000ull));

		len = (size_t)h < value_bytes ? (size_t)h : value_bytes;
		memcpy(v, head, len);
		at = len;
		for (uint64_t w = bench_mix64(r); at + CLOSE_BYTES < value_bytes; w = bench_mix64(w)) {
			const char *word = words[w % NWORDS];
			size_t wl = strlen(word);

			if (at > len)
				v[at++] = ' ';
			if (wl > value_bytes - CLOSE_BYTES - at)
				wl = value_bytes - CLOSE_BYTES - at;
			memcpy(v + at, word, wl);
			at += wl;
		}
		if (at + CLOSE_BYTES == value_bytes) {
			v[at++] = '"';
			v[at++] = '}';
		}
		memset(v + at, ' ', value_bytes - at);      /* only when the head was cut */
	}
	*count = n;
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
