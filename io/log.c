/* log.c - see log.h. The sink is set once at start, before threads exist. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "io/log.h"

#define LOG_LINE_MAX 1024

static enum tfs_log_level log_level = TFS_LOG_INFO;
static int log_fd = 2;
static int log_syslog;
static int log_journal;              /* fd 2 is the journal: "<prio>" prefixes */

void tfs_log_set_level(enum tfs_log_level level)
{
	log_level = level;
}

void tfs_log_set_fd(int fd, int use_syslog)
{
	log_fd = fd;
	log_syslog = use_syslog;
}

void tfs_log_detect_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return;
	log_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void tfs_log(enum tfs_log_level level, const char *module, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[LOG_LINE_MAX];
	int n, m;
	va_list ap;

	if (level > log_level)
		return;
	if (log_syslog) {
		n = snprintf(line, sizeof(line), "%s: ", module);
		va_start(ap, fmt);
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		va_end(ap);
		syslog(prio[level], "%s", line);
		return;
	}
	if (log_journal && log_fd == STDERR_FILENO) {
		n = snprintf(line, sizeof(line), "<%d>%s %s: ", prio[level], names[level], module);
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ",
		             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		             tm.tm_sec, ts.tv_nsec / 1000000, names[level], module);
	}
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = m < 0 ? n : (n + m >= (int)sizeof(line) - 1 ? (int)sizeof(line) - 2 : n + m);
	line[n++] = '\n';
	/* one write(2) per line, so concurrent lines never interleave */
	if (write(log_fd, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}
