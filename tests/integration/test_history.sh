#!/bin/bash
# test_history.sh - .history views and remount (DESIGN §1 "History views", §5): one
# read-only file per record named by its 20-digit offset, tombstones told apart by an
# attribute, and a remount that keeps every key and every record, byte for byte.
. "$(dirname "$0")/lib.sh"
t_require_daemon

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
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_eq "$(t_off 1)" "$(ls -A "$h")" "the pass removed offset 0"
	assert_errno ENOENT stat "$h/$(t_off 0)"
	assert_eq 10 "$(stat -L -c %s /dev/fd/7)" "fstat of the open handle"
	assert_eq old-value "$(cat <&7)" "read through the handle opened before the pass"
	exec 7<&-
	assert_errno ENOENT read "$h/$(t_off 0)"
}

t_test history_lists_records c_history_lists_records
t_test history_is_read_only c_history_is_read_only
t_test history_grows_while_open c_history_grows_while_open
t_test remount_keeps_everything c_remount_keeps_everything
t_test history_open_entry_survives_a_swap c_history_open_entry_survives_a_swap
t_done
