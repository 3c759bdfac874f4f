#!/bin/bash
# test_concurrency.sh - many handles on one partition at once (docs/semantics.md §5): for
# T_CONC_SECS (30) seconds 8 writers, 8 readers and 2 listers (os.listdir and ls) share
# one partition. No reader may see a torn or uncommitted value (every value carries its
# own checksum), no listing may repeat a key or miss one that was live throughout, every
# successful commit is exactly one record, and afterwards (and after a remount) every
# key holds its last committed value. A narrower case (one O_TRUNC writer, two readers,
# ls -l) runs first, so that a failure there points at the mechanism.
. "$(dirname "$0")/lib.sh"
t_require_daemon

CONC='
import errno, json, os, random, subprocess, sys, threading, time, zlib
part, secs, state = sys.argv[1], float(sys.argv[2]), sys.argv[3]
NW, NR, KPW, NSTABLE = 8, 8, 4, 100
leo = lambda: int(os.getxattr(part, "user.topicfs.log_end_offset"))
errors, lock = [], threading.Lock()

def err(msg):
    with lock:
        if len(errors) < 30:
            errors.append(msg)

def make(w, seq, rnd):
    body = (b"%d:%d:" % (w, seq)) * rnd.randrange(1, 2500)
    return body + b"#%08x" % zlib.crc32(body)

def valid(v):
    body, sep, crc = v.rpartition(b"#")
    if not sep or crc != b"%08x" % zlib.crc32(body):
        return False
    i = body.find(b":", body.find(b":") + 1) + 1
    return i > 0 and body == body[:i] * (len(body) // i)

stable = {"stable-%03d" % i: make(99, i, random.Random(i)) for i in range(NSTABLE)}
own = [["w%d-k%d" % (w, j) for j in range(KPW)] for w in range(NW)]
allkeys = set(stable) | {k for ks in own for k in ks} | {"shared"}
# Keys never deleted: written once before the run, so that any empty or partial read of
# them is wrong. (A key being created may read as empty or ENOENT until its first
# commit; docs/semantics.md §4 leaves that window open, so deletable keys tolerate an empty read.)
persistent = {"shared"} | {ks[0] for ks in own}
last = {}                  # own key -> last committed value (None = deleted)
for k in sorted(persistent):
    v = make(98, 0, random.Random(k))
    with open(os.path.join(part, k), "wb") as f:
        f.write(v)
    if k != "shared":
        last[k] = v
for k, v in stable.items():
    with open(os.path.join(part, k), "wb") as f:
        f.write(v)
start_leo = leo()
stop = time.time() + secs
commits = [0] * NW
made = {}                  # (writer, seq) -> how it was written, for error reports
hist = {}                  # own key -> [(seq, length)] of its commits, in order
counts = {"reads": 0, "lists": 0, "ls": 0}

def writer(w):
    rnd = random.Random(1000 + w)
    seq = 0
    while time.time() < stop:
        seq += 1
        k = "shared" if rnd.random() < 0.1 else rnd.choice(own[w])
        p = os.path.join(part, k)
        try:
            if k not in persistent and rnd.random() < 0.12:
                try:
                    os.unlink(p)
                    commits[w] += 1
                    last[k] = None
                except FileNotFoundError:
                    if last.get(k) is not None:
                        err("unlink of live key %s: ENOENT" % k)
                continue
            v = make(w, seq, rnd)
            mode = rnd.randrange(3)
            made[(w, seq)] = (k, len(v), mode)
            if mode == 0:          # O_TRUNC, value in up to 3 writes
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                cuts = sorted(rnd.sample(range(1, len(v)), min(2, len(v) - 1)))
                made[(w, seq)] += (cuts,)
                for a, b in zip([0] + cuts, cuts + [len(v)]):
                    os.write(fd, v[a:b])
            elif mode == 1:        # patch the old value in place, then cut it
                fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                os.pwrite(fd, v, 0)
                os.ftruncate(fd, len(v))
            else:                  # write and fsync
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, v)
                os.fsync(fd)
            os.close(fd)
            commits[w] += 1
            hist.setdefault(k, []).append((seq, len(v)))
            if k != "shared":
                last[k] = v
        except OSError as e:
            err("writer %d on %s: %s" % (w, k, e))

def reader(r):
    rnd = random.Random(2000 + r)
    keys = sorted(allkeys)
    while time.time() < stop:
        k = rnd.choice(keys)
        try:
            with open(os.path.join(part, k), "rb") as f:
                v = f.read()
        except FileNotFoundError:
            if k in stable:
                err("stable key %s: ENOENT" % k)
            continue
        except OSError as e:
            err("reader on %s: %s" % (k, e))
            continue
        counts["reads"] += 1
        if v == b"" and k not in persistent and k not in stable:
            continue
        if k in stable and v != stable[k]:
            err("stable key %s changed: %d bytes" % (k, len(v)))
        elif not valid(v):
            err("torn or uncommitted value of %s: %d bytes, starts %r, ends %r; %s" %
                (k, len(v), v[:24], v[-12:], explain(k, v)))

def explain(k, v):
    # what a bad read was: whose value, how it was written, the last lengths of the key
    try:
        w, seq = (int(x) for x in v.split(b":", 2)[:2])
    except ValueError:
        return "not a value a writer made"
    return "value %d:%d written as (key, length, mode[, cuts]) %r; last commits of %s (seq, length): %r" % (
        w, seq, made.get((w, seq)), k, hist.get(k, [])[-6:])

def check_listing(names, how):
    if len(names) != len(set(names)):
        dup = sorted(n for n in set(names) if names.count(n) > 1)
        err("%s repeated keys: %s" % (how, dup[:5]))
    missing = set(stable) - set(names)
    if missing:
        err("%s missed %d stable keys, e.g. %s" % (how, len(missing), sorted(missing)[:3]))
    stray = set(names) - allkeys
    if stray:
        err("%s listed names nobody wrote: %s" % (how, sorted(stray)[:5]))

def lister():
    while time.time() < stop:
        check_listing(os.listdir(part), "listdir")
        counts["lists"] += 1

def ls():
    while time.time() < stop:
        out = subprocess.run(["ls", "-1", "-f", part], capture_output=True)
        if out.returncode != 0:
            err("ls exited %d: %r" % (out.returncode, out.stderr[:200]))
            continue
        names = [n.decode() for n in out.stdout.split(b"\n") if n and n not in (b".", b"..")]
        check_listing(names, "ls")
        counts["ls"] += 1

ts = [threading.Thread(target=writer, args=(w,)) for w in range(NW)]
ts += [threading.Thread(target=reader, args=(r,)) for r in range(NR)]
ts += [threading.Thread(target=lister), threading.Thread(target=ls)]
for t in ts:
    t.start()
for t in ts:
    t.join()

appended = leo() - start_leo
if appended != sum(commits):
    err("%d successful commits and unlinks but log_end_offset moved by %d" % (sum(commits), appended))
for k, v in last.items():
    try:
        with open(os.path.join(part, k), "rb") as f:
            got = f.read()
    except FileNotFoundError:
        got = None
    if got != v:
        err("final value of %s: expected %s, got %s" % (k, None if v is None else len(v), None if got is None else len(got)))
with open(state, "w") as f:
    json.dump({k: (None if v is None else v.hex()) for k, v in list(last.items()) + list(stable.items())}, f)
print("# %d commits, %d reads, %d listdirs, %d ls" % (sum(commits), counts["reads"], counts["lists"], counts["ls"]))
print("\n".join("ERROR " + e for e in errors) if errors else "clean")
'

RECHECK='
import json, os, sys
part, state = sys.argv[1], sys.argv[2]
want = {k: (None if v is None else bytes.fromhex(v)) for k, v in json.load(open(state)).items()}
bad = []
for k, v in want.items():
    try:
        got = open(os.path.join(part, k), "rb").read()
    except FileNotFoundError:
        got = None
    if got != v:
        bad.append(k)
live = sorted(k for k, v in want.items() if v is not None)
names = sorted(n for n in os.listdir(part) if n != "shared")
if names != live:
    bad.append("listing differs")
print("clean" if not bad else "wrong after remount: %s" % bad[:10])
'

c_writers_readers_listers() {
	t_mount
	mkdir "$MNT/c"
	local out
	out=$("$T_PY" -c "$CONC" "$MNT/c/0" "${T_CONC_SECS:-30}" "$T_CASE/state.json")
	printf '%s\n' "$out" | grep '^#' || true
	if [ "$(printf '%s\n' "$out" | grep -v '^#')" != clean ]; then
		printf '%s\n' "$out" | grep '^ERROR' | sed 's/^/# /'
		fail "errors during the concurrent run (above)"
	fi
	t_remount
	assert_eq clean "$("$T_PY" -c "$RECHECK" "$MNT/c/0" "$T_CASE/state.json")" "state after remount"
}

# The narrow form of the race above: one writer rewrites one key with O_TRUNC and two
# write(2)s, two readers read it whole, `ls -l` runs meanwhile (readdirplus/getattr).
FOCUS='
import os, subprocess, sys, threading, time, zlib
part, secs = sys.argv[1], float(sys.argv[2])
p = os.path.join(part, "k")
def make(seq):
    body = (b"%d:" % seq) * (100 + seq % 2000)
    return body + b"#%08x" % zlib.crc32(body)
def ok(v):
    body, sep, crc = v.rpartition(b"#")
    return bool(sep) and crc == b"%08x" % zlib.crc32(body)
with open(p, "wb") as f:
    f.write(make(0))
stop, bad, reads = time.time() + secs, [], [0]
def writer():
    seq = 0
    while time.time() < stop:
        seq += 1
        v = make(seq)
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, v[:len(v) // 2])
        os.write(fd, v[len(v) // 2:])
        os.close(fd)
def reader():
    while time.time() < stop:
        with open(p, "rb") as f:
            v = f.read()
        reads[0] += 1
        if not ok(v) and len(bad) < 5:
            bad.append("%d bytes %r...%r" % (len(v), v[:10], v[-10:]))
def lister():
    while time.time() < stop:
        subprocess.run(["ls", "-l", part], stdout=subprocess.DEVNULL)
ts = [threading.Thread(target=f) for f in (writer, reader, reader, lister)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("clean" if not bad else "%d reads, bad: %s" % (reads[0], "; ".join(bad)))
'

c_truncating_writer_readers_ls() {
	t_mount
	mkdir "$MNT/c"
	assert_eq clean "$("$T_PY" -c "$FOCUS" "$MNT/c/0" "${T_FOCUS_SECS:-8}")" "reads during O_TRUNC rewrites and ls -l"
}

# Values replaced without a writer handle (.put commits them) while readers read
# through the page cache and stat caches lengths: no read may end at another
# version's length (fs/node_key.c, attrs_off).
PUTS='
import os, sys, threading, time, zlib
part, secs = sys.argv[1], float(sys.argv[2])
keys = ["p%d" % i for i in range(4)]
def make(seq):
    body = (b"%d:" % seq) * (3 + (seq * 7919) % 3000)
    return body + b"#%08x" % zlib.crc32(body)
def ok(v):
    body, sep, crc = v.rpartition(b"#")
    return bool(sep) and crc == b"%08x" % zlib.crc32(body)
with open(os.path.join(part, ".put"), "wb") as f:
    f.write(b"".join(k.encode() + b"\t" + make(0) + b"\n" for k in keys))
stop, bad, reads = time.time() + secs, [], [0]
def putter():
    seq = 0
    while time.time() < stop:
        seq += 1
        with open(os.path.join(part, ".put"), "wb") as f:
            f.write(keys[seq % 4].encode() + b"\t" + make(seq) + b"\n")
def reader(r):
    while time.time() < stop:
        with open(os.path.join(part, keys[r % 4]), "rb") as f:
            v = f.read()
        reads[0] += 1
        if not ok(v) and len(bad) < 5:
            bad.append("%d bytes %r...%r" % (len(v), v[:10], v[-10:]))
def stater():
    while time.time() < stop:
        for k in keys:
            os.stat(os.path.join(part, k))
ts = [threading.Thread(target=putter), threading.Thread(target=stater)]
ts += [threading.Thread(target=reader, args=(r,)) for r in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("clean" if not bad else "%d reads, bad: %s" % (reads[0], "; ".join(bad)))
'

c_put_readers_stat() {
	t_mount
	mkdir "$MNT/c"
	assert_eq clean "$("$T_PY" -c "$PUTS" "$MNT/c/0" "${T_FOCUS_SECS:-8}")" "reads during .put replacements and stat"
}

t_test truncating_writer_readers_ls c_truncating_writer_readers_ls
t_test put_readers_stat c_put_readers_stat
t_test writers_readers_listers c_writers_readers_listers
t_done
