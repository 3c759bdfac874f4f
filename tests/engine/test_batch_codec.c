/* test_batch_codec.c - RecordBatch v2 codec: golden bytes, round trips, corruption.
 *
 * Golden vectors are the byte strings of docs/format.md §5, which were checked
 * against Kafka's own Java code; encode must reproduce them byte for byte and decode
 * must return every field. The corruption tests copy each damaged batch into a heap
 * buffer of exactly its length so that AddressSanitizer catches any read past it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "engine/format/batch_codec.h"

/* 2023-11-14T22:13:20Z, the timestamp of every golden vector. */
#define T0 INT64_C(1700000000000)
/* The horizon of the §1.6 delete-horizon batch: clean time + delete.retention.ms. */
#define HORIZON (INT64_C(1700000100000) + INT64_C(86400000))
#define GOLDEN_LEADER_EPOCH 3
#define GOLDEN_PID 1000
#define GOLDEN_EPOCH 5
#define GOLDEN_BASE_SEQ 10
#define OFF_LENGTH 8
#define OFF_LEADER_EPOCH 12
#define OFF_MAGIC 16
#define OFF_CRC 17
#define OFF_ATTRIBUTES 21
#define OFF_RECORDS_COUNT 57
#define MAX_BATCH 4096
#define FUZZ_ITERS_DEFAULT 60000

/* ---- helpers -------------------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static size_t hex_decode(const char *hex, uint8_t *out)
{
	size_t n = 0;
	unsigned v;
	while (*hex) {
		if (*hex == ' ' || *hex == '\n') {
			hex++;
			continue;
		}
		assert_int_equal(sscanf(hex, "%2x", &v), 1);
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Rewrites the length field and CRC of buf to describe exactly len bytes. */
static void seal(uint8_t *buf, size_t len)
{
	put_be32(buf + OFF_LENGTH, (uint32_t)(len - TFS_BATCH_LOG_OVERHEAD));
	put_be32(buf + OFF_CRC, tfs_crc32c(0, buf + TFS_BATCH_CRC_START, len - TFS_BATCH_CRC_START));
}

static uint8_t *dup_exact(const uint8_t *p, size_t len)
{
	uint8_t *d = malloc(len ? len : 1);
	assert_non_null(d);
	if (len)
		memcpy(d, p, len);
	return d;
}

static struct tfs_slice S(const char *s)
{
	return tfs_slice_make(s, strlen(s));
}

static bool slice_eq(struct tfs_slice a, struct tfs_slice b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static struct tfs_batch_params params_default(tfs_offset_t base, int16_t attrs)
{
	struct tfs_batch_params p = {
		.base_offset = base,
		.attributes = attrs,
		.leader_epoch = -1,
		.producer_id = -1,
		.producer_epoch = -1,
		.base_sequence = -1,
		.base_timestamp = -1,
		.zstd_level = 0,
	};
	return p;
}

/* Iterates the batch and asserts its records equal in[0..n) (offsets base + delta). */
static void check_records(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
                          const struct tfs_record_in *in, size_t n)
{
	struct tfs_record r;
	const char *why = NULL;
	size_t i = 0;
	int rc;

	assert_int_equal(tfs_record_iter_reset(it, buf, len, &why), 0);
	while ((rc = tfs_record_iter_next(it, &r, &why)) == 1) {
		struct tfs_slice cur = r.headers_raw;
		struct tfs_header h;
		assert_true(i < n);
		assert_int_equal(r.offset, it->h.base_offset + in[i].offset_delta);
		assert_int_equal(r.offset_delta, in[i].offset_delta);
		assert_int_equal(r.timestamp, in[i].timestamp);
		assert_int_equal(r.key_null, in[i].key_null);
		if (!in[i].key_null)
			assert_true(slice_eq(r.key, in[i].key));
		assert_int_equal(r.value_null, in[i].value_null);
		if (!in[i].value_null)
			assert_true(slice_eq(r.value, in[i].value));
		assert_int_equal(r.header_count, in[i].header_count);
		for (uint32_t k = 0; k < in[i].header_count; k++) {
			assert_int_equal(tfs_header_next(&cur, &h), 1);
			assert_true(slice_eq(h.key, in[i].headers[k].key));
			assert_int_equal(h.value_null, in[i].headers[k].value_null);
			if (!h.value_null)
				assert_true(slice_eq(h.value, in[i].headers[k].value));
		}
		assert_int_equal(tfs_header_next(&cur, &h), 0);
		i++;
	}
	if (rc != 0)
		fail_msg("iteration failed: %s", why ? why : "?");
	assert_int_equal(i, n);
}

/* ---- varints (docs/format.md §4) ------------------------------------------------- */

static const struct {
	int32_t v;
	const char *hex;
} varint_examples[] = {
	{ 0, "00" }, { -1, "01" }, { 1, "02" }, { 63, "7e" }, { -64, "7f" },
	{ 64, "80 01" }, { 300, "d8 04" }, { 16, "20" }, { -1000, "cf 0f" },
	{ INT32_MAX, "fe ff ff ff 0f" }, { INT32_MIN, "ff ff ff ff 0f" },
};

static void test_varint_examples(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(varint_examples) / sizeof(varint_examples[0]); i++) {
		uint8_t want[16], got[16];
		size_t n = hex_decode(varint_examples[i].hex, want);
		int32_t v = 0;
		int64_t lv = 0;
		assert_int_equal(tfs_varint_put(got, varint_examples[i].v), n);
		assert_memory_equal(got, want, n);
		assert_int_equal(tfs_varint_get(want, want + n, &v), (int)n);
		assert_int_equal(v, varint_examples[i].v);
		/* A varlong of a value in int32 range has the same bytes. */
		assert_int_equal(tfs_varlong_put(got, varint_examples[i].v), n);
		assert_memory_equal(got, want, n);
		assert_int_equal(tfs_varlong_get(want, want + n, &lv), (int)n);
		assert_int_equal(lv, varint_examples[i].v);
	}
}

static void test_varlong_extremes(void **state)
{
	(void)state;
	uint8_t want[16], got[16];
	int64_t v;
	size_t n = hex_decode("fe ff ff ff ff ff ff ff ff 01", want);
	assert_int_equal(tfs_varlong_put(got, INT64_MAX), n);
	assert_memory_equal(got, want, n);
	assert_int_equal(tfs_varlong_get(want, want + n, &v), 10);
	assert_int_equal(v, INT64_MAX);
	n = hex_decode("ff ff ff ff ff ff ff ff ff 01", want);
	assert_int_equal(tfs_varlong_put(got, INT64_MIN), n);
	assert_memory_equal(got, want, n);
	assert_int_equal(tfs_varlong_get(want, want + n, &v), 10);
	assert_int_equal(v, INT64_MIN);
}

static void test_varint_malformed(void **state)
{
	(void)state;
	uint8_t b[16] = { 0 };
	int32_t v;
	int64_t lv;
	size_t n;

	assert_int_equal(tfs_varint_get(b, b, &v), TFS_ECORRUPT);        /* no bytes */
	n = hex_decode("80", b);
	assert_int_equal(tfs_varint_get(b, b + n, &v), TFS_ECORRUPT);    /* truncated */
	n = hex_decode("d8 04", b);
	assert_int_equal(tfs_varint_get(b, b + 1, &v), TFS_ECORRUPT);    /* end cuts it */
	n = hex_decode("80 80 80 80 80 00", b);                           /* 6 bytes */
	assert_int_equal(tfs_varint_get(b, b + n, &v), TFS_ECORRUPT);
	n = hex_decode("80 80 80 80 80 80 80 80 80 80 00", b);           /* 11 bytes */
	assert_int_equal(tfs_varlong_get(b, b + n, &lv), TFS_ECORRUPT);
	/* Java's ByteUtils drops a fifth byte's bits past 32; so do we. */
	n = hex_decode("ff ff ff ff 7f", b);
	assert_int_equal(tfs_varint_get(b, b + n, &v), 5);
	assert_int_equal(v, INT32_MIN);
	/* Non-minimal encodings are read, as in Java. */
	n = hex_decode("82 00", b);
	assert_int_equal(tfs_varint_get(b, b + n, &v), 2);
	assert_int_equal(v, 1);
}

static void test_varint_roundtrip(void **state)
{
	(void)state;
	static const int64_t edges[] = { 0, 1, -1, 63, 64, -64, -65, 8191, 8192, INT32_MAX,
	                                 INT32_MIN, INT64_MAX, INT64_MIN, (int64_t)1 << 35 };
	uint8_t b[16];
	for (int i = 0; i < 100000; i++) {
		int64_t lv = i < (int)(sizeof(edges) / sizeof(edges[0])) ? edges[i]
		             : (int64_t)(rnd() >> (rnd() % 64));
		int32_t v = (int32_t)lv, gv;
		int64_t glv;
		size_t n = tfs_varint_put(b, v);
		assert_true(n >= 1 && n <= 5);
		assert_int_equal(tfs_varint_get(b, b + n, &gv), (int)n);
		assert_int_equal(gv, v);
		if (n > 1)
			assert_int_equal(tfs_varint_get(b, b + n - 1, &gv), TFS_ECORRUPT);
		n = tfs_varlong_put(b, lv);
		assert_true(n >= 1 && n <= 10);
		assert_int_equal(tfs_varlong_get(b, b + n, &glv), (int)n);
		assert_int_equal(glv, lv);
	}
}

/* ---- golden vectors (docs/format.md §5) ------------------------------------------
 *
 * Two vectors as printed in the reference lost one 00 byte each where the text was
 * wrapped: the COMMIT marker prints 77 bytes (its producer id as 7 bytes,
 * "00 00 00 00 00 03 e8") and the data batch 80 (its max timestamp as 7 bytes,
 * "00 01 8b cf e5 68 05"), although their length fields and the stated sizes say 78
 * and 81. Below they are restored; with the byte back, the CRC stored in each vector
 * (which the reference cross-checked with java.util.zip.CRC32C) matches the bytes,
 * and test_golden_self_consistent checks exactly that without using the encoder. */

static const char commit_hex[] =
	"00 00 00 00 00 00 00 2a 00 00 00 42 00 00 00 03 02 40 d5 14 e9 00 30 00 00 00 00 00 00 01 8b cf e5 68 00 00 00"
	"01 8b cf e5 68 00 00 00 00 00 00 00 03 e8 00 05 ff ff ff ff 00 00 00 01 20 00 00 00 08 00 00 00 01 0c 00 00 00 00 00"
	"07 00";
static const char data_hex[] =
	"00 00 00 00 00 00 00 64 00 00 00 45 00 00 00 03 02 e1 43 3e 00 00 00 00 00 00 01 00 00 01 8b cf e5 68 00 00 00 01"
	"8b cf e5 68 05 00 00 00 00 00 00 03 e8 00 05 00 00 00 0a 00 00 00 02 14 00 00 00 04 6b 31 04 76 31 00 10 00 0a 02"
	"04 6b 32 01 00";
static const char empty_hex[] =
	"00 00 00 00 00 00 00 64 00 00 00 31 00 00 00 03 02 a8 12 d1 08 00 00 00 00 00 01 ff ff ff ff ff ff ff ff 00 00 01"
	"8b cf e5 68 05 00 00 00 00 00 00 03 e8 00 05 00 00 00 0a 00 00 00 00";
static const char horizon_hex[] =
	"00 00 00 00 00 00 00 64 00 00 00 4b 00 00 00 03 02 35 71 9c ad 00 40 00 00 00 01 00 00 01 8b d5 0d 4a a0 00 00 01"
	"8b cf e5 68 05 00 00 00 00 00 00 03 e8 00 05 00 00 00 0a 00 00 00 02 1a 00 bf 8a bf 52 00 04 6b 31 04 76 31 00 16"
	"00 b5 8a bf 52 02 04 6b 32 01 00";

/* Each vector's length field covers it exactly and its stored CRC matches its bytes. */
static void test_golden_self_consistent(void **state)
{
	(void)state;
	static const char *const vectors[] = { commit_hex, data_hex, empty_hex, horizon_hex };
	static const size_t sizes[] = { 78, 81, 61, 87 };
	uint8_t b[MAX_BATCH];
	for (size_t i = 0; i < 4; i++) {
		size_t n = hex_decode(vectors[i], b);
		uint32_t stored = (uint32_t)b[OFF_CRC] << 24 | (uint32_t)b[OFF_CRC + 1] << 16 |
		                  (uint32_t)b[OFF_CRC + 2] << 8 | b[OFF_CRC + 3];
		assert_int_equal(n, sizes[i]);
		assert_int_equal(((size_t)b[OFF_LENGTH + 2] << 8 | b[OFF_LENGTH + 3]) +
		                 TFS_BATCH_LOG_OVERHEAD, n);
		assert_int_equal(tfs_crc32c(0, b + TFS_BATCH_CRC_START, n - TFS_BATCH_CRC_START),
		                 stored);
	}
}

static void expect_header(const struct tfs_batch_header *h, tfs_offset_t base, int32_t length,
                          uint32_t crc, int16_t attrs, int32_t lod, int64_t base_ts,
                          int64_t max_ts, int32_t base_seq, int32_t count)
{
	assert_int_equal(h->base_offset, base);
	assert_int_equal(h->length, length);
	assert_int_equal(h->leader_epoch, GOLDEN_LEADER_EPOCH);
	assert_int_equal(h->magic, TFS_BATCH_MAGIC);
	assert_int_equal(h->crc, crc);
	assert_int_equal(h->attributes, attrs);
	assert_int_equal(h->last_offset_delta, lod);
	assert_int_equal(h->base_timestamp, base_ts);
	assert_int_equal(h->max_timestamp, max_ts);
	assert_int_equal(h->producer_id, GOLDEN_PID);
	assert_int_equal(h->producer_epoch, GOLDEN_EPOCH);
	assert_int_equal(h->base_sequence, base_seq);
	assert_int_equal(h->records_count, count);
}

static struct tfs_batch_params golden_params(tfs_offset_t base, int16_t attrs, int32_t seq)
{
	struct tfs_batch_params p = params_default(base, attrs);
	p.leader_epoch = GOLDEN_LEADER_EPOCH;
	p.producer_id = GOLDEN_PID;
	p.producer_epoch = GOLDEN_EPOCH;
	p.base_sequence = seq;
	return p;
}

static void test_golden_commit_marker(void **state)
{
	(void)state;
	static const uint8_t key[] = { 0, 0, 0, 1 };            /* version 0, COMMIT */
	static const uint8_t value[] = { 0, 0, 0, 0, 0, 7 };    /* version 0, coordinator epoch 7 */
	struct tfs_record_in in = {
		.key = tfs_slice_make(key, sizeof(key)),
		.value = tfs_slice_make(value, sizeof(value)),
		.timestamp = T0,
	};
	struct tfs_batch_params p = golden_params(42, TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL, -1);
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct tfs_batch_header h;
	uint8_t want[MAX_BATCH];
	const uint8_t *out;
	size_t len, n = hex_decode(commit_hex, want);

	assert_int_equal(n, 78);
	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add(&b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(out, want, n);

	assert_int_equal(tfs_batch_header_decode(want, n, &h, NULL), 0);
	expect_header(&h, 42, 0x42, 0x40d514e9, 0x30, 0, T0, T0, -1, 1);
	assert_int_equal(tfs_batch_verify(want, n, NULL), 0);
	tfs_record_iter_init(&it);
	check_records(&it, want, n, &in, 1);
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
}

static const struct tfs_record_in golden_records[] = {
	{ .key = { (const uint8_t *)"k1", 2 }, .value = { (const uint8_t *)"v1", 2 },
	  .timestamp = T0, .offset_delta = 0 },
	{ .key = { (const uint8_t *)"k2", 2 }, .value_null = true,
	  .timestamp = T0 + 5, .offset_delta = 1 },
};

static void test_golden_data_batch(void **state)
{
	(void)state;
	struct tfs_batch_params p = golden_params(100, 0, GOLDEN_BASE_SEQ);
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct tfs_batch_header h;
	uint8_t want[MAX_BATCH];
	const uint8_t *out;
	size_t len, n = hex_decode(data_hex, want);

	assert_int_equal(n, 81);
	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(tfs_batch_builder_add(&b, &golden_records[i]), 0);
	assert_int_equal(tfs_batch_builder_size_estimate(&b), n);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(out, want, n);

	assert_int_equal(tfs_batch_header_decode(want, n, &h, NULL), 0);
	expect_header(&h, 100, 0x45, 0xe1433e00, 0, 1, T0, T0 + 5, GOLDEN_BASE_SEQ, 2);
	assert_int_equal(tfs_batch_size(&h), n);
	assert_int_equal(tfs_batch_last_offset(&h), 101);
	assert_int_equal(tfs_batch_codec(&h), TFS_CODEC_NONE);
	assert_int_equal(tfs_batch_check_crc(want, n, NULL), 0);
	assert_int_equal(tfs_batch_verify(want, n, NULL), 0);
	tfs_record_iter_init(&it);
	check_records(&it, want, n, golden_records, 2);
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
}

/* Builds a batch of the n records in (codec attrs) and asks whether it holds a
 * tombstone. */
static int tombstone_in(int16_t attrs, const struct tfs_record_in *in, size_t n)
{
	struct tfs_batch_params p = golden_params(0, attrs, GOLDEN_BASE_SEQ);
	struct tfs_batch_builder b;
	const uint8_t *out;
	uint8_t *copy;
	size_t len;
	int rc;

	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(tfs_batch_builder_add(&b, &in[i]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	copy = malloc(len);
	memcpy(copy, out, len);
	rc = tfs_batch_has_tombstone(copy, len);
	tfs_batch_builder_release(&b);
	free(copy);
	return rc;
}

static void test_has_tombstone(void **state)
{
	(void)state;
	struct tfs_record_in keyless = { .key_null = true, .value_null = true, .timestamp = T0 };
	uint8_t want[MAX_BATCH];
	size_t n = hex_decode(data_hex, want);

	assert_int_equal(tombstone_in(0, golden_records, 2), 1);
	assert_int_equal(tombstone_in(TFS_CODEC_ZSTD, golden_records, 2), 1);
	assert_int_equal(tombstone_in(0, golden_records, 1), 0);
	assert_int_equal(tombstone_in(TFS_CODEC_ZSTD, golden_records, 1), 0);
	assert_int_equal(tombstone_in(0, &keyless, 1), 0);     /* no key: no tombstone */
	/* a record region that does not decode is an error, not a "no" */
	want[61] = 0x7e;                                      /* record 0 claims 63 bytes */
	assert_true(tfs_batch_has_tombstone(want, n) < 0);
}

static void test_golden_empty_batch(void **state)
{
	(void)state;
	uint8_t data[MAX_BATCH], want[MAX_BATCH], out[TFS_BATCH_HEADER_BYTES];
	struct tfs_batch_header h;
	struct tfs_record_iter it;
	struct tfs_record r;
	size_t n;

	hex_decode(data_hex, data);
	n = hex_decode(empty_hex, want);
	assert_int_equal(n, 61);
	assert_int_equal(tfs_batch_header_decode(data, sizeof(data), &h, NULL), 0);
	tfs_batch_write_empty(&h, out);
	assert_memory_equal(out, want, n);

	assert_int_equal(tfs_batch_header_decode(out, n, &h, NULL), 0);
	expect_header(&h, 100, 0x31, 0xa812d108, 0, 1, -1, T0 + 5, GOLDEN_BASE_SEQ, 0);
	assert_int_equal(tfs_batch_last_offset(&h), 101);   /* survives the records */
	assert_int_equal(tfs_batch_verify(out, n, NULL), 0);
	tfs_record_iter_init(&it);
	assert_int_equal(tfs_record_iter_reset(&it, out, n, NULL), 0);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 0);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 0);   /* stays at the end */
	tfs_record_iter_release(&it);
}

static void test_golden_delete_horizon(void **state)
{
	(void)state;
	struct tfs_batch_params p = golden_params(100, TFS_ATTR_DELETE_HORIZON, GOLDEN_BASE_SEQ);
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct tfs_batch_header h;
	struct tfs_record r;
	uint8_t want[MAX_BATCH];
	const uint8_t *out;
	size_t len, n = hex_decode(horizon_hex, want);

	assert_int_equal(n, 87);
	p.base_timestamp = HORIZON;
	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(tfs_batch_builder_add(&b, &golden_records[i]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(out, want, n);

	assert_int_equal(tfs_batch_header_decode(want, n, &h, NULL), 0);
	expect_header(&h, 100, 0x4b, 0x35719cad, TFS_ATTR_DELETE_HORIZON, 1, HORIZON, T0 + 5,
	              GOLDEN_BASE_SEQ, 2);
	assert_int_equal(tfs_batch_verify(want, n, NULL), 0);
	tfs_record_iter_init(&it);
	check_records(&it, want, n, golden_records, 2);   /* absolute timestamps kept */
	assert_int_equal(tfs_record_iter_reset(&it, want, n, NULL), 0);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
	assert_int_equal(r.timestamp_delta, T0 - HORIZON);   /* negative deltas */
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
	assert_int_equal(r.timestamp_delta, T0 + 5 - HORIZON);
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
}

/* ---- header decoding ------------------------------------------------------------ */

static void test_header_decode_errors(void **state)
{
	(void)state;
	uint8_t buf[MAX_BATCH];
	struct tfs_batch_header h;
	const char *why = NULL;
	size_t n = hex_decode(data_hex, buf);

	for (size_t a = 0; a < TFS_BATCH_HEADER_BYTES; a++)
		assert_int_equal(tfs_batch_header_decode(buf, a, &h, NULL), -EAGAIN);
	assert_int_equal(tfs_batch_header_decode(buf, TFS_BATCH_HEADER_BYTES, &h, NULL), 0);
	buf[OFF_MAGIC] = 1;
	assert_int_equal(tfs_batch_header_decode(buf, n, &h, NULL), TFS_EUNSUPPORTED);
	assert_int_equal(tfs_batch_verify(buf, n, NULL), TFS_EUNSUPPORTED);
	buf[OFF_MAGIC] = 0;
	assert_int_equal(tfs_batch_header_decode(buf, n, &h, NULL), TFS_EUNSUPPORTED);
	buf[OFF_MAGIC] = 3;
	assert_int_equal(tfs_batch_header_decode(buf, n, &h, &why), TFS_ECORRUPT);
	assert_non_null(why);
	buf[OFF_MAGIC] = TFS_BATCH_MAGIC;
	put_be32(buf + OFF_LENGTH, 48);   /* one below an empty batch */
	why = NULL;
	assert_int_equal(tfs_batch_header_decode(buf, n, &h, &why), TFS_ECORRUPT);
	assert_non_null(why);
	/* Short of magic: a torn tail, even when the length is garbage. */
	assert_int_equal(tfs_batch_header_decode(buf, OFF_MAGIC, &h, NULL), -EAGAIN);
	put_be32(buf + OFF_LENGTH, 0x80000000u);   /* negative */
	assert_int_equal(tfs_batch_header_decode(buf, n, &h, NULL), TFS_ECORRUPT);
}

static void test_buffer_must_be_exact(void **state)
{
	(void)state;
	uint8_t buf[MAX_BATCH];
	size_t n = hex_decode(data_hex, buf);
	buf[n] = 0;
	assert_int_equal(tfs_batch_check_crc(buf, n + 1, NULL), TFS_ECORRUPT);
	assert_int_equal(tfs_batch_verify(buf, n + 1, NULL), TFS_ECORRUPT);
	assert_int_equal(tfs_batch_check_crc(buf, n, NULL), 0);
}

/* ---- round trips ---------------------------------------------------------------- */

/* A deterministic mix of records: null/empty keys and values, binary bytes, headers
 * with null values; timestamps wander up and down. Storage lives in *pool. */
struct record_set {
	struct tfs_record_in *in;
	struct tfs_header *hdr;
	uint8_t *pool;
	size_t n;
};

static void record_set_make(struct record_set *s, size_t n, uint64_t seed)
{
	static const char *const names[] = { "trace-id", "", "content-type", "x" };
	enum { MAX_HDRS = 4, POOL_PER_RECORD = 512 };
	uint64_t saved = rng_state;
	uint8_t *pool;

	rng_state = seed;
	s->n = n;
	s->in = calloc(n, sizeof(*s->in));
	s->hdr = calloc(n * MAX_HDRS, sizeof(*s->hdr));
	s->pool = pool = malloc(n * POOL_PER_RECORD);
	assert_true(s->in && s->hdr && pool);
	for (size_t i = 0; i < n; i++) {
		struct tfs_record_in *r = &s->in[i];
		size_t klen = rnd() % 24, vlen = rnd() % 200;
		uint32_t kind = (uint32_t)(i % 7);
		for (size_t k = 0; k < klen; k++)
			pool[k] = (uint8_t)rnd();
		r->key = tfs_slice_make(pool, klen);
		pool += klen;
		for (size_t k = 0; k < vlen; k++)   /* compressible: few distinct bytes */
			pool[k] = (uint8_t)('a' + rnd() % 4);
		r->value = tfs_slice_make(pool, vlen);
		pool += vlen;
		r->key_null = kind == 1;
		if (kind == 2)
			r->key.len = 0;                /* empty, not null */
		r->value_null = kind == 3;
		if (kind == 4)
			r->value.len = 0;
		r->timestamp = T0 + (int64_t)(rnd() % 100000) - 50000;
		r->offset_delta = (int32_t)i;
		r->header_count = (uint32_t)(rnd() % (MAX_HDRS + 1));
		r->headers = &s->hdr[i * MAX_HDRS];
		for (uint32_t k = 0; k < r->header_count; k++) {
			struct tfs_header *h = &s->hdr[i * MAX_HDRS + k];
			size_t hv = rnd() % 16;
			h->key = S(names[k]);
			for (size_t j = 0; j < hv; j++)
				pool[j] = (uint8_t)rnd();
			h->value = tfs_slice_make(pool, hv);
			pool += hv;
			h->value_null = (rnd() % 3) == 0;
		}
	}
	rng_state = saved;
}

static void record_set_free(struct record_set *s)
{
	free(s->in);
	free(s->hdr);
	free(s->pool);
}

static int64_t max_ts_of(const struct record_set *s)
{
	int64_t m = INT64_MIN;
	for (size_t i = 0; i < s->n; i++)
		if (s->in[i].timestamp > m)
			m = s->in[i].timestamp;
	return m;
}

static void roundtrip(int16_t attrs, size_t n)
{
	struct tfs_batch_params p = params_default(5000, attrs);
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct tfs_batch_header h;
	struct record_set s;
	const uint8_t *out;
	uint8_t *copy;
	size_t len;

	record_set_make(&s, n, 42 + n);
	tfs_batch_builder_init(&b);
	tfs_record_iter_init(&it);
	tfs_batch_builder_reset(&b, &p);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(tfs_batch_builder_add(&b, &s.in[i]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	copy = dup_exact(out, len);
	assert_int_equal(tfs_batch_header_decode(copy, len, &h, NULL), 0);
	assert_int_equal(h.attributes, attrs);
	assert_int_equal(h.records_count, (int32_t)n);
	assert_int_equal(h.last_offset_delta, (int32_t)n - 1);
	assert_int_equal(h.base_timestamp, s.in[0].timestamp);
	assert_int_equal(h.max_timestamp, max_ts_of(&s));
	if ((attrs & TFS_ATTR_CODEC_MASK) == TFS_CODEC_NONE)
		assert_int_equal(len, tfs_batch_builder_size_estimate(&b));
	else if (n >= 100)   /* the sample values use four letters: they compress */
		assert_true(len < tfs_batch_builder_size_estimate(&b));
	assert_int_equal(tfs_batch_verify(copy, len, NULL), 0);
	assert_int_equal(tfs_record_iter_verify(&it, copy, len, NULL), 0);
	check_records(&it, copy, len, s.in, n);
	free(copy);
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
	record_set_free(&s);
}

static void test_roundtrip_none(void **state)
{
	(void)state;
	roundtrip(TFS_CODEC_NONE, 1);
	roundtrip(TFS_CODEC_NONE, 300);
}

static void test_roundtrip_zstd(void **state)
{
	(void)state;
	roundtrip(TFS_CODEC_ZSTD, 1);
	roundtrip(TFS_CODEC_ZSTD, 3000);
}

/* One builder and one iterator serve batches of either codec, in any order. */
static void test_reuse_across_batches(void **state)
{
	(void)state;
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct record_set s;
	const uint8_t *out;
	size_t len;

	record_set_make(&s, 50, 7);
	tfs_batch_builder_init(&b);
	tfs_record_iter_init(&it);
	for (int round = 0; round < 6; round++) {
		int16_t codec = (round % 3) ? TFS_CODEC_ZSTD : TFS_CODEC_NONE;
		struct tfs_batch_params p = params_default(round * 100, codec);
		size_t n = (size_t)(round * 9 + 1);
		uint8_t *copy;
		p.zstd_level = round;
		tfs_batch_builder_reset(&b, &p);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(tfs_batch_builder_add(&b, &s.in[i]), 0);
		assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
		copy = dup_exact(out, len);
		assert_int_equal(tfs_record_iter_verify(&it, copy, len, NULL), 0);
		check_records(&it, copy, len, s.in, n);
		free(copy);
	}
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
	tfs_batch_builder_release(NULL);
	tfs_record_iter_release(NULL);
	record_set_free(&s);
}

/* Encodes s at level into a copy (caller frees) with builder b. */
static uint8_t *zstd_at_level(struct tfs_batch_builder *b, const struct record_set *s, int level,
                              size_t *len)
{
	struct tfs_batch_params p = params_default(0, TFS_CODEC_ZSTD);
	const uint8_t *out;

	p.zstd_level = level;
	tfs_batch_builder_reset(b, &p);
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(tfs_batch_builder_add(b, &s->in[i]), 0);
	assert_int_equal(tfs_batch_builder_finish(b, -1, &out, len), 0);
	return dup_exact(out, *len);
}

/* A builder keeps its zstd context's parameters from batch to batch and sets the
 * level only when it changes: whatever levels came before, each batch has the
 * bytes a fresh builder makes at its level, and the levels are really applied
 * (19 compresses these records smaller than -5). Level 0 is zstd's default, 3. */
static void test_zstd_level_on_a_reused_builder(void **state)
{
	(void)state;
	static const int levels[] = { -5, 19, 19, 1, 3, 0, -5, 3, 22, 0 };
	struct tfs_batch_builder reused, fresh;
	struct tfs_record_iter it;
	struct record_set s;
	size_t len_fast = 0, len_slow = 0;

	record_set_make(&s, 400, 99);
	tfs_batch_builder_init(&reused);
	tfs_record_iter_init(&it);
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		size_t a_len, b_len;
		uint8_t *a = zstd_at_level(&reused, &s, levels[i], &a_len);
		uint8_t *b;

		tfs_batch_builder_init(&fresh);
		b = zstd_at_level(&fresh, &s, levels[i], &b_len);
		tfs_batch_builder_release(&fresh);
		if (a_len != b_len || memcmp(a, b, a_len) != 0)
			fail_msg("level %d after %d: the reused builder's batch differs", levels[i],
			         i ? levels[i - 1] : levels[i]);
		assert_int_equal(tfs_record_iter_verify(&it, a, a_len, NULL), 0);
		check_records(&it, a, a_len, s.in, s.n);
		if (levels[i] == -5)
			len_fast = a_len;
		if (levels[i] == 19)
			len_slow = a_len;
		free(a);
		free(b);
	}
	assert_true(len_slow < len_fast);
	{
		size_t l0, l3;
		uint8_t *z0 = zstd_at_level(&reused, &s, 0, &l0);
		uint8_t *z3 = zstd_at_level(&reused, &s, 3, &l3);
		assert_int_equal(l0, l3);
		assert_memory_equal(z0, z3, l0);
		free(z0);
		free(z3);
	}
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&reused);
	record_set_free(&s);
}

/* A batch encoded at base offset 0 and placed later (the partition log's
 * appenders do this): setting the base offset keeps the CRC valid, moves every
 * record's offset, and gives the bytes a builder started at that offset makes.
 * A reserve before adding changes nothing in the output. */
static void test_batch_placed_after_encoding(void **state)
{
	enum { N = 200 };
	const tfs_offset_t base = 1234567890123ll;
	struct tfs_batch_builder b, direct;
	struct tfs_record_iter it;
	struct tfs_batch_header h;
	struct record_set s;
	const uint8_t *out, *want;
	uint8_t *copy;
	size_t len, want_len;
	(void)state;

	record_set_make(&s, N, 99);
	tfs_batch_builder_init(&b);
	tfs_batch_builder_init(&direct);
	tfs_record_iter_init(&it);
	for (int codec = 0; codec < 2; codec++) {
		int16_t attrs = codec ? TFS_CODEC_ZSTD : TFS_CODEC_NONE;
		struct tfs_batch_params p0 = params_default(0, attrs), pb = params_default(base, attrs);
		tfs_batch_builder_reset(&b, &p0);
		assert_int_equal(tfs_batch_builder_reserve(&b, (size_t)N * 512), 0);
		tfs_batch_builder_reset(&direct, &pb);
		for (size_t i = 0; i < N; i++) {
			assert_int_equal(tfs_batch_builder_add(&b, &s.in[i]), 0);
			assert_int_equal(tfs_batch_builder_add(&direct, &s.in[i]), 0);
		}
		assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
		assert_int_equal(tfs_batch_builder_finish(&direct, -1, &want, &want_len), 0);
		copy = dup_exact(out, len);
		assert_int_equal(tfs_batch_check_crc(copy, len, NULL), 0);
		tfs_batch_set_base_offset(copy, base);
		assert_int_equal(len, want_len);
		assert_memory_equal(copy, want, len);
		assert_int_equal(tfs_batch_verify(copy, len, NULL), 0);
		assert_int_equal(tfs_batch_header_decode(copy, len, &h, NULL), 0);
		assert_int_equal(h.base_offset, base);
		check_records(&it, copy, len, s.in, N);
		free(copy);
	}
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
	tfs_batch_builder_release(&direct);
	record_set_free(&s);
}

static void test_builder_add_at_gaps(void **state)
{
	(void)state;
	struct tfs_batch_params p = params_default(1000, TFS_CODEC_NONE);
	struct tfs_record_in in[4] = {
		{ .key = S("a"), .value = S("1"), .timestamp = T0, .offset_delta = 0 },
		{ .key = S("b"), .value = S("2"), .timestamp = T0 + 3, .offset_delta = 3 },
		{ .key = S("c"), .value_null = true, .timestamp = T0 + 1, .offset_delta = 7 },
		{ .key = S("d"), .value = S(""), .timestamp = T0 + 9, .offset_delta = 8 },
	};
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct tfs_batch_header h;
	struct tfs_record_in dup;
	const uint8_t *out;
	size_t len;

	tfs_batch_builder_init(&b);
	tfs_record_iter_init(&it);
	tfs_batch_builder_reset(&b, &p);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tfs_batch_builder_add_at(&b, &in[i]), 0);
	dup = in[2];
	assert_int_equal(tfs_batch_builder_add_at(&b, &dup), -EINVAL);    /* not increasing */
	dup.offset_delta = 5;
	assert_int_equal(tfs_batch_builder_add_at(&b, &dup), -EINVAL);    /* going back */
	assert_int_equal(tfs_batch_builder_finish(&b, 5, &out, &len), -EINVAL); /* < 7 */
	/* The cleaner keeps the original last offset delta past the last survivor. */
	assert_int_equal(tfs_batch_builder_finish(&b, 10, &out, &len), 0);
	assert_int_equal(tfs_batch_header_decode(out, len, &h, NULL), 0);
	assert_int_equal(h.last_offset_delta, 10);
	assert_int_equal(tfs_batch_last_offset(&h), 1010);
	assert_int_equal(h.records_count, 3);
	assert_int_equal(h.base_timestamp, T0);
	assert_int_equal(h.max_timestamp, T0 + 3);
	assert_int_equal(tfs_batch_verify(out, len, NULL), 0);
	check_records(&it, out, len, in, 3);

	/* add continues one past the last delta. */
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add_at(&b, &in[1]), 0);
	assert_int_equal(tfs_batch_builder_add(&b, &in[0]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	assert_int_equal(tfs_batch_header_decode(out, len, &h, NULL), 0);
	assert_int_equal(h.last_offset_delta, 4);
	assert_int_equal(tfs_batch_verify(out, len, NULL), 0);

	/* A negative delta is refused. */
	tfs_batch_builder_reset(&b, &p);
	dup = in[0];
	dup.offset_delta = -1;
	assert_int_equal(tfs_batch_builder_add_at(&b, &dup), -EINVAL);
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
}

static void test_builder_errors(void **state)
{
	(void)state;
	struct tfs_batch_params p = params_default(0, TFS_CODEC_GZIP);
	struct tfs_record_in in = { .key = S("k"), .value = S("v"), .timestamp = T0 };
	struct tfs_batch_builder b;
	const uint8_t *out;
	size_t len;

	tfs_batch_builder_init(&b);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), -EINVAL);  /* no records */
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add(&b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);       /* gzip builds */
	assert_int_equal(tfs_batch_verify(out, len, NULL), 0);
	p.attributes = 5;   /* no such codec */
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add(&b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), -EINVAL);
	tfs_batch_builder_release(&b);
}

/* Under log-append time every record reports the batch's max timestamp. */
static void test_log_append_time(void **state)
{
	(void)state;
	struct tfs_batch_params p = params_default(0, TFS_ATTR_LOG_APPEND_TIME);
	struct tfs_record_in in[2] = {
		{ .key = S("a"), .value = S("1"), .timestamp = T0 },
		{ .key = S("b"), .value = S("2"), .timestamp = T0 + 50 },
	};
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	struct tfs_record r;
	const uint8_t *out;
	size_t len;

	tfs_batch_builder_init(&b);
	tfs_record_iter_init(&it);
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add(&b, &in[0]), 0);
	assert_int_equal(tfs_batch_builder_add(&b, &in[1]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	assert_int_equal(tfs_record_iter_reset(&it, out, len, NULL), 0);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
	assert_int_equal(r.timestamp, T0 + 50);
	assert_int_equal(r.timestamp_delta, 0);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
	assert_int_equal(r.timestamp, T0 + 50);
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
}

/* The empty form keeps timestamp type, transactional and control; drops codec and
 * horizon (docs/format.md §5). */
static void test_write_empty_flags(void **state)
{
	(void)state;
	struct tfs_batch_header h = {
		.base_offset = 77, .length = 500, .leader_epoch = 9, .magic = 2, .crc = 1,
		.attributes = TFS_CODEC_ZSTD | TFS_ATTR_LOG_APPEND_TIME | TFS_ATTR_TRANSACTIONAL |
		              TFS_ATTR_CONTROL | TFS_ATTR_DELETE_HORIZON,
		.last_offset_delta = 4, .base_timestamp = 123, .max_timestamp = 456,
		.producer_id = 8, .producer_epoch = 2, .base_sequence = 30, .records_count = 5,
	};
	uint8_t out[TFS_BATCH_HEADER_BYTES];
	struct tfs_batch_header e;

	tfs_batch_write_empty(&h, out);
	assert_int_equal(tfs_batch_verify(out, sizeof(out), NULL), 0);
	assert_int_equal(tfs_batch_header_decode(out, sizeof(out), &e, NULL), 0);
	assert_int_equal(e.attributes,
	                 TFS_ATTR_LOG_APPEND_TIME | TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL);
	assert_int_equal(e.base_offset, 77);
	assert_int_equal(e.length, 49);
	assert_int_equal(e.leader_epoch, 9);
	assert_int_equal(e.last_offset_delta, 4);
	assert_int_equal(e.base_timestamp, -1);
	assert_int_equal(e.max_timestamp, 456);
	assert_int_equal(e.producer_id, 8);
	assert_int_equal(e.producer_epoch, 2);
	assert_int_equal(e.base_sequence, 30);
	assert_int_equal(e.records_count, 0);
}

/* ---- zstd framing --------------------------------------------------------------- */

/* Builds an uncompressed batch of s into *buf and returns its size. */
static size_t build_plain(const struct record_set *s, uint8_t **buf)
{
	struct tfs_batch_params p = params_default(10, TFS_CODEC_NONE);
	struct tfs_batch_builder b;
	const uint8_t *out;
	size_t len;

	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(tfs_batch_builder_add(&b, &s->in[i]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	*buf = dup_exact(out, len);
	tfs_batch_builder_release(&b);
	return len;
}

/* Re-frames a plain batch as codec zstd: frames cut the records region at the given
 * split points; with_size selects whether frames state their content size. */
static size_t rezstd(const uint8_t *plain, size_t plain_len, bool with_size,
                     const size_t *cuts, size_t ncuts, uint8_t **out)
{
	const uint8_t *rec = plain + TFS_BATCH_HEADER_BYTES;
	size_t rec_len = plain_len - TFS_BATCH_HEADER_BYTES;
	size_t cap = TFS_BATCH_HEADER_BYTES + (ncuts + 1) * ZSTD_compressBound(rec_len);
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	uint8_t *b = malloc(cap);
	size_t pos = TFS_BATCH_HEADER_BYTES, from = 0;

	assert_true(cctx && b);
	memcpy(b, plain, TFS_BATCH_HEADER_BYTES);
	b[OFF_ATTRIBUTES + 1] = (uint8_t)((b[OFF_ATTRIBUTES + 1] & ~TFS_ATTR_CODEC_MASK) |
	                                  TFS_CODEC_ZSTD);
	for (size_t c = 0; c <= ncuts; c++) {
		size_t to = c < ncuts ? cuts[c] : rec_len, r;
		ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
		assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag,
		                                                 with_size ? 1 : 0)));
		r = ZSTD_compress2(cctx, b + pos, cap - pos, rec + from, to - from);
		assert_false(ZSTD_isError(r));
		if (c == 0)
			assert_true(ZSTD_getFrameContentSize(b + pos, r) ==
			            (with_size ? (unsigned long long)(to - from) : ZSTD_CONTENTSIZE_UNKNOWN));
		pos += r;
		from = to;
	}
	ZSTD_freeCCtx(cctx);
	seal(b, pos);
	*out = dup_exact(b, pos);
	free(b);
	return pos;
}

static void test_zstd_frames(void **state)
{
	(void)state;
	struct record_set s;
	struct tfs_record_iter it;
	uint8_t *plain, *z;
	size_t plain_len, zlen, rec_len;
	const char *why;

	record_set_make(&s, 400, 99);
	plain_len = build_plain(&s, &plain);
	rec_len = plain_len - TFS_BATCH_HEADER_BYTES;
	tfs_record_iter_init(&it);

	for (int with_size = 0; with_size <= 1; with_size++) {
		size_t cuts[2] = { rec_len / 3, 2 * rec_len / 3 };
		for (size_t ncuts = 0; ncuts <= 2; ncuts++) {
			zlen = rezstd(plain, plain_len, with_size, cuts, ncuts, &z);
			assert_int_equal(tfs_batch_verify(z, zlen, NULL), 0);
			check_records(&it, z, zlen, s.in, s.n);

			/* A body of exactly max_decompressed passes; one byte more does not. */
			it.max_decompressed = rec_len;
			check_records(&it, z, zlen, s.in, s.n);
			it.max_decompressed = rec_len - 1;
			why = NULL;
			assert_int_equal(tfs_record_iter_reset(&it, z, zlen, &why), TFS_ECORRUPT);
			assert_non_null(why);
			it.max_decompressed = 0;

			/* A truncated frame, CRC fixed, is corrupt and not a crash. */
			for (size_t cut = 1; cut < zlen - TFS_BATCH_HEADER_BYTES; cut += 7) {
				uint8_t *t = dup_exact(z, zlen - cut);
				seal(t, zlen - cut);
				assert_int_equal(tfs_batch_verify(t, zlen - cut, NULL), TFS_ECORRUPT);
				free(t);
			}
			free(z);
		}
	}
	tfs_record_iter_release(&it);
	free(plain);
	record_set_free(&s);
}

/* A tiny frame that claims (or streams to) a huge body is refused at the limit. */
static void test_zstd_bomb(void **state)
{
	(void)state;
	size_t big = (size_t)80 << 20, cap = ZSTD_compressBound(big);
	uint8_t *zeros = calloc(1, big), *batch = malloc(TFS_BATCH_HEADER_BYTES + cap);
	uint8_t hdr[MAX_BATCH];
	struct tfs_record_iter it;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();

	assert_true(zeros && batch && cctx);
	hex_decode(data_hex, hdr);
	for (int with_size = 0; with_size <= 1; with_size++) {
		size_t r, len;
		const char *why = NULL;
		ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, with_size);
		r = ZSTD_compress2(cctx, batch + TFS_BATCH_HEADER_BYTES, cap, zeros, big);
		assert_false(ZSTD_isError(r));
		memcpy(batch, hdr, TFS_BATCH_HEADER_BYTES);
		batch[OFF_ATTRIBUTES + 1] = TFS_CODEC_ZSTD;
		len = TFS_BATCH_HEADER_BYTES + r;
		seal(batch, len);
		tfs_record_iter_init(&it);
		assert_int_equal(tfs_batch_verify(batch, len, &why), TFS_ECORRUPT);
		assert_non_null(why);
		assert_int_equal(tfs_record_iter_reset(&it, batch, len, NULL), TFS_ECORRUPT);
		assert_true(it.z.cap <= ((size_t)64 << 20));
		tfs_record_iter_release(&it);
	}
	ZSTD_freeCCtx(cctx);
	free(zeros);
	free(batch);
}

/* ---- hand-made records ---------------------------------------------------------- */

/* A header (from the golden data batch) + the given records region, sealed. */
static size_t craft(const char *records_hex, int32_t count, int16_t codec, uint8_t **out)
{
	uint8_t b[MAX_BATCH];
	size_t n;
	hex_decode(data_hex, b);
	n = TFS_BATCH_HEADER_BYTES + hex_decode(records_hex, b + TFS_BATCH_HEADER_BYTES);
	put_be32(b + OFF_RECORDS_COUNT, (uint32_t)count);
	b[OFF_ATTRIBUTES] = 0;
	b[OFF_ATTRIBUTES + 1] = (uint8_t)codec;
	seal(b, n);
	*out = dup_exact(b, n);
	return n;
}

static int verify_crafted(const char *records_hex, int32_t count)
{
	uint8_t *b;
	const char *why = NULL;
	size_t n = craft(records_hex, count, TFS_CODEC_NONE, &b);
	int rc = tfs_batch_verify(b, n, &why);
	if (rc)
		assert_non_null(why);
	free(b);
	return rc;
}

/* The golden records: (k1, v1) = "14 00 00 00 04 6b 31 04 76 31 00" and (k2, null). */
#define REC1 "14 00 00 00 04 6b 31 04 76 31 00"
#define REC2 "10 00 0a 02 04 6b 32 01 00"

static void test_record_length_mismatch(void **state)
{
	(void)state;
	assert_int_equal(verify_crafted(REC1 REC2, 2), 0);
	/* Declared 11, content 10: one byte left over inside the record. */
	assert_int_equal(verify_crafted("16 00 00 00 04 6b 31 04 76 31 00 ee" REC2, 2), TFS_ECORRUPT);
	/* Declared 9, content 10: the parse runs past the record's end. */
	assert_int_equal(verify_crafted("12 00 00 00 04 6b 31 04 76 31 00" REC2, 2), TFS_ECORRUPT);
	/* Declared past the end of the batch. */
	assert_int_equal(verify_crafted("7e 00 00 00 04 6b 31 04 76 31 00", 1), TFS_ECORRUPT);
	/* Negative length. */
	assert_int_equal(verify_crafted("01 00 00 00 04 6b 31 04 76 31 00", 1), TFS_ECORRUPT);
	/* Empty body: not even the attributes byte. */
	assert_int_equal(verify_crafted("00", 1), TFS_ECORRUPT);
	/* A length varint with six groups. */
	assert_int_equal(verify_crafted("80 80 80 80 80 00", 1), TFS_ECORRUPT);
	/* Key longer than the record. */
	assert_int_equal(verify_crafted("14 00 00 00 14 6b 31 04 76 31 00", 1), TFS_ECORRUPT);
	/* Key length -2 (Kafka writes only -1 for null). */
	assert_int_equal(verify_crafted("10 00 00 00 03 04 76 31 00", 1), TFS_ECORRUPT);
	assert_int_equal(verify_crafted("10 00 00 00 01 04 76 31 00", 1), 0);   /* -1: null */
	/* Negative header count. */
	assert_int_equal(verify_crafted("14 00 00 00 04 6b 31 04 76 31 01", 1), TFS_ECORRUPT);
	/* Header count 1 but no header bytes. */
	assert_int_equal(verify_crafted("14 00 00 00 04 6b 31 04 76 31 02", 1), TFS_ECORRUPT);
	/* One header "h" = null; then the same with a negative header key length. */
	assert_int_equal(verify_crafted("1a 00 00 00 04 6b 31 04 76 31 02 02 68 01", 1), 0);
	assert_int_equal(verify_crafted("1a 00 00 00 04 6b 31 04 76 31 02 01 68 01", 1),
	                 TFS_ECORRUPT);
	/* Header value length past the record. */
	assert_int_equal(verify_crafted("1a 00 00 00 04 6b 31 04 76 31 02 02 68 08", 1),
	                 TFS_ECORRUPT);
	/* Timestamp delta varlong that never ends inside the record. */
	assert_int_equal(verify_crafted("06 00 ff ff ff 01 00" REC2, 2), TFS_ECORRUPT);
}

static void test_records_count_mismatch(void **state)
{
	(void)state;
	assert_int_equal(verify_crafted(REC1 REC2, 3), TFS_ECORRUPT);   /* too few records */
	assert_int_equal(verify_crafted(REC1 REC2, 1), TFS_ECORRUPT);   /* bytes left over */
	assert_int_equal(verify_crafted(REC1 REC2, 0), TFS_ECORRUPT);
	assert_int_equal(verify_crafted(REC1 REC2, -1), TFS_ECORRUPT);  /* negative */
	assert_int_equal(verify_crafted(REC1 REC2, INT32_MAX), TFS_ECORRUPT);
	assert_int_equal(verify_crafted("", 0), 0);
	assert_int_equal(verify_crafted("", 1), TFS_ECORRUPT);
}

/* A records region must be framed as its codec frames it: plain records under a
 * codec's bits are damage, and an unknown codec is refused. */
static void test_codecs_refused(void **state)
{
	(void)state;
	uint8_t *b;
	size_t n;
	struct tfs_record_iter it;
	struct tfs_record r;
	const char *why = NULL;

	tfs_record_iter_init(&it);
	for (int16_t codec = TFS_CODEC_GZIP; codec <= TFS_CODEC_LZ4; codec++) {
		n = craft(REC1, 1, codec, &b);
		assert_int_equal(tfs_batch_verify(b, n, NULL), TFS_ECORRUPT);
		assert_int_equal(tfs_record_iter_reset(&it, b, n, NULL), TFS_ECORRUPT);
		assert_int_equal(tfs_record_iter_next(&it, &r, NULL), TFS_ECORRUPT);  /* no batch */
		free(b);
	}
	for (int16_t codec = TFS_CODEC_ZSTD + 1; codec <= TFS_ATTR_CODEC_MASK; codec++) {
		n = craft(REC1, 1, codec, &b);
		assert_int_equal(tfs_batch_verify(b, n, &why), TFS_ECORRUPT);
		free(b);
	}
	n = craft("28 b5 2f fd 00 00 00", 1, TFS_CODEC_ZSTD, &b);   /* frame magic, junk */
	assert_int_equal(tfs_batch_verify(b, n, NULL), TFS_ECORRUPT);
	free(b);
	n = craft("01 02 03 04 05 06 07 08", 1, TFS_CODEC_ZSTD, &b);   /* no frame at all */
	assert_int_equal(tfs_batch_verify(b, n, NULL), TFS_ECORRUPT);
	free(b);
	n = craft("", 0, TFS_CODEC_ZSTD, &b);   /* empty zstd batch: no frame, no records */
	assert_int_equal(tfs_batch_verify(b, n, NULL), 0);
	free(b);
	tfs_record_iter_release(&it);
}

/* After an error the iterator reports it again, never a quiet end. */
static void test_iter_error_is_sticky(void **state)
{
	(void)state;
	struct tfs_record_iter it;
	struct tfs_record r;
	uint8_t *b;
	size_t n = craft(REC1 "14 00 00 00 04 6b 31 04 76 31 7f", 2, TFS_CODEC_NONE, &b);

	tfs_record_iter_init(&it);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), TFS_ECORRUPT);  /* never reset */
	assert_int_equal(tfs_record_iter_reset(&it, b, n, NULL), 0);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), TFS_ECORRUPT);
	assert_int_equal(tfs_record_iter_next(&it, &r, NULL), TFS_ECORRUPT);
	free(b);
	tfs_record_iter_release(&it);
}

/* ---- corruption, truncation, fuzz ------------------------------------------------ */

/* Iterates whatever buf holds, without checking the CRC first, to the end or the first
 * error. If verify accepted the batch, iteration must accept it too. */
static void iterate_all(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
                        bool verified)
{
	struct tfs_record r;
	int32_t seen = 0;
	int rc = tfs_record_iter_reset(it, buf, len, NULL);
	if (rc) {
		assert_true(rc == TFS_ECORRUPT || rc == TFS_EUNSUPPORTED);
		assert_false(verified);
		return;
	}
	while ((rc = tfs_record_iter_next(it, &r, NULL)) == 1) {
		struct tfs_slice cur = r.headers_raw;
		struct tfs_header h;
		uint32_t nh = 0;
		int hr;
		while ((hr = tfs_header_next(&cur, &h)) == 1)
			nh++;
		assert_int_equal(hr, 0);   /* a parsed record's headers always walk */
		assert_int_equal(nh, r.header_count);
		assert_true(r.raw.len > 0);
		seen++;
	}
	assert_true(rc == 0 || rc == TFS_ECORRUPT);
	if (verified) {
		assert_int_equal(rc, 0);
		assert_int_equal(seen, it->h.records_count);
	}
}

/* A batch with several records and headers, codec as given; caller frees. */
static size_t sample_batch(int16_t codec, uint8_t **out)
{
	struct tfs_header hdr[3] = {
		{ .key = S("trace"), .value = S("abc") },
		{ .key = S("n"), .value_null = true },
		{ .key = S(""), .value = S("") },
	};
	struct tfs_record_in in[5] = {
		{ .key = S("user-1"), .value = S("alice"), .timestamp = T0, .headers = hdr,
		  .header_count = 3 },
		{ .key_null = true, .value = S("keyless"), .timestamp = T0 + 7, .headers = hdr,
		  .header_count = 1 },
		{ .key = S("user-2"), .value_null = true, .timestamp = T0 - 3 },
		{ .key = S(""), .value = S(""), .timestamp = T0 + 1, .headers = hdr + 1,
		  .header_count = 2 },
		{ .key = S("user-1"), .value = S("alice-2"), .timestamp = T0 + 9 },
	};
	struct tfs_batch_params p = params_default(300, codec);
	struct tfs_batch_builder b;
	const uint8_t *o;
	size_t len;

	p.leader_epoch = 4;
	p.producer_id = 77;
	p.producer_epoch = 1;
	p.base_sequence = 0;
	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	for (int i = 0; i < 5; i++)
		assert_int_equal(tfs_batch_builder_add(&b, &in[i]), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &o, &len), 0);
	*out = dup_exact(o, len);
	tfs_batch_builder_release(&b);
	return len;
}

static void every_byte_corruption(int16_t codec)
{
	static const uint8_t masks[] = { 0x01, 0x02, 0x03, 0x10, 0x80, 0xff, 0x5a };
	struct tfs_record_iter it;
	uint8_t *good;
	size_t len = sample_batch(codec, &good);

	tfs_record_iter_init(&it);
	assert_int_equal(tfs_batch_verify(good, len, NULL), 0);
	for (size_t pos = 0; pos < len; pos++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			uint8_t *bad = dup_exact(good, len);
			const char *why = NULL;
			int rc;
			bad[pos] ^= masks[m];
			rc = tfs_batch_verify(bad, len, &why);
			if (pos == 0 && (bad[pos] & 0x80)) {
				/* outside the CRC, but a negative base offset is refused */
				assert_int_equal(rc, TFS_ECORRUPT);
			} else if (pos < OFF_LENGTH || (pos >= OFF_LEADER_EPOCH && pos < OFF_MAGIC)) {
				/* base offset and leader epoch are outside the CRC */
				assert_int_equal(rc, 0);
			} else if (pos == OFF_MAGIC && (bad[pos] == 0 || bad[pos] == 1)) {
				assert_int_equal(rc, TFS_EUNSUPPORTED);
			} else {
				if (rc != TFS_ECORRUPT)
					fail_msg("byte %zu ^ 0x%02x: rc %d", pos, masks[m], rc);
				assert_non_null(why);
			}
			assert_int_equal(tfs_batch_check_crc(bad, len, NULL) == 0, rc == 0);
			iterate_all(&it, bad, len, rc == 0);
			free(bad);
		}
	}
	tfs_record_iter_release(&it);
	free(good);
}

static void test_every_byte_corruption(void **state)
{
	(void)state;
	every_byte_corruption(TFS_CODEC_NONE);
	every_byte_corruption(TFS_CODEC_ZSTD);
}

/* Flip bytes of the records region and fix the CRC: only structure checks remain. */
static void test_corruption_behind_good_crc(void **state)
{
	(void)state;
	static const uint8_t masks[] = { 0x01, 0x40, 0x80, 0xff };
	struct tfs_record_iter it;
	uint8_t *good;
	size_t len = sample_batch(TFS_CODEC_NONE, &good);

	tfs_record_iter_init(&it);
	for (size_t pos = TFS_BATCH_CRC_START; pos < len; pos++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			uint8_t *bad = dup_exact(good, len);
			int rc;
			bad[pos] ^= masks[m];
			seal(bad, len);
			rc = tfs_batch_verify(bad, len, NULL);
			assert_true(rc == 0 || rc == TFS_ECORRUPT || rc == TFS_EUNSUPPORTED);
			iterate_all(&it, bad, len, rc == 0);
			free(bad);
		}
	}
	tfs_record_iter_release(&it);
	free(good);
}

static void test_every_truncation(void **state)
{
	(void)state;
	for (int16_t codec = TFS_CODEC_NONE; codec <= TFS_CODEC_ZSTD; codec += TFS_CODEC_ZSTD) {
		struct tfs_record_iter it;
		struct tfs_batch_header h;
		uint8_t *good;
		size_t len = sample_batch(codec, &good);

		tfs_record_iter_init(&it);
		for (size_t n = 0; n < len; n++) {
			uint8_t *t = dup_exact(good, n);
			int hr = tfs_batch_header_decode(t, n, &h, NULL);
			assert_int_equal(tfs_batch_verify(t, n, NULL), TFS_ECORRUPT);
			assert_int_equal(tfs_batch_check_crc(t, n, NULL), TFS_ECORRUPT);
			assert_int_equal(tfs_record_iter_reset(&it, t, n, NULL), TFS_ECORRUPT);
			if (n < TFS_BATCH_HEADER_BYTES)
				assert_int_equal(hr, -EAGAIN);   /* a torn tail, not corruption */
			else
				assert_true(hr == 0 && tfs_batch_size(&h) > n);
			free(t);
		}
		tfs_record_iter_release(&it);
		free(good);
	}
}

static int fuzz_iters(void)
{
	const char *e = getenv("TFS_FUZZ_ITERS");
	return e ? atoi(e) : FUZZ_ITERS_DEFAULT;
}

/* Random bytes, random bytes behind a plausible sealed header, and mutated valid
 * batches (several bytes, CRC re-sealed). Nothing may crash; whatever verifies must
 * iterate cleanly. */
static void test_fuzz(void **state)
{
	(void)state;
	enum { MAX_FUZZ = 400 };
	struct tfs_record_iter it;
	uint8_t *good[2];
	size_t good_len[2];
	int iters = fuzz_iters(), accepted = 0;

	good_len[0] = sample_batch(TFS_CODEC_NONE, &good[0]);
	good_len[1] = sample_batch(TFS_CODEC_ZSTD, &good[1]);
	tfs_record_iter_init(&it);
	for (int i = 0; i < iters; i++) {
		int mode = i % 3;
		uint8_t tmp[MAX_FUZZ + MAX_BATCH];
		size_t n;
		uint8_t *buf;
		int rc;

		if (mode == 2) {
			int g = (int)(rnd() % 2), flips = 1 + (int)(rnd() % 4);
			n = good_len[g];
			memcpy(tmp, good[g], n);
			for (int f = 0; f < flips; f++)
				tmp[TFS_BATCH_HEADER_BYTES + rnd() % (n - TFS_BATCH_HEADER_BYTES)] ^=
					(uint8_t)(1 + rnd() % 255);
			if (rnd() % 4 == 0)
				n -= rnd() % (n - TFS_BATCH_HEADER_BYTES);
		} else {
			n = rnd() % MAX_FUZZ;
			for (size_t k = 0; k < n; k++)
				tmp[k] = (uint8_t)(rnd() % 8 ? rnd() & 0x0f : rnd());  /* small varints */
			if (mode == 1 && n >= TFS_BATCH_HEADER_BYTES) {
				tmp[OFF_MAGIC] = TFS_BATCH_MAGIC;
				tmp[OFF_ATTRIBUTES] = 0;
				tmp[OFF_ATTRIBUTES + 1] = (uint8_t)(rnd() % 2 ? TFS_CODEC_ZSTD : 0);
				put_be32(tmp + OFF_RECORDS_COUNT, (uint32_t)(rnd() % 6));
			}
		}
		if ((mode != 0 || rnd() % 2) && n >= TFS_BATCH_HEADER_BYTES)
			seal(tmp, n);
		buf = dup_exact(tmp, n);
		rc = tfs_batch_verify(buf, n, NULL);
		assert_true(rc == 0 || rc == TFS_ECORRUPT || rc == TFS_EUNSUPPORTED);
		accepted += rc == 0;
		iterate_all(&it, buf, n, rc == 0);
		free(buf);
	}
	print_message("fuzz: %d inputs, %d accepted\n", iters, accepted);
	tfs_record_iter_release(&it);
	free(good[0]);
	free(good[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_examples),
		cmocka_unit_test(test_varlong_extremes),
		cmocka_unit_test(test_varint_malformed),
		cmocka_unit_test(test_varint_roundtrip),
		cmocka_unit_test(test_golden_self_consistent),
		cmocka_unit_test(test_golden_commit_marker),
		cmocka_unit_test(test_golden_data_batch),
		cmocka_unit_test(test_has_tombstone),
		cmocka_unit_test(test_golden_empty_batch),
		cmocka_unit_test(test_golden_delete_horizon),
		cmocka_unit_test(test_header_decode_errors),
		cmocka_unit_test(test_buffer_must_be_exact),
		cmocka_unit_test(test_roundtrip_none),
		cmocka_unit_test(test_roundtrip_zstd),
		cmocka_unit_test(test_reuse_across_batches),
		cmocka_unit_test(test_batch_placed_after_encoding),
		cmocka_unit_test(test_zstd_level_on_a_reused_builder),
		cmocka_unit_test(test_builder_add_at_gaps),
		cmocka_unit_test(test_builder_errors),
		cmocka_unit_test(test_log_append_time),
		cmocka_unit_test(test_write_empty_flags),
		cmocka_unit_test(test_zstd_frames),
		cmocka_unit_test(test_zstd_bomb),
		cmocka_unit_test(test_record_length_mismatch),
		cmocka_unit_test(test_records_count_mismatch),
		cmocka_unit_test(test_codecs_refused),
		cmocka_unit_test(test_iter_error_is_sticky),
		cmocka_unit_test(test_every_byte_corruption),
		cmocka_unit_test(test_corruption_behind_good_crc),
		cmocka_unit_test(test_every_truncation),
		cmocka_unit_test(test_fuzz),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
