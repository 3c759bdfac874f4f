#!/bin/bash
# Builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c) with clang under
# AddressSanitizer + UndefinedBehaviorSanitizer and runs each for a bounded time,
# starting from a scratch copy of its committed corpus (tests/fuzz/corpus/NAME/)
# plus its regression inputs (tests/fuzz/regress/NAME/), so the tree is never
# modified. Any crash, leak, sanitizer report, failed property, timeout or
# out-of-memory fails that harness; its input is kept under FUZZ_ARTIFACTS.
#
# Usage: tests/fuzz/run.sh              Ends with "fuzz: N passed, M failed".
# Environment:
#   FUZZ_SECONDS    seconds per harness (default 35)
#   FUZZ_PAR        harnesses run at once (default: nproc)
#   FUZZ_ONLY       space-separated harness names to run (default: all), e.g. "bulk opts"
#   FUZZ_BUILD_DIR  the clang build (default build-fuzz; configured here if needed)
#   FUZZ_ARTIFACTS  where crash inputs and logs go (default: a fresh temp dir,
#                   removed when every harness passed)
#   FUZZ_JOBS       make -j (default: nproc)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
seconds=${FUZZ_SECONDS:-35}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
artifacts=${FUZZ_ARTIFACTS:-$(mktemp -d /tmp/tfs-fuzz-artifacts.XXXXXX)}
mkdir -p "$artifacts"

# Largest input per harness: the line and batch streams and segment files need
# room; the text parsers do not (their inputs are short by nature).
max_len_of() {
	case $1 in
	segment|batches) echo 65536 ;;
	bulk|kafka) echo 16384 ;;
	*) echo 4096 ;;
	esac
}

names=()
for src in tests/fuzz/fuzz_*.c; do
	n=$(basename "$src" .c)
	n=${n#fuzz_}
	[ "$n" = main ] && continue
	if [ -n "${FUZZ_ONLY:-}" ] && ! [[ " $FUZZ_ONLY " == *" $n "* ]]; then
		continue
	fi
	names+=("$n")
done

targets=()
for n in "${names[@]}"; do targets+=("fuzz_$n"); done
echo "fuzz: building ${targets[*]} in $build"
if ! { CC=clang cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFS_FUZZ=ON \
		>"$artifacts/cmake.log" 2>&1 &&
	make -C "$build" -j"$jobs" --no-print-directory "${targets[@]}" >"$artifacts/build.log" 2>&1; }; then
	tail -n 30 "$artifacts/cmake.log" "$artifacts/build.log"
	echo "fuzz: build failed (logs in $artifacts)"
	echo "fuzz: 0 passed, ${#names[@]} failed"
	exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The harnesses' scratch data directories: a tmpfs when there is one (fsync is
# free there), removed at the end whatever the harnesses left behind.
scratch_base=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && scratch_base=/dev/shm
export TFS_FUZZ_TMP=$(mktemp -d "$scratch_base/tfs-fuzz-run.XXXXXX")
trap 'rm -rf "$TFS_FUZZ_TMP"' EXIT

# One harness: fuzzes a scratch copy of its corpus, then writes its verdict line
# to $artifacts/NAME.result ("ok ..." or "FAILED ...", then the report's lines).
run_one() {
	local n=$1 work log rc runs speed cov
	work=$(mktemp -d /tmp/tfs-fuzz-corpus.XXXXXX)
	[ -d "tests/fuzz/corpus/$n" ] && cp tests/fuzz/corpus/"$n"/* "$work"/ 2>/dev/null
	[ -d "tests/fuzz/regress/$n" ] && cp tests/fuzz/regress/"$n"/* "$work"/ 2>/dev/null
	log="$artifacts/$n.log"
	mkdir -p "$artifacts/$n"
	"$build/fuzz_$n" -max_total_time="$seconds" -max_len="$(max_len_of "$n")" -timeout=30 \
		-rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts/$n/" \
		"$work" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	if [ "$rc" -eq 0 ]; then
		echo "ok: ${runs:-?} runs, ${speed:-?} exec/s, ${cov:-cov: ?}" >"$artifacts/$n.result"
	else
		{
			echo "FAILED (exit $rc): log $log, inputs in $artifacts/$n/"
			grep -E 'ERROR: |SUMMARY: |fuzz: property failed|Test unit written' "$log" | head -n 8
		} >"$artifacts/$n.result"
	fi
	rm -rf "$work"
}

# The harnesses are single-threaded: run FUZZ_PAR of them at once (default: one
# per core), each still for its full time.
par=${FUZZ_PAR:-$jobs}
running=0
for n in "${names[@]}"; do
	if [ "$running" -ge "$par" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_one "$n" &
	running=$((running + 1))
done
wait

passed=0 failed=0
declare -a failures=()
for n in "${names[@]}"; do
	if [ -f "$artifacts/$n.result" ] && head -n 1 "$artifacts/$n.result" | grep -q '^ok:'; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$n")
		[ -f "$artifacts/$n.result" ] || echo "FAILED: no verdict" >"$artifacts/$n.result"
	fi
	sed "1s/^/fuzz_$n: /" "$artifacts/$n.result"
done

echo
for f in "${failures[@]}"; do echo "  failed: fuzz_$f"; done
if [ "$failed" -eq 0 ] && [ -z "${FUZZ_ARTIFACTS:-}" ]; then
	rm -rf "$artifacts"                     # nothing to look at
else
	echo "fuzz: logs and inputs in $artifacts"
fi
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
