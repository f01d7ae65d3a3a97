#!/usr/bin/env bash
# An interrupted hpcprof (SIGTERM, SIGINT, SIGHUP) removes its unfinished database, leaves an
# existing database of the same name as it was, and ends by that signal. The shim holds it
# on its first trace, after the temporary database exists. Out of space for the values it
# keeps between its passes, it stops with an error rather than drop those values.
set -euo pipefail
prof=$1 shim=$2 conf=$3 gen=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r "$conf/meas/loops-cputime-t.m" "$tmp/m"
"$prof" --foreign -o "$tmp/out.d" "$tmp/m"
cp -r "$tmp/out.d" "$tmp/before.d"
# A background job of a script starts with SIGINT ignored: python resets it and becomes
# hpcprof (same pid), started as from a terminal.
as_from_terminal='import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])'
for sig in TERM INT HUP; do
  LD_PRELOAD=$shim /usr/bin/python3 -c "$as_from_terminal" "$prof" --foreign -j2 -o "$tmp/out.d" "$tmp/m" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 400); do [ -d "$tmp/.out.d.tmp-$pid" ] && break; sleep 0.05; done
  [ -d "$tmp/.out.d.tmp-$pid" ] || { echo "no temporary database appeared"; kill -KILL $pid; exit 1; }
  kill -$sig $pid
  rc=0; { wait $pid; } 2>/dev/null || rc=$?
  [ "$rc" = $((128 + $(kill -l $sig))) ] || { echo "SIG$sig: exit status $rc"; cat "$tmp/err"; exit 1; }
  leftovers=$(find "$tmp" -maxdepth 1 -name '.out.d.tmp-*')
  [ -z "$leftovers" ] || { echo "SIG$sig: left $leftovers"; exit 1; }
  grep -q "removed the unfinished $tmp/.out.d.tmp-$pid" "$tmp/err" || { cat "$tmp/err"; exit 1; }
  diff -r "$tmp/before.d" "$tmp/out.d" >/dev/null || { echo "SIG$sig: the earlier database changed"; exit 1; }
  echo "SIG$sig: unfinished database removed, the earlier one kept"
done
# Started with SIGHUP ignored (nohup), hpcprof keeps it ignored and finishes.
SLOW_OPEN_SECONDS=1 LD_PRELOAD=$shim nohup "$prof" --foreign -o "$tmp/nohup.d" "$tmp/m" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 400); do [ -d "$tmp/.nohup.d.tmp-$pid" ] && break; sleep 0.05; done
kill -HUP $pid
wait $pid
[ -f "$tmp/nohup.d/meta.db" ] || { echo "nohup: no database"; exit 1; }
echo "SIGHUP under nohup: ignored, database written"

# No room for the spill (files limited to 1 MiB; SIGXFSZ ignored, so the write fails): an
# error naming the temporary file's directory, no database, no temporaries.
"$gen" "$tmp/g" 60 20000 3 2000 shuffled >/dev/null
rc=0
(trap '' XFSZ; ulimit -f 1024; exec "$prof" -j2 --foreign -o "$tmp/full.d" "$tmp/g") 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || { echo "out of space: exit status $rc"; cat "$tmp/err"; exit 1; }
grep -q "^hpcprof: error: temporary file in .*: write failed: File too large" "$tmp/err" || { cat "$tmp/err"; exit 1; }
! grep -q "values unreadable" "$tmp/err" || { echo "out of space: went on without values"; exit 1; }
[ ! -e "$tmp/full.d" ] && [ -z "$(find "$tmp" -maxdepth 1 -name '.full.d.tmp-*')" ] || { echo "out of space: output left"; exit 1; }
echo "out of space for the spill: an error, nothing left behind"
