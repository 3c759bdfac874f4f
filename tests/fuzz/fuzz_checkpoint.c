/* fuzz_checkpoint.c - the offset-checkpoint parser (engine/ondisk.c,
 * tfs_checkpoint_parse) that reads cleaner-offset-checkpoint and
 * log-start-offset-checkpoint, on the input as the file's bytes.
 *
 * Properties:
 *   - a refusal is TFS_ECORRUPT with a reason and the position of a line
 *     inside the text (or its end);
 *   - an accepted text's entries have valid topic names, partitions and
 *     offsets >= 0, and no partition twice;
 *   - the text rendered back from them, as the engine writes it, parses to the
 *     same entries in the same order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ondisk.h"
#include "engine/topic_config.h"
#include "engine/types.h"
#include "tests/fuzz/fz.h"

#define LINE_MAX_BYTES (TFS_TOPIC_NAME_MAX + 48)

static char *render(const struct tfs_checkpoint_entry *e, size_t n, size_t *len)
{
	size_t cap = 32 + n * LINE_MAX_BYTES, at;
	char *s = malloc(cap);

	FZ_CHECK(s != NULL, "out of memory");
	at = (size_t)snprintf(s, cap, "%d\n%zu\n", TFS_CHECKPOINT_VERSION, n);
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(s + at, cap - at, "%s %d %lld\n", e[i].topic, (int)e[i].partition,
		                       (long long)e[i].offset);
	*len = at;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfs_checkpoint_entry *e = NULL, *e2 = NULL;
	size_t n = 0, n2 = 0, len;
	tfs_pos_t err_pos = -1;
	const char *why = NULL;
	char *text;
	int rc = tfs_checkpoint_parse((const char *)data, size, &e, &n, &err_pos, &why);

	if (rc != 0) {
		FZ_CHECK(rc == TFS_ECORRUPT || rc == -ENOMEM, "parse returned %d", rc);
		if (rc == TFS_ECORRUPT) {
			FZ_CHECK(why != NULL, "a refusal without a reason");
			FZ_CHECK(err_pos >= 0 && (size_t)err_pos <= size, "refused at %lld of %zu",
			         (long long)err_pos, size);
		}
		FZ_CHECK(e == NULL && n == 0, "a refusal with entries");
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		FZ_CHECK(tfs_topic_name_valid(e[i].topic), "entry %zu: topic %s", i, e[i].topic);
		FZ_CHECK(e[i].partition >= 0 && e[i].offset >= 0, "entry %zu: %d %lld", i,
		         (int)e[i].partition, (long long)e[i].offset);
		for (size_t j = 0; j < i; j++)
			FZ_CHECK(strcmp(e[i].topic, e[j].topic) || e[i].partition != e[j].partition,
			         "entries %zu and %zu name one partition", j, i);
	}
	text = render(e, n, &len);
	why = NULL;
	rc = tfs_checkpoint_parse(text, len, &e2, &n2, &err_pos, &why);
	FZ_CHECK(rc == 0, "the rendered text is refused: %s", why ? why : "?");
	FZ_CHECK(n2 == n, "the rendered text has %zu entries, not %zu", n2, n);
	for (size_t i = 0; i < n; i++)
		FZ_CHECK(!strcmp(e[i].topic, e2[i].topic) && e[i].partition == e2[i].partition &&
		         e[i].offset == e2[i].offset, "entry %zu parses otherwise", i);
	free(text);
	free(e);
	free(e2);
	return 0;
}
