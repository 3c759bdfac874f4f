"""kafka_corpus.py - writes the seed inputs of fuzz_kafka (tests/fuzz/corpus/kafka/):
one request of each API the listener serves, in the harness's framing
([u16 little-endian length][request without its int32 size]).

Usage: /usr/bin/python3 tests/fuzz/kafka_corpus.py  (needs python3-kafka)
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import kafka_wire as kw  # noqa: E402

out = os.path.join(os.path.dirname(__file__), "corpus", "kafka")


def req(key, version, body, flex=False):
    f = kw.frame(key, version, 1, body, flex=flex)[4:]
    return struct.pack("<H", len(f)) + f


def s(x):
    return kw.kstr(x)


topics1 = struct.pack(">i", 1) + s("f")
fetch_part = struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">iqqi", -1, 0, -1, 1 << 20)
seeds = {
    "apiversions-v0": req(18, 0, b""),
    "apiversions-v3": req(18, 3, b"\x04raw\x021\x00", flex=True),
    "apiversions-v9": req(18, 9, b""),
    "metadata-v0-all": req(3, 0, struct.pack(">i", 0)),
    "metadata-v8-f": req(3, 8, topics1 + b"\x01\x00\x00"),
    "metadata-v4-auto": req(3, 4, struct.pack(">i", 1) + s("new") + b"\x01"),
    "produce-v7": req(0, 7, kw.produce_body("f", 0, kw.batch(b"k", b"v"))),
    "produce-v3-acks0": req(0, 3, kw.produce_body("f", 0, kw.batch(b"k", None), acks=0)),
    "produce-v8-gzip": req(0, 8, kw.produce_body("f", 0, kw.batch(b"k", b"v" * 100, 1))),
    "fetch-v11": req(1, 11, struct.pack(">iiiibii", -1, 0, 1, 1 << 20, 0, 0, -1) +
                     struct.pack(">i", 1) + s("f") + fetch_part + struct.pack(">i", 0) + s("")),
    "fetch-v4": req(1, 4, struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0) + struct.pack(">i", 1) + s("f") +
                    struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)),
    "listoffsets-v1": req(2, 1, struct.pack(">i", -1) + struct.pack(">i", 1) + s("f") +
                          struct.pack(">i", 1) + struct.pack(">iq", 0, -1)),
    "listoffsets-v5-time": req(2, 5, struct.pack(">ib", -1, 0) + struct.pack(">i", 1) + s("f") +
                               struct.pack(">i", 1) + struct.pack(">iiq", 0, -1, 0)),
    "createtopics-v4": req(19, 4, struct.pack(">i", 1) + s("c") + struct.pack(">ih", 2, 1) +
                           struct.pack(">i", 0) + struct.pack(">i", 1) + s("cleanup.policy") +
                           s("delete") + struct.pack(">ib", 1000, 0)),
    "deletetopics-v3": req(20, 3, struct.pack(">i", 1) + s("f") + struct.pack(">i", 1000)),
    "initproducerid-v1": req(22, 1, struct.pack(">hi", -1, 60000)),
    "initproducerid-v0-txn": req(22, 0, s("tx") + struct.pack(">i", 60000)),
    "produce-v7-idempotent": req(0, 7, kw.produce_body("f", 0, kw.idem_batch(0, 0, 0, b"k", b"v"), -1)),
    "describeconfigs-v2": req(32, 2, struct.pack(">ib", 2, 2) + s("f") + struct.pack(">i", -1) +
                              struct.pack(">bb", 4, 0) + s("1") + struct.pack(">i", 1) + s("node.id") +
                              b"\x01"),
    "describeconfigs-v4": req(32, 4, kw.uvarint(2) + b"\x02" + kw.cstr("f") + b"\x00\x00\x01\x00\x00",
                              flex=True),
    "alterconfigs-v1": req(33, 1, struct.pack(">ib", 1, 2) + s("f") + struct.pack(">i", 1) +
                           s("retention.ms") + s("1000") + b"\x00"),
    "incrementalalterconfigs-v1": req(44, 1, kw.uvarint(2) + b"\x02" + kw.cstr("f") + kw.uvarint(3) +
                                      kw.cstr("cleanup.policy") + b"\x02" + kw.cstr("delete") + b"\x00" +
                                      kw.cstr("segment.bytes") + b"\x01\x00\x00" + b"\x00\x01\x00",
                                      flex=True),
}
# SASL (fuzz_kafka.c's principal "fuzz", password "fuzz-secret"): a v1
# handshake and PLAIN through SaslAuthenticate; a v0 handshake and a bare PLAIN
# token (the harness's framing holds the token as it holds a request); SCRAM's
# client-first through SaslAuthenticate v2 (flexible)
plain = b"\x00fuzz\x00fuzz-secret"
seeds["sasl-plain-v1"] = (req(17, 1, s("PLAIN")) + req(36, 1, struct.pack(">i", len(plain)) + plain) +
                          req(3, 1, struct.pack(">i", -1)))
seeds["sasl-plain-raw"] = req(17, 0, s("PLAIN")) + struct.pack("<H", len(plain)) + plain
seeds["sasl-authenticate-null"] = req(17, 1, s("PLAIN")) + req(36, 0, struct.pack(">i", -1))
first = b"n,,n=fuzz,r=abcdefghijklmnop"
seeds["sasl-scram-first"] = req(17, 1, s("SCRAM-SHA-256")) + req(36, 2, kw.uvarint(len(first) + 1) + first + b"\x00",
                                                               flex=True)
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as fh:
        fh.write(data)
# two in one input: a produce, then a fetch of it
with open(os.path.join(out, "produce-then-fetch"), "wb") as fh:
    fh.write(seeds["produce-v7"] + seeds["fetch-v11"])
