/* xattr.c - the user.topicfs.* attributes (see xattr.h and docs/semantics.md §6).
 *
 *   on          name                          access
 *   key         offset timestamp partition    read  (of the newest record)
 *   key         key                           read  (the raw key bytes)
 *   key         versions                      read  (offsets still on disk)
 *   key, hist   header.NAME                   read  (the record's headers)
 *   topic dir   every topic config name       read/write (remove: mount default)
 *   partition   log_start_offset log_end_offset size_bytes segments live_keys  read
 *   partition   log_start_offset              write (DeleteRecords: the records
 *                                             below the value go; -1: all)
 *   partition   producers                     read (id epoch last_sequence last_offset
 *                                             last_timestamp, a line each)
 *   partition   roll                          write (closes the active segment)
 *   partition   dirty_ratio first_dirty_offset first_uncleanable_offset
 *               last_clean uncleanable_reason read (the cleaner's state)
 *   partition   clean                         write (a pass now; returns when done)
 *   partition   damage                        read (unreadable regions found at open)
 *   hist entry  key timestamp tombstone producer_id sequence   read
 *   hist entry  txn                           read (open committed aborted, or
 *                                             commit_marker abort_marker)
 *   partition   last_stable_offset            read (first offset of the oldest
 *                                             open transaction, else the log end)
 *   hist entry  region delete_horizon         read (the cleaner's view of it)
 *   hist entry  superseded_by fate            read (the next pass's, history_fate.c)
 *   partition   next_pass                     read (a dry run of the next pass)
 *
 * Values are text (decimal numbers, no newline) except `key` and header values,
 * which are the raw bytes. A name that does not apply to a node, or whose value
 * does not exist for it (the key of a keyless record, the producer of a batch
 * without one), is ENODATA and not listed. Writing a read-only or unknown name is
 * ENOTSUP (so `cp -a` between mounts stays quiet), a bad config value EINVAL.
 *
 * The cleaner's attributes come from engine/cleaner/cleaner.h. A read-only mount has no
 * cleaner: its partition attributes and `region` are then absent (ENODATA) and
 * `clean` is EROFS. `delete_horizon` is a fact of the record's batch (attribute
 * bit 6), so it reads the same with or without a cleaner; it exists only for
 * tombstones and control records of a batch that carries one. `last_clean` is
 * absent before the first pass; `uncleanable_reason` is always present on a
 * read-write mount, empty unless the cleaner gave up on the partition.
 */
#include "fs/xattr.h"

#include "engine/producer/producer_state.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "engine/cleaner/cleaner.h"
#include "fs/consumers.h"
#include "fs/history_fate.h"
#include "fs/kafka_door.h"
#include "fs/node_groups.h"
#include "fs/node.h"
#include "io/log.h"
#include "io/parse.h"

#define PREFIX_LEN (sizeof(TFS_XATTR_PREFIX) - 1)
#define HEADER_PREFIX "header."
#define HEADER_PREFIX_LEN (sizeof(HEADER_PREFIX) - 1)
#define CONFIG_VALUE_CAP 64         /* every topic config value prints shorter */

#define K(kind) (1u << (kind))

/* A growable output buffer. */
struct xbuf {
	char *p;
	size_t len, cap;
};

static int xb_put(struct xbuf *x, const void *p, size_t len)
{
	if (x->len + len + 1 > x->cap) {
		size_t nc = x->cap ? x->cap * 2 : 256;
		char *np;
		while (nc < x->len + len + 1)
			nc *= 2;
		np = realloc(x->p, nc);
		if (!np)
			return -ENOMEM;
		x->p = np;
		x->cap = nc;
	}
	if (len)
		memcpy(x->p + x->len, p, len);
	x->len += len;
	x->p[x->len] = '\0';
	return 0;
}

static int xb_i64(struct xbuf *x, int64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);

	return xb_put(x, tmp, (size_t)n);
}

/* What the getters share, loaded at most once per request. */
struct xctx {
	struct tfs_mount *m;
	struct tfs_node *n;
	bool rec_loaded;
	int rec_err;
	struct tfs_record_copy rec;     /* key: newest record; hist: the record */
	bool stats_loaded;
	struct tfs_plog_stats st;
	bool cinfo_loaded;
	int cinfo_err;
	struct tfs_cleaner_partition_info ci;   /* partition (or the entry's partition) */
	bool glag_loaded;
	int glag_err;
	struct tfs_group_lag glag;              /* a group offset file's */
};

static int load_record(struct xctx *c)
{
	struct tfs_plog *pl;

	if (c->rec_loaded)
		return c->rec_err;
	c->rec_loaded = true;
	pl = tfs_mount_plog(c->n);
	if (!pl) {
		c->rec_err = -ENOENT;
	} else if (c->n->kind == TFS_NODE_HIST_ENTRY) {
		c->rec_err = tfs_plog_read_offset(pl, c->n->num, &c->rec);
	} else {
		uint8_t kb[TFS_NODE_KEY_CAP];
		size_t klen;
		bool unlinked;
		pthread_mutex_lock(&c->n->lock);
		klen = c->n->key_len < sizeof(kb) ? c->n->key_len : sizeof(kb);
		if (klen)
			memcpy(kb, c->n->key, klen);
		unlinked = c->n->unlinked;
		pthread_mutex_unlock(&c->n->lock);
		c->rec_err = unlinked ? -ENOENT : tfs_plog_read_key(pl, tfs_slice_make(kb, klen), &c->rec);
	}
	/* A key being created has no record yet: its attributes do not exist. */
	if (c->rec_err == -ENOENT)
		c->rec_err = -ENODATA;
	return c->rec_err;
}

static int load_stats(struct xctx *c)
{
	struct tfs_plog *pl;

	if (!c->stats_loaded) {
		pl = tfs_mount_plog(c->n);
		if (!pl)
			return -ENOENT;
		tfs_plog_stats(pl, &c->st);
		c->stats_loaded = true;
	}
	return 0;
}

/* The cleaner's view of the node's partition: -ENODATA without a cleaner (a
 * read-only mount) or for a partition the cleaner does not manage. */
static int load_cinfo(struct xctx *c)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(c->m->engine);
	struct tfs_plog *pl;

	if (c->cinfo_loaded)
		return c->cinfo_err;
	c->cinfo_loaded = true;
	pl = tfs_mount_plog(c->n);
	if (!pl)
		c->cinfo_err = -ENOENT;
	else if (!cl)
		c->cinfo_err = -ENODATA;
	else
		c->cinfo_err = tfs_cleaner_partition_info(cl, pl, &c->ci);
	if (c->cinfo_err == -ENOENT && pl)
		c->cinfo_err = -ENODATA;        /* not registered with the cleaner */
	if (c->cinfo_err == TFS_EREADONLY)
		c->cinfo_err = -ENODATA;
	return c->cinfo_err;
}

/* ---- getters -------------------------------------------------------------- */

static int get_offset(struct xctx *c, struct xbuf *x)
{
	int rc = load_record(c);
	return rc < 0 ? rc : xb_i64(x, c->rec.offset);
}

static int get_timestamp(struct xctx *c, struct xbuf *x)
{
	int rc = load_record(c);
	return rc < 0 ? rc : xb_i64(x, c->rec.timestamp);
}

static int get_partition(struct xctx *c, struct xbuf *x)
{
	return xb_i64(x, c->n->partition);
}

static int get_key(struct xctx *c, struct xbuf *x)
{
	int rc = load_record(c);

	if (rc < 0)
		return rc;
	if (c->rec.key_null)
		return -ENODATA;                /* a keyless record */
	return xb_put(x, c->rec.key, c->rec.key_len);
}

static int get_versions(struct xctx *c, struct xbuf *x)
{
	struct tfs_plog *pl = tfs_mount_plog(c->n);
	uint8_t kb[TFS_NODE_KEY_CAP];
	tfs_offset_t *v = NULL;
	size_t count = 0, klen;
	int rc = 0;

	if (!pl)
		return -ENOENT;
	pthread_mutex_lock(&c->n->lock);
	klen = c->n->key_len < sizeof(kb) ? c->n->key_len : sizeof(kb);
	if (klen)
		memcpy(kb, c->n->key, klen);
	pthread_mutex_unlock(&c->n->lock);
	rc = tfs_plog_key_versions(pl, tfs_slice_make(kb, klen), &v, &count);
	if (rc < 0)
		return rc;
	if (count == 0)
		rc = -ENODATA;
	for (size_t i = 0; i < count && rc == 0; i++) {
		if (i)
			rc = xb_put(x, " ", 1);
		if (rc == 0)
			rc = xb_i64(x, v[i]);
	}
	free(v);
	return rc;
}

static int get_tombstone(struct xctx *c, struct xbuf *x)
{
	int rc = load_record(c);
	return rc < 0 ? rc : xb_put(x, c->rec.value_null ? "1" : "0", 1);
}

static int get_producer_id(struct xctx *c, struct xbuf *x)
{
	int rc = load_record(c);

	if (rc < 0)
		return rc;
	if (c->rec.batch.producer_id < 0)
		return -ENODATA;
	return xb_i64(x, c->rec.batch.producer_id);
}

static int get_sequence(struct xctx *c, struct xbuf *x)
{
	int rc = load_record(c);

	if (rc < 0)
		return rc;
	if (c->rec.batch.base_sequence < 0)
		return -ENODATA;
	/* Kafka: a record's sequence is the batch's base sequence plus its offset
	 * delta (wrapping at INT32_MAX). */
	{
		int64_t seq = (int64_t)c->rec.batch.base_sequence +
		              (c->rec.offset - c->rec.batch.base_offset);
		if (seq > INT32_MAX)
			seq -= (int64_t)INT32_MAX + 1;
		return xb_i64(x, seq);
	}
}

/* A transactional record's state (open, committed, aborted), or a marker's
 * kind (commit_marker, abort_marker); absent outside transactions. */
static int get_txn(struct xctx *c, struct xbuf *x)
{
	static const char *const state[] = {
		[TFS_TXN_OPEN] = "open", [TFS_TXN_COMMITTED] = "committed",
		[TFS_TXN_ABORTED] = "aborted",
	};
	struct tfs_plog *pl = tfs_mount_plog(c->n);
	const char *v;
	int rc = load_record(c);

	if (rc < 0)
		return rc;
	if (!pl)
		return -ENOENT;
	if (!(c->rec.batch.attributes & TFS_ATTR_TRANSACTIONAL) || c->rec.batch.producer_id < 0)
		return -ENODATA;
	if (c->rec.batch.attributes & TFS_ATTR_CONTROL) {
		struct tfs_record r = { .key = tfs_slice_make(c->rec.key, c->rec.key_len),
		                        .key_null = c->rec.key_null };
		int type = tfs_control_type(&r);
		v = type == TFS_CONTROL_COMMIT ? "commit_marker"
		  : type == TFS_CONTROL_ABORT ? "abort_marker" : "control";
	} else {
		v = state[tfs_plog_txn_state(pl, c->rec.batch.producer_id, c->rec.offset)];
	}
	return xb_put(x, v, strlen(v));
}

static int get_last_stable(struct xctx *c, struct xbuf *x)
{
	struct tfs_plog *pl = tfs_mount_plog(c->n);
	return pl ? xb_i64(x, tfs_plog_last_stable_offset(pl)) : -ENOENT;
}

static int get_log_start(struct xctx *c, struct xbuf *x)
{
	int rc = load_stats(c);
	return rc < 0 ? rc : xb_i64(x, c->st.log_start_offset);
}

static int get_log_end(struct xctx *c, struct xbuf *x)
{
	int rc = load_stats(c);
	return rc < 0 ? rc : xb_i64(x, c->st.log_end_offset);
}

static int get_size_bytes(struct xctx *c, struct xbuf *x)
{
	int rc = load_stats(c);
	return rc < 0 ? rc : xb_i64(x, c->st.size_bytes);
}

static int get_segments(struct xctx *c, struct xbuf *x)
{
	int rc = load_stats(c);
	return rc < 0 ? rc : xb_i64(x, c->st.segments);
}

/* EIO, as every key read, once the key directory missed an update: its count is
 * then too low (docs/engine.md §5). */
static int get_live_keys(struct xctx *c, struct xbuf *x)
{
	int rc = load_stats(c);
	if (rc == 0 && c->st.keys_failed)
		rc = -EIO;
	return rc < 0 ? rc : xb_i64(x, (int64_t)c->st.live_keys);
}

/* One line per producer: id, epoch, last sequence, last offset, last timestamp
 * (-1 where its batches are gone). */
static int get_producers(struct xctx *c, struct xbuf *x)
{
	struct tfs_plog *pl = tfs_mount_plog(c->n);
	struct tfs_pstate_entry *e = NULL;
	size_t n, cap = 0;
	int rc = 0;

	if (!pl)
		return -ENOENT;
	while ((n = tfs_plog_producers(pl, e, cap)) > cap) {
		free(e);
		cap = n + 16;           /* new producers may arrive meanwhile */
		if (!(e = malloc(cap * sizeof(*e))))
			return -ENOMEM;
	}
	rc = xb_put(x, "", 0);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct tfs_pstate_batch *b = e[i].nbatches ? &e[i].batch[e[i].nbatches - 1] : NULL;
		char line[128];
		int len = snprintf(line, sizeof(line), "%" PRId64 " %d %" PRId32 " %" PRId64 " %" PRId64 "\n",
		                   e[i].producer_id, e[i].epoch, b ? b->last_seq : -1,
		                   b ? b->last_offset : (int64_t)-1, e[i].last_timestamp);
		rc = xb_put(x, line, (size_t)len);
	}
	free(e);
	return rc;
}

static int get_dirty_ratio(struct xctx *c, struct xbuf *x)
{
	char tmp[32];
	int rc = load_cinfo(c);
	int n;

	if (rc < 0)
		return rc;
	n = snprintf(tmp, sizeof(tmp), "%.4f", c->ci.dirty_ratio);
	return xb_put(x, tmp, (size_t)n);
}

static int get_first_dirty(struct xctx *c, struct xbuf *x)
{
	int rc = load_cinfo(c);
	return rc < 0 ? rc : xb_i64(x, c->ci.first_dirty_offset);
}

static int get_first_uncleanable(struct xctx *c, struct xbuf *x)
{
	int rc = load_cinfo(c);
	return rc < 0 ? rc : xb_i64(x, c->ci.first_uncleanable_offset);
}

static int get_last_clean(struct xctx *c, struct xbuf *x)
{
	int rc = load_cinfo(c);

	if (rc < 0)
		return rc;
	if (!c->ci.last_clean[0])
		return -ENODATA;                /* no pass yet */
	return xb_put(x, c->ci.last_clean, strlen(c->ci.last_clean));
}

static int get_uncleanable_reason(struct xctx *c, struct xbuf *x)
{
	int rc = load_cinfo(c);

	if (rc < 0)
		return rc;
	/* docs/semantics.md §6: "empty, or why": an empty value, not an absent one. */
	return xb_put(x, c->ci.uncleanable_reason, strlen(c->ci.uncleanable_reason));
}

/* One line per unreadable region of a sealed segment (partition_log.h):
 * "FILE:POSITION: bytes A..B unreadable (WHY); offsets C..D unknown". Empty when
 * the partition reads whole; present on read-only mounts too. */
static int get_damage(struct xctx *c, struct xbuf *x)
{
	struct tfs_plog *pl = tfs_mount_plog(c->n);
	struct tfs_plog_damage *d = NULL;
	size_t n;
	int rc = 0;

	if (!pl)
		return -ENOENT;
	n = tfs_plog_damage(pl, NULL, 0);
	if (n && !(d = calloc(n, sizeof(*d))))
		return -ENOMEM;
	n = tfs_plog_damage(pl, d, n);     /* a region only goes, never comes */
	for (size_t i = 0; i < n && rc == 0; i++) {
		char line[PATH_MAX + 256];
		int len = snprintf(line, sizeof(line), "%s%s/%020" PRId64 ".log:%" PRId64 ": bytes %"
		                   PRId64 "..%" PRId64 " unreadable (%s); offsets %" PRId64 "..%"
		                   PRId64 " unknown", i ? "\n" : "", tfs_plog_path(pl),
		                   d[i].segment_base, d[i].pos, d[i].pos, d[i].end - 1, d[i].why,
		                   d[i].first, d[i].next - 1);
		rc = xb_put(x, line, len < (int)sizeof(line) ? (size_t)len : sizeof(line) - 1);
	}
	free(d);
	return rc < 0 ? rc : xb_put(x, "", 0);
}

static int get_region(struct xctx *c, struct xbuf *x)
{
	const char *r;
	int rc = load_record(c);        /* a record cleaned away has no region */

	if (rc < 0)
		return rc;
	rc = load_cinfo(c);
	if (rc < 0)
		return rc;
	r = tfs_cleaner_region_of(c->rec.offset, c->ci.first_dirty_offset,
	                          c->ci.first_uncleanable_offset);
	return xb_put(x, r, strlen(r));
}

static int get_delete_horizon(struct xctx *c, struct xbuf *x)
{
	int64_t ms;
	int rc = load_record(c);

	if (rc < 0)
		return rc;
	/* The horizon is about tombstones and transaction markers; the other
	 * records of a stamped batch are kept by the key rule alone. */
	if (!c->rec.value_null && !(c->rec.batch.attributes & TFS_ATTR_CONTROL))
		return -ENODATA;
	rc = tfs_cleaner_delete_horizon(&c->rec.batch, &ms);
	return rc < 0 ? rc : xb_i64(x, ms);
}

/* The cleaner's forecast (history_fate.c): each a dry run or a walk of the log. */
static int put_owned(struct xbuf *x, int rc, char *text)
{
	if (rc == 0)
		rc = xb_put(x, text, strlen(text));
	free(text);
	return rc;
}

static int get_fate(struct xctx *c, struct xbuf *x)
{
	char *text = NULL;
	int rc = tfs_history_fate(c->m, c->n, &text);
	return put_owned(x, rc, text);
}

static int get_next_pass(struct xctx *c, struct xbuf *x)
{
	char *text = NULL;
	int rc = tfs_history_next_pass(c->m, c->n, &text);
	return put_owned(x, rc, text);
}

static int get_superseded_by(struct xctx *c, struct xbuf *x)
{
	tfs_offset_t o;
	int rc = tfs_history_superseded_by(c->m, c->n, &o);
	return rc < 0 ? rc : xb_i64(x, o);
}

/* ---- setters -------------------------------------------------------------- */

static int set_roll(struct xctx *c, const char *value, size_t size)
{
	struct tfs_plog *pl = tfs_mount_plog(c->n);

	return pl ? tfs_plog_roll(pl) : -ENOENT;
}

/* Runs a pass now (tfs_cleaner_clean_now), blocking this request until it ends;
 * the value is ignored. The pass's error comes back through errmap. The kernel's
 * view of .history needs no notification: its listings are never cached and its
 * entries are given timeouts of 0 (node_history.c), because background passes
 * change it too and tell nobody. */
static int set_clean(struct xctx *c, const char *value, size_t size)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(c->m->engine);
	struct tfs_plog *pl = tfs_mount_plog(c->n);

	if (!pl)
		return -ENOENT;
	if (c->n->topic && tfs_topic_unconfigured(c->n->topic)) {
		/* a broker's copy: no policy was chosen for it yet (engine.h) */
		tfs_log_warn("xattr", "no pass on topic %s: it has no config yet; set one "
		             "(cleanup.policy) first", tfs_topic_name(c->n->topic));
		return -EPERM;
	}
	/* The engine logs a failed pass (and marks the partition uncleanable). */
	return cl ? tfs_cleaner_clean_now(cl, pl) : TFS_EREADONLY;
}

/* DeleteRecords through the mount: the records below the value go, as a Kafka
 * client's DeleteRecords does (tfs_engine_delete_records); the kernel checked
 * write permission on the partition directory, as for rm. */
static void xattr_keys_gone(void *arg, const struct tfs_slice *keys, size_t n)
{
	struct xctx *c = arg;

	/* inside a request: attributes and the listing only (notify.h) */
	tfs_kafka_door_keys_gone(c->m, c->n->topic, c->n->partition, keys, n, false);
}

/* A decimal value of at least min into *out, a trailing newline (echo)
 * forgiven; buf (cap bytes) gets its text for a log line. false if it is not. */
static bool value_i64(const char *value, size_t size, int64_t min, char *buf, size_t cap,
                      int64_t *out)
{
	bool fits;

	if (size > 0 && value[size - 1] == '\n')
		size--;
	fits = size < cap;
	if (!fits)
		size = cap - 1;                 /* too long to be a number: shown cut */
	memcpy(buf, value, size);
	buf[size] = '\0';
	return fits && size > 0 && !memchr(value, '\0', size) &&
	       tfs_parse_i64(buf, min, INT64_MAX, out);
}

static int set_log_start(struct xctx *c, const char *value, size_t size)
{
	struct tfs_plog *pl = tfs_mount_plog(c->n);
	tfs_offset_t low;
	char buf[24];
	int64_t off;

	if (!pl)
		return -ENOENT;
	if (!value_i64(value, size, -1, buf, sizeof(buf), &off)) {
		tfs_log_warn("xattr", "%s/%d: log_start_offset is not an offset: '%s'",
		             tfs_topic_name(c->n->topic), (int)c->n->partition, buf);
		return -EINVAL;
	}
	return tfs_engine_delete_records(c->m->engine, c->n->topic, c->n->partition, off,
	                                 xattr_keys_gone, c, &low);
}

/* A consumer's report of how long bootstrapping the topic from offset 0 took
 * (topicctl follow): kept in memory for the metrics (consumers.h). */
static int set_bootstrap_ms(struct xctx *c, const char *value, size_t size)
{
	char buf[24];
	int64_t ms;

	if (!value_i64(value, size, 0, buf, sizeof(buf), &ms)) {
		tfs_log_warn("fs", "%s: bootstrap_ms is not a number of milliseconds: '%s'",
		             tfs_topic_name(c->n->topic), buf);
		return -EINVAL;
	}
	return tfs_consumers_note_bootstrap(c->m->consumers, tfs_topic_name(c->n->topic), ms);
}

/* A group offset file's position and lag (node_groups.c), at most once per
 * request. */
static int load_group_lag(struct xctx *c)
{
	if (!c->glag_loaded) {
		c->glag_loaded = true;
		c->glag_err = tfs_group_file_lag(c->m, c->n, &c->glag);
	}
	return c->glag_err;
}

static int get_lag_offsets(struct xctx *c, struct xbuf *x)
{
	int rc = load_group_lag(c);
	return rc < 0 ? rc : xb_i64(x, c->glag.lag.lag_offsets);
}

static int get_lag_records(struct xctx *c, struct xbuf *x)
{
	int rc = load_group_lag(c);
	return rc < 0 ? rc : xb_i64(x, c->glag.lag.lag_records);
}

static int get_lag_ms(struct xctx *c, struct xbuf *x)
{
	int rc = load_group_lag(c);
	return rc < 0 ? rc : xb_i64(x, c->glag.lag_ms);
}

static int get_group_log_end(struct xctx *c, struct xbuf *x)
{
	int rc = load_group_lag(c);
	return rc < 0 ? rc : xb_i64(x, c->glag.lag.log_end_offset);
}

static int get_commit_timestamp(struct xctx *c, struct xbuf *x)
{
	int rc = load_group_lag(c);
	return rc < 0 ? rc : xb_i64(x, c->glag.commit_ms);
}

/* ---- the table ------------------------------------------------------------ */

struct xattr_row {
	const char *name;               /* after "user.topicfs." */
	unsigned kinds;                 /* K(kind) bits */
	int (*get)(struct xctx *c, struct xbuf *x);   /* NULL: write-only */
	int (*set)(struct xctx *c, const char *value, size_t size);   /* NULL: read-only */
	bool cheap;                     /* listing may call get to test presence */
};

static const struct xattr_row rows[] = {
	{ "offset", K(TFS_NODE_KEY), get_offset, NULL, true },
	{ "timestamp", K(TFS_NODE_KEY) | K(TFS_NODE_HIST_ENTRY), get_timestamp, NULL, true },
	{ "partition", K(TFS_NODE_KEY), get_partition, NULL, true },
	{ "key", K(TFS_NODE_KEY) | K(TFS_NODE_HIST_ENTRY), get_key, NULL, true },
	{ "versions", K(TFS_NODE_KEY), get_versions, NULL, false },
	{ "tombstone", K(TFS_NODE_HIST_ENTRY), get_tombstone, NULL, true },
	{ "producer_id", K(TFS_NODE_HIST_ENTRY), get_producer_id, NULL, true },
	{ "sequence", K(TFS_NODE_HIST_ENTRY), get_sequence, NULL, true },
	{ "txn", K(TFS_NODE_HIST_ENTRY), get_txn, NULL, true },
	{ "last_stable_offset", K(TFS_NODE_PARTITION), get_last_stable, NULL, true },
	{ "log_start_offset", K(TFS_NODE_PARTITION), get_log_start, set_log_start, true },
	{ "log_end_offset", K(TFS_NODE_PARTITION), get_log_end, NULL, true },
	{ "size_bytes", K(TFS_NODE_PARTITION), get_size_bytes, NULL, true },
	{ "segments", K(TFS_NODE_PARTITION), get_segments, NULL, true },
	{ "live_keys", K(TFS_NODE_PARTITION), get_live_keys, NULL, true },
	{ "producers", K(TFS_NODE_PARTITION), get_producers, NULL, false },
	{ "dirty_ratio", K(TFS_NODE_PARTITION), get_dirty_ratio, NULL, true },
	{ "first_dirty_offset", K(TFS_NODE_PARTITION), get_first_dirty, NULL, true },
	{ "first_uncleanable_offset", K(TFS_NODE_PARTITION), get_first_uncleanable, NULL, true },
	{ "last_clean", K(TFS_NODE_PARTITION), get_last_clean, NULL, true },
	{ "uncleanable_reason", K(TFS_NODE_PARTITION), get_uncleanable_reason, NULL, true },
	{ "damage", K(TFS_NODE_PARTITION), get_damage, NULL, true },
	{ "roll", K(TFS_NODE_PARTITION), NULL, set_roll, false },
	{ "clean", K(TFS_NODE_PARTITION), NULL, set_clean, false },
	{ "region", K(TFS_NODE_HIST_ENTRY), get_region, NULL, true },
	{ "delete_horizon", K(TFS_NODE_HIST_ENTRY), get_delete_horizon, NULL, true },
	{ "superseded_by", K(TFS_NODE_HIST_ENTRY), get_superseded_by, NULL, false },
	{ "fate", K(TFS_NODE_HIST_ENTRY), get_fate, NULL, false },
	{ "next_pass", K(TFS_NODE_PARTITION), get_next_pass, NULL, false },
	{ "bootstrap_ms", K(TFS_NODE_TOPIC), NULL, set_bootstrap_ms, false },
	{ "lag_offsets", K(TFS_NODE_GROUP_FILE), get_lag_offsets, NULL, false },
	{ "lag_records", K(TFS_NODE_GROUP_FILE), get_lag_records, NULL, false },
	{ "lag_ms", K(TFS_NODE_GROUP_FILE), get_lag_ms, NULL, false },
	{ "log_end_offset", K(TFS_NODE_GROUP_FILE), get_group_log_end, NULL, false },
	{ "commit_timestamp", K(TFS_NODE_GROUP_FILE), get_commit_timestamp, NULL, false },
};
#define ROW_COUNT (sizeof(rows) / sizeof(rows[0]))

static const struct xattr_row *find_row(const char *sub, enum tfs_node_kind kind)
{
	for (size_t i = 0; i < ROW_COUNT; i++)
		if ((rows[i].kinds & K(kind)) && !strcmp(rows[i].name, sub))
			return &rows[i];
	return NULL;
}

static bool is_config_name(const char *sub)
{
	for (const char *const *n = tfs_topic_config_names(); *n; n++)
		if (!strcmp(*n, sub))
			return true;
	return false;
}

/* The headers family: the value of the first header called name. */
static int get_header(struct xctx *c, const char *name, struct xbuf *x)
{
	struct tfs_slice cur;
	struct tfs_header h;
	size_t nlen = strlen(name);
	int rc = load_record(c);

	if (rc < 0)
		return rc;
	cur = tfs_slice_make(c->rec.headers, c->rec.headers_len);
	while ((rc = tfs_header_next(&cur, &h)) == 1) {
		if (h.key.len == nlen && !memcmp(h.key.p, name, nlen))
			return h.value_null ? 0 : xb_put(x, h.value.p, h.value.len);
	}
	return rc < 0 ? rc : -ENODATA;
}

static bool header_listed_before(const struct tfs_record_copy *rec, struct tfs_slice name,
                                 const uint8_t *upto)
{
	struct tfs_slice cur = tfs_slice_make(rec->headers, rec->headers_len);
	struct tfs_header h;

	while (cur.p < upto && tfs_header_next(&cur, &h) == 1 && h.key.p < upto)
		if (h.key.len == name.len && !memcmp(h.key.p, name.p, name.len))
			return true;
	return false;
}

static int list_headers(struct xctx *c, struct xbuf *x)
{
	struct tfs_slice cur;
	struct tfs_header h;
	int rc = load_record(c);

	if (rc < 0)
		return rc == -ENODATA ? 0 : rc;
	cur = tfs_slice_make(c->rec.headers, c->rec.headers_len);
	while ((rc = tfs_header_next(&cur, &h)) == 1) {
		/* Names a listing cannot carry (empty, with a NUL) are skipped, and a
		 * repeated name is listed once (getxattr returns its first value). */
		if (h.key.len == 0 || memchr(h.key.p, '\0', h.key.len) ||
		    header_listed_before(&c->rec, h.key, h.key.p))
			continue;
		if ((rc = xb_put(x, TFS_XATTR_PREFIX HEADER_PREFIX,
		                 PREFIX_LEN + HEADER_PREFIX_LEN)) < 0 ||
		    (rc = xb_put(x, h.key.p, h.key.len)) < 0 || (rc = xb_put(x, "", 1)) < 0)
			return rc;
	}
	return rc < 0 ? rc : 0;
}

static void ctx_release(struct xctx *c)
{
	if (c->rec_loaded && c->rec_err == 0)
		tfs_record_copy_release(&c->rec);
}

/* The value of sub (the name after the prefix) on c->n. */
static int value_of(struct xctx *c, const char *sub, struct xbuf *x)
{
	enum tfs_node_kind kind = c->n->kind;
	const struct xattr_row *row = find_row(sub, kind);

	if (row)
		return row->get ? row->get(c, x) : -ENODATA;
	if ((kind == TFS_NODE_KEY || kind == TFS_NODE_HIST_ENTRY) &&
	    !strncmp(sub, HEADER_PREFIX, HEADER_PREFIX_LEN) && sub[HEADER_PREFIX_LEN])
		return get_header(c, sub + HEADER_PREFIX_LEN, x);
	if (kind == TFS_NODE_TOPIC && is_config_name(sub)) {
		struct tfs_topic_config cfg;
		char val[CONFIG_VALUE_CAP];
		int rc;
		if (tfs_topic_deleted(c->n->topic))
			return -ENOENT;
		tfs_topic_get_config(c->n->topic, &cfg);
		rc = tfs_topic_config_get(&cfg, sub, val, sizeof(val));
		return rc < 0 ? rc : xb_put(x, val, strlen(val));
	}
	return -ENODATA;
}

void tfs_xattr_get(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, const char *name,
                   size_t size)
{
	struct xctx c = { .m = m, .n = n };
	struct xbuf x = { 0 };
	int rc;

	if (strncmp(name, TFS_XATTR_PREFIX, PREFIX_LEN) != 0) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (n->topic)
		tfs_key_settle(m, n);
	rc = value_of(&c, name + PREFIX_LEN, &x);
	ctx_release(&c);
	if (rc < 0)
		tfs_reply_err(req, rc, "xattr");
	else if (size == 0)
		fuse_reply_xattr(req, x.len);
	else if (x.len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, x.p, x.len);
	free(x.p);
}

void tfs_xattr_list(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, size_t size)
{
	struct xctx c = { .m = m, .n = n };
	struct xbuf x = { 0 }, scratch = { 0 };
	int rc = 0;

	if (n->topic)
		tfs_key_settle(m, n);
	for (size_t i = 0; i < ROW_COUNT && rc == 0; i++) {
		const struct xattr_row *row = &rows[i];
		int present;
		if (!(row->kinds & K(n->kind)) || !row->get)
			continue;
		scratch.len = 0;
		present = row->cheap ? row->get(&c, &scratch) : 0;
		if (present == -ENODATA || present == -ENOENT)
			continue;
		if (present < 0) {
			rc = present;
			break;
		}
		if ((rc = xb_put(&x, TFS_XATTR_PREFIX, PREFIX_LEN)) == 0 &&
		    (rc = xb_put(&x, row->name, strlen(row->name))) == 0)
			rc = xb_put(&x, "", 1);
	}
	if (rc == 0 && (n->kind == TFS_NODE_KEY || n->kind == TFS_NODE_HIST_ENTRY))
		rc = list_headers(&c, &x);
	if (rc == 0 && n->kind == TFS_NODE_TOPIC && !tfs_topic_deleted(n->topic)) {
		for (const char *const *cn = tfs_topic_config_names(); *cn && rc == 0; cn++) {
			if ((rc = xb_put(&x, TFS_XATTR_PREFIX, PREFIX_LEN)) == 0 &&
			    (rc = xb_put(&x, *cn, strlen(*cn))) == 0)
				rc = xb_put(&x, "", 1);
		}
	}
	ctx_release(&c);
	free(scratch.p);
	if (rc < 0)
		tfs_reply_err(req, rc, "xattr list");
	else if (size == 0)
		fuse_reply_xattr(req, x.len);
	else if (x.len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, x.p, x.len);
	free(x.p);
}

static int set_config(struct tfs_mount *m, struct tfs_node *n, const char *sub,
                      const char *value, size_t size)
{
	char val[CONFIG_VALUE_CAP];
	int rc;

	/* Config values are short text; a trailing newline (echo) is forgiven. */
	if (size > 0 && value[size - 1] == '\n')
		size--;
	if (size >= sizeof(val) || memchr(value, '\0', size)) {
		tfs_log_warn("fs", "%s: %s: refused a value of %zu bytes (at most %zu, no NUL)",
		             tfs_topic_name(n->topic), sub, size, sizeof(val) - 1);
		return -EINVAL;
	}
	memcpy(val, value, size);
	val[size] = '\0';
	rc = tfs_topic_set_config(n->topic, sub, val);
	if (rc == -EINVAL)
		tfs_log_warn("fs", "%s: %s=%.64s refused: not a valid value", tfs_topic_name(n->topic),
		             sub, val);
	return rc;
}

void tfs_xattr_set(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, const char *name,
                   const char *value, size_t size, int flags)
{
	const char *sub = name + PREFIX_LEN;
	const struct xattr_row *row;
	struct xctx c = { .m = m, .n = n };
	int rc;

	if (strncmp(name, TFS_XATTR_PREFIX, PREFIX_LEN) != 0) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	row = find_row(sub, n->kind);
	if (n->kind == TFS_NODE_TOPIC && is_config_name(sub)) {
		if (flags & XATTR_CREATE) {
			fuse_reply_err(req, EEXIST);    /* every config always has a value */
			return;
		}
		if (m->read_only) {
			fuse_reply_err(req, EROFS);
			return;
		}
		if (tfs_topic_deleted(n->topic)) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		rc = set_config(m, n, sub, value, size);
	} else if (row && row->set) {
		if (m->read_only) {
			fuse_reply_err(req, EROFS);
			return;
		}
		rc = row->set(&c, value, size);
	} else {
		rc = -ENOTSUP;
	}
	if (rc == 0)
		tfs_fate_cache_invalidate(m->fates);   /* a config, roll or clean moves fates */
	tfs_reply_err(req, rc, "xattr");
}

void tfs_xattr_remove(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n, const char *name)
{
	const char *sub = name + PREFIX_LEN;
	char val[CONFIG_VALUE_CAP];
	int rc;

	if (strncmp(name, TFS_XATTR_PREFIX, PREFIX_LEN) != 0 || n->kind != TFS_NODE_TOPIC ||
	    !is_config_name(sub)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	if (m->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* Removing a config puts the mount's default back. */
	rc = tfs_topic_config_get(&m->topic_defaults, sub, val, sizeof(val));
	if (rc == 0)
		rc = tfs_topic_set_config(n->topic, sub, val);
	if (rc == 0)
		tfs_fate_cache_invalidate(m->fates);
	tfs_reply_err(req, rc, "xattr");
}
