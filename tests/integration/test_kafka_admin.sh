#!/bin/bash
# test_kafka_admin.sh - the listener's admin APIs (docs/kafka.md, "Admin"):
# DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the topic config
# the mount shows as attributes, checked by the same parser and the same
# permissions as a setfattr.
. "$(dirname "$0")/lib.sh"
t_require_daemon
KW=$T_LIB_DIR/kafka_wire.py

# kmount [OPTS]: mount with a listener on a port the kernel picks; sets PORT and BROKER.
kmount() {
	local extra=${1:-} i
	t_mount -o "listeners=PLAINTEXT://127.0.0.1:0${extra:+,$extra}"
	for i in $(seq 100); do
		PORT=$(t_daemon_log | sed -n 's/.*kafka: listening on [A-Z_]*:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' | tail -n 1)
		[ -n "$PORT" ] && break
		sleep 0.1
	done
	[ -n "$PORT" ] || fail "the listener did not say its port"
	BROKER=127.0.0.1:$PORT
}
kw() { "$T_PY" "$KW" "$PORT" "$@"; }

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

t_test configs c_configs
t_done
