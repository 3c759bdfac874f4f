#!/bin/bash
# test_systemd.sh - systemd/topicfs@.service and systemd/example.mount.
#
# systemd is not PID 1 in the containers this runs in, so the units cannot be started.
# Instead: `systemd-analyze verify` checks both files (on copies: the service with its
# ExecStart binary pointed at the built topicfs, since verify requires it to exist, and
# the mount unit under the name its Where= demands), and the service's own command lines
# (ExecStartPre, ExecStart, ExecStartPost, ExecStop), with systemd's ${VAR} and $$
# substitutions applied to a test configuration file, are run by hand: they must mount,
# serve, and unmount with the daemon exiting 0. Readiness (Type=notify) is checked the
# way systemd sees it: ExecStart runs with $NOTIFY_SOCKET naming a datagram socket this
# test reads, which must receive STATUS=, READY=1 once the mount is up, WATCHDOG=1
# pings when $WATCHDOG_USEC asks for them, and STOPPING=1 at the end; the readiness
# case holds the daemon inside its listener's start to show that READY=1 waits for
# it, and checks what STATUS= says while 130 topics open. Log priorities reach the
# journal both ways: in the foreground as "<N>" prefixes on its stream, in the
# background through syslog(3) (read on a /dev/log of a private mount namespace).
. "$(dirname "$0")/lib.sh"
t_require_root

UNITS=$T_REPO/systemd
BIN=$TOPICFS
[ -x "$BIN" ] || BIN=/usr/bin/true     # verify needs an existing path; the run case needs the daemon

# unit_copy FILE BIN: the unit as `cmake --install` would write it, with the daemon at
# BIN and the other install paths at their default prefix.
unit_copy() {
	sed -e "s#@CMAKE_INSTALL_FULL_BINDIR@/topicfs#$2#g" \
		-e 's#@CMAKE_INSTALL_FULL_DOCDIR@#/usr/local/share/doc/topicfs#g' \
		-e 's#@CMAKE_INSTALL_FULL_SBINDIR@#/usr/local/sbin#g' \
		-e 's#@CMAKE_INSTALL_FULL_SYSCONFDIR@#/usr/local/etc#g' "$1"
}

# dgram_log SOCKET LOG STOP: in the background, every datagram sent to SOCKET as one
# line of LOG ("|" for newlines) until the file STOP exists or its directory is gone;
# returns once SOCKET is bound, with $! the receiver.
dgram_log() {
	local i
	"$T_PY" - "$1" "$2" "$3" <<'PY' &
import os, socket, sys, time
path, log, stop = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(0.2)
deadline = time.monotonic() + 300
with open(log, "a") as f:
    while (not os.path.exists(stop) and os.path.isdir(os.path.dirname(stop)) and
           time.monotonic() < deadline):
        try:
            msg = s.recv(8192)
        except socket.timeout:
            continue
        f.write(msg.decode(errors="replace").replace("\n", "|") + "\n")
        f.flush()
PY
	for i in $(seq 100); do [ -S "$1" ] && break; sleep 0.1; done
}

c_verify_units() {
	need systemd-analyze systemd-escape
	local d=$T_CASE/units out rc=0 name
	mkdir "$d"
	unit_copy "$UNITS/topicfs@.service" "$BIN" > "$d/topicfs@.service"
	cp "$d/topicfs@.service" "$d/topicfs@demo.service"
	name=$(systemd-escape -p --suffix=mount "$(sed -n 's/^Where=//p' "$UNITS/example.mount")")
	assert_eq mnt-topicfs.mount "$name" "unit name for Where= of example.mount"
	unit_copy "$UNITS/example.mount" "$BIN" > "$d/$name"
	out=$(cd "$d" && systemd-analyze verify --man=no "./topicfs@.service" "./topicfs@demo.service" "./$name" 2>&1) || rc=$?
	printf '%s\n' "$out" | sed 's/^/# verify: /'
	assert_eq 0 "$rc" "exit status of systemd-analyze verify"
	# verify only warns about unknown keys and bad values; any word about our units fails.
	assert_eq "" "$(printf '%s\n' "$out" | grep -E 'topicfs@|mnt-topicfs|Unknown|Invalid|ignoring' || true)" \
		"systemd-analyze warnings about the units"
	# The units `cmake --install` writes (not a copy made here): verified the same way,
	# ExecStart= naming the installed daemon.
	if [ -f "$BUILD_DIR/cmake_install.cmake" ]; then
		local p=$T_CASE/prefix i=$T_CASE/installed
		cmake --install "$BUILD_DIR" --prefix "$p" > "$T_CASE/install.log" 2>&1 ||
			{ cat "$T_CASE/install.log"; fail "cmake --install"; }
		mkdir "$i"
		cp "$p/lib/systemd/system/topicfs@.service" "$i/topicfs@demo.service"
		cp "$p/share/doc/topicfs/examples/example.mount" "$i/$name"
		assert_ok grep -q "^ExecStart=$p/bin/topicfs " "$i/topicfs@demo.service"
		rc=0
		out=$(cd "$i" && systemd-analyze verify --man=no "./topicfs@demo.service" "./$name" 2>&1) || rc=$?
		printf '%s\n' "$out" | sed 's/^/# verify installed: /'
		assert_eq 0 "$rc" "exit status of systemd-analyze verify on the installed units"
		assert_eq "" "$(printf '%s\n' "$out" | grep -E 'topicfs@|mnt-topicfs|Unknown|Invalid|ignoring' || true)" \
			"systemd-analyze warnings about the installed units"
	fi
	# The contract of the service, stated in the task: foreground, auto_unmount, restart.
	local s=$UNITS/topicfs@.service
	assert_eq "Type=notify" "$(grep '^Type=' "$s")" "Type="
	assert_match 'ExecStart=.* -f .*auto_unmount.*' "$(grep '^ExecStart=' "$s")" "ExecStart="
	assert_eq "Restart=on-failure" "$(grep '^Restart=' "$s")" "Restart="
	assert_match 'ExecStop=.*(fusermount3 -u|umount).*' "$(grep '^ExecStop=' "$s")" "ExecStop="
	assert_eq "EnvironmentFile=@CMAKE_INSTALL_FULL_SYSCONFDIR@/topicfs/%i.conf" \
		"$(grep '^EnvironmentFile=' "$s")" "EnvironmentFile="
	local m=$UNITS/example.mount
	assert_eq "What=/var/lib/topicfs/demo Where=/mnt/topicfs Type=topicfs" \
		"$(grep -E '^(What|Where|Type)=' "$m" | xargs)" "What/Where/Type of example.mount"
	assert_match 'Options=allow_other(,.*)?' "$(grep '^Options=' "$m")" "Options= of example.mount"
}

# exec_line KEY: the KEY= line of the service, with systemd's substitutions done for
# the environment of this case (Environment=, then the conf file) and its "-" prefix gone.
exec_line() {
	local line
	line=$(sed -n "s/^$1=//p" "$T_CASE/unit")
	line=${line#-}
	line=$(printf '%s' "$line" | sed -e "s#\${DATA_DIR}#$DATA#g" -e "s#\${MOUNTPOINT}#$MNT#g" \
		-e "s#\${OPTIONS}#$OPTIONS#g" -e 's/\$\$/$/g')
	printf '%s' "$line"
}

c_service_commands_run() {
	[ -x "$TOPICFS" ] || fail "daemon binary $TOPICFS not built"
	local conf=$T_CASE/demo.conf line st i
	unit_copy "$UNITS/topicfs@.service" "$TOPICFS" > "$T_CASE/unit"
	rm -rf "$DATA" "$MNT"
	printf '# test instance\nDATA_DIR=%s\nMOUNTPOINT=%s\nOPTIONS=allow_other,default_permissions,partitions=2\n' \
		"$DATA" "$MNT" > "$conf"
	# Environment=OPTIONS=... first, then the EnvironmentFile overrides it.
	eval "$(sed -n 's/^Environment=//p' "$T_CASE/unit")"
	# shellcheck disable=SC1090
	. "$conf"
	export MOUNTPOINT DATA_DIR OPTIONS
	# ExecStartPre: makes both directories.
	eval "set -- $(exec_line ExecStartPre)"
	"$@"
	assert_ok test -d "$DATA"
	assert_ok test -d "$MNT"
	# The notify socket systemd would pass.
	dgram_log "$T_CASE/notify.sock" "$T_CASE/notify.log" "$T_CASE/notify.stop"
	t_on_exit "touch '$T_CASE/notify.stop'"
	# ExecStart, run like t_mount does (under timeout), but with the unit's own argv
	# and the environment systemd gives a Type=notify service with WatchdogSec=.
	eval "set -- $(exec_line ExecStart)"
	st=$T_CASE/.d/0
	mkdir -p "$st"
	printf '%s\n' "$MNT" > "$st/mnt"
	printf '%s\n' "$*" > "$st/args"
	(
		set +eE; trap - ERR
		NOTIFY_SOCKET=$T_CASE/notify.sock WATCHDOG_USEC=400000 \
			timeout --signal=TERM --kill-after=10 "${T_TIMEOUT:-300}" "$@" &
		echo $! > "$st/pid"
		wait $!
		echo $? > "$st/rc"
	) > "$st/log" 2>&1 < /dev/null &
	# What ExecStartPost used to poll for, systemd now hears: READY=1 once mounted.
	for i in $(seq 600); do grep -q 'READY=1' "$T_CASE/notify.log" 2>/dev/null && break; sleep 0.1; done
	sed 's/^/# notify: /' "$T_CASE/notify.log"
	assert_match 'READY=1\|STATUS=serving .* on .*' "$(grep READY "$T_CASE/notify.log")" "READY=1 line"
	assert_ok grep -q '^STATUS=opening the data directory' "$T_CASE/notify.log"
	assert_ok mountpoint -q "$MNT"
	# Watchdog pings: at least two (each half of WATCHDOG_USEC), while the engine answers.
	for i in $(seq 600); do [ "$(grep -c '^WATCHDOG=1$' "$T_CASE/notify.log")" -ge 2 ] && break; sleep 0.1; done
	assert_ok test "$(grep -c '^WATCHDOG=1$' "$T_CASE/notify.log")" -ge 2
	mkdir "$MNT/t"
	assert_eq "0 1" "$(ls "$MNT/t" | xargs)" "partitions=2 from OPTIONS reached the daemon"
	echo v > "$MNT/t/0/k"
	assert_cat "$MNT/t/0/k" $'v\n'
	# ExecStop: unmounts; the daemon then exits 0 (checked by t_umount-style wait).
	eval "set -- $(exec_line ExecStop)"
	assert_ok "$@"
	for i in $(seq 600); do [ -e "$st/rc" ] && break; sleep 0.1; done
	touch "$st/checked"
	assert_eq 0 "$(cat "$st/rc" 2>/dev/null || echo running)" "daemon exit status after ExecStop"
	assert_fails t_mounted "$MNT"
	assert_ok grep -q '^STOPPING=1' "$T_CASE/notify.log"
	touch "$T_CASE/notify.stop"
}

# Under systemd, stderr is the journal's stream and $JOURNAL_STREAM names its device and
# inode: lines then carry sd-daemon(3)'s "<priority>" prefix and no timestamp. On any
# other stderr they keep the timestamp.
c_journal_priorities() {
	local log=$T_CASE/journal.log plain=$T_CASE/plain.log pid i
	: > "$log"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$log") timeout 120 "$TOPICFS" -f -o auto_unmount \
		"$DATA" "$MNT" 2>> "$log" &
	pid=$!
	for i in $(seq 300); do mountpoint -q "$MNT" && break; sleep 0.1; done
	assert_ok mountpoint -q "$MNT"
	umount "$MNT"
	wait "$pid"
	sed 's/^/# journal: /' "$log"
	assert_ok grep -q '^<6>info fs: mounted ' "$log"
	assert_eq "" "$(grep -v '^<[0-7]>' "$log" || true)" "journal lines without a priority"
	# A stderr that is not the named stream: timestamps, no prefix.
	JOURNAL_STREAM=1:1 timeout 120 "$TOPICFS" -f -o auto_unmount "$DATA" "$MNT" 2> "$plain" &
	pid=$!
	for i in $(seq 300); do mountpoint -q "$MNT" && break; sleep 0.1; done
	umount "$MNT"
	wait "$pid"
	assert_ok grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T.* info fs: mounted ' "$plain"
}

# Without $NOTIFY_SOCKET (a plain shell, fstab, mount -t topicfs) nothing changes and
# the daemon starts as before; with a socket that is gone, it logs and goes on.
c_notify_socket_missing() {
	export NOTIFY_SOCKET=$T_CASE/no-such.sock
	t_mount
	assert_ok mountpoint -q "$MNT"
	mkdir "$MNT/t"
	echo v > "$MNT/t/0/k"
	assert_cat "$MNT/t/0/k" $'v\n'
	t_umount
}

# Readiness, as a unit ordered After= topicfs@ sees it. A driver binds the notify
# socket, runs the daemon with $NOTIFY_SOCKET and reads every datagram itself:
#   pause   a SASL listener whose credentials file is a FIFO: the daemon blocks opening
#           it inside the listener's start, after the mount and before listen(2). The
#           event is a thread of the daemon waiting in the open (its wchan says
#           wait_for_partner); while it waits, every datagram sent so far is queued on
#           the socket, and none may be READY=1. Opening the FIFO for writing lets it
#           go on; the FIFO is refused (not a regular file), and the daemon exits 1
#           without READY=1 ever.
#   ready   a PLAINTEXT listener: the moment READY=1 arrives, the port is in the log,
#           the port answers an ApiVersions request, and the mount answers a listing.
#   opening with 130 topics made in the first mount, the next start sends a STATUS=
#           line every 64 topics (0, 64 and 128 of them), each with
#           EXTEND_TIMEOUT_USEC=, all before READY=1.
c_readiness() {
	need mkfifo
	local out
	"$T_PY" - "$TOPICFS" "$T_CASE" "$DATA" "$MNT" > "$T_CASE/ready.out" 2>&1 <<'PY' || { cat "$T_CASE/ready.out"; fail "readiness driver"; }
import os, re, socket, struct, subprocess, sys, time
topicfs, case, data, mnt = sys.argv[1:5]
sock_path = os.path.join(case, "notify.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sock_path)
env = dict(os.environ, NOTIFY_SOCKET=sock_path)
env.pop("WATCHDOG_USEC", None)
BOUND = 120                  # a bound on a hang, not a timing assertion

def start(opts, log):
    f = open(os.path.join(case, log), "w")
    return subprocess.Popen(["timeout", "--kill-after=10", "300", topicfs, "-f", "-o",
                             "auto_unmount," + opts, data, mnt],
                            env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

def queued():
    """Every datagram already on the socket, without waiting."""
    got = []
    s.setblocking(False)
    while True:
        try:
            got.append(s.recv(4096).decode())
        except BlockingIOError:
            return got

def in_mount_table():
    """The kernel has the mount (a stat would wait for the session loop to answer)."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)

def until(pred, what):
    t = time.monotonic() + BOUND
    while time.monotonic() < t:
        if pred():
            return
        time.sleep(0.05)
    sys.exit(f"no {what} within {BOUND} s")

def wait_ready(p):
    msgs = []
    s.settimeout(BOUND)
    while not any("READY=1" in m for m in msgs):
        if p.poll() is not None:
            sys.exit(f"the daemon exited {p.returncode} before READY=1: {msgs}")
        try:
            msgs.append(s.recv(4096).decode())
        except socket.timeout:
            sys.exit(f"no READY=1 within {BOUND} s: {msgs}")
    return msgs

def unmount(p):
    subprocess.run(["umount", mnt], check=True)
    return p.wait(BOUND)

# pause
fifo = os.path.join(case, "creds.fifo")
os.mkfifo(fifo, 0o600)
p = start(f"listeners=SASL_PLAINTEXT://127.0.0.1:0,kafka_sasl_credentials={fifo}", "pause.log")
def blocked_on_fifo():
    """A thread of the daemon (the child of timeout) waits in the FIFO's open."""
    if p.poll() is not None:
        sys.exit(f"the daemon exited {p.returncode} before opening the credentials")
    try:
        kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
        for kid in kids:
            for tid in os.listdir(f"/proc/{kid}/task"):
                if open(f"/proc/{kid}/task/{tid}/wchan").read() == "wait_for_partner":
                    return True
    except FileNotFoundError:
        pass
    return False
until(blocked_on_fifo, "open of the credentials FIFO")
msgs = queued()
print("pause: mounted=%d ready=%d status=%d" % (in_mount_table(), any("READY=1" in m for m in msgs),
      any(m.startswith("STATUS=opening the data directory") for m in msgs)))
os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))   # lets the open return
rc = p.wait(BOUND)
msgs += queued()
print("pause: exit=%d ready=%d stopping=%d mounted=%d" % (rc, any("READY=1" in m for m in msgs),
      any("STOPPING=1" in m for m in msgs), in_mount_table()))

# ready
p = start("listeners=PLAINTEXT://127.0.0.1:0", "ready.log")
msgs = wait_ready(p)
log = open(os.path.join(case, "ready.log")).read()
port = re.search(r"kafka: listening on PLAINTEXT://127\.0\.0\.1:(\d+) ", log)
api = "no port"
if port:
    c = socket.create_connection(("127.0.0.1", int(port.group(1))), timeout=BOUND)
    c.sendall(struct.pack(">ihhih", 10, 18, 0, 7, 0))      # ApiVersions v0, corr 7, no client id
    n = struct.unpack(">i", c.recv(4, socket.MSG_WAITALL))[0]
    body = c.recv(n, socket.MSG_WAITALL)
    corr, err = struct.unpack(">ih", body[:6])
    api = f"corr={corr} error={err}"
    c.close()
mounted = os.stat(mnt).st_dev != os.stat(os.path.dirname(mnt)).st_dev
print(f"ready: port_logged={int(bool(port))} api_versions={api} mounted={int(mounted)} listing={os.listdir(mnt)}")
for i in range(130):
    os.mkdir(os.path.join(mnt, "t%03d" % i))
print("ready: exit=%d" % unmount(p))
queued()

# opening
p = start("ro", "opening.log")
msgs = wait_ready(p)
for m in msgs:
    print("opening: " + m.replace("\n", "|"))
print("opening: exit=%d" % unmount(p))
PY
	sed 's/^/# /' "$T_CASE/ready.out"
	out=$(cat "$T_CASE/ready.out")
	assert_eq "pause: mounted=1 ready=0 status=1" "$(grep '^pause: mounted' <<< "$out")" \
		"at the listener's start: mounted, STATUS= sent, READY=1 not"
	assert_eq "pause: exit=1 ready=0 stopping=1 mounted=0" "$(grep '^pause: exit' <<< "$out")" \
		"a listener that cannot start: exit 1, never READY=1"
	assert_eq "ready: port_logged=1 api_versions=corr=7 error=0 mounted=1 listing=[]" \
		"$(grep '^ready: port' <<< "$out")" "the moment READY=1 arrives"
	assert_eq "ready: exit=0" "$(grep '^ready: exit' <<< "$out")" "exit after umount"
	# STATUS= every 64 topics while opening, each extending the start timeout, then READY=1.
	assert_eq "0 64 128" "$(grep -o '^opening: EXTEND_TIMEOUT_USEC=[0-9]*|STATUS=opening the data directory: [0-9]* of 13[0-9] topics$' <<< "$out" |
		sed 's/.*: \([0-9]*\) of .*/\1/' | xargs)" "progress lines while opening 130 topics"
	assert_match 'opening: READY=1\|STATUS=serving .*' "$(grep '^opening:' <<< "$out" | grep -v '^opening: exit' | tail -n 1)" \
		"READY=1 after the progress lines"
	assert_eq "opening: exit=0" "$(grep '^opening: exit' <<< "$out")" "exit after umount"
}

# Not in the foreground (mount -t topicfs, a .mount unit), the daemon logs through
# syslog(3), which the journal serves on /dev/log: each line must keep its priority.
# The machine has no syslog daemon, so a private mount namespace gets a /dev of its
# own (/dev/null, /dev/fuse, ... bound from the real one) whose /dev/log is a
# datagram socket this test reads. The daemon, the mount and the unmount all live in
# that namespace.
c_background_syslog() {
	need unshare
	local log=$T_CASE/syslog.txt out recv
	dgram_log "$T_CASE/log.sock" "$log" "$T_CASE/syslog.stop"
	recv=$!
	t_on_exit "touch '$T_CASE/syslog.stop'"
	t_on_exit "[ -s '$T_CASE/daemon.pid' ] && kill \$(cat '$T_CASE/daemon.pid')"
	mkdir "$T_CASE/hostdev"
	out=$(unshare -m --propagation private sh -ec '
		case=$1 topicfs=$2 data=$3 mnt=$4
		mount --bind /dev "$case/hostdev"
		mount -t tmpfs -o mode=755 tmpfs /dev
		for n in null zero full random urandom fuse; do
			touch "/dev/$n"
			mount --bind "$case/hostdev/$n" "/dev/$n"
		done
		touch /dev/log
		mount --bind "$case/log.sock" /dev/log
		"$topicfs" -o auto_unmount "$data" "$mnt"
		pgrep -f -x "$topicfs -o auto_unmount $data $mnt" > "$case/daemon.pid"
		mkdir "$mnt/t"
		printf garbage > "$mnt/t/0/.batches"
		umount "$mnt"
		for i in $(seq 300); do kill -0 "$(cat "$case/daemon.pid")" 2>/dev/null || exit 0; sleep 0.1; done
		echo "the daemon did not exit after umount"
	' _ "$T_CASE" "$TOPICFS" "$DATA" "$MNT" 2>&1)
	printf '%s\n' "$out" | sed 's/^/# ns: /'
	assert_eq "" "$(grep -v -e ' info ' -e '^ *$' <<< "$out" || true)" "output of the namespace's commands"
	: > "$T_CASE/daemon.pid"
	for i in $(seq 100); do grep -q 'fs: unmounted' "$log" 2>/dev/null && break; sleep 0.1; done
	sed 's/^/# syslog: /' "$log"
	# LOG_USER (8) + LOG_INFO (6), + LOG_WARNING (4)
	assert_ok grep -Eq '^<14>.* topicfs(\[[0-9]+\])?: engine: created topic t ' "$log"
	assert_ok grep -Eq '^<12>.* topicfs(\[[0-9]+\])?: fs: t/0/\.batches: .* cut short' "$log"
	assert_ok grep -Eq '^<14>.* topicfs(\[[0-9]+\])?: fs: unmounted ' "$log"
	assert_eq "" "$(grep -v '^<1[0-5]>' "$log" || true)" "syslog lines without a priority"
	touch "$T_CASE/syslog.stop"
	wait "$recv"
}

t_test verify_units c_verify_units
t_test service_commands_run c_service_commands_run
t_test notify_socket_missing c_notify_socket_missing
t_test journal_priorities c_journal_priorities
t_test readiness c_readiness
t_test background_syslog c_background_syslog
t_done
