#!/usr/bin/env bash
# hpcprof -v: the thread count, the profiles and structure files found (and the time taken to
# check and index the latter), and a line per phase with its wall and CPU time, peak memory and the bytes it read
# and wrote (with the time those took); the bytes add up to at least the input's size and
# the database's.
set -euo pipefail
prof=$1 gen=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$gen" "$tmp/m" 12 20000 3 2000 shuffled >/dev/null
"$prof" -j2 -v -o "$tmp/db" "$tmp/m" 2>"$tmp/err"
in=$(cat "$tmp/m"/* | wc -c)
out=$(find "$tmp/db" -type f -exec cat {} + | wc -c)
/usr/bin/python3 - "$tmp/err" "$in" "$out" <<'PY'
import re, sys
err, inb, outb = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
pat = (r"hpcprof: (.+?)\s+([\d.]+) s \(CPU ([\d.]+) s, peak ([\d.]+) MiB; "
       r"read ([\d.]+) MB in ([\d.]+) s, wrote ([\d.]+) MB in ([\d.]+) s\)$")
phases = [m.groups() for m in map(lambda l: re.match(pat, l), err.splitlines()) if m]
names = [p[0] for p in phases]
if not phases or names[0] != "unify calling contexts":
    sys.exit(f"no phase lines, or not unification first:\n{err}")
read = sum(float(p[4]) for p in phases)
wrote = sum(float(p[6]) for p in phases)
first = float(phases[0][4])
# The profiles and traces are read in the first phase; the database is all written by the end.
if first < inb / 1e6 - 0.1:
    sys.exit(f"unification read {first} MB of an input of {inb / 1e6:.1f} MB:\n{err}")
if wrote < outb / 1e6 - 0.1 or read < first:
    sys.exit(f"wrote {wrote} MB for a database of {outb / 1e6:.1f} MB (read {read}):\n{err}")
print(f"hpcprof -v: {len(phases)} phases, read {read:.1f} MB (input {inb / 1e6:.1f}), "
      f"wrote {wrote:.1f} MB (database {outb / 1e6:.1f})")
PY
grep -q "^hpcprof: 2 analysis threads$" "$tmp/err" || { echo "-j2 not reported"; cat "$tmp/err"; exit 1; }
# What was found and checked before the first profile is read, and the time it took.
grep -qE "^hpcprof: found 12 profiles; checked and indexed 0 structure files \(0\.0 MB\)  [0-9.]+ s$" "$tmp/err" ||
  { echo "no line for the inputs found"; cat "$tmp/err"; exit 1; }
# Without -j: as many threads as the CPUs the process may run on (a batch job's share of a
# node), not the machine's count.
if command -v taskset >/dev/null; then
  taskset -c 0 "$prof" -v -o "$tmp/db1" "$tmp/m" 2>"$tmp/err1"
  grep -q "^hpcprof: 1 analysis threads$" "$tmp/err1" || { echo "default -j ignores the affinity mask"; cat "$tmp/err1"; exit 1; }
  echo "default -j under taskset -c 0: 1 thread"
fi
