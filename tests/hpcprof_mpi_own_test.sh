#!/usr/bin/env bash
# hpcprof-mpi on measurements made by our own hpcrun (a threaded workload, one profile per
# thread, with and without our hpcstruct's structure files) writes the database hpcprof -j1
# writes: every file byte-equal (diff -r, source copies included) and equal by the reference
# checker, at 2 ranks x 2 threads and 3 ranks x 1 thread.
# Exit 77 (skipped) where hpcprof-mpi or mpiexec is not there.
set -euo pipefail
bin=$1 mpi=$2 wl=$3 conf=$4
[ -x "$mpi" ] || { echo "hpcprof-mpi not built (no MPI): skipped"; exit 77; }
mpiexec=$(command -v mpiexec || command -v mpirun || true)
[ -n "$mpiexec" ] || { echo "no mpiexec: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check() {  # check NAME MEASUREMENTS: hpcprof -j1 against hpcprof-mpi at 2x2 and 3x1
  "$bin/hpcprof" -j1 -o "$tmp/$1.ref.d" "$2" >/dev/null
  for rj in "2 2" "3 1"; do
    set -- "$1" "$2" $rj
    out="$tmp/$1.n$3j$4.d"
    "$mpiexec" -n "$3" "$mpi" -j"$4" -o "$out" "$2" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "$1: ${3}x$4 failed"; }
    diff -r "$tmp/$1.ref.d" "$out" || fail "$1: ${3}x$4 ranks x threads: not byte-equal to hpcprof"
    PYTHONPATH="$conf" /usr/bin/python3 -m hpctesttool test db-compare "$tmp/$1.ref.d" "$out" >"$tmp/cmp" 2>&1 ||
      { cat "$tmp/cmp"; fail "$1: ${3}x$4: db-compare"; }
    echo "$1: ${3}x$4 ranks x threads: same database as hpcprof"
  done
}

"$bin/hpcrun" -o "$tmp/threads.m" "$wl/threads-gcc" 0.5 >/dev/null 2>&1
n=$(ls "$tmp/threads.m"/*.hpcrun | wc -l)
[ "$n" -ge 3 ] || fail "threads workload: only $n profiles"
check threads.nostruct "$tmp/threads.m"     # no structure files: the binaries' own DWARF
"$bin/hpcstruct" "$tmp/threads.m" >/dev/null 2>&1
check threads.struct "$tmp/threads.m"       # with structs/ from our hpcstruct
echo "own measurements ($n profiles): hpcprof-mpi = hpcprof"
