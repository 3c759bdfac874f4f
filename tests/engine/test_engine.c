/* test_engine.c - a data directory: topics, partitions, config persistence,
 * crash-safe creation and deletion, broker-copied partitions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cleaner/cleaner.h"
#include "engine/engine.h"
#include "io/log.h"
#include "tests/t_util.h"

struct fx {
	char *dir;
	struct tfs_engine_config cfg;
	struct tfs_engine *e;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tfs_log_set_level(TFS_LOG_ERROR);
	f->dir = t_mkdtemp("engine");
	tfs_engine_config_defaults(&f->cfg);
	f->cfg.data_dir = f->dir;
	f->cfg.io_kind = tfs_io_kind_from_env();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	tfs_engine_close(f->e);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void open_engine(struct fx *f)
{
	tfs_engine_close(f->e);
	f->e = NULL;
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), 0);
}

static void put(struct tfs_plog *pl, const char *k, const char *v)
{
	struct tfs_append_rec r = { 0 };
	r.key = tfs_slice_make(k, strlen(k));
	r.value = tfs_slice_make(v, v ? strlen(v) : 0);
	r.value_null = v == NULL;
	assert_int_equal(tfs_plog_append(pl, &r, 1, false, NULL, NULL), 0);
}

/* A data directory holding topic name (with partitions), whose partition p has
 * key "k" = value; the engine closed afterwards. */
static void topic_with_key(struct fx *f, const char *name, int32_t partitions, uid_t owner,
                           mode_t mode, int32_t p, const char *value)
{
	struct tfs_topic *t;

	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, name, partitions, owner, owner, mode), 0);
	t = tfs_engine_topic_get(f->e, name);
	put(tfs_topic_partition(t, p), "k", value);
	tfs_topic_unref(t);
	tfs_engine_close(f->e);
	f->e = NULL;
}

static void topic_names_follow_kafkas_rule(void **state)
{
	char long_name[300];
	(void)state;
	assert_true(tfs_topic_name_valid("users"));
	assert_true(tfs_topic_name_valid("a.b_c-D9"));
	assert_false(tfs_topic_name_valid(""));
	assert_false(tfs_topic_name_valid(".hidden"));
	assert_false(tfs_topic_name_valid("."));
	assert_false(tfs_topic_name_valid(".."));
	assert_false(tfs_topic_name_valid("a b"));
	assert_false(tfs_topic_name_valid("a/b"));
	assert_false(tfs_topic_name_valid("caf\xc3\xa9"));
	memset(long_name, 'x', 249);
	long_name[249] = '\0';
	assert_true(tfs_topic_name_valid(long_name));
	long_name[249] = 'x';
	long_name[250] = '\0';
	assert_false(tfs_topic_name_valid(long_name));
}

/* AlterConfigs' path: several names as one change, all or nothing, persisted. */
static void several_configs_change_as_one_or_not_at_all(void **state)
{
	struct fx *f = *state;
	const char *names[] = { "segment.bytes", "retention.ms" };
	const char *good[] = { "1048576", "1000" }, *bad[] = { "2097152", "soon" };
	const char *back[] = { NULL };
	struct tfs_topic_config c;
	struct tfs_topic *t;
	char buf[TFS_TOPIC_CONFIG_VALUE_MAX];
	size_t which;

	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, "c", 1, 0, 0, 0755), 0);
	t = tfs_engine_topic_get(f->e, "c");
	assert_int_equal(tfs_topic_set_configs(t, false, names, good, 2, true, &which), 0);
	tfs_topic_get_config(t, &c);
	assert_true(tfs_topic_config_is_default(&c, "segment.bytes"));   /* validate only */
	assert_int_equal(tfs_topic_set_configs(t, false, names, good, 2, false, &which), 0);
	assert_int_equal(tfs_topic_set_configs(t, false, names, bad, 2, false, &which), -EINVAL);
	assert_int_equal(which, 1);
	tfs_topic_get_config(t, &c);
	assert_int_equal(tfs_topic_config_get(&c, "segment.bytes", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1048576");                            /* the first pair too */
	/* from the defaults: what is not named goes back; NULL is the default */
	assert_int_equal(tfs_topic_set_configs(t, true, names + 1, good + 1, 1, false, &which), 0);
	assert_int_equal(tfs_topic_set_configs(t, false, names + 1, back, 1, true, &which), 0);
	tfs_topic_unref(t);
	open_engine(f);
	t = tfs_engine_topic_get(f->e, "c");
	tfs_topic_get_config(t, &c);
	assert_true(tfs_topic_config_is_default(&c, "segment.bytes"));
	assert_int_equal(tfs_topic_config_get(&c, "retention.ms", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1000");
	assert_int_equal(tfs_topic_set_configs(t, false, names + 1, back, 1, false, &which), 0);
	tfs_topic_get_config(t, &c);
	assert_true(tfs_topic_config_is_default(&c, "retention.ms"));
	tfs_topic_unref(t);
}

static void topics_persist_with_partitions_config_and_owner(void **state)
{
	struct fx *f = *state;
	struct tfs_topic *t;
	struct tfs_topic_meta m;
	struct tfs_topic_config c;
	char buf[64];

	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, "users", 3, 1000, 1001, 0750), 0);
	assert_int_equal(tfs_engine_topic_create(f->e, "users", 3, 0, 0, 0755), -EEXIST);
	assert_int_equal(tfs_engine_topic_create(f->e, "bad name", 1, 0, 0, 0755), -EINVAL);
	t = tfs_engine_topic_get(f->e, "users");
	assert_non_null(t);
	assert_int_equal(tfs_topic_partition_count(t), 3);
	put(tfs_topic_partition(t, 2), "k", "v");
	assert_int_equal(tfs_topic_set_config(t, "segment.bytes", "1048576"), 0);
	assert_int_equal(tfs_topic_set_config(t, "segment.bytes", "lots"), -EINVAL);
	assert_int_equal(tfs_topic_set_config(t, "no.such.config", "1"), -EINVAL);
	assert_int_equal(tfs_topic_add_partition(t, 5), -EINVAL);
	assert_int_equal(tfs_topic_add_partition(t, 3), 0);
	assert_int_equal(tfs_topic_set_mode(t, 0700), 0);
	tfs_topic_unref(t);

	open_engine(f);
	t = tfs_engine_topic_get(f->e, "users");
	assert_non_null(t);
	assert_int_equal(tfs_topic_partition_count(t), 4);
	tfs_topic_get_meta(t, &m);
	assert_int_equal(m.uid, 1000);
	assert_int_equal(m.gid, 1001);
	assert_int_equal(m.mode, 0700);
	tfs_topic_get_config(t, &c);
	assert_int_equal(tfs_topic_config_get(&c, "segment.bytes", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1048576");
	{
		struct tfs_keyinfo info;
		assert_int_equal(tfs_plog_lookup(tfs_topic_partition(t, 2), tfs_slice_make("k", 1), &info), 0);
	}
	assert_null(tfs_topic_partition(t, 4));
	tfs_topic_unref(t);
}

static void delete_refuses_live_keys_then_removes_every_file(void **state)
{
	struct fx *f = *state;
	struct tfs_topic *t;
	char p[4200];

	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, "gone", 2, 0, 0, 0755), 0);
	t = tfs_engine_topic_get(f->e, "gone");
	put(tfs_topic_partition(t, 1), "k", "v");
	assert_int_equal(tfs_engine_topic_delete(f->e, "gone", false), -ENOTEMPTY);
	put(tfs_topic_partition(t, 1), "k", NULL);
	assert_int_equal(tfs_engine_topic_delete(f->e, "gone", false), 0);
	assert_true(tfs_topic_deleted(t));
	assert_null(tfs_topic_partition(t, 0));
	assert_null(tfs_engine_topic_get(f->e, "gone"));
	tfs_topic_unref(t);
	snprintf(p, sizeof(p), "%s/topics/gone", f->dir);
	assert_int_equal(t_file_size(p), -1);
	snprintf(p, sizeof(p), "%s/gone-0", f->dir);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(tfs_engine_topic_delete(f->e, "gone", false), -ENOENT);
	open_engine(f);
	assert_null(tfs_engine_topic_get(f->e, "gone"));
	/* the name can be used again */
	assert_int_equal(tfs_engine_topic_create(f->e, "gone", 1, 0, 0, 0755), 0);
}

/* Entries of dir whose names start with the first plen bytes of prefix. */
static int entries_like(const char *dir, const char *prefix, size_t plen)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		bool like = de->d_name[0] != '.' && !strncmp(de->d_name, prefix, plen);
		if (like)
			print_message("left over: %s/%s\n", dir, de->d_name);
		n += like;
	}
	closedir(d);
	return n;
}

/* Whether topics/.new-<topic>, a creation's marker (docs/format.md §1), exists. */
static int creating_marker(struct fx *f, const char *topic)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/topics/.new-%s", f->dir, topic);
	return access(p, F_OK) == 0;
}

/* The topic's partition directories, whole or renamed (their names start with
 * the topic's), and any file in topics/. */
static int leftovers(struct fx *f, const char *topic)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/topics", f->dir);
	return entries_like(f->dir, topic, 32) + entries_like(p, "", 0) + creating_marker(f, topic);
}

static void an_uncommitted_creation_and_a_half_deletion_are_finished_at_open(void **state)
{
	struct fx *f = *state;
	char p[4200];

	snprintf(p, sizeof(p), "%s/topics", f->dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/topics/.new-half", f->dir);
	t_write_file(p, "", 0);                           /* its creation's marker */
	snprintf(p, sizeof(p), "%s/half-0", f->dir);
	mkdir(p, 0755);                                   /* created, never committed */
	snprintf(p, sizeof(p), "%s/half-1", f->dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/half-1/00000000000000000000.log", f->dir);
	t_write_file(p, "", 0);
	snprintf(p, sizeof(p), "%s/old-0.12345-delete", f->dir);
	mkdir(p, 0755);                                   /* deletion interrupted */
	snprintf(p, sizeof(p), "%s/old-0.12345-delete/00000000000000000000.log", f->dir);
	t_write_file(p, "", 0);
	open_engine(f);
	assert_null(tfs_engine_topic_get(f->e, "half"));
	assert_null(tfs_engine_topic_get(f->e, "old"));
	snprintf(p, sizeof(p), "%s/half-0", f->dir);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/old-0.12345-delete", f->dir);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(leftovers(f, "half"), 0);
}

/* Regression: an empty partition directory without a config - a topic a broker
 * had created and nobody had produced to, copied out - was taken for a creation
 * that never committed and removed at the second open. Only a creation's marker
 * says that; without one the directory is a copy, left as it is. A stale marker
 * (of a committed topic, or of no directory at all) goes at open. */
static void an_empty_broker_copy_is_kept_and_stale_markers_go(void **state)
{
	struct fx *f = *state;
	char p[4200];
	struct tfs_topic *t;

	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, "kept", 1, 0, 0, 0755), 0);
	assert_false(creating_marker(f, "kept"));
	snprintf(p, sizeof(p), "%s/topics/.new-kept", f->dir);
	t_write_file(p, "", 0);                           /* a crash before its removal */
	snprintf(p, sizeof(p), "%s/topics/.new-never", f->dir);
	t_write_file(p, "", 0);                           /* a crash before any mkdir */
	snprintf(p, sizeof(p), "%s/empty-0", f->dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/empty-0/00000000000000000000.log", f->dir);
	t_write_file(p, "", 0);
	snprintf(p, sizeof(p), "%s/empty-0/00000000000000000000.index", f->dir);
	t_write_file(p, "", 0);
	for (int round = 0; round < 2; round++) {
		open_engine(f);
		t = tfs_engine_topic_get(f->e, "empty");
		assert_non_null(t);
		assert_true(tfs_topic_unconfigured(t));
		tfs_topic_unref(t);
		snprintf(p, sizeof(p), "%s/empty-0/00000000000000000000.log", f->dir);
		assert_int_equal(access(p, F_OK), 0);
		t = tfs_engine_topic_get(f->e, "kept");
		assert_non_null(t);
		tfs_topic_unref(t);
		assert_false(creating_marker(f, "kept"));
		assert_false(creating_marker(f, "never"));
	}
}

/* Topic "orig" with k = "broker", and its partition directory copied alone to
 * "copied-0", as out of a broker's log directory (no config file for it). */
static void broker_copy(struct fx *f)
{
	char src[4200], dst[4200], cmd[9000];

	topic_with_key(f, "orig", 1, 0, 0755, 0, "broker");
	snprintf(src, sizeof(src), "%s/orig-0", f->dir);
	snprintf(dst, sizeof(dst), "%s/copied-0", f->dir);
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", src, dst);
	assert_int_equal(system(cmd), 0);
}

static void a_partition_directory_without_config_is_a_broker_copy(void **state)
{
	struct fx *f = *state;
	struct tfs_topic *t;

	broker_copy(f);
	f->cfg.read_only = true;
	open_engine(f);
	t = tfs_engine_topic_get(f->e, "copied");
	assert_non_null(t);
	{
		struct tfs_record_copy rc;
		assert_int_equal(tfs_plog_read_key(tfs_topic_partition(t, 0), tfs_slice_make("k", 1), &rc), 0);
		assert_memory_equal(rc.value, "broker", 6);
		tfs_record_copy_release(&rc);
	}
	{
		struct tfs_append_rec r = { 0 };
		r.key = tfs_slice_make("k", 1);
		assert_int_equal(tfs_plog_append(tfs_topic_partition(t, 0), &r, 1, false, NULL, NULL),
		                 TFS_EREADONLY);
	}
	assert_int_equal(tfs_engine_topic_create(f->e, "x", 1, 0, 0, 0755), TFS_EREADONLY);
	tfs_topic_unref(t);
}

/* A broker's copy (no config file) is neither compacted nor trimmed: the cleaner
 * does not even know it, until a config set writes the file; then it does, and
 * a reopen finds the file. */
static void a_broker_copy_is_left_alone_until_a_config_is_set(void **state)
{
	struct fx *f = *state;
	struct tfs_topic *t;
	struct tfs_plog *pl;

	broker_copy(f);
	open_engine(f);
	t = tfs_engine_topic_get(f->e, "orig");
	assert_false(tfs_topic_unconfigured(t));
	assert_int_equal(tfs_cleaner_clean_now(tfs_engine_cleaner(f->e), tfs_topic_partition(t, 0)),
	                 0);
	tfs_topic_unref(t);
	t = tfs_engine_topic_get(f->e, "copied");
	assert_non_null(t);
	assert_true(tfs_topic_unconfigured(t));
	pl = tfs_topic_partition(t, 0);
	assert_int_equal(tfs_cleaner_clean_now(tfs_engine_cleaner(f->e), pl), -ENOENT);
	assert_int_equal(tfs_topic_set_config(t, "cleanup.policy", "delete"), 0);
	assert_false(tfs_topic_unconfigured(t));
	assert_int_equal(tfs_cleaner_clean_now(tfs_engine_cleaner(f->e), pl), 0);
	tfs_topic_unref(t);
	open_engine(f);
	t = tfs_engine_topic_get(f->e, "copied");
	assert_false(tfs_topic_unconfigured(t));
	tfs_topic_unref(t);
}

static void a_249_character_topic_name_persists(void **state)
{
	struct fx *f = *state;
	char name[250];
	struct tfs_topic *t;

	memset(name, 'n', 249);
	name[249] = '\0';
	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, name, 2, 0, 0, 0755), 0);
	open_engine(f);
	t = tfs_engine_topic_get(f->e, name);
	assert_non_null(t);
	assert_int_equal(tfs_topic_partition_count(t), 2);
	tfs_topic_unref(t);
}

/* Kafka's longest topic name: 249 times c. */
static void longest_name(char name[250], char c)
{
	memset(name, c, 249);
	name[249] = '\0';
}


/* Regression (issue 11, bug 6): "<topic>-<N>.<stamp>-delete" did not fit in 255
 * bytes for names of 233 characters and more: the rename failed with
 * ENAMETOOLONG and the topic came back at every open. */
static void a_249_character_topic_is_deleted_for_good(void **state)
{
	struct fx *f = *state;
	char name[250];
	struct tfs_topic *t;

	longest_name(name, 'd');
	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, name, 12, 0, 0, 0755), 0);
	t = tfs_engine_topic_get(f->e, name);
	put(tfs_topic_partition(t, 11), "k", "v");
	tfs_topic_unref(t);
	assert_int_equal(tfs_engine_topic_delete(f->e, name, true), 0);
	assert_null(tfs_engine_topic_get(f->e, name));
	assert_int_equal(leftovers(f, name), 0);
	open_engine(f);
	assert_null(tfs_engine_topic_get(f->e, name));
	assert_int_equal(tfs_engine_topic_create(f->e, name, 1, 0, 0, 0755), 0);
}

struct topic_crash {
	struct fx *f;
	const char *name;
	bool create;          /* else delete */
};

/* Creates (3 partitions) or deletes the topic with the fault armed; reports once
 * that returned 0. */
static int topic_child(void *arg, const char *spec, int fd)
{
	struct topic_crash *c = arg;
	struct tfs_engine *e = NULL;
	char done = 1;
	int rc;

	if (tfs_engine_open(&c->f->cfg, &e) < 0 || tfs_io_set_fault(tfs_engine_io(e), spec) < 0)
		return 1;
	rc = c->create ? tfs_engine_topic_create(e, c->name, 3, 0, 0, 0755)
	               : tfs_engine_topic_delete(e, c->name, true);
	if (rc < 0 || write(fd, &done, 1) != 1)
		return 1;
	tfs_engine_close(e);
	return 0;
}

/* The topic with key "k" in each of its 3 partitions, made if it is not there. */
static void topic_with_keys(struct fx *f, const char *name)
{
	struct tfs_topic *t;

	open_engine(f);
	if (!(t = tfs_engine_topic_get(f->e, name))) {
		assert_int_equal(tfs_engine_topic_create(f->e, name, 3, 0, 0, 0755), 0);
		t = tfs_engine_topic_get(f->e, name);
		for (int32_t p = 0; p < 3; p++)
			put(tfs_topic_partition(t, p), "k", "v");
	}
	tfs_topic_unref(t);
	tfs_engine_close(f->e);
	f->e = NULL;
}

/* Opens the data directory and checks that the topic is whole or gone: whole,
 * its 3 partitions take a record (and hold key "k" if with_keys); gone, not one
 * of its files is left. Returns whether it is there; leaves the engine open. */
static bool whole_or_gone(struct fx *f, const char *name, bool with_keys)
{
	struct tfs_topic *t;

	open_engine(f);
	t = tfs_engine_topic_get(f->e, name);
	if (!t) {
		assert_int_equal(leftovers(f, name), 0);
		return false;
	}
	assert_int_equal(tfs_topic_partition_count(t), 3);
	assert_false(creating_marker(f, name));
	for (int32_t p = 0; p < 3; p++) {
		struct tfs_keyinfo info;
		assert_int_equal(tfs_plog_lookup(tfs_topic_partition(t, p), tfs_slice_make("k", 1), &info),
		                 with_keys ? 0 : -ENOENT);
		put(tfs_topic_partition(t, p), "after", "v");
	}
	tfs_topic_unref(t);
	return true;
}

/* A deletion killed at each of its disk operations in turn: at the next open the
 * topic is whole (its keys read back) or gone with every file, never half (it used
 * to come back with some partitions empty). Once with a short name, once with the
 * longest. */
static void sweep_deletion(struct fx *f, const char *name)
{
	bool finished = false;
	int gone_from = -1;

	for (int n = 1; !finished; n++) {
		struct topic_crash c = { f, name, false };
		char done;
		size_t acked;

		topic_with_keys(f, name);
		acked = t_crash_run(topic_child, &c, n, &done, 1, 1, &finished);
		if (whole_or_gone(f, name, true))
			assert_int_equal(acked, 0);
		else if (gone_from < 0)
			gone_from = n;
		assert_true(n < 200);
	}
	assert_true(gone_from > 1);             /* some crash points came before the commit */
}

static void a_deletion_killed_at_any_step_is_whole_or_gone(void **state)
{
	struct fx *f = *state;
	char name[250];

	sweep_deletion(f, "short");
	longest_name(name, 'c');
	sweep_deletion(f, name);
}

/* An empty data directory, as setup made it. */
static void empty_data_dir(struct fx *f)
{
	tfs_engine_close(f->e);
	f->e = NULL;
	t_rmtree(f->dir);
	assert_int_equal(mkdir(f->dir, 0700), 0);
}

/* A creation killed at each of its disk operations in turn (the partition
 * directories, their segment files, the config that commits it): at the next open
 * the topic is whole, and there once its creation returned, or gone with every
 * file it had made. */
static void a_creation_killed_at_any_step_is_whole_or_gone(void **state)
{
	struct fx *f = *state;
	bool finished = false, whole = false;
	int absent = 0;

	for (int n = 1; !finished; n++) {
		struct topic_crash c = { f, "made", true };
		char done;
		size_t acked;

		empty_data_dir(f);
		acked = t_crash_run(topic_child, &c, n, &done, 1, 1, &finished);
		whole = whole_or_gone(f, "made", false);
		if (acked)
			assert_true(whole);
		absent += !whole;
		assert_true(n < 200);
	}
	assert_true(absent > 1);                 /* crash points before the commit */
	assert_true(whole);                      /* the run that finished */
}

/* A failing disk (ENOSPC from the n-th operation on, n = 1, 2, ...) under a
 * creation or a deletion: the call fails with that errno or succeeds; the topic
 * reads as the call said (still whole after a failed deletion that had not
 * committed); after the disk recovers and the data directory is opened again it
 * is whole or gone, and the same call then succeeds. */
static void sweep_enospc(struct fx *f, bool create)
{
	bool fired = true;

	for (uint64_t n = 1; fired; n++) {
		char spec[64];
		struct tfs_topic *t;
		uint64_t before;
		bool there;
		int rc;

		empty_data_dir(f);
		if (!create)
			topic_with_keys(f, "full");
		open_engine(f);
		snprintf(spec, sizeof(spec), "all:%llu:ENOSPC", (unsigned long long)n);
		assert_int_equal(tfs_io_set_fault(tfs_engine_io(f->e), spec), 0);
		before = tfs_io_op_count(tfs_engine_io(f->e));
		rc = create ? tfs_engine_topic_create(f->e, "full", 3, 0, 0, 0755)
		            : tfs_engine_topic_delete(f->e, "full", true);
		fired = tfs_io_op_count(tfs_engine_io(f->e)) - before >= n;
		assert_int_equal(tfs_io_set_fault(tfs_engine_io(f->e), NULL), 0);
		if (!fired)
			assert_int_equal(rc, 0);
		else if (rc < 0)
			assert_int_equal(rc, -ENOSPC);
		t = tfs_engine_topic_get(f->e, "full");
		if (create)
			assert_true((t != NULL) == (rc == 0));
		else if (rc == 0)
			assert_null(t);          /* a failed one is gone once it committed */
		if (t && !create) {
			struct tfs_keyinfo info;
			for (int32_t p = 0; p < 3; p++)
				assert_int_equal(tfs_plog_lookup(tfs_topic_partition(t, p),
				                                 tfs_slice_make("k", 1), &info), 0);
		}
		tfs_topic_unref(t);
		there = whole_or_gone(f, "full", !create);
		if (create && !there)
			assert_int_equal(tfs_engine_topic_create(f->e, "full", 3, 0, 0, 0755), 0);
		if (!create && there)
			assert_int_equal(tfs_engine_topic_delete(f->e, "full", true), 0);
		assert_true(n < 200);
	}
}

static void a_full_disk_under_creation_or_deletion_leaves_whole_or_gone(void **state)
{
	struct fx *f = *state;

	sweep_enospc(f, true);
	sweep_enospc(f, false);
}

/* "<topic>.tmp" in topics/ is a config write that did not finish, except when it
 * is the config of a topic named so: that one loads (its owner and mode stand),
 * and a stale "<topic>.tmp" of it goes. */
static void a_topic_named_like_a_temporary_file_keeps_its_config(void **state)
{
	struct fx *f = *state;
	struct tfs_topic_meta m;
	struct tfs_topic *t;
	char p[4200];

	topic_with_key(f, "logs.tmp", 2, 1000, 0700, 1, "v");
	snprintf(p, sizeof(p), "%s/topics/logs.tmp.tmp", f->dir);
	assert_int_equal(t_write_file(p, "half", 4), 0);
	open_engine(f);
	t = tfs_engine_topic_get(f->e, "logs.tmp");
	assert_non_null(t);
	assert_false(tfs_topic_config_refused(t));
	tfs_topic_get_meta(t, &m);
	assert_int_equal(m.uid, 1000);
	assert_int_equal(m.mode, 0700);
	assert_int_equal(tfs_topic_partition_count(t), 2);
	tfs_topic_unref(t);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/topics/logs.tmp", f->dir);
	assert_int_equal(access(p, F_OK), 0);
}

/* Regression (issue 11): a config file that did not load gave the topic the
 * default owner and mode (publishing a private topic) and the next change
 * overwrote the file. Now the file stays byte for byte, the topic reads but
 * refuses every change, and its mode is its owner's only. */
static void a_garbage_config_file_leaves_its_topic_read_only(void **state)
{
	struct fx *f = *state;
	static const char garbage[] = "segment.bytes=lots\ntopicfs.mode=0700\n";
	struct tfs_topic *t;
	struct tfs_topic_meta m;
	char p[4200];
	uint8_t *text;
	long len;

	topic_with_key(f, "priv", 2, 1000, 0700, 0, "v");
	snprintf(p, sizeof(p), "%s/topics/priv", f->dir);
	t_write_file(p, garbage, strlen(garbage));
	open_engine(f);
	t = tfs_engine_topic_get(f->e, "priv");
	assert_non_null(t);
	assert_true(tfs_topic_config_refused(t));
	assert_int_equal(tfs_topic_partition_count(t), 2);   /* partition 1 is empty: kept */
	{
		struct tfs_record_copy rc;
		assert_int_equal(tfs_plog_read_key(tfs_topic_partition(t, 0), tfs_slice_make("k", 1), &rc), 0);
		tfs_record_copy_release(&rc);
	}
	tfs_topic_get_meta(t, &m);
	assert_int_equal(m.mode, 0500);
	{
		struct tfs_append_rec r = { 0 };
		r.key = tfs_slice_make("k", 1);
		assert_int_equal(tfs_plog_append(tfs_topic_partition(t, 0), &r, 1, false, NULL, NULL),
		                 TFS_EREADONLY);
	}
	assert_int_equal(tfs_topic_set_config(t, "segment.bytes", "1048576"), TFS_EREADONLY);
	assert_int_equal(tfs_topic_set_mode(t, 0755), TFS_EREADONLY);
	assert_int_equal(tfs_topic_add_partition(t, 2), TFS_EREADONLY);
	assert_int_equal(tfs_engine_topic_delete(f->e, "priv", true), TFS_EREADONLY);
	tfs_topic_unref(t);
	tfs_engine_close(f->e);
	f->e = NULL;
	len = t_read_file(p, &text);
	assert_int_equal(len, (long)strlen(garbage));
	assert_memory_equal(text, garbage, len);
	free(text);
	snprintf(p, sizeof(p), "%s/priv-1", f->dir);
	assert_int_equal(access(p, F_OK), 0);
}

/* Regression (issue 11): a missing data directory was created silently, so a typo
 * mounted an empty log. Now it is ENOENT unless create_data_dir asks. */
static void a_missing_data_directory_is_enoent_unless_asked_for(void **state)
{
	struct fx *f = *state;
	char p[4200];

	snprintf(p, sizeof(p), "%s/not-yet", f->dir);
	f->cfg.data_dir = p;
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), -ENOENT);
	assert_null(f->e);
	assert_int_equal(access(p, F_OK), -1);
	f->cfg.create_data_dir = true;
	f->cfg.read_only = true;
	assert_int_equal(tfs_engine_open(&f->cfg, &f->e), -ENOENT);
	f->cfg.read_only = false;
	open_engine(f);
	assert_int_equal(access(p, F_OK), 0);
	assert_int_equal(tfs_engine_topic_create(f->e, "t", 1, 0, 0, 0755), 0);
}

static void names_list_sorted(void **state)
{
	struct fx *f = *state;
	char **names;
	size_t n;
	open_engine(f);
	tfs_engine_topic_create(f->e, "b", 1, 0, 0, 0755);
	tfs_engine_topic_create(f->e, "a", 1, 0, 0, 0755);
	tfs_engine_topic_create(f->e, "c", 1, 0, 0, 0755);
	assert_int_equal(tfs_engine_topic_names(f->e, &names, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "a");
	assert_string_equal(names[1], "b");
	assert_string_equal(names[2], "c");
	free(names);
}

/* The engine's producer ids: fresh across a reopen, none from a read-only one. */
static void producer_ids_never_repeat_across_opens(void **state)
{
	struct fx *f = *state;
	int64_t id, last = -1;
	int16_t epoch;

	for (int round = 0; round < 2; round++) {
		open_engine(f);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(tfs_engine_producer_id(f->e, &id, &epoch), 0);
			assert_true(id > last);
			assert_int_equal(epoch, 0);
			last = id;
		}
	}
	f->cfg.read_only = true;
	open_engine(f);
	assert_int_equal(tfs_engine_producer_id(f->e, &id, &epoch), -EROFS);
}

#define FLUSH_POLL_US 1000

static void flush_ms_makes_records_durable_in_the_background(void **state)
{
	struct fx *f = *state;
	struct tfs_topic *t;

	f->cfg.cleaner.threads = 0;
	open_engine(f);
	assert_int_equal(tfs_engine_topic_create(f->e, "f", 1, 0, 0, 0755), 0);
	t = tfs_engine_topic_get(f->e, "f");
	assert_int_equal(tfs_topic_set_config(t, "flush.ms", "0"), 0);
	/* Counted from before the append (the flusher may come at once). Nothing
	 * else fsyncs from here: the append is not durable, no cleaner runs, and the
	 * partition had nothing unsynced before it. The flusher's fsync is the event
	 * awaited, without a deadline: ctest's timeout catches one that never comes. */
	{
		struct tfs_io *io = tfs_engine_io(f->e);
		uint64_t fsyncs = tfs_io_fsync_count(io);

		put(tfs_topic_partition(t, 0), "k", "v");
		while (tfs_io_fsync_count(io) == fsyncs)
			usleep(FLUSH_POLL_US);
	}
	assert_int_equal(tfs_engine_sync(f->e), 0);
	tfs_topic_unref(t);
}

/* Bug: an active segment's fd and a directory fd per partition stayed open, so a
 * topic of more partitions than half the descriptor limit could not be created.
 * Now nothing of a partition holds a descriptor between operations: the fd
 * cache's bound is the bound, at create, at append, at roll and after reopen. */
static void descriptors_stay_bounded_whatever_the_partition_count(void **state)
{
	struct fx *f = *state;
	enum { LIMIT = 256, CACHE = 32, PARTS = 3 * LIMIT, SLACK = 8 };
	long was = t_set_fd_limit(LIMIT);
	struct tfs_topic *t;
	int base;
	char key[32];

	f->cfg.max_open_files = CACHE;
	open_engine(f);
	base = t_open_fds();
	assert_int_equal(tfs_engine_topic_create(f->e, "wide", PARTS, 0, 0, 0755), 0);
	assert_true(t_open_fds() <= base + CACHE + SLACK);
	t = tfs_engine_topic_get(f->e, "wide");
	assert_non_null(t);
	for (int32_t p = 0; p < PARTS; p++) {
		snprintf(key, sizeof(key), "k%d", (int)p);
		put(tfs_topic_partition(t, p), key, "v");
		if (p % 97 == 0)
			assert_int_equal(tfs_plog_roll(tfs_topic_partition(t, p)), 0);
	}
	assert_int_equal(tfs_engine_sync(f->e), 0);
	assert_true(t_open_fds() <= base + CACHE + SLACK);
	tfs_topic_unref(t);

	open_engine(f);
	t = tfs_engine_topic_get(f->e, "wide");
	assert_non_null(t);
	assert_int_equal(tfs_topic_partition_count(t), PARTS);
	for (int32_t p = 0; p < PARTS; p++) {
		struct tfs_record_copy rc;
		snprintf(key, sizeof(key), "k%d", (int)p);
		assert_int_equal(tfs_plog_read_key(tfs_topic_partition(t, p),
		                                   tfs_slice_make(key, strlen(key)), &rc), 0);
		assert_int_equal(rc.value_len, 1);
		tfs_record_copy_release(&rc);
		put(tfs_topic_partition(t, p), key, "w");
	}
	assert_true(t_open_fds() <= base + CACHE + SLACK);
	tfs_topic_unref(t);
	tfs_engine_close(f->e);
	f->e = NULL;
	t_set_fd_limit(was);
}

/* Bug: at the descriptor limit a creation failed with EBADF (a failed dup given
 * to fdopendir). With 0, 1, 2, ... descriptors to spare, a topic is either made
 * whole or refused with EMFILE, and a refused one leaves nothing behind. */
static void the_descriptor_limit_reads_emfile_never_another_errno(void **state)
{
	struct fx *f = *state;
	enum { CAP = 4096, MAX_SPARE = 12 };
	long was = t_set_fd_limit(128);
	int *fds = calloc(CAP, sizeof(*fds)), n, rc, refused = 0;
	char name[32];

	assert_non_null(fds);
	open_engine(f);
	for (int spare = 0; spare <= MAX_SPARE; spare++) {
		struct tfs_topic *t;
		snprintf(name, sizeof(name), "t%d", spare);
		n = t_fds_exhaust(spare, fds, CAP);
		rc = tfs_engine_topic_create(f->e, name, 4, 0, 0, 0755);
		t_fds_release(fds, n);
		if (rc != 0 && rc != -EMFILE)
			fail_msg("%d descriptors to spare: create gave %d (%s)", spare, rc, strerror(-rc));
		t = tfs_engine_topic_get(f->e, name);
		assert_true(rc == 0 ? t != NULL : t == NULL);
		refused += rc != 0;
		tfs_topic_unref(t);
	}
	assert_true(refused > 0);
	/* and what failed is not there after a reopen either */
	open_engine(f);
	for (int spare = 0; spare <= MAX_SPARE; spare++) {
		struct tfs_topic *t;
		snprintf(name, sizeof(name), "t%d", spare);
		t = tfs_engine_topic_get(f->e, name);
		if (t)
			assert_int_equal(tfs_topic_partition_count(t), 4);
		tfs_topic_unref(t);
	}
	free(fds);
	t_set_fd_limit(was);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(topic_names_follow_kafkas_rule, setup, teardown),
		cmocka_unit_test_setup_teardown(topics_persist_with_partitions_config_and_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(several_configs_change_as_one_or_not_at_all, setup, teardown),
		cmocka_unit_test_setup_teardown(delete_refuses_live_keys_then_removes_every_file, setup, teardown),
		cmocka_unit_test_setup_teardown(an_uncommitted_creation_and_a_half_deletion_are_finished_at_open, setup, teardown),
		cmocka_unit_test_setup_teardown(an_empty_broker_copy_is_kept_and_stale_markers_go, setup, teardown),
		cmocka_unit_test_setup_teardown(a_partition_directory_without_config_is_a_broker_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(a_broker_copy_is_left_alone_until_a_config_is_set, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(a_249_character_topic_name_persists, setup, teardown),
		cmocka_unit_test_setup_teardown(a_249_character_topic_is_deleted_for_good, setup, teardown),
		cmocka_unit_test_setup_teardown(a_deletion_killed_at_any_step_is_whole_or_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(a_creation_killed_at_any_step_is_whole_or_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(a_full_disk_under_creation_or_deletion_leaves_whole_or_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(a_topic_named_like_a_temporary_file_keeps_its_config, setup, teardown),
		cmocka_unit_test_setup_teardown(a_garbage_config_file_leaves_its_topic_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(a_missing_data_directory_is_enoent_unless_asked_for, setup, teardown),
		cmocka_unit_test_setup_teardown(names_list_sorted, setup, teardown),
		cmocka_unit_test_setup_teardown(producer_ids_never_repeat_across_opens, setup, teardown),
		cmocka_unit_test_setup_teardown(flush_ms_makes_records_durable_in_the_background, setup, teardown),
		cmocka_unit_test_setup_teardown(descriptors_stay_bounded_whatever_the_partition_count, setup, teardown),
		cmocka_unit_test_setup_teardown(the_descriptor_limit_reads_emfile_never_another_errno, setup, teardown),
	};
	return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
