/* service.c - see service.h. libsystemd's sd_notify speaks the protocol (a datagram
 * to $NOTIFY_SOCKET); this file decides what to say and when. */
#include "fs/service.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "engine/engine.h"
#include "io/log.h"

#define STATUS_MAX 256
#define OPEN_PROGRESS_EVERY 64       /* topics between two STATUS= lines at open */
#define OPEN_EXTEND_US (120ull * 1000000) /* each such line earns the start this long */

struct tfs_service {
	struct tfs_engine *engine;       /* borrowed */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;                       /* guarded by lock */
	uint64_t interval_us;            /* half of WatchdogSec= */
};

static void notify(const char *state)
{
	int rc = sd_notify(0, state);

	if (rc < 0)
		tfs_log_warn("fs", "cannot notify the service manager (%.20s...): %s", state,
		             strerror(-rc));
}

void tfs_service_status(const char *fmt, ...)
{
	char line[STATUS_MAX];
	va_list ap;
	int n;

	if (!getenv("NOTIFY_SOCKET"))
		return;
	n = snprintf(line, sizeof(line), "STATUS=");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	notify(line);
}

void tfs_service_ready(const char *data_dir, const char *mountpoint)
{
	char line[STATUS_MAX + 2 * 64];

	if (!getenv("NOTIFY_SOCKET"))
		return;
	snprintf(line, sizeof(line), "READY=1\nSTATUS=serving %s on %s", data_dir, mountpoint);
	notify(line);
}

void tfs_service_stopping(void)
{
	if (getenv("NOTIFY_SOCKET"))
		notify("STOPPING=1\nSTATUS=unmounting, closing the data directory");
}

void tfs_service_open_progress(void *arg, size_t done, size_t total)
{
	char line[STATUS_MAX];

	(void)arg;
	if (!getenv("NOTIFY_SOCKET") || (done % OPEN_PROGRESS_EVERY != 0 && done != total))
		return;
	/* Progress earns more time: the unit's TimeoutStartSec= bounds a stall, not
	 * the recovery of a large data directory. */
	snprintf(line, sizeof(line), "EXTEND_TIMEOUT_USEC=%llu\nSTATUS=opening the data "
	         "directory: %zu of %zu topics", (unsigned long long)OPEN_EXTEND_US, done, total);
	notify(line);
}

/* One ping, if the engine answers: listing the topics takes the engine's registry
 * lock, which every create, delete and lookup also takes. */
static void ping(struct tfs_service *s)
{
	char **names = NULL;
	size_t count = 0;

	if (tfs_engine_topic_names(s->engine, &names, &count) == 0) {
		free(names);
		notify("WATCHDOG=1");
	}
}

static void *watchdog_main(void *arg)
{
	struct tfs_service *s = arg;
	struct timespec at;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		pthread_mutex_unlock(&s->lock);
		ping(s);
		pthread_mutex_lock(&s->lock);
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += (time_t)(s->interval_us / 1000000);
		at.tv_nsec += (long)(s->interval_us % 1000000) * 1000;
		if (at.tv_nsec >= 1000000000L) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000L;
		}
		while (!s->stop && pthread_cond_timedwait(&s->cond, &s->lock, &at) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int tfs_service_watchdog_start(struct tfs_engine *engine, struct tfs_service **out)
{
	struct tfs_service *s;
	pthread_condattr_t ca;
	uint64_t usec = 0;
	int rc;

	*out = NULL;
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->engine = engine;
	s->interval_us = usec / 2;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&s->thread, NULL, watchdog_main, s);
	if (rc != 0) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return -rc;
	}
	tfs_log_info("fs", "watchdog: pinging systemd every %llu ms",
	             (unsigned long long)(s->interval_us / 1000));
	*out = s;
	return 0;
}

void tfs_service_watchdog_stop(struct tfs_service *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
