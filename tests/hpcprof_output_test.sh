#!/usr/bin/env bash
# hpcprof's and hpcprof-mpi's -o replaces only nothing, an empty directory or a database: a file,
# a directory of other things, the measurements themselves, or a database they lie in are
# refused before any work, with an error naming them, and left as they were.
set -euo pipefail
prof=$1 mpi=$2 conf=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r "$conf/meas/loops-cputime-t.m" "$tmp/m"
mkdir -p "$tmp/work" "$tmp/empty"
echo keep >"$tmp/work/notes.txt"
echo keep >"$tmp/file"
"$prof" --foreign -o "$tmp/db" "$tmp/m"
echo stale >"$tmp/db/stale"
"$prof" --foreign -o "$tmp/db" "$tmp/m"  # a database: replaced whole
[ -f "$tmp/db/meta.db" ] && [ ! -e "$tmp/db/stale" ] || { echo "a database was not replaced"; exit 1; }
"$prof" --foreign -o "$tmp/empty" "$tmp/m"
[ -f "$tmp/empty/meta.db" ] || { echo "an empty directory was not taken"; exit 1; }
echo "hpcprof: a database and an empty directory replaced"
cp -r "$tmp/m" "$tmp/db/meas"

: >"$tmp/err"
# Everything under $tmp but the error file: names, kinds, sizes, times.
snapshot() { (cd "$tmp" && find . -path ./err -prune -o -printf '%p %y %s %T@\n' | sort) | md5sum; }
check() {  # check NAME COMMAND...: each refusal leaves everything as it was
  local name=$1; shift
  local out meas why before rc
  for args in \
    "$tmp/work|$tmp/m|-o $tmp/work: exists and is not a database (no meta.db or experiment.xml in it); it is left as it is" \
    "$tmp/file|$tmp/m|-o $tmp/file: exists and is not a directory; it is left as it is" \
    "$tmp/m|$tmp/m|-o $tmp/m: exists and is not a database" \
    "$tmp|$tmp/m|-o $tmp: exists and is not a database" \
    "$tmp/db|$tmp/db/meas|-o $tmp/db: the measurements $tmp/db/meas lie in it, and replacing it would remove them"; do
    IFS='|' read -r out meas why <<<"$args"
    before=$(snapshot)
    rc=0
    "$@" --foreign -o "$out" "$meas" 2>"$tmp/err" || rc=$?
    [ "$rc" != 0 ] || { echo "$name accepted -o $out"; exit 1; }
    grep -qF -- "$why" "$tmp/err" || { echo "$name: no '$why' in:"; cat "$tmp/err"; exit 1; }
    [ "$(snapshot)" = "$before" ] || { echo "$name -o $out: something changed"; exit 1; }
  done
  [ "$(cat "$tmp/work/notes.txt" "$tmp/file")" = "$(printf 'keep\nkeep')" ] || { echo "files changed"; exit 1; }
  echo "$name: a file, a directory of other things, the measurements and a database holding them refused, left as they were"
}
check hpcprof "$prof"
if [ -x "$mpi" ] && mpiexec=$(command -v mpiexec || command -v mpirun); then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  check hpcprof-mpi "$mpiexec" -n 2 "$mpi"
else
  echo "hpcprof-mpi not built or no mpiexec: its -o not checked"
fi
