/* api_groups.c - the consumer-group requests, by Kafka's message specs:
 * FindCoordinator 0-2, JoinGroup 0-5, SyncGroup 0-3, Heartbeat 0-3, LeaveGroup
 * 0-3, OffsetCommit 2-7, OffsetFetch 1-5, ListGroups 0-2, DescribeGroups 0-4,
 * DeleteGroups 0-1 (the non-flexible versions, which is what librdkafka,
 * kafka-python and KafkaJS send to a broker that offers them).
 *
 * The coordinator is this node for every group (one broker). The group logic is
 * in group.c; positions go to the engine's store (engine/groups/groups.h). Like every
 * handler, each parses the whole request before acting on any of it, and a
 * request that does not parse closes the connection.
 *
 * Access: a client may commit or fetch the offsets of a topic only if it may
 * read the topic (read and search on its directory, as for a Fetch): a
 * partition it may not read answers TOPIC_AUTHORIZATION_FAILED, and an
 * OffsetFetch of all partitions leaves such topics out. Groups themselves have
 * no owner: any client may join any group, as on a broker without ACLs.
 */
#include "kafka/kafka_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/groups/groups.h"
#include "io/log.h"
#include "kafka/group.h"

#define E_UNKNOWN_TOPIC_OR_PARTITION 3
#define E_TOPIC_AUTHORIZATION_FAILED 29
#define E_UNKNOWN (-1)
#define KEY_TYPE_GROUP 0                 /* FindCoordinator's key type */
#define AUTHORIZED_OPS_NONE INT32_MIN    /* DescribeGroups v3+: not asked for */
#define NAME_MAX_BYTES 32767             /* a Kafka string */

/* A Kafka string copied out as a C string; NULL (and bad) if it holds a NUL. */
static char *cstr(struct tfs_slice s)
{
	char *p;

	if (s.len && memchr(s.p, '\0', s.len))
		return NULL;
	p = malloc(s.len + 1);
	if (!p)
		return NULL;
	if (s.len)
		memcpy(p, s.p, s.len);
	p[s.len] = '\0';
	return p;
}

static void kw_bytes(struct kw *w, const void *p, size_t len)
{
	kw_i32(w, (int32_t)len);
	kw_raw(w, p, len);
}

static void kw_nstr(struct kw *w, const char *s)
{
	if (s)
		kw_cstr(w, s);
	else
		kw_nullstr(w);
}

static struct tfs_kreq kreq(const struct tfs_kafka_ctx *ctx)
{
	return (struct tfs_kreq){
		.conn = ctx->conn_id, .correlation = ctx->correlation_id, .retry = ctx->retry,
		.now_ms = ctx->now_ms, .client_id = ctx->client_id,
		.client_host = ctx->peer_host ? ctx->peer_host : "", .version = ctx->api_version,
	};
}

/* ---- FindCoordinator (10) ---- */

static enum tfs_kafka_verdict find_coordinator(struct tfs_kafka_ctx *ctx, struct kr *r,
                                               struct kw *w)
{
	int16_t v = ctx->api_version, err = KE_NONE;
	int8_t type = KEY_TYPE_GROUP;

	(void)kr_str(r, NULL);
	if (v >= 1)
		type = kr_i8(r);
	if (r->bad || kr_left(r))
		return KAFKA_CLOSE;
	if (type != KEY_TYPE_GROUP)
		err = KE_COORDINATOR_NOT_AVAILABLE;   /* transactions are not served */
	tfs__kafka_begin(w, ctx, false);
	if (v >= 1)
		kw_i32(w, 0);                   /* throttle */
	kw_i16(w, err);
	if (v >= 1)
		kw_nullstr(w);                  /* error message */
	kw_i32(w, err ? -1 : ctx->k->cfg.node_id);
	kw_cstr(w, err ? "" : ctx->k->cfg.advertised_host);
	kw_i32(w, err ? -1 : ctx->k->cfg.advertised_port);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- JoinGroup (11) ---- */

static enum tfs_kafka_verdict join_group(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version, err;
	struct tfs_kreq rq = kreq(ctx);
	struct tfs_kjoin j = { 0 };
	struct tfs_kjoin_answer a = { 0 };
	struct tfs_kproto *protos = NULL;
	char *group = NULL, *member = NULL, *instance = NULL, *ptype = NULL;
	struct tfs_slice s;
	bool null = false, park = false;
	int64_t wake_at = 0;
	int32_t n;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;

	group = cstr(kr_str(r, NULL));
	j.session_ms = kr_i32(r);
	j.rebalance_ms = v >= 1 ? kr_i32(r) : j.session_ms;
	member = cstr(kr_str(r, NULL));
	if (v >= 5) {
		s = kr_str(r, &null);
		instance = null ? NULL : cstr(s);
	}
	ptype = cstr(kr_str(r, NULL));
	n = kr_array(r, 6);
	if (n > 0 && !(protos = calloc((size_t)n, sizeof(*protos))))
		r->bad = true;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		protos[i].name = kr_str(r, NULL);
		protos[i].metadata = kr_bytes(r, NULL);
	}
	if (r->bad || kr_left(r) || !group || !member || !ptype || (v >= 5 && !null && !instance)) {
		verdict = KAFKA_CLOSE;
		goto out;
	}
	j.group = group;
	j.member_id = member;
	j.instance_id = instance;
	j.protocol_type = ptype;
	j.protos = protos;
	j.nprotos = n > 0 ? (size_t)n : 0;
	err = tfs_kgroups_join(ctx->k->groups, &rq, &j, &a, &park, &wake_at);
	if (!err && park) {
		ctx->wake_at_ms = wake_at;
		verdict = KAFKA_PARK;
		goto out;
	}
	tfs__kafka_begin(w, ctx, false);
	if (v >= 2)
		kw_i32(w, 0);                   /* throttle */
	kw_i16(w, err);
	kw_i32(w, err == KE_NONE ? a.generation : -1);
	kw_cstr(w, err == KE_NONE && a.protocol ? a.protocol : "");
	kw_cstr(w, err == KE_NONE && a.leader ? a.leader : "");
	kw_cstr(w, a.member_id ? a.member_id : (err == KE_UNKNOWN_MEMBER_ID ? member : ""));
	kw_array(w, err == KE_NONE ? (int32_t)a.nmembers : 0);
	for (size_t i = 0; err == KE_NONE && i < a.nmembers; i++) {
		kw_cstr(w, a.members[i].member_id);
		if (v >= 5)
			kw_nstr(w, a.members[i].instance_id);
		kw_bytes(w, a.members[i].metadata, a.members[i].metadata_len);
	}
	tfs__kafka_finish(w);
out:
	tfs_kjoin_answer_release(&a);
	free(protos);
	free(group);
	free(member);
	free(instance);
	free(ptype);
	return verdict;
}

/* ---- SyncGroup (14) ---- */

static enum tfs_kafka_verdict sync_group(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version, err;
	struct tfs_kreq rq = kreq(ctx);
	struct tfs_kassign *as = NULL;
	char *group, *member;
	uint8_t *assignment = NULL;
	size_t assignment_len = 0;
	bool park = false;
	int64_t wake_at = 0;
	int32_t generation, n;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;

	group = cstr(kr_str(r, NULL));
	generation = kr_i32(r);
	member = cstr(kr_str(r, NULL));
	if (v >= 3)
		(void)kr_str(r, &(bool){ false });          /* group instance id: dynamic here */
	n = kr_array(r, 6);
	if (n > 0 && !(as = calloc((size_t)n, sizeof(*as))))
		r->bad = true;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		as[i].member_id = kr_str(r, NULL);
		as[i].assignment = kr_bytes(r, NULL);
	}
	if (r->bad || kr_left(r) || !group || !member) {
		verdict = KAFKA_CLOSE;
		goto out;
	}
	err = tfs_kgroups_sync(ctx->k->groups, &rq, group, generation, member, as,
	                       n > 0 ? (size_t)n : 0, &assignment, &assignment_len, &park, &wake_at);
	if (!err && park) {
		ctx->wake_at_ms = wake_at;
		verdict = KAFKA_PARK;
		goto out;
	}
	tfs__kafka_begin(w, ctx, false);
	if (v >= 1)
		kw_i32(w, 0);
	kw_i16(w, err);
	kw_bytes(w, assignment, err ? 0 : assignment_len);
	tfs__kafka_finish(w);
out:
	free(assignment);
	free(as);
	free(group);
	free(member);
	return verdict;
}

/* ---- Heartbeat (12), LeaveGroup (13) ---- */

static enum tfs_kafka_verdict heartbeat(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version, err = KE_NONE;
	struct tfs_kreq rq = kreq(ctx);
	char *group, *member;
	int32_t generation;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;

	group = cstr(kr_str(r, NULL));
	generation = kr_i32(r);
	member = cstr(kr_str(r, NULL));
	if (v >= 3)
		(void)kr_str(r, &(bool){ false });   /* group instance id */
	if (r->bad || kr_left(r) || !group || !member) {
		verdict = KAFKA_CLOSE;
	} else {
		err = tfs_kgroups_heartbeat(ctx->k->groups, &rq, group, generation, member);
		tfs__kafka_begin(w, ctx, false);
		if (v >= 1)
			kw_i32(w, 0);
		kw_i16(w, err);
		tfs__kafka_finish(w);
	}
	free(group);
	free(member);
	return verdict;
}

static enum tfs_kafka_verdict leave_group(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	struct tfs_kreq rq = kreq(ctx);
	struct leaver {
		char *id;
		struct tfs_slice instance;
		bool instance_null;
		int16_t err;
	} *ls = NULL;
	char *group;
	int32_t n = 1;
	bool bad = false;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;

	group = cstr(kr_str(r, NULL));
	if (v >= 3)
		n = kr_array(r, 4);
	if (n > 0 && !(ls = calloc((size_t)n, sizeof(*ls))))
		r->bad = true;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		ls[i].id = cstr(kr_str(r, NULL));
		bad |= !ls[i].id;
		if (v >= 3)
			ls[i].instance = kr_str(r, &ls[i].instance_null);
	}
	if (r->bad || kr_left(r) || !group || bad || n < 0) {
		verdict = KAFKA_CLOSE;
		goto out;
	}
	for (int32_t i = 0; i < n; i++)
		ls[i].err = tfs_kgroups_leave(ctx->k->groups, &rq, group, ls[i].id);
	tfs__kafka_begin(w, ctx, false);
	if (v >= 1)
		kw_i32(w, 0);
	/* v0-2: the member's error at the top; v3: per member, the top says 0 */
	kw_i16(w, v >= 3 ? KE_NONE : (n > 0 ? ls[0].err : KE_NONE));
	if (v >= 3) {
		kw_array(w, n);
		for (int32_t i = 0; i < n; i++) {
			kw_cstr(w, ls[i].id);
			if (ls[i].instance_null)
				kw_nullstr(w);
			else
				kw_str(w, ls[i].instance.p, ls[i].instance.len);
			kw_i16(w, ls[i].err);
		}
	}
	tfs__kafka_finish(w);
out:
	for (int32_t i = 0; ls && i < n; i++)
		free(ls[i].id);
	free(ls);
	free(group);
	return verdict;
}

/* ---- OffsetCommit (8) ---- */

struct cpart {
	int32_t index;
	tfs_offset_t offset;
	int32_t leader_epoch;
	struct tfs_slice metadata;
	int16_t err;
};

struct ctopic {
	struct tfs_slice name;
	char *cname;                     /* NULL: not a topic name */
	struct cpart *parts;
	int32_t nparts;
};

static int16_t commit_error(int rc)
{
	switch (rc) {
	case TFS_EGROUPBUSY:
		return KE_UNKNOWN_MEMBER_ID;
	case TFS_EGENERATION:
		return KE_ILLEGAL_GENERATION;
	case -EMSGSIZE:
		return KE_OFFSET_METADATA_TOO_LARGE;
	case -EFBIG:
		return KE_INVALID_COMMIT_OFFSET_SIZE;
	case -ENOENT:
		return E_UNKNOWN_TOPIC_OR_PARTITION;
	case -EINVAL:
		return KE_INVALID_GROUP_ID;
	default:
		return KE_COORDINATOR_NOT_AVAILABLE;   /* the write failed: try again */
	}
}

/* Checks each partition (topic, access, metadata size) and commits the rest
 * in one batch; every partition gets its error. */
static void commit_all(struct tfs_kafka_ctx *ctx, const char *group, int32_t generation,
                       struct ctopic *ts, int32_t nt)
{
	struct tfs_group_commit *cs = NULL;
	size_t ncs = 0, total = 0;
	int16_t err;
	int rc;

	for (int32_t i = 0; i < nt; i++)
		total += (size_t)ts[i].nparts;
	if (total && !(cs = calloc(total, sizeof(*cs)))) {
		for (int32_t i = 0; i < nt; i++)
			for (int32_t p = 0; p < ts[i].nparts; p++)
				ts[i].parts[p].err = KE_COORDINATOR_NOT_AVAILABLE;
		return;
	}
	for (int32_t i = 0; i < nt; i++) {
		struct tfs_topic *t = ts[i].cname ? tfs_engine_topic_get(ctx->k->engine, ts[i].cname) : NULL;
		bool may = t && !tfs_topic_deleted(t) && tfs__kafka_may_read_topic(ctx, t);
		for (int32_t p = 0; p < ts[i].nparts; p++) {
			struct cpart *cp = &ts[i].parts[p];
			if (!t || tfs_topic_deleted(t) || cp->index < 0 ||
			    cp->index >= tfs_topic_partition_count(t))
				cp->err = E_UNKNOWN_TOPIC_OR_PARTITION;
			else if (!may)
				cp->err = E_TOPIC_AUTHORIZATION_FAILED;
			else if (cp->metadata.len > TFS_GROUP_METADATA_MAX)
				cp->err = KE_OFFSET_METADATA_TOO_LARGE;
			else if (cp->offset < 0)
				cp->err = E_UNKNOWN;
			else
				cs[ncs++] = (struct tfs_group_commit){
					.topic = ts[i].cname, .partition = cp->index, .offset = cp->offset,
					.leader_epoch = cp->leader_epoch, .metadata = cp->metadata };
		}
		tfs_topic_unref(t);
	}
	rc = ncs ? tfs_groups_commit(tfs_engine_groups(ctx->k->engine), group, generation, cs, ncs, -1)
	         : 0;
	err = rc < 0 ? commit_error(rc) : KE_NONE;
	if (rc < 0)
		tfs_log_warn("kafka", "OffsetCommit of group \"%.64s\": %s (error %d)", group,
		             tfs_strerror(rc), (int)err);
	for (int32_t i = 0; rc < 0 && i < nt; i++)
		for (int32_t p = 0; p < ts[i].nparts; p++)
			if (ts[i].parts[p].err == KE_NONE)
				ts[i].parts[p].err = err;
	free(cs);
}

static enum tfs_kafka_verdict offset_commit(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version, gerr;
	struct tfs_kreq rq = kreq(ctx);
	struct ctopic *ts = NULL;
	char *group, *member;
	int32_t generation, nt, store_gen = -1;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;

	group = cstr(kr_str(r, NULL));
	generation = kr_i32(r);
	member = cstr(kr_str(r, NULL));
	if (v >= 7)
		(void)kr_str(r, &(bool){ false });          /* group instance id */
	if (v <= 4)
		(void)kr_i64(r);                /* retention: the broker's, as Kafka 2.1+ */
	nt = kr_array(r, 6);
	if (nt > 0 && !(ts = calloc((size_t)nt, sizeof(*ts))))
		r->bad = true;
	for (int32_t i = 0; i < nt && !r->bad; i++) {
		ts[i].name = kr_str(r, NULL);
		ts[i].cname = cstr(ts[i].name);
		ts[i].nparts = kr_array(r, 14);
		if (ts[i].nparts > 0 && !(ts[i].parts = calloc((size_t)ts[i].nparts, sizeof(*ts[i].parts))))
			r->bad = true;
		for (int32_t p = 0; p < ts[i].nparts && !r->bad; p++) {
			struct cpart *cp = &ts[i].parts[p];
			bool null = false;
			cp->index = kr_i32(r);
			cp->offset = kr_i64(r);
			cp->leader_epoch = v >= 6 ? kr_i32(r) : -1;
			cp->metadata = kr_str(r, &null);
		}
		if (ts[i].nparts < 0)
			r->bad = true;
	}
	if (r->bad || kr_left(r) || !group || !member || nt < 0) {
		verdict = KAFKA_CLOSE;
		goto out;
	}
	gerr = tfs_kgroups_commit_check(ctx->k->groups, &rq, group, generation, member, &store_gen);
	if (!group[0] || tfs_groups_partition_for(group, 1, &(int32_t){ 0 }) < 0)
		gerr = KE_INVALID_GROUP_ID;
	if (gerr) {
		for (int32_t i = 0; i < nt; i++)
			for (int32_t p = 0; p < ts[i].nparts; p++)
				ts[i].parts[p].err = gerr;
	} else {
		commit_all(ctx, group, store_gen, ts, nt);
	}
	tfs__kafka_begin(w, ctx, false);
	if (v >= 3)
		kw_i32(w, 0);
	kw_array(w, nt);
	for (int32_t i = 0; i < nt; i++) {
		kw_str(w, ts[i].name.p, ts[i].name.len);
		kw_array(w, ts[i].nparts);
		for (int32_t p = 0; p < ts[i].nparts; p++) {
			kw_i32(w, ts[i].parts[p].index);
			kw_i16(w, ts[i].parts[p].err);
		}
	}
	tfs__kafka_finish(w);
out:
	for (int32_t i = 0; ts && i < nt; i++) {
		free(ts[i].parts);
		free(ts[i].cname);
	}
	free(ts);
	free(group);
	free(member);
	return verdict;
}

/* ---- OffsetFetch (9) ---- */

static void fetch_part(struct kw *w, int16_t v, struct tfs_groups *store, const char *group,
                       const char *topic, int32_t index, int16_t err)
{
	struct tfs_group_offset o;
	bool have = !err && topic && tfs_groups_fetch(store, group, topic, index, &o) == 0;

	kw_i32(w, index);
	kw_i64(w, have ? o.offset : -1);
	if (v >= 5)
		kw_i32(w, have ? o.leader_epoch : -1);
	if (have)
		kw_str(w, o.metadata, o.metadata_len);
	else
		kw_cstr(w, "");
	kw_i16(w, err);
	if (have)
		tfs_group_offset_release(&o);
}

/* Every stored offset of group, by topic, leaving out topics the peer may not read. */
static void fetch_all(struct tfs_kafka_ctx *ctx, struct kw *w, const char *group)
{
	struct tfs_groups *store = tfs_engine_groups(ctx->k->engine);
	struct tfs_group_offset *v = NULL;
	size_t n = 0, at_topics, ntopics = 0;

	if (tfs_groups_offsets(store, group, &v, &n) < 0)
		n = 0;
	at_topics = kw_mark(w);
	kw_array(w, 0);                          /* patched below */
	for (size_t i = 0; i < n;) {
		size_t end = i, at_parts;
		struct tfs_topic *t = tfs_engine_topic_get(ctx->k->engine, v[i].topic);
		bool may = t && !tfs_topic_deleted(t) && tfs__kafka_may_read_topic(ctx, t);
		tfs_topic_unref(t);
		while (end < n && !strcmp(v[end].topic, v[i].topic))
			end++;
		if (may) {
			ntopics++;
			kw_cstr(w, v[i].topic);
			at_parts = kw_mark(w);
			kw_array(w, (int32_t)(end - i));
			(void)at_parts;
			for (size_t k = i; k < end; k++) {
				kw_i32(w, v[k].partition);
				kw_i64(w, v[k].offset);
				if (ctx->api_version >= 5)
					kw_i32(w, v[k].leader_epoch);
				kw_str(w, v[k].metadata, v[k].metadata_len);
				kw_i16(w, KE_NONE);
			}
		}
		i = end;
	}
	kw_patch_i32(w, at_topics, (int32_t)ntopics);
	tfs_group_offsets_free(v, n);
}

static enum tfs_kafka_verdict offset_fetch(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	struct tfs_groups *store = tfs_engine_groups(ctx->k->engine);
	struct ftopic {
		struct tfs_slice name;
		char *cname;
		size_t at;                      /* where its partitions start in the request */
		int32_t nparts;
	} *ts = NULL;
	struct kr parts;
	char *group;
	int32_t nt;
	enum tfs_kafka_verdict verdict = KAFKA_REPLY;

	group = cstr(kr_str(r, NULL));
	nt = kr_array(r, 6);
	if (nt > 0 && !(ts = calloc((size_t)nt, sizeof(*ts))))
		r->bad = true;
	for (int32_t i = 0; i < nt && !r->bad; i++) {
		ts[i].name = kr_str(r, NULL);
		ts[i].cname = cstr(ts[i].name);
		ts[i].nparts = kr_array(r, 4);
		ts[i].at = r->pos;
		if (ts[i].nparts < 0)
			r->bad = true;
		for (int32_t p = 0; p < ts[i].nparts && !r->bad; p++)
			(void)kr_i32(r);
	}
	if (r->bad || kr_left(r) || !group || (nt < 0 && v < 2)) {
		verdict = KAFKA_CLOSE;
		goto out;
	}
	tfs__kafka_begin(w, ctx, false);
	if (v >= 3)
		kw_i32(w, 0);
	if (nt < 0) {
		fetch_all(ctx, w, group);
	} else {
		kw_array(w, nt);
		for (int32_t i = 0; i < nt; i++) {
			struct tfs_topic *t = ts[i].cname ? tfs_engine_topic_get(ctx->k->engine, ts[i].cname)
			                                  : NULL;
			int16_t err = KE_NONE;
			if (t && !tfs_topic_deleted(t) && !tfs__kafka_may_read_topic(ctx, t))
				err = E_TOPIC_AUTHORIZATION_FAILED;
			tfs_topic_unref(t);
			kw_str(w, ts[i].name.p, ts[i].name.len);
			kw_array(w, ts[i].nparts);
			kr_init(&parts, r->p + ts[i].at, r->len - ts[i].at, false);
			for (int32_t p = 0; p < ts[i].nparts; p++)
				fetch_part(w, v, store, group, ts[i].cname, kr_i32(&parts), err);
		}
	}
	if (v >= 2)
		kw_i16(w, KE_NONE);
	tfs__kafka_finish(w);
out:
	for (int32_t i = 0; ts && i < nt; i++)
		free(ts[i].cname);
	free(ts);
	free(group);
	return verdict;
}

/* ---- ListGroups (16), DescribeGroups (15), DeleteGroups (42) ---- */

static enum tfs_kafka_verdict list_groups(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	char **names = NULL;
	size_t n = 0;
	int16_t err = KE_NONE;

	if (r->bad || kr_left(r))
		return KAFKA_CLOSE;
	if (tfs_groups_list(tfs_engine_groups(ctx->k->engine), &names, &n) < 0)
		err = KE_COORDINATOR_NOT_AVAILABLE;
	tfs__kafka_begin(w, ctx, false);
	if (ctx->api_version >= 1)
		kw_i32(w, 0);
	kw_i16(w, err);
	kw_array(w, (int32_t)n);
	for (size_t i = 0; i < n; i++) {
		char *type = tfs_kgroups_protocol_type(ctx->k->groups, names[i]);
		kw_cstr(w, names[i]);
		kw_cstr(w, type ? type : "");
		free(type);
	}
	tfs__kafka_finish(w);
	free(names);
	return KAFKA_REPLY;
}

static enum tfs_kafka_verdict describe_groups(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	int16_t v = ctx->api_version;
	struct tfs_slice *ids = NULL;
	int32_t n = kr_array(r, 2);

	if (n > 0 && !(ids = calloc((size_t)n, sizeof(*ids))))
		r->bad = true;
	for (int32_t i = 0; i < n && !r->bad; i++)
		ids[i] = kr_str(r, NULL);
	if (v >= 3)
		(void)kr_i8(r);                 /* include authorized operations */
	if (r->bad || kr_left(r) || n < 0) {
		free(ids);
		return KAFKA_CLOSE;
	}
	tfs__kafka_begin(w, ctx, false);
	if (v >= 1)
		kw_i32(w, 0);
	kw_array(w, n);
	for (int32_t i = 0; i < n; i++) {
		struct tfs_kdescribe d = { 0 };
		char *id = cstr(ids[i]);
		int16_t err = id ? tfs_kgroups_describe(ctx->k->groups, id, &d) : KE_INVALID_GROUP_ID;
		kw_i16(w, err);
		kw_str(w, ids[i].p, ids[i].len);
		kw_cstr(w, err ? "Dead" : d.state);
		kw_cstr(w, err ? "" : d.protocol_type);
		kw_cstr(w, err ? "" : d.protocol);
		kw_array(w, err ? 0 : (int32_t)d.nmembers);
		for (size_t k = 0; !err && k < d.nmembers; k++) {
			const struct tfs_kdescribe_member *m = &d.members[k];
			kw_cstr(w, m->member_id);
			if (v >= 4)
				kw_nstr(w, m->instance_id);
			kw_cstr(w, m->client_id);
			kw_cstr(w, m->client_host);
			kw_bytes(w, m->metadata, m->metadata_len);
			kw_bytes(w, m->assignment, m->assignment_len);
		}
		if (v >= 3)
			kw_i32(w, AUTHORIZED_OPS_NONE);
		tfs_kdescribe_release(&d);
		free(id);
	}
	tfs__kafka_finish(w);
	free(ids);
	return KAFKA_REPLY;
}

/* The mount's rule for `rmdir .groups/GROUP`: deleting a group's offsets takes
 * write permission on every existing topic it has offsets of (docs/kafka.md).
 * The store asks it under the lock commits to the group take. */
static bool may_delete_offsets_of(const char *topic, void *arg)
{
	struct tfs_kafka_ctx *ctx = arg;
	struct tfs_topic *t = tfs_engine_topic_get(ctx->k->engine, topic);
	bool may = !t || tfs_topic_deleted(t) || tfs__kafka_may_topic(ctx, t, 2);

	tfs_topic_unref(t);
	return may;
}

static enum tfs_kafka_verdict delete_groups(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w)
{
	struct tfs_slice *ids = NULL;
	int32_t n = kr_array(r, 2);

	if (n > 0 && !(ids = calloc((size_t)n, sizeof(*ids))))
		r->bad = true;
	for (int32_t i = 0; i < n && !r->bad; i++)
		ids[i] = kr_str(r, NULL);
	if (r->bad || kr_left(r) || n < 0) {
		free(ids);
		return KAFKA_CLOSE;
	}
	tfs__kafka_begin(w, ctx, false);
	kw_i32(w, 0);
	kw_array(w, n);
	for (int32_t i = 0; i < n; i++) {
		char *id = cstr(ids[i]);
		int16_t err = KE_INVALID_GROUP_ID;
		if (id && id[0])
			err = tfs_kgroups_delete(ctx->k->groups, id, may_delete_offsets_of, ctx);
		if (err == KE_GROUP_AUTHORIZATION_FAILED)
			tfs_log_warn("kafka", "refusing to delete group \"%.64s\": no write permission "
			             "on a topic it has offsets of", id);
		if (err == KE_NONE)
			tfs_log_info("kafka", "deleted group \"%.64s\"", id);
		kw_str(w, ids[i].p, ids[i].len);
		kw_i16(w, err);
		free(id);
	}
	tfs__kafka_finish(w);
	free(ids);
	return KAFKA_REPLY;
}

enum tfs_kafka_verdict tfs__kafka_groups_handle(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                struct kw *w)
{
	switch (ctx->api_key) {
	case TFS_KAFKA_API_FIND_COORDINATOR:
		return find_coordinator(ctx, r, w);
	case TFS_KAFKA_API_JOIN_GROUP:
		return join_group(ctx, r, w);
	case TFS_KAFKA_API_SYNC_GROUP:
		return sync_group(ctx, r, w);
	case TFS_KAFKA_API_HEARTBEAT:
		return heartbeat(ctx, r, w);
	case TFS_KAFKA_API_LEAVE_GROUP:
		return leave_group(ctx, r, w);
	case TFS_KAFKA_API_OFFSET_COMMIT:
		return offset_commit(ctx, r, w);
	case TFS_KAFKA_API_OFFSET_FETCH:
		return offset_fetch(ctx, r, w);
	case TFS_KAFKA_API_LIST_GROUPS:
		return list_groups(ctx, r, w);
	case TFS_KAFKA_API_DESCRIBE_GROUPS:
		return describe_groups(ctx, r, w);
	case TFS_KAFKA_API_DELETE_GROUPS:
		return delete_groups(ctx, r, w);
	default:
		return KAFKA_CLOSE;
	}
}
