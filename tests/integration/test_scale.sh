#!/bin/bash
# tests/integration/test_scale.sh - many partitions under a descriptor limit, and a
# data directory on a read-only filesystem.
#
# Descriptors must not grow with partitions: the daemon runs under `ulimit -n
# T_SCALE_FD_LIMIT` (default 4096) with T_SCALE_PARTITIONS partitions (default
# 25,000: six times the limit) split into topics of at most 25,000, and must create,
# mount, list and write all of them, holding no more descriptors than the limit
# allows. T_SCALE_PARTITIONS=100000 T_SCALE_FD_LIMIT=20000 is the full-size run.
# The data directory is a tmpfs so that the case measures descriptors, not fsyncs.
#
# `-o ro` on a read-only filesystem (a read-only bind mount): everything reads,
# every write is EROFS, and no byte of the data directory changes - a torn tail is
# skipped in memory, leftovers of a cleaning pass stay. Without `ro` such a data
# directory is refused with a message naming `-o ro`.
. "$(dirname "$0")/lib.sh"
t_require_daemon

SCALE_PARTS=${T_SCALE_PARTITIONS:-25000}
SCALE_FDS=${T_SCALE_FD_LIMIT:-4096}
TOPIC_MAX_PARTS=25000

# daemon_pid [MNT]: the topicfs process serving MNT (the child of its timeout(1)).
daemon_pid() {
	local st
	st=$(t__state "${1:-$MNT}") || fail "no daemon serves ${1:-$MNT}"
	pgrep -P "$(cat "$st/pid")" -x topicfs
}

# fd_count PID: descriptors PID holds.
fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }

# rss_kib PID
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# limited_daemon N: a wrapper that runs the daemon under `ulimit -n N`.
limited_daemon() {
	local w=$T_CASE/topicfs-limited real=$TOPICFS
	printf '#!/bin/bash\nulimit -n %s || exit 1\nexec %q "$@"\n' "$1" "$real" > "$w"
	chmod 755 "$w"
	echo "$w"
}

# assert_fds_bounded PID WHAT: PID holds fewer descriptors than the limit.
assert_fds_bounded() {
	local n
	n=$(fd_count "$1")
	echo "# $2: $n descriptors (limit $SCALE_FDS)"
	[ "$n" -lt "$SCALE_FDS" ] || fail "$2: $n descriptors, limit $SCALE_FDS"
}

# Bug: one topic of 12,000 partitions could not be created (EMFILE inside, EBADF
# to mkdir), and 8,000 held 16,012 descriptors: a directory and an active
# segment's fd per partition.
case_partitions_past_the_descriptor_limit() {
	local fs=$T_CASE/fs pid ntopics per topics=() n t p t0 t1 rss0 rss1 got
	mkdir -p "$fs"
	mount -t tmpfs -o size=2g tmpfs "$fs" || skip "cannot mount a tmpfs here"
	t_track_mount "$fs"
	DATA=$fs/data
	TOPICFS=$(limited_daemon "$SCALE_FDS")
	ntopics=$(( (SCALE_PARTS + TOPIC_MAX_PARTS - 1) / TOPIC_MAX_PARTS ))
	per=$((SCALE_PARTS / ntopics))
	for ((t = 0; t < ntopics; t++)); do topics+=("wide$t"); done
	t_mount -o "partitions=$per"
	pid=$(daemon_pid)
	[ "$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")" = "$SCALE_FDS" ] ||
		fail "the daemon does not run under ulimit -n $SCALE_FDS"
	rss0=$(rss_kib "$pid")
	t0=$(date +%s%N)
	for t in "${topics[@]}"; do
		mkdir "$MNT/$t" || fail "mkdir of $t with $per partitions failed"
		assert_eq "$per" "$(ls "$MNT/$t" | wc -l)" "partitions listed in $t"
	done
	t1=$(date +%s%N)
	rss1=$(rss_kib "$pid")
	echo "# $((ntopics * per)) partitions created in $(( (t1 - t0) / 1000000 )) ms;" \
		"$(( (rss1 - rss0) * 1024 / (ntopics * per) )) bytes of RSS each, idle"
	assert_fds_bounded "$pid" "after creating $((ntopics * per)) partitions"
	for t in "${topics[@]}"; do
		for ((p = 0; p < per; p++)); do
			echo "v$p" > "$MNT/$t/$p/k" || fail "write to $t/$p failed"
		done
	done
	echo "# $(( ($(rss_kib "$pid") - rss0) * 1024 / (ntopics * per) )) bytes of RSS each, written once"
	assert_fds_bounded "$pid" "after a write to every partition"
	t_umount
	t0=$(date +%s%N)
	t_mount -o "partitions=$per"
	t1=$(date +%s%N)
	pid=$(daemon_pid)
	echo "# mount of $((ntopics * per)) partitions: $(( (t1 - t0) / 1000000 )) ms," \
		"RSS $(rss_kib "$pid") KiB"
	assert_fds_bounded "$pid" "after the mount"
	for t in "${topics[@]}"; do
		assert_eq "$per" "$(ls "$MNT/$t" | wc -l)" "partitions of $t after the mount"
		got=$(cd "$MNT/$t" && cat ./*/k | wc -l)
		assert_eq "$per" "$got" "keys read back from $t"
		assert_cat "$MNT/$t/$((per - 1))/k" "v$((per - 1))"$'\n'
		# a second write takes active segments the cache closed meanwhile
		for ((p = 0; p < per; p += 7)); do
			echo "w$p" > "$MNT/$t/$p/k" || fail "second write to $t/$p failed"
		done
		assert_cat "$MNT/$t/0/k" $'w0\n'
		assert_eq 2 "$(t_leo "$t/0")" "records in $t/0"
	done
	assert_fds_bounded "$pid" "after reads and writes"
	if t_daemon_log | grep -E "Bad file descriptor|Too many open files"; then
		fail "the daemon reported a descriptor error"
	fi
}

# sha_tree DIR: names, sizes and digests of every file under DIR.
sha_tree() { (cd "$1" && find . -type f -printf '%p %s\n' | sort && find . -type f -exec sha256sum {} + | sort -k2); }

# Bug: `-o ro` could not mount a data directory on a read-only filesystem: every
# topic was "left out" because segments were opened for writing.
case_ro_mounts_a_read_only_filesystem() {
	local ro=$T_CASE/ro before after log
	t_mount -o partitions=2,segment.bytes=1024
	mkdir "$MNT/t"
	for i in $(seq 40); do echo "value-$i" > "$MNT/t/0/k$((i % 8))"; done
	echo b > "$MNT/t/1/kb"
	t_umount
	# a torn tail in the active segment and a cleaning pass's leftover
	last=$(ls "$DATA/t-0"/*.log | sort | tail -n 1)
	printf 'torn-tail-bytes' >> "$last"
	: > "$DATA/t-0/00000000000000000000.log.cleaned"
	mkdir -p "$ro"
	mount --bind "$DATA" "$ro" || skip "cannot bind-mount here"
	t_track_mount "$ro"
	mount -o remount,bind,ro "$ro" || skip "cannot remount a bind mount read-only"
	touch "$ro/probe" 2>/dev/null && fail "the bind mount is writable"
	before=$(sha_tree "$DATA")

	# without ro: refused, saying what to do
	T_MOUNT_MAY_EXIT=1 t_mount "$ro" "$MNT" && fail "a read-only data directory mounted read-write"
	assert_ne 0 "$T_MOUNT_EXIT" "exit status"
	t_daemon_log | grep -q -- "-o ro" || fail "the refusal does not name -o ro"

	t_mount -o ro "$ro" "$MNT"
	assert_eq "t" "$(ls "$MNT")" "topics"
	for i in $(seq 33 40); do assert_cat "$MNT/t/0/k$((i % 8))" "value-$i"$'\n'; done
	assert_cat "$MNT/t/1/kb" $'b\n'
	assert_eq 40 "$(t_hist t/0)" "history entries of t/0"
	assert_eq 1 "$(t_hist t/1)" "history entries of t/1"
	assert_eq EROFS "$(t_sys put "$MNT/t/0/k1" x)" "overwriting a key"
	assert_eq EROFS "$(t_sys put "$MNT/t/0/new" x)" "creating a key"
	assert_eq EROFS "$(t_sys append "$MNT/t/0/k1" x)" "appending to a key"
	assert_errno EROFS unlink "$MNT/t/0/k1"
	assert_errno EROFS mkdir "$MNT/u"
	assert_errno EROFS rmdir "$MNT/t"
	assert_errno EROFS rename "$MNT/t/0/k1" "$MNT/t/0/k9"
	assert_errno EROFS truncate "$MNT/t/0/k1" 0
	assert_errno EROFS mkdir "$MNT/t/2"
	assert_errno EROFS setxattr "$MNT/t" user.topicfs.config.retention.ms 1
	t_daemon_log "$MNT" | grep -q "torn tail" || fail "the torn tail is not logged"
	t_daemon_log "$MNT" | grep -q "log.cleaned" || fail "the cleaner's leftover is not logged"
	t_umount
	after=$(sha_tree "$DATA")
	assert_eq "$before" "$after" "the data directory after a read-only mount"
}

t_test partitions_past_the_descriptor_limit case_partitions_past_the_descriptor_limit
t_test ro_mounts_a_read_only_filesystem case_ro_mounts_a_read_only_filesystem
t_done
