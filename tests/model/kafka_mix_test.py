#!/usr/bin/python3
"""kafka_mix_test.py - Kafka clients and shell writers on the same topic at once, and
what the log holds afterwards counted against what each of them was told.

Writers, each a process of its own with a seeded random sequence of operations on
one two-partition topic and a small shared set of keys (so that they overwrite each
other's keys):
  * kpy:   kafka-python, not idempotent (acks=all, no retries): records and
           tombstones, one at a time or several per flush; each acknowledgement
           names the record's offset;
  * kcat:  kcat (librdkafka) with enable.idempotence=true: a few records or a
           tombstone per run; acknowledged when kcat exits 0;
  * wire:  an idempotent producer in raw frames (InitProducerId, Produce v7): each
           batch sometimes sent again, as a client does after a lost answer (must
           get the first offset back and append nothing), sometimes one past a gap
           (must be refused with error 45, appending nothing);
  * shell: printf > key, rm key, and .put transactions, some of which end in a
           malformed line (the close fails; the transaction aborts, or has
           appended nothing when the line came in the same write as the others).
Every value is unique, so a record in the log names the operation that wrote it.
The seed fixes each writer's operations; how they interleave is the scheduler's, so
a failure prints its seed and keeps the directory (data, daemon log, each writer's
operations and what it was told in writer-N.json).

Checks once every writer is done (README "Kafka clients", "Idempotent producers",
"Transactions"), and again after a remount:
  * every acknowledged record is in the log exactly once (a Fetch of everything,
    read_uncommitted), at the offset its acknowledgement named; nothing is in the
    log that nobody wrote; an operation that failed wrote nothing (a refused .put's
    records only under its ABORT);
  * read_committed (kcat) gives exactly the records outside aborted transactions;
  * the log end and the .history listing count every record and marker: offsets
    0..log_end-1, no gap (no cleaner runs);
  * each writer's records of one partition are in the log in the order it wrote
    them;
  * the keys' files and the listing are the newest committed record of each key
    in log order (absent when it is a tombstone).

Usage: kafka_mix_test.py [--seed N] [--ops N] [--topicfs PATH] [--keep]
BUILD_DIR or TOPICFS name the daemon, as for model_test.py. Last line:
"kafka-mix: N passed, M failed".
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from model_test import Fail, Mount, enc  # noqa: E402
import kafka_wire as kw  # noqa: E402

TOPIC = "mix"
NPART = 2
KEYS = ["k%d" % i for i in range(6)]
WRITERS = ("kpy", "kcat", "wire", "shell", "shell")
X = "user.topicfs."


def xget(path, name):
    return os.getxattr(path, X + name).decode()


class Writer:
    """One writer's operations and what it was told: self.ops, one dict each with
    kind, part, records [(key, value or None)], status ack / fail / maybe, and the
    offsets an acknowledgement named (kpy, wire)."""

    def __init__(self, wid, kind, seed, nops, mnt, broker):
        self.wid, self.kind, self.nops = wid, kind, nops
        self.rnd = random.Random("%d/%d" % (seed, wid))
        self.mnt, self.broker = mnt, broker
        self.n = 0
        self.ops = []

    def value(self):
        self.n += 1
        return "w%d-%d" % (self.wid, self.n)

    def records(self, most, tombstones=True):
        out = []
        for _ in range(self.rnd.randint(1, most)):
            k = self.rnd.choice(KEYS)
            out.append((k, None if tombstones and self.rnd.random() < 0.15 else self.value()))
        return out

    def op(self, part, records, status, offsets=None, kind=None, **extra):
        d = dict(kind=kind or self.kind, wid=self.wid, part=part, records=records,
                 status=status, offsets=offsets, **extra)
        self.ops.append(d)

    # -- kafka-python, not idempotent ------------------------------------------------
    def run_kpy(self):
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.broker, acks="all", retries=0,
                          max_in_flight_requests_per_connection=1, linger_ms=5)
        for _ in range(self.nops):
            part = self.rnd.randrange(NPART)
            recs = self.records(4)
            futs = [p.send(TOPIC, key=k.encode(), value=None if v is None else v.encode(),
                           partition=part) for k, v in recs]
            p.flush()
            offs, status = [], "ack"
            for f in futs:
                try:
                    offs.append(f.get(timeout=30).offset)
                except Exception as e:           # noqa: BLE001 - any failure: maybe written
                    offs.append(None)
                    status = "maybe"
                    print("# kpy: %r" % e)
            self.op(part, recs, status, offs)
        p.close()

    # -- kcat, idempotent --------------------------------------------------------------
    def run_kcat(self):
        for _ in range(self.nops):
            part = self.rnd.randrange(NPART)
            recs = self.records(3, tombstones=False)
            if self.rnd.random() < 0.2:
                recs = [(self.rnd.choice(KEYS), None)]
            data = "".join("%s:%s\n" % (k, v or "") for k, v in recs)
            r = subprocess.run(["kcat", "-b", self.broker, "-P", "-t", TOPIC, "-p", str(part),
                                "-K:", "-Z", "-X", "enable.idempotence=true"],
                               input=data.encode(), capture_output=True, timeout=60)
            err = r.stderr.decode(errors="replace")
            ok = r.returncode == 0 and "fail" not in err.lower() and "error" not in err.lower()
            if not ok:
                print("# kcat: exit %d: %s" % (r.returncode, err.strip()))
            self.op(part, recs, "ack" if ok else "maybe")

    # -- raw frames, idempotent, with retries and gaps ---------------------------------
    def run_wire(self):
        port = int(self.broker.rsplit(":", 1)[1])
        s = kw.conn(port)
        err, pid, epoch = kw.init_pid(s)
        if err != 0:
            raise Fail("InitProducerId: error %d" % err)
        seq = [0] * NPART
        corr = 1000
        for _ in range(self.nops):
            part = self.rnd.randrange(NPART)
            k = self.rnd.choice(KEYS)
            v = self.value()
            b = kw.idem_batch(pid, epoch, seq[part], k.encode(), v.encode())
            sends = 2 if self.rnd.random() < 0.4 else 1      # a retry: the same bytes again
            answers = []
            for _ in range(sends):
                corr += 1
                s.sendall(kw.frame(0, 7, corr, kw.produce_body(TOPIC, part, b, -1)))
                answers.append(kw.produce_answer(kw.recv_frame(s)))
            if any(a[0] != 0 for a in answers) or len({a[1] for a in answers}) != 1:
                raise Fail("wire: producer %d sequence %d on %s/%d, sent %d times: answers %s "
                           "(want error 0 and one offset)" % (pid, seq[part], TOPIC, part, sends,
                                                              answers))
            self.op(part, [(k, v)], "ack", [answers[0][1]], retries=sends - 1)
            seq[part] += 1
            if self.rnd.random() < 0.15:
                gap = self.value()
                corr += 1
                bad = kw.idem_batch(pid, epoch, seq[part] + 1, k.encode(), gap.encode())
                s.sendall(kw.frame(0, 7, corr, kw.produce_body(TOPIC, part, bad, -1)))
                e, _ = kw.produce_answer(kw.recv_frame(s))
                if e != 45:
                    raise Fail("wire: a sequence past a gap got error %d, not 45" % e)
                self.op(part, [(k, gap)], "fail", kind="wire-gap")
        s.close()

    # -- the shell -----------------------------------------------------------------------
    def run_shell(self):
        for _ in range(self.nops):
            part = self.rnd.randrange(NPART)
            pdir = os.path.join(self.mnt, TOPIC, str(part))
            x = self.rnd.random()
            if x < 0.45:
                k, v = self.rnd.choice(KEYS), self.value()
                r = subprocess.run(["sh", "-c", 'printf %s "$1" > "$2"', "sh", v,
                                    os.path.join(pdir, enc(k.encode()))], capture_output=True)
                self.op(part, [(k, v)], "ack" if r.returncode == 0 else "maybe", kind="echo")
            elif x < 0.65:
                k = self.rnd.choice(KEYS)
                r = subprocess.run(["rm", os.path.join(pdir, enc(k.encode()))],
                                   capture_output=True)
                err = r.stderr.decode()
                if r.returncode == 0:
                    self.op(part, [(k, None)], "ack", kind="rm")
                elif "No such file" in err:
                    self.op(part, [(k, None)], "fail", kind="rm")
                else:
                    self.op(part, [(k, None)], "maybe", kind="rm")
            else:
                recs = self.records(4, tombstones=False)
                y = self.rnd.random()
                text = "".join("%s\t%s\n" % r for r in recs)
                # /usr/bin/printf writes all in one write(2), bash's builtin printf
                # a write(2) a line (README "A tour"). A malformed line in a write of
                # its own after the good ones: they are appended, then aborted at the
                # close; in the same write: that write appends nothing, and neither
                # does the close (no record, no marker). (Two processes writing one
                # after the other are two closes: two transactions.)
                bad = "no tab on this line\n"
                if y < 0.2:
                    sh, texts, how = ('printf %s "$1" > "$2"', [text + bad], "aborted")
                elif y < 0.3:
                    sh, texts, how = ('/usr/bin/printf %s "$1" > "$2"', [text + bad], "refused")
                else:
                    sh, texts, how = ('/usr/bin/printf %s "$1" > "$2"', [text], "committed")
                r = subprocess.run(["bash", "-c", sh, "sh"] + texts + [os.path.join(pdir, ".put")],
                                   capture_output=True)
                if how != "committed" and r.returncode == 0:
                    raise Fail("a .put with a malformed line succeeded")
                if how == "committed" and r.returncode != 0:
                    raise Fail(".put failed: %s" % r.stderr.decode().strip())
                self.op(part, recs, "ack" if how == "committed" else "fail", kind="put",
                        aborted=how == "aborted", marker=how != "refused")

    def run(self):
        getattr(self, "run_" + self.kind)()


def writer_main(wid, kind, seed, nops, mnt, broker, out):
    w = Writer(wid, kind, seed, nops, mnt, broker)
    res = {"ops": w.ops, "error": None}
    try:
        w.run()
    except Exception as e:                           # noqa: BLE001 - reported by the parent
        res["error"] = "%s: %s" % (type(e).__name__, e)
    with open(out, "w") as f:
        json.dump(res, f)


# ------------------------------------------------------------------------------------
# What the log holds.

def fetch_all(broker, part, committed):
    """Every data record of partition part by kcat: [(offset, key, value or None)]."""
    iso = "read_committed" if committed else "read_uncommitted"
    r = subprocess.run(["kcat", "-b", broker, "-C", "-t", TOPIC, "-p", str(part),
                        "-o", "beginning", "-e", "-q", "-X", "isolation.level=" + iso,
                        "-f", "%o|%k|%S|%s\\n"], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise Fail("kcat -C %s/%d: exit %d: %s" % (TOPIC, part, r.returncode,
                                                    r.stderr.decode().strip()))
    out = []
    for ln in r.stdout.decode().splitlines():
        o, k, size, v = ln.split("|", 3)
        out.append((int(o), k, None if size == "-1" else v))
    return out


def check(ops, mnt, broker, phase):
    by_value = {}              # value -> (op, index of the record in the op)
    for op in ops:
        for i, (k, v) in enumerate(op["records"]):
            if v is not None:
                by_value[v] = (op, i)
    # An rm of a key while another writer's printf > key is open detaches that
    # handle: its write reaches no record, as writes to any unlinked file reach no
    # name (README "Decisions where the design was silent"), though its close
    # succeeds. Such a printf may be missing, no other.
    removers = {}
    for op in ops:
        if op["kind"] == "rm" and op["status"] == "ack":
            removers.setdefault((op["part"], op["records"][0][0]), set()).add(op["wid"])

    def may_be_unlinked(op, k):
        return op["kind"] == "echo" and bool(removers.get((op["part"], k), set()) - {op["wid"]})

    live_total = 0
    for part in range(NPART):
        pdir = os.path.join(mnt, TOPIC, str(part))
        end = int(xget(pdir, "log_end_offset"))
        hist = sorted(int(n) for n in os.listdir(os.path.join(pdir, ".history")))
        if hist != list(range(end)):
            raise Fail("%s: %s/%d: .history lists %d records, not the offsets 0..%d"
                       % (phase, TOPIC, part, len(hist), end - 1))
        allrecs = fetch_all(broker, part, False)
        committed = fetch_all(broker, part, True)
        pops = [op for op in ops if op["part"] == part]
        markers = sum(1 for op in pops if op.get("marker"))
        if len(allrecs) + markers != end:
            raise Fail("%s: %s/%d: log end %d, but %d records and %d markers"
                       % (phase, TOPIC, part, end, len(allrecs), markers))
        # every record in the log: written by somebody, once
        seen = {}
        tombs = {}
        for off, k, v in allrecs:
            if v is None:
                tombs.setdefault(k, []).append(off)
                continue
            if v in seen:
                raise Fail("%s: %s/%d: value %s at offsets %d and %d" % (phase, TOPIC, part, v,
                                                                       seen[v], off))
            seen[v] = off
            if v not in by_value:
                raise Fail("%s: %s/%d: offset %d holds %s=%s, which nobody wrote"
                           % (phase, TOPIC, part, off, k, v))
            op, i = by_value[v]
            if op["part"] != part or op["records"][i][0] != k:
                raise Fail("%s: %s/%d: offset %d holds %s=%s, written as %s/%d %s"
                           % (phase, TOPIC, part, off, k, v, TOPIC, op["part"], op["records"][i][0]))
            if op["status"] == "fail" and not op.get("aborted"):
                raise Fail("%s: %s/%d: offset %d holds %s=%s of a refused %s"
                           % (phase, TOPIC, part, off, k, v, op["kind"]))
        # every acknowledged record: there, where its acknowledgement said
        want_tombs = {}
        detached = 0
        for op in pops:
            for i, (k, v) in enumerate(op["records"]):
                if v is None:
                    if op["status"] == "ack":
                        want_tombs.setdefault(k, [0, 0])[0] += 1
                    if op["status"] in ("ack", "maybe"):
                        want_tombs.setdefault(k, [0, 0])[1] += 1
                    continue
                if op["status"] == "ack" and v not in seen and may_be_unlinked(op, k):
                    detached += 1
                elif op["status"] == "ack" and v not in seen:
                    raise Fail("%s: %s/%d: %s=%s, acknowledged (%s), is not in the log"
                               % (phase, TOPIC, part, k, v, op["kind"]))
                if op.get("aborted") and v not in seen:
                    raise Fail("%s: %s/%d: %s=%s of an aborted .put is not under its marker"
                               % (phase, TOPIC, part, k, v))
                if op["offsets"] and op["offsets"][i] is not None and v in seen:
                    if seen[v] != op["offsets"][i]:
                        raise Fail("%s: %s/%d: %s=%s acknowledged at offset %d, in the log at %d"
                                   % (phase, TOPIC, part, k, v, op["offsets"][i], seen[v]))
        for k in set(want_tombs) | set(tombs):
            lo, hi = want_tombs.get(k, [0, 0])
            n = len(tombs.get(k, []))
            if not lo <= n <= hi:
                raise Fail("%s: %s/%d: %d tombstones of %s in the log, %d..%d written"
                           % (phase, TOPIC, part, n, k, lo, hi))
        for op in pops:
            if op["status"] == "ack" and op["offsets"]:
                for i, (k, v) in enumerate(op["records"]):
                    if v is None and op["offsets"][i] not in tombs.get(k, []):
                        raise Fail("%s: %s/%d: the tombstone of %s acknowledged at %d is not there"
                                   % (phase, TOPIC, part, k, op["offsets"][i]))
        # each writer's records in the order it wrote them
        last = {}
        for op in pops:
            for k, v in op["records"]:
                if v is None or v not in seen:
                    continue
                w = v.split("-")[0]
                if seen[v] < last.get(w, (-1, None))[0]:
                    raise Fail("%s: %s/%d: %s at offset %d, after %s at %d"
                               % (phase, TOPIC, part, v, seen[v], last[w][1], last[w][0]))
                last[w] = (seen[v], v)
        # read_committed: everything but the aborted transactions
        aborted = {v for op in pops if op.get("aborted") for _, v in op["records"]}
        want = [r for r in allrecs if r[2] is None or r[2] not in aborted]
        if committed != want:
            extra = [r for r in committed if r not in want][:5]
            missing = [r for r in want if r not in committed][:5]
            raise Fail("%s: %s/%d: read_committed differs: extra %s, missing %s"
                       % (phase, TOPIC, part, extra, missing))
        # the keys: the newest committed record of each, in log order
        newest = {}
        for off, k, v in committed:
            newest[k] = v
        live = sorted(k for k, v in newest.items() if v is not None)
        listed = sorted(os.listdir(pdir))
        if listed != live:
            raise Fail("%s: %s/%d: ls shows %s, the log's live keys are %s"
                       % (phase, TOPIC, part, listed, live))
        for k in KEYS:
            path = os.path.join(pdir, k)
            try:
                with open(path, "rb") as f:
                    got = f.read().decode()
            except FileNotFoundError:
                got = None
            if got != newest.get(k):
                raise Fail("%s: %s/%d: %s reads %r, its newest record is %r"
                           % (phase, TOPIC, part, k, got, newest.get(k)))
        live_total += len(live)
        print("# %s: %s/%d: %d records, %d markers, %d tombstones, %d live keys, %d printf "
              "handles detached by an rm" % (phase, TOPIC, part, len(allrecs), markers,
                                             sum(len(t) for t in tombs.values()), len(live),
                                             detached))
    return live_total


def listener_port(logpath, count):
    """The port the count-th mount's listener took, from the daemon's log."""
    pat = re.compile(rb"kafka: listening on PLAINTEXT://127\.0\.0\.1:(\d+) ")
    with open(logpath, "rb") as f:
        log = f.read().split(b"--- mount %d\n" % count, 1)[-1]
    m = pat.search(log)
    return int(m.group(1)) if m else None


def start(m):
    m.start()
    for _ in range(600):
        port = listener_port(m.logpath, m.count)
        if port:
            return "127.0.0.1:%d" % port
        time.sleep(0.05)
    raise Fail("the listener did not say its port:\n%s" % m.log_tail())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--ops", type=int, default=60, help="operations per writer")
    ap.add_argument("--topicfs")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 30)
    if not args.topicfs:
        bd = os.environ.get("BUILD_DIR", os.path.join(REPO, "build"))
        args.topicfs = os.environ.get("TOPICFS", os.path.join(bd, "topicfs"))
    if not shutil.which("kcat"):
        print("# skip: kcat is not installed (scripts/install-deps.sh --tests)")
        print("kafka-mix: 0 passed, 0 failed")
        return 0
    d = tempfile.mkdtemp(prefix="kafka-mix.")
    m = Mount(args.topicfs, os.path.join(d, "data"), os.path.join(d, "mnt"),
              "listeners=PLAINTEXT://127.0.0.1:0,log.cleaner.threads=0",
              os.path.join(d, "topicfs.log"), 600)
    rc = 1
    print("# seed %d, %d writers x %d operations" % (args.seed, len(WRITERS), args.ops))
    try:
        broker = start(m)
        os.mkdir(os.path.join(m.mnt, TOPIC))
        os.mkdir(os.path.join(m.mnt, TOPIC, "1"))
        procs, outs = [], []
        for wid, kind in enumerate(WRITERS):
            out = os.path.join(d, "writer-%d.json" % wid)
            p = mp.Process(target=writer_main, args=(wid, kind, args.seed, args.ops, m.mnt,
                                                     broker, out))
            p.start()
            procs.append(p)
            outs.append(out)
        ops = []
        for wid, (p, out) in enumerate(zip(procs, outs)):
            p.join(300)
            if p.is_alive():
                p.kill()
                raise Fail("writer %d (%s) did not finish" % (wid, WRITERS[wid]))
            with open(out) as f:
                res = json.load(f)
            if res["error"]:
                raise Fail("writer %d (%s): %s" % (wid, WRITERS[wid], res["error"]))
            ops += res["ops"]
        acked = sum(len(op["records"]) for op in ops if op["status"] == "ack")
        retries = sum(op.get("retries", 0) for op in ops)
        print("# %d operations, %d records acknowledged, %d retries sent" % (len(ops), acked,
                                                                            retries))
        check(ops, m.mnt, broker, "after the writers")
        m.stop()
        broker = start(m)
        check(ops, m.mnt, broker, "after a remount")
        m.stop()
        rc = 0
        print("kafka-mix: 1 passed, 0 failed")
    except Fail as e:
        print("# FAIL (seed %d): %s" % (args.seed, e))
        print("# daemon log:\n%s" % m.log_tail())
        print("# rerun: %s --seed %d" % (sys.argv[0], args.seed))
        print("kafka-mix: 0 passed, 1 failed")
    finally:
        m.kill()
        if args.keep or rc:
            print("# kept %s" % d)
        else:
            shutil.rmtree(d, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
