#!/usr/bin/env bash
# Device runs from a committed tree, so that files other people are editing in this checkout do not
# reach the GPU machine's build.
#   scripts/device_snapshot.sh pack            here: HEAD -> .device-snap/tree.tar.gz (git-ignored;
#                                              name .device-snap in the device run's carry)
#   scripts/device_snapshot.sh run CMD ARGS... on the GPU machine: unpacks it into /root/tz (kept
#                                              between calls on a warm machine, so build-gpu/ there is
#                                              reused), links .debs and benchmarks/out from the copy of
#                                              the working tree, then runs scripts/device.sh CMD ARGS...
#                                              there (OUT stays the run's output folder)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    mkdir -p .device-snap
    git archive --format=tar.gz -o .device-snap/tree.tar.gz HEAD
    git rev-parse HEAD > .device-snap/commit
    echo "device_snapshot: packed $(cat .device-snap/commit) ($(du -h .device-snap/tree.tar.gz | cut -f1))" ;;
  run)
    shift
    tree=/root/tz
    mkdir -p "$tree"
    tar xzf .device-snap/tree.tar.gz -C "$tree"
    ln -sfn "$PWD/.debs" "$tree/.debs"
    [[ -d benchmarks/out ]] && { mkdir -p "$tree/benchmarks"; ln -sfn "$PWD/benchmarks/out" "$tree/benchmarks/out"; }
    echo "device_snapshot: running $(cat .device-snap/commit) in $tree"
    cd "$tree"
    exec scripts/device.sh "$@" ;;
  *) echo "usage: device_snapshot.sh pack | run CMD ARGS..."; exit 2 ;;
esac
