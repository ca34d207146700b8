#!/usr/bin/env bash
# `tierzero convert` against DeepSpeed's own zero_to_fp32.py on one multi-GB DeepSpeed ZeRO-3
# checkpoint (world size 4, bf16 run, Llama-like layers), measured in the same run on the same
# files with /usr/bin/time -v: wall time, peak RSS, throughput, and a correctness column that
# compares every output tensor bit for bit (tierzero fp32 == zero_to_fp32; tierzero bf16 ==
# zero_to_fp32 rounded to bf16 by torch; integer buffers equal, dtype kept).
#
#   benchmarks/convert_vs_zero_to_fp32.sh [GB]     GB of fp32 weights (default 3)
#
# Needs about 4 x GB of free disk under the scratch folder and 2.5 x GB of RAM (zero_to_fp32 holds
# the model). Env: TIERZERO_PYTHON (python with torch, deepspeed, safetensors, huggingface_hub;
# default python3), TIERZERO_BIN (default build/tools/tierzero), TIERZERO_BENCH_DIR (scratch,
# default /tmp/tierzero-convert-bench, removed at the end unless KEEP=1). Both tools read the
# checkpoint from a warm page cache (it is read once before the first run), so the comparison is
# of the programs, not of the disk.
set -euo pipefail
cd "$(dirname "$0")/.."

gigabytes="${1:-3}"
py="${TIERZERO_PYTHON:-python3}"
tz="${TIERZERO_BIN:-build/tools/tierzero}"
work="${TIERZERO_BENCH_DIR:-/tmp/tierzero-convert-bench}"
[[ -x "$tz" ]] || { echo "convert_vs_zero_to_fp32: $tz not built (cmake --build build --target tierzero)"; exit 1; }
zero_to_fp32="$("$py" -c 'import deepspeed.utils.zero_to_fp32 as z; print(z.__file__)' 2>/dev/null | tail -1)"
[[ -f "$zero_to_fp32" ]] || { echo "convert_vs_zero_to_fp32: $py cannot import deepspeed (pip install deepspeed)"; exit 1; }

rm -rf "$work"
mkdir -p "$work"
trap '[[ "${KEEP:-0}" == 1 ]] || rm -rf "$work"' EXIT
ckpt="$work/ckpt"
echo "# generating a ${gigabytes} GB ZeRO-3 checkpoint in $ckpt ..."
"$py" tests/checkpoint/make_deepspeed_fixture.py "$ckpt" --bench "$gigabytes" 2>&1 | grep -v WARNING || true
# DeepSpeed copies the script into each checkpoint folder and users run that copy (run from its
# package folder, deepspeed/utils/torch.py would shadow torch).
cp "$zero_to_fp32" "$ckpt/zero_to_fp32.py"
cat "$ckpt"/global_step1/* > /dev/null  # warm the page cache for both tools

# run NAME OUT CMD...: runs CMD under /usr/bin/time -v, keeping its report in $work/NAME.time.
run() {
  local name="$1"
  shift
  /usr/bin/time -v -o "$work/$name.time" "$@" > "$work/$name.log" 2>&1 ||
    { echo "convert_vs_zero_to_fp32: $name failed:"; tail -20 "$work/$name.log"; exit 1; }
}
wall_s() { awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$1"; }
rss_kb() { awk -F': ' '/Maximum resident set size/ { print $2 }' "$1"; }

run zero_to_fp32 env TQDM_DISABLE=1 "$py" "$ckpt/zero_to_fp32.py" "$ckpt" "$work/out_ds" --safe_serialization
run tierzero_fp32 "$tz" convert "$ckpt" "$work/out_tz32" --dtype fp32 --no-progress
run tierzero_bf16 "$tz" convert "$ckpt" "$work/out_tz16" --dtype bf16 --no-progress

# Correctness: every tensor, one at a time (safetensors mmaps), compared as raw bits.
check() {
  "$py" - "$work/out_ds" "$1" "$2" <<'EOF' 2>/dev/null | tail -1
import glob, sys, torch
from safetensors import safe_open
def tensors(d):
    handles = [safe_open(f, "pt") for f in sorted(glob.glob(d + "/*.safetensors"))]
    return {k: h for h in handles for k in h.keys()}
ref, ours, dtype = tensors(sys.argv[1]), tensors(sys.argv[2]), sys.argv[3]
ok = ref.keys() == ours.keys() and len(ref) > 0
for name in ref if ok else []:
    want = ref[name].get_tensor(name)
    got = ours[name].get_tensor(name)
    if not want.is_floating_point():  # integer buffers: kept as they are by both tools
        ok = ok and got.dtype == want.dtype and torch.equal(got, want)
        continue
    want = want.to(torch.bfloat16) if dtype == "bf16" else want
    ok = ok and got.dtype == want.dtype and got.shape == want.shape and torch.equal(got.view(torch.int16 if dtype == "bf16" else torch.int32), want.view(torch.int16 if dtype == "bf16" else torch.int32))
print("OK" if ok else "FAIL")
EOF
}
correct_32="$(check "$work/out_tz32" fp32)"
correct_16="$(check "$work/out_tz16" bf16)"

model_bytes="$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['metadata']['total_size'])" "$work/out_ds/model.safetensors.index.json" 2>/dev/null ||
  du -b "$work/out_ds/model.safetensors" | cut -f1)"
ds_s="$(wall_s "$work/zero_to_fp32.time")"
ds_kb="$(rss_kb "$work/zero_to_fp32.time")"
printf '# tierzero convert vs DeepSpeed %s zero_to_fp32.py, in one run on %s (%s cores, %s GiB RAM)\n' \
  "$("$py" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1)" "$(hostname)" "$(nproc)" \
  "$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)"
printf '# checkpoint: ZeRO-3, world size 4, bf16 run, %s of fp32 weights (%s GB), page cache warm\n' \
  "$(du -sh "$ckpt/global_step1" | cut -f1)" "$(awk -v b="$model_bytes" 'BEGIN { printf "%.2f", b / 1e9 }')"
printf '%-36s %9s %12s %9s %9s %10s %8s\n' "# tool" "wall_s" "peak_RSS" "GB/s" "speedup" "RSS_ratio" "correct"
row() {  # name time_file correct
  local s kb
  s="$(wall_s "$2")"
  kb="$(rss_kb "$2")"
  awk -v n="$1" -v s="$s" -v kb="$kb" -v b="$model_bytes" -v ds="$ds_s" -v dkb="$ds_kb" -v c="$3" 'BEGIN {
    printf "%-36s %9.2f %9.2f GiB %9.2f %8.1fx %9.2fx %8s\n", n, s, kb / 1048576, b / 1e9 / s, ds / s, dkb / kb, c }'
}
row "zero_to_fp32.py --safe_serialization" "$work/zero_to_fp32.time" "ref"
row "tierzero convert --dtype fp32" "$work/tierzero_fp32.time" "$correct_32"
row "tierzero convert --dtype bf16" "$work/tierzero_bf16.time" "$correct_16"
verdict="$(awk -v ds="$ds_s" -v s="$(wall_s "$work/tierzero_fp32.time")" -v dkb="$ds_kb" -v kb="$(rss_kb "$work/tierzero_fp32.time")" \
  'BEGIN { print (ds / s >= 5 && dkb / kb >= 4) ? "OK" : "FAIL" }')"
[[ "$correct_32" == OK && "$correct_16" == OK ]] || verdict=FAIL
echo "# GB/s: fp32 model bytes / wall time. Targets (fp32 row): speedup >= 5x, RSS_ratio >= 4x: $verdict"
