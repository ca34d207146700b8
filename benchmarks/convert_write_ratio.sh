#!/usr/bin/env bash
# `tierzero convert` write throughput against `tierzero bench io`'s sequential O_DIRECT write on the
# same file system, interleaved 3 times in one run (issue #4's target: write_ratio >= 0.8).
#
#   benchmarks/convert_write_ratio.sh [GB] [--json FILE]    GB of fp32 weights (default 6)
#
# The input is a synthetic ZeRO-3 engine checkpoint (world size 4, Llama-like layers, one fp32
# state) from tests/checkpoint/make_engine_checkpoint, checked with `tierzero checkpoint verify`
# and read once so the page cache holds it: the comparison is of the writer, not of the disk's
# read speed (needs RAM for GB of page cache). convert writes bf16 (half the input); bench io
# writes as many bytes with convert's pattern: BLOCK pieces (1 MiB), 32 in flight, one io_uring
# ring, O_DIRECT. convert_s = the conversion as convert reports it (output checks, reading, converting,
# writing, fsync, rename and directory fsync: everything but starting the program, which maps no
# LibTorch: `tierzero` leaves that to tierzero-torch); out_GB/s = output file bytes / convert_s; write_ratio =
# out_GB/s / bench io's write GB/s; wall_ratio = the same with the process's wall time (wall_s);
# finish_s = convert's time after its last tensor went to the writer (last writes, fdatasync,
# rename, directory fsyncs); new_file_ratio = out_GB/s / bench io --new-file --end-fsync's write
# GB/s: the same work as convert's writes (a new preallocated file, sized up front, fdatasync'd
# inside the timing) where bench io's default overwrites blocks a first untimed pass allocated
# (on a thin-provisioned virtual disk, new blocks cost the host an allocation each). correct:
# every output tensor
# equals the generator's values rounded to bf16, bit for bit (`make_engine_checkpoint --check`),
# and, in run 1 when python has torch and safetensors, torch's .to(bfloat16) of them
# (check_converted.py).
#
# Needs about 2.5 x GB of free disk under the scratch folder. Env: TIERZERO_CONVERT_BLOCK (the
# write size of both programs, default 1MiB), TIERZERO_BUILD (build folder,
# default build), TIERZERO_PYTHON (default python3), TIERZERO_BENCH_DIR (scratch, on the disk to
# measure, not tmpfs; default /tmp/tierzero-convert-write-ratio, removed at the end unless KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."

gigabytes=6
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json="$2"; shift 2 ;;
    *) gigabytes="$1"; shift ;;
  esac
done
build="${TIERZERO_BUILD:-build}"
tz="$build/tools/tierzero"
gen="$build/tests/checkpoint/make_engine_checkpoint"
py="${TIERZERO_PYTHON:-python3}"
work="${TIERZERO_BENCH_DIR:-/tmp/tierzero-convert-write-ratio}"
for f in "$tz" "$gen"; do
  [[ -x "$f" ]] || { echo "convert_write_ratio: $f not built (cmake --build $build --target tierzero make_engine_checkpoint)"; exit 1; }
done

rm -rf "$work"
mkdir -p "$work"
trap '[[ "${KEEP:-0}" == 1 ]] || rm -rf "$work"' EXIT
fs_type="$(stat -f -c %T "$work")"
[[ "$fs_type" != tmpfs ]] || { echo "convert_write_ratio: $work is on tmpfs; set TIERZERO_BENCH_DIR to a folder on the disk"; exit 1; }

# Llama-like layers of hidden 2048, intermediate 5632: 205.5 MB of fp32 each, plus 524.3 MB of
# embeddings, head and final norm.
layers="$(awk -v g="$gigabytes" 'BEGIN { l = int((g * 1e9 - 524.3e6) / 205.5e6 + 0.5); print (l < 1 ? 1 : l) }')"
ckpt="$work/ckpt"
echo "# generating a ${gigabytes} GB ZeRO-3 engine checkpoint ($layers layers) in $ckpt ..."
"$gen" "$ckpt" --layers "$layers" --world 4 --stage 3 --states 1 2> "$work/generate.log" ||
  { echo "convert_write_ratio: make_engine_checkpoint failed:"; tail -5 "$work/generate.log"; exit 1; }
"$tz" checkpoint verify "$ckpt" > "$work/verify.log" 2>&1 ||
  { echo "convert_write_ratio: the generated checkpoint does not verify:"; tail -5 "$work/verify.log"; exit 1; }
sync  # the generator's writes reach the disk now, not during run 1
cat "$ckpt"/global_step1000/*.bin > /dev/null  # warm the page cache
in_bytes="$(cat "$ckpt"/global_step1000/*.bin | wc -c)"
out_mib="$(awk -v b="$in_bytes" 'BEGIN { printf "%d", b / 2 / 1048576 + 1 }')"
block="${TIERZERO_CONVERT_BLOCK:-1MiB}"
bench_flags=(--path "$work" --size "${out_mib}MiB" --block-size "$block" --queue-depth 32 --threads 1)
convert_flags=(--dtype bf16 --no-progress --aio-block-size "$block" --aio-queue-depth 32)
has_checker=0
"$py" -c 'import torch, safetensors' > /dev/null 2>&1 && has_checker=1

wall_s() { awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$1"; }
rss_kb() { awk -F': ' '/Maximum resident set size/ { print $2 }' "$1"; }

printf '# tierzero convert vs tierzero bench io sequential write, on %s (%s cores, %s GiB RAM, %s at %s)\n' \
  "$(hostname)" "$(nproc)" "$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" "$fs_type" "$work"
printf '# input: ZeRO-3, world size 4, %s layers, %.2f GB fp32 in 4 rank files, verified, page cache warm\n' \
  "$layers" "$(awk -v b="$in_bytes" 'BEGIN { print b / 1e9 }')"
printf '# convert: %s convert CKPT OUT %s\n' "$tz" "${convert_flags[*]}"
printf '# bench io: %s bench io %s [--new-file --end-fsync]\n' "$tz" "${bench_flags[*]}"
printf '%-5s %7s %10s %9s %9s %12s %12s %12s %10s %14s %10s %8s\n' "# run" "wall_s" "convert_s" "finish_s" "out_GB/s" \
  "io_write_GB/s" "io_new_GB/s" "write_ratio" "wall_ratio" "new_file_ratio" "peak_RSS" "correct"
rows=()
ratios=()
new_ratios=()
all_correct=1
for run in 1 2 3; do
  "$tz" bench io "${bench_flags[@]}" > "$work/io_$run.log" 2>&1 ||
    { echo "convert_write_ratio: bench io failed:"; tail -5 "$work/io_$run.log"; exit 1; }
  io="$(awk '/^# best write:/ { print $4 }' "$work/io_$run.log")"
  "$tz" bench io "${bench_flags[@]}" --new-file --end-fsync > "$work/io_new_$run.log" 2>&1 ||
    { echo "convert_write_ratio: bench io --new-file failed:"; tail -5 "$work/io_new_$run.log"; exit 1; }
  io_new="$(awk '/^# best write:/ { print $4 }' "$work/io_new_$run.log")"
  rm -rf "$work/out"
  /usr/bin/time -v -o "$work/convert_$run.time" "$tz" convert "$ckpt" "$work/out" "${convert_flags[@]}" \
    > "$work/convert_$run.log" 2>&1 || { echo "convert_write_ratio: convert failed:"; tail -5 "$work/convert_$run.log"; exit 1; }
  out_bytes="$(cat "$work"/out/*.safetensors | wc -c)"
  correct=OK
  "$gen" --check "$ckpt" "$work/out" > "$work/check_$run.log" 2>&1 || correct=FAIL
  if [[ "$has_checker" == 1 && "$correct" == OK && "$run" == 1 ]]; then  # the slow one, once
    "$py" tests/checkpoint/check_converted.py --safetensors-only "$ckpt/spec.json" "$work/out:bf16" \
      >> "$work/check_$run.log" 2>&1 || correct=FAIL
  fi
  [[ "$correct" == OK ]] || all_correct=0
  wall="$(wall_s "$work/convert_$run.time")"
  s="$(sed -nE 's/^wrote .* in ([0-9.]+) s \(last .*/\1/p' "$work/convert_$run.log")"
  fin="$(sed -nE 's/^wrote .* s \(last ([0-9.]+) s: .*/\1/p' "$work/convert_$run.log")"
  kb="$(rss_kb "$work/convert_$run.time")"
  row="$(awk -v r="$run" -v w="$wall" -v s="$s" -v f="$fin" -v b="$out_bytes" -v io="$io" -v ios="$io_new" \
    -v kb="$kb" -v c="$correct" 'BEGIN {
    printf "%5d %7.2f %10.2f %9.2f %9.2f %12.2f %12.2f %12.2f %10.2f %14.2f %6.0f MiB %8s", r, w, s, f, b / 1e9 / s, io,
      ios, b / 1e9 / s / io, b / 1e9 / w / io, b / 1e9 / s / ios, kb / 1024, c }')"
  echo "$row"
  rows+=("$row")
  ratios+=("$(awk -v s="$s" -v b="$out_bytes" -v io="$io" 'BEGIN { print b / 1e9 / s / io }')")
  new_ratios+=("$(awk -v s="$s" -v b="$out_bytes" -v io="$io_new" 'BEGIN { print b / 1e9 / s / io }')")
done
median="$(printf '%s\n' "${ratios[@]}" | sort -g | sed -n 2p)"
verdict="$(awk -v m="$median" 'BEGIN { print (m >= 0.8) ? "OK" : "FAIL" }')"
[[ "$all_correct" == 1 ]] || verdict=FAIL
new_median="$(printf '%s\n' "${new_ratios[@]}" | sort -g | sed -n 2p)"
printf '# median new_file_ratio %.2f (convert against bench io doing the same work: new file, fdatasync)\n' "$new_median"
printf '# median write_ratio %.2f; target >= 0.80 with every output correct: %s\n' "$median" "$verdict"

if [[ -n "$json" ]]; then
  printf '%s\n' "${rows[@]}" | awk -v host="$(hostname)" -v gb="$gigabytes" -v inb="$in_bytes" -v m="$median" -v nm="$new_median" -v v="$verdict" '
    BEGIN { printf "{\"benchmark\": \"convert_write_ratio\", \"host\": \"%s\", \"fp32_GB\": %s, \"input_bytes\": %s, \"runs\": [", host, gb, inb }
    { printf "%s{\"run\": %d, \"wall_s\": %s, \"convert_s\": %s, \"finish_s\": %s, \"out_GBps\": %s, \"bench_io_write_GBps\": %s, \"bench_io_new_file_write_GBps\": %s, \"write_ratio\": %s, \"wall_ratio\": %s, \"new_file_ratio\": %s, \"peak_RSS_MiB\": %s, \"correct\": \"%s\"}",
        (NR > 1 ? ", " : ""), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13 }
    END { printf "], \"median_write_ratio\": %s, \"median_new_file_ratio\": %s, \"target\": 0.8, \"verdict\": \"%s\"}\n", m, nm, v }' > "$json"
  echo "# JSON written to $json"
fi
