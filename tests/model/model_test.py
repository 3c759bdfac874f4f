#!/usr/bin/python3
"""model_test.py - random operations through a real topicfs mount, checked against a
reference model of the keyed state and of the record history.

What is checked (README "Writing" and "Reading" give the contract):
  * one record per commit: a commit is the close (or fsync) of a handle that wrote,
    or of a created or O_TRUNC-opened handle; unlink is one tombstone; rename inside
    a partition is the new key's record and the old key's tombstone, one batch;
    reading, listing and stat append nothing. Checked against log_end_offset and
    against the records listed in .history/, record by record;
  * O_TRUNC starts empty; writes at an offset patch the value of the open, the last
    committer wins; O_APPEND commits its bytes onto the newest value at its commit;
    a created or truncated handle that has not committed is never turned into a
    record by anyone else, and readers meanwhile see the previous value (empty for a
    new name);
  * readers see a value somebody committed, whole, and a read-only handle keeps the
    value of its open;
  * after a remount the state is the model's; history offsets are unique and
    ascending; after roll + clean the keyed state is unchanged and exactly the
    newest record of each key is left;
  * dot names that are not control entries are scratch files: never logged, gone
    after a remount; a rename onto a key commits one record.

How. Several worker processes run random operations at once, in phases. Each worker
owns some keys exclusively and models them exactly (value, open handles, records),
and checks every result as it goes. Shared keys are written by everybody: there only
what holds whatever the interleaving is checked (every value read was committed by
somebody; one record per commit; O_APPEND lines all present, once, whole). Between
phases every handle is closed and the coordinator checks the whole state: the log end,
the history record by record, every key's value, stat and attributes, the listing;
then, at random, rolls and cleans every partition, or remounts.

Replay. Every operation is written to a trace. A failure prints the seed, the failing
worker's last operations and those on the key involved, and a trace file; that trace
is then replayed alone in one process on a fresh topic (deterministic for the keys
the worker owns) and cut down by delta debugging to a minimal failing trace, which is
printed (--no-shrink skips this). `--replay FILE [--shrink]` runs a trace again.
A failure on a shared key needs the interleaving: rerun its seed.

Usage: model_test.py [--seed N] [--ops N] [--procs N] [--phases N] [--no-CLASS]...
  classes: append (O_APPEND, >>), dup (a descriptor's copy closed: dup + close, and the
  shell's redirects that truncate or create), shared (keys every worker writes),
  scratch (dot names), shell, remount, clean, rename.
BUILD_DIR or TOPICFS name the daemon (default: <repo>/build/topicfs), or --topicfs.
Last line: "model: N passed, M failed".
"""

import argparse
import errno
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NPART = 2
CLASSES = ("append", "dup", "shared", "scratch", "shell", "remount", "clean", "rename")
X = "user.topicfs."


class Fail(Exception):
    """A check failed: what was expected, what was seen (and the key, if one)."""

    def __init__(self, msg, key=None):
        super().__init__(msg)
        self.key = key


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def enc(key):
    """A key's file name (README "Keys as file names")."""
    if key == b"":
        return "%"
    out = bytearray()
    for i, c in enumerate(key):
        if c in (0x25, 0x2F, 0x7F) or c < 0x20 or (i == 0 and c == 0x2E):
            out += b"%%%02X" % c
        else:
            out.append(c)
    return os.fsdecode(bytes(out))


def show(v, n=60):
    if v is None:
        return "<none>"
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v)
        s = repr(v[:n])
        return s + ("...(%d bytes)" % len(v) if len(v) > n else "")
    return repr(v)


def read_all(fd):
    out = bytearray()
    while True:
        b = os.pread(fd, 1 << 16, len(out))
        if not b:
            return bytes(out)
        out += b


def cat(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def xget(path, name):
    return os.getxattr(path, X + name)


def call(fn, *args):
    """fn(*args), or the errno name of its OSError ("OK" for a function returning None)."""
    try:
        r = fn(*args)
    except OSError as e:
        return ename(e)
    return "OK" if r is None else r


def sh_redirect(path, data, append):
    """`printf %s DATA > PATH` (or >>) by a real shell: open, dup2 to 1, close, write."""
    r = subprocess.run(["sh", "-c", 'printf %s "$1" ' + (">>" if append else ">") + ' "$2"',
                        "sh", os.fsdecode(data), path], capture_output=True)
    return "OK" if r.returncode == 0 else r.stderr.decode().strip()


# ------------------------------------------------------------------------------------
# The mount.

class Mount:
    """topicfs -f -o auto_unmount,OPTS under timeout(1), as tests/integration/lib.sh
    mounts it; stop() requires a clean exit (status 0)."""

    def __init__(self, topicfs, data, mnt, opts, logpath, timeout):
        self.topicfs, self.data, self.mnt, self.opts = topicfs, data, mnt, opts
        self.logpath, self.timeout = logpath, timeout
        self.proc = None
        self.count = 0

    def start(self):
        os.makedirs(self.data, exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)
        self.count += 1
        log = open(self.logpath, "ab")
        log.write(b"--- mount %d\n" % self.count)
        log.flush()
        self.proc = subprocess.Popen(
            ["timeout", "--signal=TERM", "--kill-after=10", str(self.timeout),
             self.topicfs, "-f", "-o", "auto_unmount," + self.opts, self.data, self.mnt],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        for _ in range(600):
            if os.path.ismount(self.mnt):
                return
            if self.proc.poll() is not None:
                raise Fail("topicfs exited with %d before mounting; log:\n%s"
                           % (self.proc.returncode, self.log_tail()))
            time.sleep(0.05)
        raise Fail("%s did not become a mount point" % self.mnt)

    def stop(self):
        if self.proc is None:
            return
        for _ in range(100):
            r = subprocess.run(["umount", self.mnt], capture_output=True)
            if r.returncode == 0 or not os.path.ismount(self.mnt):
                break
            time.sleep(0.1)      # EBUSY: a worker's last close may still be in flight
        else:
            self.kill()
            raise Fail("cannot unmount %s: %s" % (self.mnt, r.stderr.decode().strip()))
        try:
            rc = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Fail("topicfs did not exit after the unmount")
        self.proc = None
        if rc != 0:
            raise Fail("topicfs exited with status %d; log:\n%s" % (rc, self.log_tail()))
        with open(self.logpath, "rb") as f:
            log = f.read()
        if b"Sanitizer" in log or b"runtime error:" in log:
            raise Fail("the daemon's log holds a sanitizer report:\n%s" % self.log_tail())

    def kill(self):
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def log_tail(self, n=40):
        """The end of the daemon's log, or from a sanitizer's report on."""
        try:
            with open(self.logpath, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return ""
        for i, ln in enumerate(lines):
            if "Sanitizer" in ln or "runtime error" in ln:
                return "\n".join("    " + ln for ln in lines[max(0, i - 3):i + 80])
        return "\n".join("    " + ln for ln in lines[-n:])


# ------------------------------------------------------------------------------------
# The model of one process's exclusive keys and handles.

CHECK_SIZES = True        # --no-size turns the stat/fstat size checks off


class Ino:
    """The file a name refers to while handles are open on it: a rename moves it, an
    unlink or a rename over it detaches it (its writers then commit nothing)."""

    def __init__(self, key):
        self.key = key            # (partition, name) or None once detached
        self.handles = set()
        self.read_since_commit = False   # a reader opened since the last commit

class Handle:
    def __init__(self, hid, fd, ino, kind, rdwr):
        self.hid, self.fd, self.ino, self.kind, self.rdwr = hid, fd, ino, kind, rdwr
        self.buf = bytearray()    # writer ('w'): its value; reader ('r'): the pinned value
        self.appended = bytearray()   # O_APPEND ('a'): bytes since its last commit
        self.pos = 0
        self.dirty = False        # written since its last commit
        self.pending = False      # created or truncated: owes a commit
        self.wseq = 0             # when it was last written (or created/truncated)
        self.size_lost = False    # another handle committed while this one was dirty


class Executor:
    """Runs operations on a mount and checks each result against the model.

    values[(p, name)]  committed value (bytes) or None: the keyed state
    inos[(p, name)]    the Ino of a name with open handles
    records            every record this executor caused, in order: (p, name, value|None, tag)
    commits[p]         records appended to partition p
    """

    def __init__(self, mnt, topic, proc, classes):
        self.mnt, self.topic, self.proc, self.classes = mnt, topic, proc, classes
        self.values = {}
        self.inos = {}
        self.handles = {}
        self.scratch = {}         # (p, dotname) -> content
        self.scratch_names = {(p, ".s%d-%d.tmp" % (proc, i)) for p in range(NPART)
                              for i in range(2)}
        self.records = []
        self.commits = [0] * NPART
        self.next_hid = 0
        self.seq = 0
        self.trace = []
        self.cleaned = set()
        # Shared keys (weak checks): what this process committed and read.
        self.sh_puts = {}         # (p, name) -> [values committed]
        self.sh_apps = {}         # (p, name) -> [chunks committed]
        self.sh_commits = {}      # (p, name) -> commits
        self.sh_reads = {}        # (p, name) -> [values read]

    def part(self, p):
        return os.path.join(self.mnt, self.topic, str(p))

    def path(self, k):
        return os.path.join(self.part(k[0]), k[1])

    # -- model helpers --------------------------------------------------------------
    def visible(self, k):
        ino = self.inos.get(k)
        return self.values.get(k) is not None or (ino is not None and bool(ino.handles))

    def writers(self, k):
        ino = self.inos.get(k)
        return [] if ino is None else [h for h in ino.handles if h.kind != "r"]

    def record(self, k, value, tag):
        self.records.append((k[0], k[1], value, tag))
        self.commits[k[0]] += 1
        self.values[k] = value

    def size_of(self, ino):
        if not CHECK_SIZES:
            return None
        """What stat/fstat report: the size of the writer written last among those
        with uncommitted writes (FUSE's getattr does not say which descriptor asks;
        see node_key.c), else the committed value's. A handle only created or
        truncated is no such writer (the daemon shows nobody its empty value before
        it commits), but the kernel itself sets the size to 0 at an O_TRUNC open and
        may answer from that: with one open and no written handle, either size may
        show. None: not predictable."""
        if ino.key is None:
            return None           # unlinked: one of its handles' sizes
        # While readers that use the page cache are open (and until their RELEASE,
        # which comes after close() returns), the kernel keeps the size of the value
        # their pages hold (node_key.c): after a reader, stat may show its length.
        if ino.read_since_commit:
            return None
        # With two writers open, another's commit updates the size the kernel
        # caches while this one's bytes are still uncommitted: either may show.
        if sum(1 for h in ino.handles if h.kind != "r") > 1:
            return None
        ws = [h for h in ino.handles if h.kind != "r" and h.dirty]
        if any(h.size_lost for h in ws):
            return None
        if ws:
            h = max(ws, key=lambda h: h.wseq)
            return None if h.kind == "a" else len(h.buf)
        if any(h.kind != "r" and h.pending for h in ino.handles):
            return None
        return len(self.values.get(ino.key) or b"")

    def touch(self, h):
        self.seq += 1
        h.wseq = self.seq

    def detach(self, k):
        ino = self.inos.pop(k, None)
        if ino is not None:
            ino.key = None

    def commit(self, h, tag):
        """h commits now (close, fsync, or an editor's dup close)."""
        if not (h.dirty or h.pending):
            return
        h.dirty = h.pending = False
        if h.ino.key is None:
            return                # its name is gone: nothing to commit to
        k = h.ino.key
        if h.kind == "a":
            v = (self.values.get(k) or b"") + bytes(h.appended)
            h.appended = bytearray()
        else:
            v = bytes(h.buf)
        self.record(k, v, tag)
        if not any(o.kind == "r" for o in h.ino.handles):
            h.ino.read_since_commit = False
        # The commit's attributes reach the kernel's cache: until they commit, the
        # size of other dirty writers no longer shows in stat.
        for o in h.ino.handles:
            if o is not h and o.kind != "r" and o.dirty:
                o.size_lost = True
        h.size_lost = False

    def drop(self, h):
        del self.handles[h.hid]
        if h.ino is not None:
            h.ino.handles.discard(h)
            if not h.ino.handles and h.ino.key is not None and self.inos.get(h.ino.key) is h.ino:
                del self.inos[h.ino.key]

    # -- operations -----------------------------------------------------------------
    def run(self, op):
        """Runs one operation (a dict), checks it; appends it to the trace."""
        op = dict(op)
        self.trace.append(op)
        tag = "%d.%d" % (self.proc, len(self.trace))
        getattr(self, "op_" + op["op"])(op, tag)

    def valid(self, op):
        """Would the generator make op in this state? (A shrunk trace may not.) The
        cases left out are those the contract leaves open: a created name that has
        not committed yet moved or truncated by path, a shell write or a scratch
        rename over a key with open writers."""
        o = op["op"]
        if "h" in op:
            return (o == "open") != (op["h"] in self.handles)
        if o in ("rename", "truncate"):
            k = tuple(op["a" if o == "rename" else "k"])
            return self.values.get(k) is not None or not self.visible(k)
        if o in ("sh", "srename"):
            return not self.writers(tuple(op["k"]))
        return True

    def expect_read(self, op, want, got):
        op["res"] = show(got)
        if got != want:
            raise Fail("%s: expected %s, read %s" % (fmt_op(op), show(want), show(got)))

    def expect(self, op, want, got):
        op["res"] = got
        if want != got:
            raise Fail("%s: expected %s, got %s" % (fmt_op(op), want, got))

    def op_open(self, op, tag):
        k, mode = tuple(op["k"]), op["mode"]
        kind = "r" if mode == "r" else ("a" if "a" in mode else "w")
        flags = {"r": os.O_RDONLY, "w": os.O_WRONLY, "a": os.O_WRONLY | os.O_APPEND}[kind]
        if "+" in mode:
            flags = (flags & ~os.O_WRONLY) | os.O_RDWR
        if "c" in mode:
            flags |= os.O_CREAT
        if "t" in mode:
            flags |= os.O_TRUNC
        vis = self.visible(k)
        if not vis and "c" not in mode:
            want = "ENOENT"
        else:
            want = "OK"
        try:
            fd = os.open(self.path(k), flags, 0o644)
            got = "OK"
        except OSError as e:
            fd, got = None, ename(e)
        self.expect(op, want, got)
        if fd is None:
            return
        ino = self.inos.get(k)
        if ino is None:
            ino = self.inos[k] = Ino(k)
        h = Handle(op["h"], fd, ino, kind, "+" in mode)
        cur = self.values.get(k)
        if kind == "r":
            h.buf = bytearray(cur or b"")
            ino.read_since_commit = True
        elif not vis or "t" in mode:
            h.pending = True      # created (touch commits an empty value) or truncated
            self.touch(h)
        elif kind == "w":
            h.buf = bytearray(cur or b"")
        ino.handles.add(h)
        self.handles[h.hid] = h
        self.next_hid = max(self.next_hid, h.hid + 1)

    def op_write(self, op, tag):
        h = self.handles[op["h"]]
        data = bytes.fromhex(op["d"])
        try:
            n = os.write(h.fd, data)
            got = "OK" if n == len(data) else "short %d" % n
        except OSError as e:
            got = ename(e)
        self.expect(op, "OK", got)
        if not data:
            return                # write(2) of nothing changes nothing (no FUSE WRITE)
        if h.kind == "a":
            h.appended += data
        else:
            if h.pos > len(h.buf):
                h.buf += bytes(h.pos - len(h.buf))
            h.buf[h.pos:h.pos + len(data)] = data
            h.pos += len(data)
        h.dirty = True
        self.touch(h)

    def op_pwrite(self, op, tag):
        h = self.handles[op["h"]]
        data, off = bytes.fromhex(op["d"]), op["off"]
        try:
            n = os.pwrite(h.fd, data, off)
            got = "OK" if n == len(data) else "short %d" % n
        except OSError as e:
            got = ename(e)
        self.expect(op, "OK", got)
        if not data:
            return
        if off > len(h.buf):
            h.buf += bytes(off - len(h.buf))
        h.buf[off:off + len(data)] = data
        h.dirty = True
        self.touch(h)

    def op_ftrunc(self, op, tag):
        h = self.handles[op["h"]]
        got = call(os.ftruncate, h.fd, op["n"])
        self.expect(op, "OK", got)
        n = op["n"]
        h.buf = h.buf[:n] + bytes(max(0, n - len(h.buf)))
        h.dirty = True
        self.touch(h)

    def op_read(self, op, tag):
        """pread of the whole handle: a reader's pinned value, a writer's own bytes."""
        h = self.handles[op["h"]]
        got = call(read_all, h.fd)
        op["res"] = show(got)
        if got != bytes(h.buf):
            raise Fail("%s: expected %s, read %s" % (fmt_op(op), show(bytes(h.buf)), show(got)))

    def op_fstat(self, op, tag):
        h = self.handles[op["h"]]
        got = os.fstat(h.fd).st_size
        want = self.size_of(h.ino)
        if want is not None:
            self.expect(op, want, got)
        op["res"] = got

    def op_fsync(self, op, tag):
        h = self.handles[op["h"]]
        got = call(os.fsync, h.fd)
        self.expect(op, "OK", got)
        if h.kind != "r":
            self.commit(h, tag)

    def op_dupclose(self, op, tag):
        """A copy of the descriptor closed (a shell's dup2 + close): its FLUSH commits
        what was written, but never a creation or truncation alone."""
        h = self.handles[op["h"]]
        d = os.dup(h.fd)
        got = call(os.close, d)
        self.expect(op, "OK", got)
        if h.kind != "r" and h.dirty:
            self.commit(h, tag)

    def op_close(self, op, tag):
        h = self.handles[op["h"]]
        got = call(os.close, h.fd)
        self.drop(h)
        self.expect(op, "OK", got)
        if h.kind != "r":
            self.commit(h, tag)

    def op_unlink(self, op, tag):
        k = tuple(op["k"])
        live = self.values.get(k) is not None
        want = "OK" if self.visible(k) else "ENOENT"
        got = call(os.unlink, self.path(k))
        self.expect(op, want, got)
        if got == "OK":
            if live:
                self.record(k, None, tag)
            self.detach(k)

    def op_rename(self, op, tag):
        a, b = tuple(op["a"]), tuple(op["b"])
        if not self.visible(a):
            want = "ENOENT"
        elif a[0] != b[0]:
            want = "EXDEV"
        else:
            want = "OK"
        got = call(os.rename, self.path(a), self.path(b))
        self.expect(op, want, got)
        if got != "OK" or a == b:
            return
        v = self.values[a]
        self.detach(b)
        self.record(b, v, tag + "R")
        self.record(a, None, tag + "R")
        ino = self.inos.pop(a, None)
        if ino is not None:
            ino.key = b
            self.inos[b] = ino

    def op_truncate(self, op, tag):
        k, n = tuple(op["k"]), op["n"]
        v = self.values.get(k)
        want = "OK" if v is not None else "ENOENT"
        got = call(os.truncate, self.path(k), n)
        self.expect(op, want, got)
        if got == "OK":
            self.record(k, v[:n] + bytes(max(0, n - len(v))), tag)

    def expected_read(self, k):
        v = self.values.get(k)
        if v is not None:
            return v
        return b"" if self.visible(k) else "ENOENT"

    def op_cat(self, op, tag):
        k = tuple(op["k"])
        want = self.expected_read(k)
        try:
            if op.get("sh"):
                r = subprocess.run(["cat", self.path(k)], capture_output=True)
                got = r.stdout if r.returncode == 0 else (
                    "ENOENT" if b"No such file" in r.stderr else r.stderr.decode())
            else:
                got = cat(self.path(k))
        except OSError as e:
            got = ename(e)
        self.expect_read(op, want, got)

    def op_stat(self, op, tag):
        k = tuple(op["k"])
        try:
            got = os.stat(self.path(k)).st_size
        except OSError as e:
            got = ename(e)
        op["res"] = got
        if not self.visible(k):
            want = "ENOENT"
        elif k in self.inos:
            want = self.size_of(self.inos[k])
            if want is None:
                return
        else:
            want = len(self.values[k])
        if got != want:
            raise Fail("%s: expected %s, got %s" % (fmt_op(op), want, got))

    def op_ls(self, op, tag):
        p = op["p"]
        names = os.listdir(self.part(p))
        op["res"] = len(names)
        if len(names) != len(set(names)):
            raise Fail("%s: a name listed twice" % fmt_op(op))
        for n in names:
            # Control entries are never listed; whether scratch files are is open,
            # but not one that does not exist.
            if n.startswith(".") and not SCRATCH_RE.match(n) or (p, n) in self.scratch_names \
                    and (p, n) not in self.scratch:
                raise Fail("%s: lists %r" % (fmt_op(op), n))
        mine = [k for k in self.values if k[0] == p] + [k for k in self.inos if k[0] == p]
        for k in mine:
            if self.values.get(k) is not None and k[1] not in names:
                raise Fail("%s: live key %s not listed" % (fmt_op(op), k[1]))
            if not self.visible(k) and k[1] in names:
                raise Fail("%s: lists %s, which has no value" % (fmt_op(op), k[1]))

    def op_sh(self, op, tag):
        """`printf %s DATA > key` or `>> key` by a real shell (open, dup2, close, write)."""
        k = tuple(op["k"])
        data = bytes.fromhex(op["d"])
        self.expect(op, "OK", sh_redirect(self.path(k), data, op.get("append")))
        if self.writers(k):
            raise Fail("model: sh on a key with open handles")
        old = self.values.get(k)
        if op.get("append") and old is not None and not data:
            return                # ">>" of nothing onto a live key: no write, no commit
        self.record(k, (old or b"") + data if op.get("append") else data, tag)

    def op_roll(self, op, tag):
        os.setxattr(self.part(op["p"]), X + "roll", b"1")
        op["res"] = "OK"

    def op_clean(self, op, tag):
        os.setxattr(self.part(op["p"]), X + "clean", b"1")
        self.cleaned.add(op["p"])
        op["res"] = "OK"

    def op_rollclean(self, op, tag):
        """The coordinator's roll + clean of every partition (replayed from a trace)."""
        for p in range(NPART):
            os.setxattr(self.part(p), X + "roll", b"1")
            os.setxattr(self.part(p), X + "clean", b"1")
        op["res"] = "OK"

    def op_fsyncdir(self, op, tag):
        fd = os.open(self.part(op["p"]), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        op["res"] = "OK"

    # -- scratch names ----------------------------------------------------------------
    def op_sput(self, op, tag):
        k = tuple(op["k"])
        data = bytes.fromhex(op["d"])
        try:
            fd = os.open(self.path(k), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            got = "OK"
        except OSError as e:
            got = ename(e)
        self.expect(op, "OK", got)
        self.scratch[k] = data

    def op_scat(self, op, tag):
        k = tuple(op["k"])
        want = self.scratch.get(k, "ENOENT")
        got = call(cat, self.path(k))
        self.expect_read(op, want, got)

    def op_sunlink(self, op, tag):
        k = tuple(op["k"])
        want = "OK" if k in self.scratch else "ENOENT"
        got = call(os.unlink, self.path(k))
        self.expect(op, want, got)
        self.scratch.pop(k, None)

    def op_srename(self, op, tag):
        """rsync's temporary file onto a key: one record, the scratch file is gone."""
        s, k = tuple(op["s"]), tuple(op["k"])
        want = "OK" if s in self.scratch else "ENOENT"
        got = call(os.rename, self.path(s), self.path(k))
        self.expect(op, want, got)
        if got == "OK":
            self.detach(k)
            self.record(k, self.scratch.pop(s), tag)

    # -- shared keys: only what holds whatever the interleaving ----------------------
    def op_shput(self, op, tag):
        k = tuple(op["k"])
        data = bytes.fromhex(op["d"])
        how = op["how"]
        got = "OK"
        try:
            if how == "sh":
                got = sh_redirect(self.path(k), data, False)
            else:
                fd = os.open(self.path(k), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    if how == "dup":          # the shell's redirect: dup2, close
                        d = os.dup(fd)
                        os.close(fd)
                        fd = d
                    cut = op.get("cut", len(data))
                    os.write(fd, data[:cut])
                    if cut < len(data):
                        os.write(fd, data[cut:])
                    if how == "fsync":
                        os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as e:
            got = ename(e)
        self.expect(op, "OK", got)
        self.sh_puts.setdefault(k, []).append(data)
        self.shared_commit(k)

    def op_shapp(self, op, tag):
        k = tuple(op["k"])
        lines = [bytes.fromhex(x) for x in op["lines"]]
        got = "OK"
        try:
            if op.get("how") == "sh":
                got = sh_redirect(self.path(k), b"".join(lines), True)
            else:
                fd = os.open(self.path(k), os.O_WRONLY | os.O_APPEND)
                try:
                    for ln in lines:
                        os.write(fd, ln)
                finally:
                    os.close(fd)
        except OSError as e:
            got = ename(e)
        self.expect(op, "OK", got)
        self.sh_apps.setdefault(k, []).append(lines)
        self.shared_commit(k)

    def shared_commit(self, k):
        self.sh_commits[k] = self.sh_commits.get(k, 0) + 1
        self.commits[k[0]] += 1

    def op_shcat(self, op, tag):
        k = tuple(op["k"])
        got = call(cat, self.path(k))
        op["res"] = show(got, 30)
        if isinstance(got, str):
            raise Fail("%s: %s (shared keys are never deleted)" % (fmt_op(op), got))
        self.sh_reads.setdefault(k, []).append(got)

    def op_shls(self, op, tag):
        names = set(os.listdir(self.part(op["p"])))
        op["res"] = len(names)
        for n in op["want"]:
            if n not in names:
                raise Fail("%s: shared key %s not listed" % (fmt_op(op), n))

    def report(self):
        """What the coordinator needs after a phase; resets the per-phase parts."""
        r = {"records": self.records, "commits": self.commits, "cleaned": sorted(self.cleaned),
             "ops": len(self.trace),
             "sh_puts": list(self.sh_puts.items()), "sh_apps": list(self.sh_apps.items()),
             "sh_commits": list(self.sh_commits.items()),
             "sh_reads": list(self.sh_reads.items())}
        self.records, self.commits, self.cleaned = [], [0] * NPART, set()
        self.sh_puts, self.sh_apps, self.sh_commits, self.sh_reads = {}, {}, {}, {}
        return r


def fmt_op(op):
    a = []
    for f in ("h", "k", "mode", "a", "b", "s", "p", "off", "n", "how", "append"):
        if f in op:
            v = op[f]
            a.append("%s=%s" % (f, "%d/%s" % tuple(v) if isinstance(v, list) and len(v) == 2
                                   and isinstance(v[0], int) else v))
    if "d" in op:
        a.append("data=%s" % show(bytes.fromhex(op["d"]), 24))
    if "lines" in op:
        a.append("lines=%d" % len(op["lines"]))
    s = "%s(%s)" % (op["op"], ", ".join(a))
    if "res" in op:
        s += " -> %s" % (op["res"],)
    return s


# ------------------------------------------------------------------------------------
# Generating operations.

def own_keys(proc):
    names = ["p%dk%d" % (proc, j) for j in range(8)]
    if proc == 0:                 # odd key bytes: '%', '/', a leading '.', empty, UTF-8
        names += [enc(b"%pct"), enc(b"a/b"), enc(b".dot"), enc(b""), "sp ace", enc(b"\x01c"),
                  "\u00fc"]
    return [(j % NPART, n) for j, n in enumerate(names)]


SCRATCH_RE = re.compile(r"^\.s[0-9]+-[0-9]+\.tmp$")
SHARED_PUT = [(p, "s-put%d" % i) for p in range(NPART) for i in range(2)]
SHARED_APP = [(p, "s-app") for p in range(NPART)]


class Generator:
    def __init__(self, rnd, ex, classes):
        self.r, self.ex, self.classes = rnd, ex, classes
        self.keys = own_keys(ex.proc)
        self.scratch_names = sorted(ex.scratch_names)
        self.seq = 0
        self.clean_ok = True      # cleans while others write: this phase's history is
                                  # then checked as a subsequence of the commits

    def data(self, lo=0):
        r = self.r
        self.seq += 1
        x = r.random()
        n = 0 if x < 0.04 else r.randint(1, 64) if x < 0.55 else r.randint(64, 1500) \
            if x < 0.95 else r.randint(1500, 7000)
        n = max(n, lo)
        head = b"%d.%d:" % (self.ex.proc, self.seq)
        body = head + bytes(r.choice(b"abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40))
        v = (body * (n // len(body) + 1))[:n]
        return v.hex()

    def op(self):
        r, ex, c = self.r, self.ex, self.classes
        hs = list(ex.handles.values())
        ws = [h for h in hs if h.kind != "r"]
        wl = [h for h in hs if h.kind == "w"]
        choices = [("open", 14 if len(hs) < 4 else 0), ("write", 14 if ws else 0),
                   ("pwrite", 5 if wl else 0), ("ftrunc", 2 if wl else 0),
                   ("read", 4 if [h for h in hs if h.kind == "r" or h.rdwr and h.kind == "w"]
                    else 0),
                   ("fstat", 2 if wl else 0), ("fsync", 3 if hs else 0),
                   ("dupclose", 4 if ws and "dup" in c else 0), ("close", 12 if hs else 0),
                   ("unlink", 5), ("rename", 5 if "rename" in c else 0), ("truncate", 2),
                   ("cat", 10), ("stat", 4), ("ls", 2), ("sh", 2 if "shell" in c else 0),
                   ("roll", 1), ("clean", 1 if "clean" in c and self.clean_ok else 0),
                   ("fsyncdir", 1),
                   ("scratch", 4 if "scratch" in c else 0),
                   ("shared", 25 if "shared" in c else 0)]
        total = sum(w for _, w in choices)
        x = r.uniform(0, total)
        for name, w in choices:
            x -= w
            if x < 0:
                break
        return getattr(self, "g_" + name)(hs, ws, wl)

    def key(self):
        return list(self.r.choice(self.keys))

    def g_open(self, hs, ws, wl):
        r = self.r
        modes = ["r", "r", "w", "wt", "wc", "wct", "wct", "w+", "wct+", "wc+"]
        if "append" in self.classes:
            modes += ["a", "ac", "ac"]
        return {"op": "open", "h": self.ex.next_hid, "k": self.key(), "mode": r.choice(modes)}

    def g_write(self, hs, ws, wl):
        return {"op": "write", "h": self.r.choice(ws).hid, "d": self.data()}

    def g_pwrite(self, hs, ws, wl):
        h = self.r.choice(wl)
        return {"op": "pwrite", "h": h.hid, "off": self.r.randint(0, len(h.buf) + 20),
                "d": self.data()}

    def g_ftrunc(self, hs, ws, wl):
        h = self.r.choice(wl)
        return {"op": "ftrunc", "h": h.hid, "n": self.r.randint(0, len(h.buf) + 30)}

    def g_read(self, hs, ws, wl):
        return {"op": "read", "h": self.r.choice(
            [h for h in hs if h.kind == "r" or h.rdwr and h.kind == "w"]).hid}

    def g_fstat(self, hs, ws, wl):
        return {"op": "fstat", "h": self.r.choice(wl).hid}

    def g_fsync(self, hs, ws, wl):
        return {"op": "fsync", "h": self.r.choice(hs).hid}

    def g_dupclose(self, hs, ws, wl):
        return {"op": "dupclose", "h": self.r.choice(ws).hid}

    def g_close(self, hs, ws, wl):
        return {"op": "close", "h": self.r.choice(hs).hid}

    def g_unlink(self, hs, ws, wl):
        return {"op": "unlink", "k": self.key()}

    def g_rename(self, hs, ws, wl):
        live = [k for k in self.keys if self.ex.values.get(k) is not None]
        a = list(self.r.choice(live)) if live and self.r.random() < 0.8 else self.key()
        same = [k for k in self.keys if k[0] == a[0]]
        b = list(self.r.choice(same)) if self.r.random() < 0.8 else self.key()
        if self.ex.values.get(tuple(a)) is None and self.ex.visible(tuple(a)):
            return self.g_cat(hs, ws, wl)   # a created name not committed yet: no rename
        return {"op": "rename", "a": a, "b": b}

    def g_truncate(self, hs, ws, wl):
        k = self.key()
        v = self.ex.values.get(tuple(k))
        if v is None and self.ex.visible(tuple(k)):
            return self.g_cat(hs, ws, wl)
        return {"op": "truncate", "k": k, "n": self.r.randint(0, len(v or b"") + 20)}

    def g_cat(self, hs, ws, wl):
        op = {"op": "cat", "k": self.key()}
        if "shell" in self.classes and self.r.random() < 0.05:
            op["sh"] = True
        return op

    def g_stat(self, hs, ws, wl):
        return {"op": "stat", "k": self.key()}

    def g_ls(self, hs, ws, wl):
        return {"op": "ls", "p": self.r.randrange(NPART)}

    def g_sh(self, hs, ws, wl):
        k = self.key()
        if self.ex.writers(tuple(k)):
            return self.g_cat(hs, ws, wl)
        op = {"op": "sh", "k": k, "d": self.data()}
        # A shell's redirect is a dup2 and a close before the write: "> key", and
        # ">> key" that creates the key, are the dup class.
        live = self.ex.values.get(tuple(k)) is not None
        if "append" in self.classes and (self.r.random() < 0.4 or "dup" not in self.classes):
            op["append"] = True
        if "dup" not in self.classes and not (live and op.get("append")):
            return self.g_cat(hs, ws, wl)
        return op

    def g_roll(self, hs, ws, wl):
        return {"op": "roll", "p": self.r.randrange(NPART)}

    def g_clean(self, hs, ws, wl):
        return {"op": "clean", "p": self.r.randrange(NPART)}

    def g_fsyncdir(self, hs, ws, wl):
        return {"op": "fsyncdir", "p": self.r.randrange(NPART)}

    def g_scratch(self, hs, ws, wl):
        r = self.r
        s = list(r.choice(self.scratch_names))
        x = r.random()
        if x < 0.4:
            return {"op": "sput", "k": s, "d": self.data()}
        if x < 0.6:
            return {"op": "scat", "k": s}
        if x < 0.7:
            return {"op": "sunlink", "k": s}
        ks = [k for k in self.keys if k[0] == s[0] and not self.ex.writers(k)]
        return {"op": "srename", "s": s, "k": list(r.choice(ks))} if ks else {"op": "scat", "k": s}

    def g_shared(self, hs, ws, wl):
        r = self.r
        x = r.random()
        if x < 0.35:
            k = list(r.choice(SHARED_PUT))
            self.seq += 1
            body = b"S|%d|%d|" % (self.ex.proc, self.seq)
            body += bytes(r.choice(b"ABCDEFGH") for _ in range(r.choice([1, 10, 300, 3000])))
            # A shell's "> key" is a dup2 and a close before the write: the dup class.
            dup = "dup" in self.classes
            how = r.choice(["plain", "plain", "fsync"] + (["dup", "dup"] if dup else []) +
                           (["sh"] if "shell" in self.classes and dup else []))
            op = {"op": "shput", "k": k, "d": body.hex(), "how": how}
            if how != "sh" and r.random() < 0.5:
                op["cut"] = r.randint(1, len(body) - 1)
            return op
        if x < 0.55 and "append" in self.classes:
            k = list(r.choice(SHARED_APP))
            self.seq += 1
            n = r.choice([1, 1, 2, 3])
            lines = [(b"A|%d|%d|%d/%d|" % (self.ex.proc, self.seq, i + 1, n) +
                      b"x" * r.randint(0, 60) + b"\n").hex() for i in range(n)]
            op = {"op": "shapp", "k": k, "lines": lines}
            if "shell" in self.classes and r.random() < 0.1:
                op["how"] = "sh"
            return op
        if x < 0.95:
            return {"op": "shcat", "k": list(r.choice(SHARED_PUT + SHARED_APP))}
        p = r.randrange(NPART)
        return {"op": "shls", "p": p, "want": [k[1] for k in SHARED_PUT + SHARED_APP
                                               if k[0] == p]}

    def closing_ops(self):
        return [{"op": "close", "h": h.hid} for h in list(self.ex.handles.values())]


# ------------------------------------------------------------------------------------
# Workers.

def worker_main(proc, conn, args, classes):
    ex = Executor(args.mnt, args.topic, proc, classes)
    gen = Generator(random.Random("%d:%d" % (args.seed, proc)), ex, classes)
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            break
        try:
            if msg[0] == "run":
                gen.clean_ok = msg[2]
                for _ in range(msg[1]):
                    ex.run(gen.op())
                for op in gen.closing_ops():
                    ex.run(op)
            elif msg[0] == "event":       # the coordinator's roll + clean or remount
                ex.trace.append(dict(msg[1]))
                if msg[1]["op"] == "remount":
                    ex.scratch.clear()    # scratch files do not survive an unmount
            with open(os.path.join(args.dir, "trace-p%d" % proc), "w") as f:
                for op in ex.trace:
                    f.write(json.dumps(op) + "\n")
            conn.send(("ok", ex.report()))
        except Fail as e:
            conn.send(("fail", str(e), ex.trace))
            break
        except Exception:
            conn.send(("fail", "worker %d crashed:\n%s" % (proc, traceback.format_exc()),
                       ex.trace))
            break
    conn.close()


# ------------------------------------------------------------------------------------
# The coordinator: the history, shared keys, roll + clean, remount.

class History:
    """The model of one partition's records, per key: a list of [value|None, tag]."""

    def __init__(self):
        self.keys = {}            # name -> [[value, tag], ...]
        self.exact = True         # false after a clean we cannot place: a subsequence


class Coordinator:
    def __init__(self, args, mount, classes):
        self.args, self.mount, self.classes = args, mount, classes
        self.mnt, self.topic = args.mnt, args.topic
        self.hist = [History() for _ in range(NPART)]
        self.leo = [0] * NPART
        self.cache = {}           # (p, offset) -> (key name, value or None)
        self.shared_vals = {k: set() for k in SHARED_PUT}
        self.app_lines = {k: [] for k in SHARED_APP}   # chunks committed
        self.checks = 0
        self.ops = 0
        self.renames = 0

    def part(self, p):
        return os.path.join(self.mnt, self.topic, str(p))

    def seed(self):
        os.mkdir(os.path.join(self.mnt, self.topic))
        for k in SHARED_PUT + SHARED_APP:
            v = b"seed %s\n" % k[1].encode() if k in SHARED_PUT else b"A|seed|0|1/1|\n"
            with open(os.path.join(self.part(k[0]), k[1]), "wb") as f:
                f.write(v)
            self.hist[k[0]].keys[k[1]] = [[v, "seed"]]
            self.leo[k[0]] += 1
            if k in SHARED_PUT:
                self.shared_vals[k].add(v)
            else:
                self.app_lines[k].append([v])

    def absorb(self, reports):
        """Adds the workers' records of a phase to the model."""
        self.ops = sum(rep["ops"] for rep in reports)
        for rep in reports:
            for p in range(NPART):
                self.leo[p] += rep["commits"][p]
            for p, name, v, tag in rep["records"]:
                self.hist[p].keys.setdefault(name, []).append([v, tag])
            for p in rep["cleaned"]:
                self.hist[p].exact = False
            for k, vals in rep["sh_puts"]:
                self.shared_vals[tuple(k)].update(vals)
            for k, chunks in rep["sh_apps"]:
                self.app_lines[tuple(k)].extend(chunks)
            for k, n in rep["sh_commits"]:
                k = tuple(k)
                lst = self.hist[k[0]].keys[k[1]]
                lst.extend([[Ellipsis, "shared"]] * n)   # value unknown, order unknown
        if self.args.cleaner_threads:
            for h in self.hist:
                h.exact = False

    def check(self, reports, why):
        """The whole state, with no handle open anywhere."""
        self.checks += 1
        for p in range(NPART):
            self.check_partition(p, why)
        self.check_shared(reports)

    def wait_leo(self, p):
        want = self.leo[p]
        got = None
        for _ in range(600):
            got = int(xget(self.part(p), "log_end_offset"))
            if got >= want:
                break
            time.sleep(0.05)      # a RELEASE (asynchronous in FUSE) still in flight
        if got != want:
            return ("partition %d: log_end_offset %d, but %d records were committed (%+d)"
                    % (p, got, want, got - want))
        return None

    def read_history(self, p):
        hdir = os.path.join(self.part(p), ".history")
        names = os.listdir(hdir)
        offs = [int(n) for n in names]
        if offs != sorted(set(offs)):
            raise Fail("partition %d: .history/ offsets not unique and ascending: %s"
                       % (p, offs[:20]))
        lso = int(xget(self.part(p), "log_start_offset"))
        leo = int(xget(self.part(p), "log_end_offset"))
        if offs and (offs[0] < lso or offs[-1] >= leo):
            raise Fail("partition %d: .history/ holds offsets %d..%d outside [%d, %d)"
                       % (p, offs[0], offs[-1], lso, leo))
        live = set(offs)
        for o in list(k for k in self.cache if k[0] == p):
            if o[1] not in live:
                del self.cache[o]
        out = []
        for n, o in zip(names, offs):
            if (p, o) not in self.cache:
                e = os.path.join(hdir, n)
                try:
                    key = enc(xget(e, "key"))
                    tomb = xget(e, "tombstone") == b"1"
                    self.cache[(p, o)] = (key, None if tomb else cat(e))
                except FileNotFoundError:
                    if not self.args.cleaner_threads:
                        raise
                    continue      # a background pass took it after the listing
            out.append((o,) + self.cache[(p, o)])
        return out

    def check_partition(self, p, why):
        leo_msg = self.wait_leo(p)
        try:
            self.check_history(p, why)
        except Fail as e:
            if leo_msg:
                raise Fail(leo_msg + "\n" + str(e), e.key)
            raise
        if leo_msg:
            raise Fail(leo_msg)
        self.check_keys(p, why)

    def check_history(self, p, why):
        h = self.hist[p]
        seen = {}
        for o, key, v in self.read_history(p):
            seen.setdefault(key, []).append([v, o])
        for key in seen:
            if key not in h.keys:
                raise Fail("partition %d (%s): records of key %s that nobody wrote: %s"
                       % (p, why, key, [(o, show(v)) for v, o in seen[key][:5]]), (p, key))
        for key, want in sorted(h.keys.items()):
            got = seen.get(key, [])
            self.match(p, key, want, got, h.exact, why)
            h.keys[key] = [[v, o] for v, o in got]
        h.exact = not self.args.cleaner_threads

    def match(self, p, key, want, got, exact, why):
        """got (observed [value, offset] in offset order) against want (the model)."""
        def bad(msg):
            raise Fail("partition %d key %s (%s): %s\n  model (tag = worker.op):  %s\n"
                       "  .history (offset):       %s"
                       % (p, key, why, msg,
                          [(t, show(v, 20)) for v, t in want][-12:],
                          [(o, show(v, 20)) for v, o in got][-12:]), (p, key))
        shared = any(v is Ellipsis for v, _ in want)
        if shared:
            if exact and len(got) != len(want) or len(got) > len(want):
                prev = {t for _, t in want if isinstance(t, int)}
                new = [(o, v) for v, o in got if o not in prev]
                known = self.shared_vals.get((p, key))
                odd = [(o, show(v, 20)) for o, v in new if known is not None and v not in known]
                bad("%d records, but %d commits (a shared key; %d new records%s)"
                    % (len(got), len(want), len(new),
                       ", of which nobody wrote %s" % odd[:6] if odd else ""))
            if not got:
                bad("no record left")
            return
        if exact:
            if [v for v, _ in got] != [v for v, _ in want]:
                bad("records differ from the commits")
            # A rename's two records are one batch: adjacent offsets.
            for (v, t), (_, o) in zip(want, got):
                if isinstance(t, str) and t.endswith("R"):
                    self.rename_offsets.setdefault(t, []).append(o)
            return
        if not want:
            if got:
                bad("records of a key never written")
            return
        if not got or got[-1][0] != want[-1][0]:
            bad("the newest record is not the newest commit")
        i = 0
        for v, _ in got[:-1]:
            while i < len(want) - 1 and want[i][0] != v:
                i += 1
            if i >= len(want) - 1:
                bad("records that are not a subsequence of the commits")
            i += 1

    def check_keys(self, p, why):
        """Each key's value, stat, offset and versions against its newest record."""
        h = self.hist[p]
        listed = {n for n in os.listdir(self.part(p)) if not SCRATCH_RE.match(n)}
        live = set()
        for key, recs in h.keys.items():
            path = os.path.join(self.part(p), key)
            v = recs[-1][0] if recs else None
            got = call(cat, path)
            want = v if v is not None else "ENOENT"
            if got != want:
                raise Fail("partition %d key %s (%s): reads %s, its newest record %s"
                           % (p, key, why, show(got), show(want)), (p, key))
            if v is None:
                if key in listed:
                    raise Fail("partition %d (%s): deleted key %s listed" % (p, why, key))
                continue
            live.add(key)
            st = os.stat(path)
            if st.st_size != len(v):
                raise Fail("partition %d key %s (%s): st_size %d, value %d bytes"
                           % (p, key, why, st.st_size, len(v)))
            off = int(xget(path, "offset"))
            vers = [int(x) for x in xget(path, "versions").split()]
            hoffs = [o for _, o in recs]
            if self.args.cleaner_threads:     # a background pass may run meanwhile
                hoffs = [o for o in hoffs if o in vers]
            if off != recs[-1][1] or vers != hoffs:
                raise Fail("partition %d key %s (%s): offset %d, versions %s; .history has %s"
                           % (p, key, why, off, vers, [o for _, o in recs]))
        if listed != live:
            raise Fail("partition %d (%s): listing differs from the live keys: extra %s, "
                       "missing %s" % (p, why, sorted(listed - live), sorted(live - listed)))
        n = int(xget(self.part(p), "live_keys"))
        if n != len(live):
            raise Fail("partition %d (%s): live_keys %d, %d live keys" % (p, why, n, len(live)))

    def check_shared(self, reports):
        for k in SHARED_PUT:
            recs = self.hist[k[0]].keys[k[1]]
            for v, o in recs:
                if v not in self.shared_vals[k]:
                    raise Fail("shared key %s/%s: record %d holds %s, which nobody wrote"
                               % (k[0], k[1], o, show(v)))
        for rep in reports:
            for k, vals in rep["sh_reads"]:
                k = tuple(k)
                for v in vals:
                    if k in self.shared_vals and v not in self.shared_vals[k]:
                        raise Fail("shared key %s/%s: a reader saw %s, which nobody committed"
                                   % (k[0], k[1], show(v)))
                    if k in self.app_lines:
                        self.check_append_read(k, v, "a reader saw")
        for k in SHARED_APP:
            recs = self.hist[k[0]].keys[k[1]]
            final = recs[-1][0]
            for v, o in recs:
                self.check_append_read(k, v, "record %d" % o)
            lines = final.split(b"\n")[:-1]
            want = {}
            for chunk in self.app_lines[k]:
                for ln in chunk:
                    want[ln.rstrip(b"\n")] = True
            have = {}
            for ln in lines:
                if ln in have:
                    raise Fail("shared key %s/%s: line %r twice" % (k[0], k[1], ln))
                have[ln] = True
            lost = [ln for ln in want if ln not in have]
            extra = [ln for ln in have if ln not in want]
            if lost or extra:
                raise Fail("shared key %s/%s: %d of %d appended lines lost (e.g. %s), %d "
                           "nobody appended (e.g. %s)"
                           % (k[0], k[1], len(lost), len(want), lost[:3], len(extra), extra[:3]))

    def check_append_read(self, k, v, what):
        final = self.hist[k[0]].keys[k[1]][-1][0]
        if not final.startswith(v):
            raise Fail("shared key %s/%s: %s %s, not a prefix of the value %s (appends only "
                       "ever extend it)" % (k[0], k[1], what, show(v), show(final)))
        if not v.endswith(b"\n"):
            raise Fail("shared key %s/%s: %s %s, which ends inside a line"
                       % (k[0], k[1], what, show(v[-40:])))
        last = v.split(b"\n")[-2].split(b"|")
        if last[3].split(b"/")[0] != last[3].split(b"/")[1]:
            raise Fail("shared key %s/%s: %s %s, which ends inside a commit"
                       % (k[0], k[1], what, show(v[-60:])))

    def roll_clean(self):
        for p in range(NPART):
            os.setxattr(self.part(p), X + "roll", b"1")
            os.setxattr(self.part(p), X + "clean", b"1")
            h = self.hist[p]
            for key, recs in h.keys.items():
                h.keys[key] = recs[-1:]
            h.exact = True

    def check_renames(self):
        for t, offs in self.rename_offsets.items():
            if len(offs) == 2 and abs(offs[0] - offs[1]) != 1:
                raise Fail("rename %s: records at offsets %s, not one batch" % (t, offs))
            self.renames += len(offs) == 2


def run_concurrent(args, classes):
    data = os.path.join(args.dir, "data")
    os.makedirs(data, exist_ok=True)
    os.makedirs(args.mnt, exist_ok=True)
    mount = Mount(args.topicfs, data, args.mnt, args.mount_opts, os.path.join(args.dir, "log"),
                  args.timeout)
    rnd = random.Random("coordinator:%d" % args.seed)
    co = Coordinator(args, mount, classes)
    co.rename_offsets = {}
    ctx = mp.get_context("fork")
    workers = []
    failure = None
    mount.start()
    try:
        co.seed()
        for i in range(args.procs):
            a, b = ctx.Pipe()
            pr = ctx.Process(target=worker_main, args=(i, b, args, classes))
            pr.start()
            workers.append((pr, a))
        per_phase = max(1, args.ops // args.phases)
        for phase in range(args.phases):
            clean_ok = rnd.random() < 0.3
            for _, conn in workers:
                conn.send(("run", per_phase, clean_ok))
            reports = []
            for i, (_, conn) in enumerate(workers):
                msg = conn.recv()
                if msg[0] == "fail":
                    failure = (i, msg[1], msg[2])
                else:
                    reports.append(msg[1])
            if failure:
                break
            co.absorb(reports)
            co.check(reports, "after phase %d" % phase)
            co.check_renames()
            co.rename_offsets = {}
            x = rnd.random()
            if x < 0.3 and "clean" in classes:
                co.roll_clean()
                for _, conn in workers:
                    conn.send(("event", {"op": "rollclean"}))
                for _, conn in workers:
                    conn.recv()
                co.check([], "after roll + clean, phase %d" % phase)
            elif x < 0.55 and "remount" in classes:
                mount.stop()
                mount.start()
                for _, conn in workers:
                    conn.send(("event", {"op": "remount"}))
                for _, conn in workers:
                    conn.recv()
                co.check([], "after remount, phase %d" % phase)
        if not failure:
            mount.stop()
            mount.start()
            co.check([], "after the final remount")
    except Fail as e:
        failure = (None, str(e), e.key)
    finally:
        for pr, conn in workers:
            try:
                conn.send(("quit",))
            except OSError:
                pass
        for pr, _ in workers:
            pr.join(30)
            if pr.is_alive():
                pr.kill()
        try:
            mount.stop()
        except Fail as e:
            if not failure:
                failure = (None, str(e), None)
    return failure, co


# ------------------------------------------------------------------------------------
# Replay and shrinking of one process's trace.

def replay(args, ops, mount_ctl, topic):
    """Runs ops in one process on a fresh topic. Returns None, or the failure message
    and the number of operations it took to fail."""
    os.mkdir(os.path.join(args.mnt, topic))
    ex = Executor(args.mnt, topic, 0, set(CLASSES))
    for k in SHARED_PUT + SHARED_APP:
        with open(os.path.join(args.mnt, topic, str(k[0]), k[1]), "wb") as f:
            f.write(b"seed\n" if k in SHARED_PUT else b"A|seed|0|1/1|\n")
    leo = [len([k for k in SHARED_PUT + SHARED_APP if k[0] == p]) for p in range(NPART)]
    i = 0
    try:
        for i, op in enumerate(ops):
            op = {f: v for f, v in op.items() if f != "res"}
            if not ex.valid(op):
                return None       # not a trace the generator could make
            if op["op"] == "remount":
                if ex.handles:
                    return None
                mount_ctl()
                ex.scratch.clear()
                continue
            ex.run(op)
            for p in range(NPART):
                if ex.commits[p]:
                    leo[p] += ex.commits[p]
                    ex.commits[p] = 0
                # A RELEASE may still be on its way (FUSE sends it after close()
                # returns): a log end short of the model is waited for, briefly.
                for _ in range(100):
                    got = int(xget(os.path.join(args.mnt, topic, str(p)), "log_end_offset"))
                    if got >= leo[p]:
                        break
                    time.sleep(0.02)
                if got != leo[p]:
                    raise Fail("after %s: log_end_offset of partition %d is %d, %d records "
                               "were committed" % (fmt_op(op), p, got, leo[p]))
        for h in list(ex.handles.values()):
            ex.run({"op": "close", "h": h.hid})
        for p in range(NPART):
            leo[p] += ex.commits[p]
            ex.commits[p] = 0
            got = None
            for _ in range(100):
                got = int(xget(os.path.join(args.mnt, topic, str(p)), "log_end_offset"))
                if got >= leo[p]:
                    break
                time.sleep(0.05)
            if got != leo[p]:
                raise Fail("at the end: log_end_offset of partition %d is %d, %d records "
                           "were committed" % (p, got, leo[p]))
        for k, v in ex.values.items():
            got = call(cat, ex.path(k))
            if got != (v if v is not None else "ENOENT"):
                raise Fail("at the end: key %s reads %s, model %s" % (k, show(got), show(v)))
        i = len(ops)
    except Fail as e:
        return str(e), i + 1
    except OSError as e:
        return "OSError: %s" % e, i + 1
    finally:
        for h in list(ex.handles.values()):
            try:
                os.close(h.fd)
            except OSError:
                pass
    return None


def shrink(args, ops, budget):
    """Delta debugging (ddmin) over the trace: the smallest failing subsequence found."""
    data = os.path.join(args.dir, "shrink-data")
    os.makedirs(data, exist_ok=True)
    mount = Mount(args.topicfs, data, args.mnt, args.mount_opts,
                  os.path.join(args.dir, "shrink-log"), args.timeout)
    mount.start()
    tries = [0]
    stop = time.monotonic() + args.shrink_secs

    def remount():
        mount.stop()
        mount.start()

    def fails(cand):
        tries[0] += 1
        return replay(args, cand, remount, "r%d" % tries[0])

    try:
        r = fails(ops)
        if not r:
            return None, ops
        msg, upto = r
        ops = ops[:upto]          # what follows the failing operation does not matter
        n = 2
        while len(ops) >= 2 and tries[0] < budget and time.monotonic() < stop:
            chunk = max(1, len(ops) // n)
            reduced = False
            for i in range(0, len(ops), chunk):
                cand = ops[:i] + ops[i + chunk:]
                r = fails(cand)
                if r:
                    msg, upto = r
                    ops, reduced = cand[:upto], True
                    n = max(n - 1, 2)
                    break
                if tries[0] >= budget or time.monotonic() >= stop:
                    break
            if not reduced:
                if chunk == 1:
                    break
                n = min(len(ops), n * 2)
        return msg, ops
    finally:
        mount.stop()


# ------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--ops", type=int, default=600, help="operations per process")
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--phases", type=int, default=6)
    ap.add_argument("--segment-bytes", type=int, default=4096)
    ap.add_argument("--cleaner-threads", type=int, default=0,
                    help="background cleaner threads (history then checked as a subsequence)")
    ap.add_argument("--topicfs", default=None)
    ap.add_argument("--opts", default="", help="extra -o options")
    ap.add_argument("--timeout", type=int, default=600, help="seconds before the daemon is killed")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--replay", metavar="TRACE", help="run a trace file in one process")
    ap.add_argument("--shrink", action="store_true",
                    help="with --replay: cut the trace down to a minimal failing one")
    ap.add_argument("--no-shrink", action="store_true",
                    help="on a failure, do not cut the failing worker's trace down")
    ap.add_argument("--shrink-budget", type=int, default=200, help="replays at most")
    ap.add_argument("--shrink-secs", type=int, default=150,
                    help="stop shrinking after this long (the best trace so far is printed)")
    for c in CLASSES:
        ap.add_argument("--no-" + c, action="store_true", help="no %s operations" % c)
    ap.add_argument("--no-size", action="store_true",
                    help="do not check the sizes stat and fstat report (racing page-cache "
                         "readers and writers can show another value's size)")
    args = ap.parse_args()
    global CHECK_SIZES
    CHECK_SIZES = not args.no_size
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    classes = {c for c in CLASSES if not getattr(args, "no_" + c)}
    if args.topicfs is None:
        bd = os.environ.get("BUILD_DIR", os.path.join(REPO, "build"))
        args.topicfs = os.environ.get("TOPICFS", os.path.join(bd, "topicfs"))
    args.topicfs = os.path.abspath(args.topicfs)
    if os.geteuid() != 0:
        print("# skip model: needs root (mounts FUSE)")
        print("model: 0 passed, 0 failed")
        return 0
    if not os.access(args.topicfs, os.X_OK):
        print("not ok - model: daemon binary %s not built" % args.topicfs)
        print("model: 0 passed, 1 failed")
        return 1
    args.mount_opts = ",".join(x for x in [
        "log.cleaner.threads=%d" % args.cleaner_threads, "partitions=%d" % NPART,
        "segment.bytes=%d" % args.segment_bytes, args.opts] if x)
    args.dir = tempfile.mkdtemp(prefix="topicfs-model.")
    args.mnt = os.path.join(args.dir, "mnt")
    args.topic = "m"
    name = "seed %d, %d procs x %d ops, %s" % (args.seed, args.procs, args.ops,
                                                "all classes" if len(classes) == len(CLASSES)
                                                else "without " + ",".join(
                                                    sorted(set(CLASSES) - classes)))
    print("# model: %s" % ("replay of " + args.replay if args.replay else name), flush=True)
    rc = 1
    try:
        if args.replay:
            with open(args.replay) as f:
                ops = [json.loads(ln) for ln in f if ln.strip()]
            if args.shrink:
                msg, ops = shrink(args, ops, args.shrink_budget)
            else:
                os.makedirs(args.mnt, exist_ok=True)
                m = Mount(args.topicfs, os.path.join(args.dir, "data"), args.mnt,
                          args.mount_opts, os.path.join(args.dir, "log"), args.timeout)
                os.makedirs(m.data, exist_ok=True)
                m.start()
                try:
                    r = replay(args, ops, lambda: (m.stop(), m.start()), "r")
                    msg = r and r[0]
                finally:
                    m.stop()
            if msg:
                print("not ok - replay of %s: %s" % (args.replay, msg))
                print("# trace (%d ops):" % len(ops))
                for op in ops:
                    print("#   " + json.dumps(op))
                print("model: 0 passed, 1 failed")
                return 1
            print("ok - replay of %s (%d ops)" % (args.replay, len(ops)))
            print("model: 1 passed, 0 failed")
            return 0
        t0 = time.time()
        failure, co = run_concurrent(args, classes)
        if failure is None:
            print("ok - model: %s (%d ops, %d records, %d renames, %d full checks, %.0f s)"
                  % (name, co.ops, sum(co.leo), co.renames, co.checks, time.time() - t0))
            print("model: 1 passed, 0 failed")
            rc = 0
            return 0
        proc, msg, trace = failure
        if proc is None:          # found by the coordinator: whose key?
            trace, key = None, trace
            for i in range(args.procs):
                if key and list(key) in [list(k) for k in own_keys(i)]:
                    proc = i
            if proc is not None:
                with open(os.path.join(args.dir, "trace-p%d" % proc)) as f:
                    trace = [json.loads(ln) for ln in f]
        print("not ok - model: %s" % name)
        for ln in msg.splitlines():
            print("#   " + ln)
        log = Mount.log_tail(co.mount, 15)
        if log:
            print("#   daemon log ends:\n" + "\n".join("#" + ln for ln in log.splitlines()))
        if trace:
            tf = os.path.join(tempfile.gettempdir(), "topicfs-model-%d-p%d.trace" % (args.seed, proc))
            with open(tf, "w") as f:
                for op in trace:
                    f.write(json.dumps(op) + "\n")
            print("#   worker %d's trace: %s (%d ops); its last operations:" % (proc, tf, len(trace)))
            for op in trace[-15:]:
                print("#     " + fmt_op(op))
            if failure[0] is None and key:
                print("#   its operations on %d/%s:" % tuple(key))
                for i, op in enumerate(trace):
                    if list(key) in [op.get(f) for f in ("k", "a", "b")] or op["op"] in (
                            "remount", "rollclean") or "h" in op and any(
                            o.get("op") == "open" and o["h"] == op["h"] and o["k"] == list(key)
                            for o in trace[:i + 1]):
                        print("#     %d.%d %s" % (proc, i + 1, fmt_op(op)))
            print("#   replay: %s --replay %s [--shrink]" % (sys.argv[0], tf), flush=True)
            if not args.no_shrink:
                smsg, small = shrink(args, trace, args.shrink_budget)
                if smsg:
                    sf = tf + ".min"
                    with open(sf, "w") as f:
                        for op in small:
                            f.write(json.dumps({k: v for k, v in op.items() if k != "res"}) + "\n")
                    print("#   shrunk to %d ops (%s): %s" % (len(small), sf, smsg.splitlines()[0]))
                    for op in small:
                        print("#     " + fmt_op(op))
                else:
                    print("#   the trace alone does not fail in one process (an interleaving "
                          "with other workers is needed)")
        if not trace:
            print("#   every worker's trace: %s/trace-p*; a shared key's failure needs the "
                  "interleaving: rerun the seed" % args.dir)
        argv = [a for i, a in enumerate(sys.argv) if a != "--seed" and (
            i == 0 or sys.argv[i - 1] != "--seed") and not a.startswith("--seed=")]
        print("# rerun: %s --seed %d" % (" ".join(argv), args.seed))
        print("model: 0 passed, 1 failed")
        return 1
    finally:
        if args.keep or rc:
            print("# kept %s" % args.dir)
        else:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
