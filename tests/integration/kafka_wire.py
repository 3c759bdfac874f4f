"""kafka_wire.py - raw Kafka frames for tests/integration/test_kafka.sh: what a
broken or hostile client sends, and the few requests the clients under test do
not make the way a case needs (a version above the advertised one, a frame cut
short, acks outside 0/1/-1).

Usage: kafka_wire.py PORT CMD [ARGS]; prints what the case compares.
"""
import select
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


def idem_batch(pid, epoch, seq, key, value):
    """A one-record batch of idempotent producer pid at epoch, sequence seq."""
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                   batch_size=1 << 20)
    bb.append(0, timestamp=int(time.time() * 1000), key=key, value=value, headers=[])
    return bytes(bb.build())


def produce_answer(r):
    """(error, base offset) of a one-partition Produce response."""
    off = 4 + 4
    (tl,) = struct.unpack(">h", r[off:off + 2])
    off += 2 + tl + 4
    return struct.unpack(">ihq", r[off:off + 14])[1:]


def init_pid(s, txn=None):
    """InitProducerId v1: (error, producer id, epoch)."""
    t = struct.pack(">h", -1) if txn is None else kstr(txn)
    s.sendall(frame(22, 1, 3, t + struct.pack(">i", 60000)))
    r = recv_frame(s)
    return struct.unpack(">ihqh", r[4:4 + 16])[1:]


def proxy(port_file, log_file):
    """A TCP proxy for one broker: listens on a port the kernel picks (written to
    port_file), reads the broker's port from stdin, then forwards every
    connection. It follows the requests on each connection, and the response to
    the first Produce request for each topic is not passed on: the proxy logs
    "dropped TOPIC" and closes that client connection instead (the broker has
    already appended: a lost acknowledgement). The rest is forwarded whole."""
    import threading
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    import os
    os.rename(port_file + ".tmp", port_file)
    broker = int(sys.stdin.readline())
    dropped = set()
    lock = threading.Lock()

    def serve(c):
        u = socket.create_connection(("127.0.0.1", broker))
        produce_topics = {}             # correlation id -> topic

        def up():
            try:
                while True:
                    f = recv_frame(c)
                    if f is None:
                        break
                    key, corr = struct.unpack(">h", f[:2])[0], struct.unpack(">i", f[4:8])[0]
                    if key == 0:            # header, then txn id, acks, timeout,
                        (cl,) = struct.unpack(">h", f[8:10])  # topic count, topic
                        off = 10 + max(cl, 0)
                        (tl,) = struct.unpack(">h", f[off:off + 2])
                        off += 2 + max(tl, 0) + 2 + 4 + 4
                        (nl,) = struct.unpack(">h", f[off:off + 2])
                        produce_topics[corr] = f[off + 2:off + 2 + nl].decode()
                    u.sendall(struct.pack(">i", len(f)) + f)
            except OSError:
                pass
            try:
                u.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        try:
            while True:
                f = recv_frame(u)
                if f is None:
                    break
                (corr,) = struct.unpack(">i", f[:4])
                topic = produce_topics.pop(corr, None)
                with lock:
                    drop = topic is not None and topic not in dropped
                    dropped.add(topic)
                if drop:
                    with open(log_file, "a") as lf:
                        lf.write("dropped %s\n" % topic)
                    break
                c.sendall(struct.pack(">i", len(f)) + f)
        except OSError:
            pass
        for x in (c, u):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            x.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def produce_body(topic, part, records, acks=1):
    return (struct.pack(">h", -1) + struct.pack(">hi", acks, 30000) + struct.pack(">i", 1) +
            kstr(topic) + struct.pack(">i", 1) + struct.pack(">i", part) +
            struct.pack(">i", len(records)) + records)


def cstr(s):
    """A compact string (KIP-482); None is null."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def read_uvarint(b, off):
    n = shift = 0
    while True:
        c = b[off]
        off += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, off


def incr_alter(s, version, topic, ops, validate):
    """IncrementalAlterConfigs of one topic: ops is [(name, op, value)]; returns
    (error, message) of the topic resource."""
    flex = version >= 1
    if flex:
        body = uvarint(2) + b"\x02" + cstr(topic) + uvarint(len(ops) + 1)
        for n, op, v in ops:
            body += cstr(n) + struct.pack(">b", op) + cstr(v) + b"\x00"
        body += b"\x00" + struct.pack(">b", validate) + b"\x00"
    else:
        body = struct.pack(">i", 1) + b"\x02" + kstr(topic) + struct.pack(">i", len(ops))
        for n, op, v in ops:
            body += kstr(n) + struct.pack(">b", op) + (struct.pack(">h", -1) if v is None else kstr(v))
        body += struct.pack(">b", validate)
    s.sendall(frame(44, version, 9, body, flex=flex))
    r = recv_frame(s)
    off = 4 + (1 if flex else 0) + 4         # correlation id, header tags, throttle
    if flex:
        _, off = read_uvarint(r, off)
        (err,) = struct.unpack(">h", r[off:off + 2])
        n, off = read_uvarint(r, off + 2)
        msg = r[off:off + n - 1].decode() if n else None
    else:
        off += 4
        (err, n) = struct.unpack(">hh", r[off:off + 4])
        msg = r[off + 4:off + 4 + n].decode() if n >= 0 else None
    return err, msg


def scram_credential(principal, user, password, salt=None, iterations=4096):
    """A line of the credentials file (kafka/sasl.c): Kafka's SCRAM-SHA-256 form."""
    import base64, hashlib, hmac, os
    salt = salt or os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    server = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b = lambda x: base64.b64encode(x).decode()
    return "%s %s SCRAM-SHA-256=salt=%s,stored_key=%s,server_key=%s,iterations=%d" % (
        principal, user, b(salt), b(stored), b(server), iterations)


def join_group(s, group, member, protos, instance=None, corr=11):
    """JoinGroup v5 with protos [(name, metadata bytes)]: (error, member id)."""
    body = (kstr(group) + struct.pack(">ii", 10000, 30000) + kstr(member) +
            (struct.pack(">h", -1) if instance is None else kstr(instance)) + kstr("consumer") +
            struct.pack(">i", len(protos)))
    for name, meta in protos:
        body += kstr(name) + struct.pack(">i", len(meta)) + meta
    s.sendall(frame(11, 5, corr, body))
    r = recv_frame(s)
    (err,) = struct.unpack(">h", r[8:10])
    off = 14                                # correlation, throttle, error, generation
    for _ in range(2):                      # protocol, leader
        (n,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + n
    (n,) = struct.unpack(">h", r[off:off + 2])
    return err, r[off + 2:off + 2 + n].decode()


def sasl_handshake(s, mech):
    s.sendall(frame(17, 1, 1, kstr(mech)))
    r = recv_frame(s)
    assert struct.unpack(">h", r[4:6])[0] == 0, r


def sasl_auth(s, token, corr=2):
    """SaslAuthenticate v1: (error, message, token); None if the connection closed."""
    s.sendall(frame(36, 1, corr, struct.pack(">i", len(token)) + token))
    r = recv_frame(s)
    if r is None:
        return None
    err, ml = struct.unpack(">hh", r[4:8])
    msg = r[8:8 + ml].decode() if ml >= 0 else None
    off = 8 + max(ml, 0)
    (tl,) = struct.unpack(">i", r[off:off + 4])
    return err, msg, r[off + 4:off + 4 + tl]


def scram_login(s, user, password):
    """A SCRAM-SHA-256 exchange: (error of client-first, server-first, error and
    message of client-final)."""
    import base64, hashlib, hmac
    sasl_handshake(s, "SCRAM-SHA-256")
    bare = "n=%s,r=fixed-client-nonce" % user
    err, _, first = sasl_auth(s, ("n,," + bare).encode())
    if err:
        return err, "", None, None
    attrs = dict(a.split("=", 1) for a in first.decode().split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    ck = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    without = "c=biws,r=" + attrs["r"]
    auth = ",".join([bare, first.decode(), without]).encode()
    sig = hmac.new(hashlib.sha256(ck).digest(), auth, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(ck, sig))).decode()
    ans = sasl_auth(s, (without + ",p=" + proof).encode(), corr=3)
    return err, first.decode(), ans[0], ans[1]


def main():
    port = int(sys.argv[1])
    cmd = sys.argv[2]
    args = sys.argv[3:]
    if cmd == "proxy":                  # PORT_FILE LOG_FILE: see proxy()
        proxy(args[0], args[1])
        return
    if cmd == "scram-cred":             # PRINCIPAL USER PASSWORD (PORT unused): a line
        print(scram_credential(*args))
        return
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
    elif cmd == "tombstone":            # TOPIC KEY: Produce v7 of KEY's tombstone: "error offset"
        s.sendall(frame(0, 7, 5, produce_body(args[0], 0, batch(args[1].encode(), None), 1)))
        print(*produce_answer(recv_frame(s)))
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
    elif cmd == "hogs":                 # N SIZE TOPIC VALUE_BYTES: see below
        # N connections that each announce a SIZE frame and send all of it but its
        # last byte, never reading, then one whole Produce of a VALUE_BYTES record
        # to TOPIC; each sends what the sockets take until none takes more for 2 s
        # (the daemon stopped reading), then prints the bytes the kernel took and
        # "stalled". Once stdin closes, the N go and the Produce's answer is
        # printed ("error base_offset") when it comes.
        n, size, topic, vbytes = int(args[0]), int(args[1]), args[2], int(args[3])

        def push(pending):
            """Sends until no socket takes more for 2 s; the bytes sent."""
            sent = 0
            while True:
                ready = [c for c in pending if len(pending[c])]
                if not ready:
                    return sent
                _, w, _ = select.select([], ready, [], 2)
                if not w:
                    return sent
                for c in w:
                    try:
                        k = c.send(pending[c][:1 << 20])
                    except BlockingIOError:
                        continue
                    pending[c] = pending[c][k:]
                    sent += k

        pending = {}
        for _ in range(n):
            c = conn(port)
            c.setblocking(False)
            pending[c] = memoryview(struct.pack(">i", size) + b"\x00" * (size - 1))
        sent = push(pending)
        real = conn(port)               # after the others took the pool
        real.setblocking(False)
        big = {real: memoryview(frame(0, 7, 9, produce_body(topic, 0,
                                                            batch(b"big", b"v" * vbytes), -1)))}
        sent += push(big)
        print(sent, "stalled", flush=True)
        sys.stdin.read()
        rest = big[real]
        for c in pending:               # reset: their unsent bytes go with them
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
        real.setblocking(True)
        real.settimeout(60)
        real.sendall(rest)
        print(*produce_answer(recv_frame(real)), flush=True)
    elif cmd == "initpid":              # [TXN]: error, producer id, epoch
        print(*init_pid(s, args[0] if args else None))
    elif cmd == "idem":                 # TOPIC EPOCH SEQS [PID]: see below
        # One batch per sequence of the comma list SEQS (record key k<seq>), of
        # producer PID (or a new one from InitProducerId) at EPOCH, all written at
        # once on this connection; prints "error:base offset" of each, in request
        # order, then the producer id.
        pid = int(args[3]) if len(args) > 3 else init_pid(s)[1]
        epoch = int(args[1])
        seqs = [int(x) for x in args[2].split(",")]
        frames = []
        for i, q in enumerate(seqs):
            b = idem_batch(pid, epoch, q, b"k%d" % q, b"v%d" % q)
            frames.append(frame(0, 7, 100 + i, produce_body(args[0], 0, b, -1)))
        s.sendall(b"".join(frames))
        out = []
        for i in range(len(seqs)):
            r = recv_frame(s)
            assert struct.unpack(">i", r[:4])[0] == 100 + i
            out.append("%d:%d" % produce_answer(r))
        print(" ".join(out), pid)
    elif cmd == "describe-flex":        # TOPIC: DescribeConfigs v4, every field read
        s.sendall(frame(32, 4, 5, uvarint(2) + b"\x02" + cstr(args[0]) + b"\x00\x00"
                        + b"\x01\x01\x00", flex=True))
        r = recv_frame(s)
        off = 4 + 1 + 4
        def cs(off):
            n, off = read_uvarint(r, off)
            return (r[off:off + n - 1].decode() if n else None), off + max(n - 1, 0)
        n, off = read_uvarint(r, off)
        out = []
        for _ in range(n - 1):
            (err,) = struct.unpack(">h", r[off:off + 2])
            _, off = cs(off + 2)
            name, off = cs(off + 1)
            nc, off = read_uvarint(r, off)
            for _ in range(nc - 1):
                cname, off = cs(off)
                val, off = cs(off)
                ro, src, sens = r[off], r[off + 1], r[off + 2]
                ns, off = read_uvarint(r, off + 3)
                for _ in range(ns - 1):
                    _, off = cs(off)
                    _, off = cs(off)
                    off += 2                # source, tags
                ctype = r[off]
                _, off = cs(off + 1)
                off += 1                    # tags
                out.append("%s=%s:%d:%d" % (cname, val, src, ctype))
            off += 1
        assert off + 1 == len(r), (off, len(r))
        print(" ".join(out))
    elif cmd == "sasl-first":           # API_KEY: a request before authenticating
        # ApiVersions is answered; then the request of API_KEY closes the connection
        s.sendall(frame(18, 0, 1, b""))
        assert recv_frame(s) is not None
        s.sendall(frame(int(args[0]), 0, 2, struct.pack(">i", 0)))
        print("closed" if closed(s) else "answered")
    elif cmd == "sasl-raw-bad":         # a v0 handshake then a bad PLAIN token: closed
        s.sendall(frame(17, 0, 1, kstr("PLAIN")))
        r = recv_frame(s)
        assert struct.unpack(">h", r[4:6])[0] == 0, r
        tok = b"\x00" + args[0].encode() + b"\x00" + args[1].encode()
        s.sendall(struct.pack(">i", len(tok)) + tok)
        print("closed" if closed(s) else "answered")
    elif cmd == "sasl-handshake":       # VERSION MECHANISM: error and mechanisms offered
        s.sendall(frame(17, int(args[0]), 1, kstr(args[1])))
        r = recv_frame(s)
        (err, n) = struct.unpack(">hi", r[4:10])
        off, mechs = 10, []
        for _ in range(n):
            (ln,) = struct.unpack(">h", r[off:off + 2])
            mechs.append(r[off + 2:off + 2 + ln].decode())
            off += 2 + ln
        print(err, ",".join(mechs))
    elif cmd == "alter-many":           # RESOURCES CONFIGS: an AlterConfigs v0 naming RESOURCES
        n, m = int(args[0]), int(args[1])   # topics of CONFIGS entries each; "closed" or
        body = struct.pack(">i", n)         # the first resource's error
        for i in range(n):
            body += b"\x02" + kstr("t%d" % i) + struct.pack(">i", m)
            body += (kstr("retention.ms") + kstr("1")) * m
        s.sendall(frame(33, 0, 9, body + b"\x00"))
        r = recv_frame(s)
        print("closed" if r is None else struct.unpack(">h", r[12:14])[0])
    elif cmd == "incr-alter":           # VERSION TOPIC VALIDATE NAME:OP[:VALUE]...: error
        ops = []
        for x in args[3:]:
            parts = x.split(":", 2)
            ops.append((parts[0], int(parts[1]), parts[2] if len(parts) > 2 else None))
        print(incr_alter(s, int(args[0]), args[1], ops, int(args[2]))[0])
    elif cmd == "join-caps":            # GROUP N: N JoinGroups without a member id, then
        # joins of the first id with one protocol too many, one byte too much metadata,
        # a 250-byte instance id; prints every error code
        out, ids = [], []
        for _ in range(int(args[1])):
            err, mid = join_group(s, args[0], "", [("range", b"m")])
            out.append(err)
            ids.append(mid)
        out.append(join_group(s, args[0], ids[0], [("p%d" % i, b"") for i in range(65)])[0])
        out.append(join_group(s, args[0], ids[0], [("range", b"x" * ((1 << 20) + 1))])[0])
        out.append(join_group(s, args[0], ids[0], [("range", b"m")], instance="i" * 250)[0])
        print(*out)
    elif cmd == "scram-first":          # USER: the server-first's salt and iterations
        sasl_handshake(s, "SCRAM-SHA-256")
        err, _, first = sasl_auth(s, ("n,,n=%s,r=fixed-client-nonce" % args[0]).encode())
        attrs = dict(a.split("=", 1) for a in first.decode().split(","))
        print(err, "s=" + attrs["s"], "i=" + attrs["i"])
    elif cmd == "scram-login":          # USER PASSWORD: "first-error final-error message"
        first_err, _, err, msg = scram_login(s, args[0], args[1])
        print(first_err, err, msg)
    elif cmd == "plain-login":          # USER PASSWORD: "error message"
        sasl_handshake(s, "PLAIN")
        err, msg, _ = sasl_auth(s, b"\0" + args[0].encode() + b"\0" + args[1].encode())
        print(err, msg)
    elif cmd == "auth-delay":           # USER PASSWORD: a PLAIN failure on one connection
        # while a second connection's ApiVersions is answered; prints whether the
        # first had its answer when the second did, then the first's error
        sasl_handshake(s, "PLAIN")
        tok = b"\0" + args[0].encode() + b"\0" + args[1].encode()
        s.sendall(frame(36, 1, 2, struct.pack(">i", len(tok)) + tok))
        other = conn(port)
        other.sendall(frame(18, 0, 7, b""))
        assert struct.unpack(">ih", recv_frame(other)[:6]) == (7, 0)
        ready, _, _ = select.select([s], [], [], 0)
        print("other answered;", "first answered" if ready else "first waits", end="; ")
        r = recv_frame(s)
        print("first", struct.unpack(">h", r[4:6])[0])
    elif cmd == "delete-records":       # TOPIC PART OFFSET [VERSION]: "error low_watermark"
        v = int(args[3]) if len(args) > 3 else 1
        if v >= 2:
            body = (uvarint(2) + cstr(args[0]) + uvarint(2) +
                    struct.pack(">iq", int(args[1]), int(args[2])) + b"\x00\x00" +
                    struct.pack(">i", 5000) + b"\x00")
        else:
            body = (struct.pack(">i", 1) + kstr(args[0]) + struct.pack(">i", 1) +
                    struct.pack(">iq", int(args[1]), int(args[2])) + struct.pack(">i", 5000))
        s.sendall(frame(21, v, 4, body, flex=v >= 2))
        r = recv_frame(s)
        if v >= 2:
            off = 4 + 1 + 4
            _, off = read_uvarint(r, off)
            n, off = read_uvarint(r, off)
            off += n - 1
            _, off = read_uvarint(r, off)
        else:
            off = 4 + 4 + 4
            (n,) = struct.unpack(">h", r[off:off + 2])
            off += 2 + n + 4
        part, low, err = struct.unpack(">iqh", r[off:off + 14])
        print(err, low)
    elif cmd == "earliest":             # TOPIC PART: ListOffsets v1 of -2: "error offset"
        body = (struct.pack(">i", -1) + struct.pack(">i", 1) + kstr(args[0]) +
                struct.pack(">i", 1) + struct.pack(">iq", int(args[1]), -2))
        s.sendall(frame(2, 1, 6, body))
        r = recv_frame(s)
        off = 4 + 4
        (n,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + n + 4
        part, err, ts, o = struct.unpack(">ihqq", r[off:off + 22])
        print(err, o)
    elif cmd == "fetch-at":             # TOPIC PART OFFSET: Fetch v4's error, log start,
        body = (struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0) + struct.pack(">i", 1) +  # and
                kstr(args[0]) + struct.pack(">i", 1) +                      # the offsets
                struct.pack(">iqi", int(args[1]), int(args[2]), 1 << 20))   # of the records
        s.sendall(frame(1, 4, 8, body))
        r = recv_frame(s)
        off = 4 + 4 + 4
        (n,) = struct.unpack(">h", r[off:off + 2])
        off += 2 + n + 4
        part, err, hw, lso = struct.unpack(">ihqq", r[off:off + 22])
        off += 22
        (na,) = struct.unpack(">i", r[off:off + 4])
        off += 4 + max(na, 0) * 16
        (rl,) = struct.unpack(">i", r[off:off + 4])
        recs = r[off + 4:off + 4 + max(rl, 0)]
        offs = []
        from kafka.record import MemoryRecords
        mr = MemoryRecords(recs)
        while mr.has_next():
            b = mr.next_batch()
            offs += [str(x.offset) for x in b if x.offset >= int(args[2])]
        print(err, ",".join(offs))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
