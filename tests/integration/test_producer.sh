#!/bin/bash
# test_producer.sh - the idempotent producer through .batches: batches built by
# kafka-python as an idempotent producer builds them (producer id, epoch, base
# sequence) and written twice appear once; a sequence gap fails with EILSEQ, an
# older epoch with EPERM, both appending nothing; a remount or a kill -9 in the
# middle of a retry still deduplicates (producer state rebuilt from its snapshot
# and the log after it); user.topicfs.producers lists the producers.
. "$(dirname "$0")/lib.sh"
t_require_daemon

PID=1000

# idem_batches DIR: producer $PID's batches, now-stamped: s0 (epoch 0, seq 0-2),
# s1 (seq 3-4), s2 (seq 5), gap (seq 9), e1 (epoch 1, seq 0), old (epoch 0, seq 6).
idem_batches() {
	"$T_PY" - "$1" "$PID" <<'PY'
import sys, time
from kafka.record.default_records import DefaultRecordBatchBuilder
d, pid = sys.argv[1], int(sys.argv[2])
ts = int(time.time() * 1000)
def batch(name, epoch, seq, n):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts, key=b"order-%d" % (seq + i), value=b"created", headers=[])
    open("%s/%s.bin" % (d, name), "wb").write(bytes(b.build()))
batch("s0", 0, 0, 3); batch("s1", 0, 3, 2); batch("s2", 0, 5, 1)
batch("gap", 0, 9, 1); batch("e1", 1, 0, 1); batch("old", 0, 6, 1)
PY
}

# batches_write WANT N FILE: one write of FILE to t/0/.batches reports WANT and
# appends N records.
batches_write() {
	local want=$1 n=$2 l0 got
	l0=$(t_leo t/0)
	got=$(t_sys writes "$MNT/t/0/.batches" "file:$3")
	assert_eq "$want" "$got" "write of $(basename "$3") to .batches"
	assert_eq "$n" $(($(t_leo t/0) - l0)) "records appended by $(basename "$3")"
}

c_retries_appear_once() {
	"$T_PY" -c 'import kafka.record.default_records' 2>/dev/null ||
		skip "python3-kafka is not installed"
	local d=$T_CASE line
	idem_batches "$d"
	t_mount
	mkdir "$MNT/t"
	batches_write "open:OK write1:OK close:OK" 3 "$d/s0.bin"
	batches_write "open:OK write1:OK close:OK" 0 "$d/s0.bin"     # the retry
	batches_write "open:OK write1:OK close:OK" 2 "$d/s1.bin"
	batches_write "open:OK write1:OK close:OK" 0 "$d/s1.bin"
	batches_write "open:OK write1:EILSEQ close:OK" 0 "$d/gap.bin"
	t_daemon_log | grep -q "refused producer $PID" || fail "no log line for the gap"
	assert_eq 5 "$(t_leo t/0)" "log end"
	assert_eq 5 "$(t_hist t/0)" "history entries"
	assert_eq "$PID" "$(t_x "$MNT/t/0/.history/$(t_off 3)" producer_id)" "history producer_id"
	line=$(t_x "$MNT/t/0" producers)
	assert_match "^$PID 0 4 4 [0-9]+\$" "$line" "user.topicfs.producers"

	# a clean remount: the snapshot written at close knows the newest batch
	t_remount
	batches_write "open:OK write1:OK close:OK" 0 "$d/s1.bin"
	batches_write "open:OK write1:OK close:OK" 1 "$d/s2.bin"
	# kill -9 before the acknowledgement reaches the producer: it resends
	t_kill_daemon
	t_mount
	batches_write "open:OK write1:OK close:OK" 0 "$d/s2.bin"
	batches_write "open:OK write1:OK close:OK" 0 "$d/s1.bin"
	assert_eq 6 "$(t_leo t/0)" "log end after the kill"
	ls "$DATA/t-0/" | grep -q '^0\{19\}5\.snapshot$' || fail "no snapshot at offset 5: $(ls "$DATA/t-0")"

	# a new epoch fences the old one
	batches_write "open:OK write1:OK close:OK" 1 "$d/e1.bin"
	batches_write "open:OK write1:EPERM close:OK" 0 "$d/old.bin"
	line=$(t_x "$MNT/t/0" producers)
	assert_match "^$PID 1 0 6 [0-9]+\$" "$line" "user.topicfs.producers after the new epoch"
	assert_eq 7 "$(t_hist t/0)" "history entries at the end"
	[ -x "$BUILD_DIR/topicctl" ] || fail "$BUILD_DIR/topicctl not built"
	"$BUILD_DIR/topicctl" describe "$MNT/t" > "$d/describe" || fail "topicctl describe failed"
	grep -Eq "^0 +$PID +1 +0 +6 +[0-9]+\$" "$d/describe" ||
		fail "topicctl describe lists no producer: $(cat "$d/describe")"
	"$BUILD_DIR/topicctl" describe --json "$MNT/t" | "$T_PY" -c '
import json, sys
p = json.load(sys.stdin)["producers"]
assert [(x["producer_id"], x["epoch"], x["last_offset"]) for x in p] == [(int(sys.argv[1]), 1, 6)], p' \
		"$PID" || fail "topicctl describe --json producers"
}

# .topicfs/producer_id: a fresh "ID EPOCH" line per open, never repeated across
# a remount or a kill -9; none on a read-only mount.
c_producer_ids() {
	local a b c e
	t_mount
	mkdir "$MNT/t"
	a=$(cat "$MNT/.topicfs/producer_id")
	b=$(cat "$MNT/.topicfs/producer_id")
	assert_match '^[0-9]+ 0$' "$a" "first producer id"
	[ "${b% *}" -gt "${a% *}" ] || fail "ids do not increase: $a then $b"
	ls "$MNT/.topicfs" | grep -qx producer_id || fail "producer_id not listed in .topicfs"
	t_remount
	c=$(cat "$MNT/.topicfs/producer_id")
	[ "${c% *}" -gt "${b% *}" ] || fail "an id repeats after a remount: $b then $c"
	t_kill_daemon
	t_mount
	e=$(cat "$MNT/.topicfs/producer_id")
	[ "${e% *}" -gt "${c% *}" ] || fail "an id repeats after kill -9: $c then $e"
	assert_eq t "$(ls "$MNT")" "the allocator's file is no topic"
	t_umount "$MNT"
	t_mount -o ro
	assert_errno EROFS open "$MNT/.topicfs/producer_id" r
}

t_test retries_appear_once c_retries_appear_once
t_test producer_ids c_producer_ids
t_done
