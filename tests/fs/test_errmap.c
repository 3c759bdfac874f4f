/* test_errmap.c - the one mapping from engine errors to errnos (fs/errmap.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>

#include "engine/types.h"
#include "fs/errmap.h"
#include "io/log.h"

/* Success is 0 and an errno passes through as itself, never collapsed to EIO. */
static void errnos_pass_through(void **state)
{
	static const int errs[] = { ENOENT, EEXIST, ENOTEMPTY, EINVAL, ENAMETOOLONG, EFBIG,
	                            ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EMFILE, ENOMEM, EIO };
	(void)state;
	assert_int_equal(tfs_errno(0, "x"), 0);
	assert_int_equal(tfs_errno(5, "x"), 0);          /* a byte count is no error */
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		assert_int_equal(tfs_errno(-errs[i], "x"), errs[i]);
}

/* Each engine code gets the errno the README promises a user sees. */
static void engine_codes_map_to_their_errnos(void **state)
{
	(void)state;
	assert_int_equal(tfs_errno(TFS_ECORRUPT, "k"), EIO);
	assert_int_equal(tfs_errno(TFS_EDAMAGED, "k"), EIO);
	assert_int_equal(tfs_errno(TFS_EUNSUPPORTED, "k"), EOPNOTSUPP);
	assert_int_equal(tfs_errno(TFS_EREADONLY, "k"), EROFS);
	assert_int_equal(tfs_errno(TFS_ESEQUENCE, "k"), EILSEQ);
	assert_int_equal(tfs_errno(TFS_EFENCED, "k"), EPERM);
	assert_int_equal(tfs_errno(TFS_EREADONLY, NULL), EROFS);   /* no object named */
}

/* A code of the engine's band that errmap does not know is EIO (logged), never
 * an out-of-range "errno" handed to the kernel. */
static void an_unknown_engine_code_is_eio(void **state)
{
	(void)state;
	assert_int_equal(tfs_errno(-4096 - 200, "k"), EIO);
	assert_int_equal(tfs_errno(-100000, NULL), EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(errnos_pass_through),
		cmocka_unit_test(engine_codes_map_to_their_errnos),
		cmocka_unit_test(an_unknown_engine_code_is_eio),
	};
	tfs_log_set_level(TFS_LOG_ERROR);
	return cmocka_run_group_tests_name("errmap", tests, NULL, NULL);
}
