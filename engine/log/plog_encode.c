/* plog_encode.c - what a unit of records costs as a batch (the bounds that
 * max.message.bytes is checked against before anything is written), and the
 * encoder an appender reuses to build and index its batch (plog_internal.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "engine/log/plog_internal.h"

/* Upper bound of one record's encoded size (batch_codec.h). */
size_t tfs__plog_record_bytes(const struct tfs_append_rec *r)
{
	size_t n = TFS_RECORD_BOUND_OVERHEAD + r->key.len + r->value.len;

	for (uint32_t i = 0; i < r->header_count; i++)
		n += TFS_RECORD_HEADER_BOUND_OVERHEAD + r->headers[i].key.len + r->headers[i].value.len;
	return n;
}

/* Bytes of v as a zigzag varint (Kafka's ByteUtils.sizeOfVarint). */
static int64_t varint_bytes(int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	int64_t n = 1;

	while (z >= 0x80) {
		z >>= 7;
		n++;
	}
	return n;
}

/* The exact size of a batch holding one uncompressed record without headers,
 * at offset and timestamp deltas 0: the header, then the record's length varint
 * and its body (attributes, the two deltas, key and value each behind a length
 * varint, -1 for none, and the header count). */
static int64_t single_record_batch_bytes(int64_t key_len, bool key_null, int64_t value_len)
{
	enum { ATTRIBUTES = 1, ZERO_DELTAS = 2, NO_HEADERS = 1 };
	int64_t body = ATTRIBUTES + ZERO_DELTAS + NO_HEADERS +
	               (key_null ? varint_bytes(-1) : varint_bytes(key_len) + key_len) +
	               varint_bytes(value_len) + value_len;

	return TFS_BATCH_HEADER_BYTES + varint_bytes(body) + body;
}

int64_t tfs_plog_value_max(int32_t max_message_bytes, size_t key_len, bool key_null)
{
	int64_t k = key_null ? 0 : (int64_t)key_len;
	int64_t v = (int64_t)max_message_bytes - single_record_batch_bytes(k, key_null, 0);

	if (v < 0)
		return -1;
	/* v is high by the growth of the two varints; each step down is at least a
	 * byte of the batch, and they grow by at most 8 bytes together */
	while (v > 0 && single_record_batch_bytes(k, key_null, v) > max_message_bytes)
		v--;
	return v;
}

/* Whether a unit cannot fit one batch of max.message.bytes: exactly Kafka's rule
 * (the batch's size) for one record without headers, else the bound. */
bool tfs__plog_unit_too_big(int32_t max_message_bytes, const struct tfs_append_rec *recs,
                            size_t count, size_t bytes)
{
	if (count == 1 && recs[0].header_count == 0)
		return (int64_t)recs[0].value.len >
		       tfs_plog_value_max(max_message_bytes, recs[0].key.len, recs[0].key_null);
	return bytes + TFS_BATCH_HEADER_BYTES > (size_t)max_message_bytes;
}

struct tfs__encoder *tfs__encoder_new(void)
{
	struct tfs__encoder *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	tfs_batch_builder_init(&e->builder);
	tfs_record_iter_init(&e->iter);
	return e;
}

void tfs__encoder_free(struct tfs__encoder *e)
{
	if (!e)
		return;
	tfs_batch_builder_release(&e->builder);
	tfs_record_iter_release(&e->iter);
	free(e->hashes);
	free(e->recs);
	free(e->timestamps);
	free(e->hdrs);
	free(e);
}

int tfs__encoder_reserve(struct tfs__encoder *e, size_t count)
{
	size_t cap = e->hashes_cap;
	void *p;

	if (count <= cap)
		return 0;
	while (cap < count)
		cap = cap ? cap * 2 : 1024;
	if (!(p = realloc(e->hashes, cap * sizeof(*e->hashes))))
		return -ENOMEM;
	e->hashes = p;
	if (!(p = realloc(e->recs, cap * sizeof(*e->recs))))
		return -ENOMEM;
	e->recs = p;
	if (!(p = realloc(e->timestamps, cap * sizeof(*e->timestamps))))
		return -ENOMEM;
	e->timestamps = p;
	e->hashes_cap = cap;
	return 0;
}
