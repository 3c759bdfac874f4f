/* fuzz_meta.c - the listener's meta.properties parser (kafka/config.c,
 * tfs_kafka_meta_parse) on the input as the file's text (cut at its first NUL,
 * as the loader reads a text file).
 *
 * Properties:
 *   - a refused file says why;
 *   - an accepted one has a cluster id of 1..63 of [A-Za-z0-9_-] and a node id
 *     of -1 (absent) or >= 0;
 *   - the file rendered back from what was accepted (the two keys alone) parses
 *     to the same cluster id and node id.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka_internal.h"
#include "tests/fuzz/fz.h"

static bool id_char(char c)
{
	return c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char cluster[TFS_KAFKA_CLUSTER_ID_MAX], cluster2[TFS_KAFKA_CLUSTER_ID_MAX];
	char *text = malloc(size + 1), rendered[160];
	const char *why = NULL;
	int32_t node, node2;
	size_t n;
	int rc;

	FZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data, size);
	text[size] = '\0';
	rc = tfs_kafka_meta_parse(text, cluster, &node, &why);
	free(text);
	if (rc != 0) {
		FZ_CHECK(rc == -EINVAL, "parse returned %d", rc);
		FZ_CHECK(why != NULL, "a refusal without a reason");
		return 0;
	}
	n = strlen(cluster);
	FZ_CHECK(n >= 1 && n < TFS_KAFKA_CLUSTER_ID_MAX, "cluster id of %zu bytes", n);
	for (size_t i = 0; i < n; i++)
		FZ_CHECK(id_char(cluster[i]), "cluster id byte %zu is 0x%02x", i,
		         (unsigned char)cluster[i]);
	FZ_CHECK(node >= -1, "node id %d", (int)node);

	if (node >= 0)
		snprintf(rendered, sizeof(rendered), "cluster.id=%s\nnode.id=%d\n", cluster, (int)node);
	else
		snprintf(rendered, sizeof(rendered), "cluster.id=%s\n", cluster);
	why = NULL;
	rc = tfs_kafka_meta_parse(rendered, cluster2, &node2, &why);
	FZ_CHECK(rc == 0, "the rendered file is refused: %s", why ? why : "?");
	FZ_CHECK(!strcmp(cluster, cluster2) && node == node2, "the rendered file parses otherwise");
	return 0;
}
