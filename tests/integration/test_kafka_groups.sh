#!/bin/bash
# test_kafka_groups.sh - consumer groups through the Kafka listener (docs/kafka.md,
# "Consumer groups"): librdkafka and kafka-python groups that grow and shrink,
# every record consumed once per group, commits read back by OffsetFetch and kept
# in __consumer_offsets across a remount and a kill -9, and that topic refusing
# the shell's writes. One mount per case; the Python side is kafka_groups.py.
. "$(dirname "$0")/lib.sh"
t_require_daemon
KG=$T_LIB_DIR/kafka_groups.py
# the first generation of a new group waits for more members this long (Kafka's
# default is 3000; nothing here depends on it but the run's length)
GOPTS=group.initial.rebalance.delay.ms=0

kmount() { t_kafka_mount "partitions=1,$GOPTS${1:+,$1}"; }
kg() { "$T_PY" "$KG" "$1" "$BROKER" "${@:2}"; }

# (a) librdkafka: one member, then two, then three (each rebalance splits the six
# partitions evenly), then one leaves; every record once; the commits read back;
# then the group's records are Kafka's in __consumer_offsets, which the shell may
# read but not write.
c_librdkafka_group() {
	"$T_PY" -c 'import confluent_kafka' 2>/dev/null ||
		skip "python3-confluent-kafka is not installed (scripts/install-deps.sh --tests)"
	kmount
	mkdir "$MNT/orders" && mkdir "$MNT/orders/"{1,2,3,4,5}
	kg rdk orders g1 | tee "$T_CASE/rdk.out"
	grep -q '^ok rdk 120$' "$T_CASE/rdk.out" || fail "the librdkafka group did not finish"
	assert_eq "0:20 1:20 2:20 3:20 4:20 5:20" "$(kg committed g1 orders 6)" "OffsetFetch of g1"
	# the store: the group's partition of __consumer_offsets holds its records
	ls "$MNT" | grep -qx __consumer_offsets || fail "__consumer_offsets is not listed"
	assert_eq 50 "$(ls "$MNT/__consumer_offsets" | wc -l)" "partitions of __consumer_offsets"
	assert_errno EPERM put "$MNT/__consumer_offsets/0/k" x
	assert_errno EPERM rmdir "$MNT/__consumer_offsets"
	assert_errno EPERM mkdir "$MNT/__consumer_offsets/50"
	t_daemon_log | grep -q 'refusing a write to .*__consumer_offsets' || fail "no log line for the refusal"
	kg admin g1 | tee "$T_CASE/admin.out"
	grep -qx 'state Empty members 0' "$T_CASE/admin.out" || fail "g1 is not Empty after its members left"
	grep -q '^offsets orders/0:20 orders/1:20 ' "$T_CASE/admin.out" || fail "the admin's OffsetFetch"
}

# (a2) A librdkafka member killed -9 never sends LeaveGroup: the coordinator
# removes it when its session times out, and the other member takes its partitions.
c_silent_member() {
	"$T_PY" -c 'import confluent_kafka' 2>/dev/null ||
		skip "python3-confluent-kafka is not installed (scripts/install-deps.sh --tests)"
	kmount
	mkdir "$MNT/orders" && mkdir "$MNT/orders/"{1,2,3,4,5}
	kg rdk_silent orders g4 | tee "$T_CASE/silent.out"
	grep -qx 'ok rdk_silent' "$T_CASE/silent.out" || fail "the survivor did not take over"
	t_daemon_log | grep -q 'group "g4": member silent-.* timed out' || fail "no log line for the timeout"
}

# (b) kafka-python: one member, two, three, then two again; every record once.
c_kafka_python_group() {
	kmount
	mkdir "$MNT/events" && mkdir "$MNT/events/"{1,2,3,4,5}
	kg kp events g2 | tee "$T_CASE/kp.out"
	grep -q '^ok kp 120$' "$T_CASE/kp.out" || fail "the kafka-python group did not finish"
	assert_eq "0:20 1:20 2:20 3:20 4:20 5:20" "$(kg committed g2 events 6)" "OffsetFetch of g2"
}

# (c) Positions survive a remount and a kill -9: a simple commit, then a new member
# resumes exactly there; what kill -9 cut short was acknowledged before it.
c_positions_survive() {
	kmount
	mkdir "$MNT/t" && mkdir "$MNT/t/1"
	for i in $(seq 10); do echo "v$i" > "$MNT/t/0/k$i"; echo "w$i" > "$MNT/t/1/k$i"; done
	kg commit g3 t 0:4 1:7
	assert_eq "0:4 1:7" "$(kg committed g3 t 2)" "committed before the remount"
	t_umount
	kmount
	assert_eq "0:4 1:7" "$(kg committed g3 t 2)" "committed after the remount"
	assert_eq "0:4 1:7" "$(kg resume g3 t 2)" "where a member resumes"
	kg commit g3 t 0:9 1:2
	t_kill_daemon
	kmount
	assert_eq "0:9 1:2" "$(kg committed g3 t 2)" "committed after kill -9"
	assert_eq "0:9 1:2" "$(kg resume g3 t 2)" "where a member resumes after kill -9"
}

# Regression: DeleteGroups checked no permission, so any client could wipe a
# stopped group's positions, even of topics it may not write (or read). It now
# takes what `rmdir .groups/GROUP` takes: write permission on every topic the
# group has offsets of.
c_delete_needs_write() {
	local u=tfs_kgroups_user
	t_user_ensure "$u"
	chmod 0755 "$DATA"
	kmount
	mkdir "$MNT/t" && mkdir "$MNT/t/1"
	echo v > "$MNT/t/0/k"
	kg commit g4 t 0:1 1:0
	T_PORT=$PORT t_as "$u" "$T_PY" - "$BROKER" <<'PY'
import sys
from kafka.admin import KafkaAdminClient
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
r = a.delete_consumer_groups(["g4"])
assert r[0][0] == "g4" and r[0][1].errno == 30, r
PY
	assert_eq "0:1 1:0" "$(kg committed g4 t 2)" "committed after another user's DeleteGroups"
	t_daemon_log | grep -q 'refusing to delete group "g4"' || fail "no log line for the refusal"
	"$T_PY" - "$BROKER" <<'PY'
import sys
from kafka.admin import KafkaAdminClient
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
r = a.delete_consumer_groups(["g4"])
assert r[0][0] == "g4" and r[0][1].errno == 0, r
PY
	assert_eq "0:-1 1:-1" "$(kg committed g4 t 2)" "committed after the owner's DeleteGroups"
}

# (f) What clients can make the coordinator hold is bounded: group.max.size
# members and pending ids (error 81, GROUP_MAX_SIZE_REACHED), then a member with
# too many protocols, too much metadata, too long an instance id (42,
# INVALID_REQUEST); each refusal is a log line, and other groups are served.
c_group_bounds() {
	kmount group.max.size=2
	assert_eq "79 79 81 42 42 42" "$("$T_PY" "$T_LIB_DIR/kafka_wire.py" "$PORT" join-caps gb 3)" \
		"JoinGroup errors with group.max.size=2"
	t_daemon_log | grep -q 'group "gb" is full: 0 members and 2 pending (group.max.size=2)' ||
		fail "no log line for the full group"
	t_daemon_log | grep -q 'group "gb": refusing 1048577 bytes of protocol metadata' ||
		fail "no log line for the metadata"
	assert_eq "81 81 42 42 42" "$("$T_PY" "$T_LIB_DIR/kafka_wire.py" "$PORT" join-caps gb 2)" \
		"the same group, its two ids still pending"
	assert_eq "79 42 42 42" "$("$T_PY" "$T_LIB_DIR/kafka_wire.py" "$PORT" join-caps gc 1)" \
		"another group meanwhile"
}

t_test librdkafka_group c_librdkafka_group
t_test silent_member c_silent_member
t_test kafka_python_group c_kafka_python_group
t_test positions_survive c_positions_survive
t_test delete_needs_write c_delete_needs_write
t_test group_bounds c_group_bounds
t_done
