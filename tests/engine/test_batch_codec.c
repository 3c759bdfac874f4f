/* test_batch_codec.c - RecordBatch v2 codec: varints, golden bytes, header decoding,
 * round trips, zstd framing. Damaged batches are in test_batch_damage.c.
 *
 * Golden vectors are the byte strings of docs/format.md §5 (batch_fixture.h), which
 * were checked against Kafka's own Java code; encode must reproduce them byte for
 * byte and decode must return every field. */
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
#include "tests/engine/batch_fixture.h"

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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
