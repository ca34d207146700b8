#!/usr/bin/env bash
# tierzero train vs DeepSpeed (0.19.8) on the same Hugging Face model directory, ds_config file and
# token file, one process, ZeRO-3: on the GPU / + optimizer on the CPU / + parameters on the CPU
# (zero3_nvme_optimizer: the optimizer state on NVMe, DeepSpeed's ZeRO-Infinity, parameters on the CPU;
# zero3_nvme_all: the parameters on NVMe too, max_in_cpu 0; zero3_lean_offload: DeepSpeed's lean mode,
# bf16.bf16_master_weights_and_grads + bf16_optimizer_states with the optimizer and the parameters on
# the CPU, which tierzero runs as its compact layout from the file's tierzero section).
#
#   benchmarks/train_vs_deepspeed.sh [--shape 1.35b|3b|tiny|qwen2.5-7b|FILE] [--steps N] [--warmup W] [--out DIR]
#       [--configs "zero3 zero3_offload_optimizer zero3_offload_all zero3_lean_offload"] [--engines "tierzero deepspeed"]
#       [--timeout S] [--micro M] [--accum A] [--seq S] [--breakdown] [--dry-run]
#
# On the GPU box:   TIERZERO_DEVICE_TARGETS="tierzero tierzero-torch" scripts/device.sh benchmarks/train_vs_deepspeed.sh
# On a CPU machine: benchmarks/train_vs_deepspeed.sh --dry-run   (tiny ~7M model, seq 128, both engines on the CPU)
#
# Steps: (a) the shape (benchmarks/models/llama_SHAPE.json, else SHAPE with '-' -> '_', e.g. qwen2.5-7b ->
# qwen2.5_7b.json, else SHAPE as a path) -> a random-init LlamaForCausalLM / Qwen2ForCausalLM (the
# shape's model_type) saved in bf16 (OUT/model, reused when present); (b) random token ids, seed 1234 ->
# OUT/tokens.u16 (TZTOKENS; uint32 ids when the vocab exceeds 65536), enough for every step; (c) per config, benchmarks/configs/CONFIG.json (micro-batch 4 x accumulation 4 x seq
# 2048 = 32k tokens/step, bf16; --micro/--accum/--seq override) written to OUT/CONFIG.ds_config.json, which
# both engines read; each run bounded by `timeout`, its peak RSS taken by getrusage of the child;
# (d) the table (train_bench_util.py table) and OUT/summary.json; its `state` column is the master and
# moments each run really kept: DeepSpeed's as read back from its engine (train_deepspeed.py), tierzero's
# from the config, marked `IGNORED` when tierzero's log warned that it ignored a precision key of it
# (bf16.bf16_master_weights_and_grads, tierzero.master_weights, ...), whose warnings follow the table.
# --breakdown: tierzero's runs read a copy of the config with wall_clock_breakdown true
# (OUT/CONFIG.tierzero.ds_config.json; its step lines then carry where the time went, at the cost of
# a stream sync between each forward and backward), and a second table gives the median forward,
# backward, gradient D2H, CPU optimizer, weight H2D and GPU-idle seconds, GPU busy % and the step over
# the slowest resource.
# Environment: TIERZERO_BIN (default build-gpu/tools/tierzero, else build/tools/tierzero), PYTHON (python3),
# TIERZERO_REV (the commit the header names; default git rev-parse, stale where a copy of the tree lags).
set -euo pipefail
cd "$(dirname "$0")/.."

shape="" steps="" warmup="" timeout_s=300 out="" dry_run=0 micro="" accum="" seq="" breakdown=0
configs="zero3 zero3_offload_optimizer zero3_offload_all zero3_lean_offload"
engines="tierzero deepspeed"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shape) shape=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --accum) accum=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --breakdown) breakdown=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "train_vs_deepspeed: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $dry_run == 1 ]]; then
  shape=${shape:-tiny} steps=${steps:-3} warmup=${warmup:-1} micro=${micro:-2} accum=${accum:-2} seq=${seq:-128}
  export CUDA_VISIBLE_DEVICES=""
fi
shape=${shape:-1.35b} steps=${steps:-6} warmup=${warmup:-2}
py=${PYTHON:-python3}
# DeepSpeed 0.19.8's op builder cannot parse the "9.0a" arch torch reports on Hopper ("invalid
# literal for int() ... '0a'", seen building FusedAdam on the H200): name the plain arch. Forced, not
# defaulted: with a default the build still failed on the GPU box (an arch list already set there).
export TORCH_CUDA_ARCH_LIST=9.0
tz=${TIERZERO_BIN:-}
if [[ -z $tz ]]; then
  if [[ -x build-gpu/tools/tierzero ]]; then tz=build-gpu/tools/tierzero; else tz=build/tools/tierzero; fi
fi
util=benchmarks/train_bench_util.py
shape_file=$("$py" "$util" shape "$shape") || { echo "train_vs_deepspeed: no model shape for --shape $shape" >&2; exit 2; }
shape=$(basename "$shape" .json)
[[ -x $tz ]] || { echo "train_vs_deepspeed: $tz not built (TIERZERO_BIN=...)" >&2; exit 2; }
"$py" -c 'import torch, transformers' 2>/dev/null || { echo "train_vs_deepspeed: $py lacks torch/transformers (PYTHON=...)" >&2; exit 2; }
if [[ $engines == *deepspeed* ]] && ! "$py" -c 'import deepspeed' >/dev/null 2>&1; then
  echo "train_vs_deepspeed: $py cannot import deepspeed (scripts/device.sh installs it)" >&2; exit 2
fi
out=${out:-benchmarks/out/train_vs_deepspeed_${shape}_$(date +%Y%m%d_%H%M%S)}
mkdir -p "$out"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# (a) the model, (b) the tokens
if [[ ! -f $out/model/config.json ]]; then
  log "writing the random-init model ($shape_file) to $out/model"
  "$py" "$util" model --shape "$shape_file" --out "$out/model" >&2
fi
vocab=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$shape_file")
max_tokens=0
for config in $configs; do
  [[ -f benchmarks/configs/$config.json ]] || { echo "train_vs_deepspeed: no benchmarks/configs/$config.json" >&2; exit 2; }
  "$py" "$util" config --base "benchmarks/configs/$config.json" --out "$out/$config.ds_config.json" \
    ${micro:+--micro $micro} ${accum:+--accum $accum} ${seq:+--seq $seq}
  need=$("$py" -c 'import json,sys; c=json.load(open(sys.argv[1])); n=int(sys.argv[2])
print(c["train_micro_batch_size_per_gpu"]*c["gradient_accumulation_steps"]*c["tierzero"]["data"]["seq_len"]*(n+1)+1)' \
    "$out/$config.ds_config.json" "$steps")
  (( need > max_tokens )) && max_tokens=$need
done
"$py" "$util" tokens --out "$out/tokens.u16" --tokens "$max_tokens" --vocab "$vocab" --seed 1234 >&2
parameters=$("$py" "$util" count --model "$out/model")
machine="$(hostname), $(nproc) cores, $("$py" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>/dev/null | tail -1), tierzero ${TIERZERO_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}, DeepSpeed $("$py" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1 || echo '-'), torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -1)"
# plan.json: what the table covers — this call's configs and engines added to an earlier call's in
# the same OUT (so configs run in separate calls, e.g. one per device command, share one table).
"$py" -c 'import json,os,sys; a=sys.argv; old=json.load(open(a[8])) if os.path.exists(a[8]) else {}
merge=lambda k, new: old.get(k, []) + [x for x in new if x not in old.get(k, [])]
json.dump({"shape": a[1], "parameters": int(a[2]), "steps": int(a[3]), "configs": merge("configs", a[4].split()),
  "engines": merge("engines", a[5].split()), "machine": a[6], "tierzero": a[7]}, open(a[8], "w"), indent=2)' \
  "$shape" "$parameters" "$steps" "$configs" "$engines" "$machine" "$tz" "$out/plan.json"

# (c) the runs; DeepSpeed's Adam ops are JIT-built first, outside the runs' timeouts
if [[ $engines == *deepspeed* ]]; then
  log "building the DeepSpeed ops these configs use (once; log $out/deepspeed_ops.log)"
  op_configs=()
  for config in $configs; do op_configs+=("$out/$config.ds_config.json"); done
  timeout 900 "$py" benchmarks/train_deepspeed.py --build-ops --ds-config "${op_configs[@]}" > "$out/deepspeed_ops.log" 2>&1 \
    || { echo "train_vs_deepspeed: DeepSpeed's ops did not build; see $out/deepspeed_ops.log" >&2; tail -5 "$out/deepspeed_ops.log" >&2; }
fi
for config in $configs; do
  cfg=$out/$config.ds_config.json
  # The config's NVMe directories (offload_optimizer / offload_param nvme_path, a string or a list):
  # made before each run and emptied after it, so each engine starts on the same free disk.
  nvme_dirs=$("$py" -c 'import json,sys; z=json.load(open(sys.argv[1])).get("zero_optimization", {})
for k in ("offload_optimizer", "offload_param"):
    p = z.get(k, {}).get("nvme_path") if z.get(k, {}).get("device") == "nvme" else None
    print(*([p] if isinstance(p, str) else p or []))' "$cfg")
  for engine in $engines; do
    name=$config.$engine
    for d in $nvme_dirs; do mkdir -p "$d"; done
    log "$name: up to ${timeout_s}s, log $out/$name.log"
    if [[ $engine == tierzero ]]; then
      tz_cfg=$cfg
      if [[ $breakdown == 1 ]]; then
        tz_cfg=$out/$config.tierzero.ds_config.json
        "$py" "$util" config --base "$cfg" --out "$tz_cfg" --set wall_clock_breakdown=true
      fi
      TIERZERO_NO_PROGRESS=1 "$py" "$util" measure --json "$out/$name.measure.json" --log "$out/$name.log" \
        --timeout "$timeout_s" -- "$tz" train --model "$out/model" --config "$tz_cfg" --data "$out/tokens.u16" \
        --steps "$steps" || true
      "$py" "$util" tierzero-steps --log "$out/$name.log" --json "$out/$name.steps.json"
    else
      "$py" "$util" measure --json "$out/$name.measure.json" --log "$out/$name.log" --timeout "$timeout_s" -- \
        "$py" benchmarks/train_deepspeed.py --model "$out/model" --ds-config "$cfg" --tokens "$out/tokens.u16" \
        --steps "$steps" --json "$out/$name.steps.json" || true
    fi
    grep -E '^(done:|deepspeed step)' "$out/$name.log" | tail -1 >&2 || tail -3 "$out/$name.log" >&2
    for d in $nvme_dirs; do rm -rf "${d:?}"/*; done
  done
done

# (d) the table
"$py" "$util" table --dir "$out" --shape "$shape_file" --warmup "$warmup"
