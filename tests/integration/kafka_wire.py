"""kafka_wire.py - raw Kafka frames for tests/integration/test_kafka.sh: what a
broken or hostile client sends, and the few requests the clients under test do
not make the way a case needs (a version above the advertised one, a frame cut
short, acks outside 0/1/-1).

Usage: kafka_wire.py PORT CMD [ARGS]; prints what the case compares.
"""
import socket
import struct
import sys
import time

from kafka.record.default_records import DefaultRecordBatchBuilder


def conn(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    return s


def frame(key, version, corr, body, client=b"raw", flex=False):
    hdr = struct.pack(">hhih", key, version, corr, len(client)) + client
    if flex:
        hdr += b"\x00"
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def recv_frame(s):
    h = recv_exact(s, 4)
    if h is None:
        return None
    (n,) = struct.unpack(">i", h)
    return recv_exact(s, n)


def closed(s):
    """True if the peer closed the connection (EOF or reset) without answering."""
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        return True


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def batch(key, value, codec=0):
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                   producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                   batch_size=1 << 20)
    bb.append(0, timestamp=int(time.time() * 1000), key=key, value=value, headers=[])
    return bytes(bb.build())


def produce_body(topic, part, records, acks=1):
    return (struct.pack(">h", -1) + struct.pack(">hi", acks, 30000) + struct.pack(">i", 1) +
            kstr(topic) + struct.pack(">i", 1) + struct.pack(">i", part) +
            struct.pack(">i", len(records)) + records)


def main():
    port = int(sys.argv[1])
    cmd = sys.argv[2]
    args = sys.argv[3:]
    s = conn(port)
    if cmd == "apiversions":            # VERSION: error code and the keys offered
        v = int(args[0])
        body = b"\x04raw\x021\x00" if v >= 3 else b""
        s.sendall(frame(18, v, 7, body, flex=v >= 3))
        r = recv_frame(s)
        corr, err = struct.unpack(">ih", r[:6])
        if v >= 3 and err == 0:
            n = r[6] - 1
            off = 7
            keys = []
            for _ in range(n):
                keys.append("%d:%d-%d" % struct.unpack(">hhh", r[off:off + 6]))
                off += 7
        else:
            (n,) = struct.unpack(">i", r[6:10])
            keys = ["%d:%d-%d" % struct.unpack(">hhh", r[10 + 6 * i:16 + 6 * i]) for i in range(n)]
        print(corr, err, " ".join(keys))
    elif cmd == "unknown-key":          # an API key no broker serves: closed
        s.sendall(frame(999, 0, 1, b""))
        print("closed" if closed(s) else "answered")
    elif cmd == "bad-version":          # Produce v1: below the advertised range
        s.sendall(frame(0, 1, 1, produce_body(args[0], 0, batch(b"k", b"v"))))
        print("closed" if closed(s) else "answered")
    elif cmd == "oversized":            # a size past socket.request.max.bytes
        s.sendall(struct.pack(">i", int(args[0])) + b"\x00" * 64)
        print("closed" if closed(s) else "answered")
    elif cmd == "tiny":                 # a size below any header's
        s.sendall(struct.pack(">i", 3) + b"\x00\x12\x00")
        print("closed" if closed(s) else "answered")
    elif cmd == "truncated-body":       # a Produce whose records run past the frame
        body = produce_body(args[0], 0, batch(b"k", b"v"))
        body = body[:-10]
        s.sendall(frame(0, 7, 1, body))
        print("closed" if closed(s) else "answered")
    elif cmd == "cut-frame":            # half a frame, then the connection ends
        f = frame(0, 7, 1, produce_body(args[0], 0, batch(b"k", b"v")))
        s.sendall(f[: len(f) // 2])
        s.close()
        print("sent")
    elif cmd == "produce":              # TOPIC ACKS [CODEC]: the partition error and offset
        acks = int(args[1])
        codec = int(args[2]) if len(args) > 2 else 0
        s.sendall(frame(0, 7, 5, produce_body(args[0], 0, batch(b"k", b"v", codec), acks)))
        if acks == 0:
            print("noreply")
            return
        r = recv_frame(s)
        off = 4 + 4
        (tl,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + tl + 4
        part, err, base = struct.unpack(">ihq", r[off:off + 14])
        print(err, base)
    elif cmd == "corrupt-crc":          # a batch whose CRC does not check: error 2
        b = bytearray(batch(b"k", b"v"))
        b[-1] ^= 0xff
        s.sendall(frame(0, 7, 5, produce_body(args[0], 0, bytes(b))))
        r = recv_frame(s)
        off = 8
        (tl,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + tl + 4
        print(struct.unpack(">ihq", r[off:off + 14])[1])
    elif cmd == "pipeline":             # N ApiVersions written at once: the order back
        n = int(args[0])
        s.sendall(b"".join(frame(18, 0, i, b"") for i in range(n)))
        print(" ".join(str(struct.unpack(">i", recv_frame(s)[:4])[0]) for _ in range(n)))
    elif cmd == "idle":                 # N connections held open until stdin closes
        held = [conn(port) for _ in range(int(args[0]))]
        print(len(held), flush=True)
        sys.stdin.read()
    elif cmd == "claim":                # N connections that each announce a SIZE frame
        held = []                       # and send 10 bytes of it three times (so that
        for _ in range(int(args[0])):   # the daemon reads each piece apart), held open
            c = conn(port)              # until stdin closes
            c.sendall(struct.pack(">i", int(args[1])) + b"\x00" * 10)
            held.append(c)
        for _ in range(3):
            s.sendall(frame(18, 0, 1, b""))
            recv_frame(s)
            time.sleep(0.2)             # pacing only: the check does not depend on it
            for c in held:
                c.sendall(b"\x00" * 10)
        s.sendall(frame(18, 0, 1, b""))
        recv_frame(s)
        print(len(held), flush=True)
        sys.stdin.read()
    elif cmd == "churn":                # N connections opened and dropped at once
        for _ in range(int(args[0])):
            c = conn(port)
            c.sendall(frame(18, 0, 1, b"")[:5])
            c.close()
        print("done")
    elif cmd == "no-reader":            # fills the socket with Fetch requests it never reads
        t = args[0]
        body = (struct.pack(">iiiib", -1, 0, 1, 50 << 20, 0) + struct.pack(">i", 1) + kstr(t) +
                struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20))
        f = frame(1, 4, 1, body)
        s.setblocking(False)
        sent = 0
        try:
            for _ in range(int(args[1])):
                sent += s.send(f)
        except BlockingIOError:
            pass
        print("stalled", flush=True)
        sys.stdin.read()
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
