/* node_key.c - a key: a regular file holding the newest value of one Kafka key.
 *
 * Handles:
 *
 *   reader  (O_RDONLY)  pins the newest record at open (tfs_plog_read_key copies
 *           it), so read() returns that value until close, whatever is appended
 *           or cleaned meanwhile. Never appends anything (noflush: no FLUSH).
 *   writer  (O_WRONLY/O_RDWR)  holds the value in memory: the newest value at
 *           open, or empty with O_TRUNC or when created. write() patches the
 *           buffer (O_APPEND: at its end); read() sees the buffer. FLUSH (every
 *           close) commits when written: one record per commit, errors returned
 *           to close(). FSYNC commits durably. RELEASE commits what is left
 *           (errors can only be logged). An O_APPEND writer commits only the
 *           bytes it appended, onto whatever value is newest at its commit
 *           (tfs_plog_append_onto), so parallel ">>" lose no line; an ftruncate
 *           through it makes it an ordinary last-writer-wins writer.
 *
 * One commit, one record. Creation and O_TRUNC oblige a commit of their own
 * ("pending"), so that touch and ": > key" append an empty value, exactly once.
 * But FLUSH comes with every close() of every copy of the descriptor: a shell
 * redirect opens the file, dup2()s it to fd 1 and closes the original (a FLUSH
 * before the first write), and "exec 4>&3; exec 4>&-" closes a copy while fd 3
 * stays open. Nothing in a FLUSH says whether it was the last close; RELEASE,
 * sent once per open file after its last close, does. So a FLUSH commits only
 * written bytes; the creation or truncation alone is committed at RELEASE (or
 * FSYNC), when it is the handle's final state. Until then nobody else turns it
 * into a record: a lookup, stat, cat, listing or another writer sees the previous
 * value, or an empty one for a new name, and nothing is appended.
 *
 * RELEASE is asynchronous: close() returns once FLUSH is answered, with the
 * RELEASE queued, so ": > k; cat k" could open k before the RELEASE is handled.
 * A FLUSH that leaves the pending obligation marks the handle "closing"
 * (m->deferred); an observer of that key or its partition (tfs_key_settle) waits
 * until the RELEASE lands or the handle is written again, at most SETTLE_MS. A
 * handle still open after that (fd 3 above) is marked outwaited so that no other
 * observer waits for it until its next FLUSH. The wait only orders the commit
 * before what the closing process does next; whichever way it ends, the promise
 * above holds. At unmount, a closing handle whose RELEASE never came (the kernel
 * drops queued requests when the connection ends) is committed: its close() was
 * acknowledged.
 *
 * Page cache (README "Reading"). The kernel shares one page cache AND one i_size
 * among all handles of an inode, and i_size bounds every page-cache read. What
 * moves i_size is mostly ours (every attribute reply carries a size) and partly
 * the kernel's own: an O_TRUNC open sets it to 0 after our OPEN reply, a direct
 * write past it grows it. A reader pins its record at open; so that a re-read of
 * an unchanged value costs no READ, a reader reads through the page cache when
 * that cannot show it another version's bytes or length:
 *   - per node, cache_offset is the record whose pages the kernel may hold and
 *     cache_users the open handles reading through them;
 *   - a reader whose pinned offset is cache_offset gets keep_cache (the pages
 *     are of its version); with no page-cache user open, a reader of another
 *     version takes the pages over without keep_cache (the kernel drops the old
 *     ones at open);
 *   - a reader of another version while page-cache users are open, and any
 *     reader while a writer handle is open, uses direct_io: every read(2) is
 *     answered from its pinned copy;
 *   - the kernel trusts an attribute reply, even one with a zero timeout,
 *     until its clock ticks, so a reply computed before a reader linked could
 *     end that reader's first read(2) at a length that was never its value's
 *     (measured under load: an old value cut at the next one's length). So
 *     attrs_off keeps which record's length every reply carried since the last
 *     check (computed under the node lock, the lookup included), MIXED when
 *     they differ, a writer's length went out or a writer was open (it moves
 *     i_size by itself). The first page-cache user (cache_users 0 -> 1) whose
 *     record is not that one sends an attribute invalidation after it linked
 *     and waits until the kernel has it, before its OPEN reply: the kernel then
 *     drops every reply requested before it (attr_version) and asks again,
 *     through the reader's handle, at its first read. A re-read of an unchanged
 *     value (every reply carried its length) sends nothing. A first reader that
 *     takes the pages over (no keep_cache) on a node that had page-cache
 *     readers drops the old pages the same way, before its reply (the kernel's
 *     own drop comes after it). Until that is sent, readers that come read
 *     directly (cache_blocked), since they could join with keep_cache; so do
 *     readers while a truncate(2) by path is in flight (the kernel holds i_size
 *     unstable until its reply, dropping their GETATTRs);
 *   - while page-cache users are open, every attribute reply reports their
 *     value's length (uncached when it is not the newest), so no stat, ls -l,
 *     lookup or direct reader's fstat moves i_size under them; a reply through
 *     a page-cache reader's own handle (the kernel refreshing i_size on its read
 *     path), or a direct reader's while none is open, reports its pinned length;
 *   - a writer never shares an inode with page-cache readers. The kernel moves
 *     i_size without asking (an O_TRUNC open sets it to 0, a direct write past it
 *     grows it), and a reader's own GETATTR cannot undo that race: its reply is
 *     dropped when a write lands meanwhile (fuse_inode attr_version). So a
 *     writer's OPEN, or a truncate(2) by path, that finds page-cache readers of
 *     the node (or a retired node) is answered ESTALE after the node is retired
 *     (tfs_inode_retire): it keeps its key and readers but lookups pass it by.
 *     The kernel retries an open(2) or truncate(2) that got ESTALE once, with
 *     LOOKUP_REVAL, which looks the name up again: a fresh node, a new nodeid, a
 *     fresh inode, whose size and pages nobody else holds. The readers of the
 *     retired node keep theirs untouched until they close; a reader that still
 *     reaches it (an old dentry) uses direct_io. The fresh node keeps
 *     readers off the page cache for SUCCESSOR_HOLD_MS (successor_until_ns), so
 *     that the writer sent back does not find new page-cache readers there; a
 *     creation (CREATE names the node in its reply) just takes a fresh node.
 *     A writer's release forgets cache_offset, since i_size may be the writer's.
 * O_RDONLY|O_TRUNC truncates on Linux: it opens a writer, like O_WRONLY|O_TRUNC.
 * What remains: a chmod or utimens (SETATTR without a size) whose reply was
 * computed before a commit: the kernel writes a SETATTR reply's size without the
 * attr_version check, so it can undo a first reader's invalidation when it lands
 * after it (not seen; it needs a chmod racing a commit and a first open).
 * An open(2) whose retry comes later than SUCCESSOR_HOLD_MS and
 * meets page-cache readers again fails with ESTALE (never seen; the retry is
 * part of the same system call). Changes that open no writer (.put, .append,
 * rename onto the key) leave page-cache readers on their inode, where attribute
 * replies keep reporting their length, as above. -o direct_reads turns the page
 * cache off for readers altogether. On a read-only mount every reader uses it
 * with keep_cache (there is one version only). A MAP_PRIVATE mmap by a direct
 * reader is served from the shared pages (the kernel fills them through its
 * handle), so page-cache readers of another version open at the same time may
 * read its bytes (not measured; documented in README "Reading").
 * Writers always use direct_io (their bytes are not committed, no other handle
 * may see them).
 *
 * Whose close commits: FLUSH comes from every close() of every copy of the file
 * descriptor, including copies a process never used: a fork()ed child closing
 * its inherited descriptors at exec (O_CLOEXEC) sends a FLUSH while the parent is
 * in the middle of its writes. Committing there would append a half-made value
 * (measured: a writer doing pwrite + ftruncate while another thread ran
 * subprocess.run produced torn records). So a handle remembers its editors: the
 * lock owner (the process's files table, sent with every WRITE and FLUSH) and
 * the thread of each write and ftruncate. A FLUSH commits a written handle only
 * when it comes from one of its editors (same files table, or same thread); a
 * FLUSH from anyone else leaves it for its editor's own close, or RELEASE. A
 * handle that was only created or truncated defers at a FLUSH from the thread
 * that opened it (the shell's dup2 + close) and ignores one from anyone else.
 *
 * Unlink and rename-over take the node's name away (tfs_inode_unhash): its open
 * writers then commit nothing, as writes to an unlinked file reach no name. A
 * renamed node follows its new name: its writers commit to the new key.
 *
 * security.capability, measured with -d on kernel 6.18 / libfuse 3.14 (3 write(2)
 * calls on one handle, then truncate(2)):
 *   page-cache writer:  GETXATTR before each of the 3 WRITEs, and before SETATTR
 *   direct_io writer:   no GETXATTR before any WRITE; one before SETATTR(size)
 *   FUSE_CAP_HANDLE_KILLPRIV (libfuse turns it on by default) changes neither.
 * The page-cache write path calls file_remove_privs per write; the direct_io path
 * does not. truncate/ftruncate go through the VFS's dentry_needs_remove_privs,
 * which only HANDLE_KILLPRIV_V2 (SB_NOSEC) would skip, and libfuse 3.14 cannot
 * negotiate it. So every writer uses direct_io, and ops.c answers security.*,
 * system.* and trusted.* with EOPNOTSUPP before any lookup or lock: the one
 * round trip left (per truncate) costs a few microseconds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/keyname.h"
#include "fs/node.h"
#include "fs/node_key.h"
#include "io/log.h"

#define BUF_MIN_CAP 256
/* How long an observer waits for the RELEASE of a handle closed without a write:
 * the RELEASE is queued before close() returns, so this only covers scheduling
 * delays on a loaded machine; see the top of this file. */
#define SETTLE_MS 250
/* How long the fresh node that takes a retired node's name keeps readers off the
 * page cache, waiting for the writer that was sent back to look the name up again
 * (it does so at once, inside the same open(2)); see the top of this file. */
#define SUCCESSOR_HOLD_MS 5000

static void timespec_add_ms(struct timespec *t, long ms)
{
	t->tv_nsec += ms * 1000000L;
	t->tv_sec += t->tv_nsec / 1000000000L;
	t->tv_nsec %= 1000000000L;
}

/* ---- attributes ----------------------------------------------------------- */

/* The writer whose size getattr reports: the handle asked about, else the most
 * recently written dirty one (fstat after write carries no handle). A handle only
 * created or truncated is not one: others see the previous value's size until it
 * commits. Node lock held. */
static struct tfs_key_handle *size_writer_locked(struct tfs_node *n, struct fuse_file_info *fi)
{
	struct tfs_key_handle *best = NULL;

	if (fi && fi->fh) {
		struct tfs_key_handle *h = tfs_key__of(tfs_fh_of(fi));
		if (h->base.node == n && h->writer)
			return h;
	}
	for (struct tfs_key_handle *h = n->writers; h; h = h->wnext)
		if (h->dirty && (!best || h->write_seq > best->write_seq))
			best = h;
	return best;
}

/* Notes that an attribute reply carries the length of the record at off (or a
 * writer's: TFS_ATTRS_MIXED), for the next first page-cache reader. Node lock
 * held. */
static void note_reported_locked(struct tfs_node *n, tfs_offset_t off)
{
	if (off < 0)
		off = TFS_ATTRS_MIXED;          /* no record's length */
	if (n->attrs_off == TFS_ATTRS_NONE)
		n->attrs_off = off;
	else if (n->attrs_off != off)
		n->attrs_off = TFS_ATTRS_MIXED;
}

int tfs_key__stat(struct tfs_mount *m, struct tfs_node *n, struct fuse_file_info *fi,
                    struct stat *st)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_key_handle *reader = NULL, *w, *pc = NULL;
	struct tfs_keyinfo info;
	uint8_t kb[TFS_NODE_KEY_CAP];
	size_t klen, len = 0;
	int64_t mtime = 0;
	tfs_offset_t reported = TFS_ATTRS_MIXED;
	bool have_w = false, have_open_w = false, own_w;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	int rc;

	if (!pl)
		return -ENOENT;
	tfs_key_settle(m, n);                  /* ": > k; stat k" */
	tfs_topic_owner(n, &uid, &gid, &mode);
	mode &= 0666;
	if (fi && fi->fh) {
		struct tfs_key_handle *h = tfs_key__of(tfs_fh_of(fi));
		if (h->base.node == n && !h->writer)
			reader = h;
	}
	/* Everything under the node lock, the lookup included: a reader linking as
	 * the first page-cache user sees every reply computed before it in
	 * attrs_off, and every reply computed after it sees the reader. */
	pthread_mutex_lock(&n->lock);
	klen = tfs_key__copy_locked(n, kb);
	w = size_writer_locked(n, fi);
	if (!w && n->writers) {
		w = n->writers;                 /* clean: only for a key without a record */
		have_open_w = true;
	} else if (w) {
		have_w = true;
	}
	own_w = have_w && fi && fi->fh && tfs_key__of(tfs_fh_of(fi)) == w;
	for (struct tfs_key_handle *h = n->cache_users ? n->readers : NULL; h && !pc; h = h->wnext)
		if (h->page_cache)
			pc = h;
	/* A direct reader's own GETATTR (lseek SEEK_END, fstat) moves the i_size
	 * page-cache readers share like any other: while they are open, it gets
	 * their length (below), not its own. */
	if (reader && !reader->page_cache && pc)
		reader = NULL;
	if (have_w && (own_w || (!pc && !reader))) {            /* written, not committed */
		len = w->len;
		mtime = w->mtime_ms;
		rc = TFS_STAT_VOLATILE;
		goto out;
	}
	rc = n->unlinked ? -ENOENT : tfs_plog_lookup(pl, tfs_slice_make(kb, klen), &info);
	if (rc < 0 && rc != -ENOENT)
		goto out;
	if (reader && (rc < 0 || info.offset != reader->rec.offset)) {
		/* The kernel refreshes i_size through a reader's handle: keep it at
		 * the pinned value's length. */
		len = reader->rec.value_len;
		mtime = reader->rec.timestamp;
		reported = reader->rec.offset;
		rc = TFS_STAT_VOLATILE;
	} else if (pc && !reader && (rc < 0 || info.offset != pc->rec.offset)) {
		/* i_size is shared by the inode's handles: while page-cache readers of
		 * an older value are open, every reply keeps it at their length (see
		 * the top of this file), uncached, so the newest shows once they close. */
		len = pc->rec.value_len;
		mtime = pc->rec.timestamp;
		reported = pc->rec.offset;
		rc = TFS_STAT_VOLATILE;
	} else if (rc == 0) {
		len = info.value_bytes;
		mtime = info.timestamp;
		reported = info.offset;
		/* An open writer may commit at any moment (a creation or truncation at
		 * its RELEASE, after close() returned), and the invalidation its commit
		 * queues reaches the kernel later still: cached, this size would outlive
		 * the commit (": > k" then stat k showing the old length). */
		rc = have_w || have_open_w ? TFS_STAT_VOLATILE : 0;
	} else if (have_open_w) {
		/* No live record (unlinked, tombstoned, or created and not committed),
		 * but open handles still name the node: fstat on them must work. */
		len = w->len;
		mtime = w->mtime_ms;
		rc = TFS_STAT_VOLATILE;
	} else if (n->readers) {
		len = n->readers->rec.value_len;
		mtime = n->readers->rec.timestamp;
		reported = n->readers->rec.offset;
		rc = TFS_STAT_VOLATILE;
	} else {
		rc = -ENOENT;
	}
out:
	if (rc >= 0)
		note_reported_locked(n, reported);
	pthread_mutex_unlock(&n->lock);
	if (rc >= 0)
		tfs_stat_file(n, mode, uid, gid, (off_t)len, mtime, st);
	return rc;
}
/* Links h into the node's writers or readers. Node lock held. */
void tfs_key__link_locked(struct tfs_node *n, struct tfs_key_handle *h)
{
	struct tfs_key_handle **head = h->writer ? &n->writers : &n->readers;

	h->wprev = NULL;
	h->wnext = *head;
	if (*head)
		(*head)->wprev = h;
	*head = h;
}

static void handle_unlink_locked(struct tfs_node *n, struct tfs_key_handle *h)
{
	struct tfs_key_handle **head = h->writer ? &n->writers : &n->readers;

	if (h->wprev)
		h->wprev->wnext = h->wnext;
	else
		*head = h->wnext;
	if (h->wnext)
		h->wnext->wprev = h->wprev;
	h->wnext = h->wprev = NULL;
}

static void defer_remove(struct tfs_mount *m, struct tfs_key_handle *h);

/* Commits a dirty writer: one record with the buffer as value. Node lock held
 * (writes to this node wait; the engine's locks come after ours). */
static int commit_locked(struct tfs_mount *m, struct tfs_key_handle *h, bool durable,
                         bool *committed)
{
	struct tfs_node *n = h->base.node;
	struct tfs_plog *pl = tfs_mount_plog(n);
	static const uint8_t empty[1];
	struct tfs_append_rec rec = { 0 };
	int rc;

	*committed = false;
	if (!h->dirty && !h->pending)
		return 0;
	if (n->unlinked) {
		h->dirty = h->pending = false;  /* its name is gone: nothing to commit to */
		return 0;
	}
	if (!pl)
		return -ENOENT;
	rec.key = tfs_slice_make(n->key_len ? n->key : empty, n->key_len);
	if (h->onto) {
		/* O_APPEND: its own bytes go onto whatever value is newest now. */
		rc = tfs_plog_append_onto(pl, rec.key, tfs_slice_make(h->buf ? h->buf + h->base_len
		                                                             : empty,
		                                                      h->len - h->base_len),
		                          durable, NULL, NULL);
		if (rc == 0)
			h->base_len = h->len;
	} else {
		rec.value = tfs_slice_make(h->len ? h->buf : empty, h->len);
		rc = tfs_plog_append(pl, &rec, 1, durable, NULL, NULL);
	}
	if (rc < 0) {
		/* The error goes to this close()/fsync(); the value is dropped, so that a
		 * later retry (RELEASE) cannot make a record appear that the caller was
		 * told failed. The engine logged why. */
		atomic_fetch_add_explicit(&m->stats.commit_errors, 1, memory_order_relaxed);
		h->dirty = h->pending = false;
		h->failed_err = rc;
		return rc;
	}
	h->dirty = h->pending = false;
	*committed = true;
	atomic_fetch_add_explicit(&m->stats.commits, 1, memory_order_relaxed);
	return 0;
}

static int commit(struct tfs_mount *m, struct tfs_key_handle *h, bool durable)
{
	struct tfs_node *n = h->base.node;
	bool committed;
	int rc;

	pthread_mutex_lock(&n->lock);
	rc = commit_locked(m, h, durable, &committed);
	pthread_mutex_unlock(&n->lock);
	defer_remove(m, h);     /* after the record: whoever waited for it sees it */
	/* Its mtime is now the record's; cached attrs (from a getattr between the
	 * writes and this commit) must go. The kernel already dropped them on write. */
	if (committed)
		tfs_notify_changed(m, n);
	return rc;
}

/* ---- closed creations and truncations (see the top of this file) -------- */

void tfs_key_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(c, &attr);
	pthread_condattr_destroy(&attr);
}

/* Puts h on m->deferred (again): its last event is a FLUSH that left only the
 * pending obligation. Node lock held (lock order: node, then deferred_lock; the
 * list and h->deferred are under deferred_lock). */
static void defer_add(struct tfs_mount *m, struct tfs_key_handle *h)
{
	pthread_mutex_lock(&m->deferred_lock);
	h->outwaited = false;           /* a new close: it may be the last */
	if (!h->deferred) {
		h->dprev = NULL;
		h->dnext = m->deferred;
		if (m->deferred)
			m->deferred->dprev = h;
		m->deferred = h;
		h->deferred = true;
		atomic_fetch_add_explicit(&m->deferred_count, 1, memory_order_release);
	}
	pthread_mutex_unlock(&m->deferred_lock);
}

/* Deferred lock held. */
static void defer_unlink_locked(struct tfs_mount *m, struct tfs_key_handle *h)
{
	if (h->dprev)
		h->dprev->dnext = h->dnext;
	else
		m->deferred = h->dnext;
	if (h->dnext)
		h->dnext->dprev = h->dprev;
	h->dnext = h->dprev = NULL;
	h->deferred = false;
	atomic_fetch_sub_explicit(&m->deferred_count, 1, memory_order_release);
	pthread_cond_broadcast(&m->deferred_cond);
}

/* Takes h off m->deferred: written again, or committed. */
static void defer_remove(struct tfs_mount *m, struct tfs_key_handle *h)
{
	/* acquire: pairs with the release increment in defer_add. */
	if (atomic_load_explicit(&m->deferred_count, memory_order_acquire) == 0)
		return;
	pthread_mutex_lock(&m->deferred_lock);
	if (h->deferred)
		defer_unlink_locked(m, h);
	pthread_mutex_unlock(&m->deferred_lock);
}

/* Is h one that an observer of n waits for? Deferred lock held (h is alive). */
static bool settles_for(const struct tfs_key_handle *h, const struct tfs_node *n)
{
	const struct tfs_node *hn = h->base.node;

	if (h->outwaited)
		return false;
	if (n->kind == TFS_NODE_KEY)
		return hn == n;
	return hn->topic == n->topic && hn->partition == n->partition;
}

void tfs_key_settle(struct tfs_mount *m, struct tfs_node *n)
{
	struct timespec deadline;
	int rc = 0;

	/* acquire: pairs with the release increment in defer_add. */
	if (atomic_load_explicit(&m->deferred_count, memory_order_acquire) == 0 || !n->topic)
		return;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	timespec_add_ms(&deadline, SETTLE_MS);
	pthread_mutex_lock(&m->deferred_lock);
	for (;;) {
		struct tfs_key_handle *h;
		for (h = m->deferred; h && !settles_for(h, n); h = h->dnext)
			;
		if (!h)
			break;
		if (rc == ETIMEDOUT) {
			/* Still open (its close was of a copy): nobody waits for it again
			 * before its next FLUSH. */
			for (; h; h = h->dnext)
				if (settles_for(h, n))
					h->outwaited = true;
			break;
		}
		rc = pthread_cond_timedwait(&m->deferred_cond, &m->deferred_lock, &deadline);
	}
	pthread_mutex_unlock(&m->deferred_lock);
}

void tfs_key_commit_closed(struct tfs_mount *m)
{
	for (;;) {
		struct tfs_key_handle *h;
		struct tfs_node *n;
		bool committed;
		int rc;

		pthread_mutex_lock(&m->deferred_lock);
		h = m->deferred;
		if (h)
			defer_unlink_locked(m, h);
		pthread_mutex_unlock(&m->deferred_lock);
		if (!h)
			break;
		n = h->base.node;
		pthread_mutex_lock(&n->lock);
		rc = commit_locked(m, h, false, &committed);
		pthread_mutex_unlock(&n->lock);
		if (rc < 0)
			tfs_log_error("fs", "commit of a created or truncated key in %s/%d at unmount "
			              "failed: %s", tfs_topic_name(n->topic), (int)n->partition,
			              tfs_strerror(rc));
	}
}

void tfs_key__fh_free(struct tfs_mount *m, struct tfs_fh *fh)
{
	struct tfs_key_handle *h = tfs_key__of(fh);
	struct tfs_node *n = fh->node;

	if (h->writer)
		defer_remove(m, h);
	pthread_mutex_lock(&n->lock);
	handle_unlink_locked(n, h);
	if (h->page_cache)
		n->cache_users--;
	if (h->writer) {
		n->cache_offset = TFS_OFFSET_NONE;     /* i_size may be the writer's */
		n->attrs_off = TFS_ATTRS_MIXED;
	}
	pthread_mutex_unlock(&n->lock);
	tfs_fh_unregister(m, fh);
	tfs_record_copy_release(&h->rec);
	free(h->buf);
	free(h);
}

/* Sets up a writer on n: loads the newest value unless trunc. Node not locked. */
int tfs_key__writer_init(struct tfs_mount *m, struct tfs_node *n, struct tfs_key_handle *h,
                         bool trunc, bool append, bool start_dirty)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_record_copy rc_copy;
	uint8_t kb[TFS_NODE_KEY_CAP];
	size_t klen;
	int rc;

	if (!pl)
		return -ENOENT;
	h->writer = true;
	h->append = append;
	/* O_APPEND commits its bytes onto the newest value, unless it truncated
	 * (a new name "starts" truncated: there is nothing to keep) */
	h->onto = append && (!trunc || start_dirty);
	klen = tfs_key__copy(n, kb);
	{
		int64_t vmax = tfs_key__value_max(n, klen);
		h->payload_max = vmax > 0 ? (size_t)vmax : 0;
	}
	h->pending = trunc || start_dirty;
	h->mtime_ms = tfs_now_ms();
	if (trunc)
		return 0;
	rc = tfs_readcache_read_key(m->readcache, n->topic, pl, tfs_slice_make(kb, klen), &rc_copy);
	if (rc == -ENOENT)
		return 0;                       /* not live: start empty */
	if (rc < 0)
		return rc;
	/* Take the value's buffer over instead of copying it. */
	h->buf = rc_copy.value;
	h->len = h->cap = rc_copy.value_len;
	h->base_len = h->len;
	rc_copy.value = NULL;
	rc_copy.value_len = 0;
	tfs_record_copy_release(&rc_copy);
	return 0;
}

/* ---- open, read, write, flush, release, fsync ----------------------------- */

/* May a reader opening n now use the page cache? Not while a writer is open or on
 * its way (see the top of this file). Node lock held. */
static bool page_cache_allowed_locked(const struct tfs_mount *m, const struct tfs_node *n)
{
	if (!m->reader_cache || n->writers || n->unlinked || n->retired || n->cache_blocked)
		return false;
	return !n->successor_until_ns || n->successor_until_ns <= tfs_inode_clock_ns();
}

/* Would a writer on n share its inode with page-cache readers (or reach a
 * retired node, which may have them)? Node lock held. */
static bool shares_page_cache_locked(const struct tfs_node *n)
{
	return n->retired || n->cache_users > 0;
}

/* The kernel would change the i_size page-cache readers of n share: retire n so
 * that the caller's path is looked up again onto a fresh node (see the top of
 * this file). Node not locked. */
static int retire_for_writer(struct tfs_mount *m, struct tfs_node *n)
{
	tfs_inode_retire(m->inodes, n, SUCCESSOR_HOLD_MS);
	atomic_fetch_add_explicit(&m->stats.retired_nodes, 1, memory_order_relaxed);
	return -ESTALE;
}

void tfs_key__fh_discard(struct tfs_mount *m, struct tfs_key_handle *h)
{
	tfs_fh_unregister(m, &h->base);
	free(h->buf);
	free(h);
}

int tfs_key__link_writer(struct tfs_mount *m, struct tfs_node *n, struct tfs_key_handle *h)
{
	bool refuse;

	pthread_mutex_lock(&n->lock);
	refuse = shares_page_cache_locked(n);
	if (!refuse) {
		tfs_key__link_locked(n, h);     /* new readers now use direct_io */
		n->attrs_off = TFS_ATTRS_MIXED; /* it moves i_size by itself */
		if (h->pending)
			h->write_seq = atomic_fetch_add_explicit(&m->stats.write_seq, 1,
			                                         memory_order_relaxed);
	}
	pthread_mutex_unlock(&n->lock);
	return refuse ? retire_for_writer(m, n) : 0;
}

/* Ends one reason to keep readers off n's page cache (cache_blocked). Node not
 * locked. */
static void cache_unblock(struct tfs_node *n)
{
	pthread_mutex_lock(&n->lock);
	n->cache_blocked--;
	pthread_mutex_unlock(&n->lock);
}

static void key_open(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                     struct fuse_file_info *fi)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_key_handle *h;
	uint8_t kb[TFS_NODE_KEY_CAP];
	size_t klen;
	bool pending, unlinked, inval = false, drop_pages = false;
	int rc;

	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	tfs_key_settle(m, n);                  /* ": > k; cat k" must see the empty value */
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* O_RDONLY|O_TRUNC truncates on Linux (the kernel sets i_size to 0 after
	 * the reply): a writer's open, committing the empty value. */
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		if (m->read_only) {
			free(h);
			fuse_reply_err(req, EROFS);
			return;
		}
		rc = tfs_key__writer_init(m, n, h, (fi->flags & O_TRUNC) != 0, (fi->flags & O_APPEND) != 0,
		                 false);
		if (rc < 0) {
			free(h->buf);
			free(h);
			tfs_reply_err(req, rc, "key");
			return;
		}
		tfs_key__set_opener(h, req);
		tfs_fh_register(m, &h->base, n, tfs_key__fh_free);
		rc = tfs_key__link_writer(m, n, h);
		if (rc < 0) {
			tfs_key__fh_discard(m, h);
			fuse_reply_err(req, -rc);   /* the kernel looks the name up again */
			return;
		}
		fi->direct_io = 1;
		fi->fh = (uintptr_t)h;
		if (fuse_reply_open(req, fi) != 0)
			tfs_key__fh_free(m, &h->base);
		return;
	}

	pthread_mutex_lock(&n->lock);
	klen = tfs_key__copy_locked(n, kb);
	pending = n->writers != NULL;
	unlinked = n->unlinked;
	pthread_mutex_unlock(&n->lock);
	rc = unlinked ? -ENOENT :
	     tfs_readcache_read_key(m->readcache, n->topic, pl, tfs_slice_make(kb, klen), &h->rec);
	if (rc == -ENOENT && pending) {
		/* Created, not committed yet: a reader sees no uncommitted byte. */
		h->rec.offset = TFS_OFFSET_NONE;
		rc = 0;
	}
	if (rc < 0) {
		free(h);
		tfs_reply_err(req, rc, "key");
		return;
	}
	tfs_fh_register(m, &h->base, n, tfs_key__fh_free);
	pthread_mutex_lock(&n->lock);
	tfs_key__link_locked(n, h);
	if (h->rec.offset == TFS_OFFSET_NONE) {
		fi->direct_io = 1;
	} else if (m->read_only) {
		fi->keep_cache = 1;             /* the only version there is (see above) */
	} else if (!page_cache_allowed_locked(m, n)) {
		fi->direct_io = 1;              /* a writer may change i_size meanwhile */
	} else if (n->cache_users == 0 || n->cache_offset == h->rec.offset) {
		fi->keep_cache = n->cache_offset == h->rec.offset;
		/* the first one: has the kernel been told any other length? */
		inval = n->cache_users == 0 && n->attrs_off != TFS_ATTRS_NONE &&
		        n->attrs_off != h->rec.offset;
		/* pages of another version: gone before this reply, not after it
		 * (the kernel's own drop at open comes after), since others may
		 * join with keep_cache as soon as it is answered */
		drop_pages = !fi->keep_cache && n->cache_had_pages;
		if (inval)
			n->attrs_off = TFS_ATTRS_NONE;  /* replies from now on count */
		if (inval || drop_pages)
			n->cache_blocked++;     /* others read directly until it is sent */
		n->cache_had_pages = true;
		n->cache_offset = h->rec.offset;
		n->cache_users++;
		h->page_cache = true;
	} else {
		fi->direct_io = 1;              /* the pages hold another version */
	}
	pthread_mutex_unlock(&n->lock);
	/* The first page-cache reader, when some reply may have carried another
	 * length (see the top of this file): an invalidation sent now, after the
	 * link, makes the kernel drop every attribute reply requested before it and
	 * ask again through this reader's handle at its first read. Replies
	 * computed since the link are counted in attrs_off again. Readers that
	 * come meanwhile read directly (cache_blocked). */
	if (inval || drop_pages) {
		tfs_notify_inode(m->notifier, n->nodeid, drop_pages);
		tfs_notifier_drain(m->notifier);
		cache_unblock(n);
	}
	fi->noflush = 1;                        /* a reader never commits */
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) != 0)
		tfs_key__fh_free(m, &h->base);
}

void tfs_key__set_opener(struct tfs_key_handle *h, fuse_req_t req)
{
	h->opener_tid = fuse_req_ctx(req)->pid;
}

/* Remembers who edited h (lock owner 0: unknown, e.g. ftruncate). Node lock held. */
static void note_editor_locked(struct tfs_key_handle *h, uint64_t lock_owner, pid_t tid)
{
	for (uint8_t i = 0; i < h->editors; i++)
		if (h->editor_owner[i] == lock_owner && h->editor_tid[i] == tid)
			return;
	if (h->editors == TFS_KEY_EDITORS) {
		h->editors_overflow = true;
		return;
	}
	h->editor_owner[h->editors] = lock_owner;
	h->editor_tid[h->editors] = tid;
	h->editors++;
}

/* Is this FLUSH from one of h's editors? Node lock held. */
static bool is_editor_locked(const struct tfs_key_handle *h, uint64_t lock_owner, pid_t tid)
{
	if (h->editors_overflow)
		return true;
	for (uint8_t i = 0; i < h->editors; i++)
		if ((lock_owner && h->editor_owner[i] == lock_owner) || h->editor_tid[i] == tid)
			return true;
	return false;
}

static void reply_slice(fuse_req_t req, const uint8_t *p, size_t len, size_t size, off_t off)
{
	if (off < 0 || (uint64_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	fuse_reply_buf(req, (const char *)p + off, size);
}

static void key_read(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, size_t size,
                     off_t off, struct fuse_file_info *fi)
{
	struct tfs_key_handle *h = tfs_key__of(fh);
	struct tfs_node *n = fh->node;

	atomic_fetch_add_explicit(&m->stats.key_reads, 1, memory_order_relaxed);
	if (!h->writer) {
		reply_slice(req, h->rec.value, h->rec.value_len, size, off);
		return;
	}
	pthread_mutex_lock(&n->lock);          /* the buffer may be written meanwhile */
	reply_slice(req, h->buf, h->len, size, off);
	pthread_mutex_unlock(&n->lock);
}

/* After a write or ftruncate through h: its next FLUSH commits. Node lock held. */
static void mark_written_locked(struct tfs_mount *m, struct tfs_key_handle *h)
{
	h->dirty = true;
	h->mtime_ms = tfs_now_ms();
	h->write_seq = atomic_fetch_add_explicit(&m->stats.write_seq, 1, memory_order_relaxed);
	defer_remove(m, h);                     /* not closing after all */
}

/* Makes room for len bytes. Node lock held. */
static int reserve(struct tfs_key_handle *h, size_t len)
{
	size_t nc;
	uint8_t *nb;

	if (len <= h->cap)
		return 0;
	nc = h->cap < BUF_MIN_CAP ? BUF_MIN_CAP : h->cap;
	while (nc < len)
		nc = nc > SIZE_MAX / 2 ? len : nc * 2;
	nb = realloc(h->buf, nc);
	if (!nb)
		return -ENOMEM;
	h->buf = nb;
	h->cap = nc;
	return 0;
}

/* Sets the buffer's length, zero-filling growth. Node lock held. */
static int resize_locked(struct tfs_key_handle *h, size_t len)
{
	int rc;

	if (len > h->payload_max)
		return -EFBIG;
	rc = reserve(h, len);
	if (rc < 0)
		return rc;
	if (len > h->len)
		memset(h->buf + h->len, 0, len - h->len);
	h->len = len;
	return 0;
}

static void key_write(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, const char *buf,
                      size_t size, off_t off, struct fuse_file_info *fi)
{
	struct tfs_key_handle *h = tfs_key__of(fh);
	struct tfs_node *n = fh->node;
	size_t pos, end;
	int rc = 0;

	if (!h->writer) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&n->lock);
	pos = h->append ? h->len : (size_t)off;
	end = pos + size;
	if (h->failed_err) {
		rc = h->failed_err;
	} else if (end < pos || end > h->payload_max) {
		/* Over max.message.bytes: refused now, and this handle appends nothing
		 * at all, not even the empty value of its creation ("nothing appended"). */
		rc = -EFBIG;
		h->failed_err = rc;
		h->dirty = h->pending = false;
	} else if (pos > h->len) {
		rc = resize_locked(h, pos);     /* a hole reads as zeros */
	}
	if (rc == 0)
		rc = reserve(h, end);
	if (rc == 0) {
		note_editor_locked(h, fi->lock_owner, fuse_req_ctx(req)->pid);
		memcpy(h->buf + pos, buf, size);
		if (end > h->len)
			h->len = end;
		mark_written_locked(m, h);
	}
	pthread_mutex_unlock(&n->lock);
	if (rc < 0)
		tfs_reply_err(req, rc, "key");
	else
		fuse_reply_write(req, size);
}

static void key_flush(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                      struct fuse_file_info *fi)
{
	struct tfs_key_handle *h = tfs_key__of(fh);
	struct tfs_node *n = fh->node;
	pid_t tid = fuse_req_ctx(req)->pid;
	bool skip = false, dirty;

	if (!h->writer) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&n->lock);
	dirty = h->dirty;
	if (dirty)
		skip = !is_editor_locked(h, fi->lock_owner, tid);   /* a fork's close */
	else if (h->pending && !n->unlinked)
		defer_add(m, h);        /* maybe the last close: RELEASE commits it */
	pthread_mutex_unlock(&n->lock);
	if (skip)
		tfs_log(TFS_LOG_DEBUG, "fs", "flush of a key in %s/%d by thread %d, not an editor: "
		        "left to its editor's close", tfs_topic_name(n->topic), (int)n->partition,
		        (int)tid);
	if (!dirty || skip) {
		fuse_reply_err(req, 0);
		return;
	}
	tfs_reply_err(req, commit(m, h, false), "key");
}

static void key_fsync(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh, int datasync,
                      struct fuse_file_info *fi)
{
	struct tfs_key_handle *h = tfs_key__of(fh);
	struct tfs_plog *pl = tfs_mount_plog(fh->node);
	bool dirty = false;
	int rc;

	if (!pl) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (h->writer) {
		pthread_mutex_lock(&fh->node->lock);
		dirty = (h->dirty || h->pending) && !fh->node->unlinked;
		pthread_mutex_unlock(&fh->node->lock);
	}
	/* A durable commit syncs everything before it in the partition too. */
	rc = dirty ? commit(m, h, true) : tfs_plog_sync(pl);
	tfs_reply_err(req, rc, "key");
}

static void key_release(fuse_req_t req, struct tfs_mount *m, struct tfs_fh *fh,
                        struct fuse_file_info *fi)
{
	struct tfs_key_handle *h = tfs_key__of(fh);

	if (h->writer) {
		/* The creation or truncation closed without a write, or what a
		 * fork's close left: FLUSH committed everything else already. */
		int rc = commit(m, h, false);
		if (rc < 0)
			tfs_log_error("fs", "commit at release of a key in %s/%d lost: %s",
			              tfs_topic_name(fh->node->topic), (int)fh->node->partition,
			              tfs_strerror(rc));
	}
	fuse_reply_err(req, 0);
	tfs_fh_put(m, fh);
}

/* ---- setattr -------------------------------------------------------------- */

/* truncate(2) on a path: a record with the value cut or zero-extended. */
static int truncate_path(struct tfs_mount *m, struct tfs_node *n, off_t size)
{
	struct tfs_plog *pl = tfs_mount_plog(n);
	struct tfs_record_copy val;
	struct tfs_append_rec rec = { 0 };
	static const uint8_t empty[1];
	uint8_t kb[TFS_NODE_KEY_CAP], *nv = NULL;
	size_t klen;
	bool unlinked;
	int rc;

	if (!pl)
		return -ENOENT;
	tfs_key_settle(m, n);                  /* `: > k; truncate -s 5 k` */
	pthread_mutex_lock(&n->lock);
	klen = tfs_key__copy_locked(n, kb);
	unlinked = n->unlinked;
	pthread_mutex_unlock(&n->lock);
	if (unlinked)
		return -ENOENT;
	if ((int64_t)size > tfs_key__value_max(n, klen))
		return -EFBIG;
	rc = tfs_plog_read_key(pl, tfs_slice_make(kb, klen), &val);
	if (rc == -ENOENT) {
		/* Created and not committed yet: the file is what its writer holds, so
		 * the truncation goes there (as it would to a local file's open fd). */
		struct tfs_key_handle *w;
		pthread_mutex_lock(&n->lock);
		w = size_writer_locked(n, NULL);
		if (!w)
			w = n->writers;
		rc = w ? resize_locked(w, (size_t)size) : -ENOENT;
		if (w && rc == 0) {
			w->onto = false;
			mark_written_locked(m, w);
		}
		pthread_mutex_unlock(&n->lock);
		return rc;
	}
	if (rc < 0)
		return rc;
	if ((size_t)size > val.value_len) {
		nv = calloc(1, (size_t)size);
		if (!nv) {
			tfs_record_copy_release(&val);
			return -ENOMEM;
		}
		if (val.value_len)
			memcpy(nv, val.value, val.value_len);
	}
	rec.key = tfs_slice_make(klen ? kb : empty, klen);
	rec.value = tfs_slice_make(nv ? nv : (val.value_len ? val.value : empty), (size_t)size);
	rc = tfs_plog_append(pl, &rec, 1, false, NULL, NULL);
	if (rc == 0)
		atomic_fetch_add_explicit(&m->stats.commits, 1, memory_order_relaxed);
	free(nv);
	tfs_record_copy_release(&val);
	return rc;
}

static void key_setattr(fuse_req_t req, struct tfs_mount *m, struct tfs_node *n,
                        struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	bool blocked = false;
	int rc = 0;

	if (to_set & FUSE_SET_ATTR_SIZE) {
		struct tfs_key_handle *h = fi && fi->fh ? tfs_key__of(tfs_fh_of(fi)) : NULL;

		if (m->read_only) {
			fuse_reply_err(req, EROFS);
			return;
		}
		if (attr->st_size < 0) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		if (h && h->writer && h->base.node == n) {
			pthread_mutex_lock(&n->lock);
			rc = resize_locked(h, (size_t)attr->st_size);
			if (rc == 0) {
				h->onto = false;        /* a whole value now: last writer wins */
				/* SETATTR carries no lock owner: the thread stands for it. */
				note_editor_locked(h, 0, fuse_req_ctx(req)->pid);
				mark_written_locked(m, h);
			}
			pthread_mutex_unlock(&n->lock);
		} else {
			pthread_mutex_lock(&n->lock);
			rc = shares_page_cache_locked(n) ? -ESTALE : 0;
			if (rc == 0) {
				/* until its reply has gone out: the kernel holds
				 * i_size unstable meanwhile, dropping a new reader's
				 * GETATTR, and writes the reply's size as it comes */
				n->cache_blocked++;
				n->attrs_off = TFS_ATTRS_MIXED;
				blocked = true;
			}
			pthread_mutex_unlock(&n->lock);
			/* truncate(2) looks the path up again after ESTALE */
			rc = rc < 0 ? retire_for_writer(m, n) :
			     truncate_path(m, n, attr->st_size);
		}
	}
	/* chmod/chown/utimens: accepted without effect (a key has its partition's
	 * mode), so cp -a and tar into the mount do not fail. */
	if (rc < 0)
		tfs_reply_err(req, rc, "key");
	else
		tfs_reply_attr(req, m, n, fi);
	if (blocked)
		cache_unblock(n);
}

const struct tfs_node_ops tfs_kind_key = {
	.name = "key",
	.volatile_attrs = true,
	.stat = tfs_key__stat,
	.setattr = key_setattr,
	.open = key_open,
	.read = key_read,
	.write = key_write,
	.flush = key_flush,
	.release = key_release,
	.fsync = key_fsync,
};
