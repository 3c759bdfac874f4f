/* groups_codec.c - __consumer_offsets keys and values (layouts in groups_codec.h).
 *
 * Encoding sizes every field first, then writes field by field into one buffer;
 * decoding walks a bounded reader that fails (TFS_ECORRUPT) at the first field
 * running past the end, and insists that nothing is left over. */
#include "engine/groups/groups_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NULL_LEN (-1)     /* the length of a null string or null bytes */

/* ---- writing ---- */

struct wr {
	uint8_t *p;
	size_t len;
};

static void w16(struct wr *w, int16_t v)
{
	uint16_t u = (uint16_t)v;
	w->p[w->len++] = (uint8_t)(u >> 8);
	w->p[w->len++] = (uint8_t)u;
}

static void w32(struct wr *w, int32_t v)
{
	uint32_t u = (uint32_t)v;
	for (int shift = 24; shift >= 0; shift -= 8)
		w->p[w->len++] = (uint8_t)(u >> shift);
}

static void w64(struct wr *w, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int shift = 56; shift >= 0; shift -= 8)
		w->p[w->len++] = (uint8_t)(u >> shift);
}

static void wstr(struct wr *w, struct tfs_slice s, bool null)
{
	if (null) {
		w16(w, NULL_LEN);
		return;
	}
	w16(w, (int16_t)s.len);
	if (s.len)
		memcpy(w->p + w->len, s.p, s.len);
	w->len += s.len;
}

static void wbytes(struct wr *w, struct tfs_slice s)
{
	w32(w, (int32_t)s.len);
	if (s.len)
		memcpy(w->p + w->len, s.p, s.len);
	w->len += s.len;
}

static bool str_ok(struct tfs_slice s)
{
	return s.len <= TFS_GSTRING_MAX && (s.len == 0 || s.p);
}

static bool bytes_ok(struct tfs_slice s)
{
	return s.len <= INT32_MAX && (s.len == 0 || s.p);
}

static int wr_alloc(struct wr *w, size_t size)
{
	w->p = malloc(size);
	w->len = 0;
	return w->p ? 0 : -ENOMEM;
}

/* Every encoder sized its buffer exactly, so w->len is that size now. */
static int wr_done(struct wr *w, uint8_t **out, size_t *len)
{
	*out = w->p;
	*len = w->len;
	return 0;
}

int tfs_gcodec_offset_key(struct tfs_slice group, struct tfs_slice topic, int32_t partition,
                          uint8_t **out, size_t *len)
{
	size_t size = 2 + 2 + group.len + 2 + topic.len + 4;
	struct wr w;

	if (!str_ok(group) || !str_ok(topic))
		return -EINVAL;
	if (wr_alloc(&w, size) < 0)
		return -ENOMEM;
	w16(&w, TFS_GKEY_OFFSET_V1);
	wstr(&w, group, false);
	wstr(&w, topic, false);
	w32(&w, partition);
	return wr_done(&w, out, len);
}

int tfs_gcodec_offset_value(tfs_offset_t offset, int32_t leader_epoch, struct tfs_slice metadata,
                            int64_t commit_ms, uint8_t **out, size_t *len)
{
	size_t size = 2 + 8 + 4 + 2 + metadata.len + 8;
	struct wr w;

	if (!str_ok(metadata))
		return -EINVAL;
	if (wr_alloc(&w, size) < 0)
		return -ENOMEM;
	w16(&w, TFS_GVALUE_OFFSET_WRITTEN);
	w64(&w, offset);
	w32(&w, leader_epoch);
	wstr(&w, metadata, false);
	w64(&w, commit_ms);
	return wr_done(&w, out, len);
}

int tfs_gcodec_group_key(struct tfs_slice group, uint8_t **out, size_t *len)
{
	size_t size = 2 + 2 + group.len;
	struct wr w;

	if (!str_ok(group))
		return -EINVAL;
	if (wr_alloc(&w, size) < 0)
		return -ENOMEM;
	w16(&w, TFS_GKEY_GROUP);
	wstr(&w, group, false);
	return wr_done(&w, out, len);
}

int tfs_gcodec_group_value(const struct tfs_ggroup_value *v, uint8_t **out, size_t *len)
{
	size_t size = 2 + 2 + v->protocol_type.len + 4 + 2 + 2 + 8 + 4;
	struct wr w;

	if (!str_ok(v->protocol_type) || (!v->protocol_null && !str_ok(v->protocol)) ||
	    (!v->leader_null && !str_ok(v->leader)) || v->member_count < 0 ||
	    (v->member_count > 0 && !v->members))
		return -EINVAL;
	size += v->protocol_null ? 0 : v->protocol.len;
	size += v->leader_null ? 0 : v->leader.len;
	for (int32_t i = 0; i < v->member_count; i++) {
		const struct tfs_gmember *m = &v->members[i];
		if (!str_ok(m->member_id) || (!m->instance_id_null && !str_ok(m->instance_id)) ||
		    !str_ok(m->client_id) || !str_ok(m->client_host) || !bytes_ok(m->subscription) ||
		    !bytes_ok(m->assignment))
			return -EINVAL;
		size += 2 + m->member_id.len + 2 + (m->instance_id_null ? 0 : m->instance_id.len) +
		        2 + m->client_id.len + 2 + m->client_host.len + 4 + 4 +
		        4 + m->subscription.len + 4 + m->assignment.len;
	}
	if (wr_alloc(&w, size) < 0)
		return -ENOMEM;
	w16(&w, TFS_GVALUE_GROUP_WRITTEN);
	wstr(&w, v->protocol_type, false);
	w32(&w, v->generation);
	wstr(&w, v->protocol, v->protocol_null);
	wstr(&w, v->leader, v->leader_null);
	w64(&w, v->state_ms);
	w32(&w, v->member_count);
	for (int32_t i = 0; i < v->member_count; i++) {
		const struct tfs_gmember *m = &v->members[i];
		wstr(&w, m->member_id, false);
		wstr(&w, m->instance_id, m->instance_id_null);
		wstr(&w, m->client_id, false);
		wstr(&w, m->client_host, false);
		w32(&w, m->rebalance_timeout_ms);
		w32(&w, m->session_timeout_ms);
		wbytes(&w, m->subscription);
		wbytes(&w, m->assignment);
	}
	return wr_done(&w, out, len);
}

/* ---- reading ---- */

struct rd {
	const uint8_t *p;
	size_t left;
	bool bad;               /* a field ran past the end: every later read fails too */
};

static bool take(struct rd *r, size_t n, const uint8_t **at)
{
	if (r->bad || r->left < n) {
		r->bad = true;
		return false;
	}
	*at = r->p;
	r->p += n;
	r->left -= n;
	return true;
}

static int64_t rnum(struct rd *r, size_t n)
{
	const uint8_t *at;
	uint64_t u = 0;

	if (!take(r, n, &at))
		return 0;
	for (size_t i = 0; i < n; i++)
		u = (u << 8) | at[i];
	if (n == 2)
		return (int16_t)(uint16_t)u;
	if (n == 4)
		return (int32_t)(uint32_t)u;
	return (int64_t)u;
}

/* A string (nullable if null != NULL); a negative length other than -1, or -1
 * where null is not allowed, marks the reader bad. */
static struct tfs_slice rstr(struct rd *r, bool *null)
{
	struct tfs_slice s = { NULL, 0 };
	int64_t n = rnum(r, 2);
	const uint8_t *at;

	if (null)
		*null = false;
	if (n == NULL_LEN && null && !r->bad) {
		*null = true;
		return s;
	}
	if (n < 0) {
		r->bad = true;
		return s;
	}
	if (take(r, (size_t)n, &at))
		s = tfs_slice_make(at, (size_t)n);
	return s;
}

static void rbytes(struct rd *r)
{
	int64_t n = rnum(r, 4);
	const uint8_t *at;

	if (n < 0)        /* Kafka writes subscription and assignment non-null */
		r->bad = true;
	else
		take(r, (size_t)n, &at);
}

static int rd_end(const struct rd *r)
{
	return r->bad || r->left ? TFS_ECORRUPT : 0;
}

int tfs_gcodec_key_decode(struct tfs_slice key, struct tfs_gkey *out)
{
	struct rd r = { key.p, key.len, false };

	memset(out, 0, sizeof(*out));
	out->version = (int16_t)rnum(&r, 2);
	if (r.bad)
		return TFS_ECORRUPT;
	switch (out->version) {
	case TFS_GKEY_OFFSET_V0:
	case TFS_GKEY_OFFSET_V1:
		out->group = rstr(&r, NULL);
		out->topic = rstr(&r, NULL);
		out->partition = (int32_t)rnum(&r, 4);
		return rd_end(&r);
	case TFS_GKEY_GROUP:
		out->group = rstr(&r, NULL);
		return rd_end(&r);
	default:
		return out->version < 0 ? TFS_ECORRUPT : TFS_EUNSUPPORTED;
	}
}

int tfs_gcodec_offset_value_decode(struct tfs_slice value, struct tfs_goffset_value *out)
{
	struct rd r = { value.p, value.len, false };

	memset(out, 0, sizeof(*out));
	out->leader_epoch = -1;
	out->expire_ms = -1;
	out->version = (int16_t)rnum(&r, 2);
	if (r.bad)
		return TFS_ECORRUPT;
	if (out->version < 0)
		return TFS_ECORRUPT;
	if (out->version > TFS_GVALUE_OFFSET_WRITTEN)
		return TFS_EUNSUPPORTED;
	out->offset = rnum(&r, 8);
	if (out->version == 3)
		out->leader_epoch = (int32_t)rnum(&r, 4);
	out->metadata = rstr(&r, NULL);
	out->commit_ms = rnum(&r, 8);
	if (out->version == 1)
		out->expire_ms = rnum(&r, 8);
	return rd_end(&r);
}

int tfs_gcodec_group_value_decode(struct tfs_slice value, struct tfs_ggroup_value *out)
{
	struct rd r = { value.p, value.len, false };
	int16_t v;
	bool null;

	memset(out, 0, sizeof(*out));
	out->state_ms = -1;
	v = out->version = (int16_t)rnum(&r, 2);
	if (r.bad || v < 0)
		return TFS_ECORRUPT;
	if (v > TFS_GVALUE_GROUP_WRITTEN)
		return TFS_EUNSUPPORTED;
	out->protocol_type = rstr(&r, NULL);
	out->generation = (int32_t)rnum(&r, 4);
	out->protocol = rstr(&r, &out->protocol_null);
	out->leader = rstr(&r, &out->leader_null);
	if (v >= 2)
		out->state_ms = rnum(&r, 8);
	out->member_count = (int32_t)rnum(&r, 4);
	if (r.bad || out->member_count < 0)
		return TFS_ECORRUPT;
	for (int32_t i = 0; i < out->member_count && !r.bad; i++) {
		rstr(&r, NULL);                 /* member id */
		if (v >= 3)
			rstr(&r, &null);        /* group instance id */
		rstr(&r, NULL);                 /* client id */
		rstr(&r, NULL);                 /* client host */
		if (v >= 1)
			rnum(&r, 4);            /* rebalance timeout */
		rnum(&r, 4);                    /* session timeout */
		rbytes(&r);                     /* subscription */
		rbytes(&r);                     /* assignment */
	}
	return rd_end(&r);
}

/* ---- placement ---- */

/* Decodes one UTF-8 sequence at s[*i] (advancing *i); -1 if it is not a valid,
 * shortest-form encoding of a code point outside the surrogate range. */
static int32_t utf8_next(struct tfs_slice s, size_t *i)
{
	uint8_t c = s.p[*i];
	int32_t cp, min;
	size_t n;

	if (c < 0x80) {
		(*i)++;
		return c;
	}
	if ((c & 0xE0) == 0xC0) {
		n = 1, cp = c & 0x1F, min = 0x80;
	} else if ((c & 0xF0) == 0xE0) {
		n = 2, cp = c & 0x0F, min = 0x800;
	} else if ((c & 0xF8) == 0xF0) {
		n = 3, cp = c & 0x07, min = 0x10000;
	} else {
		return -1;
	}
	if (s.len - *i - 1 < n)
		return -1;
	for (size_t k = 1; k <= n; k++) {
		uint8_t cc = s.p[*i + k];
		if ((cc & 0xC0) != 0x80)
			return -1;
		cp = (cp << 6) | (cc & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	*i += n + 1;
	return cp;
}

#define JAVA_HASH_MUL 31u

int tfs_gcodec_java_hash(struct tfs_slice group, int32_t *hash)
{
	uint32_t h = 0;   /* Java's int overflow, without C's undefined behaviour */

	for (size_t i = 0; i < group.len;) {
		int32_t cp = utf8_next(group, &i);
		if (cp < 0)
			return -EINVAL;
		if (cp >= 0x10000) {      /* two UTF-16 units: a surrogate pair */
			uint32_t u = (uint32_t)cp - 0x10000;
			h = h * JAVA_HASH_MUL + (0xD800 + (u >> 10));
			h = h * JAVA_HASH_MUL + (0xDC00 + (u & 0x3FF));
		} else {
			h = h * JAVA_HASH_MUL + (uint32_t)cp;
		}
	}
	*hash = (int32_t)h;
	return 0;
}
