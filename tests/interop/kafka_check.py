#!/usr/bin/python3
"""kafka_check.py - check topicfs segments against an independent Kafka decoder.

Uses kafka-python (Debian's python3-kafka 2.0.2) and python3-zstandard; run it with
/usr/bin/python3 so that those system packages are found.

  decode LOGFILE EXPECTED.jsonl
      Parses LOGFILE (concatenated RecordBatch v2 batches, a .log segment) with
      kafka-python, validates every batch CRC, and compares every record's offset,
      timestamp, key, value and headers with EXPECTED.jsonl, one JSON object per
      record in log order:
        {"offset":N,"timestamp":T,"key":hex|null,"value":hex|null,
         "headers":[[name, hex|null], ...]}
      Exits 1 with a message naming the first mismatch.

  build LOGFILE EXPECTED.jsonl [--zstd | --codec=gzip|snappy|lz4|zstd]
      Writes a segment built by kafka-python's DefaultRecordBatchBuilder (several
      batches with assigned base offsets, keyless records, tombstones, empty values,
      binary bytes, headers with null values; with a codec the batches are compressed
      where that saves space - kafka-python's rule; with zstd one of them without
      a content size in the frame, as Java's streaming compressor writes them) and
      the JSON lines that describe it.

  renumber EXPECTED.jsonl OUT.jsonl
      Writes EXPECTED.jsonl with the records' offsets 0, 1, 2, ... in order: where
      they land when their batches are appended as a producer's to an empty
      partition, which assigns offsets afresh.
"""
import json
import struct
import sys

try:
    import zstandard
    from kafka.record import default_records
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords
except ImportError as e:  # pragma: no cover - environment problem, not a test result
    sys.stderr.write("kafka_check: missing module (%s); run with /usr/bin/python3\n" % e)
    sys.exit(2)

MAGIC_V2 = 2
CODEC_NONE = 0
CODEC_ZSTD = 4
CODEC_MASK = 0x07
ATTRIBUTES_OFFSET = 21      # attributes (int16) in the batch header
BASE_OFFSET_FMT = ">q"      # base offset: first 8 bytes, outside the CRC
LEADER_EPOCH_OFFSET = 12    # partition leader epoch: outside the CRC
LEADER_EPOCH = 7
RECORDS_OFFSET = 61         # records (or the zstd frame) follow the 61-byte header
BATCH_BYTES_LIMIT = 1 << 20
BASE_TIMESTAMP = 1700000000000


class Mismatch(Exception):
    pass


def hex_or_none(b):
    return None if b is None else bytes(b).hex()


def record_json(offset, timestamp, key, value, headers):
    return {
        "offset": offset,
        "timestamp": timestamp,
        "key": hex_or_none(key),
        "value": hex_or_none(value),
        "headers": [[name, hex_or_none(v)] for name, v in headers],
    }


def read_expected(path):
    out = []
    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise Mismatch("%s:%d: bad JSON: %s" % (path, lineno, e))
    return out


def decoded_records(path):
    """Yields (batch_index, record_json) for every record of the segment file."""
    with open(path, "rb") as f:
        data = f.read()
    records = MemoryRecords(data)
    index = 0
    while records.has_next():
        batch = records.next_batch()
        if not isinstance(batch, DefaultRecordBatch) or batch.magic != MAGIC_V2:
            raise Mismatch("batch %d: not a v2 record batch" % index)
        if not batch.validate_crc():
            raise Mismatch("batch %d (base offset %d): crc mismatch" % (index, batch.base_offset))
        for r in batch:
            yield index, record_json(r.offset, r.timestamp, r.key, r.value, r.headers)
        index += 1
    if records.valid_bytes() != records.size_in_bytes():
        raise Mismatch("%d trailing bytes after the last whole batch"
                       % (records.size_in_bytes() - records.valid_bytes()))


def cmd_decode(log_path, expected_path):
    expected = read_expected(expected_path)
    n = 0
    for batch_index, got in decoded_records(log_path):
        if n >= len(expected):
            raise Mismatch("record %d (batch %d, offset %d): not in the expected file"
                           % (n, batch_index, got["offset"]))
        want = expected[n]
        for field in ("offset", "timestamp", "key", "value", "headers"):
            if got[field] != want.get(field):
                raise Mismatch("record %d (batch %d, offset %s): %s is %r, expected %r"
                               % (n, batch_index, got["offset"], field, got[field],
                                  want.get(field)))
        n += 1
    if n != len(expected):
        raise Mismatch("segment has %d records, expected %d" % (n, len(expected)))
    print("kafka_check: %s: %d records match" % (log_path, n))


def zstd_without_content_size(data):
    """Compresses as Java's streaming ZstdOutputStream does: no content size."""
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


def sample_batches():
    """Yields (base_offset, producer (id, epoch, seq), records); a record is
    (timestamp, key, value, headers)."""
    blob = bytes(range(256))
    ts = BASE_TIMESTAMP
    yield 0, (-1, -1, -1), [
        (ts, b"user-1", b"alice", [("trace-id", b"t-1")]),
        (ts + 1, None, b"keyless", []),
        (ts + 2, b"user-2", None, [("why", None)]),
        (ts + 3, b"", b"", [("", b"")]),
        (ts - 5, b"user-1", b"alice-2", [("a", b"1"), ("b", None), ("\u00e9t\u00e9", b"\x00\xff")]),
    ]
    # A gap before the next batch, as after compaction.
    yield 10, (4242, 1, 0), [
        (ts + 100 + i, b"k%03d" % (i % 7), (b"value-%d-" % i) * 20, [("n", b"%d" % i)])
        for i in range(40)
    ]
    yield 50, (-1, -1, -1), [
        (ts + 200, blob, blob[::-1], [("bin", blob)]),
        (ts + 201, b"\x00", None, []),
    ]
    yield 52, (-1, -1, -1), [
        (ts + 300 + i, b"key-%d" % (i % 3), b"x" * (i * 13), []) for i in range(25)
    ]


CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def cmd_build(log_path, expected_path, codec):
    use_zstd = codec == CODEC_ZSTD
    compressed = 0
    out = bytearray()
    lines = []
    zstd_batches = unsized = 0
    original_encode = default_records.zstd_encode
    for i, (base, (pid, epoch, seq), recs) in enumerate(sample_batches()):
        # Batch 1 omits the frame content size, batch 3 states it (both compress).
        default_records.zstd_encode = (zstd_without_content_size if i % 4 == 1
                                       else original_encode)
        b = DefaultRecordBatchBuilder(magic=MAGIC_V2, compression_type=codec,
                                      is_transactional=False, producer_id=pid,
                                      producer_epoch=epoch, base_sequence=seq,
                                      batch_size=BATCH_BYTES_LIMIT)
        for delta, (ts, key, value, headers) in enumerate(recs):
            if b.append(delta, timestamp=ts, key=key, value=value, headers=headers) is None:
                raise SystemExit("kafka_check: sample batch %d does not fit" % i)
            lines.append(record_json(base + delta, ts, key, value, headers))
        buf = b.build()
        # The broker assigns base offset and leader epoch; neither is under the CRC.
        struct.pack_into(BASE_OFFSET_FMT, buf, 0, base)
        struct.pack_into(">i", buf, LEADER_EPOCH_OFFSET, LEADER_EPOCH)
        attrs, = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)
        compressed += attrs & CODEC_MASK == codec != CODEC_NONE
        if attrs & CODEC_MASK == CODEC_ZSTD:
            zstd_batches += 1
            frame = zstandard.get_frame_parameters(bytes(buf[RECORDS_OFFSET:]))
            unsized += frame.content_size == zstandard.CONTENTSIZE_UNKNOWN
        out += buf
    default_records.zstd_encode = original_encode
    if codec != CODEC_NONE and compressed == 0:
        raise SystemExit("kafka_check: kafka-python compressed no batch with codec %d" % codec)
    if use_zstd and (unsized == 0 or unsized == zstd_batches):
        raise SystemExit("kafka_check: want zstd frames with and without content size, got "
                         "%d of %d without" % (unsized, zstd_batches))
    with open(log_path, "wb") as f:
        f.write(out)
    with open(expected_path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    # The segment must read back through kafka-python itself before it tests anyone.
    cmd_decode(log_path, expected_path)
    print("kafka_check: built %s: %d records, %d compressed batches (%d zstd, %d without "
          "content size)" % (log_path, len(lines), compressed, zstd_batches, unsized))


def cmd_renumber(expected_path, out_path):
    records = read_expected(expected_path)
    with open(out_path, "w", encoding="utf-8") as f:
        for offset, record in enumerate(records):
            record["offset"] = offset
            f.write(json.dumps(record) + "\n")


def main(argv):
    usage = ("usage: kafka_check.py decode LOGFILE EXPECTED.jsonl\n"
             "       kafka_check.py build LOGFILE EXPECTED.jsonl [--zstd | --codec=NAME]\n"
             "       kafka_check.py renumber EXPECTED.jsonl OUT.jsonl\n")
    try:
        if len(argv) == 4 and argv[1] == "decode":
            cmd_decode(argv[2], argv[3])
        elif len(argv) in (4, 5) and argv[1] == "build" and (
                argv[4:] in ([], ["--zstd"]) or
                (argv[4].startswith("--codec=") and argv[4][8:] in CODECS)):
            name = "none" if len(argv) == 4 else "zstd" if argv[4] == "--zstd" else argv[4][8:]
            cmd_build(argv[2], argv[3], CODECS[name])
        elif len(argv) == 4 and argv[1] == "renumber":
            cmd_renumber(argv[2], argv[3])
        else:
            sys.stderr.write(usage)
            return 2
    except Mismatch as e:
        sys.stderr.write("kafka_check: %s: %s\n" % (argv[2], e))
        return 1
    except Exception as e:  # a decoder exception is a failed check, reported plainly
        sys.stderr.write("kafka_check: %s: %s: %s\n" % (argv[2], type(e).__name__, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
