#!/usr/bin/env bash
# `tierzero convert` against DeepSpeed's zero_to_fp32 on a checkpoint that DeepSpeed 0.19.8 itself
# wrote while training (not a synthesised one), each tool from a cold page cache; then (unless
# --no-continuation) DeepSpeed and tierzero continuing from DeepSpeed checkpoints on the same device.
#
#   benchmarks/convert_real_deepspeed.sh [--shape 1.35b|tiny] [--steps N] [--out DIR] [--work DIR]
#       [--continuation-stages "1 2 3"] [--continuation-dtype bf16|fp32|fp16] [--no-continuation]
#       [--budget S] [--dry-run]
#
# On the GPU box (build-gpu built by scripts/device.sh; about 6 minutes for 1.35B):
#   TIERZERO_DEVICE_TARGETS="tierzero tierzero-torch" scripts/device.sh benchmarks/convert_real_deepspeed.sh --out $OUT/crd
# On a CPU machine: benchmarks/convert_real_deepspeed.sh --dry-run   (tiny ~7M model, DeepSpeed's CPU
#   accelerator, page cache evicted per file only, continuation at stage 3 only)
#
# (a) benchmarks/models/llama_SHAPE.json -> a random-init LlamaForCausalLM saved in bf16 (save_pretrained);
# (b) DeepSpeed trains it N steps (default 2; benchmarks/train_deepspeed.py, benchmarks/configs/zero3.json
#     with micro-batch 1 x seq 512, torch's AdamW through optimizer.params.torch_adam so no op is
#     compiled, stage3_gather_16bit_weights_on_model_save true) and writes save_checkpoint and
#     save_16bit_model (pytorch_model.bin); the model folder is deleted then (disk);
# (c) with the checkpoint's pages evicted before each (benchmarks/page_cache.py: drop_caches where
#     permitted, else posix_fadvise DONTNEED per file; the method is printed; the tools' own code is
#     read back before timing, so only the checkpoint is cold): DeepSpeed's zero_to_fp32
#     (the copy save_checkpoint put in the checkpoint folder, --safe_serialization), `tierzero convert
#     --dtype fp32` and `tierzero convert --dtype bf16`, each under /usr/bin/time -v where it exists
#     (else getrusage of the child, the same figure): wall time and peak RSS;
# (d) benchmarks/compare_weights.py: tierzero fp32 == zero_to_fp32 and tierzero bf16 == save_16bit_model,
#     every tensor bit for bit; each output deleted once compared;
# (e) the table (targets on the fp32 row: >= 5x faster, <= 1/4 of zero_to_fp32's peak RSS) and
#     OUT/summary.json;
# (f) continuation: tests/engine/train/deepspeed_migration.py --device cuda|cpu at world 1 on its tiny
#     Llama (the 1.35B continuation would not fit the call's time): DeepSpeed and `tierzero train
#     --resume` continue 5 steps from DeepSpeed's checkpoint, and back through `convert --to deepspeed`;
#     losses to 1e-3 relative, fp32 master after one step to 1e-6 absolute. It gets what is left of
#     --budget (seconds for the whole script, default 510, so that one 9-minute device call holds it;
#     each earlier run is bounded too) and is skipped, saying so, when less than a minute is left.
# Disk: the 1.35B checkpoint is ~16 GB (fp32 master + 2 Adam moments), the outputs 5.4 + 5.4 + 2.7 GB;
# at most ~30 GB at once under WORK (default /tmp/tz_convert_real; removed at the end).
# Environment: TIERZERO_BIN (default build-gpu/tools/tierzero, else build/tools/tierzero), PYTHON (python3),
# TIERZERO_REV (the commit the header names; default git rev-parse, stale where a copy of the tree lags).
set -euo pipefail
cd "$(dirname "$0")/.."

shape="" steps=2 out="" work="" budget_s=510 dry_run=0 continuation=1
cont_stages="1 2 3" cont_dtype="bf16"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shape) shape=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --budget) budget_s=$2; shift 2 ;;
    --continuation-stages) cont_stages=$2; shift 2 ;;
    --continuation-dtype) cont_dtype=$2; shift 2 ;;
    --no-continuation) continuation=0; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "convert_real_deepspeed: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
evict_method=auto device=cuda sub_group=()
if [[ $dry_run == 1 ]]; then
  shape=${shape:-tiny} cont_stages=${cont_stages/1 2 3/3}
  # CPU only; evict per file, not the shared machine's whole page cache; many optimizer sub-groups
  # (the 1.35B run has two at sub_group_size 1e9), so that the reader meets several in the dry run too.
  export CUDA_VISIBLE_DEVICES="" DS_ACCELERATOR=cpu
  evict_method=fadvise device=cpu sub_group=(--set zero_optimization.sub_group_size=400000)
fi
shape=${shape:-1.35b}
py=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} TQDM_DISABLE=1 TIERZERO_NO_PROGRESS=1
tz=${TIERZERO_BIN:-}
if [[ -z $tz ]]; then
  if [[ -x build-gpu/tools/tierzero ]]; then tz=build-gpu/tools/tierzero; else tz=build/tools/tierzero; fi
fi
shape_file=benchmarks/models/llama_$shape.json
util=benchmarks/train_bench_util.py
[[ -f $shape_file ]] || { echo "convert_real_deepspeed: no model shape $shape_file" >&2; exit 2; }
[[ -x $tz ]] || { echo "convert_real_deepspeed: $tz not built (TIERZERO_BIN=...)" >&2; exit 2; }
"$py" -c 'import torch, transformers, deepspeed, safetensors' >/dev/null 2>&1 ||
  { echo "convert_real_deepspeed: $py lacks torch/transformers/deepspeed/safetensors (PYTHON=...)" >&2; exit 2; }
out=${out:-benchmarks/out/convert_real_deepspeed_${shape}_$(date +%Y%m%d_%H%M%S)}
work=${work:-/tmp/tz_convert_real}
rm -rf "$work"
mkdir -p "$out" "$work"
trap 'rm -rf "$work"' EXIT
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# (a) the model, the tokens, the ds_config
log "writing the random-init model ($shape_file) to $work/model"
"$py" "$util" model --shape "$shape_file" --out "$work/model" >&2
cfg=$out/ds_config.json
"$py" "$util" config --base benchmarks/configs/zero3.json --out "$cfg" --micro 1 --accum 1 --seq 512 \
  --set optimizer.params.torch_adam=true --set zero_optimization.stage3_gather_16bit_weights_on_model_save=true \
  "${sub_group[@]}"
vocab=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$shape_file")
"$py" "$util" tokens --out "$work/tokens.u16" --tokens $((512 * (steps + 1) + 1)) --vocab "$vocab" --seed 1234 >&2
parameters=$("$py" "$util" count --model "$work/model")

# (b) DeepSpeed trains and saves
ckpt=$work/ckpt sixteen=$work/ds16
log "DeepSpeed: $steps steps of ZeRO-3 bf16 ($parameters parameters), save_checkpoint + save_16bit_model; log $out/deepspeed_train.log"
"$py" "$util" measure --json "$out/deepspeed_train.measure.json" --log "$out/deepspeed_train.log" --timeout $((budget_s * 6 / 10)) -- \
  "$py" benchmarks/train_deepspeed.py --model "$work/model" --ds-config "$cfg" --tokens "$work/tokens.u16" \
  --steps "$steps" --json "$out/deepspeed_train.json" --save-checkpoint "$ckpt" --save-16bit "$sixteen" ||
  { echo "convert_real_deepspeed: DeepSpeed's run failed:" >&2; grep -vi warn "$out/deepspeed_train.log" | tail -20 >&2; exit 1; }
grep -E '^deepspeed (step|save)' "$out/deepspeed_train.log" >&2
rm -rf "$work/model"
[[ -f $ckpt/zero_to_fp32.py ]] || { echo "convert_real_deepspeed: save_checkpoint left no $ckpt/zero_to_fp32.py" >&2; exit 1; }
tag=$(cat "$ckpt/latest")

# (c) each tool from a cold page cache, timed
if [[ -x /usr/bin/time ]]; then timer="/usr/bin/time -v"; else timer="getrusage of the child (no /usr/bin/time here)"; fi
# timed NAME CMD...: runs CMD with the checkpoint evicted first; NAME.wall_s / NAME.rss_kb / NAME.log in OUT.
timed() {
  local name=$1; shift
  "$py" benchmarks/page_cache.py evict --method "$evict_method" "$ckpt" --print-method > "$out/$name.evict" 2> "$out/$name.evict.log"
  cat "$out/$name.evict.log" >&2
  # Only the checkpoint is to be cold: drop_caches also evicted the tools' own code (torch's libraries
  # for zero_to_fp32), which each tool's start reads back here, outside the timing.
  "$py" -c 'import deepspeed.utils.zero_to_fp32, safetensors.torch' > /dev/null 2>&1
  "$tz" --help > /dev/null
  log "$name: $*"
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -v -o "$out/$name.time" timeout "$budget_s" "$@" > "$out/$name.log" 2>&1 ||
      { echo "convert_real_deepspeed: $name failed:" >&2; tail -20 "$out/$name.log" >&2; exit 1; }
    awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' \
      "$out/$name.time" > "$out/$name.wall_s"
    awk -F': ' '/Maximum resident set size/ { print $2 }' "$out/$name.time" > "$out/$name.rss_kb"
  else
    "$py" "$util" measure --json "$out/$name.measure.json" --log "$out/$name.log" --timeout "$budget_s" -- "$@" ||
      { echo "convert_real_deepspeed: $name failed:" >&2; tail -20 "$out/$name.log" >&2; exit 1; }
    "$py" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["wall_s"]); print(m["peak_rss_bytes"]//1024, file=sys.stderr)' \
      "$out/$name.measure.json" > "$out/$name.wall_s" 2> "$out/$name.rss_kb"
  fi
}
ckpt_bytes=$(du -sb "$ckpt/$tag" | cut -f1)
timed zero_to_fp32 "$py" "$ckpt/zero_to_fp32.py" "$ckpt" "$work/out_ds" --safe_serialization
timed tierzero_fp32 "$tz" convert "$ckpt" "$work/out_tz32" --dtype fp32 --no-progress
# (d) fp32: every tensor against zero_to_fp32's, then both deleted
log "comparing tierzero fp32 with zero_to_fp32"
"$py" benchmarks/compare_weights.py "$work/out_ds" "$work/out_tz32" --json "$out/compare_fp32.json" | tee "$out/compare_fp32.txt" >&2 || true
model_bytes=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["bytes"])' "$out/compare_fp32.json")
rm -rf "$work/out_ds" "$work/out_tz32"
timed tierzero_bf16 "$tz" convert "$ckpt" "$work/out_tz16" --dtype bf16 --no-progress
log "comparing tierzero bf16 with save_16bit_model"
"$py" benchmarks/compare_weights.py "$sixteen" "$work/out_tz16" --json "$out/compare_bf16.json" | tee "$out/compare_bf16.txt" >&2 || true
rm -rf "$work/out_tz16"

# (e) the table
correct() { "$py" -c 'import json,sys; print("OK" if json.load(open(sys.argv[1]))["ok"] else "FAIL")' "$1"; }
c32=$(correct "$out/compare_fp32.json") c16=$(correct "$out/compare_bf16.json")
ds_s=$(cat "$out/zero_to_fp32.wall_s") ds_kb=$(cat "$out/zero_to_fp32.rss_kb")
machine="$(hostname), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GiB RAM, $("$py" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>/dev/null | tail -1)"
versions="tierzero ${TIERZERO_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}, DeepSpeed $("$py" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1), torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -1)"
{
  printf '# tierzero convert vs DeepSpeed zero_to_fp32 on a checkpoint DeepSpeed wrote while training; %s\n' "$versions"
  printf '# machine: %s\n' "$machine"
  printf '# checkpoint: %s, %s parameters, ZeRO-3 bf16 on %s, %s steps, %s (%.2f GB), fp32 weights %.2f GB\n' \
    "$shape_file" "$parameters" "$device" "$steps" "$tag" "$(awk -v b="$ckpt_bytes" 'BEGIN { print b / 1e9 }')" \
    "$(awk -v b="$model_bytes" 'BEGIN { print b / 1e9 }')"
  printf '# page cache before each tool: %s (checkpoint resident after: see %s/*.evict.log); timer: %s\n' \
    "$(cat "$out/zero_to_fp32.evict")" "$out" "$timer"
  printf '%-38s %9s %13s %8s %8s %10s  %s\n' "# tool" "wall_s" "peak_RSS" "GB/s" "speedup" "RSS_ratio" "correct"
  row() {  # NAME LABEL CORRECT
    awk -v n="$2" -v s="$(cat "$out/$1.wall_s")" -v kb="$(cat "$out/$1.rss_kb")" -v b="$model_bytes" -v ds="$ds_s" \
      -v dkb="$ds_kb" -v c="$3" 'BEGIN { printf "  %-36s %9.2f %9.2f GiB %8.2f %7.1fx %9.2fx  %s\n", n, s, kb / 1048576, b / 1e9 / s, ds / s, dkb / kb, c }'
  }
  row zero_to_fp32 "zero_to_fp32.py --safe_serialization" "reference (fp32)"
  row tierzero_fp32 "tierzero convert --dtype fp32" "$c32 vs zero_to_fp32, every tensor bit for bit"
  row tierzero_bf16 "tierzero convert --dtype bf16" "$c16 vs save_16bit_model, every tensor bit for bit"
  tz_s=$(cat "$out/tierzero_fp32.wall_s") tz_kb=$(cat "$out/tierzero_fp32.rss_kb")
  verdict=$(awk -v ds="$ds_s" -v s="$tz_s" -v dkb="$ds_kb" -v kb="$tz_kb" 'BEGIN { print (ds / s >= 5 && dkb / kb >= 4) ? "met" : "NOT met" }')
  [[ $c32 == OK && $c16 == OK ]] || verdict="NOT met (a correctness check failed)"
  echo "# GB/s: fp32 weight bytes / wall time. Targets on the fp32 row: speedup >= 5x and RSS_ratio >= 4x: $verdict"
} | tee "$out/table.txt"
"$py" - "$out" "$versions" "$machine" "$timer" "$(cat "$out/zero_to_fp32.evict")" "$parameters" "$ckpt_bytes" "$model_bytes" <<'EOF'
import json, os, sys
out, versions, machine, timer, evict, parameters, ckpt_bytes, model_bytes = sys.argv[1:]
rows = {}
for name in ("zero_to_fp32", "tierzero_fp32", "tierzero_bf16"):
    with open(os.path.join(out, name + ".wall_s")) as f, open(os.path.join(out, name + ".rss_kb")) as g:
        rows[name] = {"wall_s": float(f.read()), "peak_rss_bytes": int(g.read()) * 1024}
checks = {k: json.load(open(os.path.join(out, f"compare_{k}.json"))) for k in ("fp32", "bf16")}
json.dump({"versions": versions, "machine": machine, "timer": timer, "page_cache": evict,
           "parameters": int(parameters), "checkpoint_bytes": int(ckpt_bytes), "fp32_bytes": int(model_bytes),
           "runs": rows, "checks": checks}, open(os.path.join(out, "summary.json"), "w"), indent=2)
EOF
rm -rf "$ckpt" "$sixteen"

# (f) continuation from DeepSpeed checkpoints, and back
left_s=$((budget_s - SECONDS))
if [[ $continuation == 1 ]] && ((left_s < 60)); then
  echo "# continuation skipped: ${left_s}s of the ${budget_s}s budget left (run it alone: --continuation-stages ...)" | tee -a "$out/table.txt"
  continuation=0
fi
if [[ $continuation == 1 ]]; then
  log "continuation (up to ${left_s}s): deepspeed_migration.py --device $device --dtype $cont_dtype --stages $cont_stages --worlds 1 --to-deepspeed"
  # shellcheck disable=SC2086 # the stages are words
  timeout "$left_s" "$py" tests/engine/train/deepspeed_migration.py --tierzero "$tz" --device "$device" \
    --dtype "$cont_dtype" --stages $cont_stages --worlds 1 --to-deepspeed --work "$work/continuation" \
    --json "$out/continuation.json" 2>&1 | tee "$out/continuation.txt" | grep -vE 'Warning|warn\(' >&2 || true
  { echo "# continuation from DeepSpeed checkpoints on $device ($cont_dtype, tiny Llama of deepspeed_migration.py, world 1):"
    grep -E '^(ok  |FAIL|PASS|skipped)' "$out/continuation.txt" | sed 's/^/  /'; } | tee -a "$out/table.txt"
fi
echo "# JSON: $out/summary.json$([[ $continuation == 1 ]] && echo " and $out/continuation.json")"
