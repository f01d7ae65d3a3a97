#!/usr/bin/env bash
# hpcdump prints each format's real content, and names the file when input is bad.
set -euo pipefail
dump=$1 conf=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect() {  # expect PATTERN FILE...
  local pat=$1; shift
  "$dump" "$@" >"$tmp/out" 2>&1 || { echo "hpcdump $* failed:"; cat "$tmp/out"; exit 1; }
  grep -q -- "$pat" "$tmp/out" || { echo "hpcdump $*: no '$pat' in output"; head -40 "$tmp/out"; exit 1; }
}
m=$conf/meas/small.m
expect 'CPUTIME (sec)' "$m"/*.hpcrun
expect 'NODE' "$m"/*.hpcrun
expect 'records' "$m"/*.hpctrace
expect 'P i=4 n="spinsleep"' "$m"/structs/*.hpcstruct
expect 'title: testmeas-small' "$conf/dbase/small.d"
expect 'main thread' "$conf/dbase/small.d/meta.db"
expect '==' "$m"
printf 'HPCTOOLKITmeta\x04\x00garbage' >"$tmp/bad.db"
if "$dump" "$tmp/bad.db" >"$tmp/out" 2>&1; then echo "corrupt file accepted"; exit 1; fi
grep -q "$tmp/bad.db: offset 0x" "$tmp/out" || { echo "error does not name file and offset:"; cat "$tmp/out"; exit 1; }
echo "hpcdump: all formats printed"
