/* interop_codec.c - the codec and the partition log against kafka-python.
 *
 *   interop_codec write LOGFILE EXPECTED.jsonl [CODEC]
 *       Writes a segment of batches made by tfs_batch_builder - keys, keyless
 *       records, tombstones, empty keys and values, binary bytes, headers with null
 *       values, offset gaps between and inside batches (as the cleaner leaves them),
 *       a delete-horizon batch and an empty batch - and the JSON lines that
 *       kafka_check.py decode compares it with.
 *   interop_codec read LOGFILE EXPECTED.jsonl
 *       Verifies every batch of LOGFILE (CRC and structure) and compares every record
 *       with EXPECTED.jsonl, as written by kafka_check.py build.
 *   interop_codec plog-write PARTITION_DIR EXPECTED.jsonl [CODEC]
 *       Appends records through the partition log (single records, a rename's
 *       two-record unit, a many-record unit) and writes their JSON lines.
 *   interop_codec plog-read PARTITION_DIR EXPECTED.jsonl
 *       Opens a partition directory holding a kafka-python segment with the engine
 *       and checks every record and every key's newest value.
 *   interop_codec plog-produce PARTITION_DIR LOGFILE [CODEC]
 *       Appends every batch of LOGFILE (a kafka-python segment) to a new partition
 *       as a producer's batch (tfs_plog_append_batch), on a topic of CODEC (none by
 *       default); the records land at offsets 0, 1, 2, ... in LOGFILE's order.
 *
 * JSON lines: one object per record, in log order:
 *   {"offset":N,"timestamp":T,"key":hex|null,"value":hex|null,
 *    "headers":[[name,hex|null],...]}
 * The reader below parses exactly that shape and nothing more, so the driver needs no
 * JSON library. Exit status: 0 all matched, 1 a mismatch or bad input, 2 usage.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/batch_codec.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"

#define T0 INT64_C(1700000000000)
#define DAY_MS INT64_C(86400000)
#define EXIT_MISMATCH 1
#define EXIT_USAGE 2
#define MAX_HEADERS 8
#define LINE_MAX_BYTES (1 << 20)

static const char *prog = "interop_codec";

static void complain(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- expected records --------------------------------------------------------- */

struct jbytes {
	uint8_t *p;
	size_t len;
	bool null;
};

struct jheader {
	struct jbytes name;   /* never null */
	struct jbytes value;
};

struct jrecord {
	int64_t offset, timestamp;
	struct jbytes key, value;
	struct jheader *headers;
	size_t header_count;
};

static void jrecord_free(struct jrecord *r)
{
	free(r->key.p);
	free(r->value.p);
	for (size_t i = 0; i < r->header_count; i++) {
		free(r->headers[i].name.p);
		free(r->headers[i].value.p);
	}
	free(r->headers);
}

/* ---- writing JSON ------------------------------------------------------------- */

static void json_hex(FILE *f, struct tfs_slice s, bool null)
{
	if (null) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (size_t i = 0; i < s.len; i++)
		fprintf(f, "%02x", s.p[i]);
	fputc('"', f);
}

/* Header names are UTF-8 text: written raw, with JSON's mandatory escapes. */
static void json_string(FILE *f, struct tfs_slice s)
{
	fputc('"', f);
	for (size_t i = 0; i < s.len; i++) {
		uint8_t c = s.p[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_record(FILE *f, tfs_offset_t base, const struct tfs_record_in *r)
{
	fprintf(f, "{\"offset\": %lld, \"timestamp\": %lld, \"key\": ",
	        (long long)(base + r->offset_delta), (long long)r->timestamp);
	json_hex(f, r->key, r->key_null);
	fputs(", \"value\": ", f);
	json_hex(f, r->value, r->value_null);
	fputs(", \"headers\": [", f);
	for (uint32_t i = 0; i < r->header_count; i++) {
		fputs(i ? ", [" : "[", f);
		json_string(f, r->headers[i].key);
		fputs(", ", f);
		json_hex(f, r->headers[i].value, r->headers[i].value_null);
		fputc(']', f);
	}
	fputs("]}\n", f);
}

/* ---- parsing JSON lines ------------------------------------------------------- */

struct jparser {
	const char *p;
	const char *err;   /* the first error, static */
};

static bool jfail(struct jparser *j, const char *err)
{
	if (!j->err)
		j->err = err;
	return false;
}

static void jskip(struct jparser *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n')
		j->p++;
}

static bool jeat(struct jparser *j, char c)
{
	jskip(j);
	if (*j->p != c)
		return jfail(j, "unexpected character");
	j->p++;
	return true;
}

static bool jliteral(struct jparser *j, const char *word)
{
	size_t n = strlen(word);
	jskip(j);
	if (strncmp(j->p, word, n) != 0)
		return false;
	j->p += n;
	return true;
}

static bool jbytes_push(struct jbytes *b, size_t *cap, uint8_t c)
{
	if (b->len == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		uint8_t *np = realloc(b->p, ncap);
		if (!np)
			return false;
		b->p = np;
		*cap = ncap;
	}
	b->p[b->len++] = c;
	return true;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool read_hex4(struct jparser *j, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit(*j->p);
		if (d < 0)
			return jfail(j, "bad \\u escape");
		*v = *v << 4 | (uint32_t)d;
		j->p++;
	}
	return true;
}

static bool push_utf8(struct jbytes *b, size_t *cap, uint32_t cp)
{
	if (cp < 0x80)
		return jbytes_push(b, cap, (uint8_t)cp);
	if (cp < 0x800)
		return jbytes_push(b, cap, (uint8_t)(0xc0 | cp >> 6)) &&
		       jbytes_push(b, cap, (uint8_t)(0x80 | (cp & 0x3f)));
	if (cp < 0x10000)
		return jbytes_push(b, cap, (uint8_t)(0xe0 | cp >> 12)) &&
		       jbytes_push(b, cap, (uint8_t)(0x80 | ((cp >> 6) & 0x3f))) &&
		       jbytes_push(b, cap, (uint8_t)(0x80 | (cp & 0x3f)));
	return jbytes_push(b, cap, (uint8_t)(0xf0 | cp >> 18)) &&
	       jbytes_push(b, cap, (uint8_t)(0x80 | ((cp >> 12) & 0x3f))) &&
	       jbytes_push(b, cap, (uint8_t)(0x80 | ((cp >> 6) & 0x3f))) &&
	       jbytes_push(b, cap, (uint8_t)(0x80 | (cp & 0x3f)));
}

/* A JSON string into UTF-8 bytes. */
static bool jstring(struct jparser *j, struct jbytes *out)
{
	size_t cap = 0;
	memset(out, 0, sizeof(*out));
	if (!jeat(j, '"'))
		return false;
	while (*j->p != '"') {
		uint32_t cp, lo;
		char c = *j->p++;
		if (c == '\0')
			return jfail(j, "unterminated string");
		if (c != '\\') {
			if (!jbytes_push(out, &cap, (uint8_t)c))
				return jfail(j, "out of memory");
			continue;
		}
		c = *j->p++;
		switch (c) {
		case '"': case '\\': case '/': cp = (uint8_t)c; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			if (!read_hex4(j, &cp))
				return false;
			if (cp >= 0xd800 && cp < 0xdc00) {   /* high surrogate: a pair follows */
				if (j->p[0] != '\\' || j->p[1] != 'u')
					return jfail(j, "lone surrogate");
				j->p += 2;
				if (!read_hex4(j, &lo) || lo < 0xdc00 || lo >= 0xe000)
					return jfail(j, "bad surrogate pair");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			break;
		default:
			return jfail(j, "bad escape");
		}
		if (!push_utf8(out, &cap, cp))
			return jfail(j, "out of memory");
	}
	j->p++;
	return true;
}

/* null, or a string of hex digit pairs. */
static bool jhex(struct jparser *j, struct jbytes *out)
{
	struct jbytes s;
	memset(out, 0, sizeof(*out));
	if (jliteral(j, "null")) {
		out->null = true;
		return true;
	}
	if (!jstring(j, &s))
		return false;
	if (s.len % 2) {
		free(s.p);
		return jfail(j, "odd number of hex digits");
	}
	out->len = s.len / 2;
	out->p = malloc(out->len ? out->len : 1);
	if (!out->p) {
		free(s.p);
		return jfail(j, "out of memory");
	}
	for (size_t i = 0; i < out->len; i++) {
		int hi = hex_digit((char)s.p[2 * i]), lo = hex_digit((char)s.p[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(s.p);
			return jfail(j, "not a hex digit");
		}
		out->p[i] = (uint8_t)(hi << 4 | lo);
	}
	free(s.p);
	return true;
}

static bool jint(struct jparser *j, int64_t *v)
{
	char *end;
	jskip(j);
	errno = 0;
	*v = strtoll(j->p, &end, 10);
	if (end == j->p || errno)
		return jfail(j, "bad integer");
	j->p = end;
	return true;
}

static bool jheaders(struct jparser *j, struct jrecord *r)
{
	size_t cap = 0;
	if (!jeat(j, '['))
		return false;
	if (jliteral(j, "]"))
		return true;
	do {
		struct jheader *h;
		if (r->header_count == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct jheader *nh = realloc(r->headers, ncap * sizeof(*nh));
			if (!nh)
				return jfail(j, "out of memory");
			r->headers = nh;
			cap = ncap;
		}
		h = &r->headers[r->header_count];
		memset(h, 0, sizeof(*h));
		r->header_count++;
		if (!jeat(j, '[') || !jstring(j, &h->name) || !jeat(j, ',') ||
		    !jhex(j, &h->value) || !jeat(j, ']'))
			return false;
	} while (jliteral(j, ","));
	return jeat(j, ']');
}

static bool jrecord_parse(struct jparser *j, struct jrecord *r)
{
	unsigned seen = 0;
	enum { F_OFFSET = 1, F_TS = 2, F_KEY = 4, F_VALUE = 8, F_HEADERS = 16, F_ALL = 31 };
	memset(r, 0, sizeof(*r));
	if (!jeat(j, '{'))
		return false;
	do {
		struct jbytes name;
		bool ok;
		if (!jstring(j, &name))
			return false;
		ok = jeat(j, ':');
		if (ok && name.len == 6 && !memcmp(name.p, "offset", 6)) {
			ok = jint(j, &r->offset);
			seen |= F_OFFSET;
		} else if (ok && name.len == 9 && !memcmp(name.p, "timestamp", 9)) {
			ok = jint(j, &r->timestamp);
			seen |= F_TS;
		} else if (ok && name.len == 3 && !memcmp(name.p, "key", 3)) {
			ok = jhex(j, &r->key);
			seen |= F_KEY;
		} else if (ok && name.len == 5 && !memcmp(name.p, "value", 5)) {
			ok = jhex(j, &r->value);
			seen |= F_VALUE;
		} else if (ok && name.len == 7 && !memcmp(name.p, "headers", 7)) {
			ok = jheaders(j, r);
			seen |= F_HEADERS;
		} else if (ok) {
			ok = jfail(j, "unknown field");
		}
		free(name.p);
		if (!ok)
			return false;
	} while (jliteral(j, ","));
	if (!jeat(j, '}'))
		return false;
	jskip(j);
	if (*j->p)
		return jfail(j, "text after the object");
	if (seen != F_ALL)
		return jfail(j, "a field is missing");
	return true;
}

/* Reads every non-blank line of path; *out is a malloc'd array of *n records. */
static int expected_load(const char *path, struct jrecord **out, size_t *n)
{
	FILE *f = fopen(path, "r");
	char *line = malloc(LINE_MAX_BYTES);
	struct jrecord *recs = NULL;
	size_t count = 0, cap = 0, lineno = 0;
	int rc = -1;

	if (!f || !line) {
		complain("%s: cannot open: %s", path, strerror(errno));
		goto out;
	}
	while (fgets(line, LINE_MAX_BYTES, f)) {
		struct jparser j = { .p = line, .err = NULL };
		lineno++;
		if (strspn(line, " \t\r\n") == strlen(line))
			continue;
		if (!strchr(line, '\n') && !feof(f)) {
			complain("%s:%zu: line too long", path, lineno);
			goto out;
		}
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct jrecord *nr = realloc(recs, ncap * sizeof(*nr));
			if (!nr)
				goto out;
			recs = nr;
			cap = ncap;
		}
		if (!jrecord_parse(&j, &recs[count])) {
			jrecord_free(&recs[count]);
			complain("%s:%zu: %s near \"%.20s\"", path, lineno, j.err, j.p);
			goto out;
		}
		count++;
	}
	rc = 0;
out:
	if (rc) {
		for (size_t i = 0; i < count; i++)
			jrecord_free(&recs[i]);
		free(recs);
		recs = NULL;
		count = 0;
	}
	if (f)
		fclose(f);
	free(line);
	*out = recs;
	*n = count;
	return rc;
}

/* " (CODEC)" for a line of output, "" for none. */
static const char *codec_label(int codec)
{
	static const char *const labels[] = { "", " (gzip)", " (snappy)", " (lz4)", " (zstd)" };
	return codec >= 0 && codec < (int)(sizeof(labels) / sizeof(labels[0])) ? labels[codec] : "";
}

/* ---- write mode --------------------------------------------------------------- */

struct writer {
	FILE *log, *jsonl;
	struct tfs_batch_builder b;
	int codec;                  /* enum tfs_codec of every batch */
	int batches;
	size_t records;
};

static int emit(struct writer *w, const struct tfs_batch_params *p,
                const struct tfs_record_in *in, size_t n, bool at, int32_t last_delta)
{
	const uint8_t *out;
	size_t len;
	int rc;
	tfs_batch_builder_reset(&w->b, p);
	for (size_t i = 0; i < n; i++) {
		rc = at ? tfs_batch_builder_add_at(&w->b, &in[i])
		        : tfs_batch_builder_add(&w->b, &in[i]);
		if (rc)
			return rc;
	}
	rc = tfs_batch_builder_finish(&w->b, last_delta, &out, &len);
	if (rc)
		return rc;
	if (fwrite(out, 1, len, w->log) != len)
		return -EIO;
	for (size_t i = 0; i < n; i++) {
		struct tfs_record_in r = in[i];
		if (!at)
			r.offset_delta = (int32_t)i;
		json_record(w->jsonl, p->base_offset, &r);
	}
	w->batches++;
	w->records += n;
	return 0;
}

static struct tfs_slice str(const char *s)
{
	return tfs_slice_make(s, strlen(s));
}

static struct tfs_batch_params batch_params(tfs_offset_t base, int16_t attrs, int codec)
{
	struct tfs_batch_params p = {
		.base_offset = base,
		.attributes = (int16_t)(attrs | codec),
		.leader_epoch = 3,
		.producer_id = -1,
		.producer_epoch = -1,
		.base_sequence = -1,
		.base_timestamp = -1,
	};
	return p;
}

static int write_segment(struct writer *w)
{
	static uint8_t blob[256], big[4096];
	struct tfs_header hdr[MAX_HEADERS] = {
		{ .key = str("trace-id"), .value = str("t-1") },
		{ .key = str("deleted-by"), .value_null = true },
		{ .key = str(""), .value = str("") },
		{ .key = str("cl\xc3\xa9"), .value = tfs_slice_make(blob, 8) },   /* "clé" */
	};
	struct tfs_record_in a[] = {
		{ .key = str("user-1"), .value = str("alice"), .timestamp = T0, .headers = hdr,
		  .header_count = 1 },
		{ .key_null = true, .value = str("keyless"), .timestamp = T0 + 1 },
		{ .key = str("user-2"), .value_null = true, .timestamp = T0 + 2, .headers = hdr + 1,
		  .header_count = 1 },
		{ .key = str(""), .value = str(""), .timestamp = T0 + 3, .headers = hdr,
		  .header_count = 4 },
		{ .key = tfs_slice_make(blob, sizeof(blob)), .value = tfs_slice_make(blob + 1, 200),
		  .timestamp = T0 - 7, .headers = hdr + 3, .header_count = 1 },
		{ .key_null = true, .value_null = true, .timestamp = T0 + 4 },
	};
	struct tfs_record_in gaps[30], many[100], horizon[2];
	struct tfs_batch_params p;
	uint8_t empty[TFS_BATCH_HEADER_BYTES];
	struct tfs_batch_header h;
	const uint8_t *out;
	size_t len;
	int rc;

	for (size_t i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)("compressible "[i % 13]);

	/* 1. Every kind of key and value, base offset 0. */
	p = batch_params(0, 0, w->codec);
	if ((rc = emit(w, &p, a, sizeof(a) / sizeof(a[0]), false, -1)))
		return rc;

	/* 2. A cleaned batch: survivors at even deltas, original last delta kept (60),
	 *    idempotent producer fields, after a gap in base offsets. */
	for (int i = 0; i < 30; i++) {
		gaps[i] = (struct tfs_record_in){
			.key = tfs_slice_make(blob + i, 3), .value = tfs_slice_make(big, 40 + i),
			.timestamp = T0 + 100 + i, .offset_delta = 2 * i,
			.headers = hdr, .header_count = (uint32_t)(i % 3),
		};
	}
	p = batch_params(20, 0, w->codec);
	p.producer_id = 4242;
	p.producer_epoch = 1;
	p.base_sequence = 0;
	if ((rc = emit(w, &p, gaps, 30, true, 60)))
		return rc;

	/* 3. The same batch emptied by the cleaner: a bare header, no records. */
	tfs_batch_builder_reset(&w->b, &p);
	for (int i = 0; i < 30 && !rc; i++)
		rc = tfs_batch_builder_add_at(&w->b, &gaps[i]);
	if (rc || (rc = tfs_batch_builder_finish(&w->b, 60, &out, &len)))
		return rc;
	if ((rc = tfs_batch_header_decode(out, len, &h, NULL)))
		return rc;
	h.base_offset = 81;   /* the next offsets after batch 2 */
	tfs_batch_write_empty(&h, empty);
	if (fwrite(empty, 1, sizeof(empty), w->log) != sizeof(empty))
		return -EIO;
	w->batches++;

	/* 4. A delete-horizon batch: tombstone and value, negative timestamp deltas. */
	horizon[0] = (struct tfs_record_in){ .key = str("gone"), .value_null = true,
	                                     .timestamp = T0 + 500, .headers = hdr + 1,
	                                     .header_count = 1 };
	horizon[1] = (struct tfs_record_in){ .key = str("kept"), .value = str("v"),
	                                     .timestamp = T0 + 501, .offset_delta = 1 };
	p = batch_params(200, TFS_ATTR_DELETE_HORIZON, w->codec);
	p.base_timestamp = T0 + DAY_MS;
	if ((rc = emit(w, &p, horizon, 2, false, -1)))
		return rc;

	/* 5. Many records with larger, compressible values. */
	for (int i = 0; i < 100; i++) {
		many[i] = (struct tfs_record_in){
			.key = tfs_slice_make(blob + i % 10, 1),
			.value = tfs_slice_make(big, (size_t)i * 37),
			.value_null = i % 17 == 16, .timestamp = T0 + 1000 + i * 3,
		};
	}
	p = batch_params(300, 0, w->codec);
	return emit(w, &p, many, 100, false, -1);
}

static int cmd_write(const char *log_path, const char *jsonl_path, int codec)
{
	struct writer w = { .codec = codec };
	int rc = -1;

	tfs_batch_builder_init(&w.b);
	w.log = fopen(log_path, "wb");
	w.jsonl = fopen(jsonl_path, "w");
	if (!w.log || !w.jsonl) {
		complain("cannot create %s / %s: %s", log_path, jsonl_path, strerror(errno));
		goto out;
	}
	rc = write_segment(&w);
	if (rc) {
		complain("%s: building batch %d failed: %s", log_path, w.batches + 1,
		         tfs_strerror(rc));
		goto out;
	}
	printf("%s: wrote %s: %d batches, %zu records%s\n", prog, log_path, w.batches,
	       w.records, codec_label(codec));
out:
	if (w.log && fclose(w.log) && !rc) {
		complain("%s: %s", log_path, strerror(errno));
		rc = -1;
	}
	if (w.jsonl && fclose(w.jsonl) && !rc) {
		complain("%s: %s", jsonl_path, strerror(errno));
		rc = -1;
	}
	tfs_batch_builder_release(&w.b);
	return rc ? EXIT_MISMATCH : 0;
}

/* ---- read mode ---------------------------------------------------------------- */

static bool bytes_eq(struct tfs_slice got, bool got_null, const struct jbytes *want)
{
	if (got_null || want->null)
		return got_null == want->null;
	return got.len == want->len && (got.len == 0 || memcmp(got.p, want->p, got.len) == 0);
}

/* Compares one decoded record with its expected line; names the first difference. */
static const char *record_diff(const struct tfs_record *r, const struct jrecord *e)
{
	struct tfs_slice cur = r->headers_raw;
	struct tfs_header h;
	if (r->offset != e->offset)
		return "offset";
	if (r->timestamp != e->timestamp)
		return "timestamp";
	if (!bytes_eq(r->key, r->key_null, &e->key))
		return "key";
	if (!bytes_eq(r->value, r->value_null, &e->value))
		return "value";
	if (r->header_count != e->header_count)
		return "header count";
	for (size_t i = 0; i < e->header_count; i++) {
		if (tfs_header_next(&cur, &h) != 1)
			return "headers (undecodable)";
		if (!bytes_eq(h.key, false, &e->headers[i].name))
			return "header name";
		if (!bytes_eq(h.value, h.value_null, &e->headers[i].value))
			return "header value";
	}
	return tfs_header_next(&cur, &h) == 0 ? NULL : "headers (extra bytes)";
}

static long read_whole(const char *path, uint8_t **out)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, got;
	long rc = -1;

	if (!f)
		goto out;
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb)
				goto out;
			buf = nb;
			cap = ncap;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	if (!ferror(f))
		rc = (long)len;
out:
	if (f)
		fclose(f);
	if (rc < 0) {
		free(buf);
		buf = NULL;
	}
	*out = buf;
	return rc;
}

static int cmd_read(const char *log_path, const char *jsonl_path)
{
	struct tfs_record_iter it;
	struct jrecord *want = NULL;
	size_t nwant = 0, n = 0, pos = 0, batches = 0;
	uint8_t *seg = NULL;
	long seg_len;
	int rc = EXIT_MISMATCH;

	tfs_record_iter_init(&it);
	if (expected_load(jsonl_path, &want, &nwant))
		goto out;
	seg_len = read_whole(log_path, &seg);
	if (seg_len < 0) {
		complain("%s: cannot read: %s", log_path, strerror(errno));
		goto out;
	}
	while (pos < (size_t)seg_len) {
		struct tfs_batch_header h;
		struct tfs_record r;
		const char *why = "?";
		size_t avail = (size_t)seg_len - pos, size;
		int err = tfs_batch_header_decode(seg + pos, avail, &h, &why);
		if (err == -EAGAIN || (err == 0 && tfs_batch_size(&h) > avail)) {
			complain("%s: batch at byte %zu is truncated", log_path, pos);
			goto out;
		}
		if (err) {
			complain("%s: batch at byte %zu: %s (%s)", log_path, pos, tfs_strerror(err), why);
			goto out;
		}
		size = tfs_batch_size(&h);
		err = tfs_record_iter_verify(&it, seg + pos, size, &why);
		if (!err)
			err = tfs_record_iter_reset(&it, seg + pos, size, &why);
		while (!err && (err = tfs_record_iter_next(&it, &r, &why)) == 1) {
			const char *diff;
			err = 0;
			if (n >= nwant) {
				complain("%s: record at offset %lld is not in %s", log_path,
				         (long long)r.offset, jsonl_path);
				goto out;
			}
			diff = record_diff(&r, &want[n]);
			if (diff) {
				complain("%s: record %zu (offset %lld, expected %lld): %s differs",
				         log_path, n, (long long)r.offset, (long long)want[n].offset, diff);
				goto out;
			}
			n++;
		}
		if (err) {
			complain("%s: batch at byte %zu (base offset %lld): %s (%s)", log_path, pos,
			         (long long)h.base_offset, tfs_strerror(err), why);
			goto out;
		}
		pos += size;
		batches++;
	}
	if (n != nwant) {
		complain("%s: %zu records, but %s lists %zu", log_path, n, jsonl_path, nwant);
		goto out;
	}
	printf("%s: %s: %zu batches, %zu records match\n", prog, log_path, batches, n);
	rc = 0;
out:
	for (size_t i = 0; i < nwant; i++)
		jrecord_free(&want[i]);
	free(want);
	free(seg);
	tfs_record_iter_release(&it);
	return rc;
}

/* ---- the partition log, end to end ------------------------------------------- */

/* plog-write DIR JSONL [CODEC]: appends through tfs_plog_append (single records,
 * a two-record unit like a rename, a many-record unit like a .put write), so the
 * bytes kafka-python checks are the ones the engine itself wrote. */
static int cmd_plog_write(const char *dir, const char *jsonl_path, int codec)
{
	static uint8_t blob[256];
	struct tfs_topic_config cfg;
	struct tfs_io *io = NULL;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_plog *pl = NULL;
	struct tfs_plog_env env;
	FILE *jsonl = NULL;
	struct tfs_header hdr[2] = {
		{ .key = str("content-type"), .value = str("text/plain") },
		{ .key = str("none"), .value_null = true },
	};
	struct tfs_append_rec units[8][4];
	size_t counts[8] = { 1, 1, 1, 2, 4, 1, 1, 1 };
	int rc = EXIT_MISMATCH;

	for (size_t i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)i;
	memset(units, 0, sizeof(units));
	units[0][0] = (struct tfs_append_rec){ .key = str("user-1"), .value = str("alice"),
	                                       .headers = hdr, .header_count = 2 };
	units[1][0] = (struct tfs_append_rec){ .key_null = true, .value = str("keyless line") };
	units[2][0] = (struct tfs_append_rec){ .key = str(""), .value = str("") };
	units[3][0] = (struct tfs_append_rec){ .key = str("b"), .value = str("moved") };
	units[3][1] = (struct tfs_append_rec){ .key = str("a"), .value_null = true };
	for (int i = 0; i < 4; i++)
		units[4][i] = (struct tfs_append_rec){ .key = tfs_slice_make(blob + i, 4),
		                                       .value = tfs_slice_make(blob, 64 + (size_t)i) };
	units[5][0] = (struct tfs_append_rec){ .key = tfs_slice_make(blob, sizeof(blob)),
	                                       .value = tfs_slice_make(blob, sizeof(blob)) };
	units[6][0] = (struct tfs_append_rec){ .key = str("user-1"), .value_null = true };
	units[7][0] = (struct tfs_append_rec){ .key = str("user-1"), .value = str("back") };

	tfs_topic_config_defaults(&cfg);
	cfg.compression = codec;
	if (tfs_io_create(TFS_IO_AUTO, &io) || !(fdc = tfs_fdcache_create(io, 16)))
		goto out;
	env = (struct tfs_plog_env){ .io = io, .fdcache = fdc, .config = &cfg };
	if ((rc = tfs_plog_open(&env, dir, true, &pl)) != 0) {
		complain("%s: cannot open: %s", dir, tfs_strerror(rc));
		rc = EXIT_MISMATCH;
		goto out;
	}
	rc = EXIT_MISMATCH;
	jsonl = fopen(jsonl_path, "w");
	if (!jsonl)
		goto out;
	for (size_t u = 0; u < 8; u++) {
		tfs_offset_t first;
		int64_t ts;
		int err = tfs_plog_append(pl, units[u], counts[u], u == 7, &first, &ts);
		if (err) {
			complain("%s: append %zu failed: %s", dir, u, tfs_strerror(err));
			goto out;
		}
		for (size_t i = 0; i < counts[u]; i++) {
			const struct tfs_append_rec *a = &units[u][i];
			struct tfs_record_in r = {
				.key = a->key, .key_null = a->key_null, .value = a->value,
				.value_null = a->value_null, .timestamp = ts, .offset_delta = (int32_t)i,
				.headers = a->headers, .header_count = a->header_count,
			};
			json_record(jsonl, first, &r);
		}
	}
	printf("%s: partition %s written through the engine%s\n", prog, dir, codec_label(codec));
	rc = 0;
out:
	if (jsonl && fclose(jsonl) && !rc)
		rc = EXIT_MISMATCH;
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	return rc;
}

/* plog-produce DIR LOGFILE [CODEC]: appends LOGFILE's batches to a new partition
 * DIR as a producer's (tfs_plog_append_batch); each batch's records must land
 * right after the last one's. */
static int cmd_plog_produce(const char *dir, const char *log_path, int codec)
{
	struct tfs_topic_config cfg;
	struct tfs_io *io = NULL;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_plog *pl = NULL;
	struct tfs_plog_env env;
	uint8_t *seg = NULL;
	long seg_len;
	size_t pos = 0, batches = 0, records = 0;
	tfs_offset_t next = 0;
	int rc = EXIT_MISMATCH, err;

	seg_len = read_whole(log_path, &seg);
	if (seg_len < 0) {
		complain("%s: cannot read: %s", log_path, strerror(errno));
		goto out;
	}
	tfs_topic_config_defaults(&cfg);
	cfg.compression = codec;
	if (tfs_io_create(TFS_IO_AUTO, &io) || !(fdc = tfs_fdcache_create(io, 16)))
		goto out;
	env = (struct tfs_plog_env){ .io = io, .fdcache = fdc, .config = &cfg };
	if ((err = tfs_plog_open(&env, dir, true, &pl)) != 0) {
		complain("%s: cannot open: %s", dir, tfs_strerror(err));
		goto out;
	}
	while (pos < (size_t)seg_len) {
		struct tfs_batch_header h;
		const char *why = "?";
		tfs_offset_t first = -1;
		size_t count = 0;
		err = tfs_batch_header_decode(seg + pos, (size_t)seg_len - pos, &h, &why);
		if (err || tfs_batch_size(&h) > (size_t)seg_len - pos) {
			complain("%s: batch at byte %zu: %s", log_path, pos, err ? why : "truncated");
			goto out;
		}
		err = tfs_plog_append_batch(pl, seg + pos, tfs_batch_size(&h), false, &first, &count,
		                            NULL, NULL);
		if (err || first != next) {
			complain("%s: batch %zu: %s, first offset %lld (expected %lld)", log_path, batches,
			         tfs_strerror(err), (long long)first, (long long)next);
			goto out;
		}
		next += (tfs_offset_t)count;
		records += count;
		batches++;
		pos += tfs_batch_size(&h);
	}
	if ((err = tfs_plog_sync(pl)) != 0) {
		complain("%s: sync: %s", dir, tfs_strerror(err));
		goto out;
	}
	printf("%s: %zu producer batches (%zu records) appended to %s%s\n", prog, batches, records,
	       dir, codec_label(codec));
	rc = 0;
out:
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	free(seg);
	return rc;
}

/* plog-read DIR JSONL: opens DIR (a partition directory holding a segment that
 * kafka-python built) with the engine, read-only, and checks every record through
 * a cursor and each key's newest value through the key directory. */
static int cmd_plog_read(const char *dir, const char *jsonl_path)
{
	struct tfs_topic_config cfg;
	struct tfs_io *io = NULL;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_plog *pl = NULL;
	struct tfs_plog_cursor *c = NULL;
	struct tfs_plog_env env;
	struct jrecord *want = NULL;
	struct tfs_record r;
	size_t nwant = 0, n = 0, live = 0;
	int rc = EXIT_MISMATCH, err;

	if (expected_load(jsonl_path, &want, &nwant))
		goto out;
	tfs_topic_config_defaults(&cfg);
	if (tfs_io_create(TFS_IO_AUTO, &io) || !(fdc = tfs_fdcache_create(io, 16)))
		goto out;
	env = (struct tfs_plog_env){ .io = io, .fdcache = fdc, .config = &cfg, .read_only = true };
	if ((err = tfs_plog_open(&env, dir, false, &pl)) != 0) {
		complain("%s: the engine cannot open it: %s", dir, tfs_strerror(err));
		goto out;
	}
	if ((err = tfs_plog_cursor_open(pl, 0, &c)) != 0)
		goto out;
	while ((err = tfs_plog_cursor_next(c, &r, NULL)) == 1) {
		const char *diff;
		if (n >= nwant) {
			complain("%s: record at offset %lld is not in %s", dir, (long long)r.offset,
			         jsonl_path);
			goto out;
		}
		if ((diff = record_diff(&r, &want[n])) != NULL) {
			complain("%s: record %zu (offset %lld): %s differs", dir, n,
			         (long long)r.offset, diff);
			goto out;
		}
		n++;
	}
	if (err < 0 || n != nwant) {
		complain("%s: %zu records read (%s), %s lists %zu", dir, n,
		         err < 0 ? tfs_strerror(err) : "end", jsonl_path, nwant);
		goto out;
	}
	/* the key directory names each key's newest record, and tombstoned keys not */
	for (size_t i = 0; i < nwant; i++) {
		struct tfs_record_copy rc2;
		bool newest = true;
		if (want[i].key.null)
			continue;
		for (size_t j = i + 1; j < nwant; j++)
			if (!want[j].key.null && want[j].key.len == want[i].key.len &&
			    !memcmp(want[j].key.p, want[i].key.p, want[i].key.len))
				newest = false;
		if (!newest)
			continue;
		err = tfs_plog_read_key(pl, tfs_slice_make(want[i].key.p, want[i].key.len), &rc2);
		if (want[i].value.null ? err != -ENOENT :
		    (err != 0 || rc2.value_len != want[i].value.len ||
		     (rc2.value_len && memcmp(rc2.value, want[i].value.p, rc2.value_len)))) {
			complain("%s: key directory disagrees for the key of offset %lld", dir,
			         (long long)want[i].offset);
			if (err == 0)
				tfs_record_copy_release(&rc2);
			goto out;
		}
		if (err == 0) {
			tfs_record_copy_release(&rc2);
			live++;
		}
	}
	if (tfs_plog_live_keys(pl) != live) {
		complain("%s: %zu live keys, expected %zu", dir, tfs_plog_live_keys(pl), live);
		goto out;
	}
	printf("%s: %s: %zu records and %zu live keys match through the engine\n", prog, dir, n, live);
	rc = 0;
out:
	tfs_plog_cursor_close(c);
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	for (size_t i = 0; i < nwant; i++)
		jrecord_free(&want[i]);
	free(want);
	return rc;
}

/* The optional CODEC argument: none when absent. */
static int parse_codec(int argc, char **argv, int *codec)
{
	static const char *const names[] = { "none", "gzip", "snappy", "lz4", "zstd" };

	*codec = TFS_CODEC_NONE;
	if (argc == 4)
		return 0;
	for (int c = 0; c < (int)(sizeof(names) / sizeof(names[0])); c++) {
		if (argc == 5 && !strcmp(argv[4], names[c])) {
			*codec = c;
			return 0;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	int codec;

	if (argc == 4 && !strcmp(argv[1], "read"))
		return cmd_read(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "plog-read"))
		return cmd_plog_read(argv[2], argv[3]);
	if ((argc == 4 || argc == 5) && parse_codec(argc, argv, &codec) == 0) {
		if (!strcmp(argv[1], "write"))
			return cmd_write(argv[2], argv[3], codec);
		if (!strcmp(argv[1], "plog-produce"))
			return cmd_plog_produce(argv[2], argv[3], codec);
		if (!strcmp(argv[1], "plog-write"))
			return cmd_plog_write(argv[2], argv[3], codec);
	}
	fprintf(stderr, "usage: %s write LOGFILE EXPECTED.jsonl [CODEC]\n"
	                "       %s read LOGFILE EXPECTED.jsonl\n"
	                "       %s plog-write PARTITION_DIR EXPECTED.jsonl [CODEC]\n"
	                "       %s plog-read PARTITION_DIR EXPECTED.jsonl\n"
	                "       %s plog-produce PARTITION_DIR LOGFILE [CODEC]\n"
	                "CODEC: none (default), gzip, snappy, lz4 or zstd\n",
	        prog, prog, prog, prog, prog);
	return EXIT_USAGE;
}
