#!/bin/bash
# test_txn.sh - a .put is one transaction: its keys appear at the close and not
# before (stat, ls, cp -r), a failed write aborts all of it, a daemon killed
# with a .put open comes back with that transaction aborted; history shows
# each record's state and the markers; the partition shows its last stable
# offset; .txnindex files hold the aborts; kafka-python decodes the log,
# markers included, and its read_committed consumer sees only committed
# records. One mount (and a remount) for all of it.
. "$(dirname "$0")/lib.sh"
t_require_daemon

TAB=$'\t'
NL=$'\n'

# put_open P FIFO K [EXISTING]: writes lines K1 and K2 to P/.put through one
# handle, checks while it is open that neither key is seen (unless EXISTING:
# K1 had a value before), flushes it to disk (fsync), prints "open" and waits
# for a line from FIFO before closing.
put_open() {
	"$T_PY" - "$@" <<'PY'
import os, sys
p, k = sys.argv[1], sys.argv[3]
fd = os.open(p + "/.put", os.O_WRONLY)
os.write(fd, k.encode() + b"1\tone\n")
os.write(fd, k.encode() + b"2\ttwo\n")
for n in ("1", "2") if len(sys.argv) < 5 else ("2",):
    assert not os.path.exists(p + "/" + k + n), k + n + " seen before the commit"
assert k + "2" not in os.listdir(p)
os.fsync(fd)
print("open", flush=True)
open(sys.argv[2]).readline()
try:
    os.close(fd)
except OSError:                # the daemon was killed under it
    sys.exit(0)
print("closed", flush=True)
PY
}

hist_txn() { t_x "$MNT/t/0/.history/$(t_off "$1")" txn; }

c_put_transactions() {
	local p=$MNT/t/0 d=$T_CASE leo writer
	t_mount
	mkdir "$MNT/t"
	echo base > "$p/b"                                    # 0

	# open: nothing seen, the LSO held at its first offset
	mkfifo "$d/go"
	put_open "$p" "$d/go" t > "$d/out" &
	writer=$!
	exec 3<> "$d/go"                 # never blocks, whether the writer opened it or died
	for _ in $(seq 100); do grep -q open "$d/out" && break; sleep 0.1; done
	assert_eq open "$(cat "$d/out")" "the .put writer got its lines in"
	assert_absent "$p/t1"
	assert_eq "b" "$(ls "$p" | xargs)" "listing with a .put open"
	assert_eq 1 "$(t_x "$p" last_stable_offset)" "LSO with the .put open"
	assert_eq 3 "$(t_leo t/0)" "log end with the .put open"
	assert_eq open "$(hist_txn 1)" "history of an open transaction's record"
	mkdir "$d/copy"
	cp -r "$p" "$d/copy/"
	assert_eq "b" "$(ls "$d/copy/0" | xargs)" "cp -r with a .put open"
	echo go >&3
	exec 3>&-
	wait "$writer"
	assert_cat "$p/t1" one
	assert_cat "$p/t2" two
	assert_eq 4 "$(t_x "$p" last_stable_offset)" "LSO after the commit"
	assert_eq committed "$(hist_txn 1)" "history of a committed record"
	assert_eq commit_marker "$(hist_txn 3)" "history of the COMMIT marker"
	assert_errno ENODATA getxattr "$p/.history/$(t_off 0)" user.topicfs.txn

	# a failed write: the close aborts everything, and says so
	assert_eq "open:OK write1:OK write2:EINVAL write3:OK close:EINVAL" \
		"$(t_sys writes "$p/.put" "a1${TAB}x${NL}" "g${TAB}1${NL}notab${NL}" "a2${TAB}y${NL}")" \
		".put with a bad write"
	assert_absent "$p/a1"
	assert_absent "$p/a2"
	assert_eq aborted "$(hist_txn 4)" "history of an aborted record"
	assert_eq abort_marker "$(hist_txn 6)" "history of the ABORT marker"
	assert_eq 34 "$(stat -c %s "$DATA/t-0/$(t_off 0).txnindex")" ".txnindex of the abort"
	t_daemon_log | grep -q '.put: 2 records aborted' || fail "no log line for the abort"

	# a daemon killed with a .put open: the remount aborts it
	put_open "$p" "$d/go" k > "$d/out" &
	writer=$!
	exec 3<> "$d/go"                 # never blocks, whether the writer opened it or died
	for _ in $(seq 100); do grep -q open "$d/out" && break; sleep 0.1; done
	assert_eq open "$(cat "$d/out")" "the second writer got its lines in"
	t_kill_daemon
	exec 3>&-
	wait "$writer" || true
	t_mount
	assert_cat "$p/t1" one                                 # the committed one's
	leo=$(t_leo t/0)
	assert_eq 10 "$leo" "log end: two records and the ABORT written at open"
	assert_eq "$leo" "$(t_x "$p" last_stable_offset)" "LSO after the remount"
	assert_eq aborted "$(hist_txn 7)" "history of the killed transaction"
	assert_eq abort_marker "$(hist_txn 9)" "the ABORT written at open"
	assert_eq 68 "$(stat -c %s "$DATA/t-0/$(t_off 0).txnindex")" ".txnindex of both aborts"
	assert_absent "$p/k1"
	assert_eq "b t1 t2" "$(ls "$p" | xargs)" "listing at the end"

	# kafka-python decodes the log, markers included
	"$T_PY" -c 'import kafka.record.default_records' 2>/dev/null ||
		skip "python3-kafka is not installed"
	"$T_PY" - "$DATA/t-0/$(t_off 0).log" <<'PY' > "$d/decoded" || fail "kafka-python cannot decode the log"
import sys
from kafka.record.default_records import DefaultRecordBatch
data = open(sys.argv[1], "rb").read()
pos = 0
while pos < len(data):
    size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
    raw = data[pos:pos + size]
    b = DefaultRecordBatch(raw)
    assert b.validate_crc(), pos
    pid = int.from_bytes(raw[43:51], "big", signed=True)
    seq = int.from_bytes(raw[53:57], "big", signed=True)
    for r in b:
        if b.is_control_batch:
            kind = {0: "ABORT", 1: "COMMIT"}[int.from_bytes(r.key[2:4], "big")]
            print(r.offset, "marker", kind, pid >= 0, seq)
        else:
            print(r.offset, r.key.decode(), "txn" if b.is_transactional else "plain")
    pos += size
PY
	assert_eq "0 b plain|1 t1 txn|2 t2 txn|3 marker COMMIT True -1|4 a1 txn|5 a2 txn|6 marker ABORT True -1|7 k1 txn|8 k2 txn|9 marker ABORT True -1" \
		"$(paste -sd '|' "$d/decoded")" "the log as kafka-python reads it"
}

# Fetch with isolation_level 1 (read_committed) through the Kafka listener: the
# last stable offset holds at an open .put's first offset, nothing past it is
# served, and the aborted transactions listed let a consumer (Kafka's rule: skip
# an aborted producer's batches from its first offset to its ABORT marker, and
# every control batch) keep exactly the committed records; isolation 0 serves
# everything up to the high watermark.
c_read_committed() {
	"$T_PY" -c 'import kafka.protocol.fetch' 2>/dev/null || skip "python3-kafka is not installed"
	local p=$MNT/t/0 d=$T_CASE port writer
	t_mount -o listeners=PLAINTEXT://127.0.0.1:0
	for _ in $(seq 100); do
		port=$(t_daemon_log | sed -n 's/.*kafka: listening on PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p')
		[ -n "$port" ] && break
		sleep 0.1
	done
	mkdir "$MNT/t"
	t_sys writes "$p/.put" "c1${TAB}x${NL}c2${TAB}y${NL}" > /dev/null         # 0-1, COMMIT 2
	t_sys writes "$p/.put" "a1${TAB}x${NL}" "notab${NL}" > /dev/null           # 3, ABORT 4
	echo plain > "$p/n"                                                    # 5
	mkfifo "$d/go"
	put_open "$p" "$d/go" o > "$d/out" &                                   # 6-7, open
	writer=$!
	exec 3<> "$d/go"
	for _ in $(seq 100); do grep -q open "$d/out" && break; sleep 0.1; done
	"$T_PY" - "$port" <<'PY' > "$d/fetched" || fail "the read_committed fetch"
import socket, struct, sys
from kafka.protocol.fetch import FetchRequest
from kafka.record.default_records import DefaultRecordBatch
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def fetch(isolation, corr):
    req = FetchRequest[4](replica_id=-1, max_wait_time=0, min_bytes=0, max_bytes=1 << 20,
                          isolation_level=isolation, topics=[("t", [(0, 0, 1 << 20)])])
    body = req.encode()
    hdr = struct.pack(">hhih", 1, 4, corr, 3) + b"raw"
    s.sendall(struct.pack(">i", len(hdr) + len(body)) + hdr + body)
    n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    data = s.recv(n, socket.MSG_WAITALL)
    r = req.RESPONSE_TYPE.decode(data[4:])
    (_, parts), = r.topics
    (_, err, hw, lso, aborted, records), = parts
    return err, hw, lso, aborted or [], records
def consume(records, aborted):
    out, pos, skipping = [], 0, {}
    starts = sorted((first, pid) for pid, first in aborted)
    while pos < len(records):
        size = struct.unpack(">i", records[pos + 8:pos + 12])[0] + 12
        raw = records[pos:pos + size]
        pos += size
        b = DefaultRecordBatch(raw)
        pid = struct.unpack(">q", raw[43:51])[0]
        while starts and starts[0][0] <= b.base_offset:
            skipping[starts.pop(0)[1]] = True
        if b.is_control_batch:
            skipping.pop(pid, None)
            continue
        if b.is_transactional and skipping.get(pid):
            continue
        out += [r.key.decode() for r in b]
    return out
err, hw, lso, aborted, records = fetch(1, 1)
print("committed", err, hw, lso, len(aborted), " ".join(consume(records, aborted)))
err, hw, lso, aborted, records = fetch(0, 2)
print("uncommitted", err, hw, lso, aborted == [], " ".join(consume(records, [])))
PY
	echo go >&3
	exec 3>&-
	wait "$writer"
	assert_eq "committed 0 8 6 1 c1 c2 n" "$(sed -n 1p "$d/fetched")" "read_committed: LSO 6, a1 aborted"
	assert_eq "uncommitted 0 8 6 True c1 c2 a1 n o1 o2" "$(sed -n 2p "$d/fetched")" \
		"read_uncommitted: everything to the high watermark, no aborted list"
}

# An rm of a key while a .put that wrote it is open lands after the .put's
# line: the close commits, and the key stays deleted, as the log's offset order
# (and the cleaner, and a consumer) has it - also after a remount.
c_rm_during_put() {
	local p=$MNT/r/0 d=$T_CASE writer
	t_mount
	mkdir "$MNT/r"
	printf old > "$p/t1"                                  # 0
	mkfifo "$d/go"
	put_open "$p" "$d/go" t existing > "$d/out" &         # 1, 2
	writer=$!
	exec 3<> "$d/go"
	for _ in $(seq 100); do grep -q open "$d/out" && break; sleep 0.1; done
	assert_eq open "$(cat "$d/out")" "the .put writer got its lines in"
	assert_cat "$p/t1" old
	rm "$p/t1"                                            # 3
	echo go >&3
	exec 3>&-
	wait "$writer"
	assert_eq 5 "$(t_leo r/0)" "log end: the COMMIT at 4"
	assert_absent "$p/t1"
	assert_cat "$p/t2" two
	t_umount
	t_mount
	assert_absent "$p/t1"
	assert_eq "t2" "$(ls "$p" | xargs)" "listing after the remount"
}

t_test put_transactions c_put_transactions
t_test rm_during_put c_rm_during_put
t_test read_committed c_read_committed
t_done
