/* t_util.c - see t_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/log/partition_log.h"
#include "tests/t_util.h"

char *t_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path = NULL;
	if (!base || !*base)
		base = "/tmp";
	assert_true(asprintf(&path, "%s/tfs-%s-XXXXXX", base, tag) > 0);
	assert_non_null(mkdtemp(path));
	return path;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st; (void)type; (void)ftw;
	remove(path);
	return 0;
}

void t_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct tfs_io *t_io(void)
{
	struct tfs_io *io = NULL;
	int rc = tfs_io_create(tfs_io_kind_from_env(), &io);
	if (rc != 0)
		fail_msg("cannot create io backend %s: %s",
		         tfs_io_kind_name(tfs_io_kind_from_env()), strerror(-rc));
	return io;
}

uint64_t t_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

long t_read_file(const char *path, uint8_t **out)
{
	FILE *f = fopen(path, "rb");
	long n;
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*out = malloc(n > 0 ? (size_t)n : 1);
	if (n > 0 && fread(*out, 1, (size_t)n, f) != (size_t)n) {
		free(*out);
		*out = NULL;
		n = -1;
	}
	fclose(f);
	return n;
}

int t_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc = 0;
	if (!f)
		return -1;
	if (len && fwrite(data, 1, len, f) != len)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

long t_file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

size_t t_crash_run(t_crash_child child, void *arg, int n, void *reports, size_t size, size_t max,
                   bool *finished)
{
	int pipefd[2], status;
	size_t got = 0;
	pid_t pid;

	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char spec[64];
		close(pipefd[0]);
		snprintf(spec, sizeof(spec), "all:%d:crash", n);
		_exit(child(arg, spec, pipefd[1]) == 0 ? 0 : 3);
	}
	close(pipefd[1]);
	while (got < max && read(pipefd[0], (char *)reports + got * size, size) == (ssize_t)size)
		got++;
	close(pipefd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_true(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == TFS_IO_CRASH_STATUS);
	*finished = WEXITSTATUS(status) == 0;
	return got;
}

int64_t t_plog_dense(struct tfs_plog *pl)
{
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	int64_t expect = 0;
	int rc;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1)
		assert_int_equal(r.offset, expect++);
	assert_int_equal(rc, 0);
	tfs_plog_cursor_close(c);
	return expect;
}

int t_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;          /* the stream's own */
}

long t_set_fd_limit(long n)
{
	struct rlimit rl;
	long was;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	was = (long)rl.rlim_cur;
	rl.rlim_cur = (rlim_t)n;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	return was;
}

int t_fds_exhaust(int spare, int *fds, int cap)
{
	int n = 0, fd;

	while (n < cap && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fds[n++] = fd;
	assert_true(n < cap);
	assert_true(errno == EMFILE);
	for (; spare > 0 && n > 0; spare--)
		close(fds[--n]);
	return n;
}

void t_fds_release(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* Virtual size of this process, from /proc/self/statm. */
static size_t vm_bytes(void)
{
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%lu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static struct rlimit unlimited_as;
static bool as_limited;

int t_limit_address_space(size_t headroom)
{
	struct rlimit lim;
	size_t now = vm_bytes();

	if (now == 0 || (!as_limited && getrlimit(RLIMIT_AS, &unlimited_as)))
		return -1;
	lim = unlimited_as;
	lim.rlim_cur = (rlim_t)(now + headroom);
	if (lim.rlim_max != RLIM_INFINITY && lim.rlim_cur > lim.rlim_max)
		return -1;                      /* a hard limit already below it */
	if (setrlimit(RLIMIT_AS, &lim))
		return -1;
	as_limited = true;
	return 0;
}

int t_unlimit_address_space(void)
{
	if (!as_limited)
		return 0;
	if (setrlimit(RLIMIT_AS, &unlimited_as))
		return -1;
	as_limited = false;
	return 0;
}

void t_expect_child(int (*child)(uintptr_t), uintptr_t arg, int want)
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child(arg));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == T_SKIP_STATUS)
		skip();
	assert_int_equal(WEXITSTATUS(status), want);
}
