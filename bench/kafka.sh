#!/usr/bin/env bash
# bench/kafka.sh - the Kafka listener against the engine it stands on, in one run:
#   (a) produce: a librdkafka producer (bench_kafka: idempotent, acks=all, 100-byte
#       values, linger.ms=5) sending RECORDS records to one partition through the
#       listener, against bench_append --producer-batches (the engine's own
#       producer-batch append, batches of 1000) of as many records; targets: >= 0.5x
#       and >= 1M records/s;
#   (b) consume: CONSUME_RECORDS records of one partition read from the beginning,
#       against `cat` of the same segment files to /dev/null (all warm: the files
#       were just written); target >= 0.5x. Three readers: (b1) bench_kafka fetch,
#       a consumer that is only Kafka's Fetch (every batch's CRC-32C checked, every
#       record walked); (b2) librdkafka's consumer; (b0) the ceiling of both,
#       bench_kafka loopback: the same files sendfile(2)d over one loopback TCP
#       connection and dropped on arrival, with no Kafka in it;
#   (c) latency: one producer at RATE records/s for LAT_SECONDS (acks=all,
#       linger.ms=0): p50 / p99 / max from send to acknowledgement (no target);
#   (d) 100 partitions, 10 producers (threads, each its own producer), MULTI_RECORDS
#       records in all: records/s, against (a) (no target).
# Each run mounts topicfs (data in DIR, default /var/tmp) with a listener on a free
# loopback port; nothing here runs in CI. Prints one table; raw outputs stay in the
# work directory, which is removed unless KEEP=1.
#
# usage: bench/kafka.sh [BUILD_DIR]      (default: build/ in the repo root, configured
#                                         RelWithDebInfo if it is not a build tree yet)
# environment: RECORDS (2000000), CONSUME_RECORDS (10000000), RATE (5000),
#   LAT_SECONDS (10), MULTI_RECORDS (2000000), DIR (/var/tmp), KEEP (0)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
RECORDS=${RECORDS:-2000000}
CONSUME_RECORDS=${CONSUME_RECORDS:-10000000}
RATE=${RATE:-5000}
LAT_SECONDS=${LAT_SECONDS:-10}
MULTI_RECORDS=${MULTI_RECORDS:-2000000}
DIR=${DIR:-/var/tmp}

[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
make -C "$BUILD" -j"$(nproc)" topicfs bench_append bench_kafka > /dev/null

WORK=$(mktemp -d "$DIR/tfs-kafka-bench.XXXXXX")
DATA=$WORK/data MNT=$WORK/mnt
mkdir -p "$DATA" "$MNT"
PID=
cleanup() {
	[ -n "$PID" ] && { umount "$MNT" 2> /dev/null || true; wait "$PID" 2> /dev/null || true; }
	[ "${KEEP:-0}" = 1 ] && echo "# kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BROKER=127.0.0.1:$PORT
"$BUILD/topicfs" -f -o "auto_unmount,listeners=PLAINTEXT://$BROKER,num.partitions=100,log.cleaner.threads=0" \
	"$DATA" "$MNT" > "$WORK/topicfs.log" 2>&1 &
PID=$!
for _ in $(seq 300); do
	mountpoint -q "$MNT" && grep -q "kafka: listening" "$WORK/topicfs.log" && break
	sleep 0.1
done
mountpoint -q "$MNT" || { cat "$WORK/topicfs.log"; exit 1; }

val() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
verdict() { awk -v r="$1" -v t="$2" 'BEGIN { print (r >= t ? "PASS" : "FAIL") }'; }

# (a)
"$BUILD/bench_append" --records "$RECORDS" --batch 1000 --writers 1 --producer-batches \
	--dir "$WORK" > "$WORK/engine.out"
mkdir "$MNT/p1"
"$BUILD/bench_kafka" produce "$BROKER" p1 "$RECORDS" > "$WORK/produce.out"
eng=$(val records_per_s "$WORK/engine.out")
kaf=$(val records_per_s "$WORK/produce.out")
# count what the log holds, not only what the client was told
leo=$(getfattr --absolute-names --only-values -n user.topicfs.log_end_offset "$MNT/p1/0")
[ "$leo" = "$RECORDS" ] || { echo "kafka.sh: p1 holds $leo records, not $RECORDS" >&2; exit 1; }

# (b)
mkdir "$MNT/c1"
"$BUILD/bench_kafka" produce "$BROKER" c1 "$CONSUME_RECORDS" > "$WORK/fill.out"
setfattr -n user.topicfs.roll -v 1 "$MNT/c1/0"
t0=$(date +%s.%N)
cat "$DATA"/c1-0/*.log > /dev/null
t1=$(date +%s.%N)
cat_rps=$(awk -v n="$CONSUME_RECORDS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
"$BUILD/bench_kafka" loopback "$DATA"/c1-0/*.log > "$WORK/loopback.out"
loop_rps=$(awk -v n="$CONSUME_RECORDS" -v s="$(val seconds "$WORK/loopback.out")" \
	'BEGIN { printf "%.0f", n / s }')
"$BUILD/bench_kafka" fetch "$BROKER" c1 "$CONSUME_RECORDS" > "$WORK/fetch.out"
fet=$(val records_per_s "$WORK/fetch.out")
"$BUILD/bench_kafka" consume "$BROKER" c1 "$CONSUME_RECORDS" > "$WORK/consume.out"
con=$(val records_per_s "$WORK/consume.out")

# (c)
mkdir "$MNT/l1"
"$BUILD/bench_kafka" latency "$BROKER" l1 "$RATE" "$LAT_SECONDS" > "$WORK/latency.out"

# (d) the topic is created by the producers' Metadata request, with num.partitions
parts=100
"$BUILD/bench_kafka" produce "$BROKER" m100 "$MULTI_RECORDS" 10 "$parts" > "$WORK/multi.out"
[ "$(find "$MNT/m100" -mindepth 1 -maxdepth 1 -type d | wc -l)" = "$parts" ] ||
	{ echo "kafka.sh: m100 does not have $parts partitions" >&2; exit 1; }
mul=$(val records_per_s "$WORK/multi.out")

ra=$(ratio "$kaf" "$eng")
rb=$(ratio "$con" "$cat_rps")
rf=$(ratio "$fet" "$cat_rps")
rl=$(ratio "$loop_rps" "$cat_rps")
printf '%-44s %14s %14s %7s %s\n' workload records/s baseline ratio target
printf '%-44s %14s %14s %7s %s\n' "(a) librdkafka produce, 1 partition" "$kaf" "$eng" "$ra" \
	"$(verdict "$ra" 0.5) >=0.5x, $(verdict "$kaf" 1000000) >=1M/s"
printf '%-44s %14s %14s %7s %s\n' "(b0) loopback TCP ceiling, same files" "$loop_rps" "$cat_rps" "$rl" \
	"- (no consumer of one connection can pass it)"
printf '%-44s %14s %14s %7s %s\n' "(b1) Fetch consumer, $CONSUME_RECORDS records" "$fet" "$cat_rps" "$rf" \
	"$(verdict "$rf" 0.5) >=0.5x; $(ratio "$fet" "$loop_rps")x the ceiling"
printf '%-44s %14s %14s %7s %s\n' "(b2) librdkafka consume, same records" "$con" "$cat_rps" "$rb" \
	"$(verdict "$rb" 0.5) >=0.5x; $(ratio "$con" "$loop_rps")x the ceiling"
printf '%-44s %14s %14s %7s %s\n' "(d) 10 producers, $parts partitions" "$mul" "$kaf" "$(ratio "$mul" "$kaf")" "-"
printf '(c) latency at %s/s: p50 %s ms, p99 %s ms, max %s ms\n' "$RATE" \
	"$(val p50_ms "$WORK/latency.out")" "$(val p99_ms "$WORK/latency.out")" "$(val max_ms "$WORK/latency.out")"
