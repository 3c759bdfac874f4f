/* test_compress.c - engine/format/compress.c: every codec round-trips at and around its
 * block sizes, writes the framing Kafka writes, reads the framings other writers
 * use, and refuses truncated, oversized and trailing input without crashing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <zstd.h>

#include "engine/format/batch_codec.h"
#include "engine/format/compress.h"
#include "engine/types.h"

static const int codecs[] = { TFS_CODEC_GZIP, TFS_CODEC_SNAPPY, TFS_CODEC_LZ4, TFS_CODEC_ZSTD };
#define N_CODECS (sizeof(codecs) / sizeof(codecs[0]))
#define LIMIT ((size_t)8 << 20)

/* Half compressible text, half noise, so every codec has work and none can
 * shrink it to nothing. */
static uint8_t *sample(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (i / 64) % 2 ? (uint8_t)(seed >> 56) : (uint8_t)("account-state "[i % 14]);
	}
	return p;
}

/* Compresses src with codec and returns the result (caller frees). */
static uint8_t *pack(struct tfs_deflater *d, int codec, const uint8_t *src, size_t n,
                     size_t *out_len)
{
	size_t cap = tfs_deflate_bound(codec, n);
	uint8_t *out;

	assert_true(cap > 0);
	out = malloc(cap);
	assert_non_null(out);
	assert_int_equal(tfs_deflate(d, codec, 3, src, n, out, cap, out_len), 0);
	assert_true(*out_len <= cap);
	return out;
}

static void test_round_trips(void **state)
{
	static const size_t sizes[] = { 0, 1, 100, 32767, 32768, 32769, 65535, 65536, 65537,
	                                200000, 1 << 20 };
	struct tfs_deflater d = { 0 };
	struct tfs_inflater z = { 0 };
	(void)state;

	for (size_t c = 0; c < N_CODECS; c++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i], clen, out = 0;
			uint8_t *src = sample(n, i), *packed = pack(&d, codecs[c], src, n, &clen);
			const char *why = NULL;
			int rc = tfs_inflate(&z, codecs[c], packed, clen, LIMIT, &out, &why);
			if (rc != 0)
				fail_msg("codec %d, %zu bytes: %d (%s)", codecs[c], n, rc, why ? why : "");
			assert_int_equal(out, n);
			assert_memory_equal(z.buf, src, n);
			/* exactly the limit passes; one byte less refuses */
			if (n > 0) {
				assert_int_equal(tfs_inflate(&z, codecs[c], packed, clen, n, &out, NULL), 0);
				assert_int_equal(tfs_inflate(&z, codecs[c], packed, clen, n - 1, &out, NULL),
				                 TFS_ECORRUPT);
			}
			free(src);
			free(packed);
		}
	}
	tfs_deflater_release(&d);
	tfs_inflater_release(&z);
}

/* What Kafka's own writers put on the wire. */
static void test_framing_is_kafkas(void **state)
{
	static const uint8_t xerial[16] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1 };
	struct tfs_deflater d = { 0 };
	size_t n = 100000, clen;
	uint8_t *src = sample(n, 7), *p;
	(void)state;

	/* gzip: a gzip member (1f 8b, deflate) */
	p = pack(&d, TFS_CODEC_GZIP, src, n, &clen);
	assert_int_equal(p[0], 0x1f);
	assert_int_equal(p[1], 0x8b);
	assert_int_equal(p[2], 8);
	free(p);
	/* snappy: xerial's header, then blocks of at most 32 KiB of input */
	p = pack(&d, TFS_CODEC_SNAPPY, src, n, &clen);
	assert_memory_equal(p, xerial, sizeof(xerial));
	{
		size_t pos = 16, blocks = 0, total = 0;
		while (pos < clen) {
			uint32_t len = (uint32_t)p[pos] << 24 | (uint32_t)p[pos + 1] << 16 |
			               (uint32_t)p[pos + 2] << 8 | p[pos + 3];
			size_t u = 0;
			assert_int_equal(snappy_uncompressed_length((const char *)p + pos + 4, len, &u),
			                 SNAPPY_OK);
			assert_true(u <= 32768);
			total += u;
			pos += 4 + len;
			blocks++;
		}
		assert_int_equal(pos, clen);
		assert_int_equal(total, n);
		assert_int_equal(blocks, (n + 32767) / 32768);
	}
	free(p);
	/* lz4: frame magic, FLG = version 1 + independent blocks and nothing else,
	 * BD = 64 KiB blocks */
	p = pack(&d, TFS_CODEC_LZ4, src, n, &clen);
	assert_memory_equal(p, "\x04\x22\x4d\x18", 4);
	assert_int_equal(p[4], 0x60);
	assert_int_equal(p[5], 0x40);
	free(p);
	free(src);
	tfs_deflater_release(&d);
}

/* Framings written by other clients: several gzip members, a raw snappy block, an
 * lz4 frame with checksums and a content size. */
static void test_other_writers(void **state)
{
	struct tfs_inflater z = { 0 };
	size_t n = 50000, out = 0;
	uint8_t *src = sample(n, 3);
	(void)state;

	{   /* two gzip members back to back read as one stream */
		struct tfs_deflater d = { 0 };
		size_t l1, l2;
		uint8_t *m1 = pack(&d, TFS_CODEC_GZIP, src, n / 2, &l1);
		uint8_t *m2 = pack(&d, TFS_CODEC_GZIP, src + n / 2, n - n / 2, &l2);
		uint8_t *buf = malloc(l1 + l2 + 1);
		memcpy(buf, m1, l1);
		memcpy(buf + l1, m2, l2);
		assert_int_equal(tfs_inflate(&z, TFS_CODEC_GZIP, buf, l1 + l2, LIMIT, &out, NULL), 0);
		assert_int_equal(out, n);
		assert_memory_equal(z.buf, src, n);
		buf[l1 + l2] = 0;   /* a byte after the last member */
		assert_int_equal(tfs_inflate(&z, TFS_CODEC_GZIP, buf, l1 + l2 + 1, LIMIT, &out, NULL),
		                 TFS_ECORRUPT);
		buf[l1 + l2 - 5] ^= 1;   /* the last member's CRC-32 no longer matches */
		assert_int_equal(tfs_inflate(&z, TFS_CODEC_GZIP, buf, l1 + l2, LIMIT, &out, NULL),
		                 TFS_ECORRUPT);
		free(m1);
		free(m2);
		free(buf);
		tfs_deflater_release(&d);
	}
	{   /* one raw snappy block, no xerial header */
		size_t cap = snappy_max_compressed_length(n), len = cap;
		char *raw = malloc(cap);
		assert_int_equal(snappy_compress((const char *)src, n, raw, &len), SNAPPY_OK);
		assert_int_equal(tfs_inflate(&z, TFS_CODEC_SNAPPY, (uint8_t *)raw, len, LIMIT, &out, NULL), 0);
		assert_int_equal(out, n);
		assert_memory_equal(z.buf, src, n);
		free(raw);
	}
	{   /* lz4 with block and content checksums and the content size */
		LZ4F_preferences_t p;
		memset(&p, 0, sizeof(p));
		p.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
		p.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
		p.frameInfo.contentSize = n;
		size_t cap = LZ4F_compressFrameBound(n, &p);
		uint8_t *f = malloc(cap);
		size_t len = LZ4F_compressFrame(f, cap, src, n, &p);
		assert_false(LZ4F_isError(len));
		assert_int_equal(tfs_inflate(&z, TFS_CODEC_LZ4, f, len, LIMIT, &out, NULL), 0);
		assert_int_equal(out, n);
		assert_memory_equal(z.buf, src, n);
		f[len - 1] ^= 1;   /* the content checksum no longer matches */
		assert_int_equal(tfs_inflate(&z, TFS_CODEC_LZ4, f, len, LIMIT, &out, NULL), TFS_ECORRUPT);
		free(f);
	}
	free(src);
	tfs_inflater_release(&z);
}

/* Every truncation and every flipped byte of a small compressed region: a clean
 * result or TFS_ECORRUPT, never a crash, a read outside the input, or a size past
 * the limit (ASan and UBSan watch the first two). */
static void test_every_truncation_and_flip(void **state)
{
	struct tfs_deflater d = { 0 };
	struct tfs_inflater z = { 0 };
	size_t n = 3000;
	uint8_t *src = sample(n, 11);
	(void)state;

	for (size_t c = 0; c < N_CODECS; c++) {
		size_t clen, out;
		uint8_t *p = pack(&d, codecs[c], src, n, &clen), *q = malloc(clen);
		for (size_t cut = 0; cut < clen; cut++) {
			memcpy(q, p, cut);
			int rc = tfs_inflate(&z, codecs[c], q, cut, n, &out, NULL);
			/* a prefix can be a whole shorter stream only where the framing allows it
			 * (a xerial stream cut between blocks) */
			if (rc == 0)
				assert_true(out < n || codecs[c] == TFS_CODEC_SNAPPY);
			else
				assert_int_equal(rc, TFS_ECORRUPT);
		}
		for (size_t i = 0; i < clen; i++) {
			memcpy(q, p, clen);
			q[i] ^= 0x5a;
			int rc = tfs_inflate(&z, codecs[c], q, clen, n, &out, NULL);
			assert_true(rc == 0 || rc == TFS_ECORRUPT);
			if (rc == 0)
				assert_true(out <= n);
		}
		free(p);
		free(q);
	}
	free(src);
	tfs_deflater_release(&d);
	tfs_inflater_release(&z);
}

/* A bomb: a few KiB that expand to far more than the limit are refused before the
 * buffer grows past it. */
static void test_bombs(void **state)
{
	struct tfs_deflater d = { 0 };
	struct tfs_inflater z = { 0 };
	size_t n = (size_t)32 << 20, clen, out;
	uint8_t *zeros = calloc(1, n);
	(void)state;

	for (size_t c = 0; c < N_CODECS; c++) {
		uint8_t *p = pack(&d, codecs[c], zeros, n, &clen);
		assert_int_equal(tfs_inflate(&z, codecs[c], p, clen, (size_t)1 << 20, &out, NULL),
		                 TFS_ECORRUPT);
		assert_true(z.cap <= ((size_t)1 << 20) + ((size_t)64 << 10));
		tfs_inflater_trim(&z, 0);
		free(p);
	}
	free(zeros);
	tfs_deflater_release(&d);
	tfs_inflater_release(&z);
}

/* A zstd frame of a few bytes without a content size whose header names a
 * 128 MiB window: the decoder may not allocate a window past the limit. */
static void test_zstd_window_bomb(void **state)
{
	enum { WINDOW_LOG = 27, WINDOW_LOG_BASE = 10, RLE_BLOCK = 1, BLOCK_BYTES = 1000,
	       BLOCKS = 2 };
	const size_t limit = (size_t)1 << 20;
	struct tfs_inflater z = { 0 };
	uint8_t f[32];
	size_t n = 0, out = 0;
	int rc;
	(void)state;

	f[n++] = 0x28; f[n++] = 0xb5; f[n++] = 0x2f; f[n++] = 0xfd;   /* magic */
	f[n++] = 0;                                   /* no content size, no checksum */
	f[n++] = (WINDOW_LOG - WINDOW_LOG_BASE) << 3; /* window descriptor */
	for (int b = 0; b < BLOCKS; b++) {
		uint32_t h = (uint32_t)BLOCK_BYTES << 3 | RLE_BLOCK << 1 | (b == BLOCKS - 1);
		f[n++] = (uint8_t)h;
		f[n++] = (uint8_t)(h >> 8);
		f[n++] = (uint8_t)(h >> 16);
		f[n++] = 'x';
	}
	rc = tfs_inflate(&z, TFS_CODEC_ZSTD, f, n, limit, &out, NULL);
	assert_true(rc == 0 || rc == TFS_ECORRUPT);
	if (z.zstd)
		assert_true(ZSTD_sizeof_DCtx(z.zstd) <= 2 * limit);
	/* a window within the limit still decodes */
	f[5] = 0;
	assert_int_equal(tfs_inflate(&z, TFS_CODEC_ZSTD, f, n, limit, &out, NULL), 0);
	assert_int_equal(out, BLOCKS * BLOCK_BYTES);
	tfs_inflater_release(&z);
}

/* Batches in every codec, through the batch builder and iterator. */
static void test_batches_every_codec(void **state)
{
	struct tfs_batch_builder b;
	struct tfs_record_iter it;
	(void)state;

	tfs_batch_builder_init(&b);
	tfs_record_iter_init(&it);
	for (size_t c = 0; c < N_CODECS; c++) {
		struct tfs_batch_params p = {
			.attributes = (int16_t)codecs[c], .leader_epoch = -1, .producer_id = -1,
			.producer_epoch = -1, .base_sequence = -1, .base_timestamp = -1,
		};
		const uint8_t *out;
		size_t len;
		struct tfs_record r;
		char key[16], value[64];

		tfs_batch_builder_reset(&b, &p);
		for (int i = 0; i < 500; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			snprintf(value, sizeof(value), "{\"n\":%d,\"codec\":%zu}", i, c);
			struct tfs_record_in in = {
				.key = { (const uint8_t *)key, strlen(key) },
				.value = { (const uint8_t *)value, strlen(value) },
				.value_null = i % 50 == 49, .timestamp = 1700000000000 + i,
			};
			assert_int_equal(tfs_batch_builder_add(&b, &in), 0);
		}
		assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
		assert_int_equal(out[22] & 7, codecs[c]);
		assert_int_equal(tfs_batch_verify(out, len, NULL), 0);
		assert_int_equal(tfs_record_iter_reset(&it, out, len, NULL), 0);
		for (int i = 0; i < 500; i++) {
			assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
			snprintf(key, sizeof(key), "k%d", i);
			assert_int_equal(r.key.len, strlen(key));
			assert_memory_equal(r.key.p, key, r.key.len);
			assert_int_equal(r.value_null, i % 50 == 49);
			assert_int_equal(r.offset, i);
		}
		assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 0);
	}
	tfs_record_iter_release(&it);
	tfs_batch_builder_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_framing_is_kafkas),
		cmocka_unit_test(test_other_writers),
		cmocka_unit_test(test_every_truncation_and_flip),
		cmocka_unit_test(test_bombs),
		cmocka_unit_test(test_zstd_window_bomb),
		cmocka_unit_test(test_batches_every_codec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
