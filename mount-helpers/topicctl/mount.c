/* mount.c - topicctl's view of a mount: which path is the root, a topic or a
 * partition; the mount's data directory (from /proc/self/mountinfo); its topics
 * and partitions; the user.topicfs.* attributes of a partition directory.
 */
#include "topicctl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "engine/topic_config.h"

/* ==================================================================================
 * Mounts: which path is the root, a topic or a partition; the data directory
 * ================================================================================== */

bool is_mount_root(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	if (snprintf(p, sizeof(p), "%s/.topicfs", dir) >= (int)sizeof(p))
		return false;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Undoes mountinfo's octal escapes (\040 for a space...) in place. */
static void unescape_mountinfo(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Calls fn(mount point, source) for every topicfs mount in /proc/self/mountinfo. */
int for_each_mount(void (*fn)(void *arg, const char *mnt, const char *src), void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok, *mnt = NULL, *type = NULL, *src = NULL;
		int field = 0;
		bool after_dash = false;

		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			if (!after_dash) {
				if (field == 4)
					mnt = tok;
				if (!strcmp(tok, "-") && field >= 5)
					after_dash = true;
				field++;
			} else if (!type) {
				type = tok;
			} else if (!src) {
				src = tok;
			}
		}
		if (mnt && type && src && !strcmp(type, "fuse.topicfs")) {
			unescape_mountinfo(mnt);
			unescape_mountinfo(src);
			fn(arg, mnt, src);
		}
	}
	free(line);
	fclose(f);
	return 0;
}

struct mount_find {
	const char *root;
	char *data_dir;
	size_t cap;
};

static void find_source(void *arg, const char *mnt, const char *src)
{
	struct mount_find *m = arg;

	if (!strcmp(mnt, m->root))
		snprintf(m->data_dir, m->cap, "%s", src);
}

/* Fills m from a path inside a mount (root, topic or partition). Returns 0 or
 * -ENOENT (missing) / -EINVAL (not inside a topicfs mount), with a message. */
int resolve_mount_path(const char *arg, struct mpath *m)
{
	char p[PATH_MAX], parent[PATH_MAX], *slash;
	struct mount_find mf;

	memset(m, 0, sizeof(*m));
	m->partition = -1;
	if (!realpath(arg, p)) {
		int rc = -errno;
		complain("%s: %s", arg, strerror(errno));
		return rc;
	}
	snprintf(m->path, sizeof(m->path), "%s", p);
	if (is_mount_root(p)) {
		snprintf(m->root, sizeof(m->root), "%s", p);
		goto found;
	}
	snprintf(parent, sizeof(parent), "%s", p);
	for (int depth = 1; depth <= 2; depth++) {
		slash = strrchr(parent, '/');
		if (!slash || slash == parent)
			break;
		*slash = '\0';
		if (is_mount_root(parent)) {
			const char *rest = p + strlen(parent) + 1;
			const char *sep = strchr(rest, '/');
			snprintf(m->root, sizeof(m->root), "%s", parent);
			snprintf(m->topic, sizeof(m->topic), "%.*s",
			         (int)(sep ? (size_t)(sep - rest) : strlen(rest)), rest);
			if (sep) {
				int64_t v;
				if (!parse_i64(sep + 1, 0, INT32_MAX, &v)) {
					complain("%s: not a partition directory", arg);
					return -EINVAL;
				}
				m->partition = (int32_t)v;
			}
			goto found;
		}
	}
	complain("%s: not inside a topicfs mount (no .topicfs above it)", arg);
	return -EINVAL;
found:
	mf = (struct mount_find){ m->root, m->data_dir, sizeof(m->data_dir) };
	for_each_mount(find_source, &mf);
	return 0;
}

int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return x < y ? -1 : x > y;
}

/* The partition numbers of a topic directory, ascending. Caller frees *out. */
int list_partitions(const char *topic_dir, int32_t **out, size_t *count)
{
	DIR *d = opendir(topic_dir);
	struct dirent *de;
	int32_t *v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*count = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int64_t p;
		if (!parse_i64(de->d_name, 0, INT32_MAX, &p) || de->d_name[0] == '+' ||
		    (de->d_name[0] == '0' && de->d_name[1]))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			int32_t *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
			cap = nc;
		}
		v[n++] = (int32_t)p;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_i32);
	*out = v;
	*count = n;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Topic names of a mount, sorted. Caller frees each and the array. */
int list_topics(const char *root, char ***out, size_t *count)
{
	DIR *d = opendir(root);
	struct dirent *de;
	char **v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	*count = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !tfs_topic_name_valid(de->d_name))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **nv = realloc(v, nc * sizeof(*nv));
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		if (!(v[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	*count = n;
	return 0;
}

void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ==================================================================================
 * Attributes
 * ================================================================================== */

/* Reads user.topicfs.NAME into buf (NUL-terminated, a final newline dropped).
 * Returns its length or -errno (-ENODATA when absent). */
ssize_t xget(const char *path, const char *name, char *buf, size_t cap)
{
	char full[256];
	ssize_t n;

	snprintf(full, sizeof(full), XATTR_PREFIX "%s", name);
	n = lgetxattr(path, full, buf, cap - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n'))
		buf[--n] = '\0';
	return n;
}

bool xget_i64(const char *path, const char *name, int64_t *out)
{
	char buf[64];

	return xget(path, name, buf, sizeof(buf)) > 0 && parse_i64(buf, INT64_MIN, INT64_MAX, out);
}

bool xget_double(const char *path, const char *name, double *out)
{
	char buf[64], *end;

	if (xget(path, name, buf, sizeof(buf)) <= 0)
		return false;
	errno = 0;
	*out = strtod(buf, &end);
	return !errno && !*end && isfinite(*out);
}

int xset(const char *path, const char *name, const char *value)
{
	char full[256];

	snprintf(full, sizeof(full), XATTR_PREFIX "%s", name);
	return lsetxattr(path, full, value, strlen(value), 0) < 0 ? -errno : 0;
}

void pinfo_read(struct pinfo *pi, const char *topic_dir, int32_t partition)
{
	memset(pi, 0, sizeof(*pi));
	pi->partition = partition;
	snprintf(pi->path, sizeof(pi->path), "%s/%" PRId32, topic_dir, partition);
	pi->have |= xget_i64(pi->path, "log_start_offset", &pi->log_start) ? P_START : 0;
	pi->have |= xget_i64(pi->path, "log_end_offset", &pi->log_end) ? P_END : 0;
	pi->have |= xget_i64(pi->path, "size_bytes", &pi->size) ? P_SIZE : 0;
	pi->have |= xget_i64(pi->path, "segments", &pi->segments) ? P_SEGMENTS : 0;
	pi->have |= xget_i64(pi->path, "live_keys", &pi->live_keys) ? P_LIVE : 0;
	pi->have |= xget_double(pi->path, "dirty_ratio", &pi->dirty_ratio) ? P_DIRTY : 0;
	pi->have |= xget_i64(pi->path, "first_dirty_offset", &pi->first_dirty) ? P_FIRST_DIRTY : 0;
	pi->have |= xget_i64(pi->path, "first_uncleanable_offset", &pi->first_uncleanable)
	            ? P_FIRST_UNCLEANABLE : 0;
	if (xget(pi->path, "last_clean", pi->last_clean, sizeof(pi->last_clean)) > 0)
		pi->have |= P_LAST_CLEAN;
	if (xget(pi->path, "uncleanable_reason", pi->reason, sizeof(pi->reason)) > 0)
		pi->have |= P_REASON;
}

void json_add_i64(struct json_object *o, const char *k, bool have, int64_t v)
{
	json_object_object_add(o, k, have ? json_object_new_int64(v) : NULL);
}
