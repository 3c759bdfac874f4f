/* test_segment.c - segment file names, Kafka's index rule and lookups, index
 * files written and checked, the time index's entries as Kafka writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/log/segment.h"
#include "io/log.h"
#include "tests/t_util.h"

static void names_are_twenty_zero_padded_digits(void **state)
{
	char buf[256];
	tfs_offset_t base;
	const char *suffix;
	(void)state;

	tfs_segment_file_name(buf, sizeof(buf), "/d", 368769, ".log");
	assert_string_equal(buf, "/d/00000000000000368769.log");
	assert_int_equal(tfs_segment_parse_name("00000000000000368769.log", &base, &suffix), 0);
	assert_int_equal(base, 368769);
	assert_string_equal(suffix, ".log");
	assert_int_equal(tfs_segment_parse_name("00000000000000000007.log.swap", &base, &suffix), 0);
	assert_string_equal(suffix, ".log.swap");
	assert_int_equal(tfs_segment_parse_name("0000000000000000007.log", &base, &suffix), -EINVAL);
	assert_int_equal(tfs_segment_parse_name("0000000000000000000x.log", &base, &suffix), -EINVAL);
	assert_int_equal(tfs_segment_parse_name("99999999999999999999.log", &base, &suffix), -EINVAL);
	assert_int_equal(tfs_segment_parse_name("00000000000000000001log", &base, &suffix), -EINVAL);
	assert_int_equal(tfs_segment_parse_name("cleaner-offset-checkpoint", &base, &suffix), -EINVAL);
}

struct fx {
	struct tfs_io *io;
	struct tfs_fdcache *fdc;
	char *dir;
	int dirfd;
	struct tfs_segment *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tfs_log_set_level(TFS_LOG_ERROR);
	f->io = t_io();
	f->fdc = tfs_fdcache_create(f->io, 8);
	f->dir = t_mkdtemp("seg");
	f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(tfs_segment_create(f->io, f->fdc, f->dirfd, f->dir, 100, 4096, true, &f->s), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	tfs_segment_unref(f->s);
	tfs_fdcache_destroy(f->fdc);
	tfs_io_destroy(f->io);
	close(f->dirfd);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void first_batch_is_never_indexed_then_every_4096_bytes(void **state)
{
	struct fx *f = *state;
	tfs_pos_t pos = 0;
	tfs_offset_t off = 100;

	/* 100 batches of 1000 bytes, 10 records each */
	for (int i = 0; i < 100; i++) {
		assert_int_equal(tfs_segment_note_batch(f->s, pos, 1000, off, off + 9, 1000 + i), 0);
		pos += 1000;
		off += 10;
	}
	/* an entry is added before a batch once more than 4096 bytes went by: after
	 * 5 batches (5000 > 4096), i.e. at batches 5, 10, ... */
	assert_int_equal(f->s->index_count, 19);
	assert_int_equal(f->s->index[0].pos, 5000);
	assert_int_equal(f->s->index[0].rel_offset, 59);
	assert_int_equal(f->s->next_offset, 1100);
	/* lookups: the largest entry whose offset <= target, else 0 */
	assert_int_equal(tfs_segment_lookup(f->s, 100), 0);
	assert_int_equal(tfs_segment_lookup(f->s, 158), 0);
	assert_int_equal(tfs_segment_lookup(f->s, 159), 5000);
	assert_int_equal(tfs_segment_lookup(f->s, 208), 5000);
	assert_int_equal(tfs_segment_lookup(f->s, 209), 10000);
	assert_int_equal(tfs_segment_lookup(f->s, 5000), 95000);
	assert_int_equal(tfs_segment_lookup(f->s, 50), 0);
	assert_false(tfs_segment_index_full(f->s, 10485760));
	assert_true(tfs_segment_index_full(f->s, 19 * 8));
}

static void index_files_are_kafkas_layout_and_checked(void **state)
{
	struct fx *f = *state;
	char p[4200];
	uint8_t *data = NULL;
	long n;

	for (int i = 0; i < 12; i++)
		tfs_segment_note_batch(f->s, i * 1000, 1000, 100 + i, 100 + i, 5000 + i);
	assert_int_equal(tfs_segment_indexes_match(f->s), 0);    /* no files yet */
	f->s->sealed = true;
	assert_int_equal(tfs_segment_write_indexes(f->s, f->dirfd, true), 0);
	assert_int_equal(tfs_segment_indexes_match(f->s), 1);
	snprintf(p, sizeof(p), "%s/00000000000000000100.index", f->dir);
	n = t_read_file(p, &data);
	assert_int_equal(n, 2 * 8);
	/* entry 0: relative offset 5 (big-endian), position 5000 */
	assert_int_equal(data[3], 5);
	assert_int_equal((data[6] << 8) | data[7], 5000);
	free(data);
	snprintf(p, sizeof(p), "%s/00000000000000000100.timeindex", f->dir);
	n = t_read_file(p, &data);
	assert_int_equal(n, 3 * 12);      /* two entries plus the final one of a sealed segment */
	free(data);
	t_write_file(p, "junk", 4);
	assert_int_equal(tfs_segment_indexes_match(f->s), 0);
}

static uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Kafka's LogSegment.append on batches of 60 bytes with index.interval.bytes 100:
 * an entry is due before every other batch (more than 100 bytes since the last),
 * and the time index gets the max timestamp so far with this batch counted, but
 * only when it is greater than its last entry's; at the roll one final entry for
 * the segment's max (onBecomeInactiveSegment). Worked by hand:
 *   batch offsets pos  max_ts | max so far  | entry due | .index   .timeindex
 *   0     0..1    0    1000   | 1000 @1     | no        |
 *   1     2..3    60   900    | 1000 @1     | no (60)   |
 *   2     4..5    120  2000   | 2000 @5     | yes (120) | (5,120)  (2000,5)
 *   3     6..7    180  1500   | 2000 @5     | no        |
 *   4     8..9    240  1800   | 2000 @5     | yes       | (9,240)  not greater
 *   5     10..11  300  2500   | 2500 @11    | no        |
 *   roll                                                           (2500,11)
 * (Counting the batch after the entry, as topicfs did, gives (1000,1),(2000,5),
 * (2500,11).) Offsets are relative to the base, 200. */
static void time_index_entries_are_kafkas(void **state)
{
	struct fx *f = *state;
	static const int64_t ts[] = { 1000, 900, 2000, 1500, 1800, 2500 };
	struct tfs_segment *s;
	char p[4200];
	uint8_t *data = NULL;
	long n;

	assert_int_equal(tfs_segment_create(f->io, f->fdc, f->dirfd, f->dir, 200, 100, true, &s), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(tfs_segment_note_batch(s, i * 60, 60, 200 + 2 * i, 201 + 2 * i, ts[i]), 0);
	s->sealed = true;
	assert_int_equal(tfs_segment_timeindex_final(s), 0);
	assert_int_equal(tfs_segment_timeindex_final(s), 0);       /* once only */
	assert_int_equal(tfs_segment_write_indexes(s, f->dirfd, true), 0);

	snprintf(p, sizeof(p), "%s/00000000000000000200.index", f->dir);
	n = t_read_file(p, &data);
	assert_int_equal(n, 2 * 8);
	assert_int_equal(be(data, 4), 5);
	assert_int_equal(be(data + 4, 4), 120);
	assert_int_equal(be(data + 8, 4), 9);
	assert_int_equal(be(data + 12, 4), 240);
	free(data);
	snprintf(p, sizeof(p), "%s/00000000000000000200.timeindex", f->dir);
	n = t_read_file(p, &data);
	assert_int_equal(n, 2 * 12);
	assert_int_equal(be(data, 8), 2000);
	assert_int_equal(be(data + 8, 4), 5);
	assert_int_equal(be(data + 12, 8), 2500);
	assert_int_equal(be(data + 20, 4), 11);
	free(data);
	assert_int_equal(tfs_segment_indexes_match(s), 1);

	/* TimeIndex.lookup: search from past the last entry older than the target */
	assert_int_equal(tfs_segment_time_lookup(s, 0), 200);
	assert_int_equal(tfs_segment_time_lookup(s, 2000), 200);
	assert_int_equal(tfs_segment_time_lookup(s, 2001), 206);
	assert_int_equal(tfs_segment_time_lookup(s, 2500), 206);
	assert_int_equal(tfs_segment_time_lookup(s, 9999), 212);
	tfs_segment_unref(s);
}

/* Kafka rolls when either index is full; the time index's 12-byte entries fill
 * segment.index.bytes first. */
static void a_full_time_index_is_full(void **state)
{
	struct fx *f = *state;

	for (int i = 0; i < 7; i++)
		tfs_segment_note_batch(f->s, i * 4097, 4097, 100 + i, 100 + i, 10 + i);
	assert_int_equal(f->s->index_count, 6);
	assert_int_equal(f->s->tindex_count, 6);
	assert_false(tfs_segment_index_full(f->s, 7 * 12));
	assert_true(tfs_segment_index_full(f->s, 7 * 12 - 1));   /* 7 offset entries would fit */
}

static void deleted_segments_keep_reading_until_the_last_ref(void **state)
{
	struct fx *f = *state;
	char p[4200], buf[8];
	int fd;

	fd = tfs_fdcache_get(f->fdc, &f->s->log);
	assert_int_equal(tfs_io_write(f->io, fd, "abcdefgh", 8, 0), 0);
	tfs_fdcache_put(f->fdc, &f->s->log);
	atomic_store(&f->s->size, 8);
	tfs_segment_ref(f->s);
	assert_int_equal(tfs_segment_mark_deleted(f->s, f->dirfd), 0);
	snprintf(p, sizeof(p), "%s/00000000000000000100.log", f->dir);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(tfs_segment_read(f->s, buf, 8, 0), 8);
	assert_memory_equal(buf, "abcdefgh", 8);
	tfs_segment_unref(f->s);                 /* one ref left: files still there */
	snprintf(p, sizeof(p), "%s/00000000000000000100.log.deleted", f->dir);
	assert_int_equal(access(p, F_OK), 0);
	tfs_segment_unref(f->s);
	f->s = NULL;
	tfs_io_unlink_drain(f->io);              /* unlinked on the io context's thread */
	assert_int_equal(access(p, F_OK), -1);
}

/* Writes len bytes at the end of the (pinned) segment and commits them. */
static void append_bytes(struct fx *f, size_t len)
{
	static uint8_t chunk[1 << 16];
	tfs_pos_t pos = tfs_segment_size(f->s);
	int fd = tfs_segment_fd(f->s);

	memset(chunk, 'x', sizeof(chunk));
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(chunk) ? len - done : sizeof(chunk);
		assert_int_equal(tfs_io_write(f->io, fd, chunk, n, (uint64_t)(pos + (tfs_pos_t)done)), 0);
		done += n;
	}
	atomic_store(&f->s->size, pos + (tfs_pos_t)len);
}

static void flushing_ahead_starts_past_the_threshold_and_is_waited_for(void **state)
{
	struct fx *f = *state;
	uint64_t ops;

	assert_int_equal(tfs_segment_pin(f->s), 0);
	append_bytes(f, 1000);
	ops = tfs_io_op_count(f->io);
	tfs_segment_flush_ahead(f->s, 4096);           /* below the threshold: nothing */
	assert_false(f->s->flush_running);
	assert_int_equal(tfs_segment_flush_wait(f->s), 0);
	assert_int_equal(tfs_io_op_count(f->io), ops);

	append_bytes(f, 5000);
	ops = tfs_io_op_count(f->io);
	tfs_segment_flush_ahead(f->s, 4096);
	assert_true(f->s->flush_running);
	assert_int_equal(f->s->flush_mark, 6000);
	assert_int_equal(tfs_segment_flush_wait(f->s), 0);
	assert_false(f->s->flush_running);
	assert_int_equal(tfs_io_op_count(f->io), ops + 1);   /* the fdatasync */

	/* an fsync in the foreground moves the mark: no flush for bytes it covered */
	append_bytes(f, 5000);
	tfs_segment_note_flushed(f->s, 11000);
	tfs_segment_flush_ahead(f->s, 4096);
	assert_false(f->s->flush_running);
	tfs_segment_unpin(f->s);
}

/* A failed background flush may have cost dirty pages, so later fsyncs prove
 * nothing about the bytes before it: the error stays. */
static void a_failed_background_flush_is_reported_by_every_later_wait(void **state)
{
	struct fx *f = *state;

	assert_int_equal(tfs_segment_pin(f->s), 0);
	append_bytes(f, 5000);
	assert_int_equal(tfs_io_set_fault(f->io, "fsync:1:EIO"), 0);
	tfs_segment_flush_ahead(f->s, 4096);
	assert_true(f->s->flush_running);
	assert_int_equal(tfs_segment_flush_wait(f->s), -EIO);
	tfs_io_set_fault(f->io, NULL);
	append_bytes(f, 5000);
	tfs_segment_flush_ahead(f->s, 4096);           /* this one succeeds... */
	assert_int_equal(tfs_segment_flush_wait(f->s), -EIO);   /* ...the error stays */
	assert_int_equal(tfs_segment_flush_wait(f->s), -EIO);
	tfs_segment_unpin(f->s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_are_twenty_zero_padded_digits),
		cmocka_unit_test_setup_teardown(first_batch_is_never_indexed_then_every_4096_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(index_files_are_kafkas_layout_and_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(time_index_entries_are_kafkas, setup, teardown),
		cmocka_unit_test_setup_teardown(a_full_time_index_is_full, setup, teardown),
		cmocka_unit_test_setup_teardown(deleted_segments_keep_reading_until_the_last_ref, setup, teardown),
		cmocka_unit_test_setup_teardown(flushing_ahead_starts_past_the_threshold_and_is_waited_for, setup, teardown),
		cmocka_unit_test_setup_teardown(a_failed_background_flush_is_reported_by_every_later_wait, setup, teardown),
	};
	return cmocka_run_group_tests_name("segment", tests, NULL, NULL);
}
