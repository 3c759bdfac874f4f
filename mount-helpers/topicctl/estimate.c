/* estimate.c - topicctl estimate: what compaction would save on a topic, per
 * partition and in total, from its segment files (engine/inspect/log_inspect.h does the
 * scan and the formula; this file finds the files and the topic's config, and
 * prints).
 */
#include "topicctl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/inspect/log_inspect.h"
#include "engine/topic_config.h"
#include "io/io.h"

/* A byte count with an optional binary suffix: 100, 64K, 100M, 2G. */
static bool parse_bytes(const char *s, int64_t *out)
{
	char *end;
	double v;
	double mult = 1;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return false;
	switch (toupper((unsigned char)*end)) {
	case 'K': mult = 1024.0; end++; break;
	case 'M': mult = 1024.0 * 1024; end++; break;
	case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v * mult > (double)INT64_MAX)
		return false;
	*out = (int64_t)(v * mult);
	return true;
}

const char estimate_help[] =
	"usage: topicctl estimate [options] MOUNT/TOPIC\n"
	"       topicctl estimate [options] DATA_DIR TOPIC\n"
	"\n"
	"Estimates what compaction would save on a topic, per partition and in total,\n"
	"from the segment files (read-only; a mount's data directory is found in\n"
	"/proc/self/mountinfo). A partition whose cleanable bytes (all but the active\n"
	"segment) are at most --sample-above is read whole; of a larger one, --sample\n"
	"percent is read, 1 MiB at a pseudo-random place of each of evenly spaced\n"
	"windows, and its distinct keys are scaled up by an occupancy model. With\n"
	"  r  = min.cleanable.dirty.ratio of the topic (its attribute through a mount,\n"
	"       else DATA_DIR/topics/TOPIC, else the default)\n"
	"  E  = events per key = keyed records / distinct keys\n"
	"  surviving = keyless bytes + keyed bytes / E\n"
	"  estimate  = surviving + surviving * r / (1 - r) + active segment bytes\n"
	"  savings   = 1 - estimate / current size\n"
	"compaction is \"worth it\" when E >= 3 and savings > 20%; more than 10% keyless\n"
	"records is warned about (compaction never removes them), and more than 1% in the\n"
	"active segment, which is read whole (a new producer without keys). The simple\n"
	"formula's figure is printed beside; the README says why the two differ.\n"
	"\n"
	"  -s, --sample PERCENT        share of a large partition to read (default 10)\n"
	"  -a, --sample-above BYTES    read a partition whole up to this many cleanable\n"
	"                              bytes (default 100M; K, M, G suffixes)\n"
	"  -k, --exact-keys N          count up to N distinct keys exactly, then by\n"
	"                              HyperLogLog (default 4194304)\n"
	"  -j, --json                  print JSON\n"
	"  -h, --help                  show this help\n"
	"\n"
	EXIT_STATUS_HELP;

struct est_progress {
	struct progress prog;
	int64_t base, total;           /* bytes of earlier partitions, of all */
};

static void on_est_progress(void *arg, int64_t done, int64_t total)
{
	struct est_progress *e = arg;
	(void)total;
	progress_show(&e->prog, e->base + done, e->total);
}

static struct json_object *estimate_json(const struct tfs_estimate *e, const struct tfs_estimate_input *in)
{
	struct json_object *o = json_object_new_object();

	if (in) {
		struct json_object *i = json_object_new_object();
		json_object_object_add(i, "current_bytes", json_object_new_int64(in->current_bytes));
		json_object_object_add(i, "active_bytes", json_object_new_int64(in->active_bytes));
		json_object_object_add(i, "cleanable_bytes", json_object_new_int64(in->cleanable_bytes));
		json_object_object_add(i, "sampled_bytes", json_object_new_int64(in->sampled_bytes));
		json_object_object_add(i, "segments", json_object_new_int(in->segments));
		json_object_object_add(i, "sampled", json_object_new_boolean(in->sampled));
		json_object_object_add(i, "records", json_object_new_int64(in->records));
		json_object_object_add(i, "keyed_records", json_object_new_int64(in->keyed_records));
		json_object_object_add(i, "keyless_records", json_object_new_int64(in->keyless_records));
		json_object_object_add(i, "tombstones", json_object_new_int64(in->tombstones));
		json_object_object_add(i, "keyed_bytes", json_object_new_double(in->keyed_bytes));
		json_object_object_add(i, "keyless_bytes", json_object_new_double(in->keyless_bytes));
		json_object_object_add(i, "distinct_keys", json_object_new_double(in->distinct_keys));
		json_object_object_add(i, "distinct_exact", json_object_new_boolean(in->distinct_exact));
		json_object_object_add(i, "bad_batches", json_object_new_int64(in->bad_batches));
		json_object_object_add(i, "dirty_ratio", json_object_new_double(in->dirty_ratio));
		json_object_object_add(i, "active_records", json_object_new_int64(in->active_records));
		json_object_object_add(i, "active_keyless_records",
		                       json_object_new_int64(in->active_keyless_records));
		json_object_object_add(i, "distinct_keys_all", json_object_new_double(in->distinct_keys_all));
		json_object_object_add(o, "input", i);
	}
	json_object_object_add(o, "sample_fraction", json_object_new_double(e->sample_fraction));
	json_object_object_add(o, "keyed_records_total", json_object_new_double(e->keyed_records_total));
	json_object_object_add(o, "distinct_keys_total", json_object_new_double(e->distinct_keys_total));
	json_object_object_add(o, "events_per_key", json_object_new_double(e->events_per_key));
	json_object_object_add(o, "keyless_share", json_object_new_double(e->keyless_share));
	json_object_object_add(o, "keyed_bytes_total", json_object_new_double(e->keyed_bytes_total));
	json_object_object_add(o, "keyless_bytes_total", json_object_new_double(e->keyless_bytes_total));
	json_object_object_add(o, "surviving_bytes", json_object_new_double(e->surviving_bytes));
	json_object_object_add(o, "dirt_bytes", isfinite(e->dirt_bytes)
	                       ? json_object_new_double(e->dirt_bytes) : NULL);
	json_object_object_add(o, "estimate_bytes", json_object_new_double(e->estimate_bytes));
	json_object_object_add(o, "current_bytes", json_object_new_double(e->current_bytes));
	json_object_object_add(o, "savings", json_object_new_double(e->savings));
	json_object_object_add(o, "worth_it", json_object_new_boolean(e->worth_it));
	json_object_object_add(o, "keyless_warning", json_object_new_boolean(e->keyless_warning));
	json_object_object_add(o, "new_keyless_share", json_object_new_double(e->new_keyless_share));
	json_object_object_add(o, "new_keyless_warning", json_object_new_boolean(e->new_keyless_warning));
	if (e->simple.defined) {
		struct json_object *s = json_object_new_object();
		json_object_object_add(s, "events_per_key", json_object_new_double(e->simple.events_per_key));
		json_object_object_add(s, "keyless_share", json_object_new_double(e->simple.keyless_share));
		json_object_object_add(s, "surviving_bytes", json_object_new_double(e->simple.surviving_bytes));
		json_object_object_add(s, "estimate_bytes", json_object_new_double(e->simple.estimate_bytes));
		json_object_object_add(s, "savings", json_object_new_double(e->simple.savings));
		json_object_object_add(s, "worth_it", json_object_new_boolean(e->simple.worth_it));
		json_object_object_add(s, "keyless_warning", json_object_new_boolean(e->simple.keyless_warning));
		json_object_object_add(o, "simple", s);
	} else {
		json_object_object_add(o, "simple", NULL);
	}
	return o;
}

static const char *verdict(const struct tfs_estimate *e)
{
	if (e->worth_it)
		return "worth it";
	if (e->events_per_key < TFS_ESTIMATE_MIN_EVENTS_PER_KEY)
		return "not worth it (few events per key)";
	return "not worth it (small savings)";
}

static void estimate_row(const char *label, const struct tfs_estimate *e, double records,
                         double keyless, double read_pct)
{
	char epk[16];

	if (e->events_per_key > 0)
		snprintf(epk, sizeof(epk), "%.2f", e->events_per_key);
	else
		snprintf(epk, sizeof(epk), "-");
	printf("%-9s %14.0f %5.1f%% %10.0f %7.1f%% %12.0f %7s %14.0f %7.1f%%  %s\n", label,
	       e->current_bytes, read_pct, records, records > 0 ? keyless * 100 / records : 0,
	       e->distinct_keys_total, epk, e->estimate_bytes, e->savings * 100, verdict(e));
}

/* One run of estimate: what the phases below hand each other. */
struct est_run {
	struct tfs_estimate_opts eo;
	bool json;
	char data_dir[PATH_MAX], topic[TOPIC_CAP];
	struct tfs_topic_config cfg;
	double ratio;                  /* min.cleanable.dirty.ratio in force */
	int32_t *parts;                /* sorted partition numbers */
	size_t np;
	struct tfs_estimate_input *ins;
	struct tfs_estimate *est, total;
	bool scanned;                  /* phase 4 ran: there is a report to print */
};

#define GO_ON (-1)                     /* parse_options: no exit status yet */

/* Phase 1: the options. GO_ON, or the exit status (--help: EXIT_OK). */
static int parse_options(int argc, char **argv, struct est_run *r)
{
	static const struct option opts[] = {
		{ "sample", required_argument, NULL, 's' },
		{ "sample-above", required_argument, NULL, 'a' },
		{ "exact-keys", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	int64_t v;

	tfs_estimate_opts_defaults(&r->eo);
	while ((c = next_opt(argc, argv, "s:a:k:jh", opts)) != -1) {
		char *end;
		double pct;
		switch (c) {
		case 's':
			pct = strtod(optarg, &end);
			if (*end || !(pct > 0) || pct > 100)
				return usage_error("--sample needs a percentage above 0, at most 100");
			r->eo.sample_fraction = pct / 100;
			break;
		case 'a':
			if (!parse_bytes(optarg, &r->eo.sample_above_bytes))
				return usage_error("--sample-above needs a byte count (e.g. 100M)");
			break;
		case 'k':
			if (!parse_i64(optarg, 1, INT64_MAX / 64, &v))
				return usage_error("--exact-keys needs a number above 0");
			r->eo.exact_keys_max = (size_t)v;
			break;
		case 'j': r->json = true; break;
		case 'h': return show_help();
		default: return EXIT_USAGE;
		}
	}
	return GO_ON;
}

/* Phase 2: the data directory, the topic and its config (the mount's attributes
 * first, then DATA_DIR/topics/TOPIC, then the defaults). */
static int resolve_topic(int argc, char **argv, struct est_run *r)
{
	char cfgpath[PATH_MAX + TOPIC_CAP + 16];
	struct tfs_topic_meta meta = { 0 };
	struct tfs_topic_config fc;
	bool have_ratio = false;
	int lrc;

	tfs_topic_config_defaults(&r->cfg);
	if (argc - optind == 1) {
		struct mpath m;
		char tdir[PATH_MAX + TOPIC_CAP], pol[64];
		if (resolve_mount_path(argv[optind], &m) < 0)
			return EXIT_PROBLEM;
		if (!m.topic[0] || m.partition >= 0) {
			complain("%s: not a topic directory", argv[optind]);
			return EXIT_PROBLEM;
		}
		if (!m.data_dir[0]) {
			complain("%s: cannot find the mount's data directory in /proc/self/mountinfo; "
			         "use 'estimate DATA_DIR TOPIC'", m.root);
			return EXIT_PROBLEM;
		}
		snprintf(r->data_dir, sizeof(r->data_dir), "%s", m.data_dir);
		snprintf(r->topic, sizeof(r->topic), "%s", m.topic);
		snprintf(tdir, sizeof(tdir), "%s/%s", m.root, m.topic);
		have_ratio = xget_double(tdir, "min.cleanable.dirty.ratio", &r->ratio);
		if (xget(tdir, "cleanup.policy", pol, sizeof(pol)) > 0)
			tfs_topic_config_set(&r->cfg, "cleanup.policy", pol);
	} else if (argc - optind == 2) {
		snprintf(r->data_dir, sizeof(r->data_dir), "%s", argv[optind]);
		snprintf(r->topic, sizeof(r->topic), "%s", argv[optind + 1]);
		if (!tfs_topic_name_valid(r->topic))
			return usage_error("'%s' is not a topic name", r->topic);
	} else {
		return usage_error("estimate needs MOUNT/TOPIC, or DATA_DIR TOPIC");
	}
	/* the topic's own config file, when there is one (a broker's copy has none) */
	snprintf(cfgpath, sizeof(cfgpath), "%s/%s/%s", r->data_dir, TFS_CONFIG_DIR, r->topic);
	fc = r->cfg;
	lrc = tfs_topic_config_load(cfgpath, &fc, &meta);
	if (lrc == 0) {
		if (!have_ratio)
			r->cfg = fc;
		else
			r->cfg.cleanup_policy = fc.cleanup_policy;
	} else if (lrc != -ENOENT) {
		complain("%s: does not load (%s); using the defaults", cfgpath, tfs_strerror(lrc));
	}
	if (!have_ratio)
		r->ratio = r->cfg.min_cleanable_dirty_ratio;
	return EXIT_OK;
}

/* Phase 3: the partitions, DATA_DIR/TOPIC-N, sorted. */
static int find_partitions(struct est_run *r)
{
	DIR *d = opendir(r->data_dir);
	struct dirent *de;
	size_t cap = 0;

	if (!d) {
		complain("%s: %s", r->data_dir, strerror(errno));
		return EXIT_PROBLEM;
	}
	while ((de = readdir(d))) {
		char t[TOPIC_CAP];
		int32_t p;
		if (tfs_partition_dir_parse(de->d_name, t, sizeof(t), &p) < 0 ||
		    strcmp(t, r->topic))
			continue;
		if (r->np == cap) {
			size_t nc = cap ? cap * 2 : 16;
			int32_t *nv = realloc(r->parts, nc * sizeof(*nv));
			if (!nv)
				break;
			r->parts = nv;
			cap = nc;
		}
		r->parts[r->np++] = p;
	}
	closedir(d);
	if (r->np == 0) {
		complain("%s: no partition directory %s-N", r->data_dir, r->topic);
		return EXIT_PROBLEM;
	}
	qsort(r->parts, r->np, sizeof(*r->parts), cmp_i32);
	return EXIT_OK;
}

static void partition_dir(const struct est_run *r, size_t i, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s-%" PRId32, r->data_dir, r->topic, r->parts[i]);
}

/* The bytes the scan of partition i will read: its cleanable bytes (all but the
 * last, active, segment), or the sampled share of them. */
static int64_t bytes_to_read(const struct est_run *r, size_t i)
{
	char dir[PATH_MAX + TOPIC_CAP + 16];
	struct tfs_dir_listing l;
	int64_t cleanable = 0, last = 0;

	partition_dir(r, i, dir, sizeof(dir));
	if (tfs_inspect_list_dir(dir, &l) == 0) {
		for (size_t j = 0; j < l.count; j++) {
			if (l.files[j].kind == TFS_FILE_LOG && l.files[j].size_bytes > 0) {
				cleanable += l.files[j].size_bytes;
				last = l.files[j].size_bytes;
			}
		}
		tfs_dir_listing_release(&l);
	}
	cleanable -= last;
	return cleanable > r->eo.sample_above_bytes
	       ? (int64_t)((double)cleanable * r->eo.sample_fraction) : cleanable;
}

/* Phase 4: each partition scanned and estimated, and the total. */
static int scan_partitions(struct est_run *r)
{
	struct tfs_io *io = NULL;
	struct est_progress ep;
	int rc = EXIT_OK;

	r->ins = calloc(r->np, sizeof(*r->ins));
	r->est = calloc(r->np, sizeof(*r->est));
	if (!r->ins || !r->est || tfs_io_create(TFS_IO_SYNC, &io) < 0) {
		complain("out of memory");
		return EXIT_PROBLEM;
	}
	progress_init(&ep.prog, "estimate");
	ep.base = 0;
	ep.total = 0;
	for (size_t i = 0; i < r->np; i++)
		ep.total += bytes_to_read(r, i);
	r->eo.progress = on_est_progress;
	r->eo.arg = &ep;
	r->scanned = true;
	for (size_t i = 0; i < r->np; i++) {
		char dir[PATH_MAX + TOPIC_CAP + 16];
		int err = 0;
		partition_dir(r, i, dir, sizeof(dir));
		/* a live cleaner may swap a segment away mid-scan: one retry */
		for (int attempt = 0; attempt < 2; attempt++) {
			err = tfs_inspect_estimate_scan(io, dir, &r->eo, &r->ins[i]);
			if (err != -ENOENT && err != -ESTALE)
				break;
		}
		if (err < 0) {
			progress_clear(&ep.prog);
			complain("%s: %s", dir, err == -ENOENT ? "no segment files" : tfs_strerror(err));
			rc = EXIT_PROBLEM;
		}
		ep.base += r->ins[i].sampled_bytes;
		r->ins[i].dirty_ratio = r->ratio;
		tfs_estimate_compute(&r->ins[i], &r->est[i]);
	}
	progress_clear(&ep.prog);
	tfs_estimate_total(r->est, r->ins, r->np, &r->total);
	tfs_io_destroy(io);
	return rc;
}

/* Phase 5, --json. */
static void print_json(const struct est_run *r)
{
	struct json_object *o = json_object_new_object(), *arr = json_object_new_array();
	char pol[32];

	tfs_topic_config_get(&r->cfg, "cleanup.policy", pol, sizeof(pol));
	json_object_object_add(o, "topic", json_object_new_string(r->topic));
	json_object_object_add(o, "data_dir", json_object_new_string(r->data_dir));
	json_object_object_add(o, "min_cleanable_dirty_ratio", json_object_new_double(r->ratio));
	json_object_object_add(o, "cleanup_policy", json_object_new_string(pol));
	for (size_t i = 0; i < r->np; i++) {
		struct json_object *p = estimate_json(&r->est[i], &r->ins[i]);
		json_object_object_add(p, "partition", json_object_new_int(r->parts[i]));
		json_object_array_add(arr, p);
	}
	json_object_object_add(o, "partitions", arr);
	json_object_object_add(o, "total", estimate_json(&r->total, NULL));
	json_print(o);
	json_object_put(o);
}

/* The warnings of the text report, for the total and then per partition. */
static void print_warnings(const struct est_run *r, double cleanable, const char *pol)
{
	const struct tfs_estimate *total = &r->total;
	size_t np = r->np;

	if (!(r->cfg.cleanup_policy & TFS_POLICY_COMPACT))
		printf("note: cleanup.policy is %s: the cleaner does not compact this topic\n", pol);
	if (cleanable == 0)
		printf("note: everything is in active segments, which are never cleaned; "
		       "'topicctl roll' closes them\n");
	if (total->keyless_warning)
		printf("warning: %.1f%% of the records are keyless; compaction never removes them, "
		       "so the log keeps growing\n", total->keyless_share * 100);
	for (size_t i = 0; i < np && np > 1; i++)
		if (r->est[i].keyless_warning)
			printf("warning: partition %" PRId32 ": %.1f%% of the records are keyless; "
			       "compaction never removes them, so the log keeps growing\n", r->parts[i],
			       r->est[i].keyless_share * 100);
	if (total->new_keyless_warning)
		printf("warning: %.1f%% of the records in the active segments (the newest) are "
		       "keyless: a new producer without keys? compaction never removes them\n",
		       total->new_keyless_share * 100);
	for (size_t i = 0; i < np && np > 1; i++)
		if (r->est[i].new_keyless_warning)
			printf("warning: partition %" PRId32 ": %.1f%% of the records in the active "
			       "segment are keyless: a new producer without keys?\n", r->parts[i],
			       r->est[i].new_keyless_share * 100);
	for (size_t i = 0; i < np; i++)
		if (r->ins[i].bad_batches)
			printf("warning: partition %" PRId32 ": %" PRId64 " batches failed their checks "
			       "and count as keyless bytes ('topicctl verify')\n", r->parts[i],
			       r->ins[i].bad_batches);
}

/* Phase 5, text: a row per partition, the total term by term, the warnings. */
static void print_text(const struct est_run *r)
{
	const struct tfs_estimate *total = &r->total;
	double records = 0, keyless = 0, keyed = 0, tomb = 0, active = 0, sampled = 0;
	double cleanable = 0, distinct_seen = 0;
	bool any_sampled = false, all_exact = true;
	char b1[32], pol[32];
	size_t np = r->np;

	tfs_topic_config_get(&r->cfg, "cleanup.policy", pol, sizeof(pol));
	printf("Topic %s in %s: min.cleanable.dirty.ratio r = %g, cleanup.policy %s\n\n", r->topic,
	       r->data_dir, r->ratio, pol);
	printf("%-9s %14s %6s %10s %8s %12s %7s %14s %8s  %s\n", "PARTITION", "CURRENT_BYTES",
	       "READ", "RECORDS", "KEYLESS", "KEYS", "EV/KEY", "ESTIMATE_BYTES", "SAVINGS",
	       "VERDICT");
	for (size_t i = 0; i < np; i++) {
		const struct tfs_estimate_input *in = &r->ins[i];
		char label[16];
		snprintf(label, sizeof(label), "%" PRId32, r->parts[i]);
		estimate_row(label, &r->est[i], (double)in->records, (double)in->keyless_records,
		             in->cleanable_bytes > 0 ? r->est[i].sample_fraction * 100 : 100);
		records += (double)in->records;
		keyless += (double)in->keyless_records;
		keyed += (double)in->keyed_records;
		tomb += (double)in->tombstones;
		active += (double)in->active_bytes;
		sampled += (double)in->sampled_bytes;
		cleanable += (double)in->cleanable_bytes;
		distinct_seen += in->distinct_keys;
		any_sampled |= in->sampled;
		all_exact &= in->distinct_exact;
	}
	estimate_row("total", total, records, keyless, cleanable > 0 ? sampled * 100 / cleanable : 100);
	printf("\nTotal, term by term (README: \"topicctl estimate\"):\n");
	printf("  current size          %.0f bytes (%s) in %zu partition%s\n", total->current_bytes,
	       fmt_bytes(b1, sizeof(b1), total->current_bytes), np, np == 1 ? "" : "s");
	printf("  active segments       %.0f bytes (%zu x %.0f on average), never cleaned\n", active,
	       np, active / (double)np);
	printf("  read                  %.0f of %.0f cleanable bytes (%s)\n", sampled, cleanable,
	       any_sampled ? "sampled" : "all of it");
	printf("  records read          %.0f: %.0f keyed (tombstones among them: %.0f), %.0f keyless\n",
	       records, keyed, tomb, keyless);
	printf("  distinct keys         %.0f seen (%s)", distinct_seen,
	       all_exact ? "exact" : "HyperLogLog, about 1%");
	if (any_sampled)
		printf(", %.0f estimated for the whole log", total->distinct_keys_total);
	printf("\n");
	if (total->events_per_key > 0)
		printf("  events per key E      %.2f = %.0f keyed records / %.0f keys\n",
		       total->events_per_key, total->keyed_records_total, total->distinct_keys_total);
	else
		printf("  events per key E      - (no keyed records)\n");
	printf("  keyless bytes         %.0f, survive whole\n", total->keyless_bytes_total);
	printf("  keyed bytes           %.0f, shrink to %.0f (each partition's / its E)\n",
	       total->keyed_bytes_total,
	       total->surviving_bytes - total->keyless_bytes_total);
	if (isfinite(total->dirt_bytes))
		printf("  tolerated dirt        %.0f = surviving %.0f x r / (1 - r)\n", total->dirt_bytes,
		       total->surviving_bytes);
	else
		printf("  tolerated dirt        unbounded (r = 1: the ratio never triggers a pass)\n");
	printf("  estimate              %.0f bytes (%s)\n", total->estimate_bytes,
	       fmt_bytes(b1, sizeof(b1), total->estimate_bytes));
	printf("  savings               %.1f%%: %s\n", total->savings * 100, verdict(total));
	if (total->simple.defined)
		printf("  simple formula        estimate %.0f bytes, savings %.1f%%, E %.2f: %s "
		       "(README: why the figures differ)\n", total->simple.estimate_bytes,
		       total->simple.savings * 100, total->simple.events_per_key,
		       total->simple.worth_it ? "worth it" : "not worth it");
	else
		printf("  simple formula        - (no record read, or r = 1)\n");
	print_warnings(r, cleanable, pol);
}

int cmd_estimate(int argc, char **argv)
{
	struct est_run r = { 0 };
	int rc = parse_options(argc, argv, &r);

	if (rc != GO_ON)
		return rc;
	rc = resolve_topic(argc, argv, &r);
	if (rc != EXIT_OK)
		return rc;
	rc = find_partitions(&r);
	if (rc == EXIT_OK)
		rc = scan_partitions(&r);
	/* a partition that failed its scan is reported beside the others' figures */
	if (r.scanned) {
		if (r.json)
			print_json(&r);
		else
			print_text(&r);
	}
	free(r.parts);
	free(r.ins);
	free(r.est);
	return rc;
}
