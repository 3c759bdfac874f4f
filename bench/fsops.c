/* fsops.c - one process doing the small-file syscalls of bench/fs.sh in a loop,
 * so that a filesystem benchmark measures the filesystem and not fork+exec.
 *
 *   fsops create    DIR FIRST COUNT SIZE   open(O_WRONLY|O_CREAT|O_TRUNC) + write SIZE + close
 *   fsops overwrite DIR KEYS OPS SIZE      OPS x open(O_WRONLY|O_TRUNC) + write + close of
 *                                          key (i % KEYS), keys 0..KEYS-1 must exist
 *   fsops read      DIR FIRST COUNT SIZE [PASSES]
 *                                          open(O_RDONLY) + read to EOF + close; the value
 *                                          must be SIZE bytes (SIZE < 0: any size); PASSES
 *                                          (default 1) times over the COUNT keys
 *   fsops stat      DIR FIRST COUNT        lstat by name (what `stat`, `ls -l` do per file)
 *   fsops unlink    DIR FIRST COUNT        unlink (what `rm` does per file)
 *   fsops lines     FIRST COUNT SIZE       print COUNT lines "key-NNNNNNN<TAB>VALUE\n" (a
 *                                          .put bulk file; VALUE is SIZE bytes), untimed
 *
 * Key i is named "key-%07d". Values are SIZE bytes: "v<i>-<op>" padded with 'x' and
 * ending in '\n' (in .put lines: SIZE bytes, then the newline that ends the line).
 * Each timed command prints one line
 *   OP COUNT SECONDS OPS_PER_S
 * (CLOCK_MONOTONIC around the loop only), and exits 1 at the first failing call,
 * with the call, the name and errno on stderr. Built by CMake like every C file in bench/
 * (linked with tfs_engine, which it does not use); bench/fs.sh falls back to plain
 * gcc when the build tree is broken.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"

#define MAX_VALUE 65536

static char g_value[MAX_VALUE];
static char g_buf[MAX_VALUE + 1];

static int fail(const char *call, const char *name)
{
	fprintf(stderr, "fsops: %s %s: %s\n", call, name, strerror(errno));
	return 1;
}

static long parse_long(const char *s, long lo, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo) {
		fprintf(stderr, "fsops: bad %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

static void make_value(long i, long op, size_t size)
{
	int n = snprintf(g_value, sizeof(g_value), "v%ld-%ld", i, op);
	size_t len = n < 0 ? 0 : (size_t)n;

	if (len > size)
		len = size;
	if (size > len)
		memset(g_value + len, 'x', size - len);
	if (size > 0)
		g_value[size - 1] = '\n';
}

static void key_name(char *name, size_t cap, long i)
{
	snprintf(name, cap, "key-%07ld", i);
}

static void report(const char *op, long count, double secs)
{
	printf("%s %ld %.6f %.1f\n", op, count, secs, secs > 0 ? (double)count / secs : 0.0);
}

/* open(flags) + one write of SIZE bytes + close; the error of close counts (topicfs
 * commits the record at close). */
static int write_one(const char *name, int flags, size_t size)
{
	int fd = open(name, flags, 0644);

	if (fd < 0)
		return fail("open", name);
	if (size > 0 && write(fd, g_value, size) != (ssize_t)size) {
		int e = errno;
		close(fd);
		errno = e;
		return fail("write", name);
	}
	if (close(fd) < 0)
		return fail("close", name);
	return 0;
}

static int cmd_create(long first, long count, size_t size)
{
	char name[32];
	double t0 = bench_now_s();

	for (long i = first; i < first + count; i++) {
		key_name(name, sizeof(name), i);
		make_value(i, 0, size);
		if (write_one(name, O_WRONLY | O_CREAT | O_TRUNC, size))
			return 1;
	}
	report("create", count, bench_now_s() - t0);
	return 0;
}

static int cmd_overwrite(long keys, long ops, size_t size)
{
	char name[32];
	double t0 = bench_now_s();

	for (long op = 0; op < ops; op++) {
		key_name(name, sizeof(name), op % keys);
		make_value(op % keys, op / keys + 1, size);
		if (write_one(name, O_WRONLY | O_TRUNC, size))
			return 1;
	}
	report("overwrite", ops, bench_now_s() - t0);
	return 0;
}

static int cmd_read(long first, long count, long size, long passes)
{
	char name[32];
	double t0 = bench_now_s();

	for (long k = 0; k < count * passes; k++) {
		long i = first + k % count;
		ssize_t r;
		long total = 0;
		int fd;

		key_name(name, sizeof(name), i);
		fd = open(name, O_RDONLY);
		if (fd < 0)
			return fail("open", name);
		while ((r = read(fd, g_buf, sizeof(g_buf))) > 0)
			total += r;
		if (r < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return fail("read", name);
		}
		if (close(fd) < 0)
			return fail("close", name);
		if (size >= 0 && total != size) {
			fprintf(stderr, "fsops: read %s: %ld bytes, expected %ld\n", name, total, size);
			return 1;
		}
	}
	report("read", count * passes, bench_now_s() - t0);
	return 0;
}

static int cmd_stat(long first, long count)
{
	char name[32];
	struct stat st;
	double t0 = bench_now_s();

	for (long i = first; i < first + count; i++) {
		key_name(name, sizeof(name), i);
		if (lstat(name, &st) < 0)
			return fail("lstat", name);
	}
	report("stat", count, bench_now_s() - t0);
	return 0;
}

static int cmd_unlink(long first, long count)
{
	char name[32];
	double t0 = bench_now_s();

	for (long i = first; i < first + count; i++) {
		key_name(name, sizeof(name), i);
		if (unlink(name) < 0)
			return fail("unlink", name);
	}
	report("unlink", count, bench_now_s() - t0);
	return 0;
}

static int cmd_lines(long first, long count, size_t size)
{
	static char out[1 << 16];
	size_t used = 0;

	for (long i = first; i < first + count; i++) {
		int n;

		/* SIZE value bytes, then make_value's final '\n' ends the line */
		make_value(i, 0, size + 1);
		if (sizeof(out) - used < size + 32) {
			if (fwrite(out, 1, used, stdout) != used)
				return fail("write", "stdout");
			used = 0;
		}
		n = snprintf(out + used, sizeof(out) - used, "key-%07ld\t", i);
		used += (size_t)n;
		memcpy(out + used, g_value, size + 1);
		used += size + 1;
	}
	if (fwrite(out, 1, used, stdout) != used || fflush(stdout) != 0)
		return fail("write", "stdout");
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: fsops create    DIR FIRST COUNT SIZE\n"
	        "       fsops overwrite DIR KEYS OPS SIZE\n"
	        "       fsops read      DIR FIRST COUNT SIZE [PASSES]   (SIZE -1: any)\n"
	        "       fsops stat      DIR FIRST COUNT\n"
	        "       fsops unlink    DIR FIRST COUNT\n"
	        "       fsops lines     FIRST COUNT SIZE       (to stdout)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2)
		usage();
	cmd = argv[1];
	if (!strcmp(cmd, "lines")) {
		long size;

		if (argc != 5)
			usage();
		size = parse_long(argv[4], 0, "SIZE");
		if (size >= MAX_VALUE)
			usage();
		return cmd_lines(parse_long(argv[2], 0, "FIRST"), parse_long(argv[3], 0, "COUNT"),
		                 (size_t)size);
	}
	if (argc < 5)
		usage();
	if (chdir(argv[2]) < 0)
		return fail("chdir", argv[2]);
	if (!strcmp(cmd, "create") && argc == 6) {
		long size = parse_long(argv[5], 0, "SIZE");
		if (size > MAX_VALUE)
			usage();
		return cmd_create(parse_long(argv[3], 0, "FIRST"), parse_long(argv[4], 0, "COUNT"),
		                  (size_t)size);
	}
	if (!strcmp(cmd, "overwrite") && argc == 6) {
		long size = parse_long(argv[5], 0, "SIZE");
		if (size > MAX_VALUE)
			usage();
		return cmd_overwrite(parse_long(argv[3], 1, "KEYS"), parse_long(argv[4], 0, "OPS"),
		                     (size_t)size);
	}
	if (!strcmp(cmd, "read") && (argc == 6 || argc == 7))
		return cmd_read(parse_long(argv[3], 0, "FIRST"), parse_long(argv[4], 0, "COUNT"),
		                parse_long(argv[5], -1, "SIZE"),
		                argc == 7 ? parse_long(argv[6], 1, "PASSES") : 1);
	if (!strcmp(cmd, "stat") && argc == 5)
		return cmd_stat(parse_long(argv[3], 0, "FIRST"), parse_long(argv[4], 0, "COUNT"));
	if (!strcmp(cmd, "unlink") && argc == 5)
		return cmd_unlink(parse_long(argv[3], 0, "FIRST"), parse_long(argv[4], 0, "COUNT"));
	usage();
	return 2;
}
