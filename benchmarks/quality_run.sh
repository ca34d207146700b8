#!/usr/bin/env bash
# The compact optimizer state's quality run: real text, a real tokenizer, the same random init and the
# same tokens for every run; loss curves of tierzero with the fp32 state (fp32 master, fp32 moments),
# the compact master with bf16 moments, the compact master with 8-bit moments, and DeepSpeed 0.19.8's
# lean mode (bf16.bf16_master_weights_and_grads + bf16_optimizer_states, CPU Adam); then a small-lr
# fine-tune showing which masters keep updates smaller than a bf16 ulp; then the table.
#
# On the GPU box, ONE command (the tokenizer must already be in benchmarks/out/quality_tokenizer/, see
# below; benchmarks/out is git-ignored, so name it in the device run's carry: ["benchmarks/out/quality_tokenizer"]):
#   TIERZERO_DEVICE_TARGETS="tierzero tierzero-torch" scripts/device.sh benchmarks/quality_run.sh
# On a CPU machine:  benchmarks/quality_run.sh --dry-run   (llama_tiny's body with the tokenizer's vocab,
#                    seq 64, 12 steps, windows of 2 after step 4, 3 fine-tune steps; both engines on the CPU)
# Once, on a machine with network (PyPI), before the GPU run:
#                    benchmarks/quality_run.sh --tokenizer-only
#
#   benchmarks/quality_run.sh [--dry-run] [--tokenizer-only] [--out DIR] [--shape F.json] [--vocab llama-spm|qwen2]
#       [--tokenizer DIR] [--steps 500] [--warmup-steps 50] [--ft-steps 50] [--ft-lr 1e-6] [--seq 512] [--micro 8]
#       [--accum 1] [--skip 100] [--window 50] [--tolerance 0.02] [--max-bytes N] [--runs "fp32 compact_bf16
#       compact_int8 lean"] [--ft-runs "fp32 compact_fp32m compact_int8 lean"] [--int8-as bf16] [--timeout S]
#
# (a) tokenizer: benchmarks/out/quality_tokenizer/VOCAB/ (default llama-spm: Llama 2's 32000-token
#     SentencePiece BPE) from llama.cpp's ggml-vocab-VOCAB.gguf in llama-cpp-python's sdist on PyPI, through
#     transformers' GGUF loader, checked against llama.cpp's reference ids (quality_util.py tokenizer;
#     SOURCE.json records the file, the sdist's version and sha256).
# (b) text: this python's standard library and site-packages .py sources, deduplicated, ~32 MB of
#     {"text"} rows -> OUT/rows.jsonl; tokenized by `tierzero data prepare` -> OUT/tokens.tok, whose first
#     200 rows are checked id for id against Hugging Face `tokenizers`.
# (c) model: benchmarks/models/llama_150m.json's body (hidden 1024, 12 layers) with the tokenizer's vocab
#     (32000: 220M parameters), random init seed 1234, bf16 -> OUT/model.
# (d) runs, each ZeRO-3 with the optimizer on the CPU, micro 8 x seq 512 = 4096 tokens/step, AdamW lr 3e-4
#     (50 linear warm-up steps, linear decay to 0 at the last step), clip 1.0:
#     benchmarks/configs/quality_{fp32,compact_bf16,compact_int8,lean}.json -> OUT/NAME.metrics.jsonl
#     (tierzero --metrics; DeepSpeed: train_deepspeed.py --metrics, the same format). fp32 --export's the
#     last weights to OUT/fp32.export.
# (e) fine-tunes from OUT/fp32.export: lr 1e-6 constant (no scheduler), FT_STEPS steps, data seed 4321:
#     tierzero fp32, compact master + fp32 moments (offload_grad_dtype default: compared element by element
#     with fp32, ulps apart), compact + int8, DeepSpeed lean; each exported and compared with the start
#     (quality_util.py weights-diff: the fraction of bf16 weights that changed, and equal to ft_fp32's).
# (f) quality_util.py summary: per 50-step window after step 100 each run's mean loss and its relative
#     difference from fp32 (acceptance: compact_int8 within 2% in every window; compact_bf16 judged too),
#     the fine-tune table, OUT/quality_summary.json.
# GPU time at the defaults on the H200 (estimate, not yet measured): tierzero ~0.1 s/step at 220M with the
# CPU Adam on 16 cores (~4 Gparam/s), ~60-70 s a 500-step run with its start; DeepSpeed lean ~0.2-0.3 s/step
# (ZeRO-3 hooks, its CPU Adam) ~120-150 s, plus its cpu_adam JIT build once (~1-2 min on 16 cores);
# fine-tunes ~15-30 s each; data prepare and the model ~30 s: about 7-8 minutes in all. Each run is
# bounded by --timeout (default 600 s).
# --int8-as DTYPE: run the compact_int8 configs with optimizer_state_dtype DTYPE instead (for testing the
# script where tierzero does not parse "int8" yet; the legend says so). A run whose log warns that a
# precision key was not honoured (IGNORED KEYS), or whose engine's own state line (tierzero's "compact
# master ..., 8-bit moments" description, DeepSpeed's read-back `deepspeed precision:`) shows another
# master or moments than its config asks for (state MISMATCH), fails the verdict.
# Runs may be split over calls with the same --out (--runs "fp32" then --runs "compact_bf16 compact_int8"
# --ft-runs "" ...; the fine-tunes need OUT/fp32.export): the table covers every curve in OUT.
# Environment: TIERZERO_BIN (default build-gpu/tools/tierzero, else build/tools/tierzero), PYTHON (python3),
# TIERZERO_REV (the commit the header names; default git rev-parse, stale where a copy of the tree lags).
set -euo pipefail
cd "$(dirname "$0")/.."

dry_run=0 tokenizer_only=0 out="" shape="" vocab=llama-spm tokdir="" steps="" warmup_steps="" ft_steps="" ft_lr=1e-6
seq="" micro="" accum="" skip="" window="" tolerance=0.02 max_bytes="" int8_as="" timeout_s=600
runs="fp32 compact_bf16 compact_int8 lean"
ft_runs="fp32 compact_fp32m compact_int8 lean"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --tokenizer-only) tokenizer_only=1; shift ;;
    --out) out=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --tokenizer) tokdir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warmup_steps=$2; shift 2 ;;
    --ft-steps) ft_steps=$2; shift 2 ;;
    --ft-lr) ft_lr=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --accum) accum=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --tolerance) tolerance=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ft-runs) ft_runs=$2; shift 2 ;;
    --int8-as) int8_as=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "quality_run: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $dry_run == 1 ]]; then
  shape=${shape:-benchmarks/models/llama_tiny.json} steps=${steps:-12} warmup_steps=${warmup_steps:-2}
  ft_steps=${ft_steps:-3} seq=${seq:-64} micro=${micro:-2} accum=${accum:-1} skip=${skip:-4} window=${window:-2}
  max_bytes=${max_bytes:-2000000}
  export CUDA_VISIBLE_DEVICES=""
fi
shape=${shape:-benchmarks/models/llama_150m.json} steps=${steps:-500} warmup_steps=${warmup_steps:-50}
ft_steps=${ft_steps:-50} seq=${seq:-512} micro=${micro:-8} accum=${accum:-1} skip=${skip:-100} window=${window:-50}
max_bytes=${max_bytes:-33554432}
tokdir=${tokdir:-benchmarks/out/quality_tokenizer/$vocab}
py=${PYTHON:-python3}
util=benchmarks/train_bench_util.py
qutil=benchmarks/quality_util.py
export TORCH_CUDA_ARCH_LIST=9.0  # see train_vs_deepspeed.sh: DeepSpeed 0.19.8 cannot parse Hopper's "9.0a"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# (a) the tokenizer
if [[ ! -f $tokdir/tokenizer.json ]]; then
  log "making the $vocab tokenizer in $tokdir (needs PyPI: llama-cpp-python's sdist, gguf)"
  "$py" "$qutil" tokenizer --out "$tokdir" --vocab "$vocab" >&2 \
    || { echo "quality_run: no tokenizer in $tokdir; run benchmarks/quality_run.sh --tokenizer-only on a machine with PyPI first" >&2; exit 2; }
fi
[[ $tokenizer_only == 1 ]] && { cat "$tokdir/SOURCE.json"; exit 0; }

tz=${TIERZERO_BIN:-}
if [[ -z $tz ]]; then
  if [[ -x build-gpu/tools/tierzero ]]; then tz=build-gpu/tools/tierzero; else tz=build/tools/tierzero; fi
fi
[[ -x $tz ]] || { echo "quality_run: $tz not built (TIERZERO_BIN=...)" >&2; exit 2; }
"$py" -c 'import torch, transformers, tokenizers, deepspeed' >/dev/null 2>&1 \
  || { echo "quality_run: $py lacks torch/transformers/tokenizers/deepspeed (PYTHON=...)" >&2; exit 2; }
out=${out:-benchmarks/out/quality_$(date +%Y%m%d_%H%M%S)}
mkdir -p "$out"
log "out: $out"

# (b) text and tokens
"$py" "$qutil" rows --out "$out/rows.jsonl" --max-bytes "$max_bytes" >&2
"$tz" data prepare --tokenizer "$tokdir" "$out/rows.jsonl" "$out/tokens.tok" --json "$out/tokens.prepare.json" >&2
check_rows=200; [[ $dry_run == 1 ]] && check_rows=20
"$py" "$qutil" check-ids --tokenizer "$tokdir" --rows "$out/rows.jsonl" --tokens "$out/tokens.tok" \
  --rows-limit "$check_rows" >&2 || { echo "quality_run: tierzero's token ids differ from Hugging Face's" >&2; exit 1; }

# (c) the model
vocab_size=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$tokdir/SOURCE.json")
if [[ ! -f $out/model/config.json ]]; then
  "$py" "$util" model --shape "$shape" --vocab "$vocab_size" --max-pos "$seq" --out "$out/model" >&2
  cp "$tokdir"/tokenizer.json "$tokdir"/tokenizer_config.json "$out/model/"
fi
parameters=$("$py" "$util" count --model "$out/model")

# (d) configs: the committed file with this run's batch, sequence and schedule
config_for() {  # NAME BASE OUT [extra config args...]
  local name=$1 base=$2 dest=$3; shift 3
  local extra=()
  if [[ -n $int8_as && $name == *int8* ]]; then extra+=(--set "tierzero.optimizer_state_dtype=\"$int8_as\""); fi
  "$py" "$util" config --base "$base" --out "$dest" --micro "$micro" --accum "$accum" --seq "$seq" \
    --set "scheduler.params.total_num_steps=$steps" --set "scheduler.params.warmup_num_steps=$warmup_steps" \
    "${extra[@]}" "$@"
}
base_of() { case $1 in compact_fp32m) echo benchmarks/configs/quality_compact_bf16.json ;; *) echo "benchmarks/configs/quality_$1.json" ;; esac; }
engine_of() { [[ $1 == lean ]] && echo deepspeed || echo tierzero; }
tokens_per_step=$(( micro * accum * seq ))
machine="$(hostname), $(nproc) cores, $("$py" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>/dev/null | tail -1), tierzero ${TIERZERO_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}, DeepSpeed $("$py" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1), torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -1)"
"$py" -c 'import json,sys; a=sys.argv
json.dump({"model": a[1], "parameters": int(a[2]), "vocab": int(a[3]), "steps": int(a[4]), "tokens_per_step": int(a[5]),
  "tokenizer_dir": a[6], "machine": a[7], "ft_steps": int(a[8]), "ft_lr": float(a[9]), "ft_start": a[10],
  "int8_as": a[11] or None}, open(a[12], "w"), indent=2)' \
  "$shape body, vocab $vocab_size" "$parameters" "$vocab_size" "$steps" "$tokens_per_step" "$tokdir" "$machine" \
  "$ft_steps" "$ft_lr" "$out/fp32.export" "$int8_as" "$out/plan.json"

if [[ " $runs $ft_runs " == *" lean "* ]]; then
  log "building DeepSpeed's cpu_adam op (once; log $out/deepspeed_ops.log)"
  config_for lean benchmarks/configs/quality_lean.json "$out/lean.ds_config.json"
  timeout 900 "$py" benchmarks/train_deepspeed.py --build-ops --ds-config "$out/lean.ds_config.json" > "$out/deepspeed_ops.log" 2>&1 \
    || { echo "quality_run: DeepSpeed's ops did not build; see $out/deepspeed_ops.log" >&2; tail -3 "$out/deepspeed_ops.log" >&2; }
fi

run_one() {  # NAME ENGINE CONFIG MODEL STEPS EXPORT_DIR
  local name=$1 engine=$2 cfg=$3 model=$4 n=$5 export_dir=$6
  log "$name ($engine, $n steps): log $out/$name.log"
  if [[ $engine == tierzero ]]; then
    TIERZERO_NO_PROGRESS=1 "$py" "$util" measure --json "$out/$name.measure.json" --log "$out/$name.log" \
      --timeout "$timeout_s" -- "$tz" train --model "$model" --config "$cfg" --data "$out/tokens.tok" --steps "$n" \
      --metrics "$out/$name.metrics.jsonl" ${export_dir:+--export "$export_dir"} || true
  else
    "$py" "$util" measure --json "$out/$name.measure.json" --log "$out/$name.log" --timeout "$timeout_s" -- \
      "$py" benchmarks/train_deepspeed.py --model "$model" --ds-config "$cfg" --tokens "$out/tokens.tok" --steps "$n" \
      --json "$out/$name.steps.json" --metrics "$out/$name.metrics.jsonl" --name "$name" \
      ${export_dir:+--save-16bit "$export_dir"} || true
  fi
  grep -E '^(done:|deepspeed step|deepspeed precision)' "$out/$name.log" | tail -2 >&2 || true
  grep -E '^warning:' "$out/$name.log" >&2 || true
  [[ $(grep -c . "$out/$name.metrics.jsonl" 2>/dev/null || echo 0) -gt 1 ]] || tail -5 "$out/$name.log" >&2
}

# (d) the training runs; fp32 first (its export starts the fine-tunes)
for name in $runs; do
  cfg=$out/$name.ds_config.json
  config_for "$name" "$(base_of "$name")" "$cfg"
  export_dir=""; [[ $name == fp32 ]] && export_dir=$out/fp32.export
  run_one "$name" "$(engine_of "$name")" "$cfg" "$out/model" "$steps" "$export_dir"
done

# (e) the fine-tunes
if [[ -n $ft_runs ]]; then
  if [[ ! -f $out/fp32.export/config.json ]]; then
    echo "quality_run: no $out/fp32.export (the fp32 run failed or was not in --runs): no fine-tunes" >&2
    ft_runs=""
  fi
fi
for name in $ft_runs; do
  cfg=$out/ft_$name.ds_config.json
  extra=(--set "optimizer.params.lr=$ft_lr" --unset scheduler --set tierzero.data.seed=4321)
  [[ $name == compact_fp32m ]] && extra+=(--set 'tierzero.optimizer_state_dtype="fp32"' --unset tierzero.offload_grad_dtype)
  [[ $name == lean ]] && extra+=(--set zero_optimization.stage3_gather_16bit_weights_on_model_save=true)
  config_for "$name" "$(base_of "$name")" "$cfg" "${extra[@]}"
  run_one "ft_$name" "$(engine_of "$name")" "$cfg" "$out/fp32.export" "$ft_steps" "$out/ft_$name.export"
done
for name in $ft_runs; do
  if [[ -d $out/ft_$name.export ]]; then
    "$py" "$qutil" weights-diff --start "$out/fp32.export" --end "$out/ft_$name.export" \
      --ref "$out/ft_fp32.export" --json "$out/ft_$name.diff.json" >&2 || true
  fi
done

# (f) the table
label_of() {
  case $1 in
    fp32) echo "tierzero fp32 master, fp32 moments" ;;
    compact_bf16) echo "tierzero compact master, bf16 moments, bf16 grads" ;;
    compact_int8) echo "tierzero compact master, int8 moments, bf16 grads${int8_as:+ (STAND-IN: $int8_as moments)}" ;;
    compact_fp32m) echo "tierzero compact master, fp32 moments" ;;
    lean) echo "DeepSpeed lean: bf16 master + bf16 moments" ;;
    *) echo "$1" ;;
  esac
}
# The table covers every run with a curve in OUT, this call's and earlier calls' (runs split over several
# calls with the same --out, e.g. to stay under a per-command time limit, share one table).
all_runs=""; for name in fp32 compact_bf16 compact_int8 lean $runs; do
  [[ -f $out/$name.metrics.jsonl && " $all_runs " != *" $name "* ]] && all_runs+="$name "; done
all_ft=""; for name in fp32 compact_fp32m compact_int8 lean $ft_runs; do
  [[ -f $out/ft_$name.metrics.jsonl && " $all_ft " != *" $name "* ]] && all_ft+="$name "; done
labels=(); for name in $all_runs; do labels+=("$name=$(label_of "$name" | tr ' ' '_')"); done
ft_labels=(); for name in $all_ft; do ft_labels+=("$name=$(label_of "$name" | tr ' ' '_')"); done
judged=""; for name in compact_bf16 compact_int8; do [[ " $all_runs " == *" $name "* ]] && judged+="$name "; done
[[ ${#labels[@]} -gt 0 ]] || { echo "quality_run: no run left a loss curve in $out" >&2; exit 1; }
"$py" "$qutil" summary --dir "$out" --runs "${labels[*]}" --ref fp32 --judged "$judged" --skip "$skip" \
  --window "$window" --tolerance "$tolerance" --ft "${ft_labels[*]}" --ft-ref fp32 | tee "$out/quality_summary.txt"
