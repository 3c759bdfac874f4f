/* main.c - the topicfs daemon: `topicfs [-o OPTIONS] DATA_DIR MOUNTPOINT`.
 *
 * Order of events:
 *   parse options (ours in opts.c, libfuse's by fuse_parse_cmdline and
 *   fuse_parse_conn_info_opts; a bad value exits 1 before anything happens)
 *   -> unless -f/-d: fork; the parent waits on a pipe for the child's verdict and
 *      exits 0 once the mount exists, or 1 with the child's error on the terminal
 *      (the engine starts threads, so it must be opened after the fork)
 *   -> open the engine (tfs_mount_create) -> fuse_session_new -> mount
 *   -> start the notifier -> with listeners=..., start the Kafka listener (a
 *      failure fails the mount) -> report success, detach stdio, log to syslog
 *   -> tell systemd READY=1, start the watchdog if the unit asked for one (service.c)
 *   -> the multi-threaded loop until umount, SIGTERM, SIGINT or SIGHUP
 *   -> STOPPING=1, stop the listener, unmount, stop the notifier, destroy the session, close the
 *      engine (which flushes every partition).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "fs/fuse_ll.h"
#include "fs/kafka_door.h"
#include "fs/mount.h"
#include "fs/ops.h"
#include "fs/opts.h"
#include "fs/service.h"
#include "io/log.h"
#include "tfs_version.h"

/* DATA_DIR as an absolute path (the daemon chdirs to /); resolved if it exists. */
static char *absolute_path(const char *path)
{
	char *res = realpath(path, NULL), cwd[PATH_MAX];
	size_t need;

	if (res)
		return res;
	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	need = strlen(cwd) + 1 + strlen(path) + 1;
	res = malloc(need);
	if (res)
		snprintf(res, need, "%s/%s", cwd, path);
	return res;
}

/* True if path is dir or below it (the daemon must never touch its own mount). */
static bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strncmp(path, dir, n) != 0)
		return false;
	return path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/');
}

/* "-ofsname=DATA_DIR,subtype=topicfs", with ',' and '\' escaped for fuse_opt. */
static char *fsname_arg(const char *data_dir)
{
	static const char head[] = "-ofsname=", tail[] = ",subtype=topicfs";
	size_t n = strlen(data_dir), o = 0;
	char *s = malloc(sizeof(head) + 2 * n + sizeof(tail));

	if (!s)
		return NULL;
	memcpy(s, head, sizeof(head) - 1);
	o = sizeof(head) - 1;
	for (size_t i = 0; i < n; i++) {
		if (data_dir[i] == ',' || data_dir[i] == '\\')
			s[o++] = '\\';
		s[o++] = data_dir[i];
	}
	memcpy(s + o, tail, sizeof(tail));
	return s;
}

/* libfuse rejects unknown options only in fuse_session_new; try a throwaway
 * session on a copy of the arguments first, so that a typo fails before the data
 * directory is opened (and before the fork, on the terminal). */
static bool args_acceptable(const struct fuse_args *args)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	bool ok = true;

	for (int i = 0; i < args->argc && ok; i++)
		ok = fuse_opt_add_arg(&copy, args->argv[i]) == 0;
	if (ok) {
		se = fuse_session_new(&copy, &tfs_fuse_ops, sizeof(tfs_fuse_ops), NULL);
		ok = se != NULL;
		if (se)
			fuse_session_destroy(se);
	}
	fuse_opt_free_args(&copy);
	return ok;
}

static void tell_parent(int *fd, unsigned char status)
{
	if (*fd >= 0) {
		ssize_t w = write(*fd, &status, 1);
		(void)w;
		close(*fd);
		*fd = -1;
	}
}

/* Forks; the parent waits for the child's verdict and never returns. */
static int daemonize_early(int *report_fd)
{
	int p[2];
	pid_t pid;

	if (pipe(p) < 0) {
		perror("topicfs: pipe");
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		perror("topicfs: fork");
		return -1;
	}
	if (pid > 0) {
		unsigned char status = 1;
		close(p[1]);
		if (read(p[0], &status, 1) != 1)
			status = 1;                 /* the child died before mounting */
		_exit(status);
	}
	close(p[0]);
	*report_fd = p[1];
	if (setsid() < 0)
		perror("topicfs: setsid");
	return 0;
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);

	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts c;
	struct fuse_conn_info_opts *conn_opts = NULL;
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	struct tfs_mount *m = NULL;
	struct tfs_service *watchdog = NULL;
	struct tfs_kafka *kafka = NULL;
	struct tfs_opts o;
	char *abs_dir = NULL, *abs_mnt = NULL, *fsn = NULL;
	int report_fd = -1, ret = 1, rc;
	bool mounted = false, handlers = false;

	memset(&c, 0, sizeof(c));
	tfs_opts_init(&o);
	if (tfs_opts_parse(&args, &o) < 0)
		goto out;
	if (fuse_parse_cmdline(&args, &c) != 0)
		goto out;
	if (c.show_help) {
		tfs_opts_usage(argv[0]);
		fuse_cmdline_help();
		fuse_lowlevel_help();
		ret = 0;
		goto out;
	}
	if (c.show_version) {
		printf("topicfs %s (libfuse %s)\n", TFS_VERSION, fuse_pkgversion());
		fflush(stdout);                 /* before fusermount3's own line */
		fuse_lowlevel_version();
		ret = 0;
		goto out;
	}
	if (!o.data_dir || !c.mountpoint) {
		fprintf(stderr, "usage: %s [-o options] DATA_DIR MOUNTPOINT  (--help for options)\n",
		        argv[0]);
		goto out;
	}
	conn_opts = fuse_parse_conn_info_opts(&args);
	if (!conn_opts)
		goto out;
	abs_dir = absolute_path(o.data_dir);
	abs_mnt = realpath(c.mountpoint, NULL);
	if (!abs_dir || !abs_mnt) {
		fprintf(stderr, "topicfs: cannot resolve %s: %s\n", abs_dir ? c.mountpoint : o.data_dir,
		        strerror(errno));
		goto out;
	}
	if (path_within(abs_dir, abs_mnt)) {
		fprintf(stderr, "topicfs: data directory %s is inside the mountpoint %s: the daemon "
		        "would wait on itself\n", abs_dir, abs_mnt);
		goto out;
	}
	fsn = fsname_arg(abs_dir);
	if (!fsn || fuse_opt_add_arg(&args, fsn) != 0)
		goto out;
	if (!args_acceptable(&args))
		goto out;
	if (o.debug || c.debug)
		tfs_log_set_level(TFS_LOG_DEBUG);

	if (!c.foreground && daemonize_early(&report_fd) < 0)
		goto out;
	tfs_log_detect_journal();
	o.engine.progress = tfs_service_open_progress;
	tfs_service_status("opening the data directory %s", abs_dir);
	rc = tfs_mount_create(&o, abs_dir, &m);
	if (rc < 0) {
		fprintf(stderr, "topicfs: cannot open data directory %s: %s%s\n", abs_dir,
		        tfs_strerror(rc), rc == -ENOENT ? " (create it, or mount with "
		        "-o create_data_dir)" : "");
		goto out;
	}
	m->conn_opts = conn_opts;
	se = fuse_session_new(&args, &tfs_fuse_ops, sizeof(tfs_fuse_ops), m);
	if (!se)
		goto out;                       /* libfuse said why (unknown option...) */
	if (fuse_set_signal_handlers(se) != 0)
		goto out;
	handlers = true;
	if (fuse_session_mount(se, c.mountpoint) != 0)
		goto out;
	mounted = true;
	rc = tfs_mount_start_notifier(m, se);
	if (rc < 0) {
		fprintf(stderr, "topicfs: cannot start the notifier thread: %s\n", strerror(-rc));
		goto out;
	}
	if (tfs_kafka_config_enabled(&o.kafka)) {
		struct tfs_kafka_hooks hooks;
		tfs_kafka_door_hooks(m, &hooks);
		rc = tfs_kafka_start(m->engine, &o.kafka, &hooks, &kafka);
		if (rc < 0) {
			fprintf(stderr, "topicfs: cannot start the Kafka listener on %s:%u: %s\n",
			        o.kafka.listener_host, o.kafka.listener_port, tfs_strerror(rc));
			goto out;
		}
		m->kafka = kafka;
	}
	if (o.fault_spec) {
		/* Counted from here: operations of the recovery at open are not. */
		rc = tfs_io_set_fault(tfs_engine_io(m->engine), o.fault_spec);
		if (rc < 0) {
			fprintf(stderr, "topicfs: cannot arm fault=%s: %s\n", o.fault_spec,
			        tfs_strerror(rc));
			goto out;
		}
		tfs_log_warn("fs", "fault injection armed: %s", o.fault_spec);
	}
	tfs_log_info("fs", "mounted %s on %s%s", abs_dir, abs_mnt, o.read_only ? " read-only" : "");
	if (o.no_default_permissions)
		tfs_log_warn("fs", "%s: no_default_permissions: the kernel checks no owner or mode; "
		             "whoever reaches the mount may write, delete and reconfigure anything",
		             abs_mnt);
	if (report_fd >= 0) {
		tell_parent(&report_fd, 0);
		if (chdir("/") != 0)
			tfs_log_warn("fs", "cannot chdir to /: %s", strerror(errno));
		tfs_log_set_fd(-1, 1);
		detach_stdio();
	}

	tfs_service_ready(abs_dir, abs_mnt);
	rc = tfs_service_watchdog_start(m->engine, &watchdog);
	if (rc < 0)
		tfs_log_warn("fs", "cannot start the watchdog thread: %s", strerror(-rc));

	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out;
	if (c.max_threads)
		fuse_loop_cfg_set_max_threads(lc, c.max_threads);
	if (c.max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, c.max_idle_threads);
	fuse_loop_cfg_set_clone_fd(lc, (unsigned)c.clone_fd);
	rc = c.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, lc);
	/* > 0: the signal that ended it (SIGTERM/SIGINT: a clean shutdown). */
	ret = rc < 0 ? 1 : 0;
	if (rc < 0)
		tfs_log_error("fs", "session loop on %s failed: %s", abs_mnt, strerror(-rc));
out:
	if (mounted)
		tfs_service_stopping();
	tfs_service_watchdog_stop(watchdog);
	if (m)
		m->kafka = NULL;
	tfs_kafka_stop(kafka);                  /* its hooks use the notifier */
	if (mounted)
		fuse_session_unmount(se);
	if (m)
		tfs_mount_stop_notifier(m);
	if (handlers)
		fuse_remove_signal_handlers(se);
	if (se)
		fuse_session_destroy(se);
	if (m) {
		tfs_mount_destroy(m);           /* closes the engine: flushes everything */
		if (mounted)
			tfs_log_info("fs", "unmounted %s, data directory closed", abs_mnt);
	}
	tell_parent(&report_fd, 1);
	fuse_loop_cfg_destroy(lc);
	free(conn_opts);
	free(fsn);
	free(abs_dir);
	free(abs_mnt);
	free(c.mountpoint);
	fuse_opt_free_args(&args);
	tfs_opts_release(&o);
	return ret;
}
