/* test_crc32c.c - CRC-32C: known answers, continuation, and every length and
 * alignment against a bit-at-a-time reference.
 *
 * Known answers: the check value of the catalogue ("123456789" -> 0xE3069283) and the
 * iSCSI vectors of RFC 3720 §B.4 (stored little-endian there, shown here as values).
 * The reference below is the definition itself (reflected polynomial 0x82F63B78, one
 * bit at a time): slow, and independent of ISA-L's folding, so every length 0..300
 * (every tail case of an 8- or 16-byte loop), odd alignments, lengths around the
 * folding block sizes and random lengths are compared with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine/format/batch_codec.h"

#define SMALL_MAX 300
#define ALIGNMENTS 8
#define POLY_REFLECTED 0x82F63B78u

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* The definition: one bit at a time. */
static uint32_t reference(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (crc & 1 ? POLY_REFLECTED : 0);
	}
	return ~crc;
}

static void test_known_answers(void **state)
{
	uint8_t buf[32];
	(void)state;

	assert_int_equal(tfs_crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(tfs_crc32c(0, "", 0), 0);
	assert_int_equal(tfs_crc32c(0x12345678u, "", 0), 0x12345678u);   /* nothing to add */
	memset(buf, 0, sizeof(buf));
	assert_int_equal(tfs_crc32c(0, buf, sizeof(buf)), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(tfs_crc32c(0, buf, sizeof(buf)), 0x62A8AB43u);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	assert_int_equal(tfs_crc32c(0, buf, sizeof(buf)), 0x46DD794Eu);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(sizeof(buf) - 1 - i);
	assert_int_equal(tfs_crc32c(0, buf, sizeof(buf)), 0x113FDB5Cu);
	assert_int_equal(reference(0, (const uint8_t *)"123456789", 9), 0xE3069283u);
}

static void test_incremental(void **state)
{
	uint8_t buf[4096];
	(void)state;

	fill_random(buf, sizeof(buf));
	uint32_t whole = tfs_crc32c(0, buf, sizeof(buf));
	assert_int_equal(whole, reference(0, buf, sizeof(buf)));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 97)
		assert_int_equal(tfs_crc32c(tfs_crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut),
		                 whole);
}

static void test_every_small_length_and_alignment(void **state)
{
	uint8_t buf[SMALL_MAX + ALIGNMENTS];
	(void)state;

	fill_random(buf, sizeof(buf));
	for (size_t align = 0; align < ALIGNMENTS; align++)
		for (size_t len = 0; len <= SMALL_MAX; len++) {
			uint32_t seed = (uint32_t)rnd();
			assert_int_equal(tfs_crc32c(seed, buf + align, len),
			                 reference(seed, buf + align, len));
		}
}

static void test_block_sizes_and_random(void **state)
{
	static const size_t around[] = { 256, 512, 1024, 2048, 4096, 8192, 3 * 8192, 65536 };
	size_t cap = 65536 + 64;
	uint8_t *buf = malloc(cap);
	(void)state;

	fill_random(buf, cap);
	for (size_t i = 0; i < sizeof(around) / sizeof(around[0]); i++)
		for (size_t d = 0; d < 3; d++) {
			size_t len = around[i] - 1 + d;
			assert_int_equal(tfs_crc32c(0, buf + 3, len), reference(0, buf + 3, len));
		}
	for (int i = 0; i < 200; i++) {
		size_t align = rnd() % 16, len = rnd() % (cap - 16);
		uint32_t seed = (uint32_t)rnd();
		assert_int_equal(tfs_crc32c(seed, buf + align, len), reference(seed, buf + align, len));
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_incremental),
		cmocka_unit_test(test_every_small_length_and_alignment),
		cmocka_unit_test(test_block_sizes_and_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
