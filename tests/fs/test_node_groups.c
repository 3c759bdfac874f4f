/* test_node_groups.c - .groups/GROUP/TOPIC.PARTITION (fs/node_groups.c) through its
 * kind's handlers on a mount without a kernel (tests/fuzz/fz.h): a commit from the
 * shell is refused with EBUSY while the group has members (its coordinator says
 * so), and goes through once it has none, as a broker's simple commit does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/groups/groups.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "tests/fuzz/fz.h"

#define TOPIC "t"
#define GROUP "g"

static int64_t committed(struct tfs_groups *g)
{
	struct tfs_group_offset o;
	int64_t v;

	assert_int_equal(tfs_groups_fetch(g, GROUP, TOPIC, 0, &o), 0);
	v = o.offset;
	tfs_group_offset_release(&o);
	return v;
}

/* Opens the file, writes s, flushes and releases: the flush's errno. */
static int commit_through_file(struct tfs_mount *m, struct tfs_node *n, const char *s)
{
	const struct tfs_node_ops *ops = tfs_kind_ops(n->kind);
	struct fuse_file_info fi;
	struct tfs_fh *fh = fz_open_wronly(m, n, &fi);
	struct fz_reply r = { 0 };
	int err;

	ops->write(fz_req(&r), m, fh, s, strlen(s), 0, &fi);
	fz_reply_check_once(&r, "write");
	assert_int_equal(r.kind, FZ_REPLY_WRITE);
	fz_reply_reset(&r);
	ops->flush(fz_req(&r), m, fh, &fi);
	fz_reply_check_once(&r, "flush");
	assert_int_equal(r.kind, FZ_REPLY_ERR);
	err = r.err;
	fz_reply_reset(&r);
	fz_release(m, fh, &fi);
	return err;
}

static void commit_refused_while_members(void **state)
{
	char *dir;
	struct tfs_mount *m = fz_mount_open(&dir);
	struct tfs_topic *t = fz_topic(m, TOPIC, INT64_MAX);
	struct tfs_groups *g = tfs_engine_groups(m->engine);
	struct tfs_group_commit c = { TOPIC, 0, 3, -1, { NULL, 0 } };
	struct tfs_node_ident id = { .kind = TFS_NODE_GROUP_FILE, .topic = t,
	                             .topic_name = TOPIC, .partition = 0,
	                             .key = { (const uint8_t *)GROUP, strlen(GROUP) } };
	struct tfs_node *n = NULL;

	(void)state;
	assert_non_null(g);
	assert_int_equal(tfs_groups_commit(g, GROUP, -1, &c, 1, -1), 0);
	assert_int_equal(tfs_inode_lookup(m->inodes, &id, &n), 0);
	assert_int_equal(commit_through_file(m, n, "4\n"), 0);
	assert_int_equal(committed(g), 4);
	/* a consumer group at work: the shell's commit is refused, nothing changes */
	assert_int_equal(tfs_groups_set_state(g, GROUP, TFS_GROUP_STABLE, 2, 1), 0);
	assert_int_equal(commit_through_file(m, n, "9\n"), EBUSY);
	assert_int_equal(committed(g), 4);
	/* its members gone, the commit goes through */
	assert_int_equal(tfs_groups_set_state(g, GROUP, TFS_GROUP_EMPTY, 0, 1), 0);
	assert_int_equal(commit_through_file(m, n, "9\n"), 0);
	assert_int_equal(committed(g), 9);
	fz_node_drop(m, n);
	tfs_topic_unref(t);
	fz_mount_close(m, dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(commit_refused_while_members),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
