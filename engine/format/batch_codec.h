/* batch_codec.h - Kafka RecordBatch v2 (magic 2): decode, verify, encode.
 *
 * Owns: nothing on disk. A tfs_batch_builder owns its output buffer; a
 * tfs_record_iter owns its decompression buffer. Both are reusable: init once per
 * worker, reset per batch (expensive contexts are never created per batch).
 *
 * Batch header, all integers big-endian (61 bytes, TFS_BATCH_HEADER_BYTES):
 *
 *   OFFSET SIZE DESCRIPTION
 *        0    8 base offset: offset of the first record; kept by compaction
 *        8    4 length: bytes after this field (total size - 12)
 *       12    4 partition leader epoch (-1 none); NOT covered by the CRC
 *       16    1 magic = 2
 *       17    4 crc: CRC-32C (Castagnoli) of bytes [21, 12 + length)
 *       21    2 attributes: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
 *               3 log-append-time,
 *               4 transactional, 5 control, 6 has-delete-horizon
 *       23    4 last offset delta (kept by compaction even if the last record goes)
 *       27    8 base timestamp (or the delete horizon when attribute bit 6 is set;
 *               -1 in an empty batch)
 *       35    8 max timestamp
 *       43    8 producer id (-1 none)
 *       51    2 producer epoch (-1 none)
 *       53    4 base sequence (-1 none)
 *       57    4 records count
 *       61    - records; with a codec, all of them compressed as one region
 *               (framed as Kafka frames each codec: compress.h)
 *
 * Record (varint = zig-zag LEB128, at most 5 bytes; varlong at most 10):
 *   length varint (bytes after it) | attributes int8 | timestampDelta varlong |
 *   offsetDelta varint | keyLength varint (-1 null) | key | valueLength varint
 *   (-1 null = tombstone) | value | headerCount varint | headers: keyLength varint
 *   (>= 0) | key | valueLength varint (-1 null) | value
 *
 * Validity: a batch is valid if and only if its length is at least 49, it fits the
 * buffer, magic is 2, the CRC matches, records count >= 0, every record's declared
 * length fits and is consumed exactly, every varint is well-formed, and after
 * records count records the records region is exhausted. Anything else decodes to
 * TFS_ECORRUPT with a reason string; no input crashes the decoder.
 *
 * Threads: all functions are reentrant; one builder or iterator per thread.
 * Errors: 0 or a negative errno / TFS_E* code.
 */
#ifndef TFS_BATCH_CODEC_H
#define TFS_BATCH_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/format/compress.h"
#include "engine/types.h"

#define TFS_BATCH_HEADER_BYTES 61   /* RECORD_BATCH_OVERHEAD */
#define TFS_BATCH_LOG_OVERHEAD 12   /* base offset + length, not counted in length */
#define TFS_BATCH_MAGIC 2
#define TFS_BATCH_CRC_START 21      /* the CRC covers [21, 12 + length) */
/* Upper bound of one record's encoded size in a batch: key + value +
 * TFS_RECORD_BOUND_OVERHEAD, + TFS_RECORD_HEADER_BOUND_OVERHEAD + its key and value
 * per header. The overhead is Kafka's MAX_RECORD_OVERHEAD (21) and three varints of
 * TFS_VARINT_MAX_BYTES (key length, value length, header count). What the partition
 * log reserves for an append; the mount splits a large .put by it. */
#define TFS_VARINT_MAX_BYTES 5
#define TFS_RECORD_BOUND_OVERHEAD (21 + 3 * TFS_VARINT_MAX_BYTES)
#define TFS_RECORD_HEADER_BOUND_OVERHEAD (2 * TFS_VARINT_MAX_BYTES)
/* The fewest bytes a record adds to key + value: its length, attributes, two
 * deltas, two lengths and the header count, one byte each. */
#define TFS_RECORD_MIN_OVERHEAD 7

enum {
	TFS_ATTR_CODEC_MASK = 0x07,
	TFS_ATTR_LOG_APPEND_TIME = 0x08,
	TFS_ATTR_TRANSACTIONAL = 0x10,
	TFS_ATTR_CONTROL = 0x20,
	TFS_ATTR_DELETE_HORIZON = 0x40,
};

enum tfs_codec {
	TFS_CODEC_NONE = 0,
	TFS_CODEC_GZIP = 1,
	TFS_CODEC_SNAPPY = 2,
	TFS_CODEC_LZ4 = 3,
	TFS_CODEC_ZSTD = 4,
};

/* Kafka's name of a codec, as compression.type spells it and kafka-dump-log
 * prints it ("none", "gzip", "snappy", "lz4", "zstd"); NULL for any other value.
 * Static storage. */
const char *tfs_codec_name(int codec);

/* The fixed header, decoded field by field. */
struct tfs_batch_header {
	tfs_offset_t base_offset;
	int32_t length;
	int32_t leader_epoch;
	int8_t magic;
	uint32_t crc;
	int16_t attributes;
	int32_t last_offset_delta;
	int64_t base_timestamp;
	int64_t max_timestamp;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	int32_t records_count;
};

static inline size_t tfs_batch_size(const struct tfs_batch_header *h)
{
	return (size_t)h->length + TFS_BATCH_LOG_OVERHEAD;
}
static inline tfs_offset_t tfs_batch_last_offset(const struct tfs_batch_header *h)
{
	return h->base_offset + h->last_offset_delta;
}
static inline enum tfs_codec tfs_batch_codec(const struct tfs_batch_header *h)
{
	return (enum tfs_codec)(h->attributes & TFS_ATTR_CODEC_MASK);
}

/* CRC-32C of buf, continuing from crc (start with 0), through ISA-L (crc32c.c). */
uint32_t tfs_crc32c(uint32_t crc, const void *buf, size_t len);

/* Decodes the first 61 bytes of buf into *h. Checks: avail >= 17 to read magic,
 * magic == 2, length >= 49, avail >= 61. Does not check the CRC or that the whole
 * batch is present; the caller compares tfs_batch_size() with what it has.
 * Returns 0, -EAGAIN when avail is too short to tell (a possible torn tail),
 * TFS_EUNSUPPORTED for magic 0/1, or TFS_ECORRUPT (reason in *why if non-NULL). */
int tfs_batch_header_decode(const uint8_t *buf, size_t avail,
                            struct tfs_batch_header *h, const char **why);

/* Full validity check of one whole batch (buf holds exactly tfs_batch_size bytes):
 * header, CRC, and the record structure (decompressing with it if needed).
 * Returns 0 or TFS_ECORRUPT / TFS_EUNSUPPORTED with a static reason in *why
 * (-ENOMEM if a zstd body cannot be buffered). */
int tfs_batch_verify(const uint8_t *buf, size_t len, const char **why);

/* Header check plus CRC only (cheap; what recovery and the reader use). buf holds
 * exactly one batch, as for tfs_batch_verify: a shorter buffer, or bytes after the
 * batch, are TFS_ECORRUPT. */
int tfs_batch_check_crc(const uint8_t *buf, size_t len, const char **why);

/* One header of a record: key is never null; value may be (value_null). */
struct tfs_header {
	struct tfs_slice key;
	struct tfs_slice value;
	bool value_null;
};

/* One decoded record. Slices borrow from the batch buffer or from the iterator's
 * decompression buffer: valid until the next tfs_record_iter_next/reset. */
struct tfs_record {
	tfs_offset_t offset;        /* base offset + offset delta */
	int32_t offset_delta;
	int64_t timestamp;          /* absolute; max timestamp under log-append time */
	int64_t timestamp_delta;
	struct tfs_slice key;
	bool key_null;
	struct tfs_slice value;
	bool value_null;            /* a tombstone */
	uint32_t header_count;
	struct tfs_slice headers_raw;  /* the encoded headers, for tfs_header_next */
	struct tfs_slice raw;       /* the whole encoded record incl. its length varint */
};

/* Iterates the records of one batch. Reuse one per thread. */
struct tfs_record_iter {
	struct tfs_batch_header h;
	const uint8_t *p, *end;     /* the (decompressed) records region */
	int32_t remaining;
	int32_t last_delta;         /* offset delta of the record returned last, -1 */
	struct tfs_inflater z;      /* decompression buffer and contexts, owned */
	size_t max_decompressed;    /* refuse larger bodies (TFS_ECORRUPT); 0 = 64 MiB */
};

void tfs_record_iter_init(struct tfs_record_iter *it);
void tfs_record_iter_release(struct tfs_record_iter *it);
/* Frees the decompression buffer if it grew past keep_bytes (one big batch must
 * not pin its size for the iterator's life); the iterator then holds no batch. */
void tfs_record_iter_trim(struct tfs_record_iter *it, size_t keep_bytes);
/* Starts iterating the batch in buf (exactly one whole batch, already CRC-checked
 * or not: the record structure is checked as it goes). Decompresses any codec.
 * Returns 0, TFS_ECORRUPT, TFS_EUNSUPPORTED (an unknown codec) or -ENOMEM; after a
 * failure tfs_record_iter_next returns TFS_ECORRUPT until the next good reset. */
int tfs_record_iter_reset(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
                          const char **why);
/* Returns 1 with *r filled, 0 at the end (after checking the region is exhausted),
 * or TFS_ECORRUPT with a reason. */
int tfs_record_iter_next(struct tfs_record_iter *it, struct tfs_record *r, const char **why);

/* tfs_batch_verify on the iterator's reusable decompression context, for callers
 * that verify many batches (tfs_batch_verify itself creates a context per zstd
 * batch). Leaves the iterator finished; tfs_record_iter_reset it to read records. */
int tfs_record_iter_verify(struct tfs_record_iter *it, const uint8_t *buf, size_t len,
                           const char **why);

/* Whether the batch in buf (one whole batch, as tfs_record_iter_reset takes it)
 * holds a tombstone: a keyed record with a null value. 1 or 0; the errors of
 * tfs_record_iter_reset and _next. For a door that must refuse deletions from
 * a writer who may not delete (README "Permissions", the sticky bit). */
int tfs_batch_has_tombstone(const uint8_t *buf, size_t len);

/* Walks the headers of a record: *cursor starts as r->headers_raw; returns 1 with
 * *h filled, 0 at the end, TFS_ECORRUPT. */
int tfs_header_next(struct tfs_slice *cursor, struct tfs_header *h);

/* Decodes all of r's headers into (*hdrs)[0, r->header_count), growing the array
 * (*cap entries; the caller frees it), for re-encoding the record with
 * tfs_batch_builder. Returns 0, -ENOMEM or TFS_ECORRUPT. */
int tfs_record_headers(const struct tfs_record *r, struct tfs_header **hdrs, size_t *cap);

/* ---- control records (the one record of a control batch) ----
 * Key, 4 bytes: int16 version (0; a newer one reads as 0), int16 type
 * (ControlRecordType: 0 ABORT, 1 COMMIT, others not transaction markers).
 * Value of an end-transaction marker (EndTransactionMarker), 6 bytes: int16
 * version (0), int32 coordinator epoch. A control batch has attributes
 * transactional + control, codec none, base sequence -1, and the producer id
 * and epoch of the transaction it ends. Whether a batch is a marker is decided
 * by its control bit, never by a key's bytes. */
#define TFS_CONTROL_ABORT 0
#define TFS_CONTROL_COMMIT 1
#define TFS_CONTROL_KEY_BYTES 4
#define TFS_END_TXN_VALUE_BYTES 6

/* The type of a control batch's record r, or -1 if its key is not a control
 * key (short, null, or a negative version). */
static inline int tfs_control_type(const struct tfs_record *r)
{
	if (r->key_null || r->key.len < TFS_CONTROL_KEY_BYTES ||
	    (int16_t)(r->key.p[0] << 8 | r->key.p[1]) < 0)
		return -1;
	return (int16_t)(r->key.p[2] << 8 | r->key.p[3]);
}

/* Encodes an end-transaction marker's key (type) and value into key[4], value[6]. */
static inline void tfs_control_encode(int type, int32_t coordinator_epoch,
                                      uint8_t key[TFS_CONTROL_KEY_BYTES],
                                      uint8_t value[TFS_END_TXN_VALUE_BYTES])
{
	key[0] = key[1] = 0;
	key[2] = (uint8_t)((uint16_t)type >> 8);
	key[3] = (uint8_t)type;
	value[0] = value[1] = 0;
	value[2] = (uint8_t)((uint32_t)coordinator_epoch >> 24);
	value[3] = (uint8_t)((uint32_t)coordinator_epoch >> 16);
	value[4] = (uint8_t)((uint32_t)coordinator_epoch >> 8);
	value[5] = (uint8_t)coordinator_epoch;
}

/* A record to encode. key_null / value_null select Kafka's null (-1 length). */
struct tfs_record_in {
	struct tfs_slice key;
	bool key_null;
	struct tfs_slice value;
	bool value_null;
	int64_t timestamp;
	int32_t offset_delta;        /* used by tfs_batch_builder_add_at */
	const struct tfs_header *headers;
	uint32_t header_count;
};

struct tfs_batch_params {
	tfs_offset_t base_offset;
	int16_t attributes;          /* codec bits + flags; delete-horizon bit allowed */
	int32_t leader_epoch;        /* -1 */
	int64_t producer_id;         /* -1 */
	int16_t producer_epoch;      /* -1 */
	int32_t base_sequence;       /* -1 */
	int64_t base_timestamp;      /* used only with TFS_ATTR_DELETE_HORIZON: the horizon;
	                              * otherwise the first record's timestamp is the base */
	int zstd_level;              /* 0 = zstd's default level */
};

/* Builds one batch. The builder owns its buffers and zstd context; reuse it. */
struct tfs_batch_builder {
	struct tfs_batch_params params;
	uint8_t *rec;                /* encoded records of a compressed batch; an
	                              * uncompressed batch encodes them in out */
	size_t rec_len, rec_cap;
	uint8_t *out;                /* the finished batch */
	size_t out_len, out_cap;
	int32_t count;
	int32_t last_offset_delta;
	int64_t base_ts, max_ts;
	bool have_ts;
	struct tfs_deflater z;       /* compression contexts, created on first use, owned */
};

void tfs_batch_builder_init(struct tfs_batch_builder *b);
void tfs_batch_builder_release(struct tfs_batch_builder *b);
void tfs_batch_builder_reset(struct tfs_batch_builder *b, const struct tfs_batch_params *p);
/* Appends a record with offset delta = number of records added so far (precisely:
 * the last delta + 1, which is the same unless add_at left gaps). Returns 0, -ENOMEM,
 * or -EMSGSIZE (a key, value or record longer than Kafka's int32 lengths allow). */
int tfs_batch_builder_add(struct tfs_batch_builder *b, const struct tfs_record_in *r);
/* Appends a record at r->offset_delta (strictly increasing; the cleaner keeps gaps).
 * Returns 0, -EINVAL (delta negative or not above the last), -ENOMEM, -EMSGSIZE. */
int tfs_batch_builder_add_at(struct tfs_batch_builder *b, const struct tfs_record_in *r);
/* Size the finished batch would have without compression (for max.message.bytes). */
size_t tfs_batch_builder_size_estimate(const struct tfs_batch_builder *b);
/* Finishes the batch: compresses if the codec says so, writes the header and CRC.
 * last_offset_delta < 0 means "the last added record's delta"; the cleaner passes
 * the original batch's value. On success *out / *len borrow the builder's buffer,
 * valid until the next reset. Returns 0; -EINVAL (no records - an empty batch is
 * tfs_batch_write_empty's -, last_offset_delta below the last added delta, codec
 * 5-7, bad zstd level); TFS_EUNSUPPORTED (gzip/snappy/lz4); -ENOMEM; -EMSGSIZE. */
int tfs_batch_builder_finish(struct tfs_batch_builder *b, int32_t last_offset_delta,
                             const uint8_t **out, size_t *len);

/* Writes a 61-byte empty batch (records count 0, codec none, base timestamp -1)
 * that keeps h's base offset, last offset delta, producer fields, leader epoch,
 * transactional/control flags and timestamp type, as Kafka's cleaner does. */
void tfs_batch_write_empty(const struct tfs_batch_header *h, uint8_t out[TFS_BATCH_HEADER_BYTES]);

/* Zig-zag varints (exposed for tests and the history view). Return bytes written
 * (at most 5 / 10), or for get: bytes read, or TFS_ECORRUPT. */
size_t tfs_varint_put(uint8_t *p, int32_t v);
size_t tfs_varlong_put(uint8_t *p, int64_t v);
int tfs_varint_get(const uint8_t *p, const uint8_t *end, int32_t *v);
int tfs_varlong_get(const uint8_t *p, const uint8_t *end, int64_t *v);

/* Parses the one record whose encoding (length varint included, as in
 * tfs_record.raw) is raw[0, len), as tfs_record_iter_next would inside the batch
 * whose header is h: the same checks, and the record must end exactly at len. For
 * readers that keep the raw records of a batch they already verified and parse
 * only the one they need. Slices in *r borrow raw. Returns 0 or TFS_ECORRUPT. */
int tfs_record_decode_one(const struct tfs_batch_header *h, const uint8_t *raw, size_t len,
                          struct tfs_record *r, const char **why);

/* Makes room for record_bytes more bytes of encoded records, so that a caller who
 * knows the size of what it adds grows the buffers once. 0 or -ENOMEM. */
int tfs_batch_builder_reserve(struct tfs_batch_builder *b, size_t record_bytes);

/* Sets the base offset of a finished batch in place. The base offset lies outside
 * the CRC (bytes 0..7), so a batch can be encoded before its offsets are known -
 * the way a Kafka broker assigns offsets to a producer's batch - and placed later. */
void tfs_batch_set_base_offset(uint8_t *batch, tfs_offset_t base_offset);
/* Sets the partition leader epoch of a batch in place: the broker's to set, and
 * outside the CRC too. */
void tfs_batch_set_leader_epoch(uint8_t *batch, int32_t epoch);
/* Sets the timestamp type (attribute bit 3) and max timestamp of a whole batch of
 * len bytes and recomputes the CRC, which covers both: what a broker does to a
 * producer's batch, stamping it under LogAppendTime (every record then reads
 * max_timestamp) and otherwise making the max timestamp the records' own. */
void tfs_batch_set_max_timestamp(uint8_t *batch, size_t len, bool log_append_time,
                                 int64_t max_timestamp);

#endif
