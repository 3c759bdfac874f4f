/* batch_fixture.h - what the RecordBatch codec suites share (test_batch_codec.c,
 * test_batch_damage.c): the golden vectors of docs/format.md §5, byte offsets in a
 * batch header, a deterministic random source, and helpers to build and check
 * batches. Include after <cmocka.h>; everything is static. */
#ifndef TFS_BATCH_FIXTURE_H
#define TFS_BATCH_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static inline uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static inline size_t hex_decode(const char *hex, uint8_t *out)
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

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Rewrites the length field and CRC of buf to describe exactly len bytes. */
static inline void seal(uint8_t *buf, size_t len)
{
	put_be32(buf + OFF_LENGTH, (uint32_t)(len - TFS_BATCH_LOG_OVERHEAD));
	put_be32(buf + OFF_CRC, tfs_crc32c(0, buf + TFS_BATCH_CRC_START, len - TFS_BATCH_CRC_START));
}

static inline uint8_t *dup_exact(const uint8_t *p, size_t len)
{
	uint8_t *d = malloc(len ? len : 1);
	assert_non_null(d);
	if (len)
		memcpy(d, p, len);
	return d;
}

static inline struct tfs_slice S(const char *s)
{
	return tfs_slice_make(s, strlen(s));
}

static inline bool slice_eq(struct tfs_slice a, struct tfs_slice b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static inline struct tfs_batch_params params_default(tfs_offset_t base, int16_t attrs)
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
static inline void check_records(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
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


#endif
