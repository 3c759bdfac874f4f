#!/bin/bash
# test_topicctl.sh - topicctl against logs with known contents, and against a mount.
#
#   BUILD_DIR=/tmp/build-ctl tests/topicctl/test_topicctl.sh
#
# Logs are built without a daemon by mklog.py (kafka-python's CRC-32C and decoder,
# so the files are checked by an independent implementation before topicctl sees
# them) and, when BUILD_DIR has it, by tests/interop's interop_codec (the engine's
# own encoder). The commands that work through a mount (create, describe, config,
# status, clean, roll, delete, estimate MOUNT/TOPIC) run against a real topicfs
# when BUILD_DIR/topicfs exists and FUSE is usable; otherwise they print "# skip".
#
# Output: "ok - NAME", "not ok - NAME" followed by "#   " lines (what was expected,
# what was seen), "# skip NAME: WHY"; the last line is
# "topicctl: N passed, M failed, K skipped". Exit status 1 if anything failed.
# T_KEEP=1 keeps the temporary directory; T_ONLY=REGEX runs the matching cases.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$repo/build}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$PWD/$BUILD_DIR ;; esac
CTL=$BUILD_DIR/topicctl
TOPICFS=$BUILD_DIR/topicfs
INTEROP=$BUILD_DIR/interop_codec
PY=/usr/bin/python3
MKLOG=$here/mklog.py
export LC_ALL=C

pass=0 fail=0 skip=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/topicctl-test.XXXXXX") || exit 1
DAEMON_PID=""

cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		mountpoint -q "$TMP/mnt" 2>/dev/null && fusermount3 -u "$TMP/mnt" 2>/dev/null
		kill "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
	fi
	if [ "${T_KEEP:-0}" = 1 ]; then echo "# kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ ! -x "$CTL" ]; then
	echo "topicctl: $CTL not found; build the topicctl target first" >&2
	exit 2
fi
if ! "$PY" -c 'import kafka.record.default_records' 2>/dev/null; then
	echo "topicctl: $PY lacks kafka-python (apt install python3-kafka)" >&2
	exit 2
fi

# ---- running cases ---------------------------------------------------------------

# t_case NAME FUNCTION: runs FUNCTION in a subshell with errexit in its own
# directory; it fails by a failing command or through fail().
t_case() {
	local name=$1 fn=$2 rc out
	if [ -n "${T_ONLY:-}" ] && ! printf '%s\n' "$name" | grep -Eq -- "$T_ONLY"; then
		return 0
	fi
	CASE=$TMP/$name
	mkdir -p "$CASE"
	out=$CASE.out
	(
		set -eE -o pipefail
		trap 'echo "# line $LINENO: command failed: $BASH_COMMAND"' ERR
		cd "$CASE"
		"$fn"
	) > "$out" 2>&1 < /dev/null
	rc=$?
	if [ "$rc" = 0 ]; then
		echo "ok - $name"
		pass=$((pass + 1))
	elif [ "$rc" = 77 ]; then
		echo "# skip $name: $(tail -n 1 "$out")"
		skip=$((skip + 1))
	else
		echo "not ok - $name"
		sed 's/^/#   /' "$out" | tail -n 40
		fail=$((fail + 1))
	fi
}

fail() { echo "$*"; exit 1; }
skip_case() { echo "$*"; exit 77; }

# run WANT_RC CMD...: runs CMD with stdout in ./out and stderr in ./err; fails
# unless the exit status is WANT_RC.
run() {
	local want=$1 rc=0
	shift
	"$@" > out 2> err || rc=$?
	if [ "$rc" != "$want" ]; then
		echo "expected exit status $want, got $rc: $*"
		echo "--- stdout"; head -n 30 out
		echo "--- stderr"; head -n 10 err
		exit 1
	fi
}

# has_line FILE LINE: FILE holds exactly this line.
has_line() {
	grep -Fxq -- "$2" "$1" || { echo "no line '$2' in $1:"; head -n 40 "$1"; exit 1; }
}
# has FILE STRING: some line of FILE contains STRING.
has() {
	grep -Fq -- "$2" "$1" || { echo "no '$2' in $1:"; head -n 40 "$1"; exit 1; }
}
eq() { [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"; }
# count FILE REGEX: lines of FILE matching REGEX (0 is not an error).
count() { grep -cE -- "$2" "$1" || true; }

json_ok() { "$PY" -m json.tool "$1" > /dev/null || fail "$1 is not JSON: $(head -c 300 "$1")"; }

# fact EXPR: a value from mklog.py's facts.json (python expression on `f`).
fact() { "$PY" -c "import json,sys; f=json.load(open(sys.argv[1])); print($1)" "$CASE/d/facts.json"; }

# Flips a byte of FILE at POS.
flip() {
	"$PY" - "$1" "$2" <<'EOF'
import sys
p, pos = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[pos] ^= 0xFF
open(p, "wb").write(b)
EOF
}

COMMANDS="create describe config delete status clean roll dump verify estimate repair follow groups erase"
READERS="describe config status dump verify estimate clean repair follow groups erase"

# ---- help and usage ----------------------------------------------------------------

c_help() {
	local c
	run 0 "$CTL" --help
	for c in $COMMANDS; do has out "$c"; done
	has out "Exit status"
	for c in $COMMANDS; do
		run 0 "$CTL" "$c" --help
		has out "usage: topicctl $c"
		has out "Exit status"
		run 0 "$CTL" "$c" -h
	done
	for c in $READERS; do
		run 0 "$CTL" "$c" --help
		has out "--json"
	done
}

c_usage_errors() {
	local c
	run 2 "$CTL"
	run 2 "$CTL" no-such-command
	has err "unknown command"
	for c in $COMMANDS; do
		run 2 "$CTL" "$c" --no-such-option x
		has err "unknown option '--no-such-option'"
		has err "Try 'topicctl $c --help'"
		run 2 "$CTL" "$c" -Z x
	done
	for c in create describe delete clean roll dump verify estimate repair; do
		run 2 "$CTL" "$c"            # a missing argument
	done
	run 2 "$CTL" verify a b
	run 2 "$CTL" repair a b c
	run 2 "$CTL" create /tmp/x --partitions zero
	run 2 "$CTL" create /tmp/x --config segment.bytes=abc
	run 2 "$CTL" create /tmp/x --config no.such.config=1
	run 2 "$CTL" create "/tmp/bad name"
	run 2 "$CTL" dump --max-bytes -1 x
	run 2 "$CTL" estimate --sample 0 a b
	run 2 "$CTL" estimate --sample-above lots a b
	run 2 "$CTL" estimate a 'bad topic'
	run 2 "$CTL" status --watch=-1
}

# ---- dump --------------------------------------------------------------------------

c_dump_gaps() {
	"$PY" "$MKLOG" dumpdir d
	run 0 "$CTL" dump d/t-0
	# between batches only, and across segments
	eq "gap: offsets 3..4 (2)
gap: offsets 11..15 (5)
gap: offsets 18..24 (7)" "$(grep '^gap:' out)" "gap lines"
	has out "baseOffset: 5 lastOffset: 10 count: 2 holes: 4 position: 100 size: 160"
	has out "producerId: 4242 producerEpoch: 3 baseSequence: 17"
	has out "baseOffset: 25 lastOffset: 25 count: 1 position: 0 size: 69"
	has out "deleteHorizonMs: 1700086400000"
	eq 4 "$(count out 'deleteHorizonMs: -')" "batches without a delete horizon"
	eq 5 "$(count out 'crcValid: true')" "valid batches"
	has_line out "Starting offset: 20"
	eq 0 "$(count out '^\|')" "record lines without --records"
}

c_dump_records() {
	"$PY" "$MKLOG" dumpdir d
	run 0 "$CTL" dump --records d/t-0
	eq "gap: offsets 3..4 (2)
gap: offsets 6..7 (2)
gap: offsets 9..10 (2)
gap: offsets 11..15 (5)
gap: offsets 18..24 (7)" "$(grep '^gap:' out)" "gap lines (inside batches too)"
	has_line out "| offset: 0 timestamp: 1700000000000 key: a value: 1 headers: [h1=v1]"
	has_line out "| offset: 1 timestamp: 1700000000001 key: b value: 2 headers: [bin=0x00ff]"
	has_line out "| offset: 2 timestamp: 1700000000002 key: a tombstone headers: []"
	has_line out "| offset: 16 timestamp: 1700000000016 key: null value: hello world headers: []"
	has_line out "| offset: 17 timestamp: 1700000000017 key: 0x0102 value: 0xfffe headers: []"
	has_line out "| offset: 25 timestamp: 1700086400000 key: b tombstone headers: []"
	has out "key: d value: yyyy"
	has out "headers: [n=null]"
	eq 2 "$(count out ' tombstone ')" "tombstone markers"
	eq 9 "$(count out '^\| offset:')" "record lines"
	# order: the gap inside batch 5..10 sits between its two records
	eq "| offset: 5
gap: offsets 6..7 (2)
| offset: 8
gap: offsets 9..10 (2)
gap: offsets 11..15 (5)" "$(grep -oE '^\| offset: (5|8)|^gap: offsets (6|9|11)\..*' out)" "order of records and gaps"
	run 0 "$CTL" dump --records --max-bytes 4 d/t-0
	has out "value: xxxx...(40 bytes)"
}

c_dump_one_file() {
	"$PY" "$MKLOG" dumpdir d
	run 0 "$CTL" dump --records d/t-0/00000000000000000020.log
	# offsets below the first batch, from the segment's base offset on, are a gap
	eq "gap: offsets 20..24 (5)" "$(grep '^gap:' out)" "gap lines of one segment"
	run 0 "$CTL" dump d/t-0/00000000000000000000.index
	has_line out "offset: 10 position: 100"
	has_line out "offset: 17 position: 260"
	run 0 "$CTL" dump d/t-0/00000000000000000000.timeindex
	has_line out "timestamp: 1700000000008 offset: 10"
}

c_dump_json() {
	"$PY" "$MKLOG" dumpdir d
	run 0 "$CTL" dump --json --records d/t-0
	json_ok out
	"$PY" - out <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
items = [i for f in d["files"] for i in f["items"]]
recs = [i for i in items if i["type"] == "record"]
gaps = [(i["first"], i["last"], i["count"]) for i in items if i["type"] == "gap"]
assert [r["offset"] for r in recs] == [0, 1, 2, 5, 8, 16, 17, 25, 26], recs
assert gaps == [(3, 4, 2), (6, 7, 2), (9, 10, 2), (11, 15, 5), (18, 24, 7)], gaps
assert [r["offset"] for r in recs if r["tombstone"]] == [2, 25]
assert recs[5]["key"] is None and recs[5]["value"] == "hello world"
assert recs[6]["key"] == "0102" and recs[6]["key_encoding"] == "hex"
batches = [i for i in items if i["type"] == "batch"]
assert [b["delete_horizon_ms"] for b in batches] == [None, None, None, 1700086400000, None]
assert all(b["crc_valid"] for b in batches)
assert batches[2]["producer_id"] == 4242 and batches[2]["base_sequence"] == 17
EOF
	run 0 "$CTL" dump --json d/t-0/00000000000000000000.index
	json_ok out
}

# The engine's own encoder (tests/interop's driver): every record it wrote is a
# record line, and every other offset in the file's range is in a gap.
c_dump_engine_segment() {
	[ -x "$INTEROP" ] || skip_case "$INTEROP not built (make interop_codec)"
	"$INTEROP" write seg.log expected.jsonl > /dev/null
	run 0 "$CTL" dump --json --records seg.log
	json_ok out
	"$PY" - out expected.jsonl <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
want = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
items = [i for f in d["files"] for i in f["items"]]
recs = [i for i in items if i["type"] == "record"]
def hexof(r, k):
    if r[k] is None:
        return None
    return r[k] if r.get(k + "_encoding") == "hex" else r[k].encode().hex()
got = [(r["offset"], r["timestamp"], hexof(r, "key"), hexof(r, "value")) for r in recs]
exp = [(w["offset"], w["timestamp"], w["key"], w["value"]) for w in want]
assert got == exp, (got, exp)
covered = set(r["offset"] for r in recs)
for g in (i for i in items if i["type"] == "gap"):
    assert g["count"] == g["last"] - g["first"] + 1
    for o in range(g["first"], g["last"] + 1):
        assert o not in covered, o
        covered.add(o)
batches = [i for i in items if i["type"] == "batch"]
last = max(b["last_offset"] for b in batches)
assert covered == set(range(0, last + 1)), "offsets neither in a record nor in a gap"
assert any(b["delete_horizon_ms"] is not None for b in batches), "no delete-horizon batch"
assert any(b["count"] == 0 for b in batches), "no empty batch"
EOF
}

c_dump_corrupt() {
	"$PY" "$MKLOG" dumpdir d
	flip d/t-0/00000000000000000000.log 150
	run 1 "$CTL" dump d/t-0
	has out "baseOffset: 5 lastOffset: 10"
	has out "crcValid: false crc mismatch"
	truncate -s -3 d/t-0/00000000000000000020.log
	run 1 "$CTL" dump d/t-0/00000000000000000020.log
	has out "position: 69: truncated batch"
	run 1 "$CTL" dump no-such-file
}

# ---- verify ------------------------------------------------------------------------

c_verify_clean() {
	"$PY" "$MKLOG" dumpdir d
	rm d/facts.json
	printf '0\n1\nt 0 3\n' > d/cleaner-offset-checkpoint
	mkdir d/topics
	printf '# a topic config\nsegment.bytes=1048576\ntopicfs.partitions=1\ntopicfs.mode=755\n' > d/topics/t
	run 0 "$CTL" verify d
	has out "1 partition, 2 segments, 5 batches, 9 records"
	has out "4 index entries: 0 problems (ok)"
	# topics/ is part of the layout: no note about it or its config
	eq 0 "$(count out 'note:')" "notes"
	run 0 "$CTL" verify d/t-0
	run 0 "$CTL" verify --quiet d
	eq 1 "$(wc -l < out)" "lines of --quiet"
	run 0 "$CTL" verify --json d
	json_ok out
	"$PY" -c 'import json,sys; d=json.load(open("out")); assert d["ok"] and d["problems"] == [] and d["stats"]["records"] == 9, d'
	# a new data directory holds only topics/: a data directory, whatever its name
	mkdir -p fresh-0/topics
	run 0 "$CTL" verify --json fresh-0
	"$PY" -c 'import json; d=json.load(open("out")); assert d["kind"] == "data_dir" and d["ok"], d'
}

c_verify_flipped_byte() {
	local pos
	"$PY" "$MKLOG" dumpdir d
	pos=$(fact 'f["seg0"][1]["pos"]')
	flip d/t-0/00000000000000000000.log $((pos + 50))
	run 1 "$CTL" verify d/t-0
	has out "$CASE/d/t-0/00000000000000000000.log:$pos: batch 5..10 (160 bytes): crc mismatch"
	# and what the mount makes of it: the segment is sealed, so nothing is cut
	has out "$CASE/d/t-0/00000000000000000000.log:$pos: sealed segment damaged: bytes $pos..$((pos + 159)) unreadable (crc mismatch)"
	has out "2 problems"
	run 1 "$CTL" verify --json d
	json_ok out
	"$PY" -c '
import json, sys
d = json.load(open("out"))
assert not d["ok"]
p = d["problems"][0]
assert p["file"].endswith("t-0/00000000000000000000.log") and p["position"] == int(sys.argv[1]), p
' "$pos"
}

c_verify_truncated() {
	"$PY" "$MKLOG" dumpdir d
	truncate -s -5 d/t-0/00000000000000000020.log
	run 1 "$CTL" verify d/t-0
	has out "$CASE/d/t-0/00000000000000000020.log:69: truncated batch: the file ends inside the batch (68 of 73 bytes present)"
	# a cut inside the 12-byte length prefix
	truncate -s 75 d/t-0/00000000000000000020.log
	run 1 "$CTL" verify d/t-0
	has out "00000000000000000020.log:69: truncated batch: the file ends inside a batch header (6 of 61 bytes present)"
	# a sealed segment is never cut by a mount: verify says so instead of "torn tail"
	truncate -s -5 d/t-0/00000000000000000000.log
	run 1 "$CTL" verify d/t-0
	has out "truncated batch: the file ends inside the batch"
	has out "00000000000000000000.log:$(fact 'f["seg0"][-1]["pos"]'): sealed segment damaged"
	has out "the mount never cuts it"
	if grep -q "00000000000000000000.log.*cut by the next mount" out; then
		fail "verify says the next mount cuts a sealed segment: $(cat out)"
	fi
}

# repair: a dry run says what goes, --yes cuts there (keeping the bytes aside),
# and the log then verifies clean and needs no repair.
c_repair() {
	local pos
	"$PY" "$MKLOG" dumpdir d
	pos=$(fact 'f["seg0"][1]["pos"]')
	run 0 "$CTL" repair d
	has_line out "t-0: ok"
	flip d/t-0/00000000000000000000.log $((pos + 50))
	cp -a d before
	run 1 "$CTL" repair d
	has_line out "t-0: damaged: 00000000000000000000.log at position $pos: crc mismatch"
	has_line out "  keeps offsets below 3; the log then ends at offset 3"
	has_line out "  loses offsets 3..26:"
	has_line out "    00000000000000000000.log bytes $pos..$(($(stat -c %s d/t-0/00000000000000000000.log) - 1)) ($(($(stat -c %s d/t-0/00000000000000000000.log) - pos)) B): 1 readable batch, 2 records (offsets 16..17), 160 bytes unreadable"
	has_line out "    00000000000000000020.log whole ($(stat -c %s d/t-0/00000000000000000020.log) B): 2 readable batches, 2 records (offsets 25..26)"
	has out "dry run: nothing changed"
	diff -r before d >/dev/null || fail "a dry run changed the data directory"
	run 1 "$CTL" repair --json d t
	json_ok out
	"$PY" -c '
import json, sys
p = json.load(open("out"))[0]
assert p["partition"] == "t-0" and p["damaged"] and p["result"] == "dry run", p
assert p["position"] == int(sys.argv[1]) and p["keep_end_offset"] == 3 and p["lost_end_offset"] == 27, p
assert [s["readable_records"] for s in p["lost"]] == [2, 2], p
' "$pos"
	run 1 "$CTL" repair d no-such-topic
	run 0 "$CTL" repair --yes d t-0
	has out "repaired: the log ends at offset 3"
	eq "$pos" "$(stat -c %s d/t-0/00000000000000000000.log)" "size of the cut segment"
	[ ! -e d/t-0/00000000000000000020.log ] || fail "the later segment is still there"
	[ ! -e d/t-0/00000000000000000000.index ] || fail "the cut segment's index is still there"
	cmp d/.repaired/t-0.*/00000000000000000020.log before/t-0/00000000000000000020.log ||
		fail "the later segment was not kept aside whole"
	tail -c +$((pos + 1)) before/t-0/00000000000000000000.log > tail.want
	cmp d/.repaired/t-0.*/00000000000000000000.log.cut tail.want || fail "the cut bytes were not kept aside"
	run 0 "$CTL" verify d
	run 0 "$CTL" repair d
	has_line out "t-0: ok"
}

c_verify_bad_index() {
	"$PY" "$MKLOG" dumpdir d
	# entry 2 points into the middle of a batch
	printf '\x00\x00\x00\x07\x00\x00\x00\x33' >> d/t-0/00000000000000000000.index
	run 1 "$CTL" verify d/t-0
	has out "$CASE/d/t-0/00000000000000000000.index:16: entry 2: position 51 is not the start of a batch in 00000000000000000000.log"
	has out "00000000000000000000.index:16: entry 2 (offset 7, position 51) does not increase over entry 1 (offset 17, position 260)"
	# one entry whose offset is not its batch's last offset
	printf '\x00\x00\x00\x09\x00\x00\x00\x64' > d/t-0/00000000000000000000.index
	run 1 "$CTL" verify d/t-0
	has out "00000000000000000000.index:0: entry 0: offset 9, but the batch at position 100 ends at offset 10"
	# a partial entry, and an entry past the end of the log
	printf '\x00\x00\x00\x0a\x00\x00\x10\x00\x00\x00' > d/t-0/00000000000000000000.index
	run 1 "$CTL" verify d/t-0
	has out "00000000000000000000.index:0: entry 0: position 4096 is past the end of 00000000000000000000.log (350 bytes)"
	has out "00000000000000000000.index:8: 2 trailing bytes are not a whole 8-byte entry"
	# a time index entry whose timestamp is not its batch's max timestamp
	rm d/t-0/00000000000000000000.index
	"$PY" -c 'import struct; open("d/t-0/00000000000000000000.timeindex","wb").write(struct.pack(">qi", 1700000000007, 10))'
	run 1 "$CTL" verify d/t-0
	has out "00000000000000000000.timeindex:0: entry 0: timestamp 1700000000007, but the batch holding offset 10 has max timestamp 1700000000008"
	# an index without its segment
	cp d/t-0/00000000000000000000.timeindex d/t-0/00000000000000000099.timeindex
	run 1 "$CTL" verify d/t-0
	has out "00000000000000000099.timeindex: index file without its segment (no 00000000000000000099.log)"
}

c_verify_offsets() {
	"$PY" "$MKLOG" dumpdir d
	# base offsets are not under the CRC: rewrite segment 20's first batch to 15
	"$PY" -c '
import struct
p = "d/t-0/00000000000000000020.log"
b = bytearray(open(p, "rb").read())
struct.pack_into(">q", b, 0, 15)
open(p, "wb").write(b)'
	run 1 "$CTL" verify d/t-0
	has out "00000000000000000020.log:0: batch base offset 15 is below the segment's base offset 20"
	has out "00000000000000000020.log:0: offsets go backwards: batch base offset 15 after offset 17 in $CASE/d/t-0/00000000000000000000.log"
}

c_verify_leftovers() {
	"$PY" "$MKLOG" dumpdir d
	rm d/facts.json
	mkdir d/topics
	touch d/t-0/00000000000000000000.log.cleaned d/t-0/00000000000000000000.log.swap \
		d/t-0/00000000000000000020.log.deleted d/t-0/00000000000000000000.index.tmp \
		d/topics/t.tmp d/cleaner-offset-checkpoint.tmp
	mkdir d/t-1.1700000000000-delete
	run 1 "$CTL" verify d
	has_line out "$CASE/d/t-0/00000000000000000000.log.cleaned: leftover of an interrupted cleaning pass (the next mount removes it)"
	has out "00000000000000000000.log.swap: leftover of an interrupted segment swap"
	has out "00000000000000000020.log.deleted: leftover of an interrupted segment deletion"
	has out "00000000000000000000.index.tmp: leftover temporary file"
	has out "$CASE/d/topics/t.tmp: leftover temporary file"
	has out "$CASE/d/cleaner-offset-checkpoint.tmp: leftover temporary file"
	has out "$CASE/d/t-1.1700000000000-delete: directory of a deleted partition left behind"
	has out "7 problems"
}

c_verify_checkpoint() {
	"$PY" "$MKLOG" dumpdir d
	rm d/facts.json
	printf '0\n2\nt 0 5\n' > d/cleaner-offset-checkpoint
	run 1 "$CTL" verify d
	has_line out "$CASE/d/cleaner-offset-checkpoint:10: not a Kafka offset checkpoint: fewer entries than the count line says"
	printf '1\n0\n' > d/cleaner-offset-checkpoint
	run 1 "$CTL" verify d
	has out "cleaner-offset-checkpoint:0: not a Kafka offset checkpoint: unknown version (expected 0)"
	printf '0\n1\nt 0\n' > d/cleaner-offset-checkpoint
	run 1 "$CTL" verify d
	has out "cleaner-offset-checkpoint:4: not a Kafka offset checkpoint: an entry is not \"topic partition offset\""
	printf '0\n1\nt 0 -4\n' > d/cleaner-offset-checkpoint
	run 1 "$CTL" verify d
	has out "cleaner-offset-checkpoint:4: not a Kafka offset checkpoint: an offset that is not a number >= 0"
	printf '0\n1\nt 0 5\nt 1 5\n' > d/cleaner-offset-checkpoint
	run 1 "$CTL" verify d
	has out "cleaner-offset-checkpoint:10: not a Kafka offset checkpoint: more entries than the count line says"
	# a stale entry is a note, not a problem
	printf '0\n2\nt 0 5\ngone 3 1\n' > d/cleaner-offset-checkpoint
	run 0 "$CTL" verify d
	has out "cleaner-offset-checkpoint: note: entry gone 3 names a partition with no directory"
}

c_verify_config() {
	local long
	"$PY" "$MKLOG" dumpdir d
	rm d/facts.json
	mkdir d/topics
	printf '# config\nsegment.bytes=abc\n' > d/topics/t
	run 1 "$CTL" verify d
	has_line out "$CASE/d/topics/t:9: config line 2: bad value for segment.bytes: \"abc\""
	printf 'no.such.name=1\n' > d/topics/t
	run 1 "$CTL" verify d
	has out "topics/t:0: config line 1: unknown config name no.such.name"
	printf 'topicfs.partitions=2\n' > d/topics/t
	run 1 "$CTL" verify d
	has_line out "$CASE/d/topics/t: topicfs.partitions is 2 but there is no directory t-1"
	# the checksum line the engine writes last: a changed byte above it is named
	printf 'retention.ms=1000\ntopicfs.partitions=1\ntopicfs.crc32c=00000000\n' > d/topics/t
	run 1 "$CTL" verify d
	has_line out "$CASE/d/topics/t:39: config file does not match its topicfs.crc32c line: damaged, or edited by hand (then delete that line)"
	printf 'retention.ms=1000\ntopicfs.crc32c=00000000\ntopicfs.partitions=1\n' > d/topics/t
	run 1 "$CTL" verify d
	has_line out "$CASE/d/topics/t: config file has a damaged topicfs.crc32c line"
	# what the engine does not read as a topic config is a note: a name that is not
	# a topic's, and a config in the old place (DATA_DIR/<topic>.config)
	printf 'topicfs.partitions=1\n' > d/topics/t
	printf 'x=1\n' > "d/topics/not a topic"
	printf 'topicfs.partitions=1\n' > d/t.config
	run 0 "$CTL" verify d
	has_line out "$CASE/d/topics/not a topic: note: not a topic config (bad topic name); ignored"
	has_line out "$CASE/d/t.config: note: not a topicfs or Kafka file; ignored"
	# the longest topic name (249 bytes), whose "<topic>.config" was past NAME_MAX
	long=$(printf 'l%.0s' $(seq 249))
	mkdir "d/$long-0"
	printf 'topicfs.partitions=1\n' > "d/topics/$long"
	run 0 "$CTL" verify d
	has out "verify $CASE/d: 2 partitions"
	printf 'topicfs.partitions=2\n' > "d/topics/$long"
	run 1 "$CTL" verify d
	has_line out "$CASE/d/topics/$long: topicfs.partitions is 2 but there is no directory $long-1"
	# topics/ must be a directory
	rm -r d/topics
	touch d/topics
	run 1 "$CTL" verify d
	has out "$CASE/d/topics: a file where the directory of topic configs belongs"
}

# ---- estimate ----------------------------------------------------------------------

# Every figure of the JSON equals the formula computed independently in mklog.py
# (same order of floating-point operations, so equality is exact).
c_estimate_exact() {
	"$PY" "$MKLOG" estimate e
	run 0 "$CTL" estimate --json e e
	json_ok out
	"$PY" - out e/expected.json <<'EOF'
import json, sys
got = json.load(open(sys.argv[1]))
exp = json.load(open(sys.argv[2]))
assert got["min_cleanable_dirty_ratio"] == 0.25, got["min_cleanable_dirty_ratio"]
assert [p["partition"] for p in got["partitions"]] == [0, 1, 2]
for g, x in zip(got["partitions"], exp["partitions"]):
    i = g["input"]
    for k, want in (("current_bytes", x["current"]), ("active_bytes", x["active"]),
                    ("keyed_records", x["keyed_records"]),
                    ("keyless_records", x["keyless_records"]),
                    ("keyed_bytes", x["keyed_bytes"]), ("keyless_bytes", x["keyless_bytes"]),
                    ("distinct_keys", x["distinct"])):
        assert i[k] == want, ("partition", g["partition"], k, i[k], want)
    assert i["sampled"] is False and i["distinct_exact"] is True
    for k in ("events_per_key", "surviving_bytes", "dirt_bytes", "estimate_bytes",
              "current_bytes", "savings", "keyless_share", "worth_it", "keyless_warning",
              "simple"):
        assert g[k] == x[k], ("partition", g["partition"], k, g[k], x[k])
    assert i["active_records"] == x["active_records"] and i["active_keyless_records"] == 0
    assert g["new_keyless_warning"] is False and g["new_keyless_share"] == 0
for k, want in exp["total"].items():
    assert got["total"][k] == want, ("total", k, got["total"][k], want)
# the three cases the data was built for
assert [p["worth_it"] for p in got["partitions"]] == [True, False, True]
assert [p["keyless_warning"] for p in got["partitions"]] == [False, True, False]
EOF
	# the text report: the same figures, rounded as printed
	run 0 "$CTL" estimate e e
	"$PY" - out e/expected.json <<'EOF'
import json, sys
out = open(sys.argv[1]).read().splitlines()
exp = json.load(open(sys.argv[2]))
rows = {l.split()[0]: l.split() for l in out if l.split() and l.split()[0] in ("0", "1", "2", "total")}
for p, x in zip(("0", "1", "2"), exp["partitions"]):
    r = rows[p]
    assert r[1] == "%.0f" % x["current_bytes"], (r, x)
    assert r[6] == "%.2f" % x["events_per_key"], (r, x)
    assert r[7] == "%.0f" % x["estimate_bytes"], (r, x)
    assert r[8] == "%.1f%%" % (x["savings"] * 100), (r, x)
t = exp["total"]
assert rows["total"][7] == "%.0f" % t["estimate_bytes"], rows["total"]
s = t["simple"]
line = ("  simple formula        estimate %.0f bytes, savings %.1f%%, E %.2f: %s "
        "(README: why the figures differ)" % (s["estimate_bytes"], s["savings"] * 100,
        s["events_per_key"], "worth it" if s["worth_it"] else "not worth it"))
assert line in out, (line, out)
assert "  savings               %.1f%%: worth it" % (t["savings"] * 100) in out, out
assert "  events per key E      %.2f = 220 keyed records / 34 keys" % t["events_per_key"] in out
EOF
	has out "Topic e in e: min.cleanable.dirty.ratio r = 0.25, cleanup.policy compact"
	has out "not worth it (few events per key)"
	has_line out "warning: partition 1: 42.9% of the records are keyless; compaction never removes them, so the log keeps growing"
	has out "records read          240: 220 keyed (tombstones among them: 14), 20 keyless"
}

# Regression (issue 11): keyless records in the active segment were never read, so
# the warning about a new producer without keys could not fire before a roll.
c_estimate_new_keyless_producer() {
	"$PY" "$MKLOG" estimate-active n
	run 0 "$CTL" estimate n n
	has_line out "warning: 2.0% of the records in the active segments (the newest) are keyless: a new producer without keys? compaction never removes them"
	run 0 "$CTL" estimate --json n n
	"$PY" - out <<'EOF'
import json, sys
got = json.load(open(sys.argv[1]))
p = got["partitions"][0]
assert p["input"]["active_records"] == 100 and p["input"]["active_keyless_records"] == 2, p
assert p["input"]["keyless_records"] == 0 and p["keyless_warning"] is False, p
assert p["new_keyless_share"] == 0.02 and p["new_keyless_warning"] is True, p
# the simple formula reads the active records too: 2 keyless of 150, 10 keys
s = p["simple"]
assert s["keyless_share"] == 2 / 150 and s["events_per_key"] == 148 / 10, s
EOF
}

# Sampling mode on logs smaller than one window reads everything: same figures.
c_estimate_sampled_small() {
	"$PY" "$MKLOG" estimate e
	run 0 "$CTL" estimate --json e e
	mv out exact.json
	run 0 "$CTL" estimate --json --sample-above 1K --sample 50 e e
	"$PY" - exact.json out <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
assert all(p["input"]["sampled"] for p in b["partitions"])
for k in ("estimate_bytes", "savings", "events_per_key"):
    assert a["total"][k] == b["total"][k], (k, a["total"][k], b["total"][k])
EOF
}

c_estimate_errors() {
	"$PY" "$MKLOG" estimate e
	run 1 "$CTL" estimate e nosuch
	has err "no partition directory nosuch-N"
	run 1 "$CTL" estimate no-such-dir e
	# everything in active segments: nothing to clean until a roll
	mkdir -p a/x-0
	cp e/e-0/00000000000000000000.log a/x-0/
	run 0 "$CTL" estimate a x
	has out "note: everything is in active segments"
	has out "savings               0.0%"
}

# ---- the cleaner's attributes, on a stand-in mount --------------------------------------
# status, describe and clean read only docs/semantics.md §6's user.topicfs.* names and
# MOUNT/.topicfs/metrics, so a plain directory tree carrying them (user xattrs on the
# test's file system) checks their rendering exactly, cleaner or no cleaner.

fake_mount() {
	local p
	mkdir -p fm/.topicfs fm/users/0 fm/users/1 fm/users/2
	setfattr -n user.topicfs.x -v 1 fm 2>/dev/null || skip_case "no user xattrs on $TMP's file system"
	printf '%s\n' \
		'# HELP topicfs_cleaner_max_dirty_percent max-dirty-percent' \
		'# TYPE topicfs_cleaner_max_dirty_percent gauge' \
		'topicfs_cleaner_max_dirty_percent 25' \
		'topicfs_cleaner_uncleanable_partitions_count 1' \
		'topicfs_cleaner_max_clean_time_secs 0.5' \
		'topicfs_cleaner_partition_dirty_ratio{topic="users",partition="0"} 0.25' \
		'topicfs_partition_size_bytes{topic="users",partition="0"} 1000' > fm/.topicfs/metrics
	for p in 0 1 2; do
		setfattr -n user.topicfs.log_start_offset -v 0 fm/users/$p
		setfattr -n user.topicfs.log_end_offset -v 100 fm/users/$p
		setfattr -n user.topicfs.segments -v 3 fm/users/$p
		setfattr -n user.topicfs.live_keys -v 10 fm/users/$p
	done
	setfattr -n user.topicfs.size_bytes -v 1000 fm/users/0
	setfattr -n user.topicfs.size_bytes -v 500 fm/users/1
	setfattr -n user.topicfs.size_bytes -v 2000 fm/users/2
	# partition 0: clean [0,40), dirty [40,90), uncleanable [90,100)
	setfattr -n user.topicfs.first_dirty_offset -v 40 fm/users/0
	setfattr -n user.topicfs.first_uncleanable_offset -v 90 fm/users/0
	setfattr -n user.topicfs.dirty_ratio -v 0.25 fm/users/0
	setfattr -n user.topicfs.last_clean -v "2024-05-01T10:00:00Z 0.2s read 1000 B wrote 700 B" \
		fm/users/0
	# the topic's config: the defaults but for segment.bytes
	while read -r p v; do
		setfattr -n "user.topicfs.$p" -v "$v" fm/users
	done <<'EOF'
cleanup.policy compact
segment.bytes 2048
segment.ms 604800000
min.cleanable.dirty.ratio 0.5
delete.retention.ms 86400000
min.compaction.lag.ms 0
max.compaction.lag.ms 9223372036854775807
retention.ms 604800000
retention.bytes -1
max.message.bytes 1048588
compression.type none
compression.zstd.level 3
message.timestamp.type CreateTime
segment.index.bytes 10485760
index.interval.bytes 4096
flush.ms 1000
producer.id.expiration.ms 86400000
EOF
	# partition 2: the cleaner gave up on it
	setfattr -n user.topicfs.first_dirty_offset -v 0 fm/users/2
	setfattr -n user.topicfs.first_uncleanable_offset -v 50 fm/users/2
	setfattr -n user.topicfs.uncleanable_reason -v "corrupt batch at 4096" fm/users/2
}

bar_of() { grep "^$1 " out | sed 's/[^[]*\[\([^]]*\)\].*/\1/'; }

c_status_regions() {
	fake_mount
	# an uncleanable partition is a problem to report: exit status 1
	run 1 "$CTL" status fm
	# 30 columns for the largest partition (2000 B), scaled by size. Partition 0
	# (1000 B: 15 columns) splits into 675 clean (0.75 of the 900 cleanable bytes by
	# dirty_ratio), 225 dirty and 100 uncleanable (offsets 90..100 of 0..100), by
	# cumulative rounding: 10.1 -> 10, 13.5 -> 14, 15.
	eq "==========####.               " "$(bar_of users/0)" "bar of users/0"
	eq "????????                      " "$(bar_of users/1)" "bar of users/1 (no cleaner attributes)"
	eq "###############..............." "$(bar_of users/2)" "bar of users/2"
	has out "dirty 0.25  last 2024-05-01T10:00:00Z 0.2s read 1000 B wrote 700 B"
	has out "UNCLEANABLE: corrupt batch at 4096"
	has_line out "cleaner: max_dirty_percent=25 uncleanable_partitions_count=1 max_clean_time_secs=0.5"
	run 1 "$CTL" status --json fm/users
	json_ok out
	"$PY" -c '
import json
m = json.load(open("out"))["mounts"][0]
p = m["partitions"]
assert (p[0]["clean_bytes"], p[0]["dirty_bytes"], p[0]["uncleanable_bytes"]) == (675, 225, 100), p[0]
assert p[1]["clean_bytes"] is None and p[1]["dirty_ratio"] is None, p[1]
assert p[2]["uncleanable_reason"] == "corrupt batch at 4096", p[2]
assert m["cleaner"] == {"max_dirty_percent": 25, "uncleanable_partitions_count": 1,
                        "max_clean_time_secs": 0.5}, m["cleaner"]
'
	run 0 "$CTL" describe fm/users
	has out "0                    0          100           1000        3         10       0.250"
	has out "1                    0          100            500        3         10           -"
	has_line out "* segment.bytes                2048                 (default 104857600)"
	eq 1 "$(count out '^\* ')" "configs marked as not default"
}

# The bytes the next pass would free come from the partition's next_pass (the
# mount's dry run), beside the dirty ratio.
c_status_would_free() {
	fake_mount
	setfattr -n user.topicfs.next_pass -v "range=0-89 first_dirty=40 end_offset=90 first_uncleanable=90 records_read=90 records_dropped=30 bytes_freed=42991616 tombstones_to_stamp=0 tombstones_dropped=0 size_before=1000 size_after=400 map_full=0 uncleanable_reason=active segment" fm/users/0
	# (the fake mount's users/2 is uncleanable, so status exits 1)
	run 1 "$CTL" status fm
	has out "dirty 0.25  would free 41.0 MiB last 2024-05-01T10:00:00Z"
	[ "$(grep '^users/1 ' out | grep -c 'would free')" = 0 ] || fail "users/1 has no next_pass: $(cat out)"
	run 1 "$CTL" status --json fm/users
	"$PY" -c '
import json
p = json.load(open("out"))["mounts"][0]["partitions"]
assert p[0]["would_free_bytes"] == 42991616 and p[1]["would_free_bytes"] is None, p
'
}

c_clean_reports() {
	fake_mount
	run 0 "$CTL" clean fm/users/0
	has_line out "users/0: 2024-05-01T10:00:00Z 0.2s read 1000 B wrote 700 B"
	eq 1 "$(getfattr --only-values -n user.topicfs.clean fm/users/0)" "the clean attribute written"
	# a partition the cleaner gave up on fails the command, with its reason
	run 1 "$CTL" clean fm/users
	has_line out "users/2: uncleanable: corrupt batch at 4096"
	run 1 "$CTL" clean --json fm/users
	json_ok out
	run 0 "$CTL" roll fm/users/1
	eq 1 "$(getfattr --only-values -n user.topicfs.roll fm/users/1)" "the roll attribute written"
	run 1 "$CTL" clean fm
	has err "name a topic or a partition"
}

# ---- through a mount -----------------------------------------------------------------

MOUNTED=""
mount_topicfs() {
	local i
	[ -n "$MOUNTED" ] && return 0
	MOUNTED=no
	[ -x "$TOPICFS" ] || { MOUNT_WHY="$TOPICFS not built"; return 1; }
	[ -e /dev/fuse ] || { MOUNT_WHY="no /dev/fuse"; return 1; }
	command -v fusermount3 > /dev/null || { MOUNT_WHY="no fusermount3"; return 1; }
	mkdir -p "$TMP/data" "$TMP/mnt"
	timeout --signal=TERM 600 "$TOPICFS" -f -o auto_unmount "$TMP/data" "$TMP/mnt" \
		> "$TMP/topicfs.log" 2>&1 &
	DAEMON_PID=$!
	for i in $(seq 100); do
		mountpoint -q "$TMP/mnt" && { MOUNTED=yes; return 0; }
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
	MOUNT_WHY="topicfs did not mount: $(tail -n 3 "$TMP/topicfs.log" | tr '\n' ' ')"
	return 1
}
# A daemon that died is one failure (with its log), not a failure of every later case.
need_mount() {
	[ "$MOUNTED" = yes ] || skip_case "${MOUNT_WHY:-no mount}"
	[ -e "$TMP/daemon-died" ] && skip_case "topicfs died in an earlier case"
	if ! mountpoint -q "$TMP/mnt"; then
		touch "$TMP/daemon-died"
		echo "topicfs is no longer mounted; the end of its log:"
		grep -E 'ERROR|SUMMARY|#[0-9] ' "$TMP/topicfs.log" | head -n 12
		tail -n 5 "$TMP/topicfs.log"
		exit 1
	fi
}

c_mount_create_describe() {
	need_mount
	local M=$TMP/mnt
	run 0 "$CTL" create "$M/users" --partitions 3 --config segment.bytes=2048 \
		--config min.cleanable.dirty.ratio=0.3
	has_line out "created topic users with 3 partitions"
	eq "0 1 2" "$(ls "$M/users" | xargs)" "partitions"
	eq 2048 "$(getfattr --only-values -n user.topicfs.segment.bytes "$M/users")" "segment.bytes"
	run 1 "$CTL" create "$M/users"
	has err "the topic already exists"
	run 1 "$CTL" create "$TMP/not-a-mount/x"
	# a bad value is refused before anything is created
	run 2 "$CTL" create "$M/t2" --config cleanup.policy=sometimes
	[ ! -e "$M/t2" ] || fail "a refused create left $M/t2"
	for i in $(seq 1 60); do printf 'value %s %0100d\n' "$i" 0 > "$M/users/$((i % 3))/key-$((i % 7))"; done
	rm "$M/users/0/key-0"
	run 0 "$CTL" describe "$M/users"
	has out "Topic: users  Partitions: 3"
	has out "* segment.bytes                2048                 (default 104857600)"
	has out "  cleanup.policy               compact"
	"$PY" - out "$M/users" <<'EOF'
import os, sys
rows = [l.split() for l in open(sys.argv[1]) if l[:1].isdigit()]
assert [r[0] for r in rows] == ["0", "1", "2"], rows
for r in rows:
    d = os.path.join(sys.argv[2], r[0])
    x = lambda n: os.getxattr(d, "user.topicfs." + n).decode()
    assert r[1:6] == [x("log_start_offset"), x("log_end_offset"), x("size_bytes"),
                      x("segments"), x("live_keys")], (r, d)
    want_dirty = "-"
    try:
        want_dirty = "%.3f" % float(x("dirty_ratio"))
    except OSError:
        pass
    assert r[6] == want_dirty, r
EOF
	run 0 "$CTL" describe --json "$M/users"
	json_ok out
	"$PY" -c 'import json; d=json.load(open("out")); assert len(d["partitions"]) == 3 and len(d["config"]) == 17 and d["producers"] == [] and d["partitions"][0]["live_keys"] == 6, d'
}

c_mount_config() {
	need_mount
	local M=$TMP/mnt
	[ -d "$M/cfg" ] || run 0 "$CTL" create "$M/cfg"
	run 0 "$CTL" config "$M/cfg" retention.ms
	has_line out 604800000
	run 0 "$CTL" config "$M/cfg" retention.ms=1000 compression.type=zstd
	has_line out "cfg: retention.ms=1000"
	eq zstd "$(getfattr --only-values -n user.topicfs.compression.type "$M/cfg")" "compression.type"
	run 0 "$CTL" config "$M/cfg"
	has out "* retention.ms                 1000                 (default 604800000)"
	run 0 "$CTL" config --json "$M/cfg"
	json_ok out
	run 0 "$CTL" config --unset retention.ms "$M/cfg"
	run 0 "$CTL" config "$M/cfg" retention.ms
	has_line out 604800000
	# checked before anything is set: the first pair must not be applied
	run 2 "$CTL" config "$M/cfg" retention.ms=5 segment.bytes=abc
	eq 604800000 "$(getfattr --only-values -n user.topicfs.retention.ms "$M/cfg")" "retention.ms"
	run 2 "$CTL" config "$M/cfg" no.such=1
	run 2 "$CTL" config "$M/cfg" a b
	run 1 "$CTL" config "$M/no-such-topic"
}

c_mount_status() {
	need_mount
	local M=$TMP/mnt
	[ -d "$M/users" ] || run 0 "$CTL" create "$M/users" --partitions 3
	echo v > "$M/users/1/k"
	run 0 "$CTL" status "$M"
	has_line out "topicfs $M  (data $TMP/data)"
	for p in 0 1 2; do has out "users/$p "; done
	has out "= clean  # dirty  . uncleanable"
	has out "cleaner:"
	run 0 "$CTL" status "$M/users/1"
	eq 1 "$(count out '^users/')" "partition lines for one partition"
	run 0 "$CTL" status --json "$M/users"
	json_ok out
	"$PY" -c '
import json
d = json.load(open("out"))["mounts"][0]
assert [p["partition"] for p in d["partitions"]] == [0, 1, 2], d
for p in d["partitions"]:
    if p["first_dirty_offset"] is None:
        assert p["clean_bytes"] is None
    else:
        assert p["clean_bytes"] + p["dirty_bytes"] + p["uncleanable_bytes"] in (p["size_bytes"], p["size_bytes"] - 1, p["size_bytes"] + 1), p
'
	# --watch redraws until interrupted
	timeout --signal=INT 3 "$CTL" status --watch 1 "$M/users" > out 2>&1 || true
	[ "$(count out '^users/0 ')" -ge 2 ] || fail "status --watch drew $(count out '^users/0 ') times: $(cat out)"
}

c_mount_clean_roll() {
	need_mount
	local M=$TMP/mnt before after rc=0
	[ -d "$M/users" ] || run 0 "$CTL" create "$M/users" --partitions 3
	before=$(getfattr --only-values -n user.topicfs.segments "$M/users/2")
	echo more > "$M/users/2/rolled"
	run 0 "$CTL" roll "$M/users/2"
	has_line out "users/2: rolled"
	after=$(getfattr --only-values -n user.topicfs.segments "$M/users/2")
	[ "$after" -gt "$before" ] || fail "roll: segments $before -> $after"
	"$CTL" clean "$M/users" > out 2> err || rc=$?
	if [ "$rc" = 1 ] && grep -q "does not support 'clean' yet" err; then
		echo "# this topicfs has no cleaner: clean said so (exit 1)"
	elif [ "$rc" = 0 ]; then
		eq 3 "$(count out '^users/[0-2]: ')" "clean lines"
		"$CTL" clean --json "$M/users/0" > out
		json_ok out
	else
		fail "clean: exit $rc: $(cat err)"
	fi
}

c_mount_files() {
	need_mount
	local M=$TMP/mnt
	[ -d "$M/users" ] || run 0 "$CTL" create "$M/users" --partitions 3
	run 0 "$CTL" config "$M/users" min.cleanable.dirty.ratio=0.35
	[ -f "$TMP/data/topics/users" ] || fail "the engine wrote no $TMP/data/topics/users"
	for i in $(seq 1 40); do echo "v$i" > "$M/users/0/k$((i % 5))"; done
	setfattr -n user.topicfs.roll -v 1 "$M/users/0"
	run 0 "$CTL" dump --records "$TMP/data/users-0"
	has out "crcValid: true"
	eq 0 "$(count out 'crcValid: false')" "invalid batches in the engine's log"
	run 0 "$CTL" verify "$TMP/data"
	has out "0 problems (ok)"
	eq 0 "$(count out "^$TMP/data/topics")" "findings about the engine's topics/"
	# DATA_DIR TOPIC reads r from the engine's config file, DATA_DIR/topics/users
	run 0 "$CTL" estimate "$TMP/data" users
	has out "Topic users in $TMP/data: min.cleanable.dirty.ratio r = 0.35"
	run 0 "$CTL" estimate "$M/users"
	has out "Topic users in $TMP/data: min.cleanable.dirty.ratio r = "
	run 0 "$CTL" estimate --json "$M/users"
	json_ok out
	"$PY" -c 'import json; d=json.load(open("out")); p=d["partitions"][0]["input"]; assert p["keyed_records"] > 0 and p["distinct_keys"] >= 5, p'
}

# dump --fate on a mounted partition's directory: each record's fate from a dry
# run on the partition opened read-only, the same words as the mount's `fate`;
# the pass that follows drops what it said, and frees the bytes `status` said.
# (min.cleanable.dirty.ratio=1: no background pass comes between them.)
c_mount_dump_fate() {
	need_mount
	local M=$TMP/mnt d=$TMP/data/fates-0 o kv survivors freed size
	run 0 "$CTL" create "$M/fates" --partitions 1 --config min.cleanable.dirty.ratio=1
	for kv in A=10 B=20 A=11 C=30 A=12 B=21 A=13 B=22; do printf %s "${kv#*=}" > "$M/fates/0/${kv%%=*}"; done
	setfattr -n user.topicfs.roll -v 1 "$M/fates/0"
	printf 31 > "$M/fates/0/C"
	run 0 "$CTL" dump --fate "$d"
	eq "drop drop drop keep drop drop keep keep not-cleanable" \
		"$(sed -n 's/^| offset: [0-9]* timestamp: [0-9]* fate: \([a-z-]*\).*/\1/p' out | xargs)" "fates"
	has out "| offset: 8 timestamp: "
	has out "fate: not-cleanable active segment key: C value: 31"
	for o in 0 3 8; do
		eq "$(getfattr --only-values -n user.topicfs.fate "$M/fates/0/.history/$(printf %020d $o)")" \
			"$(sed -n "s/^| offset: $o timestamp: [0-9]* fate: \(.*\) key: .*/\1/p" out)" "fate of $o, mount and dump"
	done
	run 0 "$CTL" dump --fate --json "$d"
	json_ok out
	"$PY" -c '
import json
recs = [i for f in json.load(open("out"))["files"] for i in f["items"] if i["type"] == "record"]
assert [r["fate"] for r in recs][:4] == ["drop", "drop", "drop", "keep"], recs
'
	run 1 "$CTL" dump --fate "$d/00000000000000000000.log"
	has err "partition directory"
	run 0 "$CTL" dump --fate "$d"
	survivors=$(sed -n 's/^| offset: \([0-9]*\) timestamp: [0-9]* fate: \([a-z-]*\).*/\1 \2/p' out |
		awk '$2 != "drop" && $2 != "drop-tombstone" && $2 != "keep-producer-state" { print $1 }' | xargs)
	eq "3 6 7 8" "$survivors" "the survivors dump predicts"
	freed=$(getfattr --only-values -n user.topicfs.next_pass "$M/fates/0" | sed 's/.* bytes_freed=\([0-9]*\) .*/\1/')
	[ "$freed" -gt 0 ] && [ "$freed" -lt 1024 ] || fail "next_pass bytes_freed: '$freed'"
	run 0 "$CTL" status "$M/fates"
	has out "would free $freed B last"
	size=$(getfattr --only-values -n user.topicfs.size_bytes "$M/fates/0")
	setfattr -n user.topicfs.clean -v 1 "$M/fates/0"
	eq "$survivors" "$(ls "$M/fates/0/.history" | sed 's/^0*\(.\)/\1/' | xargs)" "what the pass left"
	eq "$freed" "$((size - $(getfattr --only-values -n user.topicfs.size_bytes "$M/fates/0")))" "bytes the pass freed"
}

c_mount_delete() {
	need_mount
	local M=$TMP/mnt
	run 0 "$CTL" create "$M/gone" --partitions 2
	echo a > "$M/gone/0/a"; echo b > "$M/gone/1/b"; echo c > "$M/gone/1/c"
	run 0 "$CTL" delete "$M/gone"
	has_line out "deleted topic gone (3 keys tombstoned first)"
	[ ! -e "$M/gone" ] || fail "$M/gone still exists"
	run 1 "$CTL" delete "$M/gone"
	run 1 "$CTL" delete "$M"
}

# ---- run -------------------------------------------------------------------------

t_case help c_help
t_case usage_errors c_usage_errors
t_case dump_gaps c_dump_gaps
t_case dump_records c_dump_records
t_case dump_one_file c_dump_one_file
t_case dump_json c_dump_json
t_case dump_engine_segment c_dump_engine_segment
t_case dump_corrupt c_dump_corrupt
t_case verify_clean c_verify_clean
t_case verify_flipped_byte c_verify_flipped_byte
t_case verify_truncated c_verify_truncated
t_case verify_bad_index c_verify_bad_index
t_case verify_offsets c_verify_offsets
t_case verify_leftovers c_verify_leftovers
t_case verify_checkpoint c_verify_checkpoint
t_case verify_config c_verify_config
t_case repair c_repair
t_case estimate_exact c_estimate_exact
t_case estimate_new_keyless_producer c_estimate_new_keyless_producer
t_case estimate_sampled_small c_estimate_sampled_small
t_case estimate_errors c_estimate_errors
t_case status_regions c_status_regions
t_case clean_reports c_clean_reports
t_case status_would_free c_status_would_free
mount_topicfs || true
t_case mount_create_describe c_mount_create_describe
t_case mount_config c_mount_config
t_case mount_status c_mount_status
t_case mount_clean_roll c_mount_clean_roll
t_case mount_files c_mount_files
t_case mount_dump_fate c_mount_dump_fate
t_case mount_delete c_mount_delete

echo "topicctl: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
