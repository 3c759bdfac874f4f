#!/bin/bash
# test_enospc.sh - a full disk (docs/semantics.md §10: "a full disk gets a clear errno and log line,
# and changes nothing"). The data dir lives on an 8 MiB tmpfs; keys are written until a
# commit fails. The failure must be ENOSPC from close() or fsync(), the failed value must
# not become visible (new key absent, old value kept, no record), reads keep working,
# and once space is freed writes work again and a remount shows exactly what was
# committed. An append-only log frees nothing on rm, so space is freed by deleting a
# filler file placed on the same tmpfs beforehand.
. "$(dirname "$0")/lib.sh"
t_require_daemon

FILL='
import errno, hashlib, json, os, sys
part, state = sys.argv[1], sys.argv[2]
leo = lambda: int(os.getxattr(part, "user.topicfs.log_end_offset"))
done, out = {}, {"fail": None, "errors": []}

def put(name, value, fsync):
    fd = os.open(os.path.join(part, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    step = "write"
    try:
        os.write(fd, value)
        if fsync:
            step = "fsync"
            os.fsync(fd)
    except OSError as e:
        try:
            os.close(fd)
        except OSError:
            pass
        return "%s:%s" % (step, errno.errorcode[e.errno])
    try:
        os.close(fd)
    except OSError as e:
        return "close:%s" % errno.errorcode[e.errno]
    return None

def read(name):
    try:
        with open(os.path.join(part, name), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None

for i in range(400):                      # 400 x 64 KiB = 25 MiB > 8 MiB
    name, value = "k%03d" % i, os.urandom(65536)
    before = leo()
    r = put(name, value, fsync=(i % 2 == 1))
    if r is None:
        done[name] = hashlib.sha256(value).hexdigest()
        continue
    out["fail"] = r
    if leo() != before:
        out["errors"].append("log end moved from %d to %d on the failed commit" % (before, leo()))
    seen = read(name)
    if seen is not None:
        out["errors"].append("the failed new key %s is visible: %d bytes%s" % (
            name, len(seen), ", the failed value" if seen == value else ""))
    # Overwriting an existing key fails the same way and keeps its value.
    old = read("k000")
    r2 = put("k000", os.urandom(65536), fsync=False)
    if r2 is None:
        out["errors"].append("overwrite of k000 succeeded on a full disk")
        done["k000"] = hashlib.sha256(read("k000")).hexdigest()
    elif read("k000") != old:
        out["errors"].append("k000 changed after a failed overwrite (%s)" % r2)
    out["fail2"] = r2
    break
out["committed"] = len(done)
out["leo"] = leo()
json.dump({"done": done, "out": out}, open(state, "w"))
print(json.dumps(out))
'

CHECK='
import hashlib, json, os, sys
part, state = sys.argv[1], sys.argv[2]
s = json.load(open(state))
bad = []
for name, h in s["done"].items():
    try:
        with open(os.path.join(part, name), "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != h:
                bad.append(name + " differs")
    except OSError as e:
        bad.append("%s: %s" % (name, e))
extra = set(os.listdir(part)) - set(s["done"])
if extra:
    bad.append("unexpected keys %s" % sorted(extra)[:5])
print("clean" if not bad else " ".join(bad[:10]))
'

c_full_disk() {
	need mount
	local fs=$T_CASE/fs out
	mkdir "$fs"
	mount -t tmpfs -o size=8m tmpfs "$fs" || skip "cannot mount a tmpfs here"
	t_track_mount "$fs"
	head -c 3145728 /dev/zero > "$fs/filler"         # 3 MiB to give back later
	DATA=$fs/data
	# No cleaner: its copies would compete for the space this test measures.
	t_mount -o segment.bytes=1048576,log.cleaner.threads=0
	mkdir "$MNT/t"
	out=$("$T_PY" -c "$FILL" "$MNT/t/0" "$T_CASE/state.json")
	echo "# fill: $out"
	local fail fail2 errors committed
	fail=$(printf '%s' "$out" | "$T_PY" -c 'import json,sys; print(json.load(sys.stdin)["fail"])')
	fail2=$(printf '%s' "$out" | "$T_PY" -c 'import json,sys; print(json.load(sys.stdin).get("fail2"))')
	errors=$(printf '%s' "$out" | "$T_PY" -c 'import json,sys; print("; ".join(json.load(sys.stdin)["errors"]))')
	committed=$(printf '%s' "$out" | "$T_PY" -c 'import json,sys; print(json.load(sys.stdin)["committed"])')
	assert_match "(close|fsync):ENOSPC" "$fail" "how the first write on a full disk failed"
	assert_match "(close|fsync):ENOSPC" "$fail2" "how an overwrite on a full disk failed"
	assert_eq "" "$errors" "state after the failed commits"
	[ "$committed" -gt 20 ] || fail "only $committed keys fit before ENOSPC"
	# Reads keep working on the full disk.
	assert_eq clean "$("$T_PY" -c "$CHECK" "$MNT/t/0" "$T_CASE/state.json")" "reads on a full disk"
	assert_ok ls -l "$MNT/t/0"
	assert_ok mountpoint -q "$MNT"
	# Free space (the filler), then writes succeed again.
	rm "$fs/filler"
	T_SYS_STEP=1 assert_errno close:OK put "$MNT/t/0/after" "x*65536"
	T_SYS_STEP=1 assert_errno close:OK put "$MNT/t/0/after2" "y*1000" fsync
	"$T_PY" - "$T_CASE/state.json" "$MNT/t/0" <<'PY'
import hashlib, json, os, sys
s = json.load(open(sys.argv[1]))
for n in ("after", "after2"):
    s["done"][n] = hashlib.sha256(open(os.path.join(sys.argv[2], n), "rb").read()).hexdigest()
json.dump(s, open(sys.argv[1], "w"))
PY
	assert_eq clean "$("$T_PY" -c "$CHECK" "$MNT/t/0" "$T_CASE/state.json")" "keys after space came back"
	# A remount is clean and shows exactly the committed keys.
	t_remount -o segment.bytes=1048576,log.cleaner.threads=0
	assert_eq clean "$("$T_PY" -c "$CHECK" "$MNT/t/0" "$T_CASE/state.json")" "keys after remount"
	assert_eq $((committed + 2)) "$(t_leo t/0)" "log end after remount (every commit, nothing failed)"
	assert_eq $((committed + 2)) "$(t_hist t/0)" "history entries after remount"
}

t_test full_disk c_full_disk
t_done
