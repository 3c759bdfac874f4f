#!/bin/bash
# tests/integration/run.sh - run every integration test file (or those named) and sum up.
#
#   BUILD_DIR=/tmp/build-it tests/integration/run.sh              # all
#   BUILD_DIR=/tmp/build-it tests/integration/run.sh basic errno  # test_basic.sh, test_errno.sh
#
# Needs root (FUSE and tmpfs mounts). Each file runs alone under a 15-minute timeout;
# see lib.sh for the environment variables (T_OPTS, T_KEEP, T_VERBOSE, T_ONLY, ...).
# The last line is always "integration: N passed, M failed, K skipped"; the exit status
# is non-zero when M > 0.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export BUILD_DIR=${BUILD_DIR:-$(cd "$here/../.." && pwd)/build}

# Cheap areas first, the long-running ones (stress, full disk, concurrency) last.
order="basic errno keynames bulk commit producer rename history xattr tools scratch access groups_fs mount_helper systemd
	kafka kafka_admin kafkajs kafka_groups faults corrupt enospc fio concurrency scale"
files=()
if [ $# -gt 0 ]; then
	for n; do n=${n#test_}; files+=("$here/test_${n%.sh}.sh"); done
else
	for n in $order; do [ -f "$here/test_$n.sh" ] && files+=("$here/test_$n.sh"); done
	for f in "$here"/test_*.sh; do       # any file not in the list above
		case " $(echo $order) " in *" $(basename "$f" .sh | sed 's/^test_//') "*) ;; *) files+=("$f") ;; esac
	done
fi

pass=0 fail=0 skip=0
for f in "${files[@]}"; do
	name=$(basename "$f" .sh)
	echo "# --- $name"
	if [ ! -f "$f" ]; then
		echo "not ok - $name: no such test file"; fail=$((fail + 1)); continue
	fi
	out=$(mktemp)
	t0=$SECONDS
	timeout --signal=TERM --kill-after=30 "${T_FILE_TIMEOUT:-900}" bash "$f" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	p=$(grep -c '^ok - ' "$out")
	m=$(grep -c '^not ok - ' "$out")
	s=$(grep -c '^# skip ' "$out")
	if [ "$rc" != 0 ] && [ "$m" = 0 ]; then
		echo "not ok - $name: exited with status $rc (124 = timed out) without a failing case"
		m=1
	fi
	pass=$((pass + p)) fail=$((fail + m)) skip=$((skip + s))
	echo "# time $name: $((SECONDS - t0)) s"
	rm -f "$out"
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
