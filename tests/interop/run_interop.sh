#!/bin/sh
# run_interop.sh BUILD_DIR - topicfs's RecordBatch codec against kafka-python, both ways.
#
#   topicfs writes  -> kafka-python decodes   (plain, gzip, snappy, lz4, zstd)
#   kafka-python builds -> topicfs reads      (the same five; zstd frames with and
#                                              without a content size)
# and, so that a checker that accepts everything cannot pass, both checkers must
# reject a wrong expectation and a segment with a flipped byte.
#
# Builds nothing: BUILD_DIR must hold the interop_codec driver. Needs /usr/bin/python3
# with python3-kafka, python3-zstandard, python3-snappy and python3-lz4 (Debian). Prints one line per check and
# "interop: N passed, M failed"; exits 1 if any check failed, 2 on a setup problem.
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
DRIVER="$1/interop_codec"
CHECK="$(cd "$(dirname "$0")" && pwd)/kafka_check.py"
PY=/usr/bin/python3
if [ ! -x "$DRIVER" ]; then
	echo "interop: $DRIVER not found; build the interop_codec target first" >&2
	exit 2
fi
if ! "$PY" -c 'import kafka.record.default_records, zstandard' 2>/dev/null; then
	echo "interop: $PY lacks kafka-python or zstandard (apt install python3-kafka python3-zstandard)" >&2
	exit 2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tfs-interop-XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
passed=0
failed=0

# ok NAME CMD... : the command must succeed.
ok() {
	name=$1
	shift
	if "$@" >"$TMP/out" 2>&1; then
		passed=$((passed + 1))
		echo "pass: $name"
	else
		failed=$((failed + 1))
		echo "FAIL: $name"
		sed 's/^/    /' "$TMP/out"
	fi
}

# rejects NAME CMD... : the command must fail with status 1 (a reported mismatch).
rejects() {
	name=$1
	shift
	"$@" >"$TMP/out" 2>&1
	rc=$?
	if [ "$rc" -eq 1 ]; then
		passed=$((passed + 1))
		echo "pass: $name ($(tail -n 1 "$TMP/out"))"
	else
		failed=$((failed + 1))
		echo "FAIL: $name (exit $rc, expected a rejection)"
		sed 's/^/    /' "$TMP/out"
	fi
}

cd "$TMP" || exit 2

# topicfs -> kafka-python
ok "topicfs writes, kafka-python decodes" "$DRIVER" write c.log c.jsonl
ok "  ... records match" "$PY" "$CHECK" decode c.log c.jsonl
ok "topicfs writes zstd, kafka-python decodes" "$DRIVER" write cz.log cz.jsonl zstd
ok "  ... records match" "$PY" "$CHECK" decode cz.log cz.jsonl

# kafka-python -> topicfs
ok "kafka-python builds" "$PY" "$CHECK" build k.log k.jsonl
ok "  ... topicfs reads, records match" "$DRIVER" read k.log k.jsonl
ok "kafka-python builds zstd" "$PY" "$CHECK" build kz.log kz.jsonl --zstd
ok "  ... topicfs reads, records match" "$DRIVER" read kz.log kz.jsonl

# The engine end to end: segments appended by the partition log decode in
# kafka-python, and a kafka-python segment opens as a partition.
ok "engine appends, kafka-python decodes" "$DRIVER" plog-write p-0 p.jsonl
ok "  ... records match" "$PY" "$CHECK" decode p-0/00000000000000000000.log p.jsonl
ok "engine appends zstd, kafka-python decodes" "$DRIVER" plog-write pz-0 pz.jsonl zstd
ok "  ... records match" "$PY" "$CHECK" decode pz-0/00000000000000000000.log pz.jsonl
mkdir -p k-0 kz-0
cp k.log k-0/00000000000000000000.log
cp kz.log kz-0/00000000000000000000.log
ok "kafka-python segment opens as a partition" "$DRIVER" plog-read k-0 k.jsonl
ok "kafka-python zstd segment opens as a partition" "$DRIVER" plog-read kz-0 kz.jsonl

# A producer's batches appended as they came (tfs_plog_append_batch): offsets
# assigned afresh, everything else as kafka-python built it - or re-encoded with
# the topic's codec when it differs - and the result decodes in kafka-python.
ok "kafka-python batches renumbered" "$PY" "$CHECK" renumber k.jsonl kn.jsonl
ok "kafka-python zstd batches renumbered" "$PY" "$CHECK" renumber kz.jsonl kzn.jsonl
for run in "k.log kn.jsonl plain" "kz.log kzn.jsonl zstd" "k.log kn.jsonl zstd" "kz.log kzn.jsonl plain"; do
	set -- $run
	dir="pp-$1-$3"
	if [ "$3" = zstd ]; then
		ok "engine appends $1's batches as a producer's, topic zstd" "$DRIVER" plog-produce "$dir" "$1" zstd
	else
		ok "engine appends $1's batches as a producer's, topic uncompressed" "$DRIVER" plog-produce "$dir" "$1"
	fi
	ok "  ... kafka-python decodes them" "$PY" "$CHECK" decode "$dir/00000000000000000000.log" "$2"
	ok "  ... in one segment" test "$(ls "$dir"/*.log | wc -l)" -eq 1
	ok "  ... the engine reads them and their keys" "$DRIVER" plog-read "$dir" "$2"
done

# gzip, snappy and lz4, each both ways and through the engine: batches as kafka-python
# compresses them read back here; the engine's own decode in kafka-python; a producer's
# batches appended as they came on a topic of the same codec, and re-encoded on a topic
# of another (the cleaner re-encodes with the same code).
for codec in gzip snappy lz4; do
	if ! "$PY" -c "from kafka.codec import has_$codec; import sys; sys.exit(0 if has_$codec() else 1)"; then
		failed=$((failed + 1))
		echo "FAIL: kafka-python cannot use $codec (apt install python3-snappy python3-lz4)"
		continue
	fi
	ok "topicfs writes $codec, kafka-python decodes" "$DRIVER" write "c-$codec.log" "c-$codec.jsonl" "$codec"
	ok "  ... records match" "$PY" "$CHECK" decode "c-$codec.log" "c-$codec.jsonl"
	ok "kafka-python builds $codec" "$PY" "$CHECK" build "k-$codec.log" "k-$codec.jsonl" "--codec=$codec"
	ok "  ... topicfs reads, records match" "$DRIVER" read "k-$codec.log" "k-$codec.jsonl"
	ok "engine appends $codec, kafka-python decodes" "$DRIVER" plog-write "p-$codec-0" "p-$codec.jsonl" "$codec"
	ok "  ... records match" "$PY" "$CHECK" decode "p-$codec-0/00000000000000000000.log" "p-$codec.jsonl"
	ok "kafka-python $codec batches renumbered" "$PY" "$CHECK" renumber "k-$codec.jsonl" "k-$codec-n.jsonl"
	for topic in "$codec" none zstd; do
		dir="pp-$codec-$topic"
		ok "engine appends kafka-python's $codec batches, topic $topic" "$DRIVER" plog-produce "$dir" "k-$codec.log" "$topic"
		ok "  ... kafka-python decodes them" "$PY" "$CHECK" decode "$dir/00000000000000000000.log" "k-$codec-n.jsonl"
		ok "  ... the engine reads them and their keys" "$DRIVER" plog-read "$dir" "k-$codec-n.jsonl"
	done
	# From the magic byte on (the CRC included) a compressed batch is what the
	# producer sent: the broker sets only base offset, length and leader epoch.
	ok "  ... a topic of the same codec keeps the producer's compressed batches" \
		"$PY" -c 'import struct, sys
src = open(sys.argv[1], "rb").read(); seg = open(sys.argv[2], "rb").read(); kept = 0; pos = 0
while pos < len(src):
    n = struct.unpack_from(">i", src, pos + 8)[0] + 12; b = src[pos:pos + n]; pos += n
    if b[22] & 7:
        kept += 1
        if b[16:] not in seg: sys.exit("batch at %d was rewritten" % (pos - n))
sys.exit(0 if kept else "no compressed batch to check")' "k-$codec.log" "pp-$codec-$codec/00000000000000000000.log"
done

# The checkers can fail: a wrong value, a missing record, a flipped byte.
if [ -s c.jsonl ] && [ -s k.jsonl ]; then
	sed '1s/"value": "[0-9a-f]*"/"value": "ff"/' c.jsonl >c-wrong.jsonl
	sed '1s/"value": "[0-9a-f]*"/"value": "ff"/' k.jsonl >k-wrong.jsonl
	sed '$d' k.jsonl >k-short.jsonl
	cp c.log c-flip.log
	printf '\377' | dd of=c-flip.log bs=1 seek=70 conv=notrunc 2>/dev/null
	cp k.log k-flip.log
	printf '\377' | dd of=k-flip.log bs=1 seek=70 conv=notrunc 2>/dev/null
	rejects "kafka-python rejects a wrong value" "$PY" "$CHECK" decode c.log c-wrong.jsonl
	rejects "topicfs rejects a wrong value" "$DRIVER" read k.log k-wrong.jsonl
	rejects "topicfs rejects a missing record" "$DRIVER" read k.log k-short.jsonl
	rejects "kafka-python rejects a flipped byte" "$PY" "$CHECK" decode c-flip.log c.jsonl
	rejects "topicfs rejects a flipped byte" "$DRIVER" read k-flip.log k.jsonl
fi

echo "interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
