/* log.h - the process's log lines.
 *
 * Lines read: "<level> <module>: <what failed> on <object>: <why>", lowercase,
 * logged once where the failure is handled. The sink is process-wide (set once at
 * start by the daemon or a tool, before threads start); default stderr.
 * Threads: tfs_log may be called from any thread; lines are written whole.
 */
#ifndef TFS_LOG_H
#define TFS_LOG_H

enum tfs_log_level { TFS_LOG_ERROR = 0, TFS_LOG_WARN = 1, TFS_LOG_INFO = 2, TFS_LOG_DEBUG = 3 };

/* Lines above level are dropped. */
void tfs_log_set_level(enum tfs_log_level level);
/* Sends lines to fd (default 2). With syslog != 0 they go to syslog(3) instead. */
void tfs_log_set_fd(int fd, int syslog);
/* If fd 2 is systemd's journal stream ($JOURNAL_STREAM names its device and inode),
 * lines written there carry their priority as sd-daemon(3)'s "<N>" prefix and no
 * timestamp (the journal stamps them). Call once at start, before threads. */
void tfs_log_detect_journal(void);

void tfs_log(enum tfs_log_level level, const char *module, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define tfs_log_error(mod, ...) tfs_log(TFS_LOG_ERROR, mod, __VA_ARGS__)
#define tfs_log_warn(mod, ...) tfs_log(TFS_LOG_WARN, mod, __VA_ARGS__)
#define tfs_log_info(mod, ...) tfs_log(TFS_LOG_INFO, mod, __VA_ARGS__)

#endif
