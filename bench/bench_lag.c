/* bench_lag.c - what a lag question costs on a large partition (engine/log/lag.h).
 *
 *   bench_lag [RECORDS [KEYS]]      (default 1000000 records over 1000 keys)
 *
 * Appends RECORDS records of 100 bytes over KEYS keys in units of 100 records,
 * rolling every 100,000, then times: the first question from offset 0 (which
 * builds every segment's tally), the same question again, a question from the
 * middle, one after 1,000 more appends to the active segment, and a question
 * from each of 1,000 spread positions. Prints one line per figure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "engine/log/lag.h"
#include "engine/log/partition_log.h"
#include "io/file_util.h"
#include "io/io.h"

#define UNIT_RECORDS 100
#define ROLL_EVERY 100000
#define VALUE_BYTES 100
#define SPREAD_QUESTIONS 1000
#define LATE_APPENDS 1000

static void append_n(struct tfs_plog *pl, int64_t from, int64_t n, int64_t keys)
{
	struct tfs_append_rec recs[UNIT_RECORDS];
	uint8_t kb[UNIT_RECORDS][BENCH_KEY_BYTES], value[VALUE_BYTES];

	memset(value, 'v', sizeof(value));
	for (int64_t i = 0; i < n; i += UNIT_RECORDS) {
		size_t c = (size_t)(n - i < UNIT_RECORDS ? n - i : UNIT_RECORDS);
		for (size_t j = 0; j < c; j++) {
			memset(&recs[j], 0, sizeof(recs[j]));
			bench_format_key(kb[j], (uint64_t)((from + i + (int64_t)j) % keys));
			recs[j].key = tfs_slice_make(kb[j], BENCH_KEY_BYTES);
			recs[j].value = tfs_slice_make(value, sizeof(value));
		}
		if (tfs_plog_append(pl, recs, c, false, NULL, NULL) != 0) {
			fprintf(stderr, "append failed\n");
			exit(1);
		}
		if ((from + i + (int64_t)c) % ROLL_EVERY == 0)
			tfs_plog_roll(pl);
	}
}

static double timed_lag(struct tfs_plog *pl, tfs_offset_t pos, struct tfs_lag *lag)
{
	double t0 = bench_now_s();

	if (tfs_plog_lag(pl, pos, lag) != 0) {
		fprintf(stderr, "lag failed\n");
		exit(1);
	}
	return (bench_now_s() - t0) * 1e3;
}

int main(int argc, char **argv)
{
	int64_t records = argc > 1 ? atoll(argv[1]) : 1000000, keys = argc > 2 ? atoll(argv[2]) : 1000;
	char dir[] = "/tmp/bench_lag.XXXXXX", path[64], cmd[96];
	struct tfs_topic_config cfg;
	struct tfs_plog_env env;
	struct tfs_fdcache *fdc;
	struct tfs_plog *pl = NULL;
	struct tfs_io *io;
	struct tfs_lag lag;
	double ms, total = 0;

	if (records < 1 || keys < 1 || !mkdtemp(dir) || tfs_io_create(TFS_IO_AUTO, &io) != 0)
		return 2;
	fdc = tfs_fdcache_create(io, 64);
	tfs_topic_config_defaults(&cfg);
	env = (struct tfs_plog_env){ io, fdc, &cfg, false };
	snprintf(path, sizeof(path), "%s/t-0", dir);
	if (tfs_plog_open(&env, path, true, &pl) != 0)
		return 1;
	append_n(pl, 0, records, keys);
	ms = timed_lag(pl, 0, &lag);
	printf("first question from 0 (builds the tallies): %.2f ms, lag_records %" PRId64 "\n", ms,
	       lag.lag_records);
	printf("same question again: %.3f ms\n", timed_lag(pl, 0, &lag));
	printf("question from the middle: %.3f ms\n", timed_lag(pl, records / 2, &lag));
	append_n(pl, records, LATE_APPENDS, keys);
	ms = timed_lag(pl, 0, &lag);
	printf("after %d more appends: %.3f ms, lag_records %" PRId64 "\n", LATE_APPENDS, ms,
	       lag.lag_records);
	for (int i = 0; i < SPREAD_QUESTIONS; i++)
		total += timed_lag(pl, (tfs_offset_t)((double)records * i / SPREAD_QUESTIONS), &lag);
	printf("%d spread questions: %.3f ms each on average\n", SPREAD_QUESTIONS,
	       total / SPREAD_QUESTIONS);
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	tfs_io_destroy(io);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
