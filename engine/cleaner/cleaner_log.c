/* cleaner_log.c - DATA_DIR/log-cleaner.log and the I/O throttler.
 *
 * The cleaner log is Kafka's separate log-cleaner.log in spirit: one line per pass
 * (partition, offsets, bytes read and written, records kept and dropped, duration,
 * throughput, and whether the dedupe buffer was too small), one per failure, one
 * per retention run that deleted something. Lines start with an ISO-8601 UTC time.
 * The file is written through io/ at a tracked position (not O_APPEND: io_uring and
 * pwrite would disagree about it) and rotated to log-cleaner.log.1 past
 * LOG_ROTATE_BYTES, so it cannot grow without bound.
 *
 * The throttler is Kafka's (docs/cleaner.md §9): one for all threads; each chunk read
 * and written is counted; once a period of at least CHECK_INTERVAL_MS has passed,
 * if the observed rate is above the desired one the caller sleeps for as long as
 * it takes to bring it down, holding the throttler's lock so every thread waits,
 * and a new period starts. One addition: a period is also checked as soon as it
 * has seen more bytes than CHECK_INTERVAL_MS of the rate allows. Kafka checks only
 * after 300 ms of wall time, so a fast disk can do a whole pass within one period
 * and never be throttled; here a burst runs at most 300 ms of budget ahead.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/cleaner/cleaner_internal.h"
#include "io/log.h"

#define LOG_ROTATE_BYTES (10u << 20)
#define LOG_FILE_MODE 0644
#define LINE_MAX_BYTES 1024
#define CHECK_INTERVAL_MS 300          /* Kafka's Throttler check interval */
#define THROTTLE_POLL_MS 50            /* how often a sleeper looks at its abort flag */
#define MS_PER_S 1000

static int open_log(struct tfs__cleaner_log *l)
{
	int fd = tfs_io_openat(l->io, l->dirfd, TFS_CLEANER_LOG_FILE, O_WRONLY | O_CREAT,
	                       LOG_FILE_MODE);
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	l->fd = fd;
	l->pos = (uint64_t)st.st_size;
	return 0;
}

int tfs__cleaner_log_open(struct tfs__cleaner_log *l, struct tfs_io *io, int dirfd)
{
	int rc;

	pthread_mutex_init(&l->lock, NULL);
	l->io = io;
	l->dirfd = dirfd;
	l->fd = -1;
	l->pos = 0;
	rc = open_log(l);
	if (rc < 0)
		tfs_log_warn("cleaner", "cannot open %s: %s; passes are logged here only",
		             TFS_CLEANER_LOG_FILE, tfs_strerror(rc));
	return 0;
}

void tfs__cleaner_log_close(struct tfs__cleaner_log *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	pthread_mutex_destroy(&l->lock);
}

void tfs__cleaner_log_line(struct tfs__cleaner_log *l, int64_t now_ms, const char *fmt, ...)
{
	char line[LINE_MAX_BYTES];
	time_t secs = (time_t)(now_ms / MS_PER_S);
	struct tm tm;
	va_list ap;
	size_t n;
	int rc;

	gmtime_r(&secs, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03dZ ", (int)(now_ms % MS_PER_S));
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	n = strlen(line);
	if (n == sizeof(line) - 1)
		n--;                  /* truncated: keep room for the newline */
	line[n++] = '\n';
	line[n] = '\0';
	tfs_log_info("cleaner", "%.*s", (int)(n - 1), line);

	pthread_mutex_lock(&l->lock);
	if (l->fd >= 0 && l->pos + n > LOG_ROTATE_BYTES) {
		close(l->fd);
		l->fd = -1;
		rc = tfs_io_renameat(l->io, l->dirfd, TFS_CLEANER_LOG_FILE, l->dirfd,
		                     TFS_CLEANER_LOG_OLD_FILE);
		if (rc == 0)
			rc = open_log(l);
		if (rc < 0)
			tfs_log_warn("cleaner", "cannot rotate %s: %s", TFS_CLEANER_LOG_FILE,
			             tfs_strerror(rc));
	}
	if (l->fd >= 0) {
		rc = tfs_io_write(l->io, l->fd, line, n, l->pos);
		if (rc == 0) {
			l->pos += n;
		} else {
			tfs_log_warn("cleaner", "cannot write %s: %s; no more lines go there",
			             TFS_CLEANER_LOG_FILE, tfs_strerror(rc));
			close(l->fd);
			l->fd = -1;
		}
	}
	pthread_mutex_unlock(&l->lock);
}

/* ---- throttler ---- */

static bool unbounded(double rate)
{
	return !(rate > 0.0) || rate >= DBL_MAX || isinf(rate);
}

void tfs__throttler_init(struct tfs__throttler *t, double rate)
{
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	t->rate = rate;
	t->period_start_ms = tfs_mono_ms();
	t->observed = 0;
	atomic_init(&t->total, 0);
	atomic_init(&t->slept_ms, 0);
	t->stopping = false;
}

void tfs__throttler_release(struct tfs__throttler *t)
{
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->wake);
}

void tfs__throttler_stop(struct tfs__throttler *t, bool stopping)
{
	pthread_mutex_lock(&t->lock);
	t->stopping = stopping;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->lock);
}

void tfs__throttle(struct tfs__throttler *t, int64_t bytes, const atomic_bool *abort)
{
	int64_t now, elapsed;

	if (!t || bytes <= 0)
		return;
	atomic_fetch_add_explicit(&t->total, bytes, memory_order_relaxed);
	if (unbounded(t->rate))
		return;
	pthread_mutex_lock(&t->lock);
	t->observed += bytes;
	now = tfs_mono_ms();
	elapsed = now - t->period_start_ms;
	if ((elapsed >= CHECK_INTERVAL_MS ||
	     (double)t->observed > t->rate * CHECK_INTERVAL_MS / MS_PER_S) && t->observed > 0) {
		if ((double)t->observed * MS_PER_S > t->rate * (double)elapsed) {
			/* sleep until observed / (elapsed + sleep) == rate */
			int64_t sleep_ms = llround((double)t->observed / (t->rate / MS_PER_S)) - elapsed;
			if (sleep_ms > 0) {
				int64_t until = now + sleep_ms, left;
				if (t->on_sleep)
					t->on_sleep(t->on_sleep_arg);
				while (!t->stopping && !(abort && atomic_load(abort)) &&
				       (left = until - tfs_mono_ms()) > 0) {
					struct timespec ts;
					if (left > THROTTLE_POLL_MS)
						left = THROTTLE_POLL_MS;
					clock_gettime(CLOCK_REALTIME, &ts);
					ts.tv_nsec += left * 1000000L;
					while (ts.tv_nsec >= 1000000000L) {
						ts.tv_sec++;
						ts.tv_nsec -= 1000000000L;
					}
					pthread_cond_timedwait(&t->wake, &t->lock, &ts);
				}
				atomic_fetch_add_explicit(&t->slept_ms, tfs_mono_ms() - now,
				                          memory_order_relaxed);
			}
		}
		t->period_start_ms = tfs_mono_ms();
		t->observed = 0;
	}
	pthread_mutex_unlock(&t->lock);
}
