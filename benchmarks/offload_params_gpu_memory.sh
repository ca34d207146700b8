#!/usr/bin/env bash
# Peak GPU memory of ZeRO-3 training with the optimizer on the CPU, without and with the parameter
# shards offloaded too (configs/zero3_offload_cpu.json vs configs/zero3_offload_all_cpu.json), on a
# randomly initialised ~150M-parameter Llama (benchmarks/models/llama_150m.json), same data and steps.
#   benchmarks/offload_params_gpu_memory.sh [STEPS [MODEL_CONFIG]]   (TIERZERO_BUILD: the build dir, default build)
# Prints a table: peak GPU memory, pinned host memory, tok/s, final loss per config; both runs must
# reach the same loss (the placement of the shards changes no arithmetic).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
tz=${TIERZERO_BUILD:-build}/tools/tierzero
model=${2:-benchmarks/models/llama_150m.json}
echo "# offload_params_gpu_memory: ZeRO-3, optimizer on the CPU, $model, $steps steps, configs/data/tiny_corpus.u16"
printf '# %-24s %12s %12s %10s %10s\n' config peak_gpu pinned tok/s loss
losses=()
for config in zero3_offload_cpu zero3_offload_all_cpu; do
  log=$(mktemp)
  if ! TIERZERO_NO_PROGRESS=1 "$tz" train --config "configs/$config.json" --model-config "$model" \
      --data configs/data/tiny_corpus.u16 --steps "$steps" > "$log" 2>&1; then
    echo "# $config: train failed (exit $?):"; tail -5 "$log"; rm -f "$log"; exit 1
  fi
  line=$(grep '^done:' "$log"); rm -f "$log"
  peak=$(sed -E 's/.*peak gpu ([^|]*) \|.*/\1/' <<<"$line")
  pinned=$(sed -E 's/.*\| pinned ([0-9.]+ [A-Za-z]+).*/\1/' <<<"$line")
  toks=$(sed -E 's/.*\| ([0-9]+) tok\/s.*/\1/' <<<"$line")
  loss=$(sed -E 's/.*-> ([0-9.]+).*/\1/' <<<"$line")
  losses+=("$loss")
  printf '  %-24s %12s %12s %10s %10s\n' "$config" "$peak" "$pinned" "$toks" "$loss"
done
if [[ "${losses[0]}" == "${losses[1]}" ]]; then echo "# same final loss: OK"; else echo "# final losses differ: FAIL"; exit 1; fi
