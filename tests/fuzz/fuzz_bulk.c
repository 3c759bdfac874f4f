/* fuzz_bulk.c - the line assembler of T/P/.put and T/P/.append (fs/node_control.c),
 * driven through the kinds' own open/write/flush/release handlers on a real
 * engine, across arbitrary write(2) splits of streams up to 8 MiB.
 *
 * Input layout (missing bytes read as 0):
 *   byte 0   flags: bit 0 .put (else .append); bit 1 a small max.message.bytes
 *            (byte 1 chooses it: 100 + 8 * byte), so that records near the bound
 *            and writes of several units are cheap to reach; bit 2 amplify (the
 *            body is repeated, and write sizes count in 1 KiB units, up to
 *            8 MiB); bit 3 close without a FLUSH (RELEASE appends the last line)
 *   byte 1   max.message.bytes choice (bit 1)
 *   byte 2   low 4 bits: S, the number of write(2) sizes that follow; high 4
 *            bits: the amplification exponent (bit 2: 2^e repetitions)
 *   2*S      write(2) sizes (little-endian; used in turn; 0 = the whole rest;
 *            after 512 writes the rest is one write)
 *   rest     the body: the bytes written
 * Each write(2) reaches the handler as FUSE writes of at most 1 MiB, as the
 * kernel cuts them.
 *
 * Properties, checked against a reference model of the documented rules
 * (node_control.c's header comment): every FUSE write succeeds or fails exactly
 * when the model says, with the model's errno; a refused write appends nothing
 * (the log end offset stays); the records in the log are exactly the model's
 * records, in order; every batch fits max.message.bytes; each handler replies
 * once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fs/keyname.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "tests/fuzz/fz.h"

#define MAX_STREAM_BYTES (8u << 20)    /* the largest write(2) stream tried */
#define MAX_FUSE_WRITE (1u << 20)      /* the kernel's largest WRITE (256 pages) */
#define AMPLIFY_UNIT 1024              /* write sizes of amplified inputs */
#define MAX_WRITES 512                 /* write(2) calls of one input, at most */
#define TOPIC "f"
#define DEFAULT_MAX_MESSAGE_BYTES 1048588   /* Kafka's default */
#define TOPIC_RECREATE_BYTES (64 << 20)    /* a fresh topic once the log is this big */

static struct tfs_mount *mnt;
static char *mnt_dir;

/* ---- the reference model ------------------------------------------------------ */

struct mrec {
	uint8_t *key;                       /* NULL: keyless */
	size_t key_len;
	uint8_t *value;
	size_t value_len;
};

struct model {
	bool put;
	int32_t max_message_bytes;
	size_t payload_max, line_max;
	tfs_offset_t base;                  /* the log end before the first write */
	uint8_t *partial;                   /* the unterminated line so far */
	size_t plen, pcap;
	struct mrec *recs;
	size_t count, cap;
	/* .put is one transaction (node_control.c): the first failed write's error,
	 * and the marker its close or release appends when it holds records */
	int failed;
	tfs_offset_t markers;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

/* Parses one line the way the documentation says: 0 with *r filled, or the
 * negative errno of a refused line. */
static int model_line(const struct model *md, const uint8_t *line, size_t len, struct mrec *r)
{
	memset(r, 0, sizeof(*r));
	if (md->put) {
		const uint8_t *tab = memchr(line, '\t', len);
		size_t nlen;
		ssize_t klen;
		if (!tab)
			return -EINVAL;
		nlen = (size_t)(tab - line);
		if (nlen > TFS_KEYNAME_MAX)
			return -ENAMETOOLONG;
		r->key = xmalloc(nlen);
		klen = tfs_keyname_decode((const char *)line, nlen, r->key, nlen);
		if (klen < 0) {
			free(r->key);
			r->key = NULL;
			return -EINVAL;
		}
		r->key_len = (size_t)klen;
		line = tab + 1;
		len -= nlen + 1;
	}
	/* the exact bound the handler applies: one record alone in a batch */
	if ((int64_t)len > tfs_plog_value_max(md->max_message_bytes, r->key_len, !md->put)) {
		free(r->key);
		r->key = NULL;
		return -EFBIG;
	}
	r->value = xmalloc(len);
	if (len)
		memcpy(r->value, line, len);
	r->value_len = len;
	return 0;
}

static void model_push(struct model *md, const struct mrec *r)
{
	fz_reserve((void **)&md->recs, &md->cap, md->count + 1, sizeof(*md->recs));
	md->recs[md->count++] = *r;
}

static void mrec_free(struct mrec *r)
{
	free(r->key);
	free(r->value);
}

/* One write of buf (final: the closing of the handle, buf empty). Returns 0 or
 * the negative errno the write must fail with; a failure changes nothing. */
static int model_write(struct model *md, const uint8_t *buf, size_t size, bool final)
{
	size_t jlen = md->plen + size, start = 0, added = 0, rest;
	uint8_t *joined;
	struct mrec *tmp = NULL;
	size_t tcap = 0;
	int rc = 0;

	if (!final && !memchr(buf, '\n', size)) {
		/* the line goes on: no copy of what came before (a long line in many
		 * small writes would cost the square of its length) */
		if (jlen > md->line_max)
			return -EFBIG;
		fz_reserve((void **)&md->partial, &md->pcap, jlen, 1);
		memcpy(md->partial + md->plen, buf, size);
		md->plen = jlen;
		return 0;
	}
	joined = xmalloc(jlen);
	if (md->plen)
		memcpy(joined, md->partial, md->plen);
	if (size)
		memcpy(joined + md->plen, buf, size);
	for (;;) {
		uint8_t *nl = memchr(joined + start, '\n', jlen - start);
		size_t len;
		struct mrec r;
		if (!nl && !(final && start < jlen))
			break;
		len = nl ? (size_t)(nl - (joined + start)) : jlen - start;
		rc = model_line(md, joined + start, len, &r);
		if (rc < 0)
			break;
		fz_reserve((void **)&tmp, &tcap, added + 1, sizeof(*tmp));
		tmp[added++] = r;
		start = nl ? (size_t)(nl - joined) + 1 : jlen;
	}
	rest = jlen - start;
	if (rc == 0 && rest > md->line_max)
		rc = -EFBIG;
	if (rc < 0) {
		for (size_t i = 0; i < added; i++)
			mrec_free(&tmp[i]);
	} else {
		for (size_t i = 0; i < added; i++)
			model_push(md, &tmp[i]);
		memmove(joined, joined + start, rest);
		free(md->partial);
		md->partial = joined;
		md->plen = rest;
		md->pcap = jlen;
		joined = NULL;
	}
	free(tmp);
	free(joined);
	return rc;
}

static void model_release(struct model *md)
{
	for (size_t i = 0; i < md->count; i++)
		mrec_free(&md->recs[i]);
	free(md->recs);
	free(md->partial);
}

/* ---- the handle ------------------------------------------------------------------ */

/* One FUSE write of the handle, checked against the model. */
static void one_write(const struct tfs_node_ops *ops, struct tfs_fh *fh, struct tfs_plog *pl,
                      struct model *md, const uint8_t *buf, size_t size)
{
	struct fz_reply r = { 0 };
	struct fuse_file_info fi = { .flags = O_WRONLY, .fh = (uintptr_t)fh };
	tfs_offset_t before = fz_log_end(pl);
	int want = model_write(md, buf, size, false);

	tfs_fh_hold(fh);                    /* as ops.c does around a write */
	ops->write(fz_req(&r), mnt, fh, (const char *)buf, size, 0, &fi);
	tfs_fh_put(mnt, fh);
	fz_reply_check_once(&r, "write");
	if (want < 0 && md->put && md->failed == 0)
		md->failed = want;              /* the close aborts */
	if (want < 0) {
		FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err == -want,
		         "a write of %zu bytes: model refuses it with %s, the handler replied "
		         "kind %d err %d", size, tfs_strerror(want), (int)r.kind, r.err);
		FZ_CHECK(fz_log_end(pl) == before, "a refused write appended %lld records",
		         (long long)(fz_log_end(pl) - before));
	} else {
		FZ_CHECK(r.kind == FZ_REPLY_WRITE && r.count == size,
		         "a write of %zu bytes: model takes it, the handler replied kind %d err %d",
		         size, (int)r.kind, r.err);
		FZ_CHECK(fz_log_end(pl) == md->base + (tfs_offset_t)md->count + md->markers,
		         "log end %lld, the model holds %zu records from %lld",
		         (long long)fz_log_end(pl), md->count, (long long)md->base);
	}
	fz_reply_reset(&r);
}

/* The log holds exactly the model's records after md->base, in batches that fit the bound. */
static void check_log(struct tfs_plog *pl, const struct model *md, int32_t max_message_bytes)
{
	struct tfs_plog_cursor *c = NULL;
	struct tfs_record rec;
	struct tfs_batch_header bh;
	size_t i = 0;
	int rc;

	FZ_CHECK(fz_log_end(pl) == md->base + (tfs_offset_t)md->count + md->markers,
	         "log end %lld, model %zu from %lld", (long long)fz_log_end(pl), md->count,
	         (long long)md->base);
	rc = tfs_plog_cursor_open(pl, md->base, &c);
	FZ_CHECK(rc == 0, "cursor: %s", tfs_strerror(rc));
	while ((rc = tfs_plog_cursor_next(c, &rec, &bh)) == 1) {
		const struct mrec *m = &md->recs[i];
		if (bh.attributes & TFS_ATTR_CONTROL) {
			FZ_CHECK(md->put && i == md->count, "a marker at record %zu", i);
			continue;                   /* the .put's COMMIT or ABORT */
		}
		FZ_CHECK(i < md->count, "more records in the log than written");
		FZ_CHECK(rec.offset == md->base + (tfs_offset_t)i, "record %zu at offset %lld", i,
		         (long long)rec.offset);
		FZ_CHECK(tfs_batch_size(&bh) <= (size_t)max_message_bytes,
		         "a batch of %zu bytes over max.message.bytes %d", tfs_batch_size(&bh),
		         (int)max_message_bytes);
		FZ_CHECK(!rec.value_null, "record %zu is a tombstone", i);
		if (md->put)
			FZ_CHECK(!rec.key_null && rec.key.len == m->key_len &&
			         memcmp(rec.key.p, m->key, m->key_len) == 0,
			         "record %zu has another key", i);
		else
			FZ_CHECK(rec.key_null, "record %zu of .append has a key", i);
		FZ_CHECK(rec.value.len == m->value_len &&
		         (m->value_len == 0 || memcmp(rec.value.p, m->value, m->value_len) == 0),
		         "record %zu has another value (%zu bytes, model %zu)", i, rec.value.len,
		         m->value_len);
		i++;
	}
	FZ_CHECK(rc == 0, "cursor: %s", tfs_strerror(rc));
	FZ_CHECK(i == md->count, "the log holds %zu records, the model %zu", i, md->count);
	tfs_plog_cursor_close(c);
}

/* ---- the input ------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	uint8_t flags = fz_u8(&in), mmb_choice = fz_u8(&in), shape = fz_u8(&in);
	bool put = flags & 1, small = flags & 2, amplify = flags & 4, no_flush = flags & 8;
	size_t nsizes = shape & 15, body_len, stream_len, pos = 0;
	size_t sizes[16];
	const uint8_t *body;
	uint8_t *stream;
	struct tfs_topic *t;
	struct tfs_topic_config cfg;
	struct tfs_plog *pl;
	struct tfs_node *n;
	const struct tfs_node_ops *ops;
	struct fz_reply r = { 0 };
	struct fuse_file_info fi;
	struct tfs_fh *fh;
	struct model md = { .put = put };
	char mmb[16];
	int rc;

	if (!mnt)
		mnt = fz_mount_open(&mnt_dir);   /* one mount for the whole run */

	for (size_t i = 0; i < nsizes; i++)
		sizes[i] = (size_t)fz_u16(&in) * (amplify ? AMPLIFY_UNIT : 1);
	body = fz_take(&in, in.len, &body_len);
	stream_len = body_len;
	if (amplify && body_len > 0) {
		size_t reps = (size_t)1 << (shape >> 4);
		stream_len = body_len * reps < MAX_STREAM_BYTES ? body_len * reps : MAX_STREAM_BYTES;
	}
	stream = xmalloc(stream_len);
	for (size_t o = 0; o < stream_len; o += body_len) {
		size_t k = stream_len - o < body_len ? stream_len - o : body_len;
		memcpy(stream + o, body, k);
	}

	t = fz_topic(mnt, TOPIC, TOPIC_RECREATE_BYTES);
	snprintf(mmb, sizeof(mmb), "%d", small ? 100 + 8 * (int)mmb_choice : DEFAULT_MAX_MESSAGE_BYTES);
	rc = tfs_topic_set_config(t, "max.message.bytes", mmb);
	FZ_CHECK(rc == 0, "max.message.bytes=%s: %s", mmb, tfs_strerror(rc));
	tfs_topic_get_config(t, &cfg);
	md.max_message_bytes = cfg.max_message_bytes;
	md.payload_max = tfs_record_payload_max(cfg.max_message_bytes);
	/* node_control.c line_max: a .put line is a name, a tab and the payload */
	md.line_max = md.payload_max + TFS_KEYNAME_MAX + 1;
	pl = tfs_topic_partition(t, 0);
	md.base = fz_log_end(pl);
	n = fz_node(mnt, put ? TFS_NODE_PUT : TFS_NODE_APPEND, t, 0);
	ops = tfs_kind_ops(n->kind);

	fh = fz_open_wronly(mnt, n, &fi);

	for (size_t w = 0; pos < stream_len; w++) {
		/* past MAX_WRITES the rest is one write(2): bounds an input's cost */
		size_t want = nsizes && w < MAX_WRITES ? sizes[w % nsizes] : 0;
		size_t len = want == 0 || want > stream_len - pos ? stream_len - pos : want;
		/* the kernel cuts one write(2) into WRITEs of at most max_write bytes */
		for (size_t done = 0; done < len;) {
			size_t k = len - done < MAX_FUSE_WRITE ? len - done : MAX_FUSE_WRITE;
			one_write(ops, fh, pl, &md, stream + pos + done, k);
			done += k;
		}
		pos += len;
	}

	if (!no_flush) {
		tfs_offset_t before = fz_log_end(pl);
		int want = md.plen ? model_write(&md, NULL, 0, true) : 0;
		md.plen = 0;                    /* appended, or refused for good */
		if (put) {
			if (want < 0 && md.failed == 0)
				md.failed = want;
			if (md.count > 0 && md.failed < 0)
				want = md.failed;       /* aborted: the close says why */
			md.markers += md.count > 0;
		}
		ops->flush(fz_req(&r), mnt, fh, &fi);
		fz_reply_check_once(&r, "flush");
		FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err == -want,
		         "flush: model %s, the handler replied %d", tfs_strerror(want), r.err);
		if (want < 0 && !put)
			FZ_CHECK(fz_log_end(pl) == before, "a refused last line was appended");
	} else if (put) {
		md.plen = 0;                    /* a release without a close aborts */
		md.markers += md.count > 0;
	} else if (md.plen) {
		model_write(&md, NULL, 0, true);
		md.plen = 0;
	}
	fz_release(mnt, fh, &fi);
	fz_reply_reset(&r);

	check_log(pl, &md, cfg.max_message_bytes);

	fz_node_drop(mnt, n);
	tfs_topic_unref(t);
	model_release(&md);
	free(stream);
	return 0;
}
