/* groups.c - consumer groups' committed offsets over __consumer_offsets (see
 * groups.h for the contract and groups_codec.h for the bytes).
 *
 * The map is a sorted array of groups, each with a sorted array of offsets:
 * lookups are binary searches, and a listing is already in order. Every change
 * runs under the lock of the group's __consumer_offsets partition, from the
 * check (members, generation) through the durable append to the change of the
 * map, so the map changes in the order the log does (groups.h invariant 1). The
 * map lock itself is short and never held across I/O, so the coordinator's
 * set_state and every read never wait for a disk.
 */
#include "engine/groups/groups.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/groups/groups_codec.h"
#include "engine/log/partition_log.h"
#include "io/log.h"

#define TOPIC_MODE 0750                   /* the daemon's own; positions are not for all */
#define COMMIT_MAX 100000                 /* offsets in one commit: far above any client's */
/* Per-record bytes a batch adds beyond key and value (length varints, attributes,
 * deltas, header count), taken generously when splitting tombstones into batches. */
#define RECORD_OVERHEAD_BYTES 32
#define BATCH_OVERHEAD_BYTES 61           /* a RecordBatch v2 header */

struct goff {
	char *topic;
	int32_t partition;
	tfs_offset_t offset;
	int32_t leader_epoch;
	uint8_t *meta;
	size_t meta_len;
	int64_t commit_ms;
	int64_t expire_ms;
};

struct group {
	char *id;
	int32_t part;                     /* its __consumer_offsets partition */
	enum tfs_group_state state;
	int32_t members;
	int32_t generation;
	int64_t state_ms;
	char *protocol_type;              /* NULL: no group record (a simple group) */
	struct goff *offs;                /* sorted by topic, partition */
	size_t noffs, capoffs;
};

struct tfs_groups {
	struct tfs_engine *e;
	struct tfs_groups_config cfg;
	bool read_only;
	int32_t nparts;
	pthread_mutex_t *plocks;          /* one per partition: check -> append -> apply */

	pthread_mutex_t topic_lock;       /* creating the topic */
	struct tfs_topic *topic;          /* a reference; NULL until it exists */

	pthread_mutex_t lock;             /* the map below */
	struct group **v;                 /* sorted by id */
	size_t n, cap;
};

void tfs_groups_config_defaults(struct tfs_groups_config *c)
{
	c->partitions = TFS_GROUPS_PARTITIONS_DEFAULT;
	c->retention_ms = TFS_GROUPS_RETENTION_MS_DEFAULT;
	c->check_interval_ms = TFS_GROUPS_CHECK_MS_DEFAULT;
}

const char *tfs_group_state_name(enum tfs_group_state s)
{
	switch (s) {
	case TFS_GROUP_EMPTY: return "Empty";
	case TFS_GROUP_PREPARING_REBALANCE: return "PreparingRebalance";
	case TFS_GROUP_COMPLETING_REBALANCE: return "CompletingRebalance";
	case TFS_GROUP_STABLE: return "Stable";
	case TFS_GROUP_DEAD: return "Dead";
	}
	return "Unknown";
}

static struct tfs_slice sl(const char *s)
{
	return tfs_slice_make(s, strlen(s));
}

int tfs_groups_partition_for(const char *group, int32_t partitions, int32_t *partition)
{
	int32_t h;
	size_t len = strlen(group);

	if (partitions < 1 || len == 0 || len > TFS_GSTRING_MAX ||
	    tfs_gcodec_java_hash(sl(group), &h) < 0)
		return -EINVAL;
	/* Kafka's Utils.abs: INT32_MIN maps to 0, not to itself */
	*partition = (h == INT32_MIN ? 0 : (h < 0 ? -h : h)) % partitions;
	return 0;
}

/* As tfs_groups_partition_of, logging the refusal. */
static int place(struct tfs_groups *g, const char *group, int32_t *part)
{
	int rc = tfs_groups_partition_for(group, g->nparts, part);

	if (rc < 0)
		tfs_log_warn("groups", "refusing group id \"%.64s\": 1 to %d bytes of UTF-8", group,
		             TFS_GSTRING_MAX);
	return rc;
}

int tfs_groups_partition_of(struct tfs_groups *g, const char *group, int32_t *partition)
{
	return tfs_groups_partition_for(group, g->nparts, partition);
}

/* ---- the map (under g->lock) ---- */

static int group_cmp(const void *id, const void *elem)
{
	return strcmp(id, (*(struct group *const *)elem)->id);
}

static size_t group_pos(const struct tfs_groups *g, const char *id, bool *found)
{
	return tfs_sorted_pos(g->v, g->n, sizeof(g->v[0]), id, group_cmp, found);
}

static struct group *group_find(const struct tfs_groups *g, const char *id)
{
	bool found;
	size_t at = group_pos(g, id, &found);
	return found ? g->v[at] : NULL;
}

static struct group *group_add(struct tfs_groups *g, const char *id, int32_t part)
{
	bool found;
	size_t at = group_pos(g, id, &found);
	struct group *gr;

	if (found)
		return g->v[at];
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct group **v = realloc(g->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		g->v = v;
		g->cap = cap;
	}
	gr = calloc(1, sizeof(*gr));
	if (!gr || !(gr->id = strdup(id))) {
		free(gr);
		return NULL;
	}
	gr->part = part;
	gr->state = TFS_GROUP_EMPTY;
	gr->state_ms = -1;
	memmove(&g->v[at + 1], &g->v[at], (g->n - at) * sizeof(*g->v));
	g->v[at] = gr;
	g->n++;
	return gr;
}

static void goff_release(struct goff *o)
{
	free(o->topic);
	free(o->meta);
}

static void group_free(struct group *gr)
{
	for (size_t i = 0; i < gr->noffs; i++)
		goff_release(&gr->offs[i]);
	free(gr->offs);
	free(gr->protocol_type);
	free(gr->id);
	free(gr);
}

/* Forgets gr if nothing keeps it known (invariant 2). */
static void group_forget_if_idle(struct tfs_groups *g, struct group *gr)
{
	bool found;
	size_t at;

	if (gr->noffs || gr->protocol_type || gr->members > 0)
		return;
	at = group_pos(g, gr->id, &found);
	if (!found || g->v[at] != gr)
		return;
	memmove(&g->v[at], &g->v[at + 1], (g->n - at - 1) * sizeof(*g->v));
	g->n--;
	group_free(gr);
}

static int off_cmp(const struct goff *o, struct tfs_slice topic, int32_t partition)
{
	size_t tl = strlen(o->topic);
	size_t m = tl < topic.len ? tl : topic.len;
	int c = m ? memcmp(o->topic, topic.p, m) : 0;

	if (c)
		return c;
	if (tl != topic.len)
		return tl < topic.len ? -1 : 1;
	return o->partition < partition ? -1 : (o->partition > partition ? 1 : 0);
}

struct off_key {
	struct tfs_slice topic;
	int32_t partition;
};

static int off_key_cmp(const void *key, const void *elem)
{
	const struct off_key *k = key;

	return -off_cmp(elem, k->topic, k->partition);
}

static size_t off_pos(const struct group *gr, struct tfs_slice topic, int32_t partition, bool *found)
{
	struct off_key k = { topic, partition };

	return tfs_sorted_pos(gr->offs, gr->noffs, sizeof(gr->offs[0]), &k, off_key_cmp, found);
}

static uint8_t *dup_bytes(struct tfs_slice s)
{
	uint8_t *p;

	if (s.len == 0)
		return NULL;
	p = malloc(s.len);
	if (p)
		memcpy(p, s.p, s.len);
	return p;
}

static int off_put(struct group *gr, struct tfs_slice topic, int32_t partition,
                   const struct tfs_goffset_value *v)
{
	bool found;
	size_t at = off_pos(gr, topic, partition, &found);
	struct goff o = { 0 };

	o.topic = malloc(topic.len + 1);
	o.meta = dup_bytes(v->metadata);
	if (!o.topic || (v->metadata.len && !o.meta)) {
		goff_release(&o);
		return -ENOMEM;
	}
	memcpy(o.topic, topic.p, topic.len);
	o.topic[topic.len] = '\0';
	o.partition = partition;
	o.offset = v->offset;
	o.leader_epoch = v->leader_epoch;
	o.meta_len = v->metadata.len;
	o.commit_ms = v->commit_ms;
	o.expire_ms = v->expire_ms;
	if (found) {
		goff_release(&gr->offs[at]);
		gr->offs[at] = o;
		return 0;
	}
	if (gr->noffs == gr->capoffs) {
		size_t cap = gr->capoffs ? gr->capoffs * 2 : 8;
		struct goff *v2 = realloc(gr->offs, cap * sizeof(*v2));
		if (!v2) {
			goff_release(&o);
			return -ENOMEM;
		}
		gr->offs = v2;
		gr->capoffs = cap;
	}
	memmove(&gr->offs[at + 1], &gr->offs[at], (gr->noffs - at) * sizeof(*gr->offs));
	gr->offs[at] = o;
	gr->noffs++;
	return 0;
}

static void off_drop(struct group *gr, struct tfs_slice topic, int32_t partition)
{
	bool found;
	size_t at = off_pos(gr, topic, partition, &found);

	if (!found)
		return;
	goff_release(&gr->offs[at]);
	memmove(&gr->offs[at], &gr->offs[at + 1], (gr->noffs - at - 1) * sizeof(*gr->offs));
	gr->noffs--;
}

static int set_protocol_type(struct group *gr, struct tfs_slice type)
{
	char *p = malloc(type.len + 1);

	if (!p)
		return -ENOMEM;
	if (type.len)
		memcpy(p, type.p, type.len);
	p[type.len] = '\0';
	free(gr->protocol_type);
	gr->protocol_type = p;
	return 0;
}

/* ---- the topic ---- */

/* The partition log of part, creating __consumer_offsets on the first write. */
static int partition_log(struct tfs_groups *g, int32_t part, struct tfs_plog **pl)
{
	struct tfs_topic_config c;
	int rc = 0;

	if (g->read_only)
		return TFS_EREADONLY;
	pthread_mutex_lock(&g->topic_lock);
	if (!g->topic) {
		/* Kafka's offsetsTopicConfigs: compacted, 100 MiB segments, the client's
		 * compression kept (none here) */
		tfs_topic_config_defaults(&c);
		c.cleanup_policy = TFS_POLICY_COMPACT;
		c.segment_bytes = TFS_GROUPS_SEGMENT_BYTES;
		rc = tfs_engine_internal_topic_create(g->e, TFS_GROUPS_TOPIC, g->nparts, geteuid(),
		                                      getegid(), TOPIC_MODE, &c);
		if (rc == 0 || rc == -EEXIST)
			g->topic = tfs_engine_topic_get(g->e, TFS_GROUPS_TOPIC);
		rc = g->topic ? 0 : (rc < 0 ? rc : -ENOENT);
	}
	pthread_mutex_unlock(&g->topic_lock);
	if (rc < 0) {
		tfs_log_error("groups", "cannot create %s: %s", TFS_GROUPS_TOPIC, tfs_strerror(rc));
		return rc;
	}
	*pl = tfs_topic_partition(g->topic, part);
	if (!*pl) {
		tfs_log_error("groups", "%s has no partition %" PRId32 " (it has %" PRId32 ")",
		              TFS_GROUPS_TOPIC, part, tfs_topic_partition_count(g->topic));
		return -EIO;
	}
	return 0;
}

struct recs {
	struct tfs_append_rec *v;
	size_t n;
};

static void recs_free(struct recs *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free((void *)r->v[i].key.p);
		free((void *)r->v[i].value.p);
	}
	free(r->v);
	r->v = NULL;
	r->n = 0;
}

/* Appends r as one batch, durable, to part. */
static int append(struct tfs_groups *g, int32_t part, const struct recs *r, const char *group,
                  const char *what)
{
	struct tfs_plog *pl;
	int rc = partition_log(g, part, &pl);

	if (rc == 0)
		rc = tfs__plog_append_internal(pl, r->v, r->n, true, NULL, NULL);
	if (rc < 0)
		tfs_log_error("groups", "cannot %s of group \"%.64s\" to %s-%" PRId32 ": %s", what,
		              group, TFS_GROUPS_TOPIC, part, tfs_strerror(rc));
	return rc;
}

/* ---- rebuilding ---- */

struct load_stats {
	size_t bad, unknown, forgotten;
};

static void load_record(struct tfs_groups *g, int32_t part, const struct tfs_record *r,
                        struct load_stats *st)
{
	struct tfs_gkey k;
	struct group *gr;
	char *id = NULL;
	int rc;

	if (r->key_null) {
		st->bad++;
		return;
	}
	rc = tfs_gcodec_key_decode(r->key, &k);
	if (rc == TFS_EUNSUPPORTED) {     /* newer record types (KIP-848 groups) */
		st->unknown++;
		return;
	}
	if (rc < 0 || k.group.len == 0 || memchr(k.group.p, '\0', k.group.len)) {
		st->bad++;
		return;
	}
	id = malloc(k.group.len + 1);
	if (!id) {
		st->bad++;
		return;
	}
	memcpy(id, k.group.p, k.group.len);
	id[k.group.len] = '\0';
	gr = group_find(g, id);
	if (r->value_null) {              /* a tombstone */
		if (gr && k.version == TFS_GKEY_GROUP) {
			free(gr->protocol_type);
			gr->protocol_type = NULL;
		} else if (gr) {
			off_drop(gr, k.topic, k.partition);
		}
		if (gr)
			group_forget_if_idle(g, gr);
		free(id);
		return;
	}
	if (!gr)
		gr = group_add(g, id, part);
	if (!gr) {
		st->bad++;
	} else if (k.version == TFS_GKEY_GROUP) {
		struct tfs_ggroup_value v;
		if (tfs_gcodec_group_value_decode(r->value, &v) < 0 ||
		    set_protocol_type(gr, v.protocol_type) < 0) {
			st->bad++;
		} else {
			gr->generation = v.generation;
			/* its members went with the process that had them (invariant 4):
			 * Empty since now if it had any, else since its record says */
			gr->state_ms = v.member_count > 0 || v.state_ms < 0 ? tfs_now_ms() : v.state_ms;
		}
	} else {
		struct tfs_goffset_value v;
		if (memchr(k.topic.p, '\0', k.topic.len) ||
		    tfs_gcodec_offset_value_decode(r->value, &v) < 0 || off_put(gr, k.topic, k.partition, &v) < 0)
			st->bad++;
	}
	if (gr)
		group_forget_if_idle(g, gr);
	free(id);
}

/* Forgets every offset of part's groups read so far: a newer commit of any of
 * them, or its deletion, may be in the damage the load just met, and an older
 * offset must not pass for the committed one. Commits after the damage are read
 * on and known again. */
static void forget_offsets(struct tfs_groups *g, int32_t part, struct load_stats *st)
{
	for (size_t i = g->n; i-- > 0;) {
		struct group *gr = g->v[i];
		if (gr->part != part)
			continue;
		for (size_t k = 0; k < gr->noffs; k++)
			goff_release(&gr->offs[k]);
		st->forgotten += gr->noffs;
		gr->noffs = 0;
		group_forget_if_idle(g, gr);
	}
}

static int load_partition(struct tfs_groups *g, struct tfs_plog *pl, int32_t part)
{
	struct tfs_plog_cursor *c = NULL;
	struct load_stats st = { 0, 0, 0 };
	struct tfs_batch_header bh;
	struct tfs_record r;
	/* the cursor reports each unreadable region once and reads on after it */
	size_t regions = tfs_plog_damage(pl, NULL, 0), met = 0;
	int rc = tfs_plog_cursor_open(pl, 0, &c);

	while (rc >= 0 && (rc = tfs_plog_cursor_next(c, &r, &bh)) != 0) {
		if (rc == TFS_ECORRUPT && met < regions) {
			met++;
			forget_offsets(g, part, &st);
			continue;
		}
		if (rc < 0)
			break;
		if (bh.attributes & TFS_ATTR_CONTROL)   /* transaction markers */
			continue;
		load_record(g, part, &r, &st);
	}
	tfs_plog_cursor_close(c);
	if (met)
		tfs_log_warn("groups", "%s-%" PRId32 ": %zu damaged regions: forgot %zu committed "
		             "offsets read before them, whose newer commits may be lost in them",
		             TFS_GROUPS_TOPIC, part, met, st.forgotten);
	if (st.bad)
		tfs_log_warn("groups", "%s-%" PRId32 ": skipped %zu records that are not offset commits "
		             "or group records", TFS_GROUPS_TOPIC, part, st.bad);
	if (st.unknown)
		tfs_log_info("groups", "%s-%" PRId32 ": skipped %zu records of newer group types",
		             TFS_GROUPS_TOPIC, part, st.unknown);
	if (rc < 0)
		tfs_log_error("groups", "cannot read %s-%" PRId32 " to its end: %s; its groups keep "
		              "what was read before", TFS_GROUPS_TOPIC, part, tfs_strerror(rc));
	return rc;
}

int tfs_groups_open(struct tfs_engine *e, const struct tfs_groups_config *cfg,
                    struct tfs_groups **out)
{
	struct tfs_groups *g;
	int32_t loaded = 0;

	*out = NULL;
	if (cfg->partitions < 1 || cfg->retention_ms < 1 || cfg->check_interval_ms < 1) {
		tfs_log_error("groups", "offsets.topic.num.partitions, offsets.retention.minutes and "
		              "the check interval must be at least 1");
		return -EINVAL;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->e = e;
	g->cfg = *cfg;
	g->read_only = tfs_engine_read_only(e);
	pthread_mutex_init(&g->topic_lock, NULL);
	pthread_mutex_init(&g->lock, NULL);
	g->topic = tfs_engine_topic_get(e, TFS_GROUPS_TOPIC);
	/* a broker's directory: the partition count found there places the groups */
	g->nparts = g->topic ? tfs_topic_partition_count(g->topic) : cfg->partitions;
	if (g->nparts < 1)
		g->nparts = cfg->partitions;
	g->plocks = calloc((size_t)g->nparts, sizeof(*g->plocks));
	if (!g->plocks) {
		tfs_groups_close(g);
		return -ENOMEM;
	}
	for (int32_t p = 0; p < g->nparts; p++)
		pthread_mutex_init(&g->plocks[p], NULL);
	for (int32_t p = 0; g->topic && p < tfs_topic_partition_count(g->topic); p++) {
		struct tfs_plog *pl = tfs_topic_partition(g->topic, p);
		if (pl && load_partition(g, pl, p) >= 0)
			loaded++;
	}
	if (g->topic)
		tfs_log_info("groups", "loaded %zu consumer groups from %" PRId32 " of %" PRId32
		             " partitions of %s", g->n, loaded, g->nparts, TFS_GROUPS_TOPIC);
	*out = g;
	return 0;
}

void tfs_groups_close(struct tfs_groups *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		group_free(g->v[i]);
	free(g->v);
	if (g->plocks)
		for (int32_t p = 0; p < g->nparts; p++)
			pthread_mutex_destroy(&g->plocks[p]);
	free(g->plocks);
	tfs_topic_unref(g->topic);
	pthread_mutex_destroy(&g->topic_lock);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* ---- commits ---- */

static int check_commit(struct tfs_groups *g, const char *group, const struct tfs_group_commit *o)
{
	struct tfs_topic *t;
	int rc = 0;

	if (!o->topic || !tfs_topic_name_valid(o->topic) || o->partition < 0 || o->offset < 0) {
		tfs_log_warn("groups", "refusing a commit of group \"%.64s\": topic \"%.64s\" "
		             "partition %" PRId32 " offset %" PRId64, group, o->topic ? o->topic : "",
		             o->partition, o->offset);
		return -EINVAL;
	}
	if (o->metadata.len > TFS_GROUP_METADATA_MAX) {
		tfs_log_warn("groups", "refusing a commit of group \"%.64s\": %zu bytes of metadata "
		             "(offset.metadata.max.bytes is %d)", group, o->metadata.len,
		             TFS_GROUP_METADATA_MAX);
		return -EMSGSIZE;
	}
	t = tfs_engine_topic_get(g->e, o->topic);
	if (!t || tfs_topic_deleted(t) || o->partition >= tfs_topic_partition_count(t))
		rc = -ENOENT;
	tfs_topic_unref(t);
	return rc;
}

/* Whether a commit of generation may go to gr now (invariant 3). Under g->lock. */
static int may_commit(const struct group *gr, int32_t generation)
{
	int32_t members = gr ? gr->members : 0;

	if (generation < 0)
		return members > 0 ? TFS_EGROUPBUSY : 0;
	if (members == 0 || gr->generation != generation)
		return TFS_EGENERATION;
	return 0;
}

int tfs_groups_commit(struct tfs_groups *g, const char *group, int32_t generation,
                      const struct tfs_group_commit *offsets, size_t count, int64_t commit_ms)
{
	struct recs r = { NULL, 0 };
	struct group *gr;
	int32_t part;
	int rc;

	if ((rc = place(g, group, &part)) < 0)
		return rc;
	if (count == 0 || count > COMMIT_MAX)
		return -EINVAL;
	if (g->read_only)
		return TFS_EREADONLY;
	for (size_t i = 0; i < count; i++)
		if ((rc = check_commit(g, group, &offsets[i])) < 0)
			return rc;
	if (commit_ms < 0)
		commit_ms = tfs_now_ms();
	r.v = calloc(count, sizeof(*r.v));
	if (!r.v)
		return -ENOMEM;
	for (size_t i = 0; i < count && rc == 0; i++) {
		const struct tfs_group_commit *o = &offsets[i];
		uint8_t *k = NULL, *v = NULL;
		size_t kl = 0, vl = 0;
		rc = tfs_gcodec_offset_key(sl(group), sl(o->topic), o->partition, &k, &kl);
		if (rc == 0)
			rc = tfs_gcodec_offset_value(o->offset, o->leader_epoch, o->metadata, commit_ms, &v, &vl);
		r.v[r.n++] = (struct tfs_append_rec){ .key = tfs_slice_make(k, kl),
		                                      .value = tfs_slice_make(v, vl) };
	}
	if (rc < 0)
		goto out;

	pthread_mutex_lock(&g->plocks[part]);
	pthread_mutex_lock(&g->lock);
	rc = may_commit(group_find(g, group), generation);
	pthread_mutex_unlock(&g->lock);
	if (rc == TFS_EGROUPBUSY)
		tfs_log_warn("groups", "refusing a simple commit to group \"%.64s\": it has members",
		             group);
	if (rc == 0)
		rc = append(g, part, &r, group, "commit offsets");
	if (rc == 0) {
		pthread_mutex_lock(&g->lock);
		gr = group_add(g, group, part);
		for (size_t i = 0; gr && i < count && rc == 0; i++) {
			struct tfs_goffset_value v = {
				.version = TFS_GVALUE_OFFSET_WRITTEN, .offset = offsets[i].offset,
				.leader_epoch = offsets[i].leader_epoch, .metadata = offsets[i].metadata,
				.commit_ms = commit_ms, .expire_ms = -1,
			};
			rc = off_put(gr, sl(offsets[i].topic), offsets[i].partition, &v);
		}
		if (!gr)
			rc = -ENOMEM;
		pthread_mutex_unlock(&g->lock);
		if (rc < 0)   /* durable, but this process lost track: the next open has it */
			tfs_log_error("groups", "committed offsets of group \"%.64s\" but cannot keep "
			              "them in memory: %s", group, tfs_strerror(rc));
	}
	pthread_mutex_unlock(&g->plocks[part]);
out:
	recs_free(&r);
	return rc;
}

/* ---- reading ---- */

static int copy_off(const struct goff *o, struct tfs_group_offset *out)
{
	memset(out, 0, sizeof(*out));
	out->topic = strdup(o->topic);
	out->metadata = dup_bytes(tfs_slice_make(o->meta, o->meta_len));
	if (!out->topic || (o->meta_len && !out->metadata)) {
		tfs_group_offset_release(out);
		return -ENOMEM;
	}
	out->partition = o->partition;
	out->offset = o->offset;
	out->leader_epoch = o->leader_epoch;
	out->metadata_len = o->meta_len;
	out->commit_ms = o->commit_ms;
	out->expire_ms = o->expire_ms;
	return 0;
}

void tfs_group_offset_release(struct tfs_group_offset *o)
{
	free(o->topic);
	free(o->metadata);
	o->topic = NULL;
	o->metadata = NULL;
}

void tfs_group_offsets_free(struct tfs_group_offset *v, size_t count)
{
	for (size_t i = 0; v && i < count; i++)
		tfs_group_offset_release(&v[i]);
	free(v);
}

int tfs_groups_fetch(struct tfs_groups *g, const char *group, const char *topic, int32_t partition,
                     struct tfs_group_offset *out)
{
	const struct group *gr;
	bool found = false;
	size_t at = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&g->lock);
	gr = group_find(g, group);
	if (gr)
		at = off_pos(gr, sl(topic), partition, &found);
	rc = found ? copy_off(&gr->offs[at], out) : -ENOENT;
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int tfs_groups_offsets(struct tfs_groups *g, const char *group, struct tfs_group_offset **out,
                       size_t *count)
{
	const struct group *gr;
	struct tfs_group_offset *v = NULL;
	size_t n = 0;
	int rc = 0;

	*out = NULL;
	*count = 0;
	pthread_mutex_lock(&g->lock);
	gr = group_find(g, group);
	if (!gr) {
		rc = -ENOENT;
	} else if (gr->noffs) {
		v = calloc(gr->noffs, sizeof(*v));
		rc = v ? 0 : -ENOMEM;
		for (; rc == 0 && n < gr->noffs; n++)
			rc = copy_off(&gr->offs[n], &v[n]);
	}
	pthread_mutex_unlock(&g->lock);
	if (rc < 0) {
		tfs_group_offsets_free(v, n);
		return rc;
	}
	*out = v;
	*count = n;
	return 0;
}

int tfs_groups_list(struct tfs_groups *g, char ***names, size_t *count)
{
	size_t bytes = 0;
	char **v, *s;

	*names = NULL;
	*count = 0;
	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < g->n; i++)
		bytes += strlen(g->v[i]->id) + 1;
	v = malloc(g->n * sizeof(*v) + bytes + 1);
	if (!v) {
		pthread_mutex_unlock(&g->lock);
		return -ENOMEM;
	}
	s = (char *)(v + g->n);
	for (size_t i = 0; i < g->n; i++) {
		size_t l = strlen(g->v[i]->id) + 1;
		memcpy(s, g->v[i]->id, l);
		v[i] = s;
		s += l;
	}
	*count = g->n;
	pthread_mutex_unlock(&g->lock);
	*names = v;
	return 0;
}

int tfs_groups_info(struct tfs_groups *g, const char *group, struct tfs_group_info *out)
{
	const struct group *gr;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&g->lock);
	gr = group_find(g, group);
	if (!gr) {
		rc = -ENOENT;
	} else {
		out->state = gr->state;
		out->member_count = gr->members;
		out->generation = gr->generation;
		out->state_ms = gr->state_ms;
		out->offset_count = gr->noffs;
		if (gr->protocol_type && !(out->protocol_type = strdup(gr->protocol_type)))
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void tfs_group_info_release(struct tfs_group_info *i)
{
	free(i->protocol_type);
	i->protocol_type = NULL;
}

/* ---- deleting and expiring ---- */

/* Which of a group's keys a removal tombstones. */
struct doomed {
	struct tfs_group_offset *offs;    /* copies: the map may change between batches */
	size_t n;
	bool group_record;
};

/* Tombstones d's keys under the group's partition lock (held by the caller), in
 * batches under max.message.bytes, dropping each batch's keys from the map once
 * it is durable; then forgets the group if it is left with nothing. */
static int tombstone(struct tfs_groups *g, const char *group, int32_t part, const struct doomed *d,
                     const char *what)
{
	struct tfs_topic_config c;
	struct recs r = { NULL, 0 };
	size_t i = 0, budget;
	int rc = 0;

	{
		struct tfs_plog *pl;
		if ((rc = partition_log(g, part, &pl)) < 0)
			return rc;
	}
	tfs_topic_get_config(g->topic, &c);
	budget = c.max_message_bytes > BATCH_OVERHEAD_BYTES
	         ? (size_t)c.max_message_bytes - BATCH_OVERHEAD_BYTES : 0;
	r.v = calloc(d->n + 1, sizeof(*r.v));
	if (!r.v)
		return -ENOMEM;
	while (rc == 0 && (i < d->n || d->group_record)) {
		size_t first = i, used = 0;
		bool with_record = false;
		for (; rc == 0 && i < d->n; i++) {
			uint8_t *k = NULL;
			size_t kl = 0;
			rc = tfs_gcodec_offset_key(sl(group), sl(d->offs[i].topic), d->offs[i].partition,
			                           &k, &kl);
			if (rc == 0 && r.n > 0 && used + kl + RECORD_OVERHEAD_BYTES > budget) {
				free(k);
				break;
			}
			if (rc == 0) {
				used += kl + RECORD_OVERHEAD_BYTES;
				r.v[r.n++] = (struct tfs_append_rec){ .key = tfs_slice_make(k, kl),
				                                      .value_null = true };
			}
		}
		if (rc == 0 && i == d->n && d->group_record) {   /* last, once the offsets went */
			uint8_t *k = NULL;
			size_t kl = 0;
			rc = tfs_gcodec_group_key(sl(group), &k, &kl);
			if (rc == 0 && r.n > 0 && used + kl + RECORD_OVERHEAD_BYTES > budget) {
				free(k);
			} else if (rc == 0) {
				r.v[r.n++] = (struct tfs_append_rec){ .key = tfs_slice_make(k, kl),
				                                      .value_null = true };
				with_record = true;
			}
		}
		if (rc == 0)
			rc = append(g, part, &r, group, what);
		if (rc == 0) {
			struct group *gr;
			pthread_mutex_lock(&g->lock);
			gr = group_find(g, group);
			for (size_t j = first; gr && j < i; j++)
				off_drop(gr, sl(d->offs[j].topic), d->offs[j].partition);
			if (gr && with_record) {
				free(gr->protocol_type);
				gr->protocol_type = NULL;
			}
			if (gr)
				group_forget_if_idle(g, gr);
			pthread_mutex_unlock(&g->lock);
		}
		recs_free(&r);
		r.v = calloc(d->n + 1, sizeof(*r.v));
		if (!r.v && rc == 0)
			rc = -ENOMEM;
		if (with_record)
			break;
	}
	recs_free(&r);
	return rc;
}

/* Collects the keys of group to remove under g->lock: all (topic NULL), or one
 * partition's offset. TFS_EGROUPBUSY while it has members. */
static int collect(struct tfs_groups *g, const char *group, const char *topic, int32_t partition,
                   struct doomed *d)
{
	const struct group *gr;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	pthread_mutex_lock(&g->lock);
	gr = group_find(g, group);
	if (!gr) {
		rc = -ENOENT;
	} else if (gr->members > 0) {
		rc = TFS_EGROUPBUSY;
	} else if (topic) {
		bool found;
		size_t at = off_pos(gr, sl(topic), partition, &found);
		d->offs = found ? calloc(1, sizeof(*d->offs)) : NULL;
		rc = !found ? -ENOENT : !d->offs ? -ENOMEM : copy_off(&gr->offs[at], d->offs);
		d->n = rc == 0;
	} else {
		d->group_record = gr->protocol_type != NULL;
		d->offs = gr->noffs ? calloc(gr->noffs, sizeof(*d->offs)) : NULL;
		rc = gr->noffs && !d->offs ? -ENOMEM : 0;
		for (; rc == 0 && d->n < gr->noffs; d->n++)
			rc = copy_off(&gr->offs[d->n], &d->offs[d->n]);
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

static int remove_keys(struct tfs_groups *g, const char *group, const char *topic, int32_t partition,
                       bool (*may)(const char *topic, void *arg), void *arg)
{
	struct doomed d;
	int32_t part;
	int rc;

	if ((rc = place(g, group, &part)) < 0)
		return rc;
	if (g->read_only)
		return TFS_EREADONLY;
	pthread_mutex_lock(&g->plocks[part]);
	rc = collect(g, group, topic, partition, &d);
	for (size_t i = 0; rc == 0 && may && i < d.n; i++)
		if (!may(d.offs[i].topic, arg))
			rc = -EACCES;
	if (rc == TFS_EGROUPBUSY)
		tfs_log_warn("groups", "refusing to delete offsets of group \"%.64s\": it has members",
		             group);
	if (rc == 0 && (d.n || d.group_record))
		rc = tombstone(g, group, part, &d, "delete offsets");
	if (rc == 0 && !topic) {      /* a group known only by its members' count: gone too */
		struct group *gr;
		pthread_mutex_lock(&g->lock);
		if ((gr = group_find(g, group)))
			group_forget_if_idle(g, gr);
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&g->plocks[part]);
	tfs_group_offsets_free(d.offs, d.n);
	return rc;
}

int tfs_groups_delete(struct tfs_groups *g, const char *group)
{
	return remove_keys(g, group, NULL, 0, NULL, NULL);
}

int tfs_groups_delete_if(struct tfs_groups *g, const char *group,
                         bool (*may)(const char *topic, void *arg), void *arg)
{
	return remove_keys(g, group, NULL, 0, may, arg);
}

int tfs_groups_delete_offset(struct tfs_groups *g, const char *group, const char *topic,
                             int32_t partition)
{
	return remove_keys(g, group, topic, partition, NULL, NULL);
}

/* Kafka's removeExpiredOffsets for one offset of gr (groups.h, Expiry). Under
 * g->lock. */
static bool expired(const struct tfs_groups *g, const struct group *gr, const struct goff *o,
                    int64_t now_ms)
{
	int64_t base;

	if (gr->members > 0)
		return false;
	if (o->expire_ms >= 0)
		return now_ms >= o->expire_ms;
	if (gr->protocol_type && gr->state_ms >= 0)
		base = gr->state_ms;        /* Empty since then */
	else
		base = o->commit_ms;
	return now_ms - base >= g->cfg.retention_ms;
}

/* Collects gr's expired offsets, and its record once nothing would be left. */
static int collect_expired(struct tfs_groups *g, const char *group, int64_t now_ms,
                           struct doomed *d)
{
	const struct group *gr;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	pthread_mutex_lock(&g->lock);
	gr = group_find(g, group);
	if (gr && gr->members == 0) {
		d->offs = gr->noffs ? calloc(gr->noffs, sizeof(*d->offs)) : NULL;
		rc = gr->noffs && !d->offs ? -ENOMEM : 0;
		for (size_t i = 0; rc == 0 && i < gr->noffs; i++)
			if (expired(g, gr, &gr->offs[i], now_ms))
				rc = copy_off(&gr->offs[i], &d->offs[d->n++]);
		/* Kafka: an Empty group left without offsets is Dead, its record tombstoned */
		d->group_record = rc == 0 && d->n == gr->noffs && gr->protocol_type &&
		                  (d->n > 0 || (gr->state_ms >= 0 &&
		                                now_ms - gr->state_ms >= g->cfg.retention_ms));
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int tfs_groups_expire(struct tfs_groups *g, int64_t now_ms)
{
	char **names = NULL;
	size_t count = 0;
	int expired_count = 0, rc;

	if (!g || g->read_only)
		return 0;
	if ((rc = tfs_groups_list(g, &names, &count)) < 0)
		return rc;
	for (size_t i = 0; i < count && rc == 0; i++) {
		struct doomed d;
		int32_t part;
		if (place(g, names[i], &part) < 0)
			continue;
		pthread_mutex_lock(&g->plocks[part]);
		rc = collect_expired(g, names[i], now_ms, &d);
		if (rc == 0 && (d.n || d.group_record)) {
			rc = tombstone(g, names[i], part, &d, "expire offsets");
			if (rc == 0) {
				expired_count += (int)d.n;
				tfs_log_info("groups", "expired %zu offsets of group \"%.64s\" "
				             "(offsets.retention.minutes)", d.n, names[i]);
			}
		}
		pthread_mutex_unlock(&g->plocks[part]);
		tfs_group_offsets_free(d.offs, d.n);
	}
	free(names);
	return rc < 0 ? rc : expired_count;
}

/* ---- the coordinator's side ---- */

int tfs_groups_set_state(struct tfs_groups *g, const char *group, enum tfs_group_state state,
                         int32_t member_count, int32_t generation)
{
	struct group *gr;
	int32_t part;
	int rc;

	if ((rc = place(g, group, &part)) < 0)
		return rc;
	if (member_count < 0)
		return -EINVAL;
	pthread_mutex_lock(&g->lock);
	gr = group_add(g, group, part);
	if (gr) {
		if (gr->state != state || gr->state_ms < 0)
			gr->state_ms = tfs_now_ms();
		gr->state = state;
		gr->members = member_count;
		gr->generation = generation;
		group_forget_if_idle(g, gr);
	}
	pthread_mutex_unlock(&g->lock);
	return gr ? 0 : -ENOMEM;
}

static struct tfs_slice nsl(const char *s, bool *null)
{
	*null = s == NULL;
	return s ? sl(s) : tfs_slice_make(NULL, 0);
}

int tfs_groups_store_group(struct tfs_groups *g, const char *group,
                           const struct tfs_group_record *rec)
{
	struct tfs_gmember *ms = NULL;
	struct tfs_ggroup_value v = { 0 };
	struct recs r = { NULL, 0 };
	struct tfs_append_rec one = { 0 };
	uint8_t *k = NULL, *val = NULL;
	size_t kl = 0, vl = 0;
	int32_t part;
	int rc;

	if ((rc = place(g, group, &part)) < 0)
		return rc;
	if (!rec->protocol_type || rec->member_count < 0 || (rec->member_count && !rec->members))
		return -EINVAL;
	if (g->read_only)
		return TFS_EREADONLY;
	if (rec->member_count && !(ms = calloc((size_t)rec->member_count, sizeof(*ms))))
		return -ENOMEM;
	for (int32_t i = 0; i < rec->member_count; i++) {
		const struct tfs_group_member *m = &rec->members[i];
		ms[i] = (struct tfs_gmember){
			.member_id = m->member_id, .instance_id = m->instance_id,
			.instance_id_null = m->instance_id_null, .client_id = m->client_id,
			.client_host = m->client_host, .rebalance_timeout_ms = m->rebalance_timeout_ms,
			.session_timeout_ms = m->session_timeout_ms, .subscription = m->subscription,
			.assignment = m->assignment,
		};
	}
	v.version = TFS_GVALUE_GROUP_WRITTEN;
	v.protocol_type = sl(rec->protocol_type);
	v.generation = rec->generation;
	v.protocol = nsl(rec->protocol, &v.protocol_null);
	v.leader = nsl(rec->leader, &v.leader_null);
	v.state_ms = rec->state_ms < 0 ? tfs_now_ms() : rec->state_ms;
	v.member_count = rec->member_count;
	v.members = ms;
	rc = tfs_gcodec_group_key(sl(group), &k, &kl);
	if (rc == 0)
		rc = tfs_gcodec_group_value(&v, &val, &vl);
	free(ms);
	if (rc < 0)
		goto out;
	one.key = tfs_slice_make(k, kl);
	one.value = tfs_slice_make(val, vl);
	r.v = &one;
	r.n = 1;
	pthread_mutex_lock(&g->plocks[part]);
	rc = append(g, part, &r, group, "store the record");
	if (rc == 0) {
		struct group *gr;
		pthread_mutex_lock(&g->lock);
		gr = group_add(g, group, part);
		rc = gr ? set_protocol_type(gr, v.protocol_type) : -ENOMEM;
		if (rc == 0) {
			gr->generation = rec->generation;
			if (gr->members == 0)     /* Empty since the record says */
				gr->state_ms = v.state_ms;
		}
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&g->plocks[part]);
out:
	free(k);
	free(val);
	return rc;
}
