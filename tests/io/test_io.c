/* test_io.c - the I/O layer on the backend named by $TFS_IO. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/file_util.h"
#include "io/io.h"
#include "tests/t_util.h"

struct fixture {
	struct tfs_io *io;
	char *dir;
	int dirfd;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	f->io = t_io();
	f->dir = t_mkdtemp("io");
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->dirfd);
	t_rmtree(f->dir);
	free(f->dir);
	tfs_io_destroy(f->io);
	free(f);
	return 0;
}

static void write_then_read_returns_the_same_bytes(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[100000], back[100000];
	uint64_t seed = 1;
	int fd = tfs_io_openat(f->io, f->dirfd, "a", O_RDWR | O_CREAT, 0644);

	assert_true(fd >= 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)t_rand(&seed);
	assert_int_equal(tfs_io_write(f->io, fd, buf, 5000, 0), 0);
	{
		struct iovec iov[2] = { { buf + 5000, 40000 }, { buf + 45000, sizeof(buf) - 45000 } };
		assert_int_equal(tfs_io_writev(f->io, fd, iov, 2, 5000, true), 0);
	}
	assert_int_equal(tfs_io_read(f->io, fd, back, sizeof(back), 0), (ssize_t)sizeof(back));
	assert_memory_equal(buf, back, sizeof(buf));
	/* a read past the end is short, not an error */
	assert_int_equal(tfs_io_read(f->io, fd, back, 100, sizeof(buf) - 10), 10);
	assert_int_equal(tfs_io_fsync(f->io, fd, false), 0);
	close(fd);
}

/* tmpfs refuses RWF_NOWAIT reads (EOPNOTSUPP): the uring backend must read such
 * files another way, whole, from any offset. */
static void reads_from_tmpfs_are_whole(void **state)
{
	struct fixture *f = *state;
	char path[] = "/dev/shm/tfs-io-XXXXXX";
	uint8_t buf[20000], back[20000];
	uint64_t seed = 7;
	int fd = mkstemp(path);

	if (fd < 0)
		skip();   /* no /dev/shm here */
	unlink(path);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)t_rand(&seed);
	assert_int_equal(tfs_io_write(f->io, fd, buf, sizeof(buf), 0), 0);
	assert_int_equal(tfs_io_read(f->io, fd, back, sizeof(back), 0), (ssize_t)sizeof(back));
	assert_memory_equal(buf, back, sizeof(buf));
	assert_int_equal(tfs_io_read(f->io, fd, back, 1000, 12345), 1000);
	assert_memory_equal(buf + 12345, back, 1000);
	assert_int_equal(tfs_io_read(f->io, fd, back, 100, sizeof(buf) - 10), 10);
	assert_int_equal(tfs_io_read(f->io, fd, back, 100, sizeof(buf)), 0);
	close(fd);
}

static void read_of_a_bad_fd_is_ebadf(void **state)
{
	struct fixture *f = *state;
	char b[4];
	assert_int_equal(tfs_io_read(f->io, 12345, b, 4, 0), -EBADF);
	assert_int_equal(tfs_io_write(f->io, 12345, b, 4, 0), -EBADF);
}

static void fault_spec_fails_the_nth_write_and_later_ones(void **state)
{
	struct fixture *f = *state;
	int fd = tfs_io_openat(f->io, f->dirfd, "b", O_RDWR | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(tfs_io_set_fault(f->io, "write:3:ENOSPC"), 0);
	assert_int_equal(tfs_io_write(f->io, fd, "x", 1, 0), 0);
	assert_int_equal(tfs_io_write(f->io, fd, "y", 1, 1), 0);
	assert_int_equal(tfs_io_write(f->io, fd, "z", 1, 2), -ENOSPC);
	assert_int_equal(tfs_io_write(f->io, fd, "z", 1, 2), -ENOSPC);
	assert_int_equal(tfs_io_fsync(f->io, fd, true), 0);   /* fsync is not in the mask */
	assert_int_equal(tfs_io_set_fault(f->io, NULL), 0);
	assert_int_equal(tfs_io_write(f->io, fd, "z", 1, 2), 0);
	close(fd);
}

static void malformed_fault_specs_are_einval(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(tfs_io_set_fault(f->io, "write"), -EINVAL);
	assert_int_equal(tfs_io_set_fault(f->io, "write:0:crash"), -EINVAL);
	assert_int_equal(tfs_io_set_fault(f->io, "bogus:1:crash"), -EINVAL);
	assert_int_equal(tfs_io_set_fault(f->io, "write:1:EWHAT"), -EINVAL);
	assert_int_equal(tfs_io_set_fault(f->io, "write+rename:2x:crash"), -EINVAL);
	assert_int_equal(tfs_io_set_fault(f->io, "write+rename:2:crash"), 0);
	assert_int_equal(tfs_io_set_fault(f->io, ""), 0);
}

static void crash_fault_exits_before_the_operation(void **state)
{
	struct fixture *f = *state;
	pid_t pid = fork();
	int status;
	char path[4096];

	if (pid == 0) {
		int fd = tfs_io_openat(f->io, f->dirfd, "c", O_RDWR | O_CREAT, 0644);
		tfs_io_set_fault(f->io, "write:2:crash");
		tfs_io_write(f->io, fd, "first", 5, 0);
		tfs_io_write(f->io, fd, "second", 6, 5);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), TFS_IO_CRASH_STATUS);
	snprintf(path, sizeof(path), "%s/c", f->dir);
	assert_int_equal(t_file_size(path), 5);
}

static void torn_fault_writes_half(void **state)
{
	struct fixture *f = *state;
	pid_t pid = fork();
	int status;
	char path[4096];

	if (pid == 0) {
		int fd = tfs_io_openat(f->io, f->dirfd, "d", O_RDWR | O_CREAT, 0644);
		tfs_io_set_fault(f->io, "write:1:torn");
		tfs_io_write(f->io, fd, "0123456789", 10, 0);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), TFS_IO_CRASH_STATUS);
	snprintf(path, sizeof(path), "%s/d", f->dir);
	assert_int_equal(t_file_size(path), 5);
}

static void replace_is_whole_and_leaves_no_temp(void **state)
{
	struct fixture *f = *state;
	char *data = NULL;
	size_t len = 0;
	char path[4096];

	assert_int_equal(tfs_file_replace(f->io, f->dirfd, "cfg", "one\n", 4), 0);
	assert_int_equal(tfs_file_replace(f->io, f->dirfd, "cfg", "two!!\n", 6), 0);
	assert_int_equal(tfs_file_read_all(f->io, f->dirfd, "cfg", 100, &data, &len), 0);
	assert_int_equal(len, 6);
	assert_string_equal(data, "two!!\n");
	free(data);
	snprintf(path, sizeof(path), "%s/cfg.tmp", f->dir);
	assert_int_equal(t_file_size(path), -1);
	assert_int_equal(tfs_file_read_all(f->io, f->dirfd, "cfg", 3, &data, &len), -EFBIG);
	assert_int_equal(tfs_file_read_all(f->io, f->dirfd, "none", 3, &data, &len), -ENOENT);
}

static void replace_that_fails_keeps_the_old_file(void **state)
{
	struct fixture *f = *state;
	char *data = NULL;
	size_t len = 0;

	assert_int_equal(tfs_file_replace(f->io, f->dirfd, "keep", "old", 3), 0);
	assert_int_equal(tfs_io_set_fault(f->io, "rename:1:EIO"), 0);
	assert_int_equal(tfs_file_replace(f->io, f->dirfd, "keep", "new", 3), -EIO);
	tfs_io_set_fault(f->io, NULL);
	assert_int_equal(tfs_file_read_all(f->io, f->dirfd, "keep", 100, &data, &len), 0);
	assert_string_equal(data, "old");
	free(data);
}

static void fdcache_never_holds_more_than_its_limit(void **state)
{
	struct fixture *f = *state;
	enum { FILES = 64, LIMIT = 8 };
	struct tfs_fdslot slots[FILES];
	struct tfs_fdcache *c = tfs_fdcache_create(f->io, LIMIT);
	char path[4096];

	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", f->dir, i);
		assert_int_equal(t_write_file(path, &i, sizeof(i)), 0);
		assert_int_equal(tfs_fdcache_slot_init(&slots[i], path, O_RDONLY), 0);
	}
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < FILES; i++) {
			int fd = tfs_fdcache_get(c, &slots[i]), v = -1;
			assert_true(fd >= 0);
			assert_int_equal(tfs_io_read(f->io, fd, &v, sizeof(v), 0), sizeof(v));
			assert_int_equal(v, i);
			tfs_fdcache_put(c, &slots[i]);
			assert_true(tfs_fdcache_open_count(c) <= LIMIT);
		}
	}
	/* a renamed file reopens by its new path */
	{
		char to[4096];
		snprintf(path, sizeof(path), "%s/f0", f->dir);
		snprintf(to, sizeof(to), "%s/f0.deleted", f->dir);
		assert_int_equal(rename(path, to), 0);
		assert_int_equal(tfs_fdcache_slot_set_path(c, &slots[0], to), 0);
		for (int i = 1; i < FILES; i++) {   /* push f0 out of the cache */
			assert_true(tfs_fdcache_get(c, &slots[i]) >= 0);
			tfs_fdcache_put(c, &slots[i]);
		}
		assert_true(tfs_fdcache_get(c, &slots[0]) >= 0);
		tfs_fdcache_put(c, &slots[0]);
	}
	for (int i = 0; i < FILES; i++)
		tfs_fdcache_slot_release(c, &slots[i]);
	assert_int_equal(tfs_fdcache_open_count(c), 0);
	tfs_fdcache_destroy(c);
}

/* The process's descriptor limit may be reached below the cache's bound (other
 * descriptors, a bound set too high): the cache then closes its own idle fds to
 * make room, and only a limit it cannot make room under reads EMFILE. */
static void fdcache_gives_back_idle_fds_at_the_process_limit(void **state)
{
	struct fixture *f = *state;
	enum { FILES = 96, CAP = 4096 };
	struct tfs_fdslot slots[FILES];
	struct tfs_fdcache *c = tfs_fdcache_create(f->io, 100000);
	int *fds = calloc(CAP, sizeof(*fds)), n, fd;
	long was = t_set_fd_limit(256);
	char path[4096];

	assert_non_null(fds);
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", f->dir, i);
		assert_int_equal(t_write_file(path, &i, sizeof(i)), 0);
		assert_int_equal(tfs_fdcache_slot_init(&slots[i], path, O_RDONLY), 0);
	}
	/* a few descriptors to spare: every file still opens, one after another */
	n = t_fds_exhaust(4, fds, CAP);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < FILES; i++) {
			int v = -1;
			fd = tfs_fdcache_get(c, &slots[i]);
			if (fd < 0)
				fail_msg("file %d of round %d: %s", i, round, strerror(-fd));
			assert_int_equal(tfs_io_read(f->io, fd, &v, sizeof(v), 0), sizeof(v));
			assert_int_equal(v, i);
			tfs_fdcache_put(c, &slots[i]);
		}
	}
	/* every cached fd pinned and none to spare: the limit, as EMFILE */
	for (int i = 0; i < FILES; i++)
		(void)tfs_fdcache_get(c, &slots[i]);
	for (int i = 0; i < FILES; i++) {
		if (slots[i].fd < 0) {
			assert_int_equal(tfs_fdcache_get(c, &slots[i]), -EMFILE);
			break;
		}
	}
	for (int i = 0; i < FILES; i++)
		if (slots[i].fd >= 0)
			tfs_fdcache_put(c, &slots[i]);
	t_fds_release(fds, n);
	for (int i = 0; i < FILES; i++)
		tfs_fdcache_slot_release(c, &slots[i]);
	tfs_fdcache_destroy(c);
	free(fds);
	t_set_fd_limit(was);
}

struct thread_arg {
	struct tfs_io *io;
	int fd;
	int id;
};

static void *writer_thread(void *p)
{
	struct thread_arg *a = p;
	uint8_t block[512];
	for (int i = 0; i < 200; i++) {
		memset(block, a->id * 16 + (i % 16), sizeof(block));
		if (tfs_io_write(a->io, a->fd, block, sizeof(block),
		                 ((uint64_t)a->id * 200 + (uint64_t)i) * sizeof(block)) != 0)
			return (void *)1;
	}
	return NULL;
}

static void threads_each_get_their_own_ring(void **state)
{
	struct fixture *f = *state;
	enum { THREADS = 4 };
	pthread_t th[THREADS];
	struct thread_arg args[THREADS];
	int fd = tfs_io_openat(f->io, f->dirfd, "mt", O_RDWR | O_CREAT, 0644);
	uint8_t block[512];

	for (int t = 0; t < THREADS; t++) {
		args[t] = (struct thread_arg){ f->io, fd, t };
		pthread_create(&th[t], NULL, writer_thread, &args[t]);
	}
	for (int t = 0; t < THREADS; t++) {
		void *r;
		pthread_join(th[t], &r);
		assert_null(r);
	}
	for (int t = 0; t < THREADS; t++) {
		for (int i = 0; i < 200; i++) {
			assert_int_equal(tfs_io_read(f->io, fd, block, sizeof(block),
			                             ((uint64_t)t * 200 + (uint64_t)i) * sizeof(block)),
			                 sizeof(block));
			assert_int_equal(block[0], t * 16 + (i % 16));
			assert_int_equal(block[511], t * 16 + (i % 16));
		}
	}
	close(fd);
}

/* Creates n empty files "<prefix><i>" in the fixture's directory. */
static void make_files(struct fixture *f, const char *prefix, int n)
{
	char path[4096];

	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s%d", f->dir, prefix, i);
		t_write_file(path, "x", 1);
	}
}

static int count_files(struct fixture *f, const char *prefix, int n)
{
	char path[4096];
	int left = 0;

	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s%d", f->dir, prefix, i);
		left += access(path, F_OK) == 0;
	}
	return left;
}

static void queue_files(struct fixture *f, const char *prefix, int n)
{
	char path[4096];

	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s%d", f->dir, prefix, i);
		tfs_io_unlink_later(f->io, path);
	}
}

/* Deferred unlinks all happen, each through the fault gate, and a path that is
 * already gone is no error. */
static void unlinks_later_are_done_by_the_drain(void **state)
{
	struct fixture *f = *state;
	char gone[4096];
	uint64_t ops = tfs_io_op_count(f->io);

	make_files(f, "later", 50);
	queue_files(f, "later", 50);
	snprintf(gone, sizeof(gone), "%s/never-there", f->dir);
	tfs_io_unlink_later(f->io, gone);
	tfs_io_unlink_drain(f->io);
	assert_int_equal(count_files(f, "later", 50), 0);
	assert_int_equal(tfs_io_op_count(f->io), ops + 51);
	tfs_io_unlink_drain(f->io);                 /* nothing queued: returns */
}

/* Destroying the context waits for what is queued. */
static void destroy_finishes_the_queued_unlinks(void **state)
{
	struct fixture *f = *state;

	make_files(f, "destroy", 200);
	queue_files(f, "destroy", 200);
	tfs_io_destroy(f->io);
	assert_int_equal(count_files(f, "destroy", 200), 0);
	f->io = t_io();                             /* for teardown */
}

/* With a fault spec set the unlink happens before the call returns, so a sweep
 * sees one order of operations; the spec applies to it. */
static void unlinks_later_are_inline_under_a_fault_spec(void **state)
{
	struct fixture *f = *state;
	uint64_t ops;

	make_files(f, "inline", 2);
	assert_int_equal(tfs_io_set_fault(f->io, "rename:100:EIO"), 0);
	ops = tfs_io_op_count(f->io);
	queue_files(f, "inline", 1);
	assert_int_equal(tfs_io_op_count(f->io), ops + 1);
	assert_int_equal(count_files(f, "inline", 1), 0);
	assert_int_equal(tfs_io_set_fault(f->io, "unlink:1:EIO"), 0);
	{
		char path[4096];
		snprintf(path, sizeof(path), "%s/inline1", f->dir);
		tfs_io_unlink_later(f->io, path);      /* fails, logged; the file stays */
		assert_int_equal(access(path, F_OK), 0);
	}
	assert_int_equal(tfs_io_set_fault(f->io, NULL), 0);
}

/* The fsync count counts fsyncs of files and directories, and a durable write's,
 * and nothing else. */
static void fsyncs_are_counted_apart(void **state)
{
	struct fixture *f = *state;
	int fd = tfs_io_openat(f->io, f->dirfd, "s", O_RDWR | O_CREAT, 0644);
	uint64_t fs = tfs_io_fsync_count(f->io), ops = tfs_io_op_count(f->io);
	struct iovec iov = { "x", 1 };

	assert_true(fd >= 0);
	assert_int_equal(tfs_io_write(f->io, fd, "a", 1, 0), 0);
	assert_int_equal(tfs_io_fsync_count(f->io), fs);
	assert_int_equal(tfs_io_fsync(f->io, fd, true), 0);
	assert_int_equal(tfs_io_fsync_dir(f->io, f->dirfd), 0);
	assert_int_equal(tfs_io_writev(f->io, fd, &iov, 1, 1, true), 0);
	assert_int_equal(tfs_io_fsync_count(f->io), fs + 3);
	assert_int_equal(tfs_io_op_count(f->io), ops + 5);
	close(fd);
}

/* More files than one ring submission holds, one of them no descriptor:
 * every fsync is done and counted, each result is its own, and the call
 * returns the first failure. */
static void fsync_all_does_each_file_and_reports_each_result(void **state)
{
	struct fixture *f = *state;
	enum { FILES = 11, BAD = 5 };
	struct tfs_io_fsync_req req[FILES];
	uint64_t fs = tfs_io_fsync_count(f->io);

	for (int i = 0; i < FILES; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		req[i] = (struct tfs_io_fsync_req){ .result = 7, .datasync = i % 2 };
		req[i].fd = tfs_io_openat(f->io, f->dirfd, name, O_RDWR | O_CREAT, 0644);
		assert_true(req[i].fd >= 0);
		assert_int_equal(tfs_io_write(f->io, req[i].fd, name, strlen(name), 0), 0);
	}
	close(req[BAD].fd);
	req[BAD].fd = -1;
	assert_int_equal(tfs_io_fsync_all(f->io, req, FILES), -EBADF);
	for (int i = 0; i < FILES; i++)
		assert_int_equal(req[i].result, i == BAD ? -EBADF : 0);
	assert_int_equal(tfs_io_fsync_count(f->io), fs + FILES);
	for (int i = 0; i < FILES; i++)
		if (i != BAD)
			close(req[i].fd);
	assert_int_equal(tfs_io_fsync_all(f->io, req, 0), 0);   /* nothing to do */
}

/* The fault gate counts each fsync of the batch as one operation, in order: an
 * errno spec fails the n-th and the ones after it, the earlier ones are done. */
static void fsync_all_under_a_fault_spec_fails_from_the_nth_on(void **state)
{
	struct fixture *f = *state;
	struct tfs_io_fsync_req req[4];

	for (int i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g%d", i);
		req[i] = (struct tfs_io_fsync_req){ .datasync = true };
		req[i].fd = tfs_io_openat(f->io, f->dirfd, name, O_RDWR | O_CREAT, 0644);
		assert_true(req[i].fd >= 0);
	}
	assert_int_equal(tfs_io_set_fault(f->io, "fsync:2:EIO"), 0);
	assert_int_equal(tfs_io_fsync_all(f->io, req, 4), -EIO);
	assert_int_equal(req[0].result, 0);
	for (int i = 1; i < 4; i++)
		assert_int_equal(req[i].result, -EIO);
	tfs_io_set_fault(f->io, NULL);
	for (int i = 0; i < 4; i++)
		close(req[i].fd);
}

/* A crash spec ends the process at the batch's n-th fsync, like any other op. */
static void fsync_all_crashes_at_the_nth(void **state)
{
	struct fixture *f = *state;
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct tfs_io_fsync_req req[3];
		for (int i = 0; i < 3; i++)
			req[i] = (struct tfs_io_fsync_req){ .fd = f->dirfd };
		tfs_io_set_fault(f->io, "fsync:3:crash");
		tfs_io_fsync_all(f->io, req, 3);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), TFS_IO_CRASH_STATUS);
}

/* A staged file has only its temporary name until committed; unstaged, nothing
 * is left; committed, it replaces the old file whole. */
static void staged_file_appears_only_at_its_commit(void **state)
{
	struct fixture *f = *state;
	char path[4096], *got = NULL;
	size_t len = 0;
	int fd;

	assert_int_equal(tfs_file_replace(f->io, f->dirfd, "s", "old", 3), 0);
	fd = tfs_file_stage(f->io, f->dirfd, "s", "newer", 5);
	assert_true(fd >= 0);
	assert_int_equal(tfs_file_read_all(f->io, f->dirfd, "s", 100, &got, &len), 0);
	assert_int_equal(len, 3);
	free(got);
	assert_int_equal(tfs_io_fsync(f->io, fd, false), 0);
	close(fd);
	tfs_file_unstage(f->dirfd, "s");
	snprintf(path, sizeof(path), "%s/s.tmp", f->dir);
	assert_int_equal(access(path, F_OK), -1);
	fd = tfs_file_stage(f->io, f->dirfd, "s", "newer", 5);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tfs_file_commit(f->io, f->dirfd, "s"), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(tfs_file_read_all(f->io, f->dirfd, "s", 100, &got, &len), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(got, "newer", 5);
	free(got);
}

/* dir/a/{f0,f1,sub/{f2}} and a link to outside, as a tree to remove. */
static void make_tree(struct fixture *f, const char *outside)
{
	char p[4200];

	assert_int_equal(mkdirat(f->dirfd, "a", 0755), 0);
	assert_int_equal(mkdirat(f->dirfd, "a/sub", 0755), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/a/%sf%d", f->dir, i == 2 ? "sub/" : "", i);
		assert_int_equal(t_write_file(p, "x", 1), 0);
	}
	assert_int_equal(symlinkat(outside, f->dirfd, "a/link"), 0);
}

/* A tree goes one unlink at a time through io (so sweeps see every step), a link
 * in it is removed, not followed, and a failing unlink leaves the rest for a
 * second call, which finishes. */
static void a_tree_is_removed_through_io_one_unlink_at_a_time(void **state)
{
	struct fixture *f = *state;
	char outside[4200];
	uint64_t ops;

	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	assert_int_equal(mkdir(outside, 0755), 0);
	snprintf(outside + strlen(outside), sizeof(outside) - strlen(outside), "/keep");
	assert_int_equal(t_write_file(outside, "k", 1), 0);
	*strrchr(outside, '/') = '\0';
	make_tree(f, outside);

	assert_int_equal(tfs_io_set_fault(f->io, "unlink:3:EIO"), 0);
	assert_int_equal(tfs_dir_remove_tree(f->io, f->dirfd, "a"), -EIO);
	assert_int_equal(faccessat(f->dirfd, "a", F_OK, 0), 0);
	assert_int_equal(tfs_io_set_fault(f->io, NULL), 0);
	ops = tfs_io_op_count(f->io);
	assert_int_equal(tfs_dir_remove_tree(f->io, f->dirfd, "a"), 0);
	assert_true(tfs_io_op_count(f->io) > ops);
	assert_int_equal(faccessat(f->dirfd, "a", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(faccessat(f->dirfd, "outside/keep", F_OK, 0), 0);

	/* each entry is one operation: 4 names and 2 directories */
	make_tree(f, outside);
	ops = tfs_io_op_count(f->io);
	assert_int_equal(tfs_dir_remove_tree(f->io, f->dirfd, "a"), 0);
	assert_int_equal(tfs_io_op_count(f->io) - ops, 6);
	assert_int_equal(tfs_dir_remove_tree(f->io, f->dirfd, "a"), -ENOENT);
	assert_int_equal(tfs_dir_remove_tree(f->io, f->dirfd, "outside/keep"), -ENOTDIR);
}

/* A child forked after the thread started has no such thread: its deferred
 * unlinks run inline instead of waiting in a queue nobody serves. */
static void a_forked_child_unlinks_inline(void **state)
{
	struct fixture *f = *state;
	pid_t pid;
	int status;

	make_files(f, "parent", 1);
	queue_files(f, "parent", 1);                /* starts the thread here */
	tfs_io_unlink_drain(f->io);
	make_files(f, "child", 3);
	pid = fork();
	if (pid == 0) {
		queue_files(f, "child", 3);
		_exit(count_files(f, "child", 3));   /* no drain: nothing may be queued */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(count_files(f, "child", 3), 0);
}

static void backend_kinds_parse_and_report(void **state)
{
	struct fixture *f = *state;
	enum tfs_io_kind k;
	assert_int_equal(tfs_io_kind_parse("sync", &k), 0);
	assert_int_equal(k, TFS_IO_SYNC);
	assert_int_equal(tfs_io_kind_parse("uring", &k), 0);
	assert_int_equal(k, TFS_IO_URING);
	assert_int_equal(tfs_io_kind_parse("nope", &k), -EINVAL);
	assert_true(tfs_io_kind_of(f->io) == TFS_IO_URING || tfs_io_kind_of(f->io) == TFS_IO_SYNC);
	if (tfs_io_kind_from_env() != TFS_IO_AUTO && tfs_io_kind_from_env() == TFS_IO_SYNC)
		assert_int_equal(tfs_io_kind_of(f->io), TFS_IO_SYNC);
	print_message("backend: %s\n", tfs_io_kind_name(tfs_io_kind_of(f->io)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(write_then_read_returns_the_same_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(reads_from_tmpfs_are_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(read_of_a_bad_fd_is_ebadf, setup, teardown),
		cmocka_unit_test_setup_teardown(fault_spec_fails_the_nth_write_and_later_ones, setup, teardown),
		cmocka_unit_test_setup_teardown(malformed_fault_specs_are_einval, setup, teardown),
		cmocka_unit_test_setup_teardown(crash_fault_exits_before_the_operation, setup, teardown),
		cmocka_unit_test_setup_teardown(torn_fault_writes_half, setup, teardown),
		cmocka_unit_test_setup_teardown(replace_is_whole_and_leaves_no_temp, setup, teardown),
		cmocka_unit_test_setup_teardown(replace_that_fails_keeps_the_old_file, setup, teardown),
		cmocka_unit_test_setup_teardown(fdcache_never_holds_more_than_its_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(fdcache_gives_back_idle_fds_at_the_process_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(threads_each_get_their_own_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(unlinks_later_are_done_by_the_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(destroy_finishes_the_queued_unlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(unlinks_later_are_inline_under_a_fault_spec, setup, teardown),
		cmocka_unit_test_setup_teardown(a_tree_is_removed_through_io_one_unlink_at_a_time, setup, teardown),
		cmocka_unit_test_setup_teardown(fsyncs_are_counted_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(fsync_all_does_each_file_and_reports_each_result, setup, teardown),
		cmocka_unit_test_setup_teardown(fsync_all_under_a_fault_spec_fails_from_the_nth_on, setup, teardown),
		cmocka_unit_test_setup_teardown(fsync_all_crashes_at_the_nth, setup, teardown),
		cmocka_unit_test_setup_teardown(staged_file_appears_only_at_its_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(a_forked_child_unlinks_inline, setup, teardown),
		cmocka_unit_test_setup_teardown(backend_kinds_parse_and_report, setup, teardown),
	};
	return cmocka_run_group_tests_name("io", tests, NULL, NULL);
}
