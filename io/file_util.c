/* file_util.c - crash-safe small-file replacement and the bounded fd cache. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file_util.h"
#include "io/log.h"

#define TMP_SUFFIX ".tmp"
#define FILE_MODE 0644
/* Levels below the top that tfs_dir_remove_tree descends: a partition directory
 * has none, so a deeper tree is not one of ours. */
#define REMOVE_TREE_DEPTH 8

/* "<name>.tmp" into tmp; -ENAMETOOLONG past its size. */
static int tmp_name(char *tmp, size_t cap, const char *name)
{
	return snprintf(tmp, cap, "%s%s", name, TMP_SUFFIX) >= (int)cap ? -ENAMETOOLONG : 0;
}

int tfs_file_stage(struct tfs_io *io, int dirfd, const char *name, const void *data, size_t len)
{
	char tmp[PATH_MAX];
	int fd, rc = tmp_name(tmp, sizeof(tmp), name);

	if (rc < 0)
		return rc;
	fd = tfs_io_openat(io, dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, FILE_MODE);
	if (fd < 0)
		return fd;
	rc = tfs_io_write(io, fd, data, len, 0);
	if (rc < 0) {
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return rc;
	}
	return fd;
}

int tfs_file_commit(struct tfs_io *io, int dirfd, const char *name)
{
	char tmp[PATH_MAX];
	int rc = tmp_name(tmp, sizeof(tmp), name);

	if (rc == 0)
		rc = tfs_io_renameat(io, dirfd, tmp, dirfd, name);
	if (rc < 0)
		tfs_file_unstage(dirfd, name);
	return rc;
}

void tfs_file_unstage(int dirfd, const char *name)
{
	char tmp[PATH_MAX];

	if (tmp_name(tmp, sizeof(tmp), name) == 0)
		unlinkat(dirfd, tmp, 0);
}

int tfs_file_replace(struct tfs_io *io, int dirfd, const char *name, const void *data, size_t len)
{
	int fd = tfs_file_stage(io, dirfd, name, data, len), rc = fd < 0 ? fd : 0;

	if (fd >= 0) {
		rc = tfs_io_fsync(io, fd, false);
		close(fd);
		if (rc == 0)
			rc = tfs_file_commit(io, dirfd, name);
		else
			tfs_file_unstage(dirfd, name);
	}
	if (rc == 0)
		rc = tfs_io_fsync_dir(io, dirfd);
	if (rc < 0)
		tfs_log_error("io", "cannot replace %s: %s", name, strerror(-rc));
	return rc;
}

int tfs_file_read_all(struct tfs_io *io, int dirfd, const char *name, size_t max,
                      char **out, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	int fd, rc = 0;

	*out = NULL;
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if ((size_t)st.st_size > max) {
		rc = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	n = tfs_io_read(io, fd, buf, (size_t)st.st_size, 0);
	if (n < 0) {
		rc = (int)n;
		goto out;
	}
	buf[n] = '\0';
	*len = (size_t)n;
	*out = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

DIR *tfs_dir_stream(int dirfd)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d) {
		int err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	rewinddir(d);        /* a dup shares its position with the original */
	return d;
}

static bool is_dir(int dirfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	return fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Empties the directory open as fd (taken: closed here), depth levels at most
 * below it: one io operation per name. Returns the first error; goes on past it. */
static int empty_dir(struct tfs_io *io, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((de = readdir(d))) {
		int r = 0, sub;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!is_dir(dirfd(d), de)) {
			r = tfs_io_unlinkat(io, dirfd(d), de->d_name, 0);
		} else if (depth == 0) {
			r = -ELOOP;
		} else if ((sub = openat(dirfd(d), de->d_name,
		                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			r = -errno;
		} else {
			r = empty_dir(io, sub, depth - 1);
			if (r == 0)
				r = tfs_io_unlinkat(io, dirfd(d), de->d_name, AT_REMOVEDIR);
		}
		if (r < 0 && r != -ENOENT && rc == 0)
			rc = r;
	}
	closedir(d);
	return rc;
}

int tfs_dir_remove_tree(struct tfs_io *io, int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	rc = empty_dir(io, fd, REMOVE_TREE_DEPTH);
	if (rc == 0)
		rc = tfs_io_unlinkat(io, dirfd, name, AT_REMOVEDIR);
	return rc;
}

/* The cache: a mutex, a count of open fds, and an LRU list of open, unpinned
 * slots (most recent at the head). A pinned slot is never in the list. */
struct tfs_fdcache {
	struct tfs_io *io;
	pthread_mutex_t lock;
	bool read_only;                  /* every open is O_RDONLY */
	unsigned max_open;
	unsigned open_count;
	struct tfs_fdslot *head, *tail;
};

struct tfs_fdcache *tfs_fdcache_create(struct tfs_io *io, unsigned max_open)
{
	struct tfs_fdcache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->io = io;
	c->max_open = max_open ? max_open : 1;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void tfs_fdcache_destroy(struct tfs_fdcache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void tfs_fdcache_set_read_only(struct tfs_fdcache *c)
{
	pthread_mutex_lock(&c->lock);
	c->read_only = true;
	pthread_mutex_unlock(&c->lock);
}

unsigned tfs_fdcache_open_count(const struct tfs_fdcache *c)
{
	return __atomic_load_n(&c->open_count, __ATOMIC_RELAXED);
}

static void lru_remove(struct tfs_fdcache *c, struct tfs_fdslot *s)
{
	if (!s->in_lru)
		return;
	if (s->lru_prev)
		s->lru_prev->lru_next = s->lru_next;
	else
		c->head = s->lru_next;
	if (s->lru_next)
		s->lru_next->lru_prev = s->lru_prev;
	else
		c->tail = s->lru_prev;
	s->lru_prev = s->lru_next = NULL;
	s->in_lru = false;
}

static void lru_push(struct tfs_fdcache *c, struct tfs_fdslot *s)
{
	s->lru_prev = NULL;
	s->lru_next = c->head;
	if (c->head)
		c->head->lru_prev = s;
	c->head = s;
	if (!c->tail)
		c->tail = s;
	s->in_lru = true;
}

/* Closes the least-recently-used unpinned fd; false when every open one is pinned. */
static bool evict_one(struct tfs_fdcache *c)
{
	struct tfs_fdslot *victim = c->tail;

	if (!victim)
		return false;
	lru_remove(c, victim);
	close(victim->fd);
	victim->fd = -1;
	__atomic_sub_fetch(&c->open_count, 1, __ATOMIC_RELAXED);
	return true;
}

/* Closes least-recently-used unpinned fds until there is room for one more. */
static void evict(struct tfs_fdcache *c)
{
	while (c->open_count >= c->max_open && evict_one(c))
		;
}

/* Opens s's file. The process or system limit may be reached below the cache's
 * bound (other descriptors: FUSE, rings, a reader's history handle): then the
 * cache gives up its own idle fds one at a time before it reports the limit. */
static int slot_open(struct tfs_fdcache *c, struct tfs_fdslot *s)
{
	int flags = s->flags | O_CLOEXEC, fd;

	if (c->read_only)
		flags = (flags & ~(O_ACCMODE | O_APPEND | O_TRUNC)) | O_RDONLY;
	for (;;) {
		fd = open(s->path, flags);
		if (fd >= 0)
			return fd;
		fd = -errno;
		if ((fd != -EMFILE && fd != -ENFILE) || !evict_one(c))
			return fd;
	}
}

int tfs_fdcache_slot_init(struct tfs_fdslot *s, const char *path, int flags)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->flags = flags & ~O_CREAT;
	s->path = strdup(path);
	return s->path ? 0 : -ENOMEM;
}

void tfs_fdcache_slot_release(struct tfs_fdcache *c, struct tfs_fdslot *s)
{
	pthread_mutex_lock(&c->lock);
	lru_remove(c, s);
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
		__atomic_sub_fetch(&c->open_count, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&c->lock);
	free(s->path);
	s->path = NULL;
}

int tfs_fdcache_slot_set_path(struct tfs_fdcache *c, struct tfs_fdslot *s, const char *path)
{
	char *copy = strdup(path);

	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&c->lock);
	free(s->path);
	s->path = copy;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int tfs_fdcache_get(struct tfs_fdcache *c, struct tfs_fdslot *s)
{
	int fd;

	pthread_mutex_lock(&c->lock);
	if (s->fd >= 0) {
		lru_remove(c, s);
		s->pins++;
		fd = s->fd;
		goto out;
	}
	evict(c);
	fd = slot_open(c, s);
	if (fd < 0) {
		tfs_log_error("io", "cannot open %s: %s", s->path, strerror(-fd));
		goto out;
	}
	s->fd = fd;
	s->pins++;
	__atomic_add_fetch(&c->open_count, 1, __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&c->lock);
	return fd;
}

void tfs_fdcache_put(struct tfs_fdcache *c, struct tfs_fdslot *s)
{
	pthread_mutex_lock(&c->lock);
	if (s->pins > 0 && --s->pins == 0 && s->fd >= 0) {
		lru_push(c, s);
		evict(c);
	}
	pthread_mutex_unlock(&c->lock);
}
