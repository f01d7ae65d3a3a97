#!/usr/bin/env bash
# hpcprof gives the same database (byte for byte) at -j1 and -j2, and writes it atomically;
# damaged traces cost no values.
set -euo pipefail
prof=$1 dump=$2 conf=$3 gen=$4
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
# Trees large enough that the first profile's seed is made ahead and the tree is finalized on
# threads (70,000 nodes), listed alike, each in its own order, and each lacking 1 % of the
# leaves: the same bytes at -j1, -j2 and -j3.
for shape in same shuffled varied; do
  "$gen" "$tmp/big-$shape.m" 5 70000 3 200 "$shape" >/dev/null
  for j in 1 2 3; do "$prof" --foreign -j$j -o "$tmp/big-$shape.j$j.d" "$tmp/big-$shape.m" 2>/dev/null; done
  for j in 2 3; do
    for f in meta.db profile.db cct.db trace.db metrics/default.yaml; do
      cmp "$tmp/big-$shape.j1.d/$f" "$tmp/big-$shape.j$j.d/$f" || { echo "$shape: $f differs at -j$j"; exit 1; }
    done
  done
  [ "$("$dump" "$tmp/big-$shape.j1.d" | grep -c '^ctx ')" -gt 65536 ] || { echo "$shape: too few contexts"; exit 1; }
  rm -rf "$tmp/big-$shape".*
  echo "large trees, $shape: identical at -j1, -j2 and -j3"
done
# Damaged traces lose no values: one cut short keeps its whole records, one with a bad header
# and one missing leave their profiles in the database with an empty line each (as the
# reference gives every profile a line), all with warnings naming the trace file.
m=loops-cputime-t
cp -r "$conf/meas/$m.m" "$tmp/damaged.m"
traces=("$tmp"/damaged.m/*.hpctrace)
cut=${traces[0]} bad=${traces[1]} gone=${traces[2]}
head -c $(( $(stat -c %s "$cut") - 6 )) "$cut" >"$tmp/x" && mv "$tmp/x" "$cut"
printf 'not a trace header, not at all' >"$bad"
rm "$gone"
"$prof" --foreign -j1 -o "$tmp/damaged.j1.d" "$tmp/damaged.m" 2>"$tmp/err"
"$prof" --foreign -j2 -o "$tmp/damaged.j2.d" "$tmp/damaged.m" 2>/dev/null
grep -q "^hpcprof: warning: $cut: offset 0x[0-9a-f]*: .* 6 trailing bytes .*kept the [0-9]* whole records" "$tmp/err" \
  || { echo "no warning for the cut trace"; cat "$tmp/err"; exit 1; }
grep -q "^hpcprof: warning: $bad: offset 0x0: .*kept without its trace" "$tmp/err" \
  || { echo "no warning for the bad trace"; cat "$tmp/err"; exit 1; }
! grep -q "values unreadable" "$tmp/err" || { cat "$tmp/err"; exit 1; }
"$dump" "$tmp/damaged.j1.d" >"$tmp/a"
"$dump" "$tmp/damaged.j2.d" >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || { echo "damaged traces: -j1 and -j2 differ"; exit 1; }
# Every value as with intact traces: the same profile.db rows.
"$dump" "$tmp/$m.j1.d" >"$tmp/intact"
cmp -s <(grep '^pv ' "$tmp/intact") <(grep '^pv ' "$tmp/a") || { echo "damaged traces lost values"; exit 1; }
# Four trace lines, profile indexes 1-4; two empty, one shorter than intact, one intact.
lines=$(grep '^trace [0-9]*|' "$tmp/a" | sed -E 's/^trace ([0-9]+)\|(.*)/\1 \2/' |
  awk '{ print $1, NF - 1 }' | sort -n | tr '\n' ' ')
intact=$(grep '^trace [0-9]*|' "$tmp/intact" | awk -F'|' '{ n = split($2, r, " "); print n }' | sort -n | tail -1)
/usr/bin/python3 - "$lines" "$intact" <<'PY' || exit 1
import sys
vals = list(map(int, sys.argv[1].split()))
got = dict(zip(vals[0::2], vals[1::2]))
full = int(sys.argv[2])
counts = sorted(got.values())
ok = sorted(got) == [1, 2, 3, 4] and counts[0] == 0 and counts[1] == 0 and 0 < counts[2] < full and counts[3] == full
if not ok:
    sys.exit(f"trace lines by profile {got}, intact lines of {full} records")
PY
echo "damaged traces: values kept, whole records kept, empty lines for the rest"

# Measurements named twice (the directory again, one of its profiles besides): a warning
# naming each, and the database of the directory named once (not every value counted twice).
s=$conf/meas/small.m
"$prof" --foreign -o "$tmp/once.d" "$s" 2>/dev/null
"$prof" --foreign -o "$tmp/twice.d" "$s/" "$s"/*.hpcrun "$s" 2>"$tmp/err"
for f in meta.db profile.db cct.db; do cmp "$tmp/once.d/$f" "$tmp/twice.d/$f" || { echo "named twice: $f differs"; exit 1; }; done
[ "$(grep -c "^hpcprof: warning: .*: named again among the measurements" "$tmp/err")" = 2 ] || { cat "$tmp/err"; exit 1; }
echo "measurements named twice: analysed once, each repeat named"

# A database that cannot be made (its directory is a file): the error names it, and why.
touch "$tmp/file"
if "$prof" --foreign -o "$tmp/file/db" "$conf/meas/small.m" 2>"$tmp/err"; then echo "unwritable output accepted"; exit 1; fi
grep -q "^hpcprof: error: $tmp/file/db: cannot create .*: Not a directory" "$tmp/err" || { cat "$tmp/err"; exit 1; }

# Without -o: the database is named after the measurement directory, beside it, and a second
# run does not replace the first one's.
mkdir "$tmp/runs"
cp -r "$conf/meas/small.m" "$tmp/runs/hpctoolkit-small-app-measurements"
(cd "$tmp" && "$prof" --foreign runs/hpctoolkit-small-app-measurements 2>"$tmp/err")
[ -f "$tmp/runs/hpctoolkit-small-app-database/meta.db" ] || { ls "$tmp/runs"; cat "$tmp/err"; exit 1; }
(cd "$tmp" && "$prof" --foreign runs/hpctoolkit-small-app-measurements 2>"$tmp/err")
[ -f "$tmp/runs/hpctoolkit-small-app-database-2/meta.db" ] || { ls "$tmp/runs"; cat "$tmp/err"; exit 1; }
grep -q "runs/hpctoolkit-small-app-database exists; writing the database to runs/hpctoolkit-small-app-database-2" \
  "$tmp/err" || { cat "$tmp/err"; exit 1; }
cmp "$tmp/runs/hpctoolkit-small-app-database/meta.db" "$tmp/runs/hpctoolkit-small-app-database-2/meta.db"

# A measured binary that is not here (and no structure file for it): one warning naming it.
"$prof" --ignore-structs -o "$tmp/nobin.d" "$conf/meas/loops-cputime-t.m" 2>"$tmp/err"
[ "$(grep -c "warning: .*/testmeas-loops: not found here, so its code is attributed to addresses only" "$tmp/err")" = 1 ] \
  || { cat "$tmp/err"; exit 1; }

# Many measured binaries not here (the generator's 8 modules under /opt/synthetic): one
# warning that counts them, names three and the directory they were in, not a line each.
"$gen" "$tmp/nomods.m" 2 200 3 10 >/dev/null
"$prof" -o "$tmp/nomods.d" "$tmp/nomods.m" 2>"$tmp/err"
[ "$(grep -c 'warning' "$tmp/err")" = 1 ] || { cat "$tmp/err"; exit 1; }
grep -q "warning: 8 measured binaries are not found here, so their code is attributed to addresses only .*module1.cpython-311-x86_64-linux-gnu.so, .* and 5 more; in /opt/synthetic/lib/python3.11/site-packages (8)$" \
  "$tmp/err" || { cat "$tmp/err"; exit 1; }

# A structure file for the binary under another directory: a warning suggests the -R that
# matches it, and with that -R its functions appear.
m=$conf/meas/loops-cputime-t.m
sed 's|n="/builds/hpctoolkit/hpctoolkit/builddir/tests/data/meas/testmeas-loops"|n="/elsewhere/bin/testmeas-loops"|' \
  "$m/structs/testmeas-loops.hpcstruct" >"$tmp/moved.hpcstruct"
"$prof" --foreign --ignore-structs -S "$tmp/moved.hpcstruct" -o "$tmp/moved.d" "$m" 2>"$tmp/err"
suggested=$(sed -n "s/.*testmeas-loops: no structure file describes this binary, but one describes .*; if that is the same binary, add -R '\(.*\)'$/\1/p" "$tmp/err")
[ "$suggested" = /builds/hpctoolkit/hpctoolkit/builddir/tests/data/meas=/elsewhere/bin ] || { cat "$tmp/err"; exit 1; }
"$prof" --foreign --ignore-structs -S "$tmp/moved.hpcstruct" -R "$suggested" -o "$tmp/mapped.d" "$m" 2>/dev/null
"$dump" "$tmp/moved.d" >"$tmp/a"
"$dump" "$tmp/mapped.d" >"$tmp/b"
! grep -q 'main._omp_fn.0' "$tmp/a" || { echo "structure used without -R"; exit 1; }
grep -q 'main._omp_fn.0' "$tmp/b" || { echo "-R did not match the structure file"; exit 1; }

# No usable profile: a clear error and no database left behind.
mkdir "$tmp/empty.m"
if "$prof" -o "$tmp/none.d" "$tmp/empty.m" 2>"$tmp/err"; then echo "empty input accepted"; exit 1; fi
grep -q "^hpcprof: error: $tmp/empty.m: no profiles (.hpcrun) in this measurement directory (hpcrun writes one a thread as the measured program ends; it measures no statically linked program, and says so)$" "$tmp/err" \
  || { cat "$tmp/err"; exit 1; }
test ! -e "$tmp/none.d"
# --only-exe naming no measured program: an error that says why nothing was left.
if "$prof" --foreign --only-exe nothing -o "$tmp/none.d" "$conf/meas/small.m" 2>"$tmp/err"; then echo "nothing analysed, yet success"; exit 1; fi
grep -q "no usable profiles among the measurements given (1 profile, 1 of programs --only-exe does not name: testmeas-small)$" "$tmp/err" \
  || { cat "$tmp/err"; exit 1; }
test ! -e "$tmp/none.d"
# --only-exe by the program's file name, a path naming its file: the same database.
"$prof" --foreign --only-exe testmeas-small -o "$tmp/exe1.d" "$conf/meas/small.m" 2>/dev/null
"$prof" --foreign --only-exe /some/dir/testmeas-small -o "$tmp/exe2.d" "$conf/meas/small.m" 2>/dev/null
cmp "$tmp/exe1.d/profile.db" "$tmp/exe2.d/profile.db" || { echo "--only-exe by path differs"; exit 1; }
# One of several measurement directories empty: an error naming it, no database.
if "$prof" --foreign -o "$tmp/none.d" "$conf/meas/small.m" "$tmp/empty.m" 2>"$tmp/err"; then echo "empty directory accepted"; exit 1; fi
grep -q "^hpcprof: error: $tmp/empty.m: no profiles (.hpcrun) in this measurement directory" "$tmp/err" || { cat "$tmp/err"; exit 1; }
test ! -e "$tmp/none.d"
echo "hpcprof: identical at -j1 and -j2"
