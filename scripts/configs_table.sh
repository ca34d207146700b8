#!/usr/bin/env bash
# Regenerates docs/configs.md's table "What estimate --suggest picks": for each host RAM x model, the
# layout `tierzero estimate --suggest` chooses, its predicted step and its peaks, with the command.
# Usage: scripts/configs_table.sh [TIERZERO] [NVME_READ_GBPS] [NVME_WRITE_GBPS]
#   (defaults: build/tools/tierzero, the reference GPU box's disk: 2.0 and 3.0 GB/s)
set -euo pipefail
tz=${1:-build/tools/tierzero}
read_gbps=${2:-2.0}
write_gbps=${3:-3.0}
base=benchmarks/configs/zero3_14b_compact_64gb.json
echo "| host RAM | model | layout \`estimate --suggest\` picks | records in memory | step (s) | host peak | NVMe | GPU peak |"
echo "|---|---|---|---|---|---|---|---|"
commands=()
for host in 32 64 128 256; do
  for model in 7b 14b 32b; do
    cmd="$tz estimate --model benchmarks/models/qwen2.5_$model.json --config $base --suggest"
    cmd+=" --gpu-memory 24GB --host-memory ${host}GiB --nvme-space 1TB --nvme-read $read_gbps --nvme-write $write_gbps"
    out=$($cmd 2>&1 || true)
    layout=$(sed -n 's/^# suggested (\*): //p' <<<"$out" | sed 's/; --write-config.*//')
    records=$(grep -o '[0-9]* of [0-9]* records in memory' <<<"$layout" || echo "-")
    layout=$(sed 's/; [0-9]* of [0-9]* records in memory//' <<<"$layout")
    step=$(sed -n 's/^# predicted step: \([0-9.]*\) s.*/\1/p' <<<"$out")
    peak() { awk -v n="$1" '$1 == n && NF >= 4 && $3 ~ /B$/ {print $2 " " $3; exit}' <<<"$out"; }
    if grep -q '^# Result: OK' <<<"$out"; then
      echo "| ${host} GiB | Qwen2.5-${model^^} | ${layout} | ${records} | ${step} | $(peak host) | $(peak nvme) | $(peak gpu) |"
    else
      echo "| ${host} GiB | Qwen2.5-${model^^} | nothing fits (the least over: ${layout}) | - | - | $(peak host) | $(peak nvme) | $(peak gpu) |"
    fi
    commands+=("$cmd")
  done
done
echo
echo "Each row's command (run from the repository root):"
echo
echo '```'
printf '%s\n' "${commands[@]}"
echo '```'
