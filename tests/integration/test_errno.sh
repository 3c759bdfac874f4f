#!/bin/bash
# test_errno.sh - every errno docs/semantics.md documents, checked at the syscall (t_sys), and
# that each failure changes nothing: no record, no new name, no changed config.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# Topic names: 1 to 249 of [A-Za-z0-9._-], not starting with '.'; anything else EINVAL.
c_bad_topic_names() {
	t_mount
	local n249 n250 bad
	n249=$(printf 'a%.0s' $(seq 249)) n250=$(printf 'b%.0s' $(seq 250))
	for bad in ".x" "$n250" "a b" "é" "a:b" "a+b" "a*" "tab	x" "a%2Fb"; do
		assert_errno EINVAL mkdir "$MNT/$bad"
	done
	assert_eq "" "$(ls -A "$MNT")" "root after the bad mkdirs"
	assert_eq "" "$(ls -A "$DATA" "$DATA/topics" 2>/dev/null | grep -E -e '-[0-9]+$' || true)$(ls -A "$DATA/topics" 2>/dev/null)" \
		"topic files in the data dir after the bad mkdirs"
	# The longest legal name and the full legal alphabet work.
	assert_errno OK mkdir "$MNT/$n249"
	assert_errno OK mkdir "$MNT/Az09._-"
	assert_eq "Az09._- $n249" "$(ls "$MNT" | xargs)" "root after the good mkdirs"
	echo v > "$MNT/$n249/0/k"
	assert_cat "$MNT/$n249/0/k" $'v\n'
	# Names past NAME_MAX never make it.
	assert_errno ENAMETOOLONG mkdir "$MNT/$(printf 'c%.0s' $(seq 256))"
}

# Topic config through setfattr: a bad value is EINVAL and changes nothing.
c_bad_config_values() {
	t_mount
	mkdir "$MNT/t"
	local t=$MNT/t pair name value before file_before
	setfattr -n user.topicfs.segment.bytes -v 1048576 "$t"
	file_before=$(cksum < "$DATA/topics/t")
	for pair in "segment.bytes=abc" "segment.bytes=-1" "segment.bytes=" "segment.bytes=12x" \
		"cleanup.policy=bogus" "cleanup.policy=" "cleanup.policy=compact,bogus" \
		"min.cleanable.dirty.ratio=1.5" "min.cleanable.dirty.ratio=-0.1" \
		"max.message.bytes=-5" "max.message.bytes=99999999999999" \
		"retention.ms=-7" "delete.retention.ms=soon" "compression.type=lz5" \
		"message.timestamp.type=Sometime"; do
		name=${pair%%=*} value=${pair#*=}
		before=$(t_x "$t" "$name")
		assert_errno EINVAL setxattr "$t" "user.topicfs.$name" "$value"
		assert_eq "$before" "$(t_x "$t" "$name")" "$name after the rejected value '$value'"
	done
	assert_eq "$file_before" "$(cksum < "$DATA/topics/t")" "$DATA/topics/t after the rejected values"
	# Good values take, and persist.
	assert_errno OK setxattr "$t" user.topicfs.cleanup.policy "compact,delete"
	assert_errno OK setxattr "$t" user.topicfs.min.cleanable.dirty.ratio 0.25
	t_remount
	assert_eq "compact,delete" "$(t_x "$t" cleanup.policy)" "cleanup.policy after remount"
	assert_eq 1048576 "$(t_x "$t" segment.bytes)" "segment.bytes after remount"
	assert_eq 0.25 "$(t_x "$t" min.cleanable.dirty.ratio | sed 's/0*$//')" "min.cleanable.dirty.ratio"
	# An attribute that is no config is refused too.
	[ "$(t_sys setxattr "$t" user.topicfs.no.such.config 1)" != OK ] || fail "setfattr of an unknown name succeeded"
	assert_errno ENODATA getxattr "$t" user.topicfs.no.such.config
}

# A value over max.message.bytes: EFBIG when the handle commits, nothing appended.
c_value_too_large() {
	t_mount -o max.message.bytes=1000
	mkdir "$MNT/t"
	local k=$MNT/t/0/k
	assert_eq 1000 "$(t_x "$MNT/t" max.message.bytes)" "max.message.bytes of a new topic"
	echo small > "$k"
	T_SYS_STEP=1 assert_records t/0 0 assert_errno "write:EFBIG|close:EFBIG" put "$k" "x*2000"
	assert_cat "$k" $'small\n'
	T_SYS_STEP=1 assert_records t/0 0 assert_errno "write:EFBIG|close:EFBIG" put "$MNT/t/0/new" "x*2000"
	assert_absent "$MNT/t/0/new"
	T_SYS_STEP=1 assert_records t/0 0 assert_errno "write:EFBIG|fsync:EFBIG" put "$k" "x*5000" fsync
	assert_cat "$k" $'small\n'
	# The shell sees it as a failed redirection.
	assert_fails sh -c "head -c 3000 /dev/zero > '$k'"
	assert_cat "$k" $'small\n'
	# A value well below the limit goes in; raising the limit lets the big one in.
	T_SYS_STEP=1 assert_records t/0 1 assert_errno close:OK put "$k" "x*500"
	setfattr -n user.topicfs.max.message.bytes -v 100000 "$MNT/t"
	T_SYS_STEP=1 assert_records t/0 1 assert_errno close:OK put "$k" "x*2000"
	assert_eq 2000 "$(stat -c %s "$k")" "size after the limit was raised"
}

# Regression (issue 11): Kafka compares a whole batch with max.message.bytes. With
# 1000: a key "k" and 929 bytes make a batch of 61 + 2 (record length) + 8 + 929 =
# 1000 bytes (attributes, two deltas, key length, "k", value length 2, header
# count); 930 is EFBIG. Keyless (.append): 930 fit, 931 do not.
c_largest_value_is_kafkas() {
	t_mount -o max.message.bytes=1000
	mkdir "$MNT/t"
	local p=$MNT/t/0 s0
	echo small > "$p/k"
	T_SYS_STEP=1 assert_records t/0 0 assert_errno "write:EFBIG|close:EFBIG" put "$p/k" "x*930"
	s0=$(t_x "$p" size_bytes)
	T_SYS_STEP=1 assert_records t/0 1 assert_errno close:OK put "$p/k" "x*929"
	assert_eq 1000 $(($(t_x "$p" size_bytes) - s0)) "bytes of the largest batch"
	assert_eq 929 "$(stat -c %s "$p/k")" "size of the largest value"
	assert_records t/0 0 assert_errno EFBIG put "$p/.put" "k	$(head -c 930 /dev/zero | tr '\0' x)"
	assert_records t/0 2 assert_errno OK put "$p/.put" "k	$(head -c 929 /dev/zero | tr '\0' x)"   # and its COMMIT
	assert_records t/0 0 assert_errno EFBIG put "$p/.append" "$(head -c 931 /dev/zero | tr '\0' x)"
	assert_records t/0 1 assert_errno OK put "$p/.append" "$(head -c 930 /dev/zero | tr '\0' x)"
}

# Regression (issue 11): a mount of a data directory that does not exist (a typo)
# used to create it; it fails and says how to ask for one, and nothing is created.
c_missing_data_dir() {
	local out rc=0
	out=$(timeout 60 "$TOPICFS" -f "$T_CASE/no-such-dir" "$MNT" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status of a mount of a missing data directory"
	assert_match '.*no-such-dir: No such file or directory \(create it, or mount with -o create_data_dir\).*' \
		"$out" "what topicfs says"
	assert_absent "$T_CASE/no-such-dir"
	# The daemon itself, not t_mount (which makes the directory first).
	timeout 60 "$TOPICFS" -o create_data_dir,auto_unmount "$T_CASE/new-dir" "$MNT" ||
		fail "mount with -o create_data_dir failed"
	t_on_exit "fusermount3 -uz '$MNT'"
	assert_ok test -d "$T_CASE/new-dir/topics"
	umount "$MNT"
	t_mount "$T_CASE/new-dir" "$MNT"
	mkdir "$MNT/t"
	echo v > "$MNT/t/0/k"
	assert_cat "$MNT/t/0/k" $'v\n'
}

c_unknown_names() {
	t_mount
	mkdir "$MNT/t"
	assert_errno ENOENT stat "$MNT/nosuch"
	assert_errno ENOENT stat "$MNT/t/7"
	assert_errno ENOENT stat "$MNT/t/0/nokey"
	assert_errno ENOENT read "$MNT/t/0/nokey"
	assert_errno ENOENT getxattr "$MNT/t/0/nokey" user.topicfs.offset
	assert_errno ENOENT stat "$MNT/t/0/.history/00000000000000000000"
	assert_errno ENOENT stat "$MNT/t/0/.nosuchcontrol"
	assert_records t/0 0 assert_errno ENOENT unlink "$MNT/t/0/nokey"
	echo v > "$MNT/t/0/k"; rm "$MNT/t/0/k"
	assert_records t/0 0 assert_errno ENOENT unlink "$MNT/t/0/k"
	assert_errno ENOENT stat "$MNT/t/0/k"
}

# Only the canonical spelling names a key: ENOENT on lookup, EINVAL on create.
c_non_canonical_key_names() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 n
	echo dot > "$p/%2Ex"          # the key ".x"
	echo pct > "$p/%25"           # the key "%"
	echo A > "$p/A"
	for n in "%2ex" "%G1" "%41" "%2e" "a%" "%0a" "%7f" "%2f" "a%2" "%%"; do
		assert_errno ENOENT stat "$p/$n"
		assert_records t/0 0 assert_errno EINVAL put "$p/$n" v
	done
	# A raw leading dot never names a key: it is a scratch file (no record, unlisted).
	assert_errno ENOENT stat "$p/.x"
	assert_records t/0 0 assert_errno OK put "$p/.x" v
	assert_errno ENOENT stat "$p/%"             # the empty key was never written
	assert_eq "%25 %2Ex A" "$(ls "$p" | xargs)" "listing after the refused names"
	assert_cat "$p/%2Ex" $'dot\n'
	# A raw control byte is not canonical either.
	assert_records t/0 0 assert_errno EINVAL put "$p/$(printf 'a\tb')" v
}

c_name_too_long() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 n255 n256 out n
	n255=$(printf 'k%.0s' $(seq 255)) n256=$(printf 'k%.0s' $(seq 256))
	assert_records t/0 1 assert_errno OK put "$p/$n255" v
	assert_cat "$p/$n255" v
	assert_records t/0 0 assert_errno ENAMETOOLONG put "$p/$n256" v
	# A key whose name would exceed 255 bytes: 100 bytes of 0x01 is "%01" x 100. docs/semantics.md §2
	# does not say whether .put takes it: either it goes in and shows in .history, or
	# the write is ENAMETOOLONG and appends nothing. (long_key_from_kafka_segment checks
	# such a key in .history from a segment written by Kafka's own record format.)
	local long
	long=$(printf '%%01%.0s' $(seq 100))
	n=$(t_leo t/0)
	out=$(t_sys writes "$p/.put" "$long	v2
")
	case $out in
	"open:OK write1:OK close:OK")
		assert_eq $((n + 1)) "$(t_leo t/0)" "log end after the .put"
		assert_eq "$(printf '01%.0s' $(seq 100))" "$(t_xhex "$p/.history/$(t_last t/0)" key)" \
			"key attr of the record in .history"
		assert_cat "$p/.history/$(t_last t/0)" v2
		;;
	"open:OK write1:ENAMETOOLONG close:OK")
		echo "# note: .put refuses keys whose name exceeds 255 bytes"
		assert_eq "$n" "$(t_leo t/0)" "log end after the refused .put"
		;;
	*) fail ".put of a key with a 300-byte name: $out" ;;
	esac
	assert_eq "$n255" "$(ls "$p")" "listing (the long-named key is no file)"
	# Looking up a name over 255 bytes: ENAMETOOLONG, as on ext4 or tmpfs (docs/semantics.md is
	# silent on lookups; "do what a user of a normal Linux filesystem would expect").
	assert_errno ENAMETOOLONG stat "$p/$n256"
	assert_errno ENAMETOOLONG stat "$p/$long"
}

# Records with keys whose names exceed 255 bytes, in a segment built with kafka-python
# (an independent writer of Kafka's RecordBatch v2): they show in .history with their
# key, are no files, and the other keys of the batch are. Record headers show as
# user.topicfs.header.NAME.
c_long_key_from_kafka_segment() {
	"$T_PY" -c 'import kafka.record.default_records' 2>/dev/null || skip "python3-kafka is not installed"
	t_mount
	mkdir "$MNT/t"
	t_umount
	rm -f "$DATA/t-0"/*
	"$T_PY" - "$DATA/t-0/00000000000000000000.log" <<'PY'
import sys
from kafka.record.default_records import DefaultRecordBatchBuilder
b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                              producer_id=-1, producer_epoch=-1, base_sequence=-1,
                              batch_size=1 << 20)
ts = 1700000000000
for off, key, value, headers in ((0, b"\x01" * 100, b"v1", []),
                                 (1, b"k", b"short", [("trace", b"abc-123"), ("origin", b"kafka")]),
                                 (2, b"z" * 300, b"v3", [])):
    b.append(off, timestamp=ts + off, key=key, value=value, headers=headers)
open(sys.argv[1], "wb").write(bytes(b.build()))
PY
	t_mount
	local p=$MNT/t/0 h=$MNT/t/0/.history
	assert_eq "$(printf '%020d\n' 0 1 2)" "$(ls -A "$h")" "history of the Kafka-built segment"
	assert_eq "$(printf '01%.0s' $(seq 100))" "$(t_xhex "$h/$(t_off 0)" key)" "key of record 0"
	assert_eq "$(printf '7a%.0s' $(seq 300))" "$(t_xhex "$h/$(t_off 2)" key)" "key of record 2"
	assert_cat "$h/$(t_off 2)" v3
	assert_eq 1700000000002 "$(t_x "$h/$(t_off 2)" timestamp)" "timestamp of record 2"
	assert_eq k "$(ls -A "$p")" "listing: only the key whose name fits"
	assert_cat "$p/k" short
	assert_eq 3 "$(t_leo t/0)" "log end"
	# Kafka headers show as user.topicfs.header.NAME on the key and its history entry.
	assert_eq "abc-123" "$(t_x "$p/k" header.trace)" "header.trace of key k"
	assert_eq "kafka" "$(t_x "$h/$(t_off 1)" header.origin)" "header.origin of history entry 1"
	assert_errno ENODATA getxattr "$h/$(t_off 0)" user.topicfs.header.trace
}

c_eperm() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	echo v > "$p/k"
	assert_records t/0 0 assert_errno EPERM mkdir "$p/sub"
	assert_records t/0 0 assert_errno EPERM link "$p/k" "$p/hard"
	assert_records t/0 0 assert_errno EPERM symlink k "$p/soft"
	assert_records t/0 0 assert_errno EPERM mkfifo "$p/fifo"
	assert_records t/0 0 assert_errno EPERM mknod_chr "$p/null"
	assert_fails ln "$p/k" "$p/hard2"
	assert_fails ln -s k "$p/soft2"
	assert_eq k "$(ls "$p")" "listing after the refused entries"
}

c_rmdir() {
	t_mount
	mkdir "$MNT/t" "$MNT/t/1" "$MNT/e"
	echo v > "$MNT/t/1/k"
	assert_errno EBUSY rmdir "$MNT/t/0"
	assert_errno EBUSY rmdir "$MNT/t/1"
	assert_errno ENOTEMPTY rmdir "$MNT/t"
	assert_eq "0 1" "$(ls "$MNT/t" | xargs)" "partitions after the refused rmdirs"
	assert_cat "$MNT/t/1/k" $'v\n'
	# rm -r tombstones every key and reports the partitions busy; rmdir then finishes.
	assert_fails rm -r "$MNT/t"
	assert_absent "$MNT/t/1/k"
	assert_eq 2 "$(t_leo t/1)" "log end of t/1 after rm -r (value + tombstone)"
	assert_errno OK rmdir "$MNT/t"
	assert_absent "$MNT/t"
	assert_errno OK rmdir "$MNT/e"
	assert_eq "" "$(ls -A "$MNT")" "root after deleting both topics"
	# Partition directories may wait for deletion under a "-delete" name (as in Kafka);
	# anything else left is a leak, and pending ones must not come back as topics.
	assert_eq "" "$(cd "$DATA" && ls -d t-* topics/t e-* topics/e 2>/dev/null | grep -v -- '-delete$' || true)" \
		"topic files left in the data dir"
	t_remount
	assert_eq "" "$(ls -A "$MNT")" "root after deleting both topics and a remount"
	# The name is free again, and the new topic starts empty.
	mkdir "$MNT/t"
	assert_eq "0 0" "$(t_leo t/0) $(t_hist t/0)" "log end and history of the re-created topic"
}

# Control entries: .history is read-only, .append/.put are write-only, none is listed.
c_control_entries() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 h
	echo v > "$p/k"
	h=$p/.history/$(t_off 0)
	[ "$(t_sys put "$h" x)" != OK ] || fail "writing a history entry succeeded"
	[ "$(t_sys unlink "$h")" != OK ] || fail "unlinking a history entry succeeded"
	[ "$(t_sys put "$p/.history/$(t_off 5)" x)" != OK ] || fail "creating a history entry succeeded"
	[ "$(t_sys read "$p/.append")" != OK ] || fail "reading .append succeeded"
	[ "$(t_sys read "$p/.put")" != OK ] || fail "reading .put succeeded"
	[ "$(t_sys unlink "$p/.append")" != OK ] || fail "unlinking .append succeeded"
	[ "$(t_sys mkdir "$p/.history/x")" != OK ] || fail "mkdir in .history succeeded"
	[ "$(t_sys put "$MNT/.topicfs/metrics" x)" != OK ] || fail "writing .topicfs/metrics succeeded"
	assert_eq 1 "$(t_leo t/0)" "log end after the refused control-entry writes"
	assert_cat "$h" $'v\n'
	assert_eq k "$(ls -A "$p")" "ls -A of the partition"
	# Files outside partitions are not keys.
	[ "$(t_sys put "$MNT/t/file" x)" != OK ] || fail "creating a file in a topic directory succeeded"
	[ "$(t_sys put "$MNT/file" x)" != OK ] || fail "creating a file at the root succeeded"
	assert_eq "0" "$(ls -A "$MNT/t" | xargs)" "topic after the refused create"
	assert_eq "t" "$(ls -A "$MNT" | xargs)" "root after the refused create"
}

t_test bad_topic_names c_bad_topic_names
t_skip empty_topic_name "an empty name never reaches a filesystem: mkdir MNT/ is the root itself (EEXIST from the VFS)"
t_test bad_config_values c_bad_config_values
t_test value_too_large c_value_too_large
t_test largest_value_is_kafkas c_largest_value_is_kafkas
t_test missing_data_dir c_missing_data_dir
t_test unknown_names c_unknown_names
t_test non_canonical_key_names c_non_canonical_key_names
t_test name_too_long c_name_too_long
t_test long_key_from_kafka_segment c_long_key_from_kafka_segment
t_test eperm c_eperm
t_test rmdir c_rmdir
t_test control_entries c_control_entries
t_done
