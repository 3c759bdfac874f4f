/* test_plog_produce.c - a producer's batch appended as it came
 * (tfs_plog_append_batch): written byte for byte apart from what a broker sets,
 * indexed, re-encoded when its codec is not the topic's, stamped under
 * LogAppendTime, and refused - changing nothing - when a broker would refuse it.
 * Runs on the backend named by $TFS_IO. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"
#include "io/log.h"
#include "tests/t_util.h"
#include "tests/engine/produce_fixture.h"

static tfs_offset_t put(struct tfs_plog *pl, const char *key, const char *value)
{
	struct tfs_append_rec r = {
		.key = tfs_slice_make(key, strlen(key)),
		.value = tfs_slice_make(value, strlen(value)),
	};
	tfs_offset_t off = -1;
	assert_int_equal(tfs_plog_append(pl, &r, 1, false, &off, NULL), 0);
	return off;
}

#define NREC 5
#define TS0 1700000000000LL

static const char *const keys[NREC] = { "alpha", "beta", NULL, "alpha", "gamma" };
static const char *const values[NREC] = { "one", "two", "keyless", "three", NULL };

/* A producer's batch of NREC records as a client would send it: garbage where the
 * broker assigns (base offset, leader epoch), its own CreateTime timestamps, a
 * header on record 1. Returns a malloc'd copy; *len gets its size. */
static uint8_t *producer_batch(struct fx *f, int codec, int64_t pid, int32_t seq, size_t *len)
{
	struct tfs_batch_params p = {
		.base_offset = 987654, .attributes = (int16_t)codec, .leader_epoch = 7,
		.producer_id = pid, .producer_epoch = pid >= 0 ? 3 : -1, .base_sequence = seq,
	};
	struct tfs_header h = { tfs_slice_make("trace", 5), tfs_slice_make("x-1", 3), false };
	const uint8_t *out;
	uint8_t *copy;

	tfs_batch_builder_reset(&f->b, &p);
	for (int i = 0; i < NREC; i++) {
		struct tfs_record_in in = {
			.key = tfs_slice_make(keys[i], keys[i] ? strlen(keys[i]) : 0),
			.key_null = keys[i] == NULL,
			.value = tfs_slice_make(values[i], values[i] ? strlen(values[i]) : 0),
			.value_null = values[i] == NULL,
			.timestamp = TS0 + 10 * i,
			.headers = i == 1 ? &h : NULL, .header_count = i == 1,
		};
		assert_int_equal(tfs_batch_builder_add(&f->b, &in), 0);
	}
	assert_int_equal(tfs_batch_builder_finish(&f->b, -1, &out, len), 0);
	copy = malloc(*len);
	memcpy(copy, out, *len);
	return copy;
}

/* A producer's batch of n records key = vals[i], all at ts, encoded with codec
 * on b: a malloc'd copy of *len bytes, or NULL if it cannot be built. Used from
 * threads and forked children too, so it asserts nothing. */
static uint8_t *batch_of(struct tfs_batch_builder *b, int codec, const char *key,
                         const char *const *vals, int n, int64_t ts, size_t *len)
{
	struct tfs_batch_params p = { .attributes = (int16_t)codec, .leader_epoch = -1,
	                              .producer_id = -1, .producer_epoch = -1,
	                              .base_sequence = -1 };
	const uint8_t *out;
	uint8_t *copy;

	tfs_batch_builder_reset(b, &p);
	for (int i = 0; i < n; i++) {
		struct tfs_record_in in = { .key = tfs_slice_make(key, strlen(key)),
		                            .value = tfs_slice_make(vals[i], strlen(vals[i])),
		                            .timestamp = ts };
		if (tfs_batch_builder_add(b, &in) != 0)
			return NULL;
	}
	if (tfs_batch_builder_finish(b, -1, &out, len) != 0 || !(copy = malloc(*len)))
		return NULL;
	memcpy(copy, out, *len);
	return copy;
}

/* The records at first.. read back as producer_batch wrote them, with timestamps
 * from ts (or TS0 + 10 i when ts < 0), in a batch of codec. */
static void assert_records(struct fx *f, tfs_offset_t first, int codec, int64_t ts)
{
	for (int i = 0; i < NREC; i++) {
		struct tfs_record_copy rc;
		assert_int_equal(tfs_plog_read_offset(f->pl, first + i, &rc), 0);
		assert_int_equal(rc.offset, first + i);
		assert_int_equal(rc.batch.base_offset, first);
		assert_int_equal(rc.batch.leader_epoch, -1);
		assert_int_equal(rc.batch.attributes & TFS_ATTR_CODEC_MASK, codec);
		assert_int_equal(rc.timestamp, ts < 0 ? TS0 + 10 * i : ts);
		assert_int_equal(rc.key_null, keys[i] == NULL);
		if (keys[i])
			assert_memory_equal(rc.key, keys[i], strlen(keys[i]));
		assert_int_equal(rc.value_null, values[i] == NULL);
		if (values[i]) {
			assert_int_equal(rc.value_len, strlen(values[i]));
			assert_memory_equal(rc.value, values[i], rc.value_len);
		}
		assert_int_equal(rc.header_count, i == 1);
		if (i == 1) {
			struct tfs_slice cur = { rc.headers, rc.headers_len };
			struct tfs_header h;
			assert_int_equal(tfs_header_next(&cur, &h), 1);
			assert_memory_equal(h.key.p, "trace", 5);
			assert_memory_equal(h.value.p, "x-1", 3);
		}
		tfs_record_copy_release(&rc);
	}
}

/* The key directory after producer_batch at first: alpha is record 3, beta record
 * 1, gamma's tombstone removed it, the keyless record is no key. */
static void assert_keys(struct fx *f, tfs_offset_t first, int64_t ts)
{
	struct tfs_keyinfo ki;
	assert_int_equal(tfs_plog_lookup(f->pl, tfs_slice_make("alpha", 5), &ki), 0);
	assert_int_equal(ki.offset, first + 3);
	assert_int_equal(ki.timestamp, ts < 0 ? TS0 + 30 : ts);
	assert_int_equal(ki.value_bytes, 5);
	assert_int_equal(tfs_plog_lookup(f->pl, tfs_slice_make("beta", 4), &ki), 0);
	assert_int_equal(ki.offset, first + 1);
	assert_int_equal(tfs_plog_lookup(f->pl, tfs_slice_make("gamma", 5), &ki), -ENOENT);
}

static long segment_bytes(struct fx *f, uint8_t **out)
{
	char name[4200];
	snprintf(name, sizeof(name), "%s/00000000000000000000.log", f->path);
	return t_read_file(name, out);
}

/* Whether the log file holds the batch's bytes past what a broker sets (base
 * offset, length, leader epoch): everything the CRC covers, as the producer wrote it. */
static bool file_holds(struct fx *f, const uint8_t *batch, size_t len)
{
	uint8_t *file = NULL;
	long n = segment_bytes(f, &file);
	bool found = n > 0 &&
	             memmem(file, (size_t)n, batch + TFS_BATCH_CRC_START - 5,
	                    len - (TFS_BATCH_CRC_START - 5)) != NULL;
	free(file);
	return found;
}

static void append_as_is(struct fx *f, int codec)
{
	size_t len, count = 0;
	tfs_offset_t first = -1;
	uint8_t *batch, *orig;

	f->cfg.compression = codec;
	open_pl(f);
	put(f->pl, "before", "x");
	put(f->pl, "beta", "old");
	batch = producer_batch(f, codec, -1, -1, &len);
	orig = malloc(len);
	memcpy(orig, batch, len);
	assert_int_equal(tfs_plog_append_batch(f->pl, batch, len, false, &first, &count, NULL, NULL), 0);
	assert_int_equal(first, 2);
	assert_int_equal(count, NREC);
	assert_true(file_holds(f, orig, len));
	assert_records(f, first, codec, -1);
	assert_keys(f, first, -1);
	assert_int_equal(put(f->pl, "after", "y"), first + NREC);
	open_pl(f);     /* recovery and the key-directory rebuild agree */
	assert_records(f, first, codec, -1);
	assert_keys(f, first, -1);
	free(orig);
	free(batch);
}

static void an_uncompressed_batch_is_written_as_it_came(void **state)
{
	append_as_is(*state, TFS_CODEC_NONE);
}

static void a_zstd_batch_is_written_as_it_came(void **state)
{
	append_as_is(*state, TFS_CODEC_ZSTD);
}

static void reencode(struct fx *f, int topic_codec, int batch_codec)
{
	size_t len;
	tfs_offset_t first = -1;
	uint8_t *batch;

	f->cfg.compression = topic_codec;
	open_pl(f);
	batch = producer_batch(f, batch_codec, 42, 17, &len);
	assert_int_equal(tfs_plog_append_batch(f->pl, batch, len, true, &first, NULL, NULL, NULL), 0);
	assert_int_equal(first, 0);
	assert_records(f, first, topic_codec, -1);
	assert_keys(f, first, -1);
	{
		struct tfs_record_copy rc;
		assert_int_equal(tfs_plog_read_offset(f->pl, 0, &rc), 0);
		assert_int_equal(rc.batch.producer_id, 42);
		assert_int_equal(rc.batch.producer_epoch, 3);
		assert_int_equal(rc.batch.base_sequence, 17);
		tfs_record_copy_release(&rc);
	}
	open_pl(f);
	assert_records(f, first, topic_codec, -1);
	free(batch);
}

static void a_batch_in_another_codec_is_reencoded_with_the_topics(void **state)
{
	reencode(*state, TFS_CODEC_ZSTD, TFS_CODEC_NONE);
}

static void a_zstd_batch_for_an_uncompressed_topic_is_decompressed(void **state)
{
	reencode(*state, TFS_CODEC_NONE, TFS_CODEC_ZSTD);
}

/* Sets the CRC of a whole batch after a test changed what it covers. */
static void fix_crc(uint8_t *b, size_t len)
{
	uint32_t crc = tfs_crc32c(0, b + TFS_BATCH_CRC_START, len - TFS_BATCH_CRC_START);
	b[17] = (uint8_t)(crc >> 24);
	b[18] = (uint8_t)(crc >> 16);
	b[19] = (uint8_t)(crc >> 8);
	b[20] = (uint8_t)crc;
}

static void set_attributes(uint8_t *b, size_t len, int bits)
{
	b[22] = (uint8_t)(b[22] | bits);
	fix_crc(b, len);
}

/* Appending batch must fail with want and change nothing. */
static void assert_refused(struct fx *f, uint8_t *batch, size_t len, int want)
{
	struct tfs_plog_stats before, after;
	uint8_t *file = NULL;
	long size_before = segment_bytes(f, &file);

	free(file);
	tfs_plog_stats(f->pl, &before);
	assert_int_equal(tfs_plog_append_batch(f->pl, batch, len, true, NULL, NULL, NULL, NULL), want);
	tfs_plog_stats(f->pl, &after);
	assert_int_equal(after.log_end_offset, before.log_end_offset);
	assert_int_equal(after.live_keys, before.live_keys);
	assert_int_equal(segment_bytes(f, &file), size_before);
	free(file);
}

/* Under LogAppendTime the leader stamps the batch as it places it: the caller's
 * batch, or (batch_codec not the topic's) the re-encoded one. */
static void log_append_time(struct fx *f, int batch_codec)
{
	size_t len;
	tfs_offset_t first = -1;
	uint8_t *batch;
	int64_t before = tfs_now_ms(), after;

	f->cfg.timestamp_type = TFS_TS_LOG_APPEND_TIME;
	f->cfg.compression = TFS_CODEC_ZSTD;
	open_pl(f);
	batch = producer_batch(f, batch_codec, -1, -1, &len);
	assert_int_equal(tfs_plog_append_batch(f->pl, batch, len, false, &first, NULL, NULL, NULL), 0);
	after = tfs_now_ms();
	{
		struct tfs_record_copy rc;
		assert_int_equal(tfs_plog_read_offset(f->pl, first, &rc), 0);
		assert_true(rc.batch.attributes & TFS_ATTR_LOG_APPEND_TIME);
		assert_true(rc.timestamp >= before && rc.timestamp <= after);
		before = rc.timestamp;
		tfs_record_copy_release(&rc);
	}
	assert_records(f, first, TFS_CODEC_ZSTD, before);
	assert_keys(f, first, before);
	if (batch_codec == TFS_CODEC_ZSTD)
		assert_int_equal(tfs_batch_verify(batch, len, NULL), 0);  /* CRC recomputed */
	open_pl(f);                                                    /* recovery agrees */
	assert_records(f, first, TFS_CODEC_ZSTD, before);
	free(batch);
}

static void log_append_time_stamps_the_batch(void **state)
{
	log_append_time(*state, TFS_CODEC_ZSTD);
}

static void log_append_time_stamps_a_reencoded_batch(void **state)
{
	log_append_time(*state, TFS_CODEC_NONE);
}

/* A producer's max timestamp that is not its records' newest is corrected (and
 * the CRC with it), as Kafka's validator does: the time index, segment.ms and
 * recovery read it. */
static void the_max_timestamp_is_the_records_own(void **state)
{
	struct fx *f = *state;
	struct tfs_record_copy rc;
	size_t len;
	uint8_t *b;

	open_pl(f);
	b = producer_batch(f, TFS_CODEC_NONE, -1, -1, &len);
	for (int i = 35; i < 43; i++)          /* max timestamp: far in the future */
		b[i] = 0x0f;
	fix_crc(b, len);
	assert_int_equal(tfs_plog_append_batch(f->pl, b, len, false, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(tfs_plog_read_offset(f->pl, 0, &rc), 0);
	assert_int_equal(rc.batch.max_timestamp, TS0 + 10 * (NREC - 1));
	tfs_record_copy_release(&rc);
	assert_int_equal(tfs_batch_verify(b, len, NULL), 0);
	open_pl(f);
	assert_records(f, 0, TFS_CODEC_NONE, -1);
	free(b);
}

/* A zstd batch that fits max.message.bytes but not once decompressed for an
 * uncompressed topic is refused, and the committed-records callback tells a
 * caller what an accepted batch held. */
static void count_records(void *arg, const struct tfs_append_rec *recs, size_t count)
{
	size_t *keyed = arg;
	for (size_t i = 0; i < count; i++)
		*keyed += !recs[i].key_null;
}

static void a_reencoded_batch_over_max_message_bytes_is_efbig(void **state)
{
	struct fx *f = *state;
	static char value[4001];
	const char *vals[] = { value };
	size_t len, keyed = 0;
	uint8_t *b;

	memset(value, 'a', sizeof(value) - 1);
	b = batch_of(&f->b, TFS_CODEC_ZSTD, "k", vals, 1, TS0, &len);
	assert_non_null(b);
	assert_true(len < 500);
	f->cfg.max_message_bytes = 1000;
	open_pl(f);
	assert_refused(f, b, len, -EFBIG);
	f->cfg.max_message_bytes = 10000;
	tfs_plog_set_config(f->pl, &f->cfg);
	assert_int_equal(tfs_plog_append_batch(f->pl, b, len, false, NULL, NULL, count_records,
	                                       &keyed), 0);
	assert_int_equal(keyed, 1);
	free(b);
}

/* segment.ms counts on the records' own clock, as Kafka's shouldRoll does: the
 * incoming batch's max timestamp against the segment's first batch's. Producer
 * timestamps years old roll nothing; one segment.ms newer than the first rolls. */
static void segment_ms_counts_on_the_records_clock(void **state)
{
	struct fx *f = *state;
	struct tfs_plog_stats st;
	size_t len;
	uint8_t *b;

	open_pl(f);
	for (int i = 0; i < 3; i++) {
		b = producer_batch(f, TFS_CODEC_NONE, -1, -1, &len);
		assert_int_equal(tfs_plog_append_batch(f->pl, b, len, false, NULL, NULL, NULL, NULL), 0);
		free(b);
	}
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.segments, 1);
	{
		const char *vals[] = { "v" };
		b = batch_of(&f->b, TFS_CODEC_NONE, "late", vals, 1, TS0 + f->cfg.segment_ms + 100,
		             &len);
		assert_non_null(b);
		assert_int_equal(tfs_plog_append_batch(f->pl, b, len, false, NULL, NULL, NULL, NULL), 0);
		free(b);
	}
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.segments, 2);
	assert_int_equal(st.log_end_offset, 3 * NREC + 1);
}

static void what_a_broker_refuses_is_refused_and_changes_nothing(void **state)
{
	struct fx *f = *state;
	size_t len;
	uint8_t *b, *c;

	open_pl(f);
	put(f->pl, "k", "v");
	b = producer_batch(f, TFS_CODEC_NONE, -1, -1, &len);
	c = malloc(len + 1);

	memcpy(c, b, len);
	set_attributes(c, len, TFS_ATTR_CONTROL);
	assert_refused(f, c, len, -EINVAL);
	memcpy(c, b, len);
	set_attributes(c, len, TFS_ATTR_TRANSACTIONAL);
	assert_refused(f, c, len, -EINVAL);
	memcpy(c, b, len);
	set_attributes(c, len, TFS_ATTR_DELETE_HORIZON);
	assert_refused(f, c, len, -EINVAL);
	memcpy(c, b, len);
	set_attributes(c, len, TFS_ATTR_LOG_APPEND_TIME);
	assert_refused(f, c, len, -EINVAL);
	memcpy(c, b, len);
	set_attributes(c, len, TFS_CODEC_GZIP);        /* plain records under gzip's bits */
	assert_refused(f, c, len, -EBADMSG);
	memcpy(c, b, len);
	set_attributes(c, len, TFS_CODEC_ZSTD + 1);    /* no such codec */
	assert_refused(f, c, len, -EBADMSG);
	/* a record count of 2^31 - 1 in a batch of five: no memory is sized by it */
	memcpy(c, b, len);
	memcpy(c + 23, "\x7f\xff\xff\xfe", 4);        /* last offset delta */
	memcpy(c + 57, "\x7f\xff\xff\xff", 4);        /* records count */
	fix_crc(c, len);
	assert_refused(f, c, len, -EBADMSG);
	memcpy(c, b, len);
	c[16] = 1;                                      /* magic 1 */
	assert_refused(f, c, len, TFS_EUNSUPPORTED);
	memcpy(c, b, len);
	c[len - 1] ^= 1;                                /* CRC no longer matches */
	assert_refused(f, c, len, -EBADMSG);
	memcpy(c, b, len);
	assert_refused(f, c, len - 1, -EINVAL);         /* cut short */
	c[len] = 0;
	assert_refused(f, c, len + 1, -EINVAL);         /* a byte after the batch */
	assert_refused(f, c, 20, -EINVAL);              /* shorter than a header */

	free(b);                                        /* a producer id, no sequence */
	b = producer_batch(f, TFS_CODEC_NONE, 5, -1, &len);
	assert_refused(f, b, len, -EINVAL);
	free(b);

	/* offset deltas 0, 0, 2, 3, 4: the count still matches the last delta, but a
	 * record whose offset does not rise is not a record of this batch */
	b = producer_batch(f, TFS_CODEC_NONE, -1, -1, &len);
	{
		struct tfs_record_iter it;
		struct tfs_record r;
		tfs_record_iter_init(&it);
		assert_int_equal(tfs_record_iter_reset(&it, b, len, NULL), 0);
		assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
		assert_int_equal(tfs_record_iter_next(&it, &r, NULL), 1);
		/* length varint, attributes, timestamp delta (10 zig-zags to 1 byte) */
		uint8_t *delta = (uint8_t *)r.raw.p + 3;
		assert_int_equal(*delta, 2);            /* zig-zag 1 */
		*delta = 0;
		tfs_record_iter_release(&it);
	}
	fix_crc(b, len);
	assert_refused(f, b, len, -EBADMSG);
	free(b);

	{   /* an empty batch, as the cleaner leaves */
		struct tfs_batch_header h = { .last_offset_delta = 0, .producer_id = -1,
		                              .producer_epoch = -1, .base_sequence = -1,
		                              .leader_epoch = -1 };
		uint8_t empty[TFS_BATCH_HEADER_BYTES];
		tfs_batch_write_empty(&h, empty);
		assert_refused(f, empty, sizeof(empty), -EINVAL);
	}

	b = producer_batch(f, TFS_CODEC_NONE, -1, -1, &len);
	f->cfg.max_message_bytes = (int32_t)len - 1;
	tfs_plog_set_config(f->pl, &f->cfg);
	assert_refused(f, b, len, -EFBIG);
	f->cfg.max_message_bytes = (int32_t)len;
	tfs_plog_set_config(f->pl, &f->cfg);
	assert_int_equal(tfs_plog_append_batch(f->pl, b, len, false, NULL, NULL, NULL, NULL), 0);
	free(b);
	free(c);
}

/* Every single-byte change of a valid batch is refused and changes nothing -
 * except in the base offset and leader epoch, which the CRC does not cover and
 * the broker overwrites - and none crashes (this suite runs under ASan+UBSan).
 * Then the same changes with the CRC made to match, so that they reach the
 * record decoder: each is refused (and changes nothing) or appended whole. */
static void every_corruption_covered_by_the_crc_is_refused(void **state)
{
	struct fx *f = *state;

	for (int codec = TFS_CODEC_NONE; codec <= TFS_CODEC_ZSTD; codec += TFS_CODEC_ZSTD) {
		size_t len, decoder_refused = 0;
		uint8_t *b, *c;
		f->cfg.compression = codec;
		open_pl(f);
		b = producer_batch(f, codec, -1, -1, &len);
		c = malloc(len);
		for (int crc_fixed = 0; crc_fixed < 2; crc_fixed++) {
			for (size_t i = 0; i < len; i++) {
				if (i < 8 || (i >= 12 && i < 21))
					continue;   /* not covered (and, with crc_fixed, the CRC) */
				for (int bit = 0; bit < 8; bit += 3) {
					struct tfs_plog_stats before, after;
					size_t count = 0;
					int rc;
					memcpy(c, b, len);
					c[i] ^= (uint8_t)(1u << bit);
					if (crc_fixed)
						fix_crc(c, len);
					tfs_plog_stats(f->pl, &before);
					rc = tfs_plog_append_batch(f->pl, c, len, false, NULL, &count, NULL, NULL);
					tfs_plog_stats(f->pl, &after);
					if (!crc_fixed && rc == 0)
						fail_msg("byte %zu bit %d of a codec %d batch was accepted", i, bit,
						         codec);
					if (rc == -EBADMSG && crc_fixed)
						decoder_refused++;
					assert_int_equal(after.log_end_offset,
					                 before.log_end_offset + (rc == 0 ? (int64_t)count : 0));
				}
			}
		}
		assert_true(decoder_refused > 10);
		free(c);
		free(b);
	}
}

/* ---- producers and ordinary appenders at once ---- */

#define THREAD_BATCHES 200

struct producer {
	struct fx *f;
	int id;
	bool batches;                  /* producer batches, else ordinary appends */
	tfs_offset_t first[THREAD_BATCHES];
};

static void *producer_main(void *p)
{
	struct producer *w = p;
	struct tfs_batch_builder b;
	char key[32], value[64];

	tfs_batch_builder_init(&b);
	for (int n = 0; n < THREAD_BATCHES; n++) {
		const char *vals[] = { value, value, value };
		uint8_t *copy;
		size_t len;
		int rc = -ENOMEM;

		snprintf(key, sizeof(key), "w%d-%d", w->id, n % 17);
		snprintf(value, sizeof(value), "%d:%d", w->id, n);
		if (!w->batches) {
			struct tfs_append_rec r = { .key = tfs_slice_make(key, strlen(key)),
			                            .value = tfs_slice_make(value, strlen(value)) };
			rc = tfs_plog_append(w->f->pl, &r, 1, n % 50 == 0, &w->first[n], NULL);
		} else if ((copy = batch_of(&b, TFS_CODEC_ZSTD, key, vals, 3, TS0 + n, &len))) {
			rc = tfs_plog_append_batch(w->f->pl, copy, len, n % 50 == 0, &w->first[n], NULL,
			                           NULL, NULL);
			free(copy);
		}
		if (rc != 0)
			w->first[n] = -1;
	}
	tfs_batch_builder_release(&b);
	return NULL;
}

static void producers_and_appenders_at_once_keep_every_record(void **state)
{
	struct fx *f = *state;
	struct producer w[3];
	pthread_t t[3];
	uint8_t *seen;
	struct tfs_plog_stats st;

	f->cfg.compression = TFS_CODEC_ZSTD;
	open_pl(f);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct producer){ .f = f, .id = i, .batches = i != 2 };
		assert_int_equal(pthread_create(&t[i], NULL, producer_main, &w[i]), 0);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.log_end_offset, 2 * THREAD_BATCHES * 3 + THREAD_BATCHES);
	seen = calloc((size_t)st.log_end_offset, 1);
	for (int i = 0; i < 3; i++) {
		int span = w[i].batches ? 3 : 1;
		for (int n = 0; n < THREAD_BATCHES; n++) {
			char value[64];
			assert_true(w[i].first[n] >= 0);
			snprintf(value, sizeof(value), "%d:%d", i, n);
			for (int k = 0; k < span; k++) {
				struct tfs_record_copy rc;
				tfs_offset_t off = w[i].first[n] + k;
				assert_int_equal(seen[off], 0);
				seen[off] = 1;
				assert_int_equal(tfs_plog_read_offset(f->pl, off, &rc), 0);
				assert_int_equal(rc.value_len, strlen(value));
				assert_memory_equal(rc.value, value, rc.value_len);
				tfs_record_copy_release(&rc);
			}
		}
	}
	free(seen);
	open_pl(f);
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.live_keys, 3 * 17);
}

/* ---- crashes ---- */

#define CRASH_UNITS 12
#define CRASH_BATCH_RECS 3

/* What one acknowledged unit of the crash workload reports to the parent. */
struct acked {
	int unit;
	tfs_offset_t first;
};

/* Unit u of the crash workload: even units an ordinary append of k = "u", odd
 * ones a producer's zstd batch of p = "u-0", "u-1", "u-2"; every one durable. */
static int crash_unit(struct tfs_plog *pl, struct tfs_batch_builder *b, int u, tfs_offset_t *first)
{
	char v[CRASH_BATCH_RECS][32];
	const char *vals[CRASH_BATCH_RECS];
	uint8_t *copy;
	size_t len;
	int rc;

	if (u % 2 == 0) {
		struct tfs_append_rec r = { .key = tfs_slice_make("k", 1) };
		snprintf(v[0], sizeof(v[0]), "%d", u);
		r.value = tfs_slice_make(v[0], strlen(v[0]));
		return tfs_plog_append(pl, &r, 1, true, first, NULL);
	}
	for (int j = 0; j < CRASH_BATCH_RECS; j++) {
		snprintf(v[j], sizeof(v[j]), "%d-%d", u, j);
		vals[j] = v[j];
	}
	copy = batch_of(b, TFS_CODEC_ZSTD, "p", vals, CRASH_BATCH_RECS, TS0 + u, &len);
	if (!copy)
		return -ENOMEM;
	rc = tfs_plog_append_batch(pl, copy, len, true, first, NULL, NULL, NULL);
	free(copy);
	return rc;
}

/* The crash sweep's workload: CRASH_UNITS crash_units over small segments (rolls
 * among them), each reported with its first offset once acknowledged. */
static int crash_workload(void *arg, const char *fault_spec, int fd)
{
	struct fx *f = arg;

	open_pl(f);
	tfs_io_set_fault(f->io, fault_spec);
	for (int u = 0; u < CRASH_UNITS; u++) {
		struct acked a = { .unit = u };
		if (crash_unit(f->pl, &f->b, u, &a.first) != 0)
			return 3;
		if (write(fd, &a, sizeof(a)) != sizeof(a))
			return 4;
	}
	tfs_plog_close(f->pl);
	return 0;
}

/* Runs the workload killed at its n-th mutating operation; reopens and checks
 * that every acknowledged unit is whole at the offset it was given, with no
 * holes or duplicates. Returns true once n is past the workload (the child
 * finished). */
static bool crash_at(struct fx *f, int n)
{
	struct acked acked[CRASH_UNITS];
	size_t nacked;
	bool finished;

	t_rmtree(f->path);
	f->cfg.compression = TFS_CODEC_ZSTD;
	f->cfg.segment_bytes = 300;
	nacked = t_crash_run(crash_workload, f, n, acked, sizeof(acked[0]), CRASH_UNITS, &finished);
	open_pl(f);
	t_plog_dense(f->pl);                                /* no duplicates, no holes */
	for (size_t i = 0; i < nacked; i++) {               /* nothing acknowledged is lost */
		int u = acked[i].unit, recs = u % 2 ? CRASH_BATCH_RECS : 1;
		for (int j = 0; j < recs; j++) {
			struct tfs_record_copy rc;
			char v[32];
			if (u % 2)
				snprintf(v, sizeof(v), "%d-%d", u, j);
			else
				snprintf(v, sizeof(v), "%d", u);
			assert_int_equal(tfs_plog_read_offset(f->pl, acked[i].first + j, &rc), 0);
			assert_int_equal(rc.value_len, strlen(v));
			assert_memory_equal(rc.value, v, rc.value_len);
			tfs_record_copy_release(&rc);
		}
	}
	tfs_plog_close(f->pl);
	f->pl = NULL;
	return finished;
}

static void a_crash_at_every_io_step_loses_no_acknowledged_batch(void **state)
{
	sweep_crash_points(*state, crash_at, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(an_uncompressed_batch_is_written_as_it_came, setup, teardown),
		cmocka_unit_test_setup_teardown(a_zstd_batch_is_written_as_it_came, setup, teardown),
		cmocka_unit_test_setup_teardown(a_batch_in_another_codec_is_reencoded_with_the_topics, setup, teardown),
		cmocka_unit_test_setup_teardown(a_zstd_batch_for_an_uncompressed_topic_is_decompressed, setup, teardown),
		cmocka_unit_test_setup_teardown(log_append_time_stamps_the_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(log_append_time_stamps_a_reencoded_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(the_max_timestamp_is_the_records_own, setup, teardown),
		cmocka_unit_test_setup_teardown(a_reencoded_batch_over_max_message_bytes_is_efbig, setup, teardown),
		cmocka_unit_test_setup_teardown(segment_ms_counts_on_the_records_clock, setup, teardown),
		cmocka_unit_test_setup_teardown(what_a_broker_refuses_is_refused_and_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(every_corruption_covered_by_the_crc_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(producers_and_appenders_at_once_keep_every_record, setup, teardown),
		cmocka_unit_test_setup_teardown(a_crash_at_every_io_step_loses_no_acknowledged_batch, setup, teardown),
	};
	return cmocka_run_group_tests_name("plog_produce", tests, NULL, NULL);
}
