/* log_inspect.c - read-only inspection of logs on disk, the shared part: the
 * segment scanner, directory listings and the index parsers (the checkpoint's is
 * engine/ondisk.h's, shared with the cleaner). verify is in log_verify.c;
 * distinct keys and the compaction estimate are in log_estimate.c. The contract of
 * all three is log_inspect.h.
 *
 * The scanner is the mount's own batch reader (engine/format/batch_reader.h) over
 * a file opened read-only, its fates told as scan statuses, so that what it calls
 * a bad batch the mount skips too: a claim past the end of the file is a torn
 * tail, a claim above 256 MiB a bad header. Memory therefore stays within the read
 * buffer plus the largest real batch.
 */
#include "engine/inspect/log_inspect.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/format/batch_reader.h"
#include "engine/inspect/log_inspect_internal.h"
#include "engine/ondisk.h"
#include "io/io.h"

#define SCAN_BUF_BYTES ((size_t)1 << 20)     /* read-ahead of the scanner */

/* ================================================================================
 * The segment scanner
 * ================================================================================ */

struct tfs_segscan {
	struct tfs_io *io;
	int fd;
	int64_t file_size;          /* at open: a live writer's later bytes are not ours */
	bool done;
	struct tfs_batch_reader rd;
};

/* The reader's source: the file must hold what it held at open. */
static ssize_t scan_read(void *arg, void *buf, size_t len, tfs_pos_t pos)
{
	struct tfs_segscan *s = arg;
	ssize_t got = tfs_io_read(s->io, s->fd, buf, len, (uint64_t)pos);

	return got == 0 ? -ESTALE : got;    /* the file shrank under us */
}

int tfs_segscan_open(struct tfs_io *io, const char *path, struct tfs_segscan **out)
{
	struct tfs_segscan *s;
	struct stat st;
	int fd;

	*out = NULL;
	fd = tfs_io_openat(io, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->io = io;
	s->fd = fd;
	s->file_size = st.st_size;
	tfs_batch_reader_init(&s->rd, scan_read, s, 0, st.st_size, SCAN_BUF_BYTES, NULL, NULL);
	*out = s;
	return 0;
}

void tfs_segscan_close(struct tfs_segscan *s)
{
	if (!s)
		return;
	close(s->fd);
	tfs_batch_reader_release(&s->rd);
	free(s);
}

int64_t tfs_segscan_file_size(const struct tfs_segscan *s)
{
	return s->file_size;
}

void tfs_segscan_seek(struct tfs_segscan *s, tfs_pos_t pos)
{
	tfs_batch_reader_seek(&s->rd, pos);
	s->done = pos >= s->file_size;
}

int tfs_segscan_next(struct tfs_segscan *s, struct tfs_scan_batch *b)
{
	struct tfs_batch_frame f;
	int rc;

	memset(b, 0, sizeof(*b));
	if (s->done)
		return 0;
	rc = tfs_batch_reader_next(&s->rd, &f);
	if (rc <= 0)
		return rc;
	b->pos = f.pos;
	b->h = f.h;
	b->why = f.why;
	if (f.unsupported) {
		b->status = TFS_SCAN_BAD_HEADER;
		b->why = "magic 0 or 1 (message format v0/v1) is not read by topicfs";
		s->done = true;
		return 1;
	}
	if (f.size == 0) {
		/* the rule the mount applies: nothing from here on can be framed */
		b->status = f.torn ? TFS_SCAN_TRUNCATED : TFS_SCAN_BAD_HEADER;
		b->size = f.torn ? (size_t)(s->file_size - f.pos) : 0;
		b->header_valid = f.header_ok;
		s->done = true;
		return 1;
	}
	b->size = f.size;
	b->bytes = f.bytes;
	b->header_valid = f.header_ok;
	if (!f.header_ok) {
		/* framed, but a field the CRC does not cover is impossible (a negative
		 * base offset): the fields stay as read, the offsets made harmless */
		b->status = TFS_SCAN_BAD_BATCH;
		if (b->h.last_offset_delta < 0 || b->h.base_offset < 0 ||
		    b->h.base_offset > INT64_MAX - b->h.last_offset_delta)
			b->h.last_offset_delta = 0;
		return 1;
	}
	b->status = f.fate == TFS_FATE_GOOD ? TFS_SCAN_OK : TFS_SCAN_BAD_BATCH;
	return 1;
}

/* ================================================================================
 * Listings and small files
 * ================================================================================ */

enum tfs_file_kind tfs_inspect_file_kind(const char *name, tfs_offset_t *base)
{
	const char *suffix;
	tfs_offset_t b;

	if (base)
		*base = TFS_OFFSET_NONE;
	if (ends_with(name, TFS_SUFFIX_TMP))
		return TFS_FILE_LEFTOVER;
	if (!strcmp(name, "leader-epoch-checkpoint") || !strcmp(name, "partition.metadata"))
		return TFS_FILE_KAFKA;
	if (tfs_segment_parse_name(name, &b, &suffix) < 0)
		return TFS_FILE_OTHER;
	if (base)
		*base = b;
	if (ends_with(suffix, TFS_SUFFIX_CLEANED) || ends_with(suffix, TFS_SUFFIX_SWAP) ||
	    ends_with(suffix, TFS_SUFFIX_DELETED))
		return TFS_FILE_LEFTOVER;
	if (!strcmp(suffix, TFS_SUFFIX_LOG))
		return TFS_FILE_LOG;
	if (!strcmp(suffix, TFS_SUFFIX_INDEX))
		return TFS_FILE_INDEX;
	if (!strcmp(suffix, TFS_SUFFIX_TIMEINDEX))
		return TFS_FILE_TIMEINDEX;
	if (!strcmp(suffix, TFS_SUFFIX_SNAPSHOT))
		return TFS_FILE_SNAPSHOT;
	if (!strcmp(suffix, TFS_SUFFIX_TXNINDEX))
		return TFS_FILE_TXNINDEX;
	return TFS_FILE_OTHER;
}

static int cmp_dir_file(const void *a, const void *b)
{
	const struct tfs_dir_file *x = a, *y = b;

	if (x->base != y->base)
		return x->base < y->base ? -1 : 1;
	/* ".log" sorts before ".index" and ".timeindex" this way round: put logs first */
	if ((x->kind == TFS_FILE_LOG) != (y->kind == TFS_FILE_LOG))
		return x->kind == TFS_FILE_LOG ? -1 : 1;
	return strcmp(x->name, y->name);
}

void tfs_dir_listing_release(struct tfs_dir_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++)
		free(l->files[i].name);
	free(l->files);
	l->files = NULL;
	l->count = 0;
}

int tfs_inspect_list_dir(const char *dir, struct tfs_dir_listing *out)
{
	DIR *d;
	struct dirent *de;
	size_t cap = 0;
	int rc = 0;

	out->files = NULL;
	out->count = 0;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct tfs_dir_file *f;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;       /* gone meanwhile (a live cleaner) */
			st.st_mode = S_IFREG;
			st.st_size = -1;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		if (out->count == cap) {
			size_t nc = cap ? cap * 2 : 32;
			struct tfs_dir_file *nf = realloc(out->files, nc * sizeof(*nf));
			if (!nf) {
				rc = -ENOMEM;
				break;
			}
			out->files = nf;
			cap = nc;
		}
		f = &out->files[out->count];
		f->name = strdup(de->d_name);
		if (!f->name) {
			rc = -ENOMEM;
			break;
		}
		f->kind = tfs_inspect_file_kind(f->name, &f->base);
		f->size_bytes = st.st_size;
		out->count++;
	}
	closedir(d);
	if (rc < 0) {
		tfs_dir_listing_release(out);
		return rc;
	}
	if (out->count)
		qsort(out->files, out->count, sizeof(*out->files), cmp_dir_file);
	return 0;
}

static int32_t get_be32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int64_t get_be64(const uint8_t *p)
{
	return (int64_t)((uint64_t)(uint32_t)get_be32(p) << 32 | (uint32_t)get_be32(p + 4));
}

/* Reads a whole file of fixed-size entries into a malloc'd buffer. */
static int read_entries(struct tfs_io *io, const char *path, size_t entry, uint8_t **out,
                        size_t *count, size_t *tail)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t len;
	int fd, rc = 0;

	*out = NULL;
	*count = 0;
	*tail = 0;
	fd = tfs_io_openat(io, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	len = (size_t)st.st_size;
	buf = malloc(len ? len : 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t done = 0; done < len;) {
		ssize_t got = tfs_io_read(io, fd, buf + done, len - done, done);
		if (got < 0) {
			rc = (int)got;
			goto out;
		}
		if (got == 0) {
			len = done;
			break;
		}
		done += (size_t)got;
	}
	*count = len / entry;
	*tail = len % entry;
	*out = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

static void decode_index_entry(const uint8_t *raw, void *out)
{
	struct tfs_index_entry *e = out;
	e->rel_offset = get_be32(raw);
	e->pos = get_be32(raw + 4);
}

static void decode_timeindex_entry(const uint8_t *raw, void *out)
{
	struct tfs_timeindex_entry *e = out;
	e->timestamp = get_be64(raw);
	e->rel_offset = get_be32(raw + 8);
}

/* read_entries, each entry of entry_bytes decoded into an array of elem_size
 * elements (malloc'd into *out). */
static int read_decoded(struct tfs_io *io, const char *path, size_t entry_bytes, size_t elem_size,
                        void (*decode)(const uint8_t *raw, void *out), void **out, size_t *count,
                        size_t *tail_bytes)
{
	uint8_t *raw, *e;
	int rc = read_entries(io, path, entry_bytes, &raw, count, tail_bytes);

	*out = NULL;
	if (rc < 0)
		return rc;
	e = malloc((*count ? *count : 1) * elem_size);
	if (!e) {
		free(raw);
		return -ENOMEM;
	}
	for (size_t i = 0; i < *count; i++)
		decode(raw + i * entry_bytes, e + i * elem_size);
	free(raw);
	*out = e;
	return 0;
}

int tfs_inspect_read_index(struct tfs_io *io, const char *path, struct tfs_index_entry **out,
                           size_t *count, size_t *tail_bytes)
{
	return read_decoded(io, path, TFS_INDEX_ENTRY_BYTES, sizeof(**out), decode_index_entry,
	                    (void **)out, count, tail_bytes);
}

int tfs_inspect_read_timeindex(struct tfs_io *io, const char *path,
                               struct tfs_timeindex_entry **out, size_t *count,
                               size_t *tail_bytes)
{
	return read_decoded(io, path, TFS_TIMEINDEX_ENTRY_BYTES, sizeof(**out),
	                    decode_timeindex_entry, (void **)out, count, tail_bytes);
}
