/* plog_produce.c - a producer's batch, checked and decoded before it is appended
 * as it is (tfs_plog_append_batch in partition_log.c).
 *
 * A Kafka producer compresses its batches itself, and the broker writes them as
 * they came, compression included: it only checks them and assigns their offsets
 * (LogValidator, for magic 2 with the topic's codec). This file does the broker's
 * part that needs no lock: the client rules of that check, and one pass over the
 * records (decompressing them) that both proves their structure and collects what
 * the leader needs to index them - each key, its hash, the value's size and the
 * record's timestamp. The leader then places the batch by writing its base offset,
 * which the CRC does not cover, exactly as for an appender's own pre-encoded unit.
 *
 * A batch whose codec is not the topic's is re-encoded here with the topic's
 * codec (records, timestamps, headers and producer fields kept), as the broker
 * recompresses when codecs differ. Otherwise the batch's max timestamp is made
 * the records' own if the producer's says otherwise (Kafka's setMaxTimestamp):
 * the time index, segment.ms and recovery all read it.
 *
 * Nothing here trusts the header's record count for memory: the record arrays
 * grow with the records actually decoded, and the decoder bounds what a zstd
 * body may inflate to.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine/log/plog_internal.h"

/* The client rules of Kafka's LogValidator.validateBatch, and what topicfs cannot
 * take. Returns 0 or the refusal, *why saying which. */
static int check_header(const struct tfs_batch_header *h, size_t len, const char **why)
{
	enum tfs_codec codec = tfs_batch_codec(h);

	if (tfs_batch_size(h) != len) {
		*why = tfs_batch_size(h) > len ? "the batch is cut short"
		                               : "bytes after the batch (one batch per append)";
		return -EINVAL;
	}
	if (h->attributes & TFS_ATTR_CONTROL) {
		*why = "clients may not write control batches";
		return -EINVAL;
	}
	if (h->attributes & TFS_ATTR_TRANSACTIONAL) {
		*why = "transactional batches need a transaction coordinator";
		return -EINVAL;
	}
	if (h->attributes & TFS_ATTR_DELETE_HORIZON) {
		*why = "only the cleaner writes a delete horizon";
		return -EINVAL;
	}
	if (h->attributes & TFS_ATTR_LOG_APPEND_TIME) {
		*why = "log-append time is the broker's to set";
		return -EINVAL;
	}
	if (codec > TFS_CODEC_ZSTD) {
		*why = "an unknown compression codec";
		return -EBADMSG;
	}
	if (h->records_count <= 0) {
		*why = "a batch with no records";
		return -EINVAL;
	}
	if ((int64_t)h->last_offset_delta + 1 != h->records_count) {
		*why = "last offset delta does not match the record count";
		return -EINVAL;
	}
	if (h->producer_id >= 0 && h->base_sequence < 0) {
		*why = "a producer id without a base sequence";
		return -EINVAL;
	}
	return 0;
}

/* One pass over the records: each must sit at offset delta i. Collects keys,
 * hashes and timestamps into e and the newest timestamp into *max_ts; adds each
 * record to rebuild when re-encoding. */
static int decode_records(struct tfs__encoder *e, const uint8_t *batch, size_t len,
                          struct tfs_batch_builder *rebuild, int64_t *max_ts, const char **why)
{
	struct tfs_record r;
	size_t i = 0;
	int rc = tfs_record_iter_reset(&e->iter, batch, len, why);

	*max_ts = INT64_MIN;
	while (rc == 0 && (rc = tfs_record_iter_next(&e->iter, &r, why)) == 1) {
		if (r.offset_delta != (int32_t)i) {
			*why = "offset deltas do not run 0, 1, 2, ...";
			return -EINVAL;
		}
		if (i == e->hashes_cap && tfs__encoder_reserve(e, i + 1) < 0)
			return -ENOMEM;
		e->recs[i] = (struct tfs_append_rec){
			.key = r.key, .key_null = r.key_null,
			.value = r.value, .value_null = r.value_null,
		};
		e->timestamps[i] = r.timestamp;
		if (r.timestamp > *max_ts)
			*max_ts = r.timestamp;
		e->hashes[i] = r.key_null ? 0 : tfs_keydir_hash(r.key);
		rc = 0;
		if (rebuild) {
			struct tfs_record_in in = {
				.key = r.key, .key_null = r.key_null,
				.value = r.value, .value_null = r.value_null,
				.timestamp = r.timestamp, .header_count = r.header_count,
			};
			rc = tfs_record_headers(&r, &e->hdrs, &e->hdrs_cap);
			in.headers = e->hdrs;
			if (rc == 0)
				rc = tfs_batch_builder_add(rebuild, &in);
		}
		i++;
	}
	/* the iterator yields exactly the header's record count or fails */
	return rc == TFS_ECORRUPT ? -EBADMSG : rc;
}

int tfs__producer_unit(const struct tfs__produce_cfg *cfg, struct tfs__encoder *e,
                       uint8_t *batch, size_t len, struct tfs__preencoded *pre, size_t *count,
                       const char **why)
{
	struct tfs_batch_header h;
	int64_t max_ts;
	bool rebuild;
	int rc;

	*why = NULL;
	rc = tfs_batch_header_decode(batch, len, &h, why);
	if (rc == -EAGAIN) {
		*why = "shorter than a batch header";
		return -EINVAL;
	}
	if (rc == TFS_ECORRUPT)
		return -EBADMSG;
	if (rc < 0)
		return rc;                     /* TFS_EUNSUPPORTED: magic 0 or 1 */
	rc = check_header(&h, len, why);
	if (rc < 0)
		return rc;
	if (len > (size_t)cfg->max_message_bytes) {
		*why = "the batch is larger than max.message.bytes";
		return -EFBIG;
	}
	rc = tfs_batch_check_crc(batch, len, why);
	if (rc == TFS_ECORRUPT)
		return -EBADMSG;
	if (rc < 0)
		return rc;

	*count = (size_t)h.records_count;
	rebuild = tfs_batch_codec(&h) != (enum tfs_codec)cfg->compression;
	if (rebuild) {
		struct tfs_batch_params p = {
			.attributes = (int16_t)(cfg->compression & TFS_ATTR_CODEC_MASK),
			.leader_epoch = -1,
			.producer_id = h.producer_id,
			.producer_epoch = h.producer_epoch,
			.base_sequence = h.base_sequence,
			.zstd_level = cfg->zstd_level,
		};
		tfs_batch_builder_reset(&e->builder, &p);
	}
	rc = decode_records(e, batch, len, rebuild ? &e->builder : NULL, &max_ts, why);
	if (rc < 0)
		return rc;

	*pre = (struct tfs__preencoded){
		.enc = e, .batch = batch, .len = len,
		.hashes = e->hashes, .timestamps = e->timestamps, .timestamp = max_ts,
		.producer = true, .has_producer_id = h.producer_id >= 0,
		.pin = {
			.producer_id = h.producer_id, .epoch = h.producer_epoch,
			.base_seq = h.base_sequence, .last_offset_delta = h.last_offset_delta,
			.max_timestamp = max_ts,
		},
	};
	if (rebuild) {
		const uint8_t *out;
		rc = tfs_batch_builder_finish(&e->builder, -1, &out, &pre->len);
		if (rc < 0)
			return rc;
		if (pre->len > (size_t)cfg->max_message_bytes) {
			*why = "the re-encoded batch is larger than max.message.bytes";
			return -EFBIG;
		}
		pre->batch = (uint8_t *)out;   /* the builder's, until its next reset */
	} else if (h.max_timestamp != max_ts) {
		tfs_batch_set_max_timestamp(batch, len, false, max_ts);
	}
	tfs_batch_set_leader_epoch(pre->batch, -1);
	return 0;
}
