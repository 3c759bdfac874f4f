/* scratch.c - scratch files (see scratch.h).
 *
 * The namespace is one chained hash table keyed by (topic pointer, partition,
 * name), doubled when it passes one entry a bucket. Reservations of bytes and
 * files are compare-and-swap loops on the store's atomic counters, so that the
 * bound holds however many writers race, and a refused write has reserved nothing.
 */
#include "fs/scratch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define INITIAL_BUCKETS 64              /* power of two; grows by doubling */
#define BLOCK_BYTES 512                 /* st_blocks unit */

struct tfs_scratch_file {
	struct tfs_scratch *store;      /* immutable */
	struct tfs_topic *topic;        /* immutable; an owned reference (4) */
	int32_t partition;              /* immutable */
	atomic_uint refs;

	/* Store lock. */
	struct tfs_scratch_file *next;  /* hash chain */
	uint64_t hash;
	bool linked;
	size_t name_len;
	char name[TFS_SCRATCH_NAME_MAX + 1];

	/* File lock. */
	pthread_mutex_t lock;
	uint8_t *data;
	size_t len, cap;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec atime, mtime, ctime;
};

struct tfs_scratch {
	struct tfs_inode_topic_ops tops;
	uint64_t max_bytes;
	uint32_t max_files;
	atomic_uint_fast64_t bytes_used;        /* (1) */
	atomic_uint files_used;                 /* (2) */

	pthread_mutex_t lock;                   /* the map */
	struct tfs_scratch_file **b;
	size_t mask;
	size_t count;
};

/* ---- reservations ---------------------------------------------------------- */

static bool reserve_bytes(struct tfs_scratch *s, uint64_t n)
{
	uint64_t cur = atomic_load_explicit(&s->bytes_used, memory_order_relaxed);

	do {
		if (n > s->max_bytes || cur > s->max_bytes - n)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&s->bytes_used, &cur, cur + n,
	                                                memory_order_relaxed,
	                                                memory_order_relaxed));
	return true;
}

static void release_bytes(struct tfs_scratch *s, uint64_t n)
{
	atomic_fetch_sub_explicit(&s->bytes_used, n, memory_order_relaxed);
}

static bool reserve_file(struct tfs_scratch *s)
{
	unsigned cur = atomic_load_explicit(&s->files_used, memory_order_relaxed);

	do {
		if (cur >= s->max_files)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&s->files_used, &cur, cur + 1,
	                                                memory_order_relaxed,
	                                                memory_order_relaxed));
	return true;
}

/* ---- the map (store lock held) --------------------------------------------- */

static uint64_t name_hash(const struct tfs_topic *topic, int32_t partition, const char *name,
                          size_t len)
{
	uint64_t seed = XXH3_64bits(&topic, sizeof(topic)) ^ ((uint64_t)(uint32_t)partition << 32);

	return XXH3_64bits_withSeed(name, len, seed);
}

static struct tfs_scratch_file *map_find(struct tfs_scratch *s, uint64_t hash,
                                         const struct tfs_topic *topic, int32_t partition,
                                         const char *name, size_t len)
{
	struct tfs_scratch_file *f = s->b[hash & s->mask];

	for (; f; f = f->next)
		if (f->hash == hash && f->topic == topic && f->partition == partition &&
		    f->name_len == len && !memcmp(f->name, name, len))
			return f;
	return NULL;
}

static void map_grow(struct tfs_scratch *s)
{
	size_t nb = (s->mask + 1) * 2;
	struct tfs_scratch_file **b = calloc(nb, sizeof(*b));

	if (!b)
		return;                         /* a denser map still works */
	for (size_t i = 0; i <= s->mask; i++) {
		struct tfs_scratch_file *f = s->b[i], *next;
		for (; f; f = next) {
			next = f->next;
			f->next = b[f->hash & (nb - 1)];
			b[f->hash & (nb - 1)] = f;
		}
	}
	free(s->b);
	s->b = b;
	s->mask = nb - 1;
}

static void map_insert(struct tfs_scratch *s, struct tfs_scratch_file *f)
{
	if (s->count >= s->mask + 1)
		map_grow(s);
	f->next = s->b[f->hash & s->mask];
	s->b[f->hash & s->mask] = f;
	s->count++;
	f->linked = true;
}

static void map_remove(struct tfs_scratch *s, struct tfs_scratch_file *f)
{
	struct tfs_scratch_file **pp = &s->b[f->hash & s->mask];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			f->next = NULL;
			s->count--;
			f->linked = false;
			return;
		}
	}
}

/* ---- store ----------------------------------------------------------------- */

int tfs_scratch_create(const struct tfs_inode_topic_ops *tops, uint64_t max_bytes,
                       uint32_t max_files, struct tfs_scratch **out)
{
	struct tfs_scratch *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->b = calloc(INITIAL_BUCKETS, sizeof(*s->b));
	if (!s->b) {
		free(s);
		return -ENOMEM;
	}
	s->mask = INITIAL_BUCKETS - 1;
	s->tops = *tops;
	s->max_bytes = max_bytes;
	s->max_files = max_files;
	atomic_init(&s->bytes_used, 0);
	atomic_init(&s->files_used, 0);
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void tfs_scratch_destroy(struct tfs_scratch *s)
{
	if (!s)
		return;
	for (size_t i = 0; i <= s->mask; i++) {
		struct tfs_scratch_file *f = s->b[i], *next;
		for (; f; f = next) {
			next = f->next;
			f->linked = false;
			tfs_scratch_put(f);     /* the map's reference, the last one */
		}
	}
	pthread_mutex_destroy(&s->lock);
	free(s->b);
	free(s);
}

void tfs_scratch_usage(struct tfs_scratch *s, uint64_t *bytes, uint32_t *files,
                       uint64_t *max_bytes, uint32_t *max_files)
{
	if (bytes)
		*bytes = atomic_load_explicit(&s->bytes_used, memory_order_relaxed);
	if (files)
		*files = atomic_load_explicit(&s->files_used, memory_order_relaxed);
	if (max_bytes)
		*max_bytes = s->max_bytes;
	if (max_files)
		*max_files = s->max_files;
}

/* ---- files ----------------------------------------------------------------- */

void tfs_scratch_ref(struct tfs_scratch_file *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void tfs_scratch_put(struct tfs_scratch_file *f)
{
	struct tfs_scratch *s;

	/* acq_rel: the last put sees every write made under other references. */
	if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
		return;
	s = f->store;
	release_bytes(s, f->len);
	atomic_fetch_sub_explicit(&s->files_used, 1, memory_order_relaxed);
	s->tops.unref(s->tops.arg, f->topic);
	pthread_mutex_destroy(&f->lock);
	free(f->data);
	free(f);
}

bool tfs_scratch_named(struct tfs_scratch_file *f)
{
	bool linked;

	pthread_mutex_lock(&f->store->lock);
	linked = f->linked;
	pthread_mutex_unlock(&f->store->lock);
	return linked;
}

/* The file named name, with a reference for the caller, or (unlink) taken out of
 * the map with the map's reference; NULL if none. */
static struct tfs_scratch_file *find_name(struct tfs_scratch *s, struct tfs_topic *topic,
                                          int32_t partition, const char *name, bool unlink)
{
	size_t len = strlen(name);
	uint64_t hash = name_hash(topic, partition, name, len);
	struct tfs_scratch_file *f;

	pthread_mutex_lock(&s->lock);
	f = map_find(s, hash, topic, partition, name, len);
	if (f && unlink)
		map_remove(s, f);
	else if (f)
		tfs_scratch_ref(f);
	pthread_mutex_unlock(&s->lock);
	return f;
}

int tfs_scratch_lookup(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                       const char *name, struct tfs_scratch_file **out)
{
	*out = find_name(s, topic, partition, name, false);
	return *out ? 0 : -ENOENT;
}

int tfs_scratch_make(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                     const char *name, mode_t mode, uid_t uid, gid_t gid, bool excl,
                     struct tfs_scratch_file **out, bool *created)
{
	size_t len = strlen(name);
	uint64_t hash = name_hash(topic, partition, name, len);
	struct tfs_scratch_file *f, *fresh;
	struct timespec now;

	*out = NULL;
	*created = false;
	if (len > TFS_SCRATCH_NAME_MAX)
		return -ENAMETOOLONG;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	fresh->topic = s->tops.ref(s->tops.arg, topic);
	if (!fresh->topic) {
		free(fresh);
		return -ENOENT;                 /* the topic was deleted */
	}
	fresh->store = s;
	fresh->partition = partition;
	fresh->hash = hash;
	fresh->name_len = len;
	memcpy(fresh->name, name, len);
	pthread_mutex_init(&fresh->lock, NULL);
	fresh->mode = mode & 07777;
	fresh->uid = uid;
	fresh->gid = gid;
	clock_gettime(CLOCK_REALTIME, &now);
	fresh->atime = fresh->mtime = fresh->ctime = now;
	atomic_init(&fresh->refs, 2);           /* the map's and the caller's */

	pthread_mutex_lock(&s->lock);
	f = map_find(s, hash, topic, partition, name, len);
	if (f) {
		if (!excl)
			tfs_scratch_ref(f);
		pthread_mutex_unlock(&s->lock);
		s->tops.unref(s->tops.arg, fresh->topic);
		pthread_mutex_destroy(&fresh->lock);
		free(fresh);
		if (excl)
			return -EEXIST;
		*out = f;
		return 0;
	}
	if (!reserve_file(s)) {
		pthread_mutex_unlock(&s->lock);
		s->tops.unref(s->tops.arg, fresh->topic);
		pthread_mutex_destroy(&fresh->lock);
		free(fresh);
		return -ENOSPC;
	}
	map_insert(s, fresh);
	pthread_mutex_unlock(&s->lock);
	*out = fresh;
	*created = true;
	return 0;
}

int tfs_scratch_unlink(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                       const char *name)
{
	struct tfs_scratch_file *f = find_name(s, topic, partition, name, true);

	if (!f)
		return -ENOENT;
	tfs_scratch_put(f);                     /* the map's reference */
	return 0;
}

int tfs_scratch_rename(struct tfs_scratch *s, struct tfs_topic *topic, int32_t partition,
                       const char *from, const char *to, bool noreplace)
{
	size_t flen = strlen(from), tlen = strlen(to);
	uint64_t fhash = name_hash(topic, partition, from, flen);
	uint64_t thash = name_hash(topic, partition, to, tlen);
	struct tfs_scratch_file *f, *old;

	if (tlen > TFS_SCRATCH_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&s->lock);
	f = map_find(s, fhash, topic, partition, from, flen);
	old = map_find(s, thash, topic, partition, to, tlen);
	if (!f || f == old || (old && noreplace)) {
		pthread_mutex_unlock(&s->lock);
		return !f ? -ENOENT : f == old ? 0 : -EEXIST;
	}
	if (old)
		map_remove(s, old);
	map_remove(s, f);
	f->hash = thash;
	f->name_len = tlen;
	memcpy(f->name, to, tlen);
	map_insert(s, f);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&f->lock);
	clock_gettime(CLOCK_REALTIME, &f->ctime);
	pthread_mutex_unlock(&f->lock);
	tfs_scratch_put(old);                   /* the map's reference of the replaced one */
	return 0;
}

int tfs_scratch_consume(struct tfs_scratch_file *f,
                        int (*fn)(void *arg, const uint8_t *p, size_t len), void *arg)
{
	struct tfs_scratch *s = f->store;
	bool drop = false;
	int rc;

	pthread_mutex_lock(&f->lock);
	rc = fn(arg, f->data, f->len);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);   /* file lock -> store lock */
		if (f->linked) {
			map_remove(s, f);
			drop = true;
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&f->lock);
	if (drop)
		tfs_scratch_put(f);             /* the map's reference */
	return rc;
}

void tfs_scratch_forget_topic(struct tfs_scratch *s, struct tfs_topic *topic)
{
	struct tfs_scratch_file *gone = NULL, *next;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i <= s->mask; i++) {
		struct tfs_scratch_file **pp = &s->b[i];
		while (*pp) {
			struct tfs_scratch_file *f = *pp;
			if (f->topic != topic) {
				pp = &f->next;
				continue;
			}
			*pp = f->next;
			s->count--;
			f->linked = false;
			f->next = gone;
			gone = f;
		}
	}
	pthread_mutex_unlock(&s->lock);
	for (; gone; gone = next) {
		next = gone->next;
		gone->next = NULL;
		tfs_scratch_put(gone);
	}
}

/* ---- content (file lock) --------------------------------------------------- */

/* Makes f len bytes long, zero-filling growth, reserving or releasing the
 * difference. File lock held. */
static int resize_locked(struct tfs_scratch_file *f, size_t len)
{
	struct tfs_scratch *s = f->store;

	if (len > f->len) {
		if (!reserve_bytes(s, len - f->len))
			return -ENOSPC;
		if (len > f->cap) {
			/* Half again, so appends stay linear; never past the bound. */
			size_t nc = f->cap + f->cap / 2;
			uint8_t *nd;
			if (nc < len)
				nc = len;
			if (nc > s->max_bytes)
				nc = len;
			nd = realloc(f->data, nc);
			if (!nd) {
				release_bytes(s, len - f->len);
				return -ENOMEM;
			}
			f->data = nd;
			f->cap = nc;
		}
		memset(f->data + f->len, 0, len - f->len);
	} else {
		/* The bound is of memory: what a cut frees goes back to the heap, or a
		 * file filled and truncated would keep its bytes uncounted. A shrink
		 * failing leaves the larger block, which is only wasteful. */
		if (f->cap > len + len / 2) {
			uint8_t *nd = len ? realloc(f->data, len) : NULL;
			if (!len) {
				free(f->data);
				f->data = NULL;
				f->cap = 0;
			} else if (nd) {
				f->data = nd;
				f->cap = len;
			}
		}
		release_bytes(s, f->len - len);
	}
	f->len = len;
	return 0;
}

static void touch_locked(struct tfs_scratch_file *f)
{
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	f->ctime = f->mtime;
}

ssize_t tfs_scratch_read(struct tfs_scratch_file *f, void *buf, size_t size, off_t off)
{
	size_t n = 0;

	if (off < 0)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	if ((uint64_t)off < f->len) {
		n = f->len - (size_t)off;
		if (n > size)
			n = size;
		memcpy(buf, f->data + off, n);
	}
	pthread_mutex_unlock(&f->lock);
	return (ssize_t)n;
}

ssize_t tfs_scratch_write(struct tfs_scratch_file *f, const void *buf, size_t size, off_t off,
                          bool append)
{
	size_t pos, end;
	int rc = 0;

	if (off < 0)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	pos = append ? f->len : (size_t)off;
	end = pos + size;
	if (end < pos || (uint64_t)end > f->store->max_bytes)
		rc = -ENOSPC;                   /* could never fit, whatever else is freed */
	else if (end > f->len)
		rc = resize_locked(f, end);
	if (rc == 0) {
		if (size)
			memcpy(f->data + pos, buf, size);
		touch_locked(f);
	}
	pthread_mutex_unlock(&f->lock);
	return rc < 0 ? rc : (ssize_t)size;
}

int tfs_scratch_truncate(struct tfs_scratch_file *f, off_t size)
{
	int rc;

	if (size < 0)
		return -EINVAL;
	if ((uint64_t)size > f->store->max_bytes)
		return -ENOSPC;
	pthread_mutex_lock(&f->lock);
	rc = resize_locked(f, (size_t)size);
	if (rc == 0)
		touch_locked(f);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* ---- attributes ------------------------------------------------------------ */

void tfs_scratch_stat(struct tfs_scratch_file *f, struct stat *st)
{
	bool linked = tfs_scratch_named(f);

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&f->lock);
	st->st_mode = S_IFREG | f->mode;
	st->st_nlink = linked ? 1 : 0;
	st->st_uid = f->uid;
	st->st_gid = f->gid;
	st->st_size = (off_t)f->len;
	st->st_blocks = (blkcnt_t)((f->len + BLOCK_BYTES - 1) / BLOCK_BYTES);
	st->st_blksize = 4096;
	st->st_atim = f->atime;
	st->st_mtim = f->mtime;
	st->st_ctim = f->ctime;
	pthread_mutex_unlock(&f->lock);
}

void tfs_scratch_set_mode(struct tfs_scratch_file *f, mode_t mode)
{
	pthread_mutex_lock(&f->lock);
	f->mode = mode & 07777;
	clock_gettime(CLOCK_REALTIME, &f->ctime);
	pthread_mutex_unlock(&f->lock);
}

void tfs_scratch_set_owner(struct tfs_scratch_file *f, uid_t uid, gid_t gid)
{
	pthread_mutex_lock(&f->lock);
	if (uid != (uid_t)-1)
		f->uid = uid;
	if (gid != (gid_t)-1)
		f->gid = gid;
	clock_gettime(CLOCK_REALTIME, &f->ctime);
	pthread_mutex_unlock(&f->lock);
}

void tfs_scratch_set_times(struct tfs_scratch_file *f, const struct timespec *atime,
                           const struct timespec *mtime)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&f->lock);
	if (atime)
		f->atime = atime->tv_nsec == UTIME_NOW ? now : *atime;
	if (mtime)
		f->mtime = mtime->tv_nsec == UTIME_NOW ? now : *mtime;
	f->ctime = now;
	pthread_mutex_unlock(&f->lock);
}
