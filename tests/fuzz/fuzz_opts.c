/* fuzz_opts.c - topicfs's command line (fs/opts.c, tfs_opts_parse through
 * libfuse's fuse_opt_parse).
 *
 * Input layout: the arguments after the program name, separated by NUL bytes
 * (at most 64; e.g. "-o", "partitions=3,ro", "/data", "/mnt").
 *
 * Properties:
 *   - parsing is deterministic: the same arguments twice give the same verdict
 *     and the same options;
 *   - accepted options are within their documented bounds (partitions >= 1,
 *     max_read 4096..1 MiB, max_open_files 16..1000000 or the default,
 *     cache_timeout 0..1e9 s), and every topic default reads back as a value the
 *     config validator accepts unchanged;
 *   - what is left for libfuse holds none of topicfs's own NAME=VALUE options.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fuse_ll.h"
#include "fs/opts.h"
#include "tests/fuzz/fz.h"

#define MAX_ARGS 64
#define CONFIG_TEXT_MAX 64
#define MAX_READ_LO 4096
#define MAX_READ_HI (1 << 20)
#define CACHE_TIMEOUT_MAX_S 1e9

struct parsed {
	int rc;
	struct tfs_opts o;
	struct fuse_args args;
};

static int null_fd = -1;

static void parse(int argc, char **argv, struct parsed *p)
{
	int saved = dup(2);

	tfs_opts_init(&p->o);
	p->args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	/* the parser prints a line per bad option: not wanted 10,000 times a second */
	if (saved >= 0 && null_fd >= 0 && !getenv("FUZZ_VERBOSE"))
		dup2(null_fd, 2);
	p->rc = tfs_opts_parse(&p->args, &p->o);
	if (saved >= 0) {
		dup2(saved, 2);
		close(saved);
	}
}

static void release(struct parsed *p)
{
	tfs_opts_release(&p->o);
	fuse_opt_free_args(&p->args);
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void same_config(const struct tfs_topic_config *a, const struct tfs_topic_config *b)
{
	for (const char *const *n = tfs_topic_config_names(); *n; n++) {
		char va[CONFIG_TEXT_MAX], vb[CONFIG_TEXT_MAX];
		FZ_CHECK(tfs_topic_config_get(a, *n, va, sizeof(va)) == 0 &&
		         tfs_topic_config_get(b, *n, vb, sizeof(vb)) == 0, "get of %s", *n);
		FZ_CHECK(!strcmp(va, vb), "%s: %s, then %s", *n, va, vb);
	}
}

static bool is_ours(const char *name, size_t len)
{
	static const char *const own[] = { "partitions", "io", "max_open_files", "fault",
	                                   "cache_timeout", NULL };
	const char *const *lists[3] = { own, tfs_topic_config_names(), tfs_cleaner_config_names() };

	for (int l = 0; l < 3; l++)
		for (const char *const *n = lists[l]; *n; n++)
			if (strlen(*n) == len && !memcmp(*n, name, len))
				return true;
	return false;
}

/* No option libfuse gets is one of ours in NAME=VALUE form. */
static void check_kept(const struct fuse_args *args)
{
	for (int i = 1; i < args->argc; i++) {
		const char *s = args->argv[i];
		if (!strcmp(s, "--"))
			return;                 /* the rest are not options */
		if (!strcmp(s, "-o") && i + 1 < args->argc)
			s = args->argv[++i];
		else if (!strncmp(s, "-o", 2))
			s += 2;
		else
			continue;
		/* comma-separated, "\," escapes a comma */
		while (*s) {
			const char *e = s, *eq = NULL;
			while (*e && *e != ',') {
				if (*e == '\\' && e[1])
					e++;
				else if (*e == '=' && !eq)
					eq = e;
				e++;
			}
			if (eq)
				FZ_CHECK(!is_ours(s, (size_t)(eq - s)), "option %.*s was left for libfuse",
				         (int)(e - s), s);
			s = *e ? e + 1 : e;
		}
	}
}

static void check_accepted(const struct tfs_opts *o)
{
	FZ_CHECK(o->engine.default_partitions >= 1, "partitions %d",
	         (int)o->engine.default_partitions);
	FZ_CHECK(o->max_read >= MAX_READ_LO && o->max_read <= MAX_READ_HI, "max_read %u",
	         o->max_read);
	FZ_CHECK(o->engine.max_open_files == 0 ||
	         (o->engine.max_open_files >= 16 && o->engine.max_open_files <= 1000000),
	         "max_open_files %u", o->engine.max_open_files);
	FZ_CHECK(o->cache_timeout >= 0.0 && o->cache_timeout <= CACHE_TIMEOUT_MAX_S,
	         "cache_timeout %g", o->cache_timeout);
	FZ_CHECK(o->engine.read_only == o->read_only, "ro is not passed to the engine");
	for (const char *const *n = tfs_topic_config_names(); *n; n++) {
		struct tfs_topic_config fresh;
		char v[CONFIG_TEXT_MAX], again[CONFIG_TEXT_MAX];
		int rc = tfs_topic_config_get(&o->engine.topic_defaults, *n, v, sizeof(v));
		FZ_CHECK(rc == 0, "get of %s", *n);
		tfs_topic_config_defaults(&fresh);
		rc = tfs_topic_config_set(&fresh, *n, v);
		FZ_CHECK(rc == 0, "the default %s=%s is refused by the validator", *n, v);
		tfs_topic_config_get(&fresh, *n, again, sizeof(again));
		FZ_CHECK(!strcmp(v, again), "%s=%s reads back as %s", *n, v, again);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), *argv[MAX_ARGS + 2];
	int argc = 0;
	struct parsed a, b;

	if (!copy)
		abort();
	if (null_fd < 0)
		null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = "topicfs";
	for (char *s = copy; s <= copy + size && argc <= MAX_ARGS; s += strlen(s) + 1)
		argv[argc++] = s;
	argv[argc] = NULL;

	parse(argc, argv, &a);
	parse(argc, argv, &b);
	FZ_CHECK(a.rc == b.rc, "the same arguments parsed %d, then %d", a.rc, b.rc);
	if (a.rc == 0) {
		FZ_CHECK(same_str(a.o.data_dir, b.o.data_dir) && same_str(a.o.fault_spec, b.o.fault_spec) &&
		         a.o.read_only == b.o.read_only && a.o.reader_cache == b.o.reader_cache &&
		         a.o.max_read == b.o.max_read && a.o.cache_timeout == b.o.cache_timeout &&
		         a.o.engine.default_partitions == b.o.engine.default_partitions &&
		         a.o.engine.io_kind == b.o.engine.io_kind &&
		         a.o.engine.max_open_files == b.o.engine.max_open_files &&
		         memcmp(&a.o.engine.cleaner, &b.o.engine.cleaner,
		                sizeof(a.o.engine.cleaner)) == 0,
		         "the same arguments gave other options");
		same_config(&a.o.engine.topic_defaults, &b.o.engine.topic_defaults);
		check_accepted(&a.o);
		check_kept(&a.args);
	}
	release(&a);
	release(&b);
	free(copy);
	return 0;
}
