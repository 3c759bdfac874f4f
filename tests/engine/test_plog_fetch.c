/* test_plog_fetch.c - batches as stored for consumers (engine/log/plog_fetch.h):
 * which batches a fetch from each offset returns, the byte bound and the first
 * batch that is whole past it, segments crossed, the watermark's edges, the
 * bytes of a span as they are in the file, the offset at a timestamp, and the
 * append hook that wakes long polls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "engine/log/plog_fetch.h"
#include "io/file_util.h"
#include "io/log.h"
#include "tests/t_util.h"

#define FX_DIR_PREFIX "fetch"
#include "tests/engine/produce_fixture.h"

/* The fixture with its partition log open. */
static int setup_open(void **state)
{
	setup(state);
	open_pl(*state);
	return 0;
}

/* Appends count records "k<i>"="v<i>" as one batch; returns its first offset. */
static tfs_offset_t append(struct tfs_plog *pl, size_t count, int64_t *ts)
{
	struct tfs_append_rec r[8];
	char keys[8][24];
	tfs_offset_t first;

	assert_true(count <= 8);
	for (size_t i = 0; i < count; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
		r[i] = (struct tfs_append_rec){ .key = tfs_slice_make(keys[i], strlen(keys[i])),
		                                .value = tfs_slice_make("value", 5) };
	}
	assert_int_equal(tfs_plog_append(pl, r, count, false, &first, ts), 0);
	return first;
}

/* The base offsets of the batches in f's spans, in order. */
static size_t bases(const struct tfs_plog_fetch *f, tfs_offset_t *out, size_t cap)
{
	size_t n = 0;

	for (int i = 0; i < f->nspans; i++) {
		uint8_t *buf = malloc(f->span[i].len);
		size_t pos = 0;
		assert_int_equal(tfs_plog_span_read(&f->span[i], buf), 0);
		while (pos < f->span[i].len) {
			struct tfs_batch_header h;
			assert_int_equal(tfs_batch_header_decode(buf + pos, f->span[i].len - pos, &h, NULL), 0);
			assert_int_equal(tfs_batch_check_crc(buf + pos, tfs_batch_size(&h), NULL), 0);
			assert_true(n < cap);
			out[n++] = h.base_offset;
			pos += tfs_batch_size(&h);
		}
		assert_int_equal(pos, f->span[i].len);
		free(buf);
	}
	return n;
}

/* Batches [0,3) [3,4) [4,6): a fetch from any offset starts at the batch that
 * holds it; from the watermark gets nothing; past it is -ERANGE. */
static void test_from_inside_a_batch(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_fetch r;
	tfs_offset_t b[8];
	static const tfs_offset_t first_of[6] = { 0, 0, 0, 3, 4, 4 };

	append(f->pl, 3, NULL);
	append(f->pl, 1, NULL);
	append(f->pl, 2, NULL);
	for (tfs_offset_t o = 0; o < 6; o++) {
		assert_int_equal(tfs_plog_fetch(f->pl, o, 1 << 20, true, &r), 0);
		assert_int_equal(r.high_watermark, 6);
		assert_int_equal(r.log_start, 0);
		assert_int_equal(r.next, 6);
		assert_true(bases(&r, b, 8) >= 1);
		assert_int_equal(b[0], first_of[o]);
		tfs_plog_fetch_release(&r);
	}
	assert_int_equal(tfs_plog_fetch(f->pl, 6, 1 << 20, true, &r), 0);
	assert_int_equal(r.nspans, 0);
	assert_int_equal(r.next, 6);
	assert_int_equal(tfs_plog_fetch(f->pl, 7, 1 << 20, true, &r), -ERANGE);
	assert_int_equal(r.nspans, 0);
	assert_int_equal(r.high_watermark, 6);
	assert_int_equal(tfs_plog_fetch(f->pl, -1, 1 << 20, true, &r), -ERANGE);
}

/* The byte bound takes whole batches only; the first is whole past it when
 * min_one says so, and none is taken otherwise. */
static void test_byte_bound(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_fetch r;
	tfs_offset_t b[8];
	size_t one;

	append(f->pl, 1, NULL);
	append(f->pl, 1, NULL);
	append(f->pl, 1, NULL);
	assert_int_equal(tfs_plog_fetch(f->pl, 0, 1, true, &r), 0);
	assert_int_equal(bases(&r, b, 8), 1);
	assert_int_equal(r.next, 1);
	one = r.bytes;
	tfs_plog_fetch_release(&r);
	assert_int_equal(tfs_plog_fetch(f->pl, 0, 1, false, &r), 0);
	assert_int_equal(r.nspans, 0);
	assert_int_equal(r.next, 0);
	assert_int_equal(tfs_plog_fetch(f->pl, 0, 2 * one + one / 2, false, &r), 0);
	assert_int_equal(bases(&r, b, 8), 2);
	assert_int_equal(r.bytes, 2 * one);
	assert_int_equal(r.next, 2);
	tfs_plog_fetch_release(&r);
}

/* A fetch crosses rolled segments, a span per segment, and a span's descriptor
 * reads the same bytes. */
static void test_across_segments(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_fetch r;
	tfs_offset_t b[8];
	uint8_t *via_read, *via_fd;
	int fd;

	append(f->pl, 2, NULL);
	assert_int_equal(tfs_plog_roll(f->pl), 0);
	append(f->pl, 1, NULL);
	assert_int_equal(tfs_plog_roll(f->pl), 0);
	append(f->pl, 1, NULL);
	assert_int_equal(tfs_plog_fetch(f->pl, 1, 1 << 20, true, &r), 0);
	assert_int_equal(r.nspans, 3);
	assert_int_equal(bases(&r, b, 8), 3);
	assert_int_equal(b[0], 0);
	assert_int_equal(b[1], 2);
	assert_int_equal(b[2], 3);
	via_read = malloc(r.span[1].len);
	via_fd = malloc(r.span[1].len);
	assert_int_equal(tfs_plog_span_read(&r.span[1], via_read), 0);
	fd = tfs_plog_span_fd(&r.span[1]);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, via_fd, r.span[1].len, r.span[1].pos), (ssize_t)r.span[1].len);
	assert_memory_equal(via_read, via_fd, r.span[1].len);
	close(fd);
	free(via_read);
	free(via_fd);
	tfs_plog_fetch_release(&r);
	tfs_plog_fetch_release(&r);         /* idempotent */
}

/* The first record at or after a timestamp; none after the newest. */
static void test_offset_for_time(void **state)
{
	struct fx *f = *state;
	tfs_offset_t off;
	int64_t ts0, ts1, got;

	append(f->pl, 2, &ts0);
	append(f->pl, 1, &ts1);
	assert_int_equal(tfs_plog_offset_for_time(f->pl, 0, &off, &got), 0);
	assert_int_equal(off, 0);
	assert_int_equal(got, ts0);
	assert_int_equal(tfs_plog_offset_for_time(f->pl, ts1, &off, &got), 0);
	assert_true(off == (ts1 == ts0 ? 0 : 2));
	assert_int_equal(tfs_plog_offset_for_time(f->pl, ts1 + 1, &off, &got), -ENOENT);
}

/* Appends one producer batch of two records with the given CreateTime timestamps. */
static void append_stamped(struct fx *f, int64_t ts_a, int64_t ts_b)
{
	struct tfs_batch_params p = { .producer_id = -1, .producer_epoch = -1, .base_sequence = -1 };
	struct tfs_record_in in = { .key = tfs_slice_make("k", 1), .value = tfs_slice_make("v", 1) };
	const uint8_t *out;
	uint8_t *batch;
	size_t len;

	tfs_batch_builder_reset(&f->b, &p);
	in.timestamp = ts_a;
	assert_int_equal(tfs_batch_builder_add(&f->b, &in), 0);
	in.timestamp = ts_b;
	assert_int_equal(tfs_batch_builder_add(&f->b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&f->b, -1, &out, &len), 0);
	batch = malloc(len);
	memcpy(batch, out, len);
	assert_int_equal(tfs_plog_append_batch(f->pl, batch, len, false, NULL, NULL, NULL, NULL), 0);
	free(batch);
}

/* The n-th (timestamp, relative offset) entry of a .timeindex file's bytes. */
static void tindex_entry_is(const uint8_t *data, int n, int64_t ts, int32_t rel)
{
	uint64_t t = 0;
	uint32_t o = 0;

	for (int i = 0; i < 8; i++)
		t = t << 8 | data[n * 12 + i];
	for (int i = 8; i < 12; i++)
		o = o << 8 | data[n * 12 + i];
	assert_int_equal((int64_t)t, ts);
	assert_int_equal((int32_t)o, rel);
}

/* The append path writes the time index as Kafka does (index.interval.bytes 1: an
 * entry is due before every batch but the first), recovery rebuilds it to the same
 * bytes, close gives the active segment its final entry, and ListOffsets by
 * timestamp answers the first record (in offset order) at or past the target,
 * whichever segment and index entry it starts from. */
static void test_time_index_and_offset_for_time(void **state)
{
	struct fx *f = *state;
	/* batch i holds offsets 2i, 2i+1 */
	static const int64_t ts[][2] = { { 1000, 950 }, { 900, 850 }, { 1990, 2000 },
	                                 { 1500, 1400 }, { 1800, 1700 }, { 2400, 2500 },
	                                 { 3000, 2600 } };
	const int nb = (int)(sizeof(ts) / sizeof(ts[0]));
	char path[4200];
	uint8_t *data = NULL, *again = NULL;
	long n;

	f->cfg.index_interval_bytes = 1;
	open_pl(f);
	for (int i = 0; i < 6; i++)
		append_stamped(f, ts[i][0], ts[i][1]);
	assert_int_equal(tfs_plog_roll(f->pl), 0);
	append_stamped(f, ts[6][0], ts[6][1]);

	/* before batch 1: (1000,1); batch 2: (2000,5); batches 3, 4: not greater;
	 * batch 5: (2500,11); the roll's final entry is not greater either */
	snprintf(path, sizeof(path), "%s/%020d.timeindex", f->path, 0);
	n = t_read_file(path, &data);
	assert_int_equal(n, 3 * 12);
	tindex_entry_is(data, 0, 1000, 1);
	tindex_entry_is(data, 1, 2000, 5);
	tindex_entry_is(data, 2, 2500, 11);

	for (int64_t target = 0; target <= 3100; target += 50) {
		tfs_offset_t want = -1, off;
		int64_t got;
		for (int i = 0; i < nb * 2 && want < 0; i++)
			if (ts[i / 2][i % 2] >= target)
				want = i;
		int rc = tfs_plog_offset_for_time(f->pl, target, &off, &got);
		if (want < 0) {
			assert_int_equal(rc, -ENOENT);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(off, want);
		assert_int_equal(got, ts[want / 2][want % 2]);
	}

	/* recovery rebuilds a lost time index to the same bytes */
	tfs_plog_close(f->pl);
	f->pl = NULL;
	assert_int_equal(unlink(path), 0);
	open_pl(f);
	n = t_read_file(path, &again);
	assert_int_equal(n, 3 * 12);
	assert_memory_equal(data, again, 3 * 12);
	/* the active segment (offsets 12, 13, one batch: never indexed) got its final
	 * entry at close, as Kafka's close writes it */
	free(again);
	snprintf(path, sizeof(path), "%s/%020d.timeindex", f->path, 12);
	n = t_read_file(path, &again);
	assert_int_equal(n, 12);
	tindex_entry_is(again, 0, 3000, 1);
	free(again);
	free(data);
	{
		tfs_offset_t off;
		int64_t got;
		assert_int_equal(tfs_plog_offset_for_time(f->pl, 2550, &off, &got), 0);
		assert_int_equal(off, 12);
		assert_int_equal(tfs_plog_offset_for_time(f->pl, 2001, &off, &got), 0);
		assert_int_equal(off, 10);
	}
}

struct hook_seen {
	struct tfs_plog *pl;
	int calls;
	tfs_offset_t end_at_call;       /* what a reader saw from inside the hook */
};

static void hook(void *arg, struct tfs_plog *pl)
{
	struct hook_seen *h = arg;
	struct tfs_plog_stats st;

	tfs_plog_stats(pl, &st);        /* no partition lock is held: this does not block */
	h->pl = pl;
	h->calls++;
	h->end_at_call = st.log_end_offset;
}

/* The hook runs once per append, after it is visible, for appends and for a
 * producer's batch alike. */
static void test_append_hook(void **state)
{
	struct fx *f = *state;
	struct hook_seen h = { 0 };
	struct tfs_batch_builder b;
	struct tfs_batch_params p = { .producer_id = -1, .producer_epoch = -1, .base_sequence = -1 };
	struct tfs_record_in in = { .key = tfs_slice_make("k", 1), .value = tfs_slice_make("v", 1),
	                            .timestamp = 1 };
	const uint8_t *out;
	uint8_t *batch;
	size_t len;

	tfs_plog_set_append_hook(f->pl, hook, &h);
	append(f->pl, 2, NULL);
	assert_int_equal(h.calls, 1);
	assert_ptr_equal(h.pl, f->pl);
	assert_int_equal(h.end_at_call, 2);
	tfs_batch_builder_init(&b);
	tfs_batch_builder_reset(&b, &p);
	assert_int_equal(tfs_batch_builder_add(&b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&b, -1, &out, &len), 0);
	batch = malloc(len);
	memcpy(batch, out, len);
	assert_int_equal(tfs_plog_append_batch(f->pl, batch, len, false, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(h.calls, 2);
	assert_int_equal(h.end_at_call, 3);
	free(batch);
	tfs_batch_builder_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_from_inside_a_batch, setup_open, teardown),
		cmocka_unit_test_setup_teardown(test_byte_bound, setup_open, teardown),
		cmocka_unit_test_setup_teardown(test_across_segments, setup_open, teardown),
		cmocka_unit_test_setup_teardown(test_offset_for_time, setup_open, teardown),
		cmocka_unit_test_setup_teardown(test_time_index_and_offset_for_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_append_hook, setup_open, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
