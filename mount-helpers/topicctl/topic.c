/* topic.c - the commands that manage a topic through a mount: create, describe,
 * config, delete. Each is what mkdir, rmdir, rm, getfattr and setfattr on the
 * topic's directory would do, with every value checked before the first change.
 */
#include "topicctl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "engine/topic_config.h"

#define MAX_PARTITIONS 100000
#define DELETE_ROUNDS 5              /* rm everything, rmdir; again if writers raced us */

/* Checks NAME=VALUE against a scratch config (the engine's own validator), so a
 * bad value is refused before anything changes. */
static int check_config_pair(const char *arg, char *name, size_t ncap, const char **value)
{
	const char *eq = strchr(arg, '=');
	struct tfs_topic_config scratch;
	bool known = false;

	if (!eq || eq == arg || (size_t)(eq - arg) >= ncap)
		return usage_error("'%s' is not NAME=VALUE", arg);
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = '\0';
	*value = eq + 1;
	for (const char *const *n = tfs_topic_config_names(); *n && !known; n++)
		known = !strcmp(*n, name);
	if (!known)
		return usage_error("unknown topic config '%s'", name);
	tfs_topic_config_defaults(&scratch);
	if (tfs_topic_config_set(&scratch, name, *value) < 0)
		return usage_error("invalid value for %s: '%s'", name, *value);
	return EXIT_OK;
}

/* ==================================================================================
 * create
 * ================================================================================== */

const char create_help[] =
	"usage: topicctl create MOUNT/TOPIC [--partitions N] [--config NAME=VALUE]...\n"
	"\n"
	"Creates a topic through a topicfs mount: mkdir MOUNT/TOPIC (the mount gives it\n"
	"its -o partitions), mkdir MOUNT/TOPIC/K for each further partition, then sets\n"
	"every --config as the attribute user.topicfs.NAME of the topic directory.\n"
	"Values are checked before anything is created; if the mount refuses a step,\n"
	"the new, empty topic is removed again.\n"
	"\n"
	"  -p, --partitions N       partitions of the topic (default: the mount's)\n"
	"  -c, --config NAME=VALUE  a topic config by its Kafka name (repeatable)\n"
	"  -h, --help               show this help\n"
	"\n"
	EXIT_STATUS_HELP;

static void remove_new_topic(const char *path)
{
	if (rmdir(path) < 0)
		complain("%s: could not remove the half-created topic: %s", path, strerror(errno));
}

int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "partitions", required_argument, NULL, 'p' },
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char parent[PATH_MAX], path[PATH_MAX + TOPIC_CAP + 2], name[TOPIC_CAP];
	const char **configs = calloc((size_t)argc, sizeof(*configs));
	size_t nconfigs = 0, have = 0;
	int32_t *parts = NULL;
	int64_t want = 0;
	const char *arg, *slash;
	int c, rc = EXIT_PROBLEM;

	if (!configs)
		return EXIT_PROBLEM;
	while ((c = next_opt(argc, argv, "p:c:h", opts)) != -1) {
		switch (c) {
		case 'p':
			if (!parse_i64(optarg, 1, MAX_PARTITIONS, &want)) {
				free(configs);
				return usage_error("--partitions needs a number from 1 to %d", MAX_PARTITIONS);
			}
			break;
		case 'c':
			configs[nconfigs++] = optarg;
			break;
		case 'h':
			free(configs);
			return show_help();
		default:
			free(configs);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		free(configs);
		return usage_error("create needs exactly one MOUNT/TOPIC");
	}
	arg = argv[optind];
	for (size_t i = 0; i < nconfigs; i++) {
		char n[128];
		const char *v;
		if ((rc = check_config_pair(configs[i], n, sizeof(n), &v)) != EXIT_OK)
			goto out;
	}
	rc = EXIT_PROBLEM;
	snprintf(parent, sizeof(parent), "%s", arg);
	while (strlen(parent) > 1 && parent[strlen(parent) - 1] == '/')
		parent[strlen(parent) - 1] = '\0';
	slash = strrchr(parent, '/');
	if (strlen(slash ? slash + 1 : parent) >= sizeof(name)) {
		rc = usage_error("the topic name is longer than 249 bytes");
		goto out;
	}
	memcpy(name, slash ? slash + 1 : parent, strlen(slash ? slash + 1 : parent) + 1);
	if (slash)
		parent[slash == parent ? 1 : slash - parent] = '\0';
	else
		snprintf(parent, sizeof(parent), ".");
	if (!tfs_topic_name_valid(name)) {
		rc = usage_error("'%s' is not a topic name (1 to 249 of [A-Za-z0-9._-], not "
		                 "starting with '.')", name);
		goto out;
	}
	if (!is_mount_root(parent)) {
		complain("%s: not the root of a topicfs mount", parent);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/%s", parent, name);
	if (mkdir(path, 0777) < 0) {
		complain("%s: %s", path, errno == EEXIST ? "the topic already exists" : strerror(errno));
		goto out;
	}
	if (list_partitions(path, &parts, &have) < 0) {
		complain("%s: cannot list partitions: %s", path, strerror(errno));
		remove_new_topic(path);
		goto out;
	}
	if (want && (int64_t)have > want) {
		complain("%s: the mount creates %zu partitions per topic (-o partitions); a topic "
		         "cannot have fewer", path, have);
		remove_new_topic(path);
		goto out;
	}
	for (int64_t p = (int64_t)have; p < want; p++) {
		char pp[sizeof(path) + 24];
		snprintf(pp, sizeof(pp), "%s/%" PRId64, path, p);
		if (mkdir(pp, 0777) < 0) {
			complain("%s: cannot add partition %" PRId64 ": %s", path, p, strerror(errno));
			remove_new_topic(path);
			goto out;
		}
	}
	for (size_t i = 0; i < nconfigs; i++) {
		char n[128];
		const char *v;
		int err;
		check_config_pair(configs[i], n, sizeof(n), &v);
		if ((err = xset(path, n, v)) < 0) {
			complain("%s: the mount refused %s=%s: %s", path, n, v, strerror(-err));
			remove_new_topic(path);
			goto out;
		}
	}
	printf("created topic %s with %" PRId64 " partition%s\n", name,
	       want ? want : (int64_t)have, (want ? want : (int64_t)have) == 1 ? "" : "s");
	rc = EXIT_OK;
out:
	free(parts);
	free(configs);
	return rc;
}

/* ==================================================================================
 * describe and config
 * ================================================================================== */

/* Reads every topic config of a topic directory into a JSON array, or prints it. */
static int config_table(const char *topic_dir, struct json_object *arr, bool print,
                        const char *only)
{
	struct tfs_topic_config defaults, cur;
	int found = 0, failed = 0;

	tfs_topic_config_defaults(&defaults);
	if (print && !only)
		printf("Config (* = differs from the default):\n");
	for (const char *const *n = tfs_topic_config_names(); *n; n++) {
		char val[XATTR_VALUE_CAP], def[256];
		ssize_t len;
		bool is_default;

		if (only && strcmp(only, *n))
			continue;
		found++;
		len = xget(topic_dir, *n, val, sizeof(val));
		if (len < 0) {
			complain("%s: cannot read %s: %s", topic_dir, *n, strerror((int)-len));
			failed++;
			continue;
		}
		tfs_topic_config_get(&defaults, *n, def, sizeof(def));
		cur = defaults;
		is_default = tfs_topic_config_set(&cur, *n, val) == 0 && tfs_topic_config_is_default(&cur, *n);
		if (arr) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "name", json_object_new_string(*n));
			json_object_object_add(o, "value", json_object_new_string(val));
			json_object_object_add(o, "default", json_object_new_string(def));
			json_object_object_add(o, "is_default", json_object_new_boolean(is_default));
			json_object_array_add(arr, o);
		} else if (print && only) {
			printf("%s\n", val);
		} else if (print) {
			if (is_default)
				printf("  %-28s %s\n", *n, val);
			else
				printf("* %-28s %-20s (default %s)\n", *n, val, def);
		}
	}
	if (only && !found)
		return usage_error("unknown topic config '%s'", only);
	return failed ? EXIT_PROBLEM : EXIT_OK;
}

/* Lists the producers of each partition (user.topicfs.producers: "id epoch
 * last_sequence last_offset last_timestamp" lines) into arr, or prints them. */
static void producer_table(const char *topic_dir, const int32_t *parts, size_t n,
                           struct json_object *arr)
{
	static char val[1 << 16];
	bool header = false;

	for (size_t i = 0; i < n; i++) {
		char dir[PATH_MAX + TOPIC_CAP + 16];
		ssize_t len;
		char *line, *save = NULL;

		snprintf(dir, sizeof(dir), "%s/%" PRId32, topic_dir, parts[i]);
		len = xget(dir, "producers", val, sizeof(val) - 1);
		if (len <= 0)
			continue;          /* none, or a mount without producer state */
		val[len] = '\0';
		for (line = strtok_r(val, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			long long id, seq, off, ts;
			int epoch;
			if (sscanf(line, "%lld %d %lld %lld %lld", &id, &epoch, &seq, &off, &ts) != 5)
				continue;
			if (arr) {
				struct json_object *o = json_object_new_object();
				json_object_object_add(o, "partition", json_object_new_int(parts[i]));
				json_object_object_add(o, "producer_id", json_object_new_int64(id));
				json_object_object_add(o, "epoch", json_object_new_int(epoch));
				json_object_object_add(o, "last_sequence", json_object_new_int64(seq));
				json_object_object_add(o, "last_offset", json_object_new_int64(off));
				json_object_object_add(o, "last_timestamp", json_object_new_int64(ts));
				json_object_array_add(arr, o);
				continue;
			}
			if (!header) {
				printf("Producers:\n%-9s %19s %6s %13s %12s %15s\n", "PARTITION", "PRODUCER_ID",
				       "EPOCH", "LAST_SEQUENCE", "LAST_OFFSET", "LAST_TIMESTAMP");
				header = true;
			}
			printf("%-9" PRId32 " %19lld %6d %13lld %12lld %15lld\n", parts[i], id, epoch, seq,
			       off, ts);
		}
	}
	if (header)
		printf("\n");
}

const char describe_help[] =
	"usage: topicctl describe [--json] MOUNT/TOPIC\n"
	"\n"
	"Shows each partition's offsets (log_start_offset, log_end_offset), size,\n"
	"segments, live keys and dirty ratio (\"-\" where the mount has no cleaner\n"
	"attributes), the idempotent producers each partition knows (id, epoch, last\n"
	"sequence, last offset, last timestamp), then the topic's config, marking values that differ from the\n"
	"built-in defaults. Everything comes from the user.topicfs.* attributes.\n"
	"\n"
	"  -j, --json   print JSON\n"
	"  -h, --help   show this help\n"
	"\n"
	EXIT_STATUS_HELP;

int cmd_describe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct json_object *root = NULL, *parr = NULL, *carr = NULL;
	struct mpath m;
	int32_t *parts = NULL;
	size_t n = 0;
	bool json = false;
	char tdir[PATH_MAX + TOPIC_CAP];
	int c, rc = EXIT_PROBLEM;

	while ((c = next_opt(argc, argv, "jh", opts)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind != 1)
		return usage_error("describe needs exactly one MOUNT/TOPIC");
	if (resolve_mount_path(argv[optind], &m) < 0)
		return EXIT_PROBLEM;
	if (!m.topic[0] || m.partition >= 0) {
		complain("%s: not a topic directory", argv[optind]);
		return EXIT_PROBLEM;
	}
	snprintf(tdir, sizeof(tdir), "%s/%s", m.root, m.topic);
	if (list_partitions(tdir, &parts, &n) < 0) {
		complain("%s: %s", tdir, strerror(errno));
		return EXIT_PROBLEM;
	}
	if (json) {
		root = json_object_new_object();
		parr = json_object_new_array();
		carr = json_object_new_array();
		json_object_object_add(root, "topic", json_object_new_string(m.topic));
		json_object_object_add(root, "path", json_object_new_string(tdir));
	} else {
		printf("Topic: %s  Partitions: %zu  Path: %s\n", m.topic, n, tdir);
		printf("%-9s %12s %12s %14s %8s %10s %11s\n", "PARTITION", "LOG_START", "LOG_END",
		       "SIZE_BYTES", "SEGMENTS", "LIVE_KEYS", "DIRTY_RATIO");
	}
	for (size_t i = 0; i < n; i++) {
		struct pinfo pi;
		pinfo_read(&pi, tdir, parts[i]);
		if (json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "partition", json_object_new_int(pi.partition));
			json_add_i64(o, "log_start_offset", pi.have & P_START, pi.log_start);
			json_add_i64(o, "log_end_offset", pi.have & P_END, pi.log_end);
			json_add_i64(o, "size_bytes", pi.have & P_SIZE, pi.size);
			json_add_i64(o, "segments", pi.have & P_SEGMENTS, pi.segments);
			json_add_i64(o, "live_keys", pi.have & P_LIVE, pi.live_keys);
			json_object_object_add(o, "dirty_ratio", pi.have & P_DIRTY
			                       ? json_object_new_double(pi.dirty_ratio) : NULL);
			json_object_array_add(parr, o);
		} else {
			char f[6][32];
#define FMT_OPT(i, flag, v) ((pi.have & (flag)) ? (snprintf(f[i], sizeof(f[i]), "%" PRId64, (v)), f[i]) : "-")
			if (pi.have & P_DIRTY)
				snprintf(f[5], sizeof(f[5]), "%.3f", pi.dirty_ratio);
			printf("%-9" PRId32 " %12s %12s %14s %8s %10s %11s\n", pi.partition,
			       FMT_OPT(0, P_START, pi.log_start), FMT_OPT(1, P_END, pi.log_end),
			       FMT_OPT(2, P_SIZE, pi.size), FMT_OPT(3, P_SEGMENTS, pi.segments),
			       FMT_OPT(4, P_LIVE, pi.live_keys), (pi.have & P_DIRTY) ? f[5] : "-");
#undef FMT_OPT
		}
	}
	if (!json)
		printf("\n");
	if (json) {
		struct json_object *prod = json_object_new_array();
		producer_table(tdir, parts, n, prod);
		json_object_object_add(root, "producers", prod);
	} else {
		producer_table(tdir, parts, n, NULL);
	}
	rc = config_table(tdir, carr, !json, NULL);
	if (json) {
		json_object_object_add(root, "partitions", parr);
		json_object_object_add(root, "config", carr);
		json_print(root);
		json_object_put(root);
	}
	free(parts);
	return rc;
}

const char config_help[] =
	"usage: topicctl config [--json] MOUNT/TOPIC                 show every config\n"
	"       topicctl config MOUNT/TOPIC NAME                     show one value\n"
	"       topicctl config MOUNT/TOPIC NAME=VALUE...            set values\n"
	"       topicctl config MOUNT/TOPIC --unset NAME...          back to the mount's default\n"
	"\n"
	"Reads or sets a topic's config through the attributes user.topicfs.NAME of the\n"
	"topic directory (Kafka's names). All values are checked before the first one\n"
	"is set. Names: cleanup.policy segment.bytes segment.ms\n"
	"min.cleanable.dirty.ratio delete.retention.ms min.compaction.lag.ms\n"
	"max.compaction.lag.ms retention.ms retention.bytes max.message.bytes\n"
	"compression.type compression.zstd.level message.timestamp.type\n"
	"segment.index.bytes index.interval.bytes flush.ms producer.id.expiration.ms\n"
	"\n"
	"  -u, --unset NAME   remove the topic's value: the mount's default applies\n"
	"  -j, --json         print JSON (when reading)\n"
	"  -h, --help         show this help\n"
	"\n"
	EXIT_STATUS_HELP;

int cmd_config(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "unset", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char **unset = calloc((size_t)argc, sizeof(*unset));
	size_t nunset = 0;
	struct mpath m;
	char tdir[PATH_MAX + TOPIC_CAP];
	bool json = false;
	int c, rc = EXIT_PROBLEM, nargs;

	if (!unset)
		return EXIT_PROBLEM;
	while ((c = next_opt(argc, argv, "u:jh", opts)) != -1) {
		if (c == 'u') {
			unset[nunset++] = optarg;
		} else if (c == 'j') {
			json = true;
		} else if (c == 'h') {
			free(unset);
			return show_help();
		} else {
			free(unset);
			return EXIT_USAGE;
		}
	}
	nargs = argc - optind;
	if (nargs < 1) {
		free(unset);
		return usage_error("config needs MOUNT/TOPIC");
	}
	for (int i = optind + 1; i < argc; i++) {
		char n[128];
		const char *v;
		if (!strchr(argv[i], '=')) {
			if (nargs != 2 || nunset) {
				rc = usage_error("give one NAME to read, or NAME=VALUE pairs to set");
				goto out;
			}
			continue;
		}
		if ((rc = check_config_pair(argv[i], n, sizeof(n), &v)) != EXIT_OK)
			goto out;
	}
	for (size_t i = 0; i < nunset; i++) {
		bool known = false;
		for (const char *const *n = tfs_topic_config_names(); *n && !known; n++)
			known = !strcmp(*n, unset[i]);
		if (!known) {
			rc = usage_error("unknown topic config '%s'", unset[i]);
			goto out;
		}
	}
	rc = EXIT_PROBLEM;
	if (resolve_mount_path(argv[optind], &m) < 0)
		goto out;
	if (!m.topic[0] || m.partition >= 0) {
		complain("%s: not a topic directory", argv[optind]);
		goto out;
	}
	snprintf(tdir, sizeof(tdir), "%s/%s", m.root, m.topic);
	if (nargs == 1 && !nunset) {
		struct json_object *arr = json ? json_object_new_array() : NULL;
		rc = config_table(tdir, arr, !json, NULL);
		if (json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "topic", json_object_new_string(m.topic));
			json_object_object_add(o, "config", arr);
			json_print(o);
			json_object_put(o);
		}
		goto out;
	}
	if (nargs == 2 && !strchr(argv[optind + 1], '=')) {
		if (json) {
			struct json_object *arr = json_object_new_array();
			rc = config_table(tdir, arr, false, argv[optind + 1]);
			if (rc == EXIT_OK && json_object_array_length(arr) == 1)
				json_print(json_object_array_get_idx(arr, 0));
			json_object_put(arr);
		} else {
			rc = config_table(tdir, NULL, true, argv[optind + 1]);
		}
		goto out;
	}
	rc = EXIT_OK;
	for (int i = optind + 1; i < argc; i++) {
		char n[128];
		const char *v;
		int err;
		check_config_pair(argv[i], n, sizeof(n), &v);
		if ((err = xset(tdir, n, v)) < 0) {
			complain("%s: the mount refused %s=%s: %s", tdir, n, v, strerror(-err));
			rc = EXIT_PROBLEM;
			goto out;
		}
		printf("%s: %s=%s\n", m.topic, n, v);
	}
	for (size_t i = 0; i < nunset; i++) {
		char full[256], val[XATTR_VALUE_CAP];
		snprintf(full, sizeof(full), XATTR_PREFIX "%s", unset[i]);
		if (lremovexattr(tdir, full) < 0) {
			complain("%s: cannot unset %s: %s", tdir, unset[i], strerror(errno));
			rc = EXIT_PROBLEM;
			goto out;
		}
		if (xget(tdir, unset[i], val, sizeof(val)) >= 0)
			printf("%s: %s=%s (the mount's default)\n", m.topic, unset[i], val);
	}
out:
	free(unset);
	return rc;
}

/* ==================================================================================
 * delete
 * ================================================================================== */

const char delete_help[] =
	"usage: topicctl delete MOUNT/TOPIC\n"
	"\n"
	"Deletes a topic in one step: removes every key of every partition (each rm\n"
	"appends a tombstone), then removes the topic directory, which deletes its\n"
	"files. Keys written meanwhile are removed too, up to 5 rounds.\n"
	"\n"
	"  -h, --help   show this help\n"
	"\n"
	EXIT_STATUS_HELP;

/* Removes every key of a partition directory; returns the count or -errno. */
static int64_t tombstone_all(const char *pdir)
{
	DIR *d = opendir(pdir);
	struct dirent *de;
	int64_t n = 0;
	int err = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			n++;
		else if (errno != ENOENT && !err)
			err = errno;
	}
	closedir(d);
	if (err) {
		complain("%s: cannot remove a key: %s", pdir, strerror(err));
		return -err;
	}
	return n;
}

int cmd_delete(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct mpath m;
	char tdir[PATH_MAX + TOPIC_CAP];
	int64_t total = 0;
	int c;

	while ((c = next_opt(argc, argv, "h", opts)) != -1) {
		if (c == 'h')
			return show_help();
		return EXIT_USAGE;
	}
	if (argc - optind != 1)
		return usage_error("delete needs exactly one MOUNT/TOPIC");
	if (resolve_mount_path(argv[optind], &m) < 0)
		return EXIT_PROBLEM;
	if (!m.topic[0] || m.partition >= 0) {
		complain("%s: not a topic directory", argv[optind]);
		return EXIT_PROBLEM;
	}
	snprintf(tdir, sizeof(tdir), "%s/%s", m.root, m.topic);
	for (int round = 0; round < DELETE_ROUNDS; round++) {
		int32_t *parts = NULL;
		size_t n = 0;

		if (list_partitions(tdir, &parts, &n) < 0) {
			complain("%s: %s", tdir, strerror(errno));
			return EXIT_PROBLEM;
		}
		for (size_t i = 0; i < n; i++) {
			char pdir[sizeof(tdir) + 16];
			int64_t k;
			snprintf(pdir, sizeof(pdir), "%s/%" PRId32, tdir, parts[i]);
			k = tombstone_all(pdir);
			if (k < 0) {
				free(parts);
				return EXIT_PROBLEM;
			}
			total += k;
		}
		free(parts);
		if (rmdir(tdir) == 0) {
			printf("deleted topic %s (%" PRId64 " key%s tombstoned first)\n", m.topic, total,
			       total == 1 ? "" : "s");
			return EXIT_OK;
		}
		if (errno != ENOTEMPTY) {
			complain("%s: %s", tdir, strerror(errno));
			return EXIT_PROBLEM;
		}
	}
	complain("%s: keys keep arriving; the topic is still there after %d rounds", tdir,
	         DELETE_ROUNDS);
	return EXIT_PROBLEM;
}
