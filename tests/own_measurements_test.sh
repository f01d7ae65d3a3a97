#!/usr/bin/env bash
# hpcprof on measurements made by our own hpcrun, with and without our hpcstruct:
# - the known-answer workload's 50/30/20 split comes out within 3 points of the truth the
#   program measured itself, and its inlined helper and that helper's loop are in the database;
# - threaded and OpenMP workloads give one profile per thread;
# - every database is the same at -j1 and -j2.
# The databases are read with the reference checker's reader (db_summary.py), not ours.
set -euo pipefail
bin=$1 wl=$2 conf=$3 here=$(dirname "$0")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
summary() { PYTHONPATH=$conf /usr/bin/python3 "$here/db_summary.py" "$1"; }
same() {  # same database at -j1 and -j2
  "$bin/hpcprof" -j1 "${@:2}" -o "$tmp/$1.j1.d" >/dev/null
  "$bin/hpcprof" -j2 "${@:2}" -o "$tmp/$1.j2.d" >/dev/null
  "$bin/hpcdump" "$tmp/$1.j1.d" >"$tmp/a"
  "$bin/hpcdump" "$tmp/$1.j2.d" >"$tmp/b"
  cmp -s "$tmp/a" "$tmp/b" || { diff "$tmp/a" "$tmp/b" | head; fail "$1: -j1 and -j2 differ"; }
}

"$bin/hpcrun" -e REALTIME@250 -o "$tmp/ka.m" "$wl/known_answer-gcc" 2 >/dev/null 2>"$tmp/truth"
read -r _ t50 t30 t20 < <(grep '^wall ' "$tmp/truth")  # REALTIME: the wall-clock split
same ka.nostruct "$tmp/ka.m"               # no structure files: the binaries' own DWARF
# -v says how much of the binaries was analysed: some procedures, not all.
"$bin/hpcprof" -j2 -v -o "$tmp/kav.d" "$tmp/ka.m" >/dev/null 2>"$tmp/kav.err"
read -r analysed total < <(sed -nE 's/^hpcprof: analysed ([0-9]+) of the ([0-9]+) procedures of [0-9]+ measured binaries .*/\1 \2/p' "$tmp/kav.err")
[ -n "${analysed:-}" ] && [ "$analysed" -gt 0 ] && [ "$analysed" -lt "$total" ] ||
  { cat "$tmp/kav.err"; fail "-v: no line saying some but not all measured procedures were analysed"; }
"$bin/hpcstruct" "$tmp/ka.m" >/dev/null 2>&1
same ka.struct "$tmp/ka.m"                 # with structs/ from our hpcstruct
# -v counts the structure files it checked: those of structs/, one a measured binary.
"$bin/hpcprof" -j2 -v -o "$tmp/kasv.d" "$tmp/ka.m" >/dev/null 2>"$tmp/kasv.err"
nstructs=$(ls "$tmp/ka.m/structs"/*.hpcstruct | wc -l)
grep -qE "^hpcprof: found [0-9]+ profiles; checked and indexed $nstructs structure files \([0-9.]+ MB\)  [0-9.]+ s$" "$tmp/kasv.err" ||
  { cat "$tmp/kasv.err"; fail "-v: no line counting the $nstructs structure files of structs/"; }
for db in ka.nostruct ka.struct; do
  summary "$tmp/$db.j1.d" >"$tmp/$db.json"
  /usr/bin/python3 - "$tmp/$db.json" "$t50" "$t30" "$t20" "$db" <<'PY' || fail "$db"
import json, sys
s = json.load(open(sys.argv[1]))["functions"]
truth = [float(x) for x in sys.argv[2:5]]
def get(name):
    return [v for k, v in s.items() if k.split(" ")[0] == name]
vals = [sum(v["inclusive"] for v in get(n)) for n in ("fifty", "thirty", "twenty")]
total = sum(vals)
shares = [v / total for v in vals]
print(sys.argv[5], "shares", " ".join(f"{x:.3f}" for x in shares), "truth", " ".join(f"{x:.3f}" for x in truth))
assert all(abs(a - b) <= 0.03 for a, b in zip(shares, truth)), "split off by more than 3 points"
for n in ("fifty", "thirty", "twenty"):
    assert sum(v["inlined"] for v in get(n)) >= 1, f"no inlined code under {n}"
assert sum(v["loops"] for v in get("spin")) >= 1, "no loop in the inlined spin()"
PY
done

# Source files the database attributes to are copied under src/ at their absolute paths.
src=$(cd "$(dirname "$0")/.." && pwd)/src/measurement/workloads/known_answer.c
cmp -s "$src" "$tmp/ka.struct.j1.d/src$src" || fail "no copy of $src in the database's src/"

for w in threads omp; do
  "$bin/hpcrun" -o "$tmp/$w.m" "$wl/$w-gcc" 0.5 >/dev/null 2>&1
  n=$(ls "$tmp/$w.m"/*.hpcrun | wc -l)
  same "$w" "$tmp/$w.m"
  p=$(summary "$tmp/$w.j1.d" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["profiles"])')
  [ "$p" = "$n" ] || fail "$w: $n thread profiles measured, $p in the database"
  echo "$w: $n profiles"
done
# On a terminal (a pseudo-terminal here) a progress line, erased at the end; same database.
/usr/bin/python3 -c 'import pty, sys; pty.spawn(sys.argv[1:])' "$bin/hpcprof" -j2 -o "$tmp/tty.d" "$tmp/threads.m" \
  >"$tmp/tty.out" </dev/null
grep -q 'hpcprof: reading calling contexts [0-9]*/505' "$tmp/tty.out" || fail "no progress line on a terminal"
"$bin/hpcdump" "$tmp/tty.d" >"$tmp/b"
"$bin/hpcdump" "$tmp/threads.j1.d" >"$tmp/a"
cmp -s "$tmp/a" "$tmp/b" || fail "database differs with the progress line on"
# A binary rebuilt after the run (here: its modification time moved past the run's end) is
# said by hpcprof and by hpcstruct on the measurements; the binary as it ran is not.
cp "$wl/recursion-gcc" "$tmp/rebuilt"
"$bin/hpcrun" -o "$tmp/rebuilt.m" "$tmp/rebuilt" 0.05 >/dev/null 2>&1
"$bin/hpcprof" -o "$tmp/rebuilt.ok.d" "$tmp/rebuilt.m" 2>"$tmp/err"
grep -q "after the measurement ended" "$tmp/err" && fail "a binary not changed since the run was said to be: $(cat "$tmp/err")"
touch -d "+1 hour" "$tmp/rebuilt"
"$bin/hpcprof" -o "$tmp/rebuilt.d" "$tmp/rebuilt.m" 2>"$tmp/err"
grep -q "warning: $tmp/rebuilt: modified .*, after the measurement ended (.*): if it was rebuilt" "$tmp/err" ||
  fail "hpcprof did not say the binary changed since the run: $(cat "$tmp/err")"
"$bin/hpcstruct" "$tmp/rebuilt.m" >/dev/null 2>"$tmp/err"
grep -q "hpcstruct: warning: $tmp/rebuilt: modified .*, after the measurement ended" "$tmp/err" ||
  fail "hpcstruct did not say the binary changed since the run: $(cat "$tmp/err")"
# Code outside every module (jit.c's generated functions) is named from the perf map the
# process wrote, copied into the measurement's jit/; without one it is <generated code>.
# The later of two lines covering an address names it.
"$bin/hpcrun" -e CPUTIME@1000 -o "$tmp/jit.m" "$wl/jit-gcc" 1 map >/dev/null 2>&1
"$bin/hpcrun" -e CPUTIME@1000 -o "$tmp/jitbare.m" "$wl/jit-gcc" 1 >/dev/null 2>&1
pid=$(ls "$tmp/jit.m"/*.hpcrun | sed -E 's/.*-([0-9]+)-0\.hpcrun$/\1/')
rm -f "/tmp/perf-$pid.map"  # the workload's own file, as a JIT leaves it
cmp -s <(grep -c jit_ "$tmp/jit.m/jit/jit-gcc-$pid-0.map") <(echo 4) || fail "jit: no copy of the perf map in jit/"
[ ! -e "$tmp/jitbare.m/jit" ] || fail "jit: a jit/ copy where the process wrote no perf map"
"$bin/hpcstruct" "$tmp/jit.m" >/dev/null 2>"$tmp/err" || fail "hpcstruct on a measurement with generated code: $(cat "$tmp/err")"
same jit "$tmp/jit.m"
same jitbare "$tmp/jitbare.m"
for db in jit jitbare; do
  summary "$tmp/$db.j1.d" >"$tmp/$db.json"
  /usr/bin/python3 - "$tmp/$db.json" "$db" <<'PY' || fail "$db"
import json, sys
f = json.load(open(sys.argv[1]))["functions"]
inc = lambda n: f.get(n, {}).get("inclusive", 0.0)
total = inc("main [jit-gcc]")
if sys.argv[2] == "jit":
    a, b = inc("jit_innerA(long) [compiled]"), inc("jit_innerB")
    print("jit: innerA", round(a, 3), "innerB", round(b, 3), "of", round(total, 3))
    assert a + b >= 0.9 * total and min(a, b) >= 0.25 * total, "generated code not named from the perf map"
    assert "jit_page_before_reuse" not in f and "<generated code>" not in f, sorted(f)
else:
    g = inc("<generated code>")
    print("jitbare: <generated code>", round(g, 3), "of", round(total, 3))
    assert g >= 0.9 * total, sorted(f)
assert total > 0 and inc("level3 [jit-gcc]") >= 0.9 * total, "generated code not below level3"
PY
done
# hpcrun -a python: Python frames (function, file, line) in place of the interpreter's, the
# C frames of what they call below them (numpy's, then BLAS's dgemm), on the main thread and
# on a thread of the threading module; without -a python, none. Read with the reference
# checker's reader.
pyw=$(cd "$(dirname "$0")/.." && pwd)/src/measurement/workloads/python_work.py
/usr/bin/python3 "$pyw" 1 >"$tmp/py.bare"
"$bin/hpcrun" -a python -e CPUTIME@1000 -o "$tmp/py.m" /usr/bin/python3 "$pyw" 1 >"$tmp/py.out" 2>"$tmp/err" ||
  fail "hpcrun -a python: $(cat "$tmp/err")"
cmp -s "$tmp/py.bare" "$tmp/py.out" || fail "-a python changed the program's output: $(cat "$tmp/py.out")"
"$bin/hpcrun" -e CPUTIME@1000 -o "$tmp/pyc.m" /usr/bin/python3 "$pyw" 0.3 >/dev/null 2>&1
"$bin/hpcstruct" "$tmp/py.m" >/dev/null 2>"$tmp/err" || fail "hpcstruct on a Python measurement: $(cat "$tmp/err")"
same py "$tmp/py.m"
"$bin/hpcprof" -o "$tmp/pyc.d" "$tmp/pyc.m" >/dev/null
[ -f "$tmp/py.j1.d/src$pyw" ] || fail "-a python: no copy of the Python source in the database's src/"
PYTHONPATH=$conf /usr/bin/python3 - "$tmp/py.j1.d" "$tmp/pyc.d" "$pyw" <<'PY' || fail "-a python"
import sys
from pathlib import Path
from hpctesttool.formats import from_path

def paths(db_path):
    db = from_path(Path(db_path))
    meta, prof = db.meta, db.profile
    metric = meta.metrics.metrics[0]
    inc = next(si.prop_metric_id for si in metric.scope_insts if si.scope.scope_name == "execution")
    summary = next(p for p in prof.profile_infos.profiles if p.flags.is_summary)
    out = {}  # path of function names (and file:line of Python lines) -> inclusive
    def walk(ctx, path):
        name = None
        if ctx.function is not None and ctx.lexical_type is not None and ctx.lexical_type.name == "function":
            name = ctx.function.name
        elif ctx.lexical_type is not None and ctx.lexical_type.name == "line" and ctx.file is not None:
            name = f"{Path(ctx.file.path).name}:{ctx.line}"
        here = path + [name] if name else path
        if name:
            out[tuple(here)] = out.get(tuple(here), 0.0) + summary.values.get(ctx.ctx_id, {}).get(inc, 0.0)
        for c in ctx.children:
            walk(c, here)
    for ep in meta.context.entry_points:
        for c in ep.children:
            walk(c, [])
    total = sum(summary.values.get(ep.ctx_id, {}).get(inc, 0.0) for ep in meta.context.entry_points)
    return out, total

out, total = paths(sys.argv[1])
src = Path(sys.argv[3]).name
def inclusive(*tail):  # summed over paths ending in tail
    return sum(v for p, v in out.items() if p[-len(tail):] == tail)
def under(ancestor, name):  # a path through ancestor to name
    return sum(v for p, v in out.items() if p[-1] == name and ancestor in p[:-1])
dgemm = inclusive("dgemm_ [libblas.so.3]")
py_inner = inclusive("inner")
print(f"-a python: total {total:.3f}, coro {inclusive('coro'):.3f}, dgemm {dgemm:.3f} ({under('blas', 'dgemm_ [libblas.so.3]'):.3f} below blas),",
      f"inner {py_inner:.3f} ({under('outer', 'inner'):.3f} below outer,",
      f"{under('worker', 'inner'):.3f} below worker)")
assert dgemm > 0.15 * total and py_inner > 0.15 * total, "the product's and Python's shares"
assert under("blas", "dgemm_ [libblas.so.3]") >= 0.95 * dgemm, "dgemm not below the Python function blas()"
call = 1 + next(i for i, l in enumerate(open(sys.argv[3])) if l.startswith("b = blas("))
assert any(p[-2:] == ("<module>", f"{src}:{call}") for p in out), f"<module>'s line {call} (blas's call)"
assert under("outer", "inner") >= 0.95 * py_inner, "inner not below outer"
assert under("worker", "inner") > 0, "no Python frames on the threading module's thread"
assert under("raw_worker", "inner") > 0, "no Python frames on a thread _thread started"
assert inclusive("coro") > 0.03 * total, "the coroutine stepped by asyncio's C code"
assert under("child_work", "inner") > 0, "no Python frames in the forked child"
assert not any(p[-1].startswith("_PyEval_EvalFrameDefault") and any(f in p for f in ("inner", "coro")) for p in out), \
    "the interpreter's frames below Python frames"
out, total = paths(sys.argv[2])
assert not any(p[-1] in ("inner", "blas", "outer") for p in out), "Python frames without -a python"
PY

echo "own measurements: known-answer split, inlined code and loops, threads, -j1 = -j2, a binary changed since, generated code, Python"
