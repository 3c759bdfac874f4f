/* service.h - telling a service manager how the daemon is doing (sd_notify(3)).
 *
 * Under systemd with Type=notify (systemd/topicfs@.service), the daemon says
 * STATUS= while it opens the data directory (recovery of a large one takes a while),
 * READY=1 once the mount is live, every topic is open and, with listeners=, the Kafka
 * listener accepts connections (fs/main.c calls it after both; test_systemd.sh's
 * readiness case holds the listener's start and checks), STOPPING=1 when it begins
 * to unmount, and WATCHDOG=1 every half of the unit's WatchdogSec= for as long as
 * the engine answers (a ping that waits on a wedged engine stops, so systemd
 * restarts the service). Outside systemd ($NOTIFY_SOCKET unset) every call does
 * nothing and costs a getenv.
 *
 * Owns: the watchdog thread, once started.
 * Threads: tfs_service_status/ready/stopping from any thread; start/stop from
 * main only.
 * Errors: none reach the caller: the service manager is told, or not; a failure is
 * logged once.
 */
#ifndef TFS_FS_SERVICE_H
#define TFS_FS_SERVICE_H

#include <stddef.h>

struct tfs_engine;
struct tfs_service;

/* STATUS=<text>, printf-style. */
void tfs_service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* READY=1 with a STATUS= line. */
void tfs_service_ready(const char *data_dir, const char *mountpoint);
/* STOPPING=1. */
void tfs_service_stopping(void);

/* Starts the watchdog thread if the manager asked for one ($WATCHDOG_USEC for this
 * pid); *out stays NULL otherwise. engine is borrowed, valid until stop. */
int tfs_service_watchdog_start(struct tfs_engine *engine, struct tfs_service **out);
/* Stops and frees it. NULL ok. */
void tfs_service_watchdog_stop(struct tfs_service *s);

/* An engine open progress callback (tfs_engine_config.progress): STATUS= lines. */
void tfs_service_open_progress(void *arg, size_t done, size_t total);

#endif
