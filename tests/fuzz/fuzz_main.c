/* fuzz_main.c - runs a fuzz harness without libFuzzer: every file named on the
 * command line, and every file inside a directory named there (sorted, one level),
 * goes once through LLVMFuzzerTestOneInput. This is how ctest replays the
 * committed corpus and regression inputs in the ordinary sanitizer build; a
 * failed property or a sanitizer report aborts the run.
 *
 * Usage: fuzz_NAME [--optional] [FILE|DIR]...   Exits 0 after all were replayed,
 * 2 when a named path cannot be read (a missing path after --optional is
 * skipped: a harness may have no regression inputs yet), 1 when no input was
 * found at all. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fz.h"

/* A harness need not define it. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
	uint8_t *buf;
	long len = fz_read_file(path, &buf);

	if (len < 0) {
		perror(path);
		return -1;
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "replay %s (%ld bytes)\n", path, len);
	/* libFuzzer never passes a NULL pointer, not even for an empty input */
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, long *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d) {
		perror(dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		fz_reserve((void **)&names, &cap, n + 1, sizeof(*names));
		if (asprintf(&names[n++], "%s/%s", dir, de->d_name) < 0)
			abort();
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			rc = run_file(names[i]);
			(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	long count = 0;
	bool optional = false;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int rc;
		if (!strcmp(argv[i], "--optional")) {
			optional = true;
			continue;
		}
		if (stat(argv[i], &st) != 0) {
			if (optional)
				continue;
			perror(argv[i]);
			return 2;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = run_dir(argv[i], &count);
		} else {
			rc = run_file(argv[i]);
			count++;
		}
		if (rc < 0)
			return 2;
	}
	printf("%s: %ld inputs replayed\n", argv[0], count);
	return count > 0 ? 0 : 1;
}
