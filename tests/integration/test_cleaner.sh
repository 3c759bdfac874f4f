#!/bin/bash
# test_cleaner.sh - the log cleaner seen through the mount (docs/semantics.md §6 and
# "History views", §3 Cleaner): `clean` keeps the newest record of each key at its
# own offset, tombstones live until their delete horizon and then go for good, empty
# values and keyless records are never dropped, the key -> value digest survives a
# pass with writers running and a remount, a crash at any rename or fsync of a pass
# leaves the old or the new log whole, and the cleaner's attributes and metrics.
#
# Most cases mount with log.cleaner.threads=0: no background passes, so only the
# explicit `setfattr -n user.topicfs.clean` runs one, and exact offset lists can be
# compared. The equivalence case runs a background thread as well.
. "$(dirname "$0")/lib.sh"
t_require_daemon

NOBG=log.cleaner.threads=0

# roll_clean T/P: close the active segment, then run a pass and wait for it.
roll_clean() {
	setfattr -n user.topicfs.roll -v 1 "$MNT/$1"
	setfattr -n user.topicfs.clean -v 1 "$MNT/$1"
}

# offsets T/P: the history listing as decimal offsets, one per line.
offsets() { ls -A "$MNT/$1/.history" | sed 's/^0*\([0-9]\)/\1/'; }

# digest DIR GLOB: md5 of "key<TAB>md5(value)" over the keys of DIR matching GLOB.
digest() {
	local f
	(
		cd "$1"
		for f in $2; do [ -e "$f" ] || continue; printf '%s\t' "$f"; md5sum < "$f"; done | sort | md5sum
	)
}

# now_ms: the wall clock in milliseconds.
now_ms() { date +%s%3N; }

# hex STRING: the bytes of STRING in hex (as the tsys helpers print keys).
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }

# (a) A pass keeps exactly the newest record of every key of the cleaned range (and
# every keyless one), at its old offset and with its old bytes.
c_clean_keeps_newest_at_same_offsets() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 r k before want after
	for r in 1 2 3; do
		for k in a b c d; do echo "$k$r" > "$p/$k"; done
		echo "line$r" > "$p/.append"
	done
	rm "$p/d"
	echo e1 > "$p/e"
	mv "$p/e" "$p/f"
	before=$(t_hmanifest)
	# Newest record per key (tombstones too: their horizon has not passed), and
	# every keyless record.
	want=$(printf '%s\n' "$before" | awk '{ split($1, a, "/"); o = a[3]
		if ($5 == "ENODATA") keep[o] = 1; else last[$5] = o }
		END { for (k in last) keep[last[k]] = 1; for (o in keep) print o }' | sort)
	[ "$(printf '%s\n' "$want" | wc -l)" -lt "$(printf '%s\n' "$before" | wc -l)" ] ||
		fail "the test wrote nothing a pass could drop"
	roll_clean t/0
	after=$(t_hmanifest)
	assert_eq "$want" "$(printf '%s\n' "$after" | awk '{ split($1, a, "/"); print a[3] }')" \
		"offsets listed in .history after the pass"
	assert_eq "$(printf '%s\n' "$before" | grep -F -f <(printf 't/0/%s \n' $want))" "$after" \
		"survivors (offset, bytes, tombstone, key) after the pass"
	assert_eq "$(printf '%020d\n' $(printf '%s\n' "$want" | sed 's/^0*\([0-9]\)/\1/') | sort)" \
		"$(ls -A "$p/.history")" "ls of .history after the pass"
	assert_eq "a3 b3 c3 e1" "$(cat "$p/a" "$p/b" "$p/c" "$p/f" | xargs)" "values after the pass"
	assert_absent "$p/d"
	assert_absent "$p/e"
	assert_eq "$(t_x "$p/a" offset)" "$(t_x "$p/a" versions)" "versions of a after the pass"
	# A second pass over a clean log changes nothing.
	roll_clean t/0
	assert_eq "$after" "$(t_hmanifest)" "history after a second pass"
	# ...and a remount shows the same.
	t_remount -o "$NOBG"
	assert_eq "$after" "$(t_hmanifest)" "history after remount"
}

# (b) A tombstone outlives the first pass with a delete horizon, and goes at the
# first pass after it; the key never comes back, not even after a remount.
c_tombstone_horizon_then_gone() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history tomb hz now
	setfattr -n user.topicfs.delete.retention.ms -v 1000 "$MNT/t"
	echo v1 > "$p/k"; echo v2 > "$p/k"; echo other > "$p/o"
	rm "$p/k"
	tomb=$(t_last t/0)
	assert_eq 1 "$(t_x "$h/$tomb" tombstone)" "tombstone attr of the newest record"
	assert_eq ENODATA "$(t_sys_x "$h/$tomb" delete_horizon)" "delete_horizon before any pass"
	now=$(now_ms)
	roll_clean t/0
	assert_eq "$(printf '%s\n' "$(t_off 2)" "$tomb")" "$(ls -A "$h")" "history after the first pass"
	hz=$(t_x "$h/$tomb" delete_horizon)
	assert_match '[0-9]{13}' "$hz" "delete_horizon of the tombstone after the first pass"
	[ "$hz" -ge $((now + 1000)) ] && [ "$hz" -le $(($(now_ms) + 1000)) ] ||
		fail "delete_horizon $hz is not pass start + delete.retention.ms (1000) (pass ran from $now to $(now_ms))"
	case " $(getfattr --absolute-names -m - -d "$h/$tomb" | sed -n 's/=.*//p' | xargs) " in
	*" user.topicfs.delete_horizon "*) ;;
	*) fail "listxattr of the tombstone lacks delete_horizon" ;;
	esac
	assert_eq ENODATA "$(t_sys_x "$h/$(t_off 2)" delete_horizon)" "delete_horizon of a live record"
	assert_absent "$p/k"
	# Wait until the configured horizon has passed (not a timing assertion).
	sleep "$(( (hz - $(now_ms)) / 1000 + 1 )).2"
	echo more > "$p/o2"
	roll_clean t/0
	assert_eq "$(printf '%s\n' "$(t_off 2)" "$(t_off 4)")" "$(ls -A "$h")" "history after the horizon passed"
	assert_errno ENOENT stat "$h/$tomb"
	assert_absent "$p/k"
	assert_eq "o o2" "$(ls "$p" | xargs)" "live keys"
	t_hmanifest | grep -q " $(hex k)\$" && fail "a record of key k is still on disk"
	t_remount -o "$NOBG"
	assert_absent "$p/k"
	assert_eq "o o2" "$(ls "$p" | xargs)" "live keys after remount"
	t_hmanifest | grep -q " $(hex k)\$" && fail "a record of key k came back after remount"
	roll_clean t/0
	assert_absent "$p/k"
	assert_eq "$(printf '%s\n' "$(t_off 2)" "$(t_off 4)")" "$(ls -A "$h")" "history after remount and another pass"
}

# (c) An empty value is a value, not a tombstone: kept by every pass, reads as empty.
c_empty_value_is_not_a_tombstone() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history eoff
	setfattr -n user.topicfs.delete.retention.ms -v 1000 "$MNT/t"
	echo full > "$p/e"
	: > "$p/e"
	touch "$p/t0"
	echo x > "$p/x"
	eoff=$(t_x "$p/e" offset)
	assert_eq 0 "$(t_x "$h/$(t_off "$eoff")" tombstone)" "tombstone attr of the empty value"
	roll_clean t/0
	sleep 1.3                              # past delete.retention.ms
	echo y > "$p/x"
	roll_clean t/0
	assert_eq "e t0 x" "$(ls "$p" | xargs)" "live keys after two passes"
	assert_cat "$p/e" ""
	assert_cat "$p/t0" ""
	assert_eq "0 0" "$(stat -c %s "$p/e" "$p/t0" | xargs)" "sizes of the empty values"
	assert_eq "$eoff" "$(t_x "$p/e" versions)" "versions of e (only the empty value left)"
	assert_eq 0 "$(t_x "$h/$(t_off "$eoff")" tombstone)" "tombstone attr of the kept empty value"
	assert_eq ENODATA "$(t_sys_x "$h/$(t_off "$eoff")" delete_horizon)" "delete_horizon of an empty value"
	t_remount -o "$NOBG"
	assert_cat "$p/e" ""
	assert_eq "e t0 x" "$(ls "$p" | xargs)" "live keys after remount"
}

# (d) Keyless records (.append) are never removed.
c_keyless_records_stay() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 before after i
	for i in 1 2 3; do
		printf 'same\nsame\n' > "$p/.append"
		echo "v$i" > "$p/k"
	done
	before=$(t_hmanifest | awk '$5 == "ENODATA"')
	assert_eq 6 "$(printf '%s\n' "$before" | wc -l)" "keyless records written"
	roll_clean t/0
	roll_clean t/0
	after=$(t_hmanifest)
	assert_eq "$before" "$(printf '%s\n' "$after" | awk '$5 == "ENODATA"')" "keyless records after two passes"
	assert_eq 7 "$(printf '%s\n' "$after" | wc -l)" "records after two passes (6 keyless + newest k)"
	t_remount -o "$NOBG"
	assert_eq "$before" "$(t_hmanifest | awk '$5 == "ENODATA"')" "keyless records after remount"
}

# (e) Compaction equivalence: the digest of key -> value of a key set is the same
# before a pass, after it (with writers running during it, on other keys of the
# same partition) and after a remount; the writers' keys hold their last values.
WRITER='
import os, sys, time
p, stop, out = sys.argv[1:4]
last, i = {}, 0
while not os.path.exists(stop) or i < 400:
    k = "w-%d" % (i % 37)
    v = "%d:%s\n" % (i, "x" * (i % 50))
    with open(os.path.join(p, k), "w") as f:
        f.write(v)
    last[k] = v
    i += 1
with open(out, "w") as f:
    for k in sorted(last):
        f.write("%s\t%s" % (k, last[k]))
'
CHECK_WRITERS='
import os, sys
p, out = sys.argv[1:3]
bad = []
for line in open(out):
    k, v = line.rstrip("\n").split("\t", 1)
    got = open(os.path.join(p, k)).read()
    if got != v + "\n":
        bad.append("%s=%r want %r" % (k, got, v))
print("clean" if not bad else " ".join(bad[:5]))
'
c_compaction_equivalence_with_writers() {
	local opts="log.cleaner.threads=1,log.cleaner.backoff.ms=50,min.cleanable.dirty.ratio=0.01,segment.bytes=4096"
	t_mount -o "$opts"
	mkdir "$MNT/t"
	local p=$MNT/t/0 d0 d1 i r wpid
	"$T_PY" - "$p" <<'EOF'
import os, sys
p = sys.argv[1]
for r in range(6):
    for i in range(60):
        with open(os.path.join(p, "s-%d" % i), "w") as f:
            f.write("r%d-%d-%s\n" % (r, i, "y" * ((r * 7 + i) % 90)))
for i in range(0, 60, 7):
    os.unlink(os.path.join(p, "s-%d" % i))
with open(os.path.join(p, "s-empty"), "w"):
    pass
EOF
	d0=$(digest "$p" 's-*')
	"$T_PY" -c "$WRITER" "$p" "$T_CASE/stop" "$T_CASE/last" &
	wpid=$!
	for r in 1 2 3; do
		roll_clean t/0
		assert_eq "$d0" "$(digest "$p" 's-*')" "digest of s-* after pass $r (writers running)"
	done
	touch "$T_CASE/stop"
	wait "$wpid" || fail "the writer failed"
	assert_eq clean "$("$T_PY" -c "$CHECK_WRITERS" "$p" "$T_CASE/last")" "writers' keys after the passes"
	roll_clean t/0
	assert_eq "$d0" "$(digest "$p" 's-*')" "digest of s-* after a final pass"
	[ -n "$(t_x "$p" last_clean)" ] || fail "last_clean is empty after passes"
	[ "$(t_hist t/0)" -lt "$(t_leo t/0)" ] || fail "the passes dropped nothing ($(t_hist t/0) records, log end $(t_leo t/0))"
	t_remount -o "$opts"
	assert_eq "$d0" "$(digest "$p" 's-*')" "digest of s-* after remount"
	assert_eq clean "$("$T_PY" -c "$CHECK_WRITERS" "$p" "$T_CASE/last")" "writers' keys after remount"
	assert_eq "" "$(offsets t/0 | sort | uniq -d)" "offsets listed twice"
}

# (f) A crash at each rename and each fsync of a pass: after a remount every key holds
# its value, no offset is listed twice, and topicctl verify passes.
settle_dead_mount() {
	local i
	for i in $(seq 100); do t_mounted "$MNT" || return 0; sleep 0.1; done
	fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT"
}

c_crash_during_pass() {
	local tmpl=$T_CASE/template op n rc d0 all0 crashes completed out
	local max=${T_CLEANER_FAULT_MAX:-60}
	[ -x "$BUILD_DIR/topicctl" ] || fail "$BUILD_DIR/topicctl not built"
	# Three segments: a pass of two groups, about twenty renames and fifteen fsyncs.
	t_mount -o "$NOBG,segment.bytes=2048" "$tmpl"
	mkdir "$MNT/t"
	"$T_PY" - "$MNT/t/0" <<'EOF'
import os, sys
p = sys.argv[1]
for r in range(3):
    for i in range(12):
        with open(os.path.join(p, "k%02d" % i), "w") as f:
            f.write("r%d-%d%s\n" % (r, i, "z" * ((r + i) % 30)))
    with open(os.path.join(p, ".append"), "w") as f:
        f.write("keyless %d\n" % r)
for i in range(0, 12, 5):
    os.unlink(os.path.join(p, "k%02d" % i))
EOF
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	d0=$(digest "$MNT/t/0" '*')
	all0=$(offsets t/0)
	[ "$(t_x "$MNT/t/0" segments)" -ge 3 ] || fail "the template has too few segments"
	t_umount
	for op in rename fsync; do
		crashes=0 completed=0
		for n in $(seq "$max"); do
			rm -rf "$DATA"; cp -a "$tmpl" "$DATA"
			rc=0
			T_MOUNT_MAY_EXIT=1 t_mount -o "$NOBG,fault=$op:$n:crash" || rc=$?
			[ "$rc" = 0 ] || fail "$op:$n: the daemon died while mounting (status ${T_MOUNT_EXIT:-?})"
			if setfattr -n user.topicfs.clean -v 1 "$MNT/t/0" 2>/dev/null; then
				completed=1
				# The fault stays armed: the unmount's own fsyncs may still hit it.
				umount "$MNT"
				rc=$(t_wait_exit)
				case $rc in 0|86) ;; *) fail "$op:$n: exit status $rc after a complete pass" ;; esac
				settle_dead_mount
			else
				rc=$(t_wait_exit)
				assert_eq 86 "$rc" "$op:$n: exit status of the daemon (a crash by the fault)"
				settle_dead_mount
				crashes=$((crashes + 1))
			fi
			t_mount -o "$NOBG"
			assert_eq "$d0" "$(digest "$MNT/t/0" '*')" "$op:$n: digest of key -> value after remount"
			out=$(offsets t/0)
			assert_eq "" "$(printf '%s\n' "$out" | sort | uniq -d)" "$op:$n: offsets listed twice"
			assert_eq "" "$(comm -13 <(printf '%s\n' "$all0" | sort) <(printf '%s\n' "$out" | sort))" \
				"$op:$n: offsets that were never written"
			# The partition still cleans after the recovery, to the same state.
			setfattr -n user.topicfs.clean -v 1 "$MNT/t/0"
			assert_eq "$d0" "$(digest "$MNT/t/0" '*')" "$op:$n: digest after a pass following the recovery"
			assert_eq "" "$(t_x "$MNT/t/0" uncleanable_reason)" "$op:$n: uncleanable_reason"
			t_umount
			out=$("$BUILD_DIR/topicctl" verify "$DATA" 2>&1) || fail "$op:$n: topicctl verify failed: $out"
			[ "$completed" = 1 ] && break
		done
		[ "$completed" = 1 ] || fail "$op: the pass never completed within $max crash points"
		[ "$crashes" -ge 1 ] || fail "$op: no crash point was hit during the pass"
		echo "# $op: $crashes crash points, then a complete pass"
	done
}

# (g) Region attributes, partition attributes and listxattr.
c_region_and_partition_attrs() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history i o fd fu reg want names seen=""
	assert_eq ENODATA "$(t_sys_x "$p" last_clean)" "last_clean before any pass"
	assert_eq "" "$(t_x "$p" uncleanable_reason)" "uncleanable_reason before any pass"
	for i in 1 2 3; do echo "a$i" > "$p/a"; echo "b$i" > "$p/b"; done
	roll_clean t/0
	for i in 1 2; do echo "c$i" > "$p/c"; done
	setfattr -n user.topicfs.roll -v 1 "$p"
	echo d > "$p/d"; echo e > "$p/e"
	fd=$(t_x "$p" first_dirty_offset)
	fu=$(t_x "$p" first_uncleanable_offset)
	assert_eq 6 "$fd" "first_dirty_offset after a pass over offsets 0-5"
	assert_eq 8 "$fu" "first_uncleanable_offset (base of the active segment)"
	assert_match '0?\.[0-9]+|1(\.0+)?' "$(t_x "$p" dirty_ratio)" "dirty_ratio"
	[ "$(t_x "$p" dirty_ratio | tr -d .0)" != "" ] || fail "dirty_ratio is 0 with a dirty segment"
	assert_match '.+' "$(t_x "$p" last_clean)" "last_clean after a pass"
	assert_eq "" "$(t_x "$p" uncleanable_reason)" "uncleanable_reason after a pass"
	for o in $(offsets t/0); do
		if [ "$o" -lt "$fd" ]; then want=clean
		elif [ "$o" -lt "$fu" ]; then want=dirty
		else want=uncleanable; fi
		reg=$(t_x "$h/$(t_off "$o")" region)
		assert_eq "$want" "$reg" "region of offset $o"
		case " $seen " in *" $reg "*) ;; *) seen="$seen $reg" ;; esac
	done
	assert_eq " clean dirty uncleanable" "$seen" "regions seen"
	names=$(getfattr --absolute-names -m - -d "$p" | sed -n 's/=.*//p' | xargs)
	for i in dirty_ratio first_dirty_offset first_uncleanable_offset last_clean uncleanable_reason; do
		case " $names " in *" user.topicfs.$i "*) ;; *) fail "listxattr of a partition lacks $i: $names" ;; esac
	done
	case " $names " in *" user.topicfs.clean "*) fail "listxattr lists the write-only clean" ;; esac
	names=$(getfattr --absolute-names -m - -d "$h/$(t_off "$fd")" | sed -n 's/=.*//p' | xargs)
	case " $names " in *" user.topicfs.region "*) ;; *) fail "listxattr of a history entry lacks region: $names" ;; esac
	case " $names " in *" user.topicfs.delete_horizon "*) fail "listxattr of a live record lists delete_horizon" ;; esac
	assert_eq ENODATA "$(t_sys_x "$p/a" region)" "region of a key (history entries only)"
	assert_errno ENOTSUP setxattr "$p" user.topicfs.dirty_ratio 1
	assert_errno ENOTSUP setxattr "$p/a" user.topicfs.clean 1
}

# Read-only mounts have no cleaner: its attributes are absent and clean is EROFS.
c_read_only_has_no_cleaner() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 h=$MNT/t/0/.history names i
	echo 1 > "$p/k"; echo 2 > "$p/k"; rm "$p/k"; echo x > "$p/x"
	roll_clean t/0
	t_remount -o ro
	for i in dirty_ratio first_dirty_offset first_uncleanable_offset last_clean uncleanable_reason; do
		assert_eq ENODATA "$(t_sys_x "$p" "$i")" "$i on a read-only mount"
	done
	assert_eq ENODATA "$(t_sys_x "$h/$(t_off 3)" region)" "region on a read-only mount"
	assert_match '[0-9]{13}' "$(t_x "$h/$(t_off 2)" delete_horizon)" \
		"delete_horizon (a fact of the batch) on a read-only mount"
	assert_errno EROFS setxattr "$p" user.topicfs.clean 1
	names=$(getfattr --absolute-names -m - -d "$p" | sed -n 's/=.*//p' | xargs)
	case " $names " in *dirty*|*last_clean*|*uncleanable*) fail "a read-only partition lists cleaner attributes: $names" ;; esac
	assert_eq "" "$(grep '^topicfs_cleaner_' "$MNT/.topicfs/metrics" || true)" "cleaner metrics on a read-only mount"
	assert_eq "2 3 x" "$(ls -A "$h" | sed 's/^0*//' | xargs) $(ls "$p")" "history and keys on the read-only mount"
}

# (h) The metrics file carries the cleaner's metrics.
c_metrics() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local m
	echo 1 > "$MNT/t/0/k"; echo 2 > "$MNT/t/0/k"
	roll_clean t/0
	m=$(cat "$MNT/.topicfs/metrics")
	for i in max_dirty_percent uncleanable_partitions_count time_since_last_run_ms \
		max_buffer_utilization_percent max_clean_time_secs recopy_percent dead_thread_count; do
		printf '%s\n' "$m" | grep -Eq "^topicfs_cleaner_$i [0-9.e+-]+\$" || fail "metrics lack topicfs_cleaner_$i"
	done
	assert_match '[1-9][0-9]*' "$(printf '%s\n' "$m" | sed -n 's/^topicfs_cleaner_passes_total //p')" \
		"topicfs_cleaner_passes_total after a pass"
	printf '%s\n' "$m" | grep -q '^topicfs_cleaner_partition_[a-z_]*{topic="t",partition="0"} ' ||
		fail "metrics lack per-partition cleaner lines"
	printf '%s\n' "$m" | grep -q '^topicfs_partition_size_bytes{topic="t",partition="0"} ' ||
		fail "the fs metrics went missing"
}

# (i) The segments a pass replaced are renamed *.deleted and unlinked on a
# background thread (the daemon waits for what is queued before it exits): after
# a pass and an unmount none of their files is left.
c_replaced_segment_files_do_not_stay() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0 r k first_ino
	for r in 1 2 3; do
		for k in a b c; do echo "$k$r" > "$p/$k"; done
		setfattr -n user.topicfs.roll -v 1 "$p"
	done
	first_ino=$(stat -c %i "$DATA/t-0/00000000000000000000.log")
	roll_clean t/0
	[ "$(stat -c %i "$DATA/t-0/00000000000000000000.log")" != "$first_ino" ] ||
		{ echo "# FAIL: the pass did not replace the first segment"; exit 1; }
	assert_eq "a3 b3 c3" "$(cat "$p/a" "$p/b" "$p/c" | xargs)" "values after the pass"
	t_umount
	assert_eq "" "$(find "$DATA/t-0" -name '*.deleted' | xargs)" "files of replaced segments after unmount"
	assert_eq 2 "$(find "$DATA/t-0" -name '*.log' | wc -l)" "segments left (the cleaned group, the active one)"
}

# (j) A partition directory without a config (a broker's copy) is neither
# compacted nor trimmed under topicfs's default policy: status and the log say
# so, an explicit pass is refused with EPERM; a config set hands it over.
c_broker_copy_left_alone() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	echo 1 > "$MNT/t/0/k"; echo 2 > "$MNT/t/0/k"
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	t_umount "$MNT"
	cp -r "$DATA/t-0" "$DATA/b-0"
	t_mount -o "$NOBG"
	grep -qx "topic b has no config: neither compacted nor trimmed until one is set" \
		"$MNT/.topicfs/status" || fail "no status line: $(cat "$MNT/.topicfs/status")"
	grep -q "^topic t has no config" "$MNT/.topicfs/status" && fail "a status line for t"
	t_daemon_log | grep -q "topic b has no topics/b file" || fail "no log line for b"
	assert_errno EPERM setxattr "$MNT/b/0" user.topicfs.clean 1
	assert_eq 2 "$(t_hist b/0)" "history of the copy before a config"
	setfattr -n user.topicfs.cleanup.policy -v compact "$MNT/b"
	grep -q "^topic b has no config" "$MNT/.topicfs/status" && fail "status line after a config"
	roll_clean b/0
	assert_eq 1 "$(t_hist b/0)" "history of the copy after a pass"
	assert_eq 2 "$(cat "$MNT/b/0/k")" "newest value after the pass"
}

# (k) A delete topic whose only segment expires (Kafka's retention of the active
# segment): it is rolled and deleted, its keys vanish, history is empty, the log
# start offset becomes the log end offset, and offsets keep counting from there.
c_retention_expires_the_active_segment() {
	t_mount -o "$NOBG"
	mkdir "$MNT/t"
	local p=$MNT/t/0
	setfattr -n user.topicfs.cleanup.policy -v delete "$MNT/t"
	echo 1 > "$p/a"
	echo 2 > "$p/b"
	rm "$p/a"
	setfattr -n user.topicfs.retention.ms -v 1 "$MNT/t"
	sleep 0.05                             # the records are now past retention.ms
	setfattr -n user.topicfs.clean -v 1 "$p"
	assert_eq "" "$(ls -A "$p" | xargs)" "keys after retention"
	assert_eq 0 "$(t_hist t/0)" "history after retention"
	assert_eq 3 "$(t_x "$p" log_start_offset)" "log start offset after retention"
	assert_eq 3 "$(t_leo t/0)" "log end offset after retention"
	assert_eq "$(t_off 3).log" "$(cd "$DATA/t-0" && ls *.log)" "segment files after retention"
	setfattr -n user.topicfs.retention.ms -v -1 "$MNT/t"
	echo 3 > "$p/c"
	assert_eq "$(t_off 3)" "$(t_last t/0)" "offset of the next record"
	t_remount -o "$NOBG"
	assert_eq 3 "$(t_x "$p" log_start_offset)" "log start offset after remount"
	assert_eq "c" "$(ls -A "$p" | xargs)" "keys after remount"
	assert_eq 3 "$(cat "$p/c")" "value after remount"
}

t_test clean_keeps_newest_at_same_offsets c_clean_keeps_newest_at_same_offsets
t_test tombstone_horizon_then_gone c_tombstone_horizon_then_gone
t_test empty_value_is_not_a_tombstone c_empty_value_is_not_a_tombstone
t_test keyless_records_stay c_keyless_records_stay
t_test compaction_equivalence_with_writers c_compaction_equivalence_with_writers
t_test region_and_partition_attrs c_region_and_partition_attrs
t_test read_only_has_no_cleaner c_read_only_has_no_cleaner
t_test metrics c_metrics
t_test replaced_segment_files_do_not_stay c_replaced_segment_files_do_not_stay
t_test crash_during_pass c_crash_during_pass
t_test broker_copy_left_alone c_broker_copy_left_alone
t_test retention_expires_the_active_segment c_retention_expires_the_active_segment
t_done
