#!/bin/bash
# test_basic.sh - topics, partitions and keys driven with everyday shell tools
# (docs/semantics.md §1, §4, §5): every committed write is exactly
# one record, reads append nothing, values read back byte for byte.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# mkdir makes topics and adds partitions; control entries are never listed.
c_topics() {
	t_mount -o partitions=3
	assert_ok mkdir "$MNT/t"
	assert_eq "0 1 2" "$(ls "$MNT/t" | xargs)" "partitions of a new topic with -o partitions=3"
	assert_ok mkdir "$MNT/t/3"
	assert_eq "0 1 2 3" "$(ls "$MNT/t" | xargs)" "partitions after mkdir t/3"
	assert_ok mkdir "$MNT/u"
	assert_eq "t u" "$(ls -A "$MNT" | xargs)" "ls -A of the root (no control entries)"
	assert_eq "0 1 2" "$(ls -A "$MNT/u" | xargs)" "ls -A of a topic"
	assert_eq "" "$(ls -A "$MNT/t/0")" "ls -A of an empty partition"
	assert_eq directory "$(stat -c %F "$MNT/t/3")" "type of a partition"
	t_umount
	assert_eq "t-0 t-1 t-2 t-3 u-0 u-1 u-2" "$(cd "$DATA" && ls -d ./*-[0-9]* | sed 's|^\./||' | xargs)" \
		"partition directories in the data dir"
	assert_ok test -f "$DATA/topics/t"
	t_mount
	assert_eq "0 1 2 3" "$(ls "$MNT/t" | xargs)" "partitions after remount"
}

c_echo_cat() {
	t_mount
	mkdir "$MNT/t"
	local k=$MNT/t/0/greeting
	assert_records t/0 1 sh -c "echo hello > '$k'"
	assert_cat "$k" $'hello\n'
	assert_eq "6 1 regular file" "$(stat -c '%s %h %F' "$k")" "size, links, type"
	assert_records t/0 1 sh -c "echo bye > '$k'"
	assert_cat "$k" $'bye\n'
	assert_eq greeting "$(ls "$MNT/t/0")" "listing"
}

c_printf_no_newline_and_big() {
	t_mount
	mkdir "$MNT/t"
	assert_records t/0 1 sh -c "printf 'a\tb' > '$MNT/t/0/k'"
	assert_cat "$MNT/t/0/k" $'a\tb'
	# A pipeline writes in many write(2) calls; the single close is still one record.
	assert_records t/0 1 sh -c "head -c 300000 /dev/zero | tr '\\0' y > '$MNT/t/0/big'"
	assert_eq 300000 "$(stat -c %s "$MNT/t/0/big")" "size of a 300000-byte value"
	assert_eq 0 "$(tr -d y < "$MNT/t/0/big" | wc -c)" "bytes of the value that are not 'y'"
}

c_tee() {
	t_mount
	mkdir "$MNT/t"
	assert_records t/0 2 sh -c "echo v | tee '$MNT/t/0/a' '$MNT/t/0/b' > /dev/null"
	assert_cat "$MNT/t/0/a" $'v\n'
	assert_cat "$MNT/t/0/b" $'v\n'
	assert_records t/0 1 sh -c "echo w | tee -a '$MNT/t/0/a' > /dev/null"
	assert_cat "$MNT/t/0/a" $'v\nw\n'
}

c_dd() {
	t_mount
	mkdir "$MNT/t"
	local k=$MNT/t/0/blob src=$T_CASE/src
	head -c 262144 /dev/urandom > "$src"
	assert_records t/0 1 dd if="$src" of="$k" bs=4k status=none
	assert_same_file "$src" "$k" "value written by dd bs=4k"
	# Patch in the middle without truncating: one record, the rest unchanged.
	printf XYZ | dd of="$src" bs=1 seek=1000 conv=notrunc status=none
	assert_records t/0 1 sh -c "printf XYZ | dd of='$k' bs=1 seek=1000 conv=notrunc status=none"
	assert_same_file "$src" "$k" "value after dd conv=notrunc seek=1000"
	# conv=fsync: the fsync commits, the close after it has nothing new: one record.
	head -c 5000 /dev/urandom > "$src"
	assert_records t/0 1 dd if="$src" of="$k" bs=1k conv=fsync status=none
	assert_same_file "$src" "$k" "value written by dd conv=fsync"
	# Reading it back with dd appends nothing.
	assert_records t/0 0 dd if="$k" of=/dev/null bs=512 status=none
}

c_truncate() {
	t_mount
	mkdir "$MNT/t"
	local k=$MNT/t/0/k
	printf abcdef > "$k"
	assert_records t/0 1 truncate -s 3 "$k"
	assert_cat "$k" abc
	assert_records t/0 1 truncate -s 6 "$k"
	assert_eq "616263000000" "$(od -An -tx1 "$k" | tr -d ' \n')" "bytes after growing to 6"
	# truncate(1) on a missing name creates the key: one record.
	assert_records t/0 1 truncate -s 5 "$MNT/t/0/new"
	assert_eq 5 "$(stat -c %s "$MNT/t/0/new")" "size of a key created by truncate -s 5"
	# truncate(2) by path (no open handle).
	assert_records t/0 1 t_sys truncate "$k" 1
	assert_cat "$k" a
	# open(O_RDONLY|O_TRUNC) truncates on Linux: the empty value, one record.
	assert_records t/0 1 "$T_PY" -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_TRUNC))' "$k"
	assert_eq 0 "$(stat -c %s "$k")" "size after an O_RDONLY|O_TRUNC open"
}

c_append_redirect() {
	t_mount
	mkdir "$MNT/t"
	local k=$MNT/t/0/log
	assert_records t/0 1 sh -c "echo a >> '$k'"       # >> creates a missing key
	assert_records t/0 1 sh -c "echo b >> '$k'"
	assert_records t/0 1 sh -c "printf c >> '$k'"
	assert_cat "$k" $'a\nb\nc'
	assert_eq "a a b a b c" "$(for o in $(t_x "$k" versions); do cat "$MNT/t/0/.history/$(t_off "$o")"; done | xargs)" \
		"the three versions of the key (a, ab, abc), in order"
}

c_touch_and_empty_values() {
	t_mount
	mkdir "$MNT/t"
	local k=$MNT/t/0/new
	assert_records t/0 1 touch "$k"
	assert_eq 0 "$(stat -c %s "$k")" "size after touch"
	assert_eq 0 "$(t_x "$MNT/t/0/.history/$(t_last t/0)" tombstone)" "tombstone attr of an empty value"
	echo full > "$k"
	assert_records t/0 1 sh -c ": > '$k'"
	assert_cat "$k" ""
	assert_eq new "$(ls "$MNT/t/0")" "an empty value is a live key"
	# touch of an existing key changes no value: no record, and it succeeds.
	assert_records t/0 0 touch "$k"
	assert_records t/0 0 touch -d @0 "$k"
}

c_rm() {
	t_mount
	mkdir "$MNT/t"
	local k=$MNT/t/0/gone
	echo v > "$k"
	echo w > "$MNT/t/0/stays"
	assert_records t/0 1 rm "$k"
	assert_absent "$k"
	assert_errno ENOENT read "$k"
	assert_eq stays "$(ls "$MNT/t/0")" "listing after rm"
	local h
	h=$MNT/t/0/.history/$(t_last t/0)
	assert_eq "1 gone 0" "$(t_x "$h" tombstone) $(t_x "$h" key) $(stat -c %s "$h")" \
		"tombstone, key and size of the newest history entry"
	# A second rm has nothing to delete: ENOENT and no record.
	assert_records t/0 0 assert_errno ENOENT unlink "$k"
	assert_fails rm "$k"
	# The key can come back.
	assert_records t/0 1 sh -c "echo again > '$k'"
	assert_cat "$k" $'again\n'
}

c_reads_append_nothing() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	echo one > "$p/a"; printf two > "$p/b"; : > "$p/c"; rm "$p/c"; echo x > "$p/d"
	assert_records t/0 0 sh -c "
		cat '$p/a' '$p/b' > /dev/null
		head -c1 '$p/a' > /dev/null
		ls -l '$p' > /dev/null; ls -lR '$MNT' > /dev/null; ls -A '$p/.history' > /dev/null
		stat '$p/a' '$p/b' > /dev/null
		find '$MNT' > /dev/null; du -s '$MNT' > /dev/null; df '$MNT' > /dev/null
		getfattr -d -m - '$p/a' > /dev/null 2>&1
		wc -c '$p/a' > /dev/null; md5sum '$p/a' > /dev/null
		cat '$p/.history/'* > /dev/null
		cp '$p/a' '$T_CASE/copy'"
	# Opens without writes, in every access mode, do not append either.
	assert_records t/0 0 assert_errno OK open "$p/a" r
	assert_records t/0 0 assert_errno OK open "$p/a" rw
	assert_records t/0 0 assert_errno OK open "$p/a" w
	assert_records t/0 0 assert_errno OK open "$p/a" a
	assert_records t/0 0 assert_errno OK open "$p/a" wc
	assert_records t/0 0 assert_errno ENOENT open "$p/nokey" w
	assert_cat "$p/a" $'one\n'
}

c_ls_find_stat() {
	t_mount
	mkdir "$MNT/t" "$MNT/t/1" "$MNT/u"
	echo 1 > "$MNT/t/0/k1"; echo 22 > "$MNT/t/0/k2"; echo 333 > "$MNT/t/1/k3"
	echo x > "$MNT/u/0/k4"; rm "$MNT/u/0/k4"
	local want
	want=$(printf '%s\n' t t/0 t/0/k1 t/0/k2 t/1 t/1/k3 u u/0)
	assert_eq "$want" "$(cd "$MNT" && find . -mindepth 1 | sed 's|^\./||' | sort)" "find listing"
	assert_eq "$(printf '%s\n' t/0/k1 t/0/k2 t/1/k3)" \
		"$(cd "$MNT" && find . -type f | sed 's|^\./||' | sort)" "find -type f"
	assert_eq ". .. k1 k2" "$(ls -a "$MNT/t/0" | xargs)" "ls -a of a partition"
	assert_eq "2 3" "$(ls -l "$MNT/t/0" | awk '/^-/ {print $5}' | xargs)" "sizes in ls -l"
	local k=$MNT/t/0/k1 i1 i2 ts
	assert_eq "2 1" "$(stat -c '%s %h' "$k")" "stat size and links"
	ts=$(t_x "$k" timestamp)
	assert_eq $((ts / 1000)) "$(stat -c %Y "$k")" "st_mtime = record timestamp (ms) / 1000"
	assert_eq "$(stat -c %Y "$k")" "$(stat -c %Z "$k")" "st_ctime = st_mtime"
	i1=$(stat -c %i "$k")
	echo more > "$MNT/t/0/k5"; ls -l "$MNT/t/0" > /dev/null
	i2=$(stat -c %i "$k")
	assert_eq "$i1" "$i2" "st_ino of a key while mounted"
	assert_ne "$i1" "$(stat -c %i "$MNT/t/0/k2")" "st_ino of two different keys"
}

# One handle commits at fsync and at close only if it has unwritten changes.
c_fsync_and_close_commit() {
	t_mount
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
part = sys.argv[1]
leo = lambda: int(os.getxattr(part, "user.topicfs.log_end_offset"))
k = os.path.join(part, "k")
seen = []
l0 = leo()
fd = os.open(k, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"a")
seen.append(leo() - l0)          # 0: nothing committed before fsync/close
os.fsync(fd)
seen.append(leo() - l0)          # 1: fsync commits
os.close(fd)
seen.append(leo() - l0)          # 1: nothing new to commit at close
fd = os.open(k, os.O_WRONLY)
os.write(fd, b"b")
os.fsync(fd)
os.write(fd, b"c")
os.close(fd)
seen.append(leo() - l0)          # 3: fsync, then close with new bytes
fd = os.open(k, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"d")
d = os.dup(fd)
os.close(d)
seen.append(leo() - l0)          # 4: the first close (flush) of a dirty handle commits
os.close(fd)
seen.append(leo() - l0)          # 4: the last close finds it clean
with open(k, "rb") as f:
    seen.append(f.read().decode())
print(" ".join(map(str, seen)))
EOF
)
	assert_eq "0 1 1 3 4 4 bcd" "$out" "records after write, fsync, close, dup+close (and the value)"
}

# A writing handle reads its own bytes; nobody else sees them before the commit.
c_uncommitted_bytes_are_private() {
	t_mount
	mkdir "$MNT/t"
	echo old > "$MNT/t/0/k"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
part = sys.argv[1]
k = os.path.join(part, "k")
res = []
fd = os.open(k, os.O_RDWR)
os.pwrite(fd, b"NEW!", 0)
res.append(os.pread(fd, 100, 0).decode().strip())       # own bytes: NEW!
res.append(str(os.fstat(fd).st_size))                     # 4
with open(k, "rb") as f:
    res.append(f.read().decode().strip())                 # others: old
os.close(fd)
with open(k, "rb") as f:
    res.append(f.read().decode().strip())                 # after close: NEW!
# A new key being written: no other opener sees its bytes before close.
n = os.path.join(part, "fresh")
fd = os.open(n, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"secret")
res.append(str(os.fstat(fd).st_size))                     # 6
try:
    with open(n, "rb") as f:
        res.append("reader:" + (f.read().decode() or "empty"))
except FileNotFoundError:
    res.append("reader:ENOENT")
os.close(fd)
with open(n, "rb") as f:
    res.append(f.read().decode())
print(" ".join(res))
EOF
)
	assert_match "NEW! 4 old NEW! 6 reader:(ENOENT|empty) secret" "$out" \
		"own bytes, fstat size, other readers, after close"
}

# read() returns the value as of open, whatever is written or deleted meanwhile.
c_reader_pins_its_value() {
	t_mount
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
part = sys.argv[1]
k = os.path.join(part, "k")
a = bytes((i * 7) % 251 for i in range(600000))
with open(k, "wb") as f:
    f.write(a)
r = os.open(k, os.O_RDONLY)
first = os.read(r, 4096)
with open(k, "wb") as f:
    f.write(b"B" * 300000)
rest = b""
while True:
    b = os.read(r, 65536)
    if not b:
        break
    rest += b
ok1 = first + rest == a
os.close(r)
r = os.open(k, os.O_RDONLY)
os.unlink(k)
got = b""
while True:
    b = os.read(r, 65536)
    if not b:
        break
    got += b
os.close(r)
print(ok1, got == b"B" * 300000)
EOF
)
	assert_eq "True True" "$out" "reader kept its value across an overwrite, and across an unlink"
}

# Readers opened before and during a truncating writer's life read the committed value
# whole: never empty, never cut to the writer's size (O_TRUNC is part of the uncommitted
# change, like the bytes written after it).
c_readers_during_truncating_writer() {
	t_mount
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0/k" <<'EOF'
import os, sys
p = sys.argv[1]
old = b"old-value\n" * 1000
with open(p, "wb") as f:
    f.write(old)
def readall(fd):
    out = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            return out
        out += b
r1 = os.open(p, os.O_RDONLY)
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
res = ["r1-after-trunc:" + ("old" if readall(r1) == old else "wrong")]
os.lseek(r1, 0, 0)
os.write(w, b"NEW" * 100)
r2 = os.open(p, os.O_RDONLY)
got = readall(r2)
res.append("r2-during-write:" + ("old" if got == old else "wrong(%d bytes, %r)" % (len(got), got[:10])))
got = readall(r1)
res.append("r1-during-write:" + ("old" if got == old else "wrong(%d bytes, %r)" % (len(got), got[:10])))
os.close(w)
with open(p, "rb") as f:
    res.append("after-close:" + ("new" if f.read() == b"NEW" * 100 else "wrong"))
print(" ".join(res))
EOF
)
	assert_eq "r1-after-trunc:old r2-during-write:old r1-during-write:old after-close:new" "$out" \
		"what readers saw while a writer with O_TRUNC was open"
}

# A key created by open(O_CREAT) exists for path operations before its first close.
c_new_key_before_first_close() {
	t_mount
	mkdir "$MNT/t"
	local out
	out=$("$T_PY" - "$MNT/t/0/new" <<'EOF'
import errno, os, sys
p = sys.argv[1]
res = []
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"abc")
for name, f in (("stat", lambda: os.stat(p)), ("truncate", lambda: os.truncate(p, 0)),
                ("chmod", lambda: os.chmod(p, 0o644)), ("utime", lambda: os.utime(p))):
    try:
        f()
        res.append(name + ":OK")
    except OSError as e:
        res.append("%s:%s" % (name, errno.errorcode[e.errno]))
os.close(fd)
print(" ".join(res), os.path.exists(p))
EOF
)
	assert_eq "stat:OK truncate:OK chmod:OK utime:OK True" "$out" "path operations on a new key before its first close"
}

# chmod/chown/utimensat on keys succeed without effect, so cp -a and tar x work.
c_cp_a_and_tar_into_mount() {
	t_mount
	mkdir "$MNT/t" "$MNT/u"
	local src=$T_CASE/src
	mkdir "$src"
	for i in 1 2 3; do head -c $((i * 1000)) /dev/urandom > "$src/f$i"; done
	chmod 600 "$src/f1"; touch -d 2001-01-01 "$src/f2"
	assert_records t/0 3 cp -a "$src/." "$MNT/t/0/"
	assert_ok diff -r "$src" "$MNT/t/0"
	assert_records t/0 0 assert_ok chown 1:1 "$MNT/t/0/f1"
	assert_records t/0 0 assert_ok chmod 644 "$MNT/t/0/f1"
	assert_records t/0 0 assert_ok touch -d 2002-02-02 "$MNT/t/0/f1"
	assert_records u/0 3 sh -c "tar -C '$src' -cf - . | tar -C '$MNT/u/0' -xf -"
	assert_ok diff -r "$src" "$MNT/u/0"
	assert_records t/0 1 cp "$MNT/t/0/f3" "$MNT/t/0/f4"
	assert_same_file "$src/f3" "$MNT/t/0/f4" "cp of a key to a new key"
}

# statfs reports the backing store (df is not empty) and the longest key name; fsync of
# a partition directory works and appends nothing.
c_statfs_and_fsyncdir() {
	t_mount
	mkdir "$MNT/t"
	echo v > "$MNT/t/0/k"
	[ "$(stat -f -c %b "$MNT")" -gt 0 ] || fail "statfs reports 0 blocks"
	assert_eq 255 "$(stat -f -c %l "$MNT")" "statfs f_namemax"
	assert_records t/0 0 assert_errno OK fsync "$MNT/t/0"
	assert_records t/0 0 assert_errno OK fsync "$MNT/t/0/k"
}

c_large_value() {
	t_mount
	mkdir "$MNT/t"
	head -c 1000000 /dev/urandom > "$T_CASE/v"
	assert_records t/0 1 cp "$T_CASE/v" "$MNT/t/0/big"
	assert_same_file "$T_CASE/v" "$MNT/t/0/big" "a 1,000,000-byte value"
	t_remount
	assert_same_file "$T_CASE/v" "$MNT/t/0/big" "the 1,000,000-byte value after remount"
}

t_test topics c_topics
t_test echo_cat c_echo_cat
t_test printf_no_newline_and_big c_printf_no_newline_and_big
t_test tee c_tee
t_test dd c_dd
t_test truncate c_truncate
t_test append_redirect c_append_redirect
t_test touch_and_empty_values c_touch_and_empty_values
t_test rm c_rm
t_test reads_append_nothing c_reads_append_nothing
t_test ls_find_stat c_ls_find_stat
t_test fsync_and_close_commit c_fsync_and_close_commit
t_test uncommitted_bytes_are_private c_uncommitted_bytes_are_private
t_test reader_pins_its_value c_reader_pins_its_value
t_test readers_during_truncating_writer c_readers_during_truncating_writer
t_test new_key_before_first_close c_new_key_before_first_close
t_test cp_a_and_tar_into_mount c_cp_a_and_tar_into_mount
t_test large_value c_large_value
t_test statfs_and_fsyncdir c_statfs_and_fsyncdir
t_done
