/* opts.c - command-line options (see opts.h). */
#include "fs/opts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fuse_ll.h"
#include "fs/scratch.h"
#include "io/parse.h"

/* A direct-I/O read(2) pins (and so faults in) min(its size, max_read) bytes of
 * the caller's buffer before the READ goes out, however short the value. cat and
 * cp read every file into a fresh 128 KiB buffer: at the kernel's 128 KiB that is
 * 32 zero-filled pages per key for a 64-byte value, and `xargs cat` of 10,000 keys
 * ran at 4,500 keys/s; at 32 KiB, 6,000 (bench/fs.sh; passthrough_ll reads through
 * the page cache and touches one page). The price is more READs for large values:
 * reading a 64 MB value after its open, 1.0 GB/s instead of 2.3. Most keys hold
 * small values (Kafka's max.message.bytes is 1 MiB by default). */
#define DEFAULT_MAX_READ (32u << 10)
#define MAX_READ_MIN 4096u
#define MAX_READ_MAX (1u << 20)
#define SCRATCH_MAX_BYTES_LIMIT (1ll << 40)  /* memory, not disk: a sanity bound */
#define SCRATCH_MAX_FILES_LIMIT 1000000
#define DEFAULT_CACHE_TIMEOUT_S 60.0   /* every change made through the mount is
                                        * invalidated explicitly; the timeout only
                                        * bounds changes the fs cannot see */

void tfs_opts_init(struct tfs_opts *o)
{
	memset(o, 0, sizeof(*o));
	tfs_engine_config_defaults(&o->engine);
	tfs_kafka_config_defaults(&o->kafka);
	o->cache_timeout = DEFAULT_CACHE_TIMEOUT_S;
	o->scratch_max_bytes = TFS_SCRATCH_DEFAULT_MAX_BYTES;
	o->scratch_max_files = TFS_SCRATCH_DEFAULT_MAX_FILES;
	o->reader_cache = true;                  /* -o direct_reads turns it off */
}

void tfs_opts_release(struct tfs_opts *o)
{
	free(o->data_dir);
	free(o->fault_spec);
	o->data_dir = NULL;
	o->fault_spec = NULL;
}

static bool in_list(const char *const *names, const char *name)
{
	for (; *names; names++)
		if (!strcmp(*names, name))
			return true;
	return false;
}

static int bad_value(struct tfs_opts *o, const char *arg, const char *why)
{
	fprintf(stderr, "topicfs: bad mount option %s: %s\n", arg, why);
	o->bad = 1;
	return 0;
}

/* Our options are consumed (return 0); everything else is kept (return 1). */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct tfs_opts *o = data;
	char name[128];
	const char *eq, *val;
	size_t nlen;
	int64_t v;
	int rc;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->data_dir) {
			o->data_dir = strdup(arg);
			return 0;
		}
		return 1;                         /* the mountpoint, for fuse_parse_cmdline */
	}
	if (key != FUSE_OPT_KEY_OPT)
		return 1;
	if (!strcmp(arg, "-d") || !strcmp(arg, "debug")) {
		o->debug = true;
		return 1;
	}
	if (!strcmp(arg, "reader_cache")) {
		o->reader_cache = true;           /* the default; kept for old fstab lines */
		return 0;
	}
	if (!strcmp(arg, "direct_reads")) {
		o->reader_cache = false;
		return 0;
	}
	if (!strcmp(arg, "default_permissions")) {
		o->default_permissions = true;
		return 0;                         /* added back once, in tfs_opts_parse */
	}
	if (!strcmp(arg, "create_data_dir")) {
		o->engine.create_data_dir = true;
		return 0;
	}
	if (!strcmp(arg, "no_default_permissions")) {
		o->no_default_permissions = true;
		return 0;
	}
	if (!strcmp(arg, "ro")) {
		o->read_only = true;
		return 1;                         /* the kernel mount is read-only too */
	}
	/* "-o cleanup.policy=compact,delete": libfuse splits at the comma (escape it
	 * as "compact\\,delete", or let this glue the second half back on). */
	if (o->last_was_policy && (!strcmp(arg, "compact") || !strcmp(arg, "delete"))) {
		char both[64];
		snprintf(both, sizeof(both), "%s,%s", o->last_policy, arg);
		if (tfs_topic_config_set(&o->engine.topic_defaults, "cleanup.policy", both) < 0)
			return bad_value(o, both, "not a valid cleanup.policy");
		o->last_was_policy = false;
		return 0;
	}
	o->last_was_policy = false;
	if (o->last_was_mechs && (!strcmp(arg, "PLAIN") || !strcmp(arg, "SCRAM-SHA-256"))) {
		char both[64];
		const char *why;
		snprintf(both, sizeof(both), "%s,%s", o->last_mechs, arg);
		if (tfs_kafka_config_set(&o->kafka, "sasl.enabled.mechanisms", both, &why) < 0)
			return bad_value(o, both, why);
		o->last_was_mechs = false;
		return 0;
	}
	o->last_was_mechs = false;
	eq = strchr(arg, '=');
	if (!eq || arg[0] == '-')
		return 1;
	nlen = (size_t)(eq - arg);
	if (nlen >= sizeof(name))
		return 1;
	memcpy(name, arg, nlen);
	name[nlen] = '\0';
	val = eq + 1;

	if (!strcmp(name, "max_read")) {
		if (!tfs_parse_i64(val, MAX_READ_MIN, MAX_READ_MAX, &v))
			return bad_value(o, arg, "expected bytes between 4096 and 1048576");
		o->max_read = (unsigned)v;
		return 1;                         /* the kernel's mount option as well */
	}
	if (!strcmp(name, "partitions")) {
		if (!tfs_parse_i64(val, 1, INT32_MAX, &v))
			return bad_value(o, arg, "expected a partition count >= 1");
		o->engine.default_partitions = (int32_t)v;
		return 0;
	}
	if (!strcmp(name, "io")) {
		if (tfs_io_kind_parse(val, &o->engine.io_kind) < 0)
			return bad_value(o, arg, "expected auto, uring or sync");
		return 0;
	}
	if (!strcmp(name, "max_open_files")) {
		if (!tfs_parse_i64(val, 16, 1000000, &v))
			return bad_value(o, arg, "expected a number between 16 and 1000000");
		o->engine.max_open_files = (unsigned)v;
		return 0;
	}
	/* 0 is allowed: no scratch files at all (every create is ENOSPC). */
	if (!strcmp(name, "scratch_max_bytes")) {
		if (!tfs_parse_i64(val, 0, SCRATCH_MAX_BYTES_LIMIT, &v))
			return bad_value(o, arg, "expected bytes between 0 and 2^40");
		o->scratch_max_bytes = (uint64_t)v;
		return 0;
	}
	if (!strcmp(name, "scratch_max_files")) {
		if (!tfs_parse_i64(val, 0, SCRATCH_MAX_FILES_LIMIT, &v))
			return bad_value(o, arg, "expected a number between 0 and 1000000");
		o->scratch_max_files = (uint32_t)v;
		return 0;
	}
	if (!strcmp(name, "fault")) {
		free(o->fault_spec);
		o->fault_spec = strdup(val);
		return 0;
	}
	if (!strcmp(name, "cache_timeout")) {
		char *end;
		double d = strtod(val, &end);
		if (end == val || *end || !(d >= 0.0) || d > 1e9)
			return bad_value(o, arg, "expected seconds >= 0");
		o->cache_timeout = d;
		return 0;
	}
	if (in_list(tfs_topic_config_names(), name)) {
		rc = tfs_topic_config_set(&o->engine.topic_defaults, name, val);
		if (rc < 0)
			return bad_value(o, arg, "not a valid value for this topic config");
		if (!strcmp(name, "cleanup.policy") && strlen(val) < sizeof(o->last_policy)) {
			strcpy(o->last_policy, val);
			o->last_was_policy = true;
		}
		return 0;
	}
	/* Kafka's broker setting for the consumer groups' offsets (engine/groups/groups.h) */
	if (!strcmp(name, "offsets.retention.minutes")) {
		if (!tfs_parse_i64(val, 1, INT64_MAX / 60000, &v))
			return bad_value(o, arg, "expected minutes >= 1");
		o->engine.groups.retention_ms = v * 60000;
		return 0;
	}
	if (in_list(tfs_kafka_config_names(), name)) {
		const char *why;
		if (tfs_kafka_config_set(&o->kafka, name, val, &why) < 0)
			return bad_value(o, arg, why);
		if (!strcmp(name, "sasl.enabled.mechanisms") && strlen(val) < sizeof(o->last_mechs)) {
			strcpy(o->last_mechs, val);
			o->last_was_mechs = true;
		}
		return 0;
	}
	if (in_list(tfs_cleaner_config_names(), name)) {
		rc = tfs_cleaner_config_set(&o->engine.cleaner, name, val);
		if (rc < 0)
			return bad_value(o, arg, "not a valid value for this cleaner setting");
		return 0;
	}
	return 1;
}

int tfs_opts_parse(struct fuse_args *args, struct tfs_opts *o)
{
	if (fuse_opt_parse(args, o, NULL, opt_proc) == -1)
		return -1;
	if (o->bad)
		return -1;
	o->engine.read_only = o->read_only;
	/* Secure by default: the kernel checks every access against the owner, group
	 * and mode topicfs reports, unless the mount explicitly says otherwise. Without
	 * the check, allow_other would let any user write, delete and reconfigure what
	 * root owns (README "Mounting", "Permissions"). */
	if (o->default_permissions && o->no_default_permissions) {
		fprintf(stderr, "topicfs: bad mount options default_permissions and "
		        "no_default_permissions: choose one\n");
		return -1;
	}
	if (!o->no_default_permissions && fuse_opt_add_arg(args, "-odefault_permissions") != 0)
		return -1;
	if (!o->max_read) {
		char arg[32];
		o->max_read = DEFAULT_MAX_READ;
		snprintf(arg, sizeof(arg), "-omax_read=%u", o->max_read);
		if (fuse_opt_add_arg(args, arg) != 0)
			return -1;
	}
	/* The fault spec is armed by main.c once the mount is up, so that the n-th
	 * disk operation counts from the first request (not from recovery at open).
	 * Check it now, while a bad spec can still stop us cleanly. */
	if (o->fault_spec) {
		struct tfs_io *io = NULL;
		int rc = tfs_io_create(TFS_IO_SYNC, &io);
		if (rc == 0)
			rc = tfs_io_set_fault(io, o->fault_spec);
		tfs_io_destroy(io);
		if (rc < 0) {
			fprintf(stderr, "topicfs: bad mount option fault=%s: expected OPS:N:ACTION "
			        "(e.g. write:3:EIO, all:5:crash)\n", o->fault_spec);
			return -1;
		}
	}
	return 0;
}

void tfs_opts_usage(const char *prog)
{
	printf("usage: %s [options] DATA_DIR MOUNTPOINT\n\n"
	       "topicfs options:\n"
	       "    -o ro                  read-only mount (writes fail with EROFS)\n"
	       "    -o create_data_dir     create DATA_DIR if it does not exist (else that\n"
	       "                           is an error: a typo must not mount an empty log)\n"
	       "    -o partitions=N        partitions of new topics (default 1)\n"
	       "    -o io=auto|uring|sync  I/O backend (default auto)\n"
	       "    -o max_open_files=N    bound of the segment file cache (default 4096)\n"
	       "    -o cache_timeout=S     seconds the kernel may cache key attributes\n"
	       "    -o no_default_permissions  no permission checks: with allow_other, every\n"
	       "                           user may write, delete and reconfigure everything\n"
	       "                           (default: the kernel checks owner, group and mode)\n"
	       "    -o default_permissions the default, spelled out (for fstab lines)\n"
	       "    -o direct_reads        never read keys through the page cache (every\n"
	       "                           read(2) asks the daemon; by default re-reads of\n"
	       "                           an unchanged value come from the page cache)\n"
	       "    -o reader_cache        the default, spelled out (the opposite of direct_reads)\n"
	       "    -o max_read=N          bytes one READ request may ask for (default 32768;\n"
	       "                           larger reads large values faster, and costs every\n"
	       "                           read of a small value into a fresh buffer more)\n"
	       "    -o scratch_max_bytes=N bytes all scratch files (dot names in a partition:\n"
	       "                           rsync's and editors' temporaries, kept in memory,\n"
	       "                           never logged) may hold together (default 64 MiB)\n"
	       "    -o scratch_max_files=N scratch files alive at once (default 1024)\n"
	       "    -o fault=SPEC          fail or crash the n-th disk operation (tests)\n"
	       "    -o listeners=PLAINTEXT://HOST:PORT  serve Kafka's protocol on the same\n"
	       "                           log (off by default; docs/kafka.md)\n"
	       "    -o kafka_allow_remote=true  let listeners bind a non-loopback address\n"
	       "                           without authentication (refused otherwise)\n"
	       "    -o listeners=SASL_PLAINTEXT://HOST:PORT,kafka_sasl_credentials=FILE\n"
	       "                           authenticate every connection (PLAIN, SCRAM-SHA-256;\n"
	       "                           sasl.enabled.mechanisms=...; docs/kafka.md)\n"
	       "    -o kafka_sasl_credentials=FILE  the principals of a SASL listener, each\n"
	       "                           a Unix user (not readable by others)\n"
	       "    -o NAME=VALUE          a Kafka listener setting by its broker name:\n"
	       "                           advertised.listeners node.id num.partitions auto.create.topics.enable socket.request.max.bytes num.network.threads group.initial.rebalance.delay.ms group.max.size connection.failed.authentication.delay.ms queued.max.request.bytes offsets.retention.minutes sasl.enabled.mechanisms\n"
	       "    -o NAME=VALUE          a topic config default by its Kafka name:\n"
	       "                          ", prog);
	for (const char *const *n = tfs_topic_config_names(); *n; n++)
		printf(" %s", *n);
	printf("\n    -o NAME=VALUE          a cleaner setting by its broker name:\n"
	       "                          ");
	for (const char *const *n = tfs_cleaner_config_names(); *n; n++)
		printf(" %s", *n);
	printf("\n\n");
}
