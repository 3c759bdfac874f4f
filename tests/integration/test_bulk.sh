#!/bin/bash
# test_bulk.sh - .append and .put (docs/semantics.md §3): one line = one record, the
# lines of one write(2) = one batch, a malformed line fails its write with nothing
# appended, a last line without a newline is appended at close. And .batches: record
# batches built by kafka-python, appended as they came; what a broker refuses is
# refused with an errno and appends nothing.
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
	assert_one_batch t 0 0 2           # and its COMMIT marker at 3
	assert_cat "$p/k1" v1
	assert_cat "$p/k2" "v 2 with${TAB}tab"
	assert_cat "$p/k3" ""             # an empty value, not a tombstone
	assert_eq "k1 k2 k3" "$(ls "$p" | xargs)" "listing"
	# Later lines for the same key win; each line is its own record (and the
	# transaction's marker one more).
	assert_records t/0 3 t_sys writes "$p/.put" "k1${TAB}first${NL}k1${TAB}second${NL}"
	assert_cat "$p/k1" second
	# Two writes on one handle: two batches of one transaction.
	assert_eq "open:OK write1:OK write2:OK close:OK" \
		"$(t_sys writes "$p/.put" "a${TAB}1${NL}b${TAB}2${NL}" "c${TAB}3${NL}d${TAB}4${NL}")" \
		"two writes to .put"
	assert_one_batch t 0 7 8
	assert_one_batch t 0 9 10
}

c_malformed_lines() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	echo keep > "$p/k"
	# write1 fine, write2 has a bad line among good ones, write3 fine: the
	# close aborts the transaction and says why.
	for bad in "notab" ".raw${TAB}v" "%G1${TAB}v" "a/b${TAB}v" "${TAB}v"; do
		out=$(t_sys writes "$p/.put" "g1${TAB}1${NL}" "g2${TAB}2${NL}${bad}${NL}k${TAB}clobbered${NL}" "g3${TAB}3${NL}")
		assert_eq "open:OK write1:OK write2:EINVAL write3:OK close:EINVAL" "$out" ".put writes with the line '$bad'"
	done
	assert_cat "$p/k" $'keep\n'
	assert_absent "$p/g2"
	assert_eq "k" "$(ls "$p" | xargs)" "listing after the malformed writes"
	assert_eq 16 "$(t_leo t/0)" "log end: 1 + 5 x (g1, g3, ABORT)"
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
	assert_eq 4 "$(t_hist t/0)" "history entries after remount (the .put's COMMIT too)"
	assert_cat "$MNT/t/0/.history/$(t_off 1)" two
	assert_cat "$MNT/t/0/k" v
}

# producer_batches DIR: kafka-python builds DIR/a.bin (uncompressed: k1, a keyless
# record, k2; a header on k1) and DIR/b.bin (zstd: k3, k2's tombstone), the
# timestamps from 1700000000000, as a producer sends them.
producer_batches() {
	"$T_PY" - "$1" <<'PY'
import sys
from kafka.record.default_records import DefaultRecordBatchBuilder
def batch(codec, recs, path):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i, (ts, key, value, headers) in enumerate(recs):
        b.append(i, timestamp=ts, key=key, value=value, headers=headers)
    buf = bytes(b.build())
    open(path, "wb").write(buf)
    return buf
ts = 1700000000000
batch(0, [(ts, b"k1", b"new value", [("trace", b"t-1")]), (ts + 1, None, b"keyless", []),
          (ts + 2, b"k2", b"two", [])], sys.argv[1] + "/a.bin")
b = batch(4, [(ts + 10, b"k3", b"three " * 50, []), (ts + 11, b"k2", None, [])],
          sys.argv[1] + "/b.bin")
assert b[22] & 7 == 4, "kafka-python did not compress b.bin"
PY
}

# Whether segment file $1 holds batch file $2 from its magic byte on: the bytes the
# producer wrote, the CRC included (the broker sets only base offset, length field
# and leader epoch before them).
holds_batch() {
	"$T_PY" -c 'import sys; s = open(sys.argv[1], "rb").read(); b = open(sys.argv[2], "rb").read()
sys.exit(0 if b[16:] in s else 1)' "$1" "$2"
}

c_batches_from_a_producer() {
	"$T_PY" -c 'import kafka.record.default_records, zstandard' 2>/dev/null ||
		skip "python3-kafka or python3-zstandard is not installed"
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history d=$T_CASE half
	echo old > "$p/k1"
	assert_cat "$p/k1" $'old\n'          # the kernel now caches k1's attributes
	producer_batches "$d"
	cat "$d/a.bin" "$d/b.bin" > "$p/.batches" || fail "cat of two batches to .batches"
	assert_eq 6 "$(t_leo t/0)" "log end: 1 + 3 + 2"
	assert_eq "$(printf '1 3 3\n4 5 2')" "$(t_batches t 0 | tail -n 2)" "the two batches"
	holds_batch "$DATA/t-0/00000000000000000000.log" "$d/a.bin" || fail "a.bin not as it came"
	! holds_batch "$DATA/t-0/00000000000000000000.log" "$d/b.bin" ||
		fail "b.bin (zstd) was not decompressed for an uncompressed topic"
	assert_cat "$p/k1" "new value"
	assert_cat "$p/k3" "$(printf 'three %.0s' $(seq 50))"
	assert_eq "k1 k3" "$(ls "$p" | xargs)" "listing: k2 was tombstoned"
	assert_cat "$h/$(t_off 2)" keyless
	assert_eq 1700000000000 "$(t_x "$p/k1" timestamp)" "k1 keeps the producer's timestamp"
	assert_eq 1700000000010 "$(t_x "$h/$(t_off 4)" timestamp)" "timestamp of offset 4"
	assert_eq t-1 "$(t_x "$p/k1" header.trace)" "k1's header"
	# A batch may arrive over several writes: appended once it is whole.
	half=$(head -c 30 "$d/a.bin" | od -An -tx1 | tr -d ' \n')
	assert_eq "open:OK write1:OK write2:OK close:OK" \
		"$(t_sys writes "$p/.batches" "hex:$half" "hex:$(tail -c +31 "$d/a.bin" | od -An -tx1 | tr -d ' \n')")" \
		"a batch in two writes"
	assert_eq 9 "$(t_leo t/0)" "log end after the batch in two writes"
	# ... or in pieces smaller than a header, and through a descriptor closed by
	# one process while another still writes: that close says EINVAL, the batch
	# still lands once whole.
	"$T_PY" - "$p/.batches" "$d/a.bin" <<'PY' || fail "a batch in small pieces over two descriptors"
import errno, os, sys
data = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_WRONLY)
dup = os.dup(fd)
for i in range(0, 40, 7):
    os.write(dup, data[i:min(i + 7, 40)])
try:
    os.close(dup)
    sys.exit("closing with part of a batch did not fail")
except OSError as e:
    if e.errno != errno.EINVAL:
        raise
os.write(fd, data[40:])
os.close(fd)
PY
	assert_eq 12 "$(t_leo t/0)" "log end after the batch in pieces"
	# A zstd topic keeps the zstd batch as it came and compresses the other.
	mkdir "$MNT/z"
	setfattr -n user.topicfs.compression.type -v zstd "$MNT/z"
	cat "$d/a.bin" "$d/b.bin" > "$MNT/z/0/.batches" || fail "cat of two batches to z's .batches"
	holds_batch "$DATA/z-0/00000000000000000000.log" "$d/b.bin" || fail "b.bin not as it came"
	! holds_batch "$DATA/z-0/00000000000000000000.log" "$d/a.bin" ||
		fail "a.bin was not compressed for a zstd topic"
	assert_cat "$MNT/z/0/k1" "new value"
	assert_eq "k1 k3" "$(ls "$MNT/z/0" | xargs)" "listing of z"
	t_remount
	assert_cat "$p/k3" "$(printf 'three %.0s' $(seq 50))"
	assert_eq 12 "$(t_leo t/0)" "log end after remount"
	assert_eq t-1 "$(t_x "$MNT/z/0/k1" header.trace)" "z's k1 keeps its header after re-encoding"
}

# batches_write WANT N DATA...: the writes of DATA to $p/.batches on one handle
# report WANT (t_sys writes) and append N records.
batches_write() {
	local want=$1 n=$2 l0 got
	shift 2
	l0=$(t_leo t/0)
	got=$(t_sys writes "$p/.batches" "$@")
	assert_eq "$want" "$got" "writes to .batches of $*"
	assert_eq "$n" $(($(t_leo t/0) - l0)) "records appended by the writes of $*"
}

c_batches_refused() {
	"$T_PY" -c 'import kafka.record.default_records, zstandard' 2>/dev/null ||
		skip "python3-kafka or python3-zstandard is not installed"
	t_mount -o max.message.bytes=400
	mkdir "$MNT/t"
	local p=$MNT/t/0 d=$T_CASE
	echo v > "$p/k"
	producer_batches "$d"
	# a flipped byte under the CRC; a Kafka v1 message set (magic 1); no batch at all
	"$T_PY" - "$d" <<'PY'
import sys
d = sys.argv[1]
a = bytearray(open(d + "/a.bin", "rb").read())
bad = bytearray(a); bad[-1] ^= 1
open(d + "/crc.bin", "wb").write(bad)
v1 = bytearray(a); v1[16] = 1
open(d + "/v1.bin", "wb").write(v1)
open(d + "/big.bin", "wb").write(a[:8] + (600).to_bytes(4, "big") + a[12:])
# gzip's codec bits over plain records, with a CRC that matches: refused as damage
import zlib
def crc32c(data):
    crc = 0xffffffff
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
gz = bytearray(a); gz[22] |= 1
gz[17:21] = crc32c(bytes(gz[21:])).to_bytes(4, "big")
open(d + "/gzip.bin", "wb").write(gz)
PY
	batches_write "open:OK write1:EBADMSG write2:EBADMSG close:OK" 0 \
		"file:$d/crc.bin" "file:$d/a.bin"       # after a refusal the handle refuses all
	batches_write "open:OK write1:ENOTSUP close:OK" 0 "file:$d/v1.bin"
	batches_write "open:OK write1:EBADMSG close:OK" 0 "file:$d/gzip.bin"
	batches_write "open:OK write1:EINVAL close:OK" 0 "not a record batch, just text"
	batches_write "open:OK write1:EFBIG close:OK" 0 "file:$d/big.bin"
	batches_write "open:OK write1:OK close:EINVAL" 0 \
		"hex:$(head -c 40 "$d/a.bin" | od -An -tx1 | tr -d ' \n')"   # cut short at close
	# the batches before a refused one in the same write are appended
	cat "$d/a.bin" "$d/crc.bin" > "$d/both.bin"
	batches_write "open:OK write1:EBADMSG close:OK" 3 "file:$d/both.bin"
	batches_write "open:OK write1:OK close:OK" 3 "file:$d/a.bin"
	assert_cat "$p/k" $'v\n'
	assert_errno EACCES read "$p/.batches"
	t_daemon_log | grep -q "refused a producer's batch" || fail "no log line for the refusals"
}

# Regression (issue 11): the README tour's ".put # one batch" line made two batches,
# because bash's builtin printf writes each line with its own write(2). The line,
# as the README has it, makes one.
c_readme_tour_put_is_one_batch() {
	local line
	t_mount
	mkdir "$MNT/users"
	line=$(grep -m 1 '> users/0/.put' "$T_REPO/README.md")
	assert_match '.*one batch.*' "$line" "the tour's .put line"
	(cd "$MNT" && bash -c "${line%%#*}")
	assert_eq 2 "$(t_batches users 0 | wc -l)" "batches of the tour's .put line (and its COMMIT)"
	assert_cat "$MNT/users/0/carol" '{"plan":"pro"}'
	assert_cat "$MNT/users/0/dave" '{"plan":"free"}'
}

t_test append_lines c_append_lines
t_test put_lines c_put_lines
t_test malformed_lines c_malformed_lines
t_test value_too_big_in_line c_value_too_big_in_line
t_test partial_lines c_partial_lines
t_test bulk_after_remount c_bulk_after_remount
t_test batches_from_a_producer c_batches_from_a_producer
t_test batches_refused c_batches_refused
t_test readme_tour_put_is_one_batch c_readme_tour_put_is_one_batch
t_done
