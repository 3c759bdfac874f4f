/* config.c - the listener's settings by Kafka's names, and the cluster id in
 * DATA_DIR/meta.properties (see kafka.h, docs/kafka.md). */
#include "kafka/kafka_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "io/file_util.h"
#include "io/log.h"
#include "io/parse.h"

#define META_PROPERTIES "meta.properties"
#define META_MAX_BYTES 4096

static const char *const names[] = {
	"listeners", "advertised.listeners", "node.id", "auto.create.topics.enable",
	"socket.request.max.bytes", "num.partitions", "num.network.threads",
	"kafka_allow_remote", "queued.max.request.bytes", "sasl.enabled.mechanisms",
	"kafka_sasl_credentials", "group.initial.rebalance.delay.ms", "group.max.size",
	"connection.failed.authentication.delay.ms", NULL,
};

void tfs_kafka_config_defaults(struct tfs_kafka_config *c)
{
	memset(c, 0, sizeof(*c));
	c->node_id = 1;
	c->auto_create_topics = true;
	c->request_max_bytes = TFS_KAFKA_REQUEST_MAX_DEFAULT;
	c->queued_max_bytes = TFS_KAFKA_QUEUED_MAX_DEFAULT;
	c->threads = TFS_KAFKA_THREADS_DEFAULT;
	c->sasl_mechanisms = TFS_KAFKA_SASL_PLAIN | TFS_KAFKA_SASL_SCRAM_SHA_256;
	c->group_initial_rebalance_delay_ms = TFS_KAFKA_INITIAL_REBALANCE_DELAY_MS;
	c->group_max_size = TFS_KAFKA_GROUP_MAX_SIZE_DEFAULT;
	c->auth_fail_delay_ms = TFS_KAFKA_AUTH_FAIL_DELAY_MS;
}

const char *const *tfs_kafka_config_names(void)
{
	return names;
}

static bool parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "true") || !strcmp(s, "1")) {
		*out = true;
		return true;
	}
	if (!strcmp(s, "false") || !strcmp(s, "0")) {
		*out = false;
		return true;
	}
	return false;
}

int tfs_kafka_listener_parse(const char *s, char *host, size_t cap, uint16_t *port, bool *sasl)
{
	static const char plain[] = "PLAINTEXT://", with_sasl[] = "SASL_PLAINTEXT://";
	const char *h, *colon, *end;
	int64_t p;
	size_t n;

	if (strncmp(s, plain, sizeof(plain) - 1) == 0) {
		h = s + sizeof(plain) - 1;
		*sasl = false;
	} else if (strncmp(s, with_sasl, sizeof(with_sasl) - 1) == 0) {
		h = s + sizeof(with_sasl) - 1;
		*sasl = true;
	} else {
		return -EINVAL;
	}
	if (*h == '[') {                    /* [v6]:port */
		end = strchr(h, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		colon = end + 1;
		h++;
	} else {
		colon = strrchr(h, ':');
		if (!colon)
			return -EINVAL;
		end = colon;
	}
	n = (size_t)(end - h);
	if (n >= cap || memchr(h, ',', n))
		return -EINVAL;
	if (!tfs_parse_i64(colon + 1, 0, 65535, &p))
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (uint16_t)p;
	return 0;
}

int tfs_kafka_mechanisms_parse(const char *s, unsigned *out)
{
	unsigned m = 0;
	const char *p = s;

	while (*p) {
		size_t n = strcspn(p, ",");
		if (n == 5 && !strncmp(p, "PLAIN", n))
			m |= TFS_KAFKA_SASL_PLAIN;
		else if (n == 13 && !strncmp(p, "SCRAM-SHA-256", n))
			m |= TFS_KAFKA_SASL_SCRAM_SHA_256;
		else
			return -EINVAL;
		p += n;
		if (*p == ',' && *++p == '\0')
			return -EINVAL;         /* a trailing comma */
	}
	if (!m)
		return -EINVAL;
	*out = m;
	return 0;
}

int tfs_kafka_config_set(struct tfs_kafka_config *c, const char *name, const char *value,
                         const char **why)
{
	int64_t v;

	*why = NULL;
	if (!strcmp(name, "listeners")) {
		*why = "expected PLAINTEXT://HOST:PORT or SASL_PLAINTEXT://HOST:PORT (one listener)";
		return tfs_kafka_listener_parse(value, c->listener_host, sizeof(c->listener_host),
		                                &c->listener_port, &c->sasl);
	}
	if (!strcmp(name, "advertised.listeners")) {
		bool sasl;
		*why = "expected PLAINTEXT://HOST:PORT (or SASL_PLAINTEXT://) with a host clients "
		       "can reach";
		if (tfs_kafka_listener_parse(value, c->advertised_host, sizeof(c->advertised_host),
		                             &c->advertised_port, &sasl) < 0 ||
		    !c->advertised_host[0] || c->advertised_port == 0)
			return -EINVAL;
		return 0;
	}
	if (!strcmp(name, "sasl.enabled.mechanisms")) {
		*why = "expected PLAIN, SCRAM-SHA-256 or both, comma-separated";
		return tfs_kafka_mechanisms_parse(value, &c->sasl_mechanisms);
	}
	if (!strcmp(name, "kafka_sasl_credentials")) {
		*why = "expected the absolute path of the credentials file";
		if (value[0] != '/' || strlen(value) >= sizeof(c->sasl_credentials))
			return -EINVAL;
		strcpy(c->sasl_credentials, value);
		return 0;
	}
	if (!strcmp(name, "node.id")) {
		*why = "expected a node id between 0 and 2147483647";
		if (!tfs_parse_i64(value, 0, INT32_MAX, &v))
			return -EINVAL;
		c->node_id = (int32_t)v;
		return 0;
	}
	if (!strcmp(name, "auto.create.topics.enable")) {
		*why = "expected true or false";
		return parse_bool(value, &c->auto_create_topics) ? 0 : -EINVAL;
	}
	if (!strcmp(name, "socket.request.max.bytes")) {
		*why = "expected bytes between 1024 and 2147483647";
		if (!tfs_parse_i64(value, 1024, INT32_MAX, &v))
			return -EINVAL;
		c->request_max_bytes = (int32_t)v;
		return 0;
	}
	if (!strcmp(name, "queued.max.request.bytes")) {
		*why = "expected -1 (no bound) or bytes between 1 and 9223372036854775807";
		if (!tfs_parse_i64(value, -1, INT64_MAX, &v) || v == 0)
			return -EINVAL;
		c->queued_max_bytes = v;
		return 0;
	}
	if (!strcmp(name, "num.partitions")) {
		*why = "expected a partition count >= 1";
		if (!tfs_parse_i64(value, 1, INT32_MAX, &v))
			return -EINVAL;
		c->num_partitions = (int32_t)v;
		return 0;
	}
	if (!strcmp(name, "group.initial.rebalance.delay.ms")) {
		*why = "expected milliseconds >= 0";
		if (!tfs_parse_i64(value, 0, INT32_MAX, &v))
			return -EINVAL;
		c->group_initial_rebalance_delay_ms = v;
		return 0;
	}
	if (!strcmp(name, "group.max.size")) {
		*why = "expected a member count between 1 and 2147483647";
		if (!tfs_parse_i64(value, 1, INT32_MAX, &v))
			return -EINVAL;
		c->group_max_size = (int32_t)v;
		return 0;
	}
	if (!strcmp(name, "connection.failed.authentication.delay.ms")) {
		/* bounded below a client's request timeout (30 s by default), so that
		 * a parked failure never holds a connection longer than a client waits */
		*why = "expected milliseconds between 0 and 10000";
		if (!tfs_parse_i64(value, 0, 10000, &v))
			return -EINVAL;
		c->auth_fail_delay_ms = (int32_t)v;
		return 0;
	}
	if (!strcmp(name, "num.network.threads")) {
		*why = "expected a thread count between 1 and 64";
		if (!tfs_parse_i64(value, 1, 64, &v))
			return -EINVAL;
		c->threads = (int)v;
		return 0;
	}
	if (!strcmp(name, "kafka_allow_remote")) {
		*why = "expected true or false";
		return parse_bool(value, &c->allow_remote) ? 0 : -EINVAL;
	}
	return -ENOENT;
}

/* ---- meta.properties ----
 *
 * Kafka keeps a log directory's identity in a Java properties file:
 *   version=1
 *   cluster.id=<22 characters of URL-safe base64: a random UUID>
 *   node.id=<the broker's id>
 * Lines starting with '#' are comments. A file naming another node.id than the
 * mount's is refused (Kafka refuses to start on it too); a missing file is
 * written (atomically) with a fresh cluster id. */

static void random_cluster_id(char out[TFS_KAFKA_CLUSTER_ID_MAX])
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint8_t u[16];
	size_t got = 0, o = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (got < sizeof(u)) {
		ssize_t n = getrandom(u + got, sizeof(u) - got, 0);
		if (n > 0)
			got += (size_t)n;
		else if (errno != EINTR)
			break;              /* a kernel without getrandom: take the clock */
	}
	if (got < sizeof(u)) {
		int64_t t = tfs_now_ms() ^ ((int64_t)getpid() << 32);
		for (size_t i = got; i < sizeof(u); i++)
			u[i] = (uint8_t)(t >> ((i % 8) * 8));
	}
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);    /* a version 4 UUID, as Kafka's */
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
	for (size_t i = 0; i < sizeof(u); i++) {
		acc = (acc << 8) | u[i];
		bits += 8;
		while (bits >= 6) {
			out[o++] = b64[(acc >> (bits - 6)) & 63];
			bits -= 6;
		}
	}
	if (bits > 0)
		out[o++] = b64[(acc << (6 - bits)) & 63];
	out[o] = '\0';                      /* 22 characters */
}

static bool cluster_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= TFS_KAFKA_CLUSTER_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '-' || s[i] == '_' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

int tfs_kafka_meta_parse(const char *text, char cluster_id[TFS_KAFKA_CLUSTER_ID_MAX],
                         int32_t *node_id, const char **why)
{
	const char *line = text;
	bool have_cluster = false;

	*node_id = -1;
	cluster_id[0] = '\0';
	while (*line) {
		const char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
		const char *eq = memchr(line, '=', (size_t)(end - line));
		char val[64];
		size_t klen, vlen;

		if (line[0] != '#' && line[0] != '!' && eq) {
			klen = (size_t)(eq - line);
			vlen = (size_t)(end - eq - 1);
			if (vlen && eq[vlen] == '\r')
				vlen--;
			if (vlen >= sizeof(val)) {
				*why = "a value longer than 63 bytes";
				return -EINVAL;
			}
			memcpy(val, eq + 1, vlen);
			val[vlen] = '\0';
			if (klen == 10 && !memcmp(line, "cluster.id", 10)) {
				if (!cluster_id_valid(val)) {
					*why = "cluster.id is not 1..63 of [A-Za-z0-9_-]";
					return -EINVAL;
				}
				strcpy(cluster_id, val);
				have_cluster = true;
			} else if ((klen == 7 && !memcmp(line, "node.id", 7)) ||
			           (klen == 9 && !memcmp(line, "broker.id", 9))) {
				int64_t v;
				if (!tfs_parse_i64(val, 0, INT32_MAX, &v)) {
					*why = "node.id is not a number between 0 and 2147483647";
					return -EINVAL;
				}
				*node_id = (int32_t)v;
			}
		}
		line = nl ? nl + 1 : end;
	}
	if (!have_cluster) {
		*why = "no cluster.id line";
		return -EINVAL;
	}
	return 0;
}

int tfs_kafka_meta_load(struct tfs_io *io, const char *data_dir, int32_t node_id, bool read_only,
                        char cluster_id[TFS_KAFKA_CLUSTER_ID_MAX])
{
	char *text = NULL, buf[256];
	const char *why = NULL;
	int32_t file_node;
	size_t len;
	int dirfd, rc, n;

	dirfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		rc = -errno;
		tfs_log_error("kafka", "cannot open %s: %s", data_dir, tfs_strerror(rc));
		return rc;
	}
	rc = tfs_file_read_all(io, dirfd, META_PROPERTIES, META_MAX_BYTES, &text, &len);
	if (rc == 0) {
		rc = tfs_kafka_meta_parse(text, cluster_id, &file_node, &why);
		free(text);
		if (rc == 0 && file_node >= 0 && file_node != node_id) {
			tfs_log_error("kafka", "%s/%s belongs to node.id=%d, not node.id=%d: mount with "
			              "node.id=%d or move the file away", data_dir, META_PROPERTIES,
			              (int)file_node, (int)node_id, (int)file_node);
			rc = -EINVAL;
		} else if (rc < 0) {
			tfs_log_error("kafka", "%s/%s: %s", data_dir, META_PROPERTIES, why);
		}
		close(dirfd);
		return rc;
	}
	if (rc != -ENOENT) {
		tfs_log_error("kafka", "cannot read %s/%s: %s", data_dir, META_PROPERTIES,
		              tfs_strerror(rc));
		close(dirfd);
		return rc;
	}
	random_cluster_id(cluster_id);
	if (read_only) {
		tfs_log_warn("kafka", "%s has no %s and the mount is read-only: cluster id %s "
		             "lasts until unmount", data_dir, META_PROPERTIES, cluster_id);
		close(dirfd);
		return 0;
	}
	n = snprintf(buf, sizeof(buf), "#\n#Written by topicfs\nversion=1\ncluster.id=%s\nnode.id=%d\n",
	             cluster_id, (int)node_id);
	rc = tfs_file_replace(io, dirfd, META_PROPERTIES, buf, (size_t)n);
	if (rc < 0)
		tfs_log_error("kafka", "cannot write %s/%s: %s", data_dir, META_PROPERTIES,
		              tfs_strerror(rc));
	else
		tfs_log_info("kafka", "new cluster id %s in %s/%s", cluster_id, data_dir,
		             META_PROPERTIES);
	close(dirfd);
	return rc;
}
