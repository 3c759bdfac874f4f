/* test_wire.c - the listener's codec (kafka/wire.c): known encodings of Kafka's
 * primitive types both ways, and a reader that never reads past its buffer (a
 * short field, a length or array count beyond the bytes left, an overlong
 * varint all mark it bad and read as zeros from then on).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kafka/kafka_internal.h"

static void test_integers_and_strings(void **state)
{
	static const uint8_t in[] = { 0x7f, 0x80, 0x01, 0xff, 0xff, 0xff, 0xfe,
	                              0, 0, 0, 0, 0, 0, 0, 42, 0, 3, 'a', 'b', 'c', 0xff, 0xff };
	struct kr r;
	struct tfs_slice s;
	bool null;

	(void)state;
	kr_init(&r, in, sizeof(in), false);
	assert_int_equal(kr_i8(&r), 127);
	assert_int_equal(kr_i16(&r), (int16_t)0x8001);
	assert_int_equal(kr_i32(&r), -2);
	assert_int_equal(kr_i64(&r), 42);
	s = kr_str(&r, &null);
	assert_false(null);
	assert_int_equal(s.len, 3);
	assert_memory_equal(s.p, "abc", 3);
	(void)kr_str(&r, &null);
	assert_true(null);
	assert_false(r.bad);
	assert_false(kr_left(&r));
	assert_int_equal(kr_i8(&r), 0);     /* past the end */
	assert_true(r.bad);
}

/* KIP-482: uvarint N+1 lengths (0 = null), tagged fields skipped. */
static void test_compact(void **state)
{
	static const uint8_t in[] = { 0x04, 'a', 'b', 'c', 0x00, 0x01, 0xac, 0x02,
	                              0x01, 0x05, 0x02, 'x', 'y', 0x03, 0x07, 0x08 };
	struct kr r;
	struct tfs_slice s;
	bool null;

	(void)state;
	kr_init(&r, in, sizeof(in), true);
	s = kr_str(&r, &null);
	assert_int_equal(s.len, 3);
	(void)kr_str(&r, &null);
	assert_true(null);
	s = kr_str(&r, &null);
	assert_false(null);
	assert_int_equal(s.len, 0);
	assert_int_equal(kr_uvarint(&r), 300);
	kr_tags(&r);                        /* one field: tag 5, two bytes */
	assert_int_equal(kr_array(&r, 1), 2);
	assert_false(r.bad);
	assert_int_equal(kr_i8(&r), 7);
	assert_int_equal(kr_i8(&r), 8);
	assert_false(kr_left(&r));
}

static void test_bounds(void **state)
{
	static const uint8_t str_past[] = { 0, 5, 'a', 'b' };
	static const uint8_t arr_past[] = { 0x7f, 0xff, 0xff, 0xff, 0 };
	static const uint8_t neg_len[] = { 0xff, 0xfe };
	static const uint8_t long_varint[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t big_varint[] = { 0xff, 0xff, 0xff, 0xff, 0x10 };
	struct kr r;
	bool null;

	(void)state;
	kr_init(&r, str_past, sizeof(str_past), false);
	assert_int_equal(kr_str(&r, &null).len, 0);
	assert_true(r.bad);
	kr_init(&r, arr_past, sizeof(arr_past), false);
	assert_int_equal(kr_array(&r, 1), 0);
	assert_true(r.bad);
	kr_init(&r, neg_len, sizeof(neg_len), false);
	(void)kr_str(&r, &null);
	assert_true(r.bad);
	kr_init(&r, str_past, sizeof(str_past), false);
	(void)kr_str(&r, NULL);             /* not nullable here, and short */
	assert_true(r.bad);
	kr_init(&r, long_varint, sizeof(long_varint), true);
	assert_int_equal(kr_uvarint(&r), 0);
	assert_true(r.bad);
	kr_init(&r, big_varint, sizeof(big_varint), true);
	assert_int_equal(kr_uvarint(&r), 0);
	assert_true(r.bad);
	kr_init(&r, NULL, 0, false);
	assert_int_equal(kr_i64(&r), 0);
	assert_true(r.bad);
}

static void test_writer(void **state)
{
	static const uint8_t classic[] = { 0, 0, 0, 0, 0, 3, 'a', 'b', 'c', 0xff, 0xff,
	                                   0xff, 0xff, 0xff, 0xff };
	static const uint8_t compact[] = { 0x04, 'a', 'b', 'c', 0x00, 0x00, 0xac, 0x02, 0x00 };
	struct kw w;

	(void)state;
	kw_init(&w);
	kw_i32(&w, 0);
	kw_cstr(&w, "abc");
	kw_nullstr(&w);
	kw_array(&w, -1);
	kw_patch_i32(&w, 0, 3);
	assert_false(w.oom);
	assert_int_equal(w.len, sizeof(classic));
	assert_int_equal(w.buf[3], 3);
	assert_memory_equal(w.buf + 4, classic + 4, sizeof(classic) - 4);
	kw_free(&w);
	kw_init(&w);
	w.flex = true;
	kw_cstr(&w, "abc");
	kw_nullstr(&w);
	kw_array(&w, -1);
	kw_uvarint(&w, 300);
	kw_tags(&w);
	assert_int_equal(w.len, sizeof(compact));
	assert_memory_equal(w.buf, compact, sizeof(compact));
	kw_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_integers_and_strings),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
