/* log_inspect_internal.h - small helpers shared by the three files of the
 * inspection module: log_inspect.c (the segment scanner, listings, small files),
 * log_verify.c (verify) and log_estimate.c (distinct keys, the estimate). Not for
 * use outside those files; the contract is log_inspect.h.
 */
#ifndef TFS_LOG_INSPECT_INTERNAL_H
#define TFS_LOG_INSPECT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PATH_CAP 4096
#define PROGRESS_EVERY_BATCHES 256            /* how often a scan reports progress */

static inline bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* dir/name into buf; a path that does not fit becomes "" (opens fail with ENOENT,
 * never on a truncated, wrong path). */
static inline void join(char *buf, size_t cap, const char *dir, const char *name)
{
	int n = snprintf(buf, cap, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= cap)
		buf[0] = '\0';
}

/* Strict base-10 integer of the whole of [p, p + n): no sign unless allowed, no
 * blanks, no overflow. */
static inline bool parse_int(const char *p, size_t n, int64_t lo, int64_t hi, int64_t *out)
{
	int64_t v = 0;
	bool neg = false;
	size_t i = 0;

	if (n > 0 && p[0] == '-' && lo < 0) {
		neg = true;
		i = 1;
	}
	if (i == n)
		return false;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		if (v > (INT64_MAX - (p[i] - '0')) / 10)
			return false;
		v = v * 10 + (p[i] - '0');
	}
	if (neg)
		v = -v;
	if (v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

#endif
