/* batch_codec.c - Kafka RecordBatch v2: header, records, builder.
 *
 * The byte layout is the OFFSET / SIZE table in batch_codec.h; this file encodes it
 * field by field and never overlays a struct on the bytes.
 *
 * Reading. A batch is read in three layers, each usable alone:
 *   1. tfs_batch_header_decode: the fixed 61 bytes, enough to learn the batch size
 *      (recovery uses -EAGAIN to recognise a torn tail);
 *   2. tfs_batch_check_crc: (1) plus "the buffer is exactly this batch" plus CRC-32C;
 *   3. tfs_record_iter_*: the records region, decompressed (compress.c), then
 *      parsed one record at a time. Every length is checked against the end of the
 *      region (or of the record) before it is used, so the parser reads no byte
 *      outside its input whatever the input is; tfs_batch_verify is (2) plus (3) run
 *      to the end.
 * A record is valid if and only if: its length varint is well-formed and the declared
 * body fits the region; inside the body, attributes, timestamp delta, offset delta,
 * key, value, header count and every header parse without crossing the body's end;
 * key and value lengths are >= -1; header count and header key lengths are >= 0; and
 * the parse ends exactly at the body's end. The region is valid if records count
 * valid records consume it exactly.
 *
 * Where this is stricter than Kafka's reader: a key or value length below -1 is
 * corruption here (Java reads any negative length as null; no writer emits one), and
 * a batch with records count 0 must have an empty records region (Java skips the
 * region of an empty batch). Varints match Java's ByteUtils exactly, including its
 * leniency: a fifth (tenth) byte may carry bits beyond 32 (64), which are dropped.
 *
 * Arithmetic on untrusted values (base offset + offset delta, base timestamp +
 * timestamp delta) wraps instead of overflowing, so hostile input cannot reach
 * undefined behaviour; a wrapped offset is garbage but harmless to the codec.
 *
 * Compression. The records region of a compressed batch is decompressed as a whole
 * by compress.c (every codec, framed as Kafka frames it) into the iterator's
 * buffer, bounded by max_decompressed; the builder compresses it as a whole with
 * the codec of its attributes. Contexts live in the iterator and the builder and
 * are reused from batch to batch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>


#include "engine/format/batch_codec.h"
#include "engine/format/compress.h"

/* Byte offsets of the header fields (see the table in batch_codec.h). */
enum {
	OFF_BASE_OFFSET = 0,
	OFF_LENGTH = 8,
	OFF_LEADER_EPOCH = 12,
	OFF_MAGIC = 16,
	OFF_CRC = 17,
	OFF_ATTRIBUTES = 21,
	OFF_LAST_OFFSET_DELTA = 23,
	OFF_BASE_TIMESTAMP = 27,
	OFF_MAX_TIMESTAMP = 35,
	OFF_PRODUCER_ID = 43,
	OFF_PRODUCER_EPOCH = 51,
	OFF_BASE_SEQUENCE = 53,
	OFF_RECORDS_COUNT = 57,
};

/* The smallest legal length field: a header with no records. */
#define BATCH_MIN_LENGTH (TFS_BATCH_HEADER_BYTES - TFS_BATCH_LOG_OVERHEAD)
/* Bytes needed before the magic byte can be read. */
#define MAGIC_AVAIL (OFF_MAGIC + 1)
/* Kafka's "no value" for timestamps, producer fields and leader epoch. */
#define NONE_VALUE (-1)
/* A length of -1 encodes a null key, value or header value. */
#define NULL_LENGTH (-1)

#define VARINT_MAX_BYTES 5
#define VARLONG_MAX_BYTES 10
#define VARINT_MORE 0x80u        /* continuation bit of a LEB128 group */
#define VARINT_PAYLOAD 0x7fu
#define VARINT_GROUP_BITS 7

/* A record attribute byte: unused by Kafka, always written 0. */
#define RECORD_ATTRIBUTES 0
/* A header is at least a key-length and a value-length varint: bounds header count. */
#define HEADER_MIN_BYTES 2

/* Decompression limits: the default cap on a body (the header's 64 MiB), the
 * smallest buffer worth allocating, and the first guess at an unknown size as a
 * multiple of the compressed size. */
#define DEFAULT_MAX_DECOMPRESSED ((size_t)64 << 20)
#define BUF_MIN_BYTES ((size_t)64 << 10)

static int corrupt(const char **why, const char *reason)
{
	if (why)
		*why = reason;
	return TFS_ECORRUPT;
}

/* ---- big-endian fields ---------------------------------------------------------- */

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* a + b with two's-complement wrap-around instead of undefined overflow. */
static int64_t add_wrap(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* ---- varints -------------------------------------------------------------------- */

static uint32_t zigzag32(int32_t v)
{
	return ((uint32_t)v << 1) ^ (v < 0 ? UINT32_MAX : 0);
}

static uint64_t zigzag64(int64_t v)
{
	return ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0);
}

static size_t uleb_put(uint8_t *p, uint64_t u)
{
	size_t n = 0;
	while (u >= VARINT_MORE) {
		p[n++] = (uint8_t)(u | VARINT_MORE);
		u >>= VARINT_GROUP_BITS;
	}
	p[n++] = (uint8_t)u;
	return n;
}

static size_t uleb_size(uint64_t u)
{
	size_t n = 1;
	while (u >= VARINT_MORE) {
		u >>= VARINT_GROUP_BITS;
		n++;
	}
	return n;
}

/* Reads at most max_bytes groups; bits shifted past 64 are dropped, as in Java. */
static int uleb_get(const uint8_t *p, const uint8_t *end, size_t max_bytes, uint64_t *u)
{
	size_t avail = (size_t)(end - p);
	uint64_t acc = 0;
	for (size_t i = 0; i < max_bytes && i < avail; i++) {
		acc |= (uint64_t)(p[i] & VARINT_PAYLOAD) << (VARINT_GROUP_BITS * i);
		if (!(p[i] & VARINT_MORE)) {
			*u = acc;
			return (int)(i + 1);
		}
	}
	return TFS_ECORRUPT;   /* ran off the input, or a continuation bit on the last byte */
}

/* uleb_get with the one- and two-byte forms, which are nearly all of a record's
 * varints (lengths below 8 KiB, deltas below 64), decoded without the loop. */
static inline int uleb_get_fast(const uint8_t *p, const uint8_t *end, size_t max_bytes,
                                uint64_t *u)
{
	if (end - p >= 2) {
		if (!(p[0] & VARINT_MORE)) {
			*u = p[0];
			return 1;
		}
		if (!(p[1] & VARINT_MORE)) {
			*u = (p[0] & VARINT_PAYLOAD) | (uint64_t)p[1] << VARINT_GROUP_BITS;
			return 2;
		}
	}
	return uleb_get(p, end, max_bytes, u);
}

static inline int varint_get(const uint8_t *p, const uint8_t *end, int32_t *v)
{
	uint64_t u;
	int n = uleb_get_fast(p, end, VARINT_MAX_BYTES, &u);
	if (n > 0) {
		uint32_t z = (uint32_t)u;   /* a fifth byte's bits past 32 are dropped */
		*v = (int32_t)((z >> 1) ^ (0u - (z & 1)));
	}
	return n;
}

static inline int varlong_get(const uint8_t *p, const uint8_t *end, int64_t *v)
{
	uint64_t u;
	int n = uleb_get_fast(p, end, VARLONG_MAX_BYTES, &u);
	if (n > 0)
		*v = (int64_t)((u >> 1) ^ (0u - (u & 1)));
	return n;
}

size_t tfs_varint_put(uint8_t *p, int32_t v)
{
	return uleb_put(p, zigzag32(v));
}

size_t tfs_varlong_put(uint8_t *p, int64_t v)
{
	return uleb_put(p, zigzag64(v));
}

int tfs_varint_get(const uint8_t *p, const uint8_t *end, int32_t *v)
{
	return varint_get(p, end, v);
}

int tfs_varlong_get(const uint8_t *p, const uint8_t *end, int64_t *v)
{
	return varlong_get(p, end, v);
}

static size_t varint_size(int32_t v)
{
	return uleb_size(zigzag32(v));
}

static size_t varlong_size(int64_t v)
{
	return uleb_size(zigzag64(v));
}

const char *tfs_codec_name(int codec)
{
	static const char *const names[] = {
		[TFS_CODEC_NONE] = "none", [TFS_CODEC_GZIP] = "gzip", [TFS_CODEC_SNAPPY] = "snappy",
		[TFS_CODEC_LZ4] = "lz4", [TFS_CODEC_ZSTD] = "zstd",
	};

	return codec >= TFS_CODEC_NONE && codec <= TFS_CODEC_ZSTD ? names[codec] : NULL;
}

/* ---- header --------------------------------------------------------------------- */

int tfs_batch_header_decode(const uint8_t *buf, size_t avail,
                            struct tfs_batch_header *h, const char **why)
{
	int8_t magic;
	int32_t length;

	if (avail < MAGIC_AVAIL)
		return -EAGAIN;
	magic = (int8_t)buf[OFF_MAGIC];
	if (magic != TFS_BATCH_MAGIC) {
		if (magic == 0 || magic == 1) {
			if (why)
				*why = "message format v0/v1 (magic < 2)";
			return TFS_EUNSUPPORTED;
		}
		return corrupt(why, "bad magic byte");
	}
	length = (int32_t)get_be32(buf + OFF_LENGTH);
	if (length < BATCH_MIN_LENGTH)
		return corrupt(why, "batch length below the header size");
	if (avail < TFS_BATCH_HEADER_BYTES)
		return -EAGAIN;

	h->base_offset = (tfs_offset_t)get_be64(buf + OFF_BASE_OFFSET);
	h->length = length;
	h->leader_epoch = (int32_t)get_be32(buf + OFF_LEADER_EPOCH);
	h->magic = magic;
	h->crc = get_be32(buf + OFF_CRC);
	h->attributes = (int16_t)get_be16(buf + OFF_ATTRIBUTES);
	h->last_offset_delta = (int32_t)get_be32(buf + OFF_LAST_OFFSET_DELTA);
	h->base_timestamp = (int64_t)get_be64(buf + OFF_BASE_TIMESTAMP);
	h->max_timestamp = (int64_t)get_be64(buf + OFF_MAX_TIMESTAMP);
	h->producer_id = (int64_t)get_be64(buf + OFF_PRODUCER_ID);
	h->producer_epoch = (int16_t)get_be16(buf + OFF_PRODUCER_EPOCH);
	h->base_sequence = (int32_t)get_be32(buf + OFF_BASE_SEQUENCE);
	h->records_count = (int32_t)get_be32(buf + OFF_RECORDS_COUNT);
	/* Offsets are never negative, and base + last delta must not overflow
	 * (tfs_batch_last_offset is plain arithmetic). */
	if (h->base_offset < 0)
		return corrupt(why, "negative base offset");
	if (h->last_offset_delta < 0)
		return corrupt(why, "negative last offset delta");
	if (h->base_offset > INT64_MAX - h->last_offset_delta)
		return corrupt(why, "last offset overflows");
	return 0;
}

/* Writes every header field of h except the CRC (which covers the body too). */
static void header_put(uint8_t *out, const struct tfs_batch_header *h)
{
	put_be64(out + OFF_BASE_OFFSET, (uint64_t)h->base_offset);
	put_be32(out + OFF_LENGTH, (uint32_t)h->length);
	put_be32(out + OFF_LEADER_EPOCH, (uint32_t)h->leader_epoch);
	out[OFF_MAGIC] = TFS_BATCH_MAGIC;
	put_be32(out + OFF_CRC, 0);
	put_be16(out + OFF_ATTRIBUTES, (uint16_t)h->attributes);
	put_be32(out + OFF_LAST_OFFSET_DELTA, (uint32_t)h->last_offset_delta);
	put_be64(out + OFF_BASE_TIMESTAMP, (uint64_t)h->base_timestamp);
	put_be64(out + OFF_MAX_TIMESTAMP, (uint64_t)h->max_timestamp);
	put_be64(out + OFF_PRODUCER_ID, (uint64_t)h->producer_id);
	put_be16(out + OFF_PRODUCER_EPOCH, (uint16_t)h->producer_epoch);
	put_be32(out + OFF_BASE_SEQUENCE, (uint32_t)h->base_sequence);
	put_be32(out + OFF_RECORDS_COUNT, (uint32_t)h->records_count);
}

static uint32_t batch_crc(const uint8_t *batch, size_t size)
{
	return tfs_crc32c(0, batch + TFS_BATCH_CRC_START, size - TFS_BATCH_CRC_START);
}

/* Decodes the header of the one whole batch that buf must hold exactly. */
static int frame_decode(const uint8_t *buf, size_t len, struct tfs_batch_header *h,
                        const char **why)
{
	size_t size;
	int rc = tfs_batch_header_decode(buf, len, h, why);
	if (rc == -EAGAIN)
		return corrupt(why, "batch shorter than its header");
	if (rc)
		return rc;
	size = tfs_batch_size(h);
	if (size > len)
		return corrupt(why, "batch truncated");
	if (size < len)
		return corrupt(why, "bytes after the end of the batch");
	return 0;
}

int tfs_batch_check_crc(const uint8_t *buf, size_t len, const char **why)
{
	struct tfs_batch_header h;
	int rc = frame_decode(buf, len, &h, why);
	if (rc)
		return rc;
	if (batch_crc(buf, len) != h.crc)
		return corrupt(why, "crc mismatch");
	return 0;
}

/* ---- records -------------------------------------------------------------------- */

/* Reads a length-prefixed byte string at *pp, not past end; advances *pp. */
static inline int bytes_get(const uint8_t **pp, const uint8_t *end, bool nullable,
                            struct tfs_slice *s, bool *is_null, const char **why)
{
	int32_t n;
	int rc = varint_get(*pp, end, &n);
	if (rc < 0)
		return corrupt(why, "bad length varint");
	*pp += rc;
	if (n == NULL_LENGTH && nullable) {
		*s = tfs_slice_make(NULL, 0);
		*is_null = true;
		return 0;
	}
	if (n < 0)
		return corrupt(why, nullable ? "length below -1" : "negative header key length");
	if ((size_t)n > (size_t)(end - *pp))
		return corrupt(why, "length past the end of the record");
	*s = tfs_slice_make(*pp, (size_t)n);
	*is_null = false;
	*pp += n;
	return 0;
}

/* Parses one header at *pp, not past end; advances *pp. */
static int header_get(const uint8_t **pp, const uint8_t *end, struct tfs_header *h,
                      const char **why)
{
	bool key_null;
	int rc = bytes_get(pp, end, false, &h->key, &key_null, why);
	if (rc)
		return rc;
	return bytes_get(pp, end, true, &h->value, &h->value_null, why);
}

int tfs_header_next(struct tfs_slice *cursor, struct tfs_header *h)
{
	const uint8_t *p = cursor->p;
	int rc;
	if (cursor->len == 0)
		return 0;
	rc = header_get(&p, cursor->p + cursor->len, h, NULL);
	if (rc)
		return rc;
	cursor->len -= (size_t)(p - cursor->p);
	cursor->p = p;
	return 1;
}

int tfs_record_headers(const struct tfs_record *r, struct tfs_header **hdrs, size_t *cap)
{
	struct tfs_slice cur = r->headers_raw;
	uint32_t n = 0;

	if (r->header_count > *cap) {
		size_t ncap = *cap ? *cap : 8;
		struct tfs_header *p;
		while (ncap < r->header_count)
			ncap *= 2;
		p = realloc(*hdrs, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*hdrs = p;
		*cap = ncap;
	}
	while (n < r->header_count && tfs_header_next(&cur, &(*hdrs)[n]) == 1)
		n++;
	return n == r->header_count ? 0 : TFS_ECORRUPT;
}

void tfs_record_iter_init(struct tfs_record_iter *it)
{
	memset(it, 0, sizeof(*it));
	it->remaining = -1;   /* no batch: next fails until a reset succeeds */
}

void tfs_record_iter_trim(struct tfs_record_iter *it, size_t keep_bytes)
{
	if (it->z.cap <= keep_bytes)
		return;
	tfs_inflater_trim(&it->z, keep_bytes);
	it->remaining = -1;           /* what it held is gone */
	it->p = it->end = NULL;
}

void tfs_record_iter_release(struct tfs_record_iter *it)
{
	if (!it)
		return;
	tfs_inflater_release(&it->z);
	tfs_record_iter_init(it);
}

int tfs_batch_has_tombstone(const uint8_t *buf, size_t len)
{
	struct tfs_record_iter it;
	struct tfs_record r;
	const char *why = NULL;
	int rc;

	tfs_record_iter_init(&it);
	rc = tfs_record_iter_reset(&it, buf, len, &why);
	while (rc == 0 && (rc = tfs_record_iter_next(&it, &r, &why)) == 1) {
		if (!r.key_null && r.value_null && !(it.h.attributes & TFS_ATTR_CONTROL))
			break;
		rc = 0;
	}
	tfs_record_iter_release(&it);
	return rc;
}

/* Decompresses the records region into the iterator's buffer and points p/end at it. */
static int inflate_body(struct tfs_record_iter *it, const uint8_t *src, size_t src_len,
                        const char **why)
{
	size_t limit = it->max_decompressed ? it->max_decompressed : DEFAULT_MAX_DECOMPRESSED;
	size_t out_len = 0;
	int rc = tfs_inflate(&it->z, tfs_batch_codec(&it->h), src, src_len, limit, &out_len, why);

	if (rc)
		return rc;
	it->p = it->z.buf;
	it->end = it->z.buf + out_len;
	return 0;
}

int tfs_record_iter_reset(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
                          const char **why)
{
	const uint8_t *body;
	size_t body_len;
	int rc;

	it->remaining = -1;
	it->p = it->end = NULL;
	rc = frame_decode(buf, len, &it->h, why);
	if (rc)
		goto out;
	if (it->h.records_count < 0) {
		rc = corrupt(why, "negative records count");
		goto out;
	}
	body = buf + TFS_BATCH_HEADER_BYTES;
	body_len = len - TFS_BATCH_HEADER_BYTES;
	switch (tfs_batch_codec(&it->h)) {
	case TFS_CODEC_NONE:
		it->p = body;
		it->end = body + body_len;
		break;
	case TFS_CODEC_GZIP:
	case TFS_CODEC_SNAPPY:
	case TFS_CODEC_LZ4:
	case TFS_CODEC_ZSTD:
		if (body_len == 0) {   /* nothing compressed: an empty region */
			it->p = it->end = body;
			break;
		}
		rc = inflate_body(it, body, body_len, why);
		if (rc)
			goto out;
		break;
	default:
		rc = corrupt(why, "unknown compression codec");
		goto out;
	}
	it->remaining = it->h.records_count;
	it->last_delta = -1;
out:
	if (rc)
		it->p = it->end = NULL;
	return rc;
}

/* Parses the record at it->p into *r; on success it->p moves past it. */
static int record_parse(struct tfs_record_iter *it, struct tfs_record *r, const char **why)
{
	const uint8_t *start = it->p, *p = it->p, *body_end;
	uint32_t header_count;
	int32_t body_len, hcount;
	int rc;

	rc = varint_get(p, it->end, &body_len);
	if (rc < 0)
		return corrupt(why, "bad record length varint");
	p += rc;
	if (body_len < 0 || (size_t)body_len > (size_t)(it->end - p))
		return corrupt(why, "record length past the end of the batch");
	body_end = p + body_len;

	if (p == body_end)
		return corrupt(why, "record has no attributes byte");
	p++;   /* record attributes: unused */
	rc = varlong_get(p, body_end, &r->timestamp_delta);
	if (rc < 0)
		return corrupt(why, "bad timestamp delta varint");
	p += rc;
	rc = varint_get(p, body_end, &r->offset_delta);
	if (rc < 0)
		return corrupt(why, "bad offset delta varint");
	p += rc;
	/* Offsets rise within a batch and end at its last offset: a record that
	 * breaks this would be read at another record's offset. */
	if (r->offset_delta <= it->last_delta || r->offset_delta > it->h.last_offset_delta)
		return corrupt(why, "record offset delta out of order or past the last offset delta");
	rc = bytes_get(&p, body_end, true, &r->key, &r->key_null, why);
	if (rc)
		return rc;
	rc = bytes_get(&p, body_end, true, &r->value, &r->value_null, why);
	if (rc)
		return rc;
	rc = varint_get(p, body_end, &hcount);
	if (rc < 0)
		return corrupt(why, "bad header count varint");
	p += rc;
	if (hcount < 0 || (size_t)hcount > (size_t)(body_end - p) / HEADER_MIN_BYTES)
		return corrupt(why, "header count does not fit the record");
	header_count = (uint32_t)hcount;
	r->headers_raw.p = p;
	for (uint32_t i = 0; i < header_count; i++) {
		struct tfs_header h;
		rc = header_get(&p, body_end, &h, why);
		if (rc)
			return rc;
	}
	if (p != body_end)
		return corrupt(why, "record length does not match its content");

	r->headers_raw.len = (size_t)(p - r->headers_raw.p);
	r->header_count = header_count;
	r->offset = add_wrap(it->h.base_offset, r->offset_delta);
	if (it->h.attributes & TFS_ATTR_LOG_APPEND_TIME)
		r->timestamp = it->h.max_timestamp;
	else
		r->timestamp = add_wrap(it->h.base_timestamp, r->timestamp_delta);
	r->raw = tfs_slice_make(start, (size_t)(body_end - start));
	it->p = body_end;
	it->last_delta = r->offset_delta;
	return 0;
}

int tfs_record_iter_next(struct tfs_record_iter *it, struct tfs_record *r, const char **why)
{
	int rc;
	if (it->remaining < 0)
		return corrupt(why, "iterator holds no valid batch");
	if (it->remaining == 0) {
		if (it->p != it->end) {
			rc = corrupt(why, "bytes after the last record");
			goto fail;
		}
		return 0;
	}
	rc = record_parse(it, r, why);
	if (rc)
		goto fail;
	it->remaining--;
	return 1;
fail:
	it->remaining = -1;   /* errors are sticky until the next reset */
	return rc;
}

int tfs_record_iter_verify(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
                           const char **why)
{
	struct tfs_record r;
	int rc = tfs_batch_check_crc(buf, len, why);
	if (rc) {
		it->remaining = -1;   /* as after a failed reset: holds no batch */
		it->p = it->end = NULL;
		return rc;
	}
	rc = tfs_record_iter_reset(it, buf, len, why);
	while (rc == 0 && (rc = tfs_record_iter_next(it, &r, why)) == 1)
		rc = 0;
	return rc;
}

int tfs_batch_verify(const uint8_t *buf, size_t len, const char **why)
{
	struct tfs_record_iter it;
	int rc;
	tfs_record_iter_init(&it);
	rc = tfs_record_iter_verify(&it, buf, len, why);
	tfs_record_iter_release(&it);
	return rc;
}

/* ---- builder -------------------------------------------------------------------- */

static int grow(uint8_t **buf, size_t *cap, size_t want)
{
	size_t ncap = *cap ? *cap : BUF_MIN_BYTES;
	uint8_t *nb;
	if (*cap >= want)
		return 0;
	while (ncap < want)
		ncap = ncap <= SIZE_MAX / 2 ? ncap * 2 : want;
	nb = realloc(*buf, ncap);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = ncap;
	return 0;
}

static const struct tfs_batch_params params_none = {
	.base_offset = 0,
	.attributes = 0,
	.leader_epoch = NONE_VALUE,
	.producer_id = NONE_VALUE,
	.producer_epoch = NONE_VALUE,
	.base_sequence = NONE_VALUE,
	.base_timestamp = NONE_VALUE,
	.zstd_level = 0,
};

void tfs_batch_builder_init(struct tfs_batch_builder *b)
{
	memset(b, 0, sizeof(*b));
	tfs_batch_builder_reset(b, &params_none);
}

void tfs_batch_builder_release(struct tfs_batch_builder *b)
{
	if (!b)
		return;
	free(b->rec);
	free(b->out);
	tfs_deflater_release(&b->z);
	tfs_batch_builder_init(b);
}

void tfs_batch_builder_reset(struct tfs_batch_builder *b, const struct tfs_batch_params *p)
{
	b->params = *p;
	b->rec_len = 0;
	b->out_len = 0;
	b->count = 0;
	b->last_offset_delta = -1;   /* so the first tfs_batch_builder_add gets delta 0 */
	b->have_ts = false;
	b->base_ts = (p->attributes & TFS_ATTR_DELETE_HORIZON) ? p->base_timestamp : NONE_VALUE;
	b->max_ts = NONE_VALUE;
}

/* An uncompressed batch's records are encoded straight into out, after the
 * header, saving a copy of the whole body at finish; a compressed batch's go to
 * rec and are compressed into out. */
static bool records_direct(const struct tfs_batch_builder *b)
{
	return (b->params.attributes & TFS_ATTR_CODEC_MASK) == TFS_CODEC_NONE;
}

static uint8_t *records_base(const struct tfs_batch_builder *b)
{
	return records_direct(b) ? b->out + TFS_BATCH_HEADER_BYTES : b->rec;
}

/* Encoded size of a nullable byte string, or SIZE_MAX if Kafka cannot hold it. */
static size_t bytes_size(struct tfs_slice s, bool is_null)
{
	if (is_null)
		return varint_size(NULL_LENGTH);
	if (s.len > INT32_MAX)
		return SIZE_MAX;
	return varint_size((int32_t)s.len) + s.len;
}

static uint8_t *bytes_put(uint8_t *p, struct tfs_slice s, bool is_null)
{
	if (is_null)
		return p + tfs_varint_put(p, NULL_LENGTH);
	p += tfs_varint_put(p, (int32_t)s.len);
	if (s.len)
		memcpy(p, s.p, s.len);
	return p + s.len;
}

/* Adds a part to a record body size; SIZE_MAX once past what an int32 can declare. */
static size_t size_add(size_t total, size_t part)
{
	if (part > (size_t)INT32_MAX || total > (size_t)INT32_MAX - part)
		return SIZE_MAX;
	return total + part;
}

int tfs_batch_builder_add_at(struct tfs_batch_builder *b, const struct tfs_record_in *r)
{
	bool horizon = b->params.attributes & TFS_ATTR_DELETE_HORIZON;
	int64_t base = (b->have_ts || horizon) ? b->base_ts : r->timestamp;
	int64_t ts_delta = (int64_t)((uint64_t)r->timestamp - (uint64_t)base);
	size_t body;
	uint8_t *p;
	int rc;

	if (r->offset_delta <= b->last_offset_delta)
		return -EINVAL;   /* deltas strictly increase, starting at >= 0 */
	if (r->header_count > (uint32_t)INT32_MAX || b->count == INT32_MAX)
		return -EMSGSIZE;

	body = sizeof(uint8_t) + varlong_size(ts_delta) + varint_size(r->offset_delta);
	body = size_add(body, bytes_size(r->key, r->key_null));
	body = size_add(body, bytes_size(r->value, r->value_null));
	body = size_add(body, varint_size((int32_t)r->header_count));
	for (uint32_t i = 0; i < r->header_count; i++) {
		body = size_add(body, bytes_size(r->headers[i].key, false));
		body = size_add(body, bytes_size(r->headers[i].value, r->headers[i].value_null));
	}
	if (body == SIZE_MAX)
		return -EMSGSIZE;
	rc = tfs_batch_builder_reserve(b, varint_size((int32_t)body) + body);
	if (rc)
		return rc;

	p = records_base(b) + b->rec_len;
	p += tfs_varint_put(p, (int32_t)body);
	*p++ = RECORD_ATTRIBUTES;
	p += tfs_varlong_put(p, ts_delta);
	p += tfs_varint_put(p, r->offset_delta);
	p = bytes_put(p, r->key, r->key_null);
	p = bytes_put(p, r->value, r->value_null);
	p += tfs_varint_put(p, (int32_t)r->header_count);
	for (uint32_t i = 0; i < r->header_count; i++) {
		p = bytes_put(p, r->headers[i].key, false);
		p = bytes_put(p, r->headers[i].value, r->headers[i].value_null);
	}
	b->rec_len = (size_t)(p - records_base(b));

	if (!b->have_ts) {
		b->base_ts = base;
		b->max_ts = r->timestamp;
		b->have_ts = true;
	} else if (r->timestamp > b->max_ts) {
		b->max_ts = r->timestamp;
	}
	b->count++;
	b->last_offset_delta = r->offset_delta;
	return 0;
}

int tfs_batch_builder_add(struct tfs_batch_builder *b, const struct tfs_record_in *r)
{
	struct tfs_record_in next = *r;
	if (b->last_offset_delta == INT32_MAX)
		return -EMSGSIZE;
	/* One past the last delta: the count of records added, when there are no gaps. */
	next.offset_delta = b->last_offset_delta + 1;
	return tfs_batch_builder_add_at(b, &next);
}

size_t tfs_batch_builder_size_estimate(const struct tfs_batch_builder *b)
{
	return TFS_BATCH_HEADER_BYTES + b->rec_len;
}

/* Compresses the records into b->out after the header; *body_len gets the size. */
static int deflate_body(struct tfs_batch_builder *b, int codec, size_t *body_len)
{
	size_t bound = tfs_deflate_bound(codec, b->rec_len);
	int rc;

	if (bound == 0)
		return -EMSGSIZE;
	rc = grow(&b->out, &b->out_cap, TFS_BATCH_HEADER_BYTES + bound);
	if (rc)
		return rc;
	return tfs_deflate(&b->z, codec, b->params.zstd_level, b->rec, b->rec_len,
	                   b->out + TFS_BATCH_HEADER_BYTES, bound, body_len);
}

int tfs_batch_builder_finish(struct tfs_batch_builder *b, int32_t last_offset_delta,
                             const uint8_t **out, size_t *len)
{
	struct tfs_batch_header h;
	size_t body_len = 0, total;
	int rc;

	if (b->count == 0)
		return -EINVAL;   /* an empty batch is tfs_batch_write_empty's job */
	if (last_offset_delta < 0)
		last_offset_delta = b->last_offset_delta;
	if (last_offset_delta < b->last_offset_delta)
		return -EINVAL;

	switch ((enum tfs_codec)(b->params.attributes & TFS_ATTR_CODEC_MASK)) {
	case TFS_CODEC_NONE:
		/* the records were encoded in place (records_direct), out grown for each */
		body_len = b->rec_len;
		break;
	case TFS_CODEC_GZIP:
	case TFS_CODEC_SNAPPY:
	case TFS_CODEC_LZ4:
	case TFS_CODEC_ZSTD:
		rc = deflate_body(b, b->params.attributes & TFS_ATTR_CODEC_MASK, &body_len);
		if (rc)
			return rc;
		break;
	default:
		return -EINVAL;
	}
	if (body_len > (size_t)INT32_MAX - BATCH_MIN_LENGTH)
		return -EMSGSIZE;
	total = TFS_BATCH_HEADER_BYTES + body_len;

	h.base_offset = b->params.base_offset;
	h.length = (int32_t)(total - TFS_BATCH_LOG_OVERHEAD);
	h.leader_epoch = b->params.leader_epoch;
	h.magic = TFS_BATCH_MAGIC;
	h.crc = 0;
	h.attributes = b->params.attributes;
	h.last_offset_delta = last_offset_delta;
	h.base_timestamp = b->base_ts;
	h.max_timestamp = b->max_ts;
	h.producer_id = b->params.producer_id;
	h.producer_epoch = b->params.producer_epoch;
	h.base_sequence = b->params.base_sequence;
	h.records_count = b->count;
	header_put(b->out, &h);
	put_be32(b->out + OFF_CRC, batch_crc(b->out, total));

	b->out_len = total;
	*out = b->out;
	*len = total;
	return 0;
}

void tfs_batch_write_empty(const struct tfs_batch_header *h,
                           uint8_t out[TFS_BATCH_HEADER_BYTES])
{
	/* Kept: timestamp type, transactional, control. Dropped: codec, delete horizon. */
	const int16_t kept = TFS_ATTR_LOG_APPEND_TIME | TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL;
	struct tfs_batch_header e = *h;

	e.length = BATCH_MIN_LENGTH;
	e.magic = TFS_BATCH_MAGIC;
	e.attributes = (int16_t)(h->attributes & kept);
	e.base_timestamp = NONE_VALUE;
	e.records_count = 0;
	header_put(out, &e);
	put_be32(out + OFF_CRC, batch_crc(out, TFS_BATCH_HEADER_BYTES));
}

int tfs_record_decode_one(const struct tfs_batch_header *h, const uint8_t *raw, size_t len,
                          struct tfs_record *r, const char **why)
{
	struct tfs_record_iter it;
	int rc;

	memset(&it, 0, sizeof(it));
	it.h = *h;
	it.p = raw;
	it.end = raw + len;
	it.remaining = 1;
	it.last_delta = -1;           /* one record: only the batch's bounds apply */
	rc = record_parse(&it, r, why);
	if (rc == 0 && it.p != it.end)
		rc = corrupt(why, "bytes after the record");
	return rc;
}

int tfs_batch_builder_reserve(struct tfs_batch_builder *b, size_t record_bytes)
{
	if (records_direct(b))
		return grow(&b->out, &b->out_cap, TFS_BATCH_HEADER_BYTES + b->rec_len + record_bytes);
	return grow(&b->rec, &b->rec_cap, b->rec_len + record_bytes);
}

void tfs_batch_set_base_offset(uint8_t *batch, tfs_offset_t base_offset)
{
	put_be64(batch + OFF_BASE_OFFSET, (uint64_t)base_offset);
}

void tfs_batch_set_leader_epoch(uint8_t *batch, int32_t epoch)
{
	put_be32(batch + OFF_LEADER_EPOCH, (uint32_t)epoch);
}

void tfs_batch_set_max_timestamp(uint8_t *batch, size_t len, bool log_append_time,
                                 int64_t max_timestamp)
{
	uint16_t attributes = get_be16(batch + OFF_ATTRIBUTES);

	if (log_append_time)
		attributes |= TFS_ATTR_LOG_APPEND_TIME;
	else
		attributes &= (uint16_t)~TFS_ATTR_LOG_APPEND_TIME;
	put_be16(batch + OFF_ATTRIBUTES, attributes);
	put_be64(batch + OFF_MAX_TIMESTAMP, (uint64_t)max_timestamp);
	put_be32(batch + OFF_CRC, tfs_crc32c(0, batch + TFS_BATCH_CRC_START, len - TFS_BATCH_CRC_START));
}
