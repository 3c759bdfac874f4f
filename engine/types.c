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
