/* t_util.c - see t_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/t_util.h"

char *t_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path = NULL;
	if (!base || !*base)
		base = "/tmp";
	assert_true(asprintf(&path, "%s/tfs-%s-XXXXXX", base, tag) > 0);
	assert_non_null(mkdtemp(path));
	return path;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st; (void)type; (void)ftw;
	remove(path);
	return 0;
}

void t_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct tfs_io *t_io(void)
{
	struct tfs_io *io = NULL;
	int rc = tfs_io_create(tfs_io_kind_from_env(), &io);
	if (rc != 0)
		fail_msg("cannot create io backend %s: %s",
		         tfs_io_kind_name(tfs_io_kind_from_env()), strerror(-rc));
	return io;
}

uint64_t t_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

long t_read_file(const char *path, uint8_t **out)
{
	FILE *f = fopen(path, "rb");
	long n;
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*out = malloc(n > 0 ? (size_t)n : 1);
	if (n > 0 && fread(*out, 1, (size_t)n, f) != (size_t)n) {
		free(*out);
		*out = NULL;
		n = -1;
	}
	fclose(f);
	return n;
}

int t_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc = 0;
	if (!f)
		return -1;
	if (len && fwrite(data, 1, len, f) != len)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

long t_file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}
