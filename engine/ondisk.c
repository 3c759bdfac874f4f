/* ondisk.c - the partition-directory name rule and the checkpoint parser
 * (ondisk.h). */
#include "engine/ondisk.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/topic_config.h"

int tfs_partition_dir_parse(const char *name, char *topic, size_t cap, int32_t *partition)
{
	const char *dash = strrchr(name, '-'), *digits;
	size_t tlen;
	int32_t v = 0;

	if (!dash || dash == name || !dash[1])
		return -EINVAL;
	digits = dash + 1;
	if (digits[0] == '0' && digits[1])
		return -EINVAL;                 /* a leading zero names no partition */
	for (const char *p = digits; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (*p - '0');
		if (v >= TFS_MAX_PARTITIONS)    /* also stops before any overflow */
			return -EINVAL;
	}
	tlen = (size_t)(dash - name);
	if (tlen >= cap)
		return -EINVAL;
	memcpy(topic, name, tlen);
	topic[tlen] = '\0';
	if (!tfs_topic_name_valid(topic))
		return -EINVAL;
	*partition = v;
	return 0;
}

/* ---- cleaner-offset-checkpoint ---- */

/* Strict decimal of the whole of [p, p + n) in [0, hi]: digits only. */
static bool parse_count(const char *p, size_t n, int64_t hi, int64_t *out)
{
	int64_t v = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (hi - (p[i] - '0')) / 10)
			return false;
		v = v * 10 + (p[i] - '0');
	}
	*out = v;
	return true;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Splits [p, end) into at most 3 fields by runs of blanks; returns how many there
 * are (4 for more than 3). */
static int split_fields(const char *p, const char *end, const char **f, const char **fe)
{
	int nf = 0;

	while (p < end) {
		while (p < end && is_blank(*p))
			p++;
		if (p == end)
			break;
		if (nf == 3)
			return 4;
		f[nf] = p;
		while (p < end && !is_blank(*p))
			p++;
		fe[nf++] = p;
	}
	return nf;
}

/* The order that puts a partition's entries together, then in file order. */
struct ckpt_sort {
	const struct tfs_checkpoint_entry *e;
	tfs_pos_t at;
};

static int cmp_ckpt(const void *a, const void *b)
{
	const struct ckpt_sort *x = a, *y = b;
	int c = strcmp(x->e->topic, y->e->topic);

	if (c)
		return c;
	if (x->e->partition != y->e->partition)
		return x->e->partition < y->e->partition ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The position of the first line that names a partition an earlier line named,
 * or -1; -ENOMEM. */
static int64_t first_repeat(const struct tfs_checkpoint_entry *e, const tfs_pos_t *at, size_t n)
{
	struct ckpt_sort *v;
	int64_t first = -1;

	if (n < 2)
		return -1;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = (struct ckpt_sort){ &e[i], at[i] };
	qsort(v, n, sizeof(*v), cmp_ckpt);
	for (size_t i = 1; i < n; i++)
		if (v[i].e->partition == v[i - 1].e->partition && !strcmp(v[i].e->topic, v[i - 1].e->topic) &&
		    (first < 0 || v[i].at < first))
			first = v[i].at;
	free(v);
	return first;
}

int tfs_checkpoint_parse(const char *text, size_t len, struct tfs_checkpoint_entry **out,
                         size_t *count, tfs_pos_t *err_pos, const char **why)
{
	struct tfs_checkpoint_entry *e = NULL;
	tfs_pos_t *at = NULL;
	const char *p = text, *end = text + len;
	int64_t version = -1, n = -1, repeat;
	size_t got = 0, cap = 0, lineno = 0;
	int rc = TFS_ECORRUPT;

	*out = NULL;
	*count = 0;
	*err_pos = 0;
	*why = NULL;
	for (; p < end; p = p < end ? p + 1 : end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *le = eol ? eol : end;
		const char *f[3], *fe[3];
		int64_t part, off;
		size_t tlen;

		*err_pos = p - text;
		lineno++;
		if (memchr(p, '\0', (size_t)(le - p))) {
			*why = "a NUL byte";
			goto out;
		}
		if (le > p && le[-1] == '\r')
			le--;
		if (lineno == 1 && !parse_count(p, (size_t)(le - p), INT64_MAX, &version)) {
			*why = "the first line is not a version number";
			goto out;
		}
		if (lineno == 1 && version != TFS_CHECKPOINT_VERSION) {
			*why = "unknown version (expected 0)";
			goto out;
		}
		if (lineno == 2 && !parse_count(p, (size_t)(le - p), INT32_MAX, &n)) {
			*why = "the second line is not an entry count";
			goto out;
		}
		p = eol ? eol : end;
		if (lineno <= 2)
			continue;
		if ((int64_t)got == n) {
			/* "<topic> <partition> <offset>" lines are all read: blank lines only */
			if (split_fields(text + *err_pos, le, f, fe) != 0) {
				*why = "more entries than the count line says";
				goto out;
			}
			continue;
		}
		if (split_fields(text + *err_pos, le, f, fe) != 3) {
			*why = "an entry is not \"topic partition offset\"";
			goto out;
		}
		if (got == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct tfs_checkpoint_entry *ne = realloc(e, ncap * sizeof(*ne));
			tfs_pos_t *na;
			if (!ne) {
				rc = -ENOMEM;
				goto out;
			}
			e = ne;
			if (!(na = realloc(at, ncap * sizeof(*na)))) {
				rc = -ENOMEM;
				goto out;
			}
			at = na;
			cap = ncap;
		}
		tlen = (size_t)(fe[0] - f[0]);
		if (tlen > TFS_TOPIC_NAME_MAX) {
			*why = "a topic name longer than 249 bytes";
			goto out;
		}
		memcpy(e[got].topic, f[0], tlen);
		e[got].topic[tlen] = '\0';
		if (!tfs_topic_name_valid(e[got].topic)) {
			*why = "an invalid topic name";
			goto out;
		}
		if (!parse_count(f[1], (size_t)(fe[1] - f[1]), INT32_MAX, &part)) {
			*why = "a partition that is not a number >= 0";
			goto out;
		}
		if (!parse_count(f[2], (size_t)(fe[2] - f[2]), INT64_MAX, &off)) {
			*why = "an offset that is not a number >= 0";
			goto out;
		}
		e[got].partition = (int32_t)part;
		e[got].offset = off;
		at[got++] = *err_pos;
	}
	*err_pos = (tfs_pos_t)len;
	if (lineno < 2) {
		*why = lineno == 0 ? "empty file" : "no entry count line";
		goto out;
	}
	if ((int64_t)got != n) {
		*why = "fewer entries than the count line says";
		goto out;
	}
	repeat = first_repeat(e, at, got);
	if (repeat == -ENOMEM) {
		rc = -ENOMEM;
		goto out;
	}
	if (repeat >= 0) {
		*err_pos = repeat;
		*why = "a partition listed twice";
		goto out;
	}
	*out = e;
	*count = got;
	e = NULL;
	rc = 0;
	*why = NULL;
out:
	if (rc < 0)
		*count = 0;
	free(e);
	free(at);
	return rc;
}
