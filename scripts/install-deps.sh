#!/bin/sh
# Installs the Debian 12 packages that topicfs needs to build, run and test.
# Usage: scripts/install-deps.sh [--tests]   (as root; a no-op when all are present)
set -eu
pkgs="build-essential cmake pkg-config libfuse3-dev fuse3 liburing-dev libzstd-dev
      libxxhash-dev libjson-c-dev libsystemd-dev libisal-dev liblz4-dev libsnappy-dev
      attr libssl-dev"
if [ "${1:-}" = "--tests" ]; then
	pkgs="$pkgs libcmocka-dev python3 python3-kafka python3-zstandard python3-snappy
	      python3-lz4 fio stress-ng dbench vim-tiny sudo procps util-linux coreutils
	      findutils rsync debhelper lintian man-db clang libclang-rt-14-dev
	      kcat python3-confluent-kafka nodejs"
	# Debian's npm, unless a nodejs that carries its own (NodeSource's) is there
	command -v npm > /dev/null 2>&1 || pkgs="$pkgs npm"
fi
if [ "${1:-}" = "--bench" ]; then
	pkgs="$pkgs librocksdb-dev time zlib1g-dev librdkafka-dev linux-perf"
fi
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# KafkaJS for tests/integration/test_kafkajs.sh, exactly as its lock file names it
kafkajs() {
	[ "${1:-}" = "--tests" ] || return 0
	dir=$(cd "$(dirname "$0")/../tests/kafkajs" && pwd)
	[ -f "$dir/node_modules/kafkajs/package.json" ] && return 0
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}
if [ -z "$missing" ]; then
	kafkajs "${1:-}"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: need root to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
kafkajs "${1:-}"
