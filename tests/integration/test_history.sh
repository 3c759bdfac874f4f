#!/bin/bash
# test_history.sh - .history views and remount (docs/semantics.md §7, §10): one
# read-only file per record named by its 20-digit offset, tombstones told apart by an
# attribute, and a remount that keeps every key and every record, byte for byte.
. "$(dirname "$0")/lib.sh"
t_require_daemon

TAB=$'\t'
NL=$'\n'

c_history_lists_records() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history o
	echo a > "$p/k"; echo b > "$p/k"; rm "$p/k"; printf c > "$p/j"
	assert_eq "$(printf '%020d\n' 0 1 2 3)" "$(ls -A "$h")" "ls of .history"
	assert_eq "$(printf '%020d\n' 0 1 2 3)" "$(ls -f "$h" | grep -v '^\.')" "readdir order of .history (ascending)"
	assert_eq "a|b||c|" "$(for o in 0 1 2 3; do printf '%s|' "$(cat "$h/$(t_off $o)")"; done)" "contents"
	assert_eq "0 0 1 0" "$(for o in 0 1 2 3; do t_x "$h/$(t_off $o)" tombstone; echo; done | xargs)" "tombstone attrs"
	assert_eq "k k k j" "$(for o in 0 1 2 3; do t_x "$h/$(t_off $o)" key; echo; done | xargs)" "key attrs"
	for o in 0 1 2 3; do
		assert_match '[0-9]{13}' "$(t_x "$h/$(t_off $o)" timestamp)" "timestamp attr (ms) of record $o"
		# Records written through the mount have no producer: the attributes may be
		# absent (ENODATA, "does not apply") or -1, as in the batch header.
		assert_match '-?[0-9]+|ENODATA' "$(t_sys_x "$h/$(t_off $o)" producer_id)" "producer_id attr of record $o"
		assert_match '-?[0-9]+|ENODATA' "$(t_sys_x "$h/$(t_off $o)" sequence)" "sequence attr of record $o"
	done
	assert_eq "2 2 0 1" "$(stat -c %s "$h/$(t_off 0)" "$h/$(t_off 1)" "$h/$(t_off 2)" "$h/$(t_off 3)" | xargs)" \
		"sizes of the history entries"
	assert_eq "regular file" "$(stat -c %F "$h/$(t_off 0)")" "type of a history entry"
	assert_eq "$(t_x "$p/j" timestamp)" "$(t_x "$h/$(t_off 3)" timestamp)" "timestamp of key j and of its record"
	assert_eq "3 3" "$(t_x "$p/j" versions) $(t_x "$p/j" offset)" "versions and offset of j"
	assert_errno ENOENT stat "$h/$(t_off 4)"
	assert_errno ENOENT stat "$h/4"          # only the 20-digit spelling names a record
	assert_eq "j" "$(ls -A "$p")" "the partition lists only live keys"
}

c_history_is_read_only() {
	t_mount
	mkdir "$MNT/t"
	local h=$MNT/t/0/.history
	echo v > "$MNT/t/0/k"
	assert_fails sh -c "echo x > '$h/$(t_off 0)'"
	assert_fails rm "$h/$(t_off 0)"
	assert_fails mv "$h/$(t_off 0)" "$MNT/t/0/moved"
	assert_fails truncate -s 0 "$h/$(t_off 0)"
	assert_fails touch "$h/$(t_off 9)"
	assert_eq 1 "$(t_leo t/0)" "log end after the refused history writes"
	assert_cat "$h/$(t_off 0)" $'v\n'
}

# A history file open across new records keeps reading its own record.
c_history_grows_while_open() {
	t_mount
	mkdir "$MNT/t"
	echo first > "$MNT/t/0/k"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
p = sys.argv[1]
h = os.path.join(p, ".history")
fd = os.open(os.path.join(h, "%020d" % 0), os.O_RDONLY)
n0 = len(os.listdir(h))
for i in range(50):
    with open(os.path.join(p, "k"), "w") as f:
        f.write("v%d\n" % i)
n1 = len(os.listdir(h))
print(n0, n1, os.read(fd, 100).decode().strip(), open(os.path.join(h, "%020d" % 50)).read().strip())
os.close(fd)
EOF
)
	assert_eq "1 51 first v49" "$out" "history size before/after 50 writes, old and new entries"
}

# Remount keeps every key and every record: digests of key->value and of the history.
c_remount_keeps_everything() {
	t_mount -o partitions=2
	mkdir "$MNT/t" "$MNT/u"
	mkdir "$MNT/t/2"
	"$T_PY" - "$MNT" <<'EOF'
import os, random, sys
m = sys.argv[1]
rnd = random.Random(7)
parts = ["t/0", "t/1", "t/2", "u/0", "u/1"]
live = {}
for i in range(600):
    p = rnd.choice(parts)
    k = "k%d" % rnd.randrange(40)
    path = os.path.join(m, p, k)
    r = rnd.random()
    if r < 0.15 and (p, k) in live:
        os.unlink(path)
        del live[(p, k)]
    elif r < 0.2:
        with open(os.path.join(m, p, ".append"), "w") as f:
            f.write("line %d\nline %d b\n" % (i, i))
    elif r < 0.25 and (p, k) in live:
        os.rename(path, os.path.join(m, p, k + "r"))
        live[(p, k + "r")] = live.pop((p, k))
    else:
        v = os.urandom(rnd.randrange(0, 3000))
        with open(path, "wb") as f:
            f.write(v)
        live[(p, k)] = v
EOF
	t_manifest > "$T_CASE/keys.before"
	t_hmanifest > "$T_CASE/hist.before"
	local p leo_before="" leo_after=""
	for p in t/0 t/1 t/2 u/0 u/1; do leo_before="$leo_before $(t_leo $p)"; done
	[ "$(wc -l < "$T_CASE/keys.before")" -gt 50 ] || fail "too few live keys to compare"
	t_remount
	t_manifest > "$T_CASE/keys.after"
	t_hmanifest > "$T_CASE/hist.after"
	for p in t/0 t/1 t/2 u/0 u/1; do leo_after="$leo_after $(t_leo $p)"; done
	assert_same_file "$T_CASE/keys.before" "$T_CASE/keys.after" "key -> value digest across remount"
	assert_same_file "$T_CASE/hist.before" "$T_CASE/hist.after" "history digest across remount"
	assert_eq "$leo_before" "$leo_after" "log end offsets across remount"
	# And once more with a different io backend, if the daemon has both.
	t_remount -o io=sync
	t_manifest > "$T_CASE/keys.sync"
	assert_same_file "$T_CASE/keys.before" "$T_CASE/keys.sync" "key -> value digest with io=sync"
	# New writes after the remount continue the offsets.
	echo after > "$MNT/t/0/new"
	assert_eq "$(echo "$leo_before" | awk '{print $1 + 1}')" "$(t_leo t/0)" "log end after one more write"
}

# An open history file keeps its bytes, size and stat until it is closed, even when
# a pass cleans its record away; its name is gone at once (ISSUE: pinned handle).
c_history_open_entry_survives_a_swap() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history
	echo old-value > "$p/k"; echo new > "$p/k"
	exec 7< "$h/$(t_off 0)"
	setfattr -n user.topicfs.roll -v 1 "$p"
	exec 8< "$h/.dirty/$(t_off 0)"          # the same entry through a view
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_eq "$(t_off 1)" "$(ls -A "$h")" "the pass removed offset 0"
	assert_errno ENOENT stat "$h/$(t_off 0)"
	assert_errno ENOENT stat "$h/.dirty/$(t_off 0)"
	assert_eq 10 "$(stat -L -c %s /dev/fd/7)" "fstat of the open handle"
	assert_eq old-value "$(cat <&7)" "read through the handle opened before the pass"
	assert_eq "10 old-value" "$(stat -L -c %s /dev/fd/8) $(cat <&8)" "the handle opened through .dirty"
	exec 7<&- 8<&-
	assert_errno ENOENT read "$h/$(t_off 0)"
}

# The views of the A/B/C example: keys A B C updated so that offsets 0-8 exist, 8 in
# the active segment. Offset 3 (C=30) stays at this pass: C=31 is in the active
# segment, which the offset map never reads; once 8 is closed, 3 goes too.
dry_runs() { awk '$1 == "topicfs_fs_dry_runs_total" { print $2 }' "$MNT/.topicfs/metrics"; }

# getfattr of `fate` on every entry of a partition is one dry run, not one per entry
# (any reader could otherwise make the daemon read the log once per entry); a config
# change through the mount makes the next fate a new one; next_pass makes its own
# (one per getfattr, whose two reads of size and value share it).
c_history_fates_share_one_dry_run() {
	t_mount -o log.cleaner.threads=0,segment.bytes=2048
	mkdir "$MNT/t"
	local p=$MNT/t/0 i before after
	for i in $(seq 60); do echo "v$i" > "$p/k$((i % 7))"; done
	setfattr -n user.topicfs.roll -v 1 "$p"
	before=$(dry_runs)
	getfattr -n user.topicfs.fate "$p"/.history/* > "$T_CASE/fates" 2>&1
	after=$(dry_runs)
	assert_eq 60 "$(grep -c '^user.topicfs.fate=' "$T_CASE/fates")" "fates read"
	assert_eq $((before + 1)) "$after" "dry runs for 60 fates"
	setfattr -n user.topicfs.delete.retention.ms -v 5 "$MNT/t"
	getfattr -n user.topicfs.fate "$p/.history/$(t_off 0)" > /dev/null
	assert_eq $((after + 1)) "$(dry_runs)" "dry runs after a config change"
	getfattr -n user.topicfs.next_pass "$p" > /dev/null
	assert_eq $((after + 2)) "$(dry_runs)" "next_pass makes its own run"
	echo more > "$p/k1"
	getfattr -n user.topicfs.next_pass "$p" > /dev/null
	assert_eq $((after + 3)) "$(dry_runs)" "next_pass after a write"
	t_umount
}

c_history_views_and_fates() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history kv o
	for kv in A=10 B=20 A=11 C=30 A=12 B=21 A=13 B=22; do printf %s "${kv#*=}" > "$p/${kv%%=*}"; done
	setfattr -n user.topicfs.roll -v 1 "$p"
	printf 31 > "$p/C"
	assert_eq "$(printf '%020d\n' 0 1 2 3 4 5 6 7 8)" "$(ls -A "$h")" ".history lists offsets only"
	assert_eq "$(printf '%020d\n' 0 1 2 3 4 5 6 7)" "$(ls -A "$h/.dirty")" ".dirty before the pass"
	assert_eq "$(t_off 8)" "$(ls -A "$h/.uncleanable")" ".uncleanable: the active segment"
	assert_eq "" "$(ls -A "$h/.clean")" ".clean before the first pass"
	assert_eq "drop drop drop keep drop drop keep keep" \
		"$(for o in 0 1 2 3 4 5 6 7; do t_x "$h/$(t_off $o)" fate; echo; done | xargs)" "fates of 0-7"
	assert_eq "not-cleanable active segment" "$(t_x "$h/$(t_off 8)" fate)" "fate of 8"
	assert_eq "2 5 4 8 6 7" \
		"$(for o in 0 1 2 3 4 5; do t_x "$h/$(t_off $o)" superseded_by; echo; done | xargs)" \
		"superseded_by of 0-5"
	assert_errno ENODATA getxattr "$h/$(t_off 6)" user.topicfs.superseded_by
	# the same files through the views: bytes, inode, attributes
	assert_cat "$h/.dirty/$(t_off 6)" 13
	assert_eq "$(stat -c %i "$h/$(t_off 6)")" "$(stat -c %i "$h/.dirty/$(t_off 6)")" "one inode"
	assert_eq drop "$(t_x "$h/.dirty/$(t_off 0)" fate)" "fate through .dirty"
	for o in 0 6; do
		getfattr --absolute-names -d -m - "$h/$(t_off $o)" | tail -n +2 > "$T_CASE/attrs.h"
		getfattr --absolute-names -d -m - "$h/.dirty/$(t_off $o)" | tail -n +2 > "$T_CASE/attrs.d"
		getfattr --absolute-names -d -m - "$h/.keys/A/$(t_off $o)" | tail -n +2 > "$T_CASE/attrs.k"
		[ "$(wc -l < "$T_CASE/attrs.h")" -gt 5 ] || fail "too few attributes: $(cat "$T_CASE/attrs.h")"
		assert_same_file "$T_CASE/attrs.h" "$T_CASE/attrs.d" "every attribute of $o through .dirty"
		assert_same_file "$T_CASE/attrs.h" "$T_CASE/attrs.k" "every attribute of $o through .keys/A"
	done
	assert_errno ENOENT stat "$h/.dirty/$(t_off 8)"
	assert_errno ENOENT stat "$h/.uncleanable/$(t_off 0)"
	assert_eq "$(printf '%020d\n' 0 2 4 6)" "$(ls -A "$h/.keys/A")" ".keys/A"
	assert_errno ENOENT stat "$h/.keys/A/$(t_off 1)"
	assert_errno ENOENT stat "$h/.keys/nosuchkey"
	assert_match 'range=0-7 first_dirty=0 end_offset=8 first_uncleanable=8 records_read=8 records_dropped=5 bytes_freed=[1-9][0-9]* .*' \
		"$(t_x "$p" next_pass)" "next_pass"
	local size_after
	size_after=$(t_x "$p" next_pass | sed 's/.* size_after=\([0-9]*\).*/\1/')
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_eq "$(printf '%020d\n' 3 6 7 8)" "$(ls -A "$h")" "survivors of the pass"
	assert_eq "$size_after" "$(t_x "$p" size_bytes)" "size after, as predicted"
	setfattr -n user.topicfs.roll -v 1 "$p"
	assert_eq drop "$(t_x "$h/$(t_off 3)" fate)" "C=30 goes once C=31 is closed"
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_eq "" "$(ls -A "$h/.dirty")" ".dirty after roll and clean"
	assert_eq "$(printf '%020d\n' 6 7 8)" "$(ls -A "$h")" "survivors keep their numbers"
	assert_eq "$(printf '%020d\n' 6 7 8)" "$(ls -A "$h/.clean")" ".clean after the pass"
	assert_cat "$h/.keys/C/$(t_off 8)" 31
	# a deleted key's tombstone is in its view; the key is not in the partition
	rm "$p/C"
	assert_eq "$(printf '%020d\n' 8 9)" "$(ls -A "$h/.keys/C")" ".keys/C with its tombstone"
	assert_eq 1 "$(t_x "$h/.keys/C/$(t_off 9)" tombstone)" "the tombstone through .keys"
	assert_eq "not-cleanable active segment" "$(t_x "$h/.keys/C/$(t_off 9)" fate)" "fate of the tombstone"
	setfattr -n user.topicfs.roll -v 1 "$p"
	assert_match '^keep-tombstone until [0-9]{13} \(stamped by the pass\)$' "$(t_x "$h/$(t_off 9)" fate)" \
		"a tombstone's fate shows its horizon"
	# an entry open through a view keeps its bytes across the swap
	exec 7< "$h/.keys/C/$(t_off 8)"
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_errno ENOENT stat "$h/$(t_off 8)"
	assert_eq 31 "$(cat <&7)" "an entry opened through .keys, after the swap"
	exec 7<&-
	assert_eq "" "$(ls -A "$h/.keys")" ".keys lists nothing"
}

# For random logs the dry run's fates are the pass's drops, record for record, and
# its size after is the size the pass leaves, and the tombstones it would stamp
# are those that get a delete_horizon; four rounds, so tombstones are stamped,
# then dropped (delete.retention.ms=0). Writes are keys, tombstones,
# keyless lines, .put transactions and producer batches through .batches; every
# fate must come up (keep-producer-state: a producer's last batch, emptied;
# not-cleanable: round 1 leaves its active segment unrolled).
c_history_fates_predict_the_pass() {
	"$T_PY" -c 'import kafka.record.default_records' 2>/dev/null ||
		skip "python3-kafka is not installed"
	t_mount -o log.cleaner.threads=0,segment.bytes=2048
	mkdir "$MNT/t"
	setfattr -n user.topicfs.delete.retention.ms -v 0 "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import os, random, sys
from kafka.record.default_records import DefaultRecordBatchBuilder
p = sys.argv[1]
h = os.path.join(p, ".history")
rnd = random.Random(16)
KEEP = {"keep", "keep-tombstone", "keep-keyless", "not-cleanable"}
def x(path, name):
    return os.getxattr(path, "user.topicfs." + name).decode()
def setx(name):
    os.setxattr(p, "user.topicfs." + name, b"1")
def horizon(o):
    try:
        return x(os.path.join(h, o), "delete_horizon")
    except OSError:
        return None
seq = 0
problems = []
seen = set()
# an id of the mount's allocator: .put transactions take ids from it too
PID = int(open(os.path.join(p, "..", "..", ".topicfs", "producer_id")).read().split()[0])
for rnd_i in range(4):
    for i in range(250):
        # the last round adds only keyless records: the tombstones stamped by the
        # pass before have nothing newer, so this pass drops them
        r = rnd.random() if rnd_i < 3 else 0.6
        k = "k%d" % rnd.randrange(40)
        if r < 0.45:
            with open(os.path.join(p, k), "w") as f:
                f.write("v%d-%d" % (rnd_i, i) * rnd.randrange(1, 8))
        elif r < 0.58:
            if os.path.exists(os.path.join(p, k)):
                os.unlink(os.path.join(p, k))
        elif r < 0.68:
            with open(os.path.join(p, ".append"), "w") as f:
                f.write("line %d\n" % i)
        elif r < 0.76:
            with open(os.path.join(p, ".put"), "w") as f:
                f.write("%s\tput%d\nk%d\tput%d\n" % (k, i, rnd.randrange(15), i))
        elif r < 0.92:
            n = rnd.randrange(1, 4)
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                          producer_id=PID, producer_epoch=0, base_sequence=seq,
                                          batch_size=1 << 20)
            for j in range(n):
                kk = None if rnd.random() < 0.2 else ("k%d" % rnd.randrange(15)).encode()
                b.append(j, timestamp=1700000000000 + i, key=kk, value=b"batch", headers=[])
            seq += n
            with open(os.path.join(p, ".batches"), "wb") as f:
                f.write(bytes(b.build()))
        else:
            setx("roll")
    if rnd_i != 1:          # round 1 leaves its active segment to the next
        setx("roll")
    before = sorted(os.listdir(h))
    fates = {o: x(os.path.join(h, o), "fate") for o in before}
    plan = dict(kv.split("=", 1) for kv in x(p, "next_pass").split(" uncleanable_reason=")[0].split())
    unstamped = [o for o in before if horizon(o) is None]
    setx("clean")
    after = set(os.listdir(h))
    stamped = sum(1 for o in unstamped if o in after and horizon(o) is not None)
    if int(plan["tombstones_to_stamp"]) != stamped:
        problems.append("round %d: next_pass stamps %s tombstones, the pass %d" % (rnd_i, plan["tombstones_to_stamp"], stamped))
    drops = 0
    for o in before:
        keep = fates[o].split()[0] in KEEP
        drops += not keep
        if keep != (o in after):
            problems.append("round %d offset %s: fate %s, %s" % (rnd_i, o, fates[o], "kept" if o in after else "dropped"))
    if int(plan["records_dropped"]) != drops:
        problems.append("round %d: next_pass drops %s, fates %d" % (rnd_i, plan["records_dropped"], drops))
    if int(plan["size_after"]) != int(x(p, "size_bytes")):
        problems.append("round %d: next_pass size_after %s, size %s" % (rnd_i, plan["size_after"], x(p, "size_bytes")))
    kinds = set(f.split()[0] for f in fates.values())
    seen |= kinds
    print("round", rnd_i, len(before), "records", drops, "dropped", stamped, "stamped",
          ",".join(sorted(kinds)), file=sys.stderr)
for k in ("drop", "keep", "keep-tombstone", "drop-tombstone", "keep-keyless",
          "keep-producer-state", "not-cleanable"):
    if k not in seen:
        problems.append("no record was %s: the log proves nothing about it" % k)
print("\n".join(problems[:10]) if problems else "same")
EOF
)
	assert_eq same "$out" "the dry run's drops and size against the pass"
}

# A listing of .history or a view that runs while passes swap segments never
# repeats an offset and stays ascending: a stress run beside a loop of passes
# (how many listings a pass overlaps is up to the scheduler, so it is not
# asserted; history_listing_across_a_swap puts a pass inside a listing for sure).
c_history_listing_during_swaps() {
	t_mount -o log.cleaner.threads=0,segment.bytes=8192
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	"$T_PY" -c 'import sys
with open(sys.argv[1], "w") as f:
    f.write("".join("keyless %d\n" % i for i in range(1500)))' "$p/.append"
	(
		n=0
		while [ ! -e "$T_CASE/stop" ]; do
			for i in 1 2 3 4 5 6 7 8; do echo "v$n" > "$p/k$i"; done
			setfattr -n user.topicfs.roll -v 1 "$p"
			setfattr -n user.topicfs.clean -v 1 "$p"
			n=$((n + 1))
		done
	) &
	local loop=$!
	out=$("$T_PY" - "$p/.history" <<'EOF'
import os, sys
h = sys.argv[1]
bad = []
for _ in range(40):
    for d in (h, h + "/.dirty", h + "/.clean"):
        offs = [int(n) for n in os.listdir(d)]
        if len(set(offs)) != len(offs):
            bad.append("%s repeats an offset" % d)
        elif offs != sorted(offs):
            bad.append("%s is not ascending" % d)
print(bad[0] if bad else "ok")
EOF
)
	touch "$T_CASE/stop"
	wait "$loop"
	assert_eq ok "$out" "listings during swaps"
}

# A listing that a pass interrupts resumes after the last offset it returned: it
# never repeats one, never goes back, and lists every survivor past that point.
# getdents64 with a buffer of a few entries returns the start of each directory;
# the pass runs (an explicit `clean`, so it is over before the listings go on);
# then each listing reads to its end. Positional cookies would skip survivors or
# repeat offsets here.
c_history_listing_across_a_swap() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import ctypes, os, struct, sys
p = sys.argv[1]
h = os.path.join(p, ".history")
libc = ctypes.CDLL(None, use_errno=True)
SYS_GETDENTS64 = {"x86_64": 217, "aarch64": 61}[os.uname().machine]
def getdents(fd, size):
    buf = ctypes.create_string_buffer(size)
    n = libc.syscall(SYS_GETDENTS64, fd, buf, size)
    if n < 0:
        raise OSError(ctypes.get_errno(), "getdents64")
    names, pos = [], 0
    while pos < n:
        reclen = struct.unpack_from("<H", buf.raw, pos + 16)[0]
        names.append(buf.raw[pos + 19:pos + reclen].split(b"\0", 1)[0].decode())
        pos += reclen
    return [int(x) for x in names if not x.startswith(".")]
for i in range(40):                       # offsets 0-39: k0-k9 four times over
    with open(os.path.join(p, "k%d" % (i % 10)), "w") as f:
        f.write("v%d" % i)
os.setxattr(p, "user.topicfs.roll", b"1")
with open(os.path.join(p, "k3"), "w") as f:  # offset 40, the active segment
    f.write("active")
dirs = [h, h + "/.dirty", h + "/.keys/k3", h + "/.uncleanable"]
before = {d: sorted(int(x) for x in os.listdir(d)) for d in dirs}
fds = {d: os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in dirs}
first = {d: getdents(fds[d], 24 * 2 + 40 * 3) for d in dirs}   # . .. and 3 offsets
os.setxattr(p, "user.topicfs.clean", b"1")
after = {d: sorted(int(x) for x in os.listdir(d)) for d in dirs}
problems = []
if after[h] != list(range(30, 41)):
    problems.append("the pass left %s" % after[h])
for d in dirs:
    got = list(first[d])
    while True:
        more = getdents(fds[d], 24 * 2 + 40 * 3)
        if not more:
            break
        got += more
    os.close(fds[d])
    if not first[d] or first[d] != before[d][:len(first[d])]:
        problems.append("%s: first read %s of %s" % (d, first[d], before[d]))
    want = first[d] + [o for o in after[d] if o > first[d][-1]] if first[d] else after[d]
    if got != want:
        problems.append("%s: listed %s, want %s" % (d, got, want))
print("\n".join(problems) if problems else "same")
EOF
)
	assert_eq same "$out" "listings resumed across a pass"
}

# The views as a user who is not the topic's owner: with mode 755 every view
# lists, its entries read and their attributes answer; with 750 (not the owner,
# not in the group) none of them opens; nobody may write into one.
c_history_views_as_another_user() {
	t_user_ensure topicfs-it
	t_mount -o log.cleaner.threads=0,allow_other,default_permissions
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history u=topicfs-it d
	printf 1 > "$p/k"; printf 2 > "$p/k"
	setfattr -n user.topicfs.roll -v 1 "$p"
	printf 3 > "$p/k"
	chmod 755 "$MNT/t"
	assert_eq "$(t_off 0) $(t_off 1)" "$(t_as $u ls -A "$h/.dirty" | xargs)" ".dirty as $u"
	assert_eq "$(t_off 2)" "$(t_as $u ls -A "$h/.uncleanable")" ".uncleanable as $u"
	assert_eq "" "$(t_as $u ls -A "$h/.clean")" ".clean as $u"
	assert_eq "$(t_off 0) $(t_off 1) $(t_off 2)" "$(t_as $u ls -A "$h/.keys/k" | xargs)" ".keys/k as $u"
	assert_eq 2 "$(t_as $u cat "$h/.dirty/$(t_off 1)")" "an entry through .dirty as $u"
	assert_eq 3 "$(t_as $u cat "$h/.keys/k/$(t_off 2)")" "an entry through .keys as $u"
	assert_eq drop "$(t_as $u getfattr --absolute-names --only-values -n user.topicfs.fate "$h/.dirty/$(t_off 0)")" \
		"fate as $u"
	assert_eq 1 "$(t_as $u getfattr --absolute-names --only-values -n user.topicfs.superseded_by "$h/.keys/k/$(t_off 0)")" \
		"superseded_by as $u"
	assert_match 'range=0-1 .*records_dropped=1 .*' \
		"$(t_as $u getfattr --absolute-names --only-values -n user.topicfs.next_pass "$p")" "next_pass as $u"
	for d in .dirty/0 .uncleanable/2 .clean/- .keys/k/2; do
		assert_errno_as $u "EACCES|EROFS" put "$h/${d%/*}/$(t_off 9)" x
		assert_errno_as $u "EACCES|EROFS" mkdir "$h/${d%/*}/x"
		[ "${d##*/}" = - ] ||
			assert_errno_as $u "EACCES|EROFS|EPERM" unlink "$h/${d%/*}/$(t_off "${d##*/}")"
	done
	assert_errno_as $u "EACCES|EROFS" open "$h/.dirty/$(t_off 0)" w
	chmod 750 "$MNT/t"
	for d in .dirty .uncleanable .clean .keys/k; do
		assert_errno_as $u EACCES stat "$h/$d"
		assert_fails t_as $u ls "$h/$d"
	done
	assert_errno_as $u EACCES read "$h/.dirty/$(t_off 0)"
	assert_errno_as $u EACCES read "$h/.keys/k/$(t_off 2)"
	# the owner still reads them all
	assert_eq "$(t_off 0) $(t_off 1)" "$(ls -A "$h/.dirty" | xargs)" ".dirty as root after chmod 750"
	assert_eq 3 "$(t_leo t/0)" "nothing was appended by the refused writes"
}

# The reasons a record is outside the next pass, as its fate says them and as the
# regions show them: min.compaction.lag.ms, the active segment, a policy without
# compact; a config change through the mount is seen by the next fate at once.
c_history_fate_reasons() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history
	setfattr -n user.topicfs.min.compaction.lag.ms -v 3600000 "$MNT/t"
	printf 1 > "$p/k"; printf 2 > "$p/k"
	setfattr -n user.topicfs.roll -v 1 "$p"
	printf 3 > "$p/k"
	assert_eq "not-cleanable younger than min.compaction.lag.ms" "$(t_x "$h/$(t_off 0)" fate)" "fate under the lag"
	assert_eq "not-cleanable active segment" "$(t_x "$h/$(t_off 2)" fate)" "fate in the active segment"
	assert_eq "$(t_off 0) $(t_off 1) $(t_off 2)" "$(ls -A "$h/.uncleanable" | xargs)" ".uncleanable under the lag"
	assert_eq "" "$(ls -A "$h/.dirty")" ".dirty under the lag"
	assert_match 'range=none .*records_dropped=0 bytes_freed=0 .*uncleanable_reason=younger than min.compaction.lag.ms$' \
		"$(t_x "$p" next_pass)" "next_pass under the lag"
	setfattr -n user.topicfs.min.compaction.lag.ms -v 0 "$MNT/t"
	assert_eq "drop keep" "$(for o in 0 1; do t_x "$h/$(t_off $o)" fate; echo; done | xargs)" "fates without the lag"
	assert_eq "$(t_off 0) $(t_off 1)" "$(ls -A "$h/.dirty" | xargs)" ".dirty without the lag"
	setfattr -n user.topicfs.cleanup.policy -v delete "$MNT/t"
	assert_eq "not-cleanable cleanup.policy without compact" "$(t_x "$h/$(t_off 0)" fate)" "fate under cleanup.policy=delete"
	assert_errno ENODATA getxattr "$h/$(t_off 2)" user.topicfs.superseded_by
	assert_eq 1 "$(t_x "$h/$(t_off 0)" superseded_by)" "superseded_by whatever the policy"
}

# A key's records are its data records: a transaction marker, whose key bytes are
# its type (00 00 00 01 for a COMMIT, 00 00 00 00 for an ABORT), is in no key's
# view, versions or superseded_by, even for a key of those bytes; a record of an
# aborted transaction is on disk (in its key's view) but supersedes nothing, as
# the pass sees it.
c_history_keys_and_transactions() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history c=%00%00%00%01 a=%00%00%00%00
	printf v1 > "$p/$c"                                      # 0
	printf 'x\ty\n' > "$p/.put"                              # 1, its COMMIT at 2
	printf v2 > "$p/$c"                                      # 3
	assert_eq commit_marker "$(t_x "$h/$(t_off 2)" txn)" "offset 2 is the COMMIT"
	assert_eq "$(t_off 0) $(t_off 3)" "$(ls -A "$h/.keys/$c" | xargs)" ".keys of the COMMIT's key bytes"
	assert_errno ENOENT stat "$h/.keys/$c/$(t_off 2)"
	assert_eq 3 "$(t_x "$h/$(t_off 0)" superseded_by)" "superseded_by skips the marker"
	assert_eq "0 3" "$(t_x "$p/$c" versions)" "versions skip the marker"
	printf old > "$p/k"                                      # 4
	assert_eq "open:OK write1:OK write2:EINVAL close:EINVAL" \
		"$(t_sys writes "$p/.put" "k${TAB}aborted${NL}" "notab${NL}")" "a .put that aborts"
	assert_eq "aborted abort_marker" "$(t_x "$h/$(t_off 5)" txn) $(t_x "$h/$(t_off 6)" txn)" "5 aborted, 6 its ABORT"
	printf v > "$p/$a"                                       # 7
	assert_eq "$(t_off 7)" "$(ls -A "$h/.keys/$a")" ".keys of the ABORT's key bytes"
	assert_eq "$(t_off 4) $(t_off 5)" "$(ls -A "$h/.keys/k" | xargs)" ".keys/k holds the aborted record"
	assert_errno ENODATA getxattr "$h/$(t_off 4)" user.topicfs.superseded_by
	assert_cat "$p/k" old
	setfattr -n user.topicfs.roll -v 1 "$p"
	# 5 goes; its batch stays, emptied, as the last of its producer
	assert_eq "keep keep-producer-state" "$(t_x "$h/$(t_off 4)" fate) $(t_x "$h/$(t_off 5)" fate)" "fates of k's records"
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_eq "$(t_off 4)" "$(ls -A "$h/.keys/k")" "the pass keeps what superseded_by called the newest"
	assert_eq "$(t_off 3)" "$(ls -A "$h/.keys/$c")" "and drops the COMMIT key's older record"
}

# The views and `region` ask the cleaner for the region bounds at every call;
# with no transaction open that costs no read of the log, though every .put left
# producer ids in its segment (topicfs_cleaner_txn_scans_total counts the reads).
# While a .put is open the bounds still stop at its first record, as the pass's.
txn_scans() { awk '$1 == "topicfs_cleaner_txn_scans_total" { print $2 }' "$MNT/.topicfs/metrics"; }
c_history_views_read_no_log_per_call() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history i s0 o line
	for i in 1 2 3 4 5 6; do
		"$T_PY" -c 'import sys; open(sys.argv[1], "w").write("".join("k%d\tv%s\n" % (j, sys.argv[2]) for j in range(30)))' \
			"$p/.put" "$i"
		[ $((i % 2)) = 0 ] && setfattr -n user.topicfs.roll -v 1 "$p"
	done
	printf last > "$p/k0"
	s0=$(txn_scans)
	assert_eq 186 "$(ls -A "$h/.dirty" | wc -l)" ".dirty: six transactions of 30 records and their markers"
	ls -A "$h/.clean" "$h/.uncleanable" "$h/.keys/k1" > /dev/null
	getfattr -n user.topicfs.region "$h"/* > /dev/null
	t_x "$p" dirty_ratio > /dev/null
	assert_eq "$s0" "$(txn_scans)" "reads of the log for open transactions"
	mkfifo "$T_CASE/opened" "$T_CASE/go"
	"$T_PY" - "$p" "$T_CASE/opened" "$T_CASE/go" <<'EOF' &
import os, sys
fd = os.open(sys.argv[1] + "/.put", os.O_WRONLY)
os.write(fd, b"open1\tx\n")
os.fsync(fd)
open(sys.argv[2], "w").write("open\n")
open(sys.argv[3]).readline()
os.close(fd)
EOF
	local writer=$!
	t_on_exit "kill $writer 2>/dev/null"
	read -r line < "$T_CASE/opened"
	o=$(( $(t_leo t/0) - 1 ))             # its record; k0=last before it, same segment
	printf after > "$p/k1"
	setfattr -n user.topicfs.roll -v 1 "$p"
	assert_eq uncleanable "$(t_x "$h/$(t_off "$o")" region)" "the open transaction's record, rolled"
	assert_eq "$(t_off $((o - 1))) $(t_off "$o") $(t_off $((o + 1)))" "$(ls -A "$h/.uncleanable" | xargs)" \
		".uncleanable from the segment holding the open transaction"
	[ "$(txn_scans)" -gt "$s0" ] || fail "no read of the log with a transaction open"
	echo go > "$T_CASE/go"
	wait "$writer"
	setfattr -n user.topicfs.roll -v 1 "$p"
	assert_eq dirty "$(t_x "$h/$(t_off "$o")" region)" "the committed record"
}

t_test history_lists_records c_history_lists_records
t_test history_is_read_only c_history_is_read_only
t_test history_grows_while_open c_history_grows_while_open
t_test remount_keeps_everything c_remount_keeps_everything
t_test history_open_entry_survives_a_swap c_history_open_entry_survives_a_swap
t_test history_views_and_fates c_history_views_and_fates
t_test history_fates_share_one_dry_run c_history_fates_share_one_dry_run
t_test history_fates_predict_the_pass c_history_fates_predict_the_pass
t_test history_listing_during_swaps c_history_listing_during_swaps
t_test history_listing_across_a_swap c_history_listing_across_a_swap
t_test history_views_as_another_user c_history_views_as_another_user
t_test history_fate_reasons c_history_fate_reasons
t_test history_keys_and_transactions c_history_keys_and_transactions
t_test history_views_read_no_log_per_call c_history_views_read_no_log_per_call
t_done
