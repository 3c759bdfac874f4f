#!/bin/bash
# test_commit.sh - one commit, one record (README "Writing"), counted in the log:
#   - .put / .append: a single write(2) of any size from 1 B to 8 MiB, and the same
#     bytes cut into arbitrary write(2) calls, give exactly one record per line, and
#     every key reads back its own value (a line joined across the kernel's write
#     requests once read freed memory);
#   - a created or truncated descriptor commits once, at its last close, and only if
#     nothing was written through it; nobody else's lookup, stat, cat or listing
#     turns it into a record, nor does the close of a copy (dup, a shell redirect);
#   - O_APPEND descriptors add their bytes onto the newest value: parallel `>>`
#     lose no line;
#   - re-reads of an unchanged value come from the page cache, and no reader ever
#     sees another version's bytes or length.
# Counting is by log_end_offset and the .history listing, never by what a read
# returns alone. Waiting is on events (a remount, a descriptor closed), never on time.
. "$(dirname "$0")/lib.sh"
t_require_daemon

T_PUT=$T_DIR/put.py
cat > "$T_PUT" <<'PYEOF'
"""put.py MNT MODE SEED SIZE...: for each SIZE, a new topic gets .put lines of exactly
SIZE bytes (MODE single: one write(2); split: cut at random points, seeded; append:
.append lines in one write(2)), then the log must have grown by one record per line
and every key must read back its value and be listed once. Prints what failed."""
import os, random, sys

mnt, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
sizes = [int(s) for s in sys.argv[4:]]
rng = random.Random(seed)
PRINTABLE = bytes(32 + b % 95 for b in range(256))   # no newline in a value
bad = []


def name(n):
    digits, s = b"0123456789abcdefghijklmnopqrstuvwxyz", b""
    while True:
        s, n = digits[n % 36:n % 36 + 1] + s, n // 36
        if n == 0:
            return s


def lines_of(size, keyed):
    """[key, value length, terminated] lines of exactly size bytes in all."""
    per, lines, used = max(1, size // 2000), [], 0   # <= ~4,000 keys to read back
    while True:
        head = len(name(len(lines))) + 1 if keyed else 0
        n = head + rng.randrange(0, 2 * per) + 1
        if used + n > size:
            break
        lines.append([name(len(lines)), n - head - 1, True])
        used += n
    rest, head = size - used, len(name(len(lines))) + 1 if keyed else 0
    if rest >= max(head, 1):
        lines.append([name(len(lines)), rest - head, False])   # taken at close
    else:
        lines[-1][1] += rest
    return lines


def cuts(data):
    pos, parts = 0, []
    while pos < len(data):
        n = rng.choice([1, 2, rng.randrange(1, 70), rng.randrange(1, 5000),
                        rng.randrange(1, 200000), rng.randrange(1, 3 << 20)])
        parts.append(data[pos:pos + n])
        pos += n
    return parts


for rnd, size in enumerate(sizes):
    keyed = mode != "append"
    part = os.path.join(mnt, "s%d-%d" % (seed, rnd), "0")
    os.mkdir(os.path.dirname(part))
    vals, out = {}, []
    for k, vlen, term in lines_of(size, keyed):
        v = rng.randbytes(vlen).translate(PRINTABLE)
        vals[k] = v
        out.append((k + b"\t" if keyed else b"") + v + (b"\n" if term else b""))
    data = b"".join(out)
    assert len(data) == size, (len(data), size)
    fd = os.open(os.path.join(part, ".put" if keyed else ".append"), os.O_WRONLY)
    try:
        for piece in ([data] if mode != "split" else cuts(data)):
            while piece:
                piece = piece[os.write(fd, piece):]
    finally:
        os.close(fd)
    got = int(os.getxattr(part, "user.topicfs.log_end_offset"))
    if keyed:
        got -= 1                # the .put transaction's COMMIT marker
    if got != len(out):
        bad.append("size %d (%s): %d records for %d lines" % (size, mode, got, len(out)))
    if not keyed:
        continue
    for k, v in vals.items():
        try:
            with open(os.path.join(part, os.fsdecode(k)), "rb") as f:
                r = f.read()
        except OSError as e:
            bad.append("size %d: key %r: %s" % (size, k, e))
            continue
        if r != v:
            bad.append("size %d: key %r reads %d bytes, wrote %d" % (size, k, len(r), len(v)))
    names = sorted(os.listdir(part))
    if names != sorted(os.fsdecode(k) for k in vals):
        bad.append("size %d: %d names listed for %d keys" % (size, len(names), len(vals)))
for b in bad[:20]:
    print(b)
sys.exit(1 if bad else 0)
PYEOF

KIB=1024 MIB=$((1024 * 1024))
# Sizes at and around every buffer and bound a line or a write meets: the handle's
# first allocations (64 B, doubling), a page, FUSE's write requests (128 KiB pages,
# 1 MiB max_write), max.message.bytes (1048588), and several of each.
SIZES="2 3 4 63 64 65 127 128 129 255 256 257 4095 4096 4097 65535 65536 65537
	$((128 * KIB - 1)) $((128 * KIB)) $((128 * KIB + 1)) $((MIB - 1)) $MIB $((MIB + 1))
	1048588 1048589 $((2 * MIB - 1)) $((2 * MIB)) $((2 * MIB + 1)) $((3 * MIB + 7)) $((8 * MIB))"

c_put_single_writes() {
	t_mount
	# shellcheck disable=SC2086
	assert_ok "$T_PY" "$T_PUT" "$MNT" single 1 $SIZES
}

c_put_split_writes() {
	t_mount
	local seed
	for seed in 1 2 3; do
		# shellcheck disable=SC2086
		assert_ok "$T_PY" "$T_PUT" "$MNT" split "$seed" $SIZES
	done
}

c_append_single_and_split_writes() {
	t_mount
	# shellcheck disable=SC2086
	assert_ok "$T_PY" "$T_PUT" "$MNT" append 1 1 $SIZES
}

# The report's reproduction: 20,000 lines "bkN<TAB>" + 100 bytes in one os.write.
c_put_twenty_thousand_lines() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	out=$("$T_PY" - "$p" <<'EOF'
import os, sys
p = sys.argv[1]
lines = [b"bk%d\t%s\n" % (i, b"%03d" % (i % 1000) * 33 + b"z") for i in range(20000)]
fd = os.open(p + "/.put", os.O_WRONLY)
data = b"".join(lines)
while data:
    data = data[os.write(fd, data):]
os.close(fd)
bad = [i for i in range(20000) if open("%s/bk%d" % (p, i), "rb").read() != lines[i][len(b"bk%d\t" % i):-1]]
names = set(os.listdir(p))
print(len(bad), len(names), sorted(n for n in names if not n.startswith("bk"))[:3])
EOF
)
	assert_eq "0 20000 []" "$out" "keys read back wrong, keys listed, names nobody wrote"
	assert_eq 20001 "$(t_leo t/0)" "log end after one write of 20,000 lines (and the COMMIT)"
}

# A copy of the descriptor closed (exec 4>&-) is not the end of the open file: the
# truncation is not committed there, cat reads the previous value, and the file's
# one commit is what was written through it.
c_dup_close_commits_nothing() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	echo old > "$p/K"
	out=$(cd "$p" && bash -c 'exec 3>K; exec 4>&3; exec 4>&-; cat K
		getfattr --only-values -n user.topicfs.log_end_offset .; echo
		stat -c %s K; echo new >&3; exec 3>&-')
	assert_eq "old 1 4" "$(echo $out)" "cat, log end and size while the truncating fd is open"
	assert_eq 2 "$(t_leo t/0)" "log end: old, then new, nothing between"
	assert_cat "$p/K" $'new\n'
	assert_eq "old new" "$(cat "$p/.history/"* | xargs)" "values in the log"
	# A new name: seen, empty, and no record until the last close.
	out=$(cd "$p" && bash -c 'exec 3>N; exec 4>&3; exec 4>&-; printf "[%s] " "$(cat N)"
		getfattr --only-values -n user.topicfs.log_end_offset .
		echo; stat -c %s N; exec 3>&-')
	assert_eq "[] 2 0" "$(echo $out)" "cat, log end and size of a created name"
	t_remount                       # the last close's RELEASE is handled by now
	assert_eq 3 "$(t_leo t/0)" "log end: one empty value for N"
	assert_cat "$p/N" ""
}

# Truncations and creations closed without a write commit exactly one empty value
# each; an open of an existing key without O_TRUNC commits nothing.
c_truncate_and_create_commit_once() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	echo full > "$p/e"
	echo keep > "$p/k"
	touch "$p/new"
	: > "$p/e"
	touch "$p/k"
	sh -c ": >> '$p/k'"
	bash -c "exec 3>'$p/two'; exec 4>&3; exec 5>&3; exec 4>&- 5>&-; exec 3>&-"
	"$T_PY" -c "import os; os.close(os.open('$p/three', os.O_WRONLY | os.O_CREAT | os.O_TRUNC))"
	t_remount
	assert_eq 6 "$(t_leo t/0)" "log end: full, keep, new, e, two, three"
	assert_eq "e k new three two" "$(ls "$p" | xargs)" "listing"
	assert_eq "0 keep 0 0 0" "$( (stat -c %s "$p/e"; cat "$p/k"; stat -c %s "$p/new" "$p/two" \
		"$p/three") | xargs)" "values"
}

# A truncation closed without a write commits at its RELEASE, after close()
# returned; an fstat while it was open (which reports the previous value's size:
# FUSE's getattr does not say which descriptor asks) must not leave that size in
# the kernel's attribute cache, or stat right after the close shows the old length
# of a key that is now empty. 200 rounds, each counted (it showed in nearly every
# round when the attributes were cached).
c_truncate_then_stat_shows_the_commit() {
	t_mount -o cache_timeout=30
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0/k" <<'EOF'
import os, sys
k, stale = sys.argv[1], 0
for i in range(200):
    with open(k, "wb") as f:
        f.write(b"x" * 1504)
    fd = os.open(k, os.O_WRONLY | os.O_TRUNC)
    os.fstat(fd)
    os.close(fd)
    stale += os.stat(k).st_size != 0
print(stale)
EOF
)
	assert_eq 0 "$out" "rounds whose stat after ': > k' showed the old size"
	assert_eq 400 "$(t_leo t/0)" "records: 200 values and 200 truncations"
}

# Four shells rewrite one key 200 times each while others cat it and list the
# partition: 800 records, no empty one, and no reader ever sees an empty value.
c_redirect_loops_with_readers() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 i pids=() empties
	echo start > "$p/key"
	for i in 1 2 3 4; do
		(for j in $(seq 200); do echo "v$i-$j" > "$p/key"; done) &
		pids+=($!)
	done
	(while [ ! -e "$T_CASE/stop" ]; do
		v=$(cat "$p/key"); [ -n "$v" ] || echo EMPTY
		ls "$p" > /dev/null; stat -c %s "$p/key" > /dev/null
	done > "$T_CASE/reads") &
	local reader=$!
	for i in "${pids[@]}"; do wait "$i"; done
	touch "$T_CASE/stop"
	wait "$reader"
	empties=$(grep -c EMPTY "$T_CASE/reads" || :)
	assert_eq 0 "$empties" "empty values read"
	assert_eq 801 "$(t_leo t/0)" "records: start and 4 x 200"
	assert_eq 0 "$(find "$p/.history" -type f -empty | wc -l)" "empty records in the log"
}

# Parallel appenders: every line of every `>>` is kept, one record per append.
# A creation commits at its RELEASE, which reaches the daemon after close() returns:
# a rename, an unlink or a truncate right after it must wait for it, or the rename
# moves nothing and the unlink is undone by the empty value arriving after its
# tombstone. Four processes, each 200 x (create, close, rename) and (create, close,
# unlink); every step's records counted.
c_create_then_rename_or_remove() {
	t_mount
	mkdir "$MNT/t"
	"$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
from multiprocessing import Process
p = sys.argv[1]
def work(w):
    for i in range(200):
        a, b, c = "%s/a%d-%d" % (p, w, i), "%s/b%d-%d" % (p, w, i), "%s/c%d-%d" % (p, w, i)
        os.close(os.open(a, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        os.rename(a, b)
        os.close(os.open(c, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        os.unlink(c)
ps = [Process(target=work, args=(w,)) for w in range(4)]
for x in ps: x.start()
for x in ps: x.join()
sys.exit(max(x.exitcode for x in ps))
EOF
	# per round: a's empty value, b's, a's tombstone; c's empty value and tombstone
	assert_eq $((4 * 200 * 5)) "$(t_leo t/0)" "records of 800 create-rename and 800 create-unlink"
	assert_eq 800 "$(ls "$MNT/t/0" | grep -c '^b')" "renamed keys"
	assert_eq 0 "$(ls "$MNT/t/0" | grep -c '^[ac]' || true)" "created keys left behind"
	t_remount
	assert_eq 800 "$(ls "$MNT/t/0" | wc -l)" "keys after a remount"
	t_umount
}

c_parallel_appends() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 i pids=()
	echo first > "$p/log"
	for i in 1 2; do
		(for j in $(seq 100); do echo "line $i $j" >> "$p/log"; done) &
		pids+=($!)
	done
	for i in 1 2; do
		(for j in $(seq 50); do echo "new $i $j" >> "$p/fresh"; done) &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	assert_eq 201 "$(wc -l < "$p/log")" "lines kept of 1 + 2 x 100 appended"
	assert_eq 200 "$(sort -u "$p/log" | grep -c '^line ')" "distinct appended lines"
	assert_eq "first" "$(head -n1 "$p/log")" "the first line stays first"
	assert_eq 100 "$(wc -l < "$p/fresh")" "lines of a key created by >>"
	assert_eq 301 "$(t_leo t/0)" "records: one per append"
	# Each appender's own lines stay in its order.
	assert_eq "$(seq 100 | xargs)" "$(grep '^line 1 ' "$p/log" | cut -d' ' -f3 | xargs)" \
		"order of one appender's lines"
	# O_APPEND with O_RDWR reads what it would commit: the value it opened, plus its bytes.
	assert_eq "first|tail" "$("$T_PY" - "$p/log" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND)
os.write(fd, b"tail\n")
os.lseek(fd, 0, 0)
data = os.read(fd, 1 << 20).split(b"\n")
os.close(fd)
print(data[0].decode() + "|" + data[-2].decode())
EOF
)" "read back through an O_APPEND|O_RDWR descriptor"
	assert_eq tail "$(tail -n1 "$p/log")" "its line committed at the end"
}

# Re-reads of an unchanged value come from the kernel's page cache (no READ reaches
# the daemon), a new value is read whole at the next open, and a reader opened
# before an overwrite keeps its value; -o direct_reads sends every read(2) on.
key_reads() { awk '$1 == "topicfs_fs_key_reads_total" { print $2 }' "$MNT/.topicfs/metrics"; }
c_page_cache_rereads() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 r0 v
	v=$(printf 'value-%04d ' $(seq 500))
	echo "$v" > "$p/k"
	assert_cat "$p/k" "$v"$'\n'
	r0=$(key_reads)
	[ -n "$r0" ] || fail "no topicfs_fs_key_reads_total in .topicfs/metrics"
	for _ in 1 2 3; do assert_cat "$p/k" "$v"$'\n'; done
	assert_eq "$r0" "$(key_reads)" "READ requests for three warm re-reads"
	echo short > "$p/k"
	assert_cat "$p/k" $'short\n'
	assert_cat "$p/k" $'short\n'
	: > "$p/k"
	t_remount
	assert_cat "$p/k" ""
	echo "$v" > "$p/k"
	assert_cat "$p/k" "$v"$'\n'
	# mmap(MAP_SHARED) of a key on a writable mount, and a reader that holds its
	# descriptor across a shorter overwrite, a stat and a longer one.
	assert_eq "mmap ok, pinned ok, new ok" "$("$T_PY" - "$p/k" <<'EOF'
import mmap, os, sys
p = sys.argv[1]
want = open(p, "rb").read()
with open(p, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
    res = ["mmap ok" if m[:] == want else "mmap differs"]
    m.close()
r = os.open(p, os.O_RDONLY)
got = os.read(r, 5)
for new in (b"tiny", b"x" * 20000):
    with open(p, "wb") as f:
        f.write(new)
    os.stat(p)
while True:
    b = os.read(r, 7)
    if not b:
        break
    got += b
os.close(r)
res.append("pinned ok" if got == want else "pinned %d of %d" % (len(got), len(want)))
res.append("new ok" if open(p, "rb").read() == b"x" * 20000 and os.stat(p).st_size == 20000
           else "new differs")
print(", ".join(res))
EOF
)" "mmap, a pinned reader, the new value"
	t_umount
	t_mount -o direct_reads
	assert_cat "$p/k" "$(printf 'x%.0s' $(seq 20000))"
	r0=$(key_reads)
	cat "$p/k" > /dev/null
	assert_ne "$r0" "$(key_reads)" "READ requests of a re-read with -o direct_reads"
}

t_test put_single_writes c_put_single_writes
t_test put_split_writes c_put_split_writes
t_test append_single_and_split_writes c_append_single_and_split_writes
t_test put_twenty_thousand_lines c_put_twenty_thousand_lines
t_test dup_close_commits_nothing c_dup_close_commits_nothing
t_test truncate_and_create_commit_once c_truncate_and_create_commit_once
t_test truncate_then_stat_shows_the_commit c_truncate_then_stat_shows_the_commit
t_test redirect_loops_with_readers c_redirect_loops_with_readers
t_test parallel_appends c_parallel_appends
t_test page_cache_rereads c_page_cache_rereads
t_test create_then_rename_or_remove c_create_then_rename_or_remove
t_done
