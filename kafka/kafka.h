/* kafka.h - the Kafka listener: Kafka's wire protocol served from the mount
 * daemon, over the same engine, so that producers and consumers write and read
 * the records the mount shows as files (docs/kafka.md).
 *
 * Owns: its listening socket, a fixed pool of event-loop threads (never one per
 * connection), every connection and its buffers, the cluster id read from or
 * written to DATA_DIR/meta.properties.
 *
 * Layers: kafka/ -> engine/ -> io/, like fs/; no FUSE here. What the other door
 * must learn of a change made here (the kernel's caches of a key or a topic) is
 * told through struct tfs_kafka_hooks, which the mount daemon fills.
 *
 * Security: without SASL a listener binds a loopback address only; any other
 * address is refused unless kafka_allow_remote is set, and each connection acts
 * as the Unix user the kernel names for it. A SASL_PLAINTEXT listener (kafka/
 * sasl.c) may bind any address: each connection authenticates (PLAIN or
 * SCRAM-SHA-256) as a principal of the credentials file, which names the Unix
 * user it acts as. Either way the engine's topic owners and modes are checked as
 * the mount's kernel checks them (kafka/access.c).
 *
 * Threads: tfs_kafka_start / tfs_kafka_stop from one thread; the hooks are
 * called from the listener's threads, holding none of its locks.
 * Errors: 0 or a negative errno / TFS_E* code; every failure is logged once.
 */
#ifndef TFS_KAFKA_H
#define TFS_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/log/partition_log.h"

struct tfs_engine;
struct tfs_topic;
struct tfs_kafka;

#define TFS_KAFKA_REQUEST_MAX_DEFAULT (100 * 1024 * 1024)   /* socket.request.max.bytes */
#define TFS_KAFKA_THREADS_DEFAULT 2
/* queued.max.request.bytes: Kafka's default is -1 (no bound); a mount bounds what
 * its clients can make it buffer by default, to one largest request's worth */
#define TFS_KAFKA_QUEUED_MAX_DEFAULT (100 * 1024 * 1024)
#define TFS_KAFKA_INITIAL_REBALANCE_DELAY_MS 3000  /* group.initial.rebalance.delay.ms */
/* group.max.size: Kafka's default is 2^31-1; a mount bounds one group's members */
#define TFS_KAFKA_GROUP_MAX_SIZE_DEFAULT 1000
#define TFS_KAFKA_AUTH_FAIL_DELAY_MS 100   /* connection.failed.authentication.delay.ms */

enum {
	TFS_KAFKA_SASL_PLAIN = 1,          /* RFC 4616 */
	TFS_KAFKA_SASL_SCRAM_SHA_256 = 2,  /* RFC 5802 / 7677 */
};

/* The listener's settings by Kafka's broker names (tfs_kafka_config_set). */
struct tfs_kafka_config {
	char listener_host[256];           /* listeners=PLAINTEXT://HOST:PORT; "" = off */
	uint16_t listener_port;
	char advertised_host[256];         /* advertised.listeners; "" = the listener's */
	uint16_t advertised_port;
	int32_t node_id;                   /* node.id, default 1 */
	bool auto_create_topics;           /* auto.create.topics.enable, default true */
	int32_t request_max_bytes;         /* socket.request.max.bytes */
	int64_t queued_max_bytes;          /* queued.max.request.bytes; -1: no bound */
	int32_t num_partitions;            /* num.partitions; 0: the mount's partitions */
	int threads;                       /* num.network.threads, 1..64 */
	bool allow_remote;                 /* kafka_allow_remote: bind a non-loopback
	                                    * address without authentication */
	bool sasl;                         /* listeners=SASL_PLAINTEXT://: every
	                                    * connection authenticates first */
	unsigned sasl_mechanisms;          /* sasl.enabled.mechanisms: TFS_KAFKA_SASL_*
	                                    * bits, default both */
	char sasl_credentials[4096];       /* kafka_sasl_credentials: the file of
	                                    * principals (docs/kafka.md, SASL) */
	int64_t group_initial_rebalance_delay_ms;  /* how long a new group waits for
	                                    * more members before its first generation */
	int32_t group_max_size;            /* group.max.size: members (and pending member
	                                    * ids) of one group */
	int32_t auth_fail_delay_ms;        /* connection.failed.authentication.delay.ms:
	                                    * how long a SASL failure waits for its answer */
};

void tfs_kafka_config_defaults(struct tfs_kafka_config *c);
/* NULL-terminated names tfs_kafka_config_set knows. */
const char *const *tfs_kafka_config_names(void);
/* Sets one setting by its name. -ENOENT: not a listener setting; -EINVAL: a bad
 * value (*why says what is expected). */
int tfs_kafka_config_set(struct tfs_kafka_config *c, const char *name, const char *value,
                         const char **why);
static inline bool tfs_kafka_config_enabled(const struct tfs_kafka_config *c)
{
	return c->listener_host[0] != '\0';
}

/* What the listener tells the mount of its changes. Every callback may be NULL;
 * arguments are borrowed for the call. */
struct tfs_kafka_hooks {
	void *arg;
	/* Records a client produced are committed (the keys' files changed). */
	void (*records)(void *arg, struct tfs_topic *t, int32_t partition,
	                const struct tfs_append_rec *recs, size_t count);
	/* A client created (name) or deleted (t, still referenced) a topic. */
	void (*topic_created)(void *arg, const char *name);
	void (*topic_deleted)(void *arg, struct tfs_topic *t);
	/* A client changed the topic's config (AlterConfigs, IncrementalAlterConfigs). */
	void (*config_changed)(void *arg, struct tfs_topic *t);
	/* DeleteRecords: these keys of the partition had no record left (their files
	 * vanished without a tombstone). */
	void (*records_deleted)(void *arg, struct tfs_topic *t, int32_t partition,
	                        const struct tfs_slice *keys, size_t n);
};

/* Reads or creates DATA_DIR/meta.properties, binds the listener and starts its
 * threads. -EPERM (logged) for a non-loopback address without allow_remote,
 * -EADDRINUSE and the like from bind, -EINVAL for a meta.properties that names
 * another node.id. Caller owns *out; tfs_kafka_stop. */
int tfs_kafka_start(struct tfs_engine *e, const struct tfs_kafka_config *cfg,
                    const struct tfs_kafka_hooks *hooks, struct tfs_kafka **out);
/* Closes every connection, stops the threads, frees. NULL ok. */
void tfs_kafka_stop(struct tfs_kafka *k);
/* The port bound (the listener's, or the kernel's choice for port 0). */
uint16_t tfs_kafka_port(const struct tfs_kafka *k);
/* Writes the listener's metrics (Prometheus text: connections, parked requests,
 * their retries) to f. NULL k writes nothing. */
void tfs_kafka_write_metrics(struct tfs_kafka *k, FILE *f);

#endif
