/* test_plog_pstate.c - producer state through the partition log: a retried
 * batch appended once, refusals that append nothing, and the state kept across
 * a clean close (snapshot), a lost or corrupt snapshot (the scan), rolls, idle
 * expiry and a crash at every step of snapshot writing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/cleaner/cleaner_internal.h"
#include "engine/log/partition_log.h"
#include "engine/producer/producer_state.h"
#include "engine/log/segment.h"
#include "engine/topic_config.h"
#include "io/io.h"
#include "io/log.h"
#include "tests/t_util.h"
#define FX_DIR_PREFIX "pstate"
#include "tests/engine/produce_fixture.h"

/* A client's idempotent batch of n records "pid:seq+i", a malloc'd copy. */
static uint8_t *pbatch(struct tfs_batch_builder *b, int64_t pid, int16_t epoch, int32_t seq,
                       int n, int64_t ts, size_t *len)
{
	struct tfs_batch_params p = { .leader_epoch = -1, .producer_id = pid,
	                              .producer_epoch = epoch, .base_sequence = seq };
	const uint8_t *out;
	uint8_t *copy;

	tfs_batch_builder_reset(b, &p);
	for (int i = 0; i < n; i++) {
		char v[48];
		snprintf(v, sizeof(v), "%" PRId64 ":%d", pid, seq + i);
		struct tfs_record_in in = { .key = tfs_slice_make("k", 1),
		                            .value = tfs_slice_make(v, strlen(v)), .timestamp = ts };
		if (tfs_batch_builder_add(b, &in) != 0)
			return NULL;
	}
	if (tfs_batch_builder_finish(b, -1, &out, len) != 0 || !(copy = malloc(*len)))
		return NULL;
	memcpy(copy, out, *len);
	return copy;
}

/* Appends the batch; returns the result, *first and *count as the log says. */
static int send(struct tfs_plog *pl, struct tfs_batch_builder *b, int64_t pid, int16_t epoch,
                int32_t seq, int n, tfs_offset_t *first, size_t *count)
{
	size_t len;
	uint8_t *copy = pbatch(b, pid, epoch, seq, n, tfs_now_ms(), &len);
	int rc;

	if (!copy)
		return -ENOMEM;
	rc = tfs_plog_append_batch(pl, copy, len, true, first, count, NULL, NULL);
	free(copy);
	return rc;
}

static tfs_offset_t end_of(struct tfs_plog *pl)
{
	struct tfs_plog_stats st;
	tfs_plog_stats(pl, &st);
	return st.log_end_offset;
}

static int count_snapshots(struct fx *f, tfs_offset_t *newest)
{
	DIR *d = opendir(f->path);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	*newest = -1;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l == 29 && !strcmp(de->d_name + 20, ".snapshot")) {
			tfs_offset_t o = strtoll(de->d_name, NULL, 10);
			if (o > *newest)
				*newest = o;
			n++;
		}
	}
	closedir(d);
	return n;
}

static void remove_snapshots(struct fx *f)
{
	DIR *d = opendir(f->path);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		if (strstr(de->d_name, ".snapshot"))
			assert_int_equal(unlinkat(dirfd(d), de->d_name, 0), 0);
	closedir(d);
}

static void a_retried_batch_is_appended_once(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first = -1, again = -1;
	size_t count = 0;

	open_pl(f);
	assert_int_equal(send(f->pl, &f->b, 42, 0, 0, 3, &first, &count), 0);
	assert_int_equal(count, 3);
	assert_int_equal(send(f->pl, &f->b, 42, 0, 3, 2, &first, &count), 0);
	assert_int_equal(first, 3);
	assert_int_equal(end_of(f->pl), 5);
	/* the retry of either */
	assert_int_equal(send(f->pl, &f->b, 42, 0, 0, 3, &again, &count), 0);
	assert_int_equal(again, 0);
	assert_int_equal(count, 0);
	assert_int_equal(send(f->pl, &f->b, 42, 0, 3, 2, &again, &count), 0);
	assert_int_equal(again, 3);
	assert_int_equal(end_of(f->pl), 5);
	/* a gap, an older epoch, a new epoch not at 0: refused, nothing appended */
	assert_int_equal(send(f->pl, &f->b, 42, 0, 7, 1, &again, &count), TFS_ESEQUENCE);
	assert_int_equal(send(f->pl, &f->b, 42, 1, 5, 1, &again, &count), TFS_ESEQUENCE);
	assert_int_equal(send(f->pl, &f->b, 42, 1, 0, 1, &again, &count), 0);
	assert_int_equal(send(f->pl, &f->b, 42, 0, 5, 1, &again, &count), TFS_EFENCED);
	assert_int_equal(end_of(f->pl), 6);
	/* ordinary appends and producer-less batches are untouched */
	assert_int_equal(send(f->pl, &f->b, -1, -1, -1, 2, &again, &count), 0);
	assert_int_equal(send(f->pl, &f->b, -1, -1, -1, 2, &again, &count), 0);
	assert_int_equal(end_of(f->pl), 10);
	assert_int_equal(t_plog_dense(f->pl), 10);
}

/* A clean close writes a snapshot at the log end; reopening dedupes. */
static void the_state_survives_a_clean_close(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first, newest;
	size_t count;

	open_pl(f);
	assert_int_equal(send(f->pl, &f->b, 7, 2, 0, 4, &first, &count), 0);
	assert_int_equal(send(f->pl, &f->b, 8, 0, 100, 1, &first, &count), 0);
	open_pl(f);
	assert_int_equal(count_snapshots(f, &newest), 1);
	assert_int_equal(newest, 5);
	assert_int_equal(send(f->pl, &f->b, 7, 2, 0, 4, &first, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(first, 0);
	assert_int_equal(send(f->pl, &f->b, 8, 0, 102, 1, &first, &count), TFS_ESEQUENCE);
	assert_int_equal(send(f->pl, &f->b, 7, 1, 4, 1, &first, &count), TFS_EFENCED);
	assert_int_equal(end_of(f->pl), 5);
}

/* No snapshot (a crash before any) or a corrupt one: the scan rebuilds it all. */
static void a_lost_or_corrupt_snapshot_means_a_full_scan(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first, newest;
	size_t count;
	char name[4200];
	int fd;

	open_pl(f);
	for (int s = 0; s < 10; s++)
		assert_int_equal(send(f->pl, &f->b, 9, 0, s, 1, &first, &count), 0);
	tfs_plog_close(f->pl);
	f->pl = NULL;
	remove_snapshots(f);
	open_pl(f);
	for (int s = 5; s < 10; s++) {       /* the last five, from the scan */
		assert_int_equal(send(f->pl, &f->b, 9, 0, s, 1, &first, &count), 0);
		assert_int_equal(count, 0);
		assert_int_equal(first, s);
	}
	assert_int_equal(send(f->pl, &f->b, 9, 0, 4, 1, &first, &count), TFS_ESEQUENCE);
	tfs_plog_close(f->pl);
	f->pl = NULL;
	assert_int_equal(count_snapshots(f, &newest), 1);
	snprintf(name, sizeof(name), "%s/%020" PRId64 ".snapshot", f->path, newest);
	fd = open(name, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\xff", 1, 12), 1);
	close(fd);
	open_pl(f);
	assert_int_equal(count_snapshots(f, &newest), 0);   /* removed as corrupt */
	assert_int_equal(send(f->pl, &f->b, 9, 0, 9, 1, &first, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(first, 9);
}

/* Only the log after the snapshot is replayed: a snapshot that knows no
 * producer makes one whose batches all lie before it unknown. */
static void the_scan_starts_at_the_snapshot(void **state)
{
	struct fx *f = *state;
	struct tfs_pstate *empty;
	tfs_offset_t first, newest;
	size_t count, len;
	uint8_t *buf;
	char name[4200];
	int fd;

	open_pl(f);
	assert_int_equal(send(f->pl, &f->b, 11, 0, 0, 2, &first, &count), 0);
	assert_int_equal(send(f->pl, &f->b, 12, 0, 0, 2, &first, &count), 0);
	tfs_plog_close(f->pl);
	f->pl = NULL;
	assert_int_equal(count_snapshots(f, &newest), 1);
	assert_int_equal(tfs_pstate_create(&empty), 0);
	assert_int_equal(tfs_pstate_snapshot_encode(empty, &buf, &len), 0);
	tfs_pstate_destroy(empty);
	remove_snapshots(f);
	snprintf(name, sizeof(name), "%s/%020" PRId64 ".snapshot", f->path, (tfs_offset_t)2);
	fd = open(name, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(buf);
	open_pl(f);
	/* producer 11 (offsets 0-1) is unknown now: any sequence; 12 was replayed */
	assert_int_equal(send(f->pl, &f->b, 11, 0, 50, 1, &first, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(send(f->pl, &f->b, 12, 0, 0, 2, &first, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(first, 2);
}

/* Rolls write a snapshot at each new segment's base; retention's removed
 * segments take theirs along at the next roll. */
static void rolls_write_snapshots_at_segment_bases(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first, newest;
	size_t count;

	f->cfg.segment_bytes = 400;
	open_pl(f);
	for (int s = 0; s < 30; s++)
		assert_int_equal(send(f->pl, &f->b, 5, 0, s * 2, 2, &first, &count), 0);
	assert_true(count_snapshots(f, &newest) >= 3);
	open_pl(f);
	/* as in Kafka, a snapshot keeps each producer's newest batch only: older
	 * ones come back only from the log after it */
	assert_int_equal(send(f->pl, &f->b, 5, 0, 58, 2, &first, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(first, 58);
	assert_int_equal(send(f->pl, &f->b, 5, 0, 56, 2, &first, &count), TFS_ESEQUENCE);
	assert_int_equal(send(f->pl, &f->b, 5, 0, 60, 2, &first, &count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(t_plog_dense(f->pl), 62);
}

/* A group that would overflow the segment rolls before it is written, so the
 * roll's snapshot, named by the new segment's base, holds the records before
 * that base only: a write of the group that failed after the roll must not
 * leave its batch in a snapshot, where a retry would meet it as a duplicate. */
static void a_roll_snapshot_holds_only_the_records_before_it(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first;
	size_t count;
	int checked = 0;
	struct tfs_pstate *ps;
	DIR *d;
	struct dirent *de;

	f->cfg.segment_bytes = 250;
	open_pl(f);
	for (int s = 0; s < 10; s++)
		assert_int_equal(send(f->pl, &f->b, 5, 0, s * 2, 2, &first, &count), 0);
	assert_int_equal(tfs_pstate_create(&ps), 0);
	assert_non_null(d = opendir(f->path));
	while ((de = readdir(d)) != NULL) {
		char name[sizeof(f->path) + sizeof(de->d_name) + 1];
		uint8_t *buf;
		long len;
		const char *why;
		struct tfs_pstate_entry e;
		tfs_offset_t at;

		if (strlen(de->d_name) != 29 || strcmp(de->d_name + 20, ".snapshot"))
			continue;
		at = strtoll(de->d_name, NULL, 10);
		snprintf(name, sizeof(name), "%s/%s", f->path, de->d_name);
		assert_true((len = t_read_file(name, &buf)) > 0);
		assert_int_equal(tfs_pstate_snapshot_decode(ps, buf, (size_t)len, at, 0, 0, &why), 0);
		free(buf);
		assert_int_equal(tfs_pstate_get(ps, 5, &e), 0);
		assert_int_equal(e.batch[e.nbatches - 1].last_offset, at - 1);
		assert_int_equal(e.batch[e.nbatches - 1].last_seq, at - 1);
		checked++;
	}
	closedir(d);
	tfs_pstate_destroy(ps);
	assert_true(checked >= 2);
}

/* Retention deletes segments and their snapshots with them; the producer's
 * state stays (KAFKA-7190) and a retry of its newest batch still dedupes. */
static void retention_takes_the_snapshots_of_deleted_segments(void **state)
{
	struct fx *f = *state;
	struct tfs__retention_result res;
	struct tfs_plog_stats st;
	tfs_offset_t first, newest, oldest = INT64_MAX;
	size_t count;
	DIR *d;
	struct dirent *de;

	f->cfg.segment_bytes = 400;
	open_pl(f);
	for (int s = 0; s < 30; s++)
		assert_int_equal(send(f->pl, &f->b, 5, 0, s * 2, 2, &first, &count), 0);
	f->cfg.cleanup_policy = TFS_POLICY_DELETE;
	f->cfg.retention_bytes = 600;
	assert_int_equal(tfs__retention_apply(f->pl, &f->cfg, tfs_now_ms(), &res), 0);
	assert_true(res.segments > 0);
	tfs_plog_stats(f->pl, &st);
	assert_true(st.log_start_offset > 0);
	assert_true(count_snapshots(f, &newest) >= 1);
	d = opendir(f->path);
	while ((de = readdir(d)) != NULL)
		if (strstr(de->d_name, ".snapshot")) {
			tfs_offset_t o = strtoll(de->d_name, NULL, 10);
			if (o < oldest)
				oldest = o;
		}
	closedir(d);
	assert_true(oldest >= st.log_start_offset);
	assert_int_equal(send(f->pl, &f->b, 5, 0, 58, 2, &first, &count), 0);
	assert_int_equal(count, 0);
	assert_int_equal(first, 58);
}

/* ---- several producers at once ---- */

#define RACE_PRODUCERS 4
#define RACE_BATCHES 60

struct racer {
	struct tfs_plog *pl;
	int64_t pid;
	int wrong;                      /* checks that failed (cmocka asserts stay here) */
};

/* Each batch sent, then resent at once: the resend must be a duplicate at the
 * original's offsets, whatever group either lands in. */
static void *race_producer(void *arg)
{
	struct racer *r = arg;
	struct tfs_batch_builder b;

	tfs_batch_builder_init(&b);
	for (int k = 0; k < RACE_BATCHES; k++) {
		tfs_offset_t first = -1, again = -1;
		size_t count = 0, recount = 9;
		if (send(r->pl, &b, r->pid, 0, k * 2, 2, &first, &count) != 0 || count != 2 ||
		    send(r->pl, &b, r->pid, 0, k * 2, 2, &again, &recount) != 0 || recount != 0 ||
		    again != first)
			r->wrong++;
	}
	tfs_batch_builder_release(&b);
	return NULL;
}

/* Producers appending at once share groups and rolls (whose snapshots take the
 * group's changes back and make them again) while a reader lists the state. */
static void producers_at_once_share_groups_and_rolls(void **state)
{
	struct fx *f = *state;
	struct racer r[RACE_PRODUCERS];
	pthread_t th[RACE_PRODUCERS];
	struct tfs_pstate_entry list[RACE_PRODUCERS];
	struct tfs_plog_stats st;
	tfs_offset_t first;
	size_t count;

	f->cfg.segment_bytes = 1000;
	open_pl(f);
	for (int i = 0; i < RACE_PRODUCERS; i++) {
		r[i] = (struct racer){ .pl = f->pl, .pid = 200 + i };
		assert_int_equal(pthread_create(&th[i], NULL, race_producer, &r[i]), 0);
	}
	for (int k = 0; k < 200; k++)
		assert_true(tfs_plog_producers(f->pl, list, RACE_PRODUCERS) <= RACE_PRODUCERS);
	for (int i = 0; i < RACE_PRODUCERS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(r[i].wrong, 0);
	}
	assert_int_equal(end_of(f->pl), RACE_PRODUCERS * RACE_BATCHES * 2);
	assert_int_equal(t_plog_dense(f->pl), RACE_PRODUCERS * RACE_BATCHES * 2);
	tfs_plog_stats(f->pl, &st);
	assert_true(st.segments >= 3);
	assert_int_equal(tfs_plog_producers(f->pl, list, RACE_PRODUCERS), RACE_PRODUCERS);
	for (int i = 0; i < RACE_PRODUCERS; i++)
		assert_int_equal(list[i].batch[list[i].nbatches - 1].last_seq, RACE_BATCHES * 2 - 1);
	open_pl(f);
	for (int i = 0; i < RACE_PRODUCERS; i++) {
		assert_int_equal(send(f->pl, &f->b, 200 + i, 0, (RACE_BATCHES - 1) * 2, 2, &first,
		                      &count), 0);
		assert_int_equal(count, 0);
		assert_int_equal(send(f->pl, &f->b, 200 + i, 0, RACE_BATCHES * 2 + 1, 1, &first,
		                      &count), TFS_ESEQUENCE);
	}
}

/* producer.id.expiration.ms: a producer idle that long is forgotten at open. */
static void idle_producers_expire(void **state)
{
	struct fx *f = *state;
	tfs_offset_t first;
	size_t count, len;
	uint8_t *copy;

	open_pl(f);
	copy = pbatch(&f->b, 3, 0, 0, 1, tfs_now_ms() - 60000, &len);
	assert_int_equal(tfs_plog_append_batch(f->pl, copy, len, true, &first, &count, NULL, NULL), 0);
	free(copy);
	assert_int_equal(send(f->pl, &f->b, 4, 0, 0, 1, &first, &count), 0);
	f->cfg.producer_id_expiration_ms = 30000;
	open_pl(f);
	assert_int_equal(send(f->pl, &f->b, 3, 0, 9, 1, &first, &count), 0);   /* unknown now */
	assert_int_equal(count, 1);
	assert_int_equal(send(f->pl, &f->b, 4, 0, 9, 1, &first, &count), TFS_ESEQUENCE);
}

/* ---- crashes ---- */

#define CRASH_UNITS 10

struct acked {
	int unit;
	tfs_offset_t first;
};

/* Unit u: producer 100 + u's first batch of 2 records, durable; small segments,
 * so rolls (and their snapshots) fall among them; a clean close at the end. */
static int crash_workload(void *arg, const char *fault_spec, int fd)
{
	struct fx *f = arg;

	open_pl(f);
	tfs_io_set_fault(f->io, fault_spec);
	for (int u = 0; u < CRASH_UNITS; u++) {
		struct acked a = { .unit = u };
		size_t count;
		if (send(f->pl, &f->b, 100 + u, 0, 0, 2, &a.first, &count) != 0)
			return 3;
		if (write(fd, &a, sizeof(a)) != sizeof(a))
			return 4;
	}
	tfs_plog_close(f->pl);
	f->pl = NULL;
	return 0;
}

/* Killed at the n-th mutating operation, then reopened: every acknowledged batch
 * resent is a duplicate at its offsets, the log stays dense. */
static bool crash_at(struct fx *f, int n)
{
	struct acked acked[CRASH_UNITS];
	size_t nacked;
	bool finished;

	t_rmtree(f->path);
	f->cfg.segment_bytes = 250;
	nacked = t_crash_run(crash_workload, f, n, acked, sizeof(acked[0]), CRASH_UNITS, &finished);
	open_pl(f);
	for (size_t i = 0; i < nacked; i++) {
		tfs_offset_t first = -1;
		size_t count = 9;
		assert_int_equal(send(f->pl, &f->b, 100 + acked[i].unit, 0, 0, 2, &first, &count), 0);
		assert_int_equal(count, 0);
		assert_int_equal(first, acked[i].first);
	}
	t_plog_dense(f->pl);
	tfs_plog_close(f->pl);
	f->pl = NULL;
	return finished;
}

static void a_crash_at_every_io_step_keeps_deduplicating(void **state)
{
	sweep_crash_points(*state, crash_at, 2000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(a_retried_batch_is_appended_once, setup, teardown),
		cmocka_unit_test_setup_teardown(the_state_survives_a_clean_close, setup, teardown),
		cmocka_unit_test_setup_teardown(a_lost_or_corrupt_snapshot_means_a_full_scan, setup, teardown),
		cmocka_unit_test_setup_teardown(the_scan_starts_at_the_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(rolls_write_snapshots_at_segment_bases, setup, teardown),
		cmocka_unit_test_setup_teardown(a_roll_snapshot_holds_only_the_records_before_it, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(retention_takes_the_snapshots_of_deleted_segments, setup, teardown),
		cmocka_unit_test_setup_teardown(producers_at_once_share_groups_and_rolls, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_producers_expire, setup, teardown),
		cmocka_unit_test_setup_teardown(a_crash_at_every_io_step_keeps_deduplicating, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
