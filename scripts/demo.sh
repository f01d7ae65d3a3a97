#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build, and run the
# main job on the bundled example: measure (hpcrun) -> recover structure (hpcstruct)
# -> aggregate (hpcprof) -> print (hpcdump) -> report (hpcreport). Outputs go to out/demo/.
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

echo "== structure: hpcstruct $out/demo.m (every binary the profiles used)"
"$bin/hpcstruct" "$out/demo.m"

echo "== analyse: hpcprof"
"$bin/hpcprof" -o "$out/demo.d" "$out/demo.m"

echo "== dump: hpcdump $out/demo.d (metrics and the start of the calling-context tree)"
"$bin/hpcdump" "$out/demo.d" | grep -v '^[pc]v ' | sed -n '1,40p'

echo "== report: hpcreport $out/demo.d (hottest call paths and functions)"
"$bin/hpcreport" --top 25 "$out/demo.d"
echo "database: $out/demo.d (browse it: $bin/hpcviewer $out/demo.d, or $bin/hpcserver $out/demo.d --port P on a remote machine and an SSH tunnel)"
