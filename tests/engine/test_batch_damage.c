/* test_batch_damage.c - RecordBatch v2 records that disagree with their batch,
 * refused codecs, and damage: every byte flipped, every truncation, fuzzing.
 *
 * Each damaged batch is copied into a heap buffer of exactly its length so that
 * AddressSanitizer catches any read past it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/batch_codec.h"
#include "tests/engine/batch_fixture.h"

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
