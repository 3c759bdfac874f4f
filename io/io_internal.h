/* io_internal.h - what io.c shares with its two backends. Not for use outside io/. */
#ifndef TFS_IO_INTERNAL_H
#define TFS_IO_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/io.h"

struct tfs__ring;
struct tfs__unlink_item;

struct tfs_io {
	enum tfs_io_kind kind;          /* URING or SYNC after create */
	pthread_key_t ring_key;         /* the calling thread's ring (uring only) */
	pthread_mutex_t rings_lock;     /* guards rings */
	struct tfs__ring *rings;        /* every live ring, for destroy */
	/* fault injection: set before use (tests, daemon start), read by every op */
	unsigned fault_ops;             /* TFS_IO_OP_* mask; 0 = none */
	uint64_t fault_nth;
	int fault_action;               /* > 0 errno to return; FAULT_CRASH; FAULT_TORN */
	atomic_uint_fast64_t fault_seen;  /* matching ops so far */
	atomic_uint_fast64_t op_count;    /* all mutating ops so far */
	atomic_uint_fast64_t fsync_count; /* of which fsyncs (files and directories) */
	/* tfs_io_unlink_later (unlink_later.c): a FIFO of paths and its thread */
	pthread_mutex_t later_lock;       /* guards the fields below */
	pthread_cond_t later_work;        /* a path was queued, or stop */
	pthread_cond_t later_idle;        /* later_done moved */
	struct tfs__unlink_item *later_head, *later_tail;
	uint64_t later_queued, later_done;
	bool later_stop;
	atomic_bool later_started;        /* set once, under later_lock */
	pid_t later_pid;                  /* the process that started the thread */
	pthread_t later_thread;
};

enum { TFS__FAULT_CRASH = -1, TFS__FAULT_TORN = -2 };

void tfs__unlink_later_init(struct tfs_io *io);
/* Joins the thread after it has emptied the queue. */
void tfs__unlink_later_destroy(struct tfs_io *io);

/* io_uring backend (io_uring.c). probe: 0 if usable. */
int tfs__uring_probe(void);
void tfs__uring_thread_exit(void *ring);
void tfs__uring_destroy_all(struct tfs_io *io);
ssize_t tfs__uring_read(struct tfs_io *io, int fd, void *buf, size_t len, uint64_t off);
int tfs__uring_fsync(struct tfs_io *io, int fd, bool datasync);
/* Issues the requests of reqs whose result is 1 (the others were failed by the
 * fault gate) together and sets their results. */
void tfs__uring_fsync_all(struct tfs_io *io, struct tfs_io_fsync_req *reqs, int n);

/* pread/pwrite backend (io_sync.c), also the fallback for partial progress. */
ssize_t tfs__sync_read(int fd, void *buf, size_t len, uint64_t off);
int tfs__sync_writev(int fd, const struct iovec *iov, int iovcnt, uint64_t off, bool sync);
int tfs__sync_fsync(int fd, bool datasync);

#endif
