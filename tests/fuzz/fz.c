/* fz.c - shared support of the fuzz harnesses (see fz.h). */
#include "tests/fuzz/fz.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/format/batch_codec.h"
#include "fs/inode.h"
#include "fs/mount.h"
#include "fs/node.h"
#include "fs/opts.h"
#include "io/log.h"

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz: property failed at %s:%d: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* ---- input ------------------------------------------------------------------ */

uint8_t fz_u8(struct fz_in *in)
{
	uint8_t b;

	if (in->len == 0)
		return 0;
	b = in->p[0];
	in->p++;
	in->len--;
	return b;
}

uint16_t fz_u16(struct fz_in *in)
{
	uint16_t lo = fz_u8(in);

	return (uint16_t)(lo | (uint16_t)fz_u8(in) << 8);
}

const uint8_t *fz_take(struct fz_in *in, size_t n, size_t *got)
{
	const uint8_t *p = in->p;

	if (n > in->len)
		n = in->len;
	in->p += n;
	in->len -= n;
	*got = n;
	return p;
}

void fz_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t nc = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return;
	while (nc < need)
		nc *= 2;
	np = realloc(*p, nc * elem);
	if (!np)
		abort();
	*p = np;
	*cap = nc;
}

void fz_fix_crcs(uint8_t *p, size_t len)
{
	size_t pos = 0;

	while (len - pos >= TFS_BATCH_HEADER_BYTES) {
		uint8_t *b = p + pos;
		uint32_t length = (uint32_t)b[8] << 24 | (uint32_t)b[9] << 16 | (uint32_t)b[10] << 8 | b[11];
		size_t size = (size_t)length + TFS_BATCH_LOG_OVERHEAD;
		uint32_t crc;
		if (length < TFS_BATCH_HEADER_BYTES - TFS_BATCH_LOG_OVERHEAD || size > len - pos)
			return;
		crc = tfs_crc32c(0, b + TFS_BATCH_CRC_START, size - TFS_BATCH_CRC_START);
		b[17] = (uint8_t)(crc >> 24);
		b[18] = (uint8_t)(crc >> 16);
		b[19] = (uint8_t)(crc >> 8);
		b[20] = (uint8_t)crc;
		pos += size;
	}
}

/* ---- files ------------------------------------------------------------------ */

char *fz_mkdtemp(const char *tag)
{
	const char *base = getenv("TFS_FUZZ_TMP");
	struct stat st;
	char *path;

	if (!base || !*base)
		base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : NULL;
	if (!base)
		base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&path, "%s/tfs-fuzz-%s-XXXXXX", base, tag) < 0)
		abort();
	if (!mkdtemp(path)) {
		fprintf(stderr, "fuzz: cannot create a scratch directory in %s: %s\n", base,
		        strerror(errno));
		abort();
	}
	return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void fz_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define AT_EXIT_MAX 4
static char *at_exit_dirs[AT_EXIT_MAX];

static void remove_dirs(void)
{
	for (int i = 0; i < AT_EXIT_MAX; i++)
		fz_rmtree(at_exit_dirs[i]);
}

void fz_remove_at_exit(const char *dir)
{
	for (int i = 0; i < AT_EXIT_MAX; i++) {
		if (!at_exit_dirs[i]) {
			if (i == 0)
				atexit(remove_dirs);
			at_exit_dirs[i] = strdup(dir);
			return;
		}
	}
}

void fz_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const uint8_t *p = data;

	if (fd < 0) {
		fprintf(stderr, "fuzz: cannot create %s: %s\n", path, strerror(errno));
		abort();
	}
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n <= 0) {
			fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
			abort();
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

long fz_read_file(const char *path, uint8_t **out)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	*out = NULL;
	if (!f)
		return -1;
	do {
		fz_reserve((void **)&buf, &cap, len + 4096, 1);
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	*out = buf;
	return (long)len;
}

void fz_quiet_logs(void)
{
	static int null_fd = -1;

	if (getenv("FUZZ_VERBOSE"))
		return;
	if (null_fd < 0)
		null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	tfs_log_set_level(TFS_LOG_ERROR);
	if (null_fd >= 0)
		tfs_log_set_fd(null_fd, 0);
}

/* ---- replies ---------------------------------------------------------------- */

fuse_req_t fz_req(struct fz_reply *r)
{
	fz_reply_reset(r);
	return (fuse_req_t)(void *)r;
}

void fz_reply_reset(struct fz_reply *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

void fz_reply_check_once(const struct fz_reply *r, const char *what)
{
	FZ_CHECK(r->replies == 1, "%s replied %d times", what, r->replies);
}

static struct fz_reply *reply_of(fuse_req_t req)
{
	struct fz_reply *r = (struct fz_reply *)(void *)req;

	r->replies++;
	return r;
}

/* The libfuse replies the handlers reach; the executable's definitions win. */
int fuse_reply_err(fuse_req_t req, int err)
{
	struct fz_reply *r = reply_of(req);

	r->kind = FZ_REPLY_ERR;
	r->err = err;
	return 0;
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
	struct fz_reply *r = reply_of(req);

	r->kind = FZ_REPLY_WRITE;
	r->count = count;
	return 0;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	struct fz_reply *r = reply_of(req);

	r->kind = FZ_REPLY_OPEN;
	r->fh = fi->fh;
	return 0;
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	struct fz_reply *r = reply_of(req);

	r->kind = FZ_REPLY_BUF;
	free(r->buf);
	r->buf = malloc(size + 1);
	if (!r->buf)
		abort();
	memcpy(r->buf, buf, size);
	r->buf[size] = 0;
	r->buf_len = size;
	return 0;
}

int fuse_reply_xattr(fuse_req_t req, size_t count)
{
	struct fz_reply *r = reply_of(req);

	r->kind = FZ_REPLY_XATTR;
	r->count = count;
	return 0;
}

/* ---- the mount -------------------------------------------------------------- */

struct tfs_mount *fz_mount_open(char **dir)
{
	struct tfs_opts o;
	struct tfs_mount *m = NULL;
	int rc;

	fz_quiet_logs();
	*dir = fz_mkdtemp("mount");
	fz_remove_at_exit(*dir);
	tfs_opts_init(&o);
	/* the backend $TFS_IO names (the unit tests run on both), else sync */
	o.engine.io_kind = getenv("TFS_IO") && *getenv("TFS_IO") ? tfs_io_kind_from_env() : TFS_IO_SYNC;
	o.max_read = 32 << 10;
	rc = tfs_mount_create(&o, *dir, &m);
	tfs_opts_release(&o);
	FZ_CHECK(rc == 0, "mount on %s: %s", *dir, tfs_strerror(rc));
	return m;
}

void fz_mount_close(struct tfs_mount *m, char *dir)
{
	tfs_mount_destroy(m);
	fz_rmtree(dir);
	free(dir);
}

struct tfs_node *fz_node(struct tfs_mount *m, enum tfs_node_kind kind, struct tfs_topic *t,
                         int32_t partition)
{
	struct tfs_node_ident id = { .kind = kind, .topic = t, .topic_name = tfs_topic_name(t),
	                             .partition = partition };
	struct tfs_node *n = NULL;
	int rc = tfs_inode_lookup(m->inodes, &id, &n);

	FZ_CHECK(rc == 0, "node of kind %d: %s", (int)kind, tfs_strerror(rc));
	return n;
}

void fz_node_drop(struct tfs_mount *m, struct tfs_node *n)
{
	uint64_t id = n->nodeid;

	tfs_inode_put(m->inodes, n);
	tfs_inode_forget(m->inodes, id, 1);
}

struct tfs_topic *fz_topic(struct tfs_mount *m, const char *name, int64_t recreate_bytes)
{
	struct tfs_topic *t = tfs_engine_topic_get(m->engine, name);
	struct tfs_plog_stats st;
	int rc;

	if (t) {
		tfs_plog_stats(tfs_topic_partition(t, 0), &st);
		if (st.size_bytes < recreate_bytes)
			return t;
		tfs_topic_unref(t);
		rc = tfs_engine_topic_delete(m->engine, name, true);
		FZ_CHECK(rc == 0, "delete of topic %s: %s", name, tfs_strerror(rc));
	}
	rc = tfs_engine_topic_create(m->engine, name, 1, 0, 0, 0755);
	FZ_CHECK(rc == 0, "creation of topic %s: %s", name, tfs_strerror(rc));
	t = tfs_engine_topic_get(m->engine, name);
	FZ_CHECK(t != NULL, "the new topic %s is not there", name);
	return t;
}

struct tfs_fh *fz_open_wronly(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi)
{
	struct fz_reply r = { 0 };

	memset(fi, 0, sizeof(*fi));
	fi->flags = O_WRONLY;
	tfs_kind_ops(n->kind)->open(fz_req(&r), m, n, fi);
	fz_reply_check_once(&r, "open");
	FZ_CHECK(r.kind == FZ_REPLY_OPEN, "open replied kind %d err %d", (int)r.kind, r.err);
	fi->fh = r.fh;
	return tfs_fh_of(fi);
}

void fz_release(struct tfs_mount *m, struct tfs_fh *fh, struct fuse_file_info *fi)
{
	struct fz_reply r = { 0 };

	tfs_kind_ops(fh->node->kind)->release(fz_req(&r), m, fh, fi);
	fz_reply_check_once(&r, "release");
	FZ_CHECK(r.kind == FZ_REPLY_ERR && r.err == 0, "release replied %d", r.err);
}

int64_t fz_log_end(struct tfs_plog *pl)
{
	struct tfs_plog_stats st;

	tfs_plog_stats(pl, &st);
	return st.log_end_offset;
}
