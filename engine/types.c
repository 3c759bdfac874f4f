/* types.c - tfs_strerror and clocks. */
#include "engine/types.h"

#include <string.h>
#include <time.h>

const char *tfs_strerror(int err)
{
	switch (err) {
	case TFS_ECORRUPT: return "corrupt data";
	case TFS_EUNSUPPORTED: return "unsupported record format";
	case TFS_ESEQUENCE: return "out-of-order producer sequence";
	case TFS_EFENCED: return "producer epoch fenced";
	case TFS_EREADONLY: return "read-only";
	case TFS_EDAMAGED: return "may be stale: the log is damaged";
	case TFS_EGROUPBUSY: return "the consumer group has members";
	case TFS_EGENERATION: return "not the consumer group's generation";
	default: break;
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}

int64_t tfs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tfs_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tfs_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

size_t tfs_sorted_pos(const void *base, size_t n, size_t size, const void *key,
                      int (*cmp)(const void *key, const void *elem), bool *found)
{
	size_t lo = 0, hi = n;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp(key, (const char *)base + mid * size);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
