#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install dependencies, build, and run the
# main job on the bundled example: measure (hpcrun) -> recover structure (hpcstruct)
# -> aggregate (hpcprof) -> print (hpcdump) -> report (hpcreport, and the Python API).
# Outputs go to out/demo/.
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
echo "== report: hpcreport --view structure (hpcviewer's flat view: modules, files, functions, loops, lines)"
"$bin/hpcreport" --view structure --top 15 "$out/demo.d" | sed -n '5,$p'
echo "== report: hpcreport --query '**/loop:*' (every loop's calling context, by a call path query)"
"$bin/hpcreport" --query '**/loop:*' --top 8 "$out/demo.d" | sed -n '5,$p'
echo "== Python: the same database in pandas (src/presentation/python/hpctoolkit)"
PYTHONPATH=src/presentation/python /usr/bin/python3 - "$out/demo.d" <<'PY'
import sys
import hpctoolkit
db = hpctoolkit.open(sys.argv[1])
metric = db.metrics["metric"].iloc[0]
print(f"{len(db.contexts)} contexts, {len(db.profiles) - 1} profiles; flat view of {metric}:")
print(db.flat(metric).head(5).to_string(index=False))
print("hot path:", " > ".join(db.contexts.at[c, "name"] for c in db.hot_path(metric)))
q = db.query("**/loop:*", metric)
print(f"loops: {len(q)} contexts, the outermost hold {q.inclusive[q.outermost].sum() / db.total(metric):.1%} of {metric}")
PY
echo "database: $out/demo.d (browse it: $bin/hpcviewer $out/demo.d, or $bin/hpcserver $out/demo.d --port P on a remote machine and an SSH tunnel)"
