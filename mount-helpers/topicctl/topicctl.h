/* topicctl.h - what the files of topicctl share.
 *
 * Files, one per concept:
 *   main.c      the command table; messages, options, numbers, bytes, JSON and
 *               the progress bar
 *   mount.c     a path inside a mount (root, topic, partition), the mount's data
 *               directory, its topics and partitions, the user.topicfs.* attributes
 *   topic.c     create, describe, config, delete (through a mount)
 *   status.c    status, clean, roll (through a mount)
 *   dump.c      dump (segment and index files, read-only)
 *   verify.c    verify (a data or partition directory, read-only)
 *   estimate.c  estimate (segment files, read-only; MOUNT/TOPIC or DATA_DIR TOPIC)
 *   repair.c    repair (truncates a damaged log; unmounted DATA_DIR only)
 *   follow.c    follow (bootstrap then follow a topic, through a mount)
 *   groups.c    groups (consumer groups' positions and lag, through a mount)
 *   erase.c     erase (a key's tombstone judged against every group's lag)
 *
 * Conventions: every command is `int cmd_NAME(int argc, char **argv)` with argv[0]
 * the command's name, returns an EXIT_* status, parses its options with next_opt
 * and answers --help with show_help. Messages go to stderr through complain (an
 * operation failed: exit 1) or usage_error (exit 2), prefixed "topicctl COMMAND: ".
 * One thread; no state is shared between files but what main sets before the
 * command runs.
 */
#ifndef TOPICCTL_H
#define TOPICCTL_H

#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define EXIT_OK 0
#define EXIT_PROBLEM 1
#define EXIT_USAGE 2

#define EXIT_STATUS_HELP \
	"Exit status: 0 success; 1 problems found or the operation failed; 2 usage error.\n"

#define XATTR_PREFIX "user.topicfs."
#define XATTR_VALUE_CAP 4096
#define TOPIC_CAP 256
#define JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)
#define JSON_LINE_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* ---- the commands (each in the file of its concept) --------------------------- */

int cmd_create(int argc, char **argv);
int cmd_describe(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_delete(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_clean(int argc, char **argv);
int cmd_roll(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_follow(int argc, char **argv);
int cmd_groups(int argc, char **argv);
int cmd_erase(int argc, char **argv);

extern const char create_help[], describe_help[], config_help[], delete_help[];
extern const char status_help[], clean_help[], roll_help[];
extern const char dump_help[], verify_help[], estimate_help[], repair_help[];
extern const char follow_help[], groups_help[], erase_help[];

/* ---- main.c: messages, options, numbers, JSON ----------------------------------- */

/* "topicctl COMMAND: MESSAGE" on stderr (stdout flushed first). */
void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, then "Try '... --help'."; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* getopt_long with our own messages; returns the option, -1 at the end, or '?'
 * after printing a usage error (the caller returns EXIT_USAGE). */
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts);
/* Prints the running command's help on stdout; returns EXIT_OK. */
int show_help(void);

/* A whole base-10 integer in [lo, hi]. */
bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* "123 B", "4.0 KiB", "12.3 MiB" into buf; returns buf. */
const char *fmt_bytes(char *buf, size_t cap, double n);
int64_t mono_ms(void);
/* Prints o, pretty, with a newline. o stays the caller's. */
void json_print(struct json_object *o);
/* A new JSON string, or NULL (JSON null) for NULL. */
struct json_object *json_str_or_null(const char *s);

/* ---- main.c: the progress bar (stderr, only when it is a terminal) -------------- */

struct progress {
	bool on;
	bool shown;
	int64_t last_ms;
	const char *label;
};

void progress_init(struct progress *p, const char *label);
/* Erases the bar, before other output. p may be NULL. */
void progress_clear(struct progress *p);
/* Redraws at most every 100 ms. p may be NULL. */
void progress_show(struct progress *p, int64_t done, int64_t total);

/* ---- mount.c: mounts ---------------------------------------------------------------- */

struct mpath {
	char root[PATH_MAX];           /* the mount point */
	char data_dir[PATH_MAX];       /* its data directory, "" if unknown */
	char topic[TOPIC_CAP];         /* "" for the root */
	int32_t partition;             /* -1 unless the path is a partition directory */
	char path[PATH_MAX];           /* the path itself, resolved */
};

/* dir holds .topicfs/: the root of a mount. */
bool is_mount_root(const char *dir);
/* Calls fn(mount point, source) for every topicfs mount in /proc/self/mountinfo;
 * both strings borrowed for the call. 0 or -errno. */
int for_each_mount(void (*fn)(void *arg, const char *mnt, const char *src), void *arg);
/* Fills m from a path inside a mount (root, topic or partition). Returns 0 or
 * -ENOENT (missing) / -EINVAL (not inside a topicfs mount), with a message. */
int resolve_mount_path(const char *arg, struct mpath *m);
/* qsort comparator of int32_t. */
int cmp_i32(const void *a, const void *b);
/* The partition numbers of a topic directory, ascending. Caller frees *out. */
int list_partitions(const char *topic_dir, int32_t **out, size_t *count);
/* Topic names of a mount, sorted. Caller frees them with free_strings. */
int list_topics(const char *root, char ***out, size_t *count);
void free_strings(char **v, size_t n);

/* ---- mount.c: attributes ---------------------------------------------------------- */

/* Reads user.topicfs.NAME into buf (NUL-terminated, a final newline dropped).
 * Returns its length or -errno (-ENODATA when absent). */
ssize_t xget(const char *path, const char *name, char *buf, size_t cap);
bool xget_i64(const char *path, const char *name, int64_t *out);
bool xget_double(const char *path, const char *name, double *out);
/* Sets user.topicfs.NAME. 0 or -errno. */
int xset(const char *path, const char *name, const char *value);

/* Everything the partition directory says about itself. */
enum {
	P_START = 1 << 0, P_END = 1 << 1, P_SIZE = 1 << 2, P_SEGMENTS = 1 << 3,
	P_LIVE = 1 << 4, P_DIRTY = 1 << 5, P_FIRST_DIRTY = 1 << 6, P_FIRST_UNCLEANABLE = 1 << 7,
	P_LAST_CLEAN = 1 << 8, P_REASON = 1 << 9,
};

struct pinfo {
	int32_t partition;
	char path[PATH_MAX];
	unsigned have;
	int64_t log_start, log_end, size, segments, live_keys, first_dirty, first_uncleanable;
	double dirty_ratio;
	char last_clean[XATTR_VALUE_CAP];
	char reason[XATTR_VALUE_CAP];
};

/* ---- groups.c: consumer groups through MOUNT/.groups/ ------------------------------ */

struct group_row {
	char group[NAME_MAX + 1];
	char topic[TOPIC_CAP];
	int32_t partition;
	int64_t committed_offset, log_end_offset, lag_offsets, lag_records, lag_ms;
};

/* The committed offset in a .groups file. 0 or -errno (-EINVAL: not a number). */
int read_group_file(const char *path, int64_t *out);
/* Every group offset of the mount at root (only_* narrow it: NULL / -1 for all),
 * sorted by group, topic, partition; offsets the caller may not read are left out.
 * Caller frees *out. 0 or -errno (-ENOENT: the mount has no .groups/). */
int read_group_rows(const char *root, const char *only_group, const char *only_topic,
                    int32_t only_partition, struct group_row **out, size_t *count);
/* A row as the JSON object of `groups --json`; caller owns it. */
struct json_object *group_row_json(const struct group_row *r);
/* The consumer-health samples of MOUNT/.topicfs/metrics as an array of {metric,
 * labels, value} (empty when there are none); caller owns it. */
struct json_object *read_consumer_health(const char *root);
/* Prints the flagged ones for people ("consumers: ..." lines). */
void print_consumer_health(struct json_object *samples);

/* Reads the attributes of TOPIC_DIR/PARTITION; have says which were there. */
void pinfo_read(struct pinfo *pi, const char *topic_dir, int32_t partition);
/* o[k] = v, or null when !have. */
void json_add_i64(struct json_object *o, const char *k, bool have, int64_t v);

#endif
