/* fuzz_kafka.c - the Kafka listener's request decoder and handlers
 * (kafka/api.c, kafka/wire.c) on a real engine, without sockets: the frames a
 * client sends, as the event loop hands them to tfs_kafka_handle.
 *
 * Input layout: frames, each [u16 little-endian length][that many bytes] (a
 * request frame without its int32 size: api key, version, correlation id,
 * client id, body), at most 16.
 *
 * The connection acts as a local user (uid 12345) who owns topic "f" (one
 * partition) but may not write the root: it can produce to and read "f", and
 * every CreateTopics, DeleteTopics and auto-creation is refused after its checks,
 * so inputs do not grow the data directory. __consumer_offsets exists from the
 * start (a first offset commit would create it), and each input has a group
 * coordinator of its own (kafka/group.h) with no initial rebalance delay.
 *
 * Properties:
 *   - a response frame is whole: its size field counts the bytes and spans that
 *     follow it, and it echoes the request's correlation id;
 *   - a request that closes the connection (unparsable, unknown key or version)
 *     and is not a Produce changed nothing: the log end offset of f/0 and the
 *     topic count are as before; every Produce that got an answer moved the log
 *     end by at most the records it named;
 *   - nothing crashes, leaks or reads out of bounds (the sanitizers).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fs/mount.h"
#include "engine/groups/groups.h"
#include "kafka/group.h"
#include "kafka/kafka_internal.h"
#include "tests/fuzz/fz.h"

#define FRAMES_MAX 16
#define RECREATE_BYTES (1 << 20)
#define PEER_UID 12345

static struct tfs_mount *mount;
static char *mount_dir;
static struct tfs_kafka_creds *creds;

/* One principal (password "fuzz-secret"), root's: an input that opens with a SASL
 * request runs as a connection of a SASL_PLAINTEXT listener. */
static const char creds_text[] =
	"fuzz 0 SCRAM-SHA-256=salt=c2FsdHNhbHRzYWx0c2FsdA==,"
	"stored_key=DGepPK4oLD2RiDR0JKFMddQZBJJO17PYlsy7YbgZFLw=,"
	"server_key=/CQQSdYWNCNp7H2u+q86PEtsxc8hZQ+yYVsrQu1ESJs=,iterations=4096\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet_logs();
	mount = fz_mount_open(&mount_dir);
	{
		char text[sizeof(creds_text)];
		memcpy(text, creds_text, sizeof(text));
		FZ_CHECK(tfs__kafka_creds_parse(text, "fuzz", &creds) == 0, "credentials");
	}
	{
		struct tfs_topic *t = fz_topic(mount, "f", RECREATE_BYTES);
		struct tfs_group_commit c = { .topic = "f", .offset = 0, .leader_epoch = -1 };
		FZ_CHECK(tfs_groups_commit(tfs_engine_groups(mount->engine), "fz", -1, &c, 1, -1) == 0,
		         "the first commit (creates __consumer_offsets)");
		tfs_topic_unref(t);
	}
	return 0;
}

static size_t topic_count(void)
{
	char **names = NULL;
	size_t n = 0;

	FZ_CHECK(tfs_engine_topic_names(mount->engine, &names, &n) == 0, "topic names");
	free(names);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct tfs_kafka k;
	struct tfs_kafka_peer peer = { .local = true, .uid = PEER_UID, .gid = PEER_UID };
	struct tfs_kafka_sasl sasl;
	struct tfs_topic *t;
	struct tfs_plog *pl;

	if (!mount)
		LLVMFuzzerInitialize(NULL, NULL);
	t = fz_topic(mount, "f", RECREATE_BYTES);
	FZ_CHECK(tfs_topic_set_owner(t, PEER_UID, PEER_UID) == 0, "owner of f");
	pl = tfs_topic_partition(t, 0);
	memset(&k, 0, sizeof(k));
	k.engine = mount->engine;
	tfs_kafka_config_defaults(&k.cfg);
	strcpy(k.cfg.listener_host, "127.0.0.1");
	strcpy(k.cfg.advertised_host, "127.0.0.1");
	k.cfg.listener_port = k.cfg.advertised_port = 9092;
	strcpy(k.cluster_id, "fuzzcluster");
	k.root_uid = 0;
	k.root_gid = 0;
	k.root_mode = 0755;
	k.listen_fd = -1;
	k.creds = creds;
	/* a SASL connection when the first frame is a SASL request (key at offset 2) */
	k.cfg.sasl = size >= 4 && data[2] == 0 && (data[3] == API_SASL_HANDSHAKE ||
	                                           data[3] == API_SASL_AUTHENTICATE);
	tfs__kafka_sasl_init(&sasl, k.cfg.sasl);
	if (k.cfg.sasl)
		peer = (struct tfs_kafka_peer){ .uid = (uid_t)-1, .gid = (gid_t)-1 };
	FZ_CHECK(tfs_kgroups_create(&k, tfs_engine_groups(mount->engine), 0, 0, &k.groups) == 0,
	         "group coordinator");

	for (int f = 0; f < FRAMES_MAX && in.len > 0; f++) {
		size_t want = fz_u16(&in), got;
		const uint8_t *p = fz_take(&in, want, &got);
		uint8_t *frame = malloc(got ? got : 1);
		struct tfs_kafka_ctx ctx = { .k = &k, .peer = &peer, .sasl = &sasl, .conn_id = 1,
		                             .peer_host = "/127.0.0.1" };
		bool raw = tfs__kafka_sasl_raw(&sasl);
		int64_t before = fz_log_end(pl);
		size_t topics = topic_count();
		enum tfs_kafka_verdict v;
		struct kw w;

		if (got)
			memcpy(frame, p, got);          /* the handler may stamp a batch in place */
		ctx.now_ms = ctx.parked_at_ms = tfs_mono_ms();
		kw_init(&w);
		v = raw ? tfs__kafka_sasl_raw_token(&ctx, frame, got, &w)
		        : tfs_kafka_handle(&ctx, frame, got, &w);
		FZ_CHECK(v == KAFKA_REPLY || v == KAFKA_NO_REPLY || v == KAFKA_PARK || v == KAFKA_CLOSE,
		         "verdict %d", (int)v);
		if (v == KAFKA_REPLY && !w.oom && !raw) {
			uint32_t n;
			FZ_CHECK(w.len >= 8, "a response of %zu bytes", w.len);
			n = ((uint32_t)w.buf[0] << 24) | ((uint32_t)w.buf[1] << 16) |
			    ((uint32_t)w.buf[2] << 8) | w.buf[3];
			FZ_CHECK(n == w.len + w.span_bytes - 4, "size field %u for %zu + %zu bytes", n,
			         w.len, w.span_bytes);
			FZ_CHECK(got >= 8 && !memcmp(w.buf + 4, frame + 4, 4), "correlation id not echoed");
		}
		if (v == KAFKA_CLOSE && ctx.api_key != 0) {
			FZ_CHECK(fz_log_end(pl) == before, "a closed request appended");
			FZ_CHECK(topic_count() == topics, "a closed request created or deleted a topic");
		}
		FZ_CHECK(topic_count() <= topics, "a refused user created a topic");
		kw_free(&w);
		free(frame);
	}
	tfs__kafka_sasl_release(&sasl);
	tfs_kgroups_destroy(k.groups);
	tfs_topic_unref(t);
	return 0;
}
