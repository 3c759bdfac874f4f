#!/bin/bash
# test_kafkajs.sh - KafkaJS 2.2.4 (tests/kafkajs, installed by npm ci from its
# package-lock.json: scripts/install-deps.sh --tests) against the listener: its
# records are files, a file written in the mount moves its offsets, a null value
# is a tombstone and the file vanishes (seed 000's emitirLapide, as written),
# gzip (its one built-in codec), an idempotent producer, the admin calls
# (deleteTopicRecords too), and
# SASL PLAIN and SCRAM-SHA-256, a KafkaJS consumer group reading what both
# doors wrote, and a group of two and three members whose positions outlive a
# remount and a kill -9.
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
# gpos: group g's positions in t/0..5 as .groups/ shows them, on one line
gpos() { cat "$MNT"/.groups/g/t.{0,1,2,3,4,5} | tr '\n' ' ' | sed 's/ $//'; }

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
	# deleteTopicRecords: below offset 4 (the keys plain, gz and shell had their
	# newest records there, so their files go)
	assert_eq "0:4-7" "$(js delete-records t 4)" "offsets after deleteTopicRecords"
	assert_eq "idem" "$(ls "$MNT/t/0" | tr '\n' ' ' | sed 's/ $//')" "keys after deleteTopicRecords"
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

# (c) A KafkaJS group of one, two, then three members, then two again: each change
# a new assignment, every record (KafkaJS's and the shell's) consumed once; the
# commits read back through OffsetFetch and .groups/; then a new member resumes at
# the committed offsets after a remount and after kill -9 of the daemon.
c_kafkajs_group() {
	local opts=partitions=1,group.initial.rebalance.delay.ms=0 p want
	need_kafkajs
	jmount PLAINTEXT $opts
	mkdir "$MNT/t" "$MNT/t/"{1,2,3,4,5}
	# KafkaJS's default assignor deals partitions round-robin over its members
	js group t g "$MNT" | tee "$T_CASE/group.out"
	assert_eq "members 1: 0,1,2,3,4,5
members 2: 0,2,4 1,3,5
members 3: 0,3 1,4 2,5
members 2: 0,2,4 1,3,5" "$(grep '^members' "$T_CASE/group.out")" "the assignments"
	grep -Eq '^consumed 48 once: a=[0-9]+ b=[0-9]+ c=[1-9][0-9]*$' "$T_CASE/group.out" ||
		fail "the group did not consume each of 48 records once, each member some"
	for p in 0 1 2 3 4 5; do assert_eq 8 "$(t_leo t/$p)" "log end of t/$p"; done
	assert_eq "0:8 1:8 2:8 3:8 4:8 5:8" "$(js fetch-offsets g t)" "OffsetFetch of g"
	assert_eq "8 8 8 8 8 8" "$(gpos)" ".groups of g"
	# past the commits, three records a partition; the commits survive a remount
	for p in 0 1 2 3 4 5; do for want in 8 9 10; do echo "w$want" > "$MNT/t/$p/x$want"; done; done
	t_umount
	jmount PLAINTEXT $opts
	assert_eq "0:8 1:8 2:8 3:8 4:8 5:8" "$(js fetch-offsets g t)" "OffsetFetch after a remount"
	# a new member reads from 8, no earlier, and commits positions of its own
	assert_eq "0:8-10 1:8-10 2:8-10 3:8-10 4:8-10 5:8-10" \
		"$(js resume t g 0:9 1:11 2:8 3:10 4:11 5:9)" "resumed after a remount"
	want="0:9 1:11 2:8 3:10 4:11 5:9"
	assert_eq "$want" "$(js fetch-offsets g t)" "OffsetFetch of the new commits"
	assert_eq "9 11 8 10 11 9" "$(gpos)" ".groups after the new commits"
	t_kill_daemon
	jmount PLAINTEXT $opts
	assert_eq "$want" "$(js fetch-offsets g t)" "OffsetFetch after kill -9"
	assert_eq "9 11 8 10 11 9" "$(gpos)" ".groups after kill -9"
	assert_eq "0:9-10 1:none 2:8-10 3:10-10 4:none 5:9-10" "$(js resume t g)" "resumed after kill -9"
	t_umount
}

t_test kafkajs c_kafkajs
t_test kafkajs_sasl c_kafkajs_sasl
t_test kafkajs_group c_kafkajs_group
t_done
