#!/usr/bin/env bash
# bench/cleaner.sh - the log cleaner's promises, in one run, with baselines measured
# in the same run (cp of the same files on the same disk; RocksDB on the same
# stream) and ratios against them.
#
# usage: bench/cleaner.sh [BUILD_DIR] [DATA_DIR]
#   BUILD_DIR  a CMake build tree (default: build/ in the repo root; configured as
#              Release if it is not one yet); bench_clean is brought up to date there
#   DATA_DIR   a directory on the disk being measured (default /var/tmp); the run
#              works in a fresh DATA_DIR/tfs-cleaner-bench.XXXXXX and removes it
#              (it needs ~4 GB free there at the peak)
# environment:
#   RECORDS=10000000  records in the log (keys "user-%07d" round-robin over KEYS,
#   KEYS=1000000      100-byte values, batches of 1000, segment.bytes 100 MiB)
#   REPEAT=3          rounds of part 1 (cp + cleaning pass); the median is reported.
#                     Parts 2-4 run once (each takes 30-90 s; one round, said so)
#   SMALL_DEDUPE=8388608  log.cleaner.dedupe.buffer.size of part 2 (8 MiB)
#   IDLE_SECONDS=5    how long part 3 reads with no pass running
#   CYCLE_BACKOFF_MS=1000  log.cleaner.backoff.ms of part 4's engine (see below)
#   STRICT=1          exit 3 when a target FAILs (default: exit 0 once every part
#                     ran; 1 if one failed to run)
#
# What it runs:
#   0. bench_clean build: the log, once (RECORDS records, >= 1 GiB), rolled and synced.
#   1. REPEAT rounds of: [drop caches] time `cp -r` of the partition directory (its
#      segment files and indexes) + `sync` into a fresh directory; [drop caches]
#      bench_clean clean of that copy (log.cleaner.threads=0, default 128 MiB
#      dedupe buffer: one pass). Caches are dropped before both when
#      /proc/sys/vm/drop_caches is writable (cold: both read the disk; bench_clean
#      drops them again after tfs_plog_open, whose recovery scan reads the whole
#      log), before neither otherwise (warm); the report says which.
#      cleaner MB/s = (bytes read + bytes written) / duration, from the pass's own
#      stats (its last_clean line); cp MB/s = (bytes read + bytes written) / time,
#      = 2 x the bytes copied / (cp + sync time).
#   2. a copy cleaned with a SMALL_DEDUPE buffer: clean_now until first_dirty_offset
#      reaches the cleanable end; one line per pass (cold like part 1).
#   3. a copy: bench_clean latency (tfs_plog_read_key of random keys on a reader
#      thread for IDLE_SECONDS with no pass, then during one pass); page cache warm
#      (the copy was just written), so it measures the engine, not the disk.
#   4. the full cycle, once each: bench_clean cycle (the engine as a user runs it:
#      its cleaner thread on - log.cleaner.threads=1, Kafka's default - while 10M
#      records are appended in batches of 1000; then roll, clean_now until compacted,
#      sync, close, syncfs) and bench_rocksdb twice (WriteBatch of 1000,
#      CompactRange(NULL, NULL), close, syncfs; its background compactions run during
#      ingest): with default options, and with wal_bytes_per_sync=WAL_BYTES_PER_SYNC.
#      Every other cleaner and topic setting is the default, except
#      log.cleaner.backoff.ms=CYCLE_BACKOFF_MS: with Kafka's 15000 the thread would
#      sleep through the whole ingest and the cycle would be ingest + one full pass.
#      Why two RocksDB runs: topicfs starts a background fdatasync of the log every
#      8 MiB (FLUSH_AHEAD_BYTES, engine/log/partition_log.c), so what a power cut can take
#      from acknowledged appends is bounded. RocksDB by default never syncs its WAL
#      (sync=false), and at this ingest rate each WAL is deleted after its memtable
#      flush before the kernel writes it back: its bytes never reach the disk, and the
#      loss window is whatever the page cache holds. wal_bytes_per_sync=8 MiB is
#      RocksDB's own setting for the same bound; the targets are judged against that
#      run (same durability), and the default run's ratios are printed beside them.
# Targets:
#   1. cleaner MB/s >= 0.5 x cp MB/s
#   3. p99 of a key read during a pass <= 2 x p99 with no pass
#   4. topicfs total time <= 1/3 of RocksDB's; topicfs write amplification <= 1/2 of
#      RocksDB's (bytes that reached the block layer: /proc/self/io write_bytes -
#      cancelled_write_bytes, over the key+value bytes ingested); RocksDB with
#      wal_bytes_per_sync=WAL_BYTES_PER_SYNC (the same loss window as topicfs)
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$REPO/build}
DATA=${2:-/var/tmp}
RECORDS=${RECORDS:-10000000}
KEYS=${KEYS:-1000000}
REPEAT=${REPEAT:-3}
SMALL_DEDUPE=${SMALL_DEDUPE:-8388608}
CYCLE_BACKOFF_MS=${CYCLE_BACKOFF_MS:-1000}
WAL_BYTES_PER_SYNC=${WAL_BYTES_PER_SYNC:-8388608}
IDLE_SECONDS=${IDLE_SECONDS:-5}
STRICT=${STRICT:-0}
CP_TARGET_RATIO=0.5
P99_TARGET_RATIO=2
TIME_TARGET_RATIO=0.3333
WA_TARGET_RATIO=0.5
DROP_CACHES=/proc/sys/vm/drop_caches

die() { echo "cleaner.sh: $*" >&2; exit 1; }
note() { echo "cleaner.sh: $*" >&2; }

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
	note "configuring $BUILD (Release)"
	cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || die "cmake failed"
fi
if ! make -C "$BUILD" -j"$(nproc)" bench_clean >"$BUILD/bench-clean-make.log" 2>&1; then
	note "building bench_clean failed (see $BUILD/bench-clean-make.log)"
	[[ -x $BUILD/bench_clean ]] || die "no bench_clean in $BUILD"
	note "using the binary already in $BUILD"
fi
BC=$BUILD/bench_clean
LOGS=$(mktemp -d /tmp/tfs-cleaner-bench.XXXXXX)
# bench_rocksdb needs librocksdb, so CMake does not build it (scripts/install-deps.sh
# --bench installs librocksdb-dev).
RDB=
if gcc -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	"$REPO/bench/rocksdb/bench_rocksdb.c" -o "$LOGS/bench_rocksdb" -lrocksdb \
	>"$LOGS/rocksdb-build.log" 2>&1; then
	RDB=$LOGS/bench_rocksdb
else
	note "cannot build bench_rocksdb (librocksdb-dev missing? see $LOGS/rocksdb-build.log); part 4 runs topicfs only"
fi
mkdir -p "$DATA" || die "cannot create $DATA"
DATA=$(cd "$DATA" && pwd)
W=$(mktemp -d "$DATA/tfs-cleaner-bench.XXXXXX") || die "cannot create a directory in $DATA"
trap 'rm -rf "$W"' EXIT
ERRORS=0
TARGET_FAILS=0

metric() { awk -v n="$2" '$1 == n { print $2; exit }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
now() { date +%s.%N; }
# verdict VALUE OP LIMIT -> PASS/FAIL (counts FAILs)
verdict() {
	if awk -v v="$1" -v t="$3" "BEGIN { exit !(v $2 t) }"; then
		echo PASS
	else
		echo FAIL
	fi
}
count_fail() { [[ $1 == FAIL ]] && TARGET_FAILS=$((TARGET_FAILS + 1)); return 0; }

CACHE=warm
DROP_ARG=
[[ -w $DROP_CACHES ]] && CACHE=cold && DROP_ARG=--drop-caches
drop_caches() {
	sync
	[[ $CACHE == cold ]] && echo 3 >"$DROP_CACHES"
	return 0
}

# run TAG CMD... : runs a bench, output in $LOGS/TAG.out; 1 if it failed
run() {
	local tag=$1; shift
	note "$tag: $*"
	if ! "$@" >"$LOGS/$tag.out" 2>"$LOGS/$tag.err"; then
		note "$tag FAILED: $(tail -n 3 "$LOGS/$tag.err")"
		ERRORS=$((ERRORS + 1))
		return 1
	fi
}

echo "== topicfs cleaner benchmarks, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
DIRTY=$(git -C "$REPO" status --porcelain -- engine io 2>/dev/null | wc -l)
echo "   commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?') + $DIRTY changed/new files in engine/ io/, $(nproc) cpus, $(uname -r), $(free -g | awk '/^Mem:/ { print $2 " GiB RAM" }')"
echo "   data dir $DATA: $(df -PT "$DATA" | awk 'NR == 2 { print $2 " on " $1 }'), build $BUILD, io ${TFS_IO:-auto}"
echo "   raw outputs: $LOGS"

# ---- 0. the log ----
SRC=$W/src/bench-0
mkdir -p "$W/src"
run build "$BC" build --path "$SRC" --records "$RECORDS" --keys "$KEYS" || die "cannot build the log"
LOG_BYTES=$(metric "$LOGS/build.out" log_bytes)
SRC_BYTES=$(du -sb "$SRC" | awk '{ print $1 }')   # every file's size: what cp copies
echo
echo "== the log: $(sed -n 's/^# built //p' "$LOGS/build.out"), built in $(metric "$LOGS/build.out" build_seconds) s"
echo "   $LOG_BYTES log bytes ($(calc %.2f "$LOG_BYTES / 1073741824") GiB) in $(metric "$LOGS/build.out" log_segments) segments; $SRC_BYTES bytes with the indexes"

# copy_src DEST_DATA_DIR : cp -r of the partition directory, untimed
copy_src() { mkdir -p "$1" && cp -r "$SRC" "$1/bench-0" && sync; }

# ---- 1. throughput vs cp ----
CP_ALL=()
CL_ALL=()
RATIO_ALL=()
for ((round = 1; round <= REPEAT; round++)); do
	D=$W/r$round
	mkdir -p "$D"
	drop_caches
	note "cp -r + sync of $SRC_BYTES bytes (round $round/$REPEAT, $CACHE)"
	t0=$(now)
	cp -r "$SRC" "$D/bench-0" && sync
	t1=$(now)
	CP_S=$(calc %.3f "$t1 - $t0")
	echo "$CP_S" >"$LOGS/cp.$round.out"
	CP_ALL+=("$(calc %.1f "2 * $SRC_BYTES / 1e6 / $CP_S")")
	drop_caches
	if run "clean.$round" "$BC" clean --data "$D" --path "$D/bench-0" $DROP_ARG; then
		CL_ALL+=("$(metric "$LOGS/clean.$round.out" clean_mb_per_s) $round")
		RATIO_ALL+=("$(calc %.2f "$(metric "$LOGS/clean.$round.out" clean_mb_per_s) / ${CP_ALL[-1]}")")
		cp "$D/log-cleaner.log" "$LOGS/clean.$round.cleaner-log"
	fi
	rm -rf "$D"
done
CP_MBPS=$(printf '%s\n' "${CP_ALL[@]}" | median)
CL_MED=$(printf '%s\n' "${CL_ALL[@]}" | awk 'NF == 2' | sort -g |
	awk '{ v[NR] = $0 } END { if (NR) print v[int((NR + 1) / 2)] }')

echo
echo "== 1. one cleaning pass of the whole log (default 128 MiB dedupe buffer, log.cleaner.threads=0) vs cp"
echo "   page cache: $CACHE (caches dropped before every cp and every pass, after the partition's open: both read the disk)" |
	sed "s/warm (caches dropped.*/warm (drop_caches not writable: both read the page cache)/"
echo "   cp -r + sync of the partition directory ($SRC_BYTES bytes): runs ${CP_ALL[*]} MB/s (read + written); median $CP_MBPS MB/s"
if [[ -n $CL_MED ]]; then
	f=$LOGS/clean.${CL_MED#* }.out
	CL_MBPS=${CL_MED% *}
	CL_S=$(metric "$f" clean_pass_seconds)
	RD=$(metric "$f" bytes_read)
	WR=$(metric "$f" bytes_written)
	CPS=$(cat "$LOGS/cp.${CL_MED#* }.out")
	echo "   cleaner runs: $(printf '%s\n' "${CL_ALL[@]}" | awk '{ printf "%s ", $1 }')MB/s; median run (round ${CL_MED#* }):"
	echo "     pass $CL_S s (clean_now wall $(metric "$f" clean_wall_seconds) s): read $RD bytes (the map's scan + the recopy), wrote $WR bytes"
	echo "     size $(metric "$f" before_bytes) -> $(metric "$f" after_bytes) bytes, $(metric "$f" before_segments) -> $(metric "$f" after_segments) segments, $(metric "$f" after_live_keys) live keys"
	echo "     cleaner log: $(sed -n 's/.*): //p' "$LOGS/clean.${CL_MED#* }.cleaner-log" | tail -n 1 | cut -c1-160)..."
	R1=$(calc %.2f "$CL_MBPS / $CP_MBPS")
	V1=$(verdict "$R1" ">=" "$CP_TARGET_RATIO"); count_fail "$V1"
	printf '   %-44s %8s MB/s  x cp %5s   target >= %s: %s\n' "cleaner (read + written) / pass duration" \
		"$CL_MBPS" "$R1" "$CP_TARGET_RATIO" "$V1"
	echo "   per round (cleaner / the same round's cp): ${RATIO_ALL[*]}; median $(printf '%s\n' "${RATIO_ALL[@]}" | median)"
	echo "   the same as time for the same log: cp+sync $CPS s vs pass $CL_S s = x$(calc %.2f "$CPS / $CL_S")"
	echo "   (the cleaner reads the dirty region twice - map, then recopy - so bytes/s flatters it by ~2x)"
else
	echo "   every cleaning run failed (see $LOGS/clean.*.err)"
fi

# ---- 2. small dedupe buffer ----
D=$W/small
copy_src "$D"
drop_caches
echo
echo "== 2. the same log with log.cleaner.dedupe.buffer.size $SMALL_DEDUPE (one round, $CACHE at the start)"
if run small "$BC" clean --data "$D" --path "$D/bench-0" --dedupe-bytes "$SMALL_DEDUPE" $DROP_ARG; then
	f=$LOGS/small.out
	grep '^# cleaner' "$f" | sed 's/^# /   /'
	awk '/^pass / { printf "   pass %3d  first_dirty %9s -> %9s of %s  read %11s  wrote %10s  %7.3f s%s\n",
	       $2, $4, $6, $8, $10, $12, $14, ($17 == "buffer_too_small") ? "  dedupe buffer too small for the dirty region" : "" }' "$f"
	echo "   $(metric "$f" passes) passes ($(metric "$f" passes_buffer_too_small) stopped by a full buffer), pass time $(metric "$f" clean_pass_seconds) s (wall $(metric "$f" clean_wall_seconds) s),"
	echo "   read $(metric "$f" bytes_read) + wrote $(metric "$f" bytes_written) bytes, $(metric "$f" clean_mb_per_s) MB/s; size $(metric "$f" before_bytes) -> $(metric "$f" after_bytes) bytes"
	cp "$D/log-cleaner.log" "$LOGS/small.cleaner-log"
	echo "   cleaner log, first pass: $(grep -m1 'cleaned' "$LOGS/small.cleaner-log" | sed 's/^[^ ]* //' | sed 's/; dedupe buffer too small.*/; dedupe buffer too small .../')"
	echo "   (no target; 1 pass with the 128 MiB buffer took ${CL_S:-?} s)"
fi
rm -rf "$D"

# ---- 3. read latency during a pass ----
D=$W/lat
copy_src "$D"
echo
echo "== 3. tfs_plog_read_key latency, 1 reader thread, random live keys; page cache warm (one round)"
echo "   (the engine-level read is what \`cat\` of a key file costs in the daemon beyond FUSE; not measured through a mount)"
if run latency "$BC" latency --data "$D" --path "$D/bench-0" --keys "$KEYS" --idle-seconds "$IDLE_SECONDS"; then
	f=$LOGS/latency.out
	printf '   %-22s %10s %9s %9s %9s %10s\n' phase reads "p50 us" "p99 us" "max us" seconds
	for ph in idle pass; do
		printf '   %-22s %10s %9s %9s %9s %10s\n' \
			"$([[ $ph == idle ]] && echo 'no pass' || echo 'during a pass')" \
			"$(metric "$f" ${ph}_reads)" "$(metric "$f" ${ph}_p50_us)" "$(metric "$f" ${ph}_p99_us)" \
			"$(metric "$f" ${ph}_max_us)" "$(metric "$f" ${ph}_seconds)"
	done
	R3=$(calc %.2f "$(metric "$f" pass_p99_us) / $(metric "$f" idle_p99_us)")
	V3=$(verdict "$R3" "<=" "$P99_TARGET_RATIO"); count_fail "$V3"
	echo "   p99 during / p99 without: $R3   target <= $P99_TARGET_RATIO: $V3"
	[[ $(metric "$f" idle_errors) == 0 && $(metric "$f" pass_errors) == 0 ]] ||
		echo "   WARNING: failed reads: $(metric "$f" idle_errors) without, $(metric "$f" pass_errors) during"
fi
rm -rf "$D"

# ---- 4. full cycle vs RocksDB ----
echo
echo "== 4. full cycle: $RECORDS updates over $KEYS keys (12-byte keys, 100-byte values), ingest + full compaction (one round each)"
D=$W/cycle
mkdir -p "$D"
CYC_OK=0
run cycle "$BC" cycle --data "$D" --records "$RECORDS" --keys "$KEYS" --backoff-ms "$CYCLE_BACKOFF_MS" &&
	CYC_OK=1
TFS_DU=$(du -sB1 "$D" | awk '{ print $1 }')
rm -rf "$D"
RDB_OK=0
RDBW_OK=0
if [[ -n $RDB ]]; then
	run rocksdb "$RDB" --dir "$W/rocksdb" --records "$RECORDS" --keys "$KEYS" && RDB_OK=1
	RDB_DU=$(du -sB1 "$W/rocksdb" | awk '{ print $1 }')
	rm -rf "$W/rocksdb"
	run rocksdb_wal "$RDB" --dir "$W/rocksdb" --records "$RECORDS" --keys "$KEYS" \
		--wal-bytes-per-sync "$WAL_BYTES_PER_SYNC" && RDBW_OK=1
	RDBW_DU=$(du -sB1 "$W/rocksdb" | awk '{ print $1 }')
	rm -rf "$W/rocksdb"
fi
# net_written FILE -> write_bytes - cancelled_write_bytes
net_written() { echo $(($(metric "$1" write_bytes) - $(metric "$1" cancelled_write_bytes))); }
# row NAME FILE DU
row() {
	local f=$2 wb cw net lb lv
	wb=$(metric "$f" write_bytes); cw=$(metric "$f" cancelled_write_bytes)
	net=$(net_written "$f"); lb=$(metric "$f" logical_bytes); lv=$(metric "$f" live_bytes)
	printf '   %-11s %8s %8s %8s %14s %12s %7s %7s %12s %6s\n' "$1" \
		"$(metric "$f" ingest_seconds)" "$(metric "$f" compact_seconds)" "$(metric "$f" total_seconds)" \
		"$wb" "$cw" "$(calc %.2f "$net / $lb")" "$(calc %.2f "$wb / $lb")" "$3" "$(calc %.2f "$3 / $lv")"
}
printf '   %-11s %8s %8s %8s %14s %12s %7s %7s %12s %6s\n' "" "ingest s" "compact" "total s" \
	write_bytes cancelled WA WA_gross "du bytes" SA
((CYC_OK)) && row topicfs "$LOGS/cycle.out" "$TFS_DU"
((RDBW_OK)) && row rocksdb_wal "$LOGS/rocksdb_wal.out" "$RDBW_DU"
((RDB_OK)) && row rocksdb "$LOGS/rocksdb.out" "$RDB_DU"
if ((CYC_OK)); then
	echo "   topicfs: $(sed -n 's/^# cleaner: //p' "$LOGS/cycle.out"); every other setting default"
	echo "     (min.cleanable.dirty.ratio 0.5, segment.bytes 100 MiB); cleaning passes: $(metric "$LOGS/cycle.out" passes_during_ingest)" \
		"during ingest (background), $(metric "$LOGS/cycle.out" passes) after it (clean_now until compacted)"
fi
echo "   rocksdb: librocksdb $(dpkg-query -W -f '${Version}' librocksdb-dev 2>/dev/null || echo '?'), $(sed -n 's/^# after CompactRange: //p' "$LOGS/rocksdb.out" 2>/dev/null)"
echo "     rocksdb_wal: the same with wal_bytes_per_sync=$WAL_BYTES_PER_SYNC, the loss window topicfs's"
echo "     flush-ahead keeps; rocksdb: default options (its WALs never reach the disk here: deleted first)"
echo "   total = ingest + compaction (clean_now until compacted / CompactRange) + close + syncfs"
echo "   write_bytes: /proc/self/io of the process, all threads, before/after: bytes it dirtied for the"
echo "   block layer (counted when dirtied; syncfs at the end flushes them); cancelled = dirty pages"
echo "   truncated or deleted before writeback (RocksDB's WALs, mostly). WA = (write_bytes - cancelled)"
echo "   / key+value bytes ingested (what reached the disk); WA_gross = write_bytes / the same."
echo "   SA = du -B1 of the data dir / live key+value bytes ($KEYS x 112)"
if ((CYC_OK && RDBW_OK)); then
	T_T=$(metric "$LOGS/cycle.out" total_seconds)
	R4T=$(calc %.2f "$T_T / $(metric "$LOGS/rocksdb_wal.out" total_seconds)")
	R4W=$(calc %.2f "$(net_written "$LOGS/cycle.out") / $(net_written "$LOGS/rocksdb_wal.out")")
	V4T=$(verdict "$R4T" "<=" "$TIME_TARGET_RATIO"); count_fail "$V4T"
	V4W=$(verdict "$R4W" "<=" "$WA_TARGET_RATIO"); count_fail "$V4W"
	echo "   against rocksdb_wal (the same loss window; the targets):"
	echo "     total time topicfs / rocksdb_wal: $R4T   target <= 1/3: $V4T"
	echo "     write amplification topicfs / rocksdb_wal: $R4W   target <= $WA_TARGET_RATIO: $V4W"
	if ((RDB_OK)); then
		R4TD=$(calc %.2f "$T_T / $(metric "$LOGS/rocksdb.out" total_seconds)")
		WA_R=$(net_written "$LOGS/rocksdb.out")
		R4WD=$(calc %.2f "$(net_written "$LOGS/cycle.out") / $WA_R")
		echo "   against rocksdb with default options (WAL never written back; not the target):"
		echo "     total time: $R4TD ($(verdict "$R4TD" "<=" "$TIME_TARGET_RATIO") at 1/3)," \
			"write amplification: $R4WD ($(verdict "$R4WD" "<=" "$WA_TARGET_RATIO") at $WA_TARGET_RATIO)"
		# The log is both the write-ahead log and the data: every acknowledged record
		# is written to it once (and segments are fsynced at roll), before any cleaning.
		FLOOR=$(calc %.2f "$LOG_BYTES / $(metric "$LOGS/cycle.out" logical_bytes)")
		echo "     (floor for topicfs without compression: the log alone, $LOG_BYTES bytes = WA $FLOOR ="
		echo "      x$(calc %.2f "$FLOOR / ($WA_R / $(metric "$LOGS/rocksdb.out" logical_bytes))") of default RocksDB's; the cleaner's own writes add the rest)"
	fi
else
	echo "   comparison not made: topicfs ran: $CYC_OK, rocksdb_wal ran: $RDBW_OK"
fi

echo
if ((ERRORS)); then
	echo "== $ERRORS benchmark(s) failed to run"
	exit 1
fi
echo "== targets: $TARGET_FAILS FAIL"
if ((TARGET_FAILS && STRICT)); then
	exit 3
fi
exit 0
