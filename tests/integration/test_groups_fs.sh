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

t_test follow_bootstrap c_follow_bootstrap
t_test follow_follows c_follow_follows
t_test follow_errors c_follow_errors
t_test health_metrics c_health_metrics
t_done
