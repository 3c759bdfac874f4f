#!/usr/bin/python3
"""mklog.py - build Kafka-format logs with known contents for test_topicctl.sh.

  mklog.py dumpdir DIR     DIR/t-0: two segments with gaps between and inside
                           batches, tombstones, keyless and binary records,
                           headers, a delete-horizon batch; a valid .index and
                           .timeindex for the first segment; DIR/facts.json says
                           where every batch is.
  mklog.py estimate DIR    DIR/e-0, e-1, e-2 and DIR/topics/e, the topic's config
                           (r = 0.25): known keyed / keyless / distinct counts
                           per partition, and DIR/expected.json: topicctl
                           estimate's figures computed here from the README's
                           formula, and the simple formula's figures.
  mklog.py estimate-active DIR
                           DIR/n-0: a keyed cleanable segment and an active
                           segment where 2 of 100 records are keyless (a new
                           producer without keys).

Batches are encoded here field by field (RecordBatch v2, CRC-32C) so that every
header field can be chosen, and each file is read back through kafka-python's
decoder (an independent implementation) before it is used. Run with /usr/bin/python3
(Debian's python3-kafka).
"""
import json
import os
import struct
import sys

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

T0 = 1700000000000
HORIZON = T0 + 86400000
ATTR_DELETE_HORIZON = 0x40


def varint(v):
    u = ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def nbytes(b):
    return varint(-1) if b is None else varint(len(b)) + b


def record(delta, ts_delta, key, value, headers):
    body = (bytes([0]) + varint(ts_delta) + varint(delta) + nbytes(key) + nbytes(value) +
            varint(len(headers)) +
            b"".join(varint(len(k)) + k + nbytes(v) for k, v in headers))
    return varint(len(body)) + body


def batch(base, recs, last_delta=None, base_ts=None, attrs=0, pid=-1, epoch=-1, seq=-1):
    """recs: (offset delta, timestamp, key, value, headers). Returns the bytes."""
    if base_ts is None:
        base_ts = recs[0][1] if recs else -1
    if last_delta is None:
        last_delta = recs[-1][0] if recs else 0
    max_ts = max(r[1] for r in recs) if recs else -1
    body = b"".join(record(d, ts - base_ts, k, v, h) for d, ts, k, v, h in recs)
    after_crc = struct.pack(">hiqqqhii", attrs, last_delta, base_ts, max_ts, pid, epoch, seq,
                            len(recs)) + body
    crc = calc_crc32c(after_crc)
    return struct.pack(">qiibI", base, 49 + len(body), 0, 2, crc) + after_crc


def check_with_kafka(path):
    """Every batch decodes and passes its CRC in kafka-python."""
    with open(path, "rb") as f:
        data = f.read()
    mr = MemoryRecords(data)
    n = 0
    while mr.has_next():
        b = mr.next_batch()
        assert isinstance(b, DefaultRecordBatch) and b.validate_crc(), (path, n)
        for _ in b:
            pass
        n += 1
    assert mr.valid_bytes() == len(data), path
    return n


def write_segment(dirpath, base, batches):
    """Writes <base>.log; returns [(base_offset, last_offset, pos, size, max_ts)]."""
    path = os.path.join(dirpath, "%020d.log" % base)
    out, facts = bytearray(), []
    for b in batches:
        bo, = struct.unpack_from(">q", b, 0)
        last_delta, = struct.unpack_from(">i", b, 23)
        max_ts, = struct.unpack_from(">q", b, 35)
        facts.append({"base": bo, "last": bo + last_delta, "pos": len(out), "size": len(b),
                      "max_ts": max_ts})
        out += b
    with open(path, "wb") as f:
        f.write(out)
    check_with_kafka(path)
    return facts


def write_indexes(dirpath, base, entries, tentries):
    with open(os.path.join(dirpath, "%020d.index" % base), "wb") as f:
        for rel, pos in entries:
            f.write(struct.pack(">ii", rel, pos))
    with open(os.path.join(dirpath, "%020d.timeindex" % base), "wb") as f:
        for ts, rel in tentries:
            f.write(struct.pack(">qi", ts, rel))


def cmd_dumpdir(top):
    d = os.path.join(top, "t-0")
    os.makedirs(d)
    seg0 = [
        # offsets 0..2: two keys, then a tombstone of the first; headers
        batch(0, [(0, T0, b"a", b"1", [(b"h1", b"v1")]),
                  (1, T0 + 1, b"b", b"2", [(b"bin", b"\x00\xff")]),
                  (2, T0 + 2, b"a", None, [])]),
        # gap 3..4; offsets 5 and 8 of 5..10: holes 6..7 and 9..10 inside
        batch(5, [(0, T0 + 5, b"c", b"x" * 40, []),
                  (3, T0 + 8, b"d", b"y" * 40, [(b"n", None)])], last_delta=5),
        # gap 11..15; a keyless record and a binary key
        batch(16, [(0, T0 + 16, None, b"hello world", []),
                   (1, T0 + 17, b"\x01\x02", b"\xff\xfe", [])],
              pid=4242, epoch=3, seq=17),
    ]
    seg20 = [
        # gap 17..24 (segment base 20); a tombstone kept until its delete horizon
        batch(25, [(0, HORIZON + 0, b"b", None, [])], base_ts=HORIZON,
              attrs=ATTR_DELETE_HORIZON),
        batch(26, [(0, T0 + 26, b"e", b"last", [])]),
    ]
    f0 = write_segment(d, 0, seg0)
    f20 = write_segment(d, 20, seg20)
    # Kafka's rule indexes batch last offsets at batch positions; any subset is valid
    write_indexes(d, 0, [(f0[1]["last"], f0[1]["pos"]), (f0[2]["last"], f0[2]["pos"])],
                  [(f0[1]["max_ts"], f0[1]["last"]), (f0[2]["max_ts"], f0[2]["last"])])
    with open(os.path.join(top, "facts.json"), "w") as f:
        json.dump({"seg0": f0, "seg20": f20}, f)


# ---- estimate ------------------------------------------------------------------

R = 0.25   # min.cleanable.dirty.ratio in topics/e


def keyed_batches(base, nbatches, per, keys, value_len, tombstone_every=0):
    out, off, i = [], base, 0
    for _ in range(nbatches):
        recs = []
        for d in range(per):
            k = b"key-%03d" % (i % keys)
            v = None if tombstone_every and i % tombstone_every == tombstone_every - 1 \
                else b"v" * value_len
            recs.append((d, T0 + i, k, v, []))
            i += 1
        out.append(batch(off, recs))
        off += per
    return out, off, i


def keyless_batches(base, nbatches, per, value_len):
    out, off = [], base
    for _ in range(nbatches):
        out.append(batch(off, [(d, T0 + d, None, b"z" * value_len, []) for d in range(per)]))
        off += per
    return out, off


def partition(top, p, keyed_spec, keyless_spec, active_recs):
    d = os.path.join(top, "e-%d" % p)
    os.makedirs(d)
    kb, off, nkeyed = keyed_batches(0, *keyed_spec)
    lb, off = keyless_batches(off, *keyless_spec)
    # interleave: keyless batches between the keyed ones
    batches = kb[:len(kb) // 2] + lb + kb[len(kb) // 2:]
    # fix base offsets to increase in the interleaved order
    fixed, o = [], 0
    for b in batches:
        b = bytearray(b)
        struct.pack_into(">q", b, 0, o)
        count, = struct.unpack_from(">i", b, 57)
        fixed.append(bytes(b))
        o += count
    write_segment(d, 0, fixed)
    act = []
    if active_recs:
        act = [batch(o, [(i, T0 + i, b"key-000", b"a" * 10, []) for i in range(active_recs)])]
    write_segment(d, 1000, act)
    keyed_bytes = sum(len(b) for b in kb)
    keyless_bytes = sum(len(b) for b in lb)
    keys = keyed_spec[2]
    return {
        "current": keyed_bytes + keyless_bytes + sum(len(b) for b in act),
        "active": sum(len(b) for b in act),
        "keyed_bytes": keyed_bytes,
        "keyless_bytes": keyless_bytes,
        "keyed_records": nkeyed,
        "keyless_records": keyless_spec[0] * keyless_spec[1],
        "distinct": min(keys, nkeyed),
        "active_records": active_recs,
    }


def formula(x):
    """The README's formula, in the same order of floating-point operations."""
    e = float(x["keyed_records"]) / float(x["distinct"]) if x["distinct"] else 0.0
    keyed = float(x["keyed_bytes"])
    keyless = float(x["keyless_bytes"])
    surviving = keyless + (keyed / e if e > 0 else 0.0)
    dirt = surviving * R / (1.0 - R)
    estimate = surviving + dirt + float(x["active"])
    current = float(x["current"])
    if not estimate <= current:
        estimate = current
    savings = 1.0 - estimate / current if current > 0 else 0.0
    records = x["keyed_records"] + x["keyless_records"]
    share = float(x["keyless_records"]) / float(records) if records else 0.0
    return {"events_per_key": e, "surviving_bytes": surviving, "dirt_bytes": dirt,
            "estimate_bytes": estimate, "current_bytes": current, "savings": savings,
            "keyless_share": share, "worth_it": e >= 3.0 and savings > 0.20,
            "keyless_warning": share > 0.10}


def simple(n, distinct, keyless, current, active_per_partition, partitions):
    """The simple formula (README), in the same order of floating-point operations."""
    keyed = float(n) - float(keyless)
    e = keyed / (distinct if distinct > 1 else 1.0)
    share = float(keyless) / float(n)
    keyed_after = current * (1 - share) / e if e > 0 else 0.0
    surviving = current * share + keyed_after
    dirt = surviving * (R / (1 - R))
    estimate = surviving + dirt + active_per_partition * partitions
    savings = 1 - estimate / current
    return {"events_per_key": e, "keyless_share": share, "surviving_bytes": surviving,
            "estimate_bytes": estimate, "savings": savings,
            "worth_it": e >= 3.0 and savings > 0.20, "keyless_warning": share > 0.10}


def cmd_estimate_active(top):
    d = os.path.join(top, "n-0")
    os.makedirs(d)
    kb, off, _ = keyed_batches(0, 10, 5, 10, 20)
    write_segment(d, 0, kb)
    recs = [(i, T0 + i, None if i in (40, 41) else b"key-%03d" % (i % 10), b"a" * 10, [])
            for i in range(100)]
    write_segment(d, off, [batch(off, recs)])


def cmd_estimate(top):
    os.makedirs(os.path.join(top, "topics"), exist_ok=True)
    with open(os.path.join(top, "topics", "e"), "w") as f:
        f.write("# written by mklog.py\nmin.cleanable.dirty.ratio=%s\ntopicfs.partitions=3\n" % R)
    # (batches, records a batch, distinct keys, value bytes[, tombstone every n])
    parts = [
        partition(top, 0, (10, 10, 20, 30, 7), (1, 5, 30), 3),    # E = 5, worth it
        partition(top, 1, (4, 5, 10, 30), (3, 5, 30), 2),         # E = 2, 30% keyless
        partition(top, 2, (20, 5, 4, 50), (0, 5, 10), 0),         # E = 25, empty active
    ]
    exp = {"partitions": [], "total": None}
    for x in parts:
        y = formula(x)
        y.update(x)
        n = x["keyed_records"] + x["keyless_records"] + x["active_records"]
        y["simple"] = simple(n, float(x["distinct"]), x["keyless_records"], float(x["current"]),
                             float(x["active"]), 1.0)
        exp["partitions"].append(y)
    cur = 0.0
    est = 0.0
    keyed = 0.0
    distinct = 0.0
    records = 0
    keyless = 0
    for x, y in zip(parts, exp["partitions"]):
        cur += y["current_bytes"]
        est += y["estimate_bytes"]
        keyed += float(x["keyed_records"])
        distinct += float(x["distinct"])
        records += x["keyed_records"] + x["keyless_records"]
        keyless += x["keyless_records"]
    e = keyed / distinct
    savings = 1.0 - est / cur
    act = sum(float(x["active"]) for x in parts)
    n_all = records + sum(x["active_records"] for x in parts)
    simple_total = simple(n_all, distinct, keyless, cur, act / 3.0, 3.0)
    share = float(keyless) / float(records)
    exp["total"] = {"events_per_key": e, "estimate_bytes": est, "current_bytes": cur,
                    "savings": savings, "keyless_share": share,
                    "worth_it": e >= 3.0 and savings > 0.20, "keyless_warning": share > 0.10,
                    "simple": simple_total}
    with open(os.path.join(top, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)


def main(argv):
    if len(argv) == 3 and argv[1] == "dumpdir":
        cmd_dumpdir(argv[2])
    elif len(argv) == 3 and argv[1] == "estimate":
        cmd_estimate(argv[2])
    elif len(argv) == 3 and argv[1] == "estimate-active":
        cmd_estimate_active(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
