/* bench_rocksdb.c - the RocksDB side of bench/cleaner.sh's full-cycle comparison.
 *
 * The same stream as `bench_clean cycle`: --records updates, key "user-%07d" over
 * --keys keys round-robin, --value-bytes values cut from the same pool, written
 * with the C API (rocksdb/c.h): default options (+ create_if_missing, and
 * wal_bytes_per_sync when --wal-bytes-per-sync is given), a WriteBatch of --batch
 * puts per rocksdb_write (default write options: WAL on, no sync), then rocksdb_compact_range(NULL, NULL) (a full compaction; it flushes the
 * memtable first), rocksdb_close, syncfs of the directory. Times each phase, and
 * samples /proc/self/io write_bytes and cancelled_write_bytes before and after
 * (bytes this process, every thread of it, dirtied for the block layer).
 *
 * Not built by CMake (it globs the .c files of bench/ itself, not of this
 * subdirectory): it needs
 * librocksdb. bench/cleaner.sh builds it:
 *   gcc -O2 bench/rocksdb/bench_rocksdb.c -o $TMP/bench_rocksdb -lrocksdb
 *
 * --wal-bytes-per-sync N bounds what an acknowledged write may lose to a power cut
 * the way topicfs's flush-ahead does: RocksDB starts writeback of its WAL every N
 * bytes (sync_file_range), so the WAL reaches the disk instead of being deleted from
 * the page cache after the memtable flush. Default: RocksDB's (0, never).
 *
 * usage: bench_rocksdb --dir DIR [--records N] [--keys K] [--value-bytes V] [--batch B]
 *                      [--wal-bytes-per-sync N]
 * DIR must not exist yet or be empty. Output: "name value unit" lines, "# ..." notes.
 */
#define _GNU_SOURCE                        /* syncfs */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "../bench_util.h"

#define DEFAULT_RECORDS 10000000ull
#define DEFAULT_KEYS 1000000ull
#define DEFAULT_VALUE_BYTES 100u
#define DEFAULT_BATCH 1000u
#define MAX_KEYS 10000000ull
#define POOL_STRIDE 131u
#define MAX_BATCH 100000u
#define NS_PER_S 1e9
#define PROC_IO "/proc/self/io"

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "records", required_argument, NULL, 'r' },
		{ "keys", required_argument, NULL, 'k' },
		{ "value-bytes", required_argument, NULL, 'v' },
		{ "batch", required_argument, NULL, 'b' },
		{ "dir", required_argument, NULL, 'd' },
		{ "wal-bytes-per-sync", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t records = DEFAULT_RECORDS, keys = DEFAULT_KEYS, value_bytes = DEFAULT_VALUE_BYTES;
	uint64_t batch = DEFAULT_BATCH, wal_bytes_per_sync = 0;
	const char *dir = NULL;
	rocksdb_options_t *opt = NULL;
	rocksdb_writeoptions_t *wo = NULL;
	rocksdb_writebatch_t *wb = NULL;
	rocksdb_t *db = NULL;
	char *err = NULL, *pool = NULL, key[BENCH_KEY_BYTES];
	int64_t wb0, cw0, wb1, cw1;
	double t0, t_ingest, t_compact, t_close;
	int c, status = 1;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case 'r': rc = bench_parse_u64("bench_rocksdb", "--records", optarg, 1, UINT64_MAX, &records); break;
		case 'k': rc = bench_parse_u64("bench_rocksdb", "--keys", optarg, 1, MAX_KEYS, &keys); break;
		case 'v': rc = bench_parse_u64("bench_rocksdb", "--value-bytes", optarg, 0, BENCH_MAX_VALUE_BYTES, &value_bytes); break;
		case 'b': rc = bench_parse_u64("bench_rocksdb", "--batch", optarg, 1, MAX_BATCH, &batch); break;
		case 'd': dir = optarg; break;
		case 'w': rc = bench_parse_u64("bench_rocksdb", "--wal-bytes-per-sync", optarg, 0, UINT64_MAX, &wal_bytes_per_sync); break;
		default: rc = -EINVAL; break;
		}
		if (rc < 0)
			return 2;
	}
	if (!dir || optind != argc) {
		fprintf(stderr, "usage: bench_rocksdb --dir DIR [--records N] [--keys K] "
		        "[--value-bytes V] [--batch B] [--wal-bytes-per-sync N]\n");
		return 2;
	}
	pool = (char *)bench_make_pool();
	if (!pool || bench_proc_io(&wb0, &cw0) < 0) {
		fprintf(stderr, "bench_rocksdb: out of memory or no %s\n", PROC_IO);
		return 1;
	}

	t0 = bench_now_s();
	opt = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(opt, 1);
	if (wal_bytes_per_sync)
		rocksdb_options_set_wal_bytes_per_sync(opt, wal_bytes_per_sync);
	db = rocksdb_open(opt, dir, &err);
	if (err)
		goto fail;
	wo = rocksdb_writeoptions_create();
	wb = rocksdb_writebatch_create();
	for (uint64_t i = 0; i < records;) {
		rocksdb_writebatch_clear(wb);
		for (uint64_t n = 0; n < batch && i < records; n++, i++) {
			bench_format_key((uint8_t *)key, i % keys);
			rocksdb_writebatch_put(wb, key, BENCH_KEY_BYTES, pool + (i * POOL_STRIDE) % BENCH_POOL_BYTES,
			                       (size_t)value_bytes);
		}
		rocksdb_write(db, wo, wb, &err);
		if (err)
			goto fail;
	}
	t_ingest = bench_now_s() - t0;
	rocksdb_compact_range(db, NULL, 0, NULL, 0);
	t_compact = bench_now_s() - t0 - t_ingest;
	{
		char *prop = rocksdb_property_value(db, "rocksdb.num-files-at-level0");
		char *live = rocksdb_property_value(db, "rocksdb.estimate-num-keys");
		printf("# after CompactRange: %s L0 files, ~%s keys (estimate)\n", prop ? prop : "?",
		       live ? live : "?");
		rocksdb_free(prop);
		rocksdb_free(live);
	}
	{
		double t = bench_now_s();
		int dfd;

		rocksdb_close(db);
		db = NULL;
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || syncfs(dfd) < 0) {
			fprintf(stderr, "bench_rocksdb: syncfs %s: %s\n", dir, strerror(errno));
			if (dfd >= 0)
				close(dfd);
			goto out;
		}
		close(dfd);
		t_close = bench_now_s() - t;
	}
	(void)bench_proc_io(&wb1, &cw1);
	printf("# rocksdb cycle: %" PRIu64 " records over %" PRIu64 " keys, %" PRIu64
	       "-byte values, WriteBatch of %" PRIu64 ", default options, wal_bytes_per_sync %" PRIu64
	       ", CompactRange(NULL, NULL), close, syncfs\n", records, keys, value_bytes, batch,
	       wal_bytes_per_sync);
	printf("ingest_seconds %.3f s\n", t_ingest);
	printf("compact_seconds %.3f s\n", t_compact);
	printf("close_sync_seconds %.3f s\n", t_close);
	printf("total_seconds %.3f s\n", t_ingest + t_compact + t_close);
	printf("write_bytes %" PRId64 " bytes\n", wb1 - wb0);
	printf("cancelled_write_bytes %" PRId64 " bytes\n", cw1 - cw0);
	printf("logical_bytes %" PRIu64 " bytes\n", records * (BENCH_KEY_BYTES + value_bytes));
	printf("live_bytes %" PRIu64 " bytes\n",
	       (records < keys ? records : keys) * (BENCH_KEY_BYTES + value_bytes));
	status = 0;
	goto out;
fail:
	fprintf(stderr, "bench_rocksdb: %s: %s\n", dir, err);
	rocksdb_free(err);
out:
	if (db)
		rocksdb_close(db);
	rocksdb_writebatch_destroy(wb);
	rocksdb_writeoptions_destroy(wo);
	rocksdb_options_destroy(opt);
	free(pool);
	return status;
}
