#!/usr/bin/env bash
# Regenerates docs/configs.md's table "What estimate --suggest picks": for each host RAM x model, the
# layout `tierzero estimate --suggest` chooses, its predicted step and its peaks, with the commands.
# Run from the repository root.
# Usage: scripts/configs_table.sh [--check] [TIERZERO] [NVME_READ_GBPS] [NVME_WRITE_GBPS]
#   (defaults: build/tools/tierzero, the reference GPU box's disk: 2.0 and 3.0 GB/s). The commands are
#   printed as build/tools/tierzero whichever binary runs them. --check: exit 1 unless docs/configs.md
#   holds the table as printed now.
set -euo pipefail
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
tz=${1:-build/tools/tierzero}
read_gbps=${2:-2.0}
write_gbps=${3:-3.0}
base=benchmarks/configs/zero3_14b_compact_64gb.json

table() {
  echo "| host RAM | model | layout \`estimate --suggest\` picks | records in memory | step (s) | host peak | NVMe | GPU peak |"
  echo "|---|---|---|---|---|---|---|---|"
  local commands=() host model args out layout records step
  for host in 32 64 128 256; do
    for model in 7b 14b 32b; do
      args="estimate --model benchmarks/models/qwen2.5_$model.json --config $base --suggest --gpu-memory 24GB"
      args+=" --host-memory ${host}GiB --nvme-space 1TB --nvme-read $read_gbps --nvme-write $write_gbps"
      out=$($tz $args 2>&1 || true)
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
      commands+=("build/tools/tierzero $args")
    done
  done
  echo
  echo "Each row's command (run from the repository root):"
  echo
  echo '```'
  printf '%s\n' "${commands[@]}"
  echo '```'
}

text=$(table)
if ((check)); then
  doc=$(<docs/configs.md)
  if [[ $doc != *"$text"* ]]; then
    echo "docs/configs.md does not hold the table scripts/configs_table.sh prints now: rerun it and paste its output" >&2
    exit 1
  fi
  echo "docs/configs.md holds the table as printed now"
else
  echo "$text"
fi
