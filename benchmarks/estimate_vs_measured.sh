#!/usr/bin/env bash
# tierzero estimate vs tierzero train on the same model shape and ds_config: predicted vs measured
# peak GPU (CUDA's peak-allocated counter, train's gpu-peak) and step time, with their ratios.
#
#   benchmarks/estimate_vs_measured.sh [--shape 1.35b|3b|150m|tiny] [--configs "zero3 zero3_offload_optimizer zero3_offload_all"]
#       [--steps N] [--warmup W] [--micro M] [--accum A] [--seq S] [--bench-json "F..."] [--out DIR]
#
# On the GPU box: TIERZERO_DEVICE_TARGETS="tierzero tierzero-torch" scripts/device.sh benchmarks/estimate_vs_measured.sh
# Targets (issue 13): step time within 25% (ratio 0.75-1.25), memory within 10% (0.90-1.10).
# Steps: benchmarks/train_bench_util.py makes the random-init model, the tokens and each config (as
# train_vs_deepspeed.sh does); bench pcie and bench adam run first unless --bench-json names files;
# then per config `tierzero estimate --json` and `tierzero train`; the table compares the plan with
# the median of the step lines after the warm-up steps. "implied_eff" is the --gpu-efficiency that
# would have predicted the measured step when the GPU is the bottleneck.
# Environment: TIERZERO_BIN (default build-gpu/tools/tierzero, else build/tools/tierzero), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."

shape=1.35b steps=6 warmup=2 micro="" accum="" seq="" out="" bench=""
configs="zero3 zero3_offload_optimizer zero3_offload_all"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shape) shape=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --accum) accum=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --bench-json) bench=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "estimate_vs_measured: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
py=${PYTHON:-python3}
tz=${TIERZERO_BIN:-}
if [[ -z $tz ]]; then
  if [[ -x build-gpu/tools/tierzero ]]; then tz=build-gpu/tools/tierzero; else tz=build/tools/tierzero; fi
fi
util=benchmarks/train_bench_util.py
shape_file=benchmarks/models/llama_$shape.json
[[ -f $shape_file ]] || { echo "estimate_vs_measured: no model shape $shape_file" >&2; exit 2; }
[[ -x $tz ]] || { echo "estimate_vs_measured: $tz not built (TIERZERO_BIN=...)" >&2; exit 2; }
out=${out:-benchmarks/out/estimate_vs_measured_${shape}_$(date +%Y%m%d_%H%M%S)}
mkdir -p "$out"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

if [[ -z $bench ]]; then
  log "measuring this machine: bench pcie, bench adam (JSON in $out)"
  "$tz" bench pcie --json "$out/bench_pcie.json" > "$out/bench_pcie.log" 2>&1 || true
  "$tz" bench adam --no-sweep --json "$out/bench_adam.json" > "$out/bench_adam.log" 2>&1 || true
  for f in "$out/bench_pcie.json" "$out/bench_adam.json"; do [[ -f $f ]] && bench="$bench $f"; done
fi
bench_flags=()
for f in $bench; do bench_flags+=(--bench-json "$f"); done

[[ -f $out/model/config.json ]] || "$py" "$util" model --shape "$shape_file" --out "$out/model" >&2
vocab=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$shape_file")
rows=()
for config in $configs; do
  cfg=$out/$config.ds_config.json
  "$py" "$util" config --base "benchmarks/configs/$config.json" --out "$cfg" \
    ${micro:+--micro $micro} ${accum:+--accum $accum} ${seq:+--seq $seq}
  need=$("$py" -c 'import json,sys; c=json.load(open(sys.argv[1])); n=int(sys.argv[2])
print(c["train_micro_batch_size_per_gpu"]*c["gradient_accumulation_steps"]*c["tierzero"]["data"]["seq_len"]*(n+1)+1)' "$cfg" "$steps")
  [[ -f $out/tokens.u16 && -f $out/tokens.$need ]] || { "$py" "$util" tokens --out "$out/tokens.u16" --tokens "$need" --vocab "$vocab" --seed 1234 >&2; touch "$out/tokens.$need"; }
  log "$config: estimate"
  "$tz" estimate --model-config "$out/model" --config "$cfg" "${bench_flags[@]}" --json "$out/$config.plan.json" \
    > "$out/$config.estimate.txt" || true
  log "$config: train ($steps steps, log $out/$config.train.log)"
  TIERZERO_NO_PROGRESS=1 "$py" "$util" measure --json "$out/$config.measure.json" --log "$out/$config.train.log" \
    --timeout 900 -- "$tz" train --model "$out/model" --config "$cfg" --data "$out/tokens.u16" --steps "$steps" || true
  "$py" "$util" tierzero-steps --log "$out/$config.train.log" --json "$out/$config.steps.json"
  rows+=("$config")
done

"$py" - "$out" "$warmup" "${rows[@]}" <<'PY'
import json, os, statistics, sys
out, warmup, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
gib = lambda b: b / 2**30
print(f"# estimate vs measured: {out}")
print(f"# {'config':<28} {'pred_gpu':>9} {'meas_gpu':>9} {'gpu_ratio':>9} {'pred_s':>8} {'meas_s':>8} {'time_ratio':>10} {'bottleneck':>12} {'implied_eff':>11}")
summary = []
for c in configs:
    plan = json.load(open(os.path.join(out, c + ".plan.json")))
    steps = json.load(open(os.path.join(out, c + ".steps.json")))["steps"][warmup:]
    if not steps:
        print(f"  {c:<28} no measured steps after {warmup} warm-up steps; see {c}.train.log"); continue
    meas_gpu = max(s["gpu_peak_bytes"] or 0 for s in steps)
    meas_s = statistics.median(s["step_time_s"] for s in steps)
    pred_gpu, pred_s = plan["gpu_allocated_peak_bytes"], plan["step_seconds"]
    gpu_ratio = pred_gpu / meas_gpu if meas_gpu else float("nan")
    eff = ""
    if plan["bottleneck"] == "gpu compute":
        eff = f"{0.5 * pred_s / meas_s:.3f}"  # the plan's default efficiency is 0.5
    print(f"  {c:<28} {gib(pred_gpu):8.2f}G {gib(meas_gpu):8.2f}G {gpu_ratio:9.3f} {pred_s:8.3f} {meas_s:8.3f} "
          f"{pred_s / meas_s:10.3f} {plan['bottleneck']:>12} {eff:>11}")
    summary.append({"config": c, "pred_gpu_bytes": pred_gpu, "meas_gpu_bytes": meas_gpu, "gpu_ratio": gpu_ratio,
                    "pred_step_s": pred_s, "meas_step_s": meas_s, "time_ratio": pred_s / meas_s,
                    "bottleneck": plan["bottleneck"]})
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print("# ratio = predicted / measured; targets: gpu 0.90-1.10, time 0.75-1.25 (issue 13)")
PY
