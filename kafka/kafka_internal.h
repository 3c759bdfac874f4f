/* kafka_internal.h - what the listener's files share: the wire codec (wire.c),
 * the request handlers (api_*.c), the event loop (server.c), the settings
 * (config.c) and the access checks (access.c). Not for use outside kafka/. */
#ifndef TFS_KAFKA_INTERNAL_H
#define TFS_KAFKA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/log/plog_fetch.h"
#include "engine/types.h"
#include "kafka/kafka.h"

struct tfs_io;
struct tfs_engine;

#define TFS_KAFKA_CLUSTER_ID_MAX 64

/* ---- config.c ---- */
/* Parses "PLAINTEXT://HOST:PORT" or "SASL_PLAINTEXT://HOST:PORT" (*sasl says
 * which; "[v6]:PORT" too; HOST may be empty). -EINVAL. */
int tfs_kafka_listener_parse(const char *s, char *host, size_t cap, uint16_t *port, bool *sasl);
/* Parses a comma list of PLAIN and SCRAM-SHA-256 into TFS_KAFKA_SASL_* bits. -EINVAL. */
int tfs_kafka_mechanisms_parse(const char *s, unsigned *out);
/* Parses meta.properties text: cluster.id (required, 1..63 of [A-Za-z0-9_-]) and
 * node.id or broker.id (*node_id -1 when absent). -EINVAL with *why. */
int tfs_kafka_meta_parse(const char *text, char cluster_id[TFS_KAFKA_CLUSTER_ID_MAX],
                         int32_t *node_id, const char **why);
/* Reads DATA_DIR/meta.properties, or writes a new one (unless read_only). */
int tfs_kafka_meta_load(struct tfs_io *io, const char *data_dir, int32_t node_id, bool read_only,
                        char cluster_id[TFS_KAFKA_CLUSTER_ID_MAX]);

/* ---- wire.c: Kafka's primitive types, bounds-checked ----
 *
 * A reader never reads past its buffer: the first short or malformed field sets
 * bad, and every later read returns zeros, so a handler checks bad once, after
 * parsing. Counts of arrays are checked against the bytes left (each element
 * takes at least one byte), so no count can make a handler allocate more than
 * the request's size. flex: KIP-482 compact encodings and tagged fields. */
struct kr {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
	bool flex;
};

void kr_init(struct kr *r, const void *p, size_t len, bool flex);
int8_t kr_i8(struct kr *r);
int16_t kr_i16(struct kr *r);
int32_t kr_i32(struct kr *r);
int64_t kr_i64(struct kr *r);
uint32_t kr_uvarint(struct kr *r);
/* A (nullable) string: *null set for a null one (NULL allowed: null is bad). */
struct tfs_slice kr_str(struct kr *r, bool *null);
/* A classic int16-length nullable string (the request header's client id). */
struct tfs_slice kr_str16(struct kr *r);
/* Bytes / records: int32 length (compact: uvarint length + 1); null = *null. */
struct tfs_slice kr_bytes(struct kr *r, bool *null);
/* An array count: -1 for null (min_elem: the smallest encoding of one element). */
int32_t kr_array(struct kr *r, size_t min_elem);
/* Skips a tagged-field section (flex only; a no-op otherwise). */
void kr_tags(struct kr *r);
bool kr_left(const struct kr *r);

/* A response under construction: bytes, and holes where spans of a segment file
 * go (a Fetch's records leave by sendfile from the file). */
struct kw_hole {
	size_t at;                          /* bytes of buf before the span */
	struct tfs_plog_span span;          /* owns its segment reference */
};

struct kw {
	uint8_t *buf;
	size_t len, cap;
	bool oom;
	bool flex;
	struct kw_hole *holes;
	size_t nholes, hcap;
	size_t span_bytes;                  /* the holes' lengths */
};

void kw_init(struct kw *w);
void kw_free(struct kw *w);
void kw_i8(struct kw *w, int8_t v);
void kw_i16(struct kw *w, int16_t v);
void kw_i32(struct kw *w, int32_t v);
void kw_i64(struct kw *w, int64_t v);
void kw_uvarint(struct kw *w, uint32_t v);
void kw_str(struct kw *w, const void *s, size_t len);
void kw_cstr(struct kw *w, const char *s);
void kw_nullstr(struct kw *w);
void kw_array(struct kw *w, int32_t n);     /* -1: null */
void kw_tags(struct kw *w);                 /* an empty tagged-field section (flex) */
void kw_raw(struct kw *w, const void *p, size_t len);
size_t kw_mark(const struct kw *w);
void kw_patch_i32(struct kw *w, size_t at, int32_t v);
/* Appends a span of a segment file (takes the reference). */
void kw_span(struct kw *w, struct tfs_plog_span span);

/* ---- access.c: who a connection acts as ---- */
struct tfs_kafka_peer {
	bool local;                         /* the uid below is known */
	uid_t uid;
	gid_t gid;
	gid_t groups[64];
	int ngroups;
};
/* Fills *p for the connection fd: the Unix user that opened a loopback
 * connection, asked of the kernel's socket table (sock_diag, as ss(8) does), and
 * that user's groups; for any other peer, or if the kernel does not say, no
 * user: only the "others" permission bits apply. */
void tfs_kafka_peer_identify(int fd, struct tfs_kafka_peer *p);
/* Fills *p as the Unix user uid with its gid and groups from the user database
 * (a SASL principal's user). -ENOENT: no such user (*p then has the uid alone). */
int tfs_kafka_peer_of_user(uid_t uid, struct tfs_kafka_peer *p);
/* The kernel's check of mode bits for want (4 read, 2 write, 1 search) on a file
 * owned by uid/gid: root passes, then owner, group, others bits. */
bool tfs_kafka_peer_may(const struct tfs_kafka_peer *p, uid_t uid, gid_t gid, mode_t mode,
                        int want);

/* ---- sasl.c: SASL on a SASL_PLAINTEXT listener ---- */
struct tfs_kafka_cred;
struct tfs_kafka_creds;

enum tfs_kafka_sasl_state {
	SASL_OFF = 0,                       /* a PLAINTEXT listener */
	SASL_WANT_HANDSHAKE,
	SASL_WANT_AUTHENTICATE,             /* after SaslHandshake v1 */
	SASL_RAW,                           /* after SaslHandshake v0: bare tokens */
	SASL_DONE,
	SASL_FAILED,
};

/* One connection's authentication (the state diagram is in sasl.c). */
struct tfs_kafka_sasl {
	enum tfs_kafka_sasl_state state;
	unsigned mech;                      /* TFS_KAFKA_SASL_* chosen by the handshake */
	bool state_scram_final;             /* SCRAM: server-first sent */
	const struct tfs_kafka_cred *cred;  /* SCRAM: the principal of client-first */
	size_t nonce_len;                   /* SCRAM: of the combined nonce */
	char *client_first_bare, *server_first;     /* SCRAM: owned, for AuthMessage */
	struct tfs_kafka_cred *mock;        /* SCRAM: an unknown principal's stand-in
	                                     * (sasl.c), owned; never authenticates */
	int64_t fail_due_ms;                /* a failure is answered (or, raw, closes the
	                                     * connection) at this time; 0: none due */
	bool fail_raw;                      /* that failure was of a bare token */
};

/* Loads the credentials file (sasl.c says its format and the modes it must
 * have). -EINVAL, -EPERM, -ENOENT..., logged naming the file and the entry.
 * Caller owns *out: tfs__kafka_creds_free (NULL ok). */
int tfs__kafka_creds_load(const char *path, struct tfs_kafka_creds **out);
/* Parses the text of one (modified in place); path names it in log lines. */
int tfs__kafka_creds_parse(char *text, const char *path, struct tfs_kafka_creds **out);
void tfs__kafka_creds_free(struct tfs_kafka_creds *cs);
void tfs__kafka_sasl_init(struct tfs_kafka_sasl *s, bool required);
void tfs__kafka_sasl_release(struct tfs_kafka_sasl *s);
/* Whether a request of api_key may be served in this state (NULL: no SASL). */
bool tfs__kafka_sasl_allows(const struct tfs_kafka_sasl *s, int16_t api_key);
/* The next frame is a bare SASL token, not a request. */
bool tfs__kafka_sasl_raw(const struct tfs_kafka_sasl *s);
/* "PLAIN,SCRAM-SHA-256" and the like, for TFS_KAFKA_SASL_* bits. Static. */
const char *tfs__kafka_sasl_mechanisms(unsigned m);

/* ---- api.c: requests ---- */
struct tfs_kafka_ctx {
	struct tfs_kafka *k;
	struct tfs_kafka_peer *peer;        /* set by a SASL success */
	struct tfs_kafka_sasl *sasl;        /* the connection's; NULL: no SASL */
	int16_t api_key, api_version;
	int32_t correlation_id;
	struct tfs_slice client_id;
	bool flex;                          /* the request (and response) are flexible */
	int64_t now_ms;                     /* monotonic, of this attempt */
	int64_t parked_at_ms;               /* first attempt of a parked request */
	int64_t wake_at_ms;                 /* set with KAFKA_PARK: try again by then */
	bool park_clock_only;               /* with KAFKA_PARK: only wake_at_ms ends the
	                                     * wait (no append, no group change can) */
	uint64_t conn_id;                   /* the connection's, unique while listening */
	bool retry;                         /* a parked request handled again */
	const char *peer_host;              /* "/ADDRESS" as Java prints it, or "" */
};

enum tfs_kafka_verdict {
	KAFKA_REPLY = 0,                    /* send the response in the writer */
	KAFKA_NO_REPLY = 1,                 /* acks=0: nothing to send */
	KAFKA_PARK = 2,                     /* a long poll: try again after a wake-up */
	KAFKA_CLOSE = -1,                   /* close the connection (Kafka's answer to a
	                                     * bad frame or an acks=0 error) */
};

/* Parses the request header of frame (without its size) into ctx and returns
 * the offset of the body, or -1 for a frame that must close the connection
 * (too short, unknown key, a version outside the advertised range except for
 * ApiVersions). *flex: whether the body and response are flexible. */
int tfs_kafka_parse_header(struct tfs_kafka_ctx *ctx, const uint8_t *frame, size_t len,
                           bool *flex, bool *resp_flex);
/* Handles one request: writes the whole response frame (size included) into w. */
enum tfs_kafka_verdict tfs_kafka_handle(struct tfs_kafka_ctx *ctx, const uint8_t *frame,
                                        size_t len, struct kw *w);
/* The listener as the handlers see it (server.c fills it). */
struct tfs_kafka {
	struct tfs_engine *engine;          /* borrowed */
	struct tfs_kafka_config cfg;
	struct tfs_kafka_hooks hooks;
	char cluster_id[TFS_KAFKA_CLUSTER_ID_MAX];
	struct tfs_kafka_creds *creds;      /* a SASL listener's principals, owned */
	uid_t root_uid;                     /* the data directory's owner and mode: the */
	gid_t root_gid;                     /* mount's root, which creating or deleting */
	mode_t root_mode;                   /* a topic needs write permission on */
	int listen_fd;
	uint16_t port;
	int nloops;
	struct tfs_kafka_loop *loops;
	atomic_int parked;                  /* parked fetches of all loops (a wake-up
	                                     * with none is skipped) */
	atomic_uint_fast64_t appends;       /* appends seen by the hook: a loop that
	                                     * parked while one happened looks again */
	/* queued.max.request.bytes (server.c, (5)): bytes of input buffers beyond
	 * each connection's first READ_CHUNK, and of responses waiting to be sent,
	 * over all connections; and how many connections stopped reading for it */
	atomic_size_t queued;
	atomic_int starved;
	atomic_uint_fast64_t conns;         /* connection ids handed out */
	atomic_int open_conns;              /* connections now (metrics) */
	atomic_int timed;                   /* parked on the clock alone (server.c) */
	atomic_uint_fast64_t park_retries;  /* parked requests handled again */
	struct tfs_kgroups *groups;         /* the group coordinator (group.h) */
};
/* ---- api.c: what the handlers of every api_*.c share ---- */

/* Kafka's API keys served (ApiVersions lists their ranges, api.c). */
enum {
	API_PRODUCE = 0,
	API_FETCH = 1,
	API_LIST_OFFSETS = 2,
	API_METADATA = 3,
	API_API_VERSIONS = 18,
	API_CREATE_TOPICS = 19,
	API_DELETE_TOPICS = 20,
	API_SASL_HANDSHAKE = 17,
	API_DELETE_RECORDS = 21,
	API_INIT_PRODUCER_ID = 22,
	API_DESCRIBE_CONFIGS = 32,
	API_ALTER_CONFIGS = 33,
	API_SASL_AUTHENTICATE = 36,
	API_INCREMENTAL_ALTER_CONFIGS = 44,
};

/* Kafka's error codes (clients/.../common/protocol/Errors.java). */
enum {
	E_UNKNOWN = -1,
	E_NONE = 0,
	E_OFFSET_OUT_OF_RANGE = 1,
	E_CORRUPT_MESSAGE = 2,
	E_UNKNOWN_TOPIC_OR_PARTITION = 3,
	E_MESSAGE_TOO_LARGE = 10,
	E_INVALID_TOPIC = 17,
	E_CLUSTER_AUTHORIZATION_FAILED = 31,
	E_UNSUPPORTED_SASL_MECHANISM = 33,
	E_ILLEGAL_SASL_STATE = 34,
	E_INVALID_REQUIRED_ACKS = 21,
	E_TOPIC_AUTHORIZATION_FAILED = 29,
	E_UNSUPPORTED_VERSION = 35,
	E_TOPIC_ALREADY_EXISTS = 36,
	E_INVALID_PARTITIONS = 37,
	E_INVALID_REPLICATION_FACTOR = 38,
	E_INVALID_REPLICA_ASSIGNMENT = 39,
	E_INVALID_CONFIG = 40,
	E_INVALID_REQUEST = 42,
	E_OUT_OF_ORDER_SEQUENCE = 45,
	E_INVALID_PRODUCER_EPOCH = 47,
	E_POLICY_VIOLATION = 44,
	E_KAFKA_STORAGE_ERROR = 56,
	E_SASL_AUTHENTICATION_FAILED = 58,
	E_FETCH_SESSION_ID_NOT_FOUND = 70,
	E_FENCED_LEADER_EPOCH = 74,
	E_UNKNOWN_LEADER_EPOCH = 75,
	E_UNSUPPORTED_COMPRESSION_TYPE = 76,
	E_INVALID_RECORD = 87,
};

struct name_buf {
	char s[256];
};

/* Response frame: size, correlation id, header tags (resp_flex); the size is
 * patched in by tfs__kafka_finish. */
void tfs__kafka_begin(struct kw *w, const struct tfs_kafka_ctx *ctx, bool resp_flex);
void tfs__kafka_finish(struct kw *w);
/* Copies a topic name out of the request; false if it cannot be one (too long,
 * NUL inside): the caller answers INVALID_TOPIC. */
bool tfs__kafka_topic_name(struct tfs_slice s, struct name_buf *out);
/* A new reference to the named topic unless absent or being deleted; NULL. */
struct tfs_topic *tfs__kafka_topic_get(struct tfs_kafka_ctx *ctx, const char *name);
/* The mount's rule for the connection's user: search on the root, then want
 * (4 read, 2 write, 1 search bits) on the topic / on the root. */
bool tfs__kafka_may_topic(const struct tfs_kafka_ctx *ctx, struct tfs_topic *t, int want);
bool tfs__kafka_may_root(const struct tfs_kafka_ctx *ctx, int want);
/* The kernel's sticky-directory rule for the connection's user: in a directory
 * of mode dir_mode with the sticky bit, only root, the directory's owner or the
 * entry's owner may remove (or, for the user.* attributes of a sticky directory,
 * change) the entry. True without the bit. A remote connection owns nothing. */
bool tfs__kafka_sticky_ok(const struct tfs_kafka_ctx *ctx, mode_t dir_mode, uid_t dir_uid,
                          uid_t entry_uid);
/* That rule inside topic t: its partition directories and keys have the topic's
 * owner and mode, so deleting keys (a tombstone, DeleteRecords) or changing the
 * directory's attributes (a config) comes down to owning a sticky topic. */
bool tfs__kafka_sticky_topic_ok(const struct tfs_kafka_ctx *ctx, struct tfs_topic *t);

/* ---- api_records.c: DeleteRecords ---- */
enum tfs_kafka_verdict tfs__kafka_delete_records(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                 struct kw *w);

/* ---- api_admin.c: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs ---- */
enum tfs_kafka_verdict tfs__kafka_describe_configs(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                   struct kw *w);
/* AlterConfigs (incremental false) and IncrementalAlterConfigs (true). */
enum tfs_kafka_verdict tfs__kafka_alter_configs(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                struct kw *w, bool incremental);

/* ---- sasl.c: the handlers ---- */
enum tfs_kafka_verdict tfs__kafka_sasl_handshake(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                 struct kw *w);
enum tfs_kafka_verdict tfs__kafka_sasl_authenticate(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                    struct kw *w);
/* A bare token after SaslHandshake v0: the answer is int32 size + token, no
 * header; a failure closes the connection. */
enum tfs_kafka_verdict tfs__kafka_sasl_raw_token(struct tfs_kafka_ctx *ctx, const uint8_t *tok,
                                                 size_t len, struct kw *w);
/* The read rule of access.c for a topic (search on the root, r-x on it). */
bool tfs__kafka_may_read_topic(const struct tfs_kafka_ctx *ctx, struct tfs_topic *t);

/* ---- api_groups.c: the consumer-group requests ---- */
enum {
	TFS_KAFKA_API_OFFSET_COMMIT = 8,
	TFS_KAFKA_API_OFFSET_FETCH = 9,
	TFS_KAFKA_API_FIND_COORDINATOR = 10,
	TFS_KAFKA_API_JOIN_GROUP = 11,
	TFS_KAFKA_API_HEARTBEAT = 12,
	TFS_KAFKA_API_LEAVE_GROUP = 13,
	TFS_KAFKA_API_SYNC_GROUP = 14,
	TFS_KAFKA_API_DESCRIBE_GROUPS = 15,
	TFS_KAFKA_API_LIST_GROUPS = 16,
	TFS_KAFKA_API_DELETE_GROUPS = 42,
};
enum tfs_kafka_verdict tfs__kafka_groups_handle(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                struct kw *w);

/* Wakes parked long polls of every loop (the engine's append hook). */
void tfs__kafka_wake(struct tfs_kafka *k);

#endif
