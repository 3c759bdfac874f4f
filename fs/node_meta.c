/* node_meta.c - /.topicfs: read-only views of the mount's state.
 *
 *   metrics   Prometheus text format: per partition size, offsets, segments and
 *             live keys; the engine's I/O backend; fs counters; the cleaner's
 *             metrics (topicfs_cleaner_*, engine/cleaner/cleaner.h; none when read-only)
 *   status    the same for people
 *   producer_id  a fresh producer id and its epoch ("ID EPOCH\n"), from the
 *             data directory's allocator (tfs_engine_producer_id): each open
 *             takes one; EROFS on a read-only mount
 *
 * The content is generated at open into the handle (so one read sequence sees one
 * snapshot) and served with direct_io: the files report size 0, like /proc.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner.h"
#include "fs/consumers.h"
#include "fs/node.h"
#include "io/log.h"
#include "kafka/kafka.h"

enum { META_METRICS = 0, META_STATUS = 1, META_PRODUCER_ID = 2, META_COUNT = 3 };

static const char *const meta_names[META_COUNT] = { "metrics", "status", "producer_id" };

struct meta_fh {
	struct tfs_fh base;
	char *text;
	size_t len;
};

/* One partition's numbers, collected before printing (Prometheus groups samples
 * by metric family). */
struct part_row {
	const char *topic;              /* points into the names block */
	int32_t partition;
	struct tfs_plog_stats st;
};

static int collect(struct tfs_mount *m, char ***names_out, struct part_row **rows_out,
                   size_t *nrows_out, size_t *ntopics_out)
{
	char **names = NULL;
	struct part_row *rows = NULL;
	size_t ntopics = 0, nrows = 0, cap = 0;
	int rc = tfs_engine_topic_names(m->engine, &names, &ntopics);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < ntopics; i++) {
		struct tfs_topic *t = tfs_engine_topic_get(m->engine, names[i]);
		int32_t np;

		if (!t)
			continue;
		np = tfs_topic_partition_count(t);
		for (int32_t p = 0; p < np; p++) {
			struct tfs_plog *pl = tfs_topic_partition(t, p);
			if (!pl)
				continue;
			if (nrows == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct part_row *nr = realloc(rows, nc * sizeof(*nr));
				if (!nr) {
					tfs_topic_unref(t);
					free(rows);
					free(names);
					return -ENOMEM;
				}
				rows = nr;
				cap = nc;
			}
			rows[nrows].topic = names[i];
			rows[nrows].partition = p;
			tfs_plog_stats(pl, &rows[nrows].st);
			nrows++;
		}
		tfs_topic_unref(t);
	}
	*names_out = names;
	*rows_out = rows;
	*nrows_out = nrows;
	*ntopics_out = ntopics;
	return 0;
}

#define PART_GAUGE(f, rows, nrows, metric, help, expr)                                    \
	do {                                                                              \
		fprintf(f, "# HELP " metric " " help "\n# TYPE " metric " gauge\n");       \
		for (size_t i_ = 0; i_ < (nrows); i_++) {                                 \
			const struct part_row *r = &(rows)[i_];                           \
			fprintf(f, metric "{topic=\"%s\",partition=\"%" PRId32 "\"} %" PRId64 "\n", \
			        r->topic, r->partition, (int64_t)(expr));                 \
		}                                                                         \
	} while (0)

static void counter(FILE *f, const char *metric, const char *help, uint64_t v)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", metric, help, metric,
	        metric, v);
}

static void gauge(FILE *f, const char *metric, const char *help, uint64_t v)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n%s %" PRIu64 "\n", metric, help, metric,
	        metric, v);
}

static uint64_t stat_of(atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void write_metrics(FILE *f, struct tfs_mount *m, const struct part_row *rows,
                          size_t nrows, size_t ntopics)
{
	struct tfs_readcache_stats rcs;

	PART_GAUGE(f, rows, nrows, "topicfs_partition_size_bytes",
	           "Bytes in the partition's segment files.", r->st.size_bytes);
	PART_GAUGE(f, rows, nrows, "topicfs_partition_log_start_offset",
	           "First offset still in the log.", r->st.log_start_offset);
	PART_GAUGE(f, rows, nrows, "topicfs_partition_log_end_offset",
	           "Offset the next record will get.", r->st.log_end_offset);
	PART_GAUGE(f, rows, nrows, "topicfs_partition_segments",
	           "Segments of the partition.", r->st.segments);
	/* a failed key directory's count is too low: NaN, the text format's unknown */
	fprintf(f, "# HELP topicfs_partition_live_keys Keys whose newest record is not a tombstone "
	        "(NaN: the key directory failed).\n# TYPE topicfs_partition_live_keys gauge\n");
	for (size_t i = 0; i < nrows; i++) {
		fprintf(f, "topicfs_partition_live_keys{topic=\"%s\",partition=\"%" PRId32 "\"} ",
		        rows[i].topic, rows[i].partition);
		if (rows[i].st.keys_failed)
			fputs("NaN\n", f);
		else
			fprintf(f, "%zu\n", rows[i].st.live_keys);
	}
	PART_GAUGE(f, rows, nrows, "topicfs_partition_keys_failed",
	           "1 if the key directory missed an update (out of memory): key reads fail "
	           "with EIO until a remount.", r->st.keys_failed);
	PART_GAUGE(f, rows, nrows, "topicfs_partition_keydir_memory_bytes",
	           "Memory held by the partition's key directory.", r->st.keydir_memory_bytes);
	fprintf(f, "# HELP topicfs_io_backend The I/O backend in use.\n"
	        "# TYPE topicfs_io_backend gauge\ntopicfs_io_backend{backend=\"%s\"} 1\n",
	        tfs_io_kind_name(tfs_io_kind_of(tfs_engine_io(m->engine))));
	gauge(f, "topicfs_read_only", "1 if the mount is read-only.", m->read_only);
	gauge(f, "topicfs_topics", "Topics in the data directory.", ntopics);
	gauge(f, "topicfs_fs_nodes", "Nodes the kernel may name.", tfs_inode_count(m->inodes));
	gauge(f, "topicfs_fs_open_handles", "Open file and directory handles.",
	      stat_of(&m->open_handles));
	counter(f, "topicfs_fs_commits_total", "Records committed by writing key handles.",
	        stat_of(&m->stats.commits));
	counter(f, "topicfs_fs_commit_errors_total", "Commits that failed.",
	        stat_of(&m->stats.commit_errors));
	counter(f, "topicfs_fs_bulk_records_total", "Records appended through .append, .put and .batches.",
	        stat_of(&m->stats.bulk_records));
	counter(f, "topicfs_fs_bulk_writes_total", "write(2) calls on .append, .put and .batches.",
	        stat_of(&m->stats.bulk_writes));
	counter(f, "topicfs_fs_tombstones_total", "Tombstones written by unlink and rename.",
	        stat_of(&m->stats.tombstones));
	counter(f, "topicfs_fs_dry_runs_total",
	        "Dry runs of a next pass for the fate and next_pass attributes.",
	        stat_of(&m->stats.dry_runs));
	counter(f, "topicfs_fs_lookups_total", "Lookups answered with a node.",
	        stat_of(&m->stats.lookups));
	counter(f, "topicfs_fs_key_reads_total", "READ requests of keys (page-cache hits send none).",
	        stat_of(&m->stats.key_reads));
	counter(f, "topicfs_fs_retired_inodes_total",
	        "Keys given a new inode because a writer met their page-cache readers.",
	        stat_of(&m->stats.retired_nodes));
	counter(f, "topicfs_fs_invalidations_total", "Cache invalidations sent to the kernel.",
	        tfs_notifier_sent(m->notifier));
	tfs_readcache_stats(m->readcache, &rcs);
	counter(f, "topicfs_fs_read_window_hits_total",
	        "Key opens served from a kept window of checked batches.", rcs.hits);
	counter(f, "topicfs_fs_read_window_misses_total",
	        "Key opens that read a window from the log.", rcs.misses);
	gauge(f, "topicfs_fs_read_windows", "Windows of checked batches kept for key opens.",
	      rcs.windows);
	gauge(f, "topicfs_fs_read_window_bytes", "Memory held by those windows.", rcs.bytes);
	tfs_kafka_write_metrics(m->kafka, f);
}

static void write_status(FILE *f, struct tfs_mount *m, const struct part_row *rows,
                         size_t nrows, size_t ntopics)
{
	int64_t total = 0;
	uint64_t keys = 0;
	size_t failed = 0;
	char unknown[64] = "";

	for (size_t i = 0; i < nrows; i++) {
		total += rows[i].st.size_bytes;
		if (rows[i].st.keys_failed)
			failed++;
		else
			keys += rows[i].st.live_keys;
	}
	if (failed)
		snprintf(unknown, sizeof(unknown), " (%zu partition%s unknown)", failed,
		         failed == 1 ? "" : "s");
	fprintf(f, "topicfs on %s (%s, io %s)\n", m->data_dir, m->read_only ? "read-only" : "read-write",
	        tfs_io_kind_name(tfs_io_kind_of(tfs_engine_io(m->engine))));
	fprintf(f, "%zu topics, %zu partitions, %" PRIu64 " live keys%s, %" PRId64 " bytes on disk\n",
	        ntopics, nrows, keys, unknown, total);
	fprintf(f, "nodes %zu, open handles %" PRIu64 ", commits %" PRIu64 " (%" PRIu64
	        " failed), bulk records %" PRIu64 ", tombstones %" PRIu64 "\n\n",
	        tfs_inode_count(m->inodes), stat_of(&m->open_handles), stat_of(&m->stats.commits),
	        stat_of(&m->stats.commit_errors), stat_of(&m->stats.bulk_records),
	        stat_of(&m->stats.tombstones));
	fprintf(f, "%-32s %5s %12s %12s %12s %8s %10s\n", "topic", "part", "start", "end", "bytes",
	        "segments", "live_keys");
	for (size_t i = 0; i < nrows; i++) {
		const struct part_row *r = &rows[i];
		char live[24];
		if (r->st.keys_failed)
			snprintf(live, sizeof(live), "?");
		else
			snprintf(live, sizeof(live), "%zu", r->st.live_keys);
		fprintf(f, "%-32s %5" PRId32 " %12" PRId64 " %12" PRId64 " %12" PRId64 " %8d %10s\n",
		        r->topic, r->partition, r->st.log_start_offset, r->st.log_end_offset,
		        r->st.size_bytes, r->st.segments, live);
	}
	for (size_t i = 0; i < nrows; i++)
		if (rows[i].st.keys_failed)
			fprintf(f, "%s/%" PRId32 ": KEY DIRECTORY FAILED (out of memory): key reads fail "
			        "with EIO until a remount\n", rows[i].topic, rows[i].partition);
	for (size_t i = 0; i < nrows; i++) {
		struct tfs_topic *t;
		if (i > 0 && rows[i].topic == rows[i - 1].topic)
			continue;                /* one line a topic */
		t = tfs_engine_topic_get(m->engine, rows[i].topic);
		if (t && tfs_topic_unconfigured(t))
			fprintf(f, "topic %s has no config: neither compacted nor trimmed until one is "
			        "set\n", rows[i].topic);
		tfs_topic_unref(t);
	}
}

/* A fresh producer id for whoever opened .topicfs/producer_id. */
static int generate_producer_id(struct tfs_mount *m, char **text, size_t *len)
{
	int64_t id;
	int16_t epoch;
	int rc;

	rc = tfs_engine_producer_id(m->engine, &id, &epoch);
	if (rc < 0)
		return rc;
	if (asprintf(text, "%" PRId64 " %d\n", id, epoch) < 0) {
		*text = NULL;
		return -ENOMEM;
	}
	*len = strlen(*text);
	return 0;
}

static int generate(struct tfs_mount *m, int which, char **text, size_t *len)
{
	char **names = NULL;
	struct part_row *rows = NULL;
	size_t nrows = 0, ntopics = 0;
	FILE *f;
	int rc;

	if (which == META_PRODUCER_ID)
		return generate_producer_id(m, text, len);
	rc = collect(m, &names, &rows, &nrows, &ntopics);

	*text = NULL;
	*len = 0;
	if (rc < 0)
		return rc;
	f = open_memstream(text, len);
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	if (which == META_METRICS) {
		struct tfs_cleaner *cl = tfs_engine_cleaner(m->engine);
		char *ctext = NULL;
		size_t clen = 0;
		write_metrics(f, m, rows, nrows, ntopics);
		tfs_consumers_write_metrics(f, m);
		if (cl) {
			rc = tfs_cleaner_metrics(cl, &ctext, &clen);
			if (rc == 0)
				fwrite(ctext, 1, clen, f);
			free(ctext);
		}
	} else {
		write_status(f, m, rows, nrows, ntopics);
		tfs_consumers_write_status(f, m);
	}
	if (fclose(f) != 0)
		rc = -ENOMEM;
	if (rc < 0) {
		free(*text);
		*text = NULL;
		*len = 0;
	}
out:
	free(rows);
	free(names);
	return rc;
}

/* ---- the directory -------------------------------------------------------- */

static int meta_dir_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                         struct stat *st)
{
	tfs_stat_dir(m, n, 0555, m->root_uid, m->root_gid, 2, st);
	return 0;
}

static void meta_dir_lookup(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                            const char *name)
{
	for (int i = 0; i < META_COUNT; i++) {
		if (!strcmp(name, meta_names[i])) {
			struct tfs_node_ident id = { .kind = TFS_NODE_META_FILE, .partition = -1,
			                             .num = i };
			tfs_reply_entry(req, m, &id);
			return;
		}
	}
	fuse_reply_err(req, ENOENT);
}

static void meta_dir_readdir(fuse_req_t req, struct tfs_mount *m, struct tfs_node *dir,
                             size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	char *buf = malloc(size ? size : 1);
	size_t used;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	used = tfs_dir_add_dots(req, buf, size, &off, plus, dir);
	for (int i = off >= TFS_DIR_FIRST - 1 ? (int)off - (TFS_DIR_FIRST - 1) : META_COUNT;
	     i < META_COUNT; i++) {
		struct tfs_node_ident id = { .kind = TFS_NODE_META_FILE, .partition = -1, .num = i };
		off_t next = i + TFS_DIR_FIRST;

		if (tfs_dir_add_entry(req, m, buf, size, &used, plus, &id, S_IFREG, meta_names[i],
		                      next) == 0)
			break;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

const struct tfs_node_ops tfs_kind_meta_dir = {
	.name = ".topicfs directory",
	.is_dir = true,
	.stat = meta_dir_stat,
	.lookup = meta_dir_lookup,
	.readdir = meta_dir_readdir,
};

/* ---- the files ------------------------------------------------------------ */

static int meta_file_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                          struct stat *st)
{
	tfs_stat_file(n, 0444, m->root_uid, m->root_gid, 0, 0, st);
	st->st_mtim = st->st_ctim = st->st_atim = m->started;
	return 0;
}

static void meta_fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct meta_fh *h = (struct meta_fh *)fh;

	tfs_fh_unregister(m, fh);
	free(h->text);
	free(h);
}

static void meta_file_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                           struct fuse_file_info *fi)
{
	struct meta_fh *h;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = generate(m, (int)n->num, &h->text, &h->len);
	if (rc < 0) {
		free(h);
		tfs_reply_err(req, rc, meta_names[n->num]);
		return;
	}
	tfs_fh_register(m, &h->base, n, meta_fh_free);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	fi->noflush = 1;
	if (fuse_reply_open(req, fi) != 0)
		meta_fh_free(m, &h->base);
}

static void meta_file_read(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, size_t size,
                           off_t off, struct fuse_file_info *fi)
{
	struct meta_fh *h = (struct meta_fh *)fh;

	if (off < 0 || (size_t)off >= h->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->len - (size_t)off)
		size = h->len - (size_t)off;
	fuse_reply_buf(req, h->text + off, size);
}

const struct tfs_node_ops tfs_kind_meta_file = {
	.name = ".topicfs file",
	.stat = meta_file_stat,
	.open = meta_file_open,
	.read = meta_file_read,
};
