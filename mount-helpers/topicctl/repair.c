/* repair.c - topicctl repair: truncates a damaged partition log at its first
 * unreadable batch, as Kafka's recovery would, after saying what that loses
 * (engine/inspect/log_repair.h). A dry run unless --yes; never on a mounted directory.
 */
#include "topicctl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/inspect/log_inspect.h"
#include "engine/inspect/log_repair.h"
#include "io/io.h"

#define ASIDE_DIR ".repaired"          /* DATA_DIR/.repaired/: what repairs cut */
#define ASIDE_TRIES 100

const char repair_help[] =
	"usage: topicctl repair [--yes] [--json] DATA_DIR [TOPIC | TOPIC-PARTITION]\n"
	"\n"
	"A mount never cuts a damaged sealed segment: it reads EIO where the log cannot\n"
	"be read, and for every key whose newest readable record precedes the damage.\n"
	"repair is the way out: for each partition (of DATA_DIR, of one topic, or one\n"
	"partition directory's name) it finds the first batch the mount cannot read\n"
	"and prints what truncating the log there loses: the offsets, then each segment\n"
	"cut or removed with the batches and records in it that could still be read.\n"
	"Those records are lost too, as in Kafka's recovery: the log must end where its\n"
	"readable prefix ends, or an older value would pass for a key's newest. (Copy\n"
	"what you need out of the mount first: a key whose newest record follows the\n"
	"damage still reads.)\n"
	"\n"
	"Without --yes nothing changes. With --yes, and only while DATA_DIR is not\n"
	"mounted, the damaged segment is truncated at the bad batch, the later\n"
	"segments go, and their bytes are kept in DATA_DIR/" ASIDE_DIR "/<topic>-<N>.<time>/\n"
	"(the cut part as <base>.log.cut, later segments whole); the indexes are\n"
	"rebuilt by the next mount. Delete that directory once you no longer need it.\n"
	"\n"
	"  -y, --yes    truncate (default: a dry run)\n"
	"  -j, --json   print JSON\n"
	"  -h, --help   show this help\n"
	"\n"
	"Exit status: 0 nothing to repair, or repaired; 1 damage found by a dry run, or\n"
	"the repair failed; 2 usage error.\n";

struct repair_run {
	struct tfs_io *io;
	bool yes, json;
	const char *data_dir;
	struct json_object *arr;
	int damaged, failed;
};

/* One segment the cut shortens (cut) or removes. */
static void print_seg(const struct tfs_repair_seg *s, bool cut)
{
	char b[32];

	if (cut)
		printf("    %020" PRId64 ".log bytes %" PRId64 "..%" PRId64 " (%s): ", s->base, s->from,
		       s->size_bytes - 1, fmt_bytes(b, sizeof(b), (double)(s->size_bytes - s->from)));
	else
		printf("    %020" PRId64 ".log whole (%s): ", s->base,
		       fmt_bytes(b, sizeof(b), (double)s->size_bytes));
	printf("%" PRId64 " readable batch%s, %" PRId64 " record%s", s->readable_batches,
	       s->readable_batches == 1 ? "" : "es", s->readable_records,
	       s->readable_records == 1 ? "" : "s");
	if (s->first != TFS_OFFSET_NONE)
		printf(" (offsets %" PRId64 "..%" PRId64 ")", s->first, s->last);
	if (s->unreadable_bytes)
		printf(", %" PRId64 " bytes unreadable", s->unreadable_bytes);
	printf("\n");
}

static struct json_object *plan_json(const char *name, const struct tfs_repair_plan *p,
                                     const char *result)
{
	struct json_object *o = json_object_new_object(), *segs = json_object_new_array();

	json_object_object_add(o, "partition", json_object_new_string(name));
	json_object_object_add(o, "damaged", json_object_new_boolean(p->needed));
	json_object_object_add(o, "result", json_object_new_string(result));
	if (!p->needed)
		return o;
	json_object_object_add(o, "segment", json_object_new_int64(p->cut_base));
	json_object_object_add(o, "position", json_object_new_int64(p->cut_pos));
	json_object_object_add(o, "reason", json_object_new_string(p->why));
	json_object_object_add(o, "keep_end_offset", json_object_new_int64(p->keep_end));
	json_object_object_add(o, "lost_end_offset", json_object_new_int64(p->lost_end));
	for (size_t i = 0; i < p->count; i++) {
		const struct tfs_repair_seg *s = &p->segs[i];
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "base_offset", json_object_new_int64(s->base));
		json_object_object_add(j, "from_position", json_object_new_int64(s->from));
		json_object_object_add(j, "size_bytes", json_object_new_int64(s->size_bytes));
		json_object_object_add(j, "readable_batches", json_object_new_int64(s->readable_batches));
		json_object_object_add(j, "readable_records", json_object_new_int64(s->readable_records));
		json_add_i64(j, "first_offset", s->first != TFS_OFFSET_NONE, s->first);
		json_add_i64(j, "last_offset", s->first != TFS_OFFSET_NONE, s->last);
		json_object_object_add(j, "unreadable_bytes", json_object_new_int64(s->unreadable_bytes));
		json_object_array_add(segs, j);
	}
	json_object_object_add(o, "lost", segs);
	return o;
}

/* DATA_DIR/.repaired/<name>.<UTC time>, made. */
static int make_aside(const char *data_dir, const char *name, char *out, size_t cap)
{
	char top[PATH_MAX], stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(top, sizeof(top), "%s/%s", data_dir, ASIDE_DIR);
	if (mkdir(top, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* two repairs within a second get .2, .3, ... */
	for (int n = 1; n < ASIDE_TRIES; n++) {
		int len = n == 1 ? snprintf(out, cap, "%s/%s.%s", top, name, stamp)
		                 : snprintf(out, cap, "%s/%s.%s.%d", top, name, stamp, n);
		if (len < 0 || (size_t)len >= cap)
			return -ENAMETOOLONG;
		if (mkdir(out, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static void repair_partition(struct repair_run *r, const char *name)
{
	struct tfs_repair_plan p;
	char dir[PATH_MAX], aside[PATH_MAX];
	const char *result;
	int rc;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", r->data_dir, name) >= sizeof(dir)) {
		complain("%s/%s: path too long", r->data_dir, name);
		r->failed++;
		return;
	}
	rc = tfs_repair_plan(r->io, dir, &p);
	if (rc == -ENOENT) {
		result = "no segments";
		memset(&p, 0, sizeof(p));
		goto report;
	}
	if (rc < 0) {
		complain("%s: cannot read: %s", dir, tfs_strerror(rc));
		r->failed++;
		return;
	}
	if (!p.needed) {
		result = "ok";
		goto report;
	}
	r->damaged++;
	if (!r->json) {
		printf("%s: damaged: %020" PRId64 ".log at position %" PRId64 ": %s\n", name, p.cut_base,
		       p.cut_pos, p.why);
		printf("  keeps offsets below %" PRId64 "; the log then ends at offset %" PRId64 "\n",
		       p.keep_end, p.keep_end);
		printf("  loses offsets %" PRId64 "..%" PRId64 ":\n", p.keep_end,
		       p.lost_end > p.keep_end ? p.lost_end - 1 : p.keep_end);
		for (size_t i = 0; i < p.count; i++)
			print_seg(&p.segs[i], i == 0);
	}
	if (!r->yes) {
		result = "dry run";
		if (!r->json)
			printf("  dry run: nothing changed (topicctl repair --yes truncates)\n");
		goto report;
	}
	rc = make_aside(r->data_dir, name, aside, sizeof(aside));
	if (rc == 0)
		rc = tfs_repair_apply(r->io, dir, &p, aside);
	if (rc < 0) {
		complain("%s: repair failed: %s%s", dir, tfs_strerror(rc),
		         rc == -ESTALE ? " (a file changed meanwhile: is it mounted?)" : "");
		r->failed++;
		result = "failed";
	} else {
		r->damaged--;
		result = "repaired";
		if (!r->json)
			printf("  repaired: the log ends at offset %" PRId64 "; the cut bytes are in %s\n",
			       p.keep_end, aside);
	}
report:
	if (r->json)
		json_object_array_add(r->arr, plan_json(name, &p, result));
	else if (!p.needed)
		printf("%s: %s\n", name, result);
	tfs_repair_plan_release(&p);
}

struct mounted {
	const char *dir;
	char mnt[PATH_MAX];
};

static void find_mount(void *arg, const char *mnt, const char *src)
{
	struct mounted *m = arg;
	char real[PATH_MAX];

	if (realpath(src, real) && !strcmp(real, m->dir))
		snprintf(m->mnt, sizeof(m->mnt), "%s", mnt);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cmd_repair(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "yes", no_argument, NULL, 'y' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct repair_run r = { 0 };
	struct mounted m = { 0 };
	char data_dir[PATH_MAX], topic[TOPIC_CAP];
	const char *only = NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *de;
	int c, rc;

	while ((c = next_opt(argc, argv, "yjh", opts)) != -1) {
		if (c == 'y')
			r.yes = true;
		else if (c == 'j')
			r.json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind < 1 || argc - optind > 2)
		return usage_error("repair needs a DATA_DIR and at most one TOPIC or TOPIC-PARTITION");
	if (!realpath(argv[optind], data_dir)) {
		complain("%s: %s", argv[optind], strerror(errno));
		return EXIT_PROBLEM;
	}
	if (argc - optind == 2)
		only = argv[optind + 1];
	m.dir = data_dir;
	for_each_mount(find_mount, &m);
	if (m.mnt[0] && r.yes) {
		complain("%s is mounted at %s: unmount it first (a mount holds what it read)",
		         data_dir, m.mnt);
		return EXIT_PROBLEM;
	}
	d = opendir(data_dir);
	if (!d) {
		complain("%s: %s", data_dir, strerror(errno));
		return EXIT_PROBLEM;
	}
	while ((de = readdir(d))) {
		int32_t part;
		char **nn;
		if (de->d_name[0] == '.' ||
		    tfs_partition_dir_parse(de->d_name, topic, sizeof(topic), &part) < 0)
			continue;
		if (only && strcmp(only, de->d_name) && strcmp(only, topic))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			nn = realloc(names, cap * sizeof(*nn));
			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	if (only && n == 0) {
		complain("%s: no partition directory %s or %s-N", data_dir, only, only);
		free(names);
		return EXIT_PROBLEM;
	}
	if ((rc = tfs_io_create(TFS_IO_SYNC, &r.io)) < 0) {
		complain("cannot set up I/O: %s", tfs_strerror(rc));
		free_strings(names, n);
		return EXIT_PROBLEM;
	}
	if (m.mnt[0] && !r.json)
		complain("note: %s is mounted at %s; this dry run reads it as it is now", data_dir, m.mnt);
	r.data_dir = data_dir;
	if (r.json)
		r.arr = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		repair_partition(&r, names[i]);
	if (r.json) {
		json_print(r.arr);
		json_object_put(r.arr);
	}
	tfs_io_destroy(r.io);
	free_strings(names, n);
	return r.failed || r.damaged ? EXIT_PROBLEM : EXIT_OK;
}
