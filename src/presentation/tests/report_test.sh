#!/usr/bin/env bash
# hpcreport as a command: real content in every format and view, clear errors that name
# the file for a missing or corrupt database, and a wrong metric.
set -euo pipefail
report=$1 dbase=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out"; exit 1; }
ok() {  # ok PATTERN ARGS...: runs hpcreport ARGS, expects success and PATTERN in stdout
  local pat=$1; shift
  "$report" "$@" >"$tmp/out" 2>&1 || fail "hpcreport $* exited $?"
  grep -q -- "$pat" "$tmp/out" || fail "hpcreport $*: no '$pat'"
}
bad() {  # bad PATTERN ARGS...: expects failure and PATTERN in the message
  local pat=$1; shift
  if "$report" "$@" >"$tmp/out" 2>&1; then fail "hpcreport $* succeeded"; fi
  grep -q -- "$pat" "$tmp/out" || fail "hpcreport $*: no '$pat' in error"
}
s=$dbase/small.d l=$dbase/loops-cputime-t.d
ok '1.21026  100.00%  spinsleep' "$s"
ok 'spinsleep  \[10\]' "$s" --view top-down
ok '<- caller' "$s" --view bottom-up
ok '^flat-function,0,[0-9]*,func2,0.96945,24.399' "$l" --view flat --format csv
ok '^flat-line,0,' "$l" --view flat --by line --format csv
ok 'func2' "$l" --metric cpu --top 5
"$report" "$l" --format json --view flat >"$tmp/out"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r=j["rows"][0]; assert r["name"]=="main._omp_fn.0", r; assert abs(j["total"]-3.973308)<1e-6' "$tmp/out" \
  || fail "json output"
ok '# Verdict: compute-bound: 100% of the time in computation, most in spinsleep' "$s"
ok '^       3.97331  100.00%  computation$' "$l" --view overview
ok '^overview,1,compute/func2,func2,0.96945,' "$l" --view overview --format csv
ok '0.0297944  kernel execution' "$dbase/loops-cuda-nvidia-t.d" --view overview
bad 'no-such.d: not a database directory' "$tmp/no-such.d"
mkdir "$tmp/empty.d"
bad 'empty.d/meta.db: missing' "$tmp/empty.d"
cp -r "$s" "$tmp/cut.d"; chmod -R u+w "$tmp/cut.d"; truncate -s 200 "$tmp/cut.d/meta.db"
bad 'cut.d/meta.db: offset 0x' "$tmp/cut.d"
cp -r "$s" "$tmp/cutp.d"; chmod -R u+w "$tmp/cutp.d"; truncate -s 100 "$tmp/cutp.d/profile.db"
bad 'cutp.d/profile.db' "$tmp/cutp.d"
bad "no metric .* matches 'REALTIME'" "$s" --metric REALTIME
# hpcviewer's CCT filters: main and its line hidden (their children in their place); caller's
# children hidden; a malformed filter refused.
ok '^      0.605316   50.02%             0    0.00%      caller  \[22\]$' "$s" --view top-down --filter self:main --filter 'self:small.c:1?'
"$report" "$s" --view top-down --filter descendants:caller >"$tmp/out"
grep -q 'caller  \[22\]' "$tmp/out" && ! grep -q 'small.c:7' "$tmp/out" || fail "--filter descendants:caller"
bad "--filter 'x' is not MODE:GLOB" "$s" --filter x
# Two databases compared: loops against small as its baseline (names matched, ids differ).
ok '^       1.21026        3.97331       +2.76305  +228.3%  <program root>$' "$l" --compare "$s"
ok '^             0        1.24489       +1.24489      new  main._omp_fn.0$' "$l" --compare "$s"
ok '^flat-function,0,spinsleep,1.21026,0,1.21026,0$' "$l" --compare "$s" --format csv
"$report" "$l" --compare "$s" --format json --by module >"$tmp/out"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r=j["rows"][0]; assert r["section"]=="flat-module" and r["name"]=="testmeas-loops (baseline: testmeas-small)", r; assert abs(j["baseline_total"]-1.210259)<1e-6' "$tmp/out" \
  || fail "compare json output"
# One section with --view flat or top-down; other views do not go with --compare.
"$report" "$l" --compare "$s" --view top-down >"$tmp/out"
grep -q 'Calling contexts' "$tmp/out" && ! grep -q 'Flat view' "$tmp/out" || fail "--compare --view top-down"
"$report" "$l" --compare "$s" --view flat >"$tmp/out"
grep -q 'Flat view' "$tmp/out" && ! grep -q 'Calling contexts' "$tmp/out" || fail "--compare --view flat"
bad "--compare shows the flat view and the calling contexts (--view summary, flat or top-down), not --view bottom-up" "$l" --compare "$s" --view bottom-up
bad "small.d/meta.db: no metric 'GKER:BLK_SM_ACUMU' to compare with" "$dbase/loops-cuda-nvidia-t.d" --compare "$s" --metric 0
bad 'no-such.d: not a database directory' "$s" --compare "$tmp/no-such.d"
echo "hpcreport: all checks passed"
