#!/usr/bin/env bash
# hpcprof's metrics/default.yaml describes the metrics as the measurements do, as the
# reference hpcprof writes it: descriptions, hidden and exclusive-only metrics, the
# internal accumulators as inputs only and hpcrun's derived metrics (GKER:BLK_THR =
# GKER:BLK_THR_ACUMU / GKER:COUNT, ...) as formulas. Compared with the reference
# databases of the conformance kit: the same roots, the same inputs (in any order; "+"
# quoted or not).
set -euo pipefail
prof=$1 conf=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in small loops-cputime-t loops-cuda-nvidia-t loops-cuda-nvidiapc-t; do
  "$prof" --foreign -o "$tmp/$m.d" "$conf/meas/$m.m" >/dev/null
  ours=$tmp/$m.d/metrics/default.yaml ref=$conf/dbase/$m.nostruct.d/metrics/default.yaml
  roots() { sed -n '/^roots:/,$p' "$1" | sed 's/{"+":/{+:/g'; }
  inputs() { sed -n '/^inputs:/,/^roots:/p' "$1" | sort; }
  diff <(roots "$ours") <(roots "$ref") >"$tmp/d" || { echo "$m: roots differ"; head -20 "$tmp/d"; exit 1; }
  diff <(inputs "$ours") <(inputs "$ref") >"$tmp/d" || { echo "$m: inputs differ"; head -20 "$tmp/d"; exit 1; }
done
grep -q 'name: GKER:BLK_THR$' "$tmp/loops-cuda-nvidia-t.d/metrics/default.yaml"
echo "hpcprof: metrics/default.yaml as the reference's"
