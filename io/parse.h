/* parse.h - the one decimal-integer parser for settings of every layer (mount
 * options, the listener's Kafka settings, the cleaner's checkpoint lines).
 *
 * tfs_parse_i64: the whole of s is a base-10 integer in [lo, hi] -> true with
 * *out set; otherwise (empty, trailing bytes, out of range, overflow) false and
 * *out untouched. */
#ifndef TFS_IO_PARSE_H
#define TFS_IO_PARSE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static inline bool tfs_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

#endif
