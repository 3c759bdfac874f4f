/* main.c - topicctl, the operator's tool for topicfs: the command table, and the
 * helpers every command uses (messages, options, numbers, bytes, JSON, the
 * progress bar). What the commands share is declared in topicctl.h; each command
 * lives in the file of its concept (topic.c, status.c, dump.c, verify.c,
 * estimate.c).
 *
 * Two kinds of command, and they never mix:
 *
 *   through a MOUNT (the daemon does the work; topicctl only uses the namespace
 *   and the user.topicfs.* attributes that docs/semantics.md §6 documents, exactly as
 *   mkdir, rmdir, rm, getfattr and setfattr would):
 *       create, describe, config, delete, status, clean, roll
 *   on FILES, read-only, through engine/inspect/log_inspect.h (no daemon needed; safe on
 *   a live data directory):
 *       dump, verify, estimate (estimate accepts MOUNT/TOPIC too: it finds the
 *       mount's data directory in /proc/self/mountinfo)
 *
 * Conventions: getopt_long; --help on every command; --json on every command that
 * reads; exit status 0 ok, 1 problems found or the operation failed, 2 usage error;
 * a progress bar on stderr for long scans only when stderr is a terminal.
 */
#include "topicctl.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/log.h"
#include "tfs_version.h"

#define PROGRESS_INTERVAL_MS 100
#define PROGRESS_WIDTH 30

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const char *help;
};

/* Set once by main, before the command runs. */
static const char *cmd_name = "topicctl";
static const struct command *current;

/* ==================================================================================
 * Small helpers: messages, numbers, bytes, JSON
 * ================================================================================== */

void complain(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", cmd_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cmd_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", cmd_name);
	return EXIT_USAGE;
}

bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* "123 B", "4.0 KiB", "12.3 MiB" */
const char *fmt_bytes(char *buf, size_t cap, double n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (n >= 1024 && u < 5) {
		n /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%.0f B", n);
	else
		snprintf(buf, cap, "%.1f %s", n, units[u]);
	return buf;
}

int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void json_print(struct json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_FLAGS));
}

struct json_object *json_str_or_null(const char *s)
{
	return s ? json_object_new_string(s) : NULL;
}

/* ==================================================================================
 * Progress bar: stderr, only when it is a terminal; erased before other output
 * ================================================================================== */

void progress_init(struct progress *p, const char *label)
{
	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	p->label = label;
}

void progress_clear(struct progress *p)
{
	if (p && p->shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->shown = false;
	}
}

void progress_show(struct progress *p, int64_t done, int64_t total)
{
	char a[32], b[32];
	int64_t now;
	int fill;

	if (!p || !p->on || total <= 0)
		return;
	now = mono_ms();
	if (p->shown && now - p->last_ms < PROGRESS_INTERVAL_MS)
		return;
	p->last_ms = now;
	if (done > total)
		done = total;
	fill = (int)((double)done / (double)total * PROGRESS_WIDTH);
	fprintf(stderr, "\r%s [%.*s%*s] %3d%% %s / %s\033[K", p->label, fill,
	        "##############################", PROGRESS_WIDTH - fill, "",
	        (int)((double)done * 100 / (double)total), fmt_bytes(a, sizeof(a), (double)done),
	        fmt_bytes(b, sizeof(b), (double)total));
	fflush(stderr);
	p->shown = true;
}

/* ==================================================================================
 * Command-line plumbing
 * ================================================================================== */

/* getopt_long with our own messages; returns the option, -1 at the end, or '?'
 * after printing a usage error (the caller returns EXIT_USAGE). */
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	int c;

	opterr = 0;
	c = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (c == '?') {
		if (optopt)
			fprintf(stderr, "%s: unknown option '-%c'\n", cmd_name, optopt);
		else
			fprintf(stderr, "%s: unknown option '%s'\n", cmd_name, argv[optind - 1]);
		fprintf(stderr, "Try '%s --help'.\n", cmd_name);
	} else if (c == ':') {
		fprintf(stderr, "%s: option '%s' needs a value\nTry '%s --help'.\n", cmd_name,
		        argv[optind - 1], cmd_name);
		c = '?';
	}
	return c;
}

int show_help(void)
{
	fputs(current->help, stdout);
	return EXIT_OK;
}

/* ==================================================================================
 * main
 * ================================================================================== */

static const struct command commands[] = {
	{ "create", cmd_create, "create a topic through a mount", create_help },
	{ "describe", cmd_describe, "partitions' offsets, sizes, keys; the topic's config", describe_help },
	{ "config", cmd_config, "read or set a topic's config", config_help },
	{ "delete", cmd_delete, "tombstone every key, then remove the topic", delete_help },
	{ "status", cmd_status, "the cleaner's view of each partition, and its metrics", status_help },
	{ "clean", cmd_clean, "run a cleaning pass now", clean_help },
	{ "roll", cmd_roll, "close the active segment now", roll_help },
	{ "dump", cmd_dump, "print the batches and records of segment files", dump_help },
	{ "verify", cmd_verify, "check a data directory's files", verify_help },
	{ "estimate", cmd_estimate, "estimate what compaction would save", estimate_help },
	{ "repair", cmd_repair, "truncate a damaged log at its first unreadable batch", repair_help },
	{ "follow", cmd_follow, "print a topic's records up to its end, then follow it", follow_help },
	{ "groups", cmd_groups, "consumer groups' positions and lag in offsets, records and time", groups_help },
	{ "erase", cmd_erase, "tombstone a key, judged against every group's lag", erase_help },
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void general_help(FILE *f)
{
	fprintf(f, "usage: topicctl COMMAND [OPTIONS] ARGS...\n\n"
	        "The operator's tool for topicfs. Commands that name a MOUNT work through a\n"
	        "mounted topicfs (directories and user.topicfs.* attributes); dump, verify and\n"
	        "estimate read segment files directly, read-only.\n\nCommands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'topicctl COMMAND --help' describes a command; 'topicctl --version'\n"
	        "prints the version.\n\n"
	        "Exit status: 0 success; 1 problems found or the operation failed; 2 usage error.\n");
}

int main(int argc, char **argv)
{
	static char name[64];
	int null_fd;

	if (argc < 2) {
		general_help(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		general_help(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("topicctl %s\n", TFS_VERSION);
		return EXIT_OK;
	}
	/* Engine modules log what they refuse (a config file's bad line...); every
	 * such refusal reaches the user through this tool's own report instead. */
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd >= 0)
		tfs_log_set_fd(null_fd, 0);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		current = &commands[i];
		snprintf(name, sizeof(name), "topicctl %s", commands[i].name);
		cmd_name = name;
		optind = 1;
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "topicctl: unknown command '%s'\nTry 'topicctl --help'.\n", argv[1]);
	return EXIT_USAGE;
}
