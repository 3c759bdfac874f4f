/* api_records.c - DeleteRecords (21) v0-2: a client moves partitions' log start
 * offsets up (kafka-console's kafka-delete-records.sh, KafkaJS's
 * admin.deleteTopicRecords, librdkafka's rd_kafka_DeleteRecords).
 *
 * Each partition's offset goes to the engine (tfs_engine_delete_records), which
 * persists it in DATA_DIR/log-start-offset-checkpoint before anything below it
 * disappears; -1 is the high watermark (the log end here). The answer per
 * partition is its low watermark (the log start after) and an error: 1
 * OFFSET_OUT_OF_RANGE for an offset past the high watermark or below -1, 3 for
 * an unknown topic or partition, 29 TOPIC_AUTHORIZATION_FAILED unless the
 * connection's user may write the topic's directory (the mount's rule for a
 * deletion, as for a tombstone), 44 for the internal __consumer_offsets, 56
 * KAFKA_STORAGE_ERROR for a read-only mount or a failed write. The keys whose
 * newest record was below go from the key directory, and the mount learns of
 * them (hooks.records_deleted). The request is parsed whole before anything is
 * done; the timeout is unused (the work is done when the answer leaves).
 */
#include "kafka/kafka_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "io/log.h"

#define MAY_WRITE_DIR 3                 /* -wx: what deleting from a directory needs */
#define PART_MIN_BYTES 12               /* partition index + offset */
#define TOPIC_MIN_BYTES 2               /* a name and an array, compact */

struct dr_part {
	int32_t index;
	int64_t offset, low;
	int16_t err;
};

struct dr_topic {
	struct tfs_slice name;
	struct dr_part *parts;
	int32_t n;
};

struct gone_ctx {
	struct tfs_kafka_ctx *ctx;
	struct tfs_topic *t;
	int32_t partition;
};

static void keys_gone(void *arg, const struct tfs_slice *keys, size_t n)
{
	struct gone_ctx *g = arg;

	if (g->ctx->k->hooks.records_deleted)
		g->ctx->k->hooks.records_deleted(g->ctx->k->hooks.arg, g->t, g->partition, keys, n);
}

static int16_t error_of(int rc)
{
	switch (rc) {
	case 0:
		return E_NONE;
	case -ERANGE:
		return E_OFFSET_OUT_OF_RANGE;
	case -ENOENT:
		return E_UNKNOWN_TOPIC_OR_PARTITION;
	case -EPERM:
		return E_POLICY_VIOLATION;
	default:
		return E_KAFKA_STORAGE_ERROR;   /* read-only, a full or failing disk */
	}
}

static void delete_topic(struct tfs_kafka_ctx *ctx, struct dr_topic *dt)
{
	struct name_buf name;
	struct tfs_topic *t = NULL;
	int16_t err = E_NONE;

	if (!tfs__kafka_topic_name(dt->name, &name) || !(t = tfs__kafka_topic_get(ctx, name.s))) {
		err = E_UNKNOWN_TOPIC_OR_PARTITION;
	} else if (!tfs__kafka_may_topic(ctx, t, MAY_WRITE_DIR)) {
		err = E_TOPIC_AUTHORIZATION_FAILED;
		tfs_log_warn("kafka", "DeleteRecords of %s refused: uid %d may not write the topic",
		             name.s, (int)ctx->peer->uid);
	} else if (!tfs__kafka_sticky_topic_ok(ctx, t)) {
		/* the mount's way is a user.* attribute of the partition directory,
		 * which the kernel keeps to the owner of a sticky one */
		err = E_TOPIC_AUTHORIZATION_FAILED;
		tfs_log_warn("kafka", "DeleteRecords of %s refused: uid %d does not own the "
		             "sticky topic", name.s, ctx->peer->local ? (int)ctx->peer->uid : -1);
	}
	for (int32_t i = 0; i < dt->n; i++) {
		struct dr_part *p = &dt->parts[i];
		struct gone_ctx g = { ctx, t, p->index };
		p->low = -1;
		p->err = err;
		if (err == E_NONE)
			p->err = error_of(tfs_engine_delete_records(ctx->k->engine, t, p->index,
			                                            p->offset, keys_gone, &g, &p->low));
		if (p->err != E_NONE)
			p->low = -1;                /* Kafka's answer with an error */
	}
	tfs_topic_unref(t);
}

enum tfs_kafka_verdict tfs__kafka_delete_records(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                 struct kw *w)
{
	int32_t n = kr_array(r, TOPIC_MIN_BYTES);
	struct dr_topic *ts = n > 0 ? calloc((size_t)n, sizeof(*ts)) : NULL;
	enum tfs_kafka_verdict v = KAFKA_REPLY;

	if (n > 0 && !ts)
		return KAFKA_CLOSE;
	for (int32_t i = 0; i < n && !r->bad; i++) {
		ts[i].name = kr_str(r, NULL);
		ts[i].n = kr_array(r, PART_MIN_BYTES);
		if (ts[i].n > 0 && !(ts[i].parts = calloc((size_t)ts[i].n, sizeof(*ts[i].parts))))
			r->bad = true;
		for (int32_t k = 0; k < ts[i].n && !r->bad; k++) {
			ts[i].parts[k].index = kr_i32(r);
			ts[i].parts[k].offset = kr_i64(r);
			kr_tags(r);
		}
		if (ts[i].n < 0)
			r->bad = true;
		kr_tags(r);
	}
	(void)kr_i32(r);                        /* timeout */
	kr_tags(r);
	if (r->bad || kr_left(r) || n < 0) {
		v = KAFKA_CLOSE;
		goto out;
	}
	for (int32_t i = 0; i < n; i++)
		delete_topic(ctx, &ts[i]);
	tfs__kafka_begin(w, ctx, ctx->flex);
	kw_i32(w, 0);                           /* throttle */
	kw_array(w, n);
	for (int32_t i = 0; i < n; i++) {
		kw_str(w, ts[i].name.p, ts[i].name.len);
		kw_array(w, ts[i].n);
		for (int32_t k = 0; k < ts[i].n; k++) {
			kw_i32(w, ts[i].parts[k].index);
			kw_i64(w, ts[i].parts[k].low);
			kw_i16(w, ts[i].parts[k].err);
			kw_tags(w);
		}
		kw_tags(w);
	}
	kw_tags(w);
	tfs__kafka_finish(w);
out:
	for (int32_t i = 0; ts && i < n; i++)
		free(ts[i].parts);
	free(ts);
	return v;
}
