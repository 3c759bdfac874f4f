#!/bin/bash
# test_fio.sh - data integrity under fio and stress-ng (docs/semantics.md §4, §5).
#
# fio: its files become keys; random 4 KiB pwrites patch the handle's copy of the value
# and each close commits the whole value as one record, then fio reads it back and
# checks every block's crc32c. Flags chosen for topicfs:
#   --fallocate=none  keys have no preallocation (FUSE fallocate is not implemented;
#                     fio's default posix_fallocate would only warn, this keeps it quiet)
#   --ioengine=psync  pread/pwrite, no mmap (MAP_SHARED is not promised on keys)
#   -o max.message.bytes=16777216  a 4 MiB file is one 4 MiB record, above Kafka's
#                     default limit of 1048588 bytes
# stress-ng: its filesystem stressors mkdir a per-instance directory
# TEMP/tmp-stress-ng-NAME-PID-I and work inside it, but topicfs has no directories
# below a partition (mkdir there is EPERM by design). A small LD_PRELOAD shim turns
# exactly that mkdir into a symlink to a partition, so the stressors' files are keys.
# --dir (mkdir below the partition) and --filename (names with a raw leading '.' or
# '%', EINVAL by design) do not apply and are not run.
. "$(dirname "$0")/lib.sh"
t_require_daemon

FIO_ARGS="--name=v --rw=randwrite --bs=4k --size=4M --verify=crc32c --verify_fatal=1
	--do_verify=1 --ioengine=psync --numjobs=2 --fallocate=none"

c_fio_verify() {
	need fio
	t_mount -o max.message.bytes=16777216
	mkdir "$MNT/t"
	local out
	# shellcheck disable=SC2086
	out=$(fio $FIO_ARGS --directory="$MNT/t/0" --output-format=terse --terse-version=3 2>&1) ||
		fail "fio exited $?: $(printf '%s' "$out" | tail -n 5)"
	# terse v3: field 5 is the job's error number.
	assert_eq "0 0" "$(printf '%s\n' "$out" | awk -F';' '/^3;/ {print $5}' | xargs)" "fio error fields"
	assert_eq "v.0.0 v.1.0" "$(ls "$MNT/t/0" | xargs)" "keys made by fio"
	assert_eq "4194304 4194304" "$(stat -c %s "$MNT/t/0"/v.* | xargs)" "sizes of fio's keys"
	# Verify again from the log after a remount (fio --verify_only reads and checks).
	t_remount -o max.message.bytes=16777216
	# shellcheck disable=SC2086
	out=$(fio $FIO_ARGS --verify_only=1 --directory="$MNT/t/0" --output-format=terse --terse-version=3 2>&1) ||
		fail "fio --verify_only after remount exited $?: $(printf '%s' "$out" | tail -n 5)"
	assert_eq "0 0" "$(printf '%s\n' "$out" | awk -F';' '/^3;/ {print $5}' | xargs)" "fio verify-only error fields"
}

# Sequential 64 KiB writes with an fsync every 16 blocks: each fsync commits the value
# so far (a record), the close commits the rest.
c_fio_fsync() {
	need fio
	t_mount -o max.message.bytes=16777216
	mkdir "$MNT/t"
	local out
	out=$(fio --name=s --rw=write --bs=64k --size=2M --fsync=16 --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --ioengine=psync --fallocate=none --directory="$MNT/t/0" \
		--output-format=terse --terse-version=3 2>&1) || fail "fio exited $?: $(printf '%s' "$out" | tail -n 5)"
	assert_eq 0 "$(printf '%s\n' "$out" | awk -F';' '/^3;/ {print $5}')" "fio error field"
	[ "$(t_leo t/0)" -ge 3 ] || fail "expected a record per fsync, log end is $(t_leo t/0)"
	assert_eq 2097152 "$(stat -c %s "$MNT/t/0/s.0.0")" "size of fio's key"
}

c_stress_ng() {
	need stress-ng gcc
	cat > "$T_CASE/shim.c" <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* TFS_SHIM_ROOT/tmp-stress-ng-* (one component) -> symlink to TFS_SHIM_TARGET */
static const char *redirect(const char *path)
{
	const char *root = getenv("TFS_SHIM_ROOT"), *target = getenv("TFS_SHIM_TARGET");
	size_t n = root ? strlen(root) : 0;
	if (!root || !target || strncmp(path, root, n) || path[n] != '/')
		return NULL;
	path += n + 1;
	if (strncmp(path, "tmp-stress-ng-", 14) || strchr(path, '/'))
		return NULL;
	return target;
}

int mkdir(const char *path, mode_t mode)
{
	static int (*real)(const char *, mode_t);
	const char *t = redirect(path);
	if (t)
		return symlink(t, path);
	if (!real)
		real = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "mkdir");
	return real(path, mode);
}

int rmdir(const char *path)
{
	static int (*real)(const char *);
	if (redirect(path))
		return unlink(path);
	if (!real)
		real = (int (*)(const char *))dlsym(RTLD_NEXT, "rmdir");
	return real(path);
}
CEOF
	gcc -shared -fPIC -O2 -o "$T_CASE/shim.so" "$T_CASE/shim.c" -ldl
	t_mount -o max.message.bytes=4194304
	mkdir "$MNT/s" "$MNT/f" "$T_CASE/root"
	local i out rc=0
	for i in $(seq 200); do echo "stable $i" > "$MNT/f/0/k$i"; done
	out=$(cd "$T_CASE" && TFS_SHIM_ROOT="$T_CASE/root" TFS_SHIM_TARGET="$MNT/s/0" \
		LD_PRELOAD="$T_CASE/shim.so" stress-ng --temp-path "$T_CASE/root" \
		--dentry 2 --rename 1 --hdd 1 --hdd-bytes 1m --hdd-write-size 4k \
		--readahead 1 --readahead-bytes 1m --fstat 1 --fstat-dir "$MNT/f/0" \
		--timeout "${T_STRESS_SECS:-20}s" --metrics-brief 2>&1) || rc=$?
	printf '%s\n' "$out" > "$T_CASE/stress-ng.log"
	if [ "$rc" != 0 ] || printf '%s\n' "$out" | grep -qE 'fail:|error:'; then
		printf '%s\n' "$out" | grep -E 'fail|error|unsuccessful' | head -n 15 | sed 's/^/#   /'
		fail "stress-ng exited $rc or reported failures"
	fi
	assert_ok mountpoint -q "$MNT"
	assert_eq "" "$(ls -A "$MNT/s/0")" "keys left behind by stress-ng (it removes its files)"
	assert_eq 200 "$(ls "$MNT/f/0" | wc -l)" "keys of the fstat directory"
	[ "$(t_leo s/0)" -gt 1000 ] || fail "stress-ng made only $(t_leo s/0) records"
	t_remount -o max.message.bytes=4194304
	assert_eq "" "$(ls -A "$MNT/s/0")" "partition after remount"
	assert_cat "$MNT/f/0/k200" $'stable 200\n'
}

t_test fio_verify c_fio_verify
t_test fio_fsync c_fio_fsync
t_test stress_ng c_stress_ng
t_done
