/* api_admin.c - a topic's config over the protocol: DescribeConfigs (32),
 * AlterConfigs (33) and IncrementalAlterConfigs (44), by Kafka's message specs.
 *
 * One config, two doors: every value read or written here is the engine's topic
 * config, the same one the mount shows as user.topicfs.<name> attributes, checked
 * by the same parser (tfs_topic_config_set) and persisted in one atomic write per
 * resource (tfs_topic_set_configs), so a change is the attribute's value at once
 * and a refused change changes nothing.
 *
 * Permissions are the mount's for the connection's user (access.c): reading a
 * topic's config is a getfattr on the topic (search on the root, read on the
 * topic), changing it a setfattr (write on the topic; on a sticky topic only its
 * owner), refused with TOPIC_AUTHORIZATION_FAILED. The broker resource (the node
 * id, or "" for the cluster default) is answered read-only with the listener's
 * settings: they are mount options, so an alter of them is INVALID_REQUEST, as
 * Kafka answers an alter of a static broker config.
 *
 * Errors, as Kafka's: an invalid topic name 17, an unknown topic 3, a bad name or
 * value 40 (with a message naming it), a null value, a repeated name or
 * resource, an unknown operation or resource type 42, a read-only mount 56.
 * docs/kafka.md ("Admin") lists what is answered.
 */
#include "kafka/kafka_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "io/log.h"

enum {
	RES_TOPIC = 2,                      /* ConfigResource.Type */
	RES_BROKER = 4,
};

enum {
	SRC_TOPIC = 1,                      /* ConfigSource: a topic's own value */
	SRC_STATIC_BROKER = 4,              /* a mount option (a topic default or a
	                                     * listener setting) */
	SRC_DEFAULT = 5,                    /* Kafka's default */
};

enum {
	OP_SET = 0,                         /* AlterConfigOp.OpType */
	OP_DELETE = 1,
	OP_APPEND = 2,
	OP_SUBTRACT = 3,
};

enum {
	TYPE_UNKNOWN = 0,                   /* DescribeConfigs v3+ ConfigType */
	TYPE_BOOLEAN = 1,
	TYPE_STRING = 2,
	TYPE_INT = 3,
	TYPE_LONG = 5,
	TYPE_DOUBLE = 6,
	TYPE_LIST = 7,
};

#define MAY_READ 4
#define MAY_WRITE 2
#define CFG_NAME_MAX 128                /* longer than any name the parser knows */
#define MSG_MAX 256
/* An alteration names each resource, and each config of a resource, once, which
 * is checked pair by pair: these bound that work (a topic has about twenty
 * configs). A larger request closes the connection, logged. */
#define ALTER_RESOURCES_MAX 10000
#define ALTER_ENTRIES_MAX 1000

/* Kafka's type of each topic config it shares a name with (LogConfig). */
static int8_t config_type(const char *name)
{
	static const struct {
		const char *name;
		int8_t type;
	} types[] = {
		{ "cleanup.policy", TYPE_LIST },
		{ "segment.bytes", TYPE_INT },
		{ "segment.ms", TYPE_LONG },
		{ "min.cleanable.dirty.ratio", TYPE_DOUBLE },
		{ "delete.retention.ms", TYPE_LONG },
		{ "min.compaction.lag.ms", TYPE_LONG },
		{ "max.compaction.lag.ms", TYPE_LONG },
		{ "retention.ms", TYPE_LONG },
		{ "retention.bytes", TYPE_LONG },
		{ "max.message.bytes", TYPE_INT },
		{ "compression.type", TYPE_STRING },
		{ "compression.zstd.level", TYPE_INT },
		{ "message.timestamp.type", TYPE_STRING },
		{ "segment.index.bytes", TYPE_INT },
		{ "index.interval.bytes", TYPE_INT },
		{ "flush.ms", TYPE_LONG },
		{ "producer.id.expiration.ms", TYPE_LONG },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(types[i].name, name))
			return types[i].type;
	return TYPE_UNKNOWN;
}

static void copy_str(struct tfs_slice s, char *out, size_t cap)
{
	size_t n = s.len < cap - 1 ? s.len : cap - 1;

	if (n)
		memcpy(out, s.p, n);
	out[n] = '\0';
}

static bool slice_is(struct tfs_slice s, const char *c)
{
	return s.len == strlen(c) && (s.len == 0 || !memcmp(s.p, c, s.len));
}

/* A resource of a request: its type and name, and its config entries. */
struct res_entry {
	struct tfs_slice name, value;
	bool value_null;
	int8_t op;
};

struct resource {
	int8_t type;
	struct tfs_slice name;
	int32_t n;                          /* -1: null (DescribeConfigs: all) */
	struct res_entry *e;
};

static void resources_free(struct resource *res, int32_t n)
{
	for (int32_t i = 0; res && i < n; i++)
		free(res[i].e);
	free(res);
}

/* Ends the parse of a request of n resources; if it parsed whole, starts the
 * response (throttle, the results' count) and returns true, else frees res. */
static bool answer_start(struct tfs_kafka_ctx *ctx, struct kr *r, struct kw *w,
                         struct resource *res, int32_t n)
{
	kr_tags(r);
	if (r->bad || kr_left(r) || n < 0) {
		resources_free(res, n > 0 ? n : 0);
		return false;
	}
	tfs__kafka_begin(w, ctx, ctx->flex);
	kw_i32(w, 0);                           /* throttle */
	kw_array(w, n);
	return true;
}

/* Whether resource i repeats an earlier one (Kafka refuses both with 42). */
static bool resource_repeated(const struct resource *res, int32_t n, int32_t i)
{
	for (int32_t j = 0; j < n; j++)
		if (j != i && res[j].type == res[i].type && res[j].name.len == res[i].name.len &&
		    (res[i].name.len == 0 || !memcmp(res[j].name.p, res[i].name.p, res[i].name.len)))
			return true;
	return false;
}

#define NOT_SERVED "only topic and broker resources are served"

/* The start of a resource's result: error, message, type, name. */
static void result_head(struct kw *w, int16_t err, const char *msg, const struct resource *rs)
{
	kw_i16(w, err);
	if (msg)
		kw_cstr(w, msg);
	else
		kw_nullstr(w);
	kw_i8(w, rs->type);
	kw_str(w, rs->name.p, rs->name.len);
}

/* The topic a resource names, for want; NULL with *err and *msg set. */
static struct tfs_topic *resource_topic(struct tfs_kafka_ctx *ctx, const struct resource *rs,
                                        int want, int16_t *err, const char **msg)
{
	struct name_buf nb;
	struct tfs_topic *t;

	if (!tfs__kafka_topic_name(rs->name, &nb) || !tfs_topic_name_valid(nb.s)) {
		*err = E_INVALID_TOPIC;
		*msg = "a topic name is 1..249 of [A-Za-z0-9._-], not starting with '.'";
		return NULL;
	}
	if (!tfs__kafka_may_root(ctx, 1)) {
		*err = E_TOPIC_AUTHORIZATION_FAILED;
		*msg = "no search permission on the mount's root";
		return NULL;
	}
	if (!(t = tfs__kafka_topic_get(ctx, nb.s))) {
		*err = E_UNKNOWN_TOPIC_OR_PARTITION;
		*msg = "no such topic";
		return NULL;
	}
	if (!tfs__kafka_may_topic(ctx, t, want) ||
	    (want == MAY_WRITE && !tfs__kafka_sticky_topic_ok(ctx, t))) {
		tfs_topic_unref(t);
		*err = E_TOPIC_AUTHORIZATION_FAILED;
		*msg = want == MAY_WRITE ? "no write permission on the topic"
		                         : "no read permission on the topic";
		return NULL;
	}
	return t;
}

/* ---- DescribeConfigs (32) ---- */

/* One entry of a Configs array. */
static void describe_entry(struct tfs_kafka_ctx *ctx, struct kw *w, const char *name,
                           const char *value, bool read_only, int8_t source, bool synonyms)
{
	int16_t v = ctx->api_version;

	kw_cstr(w, name);
	kw_cstr(w, value);
	kw_i8(w, read_only);
	if (v == 0)
		kw_i8(w, source == SRC_DEFAULT);        /* is_default */
	else
		kw_i8(w, source);
	kw_i8(w, 0);                                    /* is_sensitive: none are */
	if (v >= 1) {
		/* the value's own source is its one synonym, as Kafka lists it first */
		kw_array(w, synonyms ? 1 : 0);
		if (synonyms) {
			kw_cstr(w, name);
			kw_cstr(w, value);
			kw_i8(w, source);
			kw_tags(w);
		}
	}
	if (v >= 3) {
		kw_i8(w, config_type(name));
		kw_nullstr(w);                          /* documentation: docs/kafka.md */
	}
	kw_tags(w);
}

static bool key_wanted(const struct resource *rs, const char *name)
{
	if (rs->n < 0)
		return true;
	for (int32_t i = 0; i < rs->n; i++)
		if (slice_is(rs->e[i].name, name))
			return true;
	return false;
}

/* Writes the configs of a topic (w NULL: counts them); returns how many. */
static int32_t describe_topic(struct tfs_kafka_ctx *ctx, struct kw *w, struct tfs_topic *t,
                              const struct resource *rs, bool synonyms)
{
	const char *const *names = tfs_topic_config_names();
	struct tfs_topic_config c, mount;
	int32_t count = 0;

	tfs_topic_get_config(t, &c);
	tfs_engine_topic_defaults(ctx->k->engine, &mount);
	for (size_t i = 0; names[i]; i++) {
		char val[TFS_TOPIC_CONFIG_VALUE_MAX], def[TFS_TOPIC_CONFIG_VALUE_MAX];
		int8_t src;

		if (!key_wanted(rs, names[i]) ||
		    tfs_topic_config_get(&c, names[i], val, sizeof(val)) < 0 ||
		    tfs_topic_config_get(&mount, names[i], def, sizeof(def)) < 0)
			continue;
		if (strcmp(val, def) != 0)
			src = SRC_TOPIC;
		else
			src = tfs_topic_config_is_default(&c, names[i]) ? SRC_DEFAULT : SRC_STATIC_BROKER;
		if (w)
			describe_entry(ctx, w, names[i], val, false, src, synonyms);
		count++;
	}
	return count;
}

/* The listener's settings, read-only, for the broker resource (w NULL: counts). */
static int32_t describe_broker(struct tfs_kafka_ctx *ctx, struct kw *w, const struct resource *rs,
                               bool synonyms)
{
	const struct tfs_kafka_config *cfg = &ctx->k->cfg;
	char listeners[300], advertised[300], node[16], maxb[16], parts[16], threads[16];
	const char *scheme = cfg->sasl ? "SASL_PLAINTEXT" : "PLAINTEXT";
	const struct {
		const char *name, *value;
	} rows[] = {
		{ "node.id", node },
		{ "broker.id", node },
		{ "listeners", listeners },
		{ "advertised.listeners", advertised },
		{ "auto.create.topics.enable", cfg->auto_create_topics ? "true" : "false" },
		{ "socket.request.max.bytes", maxb },
		{ "num.partitions", parts },
		{ "num.network.threads", threads },
		{ "sasl.enabled.mechanisms", cfg->sasl ? tfs__kafka_sasl_mechanisms(cfg->sasl_mechanisms)
		                                       : "" },
	};
	int32_t count = 0;

	snprintf(listeners, sizeof(listeners), "%s://%s:%u", scheme, cfg->listener_host,
	         ctx->k->port);
	snprintf(advertised, sizeof(advertised), "%s://%s:%u", scheme, cfg->advertised_host,
	         cfg->advertised_port);
	snprintf(node, sizeof(node), "%d", (int)cfg->node_id);
	snprintf(maxb, sizeof(maxb), "%d", (int)cfg->request_max_bytes);
	snprintf(parts, sizeof(parts), "%d", (int)cfg->num_partitions);
	snprintf(threads, sizeof(threads), "%d", cfg->threads);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (!key_wanted(rs, rows[i].name))
			continue;
		if (w)
			describe_entry(ctx, w, rows[i].name, rows[i].value, true, SRC_STATIC_BROKER,
			               synonyms);
		count++;
	}
	return count;
}

/* The broker resource's name: this node's id, or "" (the cluster default, which
 * holds no dynamic configs here). */
static int16_t broker_name_check(const struct tfs_kafka_ctx *ctx, struct tfs_slice name,
                                 bool *empty, const char **msg)
{
	char id[16];

	snprintf(id, sizeof(id), "%d", (int)ctx->k->cfg.node_id);
	*empty = name.len == 0;
	if (*empty || slice_is(name, id))
		return E_NONE;
	*msg = "this listener is the only broker: name its node.id";
	return E_INVALID_REQUEST;
}

enum tfs_kafka_verdict tfs__kafka_describe_configs(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                   struct kw *w)
{
	int16_t v = ctx->api_version;
	int32_t n = kr_array(r, 4);
	struct resource *res = n > 0 ? calloc((size_t)n, sizeof(*res)) : NULL;
	bool synonyms = false;

	if (n > 0 && !res)
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		res[i].type = kr_i8(r);
		res[i].name = kr_str(r, NULL);
		res[i].n = kr_array(r, 1);
		if (res[i].n > 0 && !(res[i].e = calloc((size_t)res[i].n, sizeof(*res[i].e))))
			r->bad = true;
		for (int32_t j = 0; j < res[i].n && !r->bad; j++)
			res[i].e[j].name = kr_str(r, NULL);
		kr_tags(r);
	}
	if (v >= 1)
		synonyms = kr_i8(r) != 0;
	if (v >= 3)
		(void)kr_i8(r);                 /* include documentation: none is kept */
	if (!answer_start(ctx, r, w, res, n))
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n; i++) {
		const char *msg = NULL;
		int16_t err = E_NONE;
		struct tfs_topic *t = NULL;
		bool empty = false;

		if (res[i].type == RES_TOPIC)
			t = resource_topic(ctx, &res[i], MAY_READ, &err, &msg);
		else if (res[i].type == RES_BROKER)
			err = broker_name_check(ctx, res[i].name, &empty, &msg);
		else {
			err = E_INVALID_REQUEST;
			msg = NOT_SERVED;
		}
		result_head(w, err, msg, &res[i]);
		/* counted first: a compact count goes before its entries */
		if (err == E_NONE && t) {
			kw_array(w, describe_topic(ctx, NULL, t, &res[i], synonyms));
			describe_topic(ctx, w, t, &res[i], synonyms);
		} else if (err == E_NONE && !empty) {
			kw_array(w, describe_broker(ctx, NULL, &res[i], synonyms));
			describe_broker(ctx, w, &res[i], synonyms);
		} else {
			kw_array(w, 0);
		}
		kw_tags(w);
		if (t)
			tfs_topic_unref(t);
	}
	kw_tags(w);
	resources_free(res, n);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- AlterConfigs (33) and IncrementalAlterConfigs (44) ---- */

/* cleanup.policy, the one list-typed config, with one item added or taken away;
 * false if the result is no policy (Kafka refuses an empty list for it). */
static bool policy_edit(const char *cur, struct tfs_slice item, bool add, char *out, size_t cap)
{
	bool has_compact = strstr(cur, "compact") != NULL, has_delete = strstr(cur, "delete") != NULL;
	char it[CFG_NAME_MAX], *save = NULL;

	copy_str(item, it, sizeof(it));
	for (char *tok = strtok_r(it, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "compact"))
			has_compact = add;
		else if (!strcmp(tok, "delete"))
			has_delete = add;
		else
			return false;
	}
	if (!has_compact && !has_delete)
		return false;
	snprintf(out, cap, "%s%s%s", has_compact ? "compact" : "", has_compact && has_delete ? "," : "",
	         has_delete ? "delete" : "");
	return true;
}

/* Applies one topic resource; the error and its message (in msg_buf). */
static int16_t alter_topic(struct tfs_kafka_ctx *ctx, const struct resource *rs, bool incremental,
                           bool validate_only, char *msg_buf, const char **msg)
{
	const char **names = NULL, **values = NULL;
	char (*names_buf)[CFG_NAME_MAX] = NULL, (*values_buf)[TFS_TOPIC_CONFIG_VALUE_MAX] = NULL;
	struct tfs_topic_config cur;
	struct tfs_topic *t;
	int16_t err = E_NONE;
	size_t n = rs->n > 0 ? (size_t)rs->n : 0, bad = 0;
	int rc;

	t = resource_topic(ctx, rs, MAY_WRITE, &err, msg);
	if (!t)
		return err;
	if (n) {
		names = calloc(n, sizeof(*names));
		values = calloc(n, sizeof(*values));
		names_buf = calloc(n, sizeof(*names_buf));
		values_buf = calloc(n, sizeof(*values_buf));
		if (!names || !values || !names_buf || !values_buf) {
			err = E_UNKNOWN;
			*msg = "out of memory";
			goto out;
		}
	}
	tfs_topic_get_config(t, &cur);
	for (size_t i = 0; i < n && err == E_NONE; i++) {
		const struct res_entry *e = &rs->e[i];

		for (size_t j = 0; j < i; j++)
			if (e->name.len == rs->e[j].name.len &&
			    (e->name.len == 0 || !memcmp(e->name.p, rs->e[j].name.p, e->name.len))) {
				err = E_INVALID_REQUEST;
				*msg = "a config is named twice";
			}
		if (err != E_NONE)
			break;
		if (e->name.len >= CFG_NAME_MAX || e->value.len >= TFS_TOPIC_CONFIG_VALUE_MAX ||
		    (e->name.len && memchr(e->name.p, '\0', e->name.len)) ||
		    (e->value.len && memchr(e->value.p, '\0', e->value.len))) {
			err = E_INVALID_CONFIG;
			*msg = "a config name or value too long to be one";
			break;
		}
		copy_str(e->name, names_buf[i], CFG_NAME_MAX);
		copy_str(e->value, values_buf[i], TFS_TOPIC_CONFIG_VALUE_MAX);
		names[i] = names_buf[i];
		values[i] = values_buf[i];
		if ((!incremental || e->op == OP_SET) && e->value_null) {
			err = E_INVALID_REQUEST;
			snprintf(msg_buf, MSG_MAX, "null value for %s", names[i]);
			*msg = msg_buf;
		} else if (!incremental || e->op == OP_SET) {
			/* values[i] as given */
		} else if (e->op == OP_DELETE) {
			values[i] = NULL;           /* the mount's default again */
		} else if (e->op == OP_APPEND || e->op == OP_SUBTRACT) {
			char now[TFS_TOPIC_CONFIG_VALUE_MAX];
			if (config_type(names[i]) != TYPE_LIST || e->value_null ||
			    tfs_topic_config_get(&cur, names[i], now, sizeof(now)) < 0 ||
			    !policy_edit(now, e->value, e->op == OP_APPEND, values_buf[i],
			                 TFS_TOPIC_CONFIG_VALUE_MAX)) {
				err = E_INVALID_CONFIG;
				snprintf(msg_buf, MSG_MAX, "%s: %s is not allowed here", names[i],
				         e->op == OP_APPEND ? "APPEND" : "SUBTRACT");
				*msg = msg_buf;
			}
		} else {
			err = E_INVALID_REQUEST;
			*msg = "an unknown config operation";
		}
	}
	if (err != E_NONE)
		goto out;
	rc = tfs_topic_set_configs(t, !incremental, names, values, n, validate_only, &bad);
	if (rc == -EINVAL) {
		err = E_INVALID_CONFIG;
		snprintf(msg_buf, MSG_MAX, "%s=%s: not a config this topic can take (see topicfs(8))",
		         bad < n ? names[bad] : "?", bad < n && values[bad] ? values[bad] : "(default)");
		*msg = msg_buf;
	} else if (rc == TFS_EREADONLY) {
		err = E_KAFKA_STORAGE_ERROR;
		*msg = "the mount (or this topic's config file) is read-only";
	} else if (rc == -ENOENT) {
		err = E_UNKNOWN_TOPIC_OR_PARTITION;
		*msg = "no such topic";
	} else if (rc == -EPERM) {
		err = E_INVALID_REQUEST;
		*msg = "an internal topic: its config is the consumer groups' store's";
	} else if (rc < 0) {
		err = E_KAFKA_STORAGE_ERROR;
		*msg = tfs_strerror(rc);
	}
	if (err != E_NONE)
		tfs_log_warn("kafka", "config of %s refused: %s (error %d)", tfs_topic_name(t), *msg,
		             (int)err);
	else if (!validate_only && ctx->k->hooks.config_changed)
		ctx->k->hooks.config_changed(ctx->k->hooks.arg, t);
out:
	free(names);
	free(values);
	free(names_buf);
	free(values_buf);
	tfs_topic_unref(t);
	return err;
}

enum tfs_kafka_verdict tfs__kafka_alter_configs(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                struct kw *w, bool incremental)
{
	int32_t n = kr_array(r, 4);
	struct resource *res;
	bool validate_only;

	if (n > ALTER_RESOURCES_MAX) {
		tfs_log_warn("kafka", "closing a connection: an alteration of %d resources (at most %d)",
		             (int)n, ALTER_RESOURCES_MAX);
		return KAFKA_CLOSE;
	}
	res = n > 0 ? calloc((size_t)n, sizeof(*res)) : NULL;
	if (n > 0 && !res)
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		res[i].type = kr_i8(r);
		res[i].name = kr_str(r, NULL);
		res[i].n = kr_array(r, 2);
		if (res[i].n > ALTER_ENTRIES_MAX) {
			tfs_log_warn("kafka", "closing a connection: an alteration of %d configs of one "
			             "resource (at most %d)", (int)res[i].n, ALTER_ENTRIES_MAX);
			res[i].n = 0;
			r->bad = true;
			break;
		}
		if (res[i].n > 0 && !(res[i].e = calloc((size_t)res[i].n, sizeof(*res[i].e))))
			r->bad = true;
		for (int32_t j = 0; j < res[i].n && !r->bad; j++) {
			res[i].e[j].name = kr_str(r, NULL);
			if (incremental)
				res[i].e[j].op = kr_i8(r);
			res[i].e[j].value = kr_str(r, &res[i].e[j].value_null);
			kr_tags(r);
		}
		kr_tags(r);
	}
	validate_only = kr_i8(r) != 0;
	if (!answer_start(ctx, r, w, res, n))
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n; i++) {
		char msg_buf[MSG_MAX];
		const char *msg = NULL;
		int16_t err;
		bool empty;

		if (resource_repeated(res, n, i)) {
			err = E_INVALID_REQUEST;
			msg = "the resource is named twice";
		} else if (res[i].type == RES_TOPIC) {
			err = alter_topic(ctx, &res[i], incremental, validate_only, msg_buf, &msg);
		} else if (res[i].type == RES_BROKER) {
			err = broker_name_check(ctx, res[i].name, &empty, &msg);
			if (err == E_NONE && res[i].n > 0) {
				err = E_INVALID_REQUEST;
				msg = "the broker's settings are mount options: not changed over the "
				      "protocol";
			}
		} else {
			err = E_INVALID_REQUEST;
			msg = NOT_SERVED;
		}
		result_head(w, err, msg, &res[i]);
		kw_tags(w);
	}
	kw_tags(w);
	resources_free(res, n);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}
