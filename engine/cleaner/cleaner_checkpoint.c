/* cleaner_checkpoint.c - DATA_DIR/cleaner-offset-checkpoint, Kafka's text format.
 *
 * Format (UTF-8, '\n' line ends; Kafka's CheckpointFile with OffsetCheckpointFile's
 * entry format):
 *
 *   LINE  CONTENT                                   DESCRIPTION
 *      1  0                                         version, must be 0
 *      2  N                                         number of entries
 *    3..  <topic> <partition> <first dirty offset>  one per partition, fields
 *                                                   separated by whitespace
 *
 * The stored offset is the first dirty offset: everything below it was cleaned by
 * the last pass (its exclusive end). A file is valid if and only if the version is
 * 0, N is a non-negative integer, exactly N entry lines follow, each with a valid
 * topic name, a partition >= 0 and an offset >= 0, and nothing but blank space
 * after them. Anything else is TFS_ECORRUPT.
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
#include "io/parse.h"

#define CKPT_VERSION 0
#define CKPT_FILE_MAX (64u << 20)     /* refuse a larger file as corrupt */
#define MAX_ENTRIES 10000000L

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

/* Reads one line [*p, eol) into a NUL-terminated copy; advances *p. */
static char *next_line(const char **p, const char *end)
{
	const char *s = *p, *nl;
	char *line;

	if (s >= end)
		return NULL;
	nl = memchr(s, '\n', (size_t)(end - s));
	if (!nl)
		nl = end;
	line = strndup(s, (size_t)(nl - s));
	*p = nl < end ? nl + 1 : end;
	return line;
}

static int bad(const char *why, long line)
{
	tfs_log_error("cleaner", "malformed %s at line %ld: %s", TFS_CHECKPOINT_FILE, line, why);
	return TFS_ECORRUPT;
}

int tfs__ckpt_parse(const char *text, size_t len, struct tfs__ckpt_entry **out, size_t *n)
{
	const char *p = text, *end = text + len;
	struct tfs__ckpt_entry *e = NULL;
	char *line = NULL;
	int64_t v, count;
	size_t got = 0;
	long lineno = 1;
	int rc = 0;

	*out = NULL;
	*n = 0;
	line = next_line(&p, end);
	if (!line || !tfs_parse_i64(line, CKPT_VERSION, CKPT_VERSION, &v)) {
		rc = bad("version is not 0", lineno);
		goto out;
	}
	free(line);
	line = next_line(&p, end);
	lineno++;
	if (!line || !tfs_parse_i64(line, 0, MAX_ENTRIES, &count)) {
		rc = bad("bad entry count", lineno);
		goto out;
	}
	e = calloc((size_t)count + 1, sizeof(*e));
	if (!e) {
		rc = -ENOMEM;
		goto out;
	}
	for (; got < (size_t)count; got++) {
		char *topic, *part, *off, *save = NULL;
		int64_t pv, ov;

		free(line);
		line = next_line(&p, end);
		lineno++;
		if (!line) {
			rc = bad("fewer entries than the count says", lineno);
			goto out;
		}
		topic = strtok_r(line, " \t\r", &save);
		part = strtok_r(NULL, " \t\r", &save);
		off = strtok_r(NULL, " \t\r", &save);
		if (!topic || !part || !off || strtok_r(NULL, " \t\r", &save) ||
		    !tfs_topic_name_valid(topic) || !tfs_parse_i64(part, 0, INT32_MAX, &pv) ||
		    !tfs_parse_i64(off, 0, INT64_MAX, &ov)) {
			rc = bad("expected \"<topic> <partition> <offset>\"", lineno);
			goto out;
		}
		e[got].topic = strdup(topic);
		if (!e[got].topic) {
			rc = -ENOMEM;
			goto out;
		}
		e[got].partition = (int32_t)pv;
		e[got].offset = ov;
	}
	/* only blank space may follow */
	for (; p < end; p++) {
		if (*p != '\n' && *p != ' ' && *p != '\t' && *p != '\r') {
			rc = bad("more entries than the count says", lineno + 1);
			goto out;
		}
	}
	*out = e;
	*n = got;
	e = NULL;
out:
	free(line);
	if (e)
		tfs__ckpt_free(e, got + 1);
	return rc;
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
