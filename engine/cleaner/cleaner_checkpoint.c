/* cleaner_checkpoint.c - DATA_DIR/cleaner-offset-checkpoint, Kafka's text format
 * (Kafka's CheckpointFile with OffsetCheckpointFile's entry format; the table and
 * the validity rule are engine/ondisk.h's, whose parser topicctl verify uses too).
 *
 * The stored offset is the first dirty offset: everything below it was cleaned by
 * the last pass (its exclusive end). A file that breaks the rule is TFS_ECORRUPT.
 *
 * The whole file is rewritten on every change with tfs_file_replace (temp file,
 * fsync, rename, directory fsync), so a crash leaves the old or the new file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/file_util.h"
#include "io/log.h"

#define CKPT_VERSION TFS_CHECKPOINT_VERSION
#define CKPT_FILE_MAX (64u << 20)     /* refuse a larger file as corrupt */

void tfs__ckpt_free(struct tfs__ckpt_entry *e, size_t n)
{
	if (!e)
		return;
	for (size_t i = 0; i < n; i++)
		free(e[i].topic);
	free(e);
}

char *tfs__ckpt_format(const struct tfs__ckpt_entry *e, size_t n, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&buf, &cap);

	if (!f)
		return NULL;
	fprintf(f, "%d\n%zu\n", CKPT_VERSION, n);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s %" PRId32 " %" PRId64 "\n", e[i].topic, e[i].partition, e[i].offset);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = cap;
	return buf;
}

static int bad(const char *why, long line)
{
	tfs_log_error("cleaner", "malformed %s at line %ld: %s", TFS_CHECKPOINT_FILE, line, why);
	return TFS_ECORRUPT;
}

/* The one parser of the format (engine/ondisk.h, shared with topicctl verify);
 * the entries are copied into the cleaner's, whose topics are owned strings. */
int tfs__ckpt_parse(const char *text, size_t len, struct tfs__ckpt_entry **out, size_t *n)
{
	struct tfs_checkpoint_entry *v = NULL;
	struct tfs__ckpt_entry *e = NULL;
	const char *why = NULL;
	size_t count = 0;
	tfs_pos_t at = 0;
	long line = 1;
	int rc = tfs_checkpoint_parse(text, len, &v, &count, &at, &why);

	*out = NULL;
	*n = 0;
	if (rc == TFS_ECORRUPT) {
		for (tfs_pos_t i = 0; i < at; i++)
			line += text[i] == '\n';
		return bad(why, line);
	}
	if (rc < 0)
		return rc;
	e = calloc(count + 1, sizeof(*e));
	for (size_t i = 0; e && i < count; i++) {
		e[i].partition = v[i].partition;
		e[i].offset = v[i].offset;
		if (!(e[i].topic = strdup(v[i].topic))) {
			tfs__ckpt_free(e, count);
			e = NULL;
		}
	}
	free(v);
	if (!e)
		return -ENOMEM;
	*out = e;
	*n = count;
	return 0;
}

int tfs__ckpt_read(struct tfs_io *io, int dirfd, struct tfs__ckpt_entry **out, size_t *n)
{
	char *text = NULL;
	size_t len = 0;
	int rc = tfs_file_read_all(io, dirfd, TFS_CHECKPOINT_FILE, CKPT_FILE_MAX, &text, &len);

	*out = NULL;
	*n = 0;
	if (rc == -EFBIG)
		return bad("file too large", 0);
	if (rc < 0)
		return rc;
	rc = tfs__ckpt_parse(text, len, out, n);
	free(text);
	return rc;
}
