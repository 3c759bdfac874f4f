/* test_crc32c.c - CRC-32C: known answers, and the SSE4.2 path equals the table path.
 *
 * Known answers: the check value of the catalogue ("123456789" -> 0xE3069283) and the
 * iSCSI vectors of RFC 3720 §B.4 (stored little-endian there, shown here as values).
 * The hardware path splits long buffers into three lanes joined by shift tables, so
 * it is compared with the table path at every length 0..300 (every tail and alignment
 * case of the 8-byte loop), at odd alignments, and at lengths around the lane sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine/batch_codec.h"

#define SMALL_MAX 300
#define ALIGNMENTS 8
/* The hardware path's lanes are 3 x 8192 and 3 x 256 bytes (crc32c.c). */
#define LONG_LANES_BYTES (3 * 8192)
#define SHORT_LANES_BYTES (3 * 256)

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

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void known_answers(crc_fn f)
{
	uint8_t buf[32];

	assert_int_equal(f(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(f(0, "", 0), 0);
	assert_int_equal(f(0x12345678u, "", 0), 0x12345678u);   /* nothing to add */
	memset(buf, 0, sizeof(buf));
	assert_int_equal(f(0, buf, sizeof(buf)), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(f(0, buf, sizeof(buf)), 0x62A8AB43u);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	assert_int_equal(f(0, buf, sizeof(buf)), 0x46DD794Eu);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(sizeof(buf) - 1 - i);
	assert_int_equal(f(0, buf, sizeof(buf)), 0x113FDB5Cu);
}

static void test_known_answers_dispatch(void **state)
{
	(void)state;
	known_answers(tfs_crc32c);
}

static void test_known_answers_table(void **state)
{
	(void)state;
	known_answers(tfs_crc32c_sw);
}

static void test_known_answers_hw(void **state)
{
	(void)state;
	if (!tfs_crc32c_hw_available())
		skip();
	known_answers(tfs_crc32c_hw);
}

/* Summing in pieces equals summing at once, for every split of a buffer. */
static void test_incremental(void **state)
{
	(void)state;
	uint8_t buf[SMALL_MAX];
	fill_random(buf, sizeof(buf));
	uint32_t whole = tfs_crc32c_sw(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut++) {
		assert_int_equal(tfs_crc32c(tfs_crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut),
		                 whole);
		assert_int_equal(tfs_crc32c_sw(tfs_crc32c_sw(0, buf, cut), buf + cut,
		                               sizeof(buf) - cut), whole);
	}
}

static void test_hw_equals_table_small(void **state)
{
	(void)state;
	uint8_t *buf = malloc(SMALL_MAX + ALIGNMENTS);
	if (!tfs_crc32c_hw_available()) {
		free(buf);
		skip();
	}
	assert_non_null(buf);
	for (int round = 0; round < 4; round++) {
		fill_random(buf, SMALL_MAX + ALIGNMENTS);
		for (size_t align = 0; align < ALIGNMENTS; align++) {
			for (size_t len = 0; len <= SMALL_MAX; len++) {
				uint32_t seed = round ? (uint32_t)rnd() : 0;
				uint32_t want = tfs_crc32c_sw(seed, buf + align, len);
				assert_int_equal(tfs_crc32c_hw(seed, buf + align, len), want);
				assert_int_equal(tfs_crc32c(seed, buf + align, len), want);
			}
		}
	}
	free(buf);
}

/* Lengths on both sides of the lane boundaries, where the shift tables join lanes. */
static void test_hw_equals_table_lanes(void **state)
{
	(void)state;
	static const size_t bases[] = { SHORT_LANES_BYTES, 2 * SHORT_LANES_BYTES,
	                                LONG_LANES_BYTES, 2 * LONG_LANES_BYTES + SHORT_LANES_BYTES,
	                                (size_t)1 << 20 };
	size_t cap = ((size_t)1 << 20) + 64 + ALIGNMENTS;
	uint8_t *buf = malloc(cap);
	if (!tfs_crc32c_hw_available()) {
		free(buf);
		skip();
	}
	assert_non_null(buf);
	fill_random(buf, cap);
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
		for (size_t len = bases[b] - 17; len <= bases[b] + 17; len++) {
			size_t align = rnd() % ALIGNMENTS;
			uint32_t want = tfs_crc32c_sw(0, buf + align, len);
			assert_int_equal(tfs_crc32c_hw(0, buf + align, len), want);
		}
	}
	free(buf);
}

/* Random lengths up to 200 KiB at random alignments, seeds continued. */
static void test_hw_equals_table_random(void **state)
{
	(void)state;
	size_t cap = (size_t)200 << 10;
	uint8_t *buf = malloc(cap + ALIGNMENTS);
	if (!tfs_crc32c_hw_available()) {
		free(buf);
		skip();
	}
	assert_non_null(buf);
	fill_random(buf, cap + ALIGNMENTS);
	for (int i = 0; i < 300; i++) {
		size_t len = rnd() % cap, align = rnd() % ALIGNMENTS;
		uint32_t seed = (uint32_t)rnd();
		assert_int_equal(tfs_crc32c_hw(seed, buf + align, len),
		                 tfs_crc32c_sw(seed, buf + align, len));
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers_dispatch),
		cmocka_unit_test(test_known_answers_table),
		cmocka_unit_test(test_known_answers_hw),
		cmocka_unit_test(test_incremental),
		cmocka_unit_test(test_hw_equals_table_small),
		cmocka_unit_test(test_hw_equals_table_lanes),
		cmocka_unit_test(test_hw_equals_table_random),
	};
	print_message("crc32c: %s\n", tfs_crc32c_hw_available() ? "sse4.2 present"
	                                                          : "no sse4.2: table only");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
