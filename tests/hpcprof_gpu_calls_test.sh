#!/usr/bin/env bash
# GPU calling contexts reconstructed from PC samples, end to end through the tools: a
# measurement of PC samples in the conformance kit's recursion-sm_75 cubin (gen_gpu_calls),
# analysed by hpcprof from its own reading of the cubin. The called functions hang below
# heart()'s two calls into the recursive component, each profile's values at its own shares
# (profile p: 3 + p calls of top1() sampled against 1 of top2()); the database is the same
# at -j1 and -j2, and from hpcprof-mpi (where built); and the same shares with the structure
# files of our hpcstruct run on the measurements (its call sites from the SASS too).
set -euo pipefail
prof=$1 dump=$2 mpi=$3 gen=$4 conf=$5 struct=$6
cubin=$conf/struct/bin/recursion-sm_75-nvcc112-0
[ -f "$cubin" ] || { echo "$cubin not here: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$gen" "$tmp/m" "$cubin" 4
"$prof" -j1 -o "$tmp/d1" "$tmp/m" >/dev/null 2>"$tmp/err1" || { cat "$tmp/err1"; fail "hpcprof -j1"; }
"$prof" -j2 -v -o "$tmp/d2" "$tmp/m" >/dev/null 2>"$tmp/err2" || fail "hpcprof -j2"
grep -q 'GPU calling contexts: 32 PC samples in called device functions, in 4 profiles' "$tmp/err2" ||
  { cat "$tmp/err2"; fail "-v does not count the samples reconstructed"; }
diff -r "$tmp/d1" "$tmp/d2" >/dev/null || fail "-j1 and -j2 databases differ"
mpiexec=$(command -v mpiexec || command -v mpirun || true)
if [ -x "$mpi" ] && [ -n "$mpiexec" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  "$mpiexec" -n 2 "$mpi" -j1 -o "$tmp/dm" "$tmp/m" >/dev/null 2>"$tmp/errm" || { cat "$tmp/errm"; fail "hpcprof-mpi"; }
  diff -r "$tmp/d1" "$tmp/dm" >/dev/null || fail "hpcprof-mpi's database differs from hpcprof's"
  echo "hpcprof-mpi at 2 ranks: the same database"
fi
cat >"$tmp/check.py" <<'PY'
import struct, sys
ctx = {}
for line in open(sys.argv[1]):
    if not line.startswith("ctx "):
        continue
    f = dict(x.split(" ", 1) for x in line.rstrip("\n").split("|"))
    ctx[int(f["ctx"])] = f
values = {}
for line in open(sys.argv[2]):
    if line.startswith("pv "):
        _, p, c, m, bits = line.split()
        values[(int(p), int(c), int(m))] = struct.unpack(">d", bytes.fromhex(bits))[0]
def fail(why):
    print("FAIL:", why)
    sys.exit(1)
def kids(parent, pred=lambda f: True):
    return [c for c, f in ctx.items() if int(f["parent"]) == parent and pred(f)]
def fn(parent, name):
    k = kids(parent, lambda f: name in f["fn"])
    if len(k) != 1:
        fail(f"{len(k)} contexts of {name} below {parent}: {[ctx[c]['fn'] for c in kids(parent)]}")
    return k[0]
def line(parent, n):
    k = kids(parent, lambda f: f["line"] == str(n) and f["lex"] == "2")
    if len(k) != 1:
        fail(f"{len(k)} lines {n} below {parent}")
    return k[0]
op = [c for c, f in ctx.items() if f["fn"] == "<gpu kernel>"]
if len(op) != 1:
    fail(f"{len(op)} <gpu kernel> contexts")
below = sorted(ctx[c]["fn"] for c in kids(op[0]))
if below != ["kernmain()"]:
    fail(f"below <gpu kernel>: {below} (the called functions must hang below their calls)")
heart = fn(line(fn(op[0], "kernmain()"), 51), "heart()")
via1, via2 = line(heart, 44), line(heart, 45)
EXEC = 3  # GINS, execution scope
for p in range(4):
    for site, share in ((via1, (3 + p) / (4 + p)), (via2, 1 / (4 + p))):
        for name, samples in (("top1(", 40), ("common2(", 80 + 1 + 1)):  # its own calls too
            got = values.get((p + 1, fn(site, name), EXEC), 0.0)
            if abs(got - samples * share) > 1e-9 * samples:
                fail(f"profile {p + 1}: {name} below heart() line {ctx[site]['line']}: {got}, not {samples * share}")
        slow = fn(line(fn(site, "top2("), 37), "__cuda_sm20_div_f64_slowpath_v2")
        got = values.get((p + 1, slow, EXEC), 0.0)
        if abs(got - 16 * share) > 1e-9:
            fail(f"profile {p + 1}: slow path below top2(): {got}, not {16 * share}")
PY
check() {  # check DB WHAT
  "$dump" "$1/meta.db" >"$tmp/meta"
  "$dump" "$1/profile.db" >"$tmp/values"
  /usr/bin/python3 "$tmp/check.py" "$tmp/meta" "$tmp/values" || fail "$2"
  echo "hpcprof ($2): GPU calling contexts reconstructed, each profile at its own shares"
}
check "$tmp/d1" "its own reading of the cubin"
"$struct" --gpucfg=yes "$tmp/m" >/dev/null 2>&1 || fail "hpcstruct on the measurements"
ls "$tmp/m/structs/"*.hpcstruct >/dev/null || fail "hpcstruct wrote no structure file"
grep -q '<C ' "$tmp/m/structs/"*.hpcstruct || fail "hpcstruct's file has no call sites"
"$prof" -j2 -o "$tmp/d3" "$tmp/m" >/dev/null 2>&1 || fail "hpcprof with structs/"
check "$tmp/d3" "hpcstruct's structure files"
