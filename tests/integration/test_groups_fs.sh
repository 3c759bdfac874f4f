#!/bin/bash
# test_groups_fs.sh - consumers from the shell: topicctl follow (bootstrap, then
# follow), and what the README's "Consumers from the shell" section promises.
. "$(dirname "$0")/lib.sh"
t_require_daemon
CTL=$BUILD_DIR/topicctl

# t_wait_line FILE REGEX: waits until FILE has a line matching REGEX (a background
# tool's output); fails after 30 s, which only a broken tool reaches.
t_wait_line() {
	local i
	for i in $(seq 300); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "no line matching '$2' in $1: $(tail -c 300 "$1")"
}

# Two partitions: keys, an overwrite, a tombstone, a value with a tab and a newline,
# a keyless record; then a cleaning pass makes gaps in partition 0.
fill() {
	mkdir "$MNT/t" "$MNT/t/1"
	for i in 1 2 3 4 5; do echo "v$i" > "$MNT/t/0/k$i"; done
	echo "p1" > "$MNT/t/1/only"
	echo "newer" > "$MNT/t/0/k1"
	rm "$MNT/t/0/k2"
	printf 'a\tb\nc' > "$MNT/t/0/k3"
	echo "keyless" >> "$MNT/t/0/.append"
}

c_follow_bootstrap() {
	t_mount
	fill
	"$CTL" follow --once "$MNT/t" > out
	# every record on disk, once, in offset order per partition; tombstones as deletions
	assert_eq "$(t_hist t/0) $(t_hist t/1)" "$(grep -c $'^[a-z]*\t0\t' out) $(grep -c $'^[a-z]*\t1\t' out)"
	assert_eq "delete	0	6" "$(grep '^delete' out | cut -f1-3)"
	assert_eq 'put	k3	a\tb\nc' "$(grep -P '^put\t0\t7\t' out | cut -f1,5,6)"
	assert_eq "append	keyless" "$(grep '^append' out | cut -f1,5)"
	assert_match '# ready records=10 bootstrap_ms=[0-9]+ end_offsets=0:9,1:1' "$(tail -n 1 out)"
	# after a pass only the survivors are given; the gaps stay gaps
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	setfattr -n user.topicfs.clean -v 1 "$MNT/t/0"
	"$CTL" follow --once --json "$MNT/t" > j
	assert_eq "$(t_hist t/0)" "$("$T_PY" -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l).get("partition") == 0))' j)"
	"$T_PY" - j <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ready = rows.pop()
assert ready["ready"] and ready["records"] == len(rows) and ready["end_offsets"] == {"0": 9, "1": 1}, ready
state = {}
for r in rows:
    assert r["op"] in ("put", "delete", "append"), r
    if r["op"] == "put":
        state[(r["partition"], r["key"])] = r["value"]
    elif r["op"] == "delete":
        state.pop((r["partition"], r["key"]), None)
want = {(0, "k1"): "newer\\n", (0, "k3"): "a\\tb\\nc", (0, "k4"): "v4\\n", (0, "k5"): "v5\\n",
        (1, "only"): "p1\\n"}
assert state == want, state
assert [r["offset"] for r in rows if r["partition"] == 0] == sorted(r["offset"] for r in rows if r["partition"] == 0)
EOF
}

c_follow_follows() {
	t_mount
	fill
	"$CTL" follow --interval 50 "$MNT/t" > out 2> err &
	local pid=$!
	t_on_exit "kill $pid"
	t_wait_line out '^# ready '
	echo later > "$MNT/t/1/new"
	rm "$MNT/t/0/k4"
	t_wait_line out $'^put\t1\t1\t[0-9]+\tnew\tlater'
	t_wait_line out $'^delete\t0\t9\t[0-9]+\tk4$'
	kill -INT "$pid"
	wait "$pid"
	# nothing given twice, nothing after ready that was before it
	assert_eq "" "$(grep -v '^#' out | cut -f2,3 | sort | uniq -d)"
	assert_eq 2 "$(sed -n '/^# ready/,$p' out | grep -vc '^#')"
	assert_eq "" "$(cat err)"
}

c_follow_errors() {
	t_mount
	mkdir "$MNT/t"
	assert_fails "$CTL" follow "$MNT"
	assert_fails "$CTL" follow "$MNT/t/0"
	assert_fails "$CTL" follow "$MNT/nope"
	assert_fails "$CTL" follow --interval 0 "$MNT/t"
	assert_fails "$CTL" follow --group ../x "$MNT/t"
	"$CTL" follow --once "$MNT/t" > out
	assert_match '# ready records=0 bootstrap_ms=[0-9]+ end_offsets=0:0' "$(cat out)"
}

# metric VALUE-OF NAME LABELS: one sample of .topicfs/metrics ("" when absent).
metric() {
	awk -v n="$1$2" '$1 == n { print $2 }' "$MNT/.topicfs/metrics"
}

c_health_metrics() {
	t_mount
	mkdir "$MNT/c"
	for i in $(seq 1 99); do echo "v$i" > "$MNT/c/0/k$((i % 10))"; done
	local l='{topic="c",partition="0"}'
	assert_eq "0 0" "$(metric topicfs_partition_keyless_records "$l") $(metric topicfs_partition_keyless_over_limit "$l")"
	echo "no key" >> "$MNT/c/0/.append"     # 1 in 100: not over 1%
	assert_eq "1 0.01 0" "$(metric topicfs_partition_keyless_records "$l") $(metric topicfs_partition_keyless_fraction "$l") $(metric topicfs_partition_keyless_over_limit "$l")"
	echo "another" >> "$MNT/c/0/.append"    # 2 in 101: over
	assert_eq 1 "$(metric topicfs_partition_keyless_over_limit "$l")"
	grep -q '^c/0: .*keyless 1.98% (OVER 1%' "$MNT/.topicfs/status"
	# the keyless records survive a pass, and so does the fraction of those produced
	setfattr -n user.topicfs.roll -v 1 "$MNT/c/0"
	setfattr -n user.topicfs.clean -v 1 "$MNT/c/0"
	assert_eq "2 0 0" "$(metric topicfs_partition_keyless_records "$l") $(metric topicfs_partition_cleaner_behind "$l") $(metric topicfs_partition_dirty_ratio "$l")"
	# dirty again past min.cleanable.dirty.ratio after that pass: flagged until the next
	for i in $(seq 1 30); do echo "w$i" > "$MNT/c/0/k$((i % 10))"; done
	setfattr -n user.topicfs.roll -v 1 "$MNT/c/0"
	assert_eq 1 "$(metric topicfs_partition_cleaner_behind "$l")"
	grep -q '^c/0: .*CLEANER BEHIND' "$MNT/.topicfs/status"
	assert_eq 604800000 "$(metric topicfs_partition_retention_ms "$l")"
	assert_match '[0-9]+' "$(metric topicfs_partition_oldest_record_age_ms "$l")"
	# a bootstrap from zero, as follow reports it
	assert_eq "" "$(metric topicfs_topic_bootstrap_ms '{topic="c"}')"
	"$CTL" follow --once "$MNT/c" > out
	local ms
	ms=$(sed -n 's/^# ready .*bootstrap_ms=\([0-9]*\) .*/\1/p' out)
	assert_eq "$ms" "$(metric topicfs_topic_bootstrap_ms '{topic="c"}')"
	assert_fails setfattr -n user.topicfs.bootstrap_ms -v soon "$MNT/c"
	assert_fails setfattr -n user.topicfs.bootstrap_ms -v -5 "$MNT/c"
	assert_eq "$ms" "$(metric topicfs_topic_bootstrap_ms '{topic="c"}')"
}

# lag_records the brute-force way: the history entries at or after OFFSET.
hist_from() {
	local n=0 e
	for e in $(ls "$MNT/$1/.history"); do [ $((10#$e)) -ge "$2" ] && n=$((n + 1)); done
	echo "$n"
}

c_groups_files() {
	t_mount
	mkdir "$MNT/t" "$MNT/t/1" "$MNT/my.topic"
	local g=$MNT/.groups/g f
	f=$g/t.0
	# hidden, like every control entry, and empty until a group is made
	assert_eq "my.topic t" "$(ls -A "$MNT" | tr '\n' ' ' | sed 's/ $//' | sed 's/__consumer_offsets //')"
	assert_eq "" "$(ls -A "$MNT/.groups")"
	mkdir "$g"
	assert_errno EEXIST mkdir "$g"
	assert_eq g "$(ls "$MNT/.groups")"
	assert_eq "" "$(ls -A "$g")"
	# a compacted partition with gaps: 30 writes over 3 keys, rolled and cleaned,
	# then 5 more in the active segment
	for i in $(seq 0 29); do echo "v$i" > "$MNT/t/0/k$((i % 3))"; done
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	setfattr -n user.topicfs.clean -v 1 "$MNT/t/0"
	for i in $(seq 0 4); do echo "w$i" > "$MNT/t/0/k$((i % 3))"; done
	echo 2 > "$f"
	assert_cat "$f" $'2\n'
	assert_eq t.0 "$(ls "$g")"
	assert_eq 33 "$(t_x "$f" lag_offsets)"
	assert_eq "$(hist_from t/0 2)" "$(t_x "$f" lag_records)"
	[ "$(t_x "$f" lag_records)" -lt 33 ] || fail "lag_records $(t_x "$f" lag_records) not below lag_offsets"
	assert_eq 35 "$(t_x "$f" log_end_offset)"
	# every position: lag_records is what the history holds from there
	for pos in 0 5 26 27 28 29 31 34 35 40; do
		echo "$pos" > "$f"
		assert_eq "$(hist_from t/0 "$pos")" "$(t_x "$f" lag_records)" "lag_records at $pos"
	done
	# caught up: no lag in time
	echo 35 > "$f"
	assert_eq "0 0 0" "$(t_x "$f" lag_offsets) $(t_x "$f" lag_records) $(t_x "$f" lag_ms)"
	echo 30 > "$f"
	assert_match '[0-9]+' "$(t_x "$f" lag_ms)"
	# bad numbers: EINVAL, nothing committed
	for bad in abc -1 " 1 2" 1x 99999999999999999999 ""; do
		assert_errno EINVAL put "$f" "$bad"
		assert_cat "$f" $'30\n'
	done
	assert_errno EINVAL put "$f" "$(printf '%040d' 1)"
	# names: an existing topic and partition, dots in topic names
	assert_errno ENOENT put "$g/nope.0" 1
	assert_errno ENOENT put "$g/t.2" 1
	assert_errno "EINVAL|ENOENT" put "$g/t.01" 1
	assert_errno "EINVAL|ENOENT" put "$g/t" 1
	echo 0 > "$g/my.topic.0"
	echo 1 > "$g/t.1"
	assert_eq "my.topic.0 t.0 t.1" "$(ls "$g" | tr '\n' ' ' | sed 's/ $//')"
	# find walks it (a backup with cp -r .groups copies the positions)
	assert_eq "g/my.topic.0 g/t.0 g/t.1" "$(cd "$MNT/.groups" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ' | sed 's/ $//')"
	cp -r "$MNT/.groups" saved
	assert_eq 30 "$(cat saved/g/t.0)"
	# what was committed survives a remount (the store is rebuilt from the log)
	t_umount
	t_mount
	assert_cat "$f" $'30\n'
	assert_cat "$g/t.1" $'1\n'
	# unlink deletes one offset, the group stays until rmdir; rm -r does both
	rm "$g/t.1"
	assert_absent "$g/t.1"
	assert_eq "my.topic.0 t.0" "$(ls "$g" | tr '\n' ' ' | sed 's/ $//')"
	rm -r "$g"
	assert_absent "$g"
	assert_eq "" "$(ls -A "$MNT/.groups")"
	t_umount
	t_mount
	assert_eq "" "$(ls -A "$MNT/.groups")"
	assert_errno EPERM rmdir "$MNT/.groups"
}

c_groups_follow() {
	t_mount
	fill
	"$CTL" follow --once --group cache "$MNT/t" > out
	assert_cat "$MNT/.groups/cache/t.0" $'9\n'
	assert_cat "$MNT/.groups/cache/t.1" $'1\n'
	assert_eq "0 0" "$(t_x "$MNT/.groups/cache/t.0" lag_records) $(t_x "$MNT/.groups/cache/t.1" lag_records)"
	# a restart of the consumer gives only what came since
	echo later > "$MNT/t/0/k5"
	"$CTL" follow --once --group cache "$MNT/t" > out
	assert_eq $'put\t0\t9' "$(grep -v '^#' out | cut -f1-3)"
	assert_cat "$MNT/.groups/cache/t.0" $'10\n'
	# a position written from the shell is where it resumes
	echo 7 > "$MNT/.groups/cache/t.0"
	"$CTL" follow --once --group cache "$MNT/t" > out
	assert_eq "7 8 9" "$(grep -v '^#' out | cut -f3 | tr '\n' ' ' | sed 's/ $//')"
}

T_USER=topicfs-it
c_groups_access() {
	t_user_ensure "$T_USER"
	t_mount -o allow_other,default_permissions
	mkdir "$MNT/t" "$MNT/open"
	chmod 755 "$MNT/t"
	chmod 777 "$MNT/open"
	echo v > "$MNT/t/0/k"
	mkdir "$MNT/.groups/g"
	echo 0 > "$MNT/.groups/g/t.0"
	echo 0 > "$MNT/.groups/g/open.0"
	# reading follows the topic's read permission; committing its write permission
	assert_eq 0 "$(t_as "$T_USER" cat "$MNT/.groups/g/t.0")"
	assert_eq 1 "$(t_as "$T_USER" getfattr --absolute-names --only-values -n user.topicfs.lag_records "$MNT/.groups/g/t.0")"
	assert_errno_as "$T_USER" EACCES put "$MNT/.groups/g/t.0" 1
	assert_errno_as "$T_USER" EACCES unlink "$MNT/.groups/g/t.0"
	assert_errno_as "$T_USER" EACCES rmdir "$MNT/.groups/g"
	assert_errno_as "$T_USER" OK put "$MNT/.groups/g/open.0" 1
	assert_cat "$MNT/.groups/g/t.0" $'0\n'
	assert_cat "$MNT/.groups/g/open.0" $'1\n'
	# a group of one's own, on a topic one may not write: no offset for it
	assert_errno_as "$T_USER" OK mkdir "$MNT/.groups/mine"
	assert_errno_as "$T_USER" EACCES put "$MNT/.groups/mine/t.0" 1
	assert_errno_as "$T_USER" OK put "$MNT/.groups/mine/open.0" 0
	assert_errno_as "$T_USER" OK unlink "$MNT/.groups/mine/open.0"
	assert_errno_as "$T_USER" OK rmdir "$MNT/.groups/mine"
	chmod 700 "$MNT/t"
	assert_errno_as "$T_USER" EACCES read "$MNT/.groups/g/t.0"
}

# t_until CMD...: runs CMD until it succeeds (a condition another process brings
# about); fails after 30 s, which only a broken mount reaches.
t_until() {
	local i
	for i in $(seq 300); do "$@" && return 0; sleep 0.1; done
	fail "never true: $*"
}
shell_commit() { [ "$(t_sys put "$1" "$2")" = OK ]; }
lag_over() { [ "$(t_x "$1" lag_ms)" -gt "$2" ]; }

c_erase_verdict() {
	need node
	t_mount
	mkdir "$MNT/e"
	setfattr -n user.topicfs.delete.retention.ms -v 4 "$MNT/e"   # safe limit 2 ms
	for i in 1 2 3; do echo "v$i" > "$MNT/e/0/user-1"; echo "o$i" > "$MNT/e/0/other"; done
	mkdir "$MNT/.groups/caught-up" "$MNT/.groups/stopped" "$MNT/.groups/elsewhere"
	echo 6 > "$MNT/.groups/caught-up/e.0"
	echo 1 > "$MNT/.groups/stopped/e.0"
	mkdir "$MNT/x"
	echo 0 > "$MNT/.groups/elsewhere/x.0"          # another partition: not judged
	t_until lag_over "$MNT/.groups/stopped/e.0" 2
	# the same lags in topicctl groups, the metrics and topicctl status
	"$CTL" groups --json "$MNT" > rows
	"$T_PY" - rows <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["group"], r["topic"], r["partition"]) for r in rows] == \
    [("caught-up", "e", 0), ("elsewhere", "x", 0), ("stopped", "e", 0)], rows
fields = ["group", "topic", "partition", "committed_offset", "log_end_offset", "lag_offsets",
          "lag_records", "lag_ms"]
for r in rows:
    assert sorted(r) == sorted(fields), r
c, _, s = rows
assert (c["committed_offset"], c["log_end_offset"], c["lag_offsets"], c["lag_records"], c["lag_ms"]) == (6, 6, 0, 0, 0), c
assert (s["committed_offset"], s["lag_offsets"], s["lag_records"]) == (1, 5, 5) and s["lag_ms"] > 2, s
EOF
	assert_eq 1 "$(metric topicfs_group_lag_past_half_window '{group="stopped",topic="e",partition="0"}')"
	assert_eq 0 "$(metric topicfs_group_lag_past_half_window '{group="caught-up",topic="e",partition="0"}')"
	assert_eq 5 "$(metric topicfs_group_lag_records '{group="stopped",topic="e",partition="0"}')"
	"$CTL" status "$MNT" > st || true
	grep -q '^consumers: group stopped on e/0 lags [0-9]* ms, past half of delete.retention.ms 4' st
	if grep -q 'group caught-up' st; then fail "caught-up flagged: $(cat st)"; fi
	"$CTL" erase --json "$MNT/e" user-1 > out || true
	"$T_PY" - out "$T_LIB_DIR/seed_deletion_check.mjs" <<'EOF'
import json, subprocess, sys
got = json.load(open(sys.argv[1]))
assert got["tombstone_written"] is True, got
assert set(got["group_lag_ms"]) == {"caught-up", "stopped"}, got
assert got["group_lag_ms"]["caught-up"] == 0, got
q = {"groups": got["group_lag_ms"], "window_ms": 4, "margin": 0.5}
seed = json.loads(subprocess.run(["node", sys.argv[2]], input=json.dumps(q), text=True,
                                 capture_output=True, check=True).stdout)
assert got["deletion_proven"] == seed["seguro"] is False, (got, seed)
assert got["safe_limit_ms"] == seed["limiteSeguroMs"] == 2, (got, seed)
assert got["groups_to_rebuild"] == seed["gruposQuePrecisamReconstruir"] == ["stopped"], (got, seed)
assert got["action"], got
EOF
	assert_absent "$MNT/e/0/user-1"
	# both caught up: proven, by the seed's function too
	echo w > "$MNT/e/0/user-2"
	echo 9 > "$MNT/.groups/stopped/e.0"; echo 9 > "$MNT/.groups/caught-up/e.0"
	"$CTL" erase --json --margin 1 "$MNT/e" user-2 > out2
	"$T_PY" - out2 "$T_LIB_DIR/seed_deletion_check.mjs" <<'EOF'
import json, subprocess, sys
o = json.load(open(sys.argv[1]))
q = {"groups": o["group_lag_ms"], "window_ms": 4, "margin": 1}
seed = json.loads(subprocess.run(["node", sys.argv[2]], input=json.dumps(q), text=True,
                                 capture_output=True, check=True).stdout)
assert o["deletion_proven"] == seed["seguro"] is True, (o, seed)
assert o["groups_to_rebuild"] == seed["gruposQuePrecisamReconstruir"] == [], (o, seed)
assert o["action"] is None and o["safe_limit_ms"] == 4, o
EOF
	assert_fails "$CTL" erase "$MNT/e" user-2          # no live value
	assert_fails "$CTL" erase --margin 0 "$MNT/e" other
	assert_fails "$CTL" erase --margin 1.5 "$MNT/e" other
	assert_cat "$MNT/e/0/other" $'o3\n'
}

c_erase_wait() {
	t_mount
	mkdir "$MNT/w"
	local p=$MNT/w/0
	echo a > "$p/k"; echo z > "$p/keep"
	setfattr -n user.topicfs.roll -v 1 "$p"
	setfattr -n user.topicfs.clean -v 1 "$p"
	echo b > "$p/k"
	setfattr -n user.topicfs.roll -v 1 "$p"
	echo c > "$p/k"
	# the key's values: one in the clean region, one dirty, one in the active segment
	assert_eq "clean dirty uncleanable" "$(for o in $(ls "$p/.history/.keys/k"); do t_x "$p/.history/$o" region; echo; done | tr '\n' ' ' | sed 's/ $//')"
	mkdir "$MNT/.groups/c"
	echo 4 > "$MNT/.groups/c/w.0"
	"$CTL" erase --wait --json --interval 50 "$MNT/w" k > out 2> err &
	local pid=$!
	t_on_exit "kill $pid"
	t_wait_line err "group c: committed offset 4 is not past the tombstone at 4"
	echo 5 > "$MNT/.groups/c/w.0"
	wait "$pid"
	"$T_PY" - out <<'EOF'
import json, sys
o = json.load(open(sys.argv[1]))
assert o["deletion_proven"] and o["tombstone_offset"] == 4, o
proof = o["proof"]
assert proof["key_versions_on_disk"] == [4], proof
assert proof["group_committed_offsets"] == {"c": 5}, proof
why = " | ".join(proof["delayed_by"])
for w in ("clean segments", "dirty segments", "active segment", "group c"):
    assert w in why, (w, why)
EOF
	assert_eq "00000000000000000004" "$(ls "$p/.history/.keys/k")"
	assert_cat "$p/keep" $'z\n'
	# min.compaction.lag.ms holds a value back: named, and no proof within the timeout
	setfattr -n user.topicfs.min.compaction.lag.ms -v 3600000 "$MNT/w"
	echo d > "$p/k"
	echo 100 > "$MNT/.groups/c/w.0"
	if "$CTL" erase --wait --timeout 1 --interval 50 "$MNT/w" k > out2; then fail "proven: $(cat out2)"; fi
	grep -q 'min.compaction.lag.ms' out2
	grep -q '^deletion_proven: false' out2
}

# A position written from the shell is where a kafka-python consumer of the group
# resumes; its own commit shows in the file; while it is a member the shell's
# commit is refused (EBUSY), once it left it is taken.
c_kafka_resume() {
	"$T_PY" -c 'import kafka' 2>/dev/null || skip "kafka-python is not installed"
	local i
	t_kafka_mount group.initial.rebalance.delay.ms=0
	mkdir "$MNT/t"
	for i in $(seq 0 9); do echo "v$i" > "$MNT/t/0/k$i"; done
	mkdir "$MNT/.groups/kp"
	echo 7 > "$MNT/.groups/kp/t.0"
	"$T_PY" - "$BROKER" "$MNT" <<'EOF'
import errno, sys
from kafka import KafkaConsumer
broker, mnt = sys.argv[1], sys.argv[2]
c = KafkaConsumer("t", bootstrap_servers=broker, group_id="kp", enable_auto_commit=False,
                  auto_offset_reset="earliest", consumer_timeout_ms=20000)
got = []
for m in c:
    got.append(m.offset)
    if m.offset == 9:
        break
assert got == [7, 8, 9], got
c.commit()
try:
    with open(mnt + "/.groups/kp/t.0", "w") as f:
        f.write("3\n")
    raise SystemExit("the shell's commit was taken while the group had a member")
except OSError as e:
    assert e.errno == errno.EBUSY, e
c.close()
EOF
	assert_cat "$MNT/.groups/kp/t.0" $'10\n'
	assert_eq 0 "$(t_x "$MNT/.groups/kp/t.0" lag_records)"
	t_until shell_commit "$MNT/.groups/kp/t.0" 3     # once the leave is done
	assert_cat "$MNT/.groups/kp/t.0" $'3\n'
}

t_test follow_bootstrap c_follow_bootstrap
t_test follow_follows c_follow_follows
t_test follow_errors c_follow_errors
t_test health_metrics c_health_metrics
t_test groups_files c_groups_files
t_test groups_follow c_groups_follow
t_test groups_access c_groups_access
t_test erase_verdict c_erase_verdict
t_test erase_wait c_erase_wait
t_test kafka_resume c_kafka_resume
t_done
