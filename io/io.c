/* io.c - backend choice, fault injection and the namespace operations.
 *
 * Every mutating operation passes through fault_gate() first. With no fault spec
 * set that is one relaxed counter increment; with one set, the N-th matching
 * operation fails with the spec's errno, or the process exits as if killed right
 * before (crash) or in the middle of (torn) that operation.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

static const struct {
	const char *name;
	unsigned op;
} op_names[] = {
	{ "write", TFS_IO_OP_WRITE }, { "fsync", TFS_IO_OP_FSYNC },
	{ "rename", TFS_IO_OP_RENAME }, { "unlink", TFS_IO_OP_UNLINK },
	{ "truncate", TFS_IO_OP_TRUNCATE }, { "create", TFS_IO_OP_CREATE },
	{ "all", TFS_IO_OP_ALL },
};

static const struct {
	const char *name;
	int err;
} errno_names[] = {
	{ "ENOSPC", ENOSPC }, { "EIO", EIO }, { "EDQUOT", EDQUOT }, { "EROFS", EROFS },
	{ "ENOMEM", ENOMEM }, { "EFBIG", EFBIG }, { "EACCES", EACCES },
};

int tfs_io_create(enum tfs_io_kind kind, struct tfs_io **out)
{
	struct tfs_io *io;
	int rc;

	*out = NULL;
	if (kind == TFS_IO_URING || kind == TFS_IO_AUTO) {
		rc = tfs__uring_probe();
		if (rc < 0 && kind == TFS_IO_URING)
			return rc;
		kind = rc < 0 ? TFS_IO_SYNC : TFS_IO_URING;
	}
	io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->kind = kind;
	pthread_mutex_init(&io->rings_lock, NULL);
	rc = pthread_key_create(&io->ring_key, tfs__uring_thread_exit);
	if (rc != 0) {
		pthread_mutex_destroy(&io->rings_lock);
		free(io);
		return -rc;
	}
	tfs__unlink_later_init(io);
	*out = io;
	return 0;
}

void tfs_io_destroy(struct tfs_io *io)
{
	if (!io)
		return;
	tfs__unlink_later_destroy(io);
	/* Deleting the key first means no thread-exit destructor can run on a ring
	 * that destroy_all is about to free. */
	pthread_key_delete(io->ring_key);
	tfs__uring_destroy_all(io);
	pthread_mutex_destroy(&io->rings_lock);
	free(io);
}

enum tfs_io_kind tfs_io_kind_of(const struct tfs_io *io)
{
	return io->kind;
}

const char *tfs_io_kind_name(enum tfs_io_kind kind)
{
	switch (kind) {
	case TFS_IO_URING: return "uring";
	case TFS_IO_SYNC: return "sync";
	default: return "auto";
	}
}

int tfs_io_kind_parse(const char *s, enum tfs_io_kind *out)
{
	if (!strcmp(s, "auto"))
		*out = TFS_IO_AUTO;
	else if (!strcmp(s, "uring") || !strcmp(s, "io_uring"))
		*out = TFS_IO_URING;
	else if (!strcmp(s, "sync"))
		*out = TFS_IO_SYNC;
	else
		return -EINVAL;
	return 0;
}

enum tfs_io_kind tfs_io_kind_from_env(void)
{
	const char *s = getenv("TFS_IO");
	enum tfs_io_kind k = TFS_IO_AUTO;

	if (s && *s)
		tfs_io_kind_parse(s, &k);
	return k;
}

int tfs_io_set_fault(struct tfs_io *io, const char *spec)
{
	char buf[128], *ops, *nth, *action, *tok, *save = NULL, *end;
	unsigned mask = 0;
	unsigned long long n;
	int act = 0;

	if (!spec || !*spec) {
		io->fault_ops = 0;
		return 0;
	}
	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	ops = buf;
	nth = strchr(ops, ':');
	if (!nth)
		return -EINVAL;
	*nth++ = '\0';
	action = strchr(nth, ':');
	if (!action)
		return -EINVAL;
	*action++ = '\0';
	for (tok = strtok_r(ops, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
		size_t i;
		for (i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++)
			if (!strcmp(tok, op_names[i].name))
				break;
		if (i == sizeof(op_names) / sizeof(op_names[0]))
			return -EINVAL;
		mask |= op_names[i].op;
	}
	errno = 0;
	n = strtoull(nth, &end, 10);
	if (errno || *end || n == 0 || !mask)
		return -EINVAL;
	if (!strcmp(action, "crash")) {
		act = TFS__FAULT_CRASH;
	} else if (!strcmp(action, "torn")) {
		act = TFS__FAULT_TORN;
	} else {
		size_t i;
		for (i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
			if (!strcmp(action, errno_names[i].name))
				act = errno_names[i].err;
		if (!act)
			return -EINVAL;
	}
	atomic_store(&io->fault_seen, 0);
	io->fault_nth = n;
	io->fault_action = act;
	io->fault_ops = mask;
	return 0;
}

uint64_t tfs_io_op_count(const struct tfs_io *io)
{
	return atomic_load_explicit(&((struct tfs_io *)io)->op_count, memory_order_relaxed);
}

uint64_t tfs_io_fsync_count(const struct tfs_io *io)
{
	return atomic_load_explicit(&((struct tfs_io *)io)->fsync_count, memory_order_relaxed);
}

/* Returns 0 to go on, a negative errno to fail the operation, or TFS__FAULT_TORN
 * for a write that must do half its bytes and then crash. Crashes do not return. */
static int fault_gate(struct tfs_io *io, unsigned op)
{
	uint64_t seen;

	atomic_fetch_add_explicit(&io->op_count, 1, memory_order_relaxed);
	if (op == TFS_IO_OP_FSYNC)
		atomic_fetch_add_explicit(&io->fsync_count, 1, memory_order_relaxed);
	if (!(io->fault_ops & op))
		return 0;
	seen = atomic_fetch_add(&io->fault_seen, 1) + 1;
	if (seen < io->fault_nth)
		return 0;
	if (io->fault_action > 0)
		return -io->fault_action;
	if (seen > io->fault_nth)
		return 0;   /* another thread is already on its way out */
	if (io->fault_action == TFS__FAULT_TORN && op == TFS_IO_OP_WRITE)
		return TFS__FAULT_TORN;
	_exit(TFS_IO_CRASH_STATUS);
}

ssize_t tfs_io_read(struct tfs_io *io, int fd, void *buf, size_t len, uint64_t off)
{
	if (io->kind == TFS_IO_URING) {
		/* Bytes already in the page cache are copied at once with a non-blocking
		 * preadv2; only the rest goes through the ring. A buffered read the ring
		 * cannot finish inline is handed to an io-wq worker thread, which cost
		 * cp -r of a partition 30% of the daemon's time (bench/fs.sh). */
		struct iovec iov = { buf, len };
		ssize_t n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);
		ssize_t rest;

		if (n < 0 && errno == EOPNOTSUPP)
			/* No non-blocking reads on this filesystem (tmpfs here): the ring
			 * would only pass the read to a worker thread while we wait. */
			return tfs__sync_read(fd, buf, len, off);
		if (n < 0)
			n = 0;   /* EAGAIN: the ring does it all */
		if ((size_t)n == len)
			return n;
		rest = tfs__uring_read(io, fd, (char *)buf + n, len - (size_t)n, off + (uint64_t)n);
		return rest < 0 ? rest : n + rest;
	}
	return tfs__sync_read(fd, buf, len, off);
}

static void torn_write(int fd, const struct iovec *iov, int iovcnt, uint64_t off)
{
	size_t total = 0, half;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	half = total / 2;
	for (int i = 0; i < iovcnt && half; i++) {
		size_t n = iov[i].iov_len < half ? iov[i].iov_len : half;
		if (pwrite(fd, iov[i].iov_base, n, (off_t)off) != (ssize_t)n)
			break;
		off += n;
		half -= n;
	}
	_exit(TFS_IO_CRASH_STATUS);
}

int tfs_io_writev(struct tfs_io *io, int fd, const struct iovec *iov, int iovcnt,
                  uint64_t off, bool sync)
{
	int rc = fault_gate(io, TFS_IO_OP_WRITE);

	if (rc == TFS__FAULT_TORN)
		torn_write(fd, iov, iovcnt, off);
	if (rc < 0)
		return rc;
	/* Buffered writes are pwritev on both backends (see io_uring.c). */
	rc = tfs__sync_writev(fd, iov, iovcnt, off, false);
	if (rc < 0 || !sync)
		return rc;
	rc = fault_gate(io, TFS_IO_OP_FSYNC);
	if (rc < 0)
		return rc;
	if (io->kind == TFS_IO_URING)
		return tfs__uring_fsync(io, fd, true);
	return tfs__sync_fsync(fd, true);
}

int tfs_io_write(struct tfs_io *io, int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { (void *)buf, len };
	return tfs_io_writev(io, fd, &iov, 1, off, false);
}

int tfs_io_fsync(struct tfs_io *io, int fd, bool datasync)
{
	int rc = fault_gate(io, TFS_IO_OP_FSYNC);

	if (rc < 0)
		return rc;
	if (io->kind == TFS_IO_URING)
		return tfs__uring_fsync(io, fd, datasync);
	return tfs__sync_fsync(fd, datasync);
}

int tfs_io_fsync_admit(struct tfs_io *io)
{
	return fault_gate(io, TFS_IO_OP_FSYNC);
}

int tfs_io_fsync_admitted(int fd, bool datasync)
{
	return tfs__sync_fsync(fd, datasync);
}

int tfs_io_fsync_all(struct tfs_io *io, struct tfs_io_fsync_req *reqs, int n)
{
	int rc = 0, gated = 0;

	/* result 1 marks a request the gate let through, still to be issued */
	for (int i = 0; i < n; i++) {
		reqs[i].result = gated < 0 ? gated : fault_gate(io, TFS_IO_OP_FSYNC);
		if (reqs[i].result < 0)
			gated = reqs[i].result;
		else
			reqs[i].result = 1;
	}
	if (io->kind == TFS_IO_URING) {
		tfs__uring_fsync_all(io, reqs, n);
	} else {
		for (int i = 0; i < n; i++)
			if (reqs[i].result == 1)
				reqs[i].result = tfs__sync_fsync(reqs[i].fd, reqs[i].datasync);
	}
	for (int i = 0; i < n && rc == 0; i++)
		rc = reqs[i].result;
	return rc;
}

int tfs_io_openat(struct tfs_io *io, int dirfd, const char *name, int flags, mode_t mode)
{
	int fd;

	if (flags & O_CREAT) {
		int rc = fault_gate(io, TFS_IO_OP_CREATE);
		if (rc < 0)
			return rc;
	}
	fd = openat(dirfd, name, flags | O_CLOEXEC, mode);
	return fd < 0 ? -errno : fd;
}

int tfs_io_renameat(struct tfs_io *io, int olddir, const char *oldname, int newdir,
                    const char *newname)
{
	int rc = fault_gate(io, TFS_IO_OP_RENAME);

	if (rc < 0)
		return rc;
	return renameat(olddir, oldname, newdir, newname) < 0 ? -errno : 0;
}

int tfs_io_unlinkat(struct tfs_io *io, int dirfd, const char *name, int flags)
{
	int rc = fault_gate(io, TFS_IO_OP_UNLINK);

	if (rc < 0)
		return rc;
	return unlinkat(dirfd, name, flags) < 0 ? -errno : 0;
}

int tfs_io_ftruncate(struct tfs_io *io, int fd, uint64_t len)
{
	int rc = fault_gate(io, TFS_IO_OP_TRUNCATE);

	if (rc < 0)
		return rc;
	return ftruncate(fd, (off_t)len) < 0 ? -errno : 0;
}

int tfs_io_mkdirat(struct tfs_io *io, int dirfd, const char *name, mode_t mode)
{
	int rc = fault_gate(io, TFS_IO_OP_CREATE);

	if (rc < 0)
		return rc;
	return mkdirat(dirfd, name, mode) < 0 ? -errno : 0;
}

int tfs_io_fsync_dir(struct tfs_io *io, int dirfd)
{
	int rc = fault_gate(io, TFS_IO_OP_FSYNC);

	if (rc < 0)
		return rc;
	return fsync(dirfd) < 0 ? -errno : 0;
}
