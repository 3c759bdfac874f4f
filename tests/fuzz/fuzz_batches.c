/* fuzz_batches.c - T/P/.batches: the fs stream splitter (fs/node_control.c) and
 * the engine's producer-batch append (tfs_plog_append_batch), through the kind's
 * open/write/flush/release handlers on a real engine.
 *
 * Input layout (missing bytes read as 0):
 *   byte 0   flags: bit 0 the topic compresses with zstd (batches of another codec
 *            are re-encoded); bit 1 a small max.message.bytes (byte 1: 100 + 16 *
 *            byte); bit 2 the topic uses LogAppendTime; bit 3 the CRC of every
 *            batch that can be framed is made right first (so that changed
 *            records reach the record checks)
 *   byte 1   max.message.bytes choice
 *   byte 2   low 4 bits: S, the number of write(2) sizes that follow
 *   2*S      write sizes (little-endian, used in turn; 0 = the whole rest)
 *   rest     the stream (a segment file's bytes are a good one)
 *
 * Properties. The harness frames the stream itself with tfs_batch_header_decode
 * (the documented rule: a header is judged as soon as it is whole; a batch over
 * max.message.bytes is refused before it is buffered). Then:
 *   - a write succeeds only if every batch it completed was appended: the log end
 *     grows by exactly their records_count; a failed write appended a prefix of
 *     them and nothing else; after a failure every later write fails alike; an
 *     idempotent producer's batch may instead be taken as a duplicate (nothing
 *     appended) or refused with EILSEQ or EPERM (producer state);
 *   - a batch the engine took is valid (tfs_batch_verify of the bytes as written)
 *     and its records read back from the log with the same keys, values, headers
 *     and (under CreateTime) timestamps, at consecutive offsets;
 *   - a refusal the harness predicts from the header (not a batch, magic 0/1, over
 *     max.message.bytes) is the write's errno; FLUSH fails exactly when bytes of
 *     a batch are left; each handler replies once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/batch_codec.h"
#include "engine/engine.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "tests/fuzz/fz.h"

#define TOPIC "b"
#define DEFAULT_MAX_MESSAGE_BYTES 1048588   /* Kafka's default */
#define TOPIC_RECREATE_BYTES (64 << 20)

static struct tfs_mount *mnt;
static char *mnt_dir;

struct stream {
	uint8_t *buf;                   /* bytes not yet a whole batch */
	size_t len, cap;
	int failed;                     /* positive errno once a write failed */
	int32_t max_message_bytes;
	bool log_append_time;
};

/* Where the records of a batch (its bytes as written) differ from the log's from
 * offset at on, or NULL if the log holds exactly them there. */
static const char *batch_mismatch(struct tfs_plog *pl, const uint8_t *batch, size_t size,
                                  tfs_offset_t at, bool log_append_time)
{
	struct tfs_record_iter it;
	struct tfs_plog_cursor *c = NULL;
	struct tfs_record want, got;
	const char *why = NULL, *diff = NULL;
	int rc;
	int32_t n = 0;

	tfs_record_iter_init(&it);
	if (tfs_record_iter_reset(&it, batch, size, &why) != 0) {
		tfs_record_iter_release(&it);
		return "the batch does not decode";
	}
	if (tfs_plog_cursor_open(pl, at, &c) != 0) {
		tfs_record_iter_release(&it);
		return "no cursor at its offset";
	}
	while (!diff && (rc = tfs_record_iter_next(&it, &want, &why)) == 1) {
		if (tfs_plog_cursor_next(c, &got, NULL) != 1)
			diff = "a record is not in the log";
		else if (got.offset != at + n)
			diff = "a record at another offset";
		else if (got.key_null != want.key_null || got.key.len != want.key.len ||
		         (want.key.len && memcmp(got.key.p, want.key.p, want.key.len)))
			diff = "another key";
		else if (got.value_null != want.value_null || got.value.len != want.value.len ||
		         (want.value.len && memcmp(got.value.p, want.value.p, want.value.len)))
			diff = "another value";
		else if (got.header_count != want.header_count ||
		         got.headers_raw.len != want.headers_raw.len ||
		         (want.headers_raw.len &&
		          memcmp(got.headers_raw.p, want.headers_raw.p, want.headers_raw.len)))
			diff = "other headers";
		else if (!log_append_time && got.timestamp != want.timestamp)
			diff = "another timestamp";
		n++;
	}
	if (!diff && rc != 0)
		diff = "the records do not decode";
	if (!diff && n != it.h.records_count)
		diff = "fewer records than the header says";
	tfs_plog_cursor_close(c);
	tfs_record_iter_release(&it);
	return diff;
}

/* The records of an accepted batch are the log's from offset at on. */
static void check_batch_records(struct tfs_plog *pl, const uint8_t *batch, size_t size,
                                tfs_offset_t at, bool log_append_time)
{
	const char *diff = batch_mismatch(pl, batch, size, at, log_append_time);

	FZ_CHECK(!diff, "an accepted batch at offset %lld: %s", (long long)at, diff ? diff : "");
}

/* A whole batch the handler will try to append. */
struct cand {
	size_t pos, size;
	int32_t records;
	int64_t producer_id;            /* >= 0: an idempotent producer's batch */
	bool resent;                    /* found not appended: a duplicate, or refused */
	uint8_t *copy;                  /* the bytes as written (the engine rewrites them) */
};

/* One FUSE write, checked as the header comment says. */
static void one_write(const struct tfs_node_ops *ops, struct tfs_fh *fh, struct tfs_plog *pl,
                      struct stream *s, const uint8_t *buf, size_t size)
{
	struct fz_reply r = { 0 };
	struct fuse_file_info fi = { .flags = O_WRONLY, .fh = (uintptr_t)fh };
	tfs_offset_t before = fz_log_end(pl), delta, cum = 0;
	struct cand *cands = NULL;
	size_t ncand = 0, ccap = 0, pos = 0, k;
	int predicted = 0;              /* positive errno the framing predicts */
	bool producer_unappended = false;

	if (!s->failed) {
		fz_reserve((void **)&s->buf, &s->cap, s->len + size, 1);
		memcpy(s->buf + s->len, buf, size);
		s->len += size;
		while (pos < s->len) {
			struct tfs_batch_header h;
			int rc = tfs_batch_header_decode(s->buf + pos, s->len - pos, &h, NULL);
			size_t bsize;
			if (rc == -EAGAIN)
				break;
			if (rc < 0) {
				predicted = rc == TFS_EUNSUPPORTED ? EOPNOTSUPP : EINVAL;
				break;
			}
			bsize = tfs_batch_size(&h);
			if (bsize > (size_t)s->max_message_bytes) {
				predicted = EFBIG;
				break;
			}
			if (s->len - pos < bsize)
				break;
			fz_reserve((void **)&cands, &ccap, ncand + 1, sizeof(*cands));
			cands[ncand].pos = pos;
			cands[ncand].size = bsize;
			cands[ncand].records = h.records_count;
			cands[ncand].producer_id = h.producer_id;
			cands[ncand].resent = false;
			cands[ncand].copy = malloc(bsize);
			if (!cands[ncand].copy)
				abort();
			memcpy(cands[ncand].copy, s->buf + pos, bsize);
			ncand++;
			pos += bsize;
		}
	}

	tfs_fh_hold(fh);
	ops->write(fz_req(&r), mnt, fh, (const char *)buf, size, 0, &fi);
	tfs_fh_put(mnt, fh);
	fz_reply_check_once(&r, "write");
	delta = fz_log_end(pl) - before;

	if (s->failed) {
		FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err == s->failed,
		         "a write after a failed one: kind %d err %d, first failure %d",
		         (int)r.kind, r.err, s->failed);
		FZ_CHECK(delta == 0, "a write after a failed one appended %lld records",
		         (long long)delta);
		goto out;
	}
	/* The accepted batches are a prefix of the candidates: find it by the records
	 * the log gained (an accepted batch has at least one). A producer's batch may
	 * also be taken without being appended (a resent duplicate, docs/format.md on
	 * producer state) or refused (EILSEQ, EPERM): it is one whose records are not
	 * where the log goes on. */
	for (k = 0; k < ncand; k++) {
		if (cands[k].producer_id >= 0 &&
		    batch_mismatch(pl, cands[k].copy, cands[k].size, before + cum,
		                   s->log_append_time)) {
			cands[k].resent = true;
			producer_unappended = true;
			continue;
		}
		if (cum >= delta)
			break;
		FZ_CHECK(cands[k].records >= 1, "a batch of %d records was accepted",
		         (int)cands[k].records);
		cum += cands[k].records;
	}
	FZ_CHECK(cum == delta, "the log gained %lld records, not the sum of whole batches",
	         (long long)delta);
	for (size_t i = 0, at = 0; i < k; i++) {
		const char *why = NULL;
		int rc;
		if (cands[i].resent)
			continue;
		rc = tfs_batch_verify(cands[i].copy, cands[i].size, &why);
		FZ_CHECK(rc == 0, "an accepted batch does not verify: %s", why ? why : "?");
		check_batch_records(pl, cands[i].copy, cands[i].size, before + (tfs_offset_t)at,
		                    s->log_append_time);
		at += (size_t)cands[i].records;
	}
	if (r.kind == FZ_REPLY_WRITE) {
		FZ_CHECK(r.count == size, "write replied %zu of %zu", r.count, size);
		FZ_CHECK(k == ncand && predicted == 0,
		         "a write succeeded with %zu of %zu batches appended (predicted errno %d)",
		         k, ncand, predicted);
		memmove(s->buf, s->buf + pos, s->len - pos);
		s->len -= pos;
	} else {
		FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err != 0, "write replied kind %d",
		         (int)r.kind);
		/* a producer's batch not appended may be the refused one (EILSEQ, EPERM,
		 * or its own header's EINVAL), as a batch past the prefix may */
		if (k == ncand && !producer_unappended)
			FZ_CHECK(r.err == predicted, "a write failed with %d, the framing says %d",
			         r.err, predicted);
		s->failed = r.err;
		s->len = 0;
	}
out:
	for (size_t i = 0; i < ncand; i++)
		free(cands[i].copy);
	free(cands);
	fz_reply_reset(&r);
}

static void set_config(struct tfs_topic *t, const char *name, const char *value)
{
	int rc = tfs_topic_set_config(t, name, value);

	FZ_CHECK(rc == 0, "%s=%s: %s", name, value, tfs_strerror(rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	uint8_t flags = fz_u8(&in), mmb_choice = fz_u8(&in), shape = fz_u8(&in);
	size_t nsizes = shape & 15, body_len, pos = 0;
	size_t sizes[16];
	const uint8_t *body;
	struct tfs_topic *t;
	struct tfs_plog *pl;
	struct tfs_node *n;
	const struct tfs_node_ops *ops;
	struct fz_reply r = { 0 };
	struct fuse_file_info fi;
	struct tfs_fh *fh;
	struct stream s = { 0 };
	uint8_t *stream = NULL;
	char mmb[16];

	if (!mnt)
		mnt = fz_mount_open(&mnt_dir);   /* one mount for the whole run */

	for (size_t i = 0; i < nsizes; i++)
		sizes[i] = fz_u16(&in);
	body = fz_take(&in, in.len, &body_len);
	if (flags & 8) {
		stream = malloc(body_len + 1);
		if (!stream)
			abort();
		memcpy(stream, body, body_len);
		fz_fix_crcs(stream, body_len);
		body = stream;
	}

	t = fz_topic(mnt, TOPIC, TOPIC_RECREATE_BYTES);
	s.max_message_bytes = flags & 2 ? 100 + 16 * (int32_t)mmb_choice : DEFAULT_MAX_MESSAGE_BYTES;
	s.log_append_time = flags & 4;
	snprintf(mmb, sizeof(mmb), "%d", (int)s.max_message_bytes);
	set_config(t, "max.message.bytes", mmb);
	set_config(t, "compression.type", flags & 1 ? "zstd" : "none");
	set_config(t, "message.timestamp.type", s.log_append_time ? "LogAppendTime" : "CreateTime");
	pl = tfs_topic_partition(t, 0);
	n = fz_node(mnt, TFS_NODE_BATCHES, t, 0);
	ops = tfs_kind_ops(n->kind);

	fh = fz_open_wronly(mnt, n, &fi);

	for (size_t w = 0; pos < body_len; w++) {
		size_t want = nsizes ? sizes[w % nsizes] : 0;
		size_t len = want == 0 || want > body_len - pos ? body_len - pos : want;
		one_write(ops, fh, pl, &s, body + pos, len);
		pos += len;
	}

	ops->flush(fz_req(&r), mnt, fh, &fi);
	fz_reply_check_once(&r, "flush");
	FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err == (!s.failed && s.len ? EINVAL : 0),
	         "flush with %zu bytes left (failed %d) replied %d", s.len, s.failed, r.err);
	fz_release(mnt, fh, &fi);
	fz_reply_reset(&r);

	fz_node_drop(mnt, n);
	tfs_topic_unref(t);
	free(s.buf);
	free(stream);
	return 0;
}
