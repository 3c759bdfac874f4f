/* io_uring.c - the liburing backend: reads and fsyncs go through a ring.
 *
 * One small ring per calling thread, created on the thread's first request and
 * found through a pthread key: rings are not thread-safe, and a ring per thread
 * needs no lock on the hot path. Short reads are finished with further
 * submissions.
 *
 * Buffered writes do not go through the ring: ext4 cannot do them without
 * blocking, so io_uring hands every one to an io-wq worker thread, which cost two
 * context switches per append and made single-record appends 3.6x slower than
 * pwritev (bench/bench_append, --io uring vs --io sync). io.c issues them with
 * pwritev from the caller's thread and sends the fdatasync that makes them
 * durable through the ring.
 */
#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io_internal.h"

#define RING_ENTRIES 8     /* requests in flight per thread: one read or fsync, or the
                            * fsyncs of one tfs_io_fsync_all chunk */

struct tfs__ring {
	struct io_uring ring;
	pid_t pid;                    /* a forked child must not share its parent's ring */
	struct tfs_io *owner;
	struct tfs__ring *next;
};

int tfs__uring_probe(void)
{
	struct io_uring ring;
	struct io_uring_probe *probe;
	int rc = io_uring_queue_init(RING_ENTRIES, &ring, 0);

	if (rc < 0)
		return rc;
	probe = io_uring_get_probe_ring(&ring);
	if (!probe) {
		rc = -ENOSYS;
	} else {
		if (!io_uring_opcode_supported(probe, IORING_OP_READ) ||
		    !io_uring_opcode_supported(probe, IORING_OP_WRITEV) ||
		    !io_uring_opcode_supported(probe, IORING_OP_FSYNC))
			rc = -ENOSYS;
		io_uring_free_probe(probe);
	}
	io_uring_queue_exit(&ring);
	return rc;
}

static void ring_unlink(struct tfs_io *io, struct tfs__ring *r)
{
	struct tfs__ring **pp;

	pthread_mutex_lock(&io->rings_lock);
	for (pp = &io->rings; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&io->rings_lock);
}

void tfs__uring_thread_exit(void *arg)
{
	struct tfs__ring *r = arg;

	ring_unlink(r->owner, r);
	io_uring_queue_exit(&r->ring);
	free(r);
}

void tfs__uring_destroy_all(struct tfs_io *io)
{
	struct tfs__ring *r = io->rings, *next;

	for (; r; r = next) {
		next = r->next;
		io_uring_queue_exit(&r->ring);
		free(r);
	}
	io->rings = NULL;
}

static struct tfs__ring *thread_ring(struct tfs_io *io, int *err)
{
	struct tfs__ring *r = pthread_getspecific(io->ring_key);
	int rc;

	if (r && r->pid == getpid())
		return r;
	if (r) {
		/* Inherited across fork(): the rings' memory is shared with the parent.
		 * Drop this process's mapping and start a ring of its own. */
		ring_unlink(io, r);
		io_uring_queue_exit(&r->ring);
		free(r);
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		*err = -ENOMEM;
		return NULL;
	}
	rc = io_uring_queue_init(RING_ENTRIES, &r->ring, 0);
	if (rc < 0) {
		free(r);
		*err = rc;
		return NULL;
	}
	r->owner = io;
	r->pid = getpid();
	pthread_mutex_lock(&io->rings_lock);
	r->next = io->rings;
	io->rings = r;
	pthread_mutex_unlock(&io->rings_lock);
	pthread_setspecific(io->ring_key, r);
	return r;
}

/* Drops the calling thread's ring, whose queue may hold requests it could not
 * submit: the thread's next request makes a new one. Nothing submitted is in
 * flight (the caller reaped it). */
static void ring_drop(struct tfs_io *io, struct tfs__ring *r)
{
	pthread_setspecific(io->ring_key, NULL);
	tfs__uring_thread_exit(r);
}

#define NOT_DONE INT_MIN   /* res[] of a request the ring did not complete */

/* Submits the n requests queued (user_data 0..n-1) and reaps their
 * completions into res[], without waiting for more than were submitted.
 * Returns 0 when all n completed; otherwise a negative errno, the requests not
 * completed left NOT_DONE, and the ring must be dropped (ring_drop): what it
 * did not submit would go with the next call. */
static int submit_reap(struct io_uring *ring, int n, int *res)
{
	int submitted, rc = 0, i;

	for (i = 0; i < n; i++)
		res[i] = NOT_DONE;
	do {
		submitted = io_uring_submit(ring);
	} while (submitted == -EINTR);
	if (submitted < 0)
		return submitted;
	for (i = 0; i < submitted; i++) {
		struct io_uring_cqe *cqe;
		do {
			rc = io_uring_wait_cqe(ring, &cqe);
		} while (rc == -EINTR);
		if (rc < 0)
			return rc;
		/* user_data carries the request's index so links reaped in any order land right */
		if (cqe->user_data < (uint64_t)n)
			res[cqe->user_data] = cqe->res;
		else
			rc = -EIO;                  /* not ours: the ring is out of step */
		io_uring_cqe_seen(ring, cqe);
	}
	return rc < 0 ? rc : submitted == n ? 0 : -EIO;
}

ssize_t tfs__uring_read(struct tfs_io *io, int fd, void *buf, size_t len, uint64_t off)
{
	int err = 0, res = 0, rc;
	size_t done = 0;
	struct tfs__ring *r = thread_ring(io, &err);

	if (!r)
		return err;
	while (done < len) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
		unsigned chunk = len - done > (1u << 30) ? (1u << 30) : (unsigned)(len - done);

		if (!sqe) {
			ring_drop(io, r);
			return -EAGAIN;
		}
		io_uring_prep_read(sqe, fd, (char *)buf + done, chunk, off + done);
		sqe->user_data = 0;
		rc = submit_reap(&r->ring, 1, &res);
		if (rc < 0) {
			ring_drop(io, r);
			return rc;
		}
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res < 0)
			return res;
		if (res == 0)
			break;
		done += (size_t)res;
	}
	return (ssize_t)done;
}

int tfs__uring_fsync(struct tfs_io *io, int fd, bool datasync)
{
	int err = 0, rc, res = 0;
	struct tfs__ring *r = thread_ring(io, &err);
	struct io_uring_sqe *sqe;

	if (!r)
		return err;
	sqe = io_uring_get_sqe(&r->ring);
	if (!sqe) {
		ring_drop(io, r);
		return tfs__sync_fsync(fd, datasync);
	}
	io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
	sqe->user_data = 0;
	rc = submit_reap(&r->ring, 1, &res);
	if (rc < 0) {
		ring_drop(io, r);
		if (res == NOT_DONE)
			return tfs__sync_fsync(fd, datasync);   /* it never reached the disk */
	}
	return res < 0 ? res : 0;
}

void tfs__uring_fsync_all(struct tfs_io *io, struct tfs_io_fsync_req *reqs, int n)
{
	int err = 0, res[RING_ENTRIES], idx[RING_ENTRIES];
	struct tfs__ring *r = thread_ring(io, &err);

	for (int i = 0; i < n;) {
		int k = 0, rc = 0;

		/* a chunk of at most RING_ENTRIES requests, submitted at once */
		for (; i < n && k < RING_ENTRIES; i++) {
			if (reqs[i].result != 1)
				continue;
			if (!r) {
				reqs[i].result = err;
				continue;
			}
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
			if (!sqe) {
				reqs[i].result = tfs__sync_fsync(reqs[i].fd, reqs[i].datasync);
				continue;
			}
			io_uring_prep_fsync(sqe, reqs[i].fd,
			                    reqs[i].datasync ? IORING_FSYNC_DATASYNC : 0);
			sqe->user_data = (uint64_t)k;
			idx[k++] = i;
		}
		if (k > 0)
			rc = submit_reap(&r->ring, k, res);
		if (rc < 0) {
			/* the ring took them only in part: what it did not complete is
			 * done here, one at a time, and the thread gets a new ring */
			ring_drop(io, r);
			r = thread_ring(io, &err);
		}
		for (int j = 0; j < k; j++)
			reqs[idx[j]].result = res[j] == NOT_DONE
			                      ? tfs__sync_fsync(reqs[idx[j]].fd, reqs[idx[j]].datasync)
			                      : res[j] < 0 ? res[j] : 0;
	}
}
