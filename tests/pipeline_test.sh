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
echo "pipeline: $n profiles, $samples samples, $loops loop contexts"
