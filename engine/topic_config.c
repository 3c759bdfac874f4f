/* topic_config.c - Kafka's topic and cleaner config names: parse, validate, format,
 * and the atomic <topic>.config file; see topic_config.h.
 *
 * Every setting is one row of a table (name, kind, where it lives in the struct,
 * bounds). set() parses the whole value and checks its bounds before it stores
 * anything, so a failed set leaves the struct as it was; load() parses into copies
 * and commits only after the last line passed.
 *
 * Values follow Kafka's names, defaults and validators (ConfigDef / LogConfig /
 * CleanerConfig), with these topicfs decisions:
 *   - numbers are strict: the whole string must be a base-10 integer (or, for ratios
 *     and rates, a finite floating-point number); no surrounding blanks, no trailing
 *     junk, no overflow. The config file loader trims blanks around name and value.
 *   - segment.bytes, segment.index.bytes, index.interval.bytes, max.message.bytes and
 *     log.cleaner.io.buffer.size are Kafka INTs: at most 2147483647 (a segment's
 *     positions are 32-bit in its .index).
 *   - segment.index.bytes >= 8 (one index entry), where Kafka says >= 4.
 *   - compression.type takes none, gzip, snappy, lz4 and zstd; Kafka's
 *     "uncompressed" means none, and "producer" (keep the producer's codec) also
 *     means none, since topicfs itself writes every batch it stores. get() prints
 *     the stored codec, so "producer" reads back as "none".
 *   - compression.zstd.level (Kafka 3.8, KIP-390) is checked against the linked
 *     libzstd's ZSTD_minCLevel()..ZSTD_maxCLevel(), as Kafka checks against zstd-jni's;
 *     it applies only while compression.type is zstd.
 *   - flush.ms (Kafka's name) defaults to 1000 here rather than Kafka's Long.MAX_VALUE.
 *   - log.cleaner.threads is capped at 64; log.cleaner.dedupe.buffer.size must be at
 *     least 1 MiB; log.cleaner.io.buffer.size at least 4096.
 */
#include "engine/topic_config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "engine/format/batch_codec.h"
#include "io/file_util.h"
#include "io/log.h"

#define MODULE "topic_config"

/* Kafka defaults (LogConfig / ServerLogConfigs / CleanerConfig) and topicfs's own. */
#define KIB ((int64_t)1024)
#define MIB (KIB * KIB)
#define DEF_SEGMENT_BYTES (100 * MIB)          /* topicfs: like __consumer_offsets */
#define DEF_SEGMENT_MS ((int64_t)604800000)    /* 7 days */
#define DEF_DIRTY_RATIO 0.5
#define DEF_DELETE_RETENTION_MS ((int64_t)86400000)   /* 24 hours */
#define DEF_MIN_LAG_MS ((int64_t)0)
#define DEF_MAX_LAG_MS INT64_MAX
#define DEF_RETENTION_MS ((int64_t)604800000)  /* 7 days */
#define DEF_RETENTION_BYTES ((int64_t)-1)      /* unlimited */
#define DEF_MAX_MESSAGE_BYTES 1048588          /* 1 MiB + 12 (record batch overhead) */
#define DEF_SEGMENT_INDEX_BYTES (10 * 1048576)
#define DEF_INDEX_INTERVAL_BYTES 4096
#define DEF_FLUSH_MS ((int64_t)1000)           /* topicfs: page-cache bound */
#define DEF_ZSTD_LEVEL 3                       /* ZstdCompression.DEFAULT_LEVEL */

#define DEF_CLEANER_THREADS 1
#define DEF_DEDUPE_BUFFER_BYTES (128 * MIB)
#define DEF_IO_BUFFER_BYTES (512 * KIB)
#define DEF_IO_LOAD_FACTOR 0.9
#define DEF_IO_MAX_BYTES_PER_SEC DBL_MAX       /* Kafka's Double.MAX_VALUE: unbounded */
#define DEF_BACKOFF_MS ((int64_t)15000)

/* Bounds. */
#define MIN_SEGMENT_BYTES 14          /* Kafka <= 3.9: one record batch header's prefix */
#define MIN_SEGMENT_INDEX_BYTES 8     /* one offset-index entry */
#define UNLIMITED (-1)                /* retention.ms / retention.bytes */
#define MAX_CLEANER_THREADS 64
#define MIN_DEDUPE_BUFFER_BYTES MIB
#define MIN_IO_BUFFER_BYTES 4096

/* Ownership lines in the file. uid/gid (uid_t)-1 is "no change" to chown(2). */
#define META_UID "topicfs.uid"
#define META_GID "topicfs.gid"
#define META_MODE "topicfs.mode"
#define META_PARTITIONS "topicfs.partitions"
#define META_DELETING "topicfs.deleting"
/* The last line of a file topicfs wrote: the CRC-32C of every byte before it
 * (docs/format.md, "Topic config files"). A file without it (written by hand)
 * loads unchecked; one with it loads only if it matches. */
#define META_CRC "topicfs.crc32c"
#define CRC_LINE_BYTES (sizeof(META_CRC "=") - 1 + 8 + 1)   /* name=, 8 hex digits, \n */
#define MAX_ID ((int64_t)UINT32_MAX - 1)
#define MODE_MASK 07777

#define CONFIG_FILE_MAX (64 * 1024)   /* a full file is under 1 KiB */
#define WHY_MAX 160                   /* one reason in a log line */
#define VALUE_MAX TFS_TOPIC_CONFIG_VALUE_MAX
#define DOUBLE_DIGITS_MIN 15          /* shortest round trip is 15..17 digits */
#define DOUBLE_DIGITS_MAX 17

enum vkind {
	V_INT,       /* int32/int/int64 member, bounds imin..imax */
	V_DOUBLE,    /* double member, bounds dmin..dmax (dmin excluded if dmin_open) */
	V_POLICY,    /* unsigned TFS_POLICY_* bits */
	V_CODEC,     /* int holding enum tfs_codec */
	V_TSTYPE,    /* enum tfs_ts_type */
	V_ZLEVEL,    /* int zstd level; bounds are the linked libzstd's, not imin..imax */
};

struct field {
	const char *name;
	enum vkind kind;
	size_t off;
	size_t width;
	int64_t imin, imax;
	double dmin, dmax;
	bool dmin_open;
};

#define MEMBER_SIZE(st, m) sizeof(((st *)0)->m)
#define INT_FIELD(st, nm, m, lo, hi) \
	{ nm, V_INT, offsetof(st, m), MEMBER_SIZE(st, m), lo, hi, 0, 0, false }
#define DBL_FIELD(st, nm, m, lo, hi, open) \
	{ nm, V_DOUBLE, offsetof(st, m), MEMBER_SIZE(st, m), 0, 0, lo, hi, open }
#define KIND_FIELD(st, nm, m, k) \
	{ nm, k, offsetof(st, m), MEMBER_SIZE(st, m), 0, 0, 0, 0, false }

#define TC struct tfs_topic_config
#define CC struct tfs_cleaner_config

/* In tfs_topic_config_names() order. */
static const struct field topic_fields[] = {
	KIND_FIELD(TC, "cleanup.policy", cleanup_policy, V_POLICY),
	INT_FIELD(TC, "segment.bytes", segment_bytes, MIN_SEGMENT_BYTES, INT32_MAX),
	INT_FIELD(TC, "segment.ms", segment_ms, 1, INT64_MAX),
	DBL_FIELD(TC, "min.cleanable.dirty.ratio", min_cleanable_dirty_ratio, 0.0, 1.0, false),
	INT_FIELD(TC, "delete.retention.ms", delete_retention_ms, 0, INT64_MAX),
	INT_FIELD(TC, "min.compaction.lag.ms", min_compaction_lag_ms, 0, INT64_MAX),
	INT_FIELD(TC, "max.compaction.lag.ms", max_compaction_lag_ms, 1, INT64_MAX),
	INT_FIELD(TC, "retention.ms", retention_ms, UNLIMITED, INT64_MAX),
	INT_FIELD(TC, "retention.bytes", retention_bytes, UNLIMITED, INT64_MAX),
	INT_FIELD(TC, "max.message.bytes", max_message_bytes, 0, INT32_MAX),
	KIND_FIELD(TC, "compression.type", compression, V_CODEC),
	KIND_FIELD(TC, "compression.zstd.level", zstd_level, V_ZLEVEL),
	KIND_FIELD(TC, "message.timestamp.type", timestamp_type, V_TSTYPE),
	INT_FIELD(TC, "segment.index.bytes", segment_index_bytes, MIN_SEGMENT_INDEX_BYTES, INT32_MAX),
	INT_FIELD(TC, "index.interval.bytes", index_interval_bytes, 0, INT32_MAX),
	INT_FIELD(TC, "flush.ms", flush_ms, 0, INT64_MAX),
	INT_FIELD(TC, "producer.id.expiration.ms", producer_id_expiration_ms, 1, INT64_MAX),
};

static const struct field cleaner_fields[] = {
	INT_FIELD(CC, "log.cleaner.threads", threads, 0, MAX_CLEANER_THREADS),
	INT_FIELD(CC, "log.cleaner.dedupe.buffer.size", dedupe_buffer_size,
	          MIN_DEDUPE_BUFFER_BYTES, INT64_MAX),
	INT_FIELD(CC, "log.cleaner.io.buffer.size", io_buffer_size, MIN_IO_BUFFER_BYTES, INT32_MAX),
	DBL_FIELD(CC, "log.cleaner.io.buffer.load.factor", io_buffer_load_factor, 0.0, 1.0, true),
	DBL_FIELD(CC, "log.cleaner.io.max.bytes.per.second", io_max_bytes_per_second,
	          0.0, DBL_MAX, true),
	INT_FIELD(CC, "log.cleaner.backoff.ms", backoff_ms, 0, INT64_MAX),
};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))
#define N_TOPIC NFIELDS(topic_fields)
#define N_CLEANER NFIELDS(cleaner_fields)

static const char *const topic_names[N_TOPIC + 1] = {
	"cleanup.policy", "segment.bytes", "segment.ms", "min.cleanable.dirty.ratio",
	"delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
	"retention.ms", "retention.bytes", "max.message.bytes", "compression.type",
	"compression.zstd.level", "message.timestamp.type", "segment.index.bytes",
	"index.interval.bytes", "flush.ms", "producer.id.expiration.ms", NULL,
};

static const char *const cleaner_names[N_CLEANER + 1] = {
	"log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
	"log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
	"log.cleaner.backoff.ms", NULL,
};

static const char *const policy_names[] = {
	[TFS_POLICY_DELETE] = "delete",
	[TFS_POLICY_COMPACT] = "compact",
	[TFS_POLICY_COMPACT | TFS_POLICY_DELETE] = "compact,delete",
};

static const char *const ts_names[] = {
	[TFS_TS_CREATE_TIME] = "CreateTime",
	[TFS_TS_LOG_APPEND_TIME] = "LogAppendTime",
};

/* A parsed value, not yet stored. */
struct value {
	int64_t i;
	double d;
};

/* ---- topic names ---------------------------------------------------------------- */

bool tfs_topic_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > TFS_TOPIC_NAME_MAX || name[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

/* ---- defaults and names ---------------------------------------------------------- */

void tfs_topic_config_defaults(struct tfs_topic_config *c)
{
	memset(c, 0, sizeof(*c));
	c->cleanup_policy = TFS_POLICY_COMPACT;
	c->segment_bytes = DEF_SEGMENT_BYTES;
	c->segment_ms = DEF_SEGMENT_MS;
	c->min_cleanable_dirty_ratio = DEF_DIRTY_RATIO;
	c->delete_retention_ms = DEF_DELETE_RETENTION_MS;
	c->min_compaction_lag_ms = DEF_MIN_LAG_MS;
	c->max_compaction_lag_ms = DEF_MAX_LAG_MS;
	c->retention_ms = DEF_RETENTION_MS;
	c->retention_bytes = DEF_RETENTION_BYTES;
	c->max_message_bytes = DEF_MAX_MESSAGE_BYTES;
	c->compression = TFS_CODEC_NONE;
	c->zstd_level = DEF_ZSTD_LEVEL;
	c->timestamp_type = TFS_TS_CREATE_TIME;
	c->segment_index_bytes = DEF_SEGMENT_INDEX_BYTES;
	c->producer_id_expiration_ms = 86400000;   /* Kafka's default: one day */
	c->index_interval_bytes = DEF_INDEX_INTERVAL_BYTES;
	c->flush_ms = DEF_FLUSH_MS;
}

void tfs_cleaner_config_defaults(struct tfs_cleaner_config *c)
{
	memset(c, 0, sizeof(*c));
	c->threads = DEF_CLEANER_THREADS;
	c->dedupe_buffer_size = DEF_DEDUPE_BUFFER_BYTES;
	c->io_buffer_size = DEF_IO_BUFFER_BYTES;
	c->io_buffer_load_factor = DEF_IO_LOAD_FACTOR;
	c->io_max_bytes_per_second = DEF_IO_MAX_BYTES_PER_SEC;
	c->backoff_ms = DEF_BACKOFF_MS;
}

const char *const *tfs_topic_config_names(void)
{
	return topic_names;
}

const char *const *tfs_cleaner_config_names(void)
{
	return cleaner_names;
}

static const struct field *find_field(const struct field *tab, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tab[i].name, name) == 0)
			return &tab[i];
	return NULL;
}

/* ---- parsing ----------------------------------------------------------------------- */

/* A whole-string base-10 int64: no blanks, no junk, no overflow. */
static int parse_i64(const char *s, int64_t *out)
{
	char *end = NULL;
	long long v;

	if (!*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (end == s || *end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

/* A whole-string finite double. */
static int parse_double(const char *s, double *out)
{
	char *end = NULL;
	double v;

	if (!*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || !isfinite(v))
		return -ERANGE;
	*out = v;
	return 0;
}

/* Kafka's list of {compact, delete}: one of each at most, blanks around commas. */
static int parse_policy(const char *s, unsigned *out)
{
	unsigned bits = 0;
	const char *p = s;

	for (;;) {
		const char *a, *b;
		unsigned bit;

		while (isspace((unsigned char)*p))
			p++;
		a = p;
		while (*p && *p != ',')
			p++;
		b = p;
		while (b > a && isspace((unsigned char)b[-1]))
			b--;
		if ((size_t)(b - a) == strlen("compact") && memcmp(a, "compact", b - a) == 0)
			bit = TFS_POLICY_COMPACT;
		else if ((size_t)(b - a) == strlen("delete") && memcmp(a, "delete", b - a) == 0)
			bit = TFS_POLICY_DELETE;
		else
			return -EINVAL;
		if (bits & bit)
			return -EINVAL;
		bits |= bit;
		if (!*p)
			break;
		p++;   /* the comma */
	}
	*out = bits;
	return 0;
}

/* Parses value for f into *v, or explains in why (which may be NULL). */
static int parse_value(const struct field *f, const char *value, struct value *v,
                       char *why, size_t why_cap)
{
	int rc;

	switch (f->kind) {
	case V_INT:
	case V_ZLEVEL: {
		int64_t lo = f->imin, hi = f->imax;
		if (f->kind == V_ZLEVEL) {
			lo = ZSTD_minCLevel();
			hi = ZSTD_maxCLevel();
		}
		rc = parse_i64(value, &v->i);
		if (rc == 0 && (v->i < lo || v->i > hi))
			rc = -ERANGE;
		if (rc == -ERANGE) {
			snprintf(why, why_cap, "%s=%.*s is out of range [%" PRId64 ", %" PRId64 "]",
			         f->name, VALUE_MAX, value, lo, hi);
			return -EINVAL;
		}
		if (rc < 0) {
			snprintf(why, why_cap, "%s=%.*s is not an integer", f->name, VALUE_MAX, value);
			return -EINVAL;
		}
		return 0;
	}
	case V_DOUBLE:
		rc = parse_double(value, &v->d);
		if (rc == 0 && (v->d > f->dmax || v->d < f->dmin || (f->dmin_open && v->d == f->dmin)))
			rc = -ERANGE;
		if (rc == -ERANGE) {
			snprintf(why, why_cap, "%s=%.*s is out of range %s%g, %g]", f->name, VALUE_MAX,
			         value, f->dmin_open ? "(" : "[", f->dmin, f->dmax);
			return -EINVAL;
		}
		if (rc < 0) {
			snprintf(why, why_cap, "%s=%.*s is not a number", f->name, VALUE_MAX, value);
			return -EINVAL;
		}
		return 0;
	case V_POLICY: {
		unsigned bits = 0;
		if (parse_policy(value, &bits) < 0) {
			snprintf(why, why_cap, "%s=%.*s is not delete, compact or compact,delete",
			         f->name, VALUE_MAX, value);
			return -EINVAL;
		}
		v->i = bits;
		return 0;
	}
	case V_CODEC:
		if (strcmp(value, "none") == 0 || strcmp(value, "uncompressed") == 0 ||
		    strcmp(value, "producer") == 0) {
			v->i = TFS_CODEC_NONE;
			return 0;
		}
		for (int c = TFS_CODEC_GZIP; c <= TFS_CODEC_ZSTD; c++) {
			if (strcmp(value, tfs_codec_name(c)) == 0) {
				v->i = c;
				return 0;
			}
		}
		snprintf(why, why_cap, "%s=%.*s is not none, gzip, snappy, lz4 or zstd", f->name,
		         VALUE_MAX, value);
		return -EINVAL;
	case V_TSTYPE:
		for (size_t i = 0; i < NFIELDS(ts_names); i++) {
			if (strcmp(value, ts_names[i]) == 0) {
				v->i = (int64_t)i;
				return 0;
			}
		}
		snprintf(why, why_cap, "%s=%.*s is not CreateTime or LogAppendTime", f->name,
		         VALUE_MAX, value);
		return -EINVAL;
	}
	return -EINVAL;
}

static void store_value(void *base, const struct field *f, const struct value *v)
{
	char *p = (char *)base + f->off;

	switch (f->kind) {
	case V_INT:
		if (f->width == sizeof(int64_t)) {
			int64_t x = v->i;
			memcpy(p, &x, sizeof(x));
		} else {
			int32_t x = (int32_t)v->i;   /* in range: imax <= INT32_MAX for these */
			memcpy(p, &x, sizeof(x));
		}
		break;
	case V_DOUBLE:
		memcpy(p, &v->d, sizeof(v->d));
		break;
	case V_POLICY:
		*(unsigned *)(void *)p = (unsigned)v->i;
		break;
	case V_CODEC:
		*(int *)(void *)p = (int)v->i;
		break;
	case V_TSTYPE:
		*(enum tfs_ts_type *)(void *)p = (enum tfs_ts_type)v->i;
		break;
	case V_ZLEVEL:
		*(int *)(void *)p = (int)v->i;   /* in range: checked against libzstd's */
		break;
	}
}

/* Parses and stores one setting; on error base is untouched and why explains. */
static int set_field(void *base, const struct field *tab, size_t n, const char *name,
                     const char *value, char *why, size_t why_cap)
{
	const struct field *f = find_field(tab, n, name);
	struct value v = { 0, 0.0 };
	int rc;

	if (!f) {
		snprintf(why, why_cap, "unknown name %.*s", VALUE_MAX, name);
		return -EINVAL;
	}
	rc = parse_value(f, value, &v, why, why_cap);
	if (rc < 0)
		return rc;
	store_value(base, f, &v);
	return 0;
}

int tfs_topic_config_set(struct tfs_topic_config *c, const char *name, const char *value)
{
	char why[WHY_MAX];
	return set_field(c, topic_fields, N_TOPIC, name, value, why, sizeof(why));
}

int tfs_cleaner_config_set(struct tfs_cleaner_config *c, const char *name, const char *value)
{
	char why[WHY_MAX];

	return set_field(c, cleaner_fields, N_CLEANER, name, value, why, sizeof(why));
}

/* ---- formatting -------------------------------------------------------------------- */

/* The shortest %.Ng that reads back as exactly d. */
static int format_double(double d, char *buf, size_t cap)
{
	char tmp[VALUE_MAX];

	for (int digits = DOUBLE_DIGITS_MIN; digits <= DOUBLE_DIGITS_MAX; digits++) {
		snprintf(tmp, sizeof(tmp), "%.*g", digits, d);
		if (strtod(tmp, NULL) == d || digits == DOUBLE_DIGITS_MAX)
			break;
	}
	return snprintf(buf, cap, "%s", tmp);
}

static const char *name_or(const char *const *names, size_t n, int64_t i, const char *dflt)
{
	return (i >= 0 && (size_t)i < n && names[i]) ? names[i] : dflt;
}

static int format_field(const void *base, const struct field *f, char *buf, size_t cap)
{
	const char *p = (const char *)base + f->off, *name;
	int n = 0;

	switch (f->kind) {
	case V_INT:
		if (f->width == sizeof(int64_t)) {
			int64_t x;
			memcpy(&x, p, sizeof(x));
			n = snprintf(buf, cap, "%" PRId64, x);
		} else {
			int32_t x;
			memcpy(&x, p, sizeof(x));
			n = snprintf(buf, cap, "%" PRId32, x);
		}
		break;
	case V_DOUBLE: {
		double d;
		memcpy(&d, p, sizeof(d));
		n = format_double(d, buf, cap);
		break;
	}
	/* Values outside the domain (a struct filled by hand) print as "invalid", which
	 * set() refuses, so they cannot be saved by accident. */
	case V_POLICY:
		n = snprintf(buf, cap, "%s", name_or(policy_names, NFIELDS(policy_names),
		                                     *(const unsigned *)(const void *)p, "invalid"));
		break;
	case V_CODEC:
		name = tfs_codec_name(*(const int *)(const void *)p);
		n = snprintf(buf, cap, "%s", name ? name : "invalid");
		break;
	case V_TSTYPE:
		n = snprintf(buf, cap, "%s",
		             name_or(ts_names, NFIELDS(ts_names),
		                     *(const enum tfs_ts_type *)(const void *)p, "invalid"));
		break;
	case V_ZLEVEL:
		n = snprintf(buf, cap, "%d", *(const int *)(const void *)p);
		break;
	}
	if (n < 0)
		return -EINVAL;
	return (size_t)n >= cap ? -ERANGE : 0;
}

int tfs_topic_config_get(const struct tfs_topic_config *c, const char *name, char *buf, size_t cap)
{
	const struct field *f = find_field(topic_fields, N_TOPIC, name);

	if (!f)
		return -EINVAL;
	if (cap == 0)
		return -ERANGE;
	return format_field(c, f, buf, cap);
}

bool tfs_topic_config_is_default(const struct tfs_topic_config *c, const char *name)
{
	const struct field *f = find_field(topic_fields, N_TOPIC, name);
	struct tfs_topic_config d;
	char a[VALUE_MAX], b[VALUE_MAX];

	if (!f)
		return false;
	tfs_topic_config_defaults(&d);
	if (format_field(c, f, a, sizeof(a)) < 0 || format_field(&d, f, b, sizeof(b)) < 0)
		return false;
	return strcmp(a, b) == 0;
}

/* ---- the file ---------------------------------------------------------------------- */

/* A whole-string unsigned number in base (8 or 10): digits only, <= max. */
static int parse_meta_uint(const char *s, int base, int64_t max, int64_t *out)
{
	int64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		int digit = *p - '0';
		if (digit < 0 || digit >= base)
			return -EINVAL;
		if (v > (max - digit) / base)
			return -ERANGE;
		v = v * base + digit;
	}
	*out = v;
	return 0;
}

static int set_meta(struct tfs_topic_meta *m, const char *name, const char *value,
                    char *why, size_t why_cap)
{
	const char *expect = NULL;
	int64_t v = 0;
	int rc;

	if (strcmp(name, META_UID) == 0 || strcmp(name, META_GID) == 0) {
		expect = "a decimal id below 4294967295";
		rc = parse_meta_uint(value, 10, MAX_ID, &v);
		if (rc == 0 && strcmp(name, META_UID) == 0)
			m->uid = (uid_t)v;
		else if (rc == 0)
			m->gid = (gid_t)v;
	} else if (strcmp(name, META_MODE) == 0) {
		expect = "octal permission bits up to 07777";
		rc = parse_meta_uint(value, 8, MODE_MASK, &v);
		if (rc == 0)
			m->mode = (mode_t)v;
	} else if (strcmp(name, META_PARTITIONS) == 0) {
		expect = "a partition count of at least 1";
		rc = parse_meta_uint(value, 10, INT32_MAX, &v);
		if (rc == 0 && v < 1)
			rc = -ERANGE;
		if (rc == 0)
			m->partitions = (int32_t)v;
	} else if (strcmp(name, META_DELETING) == 0) {
		expect = "0 or 1";
		rc = parse_meta_uint(value, 10, 1, &v);
		if (rc == 0)
			m->deleting = v == 1;
	} else {
		snprintf(why, why_cap, "unknown name %.*s", VALUE_MAX, name);
		return -EINVAL;
	}
	if (rc < 0) {
		snprintf(why, why_cap, "%s=%.*s is not %s", name, VALUE_MAX, value, expect);
		return -EINVAL;
	}
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Parses the text of a config file into c and m (copies owned by the caller). */
static int parse_file(const char *path, char *text, struct tfs_topic_config *c,
                      struct tfs_topic_meta *m)
{
	char why[WHY_MAX];
	unsigned lineno = 0;
	char *save = NULL;
	char *line;
	int rc = 0;

	/* strtok_r would merge empty lines and miscount; walk by hand. */
	for (line = text; line; line = save) {
		char *eq, *name, *value;

		lineno++;
		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		line = trim(line);
		if (!*line || *line == '#' || *line == '!')
			continue;
		eq = strchr(line, '=');
		if (!eq) {
			snprintf(why, sizeof(why), "no '=' in \"%.*s\"", VALUE_MAX, line);
			rc = -EINVAL;
			break;
		}
		*eq = '\0';
		name = trim(line);
		value = trim(eq + 1);
		if (strncmp(name, "topicfs.", strlen("topicfs.")) == 0)
			rc = set_meta(m, name, value, why, sizeof(why));
		else
			rc = set_field(c, topic_fields, N_TOPIC, name, value, why, sizeof(why));
		if (rc < 0)
			break;
	}
	if (rc < 0)
		tfs_log_error(MODULE, "cannot load %s line %u: %s", path, lineno, why);
	return rc;
}

/* The checksum line, if the text has one: it must be the last line, exactly
 * META_CRC=<8 lowercase hex digits>, after a line end, and match the CRC-32C of
 * every byte before it, which are then all the text to parse (*body). A name
 * that appears anywhere else is a damaged file. */
int tfs_topic_config_crc_check(const char *text, size_t len, size_t *body)
{
	const char *at = strstr(text, META_CRC), *line, *hex;
	uint32_t want = 0;

	*body = len;
	if (!at)
		return 0;
	if (len < CRC_LINE_BYTES + 1)
		return -EINVAL;
	line = text + len - CRC_LINE_BYTES;
	hex = line + sizeof(META_CRC "=") - 1;
	if (at != line || line[-1] != '\n' || line[sizeof(META_CRC) - 1] != '=' ||
	    text[len - 1] != '\n')
		return -EINVAL;
	for (int i = 0; i < 8; i++) {
		int d = isdigit((unsigned char)hex[i]) ? hex[i] - '0'
		        : hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 'a' + 10 : -1;
		if (d < 0)
			return -EINVAL;
		want = want << 4 | (uint32_t)d;
	}
	*body = (size_t)(line - text);
	return tfs_crc32c(0, text, *body) == want ? 0 : -EBADMSG;
}

static int check_crc_line(const char *path, char *text, size_t *len)
{
	size_t body;
	int rc = tfs_topic_config_crc_check(text, *len, &body);

	if (rc == -EBADMSG)
		tfs_log_error(MODULE, "cannot load %s: its bytes do not match its %s line: a damaged "
		              "file, or one edited by hand (then delete that line)", path, META_CRC);
	else if (rc < 0)
		tfs_log_error(MODULE, "cannot load %s: a damaged %s line (it must be the last one, "
		              "%s=<8 hex digits>)", path, META_CRC, META_CRC);
	if (rc < 0)
		return -EINVAL;
	*len = body;
	text[body] = '\0';
	return 0;
}

int tfs_topic_config_load(const char *path, struct tfs_topic_config *c, struct tfs_topic_meta *m)
{
	struct tfs_topic_config nc = *c;
	struct tfs_topic_meta nm = *m;
	struct tfs_io *io = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc;

	/* The contract takes no io context; reads are not fault-injected, so a private
	 * pread backend is enough to keep the read inside io/. */
	rc = tfs_io_create(TFS_IO_SYNC, &io);
	if (rc < 0)
		goto out;
	rc = tfs_file_read_all(io, AT_FDCWD, path, CONFIG_FILE_MAX, &text, &len);
	if (rc == -ENOENT)
		goto out;   /* a normal answer: no config yet */
	if (rc < 0) {
		tfs_log_error(MODULE, "cannot load %s: %s", path, strerror(-rc));
		goto out;
	}
	if (strlen(text) != len) {
		tfs_log_error(MODULE, "cannot load %s: it holds a NUL byte", path);
		rc = -EINVAL;
		goto out;
	}
	rc = check_crc_line(path, text, &len);
	if (rc == 0)
		rc = parse_file(path, text, &nc, &nm);
	if (rc == 0) {
		*c = nc;
		*m = nm;
	}
out:
	free(text);
	tfs_io_destroy(io);
	return rc;
}

/* Appends to a growing text; returns -ERANGE when it does not fit. */
static int emit(char *buf, size_t cap, size_t *len, const char *name, const char *value)
{
	int n = snprintf(buf + *len, cap - *len, "%s=%s\n", name, value);

	if (n < 0 || (size_t)n >= cap - *len)
		return -ERANGE;
	*len += (size_t)n;
	return 0;
}

/* Renders c and m as a file, refusing values that load() would refuse. */
static int render(const struct tfs_topic_config *c, const struct tfs_topic_meta *m,
                  char *buf, size_t cap, size_t *len, char *why, size_t why_cap)
{
	struct tfs_topic_config scratch;
	char val[VALUE_MAX];
	int n, rc;

	n = snprintf(buf, cap, "# topicfs topic config (Kafka names); rewritten atomically\n");
	if (n < 0 || (size_t)n >= cap)
		return -ERANGE;
	*len = (size_t)n;
	tfs_topic_config_defaults(&scratch);
	for (size_t i = 0; i < N_TOPIC; i++) {
		rc = format_field(c, &topic_fields[i], val, sizeof(val));
		if (rc == 0)
			rc = set_field(&scratch, topic_fields, N_TOPIC, topic_fields[i].name, val, why,
			               why_cap);
		if (rc == 0)
			rc = emit(buf, cap, len, topic_fields[i].name, val);
		if (rc < 0)
			return rc;
	}
	if ((int64_t)m->uid > MAX_ID || (int64_t)m->gid > MAX_ID || (m->mode & ~(mode_t)MODE_MASK) ||
	    m->partitions < 1) {
		snprintf(why, why_cap, "bad ownership uid %u gid %u mode %o partitions %" PRId32,
		         (unsigned)m->uid, (unsigned)m->gid, (unsigned)m->mode, m->partitions);
		return -EINVAL;
	}
	snprintf(val, sizeof(val), "%u", (unsigned)m->uid);
	rc = emit(buf, cap, len, META_UID, val);
	snprintf(val, sizeof(val), "%u", (unsigned)m->gid);
	if (rc == 0)
		rc = emit(buf, cap, len, META_GID, val);
	snprintf(val, sizeof(val), "%04o", (unsigned)m->mode);
	if (rc == 0)
		rc = emit(buf, cap, len, META_MODE, val);
	snprintf(val, sizeof(val), "%" PRId32, m->partitions);
	if (rc == 0)
		rc = emit(buf, cap, len, META_PARTITIONS, val);
	if (rc == 0 && m->deleting)
		rc = emit(buf, cap, len, META_DELETING, "1");
	if (rc == 0) {
		snprintf(val, sizeof(val), "%08x", (unsigned)tfs_crc32c(0, buf, *len));
		rc = emit(buf, cap, len, META_CRC, val);
	}
	return rc;
}

int tfs_topic_config_save(struct tfs_io *io, const char *path, const struct tfs_topic_config *c,
                          const struct tfs_topic_meta *m)
{
	char text[CONFIG_FILE_MAX];
	char why[WHY_MAX] = "";
	char *dir = NULL;
	const char *base;
	const char *slash = strrchr(path, '/');
	size_t len = 0;
	int dirfd = -1;
	int rc;

	rc = render(c, m, text, sizeof(text), &len, why, sizeof(why));
	if (rc < 0) {
		tfs_log_error(MODULE, "cannot save %s: %s", path, why[0] ? why : "too long");
		rc = -EINVAL;
		goto out;
	}
	if (slash) {
		base = slash + 1;
		dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	} else {
		base = path;
		dir = strdup(".");
	}
	if (!dir) {
		rc = -ENOMEM;
		goto out;
	}
	if (!*base) {
		tfs_log_error(MODULE, "cannot save %s: not a file name", path);
		rc = -EINVAL;
		goto out;
	}
	dirfd = tfs_io_openat(io, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0);
	if (dirfd < 0) {
		rc = dirfd;
		tfs_log_error(MODULE, "cannot save %s: cannot open its directory: %s", path,
		              strerror(-rc));
		goto out;
	}
	rc = tfs_file_replace(io, dirfd, base, text, len);   /* logs its own failure */
out:
	if (dirfd >= 0)
		close(dirfd);
	free(dir);
	return rc;
}
