/* test_xattr.c - the user.topicfs.* attributes (fs/xattr.c) on a mount object
 * without a kernel (tests/fuzz/fz.h): which names exist where, how values are
 * checked, and what a refusal leaves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "engine/engine.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "fs/xattr.h"
#include "tests/fuzz/fz.h"

#define TOPIC "attrs"
#define P TFS_XATTR_PREFIX

struct fx {
	struct tfs_mount *m;
	char *dir;
	struct tfs_topic *t;
	struct tfs_node *topic, *part;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->m = fz_mount_open(&f->dir);
	f->t = fz_topic(f->m, TOPIC, INT64_MAX);
	f->topic = fz_node(f->m, TFS_NODE_TOPIC, f->t, -1);
	f->part = fz_node(f->m, TFS_NODE_PARTITION, f->t, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fz_node_drop(f->m, f->part);
	fz_node_drop(f->m, f->topic);
	tfs_topic_unref(f->t);
	fz_mount_close(f->m, f->dir);
	free(f);
	return 0;
}

static int set(struct fx *f, struct tfs_node *n, const char *name, const char *value, int flags)
{
	struct fz_reply r = { 0 };

	tfs_xattr_set(fz_req(&r), f->m, n, name, value, strlen(value), flags);
	fz_reply_check_once(&r, "setxattr");
	assert_int_equal(r.kind, FZ_REPLY_ERR);
	return r.err;
}

static int del(struct fx *f, struct tfs_node *n, const char *name)
{
	struct fz_reply r = { 0 };

	tfs_xattr_remove(fz_req(&r), f->m, n, name);
	fz_reply_check_once(&r, "removexattr");
	assert_int_equal(r.kind, FZ_REPLY_ERR);
	return r.err;
}

/* getxattr as the kernel asks it: the size, then the bytes into buf (NUL added);
 * a buffer one byte short is ERANGE. 0 or the errno. */
static int get(struct fx *f, struct tfs_node *n, const char *name, char *buf, size_t cap)
{
	struct fz_reply r = { 0 };
	size_t size;

	tfs_xattr_get(fz_req(&r), f->m, n, name, 0);
	fz_reply_check_once(&r, "getxattr size");
	if (r.kind == FZ_REPLY_ERR)
		return r.err;
	assert_int_equal(r.kind, FZ_REPLY_XATTR);
	size = r.count;
	assert_true(size < cap);
	tfs_xattr_get(fz_req(&r), f->m, n, name, size);
	fz_reply_check_once(&r, "getxattr");
	assert_int_equal(r.kind, FZ_REPLY_BUF);
	assert_int_equal(r.buf_len, size);
	memcpy(buf, r.buf, size);
	buf[size] = '\0';
	fz_reply_reset(&r);
	if (size > 1) {                     /* (a size of 0 is the size query) */
		tfs_xattr_get(fz_req(&r), f->m, n, name, size - 1);
		fz_reply_check_once(&r, "getxattr short");
		assert_int_equal(r.kind, FZ_REPLY_ERR);
		assert_int_equal(r.err, ERANGE);
	}
	return 0;
}

/* A topic config is read and written by its Kafka name; the stored form is what
 * reads back, and a trailing newline (echo) is forgiven. */
static void a_config_reads_back_as_written(void **state)
{
	struct fx *f = *state;
	char v[64], def[64];

	assert_int_equal(tfs_topic_config_get(&f->m->topic_defaults, "segment.bytes", def,
	                                      sizeof(def)), 0);
	assert_string_not_equal(def, "2097152");
	assert_int_equal(set(f, f->topic, P "segment.bytes", "1048576\n", 0), 0);
	assert_int_equal(get(f, f->topic, P "segment.bytes", v, sizeof(v)), 0);
	assert_string_equal(v, "1048576");
	assert_int_equal(set(f, f->topic, P "segment.bytes", "2097152", XATTR_REPLACE), 0);
	assert_int_equal(get(f, f->topic, P "segment.bytes", v, sizeof(v)), 0);
	assert_string_equal(v, "2097152");
	/* removing it puts the mount's default back */
	assert_int_equal(del(f, f->topic, P "segment.bytes"), 0);
	assert_int_equal(get(f, f->topic, P "segment.bytes", v, sizeof(v)), 0);
	assert_string_equal(v, def);
}

/* A bad value is EINVAL and changes nothing; XATTR_CREATE of a config (which
 * always has a value) is EEXIST. */
static void a_bad_value_changes_nothing(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = { "lots", "-1", "", "1048576 ", "12\n\n", "1\0002" };
	char v[64];

	assert_int_equal(set(f, f->topic, P "segment.bytes", "1048576", 0), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(set(f, f->topic, P "segment.bytes", bad[i], 0), EINVAL);
	assert_int_equal(set(f, f->topic, P "cleanup.policy", "keep", 0), EINVAL);
	assert_int_equal(set(f, f->topic, P "segment.bytes", "2097152", XATTR_CREATE), EEXIST);
	assert_int_equal(get(f, f->topic, P "segment.bytes", v, sizeof(v)), 0);
	assert_string_equal(v, "1048576");
	{
		/* a value longer than any config's */
		char longv[300];
		memset(longv, '1', sizeof(longv) - 1);
		longv[sizeof(longv) - 1] = '\0';
		assert_int_equal(set(f, f->topic, P "segment.bytes", longv, 0), EINVAL);
	}
}

/* Names: outside user.topicfs. or unknown, writing is ENOTSUP (cp -a stays
 * quiet) and reading ENODATA; a name of another node kind is not there; a
 * read-only attribute cannot be written. */
static void names_that_do_not_apply_are_refused(void **state)
{
	struct fx *f = *state;
	char v[64];

	assert_int_equal(get(f, f->topic, "security.capability", v, sizeof(v)), ENODATA);
	assert_int_equal(get(f, f->topic, "user.other", v, sizeof(v)), ENODATA);
	assert_int_equal(get(f, f->topic, P "no.such.config", v, sizeof(v)), ENODATA);
	assert_int_equal(set(f, f->topic, "user.other", "1", 0), ENOTSUP);
	assert_int_equal(set(f, f->topic, P "no.such.config", "1", 0), ENOTSUP);
	assert_int_equal(del(f, f->topic, P "no.such.config"), ENOTSUP);
	/* a partition attribute on the topic, a topic config on the partition */
	assert_int_equal(get(f, f->topic, P "log_end_offset", v, sizeof(v)), ENODATA);
	assert_int_equal(get(f, f->part, P "segment.bytes", v, sizeof(v)), ENODATA);
	assert_int_equal(get(f, f->part, P "log_end_offset", v, sizeof(v)), 0);
	assert_string_equal(v, "0");
	assert_int_equal(set(f, f->part, P "log_end_offset", "5", 0), ENOTSUP);
	assert_int_equal(get(f, f->part, P "log_end_offset", v, sizeof(v)), 0);
	assert_string_equal(v, "0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(a_config_reads_back_as_written, setup, teardown),
		cmocka_unit_test_setup_teardown(a_bad_value_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(names_that_do_not_apply_are_refused, setup, teardown),
	};
	return cmocka_run_group_tests_name("xattr", tests, NULL, NULL);
}
