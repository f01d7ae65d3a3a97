#!/usr/bin/env bash
# End to end on our own tools: hpcrun -> hpcstruct (measurement directory) -> hpcprof.
# The app's output and exit status are unchanged; each thread has a profile and a trace
# that the reference checker accepts; the database attributes time to the example's
# functions and loops.
set -euo pipefail
bin=$1 conf=$2 app=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bare=$("$app"; echo "rc=$?")
measured=$(timeout 120 "$bin/hpcrun" -e REALTIME@1000 -t -o "$tmp/m" "$app"; echo "rc=$?")
[ "$bare" = "$measured" ] || fail "output differs under hpcrun: '$bare' vs '$measured'"

n=$(ls "$tmp"/m/*.hpcrun | wc -l)
[ "$n" = 2 ] || fail "expected 2 thread profiles, found $n"
[ "$(ls "$tmp"/m/*.hpctrace | wc -l)" = 2 ] || fail "expected 2 traces"
summary=$(grep -h 'SUMMARY' "$tmp"/m/*.log)
samples=$(sed -E 's/.*samples: ([0-9]+).*/\1/' <<<"$summary")
[ "$samples" -gt 500 ] || fail "too few samples: $summary"
for f in "$tmp"/m/*.hpcrun; do "$bin/hpcdump" "$f" >/dev/null || fail "$f unreadable"; done
PYTHONPATH=$conf /usr/bin/python3 -m hpctesttool test produces-profiles -T "$tmp/m" 'THREAD' \
  || fail "reference checker rejects the measurement"

"$bin/hpcstruct" "$tmp/m" 2>/dev/null
[ -f "$tmp/m/structs/$(basename "$app").hpcstruct" ] || fail "no structure file for the app"
"$bin/hpcprof" -o "$tmp/d" "$tmp/m"
"$bin/hpcdump" "$tmp/d" >"$tmp/dump"
for fn in main stencil matmul series worker; do
  grep -Eq "fn $fn(\.[a-z0-9.]+)? \[" "$tmp/dump" || fail "no context for function $fn"
done
grep -q 'name application thread' "$tmp/dump" || fail "no application-thread entry"
loops=$(grep -c '|lex 1|' "$tmp/dump")
[ "$loops" -ge 4 ] || fail "expected the example's loop nests, found $loops loops"
# The traces in the database: each thread's line has its .hpctrace's records, in time order,
# each naming a context that profile has values at (its sample's line).
counts=$(for f in "$tmp"/m/*.hpctrace; do "$bin/hpcdump" "$f" | sed -nE 's/^\[records\] ([0-9]+),.*/\1/p'; done | sort -n | tr '\n' ' ')
/usr/bin/python3 - "$tmp/dump" "$counts" <<'PY' || fail "trace lines do not match the measured traces"
import sys
from collections import defaultdict
valued = defaultdict(set)
lines = {}
for line in open(sys.argv[1]):
    if line.startswith("pv "):
        _, prof, ctx, _, _ = line.split()
        valued[int(prof)].add(int(ctx))
    elif line.startswith("trace "):
        head, _, body = line.partition("|")
        lines[int(head.split()[1])] = [tuple(map(int, r.split(":"))) for r in body.split()]
want = sorted(map(int, sys.argv[2].split()))
got = sorted(len(recs) for recs in lines.values())
if got != want:
    sys.exit(f"records per line {got}, measured {want}")
for prof, recs in lines.items():
    times = [t for t, _ in recs]
    if times != sorted(times):
        sys.exit(f"line {prof} out of time order")
    named = {c for _, c in recs if c != 0}
    if not named or not named <= valued[prof]:
        sys.exit(f"line {prof} names contexts {sorted(named - valued[prof])} without values in its profile")
    if sum(1 for _, c in recs if c == 0) > len(recs) // 10:
        sys.exit(f"line {prof}: most records name no context")
PY
echo "pipeline: $n profiles, $samples samples, $loops loop contexts, traces of $counts records"
