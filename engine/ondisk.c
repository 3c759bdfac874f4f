/* ondisk.c - the partition-directory name rule (ondisk.h). */
#include "engine/ondisk.h"

#include <errno.h>
#include <string.h>

#include "engine/engine.h"

int tfs_partition_dir_parse(const char *name, char *topic, size_t cap, int32_t *partition)
{
	const char *dash = strrchr(name, '-'), *digits;
	size_t tlen;
	int32_t v = 0;

	if (!dash || dash == name || !dash[1])
		return -EINVAL;
	digits = dash + 1;
	if (digits[0] == '0' && digits[1])
		return -EINVAL;                 /* a leading zero names no partition */
	for (const char *p = digits; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (*p - '0');
		if (v >= TFS_MAX_PARTITIONS)    /* also stops before any overflow */
			return -EINVAL;
	}
	tlen = (size_t)(dash - name);
	if (tlen >= cap)
		return -EINVAL;
	memcpy(topic, name, tlen);
	topic[tlen] = '\0';
	if (!tfs_topic_name_valid(topic))
		return -EINVAL;
	*partition = v;
	return 0;
}
