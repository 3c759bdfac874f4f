/* test_node_control.c - the line parser of T/P/.put and T/P/.append
 * (fs/node_control.c), through the kinds' own handlers on a mount object without
 * a kernel (tests/fuzz/fz.h): what a write appends, and what it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "tests/fuzz/fz.h"

#define TOPIC "lines"

struct fx {
	struct tfs_mount *m;
	char *dir;
	struct tfs_topic *t;
	struct tfs_plog *pl;
	struct tfs_node *n;
	const struct tfs_node_ops *ops;
	struct tfs_fh *fh;
	struct fuse_file_info fi;
};

static void open_kind(struct fx *f, enum tfs_node_kind kind)
{
	f->n = fz_node(f->m, kind, f->t, 0);
	f->ops = tfs_kind_ops(f->n->kind);
	f->fh = fz_open_wronly(f->m, f->n, &f->fi);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->m = fz_mount_open(&f->dir);
	f->t = fz_topic(f->m, TOPIC, INT64_MAX);
	f->pl = tfs_topic_partition(f->t, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->fh)
		fz_release(f->m, f->fh, &f->fi);
	if (f->n)
		fz_node_drop(f->m, f->n);
	tfs_topic_unref(f->t);
	fz_mount_close(f->m, f->dir);
	free(f);
	return 0;
}

/* One write(2): 0 with the byte count checked, or the errno it failed with. */
static int write_str(struct fx *f, const char *s)
{
	struct fz_reply r = { 0 };
	int err;

	f->ops->write(fz_req(&r), f->m, f->fh, s, strlen(s), 0, &f->fi);
	fz_reply_check_once(&r, "write");
	if (r.kind == FZ_REPLY_WRITE) {
		assert_int_equal(r.count, strlen(s));
		err = 0;
	} else {
		assert_int_equal(r.kind, FZ_REPLY_ERR);
		err = r.err;
	}
	fz_reply_reset(&r);
	return err;
}

static int flush(struct fx *f)
{
	struct fz_reply r = { 0 };
	int err;

	f->ops->flush(fz_req(&r), f->m, f->fh, &f->fi);
	fz_reply_check_once(&r, "flush");
	assert_int_equal(r.kind, FZ_REPLY_ERR);
	err = r.err;
	fz_reply_reset(&r);
	return err;
}

/* The record at offset has this key (NULL: keyless) and value. */
static void record_is(struct fx *f, tfs_offset_t offset, const char *key, const char *value)
{
	struct tfs_record_copy rc;

	assert_int_equal(tfs_plog_read_offset(f->pl, offset, &rc), 0);
	if (key) {
		assert_false(rc.key_null);
		assert_int_equal(rc.key_len, strlen(key));
		assert_memory_equal(rc.key, key, rc.key_len);
	} else {
		assert_true(rc.key_null);
	}
	assert_int_equal(rc.value_len, strlen(value));
	if (rc.value_len)
		assert_memory_equal(rc.value, value, rc.value_len);
	tfs_record_copy_release(&rc);
}

static void put_lines_become_keyed_records(void **state)
{
	struct fx *f = *state;

	open_kind(f, TFS_NODE_PUT);
	assert_int_equal(write_str(f, "a\t1\nb\tx\ty\n"), 0);
	assert_int_equal(fz_log_end(f->pl), 2);
	record_is(f, 0, "a", "1");
	record_is(f, 1, "b", "x\ty");                  /* the value is the raw rest */
	/* a key is spelled as its file name: %09 is a tab, %2F a slash */
	assert_int_equal(write_str(f, "t%09ab%2Fc\tv\nempty\t\n"), 0);
	record_is(f, 2, "t\tab/c", "v");
	record_is(f, 3, "empty", "");
	assert_int_equal(fz_log_end(f->pl), 4);
}

/* A line split across writes waits in the handle; the last one without a
 * newline is appended at FLUSH. */
static void a_partial_line_waits_for_its_rest(void **state)
{
	struct fx *f = *state;

	open_kind(f, TFS_NODE_PUT);
	assert_int_equal(write_str(f, "ke"), 0);
	assert_int_equal(write_str(f, "y\tval"), 0);
	assert_int_equal(fz_log_end(f->pl), 0);
	assert_int_equal(write_str(f, "ue\nlast\tone"), 0);
	assert_int_equal(fz_log_end(f->pl), 1);
	record_is(f, 0, "key", "value");
	assert_int_equal(flush(f), 0);
	assert_int_equal(fz_log_end(f->pl), 3);    /* and the transaction's COMMIT */
	record_is(f, 1, "last", "one");
}

/* One write is one unit: a malformed line refuses it whole, with the errno of
 * the fault, and appends none of its lines. */
static void a_bad_line_refuses_the_whole_write(void **state)
{
	struct fx *f = *state;
	char *big;
	size_t n = 2 << 20;

	open_kind(f, TFS_NODE_PUT);
	assert_int_equal(write_str(f, "ok\t1\nno tab here\nok2\t2\n"), EINVAL);
	assert_int_equal(write_str(f, "ok\t1\n\t2\n"), EINVAL);          /* empty key */
	assert_int_equal(write_str(f, "ok\t1\nbad%zz\t2\n"), EINVAL);    /* bad escape */
	assert_int_equal(fz_log_end(f->pl), 0);
	big = malloc(n + 1);
	memset(big, 'v', n);
	memcpy(big, "k\t", 2);
	big[n - 1] = '\n';
	big[n] = '\0';
	assert_int_equal(write_str(f, big), EFBIG);          /* over max.message.bytes */
	free(big);
	assert_int_equal(fz_log_end(f->pl), 0);
	assert_int_equal(write_str(f, "after\tgood\n"), 0);  /* the handle goes on */
	record_is(f, 0, "after", "good");
}

static void append_lines_become_keyless_records(void **state)
{
	struct fx *f = *state;

	open_kind(f, TFS_NODE_APPEND);
	assert_int_equal(write_str(f, "one\ntwo\tcols\n\nthr"), 0);
	assert_int_equal(fz_log_end(f->pl), 3);
	record_is(f, 0, NULL, "one");
	record_is(f, 1, NULL, "two\tcols");
	record_is(f, 2, NULL, "");                          /* an empty line is a record */
	assert_int_equal(flush(f), 0);
	record_is(f, 3, NULL, "thr");
}

int main(void)
{
#define ON_A_FRESH_TOPIC(test) cmocka_unit_test_setup_teardown(test, setup, teardown)
	const struct CMUnitTest tests[] = {
		ON_A_FRESH_TOPIC(put_lines_become_keyed_records),
		ON_A_FRESH_TOPIC(a_partial_line_waits_for_its_rest),
		ON_A_FRESH_TOPIC(a_bad_line_refuses_the_whole_write),
		ON_A_FRESH_TOPIC(append_lines_become_keyless_records),
	};
	return cmocka_run_group_tests_name("node_control", tests, NULL, NULL);
}
