/* group.c - the group coordinator (see group.h), after Kafka's GroupCoordinator:
 * the same states, timeouts and answers, for the classic protocol with dynamic
 * members (a group.instance.id is accepted and kept, but the member is treated
 * as dynamic: it rejoins with a new id after a restart). */
#include "kafka/group.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "engine/groups/groups.h"
#include "io/log.h"
#include "kafka/kafka_internal.h"

#define TIMER_TICK_MS 1000               /* how often silent members are looked for */
#define UUID_BYTES 16
#define NEW_MEMBER_JOIN_MS 300000        /* Kafka's new-member join timeout: 5 min */

struct kproto {
	char *name;
	uint8_t *meta;
	size_t meta_len;
};

struct kmember {
	char *id, *instance_id, *client_id, *client_host;
	int32_t session_ms, rebalance_ms;
	struct kproto *protos;
	size_t nprotos;
	bool awaiting;                   /* joined this rebalance */
	bool join_ready;                 /* its join completed: answer it */
	uint64_t join_conn;              /* the parked JoinGroup, 0: none */
	int32_t join_corr;
	bool synced;                     /* sent SyncGroup this generation */
	uint8_t *assignment;
	size_t assignment_len;
	int64_t deadline_ms;             /* session expiry (monotonic) */
	size_t bytes;                    /* what it counts in tfs_kgroups.bytes */
};

struct kpending {
	char *id;
	int64_t deadline_ms;
};

struct kgroup {
	struct tfs_kgroups *kg;
	char *id;
	enum tfs_group_state state;
	int32_t generation;
	char *protocol_type, *protocol, *leader;
	struct kmember **m;
	size_t nm;
	struct kpending *pend;
	size_t npend;
	int64_t deadline_ms;             /* Preparing: end of the join phase;
	                                  * Completing: end of the wait for SyncGroup */
	int64_t not_before_ms;           /* Preparing from Empty: the initial delay */
};

struct tfs_kgroups {
	struct tfs_kafka *k;
	struct tfs_groups *store;
	int64_t initial_delay_ms;
	int32_t max_size;                /* group.max.size */
	size_t max_groups;               /* TFS_KGROUP_MAX_GROUPS */
	size_t bytes;                    /* members' and pending ids' bytes, all groups */
	pthread_mutex_t lock;
	struct kgroup **g;
	size_t n;
	pthread_t timer;
	bool timer_started, stop;
	pthread_cond_t cond;
};

/* ---- small helpers ---- */

static char *dupn(const void *p, size_t len)
{
	char *s = malloc(len + 1);
	if (!s)
		return NULL;
	if (len)
		memcpy(s, p, len);
	s[len] = '\0';
	return s;
}

static char *dups(const char *s)
{
	return s ? dupn(s, strlen(s)) : NULL;
}

static void member_free(struct kmember *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nprotos; i++) {
		free(m->protos[i].name);
		free(m->protos[i].meta);
	}
	free(m->protos);
	free(m->id);
	free(m->instance_id);
	free(m->client_id);
	free(m->client_host);
	free(m->assignment);
	free(m);
}

/* ---- what members cost (tfs_kgroups.bytes, under kg->lock) ---- */

static size_t member_bytes(const struct kmember *m)
{
	size_t n = strlen(m->id) + strlen(m->client_id) + strlen(m->client_host) +
	           (m->instance_id ? strlen(m->instance_id) : 0) + m->assignment_len;

	for (size_t i = 0; i < m->nprotos; i++)
		n += strlen(m->protos[i].name) + m->protos[i].meta_len;
	return n;
}

/* m's size changed (or it is new): counts it again. */
static void account(struct kgroup *g, struct kmember *m)
{
	g->kg->bytes -= m->bytes;
	m->bytes = member_bytes(m);
	g->kg->bytes += m->bytes;
}

static void member_drop(struct kgroup *g, struct kmember *m)
{
	g->kg->bytes -= m->bytes;
	member_free(m);
}

static void pending_drop(struct kgroup *g, size_t i)
{
	g->kg->bytes -= strlen(g->pend[i].id);
	free(g->pend[i].id);
	g->pend[i] = g->pend[--g->npend];
}

/* Whether add more bytes fit in TFS_KGROUP_MAX_STATE_BYTES; logs when not. */
static bool budget_fits(const struct kgroup *g, size_t add)
{
	if (add <= TFS_KGROUP_MAX_STATE_BYTES && g->kg->bytes <= TFS_KGROUP_MAX_STATE_BYTES - add)
		return true;
	tfs_log_warn("kafka", "group \"%.64s\": refusing %zu more bytes of member state "
	             "(all groups hold %zu of at most %d)", g->id, add, g->kg->bytes,
	             TFS_KGROUP_MAX_STATE_BYTES);
	return false;
}

static void group_free(struct kgroup *g)
{
	for (size_t i = 0; i < g->nm; i++)
		member_drop(g, g->m[i]);
	while (g->npend)
		pending_drop(g, 0);
	free(g->m);
	free(g->pend);
	free(g->id);
	free(g->protocol_type);
	free(g->protocol);
	free(g->leader);
	free(g);
}

static struct kgroup *group_find(struct tfs_kgroups *kg, const char *id)
{
	for (size_t i = 0; i < kg->n; i++)
		if (!strcmp(kg->g[i]->id, id))
			return kg->g[i];
	return NULL;
}

/* A group with no members and no pending ids: its state is all in the store. */
static bool group_idle(const struct kgroup *g)
{
	return g->state == TFS_GROUP_EMPTY && g->nm == 0 && g->npend == 0;
}

/* Drops idle groups from memory (group_add finds their generation again). */
static void evict_idle(struct tfs_kgroups *kg)
{
	for (size_t i = kg->n; i-- > 0;)
		if (group_idle(kg->g[i])) {
			struct kgroup *g = kg->g[i];
			kg->g[i] = kg->g[--kg->n];
			group_free(g);
		}
}

/* NULL for no memory or TFS_KGROUP_MAX_GROUPS busy groups (logged). */
static struct kgroup *group_add(struct tfs_kgroups *kg, const char *id)
{
	struct kgroup **v;
	struct kgroup *g;
	struct tfs_group_info info;

	if (kg->n >= kg->max_groups)
		evict_idle(kg);
	if (kg->n >= kg->max_groups) {
		tfs_log_warn("kafka", "refusing group \"%.64s\": %zu groups have members already",
		             id, kg->max_groups);
		return NULL;
	}
	v = realloc(kg->g, (kg->n + 1) * sizeof(*v));
	if (!v)
		return NULL;
	kg->g = v;
	g = calloc(1, sizeof(*g));
	if (!g || !(g->id = dups(id))) {
		free(g);
		return NULL;
	}
	g->kg = kg;
	g->state = TFS_GROUP_EMPTY;
	/* generations go on from the stored group record */
	if (tfs_groups_info(kg->store, id, &info) == 0) {
		g->generation = info.generation;
		tfs_group_info_release(&info);
	}
	kg->g[kg->n++] = g;
	return g;
}

static struct kmember *member_find(const struct kgroup *g, const char *id)
{
	for (size_t i = 0; i < g->nm; i++)
		if (!strcmp(g->m[i]->id, id))
			return g->m[i];
	return NULL;
}

static void member_remove(struct kgroup *g, struct kmember *m)
{
	for (size_t i = 0; i < g->nm; i++)
		if (g->m[i] == m) {
			memmove(&g->m[i], &g->m[i + 1], (g->nm - i - 1) * sizeof(*g->m));
			g->nm--;
			break;
		}
	if (g->leader && !strcmp(g->leader, m->id)) {
		free(g->leader);
		g->leader = NULL;
	}
	member_drop(g, m);
}

static bool pending_take(struct kgroup *g, const char *id)
{
	for (size_t i = 0; i < g->npend; i++)
		if (!strcmp(g->pend[i].id, id)) {
			pending_drop(g, i);
			return true;
		}
	return false;
}

/* A new member id: the client id, "-", and a random UUID (Kafka's form). */
static char *new_member_id(struct tfs_slice client_id)
{
	uint8_t u[UUID_BYTES];
	char *s = malloc(client_id.len + 1 + 36 + 1);
	size_t at;

	if (!s)
		return NULL;
	if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u)) {
		/* never in practice; the clock still keeps ids apart */
		uint64_t t = (uint64_t)tfs_mono_ms() ^ (uint64_t)(uintptr_t)s;
		for (size_t i = 0; i < sizeof(u); i++)
			u[i] = (uint8_t)(t >> ((i % 8) * 8)) ^ (uint8_t)i;
	}
	memcpy(s, client_id.p, client_id.len);
	at = client_id.len;
	s[at++] = '-';
	for (size_t i = 0; i < UUID_BYTES; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			s[at++] = '-';
		at += (size_t)snprintf(s + at, 3, "%02x", u[i]);
	}
	s[at] = '\0';
	return s;
}

static int set_protos(struct kmember *m, const struct tfs_kjoin *j)
{
	struct kproto *p = calloc(j->nprotos ? j->nprotos : 1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < j->nprotos; i++) {
		p[i].name = dupn(j->protos[i].name.p, j->protos[i].name.len);
		p[i].meta = j->protos[i].metadata.len ? malloc(j->protos[i].metadata.len) : NULL;
		if (!p[i].name || (j->protos[i].metadata.len && !p[i].meta)) {
			for (size_t k = 0; k <= i; k++) {
				free(p[k].name);
				free(p[k].meta);
			}
			free(p);
			return -ENOMEM;
		}
		if (p[i].meta)
			memcpy(p[i].meta, j->protos[i].metadata.p, j->protos[i].metadata.len);
		p[i].meta_len = j->protos[i].metadata.len;
	}
	for (size_t i = 0; i < m->nprotos; i++) {
		free(m->protos[i].name);
		free(m->protos[i].meta);
	}
	free(m->protos);
	m->protos = p;
	m->nprotos = j->nprotos;
	m->session_ms = j->session_ms;
	m->rebalance_ms = j->rebalance_ms;
	return 0;
}

static bool same_protos(const struct kmember *m, const struct tfs_kjoin *j)
{
	if (m->nprotos != j->nprotos)
		return false;
	for (size_t i = 0; i < m->nprotos; i++) {
		const struct tfs_kproto *p = &j->protos[i];
		if (strlen(m->protos[i].name) != p->name.len ||
		    memcmp(m->protos[i].name, p->name.p, p->name.len) ||
		    m->protos[i].meta_len != p->metadata.len ||
		    (p->metadata.len && memcmp(m->protos[i].meta, p->metadata.p, p->metadata.len)))
			return false;
	}
	return true;
}

static const struct kproto *proto_of(const struct kmember *m, const char *name)
{
	for (size_t i = 0; i < m->nprotos; i++)
		if (!strcmp(m->protos[i].name, name))
			return &m->protos[i];
	return NULL;
}

static bool all_support(const struct kgroup *g, struct tfs_slice name, const struct kmember *skip)
{
	for (size_t i = 0; i < g->nm; i++) {
		const struct kmember *m = g->m[i];
		bool found = false;
		if (m == skip)
			continue;
		for (size_t k = 0; k < m->nprotos && !found; k++)
			found = strlen(m->protos[k].name) == name.len &&
			        !memcmp(m->protos[k].name, name.p, name.len);
		if (!found)
			return false;
	}
	return true;
}

/* Kafka's supportsProtocols: a new member's type and some protocol must suit
 * every member (an Empty group takes any non-empty type and list). */
static bool suits(const struct kgroup *g, const struct tfs_kjoin *j, const struct kmember *self)
{
	if (!j->protocol_type[0] || j->nprotos == 0)
		return false;
	if (g->state == TFS_GROUP_EMPTY || g->nm == 0 || (g->nm == 1 && g->m[0] == self))
		return true;
	if (!g->protocol_type || strcmp(g->protocol_type, j->protocol_type))
		return false;
	for (size_t i = 0; i < j->nprotos; i++)
		if (all_support(g, j->protos[i].name, self))
			return true;
	return false;
}

/* The protocol every member supports that most members name first among those. */
static const char *choose_protocol(const struct kgroup *g)
{
	const char *best = NULL;
	size_t best_votes = 0;

	for (size_t c = 0; c < g->m[0]->nprotos; c++) {
		const char *cand = g->m[0]->protos[c].name;
		size_t votes = 0;
		if (!all_support(g, tfs_slice_make(cand, strlen(cand)), NULL))
			continue;
		for (size_t i = 0; i < g->nm; i++)
			for (size_t k = 0; k < g->m[i]->nprotos; k++) {
				const char *n = g->m[i]->protos[k].name;
				if (all_support(g, tfs_slice_make(n, strlen(n)), NULL)) {
					votes += !strcmp(n, cand);
					break;     /* its first choice among the common ones */
				}
			}
		if (!best || votes > best_votes) {
			best = cand;
			best_votes = votes;
		}
	}
	return best;
}

static int32_t max_rebalance_ms(const struct kgroup *g)
{
	int32_t t = 0;
	for (size_t i = 0; i < g->nm; i++)
		if (g->m[i]->rebalance_ms > t)
			t = g->m[i]->rebalance_ms;
	return t;
}

static void publish(struct tfs_kgroups *kg, const struct kgroup *g)
{
	tfs_groups_set_state(kg->store, g->id, g->state, (int32_t)g->nm, g->generation);
}

/* Writes the group record of g as it is now (members with their assignments). */
static int store_record(struct tfs_kgroups *kg, const struct kgroup *g)
{
	struct tfs_group_member *ms = g->nm ? calloc(g->nm, sizeof(*ms)) : NULL;
	struct tfs_group_record rec = {
		.protocol_type = g->protocol_type ? g->protocol_type : "",
		.generation = g->generation,
		.protocol = g->state == TFS_GROUP_EMPTY ? NULL : g->protocol,
		.leader = g->state == TFS_GROUP_EMPTY ? NULL : g->leader,
		.state_ms = -1, .members = ms, .member_count = (int32_t)g->nm,
	};
	int rc;

	if (g->nm && !ms)
		return -ENOMEM;
	for (size_t i = 0; i < g->nm; i++) {
		const struct kmember *m = g->m[i];
		const struct kproto *p = g->protocol ? proto_of(m, g->protocol) : NULL;
		ms[i] = (struct tfs_group_member){
			.member_id = tfs_slice_make(m->id, strlen(m->id)),
			.instance_id = tfs_slice_make(m->instance_id, m->instance_id ? strlen(m->instance_id) : 0),
			.instance_id_null = !m->instance_id,
			.client_id = tfs_slice_make(m->client_id, strlen(m->client_id)),
			.client_host = tfs_slice_make(m->client_host, strlen(m->client_host)),
			.rebalance_timeout_ms = m->rebalance_ms, .session_timeout_ms = m->session_ms,
			.subscription = p ? tfs_slice_make(p->meta, p->meta_len) : tfs_slice_make(NULL, 0),
			.assignment = tfs_slice_make(m->assignment, m->assignment_len),
		};
	}
	rc = g->protocol_type ? tfs_groups_store_group(kg->store, g->id, &rec) : 0;
	free(ms);
	return rc;
}

/* ---- transitions (under kg->lock) ---- */

static void prepare_rebalance(struct tfs_kgroups *kg, struct kgroup *g, int64_t now)
{
	if (g->state == TFS_GROUP_PREPARING_REBALANCE)
		return;
	if (g->state == TFS_GROUP_EMPTY)
		g->not_before_ms = now + kg->initial_delay_ms;
	else
		g->not_before_ms = now;
	for (size_t i = 0; i < g->nm; i++) {
		g->m[i]->awaiting = false;
		g->m[i]->join_ready = false;
		g->m[i]->synced = false;
	}
	g->state = TFS_GROUP_PREPARING_REBALANCE;
	g->deadline_ms = now + max_rebalance_ms(g);
	publish(kg, g);
	tfs_log_info("kafka", "group \"%.64s\" rebalances (generation %" PRId32 ", %zu members)",
	             g->id, g->generation, g->nm);
}

/* Ends the join phase when every member rejoined (and the initial delay is
 * over), or at the rebalance timeout without those that did not. Returns
 * whether it ended. */
static bool try_complete_join(struct tfs_kgroups *kg, struct kgroup *g, int64_t now)
{
	bool all = g->npend == 0;
	const char *proto;

	if (g->state != TFS_GROUP_PREPARING_REBALANCE)
		return false;
	if (g->deadline_ms < g->not_before_ms)
		g->deadline_ms = g->not_before_ms;
	for (size_t i = 0; i < g->nm && all; i++)
		all = g->m[i]->awaiting;
	if (!(all && now >= g->not_before_ms) && now < g->deadline_ms)
		return false;
	for (size_t i = g->nm; i-- > 0;)
		if (!g->m[i]->awaiting) {
			tfs_log_info("kafka", "group \"%.64s\": member %.96s did not rejoin in time",
			             g->id, g->m[i]->id);
			member_remove(g, g->m[i]);
		}
	g->generation++;
	free(g->protocol);
	g->protocol = NULL;
	if (g->nm == 0) {
		g->state = TFS_GROUP_EMPTY;
		free(g->leader);
		g->leader = NULL;
		publish(kg, g);
		if (store_record(kg, g) < 0)
			tfs_log_warn("kafka", "group \"%.64s\": cannot store its empty record", g->id);
		return true;
	}
	proto = choose_protocol(g);
	g->protocol = dups(proto ? proto : "");
	if (!g->leader) {
		g->leader = dups(g->m[0]->id);
	}
	for (size_t i = 0; i < g->nm; i++) {
		g->m[i]->join_ready = true;
		g->m[i]->synced = false;
		free(g->m[i]->assignment);
		g->m[i]->assignment = NULL;
		g->m[i]->assignment_len = 0;
		account(g, g->m[i]);
		g->m[i]->deadline_ms = now + g->m[i]->session_ms;
	}
	g->state = TFS_GROUP_COMPLETING_REBALANCE;
	g->deadline_ms = now + max_rebalance_ms(g);
	publish(kg, g);
	tfs__kafka_wake(kg->k);
	return true;
}

/* Session expiry, pending ids' expiry and the phases' deadlines. */
static void sweep(struct tfs_kgroups *kg, struct kgroup *g, int64_t now)
{
	bool removed = false;

	for (size_t i = g->npend; i-- > 0;)
		if (now >= g->pend[i].deadline_ms)
			pending_drop(g, i);
	for (size_t i = g->nm; i-- > 0;) {
		struct kmember *m = g->m[i];
		/* a member waiting in JoinGroup is alive (Kafka's shouldKeepAlive) */
		if (m->awaiting && g->state == TFS_GROUP_PREPARING_REBALANCE)
			continue;
		if (now >= m->deadline_ms) {
			tfs_log_info("kafka", "group \"%.64s\": member %.96s timed out (session %" PRId32
			             " ms)", g->id, m->id, m->session_ms);
			member_remove(g, m);
			removed = true;
		}
	}
	if (g->state == TFS_GROUP_COMPLETING_REBALANCE && now >= g->deadline_ms) {
		for (size_t i = g->nm; i-- > 0;)
			if (!g->m[i]->synced) {
				member_remove(g, g->m[i]);
				removed = true;
			}
	}
	if (removed && g->state != TFS_GROUP_EMPTY) {
		prepare_rebalance(kg, g, now);
		tfs__kafka_wake(kg->k);
	}
	if (try_complete_join(kg, g, now))
		tfs__kafka_wake(kg->k);
}

static struct kgroup *lookup(struct tfs_kgroups *kg, const char *id, int64_t now)
{
	struct kgroup *g = group_find(kg, id);
	if (g)
		sweep(kg, g, now);
	return g;
}

/* ---- JoinGroup ---- */

/* What a member joining with j costs, its id aside. */
static size_t join_bytes(const struct tfs_kreq *rq, const struct tfs_kjoin *j)
{
	size_t n = rq->client_id.len + strlen(rq->client_host ? rq->client_host : "") +
	           (j->instance_id ? strlen(j->instance_id) : 0);

	for (size_t i = 0; i < j->nprotos; i++)
		n += j->protos[i].name.len + j->protos[i].metadata.len;
	return n;
}

/* The per-member bounds of group.h; logs what it refuses. */
static bool join_bounded(const struct tfs_kjoin *j)
{
	size_t meta = 0;

	if (j->instance_id && strlen(j->instance_id) > TFS_KGROUP_MAX_INSTANCE_ID_BYTES) {
		tfs_log_warn("kafka", "group \"%.64s\": refusing a group.instance.id of %zu bytes "
		             "(at most %d)", j->group, strlen(j->instance_id),
		             TFS_KGROUP_MAX_INSTANCE_ID_BYTES);
		return false;
	}
	if (j->nprotos > TFS_KGROUP_MAX_PROTOCOLS) {
		tfs_log_warn("kafka", "group \"%.64s\": refusing a member of %zu protocols (at most "
		             "%d)", j->group, j->nprotos, TFS_KGROUP_MAX_PROTOCOLS);
		return false;
	}
	for (size_t i = 0; i < j->nprotos; i++)
		meta += j->protos[i].metadata.len;
	if (meta > TFS_KGROUP_MAX_METADATA_BYTES) {
		tfs_log_warn("kafka", "group \"%.64s\": refusing %zu bytes of protocol metadata (at "
		             "most %d)", j->group, meta, TFS_KGROUP_MAX_METADATA_BYTES);
		return false;
	}
	return true;
}

void tfs_kjoin_answer_release(struct tfs_kjoin_answer *a)
{
	for (size_t i = 0; i < a->nmembers; i++) {
		free(a->members[i].member_id);
		free(a->members[i].instance_id);
		free(a->members[i].metadata);
	}
	free(a->members);
	free(a->protocol);
	free(a->leader);
	free(a->member_id);
	memset(a, 0, sizeof(*a));
}

static int16_t answer_join(const struct kgroup *g, const struct kmember *m,
                           struct tfs_kjoin_answer *a)
{
	memset(a, 0, sizeof(*a));
	a->generation = g->generation;
	a->protocol = dups(g->protocol ? g->protocol : "");
	a->leader = dups(g->leader ? g->leader : "");
	a->member_id = dups(m->id);
	if (!a->protocol || !a->leader || !a->member_id)
		goto oom;
	if (g->leader && !strcmp(g->leader, m->id) && g->nm) {
		a->members = calloc(g->nm, sizeof(*a->members));
		if (!a->members)
			goto oom;
		for (size_t i = 0; i < g->nm; i++) {
			const struct kproto *p = proto_of(g->m[i], g->protocol);
			struct tfs_kmember_meta *x = &a->members[a->nmembers++];
			x->member_id = dups(g->m[i]->id);
			x->instance_id = dups(g->m[i]->instance_id);
			if (p && p->meta_len) {
				x->metadata = malloc(p->meta_len);
				if (x->metadata)
					memcpy(x->metadata, p->meta, p->meta_len);
				x->metadata_len = p->meta_len;
			}
			if (!x->member_id || (p && p->meta_len && !x->metadata))
				goto oom;
		}
	}
	return KE_NONE;
oom:
	tfs_kjoin_answer_release(a);
	return KE_COORDINATOR_NOT_AVAILABLE;
}

static struct kmember *join_waiter(const struct kgroup *g, const struct tfs_kreq *rq)
{
	for (size_t i = 0; i < g->nm; i++)
		if (g->m[i]->join_conn == rq->conn && g->m[i]->join_corr == rq->correlation)
			return g->m[i];
	return NULL;
}

static struct kmember *member_new(const struct tfs_kreq *rq, const struct tfs_kjoin *j, char *id)
{
	struct kmember *m = calloc(1, sizeof(*m));

	if (!m) {
		free(id);
		return NULL;
	}
	m->id = id;
	m->instance_id = dups(j->instance_id);
	m->client_id = dupn(rq->client_id.p, rq->client_id.len);
	m->client_host = dups(rq->client_host ? rq->client_host : "");
	if (!m->client_id || !m->client_host || (j->instance_id && !m->instance_id) ||
	    set_protos(m, j) < 0) {
		member_free(m);
		return NULL;
	}
	m->deadline_ms = rq->now_ms + j->session_ms;
	return m;
}

static int add_member(struct kgroup *g, struct kmember *m)
{
	struct kmember **v = realloc(g->m, (g->nm + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	g->m = v;
	g->m[g->nm++] = m;
	return 0;
}

/* The member m waits in this JoinGroup; answers it at once if that ended the
 * phase, else parks it. */
static int16_t await_join(struct tfs_kgroups *kg, struct kgroup *g, struct kmember *m,
                          const struct tfs_kreq *rq, struct tfs_kjoin_answer *a, bool *park,
                          int64_t *wake_at)
{
	m->awaiting = true;
	m->join_ready = false;
	m->join_conn = rq->conn;
	m->join_corr = rq->correlation;
	try_complete_join(kg, g, rq->now_ms);
	if (m->join_ready) {
		m->join_ready = false;
		m->join_conn = 0;
		return answer_join(g, m, a);
	}
	*park = true;
	*wake_at = g->deadline_ms;
	return KE_NONE;
}

int16_t tfs_kgroups_join(struct tfs_kgroups *kg, const struct tfs_kreq *rq,
                         const struct tfs_kjoin *j, struct tfs_kjoin_answer *a, bool *park,
                         int64_t *wake_at_ms)
{
	int64_t now = rq->now_ms;
	struct kgroup *g;
	struct kmember *m;
	int16_t err = KE_NONE;
	int32_t part;

	memset(a, 0, sizeof(*a));
	*park = false;
	if (!j->group[0] || tfs_groups_partition_for(j->group, 1, &part) < 0)
		return KE_INVALID_GROUP_ID;
	if (j->session_ms < TFS_KGROUP_MIN_SESSION_MS || j->session_ms > TFS_KGROUP_MAX_SESSION_MS)
		return KE_INVALID_SESSION_TIMEOUT;
	if (!join_bounded(j))
		return KE_INVALID_REQUEST;
	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, j->group, now);
	if (rq->retry) {
		/* a parked join handled again: answer it once its phase ended */
		m = g ? join_waiter(g, rq) : NULL;
		if (!m) {
			err = KE_UNKNOWN_MEMBER_ID;
		} else if (m->join_ready) {
			m->join_ready = false;
			m->join_conn = 0;
			err = answer_join(g, m, a);
		} else if (g->state == TFS_GROUP_PREPARING_REBALANCE) {
			*park = true;
			*wake_at_ms = g->deadline_ms;
		} else {
			err = KE_UNKNOWN_MEMBER_ID;
		}
		goto out;
	}
	if (j->member_id[0] && !g) {
		err = KE_UNKNOWN_MEMBER_ID;
		goto out;
	}
	if (!g && !(g = group_add(kg, j->group))) {
		err = KE_COORDINATOR_NOT_AVAILABLE;
		goto out;
	}
	m = j->member_id[0] ? member_find(g, j->member_id) : NULL;
	if (!suits(g, j, m)) {
		err = KE_INCONSISTENT_GROUP_PROTOCOL;
		goto out;
	}
	if (!j->member_id[0] && g->nm + g->npend >= (size_t)kg->max_size) {
		tfs_log_warn("kafka", "group \"%.64s\" is full: %zu members and %zu pending "
		             "(group.max.size=%" PRId32 ")", g->id, g->nm, g->npend, kg->max_size);
		err = KE_GROUP_MAX_SIZE_REACHED;
		goto out;
	}
	if (!j->member_id[0] || (!m && pending_take(g, j->member_id))) {
		char *id = j->member_id[0] ? dups(j->member_id) : new_member_id(rq->client_id);
		if (!id) {
			err = KE_COORDINATOR_NOT_AVAILABLE;
			goto out;
		}
		if (!budget_fits(g, strlen(id) + join_bytes(rq, j))) {
			free(id);
			err = KE_COORDINATOR_NOT_AVAILABLE;
			goto out;
		}
		if (!j->member_id[0] && rq->version >= 4) {
			/* KIP-394: the member rejoins with this id, then it counts */
			struct kpending *p = realloc(g->pend, (g->npend + 1) * sizeof(*p));
			if (!p) {
				free(id);
				err = KE_COORDINATOR_NOT_AVAILABLE;
				goto out;
			}
			g->pend = p;
			g->pend[g->npend++] = (struct kpending){ id, now + j->session_ms };
			kg->bytes += strlen(id);
			a->generation = -1;
			a->protocol = dups("");
			a->leader = dups("");
			a->member_id = dups(id);
			err = KE_MEMBER_ID_REQUIRED;
			goto out;
		}
		m = member_new(rq, j, id);
		if (!m || add_member(g, m) < 0) {
			member_free(m);
			err = KE_COORDINATOR_NOT_AVAILABLE;
			goto out;
		}
		account(g, m);
		if (!g->protocol_type || strcmp(g->protocol_type, j->protocol_type)) {
			free(g->protocol_type);
			g->protocol_type = dups(j->protocol_type);
		}
		tfs_log_info("kafka", "group \"%.64s\": member %.96s joins", g->id, m->id);
		prepare_rebalance(kg, g, now);
		err = await_join(kg, g, m, rq, a, park, wake_at_ms);
		goto out;
	}
	if (!m) {
		err = KE_UNKNOWN_MEMBER_ID;
		goto out;
	}
	m->deadline_ms = now + m->session_ms;
	if (!same_protos(m, j) && join_bytes(rq, j) > m->bytes &&
	    !budget_fits(g, join_bytes(rq, j) - m->bytes)) {
		err = KE_COORDINATOR_NOT_AVAILABLE;
		goto out;
	}
	switch (g->state) {
	case TFS_GROUP_PREPARING_REBALANCE:
		if (set_protos(m, j) < 0) {
			err = KE_COORDINATOR_NOT_AVAILABLE;
			break;
		}
		account(g, m);
		err = await_join(kg, g, m, rq, a, park, wake_at_ms);
		break;
	case TFS_GROUP_COMPLETING_REBALANCE:
	case TFS_GROUP_STABLE:
		if (same_protos(m, j) && !(g->state == TFS_GROUP_STABLE && g->leader &&
		                           !strcmp(g->leader, m->id))) {
			err = answer_join(g, m, a);   /* nothing changed: the current generation */
			break;
		}
		if (set_protos(m, j) < 0) {
			err = KE_COORDINATOR_NOT_AVAILABLE;
			break;
		}
		account(g, m);
		prepare_rebalance(kg, g, now);
		err = await_join(kg, g, m, rq, a, park, wake_at_ms);
		tfs__kafka_wake(kg->k);          /* parked syncs learn of the rebalance */
		break;
	default:
		err = KE_UNKNOWN_MEMBER_ID;
		break;
	}
out:
	pthread_mutex_unlock(&kg->lock);
	if (err != KE_NONE && err != KE_MEMBER_ID_REQUIRED)
		tfs_kjoin_answer_release(a);
	return err;
}

/* ---- SyncGroup, Heartbeat, LeaveGroup ---- */

static int16_t member_check(struct kgroup *g, const char *member_id, int32_t generation,
                            struct kmember **out)
{
	struct kmember *m = g ? member_find(g, member_id) : NULL;

	*out = m;
	if (!g || !m || g->state == TFS_GROUP_EMPTY || g->state == TFS_GROUP_DEAD)
		return KE_UNKNOWN_MEMBER_ID;
	if (generation != g->generation)
		return KE_ILLEGAL_GENERATION;
	return KE_NONE;
}

static int copy_assignment(const struct kmember *m, uint8_t **out, size_t *len)
{
	*out = NULL;
	*len = m->assignment_len;
	if (!m->assignment_len)
		return 0;
	*out = malloc(m->assignment_len);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, m->assignment, m->assignment_len);
	return 0;
}

int16_t tfs_kgroups_sync(struct tfs_kgroups *kg, const struct tfs_kreq *rq, const char *group,
                         int32_t generation, const char *member_id,
                         const struct tfs_kassign *as, size_t nas, uint8_t **assignment,
                         size_t *assignment_len, bool *park, int64_t *wake_at_ms)
{
	struct kgroup *g;
	struct kmember *m;
	int16_t err;

	*assignment = NULL;
	*assignment_len = 0;
	*park = false;
	for (size_t i = 0; i < nas; i++)
		if (as[i].assignment.len > TFS_KGROUP_MAX_ASSIGNMENT_BYTES) {
			tfs_log_warn("kafka", "group \"%.64s\": refusing an assignment of %zu bytes "
			             "(at most %d)", group, as[i].assignment.len,
			             TFS_KGROUP_MAX_ASSIGNMENT_BYTES);
			return KE_INVALID_REQUEST;
		}
	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, group, rq->now_ms);
	err = member_check(g, member_id, generation, &m);
	if (err)
		goto out;
	m->deadline_ms = rq->now_ms + m->session_ms;
	if (g->state == TFS_GROUP_PREPARING_REBALANCE) {
		err = KE_REBALANCE_IN_PROGRESS;
		goto out;
	}
	if (g->state == TFS_GROUP_COMPLETING_REBALANCE) {
		bool leader = g->leader && !strcmp(g->leader, m->id);
		size_t add = 0;
		for (size_t i = 0; leader && i < nas; i++)
			add += as[i].assignment.len;
		if (leader && !budget_fits(g, add)) {
			err = KE_COORDINATOR_NOT_AVAILABLE;
			goto out;
		}
		m->synced = true;
		if (leader) {
			for (size_t i = 0; i < nas; i++) {
				char *id = dupn(as[i].member_id.p, as[i].member_id.len);
				struct kmember *t = id ? member_find(g, id) : NULL;
				free(id);
				if (!t)
					continue;
				free(t->assignment);
				t->assignment = as[i].assignment.len ? malloc(as[i].assignment.len) : NULL;
				t->assignment_len = t->assignment ? as[i].assignment.len : 0;
				if (t->assignment)
					memcpy(t->assignment, as[i].assignment.p, as[i].assignment.len);
				account(g, t);
			}
			if (store_record(kg, g) < 0) {
				/* Kafka: the write failed, so the generation starts over */
				for (size_t i = 0; i < g->nm; i++) {
					free(g->m[i]->assignment);
					g->m[i]->assignment = NULL;
					g->m[i]->assignment_len = 0;
					account(g, g->m[i]);
				}
				prepare_rebalance(kg, g, rq->now_ms);
				tfs__kafka_wake(kg->k);
				err = KE_COORDINATOR_NOT_AVAILABLE;
				goto out;
			}
			g->state = TFS_GROUP_STABLE;
			publish(kg, g);
			tfs_log_info("kafka", "group \"%.64s\" is stable at generation %" PRId32
			             " (%zu members, %s)", g->id, g->generation, g->nm,
			             g->protocol ? g->protocol : "");
			tfs__kafka_wake(kg->k);
		} else {
			*park = true;
			*wake_at_ms = g->deadline_ms;
			goto out;
		}
	}
	if (copy_assignment(m, assignment, assignment_len) < 0)
		err = KE_COORDINATOR_NOT_AVAILABLE;
out:
	pthread_mutex_unlock(&kg->lock);
	return err;
}

int16_t tfs_kgroups_heartbeat(struct tfs_kgroups *kg, const struct tfs_kreq *rq, const char *group,
                              int32_t generation, const char *member_id)
{
	struct kgroup *g;
	struct kmember *m;
	int16_t err;

	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, group, rq->now_ms);
	err = member_check(g, member_id, generation, &m);
	if (m && err != KE_UNKNOWN_MEMBER_ID)
		m->deadline_ms = rq->now_ms + m->session_ms;
	if (!err && g->state == TFS_GROUP_PREPARING_REBALANCE)
		err = KE_REBALANCE_IN_PROGRESS;
	pthread_mutex_unlock(&kg->lock);
	return err;
}

int16_t tfs_kgroups_leave(struct tfs_kgroups *kg, const struct tfs_kreq *rq, const char *group,
                          const char *member_id)
{
	struct kgroup *g;
	struct kmember *m;
	int16_t err = KE_NONE;

	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, group, rq->now_ms);
	m = g ? member_find(g, member_id) : NULL;
	if (g && !m && pending_take(g, member_id)) {
		if (try_complete_join(kg, g, rq->now_ms))
			tfs__kafka_wake(kg->k);
	} else if (!m) {
		err = KE_UNKNOWN_MEMBER_ID;
	} else {
		tfs_log_info("kafka", "group \"%.64s\": member %.96s leaves", g->id, m->id);
		member_remove(g, m);
		prepare_rebalance(kg, g, rq->now_ms);
		try_complete_join(kg, g, rq->now_ms);
		publish(kg, g);
		tfs__kafka_wake(kg->k);
	}
	pthread_mutex_unlock(&kg->lock);
	return err;
}

int16_t tfs_kgroups_commit_check(struct tfs_kgroups *kg, const struct tfs_kreq *rq,
                                 const char *group, int32_t generation, const char *member_id,
                                 int32_t *store_generation)
{
	struct kgroup *g;
	struct kmember *m;
	int16_t err = KE_NONE;

	*store_generation = -1;
	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, group, rq->now_ms);
	if (generation < 0 && !member_id[0]) {
		/* a simple commit: only to a group without members */
		if (g && g->nm)
			err = KE_UNKNOWN_MEMBER_ID;
	} else if (!g) {
		err = generation < 0 ? KE_UNKNOWN_MEMBER_ID : KE_ILLEGAL_GENERATION;
	} else if (!(err = member_check(g, member_id, generation, &m))) {
		m->deadline_ms = rq->now_ms + m->session_ms;
		if (g->state == TFS_GROUP_COMPLETING_REBALANCE)
			err = KE_REBALANCE_IN_PROGRESS;
		*store_generation = generation;
	}
	pthread_mutex_unlock(&kg->lock);
	return err;
}

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

void tfs_kdescribe_release(struct tfs_kdescribe *d)
{
	for (size_t i = 0; i < d->nmembers; i++) {
		struct tfs_kdescribe_member *x = &d->members[i];
		free(x->member_id);
		free(x->instance_id);
		free(x->client_id);
		free(x->client_host);
		free(x->metadata);
		free(x->assignment);
	}
	free(d->members);
	free(d->protocol_type);
	free(d->protocol);
	memset(d, 0, sizeof(*d));
}

static uint8_t *dupb(const uint8_t *p, size_t len)
{
	uint8_t *q = len ? malloc(len) : NULL;
	if (q)
		memcpy(q, p, len);
	return q;
}

int16_t tfs_kgroups_describe(struct tfs_kgroups *kg, const char *group, struct tfs_kdescribe *d)
{
	struct tfs_group_info info;
	struct kgroup *g;
	int16_t err = KE_NONE;

	memset(d, 0, sizeof(*d));
	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, group, tfs_mono_ms());
	if (g && (g->nm || g->state != TFS_GROUP_EMPTY)) {
		bool stable = g->state == TFS_GROUP_STABLE;
		d->state = tfs_group_state_name(g->state);
		d->protocol_type = dups(g->protocol_type ? g->protocol_type : "");
		d->protocol = dups(stable && g->protocol ? g->protocol : "");
		d->members = g->nm ? calloc(g->nm, sizeof(*d->members)) : NULL;
		for (size_t i = 0; d->members && i < g->nm; i++) {
			const struct kmember *m = g->m[i];
			const struct kproto *p = stable && g->protocol ? proto_of(m, g->protocol) : NULL;
			struct tfs_kdescribe_member *x = &d->members[d->nmembers++];
			x->member_id = dups(m->id);
			x->instance_id = dups(m->instance_id);
			x->client_id = dups(m->client_id);
			x->client_host = dups(m->client_host);
			if (p) {
				x->metadata = dupb(p->meta, p->meta_len);
				x->metadata_len = x->metadata ? p->meta_len : 0;
			}
			if (stable) {
				x->assignment = dupb(m->assignment, m->assignment_len);
				x->assignment_len = x->assignment ? m->assignment_len : 0;
			}
		}
	} else if (tfs_groups_info(kg->store, group, &info) == 0) {
		d->state = tfs_group_state_name(TFS_GROUP_EMPTY);
		d->protocol_type = dups(info.protocol_type ? info.protocol_type : "");
		d->protocol = dups("");
		tfs_group_info_release(&info);
	} else {
		d->state = tfs_group_state_name(TFS_GROUP_DEAD);   /* Kafka's answer: no error */
		d->protocol_type = dups("");
		d->protocol = dups("");
	}
	pthread_mutex_unlock(&kg->lock);
	if (!d->protocol_type || !d->protocol || (g && g->nm && !d->members)) {
		tfs_kdescribe_release(d);
		err = KE_COORDINATOR_NOT_AVAILABLE;
	}
	return err;
}

char *tfs_kgroups_protocol_type(struct tfs_kgroups *kg, const char *group)
{
	struct tfs_group_info info;
	struct kgroup *g;
	char *s = NULL;

	pthread_mutex_lock(&kg->lock);
	g = group_find(kg, group);
	if (g && g->protocol_type)
		s = dups(g->protocol_type);
	pthread_mutex_unlock(&kg->lock);
	if (!s && tfs_groups_info(kg->store, group, &info) == 0) {
		s = dups(info.protocol_type ? info.protocol_type : "");
		tfs_group_info_release(&info);
	}
	return s ? s : dups("");
}

int16_t tfs_kgroups_delete(struct tfs_kgroups *kg, const char *group,
                           bool (*may)(const char *topic, void *arg), void *arg)
{
	struct kgroup *g;
	int16_t err = KE_NONE;
	int rc;

	pthread_mutex_lock(&kg->lock);
	g = lookup(kg, group, tfs_mono_ms());
	if (g && g->nm) {
		err = KE_NON_EMPTY_GROUP;
	} else {
		rc = tfs_groups_delete_if(kg->store, group, may, arg);
		if (rc == -ENOENT)
			err = g ? KE_NONE : KE_GROUP_ID_NOT_FOUND;
		else if (rc == -EACCES)
			err = KE_GROUP_AUTHORIZATION_FAILED;
		else if (rc == TFS_EGROUPBUSY)
			err = KE_NON_EMPTY_GROUP;
		else if (rc < 0)
			err = KE_COORDINATOR_NOT_AVAILABLE;
		if (!err && g) {
			for (size_t i = 0; i < kg->n; i++)
				if (kg->g[i] == g) {
					kg->g[i] = kg->g[--kg->n];
					break;
				}
			group_free(g);
		}
	}
	pthread_mutex_unlock(&kg->lock);
	return err;
}

/* ---- the timer ---- */

static void *timer_main(void *arg)
{
	struct tfs_kgroups *kg = arg;

	pthread_mutex_lock(&kg->lock);
	while (!kg->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += TIMER_TICK_MS / 1000;
		pthread_cond_timedwait(&kg->cond, &kg->lock, &ts);
		if (kg->stop)
			break;
		for (size_t i = 0; i < kg->n; i++)
			sweep(kg, kg->g[i], tfs_mono_ms());
		evict_idle(kg);
	}
	pthread_mutex_unlock(&kg->lock);
	return NULL;
}

size_t tfs_kgroups_count(struct tfs_kgroups *kg, size_t *state_bytes)
{
	size_t n;

	pthread_mutex_lock(&kg->lock);
	n = kg->n;
	*state_bytes = kg->bytes;
	pthread_mutex_unlock(&kg->lock);
	return n;
}

void tfs__kgroups_set_max_groups(struct tfs_kgroups *kg, size_t n)
{
	pthread_mutex_lock(&kg->lock);
	kg->max_groups = n < TFS_KGROUP_MAX_GROUPS ? n : TFS_KGROUP_MAX_GROUPS;
	pthread_mutex_unlock(&kg->lock);
}

int tfs_kgroups_create(struct tfs_kafka *k, struct tfs_groups *store, int64_t initial_delay_ms,
                       int32_t max_size, struct tfs_kgroups **out)
{
	struct tfs_kgroups *kg = calloc(1, sizeof(*kg));
	int rc;

	*out = NULL;
	if (!kg)
		return -ENOMEM;
	kg->k = k;
	kg->store = store;
	kg->initial_delay_ms = initial_delay_ms;
	kg->max_size = max_size > 0 ? max_size : TFS_KGROUP_MAX_SIZE_DEFAULT;
	kg->max_groups = TFS_KGROUP_MAX_GROUPS;
	pthread_mutex_init(&kg->lock, NULL);
	pthread_cond_init(&kg->cond, NULL);
	rc = -pthread_create(&kg->timer, NULL, timer_main, kg);
	if (rc < 0) {
		tfs_kgroups_destroy(kg);
		return rc;
	}
	kg->timer_started = true;
	*out = kg;
	return 0;
}

void tfs_kgroups_destroy(struct tfs_kgroups *kg)
{
	if (!kg)
		return;
	if (kg->timer_started) {
		pthread_mutex_lock(&kg->lock);
		kg->stop = true;
		pthread_cond_signal(&kg->cond);
		pthread_mutex_unlock(&kg->lock);
		pthread_join(kg->timer, NULL);
	}
	for (size_t i = 0; i < kg->n; i++) {
		/* the store forgets the members that went with the listener */
		tfs_groups_set_state(kg->store, kg->g[i]->id, TFS_GROUP_EMPTY, 0, kg->g[i]->generation);
		group_free(kg->g[i]);
	}
	free(kg->g);
	pthread_mutex_destroy(&kg->lock);
	pthread_cond_destroy(&kg->cond);
	free(kg);
}
