#!/bin/bash
# test_bulk.sh - .append and .put (DESIGN §1 "Bulk lines"): one line = one record, the
# lines of one write(2) = one batch, a malformed line fails its write with nothing
# appended, a last line without a newline is appended at close.
. "$(dirname "$0")/lib.sh"
t_require_daemon

NL=$'\n'
TAB=$'\t'

c_append_lines() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 h o
	echo keyed > "$p/k"
	assert_eq "open:OK write1:OK close:OK" "$(t_sys writes "$p/.append" "a${NL}bb${NL}${NL}ccc${NL}")" \
		"one write of four lines to .append"
	assert_eq 5 "$(t_leo t/0)" "log end"
	assert_one_batch t 0 1 4
	h=$p/.history
	assert_eq "a|bb||ccc|" "$(for o in 1 2 3 4; do printf '%s|' "$(cat "$h/$(t_off $o)")"; done)" \
		"values of the keyless records"
	for o in 1 2 3 4; do
		assert_errno ENODATA getxattr "$h/$(t_off $o)" user.topicfs.key
		assert_eq 0 "$(t_x "$h/$(t_off $o)" tombstone)" "tombstone attr of keyless record $o"
	done
	assert_eq k "$(ls -A "$p")" "keyless records are never files"
	# A shell redirection works too.
	assert_records t/0 2 sh -c "printf 'x\\ny\\n' > '$p/.append'"
}

c_put_lines() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	assert_eq "open:OK write1:OK close:OK" \
		"$(t_sys writes "$p/.put" "k1${TAB}v1${NL}k2${TAB}v 2 with${TAB}tab${NL}k3${TAB}${NL}")" \
		"one write of three lines to .put"
	assert_one_batch t 0 0 2
	assert_cat "$p/k1" v1
	assert_cat "$p/k2" "v 2 with${TAB}tab"
	assert_cat "$p/k3" ""             # an empty value, not a tombstone
	assert_eq "k1 k2 k3" "$(ls "$p" | xargs)" "listing"
	# Later lines for the same key win; each line is its own record.
	assert_records t/0 2 t_sys writes "$p/.put" "k1${TAB}first${NL}k1${TAB}second${NL}"
	assert_cat "$p/k1" second
	# Two writes on one handle: two batches.
	assert_eq "open:OK write1:OK write2:OK close:OK" \
		"$(t_sys writes "$p/.put" "a${TAB}1${NL}b${TAB}2${NL}" "c${TAB}3${NL}d${TAB}4${NL}")" \
		"two writes to .put"
	assert_one_batch t 0 5 6
	assert_one_batch t 0 7 8
}

c_malformed_lines() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	echo keep > "$p/k"
	# write1 fine, write2 has a bad line among good ones, write3 fine.
	for bad in "notab" ".raw${TAB}v" "%G1${TAB}v" "a/b${TAB}v" "${TAB}v"; do
		out=$(t_sys writes "$p/.put" "g1${TAB}1${NL}" "g2${TAB}2${NL}${bad}${NL}k${TAB}clobbered${NL}" "g3${TAB}3${NL}")
		assert_eq "open:OK write1:OK write2:EINVAL write3:OK close:OK" "$out" ".put writes with the line '$bad'"
	done
	assert_cat "$p/k" $'keep\n'
	assert_absent "$p/g2"
	assert_eq "g1 g3 k" "$(ls "$p" | xargs)" "listing after the malformed writes"
	assert_eq 11 "$(t_leo t/0)" "log end: 1 + 5 x (g1, g3)"
}

c_value_too_big_in_line() {
	t_mount -o max.message.bytes=1000
	mkdir "$MNT/t"
	local p=$MNT/t/0 big out
	big=$(head -c 3000 /dev/zero | tr '\0' v)
	out=$(t_sys writes "$p/.put" "ok${TAB}1${NL}huge${TAB}${big}${NL}")
	assert_eq "open:OK write1:EFBIG close:OK" "$out" ".put of a line over max.message.bytes"
	out=$(t_sys writes "$p/.append" "${big}${NL}")
	assert_eq "open:OK write1:EFBIG close:OK" "$out" ".append of a line over max.message.bytes"
	assert_eq 0 "$(t_leo t/0)" "log end"
	assert_absent "$p/ok"
}

# Lines are cut at newlines whatever the write boundaries; the tail goes in at close.
c_partial_lines() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	out=$("$T_PY" - "$p" <<'EOF'
import os, sys
p = sys.argv[1]
leo = lambda: int(os.getxattr(p, "user.topicfs.log_end_offset"))
seen = []
fd = os.open(os.path.join(p, ".append"), os.O_WRONLY)
os.write(fd, b"par")
seen.append(leo())                 # 0: no newline yet
os.write(fd, b"tial\nne")
seen.append(leo())                 # 1: "partial"
os.write(fd, b"xt")
seen.append(leo())                 # 1
os.close(fd)
seen.append(leo())                 # 2: "next" at close
h = os.path.join(p, ".history")
seen += [open(os.path.join(h, "%020d" % o)).read() for o in (0, 1)]
fd = os.open(os.path.join(p, ".put"), os.O_WRONLY)
os.write(fd, b"k\tno newline")
os.close(fd)
seen.append(open(os.path.join(p, "k")).read())
print(" ".join(map(str, seen)))
EOF
)
	assert_eq "0 1 1 2 partial next no newline" "$out" "log end while writing partial lines, then values"
}

c_bulk_after_remount() {
	t_mount
	mkdir "$MNT/t"
	t_sys writes "$MNT/t/0/.append" "one${NL}two${NL}" > /dev/null
	t_sys writes "$MNT/t/0/.put" "k${TAB}v${NL}" > /dev/null
	t_remount
	assert_eq 3 "$(t_hist t/0)" "history entries after remount"
	assert_cat "$MNT/t/0/.history/$(t_off 1)" two
	assert_cat "$MNT/t/0/k" v
}

t_test append_lines c_append_lines
t_test put_lines c_put_lines
t_test malformed_lines c_malformed_lines
t_test value_too_big_in_line c_value_too_big_in_line
t_test partial_lines c_partial_lines
t_test bulk_after_remount c_bulk_after_remount
t_done
