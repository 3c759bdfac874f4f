#!/bin/bash
# test_mount_helper.sh - mount-helpers/mount.topicfs with mount(8) and fstab, and the
# stock mount.fuse3 path (`mount -t fuse.topicfs`).
#
# mount(8) starts the daemon through the helper, so the daemon would not run under
# timeout(1). These cases therefore give the helper a stand-in `topicfs` (a script that
# records its argv, then runs the real daemon with -f under timeout with auto_unmount,
# and returns once the mount is up): the argv shows the helper's translation, and the
# daemon is bounded like every other mount of the suite. One case runs the real binary
# through the helper (daemonizing), with auto_unmount, and stops it by its pid.
#
# /sbin/mount.topicfs and /usr/local/bin/topicfs are installed for the duration of a
# case only when they do not exist yet, and removed afterwards. mount(8) drops PATH from
# a helper's environment, so "topicfs in PATH" means a standard directory such as
# /usr/local/bin.
. "$(dirname "$0")/lib.sh"
t_require_daemon

HELPER=$T_REPO/mount-helpers/mount.topicfs

# make_standin FILE: the stand-in daemon described above, for the current case.
make_standin() {
	cat > "$1" <<EOF
#!/bin/bash
printf '%s\n' "\$*" >> "$T_CASE/argv.log"
opts=() pos=()
while [ \$# -gt 0 ]; do
	case \$1 in
	-o) opts+=("\$2"); shift 2 ;;
	-o?*) opts+=("\${1#-o}"); shift ;;
	-f) shift ;;
	*) pos+=("\$1"); shift ;;
	esac
done
o=\$(IFS=,; echo "\${opts[*]}")
data=\${pos[0]} mnt=\${pos[1]}
st=$T_CASE/.d/\$(ls "$T_CASE/.d" | wc -l)
mkdir -p "\$st"
printf '%s\n' "\$mnt" > "\$st/mnt"
printf '%s\n' "-f -o auto_unmount\${o:+,\$o} \$data \$mnt" > "\$st/args"
(
	timeout --signal=TERM --kill-after=10 ${T_TIMEOUT:-300} "$TOPICFS" -f -o "auto_unmount\${o:+,\$o}" "\$data" "\$mnt" &
	echo \$! > "\$st/pid"
	wait \$!
	echo \$? > "\$st/rc"
) > "\$st/log" 2>&1 < /dev/null &
for i in \$(seq 300); do
	mountpoint -q "\$mnt" && exit 0
	[ -e "\$st/rc" ] && { cat "\$st/log" >&2; exit 1; }
	sleep 0.1
done
exit 1
EOF
	chmod 755 "$1"
}

# install_tmp SRC DEST: copy SRC to DEST for this case only (skip if DEST exists).
install_tmp() {
	[ -e "$2" ] && skip "$2 already exists; not replacing it"
	cp "$1" "$2"
	chmod 755 "$2"
	t_on_exit "rm -f '$2'"
}

# Works on the mount: a write, a read, the right type and source.
check_mount() {
	mkdir -p "$MNT/t"
	echo v > "$MNT/t/0/k"
	assert_cat "$MNT/t/0/k" $'v\n'
	assert_eq "fuse.topicfs" "$(findmnt -n -o FSTYPE "$MNT")" "type of the mount"
}

c_helper_translates_options() {
	make_standin "$T_CASE/standin"
	TOPICFS_BIN=$T_CASE/standin "$HELPER" "$DATA" "$MNT" -o \
		defaults,rw,noauto,_netdev,x-systemd.automount,nofail,user,users,comment=x,allow_other,partitions=2
	assert_eq "-o allow_other,partitions=2 $DATA $MNT" "$(cat "$T_CASE/argv.log")" "argv given to topicfs"
	check_mount
	assert_eq "0 1" "$(ls "$MNT/t" | xargs)" "partitions=2 reached the daemon"
	t_umount
	# -f (fake) runs nothing; -s and -n are accepted.
	: > "$T_CASE/argv.log"
	assert_ok env TOPICFS_BIN="$T_CASE/standin" "$HELPER" "$DATA" "$MNT" -sfn -o allow_other
	assert_eq "" "$(cat "$T_CASE/argv.log")" "argv log after mount.topicfs -f"
	assert_fails t_mounted "$MNT"
	# Only mount(8) options: no -o at all. And the binary beside the script is found.
	mkdir "$T_CASE/sbin"
	cp "$HELPER" "$T_CASE/sbin/mount.topicfs"
	cp "$T_CASE/standin" "$T_CASE/sbin/topicfs"
	env -u TOPICFS_BIN PATH=/usr/bin:/bin "$T_CASE/sbin/mount.topicfs" "$DATA" "$MNT" -o defaults,rw
	assert_eq "$DATA $MNT" "$(cat "$T_CASE/argv.log")" "argv given to the topicfs beside the helper"
	assert_ok mountpoint -q "$MNT"
	t_umount
}

c_mount_t_topicfs_and_fstab() {
	install_tmp "$HELPER" /sbin/mount.topicfs
	make_standin "$T_CASE/standin"
	TOPICFS_BIN=$T_CASE/standin mount -t topicfs "$DATA" "$MNT" -o allow_other,noauto
	assert_eq "-o allow_other $DATA $MNT" "$(cat "$T_CASE/argv.log")" "argv from mount -t topicfs"
	check_mount
	t_umount
	# An fstab line, through mount --fstab (the real /etc/fstab is not touched).
	printf '%s %s topicfs defaults,allow_other,_netdev 0 0\n' "$DATA" "$MNT" > "$T_CASE/fstab"
	: > "$T_CASE/argv.log"
	TOPICFS_BIN=$T_CASE/standin mount -T "$T_CASE/fstab" "$MNT"
	assert_eq "-o allow_other $DATA $MNT" "$(cat "$T_CASE/argv.log")" "argv from the fstab line"
	# README's fstab line is safe as written: the kernel checks permissions.
	assert_match '.*[ ,]default_permissions(,.*)?' "$(awk -v m="$MNT" '$5 == m' /proc/self/mountinfo)" \
		"the fstab mount in mountinfo"
	assert_cat "$MNT/t/0/k" $'v\n'
	t_umount
	# With topicfs in a standard directory instead of TOPICFS_BIN.
	install_tmp "$T_CASE/standin" /usr/local/bin/topicfs
	: > "$T_CASE/argv.log"
	mount -t topicfs "$DATA" "$MNT"
	assert_eq "$DATA $MNT" "$(cat "$T_CASE/argv.log")" "argv via /usr/local/bin/topicfs"
	assert_cat "$MNT/t/0/k" $'v\n'
	t_umount
}

c_mount_t_fuse_topicfs() {
	[ -x /sbin/mount.fuse3 ] || skip "/sbin/mount.fuse3 is not installed"
	make_standin "$T_CASE/standin"
	install_tmp "$T_CASE/standin" /usr/local/bin/topicfs
	mount -t fuse.topicfs "$DATA" "$MNT" -o allow_other,default_permissions
	# mount.fuse3 puts the options last, keeps rw, and adds dev,suid when run as root.
	assert_match "$DATA $MNT -o (rw,)?allow_other,default_permissions(,dev,suid)?" "$(cat "$T_CASE/argv.log")" \
		"argv from mount.fuse3"
	check_mount
	assert_eq "$DATA" "$(findmnt -n -o SOURCE "$MNT")" "source of the mount"
	t_umount
}

# daemon_pid: the pid of the daemonized topicfs serving $MNT (registered for a TERM at
# the end of the case, if it still serves this mountpoint then).
daemon_pid() {
	local pid
	pid=$(pgrep -f -x -- "$TOPICFS -o auto_unmount $DATA $MNT" | head -n 1)
	if [ -z "$pid" ]; then
		echo "# FAIL: no topicfs process serves $MNT after mount.topicfs returned" >&2
		return 1
	fi
	t_on_exit "grep -q '$MNT' /proc/$pid/cmdline 2>/dev/null && kill -TERM $pid"
	echo "$pid"
}

# The real daemon through the helper: it must daemonize and return once mounted.
c_real_daemon_through_helper() {
	local pid i
	TOPICFS_BIN=$TOPICFS timeout 60 "$HELPER" "$DATA" "$MNT" -o auto_unmount ||
		fail "mount.topicfs with the real topicfs failed"
	pid=$(daemon_pid)
	assert_ok mountpoint -q "$MNT"
	check_mount
	umount "$MNT"
	for i in $(seq 100); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then fail "topicfs ($pid) still runs 10 s after umount"; fi
	TOPICFS_BIN=$TOPICFS timeout 60 "$HELPER" "$DATA" "$MNT" -o auto_unmount || fail "second mount failed"
	pid=$(daemon_pid)
	assert_cat "$MNT/t/0/k" $'v\n'
	umount "$MNT"
	for i in $(seq 100); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
}

t_test helper_translates_options c_helper_translates_options
t_test mount_t_topicfs_and_fstab c_mount_t_topicfs_and_fstab
t_test mount_t_fuse_topicfs c_mount_t_fuse_topicfs
t_test real_daemon_through_helper c_real_daemon_through_helper
t_done
