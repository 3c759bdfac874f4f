#!/usr/bin/env bash
# bench/history.sh - listing .history/ against its views (.dirty, .clean,
# .uncleanable, .keys/KEY): each view must list at least as fast as .history/
# itself, since it reads the same records from the same cursor and only returns
# fewer of them (a region view also starts its cursor at the region's first
# offset and stops at its end).
#
# usage: bench/history.sh [BUILD_DIR]     (root: it mounts a FUSE filesystem)
#   BUILD_DIR   a CMake build tree with topicfs (default: build/ in the repo root)
# environment:
#   RECORDS=200000   records in the partition: keyed over KEYS keys, one in ten keyless
#   KEYS=20000       distinct keys
#   REPEAT=15        rounds; each lists every directory once; medians are reported
#
# The partition is built so that every region holds records: half of them are
# written, rolled and cleaned (the clean region), a quarter written and rolled (the
# dirty region), the rest left in the active segment (uncleanable). Each listing is
# `ls -f DIR > /dev/null` (readdir only; no stat per entry), after one untimed
# warm-up listing of each. The table gives each directory's entries, median seconds, entries per
# second, and its time as a fraction of .history/'s (<= 1.00: at least as fast).
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${1:-$REPO/build}
RECORDS=${RECORDS:-200000}
KEYS=${KEYS:-20000}
REPEAT=${REPEAT:-15}
PY=/usr/bin/python3

[ "$(id -u)" = 0 ] || { echo "history.sh: run as root (FUSE mount)" >&2; exit 2; }
[ -x "$BUILD_DIR/topicfs" ] || { echo "history.sh: no $BUILD_DIR/topicfs" >&2; exit 2; }

TMP=$(mktemp -d /tmp/topicfs-bench-history.XXXXXX) || exit 1
DATA=$TMP/data MNT=$TMP/mnt
mkdir -p "$DATA" "$MNT"
mount -t tmpfs -o size=2g tmpfs "$DATA" || exit 1
cleanup() {
	fusermount3 -u "$MNT" 2>/dev/null
	[ -n "${PID:-}" ] && wait "$PID" 2>/dev/null
	umount "$DATA" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

"$BUILD_DIR/topicfs" -f -o auto_unmount,log.cleaner.threads=0,segment.bytes=4194304 \
	"$DATA" "$MNT" > "$TMP/topicfs.log" 2>&1 &
PID=$!
for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { echo "history.sh: topicfs did not mount" >&2; cat "$TMP/topicfs.log" >&2; exit 1; }
mkdir "$MNT/bench"
P=$MNT/bench/0

# put N records starting at record number FROM: keyed "KEY<TAB>VALUE" lines through
# .put, one in ten keyless through .append
fill() {
	"$PY" - "$P" "$1" "$2" "$KEYS" <<'EOF'
import os, sys
p, start, n, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
keyed = "".join("k%06d\tvalue-%d\n" % (i % keys, i) for i in range(start, start + n) if i % 10)
keyless = "".join("keyless-%d\n" % i for i in range(start, start + n) if i % 10 == 0)
with open(os.path.join(p, ".put"), "w") as f:
    f.write(keyed)
with open(os.path.join(p, ".append"), "w") as f:
    f.write(keyless)
EOF
}
half=$((RECORDS / 2)) quarter=$((RECORDS / 4))
fill 0 "$half"
setfattr -n user.topicfs.roll -v 1 "$P"
setfattr -n user.topicfs.clean -v 1 "$P"
fill "$half" "$quarter"
setfattr -n user.topicfs.roll -v 1 "$P"
fill $((half + quarter)) $((RECORDS - half - quarter))

# Every round lists every directory once, in turn, so that a burst of load on the
# machine lands on all of them alike; each gets its median over the rounds.
DIRS=(".history" ".history/.dirty" ".history/.clean" ".history/.uncleanable" ".history/.keys/k000007")
for d in "${DIRS[@]}"; do ls -f "$P/$d" > /dev/null; done      # warm-up
for r in $(seq "$REPEAT"); do
	for d in "${DIRS[@]}"; do
		t0=$(date +%s%N)
		ls -f "$P/$d" > /dev/null
		t1=$(date +%s%N)
		echo "$d $(( (t1 - t0) / 1000 ))"
	done
done > "$TMP/times"
median() { awk -v d="$1" '$1 == d { print $2 / 1e6 }' "$TMP/times" | sort -g |
	awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(median .history)
printf '%-24s %9s %9s %12s %8s\n' directory entries seconds entries/s ratio
for d in "${DIRS[@]}"; do
	n=$(ls -f "$P/$d" | grep -vc '^\.\.\?$')
	t=$(median "$d")
	printf '%-24s %9d %9.4f %12.0f %8.2f\n' "$d" "$n" "$t" "$(echo "$n / $t" | bc -l)" \
		"$(echo "$t / $base" | bc -l)"
done
