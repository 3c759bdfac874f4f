/* erase.c - erase: a key's tombstone, judged against every consumer group's lag
 * (through a mount).
 *
 * A tombstone deletes a key only for the consumers that read it before the cleaner
 * drops it, delete.retention.ms after the pass that first cleaned it. So before
 * writing it, erase measures each group's lag in time on the key's partition
 * (.groups/GROUP/TOPIC.P, attribute lag_ms) and compares it with
 * delete.retention.ms x margin: a group past that limit may never see the
 * tombstone and must rebuild its state from a snapshot. The tombstone is written
 * either way; the verdict says whether the deletion is proven.
 *
 * --wait goes on until the deletion is proven end to end: no record of the key
 * older than the tombstone is left in any segment (the key's history view lists
 * only the tombstone), and every group's committed offset is past the tombstone.
 * On the way it rolls the active segment when the tombstone is in it and asks for
 * a cleaning pass when older values wait in closed segments (both as the mount
 * allows: a pass honours min.compaction.lag.ms), and it names what delays the
 * proof, each reason once, as it meets it.
 */
#include "topicctl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ERASE_DEFAULT_MARGIN 0.5
#define ERASE_DEFAULT_INTERVAL_MS 1000
#define ERASE_MAX_INTERVAL_MS 3600000
#define ERASE_MAX_TIMEOUT_S 31536000
#define OFFSET_NAME_DIGITS 20
#define REASON_CAP 256
#define REASONS_MAX 32
#define ACTION_REBUILD "rebuild the state of the lagging groups from a snapshot"

const char erase_help[] =
	"usage: topicctl erase [--margin F] [--wait] [--timeout S] [--interval MS] [--json]\n"
	"                      MOUNT/TOPIC KEY\n"
	"\n"
	"Deletes KEY (spelled as its file name in the mount) by writing its tombstone, and\n"
	"says whether the deletion is proven. A tombstone only deletes for the consumers\n"
	"that read it within the topic's delete.retention.ms, so first each consumer\n"
	"group's lag in time on the key's partition (its lag_ms in .groups/) is compared\n"
	"with delete.retention.ms x F (default 0.5): a group past that limit is named in\n"
	"groups_to_rebuild, and the deletion is not proven.\n"
	"\n"
	"Prints (or with --json, as fields of one object):\n"
	"  tombstone_written   true once the tombstone is in the log\n"
	"  deletion_proven     no group is past the limit (with --wait: see below)\n"
	"  safe_limit_ms       delete.retention.ms x F\n"
	"  groups_to_rebuild   the groups past it\n"
	"  action              what to do about them (null when nothing)\n"
	"\n"
	"  -m, --margin F        the fraction of delete.retention.ms a group may lag (0 < F <= 1)\n"
	"  -w, --wait            wait until the deletion is proven end to end: no older\n"
	"                        value of the key left in any segment and every group's\n"
	"                        committed offset past the tombstone; rolls the active\n"
	"                        segment and runs cleaning passes as the rules allow, names\n"
	"                        what delays it (the active segment, dirty segments,\n"
	"                        min.compaction.lag.ms, an open transaction, a group), then\n"
	"                        prints the proof\n"
	"  -t, --timeout S       with --wait: give up after S seconds (default: never)\n"
	"  -i, --interval MS     with --wait: look again every MS milliseconds (default 1000)\n"
	"  -j, --json            one JSON object\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 the deletion is proven; 1 it is not (the tombstone may be written:\n"
	"see tombstone_written), or the operation failed; 2 usage error.\n";

struct erase {
	struct mpath m;
	const char *key;
	char pdir[PATH_MAX + TOPIC_CAP + 16];  /* MOUNT/TOPIC/P */
	int32_t partition;
	double margin;
	bool json, wait;
	int64_t interval_ms, timeout_s;
	int64_t window_ms;
	int64_t tombstone;             /* its offset */
	struct group_row *rows;        /* the groups on the key's partition */
	size_t nrows;
	char reasons[REASONS_MAX][REASON_CAP];
	size_t nreasons;
};


/* The live partition of key: the first partition directory that holds its file. */
static int find_partition(struct erase *e)
{
	char tdir[PATH_MAX + TOPIC_CAP];
	int32_t *parts = NULL;
	size_t n = 0;
	int rc = -ENOENT;

	snprintf(tdir, sizeof(tdir), "%s/%s", e->m.root, e->m.topic);
	if (list_partitions(tdir, &parts, &n) < 0)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		char path[sizeof(e->pdir) + NAME_MAX + 2];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%" PRId32 "/%s", tdir, parts[i], e->key);
		if (lstat(path, &st) == 0) {
			e->partition = parts[i];
			snprintf(e->pdir, sizeof(e->pdir), "%s/%" PRId32, tdir, parts[i]);
			rc = 0;
			break;
		}
	}
	free(parts);
	return rc;
}

/* Offsets of key's records still on disk (its .history/.keys view), ascending. */
static int key_versions(const struct erase *e, int64_t **out, size_t *count)
{
	char dir[sizeof(e->pdir) + NAME_MAX + 32];
	struct dirent *de;
	int64_t *v = NULL;
	size_t n = 0, cap = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/.history/.keys/%s", e->pdir, e->key);
	d = opendir(dir);
	*out = NULL;
	*count = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		int64_t off;
		if (strlen(de->d_name) != OFFSET_NAME_DIGITS || !parse_i64(de->d_name, 0, INT64_MAX, &off))
			continue;
		if (n == cap) {
			int64_t *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = off;
	}
	closedir(d);
	*out = v;
	*count = n;
	return 0;
}

static void hist_path(const struct erase *e, int64_t offset, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/.history/%020" PRId64, e->pdir, offset);
}

/* Notes a reason the proof waits for, once. Returns true the first time. */
static bool note_reason(struct erase *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool note_reason(struct erase *e, const char *fmt, ...)
{
	char r[REASON_CAP];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r, sizeof(r), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < e->nreasons; i++)
		if (!strcmp(e->reasons[i], r))
			return false;
	if (e->nreasons < REASONS_MAX)
		snprintf(e->reasons[e->nreasons++], REASON_CAP, "%s", r);
	if (!e->json)
		printf("waiting: %s\n", r);
	else
		fprintf(stderr, "waiting: %s\n", r);
	fflush(stdout);
	return true;
}

static int read_groups(struct erase *e)
{
	free(e->rows);
	e->rows = NULL;
	e->nrows = 0;
	return read_group_rows(e->m.root, NULL, e->m.topic, e->partition, &e->rows, &e->nrows);
}

/* One look at the log and the groups: 1 when the deletion is proven, 0 when not
 * yet (having rolled or cleaned where that helps), or -errno. */
static int wait_step(struct erase *e)
{
	char path[sizeof(e->pdir) + 64], fate[XATTR_VALUE_CAP];
	int64_t *v = NULL;
	size_t n = 0, older = 0, behind = 0;
	bool roll = false, clean = false;
	int rc = key_versions(e, &v, &n);

	if (rc < 0)
		return rc;
	/* the tombstone itself: the pass builds its map from closed segments only */
	hist_path(e, e->tombstone, path, sizeof(path));
	if (xget(path, "fate", fate, sizeof(fate)) >= 0 && strstr(fate, "active segment"))
		roll = true;
	for (size_t i = 0; i < n; i++) {
		if (v[i] >= e->tombstone)
			continue;
		older++;
		hist_path(e, v[i], path, sizeof(path));
		if (xget(path, "fate", fate, sizeof(fate)) < 0)
			continue;               /* cleaned away since the listing */
		if (strstr(fate, "active segment")) {
			note_reason(e, "active segment: an older value (offset %" PRId64 ") is in the open "
			            "segment; rolling it", v[i]);
			roll = true;
		} else if (strstr(fate, "min.compaction.lag.ms")) {
			note_reason(e, "min.compaction.lag.ms: an older value (offset %" PRId64 ") is too "
			            "young to be cleaned", v[i]);
		} else if (strstr(fate, "open transaction")) {
			note_reason(e, "open transaction: an older value (offset %" PRId64 ") is past the "
			            "first unstable offset", v[i]);
		} else if (strstr(fate, "not-cleanable")) {
			note_reason(e, "offset %" PRId64 " is not cleanable: %s", v[i], fate);
		} else {
			char region[XATTR_VALUE_CAP] = "";
			(void)xget(path, "region", region, sizeof(region));
			note_reason(e, "%s segments: an older value (offset %" PRId64 ") waits for a "
			            "cleaning pass; running one", region[0] ? region : "closed", v[i]);
			clean = true;
		}
	}
	free(v);
	if (roll && xset(e->pdir, "roll", "1") < 0)
		return -errno;
	if ((clean || roll) && xset(e->pdir, "clean", "1") < 0 && errno != EBUSY)
		return -errno;
	rc = read_groups(e);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < e->nrows; i++) {
		if (e->rows[i].committed_offset > e->tombstone)
			continue;
		behind++;
		note_reason(e, "group %s: committed offset %" PRId64 " is not past the tombstone at %"
		            PRId64, e->rows[i].group, e->rows[i].committed_offset, e->tombstone);
	}
	return older == 0 && behind == 0;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The offset of the newest record of the key, which the unlink just wrote. */
static int find_tombstone(struct erase *e)
{
	int64_t *v = NULL;
	size_t n = 0;
	int rc = key_versions(e, &v, &n);

	if (rc == 0 && n == 0)
		rc = -ENOENT;
	if (rc == 0) {
		char path[sizeof(e->pdir) + 64];
		int64_t tomb = 0;
		hist_path(e, v[n - 1], path, sizeof(path));
		if (!xget_i64(path, "tombstone", &tomb) || tomb != 1)
			rc = -EAGAIN;           /* someone wrote the key again meanwhile */
		e->tombstone = v[n - 1];
	}
	free(v);
	return rc;
}

int cmd_erase(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "margin", required_argument, NULL, 'm' },
		{ "wait", no_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct erase e = { .margin = ERASE_DEFAULT_MARGIN, .interval_ms = ERASE_DEFAULT_INTERVAL_MS };
	struct json_object *o = NULL, *rebuild;
	char key_path[sizeof(e.pdir) + NAME_MAX + 2];
	double safe_limit;
	bool proven = true, written = false;
	int64_t t0;
	int c, rc = EXIT_PROBLEM, err;

	while ((c = next_opt(argc, argv, "m:wt:i:jh", opts)) != -1) {
		char *end;
		if (c == 'm') {
			errno = 0;
			e.margin = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(e.margin > 0 && e.margin <= 1))
				return usage_error("--margin: not a fraction in (0, 1]: '%s'", optarg);
		} else if (c == 'w')
			e.wait = true;
		else if (c == 't') {
			if (!parse_i64(optarg, 1, ERASE_MAX_TIMEOUT_S, &e.timeout_s))
				return usage_error("--timeout: not a number of seconds: '%s'", optarg);
		} else if (c == 'i') {
			if (!parse_i64(optarg, 1, ERASE_MAX_INTERVAL_MS, &e.interval_ms))
				return usage_error("--interval: not a number of milliseconds: '%s'", optarg);
		} else if (c == 'j')
			e.json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind != 2)
		return usage_error("erase needs MOUNT/TOPIC and KEY");
	e.key = argv[optind + 1];
	if (!e.key[0] || strchr(e.key, '/') || e.key[0] == '.')
		return usage_error("KEY: not a key's file name: '%s'", e.key);
	if (resolve_mount_path(argv[optind], &e.m) < 0)
		return EXIT_PROBLEM;
	if (!e.m.topic[0] || e.m.partition >= 0) {
		complain("%s: name a topic (MOUNT/TOPIC)", argv[optind]);
		return EXIT_PROBLEM;
	}
	err = find_partition(&e);
	if (err < 0) {
		complain("%s/%s: key %s has no live value: %s", e.m.root, e.m.topic, e.key, strerror(-err));
		return EXIT_PROBLEM;
	}
	{
		char tdir[PATH_MAX + TOPIC_CAP];
		snprintf(tdir, sizeof(tdir), "%s/%s", e.m.root, e.m.topic);
		if (!xget_i64(tdir, "delete.retention.ms", &e.window_ms)) {
			complain("%s: cannot read delete.retention.ms: %s", tdir, strerror(errno));
			return EXIT_PROBLEM;
		}
	}
	/* 1. each group's lag in time, measured before the tombstone */
	err = read_groups(&e);
	if (err < 0 && err != -ENOENT) {
		complain("%s/.groups: %s", e.m.root, strerror(-err));
		goto out;
	}
	safe_limit = (double)e.window_ms * e.margin;
	rebuild = json_object_new_array();
	for (size_t i = 0; i < e.nrows; i++) {
		if ((double)e.rows[i].lag_ms > safe_limit) {
			json_object_array_add(rebuild, json_object_new_string(e.rows[i].group));
			proven = false;
		}
	}
	/* 2. the tombstone */
	snprintf(key_path, sizeof(key_path), "%s/%s", e.pdir, e.key);
	if (unlink(key_path) < 0) {
		complain("%s: %s", key_path, strerror(errno));
		json_object_put(rebuild);
		goto out;
	}
	written = true;
	err = find_tombstone(&e);
	if (err < 0) {
		complain("%s: cannot find the tombstone just written in .history/.keys: %s", key_path,
		         err == -EAGAIN ? "the key was written again" : strerror(-err));
		json_object_put(rebuild);
		goto out;
	}
	/* 3. the verdict (and with --wait, the proof) */
	o = json_object_new_object();
	json_object_object_add(o, "tombstone_written", json_object_new_boolean(written));
	json_object_object_add(o, "partition", json_object_new_int(e.partition));
	json_object_object_add(o, "tombstone_offset", json_object_new_int64(e.tombstone));
	json_object_object_add(o, "safe_limit_ms", json_object_new_double(safe_limit));
	{
		struct json_object *lags = json_object_new_object();
		for (size_t i = 0; i < e.nrows; i++)
			json_object_object_add(lags, e.rows[i].group, json_object_new_int64(e.rows[i].lag_ms));
		json_object_object_add(o, "group_lag_ms", lags);
	}
	json_object_object_add(o, "groups_to_rebuild", rebuild);
	json_object_object_add(o, "action", proven ? NULL : json_object_new_string(ACTION_REBUILD));
	if (!e.json) {
		printf("tombstone_written: true (%s/%" PRId32 " offset %" PRId64 ")\n", e.m.topic,
		       e.partition, e.tombstone);
		printf("safe_limit_ms: %.0f (delete.retention.ms %" PRId64 " x %g)\n", safe_limit,
		       e.window_ms, e.margin);
		for (size_t i = 0; i < e.nrows; i++)
			printf("group %s: lag_ms %" PRId64 "%s\n", e.rows[i].group, e.rows[i].lag_ms,
			       (double)e.rows[i].lag_ms > safe_limit ? " > safe limit: must rebuild" : "");
		if (!proven)
			printf("action: %s\n", ACTION_REBUILD);
	}
	if (e.wait && proven) {
		t0 = mono_ms();
		for (;;) {
			err = wait_step(&e);
			if (err < 0) {
				complain("%s: %s", e.pdir, strerror(-err));
				proven = false;
				break;
			}
			if (err == 1)
				break;
			if (e.timeout_s && mono_ms() - t0 >= e.timeout_s * 1000) {
				proven = false;
				break;
			}
			sleep_ms(e.interval_ms);
		}
		{
			struct json_object *proof = json_object_new_object(), *g = json_object_new_object();
			struct json_object *why = json_object_new_array(), *vers = json_object_new_array();
			int64_t *v = NULL;
			size_t n = 0;
			(void)key_versions(&e, &v, &n);
			for (size_t i = 0; i < n; i++)
				json_object_array_add(vers, json_object_new_int64(v[i]));
			for (size_t i = 0; i < e.nrows; i++)
				json_object_object_add(g, e.rows[i].group,
				                       json_object_new_int64(e.rows[i].committed_offset));
			for (size_t i = 0; i < e.nreasons; i++)
				json_object_array_add(why, json_object_new_string(e.reasons[i]));
			json_object_object_add(proof, "key_versions_on_disk", vers);
			json_object_object_add(proof, "group_committed_offsets", g);
			json_object_object_add(proof, "delayed_by", why);
			json_object_object_add(proof, "waited_ms", json_object_new_int64(mono_ms() - t0));
			json_object_object_add(o, "proof", proof);
			if (!e.json && proven) {
				printf("proof: the key's records on disk:");
				for (size_t i = 0; i < n; i++)
					printf(" %" PRId64 "%s", v[i], v[i] == e.tombstone ? " (the tombstone)" : "");
				printf("%s\n", n ? "" : " none (the tombstone is gone too)");
				for (size_t i = 0; i < e.nrows; i++)
					printf("proof: group %s committed %" PRId64 " > %" PRId64 "\n", e.rows[i].group,
					       e.rows[i].committed_offset, e.tombstone);
				printf("proof: done after %" PRId64 " ms\n", mono_ms() - t0);
			} else if (!e.json) {
				printf("not proven: gave up after %" PRId64 " s\n", e.timeout_s);
			}
			free(v);
		}
	}
	json_object_object_add(o, "deletion_proven", json_object_new_boolean(proven));
	if (e.json)
		json_print(o);
	else
		printf("deletion_proven: %s\n", proven ? "true" : "false");
	rc = proven ? EXIT_OK : EXIT_PROBLEM;
out:
	json_object_put(o);
	free(e.rows);
	return rc;
}
