/* fuzz_xattr.c - values written as user.topicfs.* attributes (fs/xattr.c): topic
 * configs through the validator of engine/topic_config.c, and the partition's
 * `roll` and `clean`, through tfs_xattr_set / _get / _remove on a real mount
 * object.
 *
 * Input layout: [op][name][NUL][value]. op bits 0-1: 0 setxattr on the topic,
 * 1 setxattr on partition 0, 2 removexattr on the topic, 3 getxattr on the topic;
 * bit 2 XATTR_CREATE, bit 3 XATTR_REPLACE; bit 4 the name is used as it is
 * (otherwise "user.topicfs." goes before it). Each input starts from the mount's
 * default config.
 *
 * Properties:
 *   - every call replies once;
 *   - a refused set or remove changes nothing: neither the config nor the bytes
 *     of the topic's config file;
 *   - an accepted config set reads back (getxattr) as a value that, set again,
 *     is accepted and changes nothing (the stored form is canonical), and the
 *     file on disk loads to the same config as the topic holds;
 *   - getxattr's size query and its read agree, and a buffer one byte short is
 *     ERANGE;
 *   - roll and clean append nothing, and every key still reads its newest value.
 */
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

#define TOPIC "x"
#define TOPIC_RECREATE_BYTES (16 << 20)
#define NAME_MAX_BYTES 255              /* an xattr name the kernel passes */
#define CONFIG_TEXT_MAX 64              /* every config value prints shorter */

static struct tfs_mount *mnt;
static char *mnt_dir;

/* The topic's config as text, name by name, and its file's bytes. */
struct snap {
	char values[32][CONFIG_TEXT_MAX];
	size_t nvalues;
	uint8_t *file;
	long file_len;
};

static void snap_config(const struct tfs_topic_config *c, struct snap *s)
{
	const char *const *names = tfs_topic_config_names();

	s->nvalues = 0;
	for (size_t i = 0; names[i]; i++) {
		int rc;
		FZ_CHECK(i < 32, "more config names than the harness holds");
		rc = tfs_topic_config_get(c, names[i], s->values[i], CONFIG_TEXT_MAX);
		FZ_CHECK(rc == 0, "get of %s: %s", names[i], tfs_strerror(rc));
		s->nvalues++;
	}
}

static void snap_take(struct tfs_topic *t, struct snap *s)
{
	struct tfs_topic_config c;
	char path[4096];

	tfs_topic_get_config(t, &c);
	snap_config(&c, s);
	snprintf(path, sizeof(path), "%s/topics/%s", mnt_dir, TOPIC);
	s->file_len = fz_read_file(path, &s->file);
}

static bool snap_same_config(const struct snap *a, const struct snap *b)
{
	if (a->nvalues != b->nvalues)
		return false;
	for (size_t i = 0; i < a->nvalues; i++)
		if (strcmp(a->values[i], b->values[i]))
			return false;
	return true;
}

static bool snap_same(const struct snap *a, const struct snap *b)
{
	return snap_same_config(a, b) && a->file_len == b->file_len &&
	       (a->file_len <= 0 || memcmp(a->file, b->file, (size_t)a->file_len) == 0);
}

static void snap_release(struct snap *s)
{
	free(s->file);
	s->file = NULL;
}

/* Puts back the mount's default of every config the last input changed. */
static void reset_config(struct tfs_topic *t)
{
	const char *const *names = tfs_topic_config_names();
	struct tfs_topic_config c;

	tfs_topic_get_config(t, &c);
	for (size_t i = 0; names[i]; i++) {
		char def[CONFIG_TEXT_MAX], cur[CONFIG_TEXT_MAX];
		int rc = tfs_topic_config_get(&mnt->topic_defaults, names[i], def, sizeof(def));
		FZ_CHECK(rc == 0, "default of %s", names[i]);
		tfs_topic_config_get(&c, names[i], cur, sizeof(cur));
		if (strcmp(def, cur) == 0)
			continue;
		rc = tfs_topic_set_config(t, names[i], def);
		FZ_CHECK(rc == 0, "reset of %s to %s: %s", names[i], def, tfs_strerror(rc));
	}
}

static void call_set(struct tfs_node *n, const char *name, const void *value, size_t size,
                     int flags, struct fz_reply *r)
{
	tfs_xattr_set(fz_req(r), mnt, n, name, value, size, flags);
	fz_reply_check_once(r, "setxattr");
	FZ_CHECK(r->kind == FZ_REPLY_ERR, "setxattr replied kind %d", (int)r->kind);
}

/* getxattr as the kernel asks it: the size, then the bytes. 0 with *out
 * (malloc'd, NUL-terminated) or the positive errno. */
static int call_get(struct tfs_node *n, const char *name, char **out, size_t *len)
{
	struct fz_reply r = { 0 };
	size_t size;
	int err = 0;

	*out = NULL;
	tfs_xattr_get(fz_req(&r), mnt, n, name, 0);
	fz_reply_check_once(&r, "getxattr size");
	if (r.kind == FZ_REPLY_ERR) {
		FZ_CHECK(r.err != 0, "getxattr of the size replied success without a size");
		err = r.err;
		goto out;
	}
	FZ_CHECK(r.kind == FZ_REPLY_XATTR, "getxattr size replied kind %d", (int)r.kind);
	size = r.count;
	tfs_xattr_get(fz_req(&r), mnt, n, name, size);
	fz_reply_check_once(&r, "getxattr");
	FZ_CHECK(r.kind == FZ_REPLY_BUF && r.buf_len == size,
	         "getxattr of %zu bytes replied kind %d with %zu bytes", size, (int)r.kind,
	         r.buf_len);
	*out = (char *)r.buf;
	*len = r.buf_len;
	r.buf = NULL;
	if (size > 1) {                     /* (a size of 0 is the size query) */
		tfs_xattr_get(fz_req(&r), mnt, n, name, size - 1);
		fz_reply_check_once(&r, "getxattr short");
		FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err == ERANGE,
		         "getxattr into a short buffer replied kind %d err %d", (int)r.kind, r.err);
	}
out:
	fz_reply_reset(&r);
	return err;
}

static bool is_config_name(const char *sub)
{
	for (const char *const *n = tfs_topic_config_names(); *n; n++)
		if (!strcmp(*n, sub))
			return true;
	return false;
}

/* An accepted config set: canonical read-back, and the file agrees. */
static void check_accepted_config(struct tfs_topic *t, struct tfs_node *n, const char *name)
{
	struct snap now = { 0 }, again = { 0 }, loaded = { 0 };
	struct tfs_topic_config c = mnt->topic_defaults;
	struct tfs_topic_meta meta = { 0 };
	struct fz_reply r = { 0 };
	char path[4096], *v;
	size_t vlen;
	int err, rc;

	err = call_get(n, name, &v, &vlen);
	FZ_CHECK(err == 0, "an accepted config %s does not read back: %d", name, err);
	snap_take(t, &now);
	call_set(n, name, v, vlen, 0, &r);
	FZ_CHECK(r.err == 0, "the read-back value \"%s\" of %s is refused: %d", v, name, r.err);
	snap_take(t, &again);
	FZ_CHECK(snap_same_config(&now, &again), "setting %s to its read-back \"%s\" changed it",
	         name, v);
	snprintf(path, sizeof(path), "%s/topics/%s", mnt_dir, TOPIC);
	rc = tfs_topic_config_load(path, &c, &meta);
	FZ_CHECK(rc == 0, "the config file no longer loads: %s", tfs_strerror(rc));
	snap_config(&c, &loaded);
	FZ_CHECK(snap_same_config(&now, &loaded), "the file holds another config than the topic");
	free(v);
	fz_reply_reset(&r);
	snap_release(&now);
	snap_release(&again);
}

/* roll / clean: no record added, each key reads its newest value. */
static void check_partition(struct tfs_plog *pl, tfs_offset_t end_before, int gen)
{
	struct tfs_plog_stats st;
	static const char *const keys[2] = { "a", "b" };

	tfs_plog_stats(pl, &st);
	FZ_CHECK(st.log_end_offset == end_before, "roll or clean moved the log end %lld -> %lld",
	         (long long)end_before, (long long)st.log_end_offset);
	for (int i = 0; i < 2; i++) {
		struct tfs_record_copy rec;
		char want[32];
		int rc = tfs_plog_read_key(pl, tfs_slice_make(keys[i], 1), &rec);
		snprintf(want, sizeof(want), "%s%d", keys[i], gen);
		FZ_CHECK(rc == 0, "key %s: %s", keys[i], tfs_strerror(rc));
		FZ_CHECK(rec.value_len == strlen(want) && memcmp(rec.value, want, rec.value_len) == 0,
		         "key %s does not read its newest value", keys[i]);
		tfs_record_copy_release(&rec);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int gen;
	struct fz_in in = { data, size };
	uint8_t op = fz_u8(&in);
	const uint8_t *nul = memchr(in.p, 0, in.len);
	size_t nlen = nul ? (size_t)(nul - in.p) : in.len, vlen;
	char name[sizeof(TFS_XATTR_PREFIX) + NAME_MAX_BYTES];
	const uint8_t *value;
	int flags = (op & 4 ? XATTR_CREATE : 0) | (op & 8 ? XATTR_REPLACE : 0);
	struct tfs_topic *t;
	struct tfs_node *n;
	struct snap before = { 0 }, after = { 0 };
	struct fz_reply r = { 0 };
	tfs_offset_t end_before = 0;
	const char *sub;

	if (!mnt)
		mnt = fz_mount_open(&mnt_dir);   /* one mount for the whole run */

	if (nlen > NAME_MAX_BYTES)
		return 0;                       /* the kernel refuses longer names */
	snprintf(name, sizeof(name), "%s%.*s", op & 16 ? "" : TFS_XATTR_PREFIX, (int)nlen,
	         (const char *)in.p);
	if (strlen(name) == 0)
		return 0;
	fz_take(&in, nul ? nlen + 1 : nlen, &vlen);
	value = fz_take(&in, in.len, &vlen);
	sub = strncmp(name, TFS_XATTR_PREFIX, strlen(TFS_XATTR_PREFIX)) == 0 ?
	      name + strlen(TFS_XATTR_PREFIX) : NULL;

	t = fz_topic(mnt, TOPIC, TOPIC_RECREATE_BYTES);
	reset_config(t);
	if ((op & 3) == 1) {
		struct tfs_plog *pl = tfs_topic_partition(t, 0);
		struct tfs_plog_stats st;
		char va[16], vb[16];
		struct tfs_append_rec recs[2] = { 0 };
		int rc;
		gen++;
		snprintf(va, sizeof(va), "a%d", gen);
		snprintf(vb, sizeof(vb), "b%d", gen);
		recs[0].key = tfs_slice_make("a", 1);
		recs[0].value = tfs_slice_make(va, strlen(va));
		recs[1].key = tfs_slice_make("b", 1);
		recs[1].value = tfs_slice_make(vb, strlen(vb));
		rc = tfs_plog_append(pl, recs, 2, false, NULL, NULL);
		FZ_CHECK(rc == 0, "append: %s", tfs_strerror(rc));
		tfs_plog_stats(pl, &st);
		end_before = st.log_end_offset;
		n = fz_node(mnt, TFS_NODE_PARTITION, t, 0);
	} else {
		n = fz_node(mnt, TFS_NODE_TOPIC, t, -1);
	}
	snap_take(t, &before);

	switch (op & 3) {
	case 0:
	case 1:
		call_set(n, name, value, vlen, flags, &r);
		break;
	case 2:
		tfs_xattr_remove(fz_req(&r), mnt, n, name);
		fz_reply_check_once(&r, "removexattr");
		FZ_CHECK(r.kind == FZ_REPLY_ERR, "removexattr replied kind %d", (int)r.kind);
		break;
	case 3: {
		char *v = NULL;
		size_t len;
		call_get(n, name, &v, &len);
		free(v);
		break;
	}
	}

	snap_take(t, &after);
	if ((op & 3) == 1 && r.err == 0 && sub && (!strcmp(sub, "roll") || !strcmp(sub, "clean")))
		check_partition(tfs_topic_partition(t, 0), end_before, gen);
	if ((op & 3) != 3 && r.err != 0)
		FZ_CHECK(snap_same(&before, &after), "a refused %s of %s (errno %d) changed the config",
		         (op & 3) == 2 ? "remove" : "set", name, r.err);
	if ((op & 3) == 0 && r.err == 0) {
		FZ_CHECK(sub && is_config_name(sub), "a set of %s was accepted", name);
		check_accepted_config(t, n, name);
	}
	if ((op & 3) == 3)
		FZ_CHECK(snap_same(&before, &after), "getxattr changed the config");

	fz_reply_reset(&r);
	snap_release(&before);
	snap_release(&after);
	fz_node_drop(mnt, n);
	tfs_topic_unref(t);
	return 0;
}
