#!/bin/bash
# test_faults.sh - injected I/O faults and crashes (-o fault=OPS:N:ACTION), docs/semantics.md §10:
# "Nothing acknowledged is lost; nothing durable is corrupted by a crash at any
# instant", and a failing disk "gets a clear errno ... and changes nothing".
#
# crash/torn: the daemon _exits (status 86) right before its N-th disk operation of
# any kind (crash), or in the middle of its N-th write (torn), for N = 1..T_FAULT_MAX;
# auto_unmount removes the dead mount; a normal remount must then show every key whose
# close() or fsync() had returned 0 with exactly that value, the key in flight either
# absent or whole, nothing else, and a history that matches the log end. (A process
# crash keeps the page cache, so this checks the log's recovery, not power loss.)
# rmdir of a topic gets the same sweep: at every crash point the remount shows it
# whole or gone.
# EIO/ENOSPC: the commit that hits the fault fails with that errno from close() or
# fsync(), its value never appears (not even after a remount), the daemon lives on, and
# the other commits stand.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# Writes keys until the first error (or all of them); prints a JSON report.
WRITER='
import errno, hashlib, json, os, sys
mnt, state, stop_on_error = sys.argv[1], sys.argv[2], sys.argv[3] == "stop"
part = os.path.join(mnt, "t", "0")
r = {"acked": {}, "failed": {}, "errors": [], "mkdir": "OK"}
try:
    os.mkdir(os.path.join(mnt, "t"))
except OSError as e:
    r["mkdir"] = errno.errorcode[e.errno]
if r["mkdir"] == "OK":
    for i in range(120):
        name = "k%03d" % i
        value = hashlib.sha256(name.encode()).digest() * (1 + (i * 37) % 90)
        h = hashlib.sha256(value).hexdigest()
        step, fd = "open", None
        try:
            fd = os.open(os.path.join(part, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            step = "write"
            os.write(fd, value)
            if i % 3 == 0:
                step = "fsync"
                os.fsync(fd)
            step = "close"
            fd, f = None, fd
            os.close(f)
            r["acked"][name] = h
            if i % 10 == 9:
                step = "fsyncdir"
                d = os.open(part, os.O_RDONLY | os.O_DIRECTORY)
                os.fsync(d)
                os.close(d)
        except OSError as e:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if step != "fsyncdir":
                r["failed"][name] = h
            r["errors"].append("%s:%s:%s" % (name, step, errno.errorcode.get(e.errno, e.errno)))
            if stop_on_error:
                break
json.dump(r, open(state, "w"))
print("acked %d, errors %s" % (len(r["acked"]), r["errors"][:3]))
'

# Checks a remounted partition against the writer's report.
CHECK='
import hashlib, json, os, sys
mnt, state = sys.argv[1], sys.argv[2]
r = json.load(open(state))
part = os.path.join(mnt, "t", "0")
bad = []
if not os.path.isdir(part):
    if r["acked"]:
        bad.append("topic t is gone but %d keys were acknowledged" % len(r["acked"]))
    print("clean" if not bad else "; ".join(bad))
    sys.exit(0)
names = set(os.listdir(part))
for n, h in r["acked"].items():
    if n not in names:
        bad.append("acknowledged key %s lost" % n)
        continue
    if hashlib.sha256(open(os.path.join(part, n), "rb").read()).hexdigest() != h:
        bad.append("acknowledged key %s has another value" % n)
for n, h in r["failed"].items():
    if n in names and hashlib.sha256(open(os.path.join(part, n), "rb").read()).hexdigest() != h:
        bad.append("key %s, in flight at the fault, holds a torn value" % n)
extra = names - set(r["acked"]) - set(r["failed"])
if extra:
    bad.append("keys nobody wrote: %s" % sorted(extra)[:5])
print("clean" if not bad else "; ".join(bad[:8]))
'

# settle_dead_mount WHAT: auto_unmount's watchdog removes a crashed daemon's mount; give
# it 10 s, then do it ourselves (and say so).
settle_dead_mount() {
	local i
	for i in $(seq 100); do t_mounted "$MNT" || return 0; sleep 0.1; done
	echo "# note: $1: the dead mount was still there 10 s after the crash (auto_unmount)"
	fusermount3 -uz "$MNT" || umount -l "$MNT"
}

# One crash point: mount with the fault, write until the daemon dies, remount, check.
crash_at() {
	local n=$1 action=$2 ops=$3 rc out
	rm -rf "$DATA" && mkdir -p "$DATA"
	rc=0
	T_MOUNT_MAY_EXIT=1 t_mount -o "log.cleaner.threads=0,fault=$ops:$n:$action" || rc=$?
	if [ "$rc" = 3 ]; then
		# The fault hit while the daemon was starting: nothing was acknowledged.
		assert_eq 86 "$T_MOUNT_EXIT" "$ops:$n:$action: exit status of a daemon that crashed while starting"
		settle_dead_mount "$ops:$n:$action"
		echo '{"acked": {}, "failed": {}, "errors": [], "mkdir": "not reached"}' > "$T_CASE/state.json"
		t_mount -o log.cleaner.threads=0
		assert_eq clean "$("$T_PY" -c "$CHECK" "$MNT" "$T_CASE/state.json")" "$ops:$n:$action: mount after a crash at startup"
		mkdir -p "$MNT/t"
		echo after > "$MNT/t/0/after-crash"
		assert_cat "$MNT/t/0/after-crash" $'after\n'
		t_umount
		return 0
	fi
	out=$("$T_PY" -c "$WRITER" "$MNT" "$T_CASE/state.json" stop 2>&1)
	if "$T_PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r["errors"] or r["mkdir"] != "OK")' \
		"$T_CASE/state.json"; then
		t_umount
		fail "$ops:$n:$action: all writes succeeded: the fault never fired"
	fi
	rc=$(t_wait_exit)
	if [ "$rc" != 86 ]; then
		echo "# $ops:$n:$action: writer said: $out"
		fail "$ops:$n:$action: daemon exit status $rc, expected 86 (the fault never fired?)"
	fi
	settle_dead_mount "$ops:$n:$action"
	t_mount -o log.cleaner.threads=0
	out=$("$T_PY" -c "$CHECK" "$MNT" "$T_CASE/state.json")
	[ "$out" = clean ] || fail "$ops:$n:$action: after remount: $out (log of the crashed run: $(t_daemon_log | tail -n 3 | tr '\n' '|'))"
	if [ -d "$MNT/t/0" ]; then
		assert_eq "$(t_leo t/0)" "$(t_hist t/0)" "$ops:$n:$action: history entries vs log end after remount"
		# The log takes new records after the recovery.
		echo after > "$MNT/t/0/after-crash"
		assert_cat "$MNT/t/0/after-crash" $'after\n'
	fi
	t_umount
}

# Every kind of disk operation (topic creation's config file, appends, fsyncs, ...).
c_crash_points() {
	local n
	for n in $(seq 1 "${T_FAULT_MAX:-16}"); do crash_at "$n" crash all; done
}

c_torn_write_points() {
	local n
	for n in $(seq 1 "${T_FAULT_MAX:-12}"); do crash_at "$n" torn write; done
}

# EIO or ENOSPC at the N-th write: that commit fails with the errno and changes
# nothing; the daemon lives on and the other commits stand, also after a remount.
fail_at() {
	local n=$1 errname=$2 out errs bad
	rm -rf "$DATA" && mkdir -p "$DATA"
	t_mount -o "log.cleaner.threads=0,fault=write:$n:$errname"
	out=$("$T_PY" -c "$WRITER" "$MNT" "$T_CASE/state.json" go 2>&1)
	assert_ok mountpoint -q "$MNT"
	errs=$("$T_PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["mkdir"], " ".join(r["errors"]))' "$T_CASE/state.json")
	[ "$errs" != "OK " ] || fail "write:$n:$errname: no operation failed (the fault never fired?)"
	bad=$(printf '%s\n' $errs | grep -v -e "^OK$" -e ":$errname\$" -e "^$errname\$" || true)
	[ -z "$bad" ] || fail "write:$n:$errname: errors other than $errname: $bad"
	bad=$(printf '%s\n' $errs | grep -E ':(open|write):' || true)
	[ -z "$bad" ] || fail "write:$n:$errname: failed before the commit (open/write), not at close/fsync: $bad"
	out=$("$T_PY" -c "$CHECK" "$MNT" "$T_CASE/state.json")
	assert_eq clean "$out" "write:$n:$errname: keys while mounted"
	# A value whose commit failed is not there, now or after a remount.
	local failed
	failed=$("$T_PY" -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["failed"]))' "$T_CASE/state.json")
	for k in $failed; do assert_absent "$MNT/t/0/$k"; done
	t_remount -o log.cleaner.threads=0
	assert_eq clean "$("$T_PY" -c "$CHECK" "$MNT" "$T_CASE/state.json")" "write:$n:$errname: keys after remount"
	for k in $failed; do assert_absent "$MNT/t/0/$k"; done
	[ -d "$MNT/t/0" ] && assert_eq "$(t_leo t/0)" "$(t_hist t/0)" "write:$n:$errname: history vs log end"
	t_umount
}

c_eio() {
	local n
	for n in 3 6 9; do fail_at "$n" EIO; done
}

c_enospc() {
	local n
	for n in 3 6 9; do fail_at "$n" ENOSPC; done
}

# rmdir of a topic killed at each of its disk operations in turn: the remount shows
# the topic whole (both partitions there and taking keys, rmdir then works) or gone
# with every file of it (mkdir then works), never a half.
rmdir_crash_at() {
	local n=$1 rc left
	rm -rf "$DATA" && mkdir -p "$DATA"
	t_mount -o log.cleaner.threads=0,partitions=2
	mkdir "$MNT/t"
	echo v > "$MNT/t/1/k"
	rm "$MNT/t/1/k"                      # rmdir needs a topic without live keys
	t_umount
	t_mount -o "log.cleaner.threads=0,fault=all:$n:crash"
	if rmdir "$MNT/t" 2>/dev/null && mountpoint -q "$MNT"; then
		t_umount                         # past the last operation: finished
		t_mount -o log.cleaner.threads=0
		assert_absent "$MNT/t"
		t_umount
		return 1
	fi
	rc=$(t_wait_exit)
	assert_eq 86 "$rc" "all:$n:crash: exit status of the daemon killed in rmdir"
	settle_dead_mount "rmdir all:$n:crash"
	t_mount -o log.cleaner.threads=0
	if [ -d "$MNT/t" ]; then
		assert_eq "0 1" "$(ls "$MNT/t" | tr '\n' ' ' | sed 's/ $//')" "all:$n:crash: partitions after remount"
		echo after > "$MNT/t/0/after"
		assert_cat "$MNT/t/0/after" $'after\n'
		rm "$MNT/t/0/after"
		assert_ok rmdir "$MNT/t"
	else
		left=$(cd "$DATA" && ls -d t-* topics/t topics/t.tmp 2>/dev/null || true)
		[ -z "$left" ] || fail "all:$n:crash: topic gone, but its files stay: $left"
		assert_ok mkdir "$MNT/t"
		echo after > "$MNT/t/0/after"
		assert_cat "$MNT/t/0/after" $'after\n'
	fi
	t_umount
}

c_rmdir_crash_points() {
	local n
	for n in $(seq 1 60); do
		rmdir_crash_at "$n" || { echo "# rmdir: $((n - 1)) crash points, then it finished"; return 0; }
	done
	fail "rmdir still crashing at its 60th disk operation"
}

# DeleteRecords through the mount (setfattr of log_start_offset) killed at each of
# its disk operations in turn: the remount shows the old start with both keys, or
# the new one without the key below it; log-start-offset-checkpoint is absent or
# whole, never torn.
log_start_crash_at() {
	local n=$1 rc start keys
	rm -rf "$DATA" && mkdir -p "$DATA"
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	echo a > "$MNT/t/0/a"
	echo b > "$MNT/t/0/b"
	t_umount
	t_mount -o "log.cleaner.threads=0,fault=all:$n:crash"
	if setfattr -n user.topicfs.log_start_offset -v 1 "$MNT/t/0" 2>/dev/null && mountpoint -q "$MNT"; then
		t_umount                         # past the last operation: finished
		t_mount -o log.cleaner.threads=0
		assert_eq "1 b" "$(t_x "$MNT/t/0" log_start_offset) $(ls "$MNT/t/0")" "after the whole setfattr"
		t_umount
		return 1
	fi
	rc=$(t_wait_exit)
	assert_eq 86 "$rc" "all:$n:crash: exit status of the daemon killed in the setfattr"
	settle_dead_mount "log_start_offset all:$n:crash"
	t_mount -o log.cleaner.threads=0
	start=$(t_x "$MNT/t/0" log_start_offset)
	keys=$(ls "$MNT/t/0" | tr '\n' ' ' | sed 's/ $//')
	case "$start:$keys" in
	"0:a b") [ ! -e "$DATA/log-start-offset-checkpoint" ] ||
		fail "all:$n:crash: start 0, but the checkpoint holds $(cat "$DATA/log-start-offset-checkpoint")" ;;
	"1:b") assert_eq $'0\n1\nt 0 1' "$(cat "$DATA/log-start-offset-checkpoint")" "all:$n:crash: the checkpoint" ;;
	*) fail "all:$n:crash: log start $start with keys '$keys'" ;;
	esac
	t_umount
}

c_log_start_crash_points() {
	local n
	for n in $(seq 1 30); do
		log_start_crash_at "$n" || { echo "# log_start_offset: $((n - 1)) crash points, then it finished"; return 0; }
	done
	fail "the setfattr of log_start_offset still crashing at its 30th disk operation"
}

t_test crash_points c_crash_points
t_test rmdir_crash_points c_rmdir_crash_points
t_test log_start_crash_points c_log_start_crash_points
t_test torn_write_points c_torn_write_points
t_test eio c_eio
t_test enospc c_enospc
t_done
