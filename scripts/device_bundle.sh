#!/usr/bin/env bash
# On the GPU machine, at the end of a run's command: packs a suite's OUTDIR into one file under $OUT,
# since the run's copy-back brings a few files only (8 in 2026-12-06's leases: the rest are named
# "left out"). Every file under OUTDIR below BUNDLE_MAX_MB (default 20 MiB: metrics, tables, JSON, logs;
# not a model's safetensors) goes into $OUT/NAME.tar.gz, NAME the folder's name unless given.
#   scripts/device_bundle.sh OUTDIR [NAME]
set -euo pipefail
dir=${1:?usage: device_bundle.sh OUTDIR [NAME]}
name=${2:-$(basename "$dir")}
: "${OUT:?device_bundle.sh runs inside a device run, where OUT is the folder that comes back}"
list=$(mktemp)
(cd "$dir" && find . -type f -size -"${BUNDLE_MAX_MB:-20}"M | sort) > "$list"
tar czf "$OUT/$name.tar.gz" -C "$dir" -T "$list"
echo "device_bundle: $(wc -l < "$list") files of $dir -> \$OUT/$name.tar.gz ($(du -h "$OUT/$name.tar.gz" | cut -f1))"
rm -f "$list"
