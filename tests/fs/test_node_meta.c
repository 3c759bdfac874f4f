/* test_node_meta.c - the .topicfs files and the partition's live_keys attribute
 * (fs/node_meta.c, fs/xattr.c) on a mount object without a kernel
 * (tests/fuzz/fz.h): what they show of a partition whose key directory failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/log/partition_log.h"
#include "fs/inode.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "fs/xattr.h"
#include "tests/fuzz/fz.h"
#include "tests/t_util.h"

#define TOPIC "meta"
#define META_METRICS 0          /* .topicfs/ files by index (node_meta.c) */
#define META_STATUS 1
#define READ_CAP (1u << 20)
#define OOM_BATCH 1000u

/* The text of .topicfs/<index> as one open and one read give it (malloc'd). */
static char *read_meta(struct tfs_mount *m, int index)
{
	struct tfs_node_ident id = { .kind = TFS_NODE_META_FILE, .partition = -1, .num = index };
	struct tfs_node *n = NULL;
	struct fuse_file_info fi = { .flags = O_RDONLY };
	struct fz_reply r = { 0 };
	struct tfs_fh *fh;
	char *text;

	if (tfs_inode_lookup(m->inodes, &id, &n) != 0)
		return NULL;
	tfs_kind_meta_file.open(fz_req(&r), m, n, &fi);
	fz_reply_check_once(&r, "open");
	if (r.kind != FZ_REPLY_OPEN) {
		fz_node_drop(m, n);
		return NULL;
	}
	fi.fh = r.fh;
	fh = tfs_fh_of(&fi);
	fz_reply_reset(&r);
	tfs_kind_meta_file.read(fz_req(&r), m, fh, READ_CAP, 0, &fi);
	fz_reply_check_once(&r, "read");
	text = r.kind == FZ_REPLY_BUF ? strndup((const char *)r.buf, r.buf_len) : NULL;
	fz_reply_reset(&r);
	tfs_fh_put(m, fh);                /* what RELEASE does for a kind without one */
	fz_node_drop(m, n);
	return text;
}

/* getxattr user.topicfs.NAME of n: 0 with the value in buf, or the errno. */
static int get_attr(struct tfs_mount *m, struct tfs_node *n, const char *name, char *buf,
                    size_t cap)
{
	char full[128];
	struct fz_reply r = { 0 };

	snprintf(full, sizeof(full), TFS_XATTR_PREFIX "%s", name);
	tfs_xattr_get(fz_req(&r), m, n, full, cap - 1);
	fz_reply_check_once(&r, "getxattr");
	if (r.kind == FZ_REPLY_ERR)
		return r.err ? r.err : EPROTO;   /* 0 would be no value at all */
	if (r.kind != FZ_REPLY_BUF || r.buf_len >= cap) {
		fz_reply_reset(&r);
		return EPROTO;
	}
	memcpy(buf, r.buf, r.buf_len);
	buf[r.buf_len] = '\0';
	fz_reply_reset(&r);
	return 0;
}

static void a_partition_shows_its_live_keys(void **state)
{
	char *dir, buf[64], *metrics, *status;
	struct tfs_mount *m = fz_mount_open(&dir);
	struct tfs_topic *t = fz_topic(m, TOPIC, INT64_MAX);
	struct tfs_node *part = fz_node(m, TFS_NODE_PARTITION, t, 0);
	struct tfs_append_rec recs[3] = {
		{ .key = tfs_slice_make("a", 1), .value = tfs_slice_make("1", 1) },
		{ .key = tfs_slice_make("b", 1), .value = tfs_slice_make("2", 1) },
		{ .key = tfs_slice_make("a", 1), .value = tfs_slice_make("3", 1) },
	};

	(void)state;
	assert_int_equal(tfs_plog_append(tfs_topic_partition(t, 0), recs, 3, false, NULL, NULL), 0);
	assert_int_equal(get_attr(m, part, "live_keys", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2");
	metrics = read_meta(m, META_METRICS);
	status = read_meta(m, META_STATUS);
	assert_non_null(metrics);
	assert_non_null(status);
	assert_non_null(strstr(metrics, "topicfs_partition_live_keys{topic=\"" TOPIC "\",partition=\"0\"} 2\n"));
	assert_non_null(strstr(metrics, "topicfs_partition_keys_failed{topic=\"" TOPIC "\",partition=\"0\"} 0\n"));
	assert_non_null(strstr(status, " 2 live keys, "));
	assert_null(strstr(status, "KEY DIRECTORY FAILED"));
	free(metrics);
	free(status);
	fz_node_drop(m, part);
	tfs_topic_unref(t);
	fz_mount_close(m, dir);
}

#ifndef T_SHADOW_SANITIZER
enum { OOM_OK, OOM_SETUP, OOM_NEVER, OOM_ATTR, OOM_METRICS, OOM_STATUS };

/* Appends new keys under a bound on the address space until the key directory
 * fails to take them; then what the mount shows of the partition. */
static int failed_keys_child(uintptr_t unused)
{
	static char keys[OOM_BATCH][16];
	struct tfs_append_rec recs[OOM_BATCH];
	struct tfs_keyinfo info;
	char *dir, buf[64], *metrics = NULL, *status = NULL;
	struct tfs_mount *m = fz_mount_open(&dir);
	struct tfs_topic *t = fz_topic(m, TOPIC, INT64_MAX);
	struct tfs_plog *pl = tfs_topic_partition(t, 0);
	struct tfs_node *part = fz_node(m, TFS_NODE_PARTITION, t, 0);
	uint32_t next = 0;
	int failures = 0, rc = OOM_OK;
	bool eio = false;

	(void)unused;
	/* every way out goes through done: the child _exits, so the mount's
	 * scratch directory is removed there or not at all */
	if (t_limit_address_space(64u << 20)) {
		rc = T_SKIP_STATUS;
		goto done;
	}
	while (!eio && next < 50000000u && failures < 100) {
		for (uint32_t i = 0; i < OOM_BATCH; i++) {
			int len = snprintf(keys[i], sizeof(keys[i]), "k%u", next + i);
			recs[i] = (struct tfs_append_rec){ .key = tfs_slice_make(keys[i], (size_t)len),
			                                   .value = tfs_slice_make(keys[i], (size_t)len) };
		}
		if (tfs_plog_append(pl, recs, OOM_BATCH, false, NULL, NULL) != 0) {
			failures++;
			continue;
		}
		failures = 0;
		eio = tfs_plog_lookup(pl, recs[OOM_BATCH - 1].key, &info) == -EIO;
		next += OOM_BATCH;
	}
	if (t_unlimit_address_space()) {
		rc = OOM_SETUP;
		goto done;
	}
	if (!eio) {
		rc = OOM_NEVER;
		goto done;
	}
	/* the count is too low now: none is shown as the partition's */
	if (get_attr(m, part, "live_keys", buf, sizeof(buf)) != EIO)
		rc = OOM_ATTR;
	metrics = read_meta(m, META_METRICS);
	status = read_meta(m, META_STATUS);
	if (rc == OOM_OK &&
	    (!metrics ||
	     !strstr(metrics, "topicfs_partition_live_keys{topic=\"" TOPIC "\",partition=\"0\"} NaN\n") ||
	     !strstr(metrics, "topicfs_partition_keys_failed{topic=\"" TOPIC "\",partition=\"0\"} 1\n")))
		rc = OOM_METRICS;
	if (rc == OOM_OK &&
	    (!status || !strstr(status, " 0 live keys (1 partition unknown), ") ||
	     !strstr(status, TOPIC "/0: KEY DIRECTORY FAILED (out of memory)")))
		rc = OOM_STATUS;
	if (rc != OOM_OK)
		fprintf(stderr, "failed_keys_child: %d\n--- metrics\n%s\n--- status\n%s\n", rc,
		        metrics ? metrics : "(none)", status ? status : "(none)");
done:
	free(metrics);
	free(status);
	fz_node_drop(m, part);
	tfs_topic_unref(t);
	fz_mount_close(m, dir);
	return rc;
}
#endif

/* A key directory that missed an update counts too few keys: the attribute fails
 * with EIO, as the key reads do, and the metrics and the status say so instead
 * of showing the count. */
static void a_failed_key_directory_shows_no_count(void **state)
{
	(void)state;
#ifdef T_SHADOW_SANITIZER
	skip();
#else
	t_expect_child(failed_keys_child, 0, OOM_OK);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_partition_shows_its_live_keys),
		cmocka_unit_test(a_failed_key_directory_shows_no_count),
	};
	fz_quiet_logs();
	return cmocka_run_group_tests_name("node_meta", tests, NULL, NULL);
}
