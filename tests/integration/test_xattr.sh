#!/bin/bash
# test_xattr.sh - getfattr/setfattr (docs/semantics.md §6, topic
# configuration): key, topic and partition attributes, config defaults from mount
# options and their persistence, roll, and the .topicfs files. The cleaner's attributes
# are checked in test_cleaner.sh.
. "$(dirname "$0")/lib.sh"
t_require_daemon

c_key_attributes() {
	t_mount -o partitions=2
	mkdir "$MNT/t"
	local k=$MNT/t/1/k now ts names
	echo a > "$k"; echo other > "$MNT/t/1/o"; echo b > "$k"
	assert_eq 2 "$(t_x "$k" offset)" "offset"
	assert_eq 1 "$(t_x "$k" partition)" "partition"
	assert_eq k "$(t_x "$k" key)" "key"
	assert_eq "0 2" "$(t_x "$k" versions)" "versions"
	ts=$(t_x "$k" timestamp); now=$(date +%s%3N)
	assert_match '[0-9]{13}' "$ts" "timestamp (ms)"
	[ $((now - ts)) -ge 0 ] && [ $((now - ts)) -lt 86400000 ] || fail "timestamp $ts is not from today (now $now)"
	assert_errno ENODATA getxattr "$k" user.topicfs.header.trace
	assert_errno ENODATA getxattr "$k" user.topicfs.nonsense
	assert_errno "EOPNOTSUPP|ENOTSUP" getxattr "$k" security.capability
	names=$(getfattr --absolute-names -m - "$k" | grep -v '^#' | sort | xargs)
	for n in offset timestamp partition key versions; do
		case " $names " in *" user.topicfs.$n "*) ;; *) fail "listxattr of a key lacks user.topicfs.$n: $names" ;; esac
	done
	# Attributes of keys are read-only: no record, no change.
	[ "$(t_sys setxattr "$k" user.topicfs.offset 0)" != OK ] || fail "setfattr offset on a key succeeded"
	[ "$(t_sys setxattr "$k" user.other x)" != OK ] || fail "setfattr user.other on a key succeeded"
	assert_eq 3 "$(t_leo t/1)" "log end after the refused setfattr"
	assert_eq 2 "$(t_x "$k" offset)" "offset after the refused setfattr"
}

c_topic_config_defaults() {
	t_mount -o segment.bytes=1048576,max.message.bytes=5000,flush.ms=500
	mkdir "$MNT/t"
	local t=$MNT/t
	assert_eq 1048576 "$(t_x "$t" segment.bytes)" "segment.bytes from -o"
	assert_eq 5000 "$(t_x "$t" max.message.bytes)" "max.message.bytes from -o"
	assert_eq 500 "$(t_x "$t" flush.ms)" "flush.ms from -o"
	assert_eq compact "$(t_x "$t" cleanup.policy)" "cleanup.policy default"
	assert_eq 86400000 "$(t_x "$t" delete.retention.ms)" "delete.retention.ms default"
	assert_eq 604800000 "$(t_x "$t" retention.ms)" "retention.ms default"
	assert_eq -1 "$(t_x "$t" retention.bytes)" "retention.bytes default"
	assert_eq 0 "$(t_x "$t" min.compaction.lag.ms)" "min.compaction.lag.ms default"
	assert_eq 604800000 "$(t_x "$t" segment.ms)" "segment.ms default (7 days)"
	assert_match '0?\.50*' "$(t_x "$t" min.cleanable.dirty.ratio)" "min.cleanable.dirty.ratio default"
	assert_eq none "$(t_x "$t" compression.type)" "compression.type default"
	local names
	names=$(getfattr --absolute-names -m - "$t" | grep -v '^#' | xargs)
	for n in cleanup.policy segment.bytes segment.ms min.cleanable.dirty.ratio delete.retention.ms \
		min.compaction.lag.ms max.compaction.lag.ms retention.ms retention.bytes max.message.bytes \
		compression.type message.timestamp.type; do
		case " $names " in *" user.topicfs.$n "*) ;; *) fail "listxattr of a topic lacks user.topicfs.$n" ;; esac
	done
	# A bad value is refused with a log line naming it, and changes nothing.
	assert_errno EINVAL setxattr "$t" user.topicfs.segment.bytes bogus
	t_daemon_log | grep -q "segment.bytes=bogus refused" || fail "no log line for segment.bytes=bogus"
	assert_eq 1048576 "$(t_x "$t" segment.bytes)" "segment.bytes after a refused value"
	# A topic's config is its own: set, then remount with other defaults.
	setfattr -n user.topicfs.retention.ms -v 1000 "$t"
	setfattr -n user.topicfs.cleanup.policy -v delete "$t"
	t_remount -o segment.bytes=2097152
	assert_eq 1000 "$(t_x "$t" retention.ms)" "retention.ms after remount"
	assert_eq delete "$(t_x "$t" cleanup.policy)" "cleanup.policy after remount"
	mkdir "$MNT/u"
	assert_eq 2097152 "$(t_x "$MNT/u" segment.bytes)" "segment.bytes of a topic made after the remount"
}

c_partition_attributes() {
	# No cleaner: this counts records in closed segments.
	t_mount -o segment.bytes=4096,log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 i logs
	assert_eq "0 0 0" "$(t_x "$p" log_start_offset) $(t_x "$p" log_end_offset) $(t_x "$p" live_keys)" \
		"start, end, live keys of an empty partition"
	for i in $(seq 0 29); do head -c 500 /dev/urandom > "$p/k$((i % 10))"; done
	rm "$p/k0"
	assert_eq "0 31 9" "$(t_x "$p" log_start_offset) $(t_x "$p" log_end_offset) $(t_x "$p" live_keys)" \
		"start, end, live keys after 30 writes and an rm"
	logs=$(ls "$DATA/t-0"/*.log | wc -l)
	[ "$logs" -gt 1 ] || fail "only $logs segment with segment.bytes=4096 after 15 KB"
	assert_eq "$logs" "$(t_x "$p" segments)" "segments attr vs .log files in the data dir"
	assert_eq "$(cat "$DATA/t-0"/*.log | wc -c)" "$(t_x "$p" size_bytes)" "size_bytes vs the .log files"
	# Every record is still readable across the segments.
	assert_eq 31 "$(t_hist t/0)" "history entries across segments"
	assert_eq 500 "$(stat -c %s "$p/.history/$(t_off 17)")" "size of a record in an older segment"
	# log_end_offset and the names of segment files agree.
	assert_match '[0-9]{20}\.log' "$(ls "$DATA/t-0" | grep '\.log$' | tail -n 1)" "segment file names"
}

c_roll() {
	t_mount -o log.cleaner.threads=0
	mkdir "$MNT/t"
	local p=$MNT/t/0 s0
	echo a > "$p/k"; echo b > "$p/k"
	s0=$(t_x "$p" segments)
	assert_eq 1 "$s0" "segments before roll"
	assert_records t/0 0 setfattr -n user.topicfs.roll -v 1 "$p"
	echo c > "$p/k"
	assert_eq 2 "$(t_x "$p" segments)" "segments after roll and one write"
	assert_ok test -f "$DATA/t-0/00000000000000000002.log"
	assert_cat "$p/k" $'c\n'
	assert_cat "$p/.history/$(t_off 0)" $'a\n'
	t_remount -o log.cleaner.threads=0
	assert_eq "2 3" "$(t_x "$p" segments) $(t_leo t/0)" "segments and log end after remount"
}

c_topicfs_dir() {
	t_mount
	mkdir "$MNT/t"
	echo v > "$MNT/t/0/k"
	assert_eq t "$(ls -A "$MNT")" "the root lists topics only"
	local m
	m=$(cat "$MNT/.topicfs/metrics")
	[ -n "$m" ] || fail ".topicfs/metrics is empty"
	# Prometheus text format: comments, or "name{labels} value".
	printf '%s\n' "$m" | grep -Ev '^(#.*|[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEa-zA-Z]+( [0-9]+)?|)$' \
		> "$T_CASE/badlines" || true
	[ ! -s "$T_CASE/badlines" ] || fail "metrics lines not in Prometheus text format: $(head -n 3 "$T_CASE/badlines")"
	assert_ok cat "$MNT/.topicfs/status"
	assert_eq "" "$(find "$MNT" -name '.*')" "find never lists .topicfs"
}

t_test key_attributes c_key_attributes
t_test topic_config_defaults c_topic_config_defaults
t_test partition_attributes c_partition_attributes
t_test roll c_roll
t_test topicfs_dir c_topicfs_dir
t_done
