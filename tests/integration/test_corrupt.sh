#!/bin/bash
# test_corrupt.sh - damaged segments through a real mount (README "Corruption in a
# sealed segment"): a key whose newest readable record precedes an unreadable
# region reads EIO, never an older value; a deleted key never comes back; the
# listing ends with EIO, so cp -r and tar fail instead of copying a wrong tree;
# topicctl status and verify name the damage and agree with the mount; topicctl
# repair cuts the log as Kafka's recovery does. tests/engine/test_corrupt.c flips
# every byte of a log at the engine level; here a sample goes through the mount.
. "$(dirname "$0")/lib.sh"
t_require_daemon

CTL=$BUILD_DIR/topicctl

# flip FILE POS: XOR the byte at POS with 0xff.
flip() {
	"$T_PY" - "$1" "$2" <<'EOF'
import sys
p, pos = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[pos] ^= 0xFF
open(p, "wb").write(b)
EOF
}

# The log of the issue: s0..s9 old, roll; s0..s4 new, s5..s9 removed, roll; one
# more write. Segments: 0 (old values), 10 (the new ones and the tombstones), 20.
write_issue_log() {
	local i
	t_mount -o segment.bytes=1024,index.interval.bytes=100    # indexes with entries
	mkdir "$MNT/t"
	for i in $(seq 0 9); do echo "old-$i" > "$MNT/t/0/s$i"; done
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	for i in $(seq 0 4); do echo "new-$i" > "$MNT/t/0/s$i"; done
	for i in $(seq 5 9); do rm "$MNT/t/0/s$i"; done
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	echo last > "$MNT/t/0/extra"
	t_umount
	[ -f "$DATA/t-0/00000000000000000010.log" ] || fail "no segment at offset 10: $(ls "$DATA/t-0")"
}

# Reads every key of the issue log: no old value, no deleted key back.
check_never_stale() {
	local i got
	for i in $(seq 0 4); do
		if got=$(cat "$MNT/t/0/s$i" 2>/dev/null); then
			assert_eq "new-$i" "$got" "s$i"
		else
			assert_errno EIO read "$MNT/t/0/s$i"
		fi
	done
	for i in $(seq 5 9); do
		if got=$(cat "$MNT/t/0/s$i" 2>/dev/null); then
			fail "s$i was deleted, but reads $(t__show "$got")"
		fi
		assert_errno "ENOENT|EIO" read "$MNT/t/0/s$i"
	done
	assert_cat "$MNT/t/0/extra" "last
"
}

# The issue's reproduction: byte 30 of the second segment (inside its first
# batch's CRC range) flipped.
c_issue_repro() {
	local i lines
	need tar
	write_issue_log
	flip "$DATA/t-0/00000000000000000010.log" 30
	run_ok=$("$CTL" verify "$DATA" 2>&1) && fail "verify found nothing: $run_ok"
	assert_match ".*00000000000000000010.log:0: sealed segment damaged: bytes 0\.\.[0-9]+ unreadable \(crc mismatch\), offsets 10\.\.10 unknown.*" \
		"$(echo "$run_ok" | tr '\n' ' ')" "verify"
	t_mount -o segment.bytes=1024
	check_never_stale
	assert_errno EIO read "$MNT/t/0/s0"          # its newer record is the damaged batch
	for i in 1 2 3 4; do assert_cat "$MNT/t/0/s$i" "new-$i
"; done                                            # read after the damage: fine
	for i in 5 6 7 8 9; do assert_absent "$MNT/t/0/s$i"; done
	# the listing shows what is known, then fails
	if ls "$MNT/t/0" > ls.out 2> ls.err; then fail "ls of a damaged partition succeeded"; fi
	grep -q "Input/output error" ls.err || fail "ls: $(cat ls.err)"
	assert_eq "extra s0 s1 s2 s3 s4" "$(sort ls.out | tr '\n' ' ' | sed 's/ $//')" "ls"
	if cp -r "$MNT/t" copy 2> cp.err; then fail "cp -r of a damaged topic succeeded"; fi
	if tar -cf t.tar -C "$MNT" t 2> tar.err; then fail "tar of a damaged topic succeeded"; fi
	# status names the partition, the file, the position and the offsets; exit 1
	if "$CTL" status "$MNT" > status.out 2>&1; then fail "status exited 0: $(cat status.out)"; fi
	grep -q "^  DAMAGED: $DATA/t-0/00000000000000000010.log:0: bytes 0\.\.[0-9]* unreadable (crc mismatch); offsets 10\.\.10 unknown" status.out ||
		fail "status: $(cat status.out)"
	grep -q "^t/0 .*UNCLEANABLE: .*00000000000000000010.log at position 0" status.out ||
		fail "status: $(cat status.out)"
	# logged once, at open, not per read
	for i in 1 2 3; do cat "$MNT/t/0/s0" 2>/dev/null || true; done
	lines=$(t_daemon_log | grep -c "may be stale" || true)
	assert_eq 1 "$lines" "log lines about the stale keys"
	t_daemon_log | grep -q "1 keys whose newest readable record precedes offset 10" ||
		fail "the open did not count the stale key: $(t_daemon_log | tail -5)"
	if t_daemon_log | grep -q "behind key"; then fail "reads logged: $(t_daemon_log | grep 'behind key' | head -3)"; fi
	# a new record makes a stale key fresh again; rm of one is a tombstone
	echo fresh > "$MNT/t/0/s0"
	assert_cat "$MNT/t/0/s0" "fresh
"
	t_umount
	# the segment was left as it was
	assert_eq 1 "$({ "$CTL" verify "$DATA" 2>&1 || true; } | grep -c 'sealed segment damaged')" \
		"regions verify sees after the mount"
}

# topicctl repair: a dry run changes nothing; --yes refuses a mounted directory,
# then cuts; the next mount lists, copies and reads whole, at the cut's state.
c_repair() {
	local i
	write_issue_log
	flip "$DATA/t-0/00000000000000000010.log" 30
	cp -a "$DATA" before
	if "$CTL" repair "$DATA" > dry.out 2>&1; then fail "a dry run with damage exited 0"; fi
	grep -q "^t-0: damaged: 00000000000000000010.log at position 0: crc mismatch" dry.out || fail "$(cat dry.out)"
	grep -q "^  loses offsets 10\.\.20:" dry.out || fail "$(cat dry.out)"
	grep -q "dry run: nothing changed" dry.out || fail "$(cat dry.out)"
	diff -r before "$DATA" > /dev/null || fail "a dry run changed $DATA"
	t_mount -o segment.bytes=1024
	if "$CTL" repair --yes "$DATA" > yes.out 2>&1; then fail "repair --yes of a mounted directory ran"; fi
	grep -q "unmount it first" yes.out || fail "$(cat yes.out)"
	t_umount
	"$CTL" repair --yes "$DATA" > yes.out 2>&1 || fail "repair --yes: $(cat yes.out)"
	grep -q "repaired: the log ends at offset 10" yes.out || fail "$(cat yes.out)"
	"$CTL" verify "$DATA" > /dev/null 2>&1 || fail "verify after repair: $("$CTL" verify "$DATA" 2>&1)"
	t_mount -o segment.bytes=1024
	# the log ends before the damage: the state after the first segment
	for i in $(seq 0 9); do assert_cat "$MNT/t/0/s$i" "old-$i
"; done
	assert_absent "$MNT/t/0/extra"
	assert_eq "" "$(t_x "$MNT/t/0" damage)" "damage after repair"
	ls "$MNT/t/0" > /dev/null || fail "ls after repair"
	cp -r "$MNT/t" copy || fail "cp -r after repair"
	"$CTL" status "$MNT" > status.out 2>&1 || fail "status after repair: $(cat status.out)"
	echo again > "$MNT/t/0/s0"                  # and the log takes writes
	assert_cat "$MNT/t/0/s0" "again
"
}

# verify and the mount agree on a truncated sealed segment: nothing is cut, the
# damage is at the same position; on the active segment both call it a torn tail.
c_truncated_sealed() {
	local size pos
	write_issue_log
	size=$(stat -c %s "$DATA/t-0/00000000000000000000.log")
	truncate -s $((size - 5)) "$DATA/t-0/00000000000000000000.log"
	"$CTL" verify "$DATA/t-0" > v.out 2>&1 && fail "verify found nothing"
	if grep "00000000000000000000.log" v.out | grep -q "cut by the next mount"; then
		fail "verify says the mount cuts a sealed segment: $(cat v.out)"
	fi
	pos=$(sed -n 's/.*00000000000000000000.log:\([0-9]*\): sealed segment damaged.*/\1/p' v.out)
	[ -n "$pos" ] || fail "verify: $(cat v.out)"
	t_mount -o segment.bytes=1024
	assert_match ".*00000000000000000000.log:$pos: bytes $pos\.\.$((size - 6)) unreadable \(the file ends inside the batch\).*" \
		"$(t_x "$MNT/t/0" damage)" "damage"
	check_never_stale
	t_umount
	assert_eq $((size - 5)) "$(stat -c %s "$DATA/t-0/00000000000000000000.log")" "size of the sealed segment after a mount"
	# the active segment's torn tail: verify says the mount cuts it, and it does
	size=$(stat -c %s "$DATA/t-0/00000000000000000020.log")
	truncate -s $((size - 3)) "$DATA/t-0/00000000000000000020.log"
	"$CTL" verify "$DATA/t-0" > v.out 2>&1 || true
	grep -q "00000000000000000020.log:0: .*cut by the next mount" v.out || fail "verify: $(cat v.out)"
	t_mount -o segment.bytes=1024
	t_umount
	assert_eq 0 "$(stat -c %s "$DATA/t-0/00000000000000000020.log")" "size of the active segment after a mount"
}

# A sample of flipped bytes through the mount, sealed .log and indexes: a read
# returns the newest value or fails; a deleted key never reads; the listing and
# status fail exactly when the mount reports damage.
c_sample_flips() {
	local f pos size damage ls_rc st_rc n=0
	write_issue_log
	cp -a "$DATA" pristine
	for f in 00000000000000000000.log 00000000000000000010.log 00000000000000000010.index \
		00000000000000000010.timeindex; do
		size=$(stat -c %s "pristine/t-0/$f")
		[ "$size" -gt 0 ] || fail "pristine/t-0/$f is empty"
		for pos in $(seq 0 53 $((size - 1))) $((size - 1)); do
			rm -rf "$DATA" && cp -a pristine "$DATA"
			flip "$DATA/t-0/$f" "$pos"
			t_mount -o segment.bytes=1024
			check_never_stale
			damage=$(t_x "$MNT/t/0" damage)
			ls_rc=0; ls "$MNT/t/0" > /dev/null 2>&1 || ls_rc=$?
			st_rc=0; "$CTL" status "$MNT/t/0" > /dev/null 2>&1 || st_rc=$?
			if [ -n "$damage" ]; then
				[ "$ls_rc" != 0 ] || fail "$f byte $pos: damage ($damage) but ls succeeded"
				assert_eq 1 "$st_rc" "$f byte $pos: status exit with damage"
			else
				# (a base offset or leader epoch byte: the CRC does not cover it)
				assert_eq 0 "$ls_rc" "$f byte $pos: ls exit without damage"
				assert_eq 0 "$st_rc" "$f byte $pos: status exit without damage"
			fi
			t_umount
			n=$((n + 1))
		done
	done
	echo "# $n flips through the mount"
}

t_test issue_repro c_issue_repro
t_test repair c_repair
t_test truncated_sealed c_truncated_sealed
t_test sample_flips c_sample_flips
t_done
