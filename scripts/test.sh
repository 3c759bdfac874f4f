#!/bin/bash
# Installs what is missing, builds topicfs three ways and runs every test:
#   1. unit tests (cmocka, per module) under AddressSanitizer + UndefinedBehaviorSanitizer,
#      each on both I/O backends (io_uring and pread/pwrite);
#   2. the threaded engine tests under ThreadSanitizer;
#   3. interoperability with kafka-python (an independent Kafka decoder);
#   4. integration tests that mount topicfs and drive it with shell tools;
#   5. the model-based test: random operations from several processes, checked
#      against a model of the keys and of the record history (tests/model/);
#   6. each libFuzzer harness for a bounded time (tests/fuzz/run.sh).
# Usage (as root on Debian 12): scripts/test.sh        Ends with "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

scripts/install-deps.sh --tests || { echo "test: cannot install dependencies" >&2; exit 1; }

passed=0 failed=0 skipped=0
declare -a failures=()
step() {   # step NAME COMMAND... : runs it, counts it
	local name=$1 t0=$SECONDS; shift
	echo "=== $name"
	if "$@"; then
		passed=$((passed + 1))
		echo "=== passed: $name ($((SECONDS - t0)) s)"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "=== FAILED: $name ($((SECONDS - t0)) s)"
	fi
}

build() {  # build DIR CMAKE_ARGS...
	local dir=$1; shift
	cmake -S "$root" -B "$dir" -DTFS_WERROR=ON "$@" >/dev/null && make -C "$dir" -j"$jobs" --no-print-directory
}

step "build (asan+ubsan)" build "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DTFS_SANITIZE=address,undefined
step "build (tsan)" build "$root/build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFS_SANITIZE=thread
step "build (release)" build "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "unit tests (asan+ubsan, uring and sync)" \
	ctest --test-dir "$root/build-asan" --output-on-failure -j"$jobs"

# TSan: the threaded parts (group commit and its key-directory shards, transactions,
# readers during appends, the engine's threads, the cleaner pool).
tsan_tests() {
	local t rc=0
	for t in engine_test_partition_log engine_test_engine engine_test_cleaner engine_test_cleaner_manager \
		engine_test_cleaner_dryrun engine_test_cleaner_crash fs_test_scratch engine_test_lag \
		engine_test_plog_stress engine_test_plog_txn engine_test_cleaner_txn engine_test_plog_produce; do
		[ -x "$root/build-tsan/$t" ] || continue
		TSAN_OPTIONS=halt_on_error=1 TFS_IO=sync "$root/build-tsan/$t" || rc=1
	done
	return $rc
}
step "threaded tests (tsan)" tsan_tests
# The daemon itself under TSan: many writers, readers and listers on one partition
# (the FUSE worker threads, group commit, the notifier, the cleaner pool at once).
step "concurrent mount (tsan)" env BUILD_DIR="$root/build-tsan" T_CONC_SECS=10 \
	TSAN_OPTIONS=halt_on_error=1 tests/integration/run.sh concurrency

if [ -x tests/interop/run_interop.sh ]; then
	step "interop with kafka-python" tests/interop/run_interop.sh "$root/build"
fi
if [ -x tests/integration/run.sh ]; then
	step "integration (mounts)" env BUILD_DIR="$root/build-asan" tests/integration/run.sh
fi
# The model-based test: 4 processes x 4000 random operations through a mount, seed 1,
# every class (about two minutes under ASan); other seeds run on demand (tests/model/).
if [ -x tests/model/run.sh ]; then
	step "model-based test (mounts)" env BUILD_DIR="$root/build-asan" tests/model/run.sh
fi
# Kafka clients (kafka-python, kcat, raw idempotent frames) beside shell writers on one
# topic, every record counted against what its writer was told (about 10 s under ASan).
if [ -x tests/model/kafka_mix_test.py ]; then
	step "kafka clients beside shell writers (mount)" env BUILD_DIR="$root/build-asan" \
		timeout --kill-after=30 300 /usr/bin/python3 tests/model/kafka_mix_test.py --seed 1
fi
if [ -x tests/topicctl/test_topicctl.sh ]; then
	step "topicctl" env BUILD_DIR="$root/build-asan" tests/topicctl/test_topicctl.sh
fi
# libFuzzer harnesses (clang), each for FUZZ_SECONDS from the committed corpus.
if [ -x tests/fuzz/run.sh ]; then
	step "fuzzing (clang, asan+ubsan)" tests/fuzz/run.sh
fi

echo
echo "test steps: $passed passed, $failed failed"
for f in "${failures[@]}"; do echo "  failed: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
