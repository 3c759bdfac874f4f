/* node_control.c - T/P/.append and T/P/.put: bulk lines, like Kafka's console
 * producer; T/P/.batches: record batches as a Kafka producer sends them.
 *
 *   .append  every newline-terminated line becomes one keyless record (value =
 *            the line without its newline)
 *   .put     every line "KEY<TAB>VALUE" becomes one keyed record; KEY is spelled
 *            as a key's file name (keyname.h: "%09" is a tab in a key), VALUE is
 *            the raw rest of the line
 *   .batches a stream of RecordBatch v2 batches (what a .log segment holds):
 *            each whole batch is appended as its producer encoded it, zstd
 *            included (tfs_plog_append_batch), with offsets assigned afresh
 *
 * One write(2) is one unit: its complete lines are validated first, and a
 * malformed line (no tab, a bad key name, a record over max.message.bytes) fails
 * the write with EINVAL / ENAMETOOLONG / EFBIG and appends none of them. The valid
 * lines go to tfs_plog_append as one unit (one batch). A unit larger than
 * max.message.bytes cannot be one batch: such a write (only possible with writes
 * close to FUSE's 1 MiB max_write) is split into consecutive units that each fit,
 * and an I/O error in a later unit leaves the earlier ones appended.
 *
 * .put is one transaction (README "Transactions"): the lines of every write
 * between an open (or the previous close) and a close are appended with
 * tfs_plog_txn_append under a producer id of their own, and the close (FLUSH)
 * commits them, so a bulk load is seen whole or not at all. A write that
 * failed makes the close abort the transaction instead and fail with that
 * write's error. A handle released with a transaction still open (no FLUSH
 * came) aborts it. Keys are invalidated at the commit, when they change.
 *
 * The bytes after the last newline wait in the handle (the partial line) and
 * continue with the next write; a final line without a newline is appended at
 * FLUSH (close) or, failing that, RELEASE.
 *
 * Speed: lines are parsed in place (memchr), keys that need no decoding point
 * into the written buffer, decoded keys go to one scratch arena sized for the
 * whole write, and the record array is reused: no allocation per line, one append
 * call per write.
 *
 * Invariant: a record's key and value are slices of the written buffer, of the
 * partial line or of the key arena, so neither of the handle's buffers is grown
 * between the first record parsed and the append: append_lines reserves all the
 * room of one call (joined line, tail, decoded keys) before it parses. Keys of a .put that the kernel has cached nodes for get their
 * attributes invalidated (and drained) before write(2) returns, so a following
 * stat or cat sees the new value.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/keyname.h"
#include "fs/node.h"
#include "io/log.h"

struct bulk_fh {
	struct tfs_fh base;
	bool put;                       /* .put (keyed) or .append (keyless) */
	pthread_mutex_t lock;           /* a FLUSH may run beside a write */
	char *partial;                  /* bytes after the last newline so far */
	size_t plen, pcap;
	struct tfs_append_rec *recs;    /* scratch, reused */
	size_t rcap;
	uint8_t *keys;                  /* decoded keys of one write */
	size_t kcap;
	struct tfs_slice *keyv;         /* .put: the keys, for invalidation */
	size_t kvcap;
	uint64_t *nodeids;
	size_t ncap;
	size_t payload_max;             /* key + value of one record */
	int32_t max_message_bytes;
	struct tfs_mount *m;
	struct tfs_plog_txn *txn;       /* .put: the open transaction, NULL before a line */
	int txn_failed;                 /* .put: a write's error since it began; the
	                                 * close aborts */
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	np = realloc(*p, nc * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

/* Parses one line (no newline) into rec. Returns 0 or -EINVAL/-ENAMETOOLONG/
 * -EFBIG. *kused advances over the key arena for decoded keys. */
static int parse_line(struct bulk_fh *b, const char *line, size_t len,
                      struct tfs_append_rec *rec, size_t *kused)
{
	memset(rec, 0, sizeof(*rec));
	if (!b->put) {
		rec->key_null = true;
		rec->value = tfs_slice_make(line, len);
	} else {
		const char *tab = memchr(line, '\t', len);
		size_t nlen;
		if (!tab)
			return -EINVAL;
		nlen = (size_t)(tab - line);
		if (nlen > TFS_KEYNAME_MAX)
			return -ENAMETOOLONG;
		if (tfs_keyname_is_plain(line, nlen)) {
			rec->key = tfs_slice_make(line, nlen);
		} else {
			ssize_t klen = tfs_keyname_decode(line, nlen, b->keys + *kused, b->kcap - *kused);
			if (klen < 0)
				return -EINVAL;
			rec->key = tfs_slice_make(b->keys + *kused, (size_t)klen);
			*kused += (size_t)klen;
		}
		rec->value = tfs_slice_make(tab + 1, len - nlen - 1);
	}
	if ((int64_t)rec->value.len > tfs_plog_value_max(b->max_message_bytes, rec->key.len,
	                                                 rec->key_null))
		return -EFBIG;
	return 0;
}

/* One unit: into the .put's transaction, else as it is. */
static int append_unit(struct tfs_plog *pl, const struct bulk_fh *b,
                       const struct tfs_append_rec *recs, size_t count)
{
	if (b->txn)
		return tfs_plog_txn_append(b->txn, recs, count);
	return tfs_plog_append(pl, recs, count, false, NULL, NULL);
}

/* Appends recs[0..count) in as few units as fit max.message.bytes. */
static int append_units(struct tfs_plog *pl, const struct bulk_fh *b,
                        const struct tfs_append_rec *recs, size_t count)
{
	size_t start = 0, bytes = TFS_BATCH_HEADER_BYTES;

	for (size_t i = 0; i < count; i++) {
		size_t rb = TFS_RECORD_BOUND_OVERHEAD + recs[i].key.len + recs[i].value.len;
		if (i > start && bytes + rb > (size_t)b->max_message_bytes) {
			int rc = append_unit(pl, b, recs + start, i - start);
			if (rc < 0)
				return rc;
			start = i;
			bytes = TFS_BATCH_HEADER_BYTES;
		}
		bytes += rb;
	}
	if (start < count)
		return append_unit(pl, b, recs + start, count - start);
	return 0;
}

/* After a .put or .batches write: the kernel must re-read attributes of the keys
 * (keys[0, count) of partition n) it has nodes for. Drained before write(2)
 * returns, so the next stat or open sees them. *nodeids: the caller's scratch. */
static void invalidate_keys(struct tfs_mount *m, struct tfs_node *n, const struct tfs_slice *keys,
                            size_t count, uint64_t **nodeids, size_t *ncap)
{
	size_t found;

	if (grow((void **)nodeids, ncap, count, sizeof(**nodeids)) < 0) {
		tfs_log_error("fs", "%s: cannot check cached keys: out of memory",
		              tfs_kind_ops(n->kind)->name);
		return;
	}
	found = tfs_inode_find_keys(m->inodes, n->topic, tfs_topic_name(n->topic), n->partition,
	                            keys, count, *nodeids);
	for (size_t i = 0; i < found; i++)
		tfs_notify_inode(m->notifier, (*nodeids)[i], 0);
	if (found)
		tfs_notifier_drain(m->notifier);
}

/* The commit made the keys visible: the kernel's cached attributes of theirs
 * are stale (tfs_plog_txn_on_commit). */
static void put_committed(void *arg, const struct tfs_slice *keys, size_t n)
{
	struct bulk_fh *b = arg;

	invalidate_keys(b->m, b->base.node, keys, n, &b->nodeids, &b->ncap);
}

/* The .put's transaction, begun at its first line under a producer id of its
 * own. Handle lock held. */
static int put_txn_begin(struct tfs_mount *m, struct bulk_fh *b, struct tfs_plog *pl)
{
	int64_t id;
	int16_t epoch;
	int rc = tfs_engine_producer_id(m->engine, &id, &epoch);

	if (rc == 0)
		rc = tfs_plog_txn_begin(pl, id, epoch, &b->txn);
	if (rc < 0)
		return rc;
	tfs_plog_txn_on_commit(b->txn, put_committed, b);
	return 0;                       /* a write that failed before it still aborts it */
}

/* Ends the .put's transaction: commit, or abort after a failed write (or with
 * abort). Returns 0 or the error the close reports. Handle lock held. */
static int put_txn_end(struct bulk_fh *b, bool abort)
{
	struct tfs_node *n = b->base.node;
	bool commit = !abort && b->txn_failed == 0;
	int failed = b->txn_failed;
	size_t records;
	int rc;

	b->txn_failed = 0;
	if (!b->txn)
		return 0;                       /* nothing appended: the write said it */
	records = tfs_plog_txn_records(b->txn);
	rc = tfs_plog_txn_end(b->txn, commit, false);
	b->txn = NULL;
	b->txn_failed = 0;
	if (!commit && records > 0)
		tfs_log_warn("fs", "%s/%d/.put: %zu records aborted: %s", tfs_topic_name(n->topic),
		             (int)n->partition, records,
		             failed ? tfs_strerror(failed) : "closed without a flush");
	if (rc < 0)
		return rc;
	return records > 0 ? failed : 0;   /* the write said it; nothing else was lost */
}

/* Bytes an unterminated line may reach before it can never become a record. */
static size_t line_max(const struct bulk_fh *b)
{
	return b->payload_max + TFS_KEYNAME_MAX + 1;    /* .put: name, tab, value */
}

/* Appends every complete line of (the handle's partial line ++ buf), and with
 * final the last unterminated one too. Returns 0 when lines were appended, 1 when
 * none was complete, or an error (nothing appended, handle unchanged). *tail_at:
 * where the unterminated rest of buf starts. Handle lock held. */
static int append_lines(struct tfs_mount *m, struct bulk_fh *b, const char *buf, size_t size,
                        bool final, size_t *tail_at)
{
	struct tfs_node *n = b->base.node;
	struct tfs_plog *pl = tfs_mount_plog(n);
	const char *p = buf, *end = buf + size, *nl1 = memchr(buf, '\n', size);
	size_t count = 0, kused = 0;
	int rc;

	*tail_at = 0;
	if (!pl)
		return -ENOENT;
	/* Scratch: decoded keys never outgrow their names. Both buffers get all the
	 * room this call needs now, before any record points into them: the records
	 * are slices of the partial line and of the key arena, and growing either
	 * later would move the bytes under them (see the invariant at the top). */
	if (grow((void **)&b->keys, &b->kcap, b->plen + size + 1, 1) < 0)
		return -ENOMEM;
	if (b->plen && !nl1 && !final && b->plen + size > line_max(b))
		return -EFBIG;                  /* an unterminated line that can never fit */
	if (grow((void **)&b->partial, &b->pcap, b->plen + size + 1, 1) < 0)
		return -ENOMEM;                 /* the joined line, or the new tail */
	if (b->plen) {
		/* The partial line continues with buf up to its first newline; the
		 * joined line is built after the partial bytes (plen is not moved, so a
		 * failed write leaves the handle as it was). */
		size_t take = nl1 ? (size_t)(nl1 - buf) : size;
		if (!nl1 && !final)
			return 1;
		if (grow((void **)&b->recs, &b->rcap, 1, sizeof(*b->recs)) < 0)
			return -ENOMEM;
		memcpy(b->partial + b->plen, buf, take);
		rc = parse_line(b, b->partial, b->plen + take, &b->recs[0], &kused);
		if (rc < 0)
			return rc;
		count = 1;
		p = nl1 ? nl1 + 1 : end;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len;
		if (!nl && !final)
			break;
		len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (grow((void **)&b->recs, &b->rcap, count + 1, sizeof(*b->recs)) < 0)
			return -ENOMEM;
		rc = parse_line(b, p, len, &b->recs[count], &kused);
		if (rc < 0)
			return rc;
		count++;
		p = nl ? nl + 1 : end;
	}
	if ((size_t)(end - p) > line_max(b))
		return -EFBIG;                  /* the unterminated rest can never fit */
	*tail_at = (size_t)(p - buf);
	if (count == 0)
		return 1;
	if (b->put && !b->txn && (rc = put_txn_begin(m, b, pl)) < 0)
		return rc;
	rc = append_units(pl, b, b->recs, count);
	if (rc < 0)
		return rc;
	atomic_fetch_add_explicit(&m->stats.bulk_records, count, memory_order_relaxed);
	if (b->put && !b->txn && grow((void **)&b->keyv, &b->kvcap, count, sizeof(*b->keyv)) == 0) {
		for (size_t i = 0; i < count; i++)
			b->keyv[i] = b->recs[i].key;
		invalidate_keys(m, n, b->keyv, count, &b->nodeids, &b->ncap);
	}
	return 0;
}

/* Keeps buf[tail_at..size) as the new partial line (after a successful append),
 * or appends it to the partial line (when no line completed). append_lines made
 * the room. */
static void keep_tail(struct bulk_fh *b, const char *buf, size_t size, size_t tail_at,
                      bool lines_done)
{
	size_t keep = size - tail_at;

	if (lines_done)
		b->plen = 0;
	if (keep == 0)
		return;
	memcpy(b->partial + b->plen, buf + tail_at, keep);
	b->plen += keep;
}

/* Opening a write-only control entry: checks, then a zeroed handle of size bytes
 * and the topic's config in *cfg. NULL when it replied with the error. */
static void *control_fh_new(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                            struct fuse_file_info *fi, size_t size, struct tfs_topic_config *cfg)
{
	void *fh = NULL;
	int err = 0;

	if (m->read_only)
		err = EROFS;
	else if ((fi->flags & O_ACCMODE) != O_WRONLY)
		err = EACCES;                   /* write-only */
	else if (!tfs_mount_plog(n))
		err = ENOENT;
	else if (!(fh = calloc(1, size)))
		err = ENOMEM;
	if (err) {
		fuse_reply_err(req, err);
		return NULL;
	}
	tfs_topic_get_config(n->topic, cfg);
	return fh;
}

/* Registers a new control handle and replies to the OPEN: direct I/O (every
 * write reaches the daemon as it was made), not seekable. */
static void control_fh_reply(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                             struct tfs_fh *fh, struct fuse_file_info *fi,
                             void (*free_fn)(struct tfs_mount *, struct tfs_fh *))
{
	tfs_fh_register(m, fh, n, free_fn);
	fi->fh = (uintptr_t)fh;
	fi->direct_io = 1;
	fi->nonseekable = 1;
	if (fuse_reply_open(req, fi) != 0)
		free_fn(m, fh);
}

static int bulk_stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                     struct stat *st)
{
	uid_t uid;
	gid_t gid;
	mode_t mode;

	if (!tfs_mount_plog(n))
		return -ENOENT;
	tfs_topic_owner(n, &uid, &gid, &mode);
	tfs_stat_file(n, mode & 0222, uid, gid, 0, 0, st);
	st->st_atim = st->st_mtim = st->st_ctim = m->started;
	return 0;
}

static void bulk_fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct bulk_fh *b = (struct bulk_fh *)fh;

	tfs_fh_unregister(m, fh);
	pthread_mutex_destroy(&b->lock);
	/* still open (the mount went first): the log's next open aborts it */
	tfs_plog_txn_discard(b->txn);
	free(b->partial);
	free(b->recs);
	free(b->keys);
	free(b->keyv);
	free(b->nodeids);
	free(b);
}

static void bulk_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                      struct fuse_file_info *fi)
{
	struct tfs_topic_config cfg;
	struct bulk_fh *b = control_fh_new(req, m, n, fi, sizeof(*b), &cfg);

	if (!b)
		return;
	pthread_mutex_init(&b->lock, NULL);
	b->put = n->kind == TFS_NODE_PUT;
	b->m = m;
	b->max_message_bytes = cfg.max_message_bytes;
	b->payload_max = tfs_record_payload_max(cfg.max_message_bytes);
	control_fh_reply(req, m, n, &b->base, fi, bulk_fh_free);
}

static void bulk_write(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, const char *buf,
                       size_t size, off_t off, struct fuse_file_info *fi)
{
	struct bulk_fh *b = (struct bulk_fh *)fh;
	size_t tail_at = 0;
	int rc;

	atomic_fetch_add_explicit(&m->stats.bulk_writes, 1, memory_order_relaxed);
	pthread_mutex_lock(&b->lock);
	rc = append_lines(m, b, buf, size, false, &tail_at);
	if (rc >= 0)
		keep_tail(b, buf, size, tail_at, rc == 0);
	else if (b->put && b->txn_failed == 0)
		b->txn_failed = rc;             /* the close aborts the transaction */
	pthread_mutex_unlock(&b->lock);
	if (rc < 0)
		tfs_reply_err(req, rc, fh->node->kind == TFS_NODE_PUT ? ".put" : ".append");
	else
		fuse_reply_write(req, size);
}

/* The final line without a newline. Handle lock held. */
static int append_partial(struct tfs_mount *m, struct bulk_fh *b)
{
	size_t tail_at;
	int rc;

	if (b->plen == 0)
		return 0;
	rc = append_lines(m, b, "", 0, true, &tail_at);
	b->plen = 0;                            /* appended, or refused for good */
	return rc < 0 ? rc : 0;
}

static void bulk_flush(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                       struct fuse_file_info *fi)
{
	struct bulk_fh *b = (struct bulk_fh *)fh;
	int rc;

	pthread_mutex_lock(&b->lock);
	rc = append_partial(m, b);
	if (b->put) {
		int end;
		if (rc < 0 && b->txn_failed == 0)
			b->txn_failed = rc;
		end = put_txn_end(b, false);
		if (end < 0)
			rc = end;
	}
	pthread_mutex_unlock(&b->lock);
	tfs_reply_err(req, rc, fh->node->kind == TFS_NODE_PUT ? ".put" : ".append");
}

static void bulk_release(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                         struct fuse_file_info *fi)
{
	struct bulk_fh *b = (struct bulk_fh *)fh;
	int rc;

	pthread_mutex_lock(&b->lock);
	if (b->put) {
		/* no FLUSH since the last write: nobody closed it, the handle went */
		b->plen = 0;
		rc = put_txn_end(b, true);
	} else {
		rc = append_partial(m, b);
	}
	pthread_mutex_unlock(&b->lock);
	if (rc < 0 && !b->put)
		tfs_log_error("fs", "final line of %s/%d/%s lost at release: %s",
		              tfs_topic_name(fh->node->topic), (int)fh->node->partition,
		              b->put ? ".put" : ".append", tfs_strerror(rc));
	fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

static void bulk_fsync(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, int datasync,
                       struct fuse_file_info *fi)
{
	struct tfs_plog *pl = tfs_mount_plog(fh->node);

	tfs_reply_err(req, pl ? tfs_plog_sync(pl) : -ENOENT, "partition");
}

/* ---- .batches ---- */

struct batches_fh {
	struct tfs_fh base;
	pthread_mutex_t lock;           /* a FLUSH may run beside a write */
	uint8_t *buf;                   /* bytes not yet a whole batch, then the batch */
	size_t len, cap;
	int failed;                     /* a refused batch ends the stream: sticky */
	bool may_delete;                /* the opener may delete the topic's keys */
	struct tfs_mount *m;            /* for the committed-records callback */
	struct tfs_slice *keyv;
	size_t kvcap;
	uint64_t *nodeids;
	size_t ncap;
};

/* tfs_plog_append_batch's callback: the kernel's cached attributes of the keys
 * the batch just wrote are stale. */
static void batch_committed(void *arg, const struct tfs_append_rec *recs, size_t count)
{
	struct batches_fh *b = arg;
	size_t nkeys = 0;

	atomic_fetch_add_explicit(&b->m->stats.bulk_records, count, memory_order_relaxed);
	if (grow((void **)&b->keyv, &b->kvcap, count, sizeof(*b->keyv)) < 0) {
		tfs_log_error("fs", ".batches: cannot check cached keys: out of memory");
		return;
	}
	for (size_t i = 0; i < count; i++)
		if (!recs[i].key_null)
			b->keyv[nkeys++] = recs[i].key;
	invalidate_keys(b->m, b->base.node, b->keyv, nkeys, &b->nodeids, &b->ncap);
}

/* Appends every whole batch at the start of b->buf and keeps the rest. Returns 0
 * or the refusal of a batch (those before it stay appended). The header is
 * judged as soon as it can be, so that no claimed length makes the handle
 * buffer more than max.message.bytes. Handle lock held. */
static int append_batches(struct batches_fh *b, int32_t max_message_bytes)
{
	struct tfs_node *n = b->base.node;
	struct tfs_plog *pl = tfs_mount_plog(n);
	size_t pos = 0;
	int rc = 0;

	if (!pl)
		return -ENOENT;
	while (pos < b->len) {
		struct tfs_batch_header h;
		const char *why = NULL;
		size_t size;

		rc = tfs_batch_header_decode(b->buf + pos, b->len - pos, &h, &why);
		if (rc == -EAGAIN) {
			rc = 0;                 /* the rest of the header is still to come */
			break;
		}
		if (rc < 0) {
			tfs_log_warn("fs", "%s/%d/.batches: not a record batch: %s",
			             tfs_topic_name(n->topic), (int)n->partition,
			             rc == TFS_EUNSUPPORTED ? "a message set of magic 0 or 1" : why);
			if (rc != TFS_EUNSUPPORTED)
				rc = -EINVAL;
			break;
		}
		size = tfs_batch_size(&h);
		if (size > (size_t)max_message_bytes) {
			tfs_log_warn("fs", "%s/%d/.batches: a batch of %zu bytes is over max.message.bytes "
			             "(%" PRId32 ")", tfs_topic_name(n->topic), (int)n->partition, size,
			             max_message_bytes);
			rc = -EFBIG;
			break;
		}
		if (b->len - pos < size)
			break;
		/* a batch that does not decode is the engine's to refuse, with its
		 * errno; one that could not be looked at (memory) is not let through */
		if (!b->may_delete) {
			int t = tfs_batch_has_tombstone(b->buf + pos, size);
			if (t > 0)
				tfs_log_warn("fs", "%s/%d/.batches: a tombstone from a user who may not "
				             "delete keys of the sticky topic", tfs_topic_name(n->topic),
				             (int)n->partition);
			if (t > 0 || t == -ENOMEM) {
				rc = t > 0 ? -EPERM : t;
				break;
			}
		}
		/* refusals are logged by the engine with their reason */
		rc = tfs_plog_append_batch(pl, b->buf + pos, size, false, NULL, NULL, batch_committed, b);
		if (rc < 0)
			break;
		pos += size;
	}
	memmove(b->buf, b->buf + pos, b->len - pos);
	b->len -= pos;
	return rc;
}

static void batches_fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct batches_fh *b = (struct batches_fh *)fh;

	tfs_fh_unregister(m, fh);
	pthread_mutex_destroy(&b->lock);
	free(b->buf);
	free(b->keyv);
	free(b->nodeids);
	free(b);
}

/* rm's rule, which the kernel applies to the keys, for the tombstones of a
 * .batches stream: in a sticky topic only root and the topic's owner (who owns
 * its keys) delete them. The kernel keeps that rule (check_sticky) even under
 * no_default_permissions, and so does this. Judged at the open, as the kernel
 * judges a write. */
static bool may_delete_keys(fuse_req_t req, struct tfs_node *n)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct tfs_topic_meta meta;

	tfs_topic_get_meta(n->topic, &meta);
	return !(meta.mode & S_ISVTX) || ctx->uid == 0 || ctx->uid == meta.uid;
}

static void batches_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                         struct fuse_file_info *fi)
{
	struct tfs_topic_config cfg;
	struct batches_fh *b = control_fh_new(req, m, n, fi, sizeof(*b), &cfg);

	if (!b)
		return;
	pthread_mutex_init(&b->lock, NULL);
	b->m = m;
	b->may_delete = may_delete_keys(req, n);
	control_fh_reply(req, m, n, &b->base, fi, batches_fh_free);
}

static void batches_write(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, const char *buf,
                          size_t size, off_t off, struct fuse_file_info *fi)
{
	struct batches_fh *b = (struct batches_fh *)fh;
	struct tfs_topic_config cfg;
	int rc;

	atomic_fetch_add_explicit(&m->stats.bulk_writes, 1, memory_order_relaxed);
	tfs_topic_get_config(fh->node->topic, &cfg);    /* max.message.bytes as it is now */
	pthread_mutex_lock(&b->lock);
	rc = b->failed;
	if (rc == 0 && grow((void **)&b->buf, &b->cap, b->len + size, 1) < 0)
		rc = -ENOMEM;               /* nothing taken: the writer may retry */
	if (rc == 0) {
		memcpy(b->buf + b->len, buf, size);
		b->len += size;
		rc = append_batches(b, cfg.max_message_bytes);
		if (rc < 0) {
			/* past a refused batch the stream cannot be trusted to be in step */
			b->failed = rc;
			b->len = 0;
		}
	}
	pthread_mutex_unlock(&b->lock);
	if (rc < 0)
		tfs_reply_err(req, rc, ".batches");
	else
		fuse_reply_write(req, size);
}

/* FLUSH comes at every close, also of a descriptor another process still writes
 * through (`(cat a; cat b) > .batches`): bytes of an unfinished batch fail that
 * close with EINVAL, but stay for the writes still to come. */
static void batches_flush(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                          struct fuse_file_info *fi)
{
	struct batches_fh *b = (struct batches_fh *)fh;
	size_t left;

	pthread_mutex_lock(&b->lock);
	left = b->failed ? 0 : b->len;
	pthread_mutex_unlock(&b->lock);
	if (left)
		tfs_log_warn("fs", "%s/%d/.batches: closed with %zu bytes of a batch cut short",
		             tfs_topic_name(fh->node->topic), (int)fh->node->partition, left);
	tfs_reply_err(req, left ? -EINVAL : 0, ".batches");
}

/* The last close: an unfinished batch is dropped (its FLUSH said so). */
static void batches_release(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                            struct fuse_file_info *fi)
{
	struct batches_fh *b = (struct batches_fh *)fh;

	pthread_mutex_lock(&b->lock);
	if (b->len && !b->failed)
		tfs_log_warn("fs", "%s/%d/.batches: %zu bytes of a batch cut short, not appended",
		             tfs_topic_name(fh->node->topic), (int)fh->node->partition, b->len);
	b->len = 0;
	pthread_mutex_unlock(&b->lock);
	fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

const struct tfs_node_ops tfs_kind_append = {
	.name = ".append",
	.stat = bulk_stat,
	.open = bulk_open,
	.write = bulk_write,
	.flush = bulk_flush,
	.release = bulk_release,
	.fsync = bulk_fsync,
};

const struct tfs_node_ops tfs_kind_batches = {
	.name = ".batches",
	.stat = bulk_stat,
	.open = batches_open,
	.write = batches_write,
	.flush = batches_flush,
	.release = batches_release,
	.fsync = bulk_fsync,
};

const struct tfs_node_ops tfs_kind_put = {
	.name = ".put",
	.stat = bulk_stat,
	.open = bulk_open,
	.write = bulk_write,
	.flush = bulk_flush,
	.release = bulk_release,
	.fsync = bulk_fsync,
};
