/* io_sync.c - the pread/pwrite backend: plain syscalls, retried on EINTR and on
 * short transfers. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "io/io_internal.h"

ssize_t tfs__sync_read(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Drops the first n bytes from an iovec array in place; returns the new count. */
static int iov_advance(struct iovec **iov, int iovcnt, size_t n)
{
	while (iovcnt > 0 && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		iovcnt--;
	}
	if (iovcnt > 0 && n) {
		(*iov)->iov_base = (char *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
	return iovcnt;
}

int tfs__sync_writev(int fd, const struct iovec *iov_in, int iovcnt, uint64_t off, bool sync)
{
	struct iovec local[IOV_MAX];
	struct iovec *iov = local;

	if (iovcnt > IOV_MAX)
		return -EINVAL;
	memcpy(local, iov_in, sizeof(*iov_in) * (size_t)iovcnt);
	iovcnt = iov_advance(&iov, iovcnt, 0);
	while (iovcnt > 0 && iov->iov_len == 0) {   /* nothing to write is not an error */
		iov++;
		iovcnt--;
	}
	while (iovcnt > 0) {
		ssize_t n = pwritev(fd, iov, iovcnt, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		off += (uint64_t)n;
		iovcnt = iov_advance(&iov, iovcnt, (size_t)n);
	}
	return sync ? tfs__sync_fsync(fd, true) : 0;
}

int tfs__sync_fsync(int fd, bool datasync)
{
	int rc = datasync ? fdatasync(fd) : fsync(fd);
	return rc < 0 ? -errno : 0;
}
