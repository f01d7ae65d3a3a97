#!/usr/bin/env bash
# Without structure files hpcprof analyses the measured binaries itself, GPU binaries
# included: the kit's sm_80 gpubin (PC samples of loops-cuda-nvidiapc-t) gets its kernel's
# loop, and the inlined call in it, from hpcprof's own reading of the SASS, as the
# reference's database has them from `hpcstruct --gpucfg=yes` (its loop at line 21 holding
# func2's code, inlined at line 31).
set -euo pipefail
prof=$1 dump=$2 conf=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
kit=$(cd "$conf/meas" && pwd)
"$prof" -j2 --ignore-structs -R "/builds/hpctoolkit/hpctoolkit/builddir/tests/data/meas=$kit" \
  -o "$tmp/d" "$kit/loops-cuda-nvidiapc-t.m" 2>"$tmp/err" >/dev/null
"$dump" "$tmp/d/meta.db" >"$tmp/meta"
fail() { echo "FAIL: $*"; exit 1; }
kern=$(grep -m1 '|fn kernmain()|' "$tmp/meta" | sed 's/^ctx \([0-9]*\)|.*/\1/' || true)
[ -n "$kern" ] || fail "no kernmain() context"
loop=$(grep "|parent $kern|" "$tmp/meta" | grep '|lex 1|' | grep '|line 21|' | sed 's/^ctx \([0-9]*\)|.*/\1/' | head -1 || true)
[ -n "$loop" ] || fail "no loop at line 21 in kernmain(): $(grep "|parent $kern|" "$tmp/meta")"
site=$(grep "|parent $loop|" "$tmp/meta" | grep '|line 31|' | sed 's/^ctx \([0-9]*\)|.*/\1/' | head -1 || true)
[ -n "$site" ] || fail "no call site at line 31 in the loop"
grep "|parent $site|" "$tmp/meta" | grep -q 'fn _INTERNAL_[0-9a-f_]*loops_cu_main::func2(double volatile\*)' \
  || fail "func2 not inlined at line 31"
echo "hpcprof: GPU loops from its own reading of the gpubin"
