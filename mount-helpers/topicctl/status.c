/* status.c - the cleaner's view through a mount: status (a bar per partition
 * split into its clean, dirty and uncleanable regions, and the cleaner's
 * metrics), and the two actions that drive it, clean and roll.
 */
#include "topicctl.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "engine/inspect/log_inspect.h"

#define STATUS_BAR_MAX 40
#define STATUS_BAR_MIN 10
#define STATUS_FIXED_COLUMNS 70      /* a status line without its bar and last_clean */
#define DEFAULT_TERM_WIDTH 100       /* when stdout is not a terminal */
#define METRICS_INDENT 10            /* "cleaner: " and a margin */
#define WATCH_DEFAULT_SECONDS 2.0
#define NEXT_PASS_CAP 512            /* a next_pass value is one short line */

static volatile sig_atomic_t interrupted;

/* ==================================================================================
 * status
 * ================================================================================== */

const char status_help[] =
	"usage: topicctl status [--json] [--watch [SECONDS]] [MOUNT[/TOPIC[/PARTITION]]]\n"
	"\n"
	"One line per partition: a bar whose length is scaled to the partition's bytes\n"
	"(the largest gets the full width), split into the regions of the cleaner:\n"
	"\n"
	"  =  clean         [log start, first_dirty_offset): already compacted\n"
	"  #  dirty         [first_dirty_offset, first_uncleanable_offset): the next pass\n"
	"  .  uncleanable   [first_uncleanable_offset, log end): the active segment and\n"
	"                   records younger than min.compaction.lag.ms; never cleaned yet\n"
	"  ?  unknown       the mount does not report the cleaner's attributes\n"
	"\n"
	"then the dirty ratio, what the next pass would free (its dry run, next_pass:\n"
	"\"would free 41 MB\"), the last pass (last_clean) and, if the cleaner gave up on\n"
	"the partition, its uncleanable_reason; a partition whose log is damaged (an\n"
	"unreadable region of a sealed segment found when it was mounted) gets a\n"
	"DAMAGED line per region: segment file, byte position, the bytes and offsets\n"
	"that cannot be read (see topicctl repair); then the cleaner's metrics from\n"
	"MOUNT/.topicfs/metrics. The uncleanable bytes are those of the segments at or\n"
	"past first_uncleanable_offset when the data directory is readable; the clean and\n"
	"dirty bytes split the rest by dirty_ratio. Without a MOUNT: every topicfs mount.\n"
	"\n"
	"  -w, --watch [SECONDS]   redraw every SECONDS (default 2) until interrupted\n"
	"  -j, --json              print JSON (one document per redraw)\n"
	"  -h, --help              show this help\n"
	"\n"
	"Exit status: 0 every partition is cleanable and undamaged; 1 some partition is\n"
	"uncleanable or damaged (with --watch: at the last redraw), or a mount cannot be\n"
	"read; 2 usage error.\n";

struct prow {
	char topic[TOPIC_CAP];
	struct pinfo pi;
	bool regions;                  /* the split below is known */
	char damage[XATTR_VALUE_CAP];  /* user.topicfs.damage: a line per region, "" none */
	double clean_bytes, dirty_bytes, uncleanable_bytes;
	bool have_free;                /* the mount answered next_pass */
	int64_t would_free;            /* its bytes_freed: what the next pass frees */
};

/* The bytes the next pass of partition p would free, from the mount's dry run
 * (`user.topicfs.next_pass`, field bytes_freed). */
static void prow_next_pass(struct prow *r, const char *topic_dir)
{
	char path[PATH_MAX + TOPIC_CAP + 16], val[NEXT_PASS_CAP];
	const char *f;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%" PRId32, topic_dir, r->pi.partition);
	n = getxattr(path, "user.topicfs.next_pass", val, sizeof(val) - 1);
	if (n < 0)
		return;
	val[n] = '\0';
	f = strstr(val, " bytes_freed=");
	if (f && sscanf(f, " bytes_freed=%" SCNd64, &r->would_free) == 1)
		r->have_free = true;
}

/* Bytes of the segments whose base is at or past from, or -1 if the partition's
 * files cannot be listed. */
static int64_t bytes_from_offset(const char *data_dir, const char *topic, int32_t p,
                                 tfs_offset_t from)
{
	char dir[PATH_MAX + TOPIC_CAP + 16];
	struct tfs_dir_listing l;
	int64_t sum = 0;

	if (!data_dir[0])
		return -1;
	snprintf(dir, sizeof(dir), "%s/%s-%" PRId32, data_dir, topic, p);
	if (tfs_inspect_list_dir(dir, &l) < 0)
		return -1;
	for (size_t i = 0; i < l.count; i++)
		if (l.files[i].kind == TFS_FILE_LOG && l.files[i].base >= from && l.files[i].size_bytes > 0)
			sum += l.files[i].size_bytes;
	tfs_dir_listing_release(&l);
	return sum;
}

static void prow_regions(struct prow *r, const char *data_dir)
{
	const struct pinfo *pi = &r->pi;
	const unsigned need = P_START | P_END | P_SIZE | P_FIRST_DIRTY | P_FIRST_UNCLEANABLE;
	double size = (double)pi->size, span, rest;
	int64_t unc;

	r->regions = (pi->have & need) == need;
	if (!r->regions)
		return;
	span = (double)(pi->log_end - pi->log_start);
	unc = bytes_from_offset(data_dir, r->topic, pi->partition, pi->first_uncleanable);
	if (unc >= 0)
		r->uncleanable_bytes = (double)unc;
	else
		r->uncleanable_bytes = span > 0 ? size * (double)(pi->log_end - pi->first_uncleanable) / span
		                                : size;
	if (r->uncleanable_bytes > size)
		r->uncleanable_bytes = size;
	if (r->uncleanable_bytes < 0)
		r->uncleanable_bytes = 0;
	rest = size - r->uncleanable_bytes;
	if (pi->have & P_DIRTY) {
		r->dirty_bytes = rest * pi->dirty_ratio;
	} else {
		double cd = (double)(pi->first_uncleanable - pi->log_start);
		r->dirty_bytes = cd > 0 ? rest * (double)(pi->first_uncleanable - pi->first_dirty) / cd : 0;
	}
	r->clean_bytes = rest - r->dirty_bytes;
}

static void collect_topic(const struct mpath *m, const char *topic, int32_t only,
                          struct prow **rows, size_t *n, size_t *cap)
{
	char tdir[PATH_MAX + TOPIC_CAP];
	int32_t *parts = NULL;
	size_t np = 0;

	snprintf(tdir, sizeof(tdir), "%s/%s", m->root, topic);
	if (list_partitions(tdir, &parts, &np) < 0) {
		complain("%s: %s", tdir, strerror(errno));
		return;
	}
	for (size_t i = 0; i < np; i++) {
		struct prow *r;
		if (only >= 0 && parts[i] != only)
			continue;
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 16;
			struct prow *nr = realloc(*rows, nc * sizeof(*nr));
			if (!nr)
				break;
			*rows = nr;
			*cap = nc;
		}
		r = &(*rows)[(*n)++];
		memset(r, 0, sizeof(*r));
		snprintf(r->topic, sizeof(r->topic), "%s", topic);
		pinfo_read(&r->pi, tdir, parts[i]);
		if (xget(r->pi.path, "damage", r->damage, sizeof(r->damage)) < 0)
			r->damage[0] = '\0';
		prow_regions(r, m->data_dir);
		prow_next_pass(r, tdir);
	}
	free(parts);
}

/* Cells of a bar of `len` characters split by cumulative rounding, so the parts
 * always add up to len. */
static void draw_bar(char *out, int len, const double *parts, const char *glyphs, int nparts)
{
	double total = 0, acc = 0;
	int pos = 0;

	for (int i = 0; i < nparts; i++)
		total += parts[i];
	for (int i = 0; i < nparts && total > 0; i++) {
		int end;
		acc += parts[i];
		end = (int)lround(acc / total * len);
		while (pos < end)
			out[pos++] = glyphs[i];
	}
	while (pos < len)
		out[pos++] = total > 0 ? glyphs[nparts - 1] : '?';
	out[pos] = '\0';
}

static int term_width(void)
{
	struct winsize ws;

	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return DEFAULT_TERM_WIDTH;
}

/* The cleaner's mount-wide metrics: unlabelled samples named topicfs_cleaner_*. */
static struct json_object *read_cleaner_metrics(const char *root)
{
	char path[PATH_MAX + 32];
	struct json_object *o = json_object_new_object();
	FILE *f;
	char *line = NULL;
	size_t cap = 0;

	snprintf(path, sizeof(path), "%s/.topicfs/metrics", root);
	f = fopen(path, "r");
	if (!f)
		return o;
	while (getline(&line, &cap, f) > 0) {
		char *sp, *end;
		double v;
		if (strncmp(line, "topicfs_cleaner_", strlen("topicfs_cleaner_")) != 0)
			continue;
		sp = strchr(line, ' ');
		if (!sp || memchr(line, '{', (size_t)(sp - line)))
			continue;
		*sp = '\0';
		v = strtod(sp + 1, &end);
		if (end == sp + 1)
			continue;
		json_object_object_add(o, line + strlen("topicfs_cleaner_"),
		                       v == floor(v) && fabs(v) < 9e15 ? json_object_new_int64((int64_t)v)
		                                                      : json_object_new_double(v));
	}
	free(line);
	fclose(f);
	return o;
}

/* Whether the partition needs the operator: uncleanable or damaged. */
static bool prow_bad(const struct prow *r)
{
	return ((r->pi.have & P_REASON) && r->pi.reason[0]) || r->damage[0];
}

/* Prints (or adds to jmounts) the status of one mount; returns how many of its
 * partitions are uncleanable or damaged. */
static size_t status_one_mount(const struct mpath *m, bool json, struct json_object *jmounts)
{
	struct prow *rows = NULL;
	size_t n = 0, cap = 0;
	double max_size = 0;
	struct json_object *metrics;
	int width = term_width(), barw;
	size_t bad = 0;

	if (m->topic[0]) {
		collect_topic(m, m->topic, m->partition, &rows, &n, &cap);
	} else {
		char **topics;
		size_t nt;
		if (list_topics(m->root, &topics, &nt) == 0) {
			for (size_t i = 0; i < nt; i++)
				collect_topic(m, topics[i], -1, &rows, &n, &cap);
			free_strings(topics, nt);
		}
	}
	metrics = read_cleaner_metrics(m->root);
	for (size_t i = 0; i < n; i++) {
		if ((rows[i].pi.have & P_SIZE) && (double)rows[i].pi.size > max_size)
			max_size = (double)rows[i].pi.size;
		bad += prow_bad(&rows[i]);
	}
	barw = width - STATUS_FIXED_COLUMNS;
	barw = barw > STATUS_BAR_MAX ? STATUS_BAR_MAX : barw < STATUS_BAR_MIN ? STATUS_BAR_MIN : barw;
	if (json) {
		struct json_object *jm = json_object_new_object(), *arr = json_object_new_array();
		json_object_object_add(jm, "mount", json_object_new_string(m->root));
		json_object_object_add(jm, "data_dir", m->data_dir[0] ? json_object_new_string(m->data_dir)
		                                                     : NULL);
		for (size_t i = 0; i < n; i++) {
			const struct prow *r = &rows[i];
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "topic", json_object_new_string(r->topic));
			json_object_object_add(o, "partition", json_object_new_int(r->pi.partition));
			json_add_i64(o, "size_bytes", r->pi.have & P_SIZE, r->pi.size);
			json_add_i64(o, "log_start_offset", r->pi.have & P_START, r->pi.log_start);
			json_add_i64(o, "log_end_offset", r->pi.have & P_END, r->pi.log_end);
			json_add_i64(o, "first_dirty_offset", r->pi.have & P_FIRST_DIRTY, r->pi.first_dirty);
			json_add_i64(o, "first_uncleanable_offset", r->pi.have & P_FIRST_UNCLEANABLE,
			             r->pi.first_uncleanable);
			json_object_object_add(o, "dirty_ratio", (r->pi.have & P_DIRTY)
			                       ? json_object_new_double(r->pi.dirty_ratio) : NULL);
			json_add_i64(o, "would_free_bytes", r->have_free, r->would_free);
			json_object_object_add(o, "clean_bytes", r->regions ? json_object_new_int64(llround(r->clean_bytes)) : NULL);
			json_object_object_add(o, "dirty_bytes", r->regions ? json_object_new_int64(llround(r->dirty_bytes)) : NULL);
			json_object_object_add(o, "uncleanable_bytes", r->regions
			                       ? json_object_new_int64(llround(r->uncleanable_bytes)) : NULL);
			json_object_object_add(o, "last_clean", json_str_or_null((r->pi.have & P_LAST_CLEAN)
			                                                         ? r->pi.last_clean : NULL));
			json_object_object_add(o, "uncleanable_reason", json_str_or_null(
			                       (r->pi.have & P_REASON) ? r->pi.reason : NULL));
			json_object_object_add(o, "damage", json_str_or_null(r->damage[0] ? r->damage : NULL));
			json_object_array_add(arr, o);
		}
		json_object_object_add(jm, "partitions", arr);
		json_object_object_add(jm, "cleaner", json_object_object_length(metrics) ? metrics : NULL);
		if (!json_object_object_length(metrics))
			json_object_put(metrics);
		json_object_object_add(jm, "consumers", read_consumer_health(m->root));
		json_object_array_add(jmounts, jm);
		free(rows);
		return bad;
	}
	printf("topicfs %s  (data %s)\n", m->root, m->data_dir[0] ? m->data_dir : "unknown");
	if (n == 0)
		printf("  no partitions\n");
	for (size_t i = 0; i < n; i++) {
		const struct prow *r = &rows[i];
		char name[TOPIC_CAP + 16], size[32], bar[STATUS_BAR_MAX + 1], ratio[16], freed[48];
		int len = 0;

		snprintf(name, sizeof(name), "%s/%" PRId32, r->topic, r->pi.partition);
		if ((r->pi.have & P_SIZE) && max_size > 0)
			len = (int)lround((double)r->pi.size / max_size * barw);
		if ((r->pi.have & P_SIZE) && r->pi.size > 0 && len == 0)
			len = 1;
		if (r->regions) {
			const double parts[3] = { r->clean_bytes, r->dirty_bytes, r->uncleanable_bytes };
			draw_bar(bar, len, parts, "=#.", 3);
		} else {
			memset(bar, '?', (size_t)len);
			bar[len] = '\0';
		}
		if (r->pi.have & P_DIRTY)
			snprintf(ratio, sizeof(ratio), "%.2f", r->pi.dirty_ratio);
		else
			snprintf(ratio, sizeof(ratio), "-");
		freed[0] = '\0';
		if (r->have_free) {
			char b[32];
			snprintf(freed, sizeof(freed), " would free %s",
			         fmt_bytes(b, sizeof(b), (double)r->would_free));
		}
		printf("%-24s %10s [%-*s] dirty %-5s%s last %s%s%s\n", name,
		       (r->pi.have & P_SIZE) ? fmt_bytes(size, sizeof(size), (double)r->pi.size) : "-",
		       barw, bar, ratio, freed, (r->pi.have & P_LAST_CLEAN) ? r->pi.last_clean : "-",
		       (r->pi.have & P_REASON) ? "  UNCLEANABLE: " : "",
		       (r->pi.have & P_REASON) ? r->pi.reason : "");
		for (const char *l = r->damage; *l;) {
			const char *e = strchr(l, '\n');
			int ll = e ? (int)(e - l) : (int)strlen(l);
			printf("  DAMAGED: %.*s\n", ll, l);
			l += ll + (e != NULL);
		}
	}
	printf("  = clean  # dirty  . uncleanable (active segment, min.compaction.lag.ms)  ? unknown\n");
	if (json_object_object_length(metrics)) {
		int col = 0;
		printf("cleaner:");
		json_object_object_foreach(metrics, k, v) {
			int w = (int)(strlen(k) + strlen(json_object_to_json_string(v)) + 2);
			if (col + w > width - METRICS_INDENT) {
				printf("\n        ");
				col = 0;
			}
			printf(" %s=%s", k, json_object_to_json_string(v));
			col += w;
		}
		printf("\n");
	} else {
		printf("cleaner: no metrics in %s/.topicfs/metrics (this mount has no cleaner yet)\n",
		       m->root);
	}
	{
		struct json_object *health = read_consumer_health(m->root);
		print_consumer_health(health);
		json_object_put(health);
	}
	json_object_put(metrics);
	free(rows);
	return bad;
}

struct mount_list {
	struct mpath *v;
	size_t n, cap;
};

static void add_mount(void *arg, const char *mnt, const char *src)
{
	struct mount_list *l = arg;
	struct mpath *m;

	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 4;
		struct mpath *nv = realloc(l->v, nc * sizeof(*nv));
		if (!nv)
			return;
		l->v = nv;
		l->cap = nc;
	}
	m = &l->v[l->n++];
	memset(m, 0, sizeof(*m));
	m->partition = -1;
	snprintf(m->root, sizeof(m->root), "%s", mnt);
	snprintf(m->path, sizeof(m->path), "%s", mnt);
	snprintf(m->data_dir, sizeof(m->data_dir), "%s", src);
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void sleep_interruptible(double seconds)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - floor(seconds)) * 1e9) };

	while (!interrupted && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "watch", optional_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct mount_list ml = { 0 };
	double every = 0;
	bool json = false, tty = isatty(STDOUT_FILENO);
	size_t bad = 0;
	int c;

	while ((c = next_opt(argc, argv, "w::jh", opts)) != -1) {
		char *end;
		if (c == 'w') {
			const char *v = optarg;
			/* --watch 5 as well as --watch=5: take a following number */
			if (!v && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
				v = argv[optind++];
			every = WATCH_DEFAULT_SECONDS;
			if (v) {
				every = strtod(v, &end);
				if (*end || !(every > 0) || every > 86400)
					return usage_error("--watch needs a number of seconds above 0");
			}
		} else if (c == 'j') {
			json = true;
		} else if (c == 'h') {
			return show_help();
		} else {
			return EXIT_USAGE;
		}
	}
	if (argc - optind > 1)
		return usage_error("status takes at most one MOUNT[/TOPIC[/PARTITION]]");
	if (argc - optind == 1) {
		ml.v = calloc(1, sizeof(*ml.v));
		if (!ml.v || resolve_mount_path(argv[optind], &ml.v[0]) < 0) {
			free(ml.v);
			return EXIT_PROBLEM;
		}
		ml.n = 1;
	} else {
		for_each_mount(add_mount, &ml);
		if (ml.n == 0) {
			complain("no topicfs mount found in /proc/self/mountinfo");
			return EXIT_PROBLEM;
		}
	}
	if (every > 0) {
		struct sigaction sa = { 0 };
		sa.sa_handler = on_signal;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	do {
		struct json_object *jm = json ? json_object_new_array() : NULL;
		bad = 0;
		if (every > 0 && tty && !json)
			fputs("\033[H\033[2J", stdout);
		if (every > 0 && !json) {
			time_t now = time(NULL);
			struct tm tm;
			char ts[32];
			localtime_r(&now, &tm);
			strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
			printf("%s (every %gs; ^C to stop)\n", ts, every);
		}
		for (size_t i = 0; i < ml.n; i++) {
			if (i > 0 && !json)
				printf("\n");
			bad += status_one_mount(&ml.v[i], json, jm);
		}
		if (json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "mounts", jm);
			puts(json_object_to_json_string_ext(o, every > 0 ? JSON_LINE_FLAGS : JSON_FLAGS));
			json_object_put(o);
		}
		fflush(stdout);
		if (every > 0)
			sleep_interruptible(every);
	} while (every > 0 && !interrupted);
	free(ml.v);
	return bad ? EXIT_PROBLEM : EXIT_OK;
}

/* ==================================================================================
 * clean and roll
 * ================================================================================== */

const char clean_help[] =
	"usage: topicctl clean [--json] MOUNT/TOPIC[/PARTITION]\n"
	"\n"
	"Runs a cleaning pass of each partition now, like\n"
	"  setfattr -n user.topicfs.clean -v 1 MOUNT/TOPIC/N\n"
	"(the pass ignores min.cleanable.dirty.ratio and honours every other rule; it\n"
	"returns when the pass is done), then prints the partition's last_clean line and\n"
	"any uncleanable_reason. A mount without a cleaner refuses the attribute: that\n"
	"is reported as such.\n"
	"\n"
	"  -j, --json   print JSON\n"
	"  -h, --help   show this help\n"
	"\n"
	EXIT_STATUS_HELP;

const char roll_help[] =
	"usage: topicctl roll MOUNT/TOPIC[/PARTITION]\n"
	"\n"
	"Closes the active segment of each partition now, so that it becomes cleanable:\n"
	"  setfattr -n user.topicfs.roll -v 1 MOUNT/TOPIC/N\n"
	"An empty active segment is left as it is.\n"
	"\n"
	"  -h, --help   show this help\n"
	"\n"
	EXIT_STATUS_HELP;

static int clean_or_roll(int argc, char **argv, const char *attr)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool clean = !strcmp(attr, "clean"), json = false;
	struct json_object *arr = NULL;
	struct mpath m;
	char tdir[PATH_MAX + TOPIC_CAP];
	int32_t *parts = NULL;
	size_t n = 0;
	int c, rc = EXIT_OK;

	while ((c = next_opt(argc, argv, clean ? "jh" : "h", clean ? opts : opts + 1)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind != 1)
		return usage_error("%s needs exactly one MOUNT/TOPIC[/PARTITION]", attr);
	if (resolve_mount_path(argv[optind], &m) < 0)
		return EXIT_PROBLEM;
	if (!m.topic[0]) {
		complain("%s: name a topic or a partition, not the mount", argv[optind]);
		return EXIT_PROBLEM;
	}
	snprintf(tdir, sizeof(tdir), "%s/%s", m.root, m.topic);
	if (m.partition >= 0) {
		parts = malloc(sizeof(*parts));
		if (!parts)
			return EXIT_PROBLEM;
		parts[0] = m.partition;
		n = 1;
	} else if (list_partitions(tdir, &parts, &n) < 0) {
		complain("%s: %s", tdir, strerror(errno));
		return EXIT_PROBLEM;
	}
	if (json)
		arr = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		char pdir[sizeof(tdir) + 16];
		struct pinfo pi;
		int64_t t0 = mono_ms();
		int err;

		snprintf(pdir, sizeof(pdir), "%s/%" PRId32, tdir, parts[i]);
		err = xset(pdir, attr, "1");
		if (err == -ENOTSUP || err == -ENODATA || err == -EPERM) {
			complain("%s: this mount does not support '%s' yet (setting user.topicfs.%s: %s)",
			         pdir, attr, attr, strerror(-err));
			rc = EXIT_PROBLEM;
			break;
		}
		if (err < 0) {
			complain("%s: %s failed: %s", pdir, attr, strerror(-err));
			rc = EXIT_PROBLEM;
			continue;
		}
		if (!clean) {
			printf("%s/%" PRId32 ": rolled\n", m.topic, parts[i]);
			continue;
		}
		pinfo_read(&pi, tdir, parts[i]);
		if (json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "topic", json_object_new_string(m.topic));
			json_object_object_add(o, "partition", json_object_new_int(parts[i]));
			json_object_object_add(o, "elapsed_ms", json_object_new_int64(mono_ms() - t0));
			json_object_object_add(o, "last_clean", json_str_or_null((pi.have & P_LAST_CLEAN)
			                                                         ? pi.last_clean : NULL));
			json_object_object_add(o, "uncleanable_reason", json_str_or_null(
			                       (pi.have & P_REASON) ? pi.reason : NULL));
			json_object_array_add(arr, o);
		} else {
			printf("%s/%" PRId32 ": %s\n", m.topic, parts[i],
			       (pi.have & P_LAST_CLEAN) ? pi.last_clean : "cleaned (no last_clean attribute)");
			if (pi.have & P_REASON)
				printf("%s/%" PRId32 ": uncleanable: %s\n", m.topic, parts[i], pi.reason);
		}
		if (pi.have & P_REASON)
			rc = EXIT_PROBLEM;
	}
	if (json) {
		json_print(arr);
		json_object_put(arr);
	}
	free(parts);
	return rc;
}

int cmd_clean(int argc, char **argv)
{
	return clean_or_roll(argc, argv, "clean");
}

int cmd_roll(int argc, char **argv)
{
	return clean_or_roll(argc, argv, "roll");
}
