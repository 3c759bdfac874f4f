/* verify.c - topicctl verify: checks a data directory or a partition directory
 * read-only through tfs_inspect_verify_* (engine/inspect/log_inspect.h) and prints each
 * finding as FILE:POSITION: MESSAGE, or JSON.
 */
#include "topicctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/inspect/log_inspect.h"
#include "io/io.h"

const char verify_help[] =
	"usage: topicctl verify [--json] [--quiet] DATA_DIR|PARTITION_DIR\n"
	"\n"
	"Checks a data directory (or one partition directory) read-only and reports each\n"
	"problem as FILE:POSITION: MESSAGE (POSITION is a byte position in FILE):\n"
	"  - every batch: header, CRC-32C, the full record structure, record offsets\n"
	"  - offsets increase across batches and segments; a segment ends before the\n"
	"    next one's base offset\n"
	"  - every .index entry: increasing, pointing at the start of a batch whose last\n"
	"    offset it names; every .timeindex entry: monotonic, naming a batch whose max\n"
	"    timestamp it holds\n"
	"  - cleaner-offset-checkpoint (and Kafka's other *-checkpoint files): version\n"
	"    line 0, count line, \"topic partition offset\" lines\n"
	"  - every topic config, DATA_DIR/topics/<topic>, loads; the partition\n"
	"    directories its topicfs.partitions names exist\n"
	"  - leftovers of interrupted work: *.cleaned, *.swap, *.deleted, *.tmp files\n"
	"    (topics/<topic>.tmp too), *-delete directories\n"
	"Notes (unknown files, stale checkpoint entries) are printed but are not problems.\n"
	"On a mounted data directory a pass in progress and the batch being written at\n"
	"the end of an active segment can show up: verify an unmounted copy to be sure.\n"
	"\n"
	"  -q, --quiet   print only the summary line\n"
	"  -j, --json    print JSON\n"
	"  -h, --help    show this help\n"
	"\n"
	"Exit status: 0 no problem found; 1 problems found; 2 usage error.\n";

struct verify_out {
	bool json, quiet;
	struct json_object *problems, *notes;
	struct progress prog;
};

static void on_finding(void *arg, enum tfs_finding kind, const char *path, tfs_pos_t pos,
                       const char *msg)
{
	struct verify_out *v = arg;

	if (v->json) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "file", json_object_new_string(path));
		json_object_object_add(o, "position", pos >= 0 ? json_object_new_int64(pos) : NULL);
		json_object_object_add(o, "message", json_object_new_string(msg));
		json_object_array_add(kind == TFS_FINDING_PROBLEM ? v->problems : v->notes, o);
		return;
	}
	if (v->quiet)
		return;
	progress_clear(&v->prog);
	if (pos >= 0)
		printf("%s:%" PRId64 ": %s%s\n", path, pos, kind == TFS_FINDING_NOTE ? "note: " : "", msg);
	else
		printf("%s: %s%s\n", path, kind == TFS_FINDING_NOTE ? "note: " : "", msg);
	fflush(stdout);
}

static void on_verify_progress(void *arg, int64_t done, int64_t total)
{
	struct verify_out *v = arg;
	progress_show(&v->prog, done, total);
}

struct mounted_check {
	const char *dir;
	char mnt[PATH_MAX];
};

static void check_mounted(void *arg, const char *mnt, const char *src)
{
	struct mounted_check *m = arg;
	size_t n = strlen(src);

	if (!strncmp(m->dir, src, n) && (m->dir[n] == '\0' || m->dir[n] == '/'))
		snprintf(m->mnt, sizeof(m->mnt), "%s", mnt);
}

int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct verify_out v = { 0 };
	struct tfs_verify_ctx ctx = { 0 };
	struct mounted_check mc = { 0 };
	char dir[PATH_MAX];
	struct stat st;
	bool partition;
	int c, rc;

	while ((c = next_opt(argc, argv, "qjh", opts)) != -1) {
		if (c == 'q')
			v.quiet = true;
		else if (c == 'j')
			v.json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind != 1)
		return usage_error("verify needs exactly one DATA_DIR or PARTITION_DIR");
	if (stat(argv[optind], &st) < 0) {
		complain("%s: %s", argv[optind], strerror(errno));
		return EXIT_PROBLEM;
	}
	if (!S_ISDIR(st.st_mode)) {
		complain("%s: not a directory (verify takes a DATA_DIR or a PARTITION_DIR)",
		         argv[optind]);
		return EXIT_PROBLEM;
	}
	if (!realpath(argv[optind], dir)) {
		complain("%s: %s", argv[optind], strerror(errno));
		return EXIT_PROBLEM;
	}
	mc.dir = dir;
	for_each_mount(check_mounted, &mc);
	if (mc.mnt[0] && !v.json && !v.quiet)
		complain("note: %s is mounted at %s; a pass in progress or a batch being written "
		         "may show up as a problem", dir, mc.mnt);
	if ((rc = tfs_io_create(TFS_IO_SYNC, &ctx.io)) < 0) {
		complain("cannot set up I/O: %s", tfs_strerror(rc));
		return EXIT_PROBLEM;
	}
	progress_init(&v.prog, "verify");
	if (v.json) {
		v.problems = json_object_new_array();
		v.notes = json_object_new_array();
	}
	ctx.finding = on_finding;
	ctx.progress = on_verify_progress;
	ctx.arg = &v;
	partition = tfs_inspect_is_partition_dir(dir);
	rc = partition ? tfs_inspect_verify_partition(&ctx, dir) : tfs_inspect_verify_data_dir(&ctx, dir);
	progress_clear(&v.prog);
	if (rc < 0)
		on_finding(&v, TFS_FINDING_PROBLEM, dir, -1, tfs_strerror(rc)), ctx.stats.problems++;
	if (v.json) {
		struct json_object *o = json_object_new_object(), *s = json_object_new_object();
		json_object_object_add(o, "path", json_object_new_string(dir));
		json_object_object_add(o, "kind", json_object_new_string(partition ? "partition" : "data_dir"));
		json_object_object_add(o, "ok", json_object_new_boolean(ctx.stats.problems == 0));
		json_object_object_add(s, "partitions", json_object_new_int64(ctx.stats.partitions));
		json_object_object_add(s, "segments", json_object_new_int64(ctx.stats.segments));
		json_object_object_add(s, "batches", json_object_new_int64(ctx.stats.batches));
		json_object_object_add(s, "records", json_object_new_int64(ctx.stats.records));
		json_object_object_add(s, "bytes", json_object_new_int64(ctx.stats.bytes));
		json_object_object_add(s, "index_entries", json_object_new_int64(ctx.stats.index_entries));
		json_object_object_add(s, "problems", json_object_new_int64(ctx.stats.problems));
		json_object_object_add(s, "notes", json_object_new_int64(ctx.stats.notes));
		json_object_object_add(o, "stats", s);
		json_object_object_add(o, "problems", v.problems);
		json_object_object_add(o, "notes", v.notes);
		json_print(o);
		json_object_put(o);
	} else {
		char b[32];
		printf("verify %s: %" PRId64 " partition%s, %" PRId64 " segments, %" PRId64 " batches, %"
		       PRId64 " records, %s, %" PRId64 " index entries: %" PRId64 " problem%s%s\n", dir,
		       ctx.stats.partitions, ctx.stats.partitions == 1 ? "" : "s", ctx.stats.segments,
		       ctx.stats.batches, ctx.stats.records, fmt_bytes(b, sizeof(b), (double)ctx.stats.bytes),
		       ctx.stats.index_entries, ctx.stats.problems, ctx.stats.problems == 1 ? "" : "s",
		       ctx.stats.problems ? "" : " (ok)");
	}
	tfs_io_destroy(ctx.io);
	return ctx.stats.problems ? EXIT_PROBLEM : EXIT_OK;
}
