#!/usr/bin/env bash
# bench/fs.sh - the filesystem benchmark: the same shell-level workloads, in one run,
# on (a) topicfs, (b) libfuse's own passthrough_ll example with its default options,
# (b') passthrough_ll -o cache=always (it keeps the page cache across opens: the fair
# comparison for re-reads), and (c) tmpfs directly. topicfs's data dir and passthrough_ll's source dir are on
# the same private tmpfs, so topicfs/passthrough_ll is the cost of topicfs over a
# plain FUSE round trip, not of a disk. topicfs is also run with its data dir on disk
# (DISK_DIR, default /var/tmp) for information.
#
# usage: bench/fs.sh [BUILD_DIR]
#   BUILD_DIR  a CMake build tree (default: build/ in the repo root; configured as
#              Release if it is not one yet); topicfs and fsops are brought up to date
# environment:
#   REPEAT=3          rounds; each round mounts every filesystem afresh and runs every
#                     workload once on each (tmpfs, passthrough_ll, passthrough_ll
#                     cache=always, topicfs, topicfs on disk, in that order); the median
#                     round is reported
#   FILES=10000       files of the small-file workloads (create, overwrite, cat, rm)
#   OVERWRITE_KEYS=1000  keys the FILES overwrites cycle over
#   WARM_KEYS=2000    keys of the warm re-read workload, read WARM_PASSES=5 times
#   BIG=100000        keys of the large partition (stat, ls -l, cp -r)
#   PUT_LINES=1000000 lines of the .put bulk ingest
#   VALUE_BYTES=64    every value
#   DISK_DIR=/var/tmp topicfs-on-disk data dir parent ("" skips that variant)
#   DISK_FULL=0       1: the disk variant runs every workload; by default it runs the
#                     small-file ones and .put only (the large-partition ones read what
#                     was just written, from the page cache: the same as tmpfs, and they
#                     are the slow ones)
#   PHASE_TIMEOUT=300 seconds any one workload may take before it counts as failed
#   STRICT=1          exit 3 when a target FAILs (default: exit 0 once everything ran,
#                     1 if a workload or a mount failed)
#
# Workloads, in this order in every round ("cold": `echo 2 > /proc/sys/vm/drop_caches`
# first, dropping the kernel's dentries and inodes, then waiting until the FUSE daemon
# has digested the FORGETs; tmpfs dentries cannot be dropped, so tmpfs is always warm):
#   create     fsops: FILES x open(O_CREAT|O_TRUNC)+write VALUE_BYTES+close, new names
#   overwrite  fsops: FILES x open(O_TRUNC)+write+close cycling over OVERWRITE_KEYS (warm)
#   cat        fsops: FILES x open+read to EOF+close, sizes checked (cold)
#   cat-warm   fsops: the first WARM_KEYS of them again, WARM_PASSES times (warm: the
#              cold cat just read them)
#   rm         fsops: FILES x unlink (cold)
#   sh-echo    bash: `echo "$v" > key` FILES times (builtin: no fork per file)
#   sh-cat     `xargs cat` of the FILES names (one or two cat processes) (cold)
#   sh-rm      `xargs rm` of the FILES names (cold)
#   stat, stat-warm, ls -l, ls -l-warm, cp -r   of a BIG-key partition (cold, warm,
#              cold, warm, cold); cp -r copies to tmpfs. The keys are put there
#              untimed: through .put on topicfs, directly in the (source) dir otherwise.
#   .put       PUT_LINES lines "KEY<TAB>VALUE" (distinct keys) by `dd bs=128k` into
#              MNT/bench/0/.put; the others get the same dd into a plain file (the rate
#              at which the filesystem takes those bytes: an upper bound, no target)
# topicfs runs everything inside MNT/bench/0 (mkdir MNT/bench: a topic with one
# partition), the others inside DIR/bench.
#
# passthrough_ll keeps one O_PATH descriptor per inode the kernel knows, so it fails
# with EMFILE past `ulimit -Hn` keys (20000 on the VM this was written on, where root
# lacks CAP_SYS_RESOURCE). When BIG does not fit, passthrough_ll skips the BIG rows
# and every filesystem also runs the stat/ls/cp workloads on a partition of MID keys
# (hard limit - 5000, at most BIG), which carries the comparison.
#
# Targets:
#   every workload: topicfs (tmpfs data) keeps >= 80% of the ops/s of passthrough_ll
#                   with each of its two option sets
#   cat-warm:       topicfs reaches >= 1.5x passthrough_ll -o cache=always
#   .put:           topicfs ingests >= 1,000,000 records/s
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$REPO/build}
REPEAT=${REPEAT:-3}
FILES=${FILES:-10000}
OVERWRITE_KEYS=${OVERWRITE_KEYS:-1000}
WARM_KEYS=${WARM_KEYS:-2000}
WARM_PASSES=${WARM_PASSES:-5}
BIG=${BIG:-100000}
PUT_LINES=${PUT_LINES:-1000000}
VALUE_BYTES=${VALUE_BYTES:-64}
DISK_DIR=${DISK_DIR-/var/tmp}
DISK_FULL=${DISK_FULL:-0}
PHASE_TIMEOUT=${PHASE_TIMEOUT:-300}
STRICT=${STRICT:-0}
RATIO_TARGET=0.8
WARM_TARGET=1.5         # cat-warm: topicfs / passthrough_ll cache=always
PUT_TARGET=1000000
DAEMON_TIMEOUT=3600     # a safety net: no daemon outlives the run by long

die() { echo "fs.sh: $*" >&2; exit 1; }
note() { echo "fs.sh: $*" >&2; }

[[ $(id -u) == 0 ]] || die "needs root (/dev/fuse, mount -t tmpfs, drop_caches)"
for tool in fusermount3 pkg-config gcc getfattr dd xargs; do
	command -v "$tool" >/dev/null || die "$tool not found"
done

# ---- build ----
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
	note "configuring $BUILD (Release)"
	cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || die "cmake failed"
fi
BUILD=$(cd "$BUILD" && pwd)
BUILD_TYPE=$(awk -F= '/^CMAKE_BUILD_TYPE:/ { print $2 }' "$BUILD/CMakeCache.txt")
[[ $BUILD_TYPE == Release ]] || note "WARNING: $BUILD is a '$BUILD_TYPE' build, not Release"
LOGS=$(mktemp -d /tmp/tfs-fs-bench.XXXXXX)
if ! make -C "$BUILD" -j"$(nproc)" topicfs >"$LOGS/make.log" 2>&1; then
	note "building topicfs failed (see $LOGS/make.log)"
	[[ -x $BUILD/topicfs ]] || die "no topicfs binary in $BUILD"
	note "using the topicfs already in $BUILD"
fi
TOPICFS=$BUILD/topicfs
FSOPS=$BUILD/fsops
if ! make -C "$BUILD" fsops >>"$LOGS/make.log" 2>&1; then
	# the helper does not need the engine: build it alone when the tree is broken
	FSOPS=$LOGS/fsops
	gcc -std=gnu11 -O2 -Wall -Wextra -o "$FSOPS" "$REPO/bench/fsops.c" ||
		die "cannot build bench/fsops.c"
fi

# passthrough_ll from Debian's libfuse3-dev examples (possibly gzipped)
PT_SRC=$(dpkg -L libfuse3-dev 2>/dev/null | grep -E '/passthrough_ll\.c(\.gz)?$' | head -n 1)
[[ -n $PT_SRC ]] || die "passthrough_ll.c not found (apt-get install libfuse3-dev)"
PT_DIR=$LOGS/passthrough_ll
mkdir -p "$PT_DIR"
for f in "$PT_SRC" "$(dirname "$PT_SRC")"/passthrough_helpers.h*; do
	[[ -f $f ]] || continue
	case $f in
	*.gz) zcat "$f" >"$PT_DIR/$(basename "${f%.gz}")" ;;
	*) cp "$f" "$PT_DIR/" ;;
	esac
done
# shellcheck disable=SC2046
gcc -O2 -Wall -o "$PT_DIR/passthrough_ll" "$PT_DIR/passthrough_ll.c" \
	$(pkg-config --cflags --libs fuse3) >"$PT_DIR/build.log" 2>&1 ||
	die "cannot build passthrough_ll (see $PT_DIR/build.log)"

# ---- the private tmpfs, mounts, cleanup ----
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
MID=$BIG
if [[ $NOFILE != unlimited ]] && ((NOFILE - 5000 < BIG)); then
	MID=$((NOFILE - 5000))
	((MID >= 1000)) || die "ulimit -n $NOFILE is too low for passthrough_ll"
fi

TM=$LOGS/tmpfs
mkdir -p "$TM"
TMPFS_KIND="private tmpfs"
if ! mount -t tmpfs -o size=8g,mode=0755 fsbench "$TM" 2>/dev/null; then
	rmdir "$TM"
	TM=$(mktemp -d /dev/shm/tfs-fs-bench.XXXXXX) || die "no tmpfs to work in"
	TMPFS_KIND="/dev/shm"
fi
DISK_BASE=
if [[ -n $DISK_DIR ]]; then
	DISK_BASE=$(mktemp -d "$DISK_DIR/tfs-fs-bench.XXXXXX") || die "cannot create a dir in $DISK_DIR"
fi

MOUNTED=()              # mount points to unmount at exit
DAEMON_PIDS=()          # timeout(1) wrappers of the daemons we started
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
	local m p
	[[ -n ${CUR_CHILD:-} ]] && kill "$CUR_CHILD" 2>/dev/null
	for m in "${MOUNTED[@]}"; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null; }
	done
	for p in "${DAEMON_PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null && kill "$p" 2>/dev/null
	done
	if [[ $TMPFS_KIND == "private tmpfs" ]]; then
		umount "$TM" 2>/dev/null || umount -l "$TM" 2>/dev/null
		rmdir "$TM" 2>/dev/null
	else
		rm -rf "$TM"
	fi
	[[ -n $DISK_BASE ]] && rm -rf "$DISK_BASE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# daemon_pid WRAPPER -> the pid of timeout(1)'s child (the daemon itself)
daemon_pid() { awk '{ print $1 }' "/proc/$1/task/$1/children" 2>/dev/null; }

# mount_fs KIND DIR MNT -> starts the daemon under timeout(1), waits for the mount;
# sets CUR_WRAPPER, CUR_DAEMON
mount_fs() {
	local kind=$1 dir=$2 mnt=$3 i
	mkdir -p "$mnt"
	MOUNTED+=("$mnt")
	case $kind in
	topicfs) timeout "$DAEMON_TIMEOUT" "$TOPICFS" -f -o auto_unmount "$dir" "$mnt" \
		>>"$LOGS/topicfs.log" 2>&1 & ;;
	pt) timeout "$DAEMON_TIMEOUT" "$PT_DIR/passthrough_ll" -f -o auto_unmount,source="$dir" "$mnt" \
		>>"$LOGS/passthrough_ll.log" 2>&1 & ;;
	ptc) timeout "$DAEMON_TIMEOUT" "$PT_DIR/passthrough_ll" -f -o auto_unmount,cache=always,source="$dir" \
		"$mnt" >>"$LOGS/passthrough_ll.log" 2>&1 & ;;
	esac
	CUR_WRAPPER=$!
	DAEMON_PIDS+=("$CUR_WRAPPER")
	for ((i = 0; i < 100; i++)); do
		mountpoint -q "$mnt" && break
		kill -0 "$CUR_WRAPPER" 2>/dev/null || break
		sleep 0.1
	done
	if ! mountpoint -q "$mnt"; then
		note "mounting $kind on $mnt failed (see $LOGS/$kind*.log)"
		return 1
	fi
	CUR_DAEMON=$(daemon_pid "$CUR_WRAPPER")
}

# unmount_fs MNT WRAPPER -> unmounts, waits for the daemon to exit (topicfs flushes)
unmount_fs() {
	local mnt=$1 wrapper=$2 i
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	for ((i = 0; i < 300; i++)); do
		kill -0 "$wrapper" 2>/dev/null || return 0
		sleep 0.1
	done
	note "daemon $wrapper did not exit after unmounting $mnt; killing it"
	kill "$wrapper" 2>/dev/null
}

# settle: waits (up to 5 s) until the current FUSE daemon stops using CPU (FORGETs
# after a cache drop, topicfs's cleaner), so a phase does not pay for the last one
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
settle() {
	local pid=${CUR_DAEMON:-} prev cur i
	[[ -n $pid ]] || return 0
	prev=$(cputicks "$pid")
	for ((i = 0; i < 50; i++)); do
		sleep 0.1
		cur=$(cputicks "$pid")
		[[ $cur == "$prev" ]] && return 0
		prev=$cur
	done
}
CAN_DROP=0
[[ -w /proc/sys/vm/drop_caches ]] && CAN_DROP=1
drop() {
	((CAN_DROP)) && echo 2 >/proc/sys/vm/drop_caches
	settle
}

# ---- recording ----
RESULTS=$LOGS/results.tsv
: >"$RESULTS"
ERRORS=0
# record WL OPS SECONDS  (SECONDS "" = failed)
record() {
	if [[ -n $3 ]]; then
		printf '%s\t%s\t%s\t%s\t%s\n' "$CUR_FS" "$ROUND" "$1" "$2" "$3" >>"$RESULTS"
	else
		printf '%s\t%s\t%s\t%s\tFAIL\n' "$CUR_FS" "$ROUND" "$1" "$2" >>"$RESULTS"
		ERRORS=$((ERRORS + 1))
	fi
}
# in_bg CMD... -> runs CMD under timeout(1) in the background and waits for it, so
# that a signal reaches our trap at once (bash runs traps only between foreground
# commands, but does interrupt `wait`); the exit trap stops CUR_CHILD
CUR_CHILD=
in_bg() {
	timeout "$PHASE_TIMEOUT" "$@" &
	CUR_CHILD=$!
	wait "$CUR_CHILD"
	local rc=$?
	CUR_CHILD=
	return $rc
}
# fsops_phase WL DIR ARGS... -> runs fsops, records its own timing
fsops_phase() {
	local wl=$1 dir=$2 out; shift 2
	settle
	if in_bg "$FSOPS" "$1" "$dir" "${@:2}" >"$LOGS/phase.out" 2>>"$LOGS/errors.log"; then
		out=$(<"$LOGS/phase.out")
		record "$wl" "$(awk '{ print $2 }' <<<"$out")" "$(awk '{ print $3 }' <<<"$out")"
	else
		note "$CUR_FS round $ROUND: $wl failed: $(tail -n 1 "$LOGS/errors.log")"
		record "$wl" 0 ""
	fi
}
# timed_phase WL OPS CMD... -> wall time of CMD (stdout discarded)
timed_phase() {
	local wl=$1 ops=$2 t0 t1; shift 2
	settle
	t0=$EPOCHREALTIME
	if in_bg "$@" >/dev/null 2>>"$LOGS/errors.log"; then
		t1=$EPOCHREALTIME
		record "$wl" "$ops" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')"
	else
		note "$CUR_FS round $ROUND: $wl failed: $(tail -n 1 "$LOGS/errors.log")"
		record "$wl" "$ops" ""
	fi
}

# ---- inputs, made once, untimed ----
V=$(printf '%*s' "$((VALUE_BYTES - 1))" '' | tr ' ' v)      # + echo's newline
"$FSOPS" lines 0 "$BIG" "$VALUE_BYTES" >"$TM/big.put" || die "fsops lines failed"
"$FSOPS" lines 0 "$MID" "$VALUE_BYTES" >"$TM/mid.put" || die "fsops lines failed"
"$FSOPS" lines 10000000 "$PUT_LINES" "$VALUE_BYTES" >"$TM/ingest.put" || die "fsops lines failed"
awk -v n="$FILES" 'BEGIN { for (i = 0; i < n; i++) printf "key-%07d\n", i }' >"$TM/names.txt"
PUT_BYTES=$(stat -c %s "$TM/ingest.put")

# run_workloads W ROOT [SRC]
#   W     the directory the small-file workloads run in (MNT/bench/0 or DIR/bench)
#   ROOT  where the MID partition goes (topicfs: MNT, whose mid/0 is made by mkdir)
#   SRC   for passthrough_ll: its source dir (keys are put there, bypassing FUSE)
run_workloads() {
	local w=$1 root=$2 src=${3:-} putf midsrc before after
	fsops_phase create "$w" create 0 "$FILES" "$VALUE_BYTES"
	fsops_phase overwrite "$w" overwrite "$OVERWRITE_KEYS" "$FILES" "$VALUE_BYTES"
	drop; fsops_phase cat "$w" read 0 "$FILES" "$VALUE_BYTES"
	fsops_phase cat-warm "$w" read 0 "$WARM_KEYS" "$VALUE_BYTES" "$WARM_PASSES"
	drop; fsops_phase rm "$w" unlink 0 "$FILES"
	# shellcheck disable=SC2016  # $1.. expand in the inner bash
	timed_phase sh-echo "$FILES" bash -c 'cd "$1" && while read -r k; do echo "$2" > "$k" || exit 1; done <"$3"' \
		_ "$w" "$V" "$TM/names.txt"
	drop
	# shellcheck disable=SC2016
	timed_phase sh-cat "$FILES" bash -c 'cd "$1" && xargs -a "$2" cat' _ "$w" "$TM/names.txt"
	drop
	# shellcheck disable=SC2016
	timed_phase sh-rm "$FILES" bash -c 'cd "$1" && xargs -a "$2" rm' _ "$w" "$TM/names.txt"

	# the large partition (and the MID one when passthrough_ll cannot hold BIG keys)
	local sizes=("big:$BIG")
	((MID < BIG)) && sizes+=("mid:$MID")
	[[ $CUR_FS == tfsdisk && $DISK_FULL != 1 ]] && sizes=()
	local s tag n dir
	for s in "${sizes[@]}"; do
		tag=${s%%:*} n=${s#*:}
		if [[ $CUR_FS == pt* && $tag == big && $MID -lt $BIG ]]; then
			continue                      # EMFILE: see the header
		fi
		if [[ $tag == big ]]; then
			dir=$w
		elif [[ $CUR_FS == tfs* ]]; then
			mkdir "$root/mid" || { note "mkdir $root/mid failed"; ERRORS=$((ERRORS + 1)); continue; }
			dir=$root/mid/0
		else
			mkdir -p "$root/mid"
			dir=$root/mid
		fi
		# populate, untimed
		if [[ $CUR_FS == tfs* ]]; then
			dd if="$TM/$tag.put" of="$dir/.put" bs=128k status=none ||
				{ note "populating $dir failed"; ERRORS=$((ERRORS + 1)); continue; }
		elif [[ $CUR_FS == pt* ]]; then
			if [[ $tag == big ]]; then midsrc=$src/bench; else midsrc=$src/mid; fi
			"$FSOPS" create "$midsrc" 0 "$n" "$VALUE_BYTES" >/dev/null
		else
			"$FSOPS" create "$dir" 0 "$n" "$VALUE_BYTES" >/dev/null
		fi
		drop; fsops_phase "stat-$tag" "$dir" stat 0 "$n"
		fsops_phase "stat-warm-$tag" "$dir" stat 0 "$n"
		drop; timed_phase "ls-$tag" "$n" ls -l "$dir"
		timed_phase "ls-warm-$tag" "$n" ls -l "$dir"
		drop; timed_phase "cp-$tag" "$n" cp -r "$dir" "$TM/cpdst"
		rm -rf "$TM/cpdst"
	done

	# bulk ingest
	putf=$w/ingest.txt
	[[ $CUR_FS == tfs* ]] && putf=$w/.put
	before=$( [[ $CUR_FS == tfs* ]] && getfattr --only-values -n user.topicfs.log_end_offset "$w" 2>/dev/null)
	timed_phase put "$PUT_LINES" dd if="$TM/ingest.put" of="$putf" bs=128k
	if [[ $CUR_FS == tfs* ]]; then
		after=$(getfattr --only-values -n user.topicfs.log_end_offset "$w" 2>/dev/null)
		# one transaction: its lines, then the COMMIT marker at the close
		if [[ -z $before || -z $after ]] || ((after - before != PUT_LINES + 1)); then
			note "$CUR_FS round $ROUND: .put took $((${after:-0} - ${before:-0})) offsets, expected $PUT_LINES records and a COMMIT marker"
			ERRORS=$((ERRORS + 1))
		fi
	fi
}

echo "== topicfs filesystem benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
DIRTY=$(git -C "$REPO" status --porcelain -- fs engine io 2>/dev/null | wc -l)
echo "   commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?') + $DIRTY changed/new files in fs/ engine/ io/; build $BUILD ($BUILD_TYPE)"
echo "   $(nproc) cpus, $(uname -r), $(free -g | awk '/^Mem:/ { print $2 " GiB RAM" }'), libfuse $(pkg-config --modversion fuse3), passthrough_ll from $PT_SRC"
echo "   work dirs on a $TMPFS_KIND ($TM); topicfs-on-disk data in ${DISK_BASE:-(skipped)}$([[ -n $DISK_BASE && $DISK_FULL != 1 ]] && echo " (small-file workloads and .put only)")$([[ -n $DISK_BASE ]] && df -PT "$DISK_BASE" | awk 'NR == 2 { print " (" $2 " on " $1 ")" }')"
echo "   ulimit -n $NOFILE: passthrough_ll can hold $MID keys$( ((MID < BIG)) && echo ", so the large-partition comparison uses $MID keys")"
echo "   load before: $(uptime)"
echo "   raw outputs: $LOGS"

FS_LIST=(tmpfs pt ptc tfs)
[[ -n $DISK_BASE ]] && FS_LIST+=(tfsdisk)
for ((ROUND = 1; ROUND <= REPEAT; ROUND++)); do
	note "round $ROUND/$REPEAT ($(uptime | sed 's/.*load/load/'))"
	R=$TM/r$ROUND
	mkdir -p "$R"
	for CUR_FS in "${FS_LIST[@]}"; do
		CUR_DAEMON=
		note "  $CUR_FS"
		case $CUR_FS in
		tmpfs)
			mkdir -p "$R/plain/bench"
			run_workloads "$R/plain/bench" "$R/plain"
			rm -rf "$R/plain"
			;;
		pt | ptc)
			mkdir -p "$R/ptsrc/bench"
			if mount_fs "$CUR_FS" "$R/ptsrc" "$R/ptmnt"; then
				run_workloads "$R/ptmnt/bench" "$R/ptmnt" "$R/ptsrc"
				unmount_fs "$R/ptmnt" "$CUR_WRAPPER"
			else
				ERRORS=$((ERRORS + 1))
			fi
			rm -rf "$R/ptsrc"
			;;
		tfs | tfsdisk)
			if [[ $CUR_FS == tfs ]]; then data=$R/tfsdata; else data=$DISK_BASE/r$ROUND; fi
			mkdir -p "$data"
			if mount_fs topicfs "$data" "$R/tfsmnt" && mkdir "$R/tfsmnt/bench" &&
				[[ -d $R/tfsmnt/bench/0 ]]; then
				run_workloads "$R/tfsmnt/bench/0" "$R/tfsmnt"
			else
				note "topicfs mount or mkdir bench failed"
				ERRORS=$((ERRORS + 1))
			fi
			mountpoint -q "$R/tfsmnt" && unmount_fs "$R/tfsmnt" "$CUR_WRAPPER"
			rm -rf "$data"
			;;
		esac
	done
	echo "   load after round $ROUND: $(uptime | sed 's/.*load/load/')"
	rm -rf "$R"
done

# ---- report ----
# stats FS WL -> "median spread%" of ops/s over the rounds, or "" if no run succeeded;
# "FAIL" if every run failed
stats() {
	awk -F'\t' -v fs="$1" -v wl="$2" '
		$1 == fs && $3 == wl { n_all++; if ($5 != "FAIL" && $5 > 0) v[++n] = $4 / $5 }
		END {
			if (!n_all) exit
			if (!n) { print "FAIL"; exit }
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			m = v[int((n + 1) / 2)]
			printf "%.0f %.0f%s\n", m, (v[n] - v[1]) * 100 / m, (n < n_all ? "!" : "")
		}' "$RESULTS"
}
cell() {
	local s
	s=$(stats "$1" "$2")
	# shellcheck disable=SC2086  # "median spread": split on purpose
	case $s in
	"") echo "-" ;;
	FAIL) echo "failed" ;;
	*) set -- $s; printf '%s (%s%%)' "$1" "${2%!}"; [[ $2 == *! ]] && printf '!' ;;
	esac
}
median_of() { local s; s=$(stats "$1" "$2"); [[ -n $s && $s != FAIL ]] && echo "${s%% *}"; }

TARGET_FAILS=0
echo
echo "== ops/s, median of $REPEAT rounds (spread = (max - min) / median); 'cold' = after echo 2 > drop_caches$( ((CAN_DROP)) || echo ' (NOT writable here: every phase was warm)')"
echo "   tmpfs: native; passthrough_ll: libfuse example, default options (cache=auto: 1 s timeouts) over tmpfs;"
echo "   pt always: the same with -o cache=always (page cache kept across opens);"
echo "   topicfs: data dir on the same tmpfs; tfs/pt, tfs/ptc and the target compare topicfs with each; disk: topicfs data in ${DISK_DIR:-(skipped)}"
printf '%-34s %-5s %7s %15s %15s %15s %15s %6s %6s %6s %15s\n' workload state ops tmpfs passthrough_ll "pt always" topicfs \
	"tfs/pt" "tfs/ptc" target "topicfs disk"
ROWS=(
	"create|create+write+close (fsops)|new"
	"overwrite|overwrite, $OVERWRITE_KEYS keys (fsops)|warm"
	"cat|open+read+close (fsops)|cold"
	"cat-warm|open+read+close, $WARM_KEYS keys x$WARM_PASSES (fsops)|warm"
	"rm|unlink (fsops)|cold"
	"sh-echo|bash: echo \$v > key|new"
	"sh-cat|xargs cat|cold"
	"sh-rm|xargs rm|cold"
	"stat-big|lstat, $BIG keys (fsops)|cold"
	"stat-warm-big|lstat, $BIG keys (fsops)|warm"
	"ls-big|ls -l, $BIG keys|cold"
	"ls-warm-big|ls -l, $BIG keys|warm"
	"cp-big|cp -r $BIG keys to tmpfs|cold"
)
if ((MID < BIG)); then
	ROWS+=(
		"stat-mid|lstat, $MID keys (fsops)|cold"
		"stat-warm-mid|lstat, $MID keys (fsops)|warm"
		"ls-mid|ls -l, $MID keys|cold"
		"ls-warm-mid|ls -l, $MID keys|warm"
		"cp-mid|cp -r $MID keys to tmpfs|cold"
	)
fi
# ratio A B -> A/B with two decimals, or - when either is missing
ratio() { if [[ -n $1 && -n $2 ]]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; else echo -; fi; }
at_least() { [[ $1 != - ]] && awk -v r="$1" -v t="$2" 'BEGIN { exit !(r >= t) }'; }
for row in "${ROWS[@]}"; do
	IFS='|' read -r wl label state <<<"$row"
	case $wl in
	*-big) ops=$BIG ;; *-mid) ops=$MID ;; *) ops=$FILES ;;
	esac
	[[ $wl == cat-warm ]] && ops=$((WARM_KEYS * WARM_PASSES))
	tfs=$(median_of tfs "$wl")
	r_pt=$(ratio "$tfs" "$(median_of pt "$wl")")
	r_ptc=$(ratio "$tfs" "$(median_of ptc "$wl")")
	target=-
	if [[ $r_pt != - || $r_ptc != - ]]; then
		target=PASS
		for r in "$r_pt" "$r_ptc"; do
			[[ $r == - ]] || at_least "$r" "$RATIO_TARGET" || target=FAIL
		done
		[[ $wl == cat-warm ]] && ! at_least "$r_ptc" "$WARM_TARGET" && target=FAIL
		[[ $target == FAIL ]] && TARGET_FAILS=$((TARGET_FAILS + 1))
	elif [[ $(stats tfs "$wl") == FAIL ]]; then
		target=FAIL
		TARGET_FAILS=$((TARGET_FAILS + 1))
	elif [[ $wl == *-big && $MID -lt $BIG ]]; then
		target="(mid)"
	fi
	ptcell=$(cell pt "$wl") ptccell=$(cell ptc "$wl")
	[[ $wl == *-big && $MID -lt $BIG ]] && ptcell="EMFILE" ptccell="EMFILE"
	printf '%-34s %-5s %7s %15s %15s %15s %15s %6s %6s %6s %15s\n' "$label" "$state" "$ops" \
		"$(cell tmpfs "$wl")" "$ptcell" "$ptccell" "$(cell tfs "$wl")" "$r_pt" "$r_ptc" "$target" \
		"$(cell tfsdisk "$wl")"
done
echo "   ops/s (spread%); ! = some rounds failed (see $LOGS/errors.log). ls and cp: entries/s."
((MID < BIG)) && echo "   EMFILE: passthrough_ll pins an O_PATH fd per known inode and ulimit -n is $NOFILE; the '$MID keys' rows carry the comparison."
echo "   target: topicfs keeps >= $RATIO_TARGET x the ops/s of both passthrough_ll runs; cat-warm >= $WARM_TARGET x pt always"

echo
echo "== bulk ingest: $PUT_LINES lines of KEY<TAB>${VALUE_BYTES}-byte value ($PUT_BYTES bytes), dd bs=128k, distinct keys"
for fs in tfs tfsdisk; do
	[[ $fs == tfsdisk && -z $DISK_BASE ]] && continue
	m=$(median_of "$fs" put)
	if [[ -z $m ]]; then
		target=FAIL
	elif ((m >= PUT_TARGET)); then
		target=PASS
	else
		target=FAIL
	fi
	[[ $target == FAIL ]] && TARGET_FAILS=$((TARGET_FAILS + 1))
	label="topicfs .put ($([[ $fs == tfs ]] && echo "tmpfs data" || echo "data in $DISK_DIR"))"
	printf '   %-36s %15s records/s  %s MB/s   target >= %s records/s: %s\n' "$label" "$(cell "$fs" put)" \
		"$(awk -v r="${m:-0}" -v b="$PUT_BYTES" -v n="$PUT_LINES" 'BEGIN { printf "%.0f", r * b / n / 1e6 }')" "$PUT_TARGET" "$target"
done
for fs in pt ptc tmpfs; do
	m=$(median_of "$fs" put)
	case $fs in
	pt) label="passthrough_ll plain file" ;; ptc) label="pt always plain file" ;; *) label="tmpfs plain file" ;;
	esac
	printf '   %-36s %15s lines/s    %s MB/s   (same dd into a plain file: what the fs takes, no target)\n' \
		"$label" "$(cell "$fs" put)" \
		"$(awk -v r="${m:-0}" -v b="$PUT_BYTES" -v n="$PUT_LINES" 'BEGIN { printf "%.0f", r * b / n / 1e6 }')"
done

echo
echo "   load after: $(uptime)"
if ((ERRORS)); then
	echo "== $ERRORS workload run(s) or mounts failed (see $LOGS/errors.log, $LOGS/*.log)"
	exit 1
fi
echo "== targets: $TARGET_FAILS FAIL"
if ((TARGET_FAILS && STRICT)); then
	exit 3
fi
exit 0
