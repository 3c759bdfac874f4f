#!/bin/bash
# test_codecs.sh - Kafka's four codecs through the mount (docs/format.md §3):
# compression.type=gzip|snappy|lz4|zstd writes batches in that codec, which
# kafka-python decodes; the cleaner re-encodes its survivors in the topic's codec;
# a producer's batches in any codec go in through .batches; the values read back
# the same after a remount.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# decode_all DIR: kafka-python decodes every .log of DIR; prints "codec:N" per batch
# (the set of codecs seen) and "key=value" for the newest value of each key.
decode_all() {
	"$T_PY" - "$1" <<'PY'
import os, sys
from kafka.record.default_records import DefaultRecordBatch
d = sys.argv[1]
codecs, newest = set(), {}
for name in sorted(os.listdir(d)):
    if not name.endswith(".log"):
        continue
    b = open(os.path.join(d, name), "rb").read()
    pos = 0
    while pos + 61 <= len(b):
        n = int.from_bytes(b[pos + 8:pos + 12], "big") + 12
        batch = DefaultRecordBatch(b[pos:pos + n])
        if not batch.validate_crc():
            sys.exit("bad CRC at %s:%d" % (name, pos))
        # markers, and the empty batches the cleaner keeps as each producer's
        # last (every .put is a producer), are never compressed
        if batch.is_control_batch or int.from_bytes(b[pos + 57:pos + 61], "big") == 0:
            pos += n
            continue
        codecs.add(batch.compression_type)
        for r in batch:
            if r.key is not None:
                newest[r.key] = r.value
        pos += n
print("codecs:" + ",".join(str(c) for c in sorted(codecs)))
for k in sorted(newest):
    v = newest[k]
    print("%s=%s" % (k.decode(), "TOMBSTONE" if v is None else v.decode()))
PY
}

c_topic_codecs() {
	"$T_PY" -c 'from kafka.codec import has_snappy, has_lz4; import sys, zstandard
sys.exit(0 if has_snappy() and has_lz4() else 1)' || skip "kafka-python lacks snappy or lz4 (python3-snappy, python3-lz4)"
	t_mount -o log.cleaner.threads=1,log.cleaner.backoff.ms=100,min.cleanable.dirty.ratio=0.99
	local codec n=1 out want
	for codec in gzip snappy lz4 zstd; do
		mkdir "$MNT/$codec"
		setfattr -n user.topicfs.compression.type -v "$codec" "$MNT/$codec"
		assert_eq "$codec" "$(t_x "$MNT/$codec" compression.type)" "compression.type of $codec"
		# three versions of 300 keys, each version one .put write (one batch)
		for v in 1 2 3; do
			seq 300 | awk -v v="$v" '{ printf "k%d\t{\"v\":%d,\"pad\":\"%s\"}\n", $1, v, "xxxxxxxxxxxxxxxxxxxxxxxx" }' \
				> "$MNT/$codec/0/.put"
		done
		rm "$MNT/$codec/0/k7"
		echo tail > "$MNT/$codec/0/last"
		setfattr -n user.topicfs.roll -v 1 "$MNT/$codec/0"
		out=$(decode_all "$DATA/$codec-0")
		assert_eq "codecs:$n" "$(head -n 1 <<< "$out")" "codec of the batches of topic $codec"
		assert_eq '{"v":3,"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"}' "$(grep '^k42=' <<< "$out" | cut -d= -f2-)" "k42 as kafka-python decodes it"
		assert_eq TOMBSTONE "$(grep '^k7=' <<< "$out" | cut -d= -f2-)" "k7's tombstone"
		# the cleaner drops versions 1 and 2 and re-encodes what survives in the codec
		setfattr -n user.topicfs.clean -v 1 "$MNT/$codec/0"
		out=$(decode_all "$DATA/$codec-0")
		assert_eq "codecs:$n" "$(head -n 1 <<< "$out")" "codec after the cleaner's re-encoding ($codec)"
		want=$(t_hist "$codec/0")
		assert_eq 304 "$want" "records left in $codec/0 after the pass (299 keys, k7's tombstone, last, the 3 .put COMMITs)"
		assert_cat "$MNT/$codec/0/k42" '{"v":3,"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"}'
		assert_absent "$MNT/$codec/0/k7"
		n=$((n + 1))
	done
	t_manifest > "$T_CASE/before"
	t_remount
	t_manifest > "$T_CASE/after"
	assert_ok cmp "$T_CASE/before" "$T_CASE/after"
	t_umount
}

# A producer's batches in each codec, written to .batches of an uncompressed topic
# and of a topic of the same codec: appended once each, readable as files.
c_producer_batches_every_codec() {
	"$T_PY" -c 'from kafka.codec import has_snappy, has_lz4; import sys
sys.exit(0 if has_snappy() and has_lz4() else 1)' || skip "kafka-python lacks snappy or lz4"
	t_mount
	local codec id out
	for codec in 1 2 3 4; do
		"$T_PY" - "$T_CASE/b$codec.bin" "$codec" <<'PY'
import sys
from kafka.record.default_records import DefaultRecordBatchBuilder
b = DefaultRecordBatchBuilder(magic=2, compression_type=int(sys.argv[2]), is_transactional=False,
                              producer_id=-1, producer_epoch=-1, base_sequence=-1,
                              batch_size=1 << 20)
for i in range(50):
    b.append(i, timestamp=1700000000000 + i, key=b"p%d" % i, value=b"value %d " % i * 20, headers=[])
buf = bytes(b.build())
assert buf[22] & 7 == int(sys.argv[2]), "kafka-python did not compress"
open(sys.argv[1], "wb").write(buf)
PY
		id=c$codec
		mkdir "$MNT/$id" "$MNT/$id-same"
		setfattr -n user.topicfs.compression.type -v "$(echo none gzip snappy lz4 zstd | cut -d' ' -f$((codec + 1)))" "$MNT/$id-same"
		cat "$T_CASE/b$codec.bin" > "$MNT/$id/0/.batches"
		cat "$T_CASE/b$codec.bin" > "$MNT/$id-same/0/.batches"
		assert_eq 50 "$(t_leo "$id/0")" "records of codec $codec's batch"
		assert_eq 50 "$(t_leo "$id-same/0")" "records of codec $codec's batch, same-codec topic"
		assert_cat "$MNT/$id/0/p13" "$(printf 'value 13 %.0s' $(seq 20))"
		assert_cat "$MNT/$id-same/0/p49" "$(printf 'value 49 %.0s' $(seq 20))"
		out=$(decode_all "$DATA/$id-0")
		assert_eq "codecs:0" "${out%%$'\n'*}" "re-encoded for an uncompressed topic"
		out=$(decode_all "$DATA/$id-same-0")
		assert_eq "codecs:$codec" "${out%%$'\n'*}" "kept as it came"
	done
	t_umount
}

t_test topic_codecs c_topic_codecs
t_test producer_batches_every_codec c_producer_batches_every_codec
t_done
