/* node_key.h - what node_key.c (handles: open, read, write, commit) and
 * node_key_names.c (lookup, create, unlink, rename) share about keys. Internal to
 * fs/: the key handle, and helpers named tfs_key__*.
 * Threads and locks: see node_key.c (a handle's writer state is under its node's
 * lock; the node's handle lists too).
 */
#ifndef TFS_FS_NODE_KEY_H
#define TFS_FS_NODE_KEY_H

#include <errno.h>
#include <string.h>

#include "fs/keyname.h"
#include "fs/node.h"


#define TFS_KEY_EDITORS 4          /* distinct editors remembered per handle */

struct tfs_key_handle {
	struct tfs_fh base;
	bool writer;
	/* reader */
	bool page_cache;                /* counted in node->cache_users */
	struct tfs_record_copy rec;     /* the pinned record (empty when pending) */
	/* writer: under node->lock */
	uint8_t *buf;
	size_t len, cap;
	bool dirty;                     /* written since the last commit */
	bool pending;                   /* created or O_TRUNC: owes a commit at its
	                                 * RELEASE unless a written commit paid it */
	bool deferred;                  /* on m->deferred: pending, not dirty, last
	                                 * event a FLUSH (under m->deferred_lock) */
	bool outwaited;                 /* an observer waited for it in vain (under
	                                 * m->deferred_lock): others do not */
	int failed_err;                 /* a write (EFBIG) or a commit failed: this
	                                 * handle appends nothing any more, and its
	                                 * later writes get this error */
	struct tfs_key_handle *dnext, *dprev;   /* m->deferred */
	bool append;                    /* O_APPEND: writes go to the end */
	bool onto;                      /* append: commits buf[base_len, len) onto the
	                                 * newest value (not after O_TRUNC/ftruncate) */
	size_t base_len;                /* onto: bytes of buf that are not its own */
	uint64_t write_seq;             /* mount-wide order of the last write */
	int64_t mtime_ms;               /* time of the last write */
	size_t payload_max;             /* the largest value, from max.message.bytes */
	struct tfs_key_handle *wnext, *wprev;   /* node->writers or node->readers */
	/* Who edited it (see "Whose close commits" in node_key.c). Node lock. */
	pid_t opener_tid;
	uint64_t editor_owner[TFS_KEY_EDITORS];  /* lock owners (files_struct) */
	pid_t editor_tid[TFS_KEY_EDITORS];       /* calling threads */
	uint8_t editors;
	bool editors_overflow;          /* more than TFS_KEY_EDITORS: any close commits */
};

static inline struct tfs_key_handle *tfs_key__of(struct tfs_fh *fh)
{
	return (struct tfs_key_handle *)fh;
}

/* Copies the node's key; node lock held. */
static inline size_t tfs_key__copy_locked(const struct tfs_node *n, uint8_t kb[TFS_NODE_KEY_CAP])
{
	size_t len = n->key_len < TFS_NODE_KEY_CAP ? n->key_len : TFS_NODE_KEY_CAP;

	if (len)
		memcpy(kb, n->key, len);
	return len;
}

static inline size_t tfs_key__copy(struct tfs_node *n, uint8_t kb[TFS_NODE_KEY_CAP])
{
	size_t len;

	pthread_mutex_lock(&n->lock);
	len = tfs_key__copy_locked(n, kb);
	pthread_mutex_unlock(&n->lock);
	return len;
}

/* The largest value a key of klen bytes may hold in n's topic (Kafka's rule,
 * tfs_plog_value_max); -1 if the key leaves no room for even an empty one. */
static inline int64_t tfs_key__value_max(struct tfs_node *n, size_t klen)
{
	struct tfs_topic_config cfg;

	tfs_topic_get_config(n->topic, &cfg);
	return tfs_plog_value_max(cfg.max_message_bytes, klen, false);
}

/* Decodes a key's file name. -EINVAL if it is not a canonical key name. */
static inline ssize_t tfs_key__decode_name(const char *name, uint8_t kb[TFS_NODE_KEY_CAP])
{
	size_t len = strlen(name);

	if (len > TFS_KEYNAME_MAX)
		return -ENAMETOOLONG;
	return tfs_keyname_decode(name, len, kb, TFS_NODE_KEY_CAP);
}

/* key_stat: the attributes of a key node (see node_key.c). */
int tfs_key__stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                  struct stat *st);
/* Links h into n's writers or readers. Node lock held. */
void tfs_key__link_locked(struct tfs_node *n, struct tfs_key_handle *h);
/* Links writer h (registered on n) unless n has page-cache readers or is retired:
 * then retires n and returns -ESTALE, to be replied so that the kernel looks the
 * name up again (onto a fresh node); h is then the caller's to discard. Node not
 * locked. */
int tfs_key__link_writer(struct tfs_mount *m, struct tfs_node *n, struct tfs_key_handle *h);
/* Frees a registered handle that was never linked. */
void tfs_key__fh_discard(struct tfs_mount *m, struct tfs_key_handle *h);
/* Sets up a writer on n: loads the newest value unless trunc; pending (owes a
 * commit) when trunc or start_pending. Node not locked. */
int tfs_key__writer_init(struct tfs_mount *m, struct tfs_node *n, struct tfs_key_handle *h,
                         bool trunc, bool append, bool start_pending);
/* Records the opener of a writer (its calling thread). */
void tfs_key__set_opener(struct tfs_key_handle *h, fuse_req_t req);
/* The handle's free_fn: leaves the node's lists and the deferred list, frees. */
void tfs_key__fh_free(struct tfs_mount *m, struct tfs_fh *fh);

#endif
