#!/bin/bash
# test_scratch.sh - scratch files (README "rsync, editors and temporary files"): the
# dot names of a partition that are not control entries live in memory only, are never
# logged and never listed, are bounded (ENOSPC), vanish at unmount, and a rename onto a
# key commits their content as one record. So rsync, vim's swap file, emacs's lock file
# and mkstemp work, and the log holds exactly one record per file they deliver.
. "$(dirname "$0")/lib.sh"
t_require_daemon

T_USER=topicfs-it

# Helpers of the python cases: "from scratch_py import *" (PYTHONPATH=$T_DIR).
cat > "$T_DIR/scratch_py.py" <<'EOF'
import ctypes, errno, os, time

res = []
libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def try_(name, f):
    # Runs f, noting NAME=OK or NAME=ERRNO in res.
    try:
        f()
        res.append(name + "=OK")
    except OSError as e:
        res.append(name + "=" + errno.errorcode[e.errno])


def eventually(name, f):
    # Runs f until it does not fail with ENOSPC. A closed file's room comes back when
    # the kernel releases its descriptor, which it sends after close() has returned:
    # this waits for that event (the bound is generous), noting NAME=never otherwise.
    for _ in range(3000):
        try:
            return f()
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            time.sleep(0.01)
    res.append(name + "=never")


def renameat2(a, b, flags):
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
EOF
export PYTHONPATH=$T_DIR

# A flat tree of N small files with ordinary names (a partition holds no directories).
make_tree() {
	local dir=$1 n=$2 i
	mkdir -p "$dir"
	chmod 755 "$dir"
	for i in $(seq 1 "$n"); do
		head -c $((i * 97)) /dev/urandom > "$dir/file-$i"
	done
	printf 'hello\n' > "$dir/notes.txt"
	: > "$dir/empty"
	touch -d '2001-02-03 04:05:06' "$dir"/*   # never a key's (its record's) mtime
}

# rsync -a of N files adds exactly N records; rsync -c again sends and adds nothing;
# without -c every file goes again (a key's mtime is its record's, not the source's).
c_rsync() {
	need rsync
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 src=$T_CASE/src out
	make_tree "$src" 20
	assert_records t/0 22 rsync -a "$src/" "$p/"
	assert_eq "$(ls -A "$src" | sort)" "$(ls -A "$p" | sort)" "listing after rsync (no temporaries)"
	assert_ok diff -r "$src" "$p"
	assert_eq 1 "$(t_x "$p/file-7" versions | wc -w)" "records of file-7"
	out=$(rsync -a -c -i "$src/" "$p/")
	assert_records t/0 0 rsync -a -c "$src/" "$p/"
	case $out in *'>f'*) fail "rsync -c sent files again: $out" ;; esac
	assert_records t/0 22 rsync -a "$src/" "$p/"
	assert_ok diff -r "$src" "$p"
	# A changed file: one record for it, nothing for the rest.
	printf 'changed\n' > "$src/file-3"
	touch -d '2001-02-03 04:05:06' "$src/file-3"
	assert_records t/0 1 rsync -a -c "$src/" "$p/"
	assert_cat "$p/file-3" $'changed\n'
	t_remount
	assert_ok diff -r "$src" "$p"
}

# vim edits a key: its swap file ".k.swp" is a scratch file in the partition while it
# runs (unlisted), it is gone afterwards, and the save is one record.
c_vim_swap() {
	need vim.tiny
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	printf 'hello\n' > "$p/k"
	assert_records t/0 1 env HOME="$T_CASE" vim.tiny -u NONE -i NONE -N -es \
		-c 'normal Aworld' \
		-c "silent !test -f '$p/.k.swp' && echo present > '$T_CASE/swp'; ls -A '$p' > '$T_CASE/ls'" \
		-c wq "$p/k"
	assert_eq present "$(cat "$T_CASE/swp" 2>/dev/null || true)" "vim's swap file in the partition"
	assert_eq k "$(cat "$T_CASE/ls")" "listing while vim ran"
	assert_cat "$p/k" $'helloworld\n'
	assert_absent "$p/.k.swp"
	assert_eq 2 "$(t_x "$p/k" versions | wc -w)" "records of k"
}

# emacs: symlink(".#k") is EPERM, so emacs makes its lock a regular file through a
# scratch temporary and rename(RENAME_NOREPLACE); the buffer is locked, and the save
# is one record.
c_emacs_lock() {
	need emacs
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	printf 'hello\n' > "$p/k"
	out=$(assert_records t/0 1 env HOME="$T_CASE" emacs -Q --batch --eval "(progn
		(find-file \"$p/k\") (goto-char (point-max)) (insert \"from emacs\n\")
		(princ (format \"%s %s \" (file-locked-p buffer-file-name)
		                (file-exists-p \"$p/.#k\")))
		(save-buffer) (princ (file-exists-p \"$p/.#k\")) (kill-emacs 0))" 2>/dev/null)
	assert_eq "t t nil" "$out" "locked, lock file present, gone after the save"
	assert_cat "$p/k" $'hello\nfrom emacs\n'
	assert_eq k "$(ls -A "$p")" "listing after emacs"
}

# mkstemp + write + fchmod + utime + rename onto a key: one record; the temporary is
# a file like any other until then.
c_mkstemp_rename() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	out=$(assert_records t/0 1 "$T_PY" - "$p" <<'EOF'
import os, sys, tempfile
p = sys.argv[1]
fd, tmp = tempfile.mkstemp(dir=p, prefix=".", suffix=".tmp")
os.write(fd, b"made by mkstemp\n")
os.fchmod(fd, 0o640)
os.utime(tmp, (1000000000, 1000000000))
st = os.stat(tmp)
assert os.path.basename(tmp) not in os.listdir(p), "a scratch file is listed"
os.close(fd)
os.rename(tmp, os.path.join(p, "made"))
print(oct(st.st_mode & 0o7777), st.st_size, int(st.st_mtime), st.st_nlink,
      os.path.exists(tmp))
EOF
)
	assert_eq "0o640 16 1000000000 1 False" "$out" "the temporary's attributes, and it is gone"
	assert_cat "$p/made" $'made by mkstemp\n'
	assert_eq made "$(ls -A "$p")" "listing after the rename"
	assert_eq made "$(t_x "$MNT/t/0/.history/$(t_last t/0)" key)" "the record is the key's"
	# Onto an existing key: one more record; the old value is replaced.
	assert_records t/0 1 "$T_PY" - "$p" <<'EOF'
import os, sys
p = sys.argv[1]
with open(os.path.join(p, ".next"), "w") as f:
    f.write("second\n")
os.rename(os.path.join(p, ".next"), os.path.join(p, "made"))
EOF
	assert_cat "$p/made" $'second\n'
	# An empty temporary renamed onto a key commits an empty value.
	assert_records t/0 1 sh -c ": > '$p/.e' && mv '$p/.e' '$p/empty'"
	assert_eq 0 "$(stat -c %s "$p/empty")" "size of the empty key"
	t_remount
	assert_cat "$p/made" $'second\n'
}

# Every operation rsync and editors use, between scratch names, appends nothing.
c_scratch_ops() {
	t_mount
	mkdir "$MNT/t" "$MNT/t/1"
	local p=$MNT/t/0 out
	echo v > "$p/k"
	out=$(assert_records t/0 0 "$T_PY" - "$p" "$MNT/t/1" <<'EOF'
import os, stat, sys
from scratch_py import *
p, other = sys.argv[1], sys.argv[2]
j = lambda n: os.path.join(p, n)
fd = os.open(j(".a"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o700)
assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
os.write(fd, b"0123456789")
os.pwrite(fd, b"AB", 20)                              # a hole reads as zeros
assert os.pread(fd, 100, 0) == b"0123456789" + b"\0" * 10 + b"AB"
os.ftruncate(fd, 4)
os.truncate(j(".a"), 6)
assert open(j(".a"), "rb").read() == b"0123\0\0"
os.chmod(j(".a"), 0o4755)                             # no x, set-id or sticky bits
assert stat.S_IMODE(os.stat(j(".a")).st_mode) == 0o644
os.chmod(j(".a"), 0o604)
os.utime(j(".a"), ns=(5 * 10**9, 7 * 10**9 + 3))
st = os.stat(j(".a"))
assert (stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns) == (0o604, 6, 7 * 10**9 + 3), st
fa = os.open(j(".app"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fa, b"x"); os.write(fa, b"y"); os.close(fa)
fa = os.open(j(".app"), os.O_WRONLY | os.O_APPEND)
os.write(fa, b"z"); os.close(fa)
assert open(j(".app"), "rb").read() == b"xyz"
try_("excl", lambda: os.open(j(".a"), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
try_("trunc", lambda: os.close(os.open(j(".app"), os.O_WRONLY | os.O_TRUNC)))
assert os.path.getsize(j(".app")) == 0
with open(j(".b"), "wb") as f:
    f.write(b"B")
try_("noreplace", lambda: renameat2(j(".a"), j(".b"), RENAME_NOREPLACE))
try_("exchange", lambda: renameat2(j(".a"), j(".b"), RENAME_EXCHANGE))
try_("rename", lambda: os.rename(j(".a"), j(".b")))
try_("old_name", lambda: os.stat(j(".a")))
assert open(j(".b"), "rb").read() == b"0123\0\0"
# emacs's lock file when symlinks fail: mkostemp, write, fchmod, rename NOREPLACE.
try_("symlink", lambda: os.symlink("user@host.1:2", j(".#k")))
fd2 = os.open(j(".#-emacs123456"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd2, b"user@host.1:2"); os.fchmod(fd2, 0o644); os.close(fd2)
try_("lock", lambda: renameat2(j(".#-emacs123456"), j(".#k"), RENAME_NOREPLACE))
assert open(j(".#k")).read() == "user@host.1:2"
try_("lock_again", lambda: renameat2(j(".b"), j(".#k"), RENAME_NOREPLACE))
# An unlinked file stays readable through its descriptor, with no name.
fd3 = os.open(j(".b"), os.O_RDONLY)
os.unlink(j(".b"))
st3 = os.fstat(fd3)
assert (st3.st_nlink, os.read(fd3, 10)) == (0, b"0123\0\0"), st3
os.close(fd3)
try_("unlink_gone", lambda: os.unlink(j(".b")))
try_("mkdir", lambda: os.mkdir(j(".d")))
try_("rmdir_file", lambda: os.rmdir(j(".#k")))
try_("mkfifo", lambda: os.mkfifo(j(".f")))
try_("mknod", lambda: os.mknod(j(".n"), 0o600 | stat.S_IFREG))
try_("link", lambda: os.link(j(".#k"), j(".l")))
try_("xdev", lambda: os.rename(j(".#k"), os.path.join(other, ".#k")))
try_("xdev_key", lambda: os.rename(j(".#k"), os.path.join(other, "k")))
try_("key_to_scratch", lambda: os.rename(j("k"), j(".k")))
try_("not_a_key", lambda: os.rename(j(".#k"), j("%2e")))
try_("onto_control", lambda: os.rename(j(".#k"), j(".put")))
try_("unlink_control", lambda: os.unlink(j(".history")))
res.append(" ".join(sorted(n for n in os.listdir(p))))
print(" ".join(res))
EOF
)
	assert_eq "excl=EEXIST trunc=OK noreplace=EEXIST exchange=EINVAL rename=OK old_name=ENOENT symlink=EPERM lock=OK lock_again=EEXIST unlink_gone=ENOENT mkdir=EPERM rmdir_file=ENOTDIR mkfifo=EPERM mknod=OK link=EPERM xdev=EXDEV xdev_key=EXDEV key_to_scratch=EXDEV not_a_key=EINVAL onto_control=EPERM unlink_control=EISDIR k" \
		"$out" "scratch operations"
	assert_eq 0 "$(t_leo t/1)" "log end of the other partition"
	assert_cat "$p/k" $'v\n'
	# Control entries keep their meaning.
	assert_eq directory "$(stat -c %F "$p/.history")" "type of .history"
	assert_records t/0 2 sh -c "printf 'pk\tpv\n' > '$p/.put'"   # and its COMMIT
	assert_cat "$p/pk" pv
}

# The bound: a write, truncate or create past it is ENOSPC, logged, and changes
# nothing; freeing scratch space makes room again. A rename onto a key past
# max.message.bytes is EFBIG and leaves the scratch file.
c_bound() {
	t_mount -o scratch_max_bytes=4096,scratch_max_files=3
	mkdir "$MNT/t"
	local p=$MNT/t/0 out
	out=$(assert_records t/0 10 "$T_PY" - "$p" <<'EOF'
import os, sys
from scratch_py import *
p = sys.argv[1]
j = lambda n: os.path.join(p, n)
fd = os.open(j(".big"), os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"a" * 4000)
try_("write_past", lambda: os.write(fd, b"b" * 97))
try_("pwrite_far", lambda: os.pwrite(fd, b"c", 1 << 30))
try_("truncate_past", lambda: os.ftruncate(fd, 4097))
res.append("size=%d" % os.fstat(fd).st_size)
assert os.pread(fd, 5000, 0) == b"a" * 4000
fd2 = os.open(j(".small"), os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd2, b"s" * 96)
try_("second_past", lambda: os.write(fd2, b"s"))
os.close(os.open(j(".third"), os.O_WRONLY | os.O_CREAT, 0o600))
try_("fourth_file", lambda: os.open(j(".fourth"), os.O_WRONLY | os.O_CREAT, 0o600))
try_("fourth_stat", lambda: os.stat(j(".fourth")))
os.unlink(j(".big"))
try_("still_open", lambda: os.write(fd2, b"s"))     # .big's bytes count until closed
os.close(fd)
eventually("freed_bytes", lambda: os.write(fd2, b"s" * 100))
os.close(fd2)
os.unlink(j(".third"))
eventually("freed_file", lambda: os.close(os.open(j(".fourth"), os.O_WRONLY | os.O_CREAT, 0o600)))
os.unlink(j(".fourth"))
# A rename onto a key gives the room back: ten files of 3000 bytes through the bound.
for i in range(10):
    def deliver():
        with open(j(".t%d" % i), "wb") as f:
            f.write(b"%d" % i * 3000)
    eventually("delivered%d" % i, deliver)
    os.rename(j(".t%d" % i), j("k%d" % i))
print(" ".join(res))
EOF
)
	assert_eq "write_past=ENOSPC pwrite_far=ENOSPC truncate_past=ENOSPC size=4000 second_past=ENOSPC fourth_file=ENOSPC fourth_stat=ENOENT still_open=ENOSPC" \
		"$out" "writes at the bound"
	# (grep -c reads the whole log: grep -q would cut the pipe short under pipefail)
	[ "$(t_daemon_log | grep -c 'scratch_max_bytes=4096')" -gt 0 ] || fail "no log line for the refused write"
	[ "$(t_daemon_log | grep -c 'scratch_max_files=3')" -gt 0 ] || fail "no log line for the refused create"
	assert_eq "$(printf '7%.0s' $(seq 3000))" "$(cat "$p/k7")" "value of k7"
	# A full-size scratch file still commits, as one record.
	assert_records t/0 1 mv "$p/.small" "$p/small"
	assert_eq 196 "$(stat -c %s "$p/small")" "size of the committed value"
	# Past max.message.bytes: EFBIG, nothing appended, the scratch file stays.
	setfattr -n user.topicfs.max.message.bytes -v 200 "$MNT/t"
	head -c 150 /dev/zero > "$p/.wide"
	assert_records t/0 0 assert_errno EFBIG rename "$p/.wide" "$p/wide"
	assert_eq 150 "$(stat -c %s "$p/.wide")" "the scratch file after EFBIG"
	assert_absent "$p/wide"
	# rsync of a file larger than the bound fails cleanly: no key, no record.
	if command -v rsync > /dev/null; then
		head -c 8000 /dev/urandom > "$T_CASE/huge"
		assert_records t/0 0 assert_fails rsync "$T_CASE/huge" "$p/huge"
		assert_absent "$p/huge"
	fi
	# Bad values of the options: refused at mount, naming the option.
	t_umount
	local o
	for o in scratch_max_bytes=-1 scratch_max_bytes=1x scratch_max_files=2000000; do
		T_MOUNT_MAY_EXIT=1 t_mount -o "$o" && fail "mounted with -o $o" || true
		[ "${T_MOUNT_EXIT:-0}" != 0 ] || fail "-o $o: daemon exit status 0"
		[ "$(t_daemon_log | grep -c "bad mount option $o")" -gt 0 ] || fail "-o $o: no message naming it"
	done
}

# Scratch files belong to their creator, with the mode of the create; creating one
# needs write permission on the partition, as for keys.
c_second_user() {
	t_user_ensure "$T_USER"
	t_mount -o allow_other,default_permissions
	mkdir "$MNT/t"
	chmod 755 "$MNT/t"
	local p=$MNT/t/0 uid
	uid=$(id -u "$T_USER")
	printf 'secret' > "$p/.root"
	chmod 600 "$p/.root"
	assert_errno_as "$T_USER" EACCES read "$p/.root"
	assert_errno_as "$T_USER" EACCES putx "$p/.mine" x
	assert_errno_as "$T_USER" EACCES unlink "$p/.root"
	assert_errno_as "$T_USER" EACCES rename "$p/.root" "$p/k"
	chown "$uid" "$MNT/t"
	assert_records t/0 0 assert_errno_as "$T_USER" OK putx "$p/.mine" "by user"
	assert_eq "$uid 644" "$(stat -c '%u %a' "$p/.mine")" "owner and mode of the user's scratch file"
	assert_errno_as "$T_USER" EACCES read "$p/.root"     # still root's, mode 600
	chmod 640 "$p/.root"
	assert_errno_as "$T_USER" EACCES read "$p/.root"     # not in root's group either
	chmod 644 "$p/.root"
	assert_errno_as "$T_USER" OK read "$p/.root"
	assert_errno_as "$T_USER" EPERM chmod "$p/.root" 666  # not the owner
	assert_records t/0 1 assert_errno_as "$T_USER" OK rename "$p/.mine" "$p/mine"
	assert_cat "$p/mine" "by user"
	assert_errno_as "$T_USER" OK unlink "$p/.root"     # the directory is the user's now
}

# Scratch files are lost at unmount, and nothing of them reaches the data directory.
c_unmount_loses() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 before
	echo v > "$p/k"
	before=$(t_leo t/0)
	printf 'SCRATCH-MARKER-1' > "$p/.one"
	printf 'SCRATCH-MARKER-2' > "$p/.two"
	assert_cat "$p/.one" SCRATCH-MARKER-1
	t_remount
	assert_absent "$p/.one"
	assert_absent "$p/.two"
	assert_eq "$before" "$(t_leo t/0)" "log end after the remount"
	if grep -rqa 'SCRATCH-MARKER' "$DATA"; then fail "scratch bytes reached the data directory"; fi
}

# A read-only mount makes no scratch file either.
c_read_only() {
	t_mount
	mkdir "$MNT/t"
	t_remount -o ro
	assert_errno EROFS putx "$MNT/t/0/.x" x
	assert_absent "$MNT/t/0/.x"
}

# rm -rf of a topic never sees its scratch files (unlisted); rmdir of the topic, once
# no key is live, takes them with it, and a new topic of that name starts clean.
c_topic_removal() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	echo v > "$p/k"
	printf 'swap' > "$p/.k.swp"
	exec 7< "$p/.k.swp"
	rm -rf "$MNT/t" 2>/dev/null || true     # tombstones k; the partition is EBUSY
	assert_absent "$p/k"
	assert_cat "$p/.k.swp" swap
	assert_ok rmdir "$MNT/t"
	assert_absent "$MNT/t"
	assert_eq swap "$(cat <&7)" "an open scratch file after its topic went"
	exec 7<&-
	mkdir "$MNT/t"
	assert_absent "$p/.k.swp"
	assert_eq 0 "$(t_leo t/0)" "log end of the new topic"
}

# Several processes delivering files through mkstemp + rename at once: one record per
# rename, every value whole.
c_parallel_renames() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 i
	assert_records t/0 100 "$T_PY" - "$p" <<'EOF'
import os, sys, tempfile
p = sys.argv[1]
pids = []
for w in range(4):
    pid = os.fork()
    if pid == 0:
        for i in range(25):
            fd, tmp = tempfile.mkstemp(dir=p, prefix=".w%d." % w)
            os.write(fd, (b"%d-%d|" % (w, i)) * 50)
            os.close(fd)
            os.rename(tmp, os.path.join(p, "k%d" % (i % 10)) if i % 2 else
                      os.path.join(p, "w%d-%d" % (w, i)))
        os._exit(0)
    pids.append(pid)
ok = all(os.waitpid(pid, 0)[1] == 0 for pid in pids)
sys.exit(0 if ok else 1)
EOF
	for i in 0 2 4 6 8 10 12 14 16 18 20 22 24; do
		assert_eq "$(for _ in $(seq 50); do printf '3-%d|' "$i"; done)" "$(cat "$p/w3-$i")" \
			"value of w3-$i"
	done
	for i in 1 3 5 7 9; do
		case $(cat "$p/k$i") in
		[0-3]-*) ;;
		*) fail "k$i holds $(head -c 20 "$p/k$i")" ;;
		esac
	done
	assert_eq 57 "$(ls "$p" | wc -l)" "keys after the parallel renames (52 + k1 k3 .. k9)"
}

# Processes racing over a few scratch names (create, write, rename, unlink, read,
# truncate, rename onto a key): the daemon stays up, and the log holds exactly one
# record per rename onto a key that succeeded.
c_racing_names() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 n0 n1
	n0=$(t_leo t/0)
	n1=$("$T_PY" - "$p" <<'EOF'
import errno, os, random, sys
p = sys.argv[1]
names = [".a", ".b", ".c"]
r, w = os.pipe()
pids = []
for proc in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        rnd = random.Random(proc)
        commits = 0
        for _ in range(300):
            a, b = (os.path.join(p, rnd.choice(names)) for _ in range(2))
            op = rnd.randrange(6)
            try:
                if op == 0:
                    with open(a, "wb") as f:
                        f.write(os.urandom(rnd.randrange(1, 3000)))
                elif op == 1:
                    os.rename(a, b)
                elif op == 2:
                    os.rename(a, os.path.join(p, "k%d" % rnd.randrange(3)))
                    commits += 1
                elif op == 3:
                    os.unlink(a)
                elif op == 4:
                    with open(a, "rb") as f:
                        f.read()
                else:
                    os.truncate(a, rnd.randrange(5000))
            except OSError as e:
                if e.errno != errno.ENOENT:
                    raise
        os.write(w, b"%d\n" % commits)
        os._exit(0)
    pids.append(pid)
os.close(w)
ok = all(os.waitpid(pid, 0)[1] == 0 for pid in pids)
total = sum(int(x) for x in os.fdopen(r).read().split())
print(total if ok else "a worker failed")
EOF
)
	assert_match '[0-9]+' "$n1" "commits counted by the workers"
	[ "$n1" -gt 0 ] || fail "no rename onto a key succeeded"
	assert_eq $((n0 + n1)) "$(t_leo t/0)" "log end: one record per successful rename onto a key"
	assert_eq "$n1" "$(t_hist t/0)" "history entries"
	assert_eq "" "$(ls "$p" | grep -v '^k[0-2]$' || true)" "listing: keys only"
}

t_test rsync c_rsync
t_test vim_swap c_vim_swap
t_test emacs_lock c_emacs_lock
t_test mkstemp_rename c_mkstemp_rename
t_test scratch_ops c_scratch_ops
t_test bound c_bound
t_test second_user c_second_user
t_test unmount_loses c_unmount_loses
t_test read_only c_read_only
t_test topic_removal c_topic_removal
t_test parallel_renames c_parallel_renames
t_test racing_names c_racing_names
t_done
