/* wire.c - Kafka's primitive types, read with bounds checks and written into a
 * growing buffer (see kafka_internal.h). Big-endian integers; KIP-482 compact
 * strings, bytes and arrays (uvarint N + 1, 0 = null) and tagged fields in
 * flexible versions. */
#include "kafka/kafka_internal.h"

#include <stdlib.h>
#include <string.h>

#include "engine/log/segment.h"

void kr_init(struct kr *r, const void *p, size_t len, bool flex)
{
	r->p = p;
	r->len = len;
	r->pos = 0;
	r->bad = false;
	r->flex = flex;
}

static const uint8_t *take(struct kr *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || r->len - r->pos < n) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->pos;
	r->pos += n;
	return p;
}

int8_t kr_i8(struct kr *r)
{
	const uint8_t *p = take(r, 1);
	return p ? (int8_t)p[0] : 0;
}

int16_t kr_i16(struct kr *r)
{
	const uint8_t *p = take(r, 2);
	return p ? (int16_t)(((uint16_t)p[0] << 8) | p[1]) : 0;
}

int32_t kr_i32(struct kr *r)
{
	const uint8_t *p = take(r, 4);
	return p ? (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	                     ((uint32_t)p[2] << 8) | p[3]) : 0;
}

int64_t kr_i64(struct kr *r)
{
	uint64_t hi = (uint32_t)kr_i32(r), lo = (uint32_t)kr_i32(r);
	return (int64_t)((hi << 32) | lo);
}

uint32_t kr_uvarint(struct kr *r)
{
	uint32_t v = 0;

	for (int shift = 0; shift < 35; shift += 7) {
		const uint8_t *p = take(r, 1);
		if (!p)
			return 0;
		if (shift == 28 && (p[0] & 0xf0)) {
			r->bad = true;          /* more than 32 bits, or a sixth byte */
			return 0;
		}
		v |= (uint32_t)(p[0] & 0x7f) << shift;
		if (!(p[0] & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static struct tfs_slice take_slice(struct kr *r, int64_t n, bool *null)
{
	struct tfs_slice s = { NULL, 0 };
	const uint8_t *p;

	if (null)
		*null = false;
	if (r->bad)
		return s;
	if (n == -1) {
		if (null)
			*null = true;
		else
			r->bad = true;
		return s;
	}
	if (n < 0) {
		r->bad = true;
		return s;
	}
	p = take(r, (size_t)n);
	if (p)
		s = tfs_slice_make(p, (size_t)n);
	return s;
}

struct tfs_slice kr_str(struct kr *r, bool *null)
{
	int64_t n = r->flex ? (int64_t)kr_uvarint(r) - 1 : kr_i16(r);
	return take_slice(r, n, null);
}

struct tfs_slice kr_str16(struct kr *r)
{
	bool null;
	return take_slice(r, kr_i16(r), &null);
}

struct tfs_slice kr_bytes(struct kr *r, bool *null)
{
	int64_t n = r->flex ? (int64_t)kr_uvarint(r) - 1 : kr_i32(r);
	return take_slice(r, n, null);
}

int32_t kr_array(struct kr *r, size_t min_elem)
{
	int64_t n = r->flex ? (int64_t)kr_uvarint(r) - 1 : kr_i32(r);

	if (r->bad)
		return 0;
	if (n == -1)
		return -1;
	if (n < 0 || (uint64_t)n * (min_elem ? min_elem : 1) > r->len - r->pos) {
		r->bad = true;
		return 0;
	}
	return (int32_t)n;
}

void kr_tags(struct kr *r)
{
	uint32_t count;

	if (!r->flex)
		return;
	count = kr_uvarint(r);
	for (uint32_t i = 0; i < count && !r->bad; i++) {
		(void)kr_uvarint(r);                /* tag */
		(void)take(r, kr_uvarint(r));       /* size, data: skipped */
	}
}

bool kr_left(const struct kr *r)
{
	return !r->bad && r->pos < r->len;
}

/* ---- writer ---- */

void kw_init(struct kw *w)
{
	memset(w, 0, sizeof(*w));
}

void kw_free(struct kw *w)
{
	for (size_t i = 0; i < w->nholes; i++)
		tfs_segment_unref(w->holes[i].span.seg);
	free(w->holes);
	free(w->buf);
	kw_init(w);
}

static uint8_t *put(struct kw *w, size_t n)
{
	if (w->oom)
		return NULL;
	if (w->cap - w->len < n) {
		size_t cap = w->cap ? w->cap : 256;
		uint8_t *nb;
		while (cap - w->len < n)
			cap *= 2;
		nb = realloc(w->buf, cap);
		if (!nb) {
			w->oom = true;
			return NULL;
		}
		w->buf = nb;
		w->cap = cap;
	}
	w->len += n;
	return w->buf + w->len - n;
}

void kw_i8(struct kw *w, int8_t v)
{
	uint8_t *p = put(w, 1);
	if (p)
		p[0] = (uint8_t)v;
}

void kw_i16(struct kw *w, int16_t v)
{
	uint8_t *p = put(w, 2);
	if (p) {
		p[0] = (uint8_t)((uint16_t)v >> 8);
		p[1] = (uint8_t)v;
	}
}

void kw_i32(struct kw *w, int32_t v)
{
	uint8_t *p = put(w, 4);
	if (p)
		for (int i = 0; i < 4; i++)
			p[i] = (uint8_t)((uint32_t)v >> (24 - 8 * i));
}

void kw_i64(struct kw *w, int64_t v)
{
	kw_i32(w, (int32_t)((uint64_t)v >> 32));
	kw_i32(w, (int32_t)(uint32_t)v);
}

void kw_uvarint(struct kw *w, uint32_t v)
{
	while (v >= 0x80) {
		kw_i8(w, (int8_t)(uint8_t)(v | 0x80));
		v >>= 7;
	}
	kw_i8(w, (int8_t)v);
}

void kw_raw(struct kw *w, const void *src, size_t len)
{
	uint8_t *p = put(w, len);
	if (p && len)
		memcpy(p, src, len);
}

void kw_str(struct kw *w, const void *s, size_t len)
{
	if (len > INT16_MAX)
		len = INT16_MAX;                /* names are bounded long before this */
	if (w->flex)
		kw_uvarint(w, (uint32_t)len + 1);
	else
		kw_i16(w, (int16_t)len);
	kw_raw(w, s, len);
}

void kw_cstr(struct kw *w, const char *s)
{
	kw_str(w, s, strlen(s));
}

void kw_nullstr(struct kw *w)
{
	if (w->flex)
		kw_uvarint(w, 0);
	else
		kw_i16(w, -1);
}

void kw_array(struct kw *w, int32_t n)
{
	if (w->flex)
		kw_uvarint(w, (uint32_t)(n + 1));
	else
		kw_i32(w, n);
}

void kw_tags(struct kw *w)
{
	if (w->flex)
		kw_uvarint(w, 0);
}

size_t kw_mark(const struct kw *w)
{
	return w->len;
}

void kw_patch_i32(struct kw *w, size_t at, int32_t v)
{
	if (w->oom || at + 4 > w->len)
		return;
	for (int i = 0; i < 4; i++)
		w->buf[at + i] = (uint8_t)((uint32_t)v >> (24 - 8 * i));
}

void kw_span(struct kw *w, struct tfs_plog_span span)
{
	if (!w->oom && w->nholes == w->hcap) {
		size_t cap = w->hcap ? 2 * w->hcap : 8;
		struct kw_hole *nh = realloc(w->holes, cap * sizeof(*nh));
		if (!nh)
			w->oom = true;
		else {
			w->holes = nh;
			w->hcap = cap;
		}
	}
	if (w->oom) {
		tfs_segment_unref(span.seg);
		return;
	}
	w->holes[w->nholes++] = (struct kw_hole){ w->len, span };
	w->span_bytes += span.len;
}
