/* groups.c - groups: every consumer group's position and lag on each partition
 * it has committed for (through a mount's .groups/), and what erase (erase.c)
 * and follow share about reading them.
 */
#include "topicctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OFFSET_TEXT_CAP 32

const char groups_help[] =
	"usage: topicctl groups [--json] [MOUNT]\n"
	"\n"
	"One row per consumer group and partition it has committed an offset for, from\n"
	"MOUNT/.groups/GROUP/TOPIC.PARTITION and its attributes:\n"
	"\n"
	"  committed_offset   the next offset the group reads\n"
	"  log_end_offset     the partition's end\n"
	"  lag_offsets        log_end_offset - committed_offset: an upper bound on a\n"
	"                     compacted topic, where the cleaner leaves gaps\n"
	"  lag_records        the records still on disk that the group has not read\n"
	"  lag_ms             now minus the timestamp of the first of them (0: caught up)\n"
	"\n"
	"Offsets of topics the caller may not read are left out. Without a MOUNT: every\n"
	"topicfs mount.\n"
	"\n"
	"  -j, --json              print a JSON array of rows with those fields and group,\n"
	"                          topic, partition\n"
	"  -h, --help              show this help\n"
	"\n"
	EXIT_STATUS_HELP;

int read_group_file(const char *path, int64_t *out)
{
	char buf[OFFSET_TEXT_CAP];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return parse_i64(buf, 0, INT64_MAX, out) ? 0 : -EINVAL;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_row(const void *a, const void *b)
{
	const struct group_row *x = a, *y = b;
	int c = strcmp(x->group, y->group);

	if (c == 0)
		c = strcmp(x->topic, y->topic);
	return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Names of the entries of dir, but . and .., sorted. */
static int list_names(const char *dir, char ***out, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*count = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		if (!(v[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_str_ptr);
	*out = v;
	*count = n;
	return 0;
}

int read_group_rows(const char *root, const char *only_group, const char *only_topic,
                    int32_t only_partition, struct group_row **out, size_t *count)
{
	char gdir[PATH_MAX], **groups = NULL;
	struct group_row *rows = NULL;
	size_t ng = 0, n = 0, cap = 0;
	int rc;

	*out = NULL;
	*count = 0;
	snprintf(gdir, sizeof(gdir), "%s/.groups", root);
	rc = list_names(gdir, &groups, &ng);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < ng && rc == 0; i++) {
		char dir[PATH_MAX * 2], **files = NULL;
		size_t nf = 0;

		if (only_group && strcmp(groups[i], only_group))
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", gdir, groups[i]);
		if (list_names(dir, &files, &nf) < 0)
			continue;               /* removed since the listing */
		for (size_t j = 0; j < nf && rc == 0; j++) {
			char path[PATH_MAX * 3];
			const char *dot = strrchr(files[j], '.');
			struct group_row r = { 0 };
			int64_t p;

			if (!dot || !parse_i64(dot + 1, 0, INT32_MAX, &p) ||
			    (size_t)(dot - files[j]) >= sizeof(r.topic))
				continue;
			snprintf(r.topic, sizeof(r.topic), "%.*s", (int)(dot - files[j]), files[j]);
			r.partition = (int32_t)p;
			if ((only_topic && strcmp(r.topic, only_topic)) ||
			    (only_partition >= 0 && r.partition != only_partition))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, files[j]);
			rc = read_group_file(path, &r.committed_offset);
			if (rc == -EACCES || rc == -ENOENT) {
				rc = 0;         /* not ours to see, or deleted since */
				continue;
			}
			if (rc < 0) {
				complain("%s: %s", path, strerror(-rc));
				break;
			}
			if (!xget_i64(path, "log_end_offset", &r.log_end_offset) ||
			    !xget_i64(path, "lag_offsets", &r.lag_offsets) ||
			    !xget_i64(path, "lag_records", &r.lag_records) ||
			    !xget_i64(path, "lag_ms", &r.lag_ms)) {
				if (errno == ENOENT)
					continue;
				rc = -errno;
				complain("%s: cannot read its lag: %s", path, strerror(errno));
				break;
			}
			snprintf(r.group, sizeof(r.group), "%s", groups[i]);
			if (n == cap) {
				struct group_row *nr = realloc(rows, (cap = cap ? cap * 2 : 16) * sizeof(*rows));
				if (!nr) {
					rc = -ENOMEM;
					break;
				}
				rows = nr;
			}
			rows[n++] = r;
		}
		free_strings(files, nf);
	}
	free_strings(groups, ng);
	if (rc < 0) {
		free(rows);
		return rc;
	}
	qsort(rows, n, sizeof(*rows), cmp_row);
	*out = rows;
	*count = n;
	return 0;
}

struct json_object *group_row_json(const struct group_row *r)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "group", json_object_new_string(r->group));
	json_object_object_add(o, "topic", json_object_new_string(r->topic));
	json_object_object_add(o, "partition", json_object_new_int(r->partition));
	json_object_object_add(o, "committed_offset", json_object_new_int64(r->committed_offset));
	json_object_object_add(o, "log_end_offset", json_object_new_int64(r->log_end_offset));
	json_object_object_add(o, "lag_offsets", json_object_new_int64(r->lag_offsets));
	json_object_object_add(o, "lag_records", json_object_new_int64(r->lag_records));
	json_object_object_add(o, "lag_ms", json_object_new_int64(r->lag_ms));
	return o;
}

struct groups_run {
	bool json, header_done;
	struct json_object *arr;
	int rc;
	bool named;                    /* a MOUNT was given */
};

static void groups_of_mount(struct groups_run *g, const char *root)
{
	struct group_row *rows = NULL;
	size_t n = 0;
	int rc = read_group_rows(root, NULL, NULL, -1, &rows, &n);

	if (rc < 0) {
		if (rc == -ENOENT && !g->named)
			return;                 /* a mount without .groups/ */
		complain("%s/.groups: %s", root, strerror(-rc));
		g->rc = EXIT_PROBLEM;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct group_row *r = &rows[i];
		if (g->json) {
			struct json_object *o = group_row_json(r);
			if (!g->named)
				json_object_object_add(o, "mount", json_object_new_string(root));
			json_object_array_add(g->arr, o);
			continue;
		}
		if (!g->header_done) {
			printf("%-20s %-20s %9s %12s %12s %12s %12s %12s\n", "GROUP", "TOPIC", "PARTITION",
			       "COMMITTED", "LOG_END", "LAG_OFFSETS", "LAG_RECORDS", "LAG_MS");
			g->header_done = true;
		}
		printf("%-20s %-20s %9" PRId32 " %12" PRId64 " %12" PRId64 " %12" PRId64 " %12" PRId64
		       " %12" PRId64 "\n", r->group, r->topic, r->partition, r->committed_offset,
		       r->log_end_offset, r->lag_offsets, r->lag_records, r->lag_ms);
	}
	free(rows);
}

static void each_mount(void *arg, const char *mnt, const char *src)
{
	(void)src;
	groups_of_mount(arg, mnt);
}

int cmd_groups(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct groups_run g = { .rc = EXIT_OK };
	int c;

	while ((c = next_opt(argc, argv, "jh", opts)) != -1) {
		if (c == 'j')
			g.json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind > 1)
		return usage_error("groups takes at most one MOUNT");
	if (g.json)
		g.arr = json_object_new_array();
	if (argc - optind == 1) {
		struct mpath m;
		if (resolve_mount_path(argv[optind], &m) < 0) {
			json_object_put(g.arr);
			return EXIT_PROBLEM;
		}
		g.named = true;
		groups_of_mount(&g, m.root);
	} else if (for_each_mount(each_mount, &g) < 0) {
		complain("cannot read the mount table: %s", strerror(errno));
		g.rc = EXIT_PROBLEM;
	}
	if (g.json) {
		json_print(g.arr);
		json_object_put(g.arr);
	}
	return g.rc;
}

/* ==================================================================================
 * The consumers' health for status: the samples of MOUNT/.topicfs/metrics that
 * answer the monitoring list (README, "Consumers from the shell")
 * ================================================================================== */

static const char *const health_metrics[] = {
	"topicfs_group_lag_ms", "topicfs_group_tombstone_window_ms",
	"topicfs_group_lag_past_half_window", "topicfs_partition_cleaner_behind",
	"topicfs_partition_keyless_fraction", "topicfs_partition_keyless_over_limit",
	"topicfs_partition_oldest_record_age_ms", "topicfs_partition_retention_ms",
	"topicfs_topic_bootstrap_ms", NULL,
};

/* Parses `name{k="v",...} value` (label values with backslash escapes). */
static struct json_object *parse_sample(char *line)
{
	char *brace = strchr(line, '{'), *p, *end;
	struct json_object *o, *labels;
	double v;

	if (!brace)
		return NULL;
	*brace = '\0';
	for (const char *const *n = health_metrics; *n; n++)
		if (!strcmp(line, *n))
			goto known;
	return NULL;
known:
	o = json_object_new_object();
	labels = json_object_new_object();
	json_object_object_add(o, "metric", json_object_new_string(line));
	p = brace + 1;
	while (*p && *p != '}') {
		char *key = p, *eq = strchr(p, '='), *val, *w;
		if (!eq || eq[1] != '"')
			goto bad;
		*eq = '\0';
		val = w = eq + 2;
		for (p = val; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1]) {
				p++;
				*w++ = *p == 'n' ? '\n' : *p;
			} else {
				*w++ = *p;
			}
		}
		if (*p != '"')
			goto bad;
		*w = '\0';
		json_object_object_add(labels, key, json_object_new_string(val));
		p++;
		if (*p == ',')
			p++;
	}
	if (*p != '}')
		goto bad;
	v = strtod(p + 1, &end);
	if (end == p + 1)
		goto bad;
	json_object_object_add(o, "labels", labels);
	json_object_object_add(o, "value", json_object_new_double(v));
	return o;
bad:
	json_object_put(labels);
	json_object_put(o);
	return NULL;
}

struct json_object *read_consumer_health(const char *root)
{
	char path[PATH_MAX + 32];
	struct json_object *arr = json_object_new_array();
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/.topicfs/metrics", root);
	f = fopen(path, "r");
	if (!f)
		return arr;
	while (getline(&line, &cap, f) > 0) {
		struct json_object *o = line[0] == '#' ? NULL : parse_sample(line);
		if (o)
			json_object_array_add(arr, o);
	}
	free(line);
	fclose(f);
	return arr;
}

static const char *label(struct json_object *s, const char *k)
{
	struct json_object *l, *v;

	if (!json_object_object_get_ex(s, "labels", &l) || !json_object_object_get_ex(l, k, &v))
		return "";
	return json_object_get_string(v);
}

static double value(struct json_object *s)
{
	struct json_object *v;

	return json_object_object_get_ex(s, "value", &v) ? json_object_get_double(v) : 0;
}

static const char *metric(struct json_object *s)
{
	struct json_object *v;

	return json_object_object_get_ex(s, "metric", &v) ? json_object_get_string(v) : "";
}

/* The sample of name with the same labels as s, or NULL. */
static struct json_object *sibling(struct json_object *arr, struct json_object *s, const char *name)
{
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *o = json_object_array_get_idx(arr, i);
		if (!strcmp(metric(o), name) && !strcmp(label(o, "topic"), label(s, "topic")) &&
		    !strcmp(label(o, "partition"), label(s, "partition")) &&
		    !strcmp(label(o, "group"), label(s, "group")))
			return o;
	}
	return NULL;
}

void print_consumer_health(struct json_object *arr)
{
	size_t flagged = 0;

	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *s = json_object_array_get_idx(arr, i), *o;
		const char *name = metric(s);

		if (!strcmp(name, "topicfs_group_lag_past_half_window") && value(s) == 1) {
			struct json_object *lag = sibling(arr, s, "topicfs_group_lag_ms");
			struct json_object *win = sibling(arr, s, "topicfs_group_tombstone_window_ms");
			printf("consumers: group %s on %s/%s lags %.0f ms, past half of delete.retention.ms "
			       "%.0f: its deletions are not proven\n", label(s, "group"), label(s, "topic"),
			       label(s, "partition"), lag ? value(lag) : -1, win ? value(win) : -1);
			flagged++;
		} else if (!strcmp(name, "topicfs_partition_cleaner_behind") && value(s) == 1) {
			printf("consumers: %s/%s: dirty ratio back over min.cleanable.dirty.ratio after a "
			       "pass: the cleaner may be falling behind\n", label(s, "topic"),
			       label(s, "partition"));
			flagged++;
		} else if (!strcmp(name, "topicfs_partition_keyless_over_limit") && value(s) == 1) {
			o = sibling(arr, s, "topicfs_partition_keyless_fraction");
			printf("consumers: %s/%s: %.2f%% of the records have no key (over 1%%: a producer "
			       "without keys?)\n", label(s, "topic"), label(s, "partition"),
			       o ? value(o) * 100 : -1);
			flagged++;
		} else if (!strcmp(name, "topicfs_partition_oldest_record_age_ms")) {
			o = sibling(arr, s, "topicfs_partition_retention_ms");
			if (o && value(o) >= 0 && value(s) > value(o)) {
				printf("consumers: %s/%s: oldest record %.0f ms old, past retention.ms %.0f\n",
				       label(s, "topic"), label(s, "partition"), value(s), value(o));
				flagged++;
			}
		} else if (!strcmp(name, "topicfs_topic_bootstrap_ms")) {
			printf("consumers: %s: the last bootstrap from zero took %.0f ms\n",
			       label(s, "topic"), value(s));
		}
	}
	if (!flagged)
		printf("consumers: nothing flagged\n");
}
