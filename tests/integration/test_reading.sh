#!/bin/bash
# test_reading.sh - reading keys (docs/semantics.md §5): opens are served from kept
# windows of checked batches (fs/readcache.h), so these cases read keys of big .put
# batches and of single commits back exactly through overwrites (shorter and longer),
# tombstones, rolls, cleaning passes and remounts; a reader opened before an overwrite
# keeps its value in full while new opens see the new one, with and without -o
# reader_cache (there only where no reader is open across the change: the documented
# trade-off); and a read-only mount, where no value can change, reads through the
# page cache (mmap works); and the max_read mount option.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# MODEL: a python program that keeps a model of a partition (a dict key -> value) in
# a JSON file and checks the mount against it, or changes both.
MODEL='
import json, os, random, sys
op, part, state = sys.argv[1], sys.argv[2], sys.argv[3]
model = json.load(open(state)) if os.path.exists(state) else {}

def value(i, v):
    return ("key-%05d:v%d:" % (i, v)) + "abcdefghij"[v % 10] * ((i * 7 + v * 31) % 300)

if op == "put":                    # N keys through .put, in a few big write(2)s
    n = int(sys.argv[4])
    lines = ["key-%05d\t%s\n" % (i, value(i, 1)) for i in range(n)]
    fd = os.open(os.path.join(part, ".put"), os.O_WRONLY)
    for at in range(0, n, 1500):
        os.write(fd, "".join(lines[at:at + 1500]).encode())
    os.close(fd)
    for i in range(n):
        model["key-%05d" % i] = value(i, 1)
elif op == "change":               # overwrite (shorter or longer) and delete some keys
    rnd = random.Random(int(sys.argv[4]))
    keys = sorted(model)
    for k in rnd.sample(keys, len(keys) // 5):
        i = int(k[4:])
        v = rnd.randrange(2, 40)
        if rnd.random() < 0.2:
            os.unlink(os.path.join(part, k))
            del model[k]
        else:
            with open(os.path.join(part, k), "w") as f:
                f.write(value(i, v))
            model[k] = value(i, v)
elif op == "check":                # every key reads back exactly; the listing matches
    bad = [k for k, v in model.items() if open(os.path.join(part, k)).read() != v]
    names = sorted(os.listdir(part))
    if names != sorted(model):
        bad.append("listing: %d names, %d keys" % (len(names), len(model)))
    print("clean" if not bad else "wrong: %s" % bad[:5])
json.dump(model, open(state, "w"))
'

model() { "$T_PY" -c "$MODEL" "$1" "$MNT/t/0" "$T_CASE/model.json" "${@:2}"; }

# cp -r of the partition equals the model (what bench/fs.sh's cp -r does).
check_cp() {
	rm -rf "$T_CASE/copy"
	cp -r "$MNT/t/0" "$T_CASE/copy"
	assert_eq clean "$("$T_PY" - "$T_CASE/copy" "$T_CASE/model.json" <<'EOF'
import json, os, sys
d, model = sys.argv[1], json.load(open(sys.argv[2]))
bad = [k for k, v in model.items() if open(os.path.join(d, k)).read() != v]
if sorted(os.listdir(d)) != sorted(model):
    bad.append("names differ")
print("clean" if not bad else "wrong: %s" % bad[:5])
EOF
)" "cp -r of the partition $1"
}

c_put_batches_read_back() {
	t_mount
	mkdir "$MNT/t"
	model put 6000
	assert_eq clean "$(model check)" "keys of .put batches"
	check_cp "after the .put"
	local hits
	hits=$(awk '$1 == "topicfs_fs_read_window_hits_total" { print $2 }' "$MNT/.topicfs/metrics")
	[ "${hits:-0}" -gt 6000 ] || fail "key opens served from kept windows: ${hits:-none}"
	for round in 1 2 3; do
		model change "$round"
		assert_eq clean "$(model check)" "after overwrites and deletes, round $round"
		setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
		setfattr -n user.topicfs.clean -v 1 "$MNT/t/0"
		assert_eq clean "$(model check)" "after a cleaning pass, round $round"
		check_cp "after a cleaning pass, round $round"
	done
	t_remount
	assert_eq clean "$(model check)" "after a remount"
	check_cp "after a remount"
}

# PINNED: a reader opened before a change keeps its value in full (with a stat of the
# key and a cleaning pass in between); a new open sees the change. Keys of one big
# .put batch, so that the old value comes from a window kept by earlier opens.
PINNED='
import os, subprocess, sys
part, concurrent = sys.argv[1], sys.argv[2] == "1"
def readall(fd):
    out = b""
    while True:
        b = os.read(fd, 7)
        if not b:
            return out
        out += b
old = {}
fd = os.open(os.path.join(part, ".put"), os.O_WRONLY)
os.write(fd, b"".join(b"k%d\t%s\n" % (i, (b"old-%d-" % i) * (40 + i)) for i in range(200)))
os.close(fd)
res = []
for i, new in ((5, b"short"), (6, b"longer-" * 500), (7, b"")):
    p = os.path.join(part, "k%d" % i)
    with open(p, "rb") as f:
        old = f.read()
    assert old == (b"old-%d-" % i) * (40 + i), old[:20]
    r = os.open(p, os.O_RDONLY) if concurrent else None
    first = os.read(r, 3) if r is not None else b""
    with open(p, "wb") as f:
        f.write(new)
    os.stat(p)
    subprocess.run(["setfattr", "-n", "user.topicfs.roll", "-v", "1", part], check=True)
    subprocess.run(["setfattr", "-n", "user.topicfs.clean", "-v", "1", part], check=True)
    if r is not None:
        got = first + readall(r)
        os.close(r)
        res.append("old" if got == old else "cut(%d of %d)" % (len(got), len(old)))
    with open(p, "rb") as f:
        got = f.read()
    res.append("new" if got == new else "wrong(%d of %d)" % (len(got), len(new)))
    st = os.stat(p).st_size
    res.append("size" if st == len(new) else "size %d" % st)
print(" ".join(res))
'

c_reader_keeps_its_value() {
	t_mount
	mkdir "$MNT/t"
	assert_eq "old new size old new size old new size" \
		"$("$T_PY" -c "$PINNED" "$MNT/t/0" 1)" "readers across shorter, longer, empty overwrites"
}

c_reader_cache_new_opens_exact() {
	t_mount -o reader_cache
	mkdir "$MNT/t"
	assert_eq "new size new size new size" "$("$T_PY" -c "$PINNED" "$MNT/t/0" 0)" \
		"new opens after shorter, longer, empty overwrites with -o reader_cache"
}

c_read_only_mount_page_cache() {
	t_mount
	mkdir "$MNT/t"
	model put 3000
	t_remount -o ro
	assert_eq clean "$(model check)" "keys on a read-only mount"
	check_cp "on a read-only mount"
	# Readers go through the page cache there: mmap(MAP_SHARED) of a key works
	# (direct I/O handles refuse it with ENODEV), twice, and matches read().
	assert_eq "ok ok" "$("$T_PY" - "$MNT/t/0" <<'EOF'
import mmap, os, sys
p = os.path.join(sys.argv[1], "key-00042")
want = open(p, "rb").read()
res = []
for _ in range(2):
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
        res.append("ok" if m[:] == want and len(want) > 0 else "differs")
        m.close()
print(" ".join(res))
EOF
)" "mmap of a key on a read-only mount"
}

# max_read (opts.c): 32 KiB unless given; any size reads values of any length whole.
c_max_read() {
	t_mount
	assert_match ".*max_read=32768.*" "$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)" \
		"default max_read in the mount options"
	t_umount "$MNT"
	t_mount -o max_read=4096
	assert_match ".*max_read=4096.*" "$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)" \
		"max_read=4096 in the mount options"
	mkdir "$MNT/t"
	head -c 100000 /dev/urandom > "$T_CASE/v"
	cp "$T_CASE/v" "$MNT/t/0/big"
	echo small > "$MNT/t/0/small"
	assert_same_file "$T_CASE/v" "$MNT/t/0/big" "a 100000-byte value read in 4 KiB READs"
	assert_cat "$MNT/t/0/small" "small
"
	t_umount "$MNT"
	T_MOUNT_MAY_EXIT=1 t_mount -o max_read=100 || true
	[ "${T_MOUNT_EXIT:-0}" != 0 ] || fail "max_read=100 was accepted"
}

# A reader that keeps its descriptor across writers (less, tail -f, a program
# re-reading its config): the kernel shares one i_size and one page cache per inode,
# so a writer on the same inode would cut or pad that reader's reads (an O_TRUNC open
# sets i_size to 0, a write past it grows it). A writer that meets page-cache readers
# therefore gets a fresh inode (docs/semantics.md §5). Checked sequentially (every
# read pattern between the writer's chunks, fstat through the reader, truncate(2) by
# path) and then with threads: 4 readers holding descriptors, 2 writers looping.
LONGHELD='
import os, random, sys, threading, time, zlib
part, secs = sys.argv[1], float(sys.argv[2])
p = os.path.join(part, "k")
def make(tag, n):
    body = (b"%s:" % tag) * n
    return body + b"#%08x" % zlib.crc32(body)
def valid(v):
    body, sep, crc = v.rpartition(b"#")
    return sep == b"#" and crc == b"%08x" % zlib.crc32(body)
def readall(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    out = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            return out
        out += b
bad = []
v = make(b"v0", 900)
# through .put: a writer handle on k would leave its RELEASE queued after close,
# and a reader opened before it lands reads directly (no inode of its own)
with open(os.path.join(part, ".put"), "wb") as f:
    f.write(b"k\t" + v + b"\n")
r = os.open(p, os.O_RDONLY)
if readall(r) != v:
    bad.append("first read")
for i, n in enumerate((3000, 5, 900, 1, 2000)):
    new = make(b"w%d" % i, n)
    w = os.open(p, os.O_WRONLY | os.O_TRUNC)
    for a, b in ((0, len(new) // 3), (len(new) // 3, 2 * len(new) // 3), (2 * len(new) // 3, len(new))):
        os.write(w, new[a:b])
        got = [os.pread(r, 4096, 0), os.pread(r, 8192, 4096), os.pread(r, 100, len(v) - 50), readall(r)]
        if got != [v[:4096], v[4096:12288], v[len(v) - 50:], v]:
            bad.append("write %d: reader saw %s" % (i, [len(g) for g in got]))
        if os.fstat(r).st_size != len(v):
            bad.append("write %d: fstat of the reader %d" % (i, os.fstat(r).st_size))
    os.close(w)
    if readall(r) != v:
        bad.append("commit %d: reader changed" % i)
    with open(p, "rb") as f:
        if f.read() != new:
            bad.append("commit %d: a new open" % i)
    if os.stat(p).st_size != len(new):
        bad.append("commit %d: stat %d" % (i, os.stat(p).st_size))
os.truncate(p, 10)
if readall(r) != v or os.fstat(r).st_size != len(v):
    bad.append("truncate(2): reader changed")
if os.stat(p).st_size != 10 or open(p, "rb").read() != new[:10]:
    bad.append("truncate(2): the path")
os.close(r)
with open(p, "wb") as f:
    f.write(v)

stop = time.time() + secs
counts = [0, 0]
def reader(seed):
    rnd = random.Random(seed)
    while time.time() < stop:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError as e:
            bad.append("reader open: %s" % e)
            return
        first = readall(fd)
        if not valid(first):
            bad.append("torn first read: %d bytes %r" % (len(first), first[:30]))
        for _ in range(rnd.randrange(1, 30)):
            at = rnd.randrange(0, len(first) + 10)
            n = rnd.randrange(1, 9000)
            if os.pread(fd, n, at) != first[at:at + n]:
                bad.append("reader of %d bytes: pread(%d, %d) differs" % (len(first), n, at))
                break
            counts[0] += 1
            time.sleep(rnd.random() / 500)
        os.close(fd)
def writer(seed):
    rnd = random.Random(seed)
    while time.time() < stop:
        new = make(b"s%d-%d" % (seed, rnd.randrange(10**6)), rnd.choice((1, 50, 900, 2500)))
        try:
            w = os.open(p, os.O_WRONLY | os.O_TRUNC)
            cut = rnd.randrange(1, len(new))
            os.write(w, new[:cut])
            time.sleep(rnd.random() / 500)
            os.write(w, new[cut:])
            os.close(w)
            counts[1] += 1
        except OSError as e:
            bad.append("writer: %s" % e)
            return
ts = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
ts += [threading.Thread(target=writer, args=(10 + i,)) for i in range(2)]
for t in ts:
    t.start()
for t in ts:
    t.join()
if counts[1] == 0 or counts[0] == 0:
    bad.append("nothing ran: %s" % counts)
print("# %d reads, %d commits" % tuple(counts))
print("clean" if not bad else "wrong: %s" % bad[:8])
'

c_long_held_reader_and_writers() {
	t_mount
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" -c "$LONGHELD" "$MNT/t/0" "${T_CONC_SECS:-10}")
	printf '%s\n' "$out" | grep '^#' || true
	assert_eq clean "$(printf '%s\n' "$out" | grep -v '^#')" "readers holding descriptors across writers"
	local retired
	retired=$(awk '$1 == "topicfs_fs_retired_inodes_total" { print $2 }' "$MNT/.topicfs/metrics")
	[ "${retired:-0}" -gt 0 ] || fail "no writer met a page-cache reader (retired inodes: ${retired:-none})"
}

t_test put_batches_read_back c_put_batches_read_back
t_test reader_keeps_its_value c_reader_keeps_its_value
t_test reader_cache_new_opens_exact c_reader_cache_new_opens_exact
t_test read_only_mount_page_cache c_read_only_mount_page_cache
t_test max_read c_max_read
t_test long_held_reader_and_writers c_long_held_reader_and_writers
t_done
