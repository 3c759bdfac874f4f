/* log_start.c - DATA_DIR/log-start-offset-checkpoint (see log_start.h). */
#include "engine/log/log_start.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/ondisk.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"
#include "io/log.h"

#define FILE_MAX_BYTES (64u << 20)    /* refuse a larger file as corrupt */

static int corrupt(int line, const char *why)
{
	tfs_log_error("engine", "malformed %s at line %d: %s; move it away to mount (the records "
	              "DeleteRecords removed would come back)", TFS_LOG_START_FILE, line, why);
	return TFS_ECORRUPT;
}

/* Moves one partition's start. *stale: the file says something the log no
 * longer bears out (a partition gone, a start past the end), so it is to be
 * rewritten. */
static int apply(struct tfs_engine *e, const char *topic, int64_t part, int64_t offset,
                 bool *stale)
{
	struct tfs_topic *t = tfs_engine_topic_get(e, topic);
	struct tfs_plog *pl = t && part < tfs_topic_partition_count(t) ?
	                      tfs_topic_partition(t, (int32_t)part) : NULL;
	struct tfs_plog_stats st;
	tfs_offset_t start;
	int rc = 0;

	if (!pl) {
		tfs_log_info("engine", "%s: no partition %s-%" PRId64 " any more; its entry goes",
		             TFS_LOG_START_FILE, topic, part);
		*stale = true;
	} else {
		tfs_plog_stats(pl, &st);
		if (offset > st.log_end_offset) {
			tfs_log_warn("engine", "%s: %s-%" PRId64 " starts at %" PRId64 ", past its log "
			             "end %" PRId64 ": starting at the end", TFS_LOG_START_FILE, topic,
			             part, offset, st.log_end_offset);
			offset = st.log_end_offset;
			*stale = true;
		}
		rc = tfs_plog_delete_below(pl, offset, NULL, NULL, &start);
		if (rc < 0)
			tfs_log_error("engine", "%s: cannot move the start of %s-%" PRId64 ": %s",
			              TFS_LOG_START_FILE, topic, part, tfs_strerror(rc));
	}
	tfs_topic_unref(t);
	return rc;
}

int tfs__log_start_load(struct tfs_engine *e, struct tfs_io *io, int dirfd, bool read_only)
{
	struct tfs_checkpoint_entry *v = NULL;
	const char *why = NULL;
	tfs_pos_t at = 0;
	char *text = NULL;
	size_t len = 0, n = 0;
	bool stale = false;
	int rc;

	rc = tfs_file_read_all(io, dirfd, TFS_LOG_START_FILE, FILE_MAX_BYTES, &text, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		if (rc == -EFBIG)
			return corrupt(0, "larger than 64 MiB");
		tfs_log_error("engine", "cannot read %s: %s", TFS_LOG_START_FILE, tfs_strerror(rc));
		return rc;
	}
	/* Kafka's checkpoint text, the cleaner's format: one parser (engine/ondisk.h),
	 * the whole file checked before any entry is applied */
	rc = tfs_checkpoint_parse(text, len, &v, &n, &at, &why);
	if (rc == TFS_ECORRUPT) {
		int line = 1;
		for (tfs_pos_t i = 0; i < at; i++)
			line += text[i] == '\n';
		rc = corrupt(line, why);
	}
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = apply(e, v[i].topic, v[i].partition, v[i].offset, &stale);
	/* An entry the log no longer bears out would apply to a later topic of that
	 * name, or hide records appended past a clamped end: the file follows the
	 * partitions as they are before anything is served. */
	if (rc == 0 && stale && !read_only)
		rc = tfs__log_start_write(e, io, dirfd, NULL, 0, 0);
	free(v);
	free(text);
	return rc;
}

int tfs__log_start_write(struct tfs_engine *e, struct tfs_io *io, int dirfd, const char *topic,
                         int32_t partition, tfs_offset_t offset)
{
	char **names = NULL, *buf = NULL, *body = NULL;
	size_t n = 0, blen = 0, len = 0, entries = 0;
	FILE *f;
	int rc = tfs_engine_topic_names(e, &names, &n);

	if (rc < 0)
		return rc;
	f = open_memstream(&body, &blen);
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct tfs_topic *t = tfs_engine_topic_get(e, names[i]);
		int32_t parts = t ? tfs_topic_partition_count(t) : 0;
		for (int32_t k = 0; k < parts; k++) {
			struct tfs_plog_stats st;
			tfs_offset_t start;
			if (topic && !strcmp(topic, names[i]) && k == partition) {
				start = offset;
			} else {
				tfs_plog_stats(tfs_topic_partition(t, k), &st);
				start = st.log_start_offset;
			}
			if (start > 0) {
				fprintf(f, "%s %" PRId32 " %" PRId64 "\n", names[i], k, start);
				entries++;
			}
		}
		tfs_topic_unref(t);
	}
	if (fclose(f) != 0 || !body) {
		rc = -ENOMEM;
		goto out;
	}
	f = open_memstream(&buf, &len);
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	fprintf(f, "%d\n%zu\n%s", TFS_CHECKPOINT_VERSION, entries, body);
	if (fclose(f) != 0 || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	rc = tfs_file_replace(io, dirfd, TFS_LOG_START_FILE, buf, len);
	if (rc < 0)
		tfs_log_error("engine", "cannot write %s: %s; the log start stays where it was",
		              TFS_LOG_START_FILE, tfs_strerror(rc));
out:
	free(names);
	free(body);
	free(buf);
	return rc;
}
