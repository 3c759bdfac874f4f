#!/bin/bash
# test_rename.sh - rename (docs/semantics.md §4): inside one partition it appends
# b = value(a) and the tombstone of a in one batch; across partitions or topics it is
# EXDEV, and mv falls back to copy and unlink.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# The two records of a rename: consecutive offsets, one batch, the right contents.
c_rename_is_one_batch() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 n h a b
	echo value > "$p/a"
	echo other > "$p/z"
	n=$(t_leo t/0)
	assert_records t/0 2 mv "$p/a" "$p/b"
	assert_absent "$p/a"
	assert_cat "$p/b" $'value\n'
	assert_eq "b z" "$(ls "$p" | xargs)" "listing after mv"
	h=$p/.history
	a=$(t_off "$n") b=$(t_off $((n + 1)))
	assert_eq "$a $b" "$(ls -A "$h" | sort | tail -n 2 | xargs)" "the two new history entries"
	# Both records are in the batch (their order inside it is the daemon's choice).
	assert_eq "a:1: b:0:value" \
		"$(for o in "$a" "$b"; do printf '%s:%s:%s\n' "$(t_x "$h/$o" key)" \
			"$(t_x "$h/$o" tombstone)" "$(cat "$h/$o")"; done | sort | xargs)" \
		"key:tombstone:value of the two records"
	assert_one_batch t 0 "$n" $((n + 1))
	local ob
	ob=$(t_x "$p/b" offset)
	[ "$ob" = "$n" ] || [ "$ob" = $((n + 1)) ] || fail "offset attr of b is $ob, expected $n or $((n + 1))"
}

c_rename_over_existing_key() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	echo new > "$p/a"; echo old > "$p/b"
	assert_records t/0 2 t_sys rename "$p/a" "$p/b"
	assert_cat "$p/b" $'new\n'
	assert_absent "$p/a"
	assert_eq 2 "$(t_x "$p/b" versions | wc -w)" "versions of b"
	t_remount
	assert_cat "$p/b" $'new\n'
	assert_absent "$p/a"
}

c_rename_errors() {
	t_mount
	mkdir "$MNT/t" "$MNT/t/1" "$MNT/u"
	echo v > "$MNT/t/0/a"
	assert_records t/0 0 assert_errno ENOENT rename "$MNT/t/0/missing" "$MNT/t/0/x"
	# Across partitions and topics: EXDEV, and nothing appended anywhere.
	assert_records t/0 0 assert_errno EXDEV rename "$MNT/t/0/a" "$MNT/t/1/a"
	assert_eq 0 "$(t_leo t/1)" "log end of t/1 after the EXDEV rename"
	assert_records t/0 0 assert_errno EXDEV rename "$MNT/t/0/a" "$MNT/u/0/a"
	assert_eq 0 "$(t_leo u/0)" "log end of u/0 after the EXDEV rename"
	assert_cat "$MNT/t/0/a" $'v\n'
	# A bad new name: EINVAL, nothing appended, the old key stays. A scratch name is
	# out of the log: EXDEV, as across partitions.
	assert_records t/0 0 assert_errno EXDEV rename "$MNT/t/0/a" "$MNT/t/0/.raw"
	assert_errno ENOENT stat "$MNT/t/0/.raw"
	assert_records t/0 0 assert_errno EINVAL rename "$MNT/t/0/a" "$MNT/t/0/%2e"
	assert_cat "$MNT/t/0/a" $'v\n'
}

# mv across partitions and topics copies and unlinks (coreutils' EXDEV fallback).
c_mv_fallback() {
	t_mount
	mkdir "$MNT/t" "$MNT/t/1" "$MNT/u"
	head -c 5000 /dev/urandom > "$T_CASE/v"
	cp "$T_CASE/v" "$MNT/t/0/a"
	cp "$T_CASE/v" "$MNT/t/0/b"
	assert_records t/1 1 mv "$MNT/t/0/a" "$MNT/t/1/a"
	assert_same_file "$T_CASE/v" "$MNT/t/1/a" "value moved to t/1"
	assert_absent "$MNT/t/0/a"
	assert_records u/0 1 mv "$MNT/t/0/b" "$MNT/u/0/b"
	assert_same_file "$T_CASE/v" "$MNT/u/0/b" "value moved to u/0"
	assert_absent "$MNT/t/0/b"
	assert_eq 1 "$(t_x "$MNT/t/0/.history/$(t_last t/0)" tombstone)" "last record of t/0 is a tombstone"
	assert_eq "" "$(ls "$MNT/t/0")" "t/0 after both moves"
}

# An open reader keeps reading the old name's value after the rename.
c_rename_with_open_reader() {
	t_mount
	mkdir "$MNT/t"
	echo value > "$MNT/t/0/a"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
p = sys.argv[1]
fd = os.open(os.path.join(p, "a"), os.O_RDONLY)
os.rename(os.path.join(p, "a"), os.path.join(p, "b"))
print(os.read(fd, 100).decode().strip(), open(os.path.join(p, "b")).read().strip())
os.close(fd)
EOF
)
	assert_eq "value value" "$out" "read of the open handle, then of the new name"
}

t_test rename_is_one_batch c_rename_is_one_batch
t_test rename_over_existing_key c_rename_over_existing_key
t_test rename_errors c_rename_errors
t_test mv_fallback c_mv_fallback
t_test rename_with_open_reader c_rename_with_open_reader
t_done
