# shellcheck shell=bash
# tests/integration/lib.sh - shared helpers for the topicfs integration tests.
#
# Every tests/integration/test_*.sh sources this file, defines one shell function per
# case and runs them with t_test; each file is one behaviour area and runs alone:
#
#   BUILD_DIR=/tmp/build-it tests/integration/test_basic.sh
#
# Output is TAP-like: "ok - NAME", "not ok - NAME" (followed by "#   " lines saying what
# was expected and what was seen, and the tail of the daemon's log), "# skip NAME: WHY".
# A skipped case never prints "ok". run.sh runs every file and sums the lines up.
#
# Model of a case. t_test runs the case function in a subshell with `set -eE -o
# pipefail`, in a fresh directory $T_CASE holding $DATA (the data directory) and $MNT
# (the mountpoint). A case mounts with t_mount (always `timeout ... topicfs -f -o
# auto_unmount,...`, so a crashed or hung daemon never wedges the next case), stops with
# t_umount (unmount, wait for the daemon, require exit status 0), and fails through the
# assert_* helpers, which print expected vs got and exit the subshell. Because the
# daemon outlives the subshell, its state (pid, exit status, log) lives in files under
# $T_CASE/.d/N/, so whatever the case leaves mounted is stopped and checked by t_test,
# and an EXIT trap unmounts and kills everything this file started, even on ^C.
#
# Environment:
#   BUILD_DIR   where CMake built `topicfs` (default: <repo>/build)
#   TOPICFS     the daemon binary (default: $BUILD_DIR/topicfs)
#   T_TIMEOUT   seconds before timeout(1) sends TERM to a daemon (default 300)
#   T_OPTS      extra -o options for every mount (e.g. io=sync)
#   T_KEEP=1    keep the per-file temp directory; T_VERBOSE=1 show output of passing cases
#   T_ONLY      a regex: run only the cases of a file whose names match
#   TMPDIR      where the per-file temp directory goes (default /tmp)
#   Durations of the long cases: T_CONC_SECS (30), T_FOCUS_SECS (8), T_STRESS_SECS (20);
#   crash points of test_faults.sh: T_FAULT_MAX (16 crash, 12 torn).

T_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T_REPO=$(cd "$T_LIB_DIR/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$T_REPO/build}
TOPICFS=${TOPICFS:-$BUILD_DIR/topicfs}
case $TOPICFS in /*) ;; *) TOPICFS=$PWD/$TOPICFS ;; esac
T_PY=/usr/bin/python3           # the system python: the non-root user can run it too
T_FILE=$(basename "$0" .sh)
T_PASS=0 T_FAIL=0 T_SKIP=0
export LC_ALL=C

T_DIR=$(mktemp -d "${TMPDIR:-/tmp}/topicfs-it.$T_FILE.XXXXXX") || exit 1
chmod 755 "$T_DIR"              # the permissions cases run tools as another user
T_SYS=$T_DIR/tsys.py

# ---------------------------------------------------------------------------------
# Cleanup: stop every daemon, unmount every extra mount, run registered undo hooks.

# t_mounted DIR: DIR is a mount point in the mount table. Unlike mountpoint(1) this
# also sees a dead FUSE mount, whose stat() fails with ENOTCONN.
t_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# t__stop_force STATE_DIR: lazy unmount, TERM, then KILL the timeout(1) that wraps it.
t__stop_force() {
	local st=$1 mnt pid i
	mnt=$(cat "$st/mnt")
	if t_mounted "$mnt"; then
		fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	fi
	[ -e "$st/rc" ] && return 0
	pid=$(cat "$st/pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 50); do [ -e "$st/rc" ] && return 0; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
}

t__undo_case() {
	local c=$1 st m
	for st in "$c"/.d/*/; do [ -d "$st" ] && t__stop_force "${st%/}"; done
	if [ -f "$c/.hooks" ]; then
		# Undo hooks run last registered first (e.g. restore a file, then remove a dir).
		tac "$c/.hooks" | while IFS= read -r h; do eval "$h" >/dev/null 2>&1; done
		rm -f "$c/.hooks"
	fi
	if [ -f "$c/.mounts" ]; then
		tac "$c/.mounts" | while IFS= read -r m; do
			t_mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
		done
		rm -f "$c/.mounts"
	fi
}

t__cleanup() {
	local c
	for c in "$T_DIR"/*/; do [ -d "$c" ] && t__undo_case "${c%/}"; done
	if [ "${T_KEEP:-0}" = 1 ]; then
		echo "# kept $T_DIR"
	else
		rm -rf --one-file-system "$T_DIR" 2>/dev/null
	fi
}
trap t__cleanup EXIT
trap 'exit 130' INT TERM HUP

# t_on_exit CMD: run CMD (a shell string) when the case ends, pass or fail.
t_on_exit() { printf '%s\n' "$*" >> "$T_CASE/.hooks"; }
# t_track_mount DIR: DIR is a mount (tmpfs...) this case made; unmount it at the end.
t_track_mount() { printf '%s\n' "$1" >> "$T_CASE/.mounts"; }

# ---------------------------------------------------------------------------------
# Running cases.

# t_test NAME FUNCTION [ARGS...]: run one case and print its TAP line.
t_test() {
	local name=$1 rc out
	shift
	# T_ONLY=REGEX runs only the matching cases of a file.
	if [ -n "${T_ONLY:-}" ] && ! printf '%s\n' "$name" | grep -Eq -- "$T_ONLY"; then
		return 0
	fi
	T_CASE=$T_DIR/$name
	DATA=$T_CASE/data
	MNT=$T_CASE/mnt
	mkdir -p "$T_CASE/.d" "$DATA" "$MNT"
	chmod 755 "$T_CASE"
	out=$T_CASE/.out
	(
		set -eE -o pipefail
		shopt -s inherit_errexit
		# shellcheck disable=SC2154
		trap 'r=$?; echo "# ${FUNCNAME[0]:-case}, line $LINENO: command failed (rc=$r): $BASH_COMMAND"' ERR
		cd "$T_CASE"
		"$@"
	) > "$out" 2>&1 < /dev/null
	rc=$?
	t__reap "$T_CASE" >> "$out" 2>&1 || { [ "$rc" = 0 ] && rc=1; }
	t__undo_case "$T_CASE"
	case $rc in
	0)
		echo "ok - $name"; T_PASS=$((T_PASS + 1))
		[ "${T_VERBOSE:-0}" = 1 ] && sed 's/^/#   /' "$out"
		;;
	77)
		echo "# skip $name: $(cat "$T_CASE/.skip" 2>/dev/null)"; T_SKIP=$((T_SKIP + 1))
		;;
	*)
		echo "not ok - $name"; T_FAIL=$((T_FAIL + 1))
		sed 's/^/#   /' "$out" | tail -n 80
		;;
	esac
	return 0
}

# t_skip NAME REASON: a case that cannot run here (say why).
t_skip() { echo "# skip $1: $2"; T_SKIP=$((T_SKIP + 1)); }

# skip REASON (inside a case): end the case as skipped.
skip() { printf '%s\n' "$*" > "$T_CASE/.skip"; exit 77; }

# t_done: summary line of this file; exit status 1 if anything failed.
t_done() {
	echo "# $T_FILE: $T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
	[ "$T_FAIL" = 0 ]
	exit
}

# t_require_root / t_require_daemon: preconditions of a whole file.
t_require_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "# skip $T_FILE: needs root (mounts FUSE and tmpfs)"; T_SKIP=$((T_SKIP + 1)); t_done
	fi
}
t_require_daemon() {
	t_require_root
	if [ ! -x "$TOPICFS" ]; then
		# A missing binary is a failure, not a skip: the suite would otherwise "pass".
		echo "not ok - $T_FILE: daemon binary $TOPICFS not built (set BUILD_DIR or TOPICFS)"
		T_FAIL=$((T_FAIL + 1)); t_done
	fi
	[ -e /dev/fuse ] || { echo "not ok - $T_FILE: /dev/fuse missing"; T_FAIL=$((T_FAIL + 1)); t_done; }
}

# need CMD...: skip the case unless every command exists.
need() {
	local c
	for c; do command -v "$c" >/dev/null 2>&1 || skip "$c is not installed"; done
}

# ---------------------------------------------------------------------------------
# Mounting.

# t_mount [-o OPTS] [DATA [MNT]]: start `topicfs -f` under timeout with auto_unmount
# and return once MNT is a mountpoint; fail (with the daemon's log) if it never is.
# With T_MOUNT_MAY_EXIT=1, a daemon that exits before mounting makes t_mount return 3
# with its exit status in T_MOUNT_EXIT instead (fault injection at startup).
t_mount() {
	local opts="" data mnt st n i
	if [ "${1:-}" = -o ]; then opts=$2; shift 2; fi
	data=${1:-$DATA} mnt=${2:-$MNT}
	[ -n "${T_OPTS:-}" ] && opts=${opts:+$opts,}$T_OPTS
	mkdir -p "$data" "$mnt"
	n=$(find "$T_CASE/.d" -mindepth 1 -maxdepth 1 | wc -l)
	st=$T_CASE/.d/$n
	mkdir -p "$st"
	printf '%s\n' "$mnt" > "$st/mnt"
	printf '%s\n' "-f -o auto_unmount${opts:+,$opts} $data $mnt" > "$st/args"
	(
		set +eE; trap - ERR
		timeout --signal=TERM --kill-after=10 "${T_TIMEOUT:-300}" \
			"$TOPICFS" -f -o "auto_unmount${opts:+,$opts}" "$data" "$mnt" &
		echo $! > "$st/pid"
		wait $!
		echo $? > "$st/rc.tmp" && mv "$st/rc.tmp" "$st/rc"   # whole or absent: readers test -e
	) > "$st/log" 2>&1 < /dev/null &
	for i in $(seq 300); do
		mountpoint -q "$mnt" && return 0
		if [ -e "$st/rc" ]; then
			touch "$st/checked"
			if [ "${T_MOUNT_MAY_EXIT:-0}" = 1 ]; then
				T_MOUNT_EXIT=$(cat "$st/rc")
				return 3
			fi
			echo "# topicfs -o auto_unmount${opts:+,$opts} $data $mnt exited with $(cat "$st/rc") before mounting:"
			sed 's/^/#     /' "$st/log" | tail -n 20
			exit 1
		fi
		sleep 0.1
	done
	echo "# $mnt did not become a mountpoint within 30 s"
	exit 1
}

# t__state MNT: the state dir of the daemon serving MNT that nobody checked yet.
t__state() {
	local st
	for st in "$T_CASE"/.d/*/; do
		st=${st%/}
		[ -e "$st/checked" ] && continue
		[ "$(cat "$st/mnt")" = "$1" ] && { echo "$st"; return 0; }
	done
	return 1
}

# t__stop STATE_DIR: unmount, wait for the daemon, require exit status 0.
t__stop() {
	local st=$1 mnt i rc
	mnt=$(cat "$st/mnt")
	touch "$st/checked"
	if ! [ -e "$st/rc" ] && t_mounted "$mnt"; then
		for i in $(seq 50); do
			umount "$mnt" 2>/dev/null && break
			fusermount3 -u "$mnt" 2>/dev/null && break
			sleep 0.2          # EBUSY: a process of the case may still be closing a file
		done
		if t_mounted "$mnt"; then
			echo "# cannot unmount $mnt:"; fuser -vm "$mnt" 2>&1 | sed 's/^/#     /'
			t__stop_force "$st"; return 1
		fi
	fi
	for i in $(seq 600); do [ -e "$st/rc" ] && break; sleep 0.1; done
	if ! [ -e "$st/rc" ]; then
		echo "# topicfs did not exit within 60 s of the unmount of $mnt"
		t__stop_force "$st"; return 1
	fi
	rc=$(cat "$st/rc")
	if [ "$rc" != 0 ]; then
		echo "# topicfs ($(cat "$st/args")) exited with status $rc; its log ends:"
		sed 's/^/#     /' "$st/log" | tail -n 30
		return 1
	fi
}

# t_umount [MNT]: unmount and require a clean daemon exit (status 0).
t_umount() {
	local st
	st=$(t__state "${1:-$MNT}") || { echo "# t_umount: no daemon serves ${1:-$MNT}"; exit 1; }
	t__stop "$st" || exit 1
}

# t_remount [-o OPTS]: t_umount, then t_mount of the same data dir and mountpoint.
t_remount() { t_umount "$MNT"; t_mount "$@"; }

# t_wait_exit [MNT]: wait (up to 60 s) for the daemon to exit by itself; print its status.
t_wait_exit() {
	local st i
	st=$(t__state "${1:-$MNT}") || { echo "# no daemon serves ${1:-$MNT}" >&2; return 1; }
	for i in $(seq 600); do [ -e "$st/rc" ] && break; sleep 0.1; done
	touch "$st/checked"
	cat "$st/rc" 2>/dev/null || { t__stop_force "$st"; echo none; }
}

# t_daemon_log [MNT]: the log (stdout+stderr) of the daemon serving MNT.
t_daemon_log() {
	local st
	for st in "$T_CASE"/.d/*/; do
		[ "$(cat "$st/mnt")" = "${1:-$MNT}" ] && cat "$st/log"
	done
}

# t__reap CASE: stop what the case left running; a daemon that died on its own fails.
t__reap() {
	local c=$1 st ok=0
	for st in "$c"/.d/*/; do
		[ -d "$st" ] || continue
		st=${st%/}
		[ -e "$st/checked" ] && continue
		if [ -e "$st/rc" ]; then
			echo "# topicfs serving $(cat "$st/mnt") exited by itself with status $(cat "$st/rc"); log ends:"
			sed 's/^/#     /' "$st/log" | tail -n 30
			touch "$st/checked"; ok=1
		else
			t__stop "$st" || ok=1
		fi
	done
	return $ok
}

# ---------------------------------------------------------------------------------
# Assertions. Each prints what was expected and what was seen, then fails the case.

t__show() {   # a value for a message: printable, at most 300 bytes
	local v=$1
	[ "${#v}" -gt 300 ] && v="${v:0:300}... (${#1} chars)"
	printf '%q' "$v"
}

fail() { echo "# FAIL: $*"; exit 1; }

# assert_eq EXPECTED GOT [WHAT]
assert_eq() {
	[ "$1" = "$2" ] && return 0
	echo "# FAIL: ${3:-value}: expected $(t__show "$1"), got $(t__show "$2")"
	exit 1
}
# assert_ne UNEXPECTED GOT [WHAT]
assert_ne() {
	[ "$1" != "$2" ] && return 0
	echo "# FAIL: ${3:-value}: expected anything but $(t__show "$1")"
	exit 1
}
# assert_match REGEX GOT [WHAT]  (extended regex, whole string)
assert_match() {
	printf '%s' "$2" | grep -Eqx -- "$1" && return 0
	echo "# FAIL: ${3:-value}: expected to match /$1/, got $(t__show "$2")"
	exit 1
}
# assert_ok CMD...: CMD exits 0 (its output is shown if not).
assert_ok() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	[ "$rc" = 0 ] && return 0
	echo "# FAIL: expected success of: $*"
	echo "#   exit status $rc, output: $(t__show "$out")"
	exit 1
}
# assert_fails CMD...: CMD exits non-zero.
assert_fails() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	[ "$rc" != 0 ] && return 0
	echo "# FAIL: expected failure of: $*  (output $(t__show "$out"))"
	exit 1
}
# assert_errno EXPECTED OP ARGS...: the syscall(s) of t_sys OP give EXPECTED
# ("OK", an errno name such as "ENOENT", or "STEP:ERRNO" with T_SYS_STEP=1).
# EXPECTED may list alternatives separated by "|".
assert_errno() {
	local want=$1 got
	shift
	got=$(t_sys "$@")
	case "|$want|" in *"|$got|"*) return 0 ;; esac
	echo "# FAIL: $*: expected $want, got $got"
	exit 1
}
# assert_cat FILE EXPECTED: the content of FILE (read with cat) is EXPECTED.
assert_cat() {
	local got rc=0
	got=$(cat "$1"; echo x) || rc=$?
	[ "$rc" = 0 ] || fail "cat $1 failed with $rc"
	assert_eq "$2" "${got%x}" "content of $1"
}
# assert_absent PATH: lookup gives ENOENT.
assert_absent() { assert_errno ENOENT stat "$1"; }

# ---------------------------------------------------------------------------------
# Observing the log through the mount.

# t_hist T/P: number of records on disk (entries of .history).
t_hist() { ls -A "$MNT/$1/.history" | wc -l; }
# t_x PATH NAME: the value of user.topicfs.NAME (fails if absent).
t_x() { getfattr --absolute-names --only-values -n "user.topicfs.$2" "$1"; }
# t_xhex PATH NAME: the value of user.topicfs.NAME in hex (or the errno name).
t_xhex() { t_sys xhex "$1" "$2"; }
# t_sys_x PATH NAME: the value of user.topicfs.NAME as text, or the errno name.
t_sys_x() { t_sys xtext "$1" "$2"; }
# t_leo T/P: user.topicfs.log_end_offset of the partition.
t_leo() { t_x "$MNT/$1" log_end_offset; }
# t_last T/P: name of the newest history entry.
t_last() { ls -A "$MNT/$1/.history" | sort | tail -n 1; }
# t_off N: offset N as a history entry name (20 digits).
t_off() { printf '%020d' "$1"; }

# assert_records T/P N CMD...: CMD appends exactly N records (history and log end).
assert_records() {
	local tp=$1 n=$2 h0 l0 h1 l1 rc=0
	shift 2
	h0=$(t_hist "$tp"); l0=$(t_leo "$tp")
	"$@" || rc=$?
	[ "$rc" = 0 ] || fail "$* exited with $rc"
	h1=$(t_hist "$tp"); l1=$(t_leo "$tp")
	assert_eq "$n" $((h1 - h0)) "history entries appended by: $*"
	assert_eq "$n" $((l1 - l0)) "log_end_offset advance by: $*"
}

# t_batches T P: the record batches in DATA/T-P/*.log, one "BASE LAST COUNT" line each,
# read straight from the segment files (RecordBatch v2 header fields).
t_batches() { "$T_PY" "$T_SYS" batches "$DATA/$1-$2"; }
# assert_one_batch T P FIRST LAST: offsets FIRST..LAST are one batch, nothing else in it.
assert_one_batch() {
	local b
	b=$(t_batches "$1" "$2" | awk -v f="$3" -v l="$4" '$1 <= f && $2 >= f')
	assert_eq "$3 $4 $(($4 - $3 + 1))" "$b" "batch holding offset $3 in $DATA/$1-$2"
}

# t_manifest DIR: "topic/partition/hexname size sha256" for every key under mount DIR.
t_manifest() { "$T_PY" "$T_SYS" manifest "${1:-$MNT}"; }
# t_hmanifest DIR: "topic/partition/offset size sha256 tombstone keyhex" for every record.
t_hmanifest() { "$T_PY" "$T_SYS" hmanifest "${1:-$MNT}"; }

# assert_same_file A B WHAT: A and B have identical content (diff shown otherwise).
assert_same_file() {
	cmp -s "$1" "$2" && return 0
	echo "# FAIL: ${3:-files differ}: $1 vs $2"
	diff "$1" "$2" | head -n 20 | sed 's/^/#   /'
	exit 1
}

# ---------------------------------------------------------------------------------
# t_sys OP ARGS...: do syscalls in python and print OK or the errno name, since shell
# tools print messages, not errnos. DATA arguments: literal text, "hex:HEX", "x*N"
# (N bytes of 'x') or "file:PATH". Ops writing a value report the failing step as
# "STEP:ERRNO" when T_SYS_STEP=1 (steps: open, write, fsync, close).
t_sys() { "$T_PY" "$T_SYS" "$@"; }
# t_as USER CMD...: run CMD as USER (real and effective ids, with its groups).
t_as() {
	local u=$1
	shift
	setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --init-groups -- "$@"
}

cat > "$T_SYS" <<'PYEOF'
import errno, hashlib, os, stat, sys

STEP = os.environ.get("T_SYS_STEP") == "1"


def ename(e):
    return errno.errorcode.get(e.errno, "E%s" % e.errno)


def res(step, e):
    return ("%s:%s" % (step, ename(e))) if STEP else ename(e)


def data(spec):
    if spec.startswith("hex:"):
        return bytes.fromhex(spec[4:])
    if spec.startswith("x*"):
        return b"x" * int(spec[2:])
    if spec.startswith("file:"):
        with open(spec[5:], "rb") as f:
            return f.read()
    return os.fsencode(spec)


def write_all(fd, buf):
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


def put(path, spec, flags, fsync=False, offset=None):
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return res("open", e)
    err, step = None, "write"
    try:
        if offset is None:
            write_all(fd, data(spec))
        else:
            os.pwrite(fd, data(spec), offset)
        if fsync:
            step = "fsync"
            os.fsync(fd)
    except OSError as e:
        err = res(step, e)
    try:
        os.close(fd)
    except OSError as e:
        if err is None:
            err = res("close", e)
    return err or ("close:OK" if STEP else "OK")


MODES = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR,
         "wc": os.O_WRONLY | os.O_CREAT, "wct": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
         "wcx": os.O_WRONLY | os.O_CREAT | os.O_EXCL, "a": os.O_WRONLY | os.O_APPEND,
         "d": os.O_RDONLY | os.O_DIRECTORY}


def encode_key(k):
    if k == b"":
        return b"%"
    out = bytearray()
    for i, c in enumerate(k):
        if c in (0x25, 0x2F, 0x7F) or c < 0x20 or (i == 0 and c == 0x2E):
            out += b"%%%02X" % c
        else:
            out.append(c)
    return bytes(out)


def batches(d):
    """Walk RecordBatch v2 headers: baseOffset(8) batchLength(4) leaderEpoch(4)
    magic(1) crc(4) attributes(2) lastOffsetDelta(4) ... recordsCount at 57(4)."""
    for name in sorted(os.listdir(d)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(d, name), "rb") as f:
            b = f.read()
        pos = 0
        while pos + 61 <= len(b):
            base = int.from_bytes(b[pos:pos + 8], "big")
            blen = int.from_bytes(b[pos + 8:pos + 12], "big")
            if blen == 0 or pos + 12 + blen > len(b):
                break
            last = base + int.from_bytes(b[pos + 23:pos + 27], "big")
            count = int.from_bytes(b[pos + 57:pos + 61], "big")
            print(base, last, count)
            pos += 12 + blen


def sha(path):
    with open(path, "rb") as f:
        b = f.read()
    return "%d %s" % (len(b), hashlib.sha256(b).hexdigest())


def xattr(path, name):
    try:
        return os.getxattr(path, "user.topicfs." + name).hex()
    except OSError as e:
        return ename(e)


def partitions(mnt):
    mnt = os.fsencode(mnt)
    for t in sorted(os.listdir(mnt)):
        tp = os.path.join(mnt, t)
        if not os.path.isdir(tp):
            continue
        for p in sorted(os.listdir(tp)):
            yield t + b"/" + p, os.path.join(tp, p)


def manifest(mnt):
    for tp, pp in partitions(mnt):
        for k in sorted(os.listdir(pp)):
            print("%s/%s %s" % (tp.decode(), k.hex(), sha(os.path.join(pp, k))))


def hmanifest(mnt):
    for tp, pp in partitions(mnt):
        h = os.path.join(pp, b".history")
        for o in sorted(os.listdir(h)):
            p = os.path.join(h, o)
            print("%s/%s %s %s %s" % (tp.decode(), o.decode(), sha(p),
                                      xattr(p, "tombstone"), xattr(p, "key")))


def main(a):
    op, a = a[0], [os.fsencode(x) if i == 0 else x for i, x in enumerate(a[1:])]
    p = a[0] if a else None
    W = os.O_WRONLY
    if op == "encode":          # encode HEXKEY -> the canonical name, raw bytes
        sys.stdout.buffer.write(encode_key(bytes.fromhex(a[0].decode())))
        return
    if op == "batches":
        return batches(os.fsdecode(p))
    if op == "manifest":
        return manifest(p)
    if op == "hmanifest":
        return hmanifest(p)
    if op == "xhex":            # xhex PATH NAME: the attribute user.topicfs.NAME in hex
        print(xattr(p, a[1]))
        return
    if op == "xtext":           # xtext PATH NAME: the attribute as text, or the errno name
        try:
            sys.stdout.buffer.write(os.getxattr(p, "user.topicfs." + a[1]) + b"\n")
        except OSError as e:
            print(ename(e))
        return
    if op == "put":             # put PATH DATA [fsync]: O_TRUNC|O_CREAT, write, close
        print(put(p, a[1], W | os.O_CREAT | os.O_TRUNC, len(a) > 2 and a[2] == "fsync"))
        return
    if op == "putx":            # putx PATH DATA: O_CREAT|O_EXCL
        print(put(p, a[1], W | os.O_CREAT | os.O_EXCL))
        return
    if op == "append":          # append PATH DATA: O_APPEND|O_CREAT (like >>)
        print(put(p, a[1], W | os.O_CREAT | os.O_APPEND))
        return
    if op == "patch":           # patch PATH OFFSET DATA: pwrite, no O_TRUNC
        print(put(p, a[2], W, offset=int(a[1])))
        return
    if op == "writes":          # writes PATH DATA...: one write(2) per DATA, each reported
        out = []
        try:
            fd = os.open(p, W)
        except OSError as e:
            print("open:" + ename(e))
            return
        out.append("open:OK")
        for i, spec in enumerate(a[1:], 1):
            try:
                n = os.write(fd, data(spec))
                out.append("write%d:%s" % (i, "OK" if n == len(data(spec)) else "short%d" % n))
            except OSError as e:
                out.append("write%d:%s" % (i, ename(e)))
        try:
            os.close(fd)
            out.append("close:OK")
        except OSError as e:
            out.append("close:" + ename(e))
        print(" ".join(out))
        return
    try:
        if op == "stat":
            os.stat(p)
        elif op == "lstat":
            os.lstat(p)
        elif op == "open":      # open PATH MODE: open and close, nothing written
            fd = os.open(p, MODES[a[1]], 0o644)
            os.close(fd)
        elif op == "read":
            with open(p, "rb") as f:
                f.read()
        elif op == "unlink":
            os.unlink(p)
        elif op == "rmdir":
            os.rmdir(p)
        elif op == "mkdir":
            os.mkdir(p, int(a[1], 8) if len(a) > 1 else 0o755)
        elif op == "rename":
            os.rename(p, os.fsencode(a[1]))
        elif op == "link":
            os.link(p, os.fsencode(a[1]))
        elif op == "symlink":   # symlink TARGET PATH
            os.symlink(p, os.fsencode(a[1]))
        elif op == "mkfifo":
            os.mkfifo(p)
        elif op == "mknod_chr":
            os.mknod(p, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        elif op == "truncate":
            os.truncate(p, int(a[1]))
        elif op == "setxattr":
            os.setxattr(p, a[1], data(a[2]))
        elif op == "getxattr":
            os.getxattr(p, a[1])
        elif op == "removexattr":
            os.removexattr(p, a[1])
        elif op == "chmod":
            os.chmod(p, int(a[1], 8))
        elif op == "fsync":     # fsync PATH: open read-only (directories too), fsync
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            sys.exit("tsys: unknown op " + op)
    except OSError as e:
        print(ename(e))
        return
    print("OK")


main(sys.argv[1:])
PYEOF
chmod 644 "$T_SYS"

# t_user_ensure USER: USER exists (created for this file, removed at the case's end if
# it was not there), and setpriv is installed; skips the case otherwise.
t_user_ensure() {
	if ! id "$1" > /dev/null 2>&1; then
		need useradd
		useradd -M -r -s /usr/sbin/nologin -d /nonexistent "$1" || skip "cannot create user $1"
		t_on_exit "userdel '$1'"
	fi
	need setpriv
}
# assert_errno_as USER EXPECTED OP ARGS...: assert_errno, with t_sys run as USER.
assert_errno_as() {
	local u=$1 want=$2 got
	shift 2
	got=$(t_as "$u" "$T_PY" "$T_SYS" "$@" 2>&1)
	case "|$want|" in *"|$got|"*) return 0 ;; esac
	echo "# FAIL: as $u: $*: expected $want, got $got"
	exit 1
}

# t_kill_daemon: kill -9 of the daemon serving $MNT, then wait for its mount to go.
t_kill_daemon() {
	local st pid i
	st=$(ls -d "$T_CASE"/.d/*/ | sort -V | tail -n 1)
	st=${st%/}
	pid=$(pgrep -P "$(cat "$st/pid")" -x topicfs) || fail "no daemon under $(cat "$st/pid")"
	kill -KILL "$pid"
	for i in $(seq 100); do [ -e "$st/rc" ] && break; sleep 0.1; done
	touch "$st/checked"
	for i in $(seq 100); do t_mounted "$MNT" || return 0; sleep 0.1; done
	fusermount3 -uz "$MNT" || umount -l "$MNT"
}
