#!/bin/sh
# Installs the Debian 12 packages that topicfs needs to build, run and test.
# Usage: scripts/install-deps.sh [--tests]   (as root; a no-op when all are present)
set -eu
pkgs="build-essential cmake pkg-config libfuse3-dev fuse3 liburing-dev libzstd-dev
      libxxhash-dev libjson-c-dev libsystemd-dev libisal-dev liblz4-dev libsnappy-dev
      attr"
if [ "${1:-}" = "--tests" ]; then
	pkgs="$pkgs libcmocka-dev python3 python3-kafka python3-zstandard python3-snappy
	      python3-lz4 fio stress-ng dbench vim-tiny sudo procps util-linux coreutils
	      findutils rsync debhelper lintian man-db clang libclang-rt-14-dev
	      kcat python3-confluent-kafka"
fi
if [ "${1:-}" = "--bench" ]; then
	pkgs="$pkgs librocksdb-dev time zlib1g-dev"
fi
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: need root to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
