#!/bin/bash
# test_kafka_admin.sh - the listener's admin APIs (docs/kafka.md, "Admin"):
# DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the topic config
# the mount shows as attributes, checked by the same parser and the same
# permissions as a setfattr.
. "$(dirname "$0")/lib.sh"
t_require_daemon
KW=$T_LIB_DIR/kafka_wire.py

kmount() { t_kafka_mount "$@"; }
kw() { "$T_PY" "$KW" "$PORT" "$@"; }
# metric NAME: its value in the mount's .topicfs/metrics
metric() { awk -v n="$1" '$1 == n { print $2 }' "$MNT/.topicfs/metrics"; }

# (a) Configs through the protocol are the attributes: described as they are,
# changed at once, refused whole on a bad value, unchanged by validate_only;
# AlterConfigs replaces the whole set, IncrementalAlterConfigs edits it; a user
# who may read but not write the topic can describe and not alter; the broker
# resource is read-only.
c_configs() {
	local u=tfs_kadmin_user
	t_user_ensure "$u"
	chmod 0755 "$DATA"
	kmount
	mkdir "$MNT/t"
	setfattr -n user.topicfs.segment.bytes -v 1048576 "$MNT/t"
	"$T_PY" - "$BROKER" <<'PY'
import sys
from kafka.admin import KafkaAdminClient, ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
def configs(kind, name):
    r = a.describe_configs([ConfigResource(kind, name)])[0].resources[0]
    assert r[0] == 0, r
    return {c[0]: c[1:] for c in r[4]}
def alter(cfg, validate_only=False, name="t"):
    r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=cfg)])
    return r.resources[0][0]
c = configs(ConfigResourceType.TOPIC, "t")
assert c["segment.bytes"][0] == "1048576" and c["segment.bytes"][2] == 1, c["segment.bytes"]   # TOPIC_CONFIG
assert c["retention.ms"][0] == "604800000" and c["retention.ms"][2] == 5, c["retention.ms"]    # DEFAULT_CONFIG
assert c["cleanup.policy"][0] == "compact" and not c["cleanup.policy"][1]                       # read_only false
assert alter({"retention.ms": "1234"}) == 0
assert alter({"retention.ms": "x"}) == 40
assert alter({"retention.ms": "5", "no.such.config": "1"}) == 40
assert alter({"retention.ms": "5"}, name="never-was") == 3
b = configs(ConfigResourceType.BROKER, "1")
assert b["node.id"][0] == "1" and b["node.id"][1], b["node.id"]                                 # read-only
r = a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={"num.partitions": "3"})])
assert r.resources[0][0] == 42, r
PY
	assert_eq 1234 "$(t_x "$MNT/t" retention.ms)" "retention.ms set by AlterConfigs"
	assert_eq 104857600 "$(t_x "$MNT/t" segment.bytes)" "segment.bytes: AlterConfigs replaced the set"
	grep -q '^retention.ms=1234$' "$DATA/topics/t" || fail "the change is not in the topic's config file"
	# IncrementalAlterConfigs, v0 and v1 (flexible): SET, DELETE, APPEND, SUBTRACT
	assert_eq 0 "$(kw incr-alter 0 t 0 segment.bytes:0:2097152 cleanup.policy:2:delete)" "SET and APPEND"
	assert_eq 2097152 "$(t_x "$MNT/t" segment.bytes)" "segment.bytes after SET"
	assert_eq compact,delete "$(t_x "$MNT/t" cleanup.policy)" "cleanup.policy after APPEND"
	assert_eq 0 "$(kw incr-alter 1 t 0 cleanup.policy:3:compact retention.ms:1)" "SUBTRACT and DELETE (v1)"
	assert_eq delete "$(t_x "$MNT/t" cleanup.policy)" "cleanup.policy after SUBTRACT"
	assert_eq 604800000 "$(t_x "$MNT/t" retention.ms)" "retention.ms after DELETE"
	local before
	before=$(cat "$DATA/topics/t")
	assert_eq 40 "$(kw incr-alter 0 t 0 segment.bytes:0:4096 retention.ms:0:-5)" "a bad value"
	assert_eq 40 "$(kw incr-alter 1 t 0 segment.bytes:2:4096)" "APPEND to a number"
	assert_eq 40 "$(kw incr-alter 0 t 0 cleanup.policy:3:delete)" "SUBTRACT of the last policy"
	assert_eq 42 "$(kw incr-alter 0 t 0 segment.bytes:0)" "SET of null"
	assert_eq 42 "$(kw incr-alter 0 t 0 segment.bytes:0:4096 segment.bytes:0:8192)" "a name twice"
	assert_eq 42 "$(kw incr-alter 0 t 0 segment.bytes:9:4096)" "an unknown operation"
	assert_eq 0 "$(kw incr-alter 1 t 1 segment.bytes:0:4096)" "validate_only"
	assert_eq 17 "$(kw incr-alter 0 .bad 0 segment.bytes:0:4096)" "an invalid topic name"
	# a request that names too many resources, or too many configs of one, closes
	# the connection (each is checked against every other: the work is bounded)
	assert_eq closed "$(kw alter-many 10001 0)" "an alteration of 10001 resources"
	assert_eq closed "$(kw alter-many 1 1001)" "an alteration of 1001 configs of a resource"
	assert_eq 3 "$(kw alter-many 2 0)" "two resources of unknown topics"
	assert_eq "$before" "$(cat "$DATA/topics/t")" "the config file after refused changes"
	assert_eq 2097152 "$(t_x "$MNT/t" segment.bytes)" "segment.bytes after refused changes"
	# name=value:source:type, every field of the flexible v4 response read
	assert_eq "cleanup.policy=delete:1:7 segment.bytes=2097152:1:3 segment.ms=604800000:5:5" \
		"$(kw describe-flex t | cut -d' ' -f1-3)" "DescribeConfigs v4 (flexible)"
	# another user: reads (0755) but may not write, as setfattr would be refused
	T_PORT=$PORT t_as "$u" "$T_PY" - "$BROKER" "$KW" <<'PY'
import os, sys
from kafka.admin import KafkaAdminClient, ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")])[0].resources[0]
assert r[0] == 0, r
r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "t", configs={"retention.ms": "1"})])
assert r.resources[0][0] == 29, r
PY
	assert_eq 29 "$(t_as "$u" "$T_PY" "$KW" "$PORT" incr-alter 0 t 0 retention.ms:0:1)" "incremental as another user"
	t_as "$u" setfattr -n user.topicfs.retention.ms -v 1 "$MNT/t" 2> /dev/null &&
		fail "setfattr as the other user was allowed: the rules differ"
	chmod 0700 "$MNT/t"
	T_PORT=$PORT t_as "$u" "$T_PY" - "$BROKER" <<'PY'
import sys
from kafka.admin import KafkaAdminClient, ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers=sys.argv[1])
r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")])[0].resources[0]
assert r[0] == 29 and r[4] == [], r
PY
	assert_eq 604800000 "$(t_x "$MNT/t" retention.ms)" "retention.ms after the other user's attempts"
	t_umount
}

# smount CREDS [OPTS]: a SASL_PLAINTEXT listener on 0.0.0.0 (a SASL listener may
# bind any address; clients are told "localhost") with the credentials file CREDS.
smount() { t_kafka_listen SASL_PLAINTEXT 0.0.0.0 "kafka_sasl_credentials=$1${2:+,$2}"; }

# (b) SASL: PLAIN and SCRAM-SHA-256 from kafka-python (SaslHandshake v0, bare
# tokens) and from librdkafka (v1 and SaslAuthenticate), a good and a bad
# password each; nothing but ApiVersions and SASL before authenticating; a
# principal acts as its Unix user, so one whose user may not write a topic
# cannot produce to it nor send a tombstone; the credentials file must be
# private.
c_sasl() {
	local u=tfs_kadmin_user creds
	t_user_ensure "$u"
	chmod 0755 "$DATA"
	creds=$T_DIR/creds
	{
		echo "# principal user credential"
		"$T_PY" "$KW" 0 scram-cred alice root alice-secret
		"$T_PY" "$KW" 0 scram-cred bob "$u" bob-secret
	} > "$creds"
	chmod 0644 "$creds"
	T_MOUNT_MAY_EXIT=1 smount "$creds" || true
	assert_eq 1 "${T_MOUNT_EXIT:-0}" "exit status for a credentials file others can read"
	t_daemon_log | grep -q 'must be a regular file of root' || fail "no log line says why"
	chmod 0600 "$creds"
	T_MOUNT_EXIT=0
	smount "$creds"
	mkdir "$MNT/t"
	printf 'was-here' > "$MNT/t/0/k"
	assert_eq closed "$(kw sasl-first 3)" "Metadata before authenticating"
	assert_eq "0 PLAIN,SCRAM-SHA-256" "$(kw sasl-handshake 1 PLAIN)" "SaslHandshake v1"
	assert_eq "33 PLAIN,SCRAM-SHA-256" "$(kw sasl-handshake 1 GSSAPI)" "an unknown mechanism"
	assert_eq closed "$(kw sasl-raw-bad alice wrong)" "a bad bare PLAIN token"
	"$T_PY" - "$BROKER" <<'PY'
import sys
from kafka import KafkaProducer
from kafka.errors import KafkaError
def producer(mech, user, pw):
    return KafkaProducer(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=pw,
                         retries=0, max_block_ms=5000)
for mech in ["PLAIN", "SCRAM-SHA-256"]:
    p = producer(mech, "alice", "alice-secret")
    p.send("t", key=b"py-" + mech.encode(), value=b"by alice").get(timeout=30)
    p.close()
    for user, pw in [("alice", "wrong"), ("mallory", "alice-secret")]:
        try:
            producer(mech, user, pw).send("t", key=b"bad", value=b"x").get(timeout=30)
            sys.exit("%s: %s with a bad password got in" % (mech, user))
        except KafkaError:
            pass
    # bob's Unix user may not write t (0755, root's): 29, produce and tombstone alike
    p = producer(mech, "bob", "bob-secret")
    for value in [b"by bob", None]:
        try:
            p.send("t", key=b"k", value=value).get(timeout=30)
            sys.exit("bob wrote to t")
        except KafkaError as e:
            assert getattr(e, "errno", None) == 29, e
    p.close()
PY
	assert_cat "$MNT/t/0/py-PLAIN" "by alice"
	assert_cat "$MNT/t/0/py-SCRAM-SHA-256" "by alice"
	assert_cat "$MNT/t/0/k" was-here
	assert_absent "$MNT/t/0/bad"
	t_daemon_log | grep -q "SASL PLAIN authentication of 'alice' failed: wrong password" ||
		fail "no log line for a wrong PLAIN password"
	t_daemon_log | grep -q "SASL SCRAM-SHA-256 authentication of 'mallory' failed: unknown principal" ||
		fail "no log line for an unknown SCRAM principal"
	t_daemon_log | grep -q -e alice-secret -e '\bwrong\b.*password.*wrong' &&
		fail "a password reached the log"
	if command -v kcat > /dev/null; then
		local mech
		for mech in PLAIN SCRAM-SHA-256; do
			printf 'kcat-%s:by kcat\n' "$mech" | kcat -b "$BROKER" -P -t t -K: -X security.protocol=SASL_PLAINTEXT \
				-X sasl.mechanisms=$mech -X sasl.username=alice -X sasl.password=alice-secret 2> /dev/null
			assert_cat "$MNT/t/0/kcat-$mech" "by kcat"
			kcat -b "$BROKER" -L -m 5 -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=$mech \
				-X sasl.username=alice -X sasl.password=wrong > /dev/null 2>&1 &&
				fail "kcat with a wrong $mech password listed metadata"
		done
		printf 'k:by bob\n' | timeout 20 kcat -b "$BROKER" -P -t t -K: -X security.protocol=SASL_PLAINTEXT \
			-X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=bob -X sasl.password=bob-secret \
			-X message.send.max.retries=0 > /dev/null 2>&1 && fail "kcat as bob wrote to t"
		assert_cat "$MNT/t/0/k" was-here
	fi
	assert_eq 5 "$(t_leo t/0)" "records of t: the shell's, two by kafka-python, two by kcat"

	# an unknown principal is not told apart: SCRAM answers its client-first with
	# a salt of its own (the same each time, another for another name) and the
	# iterations of a known one, and both mechanisms fail it as a wrong password
	local alice m1 m2 eve n
	alice=$(kw scram-first alice) m1=$(kw scram-first mallory) m2=$(kw scram-first mallory)
	eve=$(kw scram-first eve)
	assert_match '0 s=[A-Za-z0-9+/=]{24} i=4096' "$m1" "server-first of an unknown principal"
	assert_eq "$m1" "$m2" "server-first of mallory, twice"
	assert_ne "$m1" "$eve" "server-first of mallory and eve"
	assert_ne "$m1" "$alice" "server-first of mallory and alice"
	assert_eq "0 58 Authentication failed: invalid credentials" "$(kw scram-login alice wrong)" \
		"SCRAM with a wrong password"
	assert_eq "0 58 Authentication failed: invalid credentials" "$(kw scram-login mallory x)" \
		"SCRAM of an unknown principal"
	assert_eq "0 0 None" "$(kw scram-login alice alice-secret)" "SCRAM with the password"
	assert_eq "58 Authentication failed: invalid credentials" "$(kw plain-login alice wrong)" \
		"PLAIN with a wrong password"
	assert_eq "58 Authentication failed: invalid credentials" "$(kw plain-login mallory x)" \
		"PLAIN of an unknown principal"
	t_umount
	n=$(t_daemon_log | grep -c "SASL PLAIN authentication of 'alice' failed: wrong password")

	# connection.failed.authentication.delay.ms: the failure is answered late,
	# and another connection is served meanwhile
	smount "$creds" connection.failed.authentication.delay.ms=3000
	assert_eq "other answered; first waits; first 58" "$(kw auth-delay alice wrong)" \
		"a delayed failure"
	assert_eq $((n + 1)) "$(t_daemon_log | grep -c "SASL PLAIN authentication of 'alice' failed: wrong password")" \
		"log lines for a wrong PLAIN password"
	# it waits on the clock alone: fifty appends meanwhile do not handle it
	# again (they did, one retry each, while it sat among the long polls)
	local pid r0 r1 i
	mkdir "$MNT/d"
	kw auth-delay alice wrong > "$T_CASE/delayed" &
	pid=$!
	for _ in $(seq 200); do
		[ $(($(metric topicfs_kafka_auth_delayed) + $(metric topicfs_kafka_parked))) = 1 ] && break
		sleep 0.05
	done
	assert_eq "1 0" "$(metric topicfs_kafka_auth_delayed) $(metric topicfs_kafka_parked)" \
		"a failed login waiting out its delay, on the clock"
	r0=$(metric topicfs_kafka_park_retries_total)
	for i in $(seq 50); do printf x > "$MNT/d/0/k$i"; done
	r1=$(metric topicfs_kafka_park_retries_total)
	wait "$pid"
	assert_eq "other answered; first waits; first 58" "$(cat "$T_CASE/delayed")" \
		"a delayed failure beside appends"
	[ $((r1 - r0)) -le 1 ] || fail "the waiting login was handled $((r1 - r0)) times by 50 appends"
	assert_eq 0 "$(metric topicfs_kafka_auth_delayed)" "nothing waits at the end"
	t_umount
}

# (c) DeleteRecords, through the protocol (v1, v2) and as a setfattr of
# log_start_offset: the log start moves inside a segment; fetches below it are 1
# and ListOffsets earliest names it; .history lists only what is above it; a key
# whose newest record is below it vanishes, no tombstone appended; an offset past
# the end is 1 and changes nothing; a user who may not write the topic gets 29
# (EACCES through the mount); the start survives a remount in Kafka's
# log-start-offset-checkpoint, and a pass deletes the segments wholly below it.
c_delete_records() {
	local u=tfs_kadmin_user
	t_user_ensure "$u"
	chmod 0755 "$DATA"
	kmount partitions=1
	mkdir "$MNT/t"
	for k in a b c d; do printf '%s1' "$k" > "$MNT/t/0/$k"; done   # offsets 0-3
	printf b2 > "$MNT/t/0/b"                                       # 4
	assert_eq "0 2" "$(kw delete-records t 0 2)" "DeleteRecords v1 to 2"
	assert_eq "b c d" "$(ls "$MNT/t/0" | tr '\n' ' ' | sed 's/ $//')" "keys after it"
	assert_cat "$MNT/t/0/b" b2
	assert_eq 2 "$(t_x "$MNT/t/0" log_start_offset)" "log_start_offset"
	assert_eq 5 "$(t_leo t/0)" "log_end_offset: nothing appended"
	assert_eq "$(t_off 2) $(t_off 3) $(t_off 4)" "$(ls "$MNT/t/0/.history" | tr '\n' ' ' | sed 's/ $//')" \
		".history after it"
	assert_errno ENOENT stat "$MNT/t/0/.history/$(t_off 1)"
	assert_eq "0 2" "$(kw earliest t 0)" "ListOffsets earliest"
	assert_eq "1 " "$(kw fetch-at t 0 1)" "a fetch below the log start"
	assert_eq "0 2,3,4" "$(kw fetch-at t 0 2)" "a fetch from the log start"
	assert_eq "1 -1" "$(kw delete-records t 0 6)" "past the log end"
	assert_eq "0 2" "$(kw delete-records t 0 1 2)" "DeleteRecords v2 below the start"
	assert_eq "3 -1" "$(kw delete-records t 7 1)" "an unknown partition"
	assert_eq "3 -1" "$(kw delete-records nope 0 1)" "an unknown topic"
	T_PORT=$PORT assert_eq "29 -1" "$(t_as "$u" "$T_PY" "$KW" "$PORT" delete-records t 0 3)" \
		"DeleteRecords by a user who may not write t"
	assert_errno_as "$u" EACCES setxattr "$MNT/t/0" user.topicfs.log_start_offset 3
	assert_eq 2 "$(t_x "$MNT/t/0" log_start_offset)" "log_start_offset after the refusals"
	assert_errno EINVAL setxattr "$MNT/t/0" user.topicfs.log_start_offset x
	assert_errno ERANGE setxattr "$MNT/t/0" user.topicfs.log_start_offset 9
	setfattr -n user.topicfs.log_start_offset -v 3 "$MNT/t/0"
	assert_eq "b d" "$(ls "$MNT/t/0" | tr '\n' ' ' | sed 's/ $//')" "keys after the setfattr"
	t_daemon_log | grep -c 'records below 3 deleted' > /dev/null || fail "no log line"
	t_umount
	assert_eq $'0\n1\nt 0 3' "$(cat "$DATA/log-start-offset-checkpoint")" "the checkpoint file"
	kmount partitions=1
	assert_eq 3 "$(t_x "$MNT/t/0" log_start_offset)" "log_start_offset after a remount"
	assert_eq "b d" "$(ls "$MNT/t/0" | tr '\n' ' ' | sed 's/ $//')" "keys after a remount"
	assert_eq "$(t_off 3) $(t_off 4)" "$(ls "$MNT/t/0/.history" | tr '\n' ' ' | sed 's/ $//')" \
		".history after a remount"
	# everything: the sealed segment wholly below goes at the next pass
	setfattr -n user.topicfs.roll -v 1 "$MNT/t/0"
	assert_eq 2 "$(t_x "$MNT/t/0" segments)" "segments after the roll"
	setfattr -n user.topicfs.log_start_offset -v -1 "$MNT/t/0"
	assert_eq "" "$(ls "$MNT/t/0")" "keys after deleting everything"
	setfattr -n user.topicfs.clean -v 1 "$MNT/t/0"
	assert_eq 1 "$(t_x "$MNT/t/0" segments)" "segments after the pass"
	assert_eq 5 "$(t_x "$MNT/t/0" log_start_offset)" "log_start_offset after the pass"
	printf e1 > "$MNT/t/0/e"
	assert_eq "0 5" "$(kw fetch-at t 0 5)" "fetch after a new record"
	# a deleted topic's entry goes with it
	rm "$MNT/t/0/e"
	rmdir "$MNT/t"
	assert_eq $'0\n0' "$(cat "$DATA/log-start-offset-checkpoint")" "the checkpoint after rmdir"
	t_umount
	# a torn or hand-edited file fails the mount, saying why, rather than bring
	# deleted records back
	printf '0\n2\nt 0 3\n' > "$DATA/log-start-offset-checkpoint"
	T_MOUNT_MAY_EXIT=1 kmount || true
	assert_eq 1 "${T_MOUNT_EXIT:-0}" "exit status with a malformed checkpoint"
	t_daemon_log | grep -c 'malformed log-start-offset-checkpoint at line 4: fewer entries' > /dev/null ||
		fail "no log line for the malformed checkpoint"
	T_MOUNT_EXIT=0
}

t_test configs c_configs
t_test sasl c_sasl
t_test delete_records c_delete_records
t_done
