#!/bin/sh
# tests/check_includes.sh - the include rules a build alone does not enforce
# (docs/engine.md §1, §10):
#   1. engine/log/plog_internal.h, the partition log's private state, is included
#      only by files of engine/log/: the cleaner and retention reach a partition
#      through engine/log/plog_cleaning.h, everyone else through partition_log.h;
#   2. engine/ and io/ include no FUSE header; io/ includes no engine/ header.
# Prints each offending line and exits 1; exits 0 when every rule holds.
# usage: tests/check_includes.sh [SOURCE_DIR]   (default: the repository root)
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
fail=0

# check RULE DIRS PATTERN [EXCLUDE]: the lines of DIRS' sources matching PATTERN,
# less those whose "path:" starts with EXCLUDE.
check() {
	found=$(grep -rnE "$3" --include='*.c' --include='*.h' $2 2>/dev/null |
	        grep -v "^${4:-//}")
	if [ -n "$found" ]; then
		printf '%s\n' "$found" | sed "s|^|check_includes: $1: |"
		fail=1
	fi
}

inc='#[[:space:]]*include[[:space:]]*'
check "plog_internal.h outside engine/log/ (use engine/log/plog_cleaning.h)" \
	"engine fs kafka io mount-helpers tests bench" "${inc}\"engine/log/plog_internal\.h\"" \
	"engine/log/"
check "a FUSE header below fs/" "engine io" "${inc}[<\"]fuse"
check "an engine header in io/" "io" "${inc}\"engine/"
[ "$fail" -eq 0 ] && echo "check_includes: every rule holds"
exit "$fail"
