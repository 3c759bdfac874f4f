#!/bin/bash
# Installs what is missing, builds topicfs, and mounts a demo log:
#   data in ${TOPICFS_DATA:-/var/lib/topicfs/demo}, mounted at ${TOPICFS_MNT:-/mnt/topicfs},
#   with a Kafka listener on ${TOPICFS_KAFKA:-127.0.0.1:9092} (loopback only).
# Run as root on Debian 12. Unmount with: umount /mnt/topicfs
set -euo pipefail
cd "$(dirname "$0")/.."
data=${TOPICFS_DATA:-/var/lib/topicfs/demo}
mnt=${TOPICFS_MNT:-/mnt/topicfs}
kafka=${TOPICFS_KAFKA:-127.0.0.1:9092}

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
make -C build -j"$(nproc)" --no-print-directory topicfs >/dev/null

mkdir -p "$data" "$mnt"
if mountpoint -q "$mnt"; then
	umount "$mnt"
fi
# permission checks are on by default, for the Kafka listener's clients too
build/topicfs -o "allow_other,listeners=PLAINTEXT://$kafka" "$data" "$mnt"

cd "$mnt"
[ -d demo ] || mkdir demo
echo "hello from topicfs" > demo/0/greeting
printf 'alice\t{"plan":"pro"}\nbob\t{"plan":"free"}\n' > demo/0/.put
echo '{"plan":"team"}' > demo/0/alice
rm -f demo/0/bob

echo "== mounted $data at $mnt"
echo "== ls -l $mnt/demo/0"
ls -l demo/0
echo "== cat demo/0/alice"
cat demo/0/alice
echo "== every record still on disk: ls demo/0/.history"
ls demo/0/.history
echo "== getfattr -d -m - demo/0/alice"
getfattr -d -m - demo/0/alice 2>/dev/null || true
echo
echo "Try: echo v > $mnt/demo/0/KEY; cat $mnt/demo/0/KEY; ls $mnt/demo/0/.history"
echo "Kafka clients: kcat -b $kafka -C -t demo -e    (any local user can connect;"
echo "  each acts with its own permissions on the topics)"
echo "Unmount with: umount $mnt"
