#!/bin/bash
# tests/model/run.sh - the model-based test (model_test.py) as CI runs it: a fixed seed,
# a bounded number of operations, through a real mount of $BUILD_DIR/topicfs.
#
#   BUILD_DIR=$PWD/build-asan tests/model/run.sh              # the CI run
#   BUILD_DIR=$PWD/build-asan tests/model/run.sh --seed 7     # any model_test.py option
#   M_SEEDS=30 BUILD_DIR=... tests/model/run.sh --ops 400     # 30 random seeds
#
# Needs root (FUSE). The last line is "model: N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
export BUILD_DIR=${BUILD_DIR:-$(cd "$here/../.." && pwd)/build}
py=/usr/bin/python3

if [ -z "${M_SEEDS:-}" ]; then
	# CI: seed 1, 4 processes x 4000 operations in 10 phases (about a minute under
	# ASan on 2 busy cores).
	set -- --seed 1 --ops 4000 --procs 4 --phases 10 "$@"
	exec timeout --kill-after=30 900 "$py" "$here/model_test.py" "$@"
fi
pass=0 fail=0
for _ in $(seq "$M_SEEDS"); do
	out=$(timeout --kill-after=30 900 "$py" "$here/model_test.py" "$@" 2>&1)
	printf '%s\n' "$out" | sed '$d'
	case $(printf '%s\n' "$out" | tail -n 1) in
	"model: 1 passed, 0 failed") pass=$((pass + 1)) ;;
	*) fail=$((fail + 1)) ;;
	esac
done
echo "model: $pass passed, $fail failed"
[ "$fail" = 0 ]
