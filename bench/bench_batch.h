/* bench_batch.h - a producer's batch as the benchmark drivers build it: records
 * encoded, compressed and checksummed by the engine's batch builder, the way a
 * Kafka producer builds one before it sends it. Kept apart from bench_util.h,
 * which the RocksDB driver shares and which includes no engine header. */
#ifndef TFS_BENCH_BATCH_H
#define TFS_BENCH_BATCH_H

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"

/* Builds recs[0, n), all timestamped now, under params into *out (borrowed from b,
 * valid until its next reset) and *len. 0, or what the builder returned. */
static inline int bench_build_batch(struct tfs_batch_builder *b,
                                    const struct tfs_batch_params *params,
                                    const struct tfs_append_rec *recs, size_t n,
                                    const uint8_t **out, size_t *len)
{
	int64_t now = tfs_now_ms();
	int rc;

	tfs_batch_builder_reset(b, params);
	for (size_t i = 0; i < n; i++) {
		struct tfs_record_in in = { .key = recs[i].key, .value = recs[i].value,
		                            .timestamp = now };
		rc = tfs_batch_builder_add(b, &in);
		if (rc < 0)
			return rc;
	}
	return tfs_batch_builder_finish(b, -1, out, len);
}

#endif
