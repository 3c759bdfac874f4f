#!/bin/bash
# test_kafka.sh - the Kafka listener (docs/kafka.md): its settings by Kafka's names
# and meta.properties; kcat (librdkafka) and kafka-python producing and consuming
# through it, in both directions with the mount, in every codec, across
# compaction gaps and tombstones; topics created and deleted from either side;
# bad frames that get Kafka's error or a closed connection and change nothing;
# 1,000 idle connections, a client that connects and drops in a loop, one that
# stops reading; and the mount's permissions applied to each connection's user.
. "$(dirname "$0")/lib.sh"
t_require_daemon
KW=$T_LIB_DIR/kafka_wire.py

# kmount [OPTS]: mount with a listener on a port the kernel picks; sets PORT and BROKER.
kmount() { t_kafka_mount "$@"; }
kw() { "$T_PY" "$KW" "$PORT" "$@"; }
need_kcat() { command -v kcat > /dev/null || skip "kcat is not installed (scripts/install-deps.sh --tests)"; }
py() { "$T_PY" - "$BROKER" "$@"; }

# (a) meta.properties: written once with a cluster id, kept across mounts; another
# node.id on the same data directory is refused.
c_meta_properties() {
	kmount
	assert_match '^cluster\.id=[A-Za-z0-9_-]{22}$' "$(grep '^cluster.id=' "$DATA/meta.properties")" "cluster.id"
	assert_eq "node.id=1" "$(grep '^node.id=' "$DATA/meta.properties")" "node.id"
	local before
	before=$(cat "$DATA/meta.properties")
	t_umount
	kmount
	assert_eq "$before" "$(cat "$DATA/meta.properties")" "meta.properties after a remount"
	t_umount
	T_MOUNT_MAY_EXIT=1 t_mount -o listeners=PLAINTEXT://127.0.0.1:0,node.id=7 || true
	assert_eq 1 "${T_MOUNT_EXIT:-0}" "exit status with another node.id"
	t_daemon_log | grep -q 'belongs to node.id=1, not node.id=7' || fail "no log line names the node.id"
	assert_eq "$before" "$(cat "$DATA/meta.properties")" "meta.properties after a refused mount"
}

# (b) Without authentication only loopback: 0.0.0.0 fails the mount with a line
# saying why, unless kafka_allow_remote=true says so; bad values fail too.
c_loopback_only() {
	T_MOUNT_MAY_EXIT=1 t_mount -o listeners=PLAINTEXT://0.0.0.0:0 || true
	assert_eq 1 "${T_MOUNT_EXIT:-0}" "exit status for 0.0.0.0"
	t_daemon_log | grep -q 'is not a loopback address' || fail "no log line says why"
	local bad
	for bad in listeners=kafka://127.0.0.1:1 listeners=PLAINTEXT://127.0.0.1 socket.request.max.bytes=12 \
		node.id=-1 num.partitions=0 auto.create.topics.enable=maybe num.network.threads=0; do
		T_MOUNT_EXIT=0
		T_MOUNT_MAY_EXIT=1 t_mount -o "listeners=PLAINTEXT://127.0.0.1:0,$bad" || true
		assert_eq 1 "${T_MOUNT_EXIT:-0}" "exit status for $bad"
	done
	t_mount -o listeners=PLAINTEXT://0.0.0.0:0,kafka_allow_remote=true,advertised.listeners=PLAINTEXT://127.0.0.1:1
	t_daemon_log | grep -q 'warn kafka: kafka_allow_remote' || fail "no warning for kafka_allow_remote"
	t_umount
}

# (c) kcat: produced records are files at once; a file written in the mount is
# consumed; a null value removes the file; mkdir is a topic in Metadata.
c_kcat_both_doors() {
	need_kcat
	kmount
	printf 'a:1\nb:2\na:3\n' | kcat -b "$BROKER" -P -t t -K: 2> /dev/null
	assert_cat "$MNT/t/0/a" 3
	assert_cat "$MNT/t/0/b" 2
	assert_eq 3 "$(t_leo t/0)" "log end offset"
	printf 'from-the-shell' > "$MNT/t/0/c"
	assert_eq "0 a=1|1 b=2|2 a=3|3 c=from-the-shell" \
		"$(kcat -b "$BROKER" -C -t t -o beginning -e -q -f '%o %k=%s|' | sed 's/|$//')" "consumed"
	printf 'b:\n' | kcat -b "$BROKER" -P -t t -K: -Z 2> /dev/null
	assert_absent "$MNT/t/0/b"
	assert_eq "4 b=NULL" "$(kcat -b "$BROKER" -C -t t -o 4 -e -q -f '%o %k=%S' | sed 's/=-1$/=NULL/')" "tombstone"
	mkdir "$MNT/made-by-mkdir"
	kcat -b "$BROKER" -L | grep -q 'topic "made-by-mkdir" with 1 partitions' || fail "mkdir's topic is not in Metadata"
	t_umount
}

# (d) Every codec from both clients: stored, decoded by the mount, consumed back.
c_codecs() {
	kmount
	py <<'PY'
import sys
from kafka import KafkaProducer
for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    p = KafkaProducer(bootstrap_servers=sys.argv[1], compression_type=None if codec == "none" else codec,
                      linger_ms=20)
    for i in range(50):
        p.send("py-" + codec, key=b"k%d" % (i % 10), value=(codec + "-%d" % i).encode() * 3)
    p.flush()
    p.close()
PY
	local c
	for c in none gzip snappy lz4 zstd; do
		assert_cat "$MNT/py-$c/0/k9" "$c-49$c-49$c-49"
		assert_eq 50 "$(t_leo "py-$c/0")" "records of $c"
	done
	py <<'PY'
import sys
from kafka import KafkaConsumer, TopicPartition
for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    c = KafkaConsumer(bootstrap_servers=sys.argv[1], consumer_timeout_ms=5000, auto_offset_reset="earliest")
    tp = TopicPartition("py-" + codec, 0)
    c.assign([tp])
    got = [(m.offset, m.value) for m in c]
    want = [(i, (codec + "-%d" % i).encode() * 3) for i in range(50)]
    assert got == want, (codec, got[:3])
    c.close()
PY
	if command -v kcat > /dev/null; then
		for c in gzip snappy zstd; do
			seq 1 20 | sed 's/.*/k&:v&/' | kcat -b "$BROKER" -P -t "kc-$c" -K: -z "$c" 2> /dev/null
			assert_cat "$MNT/kc-$c/0/k20" v20
			assert_eq 20 "$(kcat -b "$BROKER" -C -t "kc-$c" -o beginning -e -q | wc -l)" "kcat reads back $c"
		done
	fi
	t_umount
}

# (e) After compaction: a consumer from 0 gets the survivors with their offsets;
# from an offset in a gap it gets the next batch; tombstones are consumed as nulls.
c_compaction_gaps() {
	kmount log.cleaner.threads=1
	py <<'PY'
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], linger_ms=0, batch_size=1)
for i in range(20):
    p.send("g", key=b"k%d" % (i % 4), value=b"v%d" % i).get()
p.send("g", key=b"k0", value=None).get()
p.close()
PY
	setfattr -n user.topicfs.roll -v 1 "$MNT/g/0"
	setfattr -n user.topicfs.clean -v 1 "$MNT/g/0"
	local hist
	hist=$(ls "$MNT/g/0/.history" | sed 's/^0*\([0-9]\)/\1/' | tr '\n' ' ')
	assert_eq "17 18 19 20 " "$hist" "history after cleaning"
	py 0 3 17 <<'PY'
import sys
from kafka import KafkaConsumer, TopicPartition
tp = TopicPartition("g", 0)
for start in sys.argv[2:]:
    c = KafkaConsumer(bootstrap_servers=sys.argv[1], consumer_timeout_ms=5000)
    c.assign([tp])
    c.seek(tp, int(start))
    got = [(m.offset, m.key, m.value) for m in c]
    assert got == [(17, b"k1", b"v17"), (18, b"k2", b"v18"), (19, b"k3", b"v19"), (20, b"k0", None)], (start, got)
    assert c.beginning_offsets([tp])[tp] == 0 and c.end_offsets([tp])[tp] == 21
    c.close()
PY
	if command -v kcat > /dev/null; then
		assert_eq "17 18 19 20" "$(kcat -b "$BROKER" -C -t g -o 5 -e -q -f '%o ' | sed 's/ $//')" "kcat from a gap"
	fi
	assert_absent "$MNT/g/0/k0"
	t_umount
}

# (f) Admin calls: CreateTopics makes directories (configs validated like the
# attributes), an existing name is 36, DeleteTopics removes the directory.
c_admin_topics() {
	kmount num.partitions=2
	py <<'PY'
import sys
from kafka.admin import KafkaAdminClient, NewTopic
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
def code(f, *args, **kw):      # the admin client raises the first topic's error
    try:
        f(*args, **kw)
        return 0
    except Exception as e:
        return getattr(e, "errno", repr(e))
assert code(a.create_topics, [NewTopic("three", 3, 1, topic_configs={"cleanup.policy": "delete"})]) == 0
for bad, err in [(NewTopic("three", 1, 1), 36), (NewTopic("badcfg", 1, 1, topic_configs={"segment.bytes": "x"}), 40),
                 (NewTopic("zero", 0, 1), 37), (NewTopic("rf3", 1, 3), 38), (NewTopic("bad/name", 1, 1), 17)]:
    got = code(a.create_topics, [bad])
    assert got == err, (bad.name, got)
assert code(a.create_topics, [NewTopic("only-checked", 1, 1)], validate_only=True) == 0
PY
	assert_eq "0 1 2" "$(ls "$MNT/three" | tr '\n' ' ' | sed 's/ $//')" "partitions of a created topic"
	assert_eq delete "$(t_x "$MNT/three" cleanup.policy)" "its config"
	assert_absent "$MNT/badcfg"
	assert_absent "$MNT/zero"
	assert_absent "$MNT/rf3"
	assert_absent "$MNT/only-checked"
	echo v > "$MNT/three/1/k"
	py <<'PY'
import sys
from kafka.admin import KafkaAdminClient
from kafka import KafkaProducer
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
a.delete_topics(["three"])
try:
    a.delete_topics(["never-was"])
    sys.exit("deleted a topic that never was")
except Exception as e:
    assert getattr(e, "errno", None) == 3, e
p = KafkaProducer(bootstrap_servers=sys.argv[1])
p.send("auto", b"x").get(timeout=30)      # auto.create.topics.enable, num.partitions=2
p.close()
PY
	assert_absent "$MNT/three"
	assert_eq "0 1" "$(ls "$MNT/auto" | tr '\n' ' ' | sed 's/ $//')" "an auto-created topic's partitions"
	t_umount
}

# (g) Bad frames get Kafka's error or a closed connection, and change nothing.
c_bad_frames() {
	kmount socket.request.max.bytes=65536
	mkdir "$MNT/t"
	echo v > "$MNT/t/0/k"
	assert_eq "7 35 18:0-3" "$(kw apiversions 9)" "ApiVersions above the range (KIP-511)"
	assert_match '^7 0 0:3-8 1:4-11 2:1-5 3:0-8 8:2-7 9:1-5 10:0-2 11:0-5 12:0-3 13:0-3 14:0-3 15:0-4 16:0-2 17:0-1 18:0-3 19:0-4 20:0-3 21:0-2 22:0-1 32:0-4 33:0-2 36:0-2 42:0-1 44:0-1$' "$(kw apiversions 0)" "ApiVersions v0"
	assert_match '^7 0 0:3-8 .* 20:0-3 21:0-2 22:0-1 .* 44:0-1$' "$(kw apiversions 3)" "ApiVersions v3 (flexible)"
	assert_eq closed "$(kw unknown-key)" "unknown api key"
	assert_eq closed "$(kw bad-version t)" "Produce v1"
	assert_eq closed "$(kw oversized 65537)" "a frame past socket.request.max.bytes"
	assert_eq closed "$(kw oversized 2147483647)" "a 2 GiB frame"
	assert_eq closed "$(kw tiny)" "a frame shorter than a header"
	assert_eq closed "$(kw truncated-body t)" "records past the frame"
	assert_eq sent "$(kw cut-frame t)" "half a frame"
	assert_eq 2 "$(kw corrupt-crc t)" "a batch whose CRC fails"
	assert_eq "21 -1" "$(kw produce t 5)" "acks=5"
	assert_eq "3 -1" "$(kw produce nope 1)" "an unknown topic"
	assert_eq 1 "$(t_leo t/0)" "log end offset after the bad requests"
	assert_eq "0 1" "$(kw produce t 1)" "a good produce still works"
	assert_eq noreply "$(kw produce t 0)" "acks=0"
	assert_eq "0 1 2 3 4 5 6 7 8 9" "$(kw pipeline 10)" "pipelined responses in order"
	[ "$(t_leo t/0)" = 3 ] || fail "log end offset: want 3, got $(t_leo t/0)"
	t_umount
}

# (h) Load: 1,000 idle connections and a client connecting and dropping in a
# loop leave other clients served; so does one that stops reading.
c_connections() {
	kmount
	mkdir "$MNT/t"
	local fifo=$T_CASE/hold held
	mkfifo "$fifo"
	kw idle 1000 < "$fifo" > "$T_CASE/idle.out" &
	local idle=$! reader
	exec 7> "$fifo"
	for _ in $(seq 300); do [ -s "$T_CASE/idle.out" ] && break; sleep 0.1; done
	assert_eq 1000 "$(cat "$T_CASE/idle.out")" "idle connections held"
	assert_eq "0 0" "$(kw produce t 1)" "a produce beside 1,000 idle connections"
	assert_eq done "$(kw churn 2000)" "connect and drop 2,000 times"
	mkfifo "$T_CASE/hold2"
	exec 7>&-                       # (the next child must not hold the first fifo)
	kw no-reader t 100000 < "$T_CASE/hold2" > "$T_CASE/nr.out" &
	reader=$!
	exec 8> "$T_CASE/hold2"
	for _ in $(seq 300); do [ -s "$T_CASE/nr.out" ] && break; sleep 0.1; done
	assert_eq stalled "$(cat "$T_CASE/nr.out")" "a client that stops reading"
	assert_eq "0 1" "$(kw produce t 1)" "a produce beside it"
	held=$(awk '/VmRSS/ {print $2}' "/proc/$(cat "$(t__state "$MNT")/pid" | xargs pgrep -P | head -n 1)/status" 2> /dev/null || echo 0)
	[ "${held:-0}" -lt 1048576 ] || fail "the daemon holds ${held} KiB"
	exec 8>&-
	wait "$idle" "$reader"
	assert_eq "0 2" "$(kw produce t 1)" "after they went"
	# 50 frames that claim 100 MB each and send 10 bytes cost what arrived, not
	# what they claim: the daemon's address space grows by far less than 5 GB.
	local pid vm0 vm1 claimer
	pid=$(pgrep -P "$(cat "$(t__state "$MNT")/pid")" | head -n 1)
	vm0=$(awk '/VmSize/ {print $2}' "/proc/$pid/status")
	mkfifo "$T_CASE/hold3"
	kw claim 50 104857600 < "$T_CASE/hold3" > "$T_CASE/claim.out" &
	claimer=$!
	exec 9> "$T_CASE/hold3"
	for _ in $(seq 300); do [ -s "$T_CASE/claim.out" ] && break; sleep 0.1; done
	assert_eq 50 "$(cat "$T_CASE/claim.out")" "connections claiming 100 MB frames"
	vm1=$(awk '/VmSize/ {print $2}' "/proc/$pid/status")
	[ $((vm1 - vm0)) -lt 1048576 ] || fail "the address space grew by $(((vm1 - vm0) / 1024)) MiB"
	exec 9>&-
	wait "$claimer"
	t_umount
}

# (i) A long poll waiting on an empty partition wakes for a file written in the mount.
c_long_poll() {
	kmount
	mkdir "$MNT/lp"
	local consumer
	py > "$T_CASE/consumed" <<'PY' &
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], fetch_max_wait_ms=20000, consumer_timeout_ms=120000)
tp = TopicPartition("lp", 0)
c.assign([tp])
c.seek(tp, 0)
print("waiting", flush=True)
for m in c:
    print(m.offset, m.key.decode(), m.value.decode(), flush=True)
    break
PY
	consumer=$!
	for _ in $(seq 300); do grep -q waiting "$T_CASE/consumed" && break; sleep 0.1; done
	printf 'written' > "$MNT/lp/0/file"
	wait "$consumer"
	assert_eq "waiting|0 file written" "$(tr '\n' '|' < "$T_CASE/consumed" | sed 's/|$//')" "consumed"
	t_umount
}

# (j) Each loopback connection acts as the user who opened it: the mount's
# permissions decide what it may produce, read, create and delete.
c_permissions() {
	local u=tfs_kafka_user
	t_user_ensure "$u"
	chmod 0755 "$DATA"
	kmount
	mkdir "$MNT/rootonly" "$MNT/open"
	chmod 0777 "$MNT/open"
	chmod 0700 "$MNT/rootonly"
	printf secret > "$MNT/rootonly/0/k"
	t_as "$u" "$T_PY" - "$BROKER" <<'PY'
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAuthorizationFailedError
def code(f, *args, **kw):
    try:
        f(*args, **kw)
        return 0
    except Exception as e:
        return getattr(e, "errno", repr(e))
p = KafkaProducer(bootstrap_servers=sys.argv[1], retries=0)
assert code(lambda: p.send("rootonly", key=b"k", value=b"mine").get(timeout=30)) == 29
p.send("open", key=b"k", value=b"allowed").get(timeout=30)
c = KafkaConsumer(bootstrap_servers=sys.argv[1], consumer_timeout_ms=3000)
tp = TopicPartition("rootonly", 0)
c.assign([tp])
c.seek(tp, 0)
assert code(list, c) == 29
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
assert code(a.create_topics, [NewTopic("users-own", 1, 1)]) == 29
assert code(a.delete_topics, ["open"]) == 29
PY
	assert_cat "$MNT/rootonly/0/k" secret
	assert_cat "$MNT/open/0/k" allowed
	assert_eq 1 "$(t_leo rootonly/0)" "records of rootonly"
	assert_absent "$MNT/users-own"
	t_umount
	chmod 0777 "$DATA"              # the root is the data directory's stand-in
	kmount
	t_as "$u" "$T_PY" - "$BROKER" <<'PY'
import sys
from kafka.admin import KafkaAdminClient, NewTopic
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
a.create_topics([NewTopic("users-own", 1, 1)])
PY
	assert_eq "$(id -u "$u")" "$(stat -c %u "$MNT/users-own")" "owner of a topic the user created"
	t_umount
	chmod 0711 "$DATA"              # search, no listing: ls of the root is refused
	kmount
	t_as "$u" "$T_PY" - "$BROKER" <<'PY'
import sys
from kafka import KafkaConsumer, KafkaProducer
c = KafkaConsumer(bootstrap_servers=sys.argv[1])
assert c.topics() == set(), c.topics()
p = KafkaProducer(bootstrap_servers=sys.argv[1], retries=0)
p.send("open", key=b"k2", value=b"by name").get(timeout=30)
PY
	assert_cat "$MNT/open/0/k2" "by name"
	t_umount
}

# (k) InitProducerId: a new id each time, epoch 0, never one handed out before a
# remount; a transactional id is refused (35; an empty one 42).
c_init_producer_id() {
	kmount
	local a b c
	a=$(kw initpid); b=$(kw initpid)
	assert_match '^0 [0-9]+ 0$' "$a" "InitProducerId"
	assert_match '^0 [0-9]+ 0$' "$b" "InitProducerId again"
	[ "$a" != "$b" ] || fail "the same producer id twice: $a"
	assert_eq "35 -1 -1" "$(kw initpid tx)" "a transactional id"
	assert_eq "42 -1 -1" "$(kw initpid '')" "an empty transactional id"
	t_umount
	kmount
	c=$(kw initpid)
	a=${a#0 }; b=${b#0 }; c=${c#0 }
	[ "${c% *}" -gt "${a% *}" ] && [ "${c% *}" -gt "${b% *}" ] ||
		fail "after a remount id ${c% *} is not above ${a% *} and ${b% *}"
	t_umount
}

# hist_keys TOPIC: "offset key|..." of partition 0, from the mount's history view.
hist_keys() {
	local f
	for f in $(ls -A "$MNT/$1/0/.history" | sort); do
		printf '%d %s|' "$((10#$f))" "$(t_x "$MNT/$1/0/.history/$f" key)"
	done | sed 's/|$//'
}

# (l) Seed 001 end to end: a proxy loses the acknowledgement of the first
# Produce request for each topic (the broker appended it) and drops the
# connection; librdkafka sends the batch again. With enable.idempotence=true the
# retry is known by its sequence and the partition holds each record once; with
# idempotence off the same retry appends the records a second time.
c_lost_ack() {
	need_kcat
	local pin=$T_CASE/proxy.in pport=$T_CASE/proxy.port plog=$T_CASE/proxy.log i pp
	mkfifo "$pin"
	"$T_PY" "$KW" 0 proxy "$pport" "$plog" < "$pin" &
	pp=$!
	t_on_exit "kill $pp 2> /dev/null || true"
	exec 7> "$pin"
	for i in $(seq 100); do [ -s "$pport" ] && break; sleep 0.1; done
	[ -s "$pport" ] || fail "the proxy did not say its port"
	kmount "advertised.listeners=PLAINTEXT://127.0.0.1:$(cat "$pport")"
	echo "$PORT" >&7
	mkdir "$MNT/on" "$MNT/off"
	local x="-X retries=5 -X retry.backoff.ms=100 -X message.timeout.ms=60000 -X linger.ms=50"
	printf 'k1:v1\nk2:v2\nk3:v3\n' | kcat -b "127.0.0.1:$(cat "$pport"),$BROKER" -P -t on -K: $x \
		-X enable.idempotence=true 2> "$T_CASE/kcat-on.err" || fail "kcat (idempotent): $(cat "$T_CASE/kcat-on.err")"
	printf 'k1:v1\nk2:v2\nk3:v3\n' | kcat -b "127.0.0.1:$(cat "$pport"),$BROKER" -P -t off -K: $x \
		-X enable.idempotence=false 2> "$T_CASE/kcat-off.err" || fail "kcat: $(cat "$T_CASE/kcat-off.err")"
	exec 7>&-
	kill "$pp"; wait "$pp" 2> /dev/null || true
	assert_eq "dropped on|dropped off" "$(sort -r "$plog" | paste -sd'|')" "acknowledgements lost"
	assert_eq 3 "$(t_hist on/0)" "records of the idempotent producer on disk"
	assert_eq 3 "$(t_leo on/0)" "log end offset of the idempotent producer's partition"
	assert_eq "0 k1|1 k2|2 k3" "$(hist_keys on)" "the idempotent producer's records"
	[ "$(t_hist off/0)" -gt 3 ] || fail "without idempotence the retry did not duplicate: $(hist_keys off)"
	assert_eq "$(t_hist off/0)" "$(t_leo off/0)" "log end offset without idempotence"
	t_umount
}

# (m) Five requests in flight, reordered (as a proxy or a reconnect reorders
# them): Kafka appends the one that follows, answers 45 to the ones past a gap,
# and the producer sends those again; a retry of any of the last five batches is
# answered with its original offset and appends nothing. The partition holds
# 0..4 once each, in order; a batch older than the last five is 45.
c_idem_reorder() {
	kmount
	mkdir "$MNT/r"
	local out pid
	out=$(kw idem r 0 0,2,1,3,4)
	pid=${out##* }
	assert_eq "0:0 45:-1 0:1 45:-1 45:-1" "${out% *}" "five batches, the second and third swapped"
	assert_eq "0:2 0:3 0:4 $pid" "$(kw idem r 0 2,3,4 "$pid")" "the refused ones again"
	assert_eq "0:0 0:1 0:2 0:3 0:4 $pid" "$(kw idem r 0 0,1,2,3,4 "$pid")" "all five again: their offsets"
	assert_eq "0:3 0:1 0:4 $pid" "$(kw idem r 0 3,1,4 "$pid")" "retries out of order"
	assert_eq 5 "$(t_hist r/0)" "records after the retries"
	assert_eq 5 "$(t_leo r/0)" "log end offset after the retries"
	assert_eq "0 k0|1 k1|2 k2|3 k3|4 k4" "$(hist_keys r)" "order and no duplicate"
	assert_eq "0:5 45:-1 $pid" "$(kw idem r 0 5,0 "$pid")" "a batch older than the last five"
	assert_eq 6 "$(t_leo r/0)" "log end offset"
	t_umount
}
# (n) Refused batches append nothing: a sequence gap is 45, an older epoch 47, a
# newer epoch not starting at 0 is 45; a newer epoch at 0 is taken (librdkafka
# bumps its epoch locally); a producer id with no state here is taken at any
# sequence.
c_idem_refused() {
	kmount
	mkdir "$MNT/e"
	local out pid
	out=$(kw idem e 0 0)
	pid=${out##* }
	assert_eq "0:0" "${out% *}" "first batch"
	assert_eq "45:-1 $pid" "$(kw idem e 0 5 "$pid")" "a sequence gap"
	assert_eq 1 "$(t_leo e/0)" "log end offset after a gap"
	assert_eq "45:-1 $pid" "$(kw idem e 1 3 "$pid")" "a new epoch not at 0"
	assert_eq "0:1 $pid" "$(kw idem e 1 0 "$pid")" "a new epoch at 0"
	assert_eq "47:-1 $pid" "$(kw idem e 0 1 "$pid")" "an older epoch"
	assert_eq 2 "$(t_leo e/0)" "log end offset after the refusals"
	assert_eq 2 "$(t_hist e/0)" "records after the refusals"
	assert_eq "0:2 987654321" "$(kw idem e 3 17 987654321)" "a producer with no state here"
	assert_eq 3 "$(t_leo e/0)" "log end offset"
	t_umount
}

# (o) A user who may not write to a topic cannot touch its producers' state: a
# batch with another producer's id and a newer epoch (which would fence it) is
# 29 and changes nothing, and the producer goes on at its next sequence.
c_idem_permissions() {
	local u=tfs_kafka_user out pid
	t_user_ensure "$u"
	chmod 0755 "$DATA"
	kmount
	mkdir "$MNT/p"
	out=$(kw idem p 0 0)
	pid=${out##* }
	assert_eq "0:0" "${out% *}" "the owner's first batch"
	assert_eq "29:-1 $pid" "$(t_as "$u" "$T_PY" "$KW" "$PORT" idem p 1 0 "$pid")" "another user's batch"
	assert_eq "0:1 $pid" "$(kw idem p 0 1 "$pid")" "the owner's next batch"
	assert_eq 2 "$(t_hist p/0)" "records"
	t_umount
}

# (o) queued.max.request.bytes bounds what all connections together make the
# daemon buffer: 8 clients each sending most of a 64 MiB frame and one sending a
# whole 6 MiB Produce, none reading, stall once 16 MiB are taken; a small request
# beside them is still served (a connection's first 64 KiB are its own); the big
# Produce waits, and is read and appended once the others go.
c_queued_bytes_bound() {
	kmount socket.request.max.bytes=67108864,queued.max.request.bytes=16777216
	mkdir "$MNT/t"
	setfattr -n user.topicfs.max.message.bytes -v 8388608 "$MNT/t"
	local pid rss0 rss1 hogs out
	pid=$(pgrep -P "$(cat "$(t__state "$MNT")/pid")" | head -n 1)
	rss0=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
	mkfifo "$T_CASE/hold4"
	kw hogs 8 67108864 t 6291456 < "$T_CASE/hold4" > "$T_CASE/hogs.out" &
	hogs=$!
	exec 9> "$T_CASE/hold4"
	for _ in $(seq 600); do grep -q stalled "$T_CASE/hogs.out" && break; sleep 0.1; done
	grep -q stalled "$T_CASE/hogs.out" || fail "the clients did not stall: $(cat "$T_CASE/hogs.out")"
	rss1=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
	[ $((rss1 - rss0)) -lt 196608 ] ||
		fail "the daemon's memory grew by $(((rss1 - rss0) / 1024)) MiB for $(cat "$T_CASE/hogs.out") bytes sent"
	assert_eq "0 0" "$(kw produce t 1)" "a small produce beside them"
	assert_eq 1 "$(t_leo t/0)" "log end offset while the big produce waits"
	exec 9>&-
	wait "$hogs"
	out=$(tail -n 1 "$T_CASE/hogs.out")
	assert_eq "0 1" "$out" "the big produce once the others went"
	assert_eq 2 "$(t_leo t/0)" "log end offset after it"
	t_umount
}

t_test meta_properties c_meta_properties
t_test loopback_only c_loopback_only
t_test kcat_both_doors c_kcat_both_doors
t_test codecs c_codecs
t_test compaction_gaps c_compaction_gaps
t_test admin_topics c_admin_topics
t_test bad_frames c_bad_frames
t_test connections c_connections
t_test long_poll c_long_poll
t_test permissions c_permissions
t_test init_producer_id c_init_producer_id
t_test lost_ack c_lost_ack
t_test idem_reorder c_idem_reorder
t_test idem_refused c_idem_refused
t_test idem_permissions c_idem_permissions
t_test queued_bytes_bound c_queued_bytes_bound
t_done
