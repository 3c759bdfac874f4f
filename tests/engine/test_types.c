/* test_types.c - the shared vocabulary: tfs_sorted_pos against a linear scan, over
 * every table length up to 40 and every key between, before and after the elements
 * (present and absent), so each index and each insertion point is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/types.h"

static int int_cmp(const void *key, const void *elem)
{
	int k = *(const int *)key, e = *(const int *)elem;

	return (k > e) - (k < e);
}

static void sorted_pos_matches_a_linear_scan(void **state)
{
	(void)state;
	int v[40];

	for (size_t n = 0; n <= 40; n++) {
		for (size_t i = 0; i < n; i++)
			v[i] = (int)(2 * i + 1);  /* odd values: every even key is absent */
		for (int key = -1; key <= (int)(2 * n + 1); key++) {
			size_t want = 0;
			while (want < n && v[want] < key)
				want++;
			bool want_found = want < n && v[want] == key;
			bool found = !want_found;
			size_t got = tfs_sorted_pos(v, n, sizeof(v[0]), &key, int_cmp, &found);
			assert_int_equal(got, want);
			assert_int_equal(found, want_found);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sorted_pos_matches_a_linear_scan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
