#!/usr/bin/env bash
# On the GPU machine, after scripts/device.sh has built build-gpu/: the runs whose figures go into
# benchmarks/RESULTS.md, each writing a table (.txt) and JSON into OUTDIR. The run's copy-back brings
# a few files: end the command with `scripts/device_bundle.sh OUTDIR` to bring all of OUTDIR's small ones.
#   scripts/device.sh scripts/device_suite.sh tests OUTDIR     every test, GPU-labelled ones included
#   scripts/device.sh scripts/device_suite.sh bench OUTDIR     bench adam, pcie, io (vs fio), tiers
#   scripts/device.sh scripts/device_suite.sh train OUTDIR     the default `tierzero train` on the GPU
#   scripts/device.sh scripts/device_suite.sh loop OUTDIR      the fine-tuning loop on CUDA: generate's greedy
#                                      parity with transformers (needs transformers + peft importable, e.g.
#                                      wheels carried in .whl), held-out evaluation plain and offloaded,
#                                      estimate's GPU detection
#   scripts/device.sh scripts/device_suite.sh layer OUTDIR     the offload layer's end-to-end checks on the GPU: the LoRA
#                                      base on NVMe (RecordCache + DeviceCopies::upload) gives the pinned base's losses;
#                                      the gradient ring (tierzero.grad_ring_records, first refused with one slot, naming
#                                      the minimum) gives the whole partition's losses; bench pcie's rows verify
#   scripts/device.sh scripts/device_suite.sh checkpoint OUTDIR  issue 35's checkpoint cycle of the 7.6B (compact master,
#                                      int8 moments) on the box's disk: benchmarks/checkpoint_cycle.py (bytes/param,
#                                      durable vs bench io's new-file write rate, resume bit for bit, convert = export);
#                                      PHASES=saved,convert then PHASES=resumed,unbroken,io splits it over two calls
#                                      (state kept in /tmp/tz-cycle while the machine stays warm); CKPT_CONFIG another config
#   scripts/device.sh scripts/device_suite.sh save_overlap OUTDIR  issue 35's cost of periodic saves beside training:
#                                      benchmarks/save_overlap.py, SAVE_MODEL (llama_3b) with SAVE_CONFIG
#                                      (zero3_7b_compact_24gb.json), --save-every SAVE_EVERY (4) --keep-last 1 over
#                                      SAVE_STEPS (13) steps (every 4: a save's ~6.5 s write fits in the steps before
#                                      the next, one save being written at a time; SAVE_EVERY=2 SAVE_STEPS=9 is the
#                                      2026-12-06 lease's, where the writes queue behind each other),
#                                      held (write_behind 0) and write-behind (SAVE_WRITE_BEHIND, default auto),
#                                      vs the same run without, on the box's disk (two 3B checkpoints fit; two
#                                      7.6B ones, 92 GB, do not); first `bench save` (SAVE_COPY_SIZE, 4GiB): the
#                                      save's copy into its buffers, GB/s by threads
#   scripts/device.sh scripts/device_suite.sh host64 OUTDIR    issue 35's 14B on a 64 GB host: bench io --mixed
#                                      --pipeline on the NVMe path (4 GiB; the optimizer's record pipeline too), and
#                                      bench io over HOST64_IO_SIZE (28GiB: the swap file's bytes, the disk's
#                                      sustained rates, which estimate prices the step at),
#                                      estimate with those rates, HOST64_STEPS (6) steps of
#                                      zero3_14b_compact_64gb_ring.json (HOST64_CONFIG another; the disk's time idle,
#                                      reading, writing or both meanwhile: benchmarks/disk_inflight.py), then
#                                      benchmarks/disk_bound.py: the step against its disk bound, estimate's step and
#                                      tier peaks within 15 %, RSS <= 64 GiB, NVMe <= 55 GiB, GPU <= 24 GB
#   scripts/device.sh scripts/device_suite.sh kernels OUTDIR   benchmarks/layer_kernels.py: one decoder layer of each
#                                      KERNEL_MODELS (qwen2.5_14b llama_1.35b) as the window pass runs it, against the
#                                      fused RMSNorm and the window's groups, with its kernel table (needs no build)
#   scripts/device.sh scripts/device_suite.sh hf_startup OUTDIR  issue 36's start-up from a Hugging Face directory: the
#                                      directory written by `train --export` after one step of STARTUP_MODEL
#                                      (qwen2.5_14b) with STARTUP_CONFIG (zero3_14b_compact_24gb.json), then
#                                      benchmarks/startup.py from a cold page cache: process start to the first step line
#   scripts/device.sh scripts/device_suite.sh multigpu OUTDIR  ZeRO-3 on 2 GPUs (torchrun): save,
#                                                              export, verify, convert, export = convert
#   scripts/device.sh scripts/device_suite.sh adam OUTDIR      bench adam, ADAM_ROUNDS times (fp32 with/without
#                                      streaming stores, mixed, bf16 params, compact master + int8 moments) and DeepSpeed's cpu_adam
#   scripts/device.sh scripts/device_suite.sh convert OUTDIR   convert's write rate vs bench io
#   scripts/device.sh scripts/device_suite.sh corpus OUTDIR    DeepSpeed writes its checkpoint corpus on the
#                                      GPU (make_corpus.py --device cuda); convert is checked against it
#   scripts/device.sh scripts/device_suite.sh vs_deepspeed OUTDIR [ARGS]  benchmarks/train_vs_deepspeed.sh ARGS
#   scripts/device.sh scripts/device_suite.sh big OUTDIR [SHAPE...]   the compact-state runs on one GPU held to
#                                      24 GB: estimate, then train (random init, BIG_STEPS steps, default 10) of
#                                      benchmarks/models/qwen2.5_SHAPE.json with zero3_SHAPE_compact_24gb.json
#                                      (SHAPE 7b, 14b; default both), peak RSS by getrusage of the child;
#                                      BIG_VARIANT=_noclip takes zero3_SHAPE_compact_24gb_noclip.json (no
#                                      gradient clipping: the optimizer steps inside the backward);
#                                      BIG_MODEL / BIG_CONFIG replace the model and config (e.g. the Qwen3-14B
#                                      LoRA run: benchmarks/models/qwen3_14b.json, lora_qwen3_14b_24gb.json);
#                                      BIG_PROFILE=N writes step N's timeline (train --profile) to trace_SHAPE.json
#                                      and its table (benchmarks/timeline.py) to timeline_SHAPE.txt/.json
set -uo pipefail
cd "$(dirname "$0")/.."
what=$1
out=$2
tz=build-gpu/tools/tierzero
export TIERZERO_NO_PROGRESS=1
mkdir -p "$out"
# run NAME ARGS...: one tierzero benchmark, its table in NAME.txt and JSON in NAME.json.
run() {
  local name=$1; shift
  echo "== $name: $*"
  timeout 240 "$tz" "$@" --json "$out/$name.json" 2>&1 | tee "$out/$name.txt" |
    grep -vE '^#  |^# (host|timing|stream|peer|max_abs|note)'
}
# config_nvme CFG: the optimizer's nvme_path in CFG ("" without one).
config_nvme() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["zero_optimization"].get("offload_optimizer", {}).get("nvme_path", ""))' "$1"
}
case "$what" in
  tests)
    timeout 240 ctest --test-dir build-gpu -j "$(nproc)" --timeout 200 2>&1 | tee "$out/ctest.txt" | grep -vE '^ +Start|Passed' ;;
  bench)
    run adam_mixed bench adam --threads "$(nproc)" --steps 10
    run adam_fp32 bench adam --threads "$(nproc)" --steps 10 --no-sweep --grad-dtype fp32 --params16-dtype none
    run pcie bench pcie
    run io_qd32 bench io --path /tmp --size 4GiB --queue-depth 32 --vs-fio --repeat 3
    run io_qd32x4 bench io --path /tmp --size 4GiB --queue-depth 32 --threads 4 --vs-fio --repeat 3
    run tiers bench tiers --path /tmp ;;
  train)
    timeout 300 "$tz" train 2>&1 | tee "$out/train.txt" | tail -30 ;;
  loop)
    timeout 300 python3 tests/engine/generate/generate_vs_hf.py --tierzero "$tz" \
      --fixture-dir build-gpu/tests/engine/model/hf_fixture --device cuda 2>&1 | tee "$out/generate_cuda.txt" | tail -4
    timeout 120 "$tz" train --steps 20 --eval-fraction 0.05 --eval-every 5 2>&1 | tee "$out/train_eval.txt" |
      grep -E "eval|done"
    timeout 120 "$tz" train --config configs/zero3_offload_all_cpu.json --data configs/data/tiny_corpus.u16 --steps 10 \
      --eval-fraction 0.05 --eval-every 5 2>&1 | tee "$out/train_eval_offload.txt" | grep -E "eval|done"
    "$tz" estimate --model benchmarks/models/qwen2.5_14b.json --config benchmarks/configs/zero3_14b_compact_24gb.json \
      --nvme /tmp 2>&1 | tee "$out/estimate.txt" | grep -iE "gpu|ranks|host memory" ;;
  layer)
    # derive NAME BASE PY-EXPR: $out/NAME.json is configs/BASE.json with the edit applied to `c`.
    derive() {
      python3 -c 'import json,sys; c=json.load(open(sys.argv[2])); exec(sys.argv[3]); json.dump(c, open(sys.argv[1], "w"))' \
        "$out/$1.json" "configs/$2.json" "$3"
    }
    losses() { python3 -c 'import json,sys; print(" ".join(repr(d["loss"]) for d in map(json.loads, open(sys.argv[1])) if "loss" in d))' "$1"; }
    train() { timeout 200 "$tz" train --data configs/data/tiny_corpus.u16 --steps 6 "$@" 2>&1 | tail -3; }
    rm -rf /tmp/tz_lora_nvme && mkdir -p /tmp/tz_lora_nvme
    lora='c["gradient_accumulation_steps"] = 4; c["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}'
    derive lora_pinned lora "$lora"
    derive lora_nvme lora "$lora; c[\"zero_optimization\"][\"offload_param\"] = {\"device\": \"nvme\", \"nvme_path\": \"/tmp/tz_lora_nvme\"}"
    for v in lora_pinned lora_nvme; do train --config "$out/$v.json" --metrics "$out/$v.jsonl"; done
    a=$(losses "$out/lora_pinned.jsonl"); b=$(losses "$out/lora_nvme.jsonl")
    echo "LoRA base on NVMe vs pinned, losses: $([[ -n $a && $a == "$b" ]] && echo "equal ($a)" || echo "DIFFER: $a | $b")"
    ring='c["gradient_clipping"] = 0.0; c["gradient_accumulation_steps"] = 4; c["zero_optimization"]["sub_group_size"] = 1e5'
    derive ring_off zero3_offload_cpu "$ring"
    derive ring_one zero3_offload_cpu "$ring; c[\"tierzero\"][\"grad_ring_records\"] = 1"
    need=$(train --config "$out/ring_one.json" | grep -o 'at least [0-9]*' | grep -o '[0-9]*$')
    echo "gradient ring: $([[ -n $need ]] && echo "one slot refused, the engine asks for $need" || echo "one slot accepted")"
    derive ring_on zero3_offload_cpu "$ring; c[\"tierzero\"][\"grad_ring_records\"] = ${need:-1}"
    for v in ring_off ring_on; do train --config "$out/$v.json" --metrics "$out/$v.jsonl"; done
    a=$(losses "$out/ring_off.jsonl"); b=$(losses "$out/ring_on.jsonl")
    echo "gradient ring vs whole partition, losses: $([[ -n $a && $a == "$b" ]] && echo "equal ($a)" || echo "DIFFER: $a | $b")"
    run pcie bench pcie ;;
  multigpu)
    [[ "$(nvidia-smi -L | wc -l)" -ge 2 ]] || { echo "multigpu: fewer than 2 GPUs"; exit 1; }
    rm -rf /tmp/tz_ck /tmp/tz_exp /tmp/tz_conv
    timeout 180 torchrun --no-python --nproc_per_node 2 "$tz" train --config configs/zero3.json \
      --data configs/data/tiny_corpus.u16 --steps 20 --save /tmp/tz_ck --export /tmp/tz_exp 2>&1 |
      tee "$out/train2.txt" | tail -4
    "$tz" checkpoint verify /tmp/tz_ck 2>&1 | tee "$out/verify.txt" | tail -2
    "$tz" convert /tmp/tz_ck /tmp/tz_conv --dtype bf16 --no-progress 2>&1 | tee "$out/convert.txt" | tail -2
    ls -l /tmp/tz_exp /tmp/tz_conv | tee "$out/ls.txt"
    # The export (streamed from both ranks' shards) equals the saved checkpoint converted, bit for bit.
    python3 scripts/compare_safetensors.py /tmp/tz_exp /tmp/tz_conv 2>&1 | tee "$out/export_vs_convert.txt" | tail -3 ;;
  adam)
    threads=$(( $(nproc) > 16 ? 16 : $(nproc) ))
    a=(bench adam --params 134217728 --threads "$threads" --no-sweep --steps 10)
    for round in $(seq "${ADAM_ROUNDS:-2}"); do
      run fp32_$round "${a[@]}" --grad-dtype fp32 --params16-dtype none
      run fp32_streaming_$round "${a[@]}" --grad-dtype fp32 --params16-dtype none --streaming-stores
      run mixed_$round "${a[@]}"
      run bf16_params_$round "${a[@]}" --param-dtype bf16 --grad-dtype bf16
      run compact_int8_$round "${a[@]}" --master compact --moments int8  # the 14B's optimizer state
    done
    timeout 400 python3 benchmarks/adam_vs_deepspeed.py --tierzero "$tz" --threads "$threads" --params 134217728 \
      --steps 10 --repeats "${ADAM_ROUNDS:-2}" --json "$out/vs_deepspeed.json" 2>&1 | tee "$out/vs_deepspeed.txt" | grep -v Warning | tail -14 ;;
  convert)
    timeout 400 env TIERZERO_BUILD=build-gpu benchmarks/convert_write_ratio.sh 6 --json "$out/convert_write_ratio.json" 2>&1 |
      tee "$out/convert_write_ratio.txt" | tail -14 ;;
  corpus)
    rm -rf /tmp/ds-gpu
    timeout 240 python3 tests/checkpoint/deepspeed_corpus/make_corpus.py --out /tmp/ds-gpu --device cuda 2>&1 |
      tee "$out/corpus.txt" | grep -vi warn | tail -30
    TIERZERO_DEEPSPEED_CORPUS=/tmp/ds-gpu timeout 120 build-gpu/tests/checkpoint/tierzero_deepspeed_corpus_tests \
      --gtest_brief=1 2>&1 | tee "$out/corpus_tests.txt" | tail -8 ;;
  kernels)
    for m in ${KERNEL_MODELS:-qwen2.5_14b llama_1.35b}; do
      timeout 200 python3 benchmarks/layer_kernels.py --model-config "benchmarks/models/$m.json" --json "$out/kernels_$m.json" \
        2>&1 | grep -v -i warn | tee "$out/kernels_$m.txt"
    done ;;
  hf_startup)
    model=${STARTUP_MODEL:-benchmarks/models/qwen2.5_14b.json}
    cfg=${STARTUP_CONFIG:-benchmarks/configs/zero3_14b_compact_24gb.json}
    dir=/tmp/tz-hf-startup
    rm -rf "$dir"
    nvme=$(config_nvme "$cfg")  # made here: a `big` run before this one removes its own
    [[ -n $nvme ]] && { rm -rf "${nvme:?}"; mkdir -p "$nvme"; }
    timeout 300 "$tz" train --model-config "$model" --config "$cfg" --data configs/data/tiny_corpus.u16 --steps 1 \
      --export "$dir" > "$out/hf_export.log" 2>&1 || { tail -5 "$out/hf_export.log"; exit 1; }
    grep -E '^done|export' "$out/hf_export.log" | cut -c1-300; du -sh "$dir"
    timeout 280 python3 benchmarks/startup.py --bin tierzero="$tz" --model "$dir" --config "$cfg" --repeat 1 \
      --json "$out/startup_hf.json" -- --data configs/data/tiny_corpus.u16 2>&1 | tee "$out/startup_hf.txt"
    rm -rf "$dir"
    [[ -n $nvme ]] && rm -rf "${nvme:?}" ;;
  vs_deepspeed)
    TIERZERO_BIN=$tz timeout 560 benchmarks/train_vs_deepspeed.sh --out "$out/vs_deepspeed" "${@:3}" 2>&1 |
      tee "$out/vs_deepspeed.txt" | grep -vE 'Warning|warn\(' | tail -40 ;;
  big)
    shapes=("${@:3}")
    ((${#shapes[@]})) || shapes=(7b 14b)
    for shape in "${shapes[@]}"; do
      model=${BIG_MODEL:-benchmarks/models/qwen2.5_$shape.json}
      cfg=${BIG_CONFIG:-benchmarks/configs/zero3_${shape}_compact_24gb${BIG_VARIANT:-}.json}
      shape=$shape${BIG_VARIANT:-}  # the output files' names
      nvme=$(config_nvme "$cfg")
      [[ -n $nvme ]] && { rm -rf "${nvme:?}"; mkdir -p "$nvme"; }
      echo "== $shape: estimate, then train $model with $cfg ($(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(df -BG --output=avail /tmp | tail -1) free on /tmp)"
      "$tz" estimate --model-config "$model" --config "$cfg" ${nvme:+--nvme "$nvme"} > "$out/estimate_$shape.txt" 2>&1
      grep -E 'B/param|step time|FAIL|fits|pinned|NVMe|GPU' "$out/estimate_$shape.txt" | head -30
      python3 benchmarks/train_bench_util.py measure --json "$out/train_$shape.measure.json" --log "$out/train_$shape.log" \
        --timeout "${BIG_TIMEOUT:-540}" -- "$tz" train --model-config "$model" --config "$cfg" \
        --data configs/data/tiny_corpus.u16 --steps "${BIG_STEPS:-10}" --metrics "$out/train_$shape.jsonl" \
        ${BIG_PROFILE:+--profile "$out/trace_$shape.json" --profile-step "$BIG_PROFILE"} || true
      grep -vE '^\s*$' "$out/train_$shape.log" | tail -"${BIG_TAIL:-24}"
      cat "$out/train_$shape.measure.json"; echo
      [[ -n ${BIG_PROFILE:-} && -f $out/trace_$shape.json ]] &&
        python3 benchmarks/timeline.py "$out/trace_$shape.json" --metrics "$out/train_$shape.jsonl" --json "$out/timeline_$shape.json" | tee "$out/timeline_$shape.txt"
      [[ -n $nvme ]] && rm -rf "${nvme:?}"
    done ;;
  host64)
    cfg=${HOST64_CONFIG:-benchmarks/configs/zero3_14b_compact_64gb_ring.json}
    model=benchmarks/models/qwen2.5_14b.json
    nvme=$(config_nvme "$cfg")
    rm -rf "${nvme:?}"; mkdir -p "$nvme"
    run io_mixed bench io --nvme "$nvme" --size 4GiB --mixed --pipeline --record-ms 30
    # The disk's rates over as many bytes as the step moves each way (the swap file's ~28 GiB): a
    # virtio disk's short runs are faster than its sustained ones; estimate prices the step at these.
    run io_sustained bench io --nvme "$nvme" --size "${HOST64_IO_SIZE:-28GiB}"
    "$tz" estimate --model "$model" --config "$cfg" --bench-json "$out/io_sustained.json" --json "$out/estimate_host64.json" \
      > "$out/estimate_host64.txt" 2>&1
    grep -E 'predicted step|Result' "$out/estimate_host64.txt"
    python3 benchmarks/disk_inflight.py --path "$nvme" --json "$out/inflight_host64.json" -- \
      python3 benchmarks/train_bench_util.py measure --json "$out/train_host64.measure.json" --log "$out/train_host64.log" \
      --timeout "${HOST64_TIMEOUT:-540}" -- "$tz" train --model-config "$model" --config "$cfg" \
      --data configs/data/tiny_corpus.u16 --steps "${HOST64_STEPS:-6}" --metrics "$out/train_host64.jsonl" || true
    grep -E 'start-up|^step|^done' "$out/train_host64.log" | cut -c1-400
    python3 benchmarks/disk_bound.py --metrics "$out/train_host64.jsonl" --io "$out/io_mixed.json" \
      --estimate "$out/estimate_host64.json" --measure "$out/train_host64.measure.json" --json "$out/disk_bound.json"
    python3 benchmarks/disk_bound.py --metrics "$out/train_host64.jsonl" --io "$out/io_sustained.json" \
      --estimate "$out/estimate_host64.json" --measure "$out/train_host64.measure.json" --json "$out/disk_bound_sustained.json"
    rm -rf "${nvme:?}" ;;
  save_overlap)
    # The save's copy into its write-behind buffers by thread count (the GB/s the optimizer's lead needs).
    "$tz" bench save --dir /tmp --size "${SAVE_COPY_SIZE:-4GiB}" --json "$out/bench_save.json" 2>&1 | tee "$out/bench_save.txt"
    python3 benchmarks/save_overlap.py --tierzero "$tz" --model-config "${SAVE_MODEL:-benchmarks/models/llama_3b.json}" \
      --config "${SAVE_CONFIG:-benchmarks/configs/zero3_7b_compact_24gb.json}" --data configs/data/tiny_corpus.u16 \
      --work /tmp/tz-save-overlap --steps "${SAVE_STEPS:-13}" --save-every "${SAVE_EVERY:-4}" --keep-last 1 \
      --write-behind "${SAVE_WRITE_BEHIND:-auto}" \
      --json "$out/save_overlap.json" 2>&1 | tee "$out/save_overlap.txt"
    cp /tmp/tz-save-overlap/*.log /tmp/tz-save-overlap/*.jsonl "$out/" 2>/dev/null
    rm -rf /tmp/tz-save-overlap ;;
  checkpoint)
    cfg=${CKPT_CONFIG:-benchmarks/configs/zero3_7b_compact_24gb.json}
    nvme=$(config_nvme "$cfg")
    [[ -n $nvme ]] && mkdir -p "$nvme"
    python3 benchmarks/checkpoint_cycle.py --tierzero "$tz" --model-config benchmarks/models/qwen2.5_7b.json --config "$cfg" \
      --data configs/data/tiny_corpus.u16 --work /tmp/tz-cycle --phases "${PHASES:-saved,convert,resumed,unbroken,io}" \
      --json "$out/checkpoint_cycle.json" 2>&1 | tee "$out/checkpoint_cycle.txt"
    cp /tmp/tz-cycle/*.log /tmp/tz-cycle/*.jsonl /tmp/tz-cycle/*.json "$out/" 2>/dev/null ;;
  *) echo "device_suite.sh: unknown suite '$what' (tests | bench | train | layer | checkpoint | save_overlap | host64 | kernels | hf_startup | multigpu | adam | convert | corpus | vs_deepspeed | big)"; exit 2 ;;
esac
