/* produce_fixture.h - what the producer-batch suites share (test_plog_produce.c,
 * test_plog_pstate.c, test_plog_fetch.c): one partition log in a fresh directory, reopened by
 * open_pl, and a batch builder. Include after <cmocka.h>; everything is static. */
#ifndef TFS_PRODUCE_FIXTURE_H
#define TFS_PRODUCE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"
#include "io/log.h"
#include "tests/t_util.h"

struct fx {
	struct tfs_io *io;
	struct tfs_fdcache *fdc;
	struct tfs_topic_config cfg;
	char *dir;
	char path[4096];
	struct tfs_plog *pl;
	struct tfs_batch_builder b;
};

#ifndef FX_DIR_PREFIX
#define FX_DIR_PREFIX "produce"
#endif

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tfs_log_set_level(TFS_LOG_ERROR);
	f->io = t_io();
	f->fdc = tfs_fdcache_create(f->io, 64);
	tfs_topic_config_defaults(&f->cfg);
	f->dir = t_mkdtemp(FX_DIR_PREFIX);
	snprintf(f->path, sizeof(f->path), "%s/t-0", f->dir);
	tfs_batch_builder_init(&f->b);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	tfs_plog_close(f->pl);
	tfs_batch_builder_release(&f->b);
	tfs_fdcache_destroy(f->fdc);
	tfs_io_destroy(f->io);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void open_pl(struct fx *f)
{
	struct tfs_plog_env env = { f->io, f->fdc, &f->cfg, false };
	tfs_plog_close(f->pl);
	f->pl = NULL;
	assert_int_equal(tfs_plog_open(&env, f->path, true, &f->pl), 0);
}

/* A crash sweep: crash_at(f, n) crashes the n-th I/O step of a scenario and
 * checks the recovery, true once the scenario ran to its end without reaching
 * step n. The sweep must take more than 20 steps and end before max. */
static inline void sweep_crash_points(struct fx *f, bool (*crash_at)(struct fx *, int), int max)
{
	int n;

	for (n = 1; n < max; n++)
		if (crash_at(f, n))
			break;
	assert_true(n > 20 && n < max);
	print_message("crash points tried: %d\n", n);
}

#endif
