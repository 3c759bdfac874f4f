/* api.c - the requests the listener serves, by Kafka's message specs
 * (apache/kafka clients/src/main/resources/common/message/, one JSON file per message).
 *
 * Versions: every API's range is in apis[] below, and ApiVersions advertises
 * exactly that. Nothing flexible (KIP-482) is advertised but ApiVersions v3,
 * which librdkafka sends first, and the admin APIs' newest versions (api_admin.c); an ApiVersions above it is answered as Kafka
 * answers it (KIP-511): a v0 body with UNSUPPORTED_VERSION and the ApiVersions
 * range, so the client retries with a version it finds there. Any other key or
 * version outside its range closes the connection without an answer, as Kafka
 * does when it cannot parse a request header.
 *
 * A request that does not parse (short, an array count past its bytes, a bad
 * length) closes the connection and changes nothing: every handler parses the
 * whole request before it acts on any of it.
 *
 * docs/kafka.md lists the APIs, versions and what each answers.
 */
#include "kafka/kafka_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/format/batch_codec.h"
#include "engine/engine.h"
#include "engine/log/plog_fetch.h"
#include "io/log.h"

#define LEADER_EPOCH 0                  /* one node, never re-elected */
#define TOPIC_MODE 0755                 /* of a topic a client creates (mkdir's
                                         * usual mode under umask 022) */
#define MAY_READ_DIR 5                  /* r-x: list and read a partition */
#define MAY_WRITE_DIR 3                 /* -wx: add to a directory */
#define NEW_PARTITIONS_MAX 10000        /* of a topic a client creates: a directory
                                         * and files each, so a request cannot make
                                         * the daemon create millions */

#define SASL_HANDSHAKE_NEVER_FLEXIBLE INT16_MAX   /* its spec has no flexible version */

struct api_range {
	int16_t key, min, max, first_flexible;
};

static const struct api_range apis[] = {
	/* in key order; api_groups.c serves 8-16 and 42, api_admin.c 32, 33, 44,
	 * sasl.c 17 and 36 */
	{ API_PRODUCE, 3, 8, 9 },
	{ API_FETCH, 4, 11, 12 },
	{ API_LIST_OFFSETS, 1, 5, 6 },
	{ API_METADATA, 0, 8, 9 },
	{ TFS_KAFKA_API_OFFSET_COMMIT, 2, 7, 8 },
	{ TFS_KAFKA_API_OFFSET_FETCH, 1, 5, 6 },
	{ TFS_KAFKA_API_FIND_COORDINATOR, 0, 2, 3 },
	{ TFS_KAFKA_API_JOIN_GROUP, 0, 5, 6 },
	{ TFS_KAFKA_API_HEARTBEAT, 0, 3, 4 },
	{ TFS_KAFKA_API_LEAVE_GROUP, 0, 3, 4 },
	{ TFS_KAFKA_API_SYNC_GROUP, 0, 3, 4 },
	{ TFS_KAFKA_API_DESCRIBE_GROUPS, 0, 4, 5 },
	{ TFS_KAFKA_API_LIST_GROUPS, 0, 2, 3 },
	{ API_SASL_HANDSHAKE, 0, 1, SASL_HANDSHAKE_NEVER_FLEXIBLE },
	{ API_API_VERSIONS, 0, 3, 3 },
	{ API_CREATE_TOPICS, 0, 4, 5 },
	{ API_DELETE_TOPICS, 0, 3, 4 },
	{ API_DELETE_RECORDS, 0, 2, 2 },
	{ API_INIT_PRODUCER_ID, 0, 1, 2 },
	{ API_DESCRIBE_CONFIGS, 0, 4, 4 },
	{ API_ALTER_CONFIGS, 0, 2, 2 },
	{ API_SASL_AUTHENTICATE, 0, 2, 2 },
	{ TFS_KAFKA_API_DELETE_GROUPS, 0, 1, 2 },
	{ API_INCREMENTAL_ALTER_CONFIGS, 0, 1, 1 },
};
#define NAPIS (sizeof(apis) / sizeof(apis[0]))

static const struct api_range *api_find(int16_t key)
{
	for (size_t i = 0; i < NAPIS; i++)
		if (apis[i].key == key)
			return &apis[i];
	return NULL;
}

int tfs_kafka_parse_header(struct tfs_kafka_ctx *ctx, const uint8_t *frame, size_t len,
                           bool *flex, bool *resp_flex)
{
	const struct api_range *a;
	struct kr r;

	kr_init(&r, frame, len, false);
	ctx->api_key = kr_i16(&r);
	ctx->api_version = kr_i16(&r);
	ctx->correlation_id = kr_i32(&r);
	ctx->client_id = kr_str16(&r);          /* header v1 and v2: int16 length */
	if (r.bad)
		return -1;
	a = api_find(ctx->api_key);
	if (!a)
		return -1;
	if (ctx->api_key == API_API_VERSIONS && ctx->api_version > a->max) {
		*flex = *resp_flex = false;     /* KIP-511: answered with a v0 body */
		return (int)r.pos;
	}
	if (ctx->api_version < a->min || ctx->api_version > a->max)
		return -1;
	*flex = ctx->api_version >= a->first_flexible;
	*resp_flex = *flex && ctx->api_key != API_API_VERSIONS;   /* KIP-511: header v0 */
	r.flex = *flex;
	kr_tags(&r);                            /* header v2 */
	return r.bad ? -1 : (int)r.pos;
}

/* ---- helpers ---- */

/* Copies a topic name out of the request; false if it cannot be one (too long,
 * NUL inside): the caller answers INVALID_TOPIC. */
bool tfs__kafka_topic_name(struct tfs_slice s, struct name_buf *out)
{
	if (s.len >= sizeof(out->s) || memchr(s.p, '\0', s.len)) {
		out->s[0] = '\0';
		return false;
	}
	memcpy(out->s, s.p, s.len);
	out->s[s.len] = '\0';
	return true;
}

bool tfs__kafka_may_topic(const struct tfs_kafka_ctx *ctx, struct tfs_topic *t, int want)
{
	struct tfs_topic_meta m;

	tfs_topic_get_meta(t, &m);
	return tfs_kafka_peer_may(ctx->peer, ctx->k->root_uid, ctx->k->root_gid, ctx->k->root_mode,
	                          1) &&
	       tfs_kafka_peer_may(ctx->peer, m.uid, m.gid, m.mode, want);
}

bool tfs__kafka_may_root(const struct tfs_kafka_ctx *ctx, int want)
{
	return tfs_kafka_peer_may(ctx->peer, ctx->k->root_uid, ctx->k->root_gid, ctx->k->root_mode,
	                          want);
}

bool tfs__kafka_sticky_ok(const struct tfs_kafka_ctx *ctx, mode_t dir_mode, uid_t dir_uid,
                          uid_t entry_uid)
{
	return !(dir_mode & S_ISVTX) ||
	       (ctx->peer->local &&
	        (ctx->peer->uid == 0 || ctx->peer->uid == dir_uid || ctx->peer->uid == entry_uid));
}

/* The topic, if it exists and the peer may search the root (a lookup). */
struct tfs_topic *tfs__kafka_topic_get(struct tfs_kafka_ctx *ctx, const char *name)
{
	struct tfs_topic *t = tfs_engine_topic_get(ctx->k->engine, name);

	if (t && tfs_topic_deleted(t)) {
		tfs_topic_unref(t);
		t = NULL;
	}
	return t;
}

static int16_t produce_error(int rc)
{
	switch (rc) {
	case -EINVAL:
	case TFS_EUNSUPPORTED:
		return E_INVALID_RECORD;
	case -EBADMSG:
	case TFS_ECORRUPT:
		return E_CORRUPT_MESSAGE;
	case -EFBIG:
		return E_MESSAGE_TOO_LARGE;
	case TFS_ESEQUENCE:
		return E_OUT_OF_ORDER_SEQUENCE;
	case TFS_EFENCED:
		return E_INVALID_PRODUCER_EPOCH;
	case -ENOSPC:
	case -EIO:
	case -EDQUOT:
	case TFS_EREADONLY:
		return E_KAFKA_STORAGE_ERROR;
	default:
		return E_UNKNOWN;
	}
}

/* Response frame: size, correlation id, header tags (flexible); the size is
 * patched in by finish(). */
void tfs__kafka_begin(struct kw *w, const struct tfs_kafka_ctx *ctx, bool resp_flex)
{
	w->flex = resp_flex;
	kw_i32(w, 0);
	kw_i32(w, ctx->correlation_id);
	kw_tags(w);
}

void tfs__kafka_finish(struct kw *w)
{
	kw_patch_i32(w, 0, (int32_t)(w->len + w->span_bytes - 4));
}

/* ---- ApiVersions (18) ---- */

static enum tfs_kafka_verdict api_versions(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;

	tfs__kafka_begin(w, ctx, false);        /* KIP-511: response header v0 always */
	if (v > api_find(API_API_VERSIONS)->max) {
		kw_i16(w, E_UNSUPPORTED_VERSION);  /* a v0 body naming our range */
		kw_i32(w, 1);
		kw_i16(w, API_API_VERSIONS);
		kw_i16(w, 0);
		kw_i16(w, api_find(API_API_VERSIONS)->max);
		tfs__kafka_finish(w);
		return KAFKA_REPLY;
	}
	if (v >= 3) {
		(void)kr_str(r, NULL);          /* client software name and version */
		(void)kr_str(r, NULL);
		kr_tags(r);
		if (r->bad)
			return KAFKA_CLOSE;
	}
	w->flex = v >= 3;                       /* the body is flexible in v3 */
	kw_i16(w, E_NONE);
	kw_array(w, (int32_t)NAPIS);
	for (size_t i = 0; i < NAPIS; i++) {
		kw_i16(w, apis[i].key);
		kw_i16(w, apis[i].min);
		kw_i16(w, apis[i].max);
		kw_tags(w);
	}
	if (v >= 1)
		kw_i32(w, 0);                   /* throttle */
	kw_tags(w);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- Metadata (3) ---- */

static int32_t partitions_for_new(const struct tfs_kafka_ctx *ctx)
{
	return ctx->k->cfg.num_partitions > 0 ? ctx->k->cfg.num_partitions : 0;
}

/* Creates a topic for the peer: it owns it, as mkdir would make it. */
static int create_topic(struct tfs_kafka_ctx *ctx, const char *name, int32_t partitions)
{
	uid_t uid = ctx->peer->local ? ctx->peer->uid : ctx->k->root_uid;
	gid_t gid = ctx->peer->local && ctx->peer->gid != (gid_t)-1 ? ctx->peer->gid
	                                                             : ctx->k->root_gid;
	int rc = tfs_engine_topic_create(ctx->k->engine, name, partitions, uid, gid, TOPIC_MODE);

	if (rc == 0) {
		tfs_log_info("kafka", "topic %s created by a client (uid %d)", name,
		             ctx->peer->local ? (int)ctx->peer->uid : -1);
		if (ctx->k->hooks.topic_created)
			ctx->k->hooks.topic_created(ctx->k->hooks.arg, name);
	}
	return rc;
}

static void metadata_topic(struct tfs_kafka_ctx *ctx, struct kw *w, const char *name,
                           int16_t error, struct tfs_topic *t)
{
	int16_t v = ctx->api_version;
	int32_t np = t && error == E_NONE ? tfs_topic_partition_count(t) : 0;

	kw_i16(w, error);
	kw_cstr(w, name);
	if (v >= 1)
		kw_i8(w, t && tfs_topic_internal(t));   /* is_internal */
	kw_array(w, np);
	for (int32_t p = 0; p < np; p++) {
		kw_i16(w, E_NONE);
		kw_i32(w, p);
		kw_i32(w, ctx->k->cfg.node_id);     /* leader */
		if (v >= 7)
			kw_i32(w, LEADER_EPOCH);
		kw_array(w, 1);
		kw_i32(w, ctx->k->cfg.node_id);     /* replicas */
		kw_array(w, 1);
		kw_i32(w, ctx->k->cfg.node_id);     /* isr */
		if (v >= 5)
			kw_array(w, 0);             /* offline replicas */
	}
	if (v >= 8)
		kw_i32(w, INT32_MIN);           /* authorized operations: not asked */
}

static enum tfs_kafka_verdict metadata(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	const struct tfs_kafka_config *cfg = &ctx->k->cfg;
	int32_t n = kr_array(r, 2), i;
	struct tfs_slice *names = NULL;
	bool allow_create = true, all;

	if (n > 0) {
		names = calloc((size_t)n, sizeof(*names));
		if (!names)
			return KAFKA_CLOSE;
	}
	for (i = 0; i < n && !r->bad; i++)
		names[i] = kr_str(r, NULL);
	if (v >= 4)
		allow_create = kr_i8(r) != 0;
	if (v >= 8) {
		(void)kr_i8(r);                 /* include cluster authorized operations */
		(void)kr_i8(r);                 /* include topic authorized operations */
	}
	if (r->bad) {
		free(names);
		return KAFKA_CLOSE;
	}
	all = n == -1 || (v == 0 && n == 0);
	tfs__kafka_begin(w, ctx, false);
	if (v >= 3)
		kw_i32(w, 0);                   /* throttle */
	kw_array(w, 1);
	kw_i32(w, cfg->node_id);
	kw_cstr(w, cfg->advertised_host);
	kw_i32(w, cfg->advertised_port);
	if (v >= 1)
		kw_nullstr(w);                  /* rack */
	if (v >= 2)
		kw_cstr(w, ctx->k->cluster_id);
	if (v >= 1)
		kw_i32(w, cfg->node_id);        /* controller */
	if (all) {
		char **list = NULL;
		size_t count = 0;
		if (tfs_engine_topic_names(ctx->k->engine, &list, &count) < 0) {
			free(names);
			return KAFKA_CLOSE;
		}
		if (!tfs__kafka_may_root(ctx, MAY_READ_DIR))
			count = 0;                  /* ls of the root would be refused too */
		kw_array(w, (int32_t)count);
		for (size_t j = 0; j < count; j++) {
			struct tfs_topic *t = tfs__kafka_topic_get(ctx, list[j]);
			metadata_topic(ctx, w, list[j], t ? E_NONE : E_UNKNOWN_TOPIC_OR_PARTITION, t);
			if (t)
				tfs_topic_unref(t);
		}
		free(list);
	} else {
		kw_array(w, n);
		for (i = 0; i < n; i++) {
			struct name_buf nb;
			struct tfs_topic *t = NULL;
			int16_t err = E_NONE;

			if (!tfs__kafka_topic_name(names[i], &nb) || !tfs_topic_name_valid(nb.s)) {
				err = E_INVALID_TOPIC;
			} else if (!(t = tfs__kafka_topic_get(ctx, nb.s))) {
				err = E_UNKNOWN_TOPIC_OR_PARTITION;
				if (cfg->auto_create_topics && allow_create &&
				    !tfs_engine_read_only(ctx->k->engine) && tfs__kafka_may_root(ctx, MAY_WRITE_DIR)) {
					int rc = create_topic(ctx, nb.s, partitions_for_new(ctx));
					if (rc == 0 || rc == -EEXIST)
						t = tfs__kafka_topic_get(ctx, nb.s);
					if (t)
						err = E_NONE;
				}
			}
			metadata_topic(ctx, w, nb.s, err, t);
			if (t)
				tfs_topic_unref(t);
		}
	}
	if (v >= 8)
		kw_i32(w, INT32_MIN);           /* cluster authorized operations */
	free(names);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- Produce (0) ---- */

struct produce_hook {
	struct tfs_kafka_ctx *ctx;
	struct tfs_topic *t;
	int32_t partition;
};

static void produce_committed(void *arg, const struct tfs_append_rec *recs, size_t count)
{
	struct produce_hook *h = arg;
	const struct tfs_kafka_hooks *hooks = &h->ctx->k->hooks;

	if (hooks->records)
		hooks->records(hooks->arg, h->t, h->partition, recs, count);
}

struct produce_part {
	int32_t index;
	struct tfs_slice records;
	bool null;
};

struct produce_topic {
	struct tfs_slice name;
	int32_t nparts;
	struct produce_part *parts;
};

bool tfs__kafka_sticky_topic_ok(const struct tfs_kafka_ctx *ctx, struct tfs_topic *t)
{
	struct tfs_topic_meta m;

	tfs_topic_get_meta(t, &m);
	return tfs__kafka_sticky_ok(ctx, m.mode, m.uid, m.uid);
}

static int16_t produce_one(struct tfs_kafka_ctx *ctx, const char *name, bool name_ok,
                           struct produce_part *p, int64_t *base, int64_t *log_start)
{
	struct tfs_batch_header h;
	struct tfs_topic *t;
	struct tfs_plog *pl;
	struct produce_hook hook;
	tfs_offset_t first = -1;
	int16_t err = E_NONE;
	int rc = 0;

	*base = -1;
	*log_start = -1;
	if (!name_ok || !tfs_topic_name_valid(name))
		return E_INVALID_TOPIC;
	t = tfs__kafka_topic_get(ctx, name);
	if (!t)
		return E_UNKNOWN_TOPIC_OR_PARTITION;
	pl = tfs_topic_partition(t, p->index);
	if (!pl) {
		err = E_UNKNOWN_TOPIC_OR_PARTITION;
	} else if (!tfs__kafka_may_topic(ctx, t, MAY_WRITE_DIR)) {
		err = E_TOPIC_AUTHORIZATION_FAILED;
	} else if (tfs_topic_internal(t)) {
		/* Kafka's answer to a client producing to an internal topic */
		err = E_INVALID_TOPIC;
		tfs_log_warn("kafka", "produce to %s/%d refused: an internal topic", name, (int)p->index);
	} else if (p->null || p->records.len == 0) {
		err = E_INVALID_RECORD;
	} else if (tfs_batch_header_decode(p->records.p, p->records.len, &h, NULL) == 0 &&
	           tfs_batch_codec(&h) == TFS_CODEC_ZSTD && ctx->api_version < 7) {
		err = E_UNSUPPORTED_COMPRESSION_TYPE;
	} else if (!tfs__kafka_sticky_topic_ok(ctx, t) &&
	           (rc = tfs_batch_has_tombstone(p->records.p, p->records.len)) > 0) {
		/* rm's rule in a sticky topic: its keys are its owner's (a batch that
		 * does not decode is the engine's to refuse, with its error) */
		err = E_TOPIC_AUTHORIZATION_FAILED;
		tfs_log_warn("kafka", "produce to %s/%d refused: a tombstone from uid %d in a sticky "
		             "topic it does not own", name, (int)p->index,
		             ctx->peer->local ? (int)ctx->peer->uid : -1);
	} else if (rc == -ENOMEM) {
		err = E_KAFKA_STORAGE_ERROR;    /* not looked at, so not let through */
		tfs_log_warn("kafka", "produce to %s/%d refused: out of memory", name, (int)p->index);
	} else {
		hook = (struct produce_hook){ ctx, t, p->index };
		/* the frame is this connection's own buffer: the engine may stamp it */
		rc = tfs_plog_append_batch(pl, (uint8_t *)p->records.p, p->records.len, false, &first,
		                           NULL, produce_committed, &hook);
		if (rc < 0) {
			err = produce_error(rc);
			tfs_log_warn("kafka", "produce to %s/%d refused: %s (error %d)", name,
			             (int)p->index, tfs_strerror(rc), (int)err);
		} else {
			struct tfs_plog_stats st;
			tfs_plog_stats(pl, &st);
			*base = first;
			*log_start = st.log_start_offset;
		}
	}
	tfs_topic_unref(t);
	return err;
}

static enum tfs_kafka_verdict produce(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version, acks;
	struct produce_topic *topics = NULL;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;
	int32_t nt, i, j;
	bool null;

	(void)kr_str(r, &null);                 /* transactional id: the batch says */
	acks = kr_i16(r);
	(void)kr_i32(r);                        /* timeout: appends do not wait on replicas */
	nt = kr_array(r, 6);
	if (nt > 0 && !(topics = calloc((size_t)nt, sizeof(*topics))))
		return KAFKA_CLOSE;
	for (i = 0; i < nt && !r->bad; i++) {
		topics[i].name = kr_str(r, NULL);
		topics[i].nparts = kr_array(r, 8);
		if (topics[i].nparts > 0 &&
		    !(topics[i].parts = calloc((size_t)topics[i].nparts, sizeof(*topics[i].parts))))
			r->bad = true;
		for (j = 0; j < topics[i].nparts && !r->bad; j++) {
			topics[i].parts[j].index = kr_i32(r);
			topics[i].parts[j].records = kr_bytes(r, &topics[i].parts[j].null);
		}
	}
	if (r->bad || kr_left(r) || nt < 0) {
		verdict = KAFKA_CLOSE;
		goto out;
	}
	tfs__kafka_begin(w, ctx, false);
	kw_array(w, nt);
	for (i = 0; i < nt; i++) {
		struct name_buf nb;
		bool ok = tfs__kafka_topic_name(topics[i].name, &nb);

		kw_str(w, topics[i].name.p, topics[i].name.len);
		kw_array(w, topics[i].nparts < 0 ? 0 : topics[i].nparts);
		for (j = 0; j < topics[i].nparts; j++) {
			struct produce_part *p = &topics[i].parts[j];
			int64_t base = -1, log_start = -1;
			int16_t err;

			if (acks != 0 && acks != 1 && acks != -1)
				err = E_INVALID_REQUIRED_ACKS;
			else
				err = produce_one(ctx, nb.s, ok, p, &base, &log_start);
			if (err != E_NONE && acks == 0)
				verdict = KAFKA_CLOSE;  /* Kafka's answer with no answer */
			kw_i32(w, p->index);
			kw_i16(w, err);
			kw_i64(w, base);
			kw_i64(w, -1);              /* log append time: CreateTime topics */
			if (v >= 5)
				kw_i64(w, log_start);
			if (v >= 8) {
				kw_array(w, 0);         /* record errors */
				kw_nullstr(w);
			}
		}
	}
	kw_i32(w, 0);                           /* throttle: last, in Produce */
	tfs__kafka_finish(w);
	if (acks == 0 && verdict == KAFKA_REPLY)
		verdict = KAFKA_NO_REPLY;
out:
	for (i = 0; i < nt && topics; i++)
		free(topics[i].parts);
	free(topics);
	return verdict;
}

/* ---- Fetch (1) ---- */

static int16_t leader_epoch_error(int32_t epoch)
{
	if (epoch == -1 || epoch == LEADER_EPOCH)
		return E_NONE;
	return epoch > LEADER_EPOCH ? E_UNKNOWN_LEADER_EPOCH : E_FENCED_LEADER_EPOCH;
}

/* A topic of a Fetch or ListOffsets: its name read from the request and echoed
 * into the response, the topic if it exists, and the error each of its
 * partitions gets before its own checks. */
struct read_topic {
	struct tfs_topic *t;                /* a reference, or NULL */
	int16_t error;
};

static void read_topic_open(struct tfs_kafka_ctx *ctx, struct kr *body, struct kw *w,
                            struct read_topic *rt)
{
	struct tfs_slice tname = kr_str(body, NULL);
	struct name_buf nb;

	kw_str(w, tname.p, tname.len);
	rt->t = NULL;
	rt->error = E_NONE;
	if (!tfs__kafka_topic_name(tname, &nb) || !tfs_topic_name_valid(nb.s))
		rt->error = E_INVALID_TOPIC;
	else if (!(rt->t = tfs__kafka_topic_get(ctx, nb.s)))
		rt->error = E_UNKNOWN_TOPIC_OR_PARTITION;
	else if (!tfs__kafka_may_topic(ctx, rt->t, MAY_READ_DIR))
		rt->error = E_TOPIC_AUTHORIZATION_FAILED;
}

/* The partition to read, or NULL with *error set. */
static struct tfs_plog *read_partition(const struct read_topic *rt, int32_t index, int32_t epoch,
                                       int16_t *error)
{
	struct tfs_plog *pl = rt->t ? tfs_topic_partition(rt->t, index) : NULL;

	*error = rt->error;
	if (*error == E_NONE && !pl)
		*error = E_UNKNOWN_TOPIC_OR_PARTITION;
	if (*error == E_NONE)
		*error = leader_epoch_error(epoch);
	return *error == E_NONE ? pl : NULL;
}

static void read_topic_close(struct read_topic *rt)
{
	if (rt->t)
		tfs_topic_unref(rt->t);
}

/* The aborted transactions a read_committed consumer of [from, upto) must skip:
 * (producer id, first offset) each, Fetch's aborted_transactions. */
static void fetch_aborted(struct kw *w, struct tfs_plog *pl, tfs_offset_t from, tfs_offset_t upto)
{
	struct tfs_aborted_txn stack[16], *a = stack;
	size_t n = tfs_plog_aborted_txns(pl, from, upto, stack, 16);

	if (n > 16 && (a = malloc(n * sizeof(*a))) != NULL)
		n = tfs_plog_aborted_txns(pl, from, upto, a, n);
	else if (n > 16) {
		tfs_log_error("kafka", "out of memory listing %zu aborted transactions of %s",
		              n, tfs_plog_path(pl));
		n = 16;
	}
	kw_array(w, (int32_t)n);
	for (size_t i = 0; i < n; i++) {
		kw_i64(w, a[i].producer_id);
		kw_i64(w, a[i].first_offset);
	}
	if (a != stack)
		free(a);
}

static enum tfs_kafka_verdict fetch(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	int32_t max_wait, min_bytes, max_bytes, session_id, nt;
	int8_t isolation;
	size_t total = 0, remaining;
	bool any_error = false;
	struct kr body;

	(void)kr_i32(r);                        /* replica id: -1 for consumers */
	max_wait = kr_i32(r);
	min_bytes = kr_i32(r);
	max_bytes = kr_i32(r);
	isolation = kr_i8(r);
	session_id = v >= 7 ? kr_i32(r) : 0;
	if (v >= 7)
		(void)kr_i32(r);                /* session epoch */
	/* Check the whole request first; then walk the topics again to answer. */
	body = *r;
	nt = kr_array(r, 6);
	for (int32_t i = 0; i < nt && !r->bad; i++) {
		int32_t np;
		(void)kr_str(r, NULL);
		np = kr_array(r, 16);
		for (int32_t j = 0; j < np && !r->bad; j++) {
			(void)kr_i32(r);
			if (v >= 9)
				(void)kr_i32(r);
			(void)kr_i64(r);
			if (v >= 5)
				(void)kr_i64(r);
			(void)kr_i32(r);
		}
	}
	if (v >= 7) {
		int32_t nf = kr_array(r, 6);
		for (int32_t i = 0; i < nf && !r->bad; i++) {
			(void)kr_str(r, NULL);
			int32_t np = kr_array(r, 4);
			for (int32_t j = 0; j < np && !r->bad; j++)
				(void)kr_i32(r);
		}
	}
	if (v >= 11)
		(void)kr_str(r, NULL);          /* rack id */
	if (r->bad || kr_left(r) || nt < 0)
		return KAFKA_CLOSE;

	tfs__kafka_begin(w, ctx, false);
	kw_i32(w, 0);                           /* throttle */
	if (v >= 7) {
		if (session_id != 0) {
			kw_i16(w, E_FETCH_SESSION_ID_NOT_FOUND);
			kw_i32(w, 0);
			kw_array(w, 0);
			tfs__kafka_finish(w);
			return KAFKA_REPLY;
		}
		kw_i16(w, E_NONE);
		kw_i32(w, 0);                   /* no fetch sessions: always full */
	}
	remaining = max_bytes > 0 ? (size_t)max_bytes : 0;
	kw_array(w, nt);
	nt = kr_array(&body, 6);
	for (int32_t i = 0; i < nt; i++) {
		struct read_topic rt;
		int32_t np;

		read_topic_open(ctx, &body, w, &rt);
		np = kr_array(&body, 16);
		kw_array(w, np);
		for (int32_t j = 0; j < np; j++) {
			int32_t index = kr_i32(&body);
			int32_t epoch = v >= 9 ? kr_i32(&body) : -1;
			int64_t offset = kr_i64(&body);
			struct tfs_plog_fetch f;
			struct tfs_plog *pl;
			int32_t part_max;
			int16_t err;
			int rc;

			if (v >= 5)
				(void)kr_i64(&body);    /* the follower's log start offset */
			part_max = kr_i32(&body);
			memset(&f, 0, sizeof(f));
			f.high_watermark = f.log_start = -1;
			pl = read_partition(&rt, index, epoch, &err);
			if (pl) {
				size_t limit = part_max > 0 ? (size_t)part_max : 0;
				if (limit > remaining)
					limit = remaining;
				rc = isolation == 1 ? tfs_plog_fetch_committed(pl, offset, limit, total == 0, &f)
				                    : tfs_plog_fetch(pl, offset, limit, total == 0, &f);
				if (rc == -ERANGE)
					err = E_OFFSET_OUT_OF_RANGE;
				else if (rc < 0)
					err = E_KAFKA_STORAGE_ERROR;
			}
			if (err != E_NONE)
				any_error = true;
			kw_i32(w, index);
			kw_i16(w, err);
			kw_i64(w, f.high_watermark);
			kw_i64(w, pl && err == E_NONE ? f.last_stable : f.high_watermark);
			if (v >= 5)
				kw_i64(w, f.log_start);
			if (isolation == 1 && pl && err == E_NONE)
				fetch_aborted(w, pl, offset, f.next);   /* read_committed */
			else
				kw_array(w, -1);
			if (v >= 11)
				kw_i32(w, -1);          /* preferred read replica: this node */
			kw_i32(w, (int32_t)f.bytes);    /* records: 0, never -1, when empty */
			for (int k = 0; k < f.nspans; k++)
				kw_span(w, f.span[k]);  /* the writer takes the references */
			f.nspans = 0;
			total += f.bytes;
			remaining = remaining > f.bytes ? remaining - f.bytes : 0;
		}
		read_topic_close(&rt);
	}
	tfs__kafka_finish(w);
	/* Long poll: answer now if nothing can make it better, else wait. */
	if (max_wait > 0 && min_bytes > 0 && !any_error && total < (size_t)min_bytes &&
	    ctx->now_ms - ctx->parked_at_ms < max_wait) {
		ctx->wake_at_ms = ctx->parked_at_ms + max_wait;
		return KAFKA_PARK;
	}
	return KAFKA_REPLY;
}

/* ---- ListOffsets (2) ---- */

static enum tfs_kafka_verdict list_offsets(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	int32_t nt;
	struct kr body;

	(void)kr_i32(r);                        /* replica id */
	if (v >= 2)
		(void)kr_i8(r);                 /* isolation: the same bound without transactions */
	body = *r;
	nt = kr_array(r, 6);
	for (int32_t i = 0; i < nt && !r->bad; i++) {
		(void)kr_str(r, NULL);
		int32_t np = kr_array(r, 12);
		for (int32_t j = 0; j < np && !r->bad; j++) {
			(void)kr_i32(r);
			if (v >= 4)
				(void)kr_i32(r);
			(void)kr_i64(r);
		}
	}
	if (r->bad || kr_left(r) || nt < 0)
		return KAFKA_CLOSE;
	tfs__kafka_begin(w, ctx, false);
	if (v >= 2)
		kw_i32(w, 0);
	nt = kr_array(&body, 6);
	kw_array(w, nt);
	for (int32_t i = 0; i < nt; i++) {
		struct read_topic rt;
		int32_t np;

		read_topic_open(ctx, &body, w, &rt);
		np = kr_array(&body, 12);
		kw_array(w, np);
		for (int32_t j = 0; j < np; j++) {
			int32_t index = kr_i32(&body);
			int32_t epoch = v >= 4 ? kr_i32(&body) : -1;
			int64_t ts = kr_i64(&body), off = -1, rts = -1;
			int16_t err;
			struct tfs_plog *pl = read_partition(&rt, index, epoch, &err);

			if (!pl) {
				/* err says why */
			} else if (ts == -1 || ts == -2) {
				struct tfs_plog_stats st;
				tfs_plog_stats(pl, &st);
				off = ts == -1 ? st.log_end_offset : st.log_start_offset;
			} else if (ts >= 0) {
				int rc = tfs_plog_offset_for_time(pl, ts, &off, &rts);
				if (rc == -ENOENT)
					off = rts = -1;     /* none at or after: (-1, -1), no error */
				else if (rc < 0)
					err = E_KAFKA_STORAGE_ERROR;
			} else {
				err = E_UNSUPPORTED_VERSION;    /* -3 and below need v7+ */
			}
			kw_i32(w, index);
			kw_i16(w, err);
			kw_i64(w, err == E_NONE ? rts : -1);
			kw_i64(w, err == E_NONE ? off : -1);
			if (v >= 4)
				kw_i32(w, err == E_NONE ? LEADER_EPOCH : -1);
		}
		read_topic_close(&rt);
	}
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- CreateTopics (19) ---- */

struct create_req {
	struct tfs_slice name;
	int32_t partitions;
	int16_t replication;
	int32_t nassign;
	bool assign_ok;                     /* every assignment is [this node], 0..n-1 */
	int32_t nconfigs;
	struct tfs_slice *cfg_names, *cfg_values;
	bool *cfg_null;
};

static void create_free(struct create_req *c, int32_t n)
{
	for (int32_t i = 0; i < n; i++) {
		free(c[i].cfg_names);
		free(c[i].cfg_values);
		free(c[i].cfg_null);
	}
	free(c);
}

/* Validates one topic's request; the error and its message. */
static int16_t create_check(struct tfs_kafka_ctx *ctx, const struct create_req *c,
                            struct create_req *all, int32_t index, const char *name, bool name_ok,
                            int32_t *partitions, const char **msg)
{
	struct tfs_topic_config scratch;
	struct tfs_topic *t;

	*msg = NULL;
	for (int32_t i = 0; i < index; i++)
		if (all[i].name.len == c->name.len && !memcmp(all[i].name.p, c->name.p, c->name.len)) {
			*msg = "the topic is named twice in the request";
			return E_INVALID_REQUEST;
		}
	if (!name_ok || !tfs_topic_name_valid(name)) {
		*msg = "a topic name is 1..249 of [A-Za-z0-9._-], not starting with '.'";
		return E_INVALID_TOPIC;
	}
	if ((t = tfs__kafka_topic_get(ctx, name))) {
		tfs_topic_unref(t);
		*msg = "the topic exists";
		return E_TOPIC_ALREADY_EXISTS;
	}
	if (c->nassign > 0) {
		if (!c->assign_ok || c->partitions != -1 || c->replication != -1) {
			*msg = "this node is the only broker: assignments name it alone";
			return E_INVALID_REPLICA_ASSIGNMENT;
		}
		if (c->nassign > NEW_PARTITIONS_MAX) {
			*msg = "more than 10000 partitions";
			return E_INVALID_PARTITIONS;
		}
		*partitions = c->nassign;
	} else {
		/* -1: the broker's default (KIP-464). Kafka's broker takes it at any
		 * version (only its Java client checks for v4), and KafkaJS 2.2.4,
		 * whose newest CreateTopics is v3, sends -1 for what it is not given */
		if (c->partitions == -1)
			*partitions = partitions_for_new(ctx);
		else if (c->partitions >= 1)
			*partitions = c->partitions;
		else {
			*msg = "the partition count must be at least 1";
			return E_INVALID_PARTITIONS;
		}
		if (*partitions > NEW_PARTITIONS_MAX) {
			*msg = "more than 10000 partitions";
			return E_INVALID_PARTITIONS;
		}
		if (c->replication != 1 && c->replication != -1) {
			*msg = "one node: the replication factor is 1";
			return E_INVALID_REPLICATION_FACTOR;
		}
	}
	tfs_topic_config_defaults(&scratch);
	for (int32_t i = 0; i < c->nconfigs; i++) {
		char cn[128], cv[256];
		if (c->cfg_null[i] || c->cfg_names[i].len >= sizeof(cn) ||
		    c->cfg_values[i].len >= sizeof(cv)) {
			*msg = "a config without a value, or too long";
			return E_INVALID_CONFIG;
		}
		memcpy(cn, c->cfg_names[i].p, c->cfg_names[i].len);
		cn[c->cfg_names[i].len] = '\0';
		memcpy(cv, c->cfg_values[i].p, c->cfg_values[i].len);
		cv[c->cfg_values[i].len] = '\0';
		if (tfs_topic_config_set(&scratch, cn, cv) < 0) {
			*msg = "a config this topic cannot take (see topicfs(8) for names and values)";
			return E_INVALID_CONFIG;
		}
	}
	if (!tfs__kafka_may_root(ctx, MAY_WRITE_DIR)) {
		*msg = "no write permission on the mount's root";
		return E_TOPIC_AUTHORIZATION_FAILED;
	}
	if (tfs_engine_read_only(ctx->k->engine)) {
		*msg = "the mount is read-only";
		return E_KAFKA_STORAGE_ERROR;
	}
	return E_NONE;
}

static enum tfs_kafka_verdict create_topics(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	int32_t n = kr_array(r, 12);
	struct create_req *c = n > 0 ? calloc((size_t)n, sizeof(*c)) : NULL;
	bool validate_only = false;

	if (n > 0 && !c)
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		c[i].name = kr_str(r, NULL);
		c[i].partitions = kr_i32(r);
		c[i].replication = kr_i16(r);
		c[i].nassign = kr_array(r, 8);
		c[i].assign_ok = true;
		for (int32_t j = 0; j < c[i].nassign && !r->bad; j++) {
			int32_t idx = kr_i32(r), nb = kr_array(r, 4);
			if (idx != j || nb != 1)
				c[i].assign_ok = false;
			for (int32_t b = 0; b < nb && !r->bad; b++)
				if (kr_i32(r) != ctx->k->cfg.node_id)
					c[i].assign_ok = false;
		}
		c[i].nconfigs = kr_array(r, 4);
		if (c[i].nconfigs > 0) {
			c[i].cfg_names = calloc((size_t)c[i].nconfigs, sizeof(struct tfs_slice));
			c[i].cfg_values = calloc((size_t)c[i].nconfigs, sizeof(struct tfs_slice));
			c[i].cfg_null = calloc((size_t)c[i].nconfigs, sizeof(bool));
			if (!c[i].cfg_names || !c[i].cfg_values || !c[i].cfg_null)
				r->bad = true;
		}
		for (int32_t j = 0; j < c[i].nconfigs && !r->bad; j++) {
			c[i].cfg_names[j] = kr_str(r, NULL);
			c[i].cfg_values[j] = kr_str(r, &c[i].cfg_null[j]);
		}
	}
	(void)kr_i32(r);                        /* timeout: creation is synchronous */
	if (v >= 1)
		validate_only = kr_i8(r) != 0;
	if (r->bad || kr_left(r) || n < 0) {
		create_free(c, n > 0 ? n : 0);
		return KAFKA_CLOSE;
	}
	tfs__kafka_begin(w, ctx, false);
	if (v >= 2)
		kw_i32(w, 0);
	kw_array(w, n);
	for (int32_t i = 0; i < n; i++) {
		struct name_buf nb;
		bool name_ok = tfs__kafka_topic_name(c[i].name, &nb);
		int32_t partitions = 0;
		const char *msg;
		int16_t err = create_check(ctx, &c[i], c, i, nb.s, name_ok, &partitions, &msg);

		if (err == E_NONE && !validate_only) {
			int rc = create_topic(ctx, nb.s, partitions);
			struct tfs_topic *t;
			if (rc == -EEXIST) {
				err = E_TOPIC_ALREADY_EXISTS;
				msg = "the topic exists";
			} else if (rc < 0) {
				err = E_UNKNOWN;
				msg = tfs_strerror(rc);
			} else if ((t = tfs__kafka_topic_get(ctx, nb.s))) {
				for (int32_t j = 0; j < c[i].nconfigs; j++) {
					char cn[128], cv[256];
					memcpy(cn, c[i].cfg_names[j].p, c[i].cfg_names[j].len);
					cn[c[i].cfg_names[j].len] = '\0';
					memcpy(cv, c[i].cfg_values[j].p, c[i].cfg_values[j].len);
					cv[c[i].cfg_values[j].len] = '\0';
					if (tfs_topic_set_config(t, cn, cv) < 0) {
						err = E_INVALID_CONFIG;
						msg = "the topic was created; a config did not apply";
					}
				}
				tfs_topic_unref(t);
			}
		}
		kw_str(w, c[i].name.p, c[i].name.len);
		kw_i16(w, err);
		if (v >= 1) {
			if (msg)
				kw_cstr(w, msg);
			else
				kw_nullstr(w);
		}
	}
	create_free(c, n);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- DeleteTopics (20) ---- */

static int16_t delete_one(struct tfs_kafka_ctx *ctx, struct tfs_slice s)
{
	struct name_buf nb;
	struct tfs_topic_meta m;
	struct tfs_topic *t;
	int rc;

	if (!tfs__kafka_topic_name(s, &nb) || !tfs_topic_name_valid(nb.s) ||
	    !(t = tfs__kafka_topic_get(ctx, nb.s)))
		return E_UNKNOWN_TOPIC_OR_PARTITION;
	tfs_topic_get_meta(t, &m);
	/* rmdir's rule: write on the root; with its sticky bit, own the topic too */
	if (!tfs__kafka_may_root(ctx, MAY_WRITE_DIR) ||
	    !tfs__kafka_sticky_ok(ctx, ctx->k->root_mode, ctx->k->root_uid, m.uid)) {
		tfs_topic_unref(t);
		return E_TOPIC_AUTHORIZATION_FAILED;
	}
	rc = tfs_engine_topic_delete(ctx->k->engine, nb.s, true);
	if (rc == 0) {
		tfs_log_info("kafka", "topic %s deleted by a client (uid %d)", nb.s,
		             ctx->peer->local ? (int)ctx->peer->uid : -1);
		if (ctx->k->hooks.topic_deleted)
			ctx->k->hooks.topic_deleted(ctx->k->hooks.arg, t);
	}
	tfs_topic_unref(t);
	if (rc == -ENOENT)
		return E_UNKNOWN_TOPIC_OR_PARTITION;
	return rc < 0 ? (rc == TFS_EREADONLY ? E_KAFKA_STORAGE_ERROR : E_UNKNOWN) : E_NONE;
}

static enum tfs_kafka_verdict delete_topics(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int32_t n = kr_array(r, 2);
	struct tfs_slice *names = n > 0 ? calloc((size_t)n, sizeof(*names)) : NULL;

	if (n > 0 && !names)
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n && !r->bad; i++)
		names[i] = kr_str(r, NULL);
	(void)kr_i32(r);
	if (r->bad || kr_left(r) || n < 0) {
		free(names);
		return KAFKA_CLOSE;
	}
	tfs__kafka_begin(w, ctx, false);
	if (ctx->api_version >= 1)
		kw_i32(w, 0);
	kw_array(w, n);
	for (int32_t i = 0; i < n; i++) {
		kw_str(w, names[i].p, names[i].len);
		kw_i16(w, delete_one(ctx, names[i]));
	}
	free(names);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- InitProducerId (22) ----
 *
 * An idempotent producer's id: fresh from the engine's allocator, epoch 0, as
 * Kafka's transaction coordinator answers a request without a transactional id;
 * the timeout is then unused. Transactions are not served: a transactional id
 * gets UNSUPPORTED_VERSION (what Kafka answers for a feature it does not serve),
 * an empty one INVALID_REQUEST as in Kafka. An id that cannot be reserved (a
 * read-only mount, a full or failing disk) is KAFKA_STORAGE_ERROR. */

static enum tfs_kafka_verdict init_producer_id(struct tfs_kafka_ctx *ctx, struct kr *r,
                                               struct kw *w)
{
	struct tfs_slice txn;
	bool null = false;
	int64_t id = -1;
	int16_t epoch = -1, err = E_NONE;
	int rc;

	txn = kr_str(r, &null);
	(void)kr_i32(r);                        /* transaction timeout */
	if (r->bad || kr_left(r))
		return KAFKA_CLOSE;
	if (!null) {
		err = txn.len == 0 ? E_INVALID_REQUEST : E_UNSUPPORTED_VERSION;
		tfs_log_warn("kafka", "InitProducerId with a transactional id: transactions are "
		             "not served (error %d)", (int)err);
	} else if ((rc = tfs_engine_producer_id(ctx->k->engine, &id, &epoch)) < 0) {
		err = E_KAFKA_STORAGE_ERROR;
		id = -1;
		epoch = -1;
		tfs_log_warn("kafka", "InitProducerId: no producer id: %s", tfs_strerror(rc));
	}
	tfs__kafka_begin(w, ctx, false);
	kw_i32(w, 0);                           /* throttle */
	kw_i16(w, err);
	kw_i64(w, id);
	kw_i16(w, epoch);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

enum tfs_kafka_verdict tfs_kafka_handle(struct tfs_kafka_ctx *ctx, const uint8_t *frame,
                                        size_t len, struct kw *w)
{
	bool flex = false, resp_flex = false;
	int body = tfs_kafka_parse_header(ctx, frame, len, &flex, &resp_flex);
	struct kr r;

	if (body < 0) {
		tfs_log_warn("kafka", "a request with api key %d version %d: not served; closing "
		             "the connection", (int)ctx->api_key, (int)ctx->api_version);
		return KAFKA_CLOSE;
	}
	if (!tfs__kafka_sasl_allows(ctx->sasl, ctx->api_key)) {
		tfs_log_warn("kafka", "a request with api key %d before SASL authentication "
		             "succeeded: closing the connection", (int)ctx->api_key);
		return KAFKA_CLOSE;
	}
	ctx->flex = flex;
	kr_init(&r, frame + body, len - (size_t)body, flex);
	switch (ctx->api_key) {
	case API_API_VERSIONS:
		return api_versions(ctx, &r, w);
	case API_METADATA:
		return metadata(ctx, &r, w);
	case API_PRODUCE:
		return produce(ctx, &r, w);
	case API_FETCH:
		return fetch(ctx, &r, w);
	case API_LIST_OFFSETS:
		return list_offsets(ctx, &r, w);
	case API_CREATE_TOPICS:
		return create_topics(ctx, &r, w);
	case API_DELETE_TOPICS:
		return delete_topics(ctx, &r, w);
	case API_DELETE_RECORDS:
		return tfs__kafka_delete_records(ctx, &r, w);
	case API_INIT_PRODUCER_ID:
		return init_producer_id(ctx, &r, w);
	case API_DESCRIBE_CONFIGS:
		return tfs__kafka_describe_configs(ctx, &r, w);
	case API_ALTER_CONFIGS:
		return tfs__kafka_alter_configs(ctx, &r, w, false);
	case API_INCREMENTAL_ALTER_CONFIGS:
		return tfs__kafka_alter_configs(ctx, &r, w, true);
	case API_SASL_HANDSHAKE:
		return tfs__kafka_sasl_handshake(ctx, &r, w);
	case API_SASL_AUTHENTICATE:
		return tfs__kafka_sasl_authenticate(ctx, &r, w);
	case TFS_KAFKA_API_OFFSET_COMMIT:
	case TFS_KAFKA_API_OFFSET_FETCH:
	case TFS_KAFKA_API_FIND_COORDINATOR:
	case TFS_KAFKA_API_JOIN_GROUP:
	case TFS_KAFKA_API_HEARTBEAT:
	case TFS_KAFKA_API_LEAVE_GROUP:
	case TFS_KAFKA_API_SYNC_GROUP:
	case TFS_KAFKA_API_DESCRIBE_GROUPS:
	case TFS_KAFKA_API_LIST_GROUPS:
	case TFS_KAFKA_API_DELETE_GROUPS:
		return tfs__kafka_groups_handle(ctx, &r, w);
	default:
		return KAFKA_CLOSE;
	}
}

bool tfs__kafka_may_read_topic(const struct tfs_kafka_ctx *ctx, struct tfs_topic *t)
{
	return tfs__kafka_may_topic(ctx, t, MAY_READ_DIR);
}
