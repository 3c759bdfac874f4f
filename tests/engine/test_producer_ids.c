/* test_producer_ids.c - producer ids never repeat: across reopen, over a corrupt
 * file (refused), and with a crash at every step of reserving a block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/producer/producer_ids.h"
#include "io/io.h"
#include "io/log.h"
#include "tests/t_util.h"

struct fx {
	struct tfs_io *io;
	char *dir;
	int dirfd;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tfs_log_set_level(TFS_LOG_ERROR);
	f->io = t_io();
	f->dir = t_mkdtemp("pids");
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_true(f->dirfd >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->dirfd);
	tfs_io_destroy(f->io);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static int64_t next_id(struct tfs_pids *p)
{
	int64_t id = -1;
	int16_t epoch = -1;
	assert_int_equal(tfs_pids_next(p, &id, &epoch), 0);
	assert_int_equal(epoch, 0);
	return id;
}

static void ids_increase_and_never_repeat_after_reopen(void **state)
{
	struct fx *f = *state;
	struct tfs_pids *p;
	int64_t last = -1, id;

	assert_int_equal(tfs_pids_open(f->io, f->dirfd, &p), 0);
	for (int i = 0; i < TFS_PIDS_BLOCK + 5; i++) {
		id = next_id(p);
		assert_true(id > last);
		last = id;
	}
	tfs_pids_close(p);
	assert_int_equal(tfs_pids_open(f->io, f->dirfd, &p), 0);
	assert_true(next_id(p) > last);
	tfs_pids_close(p);
}

static void a_corrupt_file_is_refused(void **state)
{
	struct fx *f = *state;
	struct tfs_pids *p;
	int fd = openat(f->dirfd, TFS_PIDS_FILE, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "12x\n", 4), 4);
	close(fd);
	assert_int_equal(tfs_pids_open(f->io, f->dirfd, &p), TFS_ECORRUPT);
	assert_null(p);
}

#define CRASH_IDS (3 * TFS_PIDS_BLOCK)

static int crash_workload(void *arg, const char *fault_spec, int fd)
{
	struct fx *f = arg;
	struct tfs_pids *p;
	int16_t epoch;

	if (tfs_pids_open(f->io, f->dirfd, &p) != 0)
		return 3;
	tfs_io_set_fault(f->io, fault_spec);
	for (int i = 0; i < CRASH_IDS; i++) {
		int64_t id;
		if (tfs_pids_next(p, &id, &epoch) != 0)
			return 4;
		if (write(fd, &id, sizeof(id)) != sizeof(id))
			return 5;
	}
	tfs_pids_close(p);
	return 0;
}

static void a_crash_never_makes_an_id_repeat(void **state)
{
	struct fx *f = *state;
	static int64_t got[CRASH_IDS];
	int n;
	bool finished = false;

	for (n = 1; n < 100 && !finished; n++) {
		struct tfs_pids *p;
		int64_t max = -1;
		size_t k = t_crash_run(crash_workload, f, n, got, sizeof(got[0]), CRASH_IDS, &finished);
		for (size_t i = 0; i < k; i++)
			if (got[i] > max)
				max = got[i];
		assert_int_equal(tfs_pids_open(f->io, f->dirfd, &p), 0);
		assert_true(next_id(p) > max);
		tfs_pids_close(p);
	}
	assert_true(finished && n > 3);
	print_message("crash points tried: %d\n", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ids_increase_and_never_repeat_after_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(a_corrupt_file_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(a_crash_never_makes_an_id_repeat, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
