/* test_config.c - the listener's settings by Kafka's names and the cluster id in
 * meta.properties (kafka/config.c): what each setting accepts and refuses, the
 * listener URL forms, meta.properties read, written once and kept, another
 * node.id refused without touching the file, and every byte of it flipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/log.h"
#include "kafka/kafka_internal.h"
#include "tests/t_util.h"

static void test_settings(void **state)
{
	struct tfs_kafka_config c;
	const char *why;

	(void)state;
	tfs_kafka_config_defaults(&c);
	assert_false(tfs_kafka_config_enabled(&c));
	assert_int_equal(c.request_max_bytes, 104857600);
	assert_int_equal(tfs_kafka_config_set(&c, "listeners", "PLAINTEXT://127.0.0.1:9092", &why), 0);
	assert_true(tfs_kafka_config_enabled(&c));
	assert_string_equal(c.listener_host, "127.0.0.1");
	assert_int_equal(c.listener_port, 9092);
	assert_int_equal(tfs_kafka_config_set(&c, "listeners", "PLAINTEXT://[::1]:1", &why), 0);
	assert_string_equal(c.listener_host, "::1");
	assert_int_equal(tfs_kafka_config_set(&c, "listeners", "PLAINTEXT://:0", &why), 0);
	assert_string_equal(c.listener_host, "");
	for (const char *const *bad = (const char *const[]){ "SSL://h:1", "PLAINTEXT://h",
	                                                      "PLAINTEXT://h:65536", "PLAINTEXT://h:x",
	                                                      "PLAINTEXT://[::1:1", NULL };
	     *bad; bad++)
		assert_int_equal(tfs_kafka_config_set(&c, "listeners", *bad, &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "advertised.listeners", "PLAINTEXT://:9092", &why),
	                 -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "node.id", "-1", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "node.id", "7", &why), 0);
	assert_int_equal(c.node_id, 7);
	assert_int_equal(tfs_kafka_config_set(&c, "socket.request.max.bytes", "1023", &why), -EINVAL);
	assert_int_equal(c.queued_max_bytes, TFS_KAFKA_QUEUED_MAX_DEFAULT);
	assert_int_equal(tfs_kafka_config_set(&c, "queued.max.request.bytes", "0", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "queued.max.request.bytes", "-2", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "queued.max.request.bytes", "-1", &why), 0);
	assert_int_equal(c.queued_max_bytes, -1);
	assert_int_equal(tfs_kafka_config_set(&c, "queued.max.request.bytes", "1048576", &why), 0);
	assert_int_equal(c.queued_max_bytes, 1048576);
	assert_int_equal(tfs_kafka_config_set(&c, "num.partitions", "0", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "num.network.threads", "65", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "connection.failed.authentication.delay.ms", "10001",
	                                      &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "connection.failed.authentication.delay.ms", "10000",
	                                      &why), 0);
	assert_int_equal(tfs_kafka_config_set(&c, "auto.create.topics.enable", "false", &why), 0);
	assert_false(c.auto_create_topics);
	assert_int_equal(tfs_kafka_config_set(&c, "kafka_allow_remote", "yes", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "log.dirs", "/x", &why), -ENOENT);
	/* SASL: the listener's scheme, the mechanisms, the credentials file's path */
	assert_false(c.sasl);
	assert_int_equal(c.sasl_mechanisms, TFS_KAFKA_SASL_PLAIN | TFS_KAFKA_SASL_SCRAM_SHA_256);
	assert_int_equal(tfs_kafka_config_set(&c, "listeners", "SASL_PLAINTEXT://0.0.0.0:9093", &why),
	                 0);
	assert_true(c.sasl);
	assert_int_equal(tfs_kafka_config_set(&c, "sasl.enabled.mechanisms", "SCRAM-SHA-256", &why), 0);
	assert_int_equal(c.sasl_mechanisms, TFS_KAFKA_SASL_SCRAM_SHA_256);
	for (const char *const *bad = (const char *const[]){ "", "GSSAPI", "PLAIN,", "plain",
	                                                      "PLAIN,,SCRAM-SHA-256", NULL };
	     *bad; bad++)
		assert_int_equal(tfs_kafka_config_set(&c, "sasl.enabled.mechanisms", *bad, &why), -EINVAL);
	assert_int_equal(c.sasl_mechanisms, TFS_KAFKA_SASL_SCRAM_SHA_256);
	assert_int_equal(tfs_kafka_config_set(&c, "kafka_sasl_credentials", "relative", &why), -EINVAL);
	assert_int_equal(tfs_kafka_config_set(&c, "kafka_sasl_credentials", "/etc/tfs.creds", &why), 0);
	assert_string_equal(c.sasl_credentials, "/etc/tfs.creds");
	assert_int_equal(tfs_kafka_config_set(&c, "listeners", "PLAINTEXT://127.0.0.1:1", &why), 0);
	assert_false(c.sasl);
}

static void test_meta_parse(void **state)
{
	char id[TFS_KAFKA_CLUSTER_ID_MAX];
	const char *why;
	int32_t node;

	(void)state;
	assert_int_equal(tfs_kafka_meta_parse("#c\nversion=1\ncluster.id=abc-_1\r\nnode.id=3\n", id,
	                                      &node, &why), 0);
	assert_string_equal(id, "abc-_1");
	assert_int_equal(node, 3);
	assert_int_equal(tfs_kafka_meta_parse("version=0\ncluster.id=x\nbroker.id=5", id, &node, &why), 0);
	assert_int_equal(node, 5);
	assert_int_equal(tfs_kafka_meta_parse("cluster.id=x", id, &node, &why), 0);
	assert_int_equal(node, -1);
	assert_int_equal(tfs_kafka_meta_parse("node.id=1\n", id, &node, &why), -EINVAL);
	assert_int_equal(tfs_kafka_meta_parse("cluster.id=a b\n", id, &node, &why), -EINVAL);
	assert_int_equal(tfs_kafka_meta_parse("cluster.id=\n", id, &node, &why), -EINVAL);
	assert_int_equal(tfs_kafka_meta_parse("cluster.id=x\nnode.id=x\n", id, &node, &why), -EINVAL);
	assert_int_equal(tfs_kafka_meta_parse("cluster.id=0123456789012345678901234567890123456789"
	                                      "012345678901234567890123\n", id, &node, &why), -EINVAL);
}

static void test_meta_load(void **state)
{
	struct tfs_io *io = t_io();
	char *dir = t_mkdtemp("kmeta"), path[4096], id[TFS_KAFKA_CLUSTER_ID_MAX], again[TFS_KAFKA_CLUSTER_ID_MAX];
	uint8_t *before, *after;
	long n1, n2;

	(void)state;
	tfs_log_set_level(TFS_LOG_ERROR + 1);
	snprintf(path, sizeof(path), "%s/meta.properties", dir);
	assert_int_equal(tfs_kafka_meta_load(io, dir, 2, true, id), 0);   /* read-only: no file */
	assert_int_equal(t_file_size(path), -1);
	assert_int_equal(tfs_kafka_meta_load(io, dir, 2, false, id), 0);
	assert_int_equal(strlen(id), 22);
	n1 = t_read_file(path, &before);
	assert_true(n1 > 0);
	assert_int_equal(tfs_kafka_meta_load(io, dir, 2, false, again), 0);
	assert_string_equal(id, again);
	assert_int_equal(tfs_kafka_meta_load(io, dir, 3, false, again), -EINVAL);
	n2 = t_read_file(path, &after);
	assert_int_equal(n1, n2);
	assert_memory_equal(before, after, (size_t)n1);
	free(before);
	free(after);
	t_write_file(path, "garbage\n", 8);
	assert_int_equal(tfs_kafka_meta_load(io, dir, 2, false, again), -EINVAL);
	tfs_io_destroy(io);
	t_rmtree(dir);
	free(dir);
}

/* Every byte of a written meta.properties flipped in turn (two masks): the load
 * either refuses it (-EINVAL, logged) or reads the cluster id, which then differs
 * from the pristine one at most in the flipped byte (an id is any 1..63 of
 * [A-Za-z0-9_-]: nothing tells a flipped one apart); either way the file is left
 * as it is, never rewritten with a fresh id. */
static void test_meta_flips(void **state)
{
	struct tfs_io *io = t_io();
	char *dir = t_mkdtemp("kmeta"), path[4096], id[TFS_KAFKA_CLUSTER_ID_MAX];
	static const unsigned masks[] = { 0xff, 0x01 };
	uint8_t *pristine, *after;
	int refused = 0, read = 0, null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	long n;

	(void)state;
	tfs_log_set_fd(null_fd, 0);          /* each refusal is logged, by design */
	snprintf(path, sizeof(path), "%s/meta.properties", dir);
	assert_int_equal(tfs_kafka_meta_load(io, dir, 2, false, id), 0);
	n = t_read_file(path, &pristine);
	assert_true(n > 0);
	for (long pos = 0; pos < n; pos++)
		for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
			char got[TFS_KAFKA_CLUSTER_ID_MAX];
			uint8_t *b = malloc((size_t)n);
			int rc, diff = 0;
			assert_non_null(b);
			memcpy(b, pristine, (size_t)n);
			b[pos] ^= (uint8_t)masks[m];
			assert_int_equal(t_write_file(path, b, (size_t)n), 0);
			rc = tfs_kafka_meta_load(io, dir, 2, false, got);
			if (rc == 0) {
				read++;
				if (strlen(got) != strlen(id))
					fail_msg("byte %ld ^ 0x%x: cluster id %s, was %s", pos, masks[m], got, id);
				for (size_t i = 0; got[i]; i++)
					diff += got[i] != id[i];
				if (diff > 1)
					fail_msg("byte %ld ^ 0x%x: cluster id %s, was %s", pos, masks[m], got, id);
			} else {
				assert_int_equal(rc, -EINVAL);
				refused++;
			}
			assert_int_equal(t_read_file(path, &after), n);
			if (memcmp(after, b, (size_t)n))
				fail_msg("byte %ld ^ 0x%x: the load rewrote meta.properties", pos, masks[m]);
			free(after);
			free(b);
		}
	print_message("%d flips of meta.properties: %d refused, %d read\n", refused + read, refused,
	              read);
	assert_true(refused > 0);
	tfs_log_set_fd(STDERR_FILENO, 0);
	close(null_fd);
	free(pristine);
	tfs_io_destroy(io);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_settings),
		cmocka_unit_test(test_meta_parse),
		cmocka_unit_test(test_meta_load),
		cmocka_unit_test(test_meta_flips),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
