/* segment.c - see segment.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "engine/log/lag.h"
#include "engine/log/segment.h"
#include "engine/ondisk.h"
#include "io/log.h"

#define PATH_CAP 4096
#define INDEX_INITIAL_CAP 64
#define SEGMENT_FILE_MODE 0644
#define INDEX_FILE_MAX (64u << 20)   /* refuse to load index files larger than this */

/* A segment's files; a .txnindex exists only when the segment holds an ABORT
 * marker, so every user of this list takes a missing file as fine. */
static const char *const suffixes[] = {
	TFS_SUFFIX_LOG, TFS_SUFFIX_INDEX, TFS_SUFFIX_TIMEINDEX, TFS_SUFFIX_TXNINDEX
};

static int write_whole(struct tfs_io *io, int dirfd, const char *name, const void *buf,
                       size_t len);

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

void tfs_segment_file_name(char *buf, size_t cap, const char *dir, tfs_offset_t base,
                           const char *suffix)
{
	snprintf(buf, cap, "%s/%020" PRId64 "%s", dir, base, suffix);
}

int tfs_segment_parse_name(const char *name, tfs_offset_t *base, const char **suffix)
{
	tfs_offset_t v = 0;
	int i;

	for (i = 0; i < TFS_SEGMENT_NAME_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -EINVAL;
		if (v > (INT64_MAX - (name[i] - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (name[i] - '0');
	}
	if (name[i] != '.')
		return -EINVAL;
	*base = v;
	*suffix = name + i;
	return 0;
}

static struct tfs_segment *segment_alloc(struct tfs_io *io, struct tfs_fdcache *fdc,
                                         const char *dir, tfs_offset_t base,
                                         int64_t index_interval_bytes)
{
	struct tfs_segment *s = calloc(1, sizeof(*s));
	char path[PATH_CAP];

	if (!s)
		return NULL;
	s->dir = strdup(dir);
	tfs_segment_file_name(path, sizeof(path), dir, base, TFS_SUFFIX_LOG);
	if (!s->dir || tfs_fdcache_slot_init(&s->log, path, O_RDWR) != 0) {
		free(s->dir);
		free(s);
		return NULL;
	}
	atomic_init(&s->refs, 1);
	atomic_init(&s->size, 0);
	s->io = io;
	s->fdcache = fdc;
	s->base_offset = base;
	s->next_offset = base;
	s->max_timestamp = -1;
	s->max_timestamp_offset = base;
	s->first_batch_timestamp = -1;
	s->created_ms = tfs_now_ms();
	s->index_interval_bytes = index_interval_bytes;
	s->corrupt_at = -1;
	pthread_mutex_init(&s->tally_lock, NULL);
	return s;
}

int tfs_segment_create(struct tfs_io *io, struct tfs_fdcache *fdc, int dirfd, const char *dir,
                       tfs_offset_t base, int64_t index_interval_bytes, bool sync_dir,
                       struct tfs_segment **out)
{
	char name[64];
	int fd, rc;
	struct tfs_segment *s;

	*out = NULL;
	snprintf(name, sizeof(name), "%020" PRId64 TFS_SUFFIX_LOG, base);
	fd = tfs_io_openat(io, dirfd, name, O_RDWR | O_CREAT | O_EXCL, SEGMENT_FILE_MODE);
	if (fd == -EEXIST)
		fd = tfs_io_openat(io, dirfd, name, O_RDWR | O_CREAT | O_TRUNC, SEGMENT_FILE_MODE);
	if (fd < 0) {
		tfs_log_error("segment", "cannot create %s/%s: %s", dir, name, tfs_strerror(fd));
		return fd;
	}
	close(fd);
	rc = sync_dir ? tfs_io_fsync_dir(io, dirfd) : 0;
	if (rc < 0) {
		tfs_log_error("segment", "cannot fsync %s: %s", dir, tfs_strerror(rc));
		return rc;
	}
	s = segment_alloc(io, fdc, dir, base, index_interval_bytes);
	if (!s)
		return -ENOMEM;
	*out = s;
	return 0;
}

int tfs_segment_open(struct tfs_io *io, struct tfs_fdcache *fdc, const char *dir,
                     tfs_offset_t base, int64_t index_interval_bytes, struct tfs_segment **out)
{
	struct tfs_segment *s = segment_alloc(io, fdc, dir, base, index_interval_bytes);

	*out = s;
	return s ? 0 : -ENOMEM;
}

struct tfs_segment *tfs_segment_ref(struct tfs_segment *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

static void unlink_files(struct tfs_segment *s)
{
	char path[PATH_CAP];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		char suffix[32];
		snprintf(suffix, sizeof(suffix), "%s.deleted", suffixes[i]);
		tfs_segment_file_name(path, sizeof(path), s->dir, s->base_offset, suffix);
		/* on the io context's thread: freeing a large file's blocks takes tens
		 * of ms, and the last owner may be a pass or a reader */
		tfs_io_unlink_later(s->io, path);
	}
}

void tfs_segment_unref(struct tfs_segment *s)
{
	/* pairs with the increments in tfs_segment_ref: the last owner sees all writes */
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (s->pinned)
		tfs_segment_unpin(s);
	tfs_fdcache_slot_release(s->fdcache, &s->log);
	if (s->deleted)
		unlink_files(s);
	free(s->index);
	free(s->tindex);
	free(s->aborted);
	free(s->damage);
	tfs__tally_free(s->tally);
	pthread_mutex_destroy(&s->tally_lock);
	free(s->dir);
	free(s);
}

int tfs_segment_pin(struct tfs_segment *s)
{
	int fd;

	if (s->pinned)
		return 0;
	fd = tfs_fdcache_get(s->fdcache, &s->log);
	if (fd < 0)
		return fd;
	s->pinned = true;
	return 0;
}

void tfs_segment_unpin(struct tfs_segment *s)
{
	if (!s->pinned)
		return;
	s->pinned = false;
	tfs_fdcache_put(s->fdcache, &s->log);
}

int tfs_segment_fd_get(struct tfs_segment *s)
{
	return tfs_fdcache_get(s->fdcache, &s->log);   /* logs a failure */
}

void tfs_segment_fd_put(struct tfs_segment *s)
{
	tfs_fdcache_put(s->fdcache, &s->log);
}

int tfs_segment_fd(struct tfs_segment *s)
{
	return s->log.fd;
}

ssize_t tfs_segment_read(struct tfs_segment *s, void *buf, size_t len, tfs_pos_t pos)
{
	int fd = tfs_fdcache_get(s->fdcache, &s->log);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = tfs_io_read(s->io, fd, buf, len, (uint64_t)pos);
	tfs_fdcache_put(s->fdcache, &s->log);
	return n;
}

ssize_t tfs_segment_read_fn(void *seg, void *buf, size_t len, tfs_pos_t pos)
{
	return tfs_segment_read(seg, buf, len, pos);
}

static int grow(void **arr, uint32_t *cap, size_t elem)
{
	uint32_t ncap = *cap ? *cap * 2 : INDEX_INITIAL_CAP;
	void *p = realloc(*arr, (size_t)ncap * elem);

	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Appends (timestamp, offset) to the in-memory time index when timestamp is
 * greater than the last entry's (Kafka's TimeIndex.maybeAppend). A first entry
 * allocates exactly one slot when exact (the final entry of an otherwise unindexed
 * segment, which every partition's active segment may get at open). */
static int timeindex_maybe_append(struct tfs_segment *s, int64_t timestamp, tfs_offset_t offset,
                                  bool exact)
{
	if (timestamp < 0 ||
	    (s->tindex_count > 0 && s->tindex[s->tindex_count - 1].timestamp >= timestamp))
		return 0;
	if (s->tindex_count == s->tindex_cap) {
		if (exact && s->tindex_cap == 0) {
			s->tindex = malloc(sizeof(*s->tindex));
			if (!s->tindex)
				return -ENOMEM;
			s->tindex_cap = 1;
		} else if (grow((void **)&s->tindex, &s->tindex_cap, sizeof(*s->tindex)) < 0) {
			return -ENOMEM;
		}
	}
	s->tindex[s->tindex_count++] = (struct tfs_timeindex_entry){
		timestamp, (int32_t)(offset - s->base_offset) };
	return 0;
}

int tfs_segment_note_batch(struct tfs_segment *s, tfs_pos_t pos, size_t size,
                           tfs_offset_t base, tfs_offset_t last, int64_t max_ts)
{
	int64_t max_so_far = s->max_timestamp;
	tfs_offset_t max_offset = s->max_timestamp_offset;

	(void)base;
	/* Kafka's LogSegment.append: the batch's max timestamp counts before the
	 * index entry, so an entry made at this batch carries it */
	if (max_ts > max_so_far) {
		max_so_far = max_ts;
		max_offset = last;
	}
	if (s->bytes_since_index > s->index_interval_bytes) {
		if (s->index_count == s->index_cap &&
		    grow((void **)&s->index, &s->index_cap, sizeof(*s->index)) < 0)
			return -ENOMEM;
		if (s->tindex_count == s->tindex_cap &&
		    grow((void **)&s->tindex, &s->tindex_cap, sizeof(*s->tindex)) < 0)
			return -ENOMEM;
		s->index[s->index_count++] = (struct tfs_index_entry){
			(int32_t)(last - s->base_offset), (int32_t)pos };
		(void)timeindex_maybe_append(s, max_so_far, max_offset, false);   /* has room */
		s->bytes_since_index = 0;
	}
	s->bytes_since_index += (int64_t)size;
	s->max_timestamp = max_so_far;
	s->max_timestamp_offset = max_offset;
	if (s->first_batch_timestamp < 0)
		s->first_batch_timestamp = max_ts;
	s->next_offset = last + 1;
	return 0;
}

int tfs_segment_timeindex_final(struct tfs_segment *s)
{
	return timeindex_maybe_append(s, s->max_timestamp, s->max_timestamp_offset, true);
}

tfs_offset_t tfs_segment_time_lookup(const struct tfs_segment *s, int64_t timestamp)
{
	uint32_t lo = 0, hi = s->tindex_count;

	if (hi == 0 || s->tindex[0].timestamp >= timestamp)
		return s->base_offset;
	/* invariant: tindex[lo].timestamp < timestamp, and every entry at or past hi
	 * is >= timestamp */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->tindex[mid].timestamp < timestamp)
			lo = mid;
		else
			hi = mid;
	}
	/* every record up to the entry's batch is older than its timestamp: the
	 * first one that is not comes after that batch, whose last offset it is */
	return s->base_offset + s->tindex[lo].rel_offset + 1;
}

int64_t tfs_segment_largest_timestamp(struct tfs_segment *s)
{
	struct stat st;
	int fd, rc;

	if (s->max_timestamp >= 0)
		return s->max_timestamp;
	fd = tfs_fdcache_get(s->fdcache, &s->log);
	if (fd < 0)
		return tfs_now_ms();
	rc = fstat(fd, &st);
	tfs_fdcache_put(s->fdcache, &s->log);
	if (rc < 0)
		return tfs_now_ms();
	return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

tfs_pos_t tfs_segment_lookup(const struct tfs_segment *s, tfs_offset_t target)
{
	uint32_t lo = 0, hi = s->index_count;
	int64_t rel = target - s->base_offset;

	if (rel < 0 || s->index_count == 0 || s->index[0].rel_offset > rel)
		return 0;
	/* invariant: index[lo].rel_offset <= rel, and every entry at or past hi is > rel */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->index[mid].rel_offset <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return s->index[lo].pos;
}

bool tfs_segment_index_full(const struct tfs_segment *s, int64_t index_bytes)
{
	return (int64_t)(s->index_count + 1) * TFS_INDEX_ENTRY_BYTES > index_bytes ||
	       (int64_t)(s->tindex_count + 1) * TFS_TIMEINDEX_ENTRY_BYTES > index_bytes;
}

void tfs_segment_reset_index(struct tfs_segment *s)
{
	s->index_count = 0;
	s->tindex_count = 0;
	s->bytes_since_index = 0;
	s->max_timestamp = -1;
	s->max_timestamp_offset = s->base_offset;
	s->first_batch_timestamp = -1;
	s->next_offset = s->base_offset;
}

static int encode_indexes(const struct tfs_segment *s, uint8_t **ibuf, size_t *ilen,
                          uint8_t **tbuf, size_t *tlen, bool final_entry)
{
	uint32_t tcount = s->tindex_count;
	bool extra = false;

	/* On seal Kafka forces one last time-index entry for the segment's max. */
	if (final_entry && s->max_timestamp >= 0 &&
	    (tcount == 0 || s->tindex[tcount - 1].timestamp < s->max_timestamp))
		extra = true;
	*ilen = (size_t)s->index_count * TFS_INDEX_ENTRY_BYTES;
	*tlen = (size_t)(tcount + extra) * TFS_TIMEINDEX_ENTRY_BYTES;
	*ibuf = malloc(*ilen + 1);
	*tbuf = malloc(*tlen + 1);
	if (!*ibuf || !*tbuf) {
		free(*ibuf);
		free(*tbuf);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->index_count; i++) {
		put_be32(*ibuf + i * TFS_INDEX_ENTRY_BYTES, (uint32_t)s->index[i].rel_offset);
		put_be32(*ibuf + i * TFS_INDEX_ENTRY_BYTES + 4, (uint32_t)s->index[i].pos);
	}
	for (uint32_t i = 0; i < tcount; i++) {
		put_be64(*tbuf + i * TFS_TIMEINDEX_ENTRY_BYTES, (uint64_t)s->tindex[i].timestamp);
		put_be32(*tbuf + i * TFS_TIMEINDEX_ENTRY_BYTES + 8, (uint32_t)s->tindex[i].rel_offset);
	}
	if (extra) {
		put_be64(*tbuf + tcount * TFS_TIMEINDEX_ENTRY_BYTES, (uint64_t)s->max_timestamp);
		put_be32(*tbuf + tcount * TFS_TIMEINDEX_ENTRY_BYTES + 8,
		         (uint32_t)(s->max_timestamp_offset - s->base_offset));
	}
	return 0;
}

/* fsyncs the .log (data and size) through the descriptor cache. */
static int fsync_log(struct tfs_segment *s)
{
	int fd = tfs_fdcache_get(s->fdcache, &s->log), rc;

	if (fd < 0)
		return fd;
	rc = tfs_io_fsync(s->io, fd, true);
	tfs_fdcache_put(s->fdcache, &s->log);
	return rc;
}

static void index_names(const struct tfs_segment *s, char names[2][64])
{
	snprintf(names[0], 64, "%020" PRId64 TFS_SUFFIX_INDEX, s->base_offset);
	snprintf(names[1], 64, "%020" PRId64 TFS_SUFFIX_TIMEINDEX, s->base_offset);
}

int tfs_segment_stage_indexes(struct tfs_segment *s, int dirfd, int fds[2])
{
	uint8_t *buf[2] = { NULL, NULL };
	size_t len[2];
	char names[2][64];
	int rc;

	fds[0] = fds[1] = -1;
	rc = encode_indexes(s, &buf[0], &len[0], &buf[1], &len[1], s->sealed);
	index_names(s, names);
	/* Index files are derived data: each is replaced whole (tfs_file_stage) */
	for (int i = 0; i < 2 && rc == 0; i++) {
		fds[i] = tfs_file_stage(s->io, dirfd, names[i], buf[i], len[i]);
		if (fds[i] < 0)
			rc = fds[i];
	}
	if (rc < 0)
		tfs_segment_unstage_indexes(s, dirfd, fds);
	free(buf[0]);
	free(buf[1]);
	return rc;
}

int tfs_segment_commit_indexes(struct tfs_segment *s, int dirfd, int fds[2])
{
	char names[2][64];
	int rc = 0;

	index_names(s, names);
	for (int i = 0; i < 2; i++) {
		close(fds[i]);
		fds[i] = -1;
		if (rc == 0)
			rc = tfs_file_commit(s->io, dirfd, names[i]);
		else
			tfs_file_unstage(dirfd, names[i]);
	}
	return rc;
}

void tfs_segment_unstage_indexes(struct tfs_segment *s, int dirfd, int fds[2])
{
	char names[2][64];

	index_names(s, names);
	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0) {
			close(fds[i]);
			tfs_file_unstage(dirfd, names[i]);
		}
		fds[i] = -1;
	}
}

int tfs_segment_write_indexes(struct tfs_segment *s, int dirfd, bool sync)
{
	struct tfs_io_fsync_req req[3];
	int fds[2], n = 0, logfd = -1, rc;

	rc = tfs_segment_stage_indexes(s, dirfd, fds);
	if (rc < 0)
		goto out;
	if (sync) {
		logfd = tfs_fdcache_get(s->fdcache, &s->log);
		if (logfd < 0) {
			rc = logfd;
			tfs_segment_unstage_indexes(s, dirfd, fds);
			goto out;
		}
		req[n++] = (struct tfs_io_fsync_req){ .fd = logfd, .datasync = true };
	}
	req[n++] = (struct tfs_io_fsync_req){ .fd = fds[0] };
	req[n++] = (struct tfs_io_fsync_req){ .fd = fds[1] };
	/* the .log and both files in one wait; renamed only once all are durable */
	rc = tfs_io_fsync_all(s->io, req, n);
	if (logfd >= 0)
		tfs_fdcache_put(s->fdcache, &s->log);
	if (rc < 0)
		tfs_segment_unstage_indexes(s, dirfd, fds);
	else
		rc = tfs_segment_commit_indexes(s, dirfd, fds);
	if (rc == 0)
		rc = tfs_io_fsync_dir(s->io, dirfd);
out:
	if (rc < 0)
		tfs_log_error("segment", "cannot write indexes of %s/%020" PRId64 ": %s", s->dir,
		              s->base_offset, tfs_strerror(rc));
	return rc;
}

int tfs_segment_indexes_match(struct tfs_segment *s)
{
	uint8_t *ibuf = NULL, *tbuf = NULL;
	size_t ilen, tlen, flen = 0;
	char name[64], *file = NULL;
	int dirfd, match = 0;

	if (encode_indexes(s, &ibuf, &ilen, &tbuf, &tlen, s->sealed) < 0)
		return 0;
	dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		goto out;
	snprintf(name, sizeof(name), "%020" PRId64 TFS_SUFFIX_INDEX, s->base_offset);
	if (tfs_file_read_all(s->io, dirfd, name, INDEX_FILE_MAX, &file, &flen) < 0)
		goto out;
	if (flen != ilen || memcmp(file, ibuf, ilen) != 0)
		goto out;
	free(file);
	file = NULL;
	snprintf(name, sizeof(name), "%020" PRId64 TFS_SUFFIX_TIMEINDEX, s->base_offset);
	if (tfs_file_read_all(s->io, dirfd, name, INDEX_FILE_MAX, &file, &flen) < 0)
		goto out;
	/* a sealed segment's time index carries the final entry; accept either form */
	if (flen == tlen && memcmp(file, tbuf, tlen) == 0)
		match = 1;
	else if (flen + TFS_TIMEINDEX_ENTRY_BYTES == tlen && memcmp(file, tbuf, flen) == 0)
		match = 1;
out:
	if (dirfd >= 0)
		close(dirfd);
	free(file);
	free(ibuf);
	free(tbuf);
	return match;
}

int tfs_segment_add_aborted(struct tfs_segment *s, const struct tfs_aborted_txn *a)
{
	if (s->aborted_count == s->aborted_cap) {
		uint32_t cap = s->aborted_cap ? s->aborted_cap * 2 : 4;
		struct tfs_aborted_txn *p = realloc(s->aborted, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->aborted = p;
		s->aborted_cap = cap;
	}
	s->aborted[s->aborted_count++] = *a;
	return 0;
}

/* The .txnindex bytes of the in-memory list; *buf NULL when it is empty. */
static int encode_txnindex(const struct tfs_segment *s, uint8_t **buf, size_t *len)
{
	uint8_t *p;

	*buf = NULL;
	*len = (size_t)s->aborted_count * TFS_TXNINDEX_ENTRY_BYTES;
	if (*len == 0)
		return 0;
	if (!(p = malloc(*len)))
		return -ENOMEM;
	*buf = p;
	for (uint32_t i = 0; i < s->aborted_count; i++, p += TFS_TXNINDEX_ENTRY_BYTES) {
		const struct tfs_aborted_txn *a = &s->aborted[i];
		p[0] = (uint8_t)(TFS_TXNINDEX_VERSION >> 8);
		p[1] = (uint8_t)TFS_TXNINDEX_VERSION;
		put_be64(p + 2, (uint64_t)a->producer_id);
		put_be64(p + 10, (uint64_t)a->first_offset);
		put_be64(p + 18, (uint64_t)a->last_offset);
		put_be64(p + 26, (uint64_t)a->last_stable_offset);
	}
	return 0;
}

int tfs_segment_write_txnindex(struct tfs_segment *s, int dirfd, const char *suffix)
{
	uint8_t *buf = NULL;
	size_t len;
	char name[96];
	int rc = encode_txnindex(s, &buf, &len);

	snprintf(name, sizeof(name), "%020" PRId64 ".txnindex%s", s->base_offset, suffix);
	if (rc < 0)
		goto out;
	if (!buf) {
		rc = tfs_io_unlinkat(s->io, dirfd, name, 0);
		if (rc == -ENOENT)
			rc = 0;
	} else if (suffix[0] == '\0') {
		rc = tfs_file_replace(s->io, dirfd, name, buf, len);
	} else {
		rc = write_whole(s->io, dirfd, name, buf, len);
	}
out:
	if (rc < 0)
		tfs_log_error("segment", "cannot write %s/%s: %s", s->dir, name, tfs_strerror(rc));
	free(buf);
	return rc;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

int tfs_segment_txnindex_match(struct tfs_segment *s, int dirfd)
{
	char name[64], *file = NULL;
	const uint8_t *p;
	size_t flen = 0;
	int rc;

	snprintf(name, sizeof(name), "%020" PRId64 TFS_SUFFIX_TXNINDEX, s->base_offset);
	rc = tfs_file_read_all(s->io, dirfd, name, INDEX_FILE_MAX, &file, &flen);
	if (rc == -ENOENT)
		return s->aborted_count == 0;
	if (rc < 0 || flen != (size_t)s->aborted_count * TFS_TXNINDEX_ENTRY_BYTES) {
		free(file);
		return 0;
	}
	p = (const uint8_t *)file;
	for (uint32_t i = 0; i < s->aborted_count; i++, p += TFS_TXNINDEX_ENTRY_BYTES) {
		if ((p[0] << 8 | p[1]) != TFS_TXNINDEX_VERSION ||
		    (int64_t)get_be64(p + 2) != s->aborted[i].producer_id ||
		    (int64_t)get_be64(p + 18) != s->aborted[i].last_offset ||
		    (int64_t)get_be64(p + 10) < 0 ||
		    (int64_t)get_be64(p + 10) > s->aborted[i].first_offset ||
		    (int64_t)get_be64(p + 26) < 0 ||
		    (int64_t)get_be64(p + 26) > s->aborted[i].last_stable_offset) {
			free(file);
			return 0;
		}
	}
	/* the same transactions: the file's first offsets and LSOs are the ones
	 * written with the markers, which a scan of a cleaned log cannot know. The
	 * scan's are upper bounds (a transaction cannot start after the first of
	 * its batches the scan met, nor another one open at the marker after the
	 * first of its batches): an entry past them is damage, which would show
	 * aborted records as committed to a read_committed consumer. */
	p = (const uint8_t *)file;
	for (uint32_t i = 0; i < s->aborted_count; i++, p += TFS_TXNINDEX_ENTRY_BYTES) {
		s->aborted[i].first_offset = (tfs_offset_t)get_be64(p + 10);
		s->aborted[i].last_stable_offset = (tfs_offset_t)get_be64(p + 26);
	}
	free(file);
	return 1;
}

int tfs_segment_truncate(struct tfs_segment *s, tfs_pos_t size)
{
	int fd = tfs_fdcache_get(s->fdcache, &s->log), rc;

	if (fd < 0)
		return fd;
	rc = tfs_io_ftruncate(s->io, fd, (uint64_t)size);
	if (rc == 0)
		rc = tfs_io_fsync(s->io, fd, true);
	tfs_fdcache_put(s->fdcache, &s->log);
	if (rc == 0)
		atomic_store_explicit(&s->size, size, memory_order_release);
	return rc;
}

int tfs_segment_mark_deleted(struct tfs_segment *s, int dirfd)
{
	char from[64], to[80];
	int rc = 0;

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(from, sizeof(from), "%020" PRId64 "%s", s->base_offset, suffixes[i]);
		snprintf(to, sizeof(to), "%s.deleted", from);
		int r = tfs_io_renameat(s->io, dirfd, from, dirfd, to);
		if (r < 0 && r != -ENOENT && rc == 0)
			rc = r;
		if (i == 0 && r == 0) {
			char path[PATH_CAP];
			snprintf(path, sizeof(path), "%s/%s", s->dir, to);
			tfs_fdcache_slot_set_path(s->fdcache, &s->log, path);
		}
	}
	s->deleted = true;
	return rc;
}

/* ---- flushing ahead ---- */

static void *flush_main(void *arg)
{
	struct tfs_segment *s = arg;
	int fd = tfs_fdcache_get(s->fdcache, &s->log), rc;

	if (fd < 0)
		return (void *)(intptr_t)fd;
	rc = s->flush_admit < 0 ? s->flush_admit : tfs_io_fsync_admitted(fd, true);
	tfs_fdcache_put(s->fdcache, &s->log);
	return (void *)(intptr_t)rc;
}

/* Joins the flush thread; blocking waits for it, otherwise only a finished one is
 * joined. Returns true when no flush is running any more. */
static bool flush_join(struct tfs_segment *s, bool blocking)
{
	void *res;
	int rc;

	if (!s->flush_running)
		return true;
	rc = blocking ? pthread_join(s->flush_thread, &res) : pthread_tryjoin_np(s->flush_thread, &res);
	if (rc != 0)
		return false;     /* EBUSY: still flushing */
	s->flush_running = false;
	if ((intptr_t)res < 0 && s->flush_err == 0) {
		s->flush_err = (int)(intptr_t)res;
		tfs_log_error("segment", "background flush of %s/%020" PRId64 ".log failed: %s",
		              s->dir, s->base_offset, tfs_strerror(s->flush_err));
	}
	tfs_segment_unref(s);  /* the flush thread's reference */
	return true;
}

void tfs_segment_flush_ahead(struct tfs_segment *s, int64_t flush_ahead_bytes)
{
	tfs_pos_t size = tfs_segment_size(s);

	if (size - s->flush_mark < flush_ahead_bytes || !flush_join(s, false))
		return;
	/* the fault gate here, in the appender: sweeps count it at a fixed step */
	s->flush_admit = tfs_io_fsync_admit(s->io);
	tfs_segment_ref(s);
	if (pthread_create(&s->flush_thread, NULL, flush_main, s) != 0) {
		tfs_segment_unref(s);
		return;
	}
	s->flush_running = true;
	s->flush_mark = size;
}

int tfs_segment_flush_wait(struct tfs_segment *s)
{
	flush_join(s, true);
	return s->flush_err;
}

void tfs_segment_note_flushed(struct tfs_segment *s, tfs_pos_t upto)
{
	if (upto > s->flush_mark)
		s->flush_mark = upto;
}

/* ---- the cleaner's output ---- */

static const char *const index_suffixes[] = { TFS_SUFFIX_INDEX, TFS_SUFFIX_TIMEINDEX };

int tfs_segment_create_cleaned(struct tfs_io *io, struct tfs_fdcache *fdc, int dirfd,
                               const char *dir, tfs_offset_t base,
                               int64_t index_interval_bytes, struct tfs_segment **out)
{
	char name[64], path[PATH_CAP];
	struct tfs_segment *s;
	int fd, rc;

	*out = NULL;
	snprintf(name, sizeof(name), "%020" PRId64 ".log.cleaned", base);
	fd = tfs_io_openat(io, dirfd, name, O_RDWR | O_CREAT | O_TRUNC, SEGMENT_FILE_MODE);
	if (fd < 0) {
		tfs_log_error("segment", "cannot create %s/%s: %s", dir, name, tfs_strerror(fd));
		return fd;
	}
	close(fd);
	s = segment_alloc(io, fdc, dir, base, index_interval_bytes);
	if (!s)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rc = tfs_fdcache_slot_set_path(fdc, &s->log, path);
	if (rc < 0) {
		tfs_segment_unref(s);
		return rc;
	}
	*out = s;
	return 0;
}

static int write_whole(struct tfs_io *io, int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = tfs_io_openat(io, dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, SEGMENT_FILE_MODE);
	int rc;

	if (fd < 0)
		return fd;
	rc = len ? tfs_io_write(io, fd, buf, len, 0) : 0;
	if (rc == 0)
		rc = tfs_io_fsync(io, fd, false);
	close(fd);
	return rc;
}

int tfs_segment_write_indexes_to(struct tfs_segment *s, int dirfd, const char *suffix)
{
	uint8_t *ibuf = NULL, *tbuf = NULL;
	size_t ilen, tlen;
	char name[96];
	int rc;

	rc = encode_indexes(s, &ibuf, &ilen, &tbuf, &tlen, s->sealed);
	if (rc < 0)
		return rc;
	if ((rc = fsync_log(s)) < 0)
		goto out;
	snprintf(name, sizeof(name), "%020" PRId64 ".index%s", s->base_offset, suffix);
	rc = write_whole(s->io, dirfd, name, ibuf, ilen);
	if (rc < 0)
		goto out;
	snprintf(name, sizeof(name), "%020" PRId64 ".timeindex%s", s->base_offset, suffix);
	rc = write_whole(s->io, dirfd, name, tbuf, tlen);
out:
	if (rc < 0)
		tfs_log_error("segment", "cannot write indexes%s of %s/%020" PRId64 ": %s", suffix,
		              s->dir, s->base_offset, tfs_strerror(rc));
	free(ibuf);
	free(tbuf);
	return rc;
}

int tfs_segment_rename_files(struct tfs_segment *s, int dirfd, const char *from, const char *to)
{
	char a[96], b[96], path[PATH_CAP];
	int rc;

	snprintf(a, sizeof(a), "%020" PRId64 ".log%s", s->base_offset, from);
	snprintf(b, sizeof(b), "%020" PRId64 ".log%s", s->base_offset, to);
	rc = tfs_io_renameat(s->io, dirfd, a, dirfd, b);
	if (rc < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/%s", s->dir, b);
	rc = tfs_fdcache_slot_set_path(s->fdcache, &s->log, path);
	if (rc < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(index_suffixes) / sizeof(index_suffixes[0]); i++) {
		snprintf(a, sizeof(a), "%020" PRId64 "%s%s", s->base_offset, index_suffixes[i], from);
		snprintf(b, sizeof(b), "%020" PRId64 "%s%s", s->base_offset, index_suffixes[i], to);
		rc = tfs_io_renameat(s->io, dirfd, a, dirfd, b);
		if (rc < 0)
			goto fail;
	}
	snprintf(a, sizeof(a), "%020" PRId64 ".txnindex%s", s->base_offset, from);
	snprintf(b, sizeof(b), "%020" PRId64 ".txnindex%s", s->base_offset, to);
	rc = tfs_io_renameat(s->io, dirfd, a, dirfd, b);
	if (rc < 0 && rc != -ENOENT)
		goto fail;
	return 0;
fail:
	tfs_log_error("segment", "cannot rename %s/%s to %s: %s", s->dir, a, b, tfs_strerror(rc));
	return rc;
}

int tfs_segment_unlink_files(struct tfs_io *io, int dirfd, tfs_offset_t base, const char *suffix)
{
	char name[96];
	int rc = 0;

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(name, sizeof(name), "%020" PRId64 "%s%s", base, suffixes[i], suffix);
		int r = tfs_io_unlinkat(io, dirfd, name, 0);
		if (r < 0 && r != -ENOENT && rc == 0)
			rc = r;
	}
	return rc;
}
