#!/usr/bin/env bash
# On the GPU machine, after scripts/device.sh has built build-gpu/: the runs whose figures go into
# benchmarks/RESULTS.md, each writing a table (.txt) and JSON into OUTDIR.
#   scripts/device.sh scripts/device_suite.sh tests OUTDIR    every test, GPU-labelled ones included
#   scripts/device.sh scripts/device_suite.sh bench OUTDIR    bench adam, pcie, io (vs fio), tiers
#   scripts/device.sh scripts/device_suite.sh train OUTDIR    the default `tierzero train` on the GPU
set -uo pipefail
cd "$(dirname "$0")/.."
what=$1
out=$2
tz=build-gpu/tools/tierzero
export TIERZERO_NO_PROGRESS=1
mkdir -p "$out"
case "$what" in
  tests)
    ctest --test-dir build-gpu -j "$(nproc)" --timeout 300 2>&1 | tee "$out/ctest.txt" | grep -vE '^ +Start|Passed' ;;
  bench)
    run() { local name=$1; shift; echo "== $name: $*"; timeout 240 "$tz" "$@" --json "$out/$name.json" 2>&1 | tee "$out/$name.txt" | grep -vE '^#  |^# (host|timing|stream|peer|max_abs|note)'; }
    run adam_mixed bench adam --threads "$(nproc)" --steps 10
    run adam_fp32 bench adam --threads "$(nproc)" --steps 10 --no-sweep --grad-dtype fp32 --params16-dtype none
    run pcie bench pcie
    run io_qd32 bench io --path /tmp --size 4GiB --queue-depth 32 --vs-fio --repeat 3
    run io_qd32x4 bench io --path /tmp --size 4GiB --queue-depth 32 --threads 4 --vs-fio --repeat 3
    run tiers bench tiers --path /tmp ;;
  train)
    timeout 300 "$tz" train 2>&1 | tee "$out/train.txt" | tail -30 ;;
  *) echo "device_suite.sh: unknown suite '$what' (tests | bench | train)"; exit 2 ;;
esac
