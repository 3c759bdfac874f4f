#!/bin/bash
# test_kafkajs.sh - KafkaJS 2.2.4 (tests/kafkajs, installed by npm ci from its
# package-lock.json: scripts/install-deps.sh --tests) against the listener: its
# records are files, a file written in the mount moves its offsets, a null value
# is a tombstone and the file vanishes (seed 000's emitirLapide, as written),
# gzip (its one built-in codec), an idempotent producer, the admin calls, and
# SASL PLAIN and SCRAM-SHA-256, and a KafkaJS consumer group reading what both
# doors wrote.
. "$(dirname "$0")/lib.sh"
t_require_daemon
KW=$T_LIB_DIR/kafka_wire.py
JS=$T_REPO/tests/kafkajs
need_kafkajs() {
	command -v node > /dev/null || skip "node is not installed (scripts/install-deps.sh --tests)"
	[ -f "$JS/node_modules/kafkajs/package.json" ] ||
		skip "KafkaJS is not installed (scripts/install-deps.sh --tests runs npm ci in tests/kafkajs)"
}

jmount() { t_kafka_listen "$1" 127.0.0.1 "${2:-}"; }
js() { node "$JS/run.mjs" "$BROKER" "$@"; }

# (a) Both doors, tombstones, codecs, idempotence and admin calls on one mount.
c_kafkajs() {
	need_kafkajs
	jmount PLAINTEXT group.initial.rebalance.delay.ms=0
	mkdir "$MNT/t"
	assert_eq sent "$(js produce t)" "produce"
	assert_cat "$MNT/t/0/plain" "by kafkajs"
	assert_cat "$MNT/t/0/gz" "$(printf 'gzip %.0s' $(seq 40))"
	assert_eq "0:0-2" "$(js offsets t)" "offsets after two records"
	printf 'from-the-shell' > "$MNT/t/0/shell"
	assert_eq "0:0-3" "$(js offsets t)" "offsets after a file written in the mount"
	assert_eq sent "$(js lapide t plain)" "seed 000's emitirLapide"
	assert_absent "$MNT/t/0/plain"
	assert_eq 4 "$(t_leo t/0)" "log end: the tombstone is a record"
	assert_eq sent "$(js idempotent t)" "an idempotent producer"
	assert_cat "$MNT/t/0/idem" v2
	assert_eq 7 "$(t_leo t/0)" "log end after three idempotent records"
	# a consumer group reads what both doors wrote, the tombstone as a null value
	assert_eq "0 plain=by kafkajs
1 gz=$(printf 'gzip %.0s' $(seq 40))
2 shell=from-the-shell
3 plain=null
4 idem=v0
5 idem=v1
6 idem=v2" "$(js consume t g1 7)" "consumed by a KafkaJS group"
	# createTopics (cleanup.policy=delete), alterConfigs of retention.ms alone
	# (which, as in Kafka, replaces the whole set: cleanup.policy is the default
	# again), describeConfigs, a refused value, a refused replication factor;
	# then deleteTopics
	assert_eq "cleanup.policy=compact retention.ms=3600000
INVALID_CONFIG
INVALID_REPLICATION_FACTOR" "$(js admin made)" "admin calls"
	assert_eq "0 1" "$(ls "$MNT/made" | tr '\n' ' ' | sed 's/ $//')" "partitions of the created topic"
	assert_eq 3600000 "$(t_x "$MNT/made" retention.ms)" "retention.ms set by alterConfigs"
	assert_eq compact "$(t_x "$MNT/made" cleanup.policy)" "cleanup.policy after alterConfigs"
	assert_eq deleted "$(js delete-topic made)" "deleteTopics"
	assert_absent "$MNT/made"
	t_umount
}

# (b) SASL PLAIN and SCRAM-SHA-256 from KafkaJS: a good password produces as the
# principal's user, a bad one is refused and writes nothing.
c_kafkajs_sasl() {
	local creds=$T_DIR/creds
	need_kafkajs
	"$T_PY" "$KW" 0 scram-cred alice root alice-secret > "$creds"
	chmod 0600 "$creds"
	jmount SASL_PLAINTEXT "kafka_sasl_credentials=$creds"
	mkdir "$MNT/t"
	local mech
	for mech in PLAIN SCRAM-SHA-256; do
		assert_eq none "$(js sasl "$mech" alice alice-secret t "k-$mech")" "$mech, the right password"
		assert_cat "$MNT/t/0/k-$mech" "by alice"
		assert_eq KafkaJSSASLAuthenticationError "$(js sasl "$mech" alice wrong t bad)" \
			"$mech, a wrong password"
		assert_absent "$MNT/t/0/bad"
	done
	assert_eq 2 "$(t_leo t/0)" "records of t"
	t_umount
}

t_test kafkajs c_kafkajs
t_test kafkajs_sasl c_kafkajs_sasl
t_done
