/* follow.c - follow: bootstrap a topic's state from its history views, say when
 * it is reached, then keep following (through a mount; the
 * "bootstrap, then follow" pattern for shell consumers).
 *
 * Each partition is read through T/P/.history/, whose listing is by offset and
 * whose cookies stay valid while the cleaner removes records: the descriptor of a
 * partition's .history is kept open, and after the listing's end it is sought
 * back to the cookie of the last entry printed, so a poll lists only what came
 * since. A poll first reads the partitions' log_end_offset and lists only those
 * that grew; between polls the command sleeps (--interval), it never spins.
 *
 * With --group G the position of each partition starts at the offset committed
 * in MOUNT/.groups/G/TOPIC.PARTITION (0 when there is none) and is committed
 * there, by writing the number, after each round that moved it.
 */
#include "topicctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define FOLLOW_DEFAULT_INTERVAL_MS 1000
#define FOLLOW_MAX_INTERVAL_MS 3600000
#define OFFSET_NAME_DIGITS 20          /* a history entry's name */
#define DENTS_BUF_BYTES 65536
#define VALUE_READ_CHUNK 65536
#define NUMBER_CAP 32

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

const char follow_help[] =
	"usage: topicctl follow [--group GROUP] [--once] [--interval MS] [--json] MOUNT/TOPIC\n"
	"\n"
	"Bootstraps the topic's state and then follows it: records the end offset of\n"
	"each partition, prints every record still on disk from the start (or from the\n"
	"group's committed offsets) up to those ends, prints a '# ready' line with how\n"
	"long that took, then prints new records as they are committed.\n"
	"\n"
	"One line per record, tab-separated:\n"
	"\n"
	"  put     PARTITION OFFSET TIMESTAMP KEY VALUE   a keyed record\n"
	"  delete  PARTITION OFFSET TIMESTAMP KEY         a tombstone\n"
	"  append  PARTITION OFFSET TIMESTAMP VALUE       a keyless record\n"
	"\n"
	"KEY is spelled as the key's file name in the mount (%XX escapes); VALUE has\n"
	"backslash escapes for \\\\, tab (\\t), newline (\\n), carriage return (\\r) and\n"
	"other bytes outside printable ASCII (\\xHH). Then, once:\n"
	"\n"
	"  # ready records=N bootstrap_ms=T end_offsets=P:END,...\n"
	"\n"
	"With --json, one JSON object a line instead: {\"op\", \"partition\", \"offset\",\n"
	"\"timestamp\", \"key\", \"value\"} (key null for a keyless record, value null for\n"
	"a tombstone), and {\"ready\": true, \"records\", \"bootstrap_ms\", \"end_offsets\"}.\n"
	"Each partition is polled through its .history view; a poll costs one attribute\n"
	"read per partition when nothing changed.\n"
	"\n"
	"  -g, --group GROUP     start at GROUP's committed offsets and commit as it goes\n"
	"                        (MOUNT/.groups/GROUP/TOPIC.PARTITION)\n"
	"  -1, --once            stop once ready (print the state, do not follow)\n"
	"  -i, --interval MS     poll every MS milliseconds (default 1000)\n"
	"  -j, --json            JSON lines\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 after --once or an interrupt; 1 the topic cannot be read or a\n"
	"commit failed; 2 usage error.\n";

static volatile sig_atomic_t stop_following;

static void on_signal(int sig)
{
	(void)sig;
	stop_following = 1;
}

struct fpart {
	int32_t partition;
	char dir[PATH_MAX + TOPIC_CAP + 16];          /* MOUNT/TOPIC/P */
	int hist_fd;                   /* its .history, kept open */
	int64_t resume_cookie;         /* after the last entry read; 0: from the start */
	int64_t position;              /* the next offset to print */
	int64_t end;                   /* log_end_offset at the last poll */
	int64_t committed;             /* last offset committed for the group, -1 */
};

struct follow {
	struct mpath m;
	const char *group;
	bool json;
	struct fpart *p;
	size_t n;
	int64_t printed;
	char *value;                   /* a record's value, grown as needed */
	size_t value_cap;
};

/* ---- printing ---------------------------------------------------------------------- */

/* A key's bytes as its file name in the mount (the README's key names). */
static void put_key_name(FILE *f, const uint8_t *k, size_t len)
{
	if (len == 0) {
		fputc('%', f);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		uint8_t c = k[i];
		if (c == '%' || c == '/' || c < 0x20 || c == 0x7f || (i == 0 && c == '.'))
			fprintf(f, "%%%02X", c);
		else
			fputc(c, f);
	}
}

static void put_value(FILE *f, const uint8_t *v, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t c = v[i];
		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

/* What put(f, p, len) prints, as a malloc'd string (NULL without memory). */
static char *printed(void (*put)(FILE *, const uint8_t *, size_t), const uint8_t *p, size_t len)
{
	char *s = NULL;
	size_t sl = 0;
	FILE *f = open_memstream(&s, &sl);

	if (!f)
		return NULL;
	put(f, p, len);
	fclose(f);
	return s;
}

/* One history entry: opens it, reads its value and attributes, prints a line.
 * 0, 1 when it is gone (cleaned away since the listing), or -errno. */
static int print_entry(struct follow *fw, struct fpart *p, int64_t offset, const char *name)
{
	uint8_t *key = NULL;
	char num[NUMBER_CAP];
	ssize_t klen, n;
	size_t vlen = 0;
	int64_t ts = -1;
	bool tomb;
	int fd = openat(p->hist_fd, name, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return errno == ENOENT ? 1 : -errno;
	klen = fgetxattr(fd, XATTR_PREFIX "key", NULL, 0);
	if (klen >= 0) {
		key = malloc((size_t)klen + 1);
		if (!key) {
			rc = -ENOMEM;
			goto out;
		}
		klen = fgetxattr(fd, XATTR_PREFIX "key", key, (size_t)klen + 1);
	}
	if (klen < 0 && errno != ENODATA) {
		rc = -errno;
		goto out;
	}
	n = fgetxattr(fd, XATTR_PREFIX "tombstone", num, sizeof(num) - 1);
	tomb = n > 0 && num[0] == '1';
	n = fgetxattr(fd, XATTR_PREFIX "timestamp", num, sizeof(num) - 1);
	if (n > 0) {
		num[n] = '\0';
		ts = strtoll(num, NULL, 10);
	}
	for (;;) {
		if (fw->value_cap - vlen < VALUE_READ_CHUNK) {
			char *v = realloc(fw->value, fw->value_cap + VALUE_READ_CHUNK);
			if (!v) {
				rc = -ENOMEM;
				goto out;
			}
			fw->value = v;
			fw->value_cap += VALUE_READ_CHUNK;
		}
		n = read(fd, fw->value + vlen, fw->value_cap - vlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		vlen += (size_t)n;
	}
	if (fw->json) {
		struct json_object *o = json_object_new_object();
		char *k = klen >= 0 ? printed(put_key_name, key, (size_t)klen) : NULL;
		char *v = tomb ? NULL : printed(put_value, (const uint8_t *)fw->value, vlen);
		json_object_object_add(o, "op", json_object_new_string(
		        klen < 0 ? "append" : tomb ? "delete" : "put"));
		json_object_object_add(o, "partition", json_object_new_int(p->partition));
		json_object_object_add(o, "offset", json_object_new_int64(offset));
		json_object_object_add(o, "timestamp", json_object_new_int64(ts));
		json_object_object_add(o, "key", json_str_or_null(k));
		json_object_object_add(o, "value", json_str_or_null(v));
		puts(json_object_to_json_string_ext(o, JSON_LINE_FLAGS));
		json_object_put(o);
		free(k);
		free(v);
	} else {
		printf("%s\t%" PRId32 "\t%" PRId64 "\t%" PRId64 "\t",
		       klen < 0 ? "append" : tomb ? "delete" : "put", p->partition, offset, ts);
		if (klen >= 0) {
			put_key_name(stdout, key, (size_t)klen);
			if (!tomb)
				putchar('\t');
		}
		if (!tomb)
			put_value(stdout, (const uint8_t *)fw->value, vlen);
		putchar('\n');
	}
	fw->printed++;
out:
	free(key);
	close(fd);
	return rc;
}

/* ---- reading a partition ------------------------------------------------------------ */

/* Prints the records of p from its position up to (not including) upto, or all
 * that are listed when upto < 0. Returns 0 or -errno. */
static int read_partition(struct follow *fw, struct fpart *p, int64_t upto)
{
	char buf[DENTS_BUF_BYTES];
	int rc = 0;

	if (lseek(p->hist_fd, p->resume_cookie, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		long n = syscall(SYS_getdents64, p->hist_fd, buf, sizeof(buf));
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		for (long at = 0; at < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + at);
			int64_t off;

			at += d->d_reclen;
			if (d->d_name[0] == '.' || strlen(d->d_name) != OFFSET_NAME_DIGITS ||
			    !parse_i64(d->d_name, 0, INT64_MAX, &off))
				continue;
			if (upto >= 0 && off >= upto) {
				p->position = upto;    /* nothing listed lies between */
				return 0;      /* resume at this entry next time */
			}
			if (off >= p->position) {
				rc = print_entry(fw, p, off, d->d_name);
				if (rc < 0)
					return rc;
				p->position = off + 1;
			}
			p->resume_cookie = d->d_off;
		}
	}
	if (upto >= 0 && p->position < upto)
		p->position = upto;    /* the rest of the range holds no record */
	return 0;
}

/* ---- the group's positions ---------------------------------------------------------- */

static void group_file(const struct follow *fw, const struct fpart *p, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/.groups/%s/%s.%" PRId32, fw->m.root, fw->group, fw->m.topic,
	         p->partition);
}

static int group_open(struct follow *fw)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/.groups/%s", fw->m.root, fw->group);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		complain("%s: %s", path, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < fw->n; i++) {
		struct fpart *p = &fw->p[i];
		char num[NUMBER_CAP];
		int64_t v;
		ssize_t len;
		int fd;

		group_file(fw, p, path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0) {
			complain("%s: %s", path, strerror(errno));
			return -1;
		}
		len = read(fd, num, sizeof(num) - 1);
		close(fd);
		if (len < 0) {
			complain("%s: %s", path, strerror(errno));
			return -1;
		}
		while (len > 0 && (num[len - 1] == '\n' || num[len - 1] == ' '))
			len--;
		num[len] = '\0';
		if (len == 0)
			continue;
		if (!parse_i64(num, 0, INT64_MAX, &v)) {
			complain("%s: not an offset: '%s'", path, num);
			return -1;
		}
		p->position = p->committed = v;
	}
	return 0;
}

static int group_commit(struct follow *fw, struct fpart *p)
{
	char path[PATH_MAX * 2], num[NUMBER_CAP];
	int fd, len, err = 0;

	if (!fw->group || p->committed == p->position)
		return 0;
	group_file(fw, p, path, sizeof(path));
	len = snprintf(num, sizeof(num), "%" PRId64 "\n", p->position);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		err = errno;
	else if (write(fd, num, (size_t)len) != len)
		err = errno ? errno : EIO;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	if (err) {
		complain("cannot commit %" PRId64 " to %s: %s", p->position, path, strerror(err));
		return -1;
	}
	p->committed = p->position;
	return 0;
}

/* ---- the command ------------------------------------------------------------------------ */

static int open_partitions(struct follow *fw)
{
	char tdir[PATH_MAX + TOPIC_CAP];
	int32_t *parts = NULL;
	size_t n = 0;

	snprintf(tdir, sizeof(tdir), "%s/%s", fw->m.root, fw->m.topic);
	if (list_partitions(tdir, &parts, &n) < 0) {
		complain("%s: %s", tdir, strerror(errno));
		return -1;
	}
	fw->p = calloc(n ? n : 1, sizeof(*fw->p));
	if (!fw->p) {
		free(parts);
		return -1;
	}
	fw->n = n;
	for (size_t i = 0; i < n; i++)
		fw->p[i].hist_fd = -1;
	for (size_t i = 0; i < n; i++) {
		struct fpart *p = &fw->p[i];
		char hist[sizeof(p->dir) + 16];

		p->partition = parts[i];
		p->committed = -1;
		snprintf(p->dir, sizeof(p->dir), "%s/%" PRId32, tdir, parts[i]);
		snprintf(hist, sizeof(hist), "%s/.history", p->dir);
		p->hist_fd = open(hist, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (p->hist_fd < 0) {
			complain("%s: %s", hist, strerror(errno));
			free(parts);
			return -1;
		}
	}
	free(parts);
	return 0;
}

static int read_ends(struct follow *fw)
{
	for (size_t i = 0; i < fw->n; i++)
		if (!xget_i64(fw->p[i].dir, "log_end_offset", &fw->p[i].end)) {
			complain("%s: cannot read log_end_offset: %s", fw->p[i].dir, strerror(errno));
			return -1;
		}
	return 0;
}

static void print_ready(struct follow *fw, int64_t ms)
{
	if (fw->json) {
		struct json_object *o = json_object_new_object(), *ends = json_object_new_object();
		for (size_t i = 0; i < fw->n; i++) {
			char k[NUMBER_CAP];
			snprintf(k, sizeof(k), "%" PRId32, fw->p[i].partition);
			json_object_object_add(ends, k, json_object_new_int64(fw->p[i].end));
		}
		json_object_object_add(o, "ready", json_object_new_boolean(1));
		json_object_object_add(o, "records", json_object_new_int64(fw->printed));
		json_object_object_add(o, "bootstrap_ms", json_object_new_int64(ms));
		json_object_object_add(o, "end_offsets", ends);
		puts(json_object_to_json_string_ext(o, JSON_LINE_FLAGS));
		json_object_put(o);
	} else {
		printf("# ready records=%" PRId64 " bootstrap_ms=%" PRId64 " end_offsets=", fw->printed, ms);
		for (size_t i = 0; i < fw->n; i++)
			printf("%s%" PRId32 ":%" PRId64, i ? "," : "", fw->p[i].partition, fw->p[i].end);
		putchar('\n');
	}
	fflush(stdout);
}

/* Tells the mount how long a bootstrap from zero took (its metrics show the last
 * one per topic); a mount without the attribute is not an error. */
static void report_bootstrap(struct follow *fw, int64_t ms, bool from_zero)
{
	char tdir[PATH_MAX + TOPIC_CAP], num[NUMBER_CAP];

	if (!from_zero)
		return;
	snprintf(tdir, sizeof(tdir), "%s/%s", fw->m.root, fw->m.topic);
	snprintf(num, sizeof(num), "%" PRId64, ms);
	(void)xset(tdir, "bootstrap_ms", num);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);          /* a signal ends it early, as it should */
}

int cmd_follow(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "group", required_argument, NULL, 'g' },
		{ "once", no_argument, NULL, '1' },
		{ "interval", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct follow fw = { 0 };
	struct sigaction sa = { 0 };
	int64_t interval = FOLLOW_DEFAULT_INTERVAL_MS, t0;
	bool once = false, from_zero = true;
	int c, rc = EXIT_PROBLEM;

	while ((c = next_opt(argc, argv, "g:1i:jh", opts)) != -1) {
		if (c == 'g')
			fw.group = optarg;
		else if (c == '1')
			once = true;
		else if (c == 'i') {
			if (!parse_i64(optarg, 1, FOLLOW_MAX_INTERVAL_MS, &interval))
				return usage_error("--interval: not a number of milliseconds in [1, %d]: '%s'",
				                   FOLLOW_MAX_INTERVAL_MS, optarg);
		} else if (c == 'j')
			fw.json = true;
		else if (c == 'h')
			return show_help();
		else
			return EXIT_USAGE;
	}
	if (argc - optind != 1)
		return usage_error("follow needs exactly one MOUNT/TOPIC");
	if (fw.group && (!fw.group[0] || strchr(fw.group, '/') || fw.group[0] == '.'))
		return usage_error("--group: not a group name: '%s'", fw.group);
	if (resolve_mount_path(argv[optind], &fw.m) < 0)
		return EXIT_PROBLEM;
	if (!fw.m.topic[0] || fw.m.partition >= 0) {
		complain("%s: name a topic (MOUNT/TOPIC)", argv[optind]);
		return EXIT_PROBLEM;
	}
	t0 = mono_ms();
	if (open_partitions(&fw) < 0 || (fw.group && group_open(&fw) < 0) || read_ends(&fw) < 0)
		goto out;
	for (size_t i = 0; i < fw.n; i++)
		if (fw.p[i].position > 0)
			from_zero = false;
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* bootstrap: up to the ends recorded now */
	for (size_t i = 0; i < fw.n; i++) {
		int err = read_partition(&fw, &fw.p[i], fw.p[i].end);
		if (err < 0) {
			complain("%s/.history: %s", fw.p[i].dir, strerror(-err));
			goto out;
		}
		if (group_commit(&fw, &fw.p[i]) < 0)
			goto out;
	}
	/* one reading of the clock, so the line printed and the metric agree */
	int64_t bootstrap_ms = mono_ms() - t0;
	print_ready(&fw, bootstrap_ms);
	report_bootstrap(&fw, bootstrap_ms, from_zero);

	/* follow: list a partition again only when its end moved */
	while (!once && !stop_following) {
		fflush(stdout);
		sleep_ms(interval);
		for (size_t i = 0; i < fw.n && !stop_following; i++) {
			struct fpart *p = &fw.p[i];
			int64_t end;
			int err;

			if (!xget_i64(p->dir, "log_end_offset", &end)) {
				complain("%s: cannot read log_end_offset: %s", p->dir, strerror(errno));
				goto out;
			}
			if (end <= p->position)
				continue;
			p->end = end;
			err = read_partition(&fw, p, end);
			if (err < 0) {
				complain("%s/.history: %s", p->dir, strerror(-err));
				goto out;
			}
			if (group_commit(&fw, p) < 0)
				goto out;
		}
	}
	rc = EXIT_OK;
out:
	fflush(stdout);
	for (size_t i = 0; i < fw.n; i++)
		if (fw.p[i].hist_fd >= 0)
			close(fw.p[i].hist_fd);
	free(fw.p);
	free(fw.value);
	return rc;
}
