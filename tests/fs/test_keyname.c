/* test_keyname.c - key bytes <-> canonical file names (fs/keyname.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "fs/keyname.h"

static void round_trip(const uint8_t *key, size_t len)
{
	char name[TFS_KEYNAME_MAX + 1];
	uint8_t back[TFS_KEYNAME_MAX + 1];
	ssize_t n = tfs_keyname_encode(tfs_slice_make(key, len), name, sizeof(name));
	ssize_t k;

	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(name));
	assert_int_equal((size_t)n, tfs_keyname_len(tfs_slice_make(key, len)));
	assert_null(strchr(name, '/'));
	k = tfs_keyname_decode(name, (size_t)n, back, sizeof(back));
	assert_int_equal(k, (ssize_t)len);
	if (len)
		assert_memory_equal(back, key, len);
	assert_int_equal(tfs_keyname_is_plain(name, (size_t)n),
	                 len > 0 && memcmp(name, key, len) == 0 && (size_t)n == len);
}

/* Every byte value alone, first and second in a key, and in the middle. */
static void test_all_bytes_round_trip(void **state)
{
	for (int b = 0; b < 256; b++) {
		uint8_t k1[1] = { (uint8_t)b };
		uint8_t k2[2] = { (uint8_t)b, (uint8_t)b };
		uint8_t k3[3] = { 'x', (uint8_t)b, 'y' };
		round_trip(k1, 1);
		round_trip(k2, 2);
		round_trip(k3, 3);
	}
}

/* All 256 bytes in one key, in slices that fit a name. */
static void test_all_bytes_in_one_key(void **state)
{
	uint8_t all[256];

	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	assert_int_equal(tfs_keyname_encode(tfs_slice_make(all, 256), (char[1024]){ 0 }, 1024),
	                 -ENAMETOOLONG);
	for (int at = 0; at < 256; at += 64)
		round_trip(all + at, 64);
}

static void test_escapes_are_exact(void **state)
{
	char name[TFS_KEYNAME_MAX + 1];

	assert_int_equal(tfs_keyname_encode(tfs_slice_make("a/b", 3), name, sizeof(name)), 5);
	assert_string_equal(name, "a%2Fb");
	assert_int_equal(tfs_keyname_encode(tfs_slice_make("100%", 4), name, sizeof(name)), 6);
	assert_string_equal(name, "100%25");
	assert_int_equal(tfs_keyname_encode(tfs_slice_make(".hidden", 7), name, sizeof(name)), 9);
	assert_string_equal(name, "%2Ehidden");
	assert_int_equal(tfs_keyname_encode(tfs_slice_make("a.b.", 4), name, sizeof(name)), 4);
	assert_string_equal(name, "a.b.");
	assert_int_equal(tfs_keyname_encode(tfs_slice_make("\x7f\n\x1f", 3), name, sizeof(name)), 9);
	assert_string_equal(name, "%7F%0A%1F");
	assert_int_equal(tfs_keyname_encode(tfs_slice_make("\xc3\xa9", 2), name, sizeof(name)), 2);
	assert_string_equal(name, "\xc3\xa9");            /* UTF-8 stands for itself */
	assert_int_equal(tfs_keyname_encode(tfs_slice_make("\0", 1), name, sizeof(name)), 3);
	assert_string_equal(name, "%00");
}

static void test_empty_key(void **state)
{
	char name[8];
	uint8_t back[8];

	assert_int_equal(tfs_keyname_encode(tfs_slice_make(NULL, 0), name, sizeof(name)), 1);
	assert_string_equal(name, "%");
	assert_int_equal(tfs_keyname_decode("%", 1, back, sizeof(back)), 0);
	assert_int_equal(tfs_keyname_len(tfs_slice_make(NULL, 0)), 1);
	/* "%25" is the key "%", not the empty key. */
	assert_int_equal(tfs_keyname_decode("%25", 3, back, sizeof(back)), 1);
	assert_int_equal(back[0], '%');
}

static void test_non_canonical_rejected(void **state)
{
	static const char *const bad[] = {
		"",          /* no name */
		"%2e",       /* lower-case hex */
		"%2f",
		"a%2E",      /* a dot escaped where it stands for itself */
		"%41",       /* 'A' needs no escape */
		"%G1",       /* not hex */
		"%4",        /* truncated */
		"ab%",       /* trailing percent */
		"%%",
		".x",        /* raw leading dot */
		".",
		"..",
		"a\x01",     /* raw control byte */
		"a\x7f",
		"a\n",
	};
	uint8_t out[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ssize_t rc = tfs_keyname_decode(bad[i], strlen(bad[i]), out, sizeof(out));
		if (rc != -EINVAL)
			fail_msg("\"%s\" decoded to %zd, expected -EINVAL", bad[i], rc);
		assert_false(tfs_keyname_is_plain(bad[i], strlen(bad[i])));
	}
}

static void test_lengths(void **state)
{
	uint8_t key[100];
	char name[TFS_KEYNAME_MAX + 1];
	uint8_t small[2];

	memset(key, '/', sizeof(key));
	assert_int_equal(tfs_keyname_encode(tfs_slice_make(key, 85), name, sizeof(name)), 255);
	assert_int_equal(tfs_keyname_encode(tfs_slice_make(key, 86), name, sizeof(name)), -ENAMETOOLONG);
	assert_int_equal(tfs_keyname_len(tfs_slice_make(key, 86)), 258);
	memset(key, 'a', sizeof(key));
	assert_int_equal(tfs_keyname_encode(tfs_slice_make(key, 10), name, 10), -ERANGE);
	assert_int_equal(tfs_keyname_encode(tfs_slice_make(key, 10), name, 11), 10);
	assert_int_equal(tfs_keyname_decode("abc", 3, small, sizeof(small)), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_bytes_round_trip),
		cmocka_unit_test(test_all_bytes_in_one_key),
		cmocka_unit_test(test_escapes_are_exact),
		cmocka_unit_test(test_empty_key),
		cmocka_unit_test(test_non_canonical_rejected),
		cmocka_unit_test(test_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
