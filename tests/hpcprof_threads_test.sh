#!/usr/bin/env bash
# hpcprof gives the same database (byte for byte) at -j1 and -j2, and writes it atomically.
set -euo pipefail
prof=$1 dump=$2 conf=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in small loops-cputime-t loops-cuda-nvidia-t loops-cuda-nvidiapc-t; do
  "$prof" --foreign -j1 -o "$tmp/$m.j1.d" "$conf/meas/$m.m"
  "$prof" --foreign -j2 -o "$tmp/$m.j2.d" "$conf/meas/$m.m"
  "$dump" "$tmp/$m.j1.d" >"$tmp/a"
  "$dump" "$tmp/$m.j2.d" >"$tmp/b"
  cmp -s "$tmp/a" "$tmp/b" || { echo "$m: -j1 and -j2 differ"; diff "$tmp/a" "$tmp/b" | head; exit 1; }
  for f in meta.db profile.db cct.db trace.db metrics/default.yaml; do
    test ! -e "$tmp/$m.j1.d/$f" || cmp "$tmp/$m.j1.d/$f" "$tmp/$m.j2.d/$f" || { echo "$m: $f differs"; exit 1; }
  done
  grep -q '^pv 0 ' "$tmp/a" || { echo "$m: no summary values"; exit 1; }
  test -f "$tmp/$m.j1.d/metrics/default.yaml"
done
# No usable profile: a clear error and no database left behind.
mkdir "$tmp/empty.m"
if "$prof" -o "$tmp/none.d" "$tmp/empty.m" 2>"$tmp/err"; then echo "empty input accepted"; exit 1; fi
grep -q 'no profiles' "$tmp/err" || { cat "$tmp/err"; exit 1; }
test ! -e "$tmp/none.d"
echo "hpcprof: identical at -j1 and -j2"
