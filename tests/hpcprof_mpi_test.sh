#!/usr/bin/env bash
# hpcprof-mpi (2 ranks x 2 threads, and 1 rank) writes the database hpcprof writes, byte for byte and
# by the reference checker; a corrupt profile on one rank is skipped with a warning; an
# input one rank cannot skip, or a crashed rank, ends the job with no database.
# Exit 77 (skipped) where hpcprof-mpi or mpiexec is not there.
set -euo pipefail
prof=$1 mpi=$2 conf=$3 gen=${4:-}
[ -x "$mpi" ] || { echo "hpcprof-mpi not built (no MPI): skipped"; exit 77; }
mpiexec=$(command -v mpiexec || command -v mpirun || true)
[ -n "$mpiexec" ] || { echo "no mpiexec: skipped"; exit 77; }
# Open MPI refuses root and more ranks than cores unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
compare() {  # compare A B: same bytes in every file, and the same by the checker
  for f in meta.db profile.db cct.db trace.db metrics/default.yaml; do
    [ ! -e "$1/$f" ] && [ ! -e "$2/$f" ] && continue
    cmp "$1/$f" "$2/$f" || { echo "$f differs: $1 $2"; exit 1; }
  done
  PYTHONPATH="$conf" /usr/bin/python3 -m hpctesttool test db-compare "$1" "$2" >"$tmp/cmp" 2>&1 ||
    { cat "$tmp/cmp"; exit 1; }
}

m=$conf/meas/loops-cputime-t.m
"$prof" --foreign -j1 -o "$tmp/ref.d" "$m"
"$mpiexec" -n 2 "$mpi" --foreign -j2 -o "$tmp/mpi.d" "$m"
compare "$tmp/ref.d" "$tmp/mpi.d"
echo "2 ranks x 2 threads: same database as hpcprof"
# One rank runs hpcprof's own pipeline: the same database, and -v still gives the rank's line.
"$mpiexec" -n 1 "$mpi" --foreign -j2 -v -o "$tmp/mpi1.d" "$m" 2>"$tmp/err1"
compare "$tmp/ref.d" "$tmp/mpi1.d"
grep -q "^hpcprof-mpi: rank 0: profiles=[1-9][0-9]* .*contexts=[1-9]" "$tmp/err1" || { cat "$tmp/err1"; exit 1; }
# The rank read at least its profiles' bytes and wrote at least its share of the database.
awk '/^hpcprof-mpi: rank 0:/ { for (i = 1; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
       ok = f["read_bytes"] >= f["input_bytes"] && f["written_bytes"] >= f["output_bytes"] && f["output_bytes"] > 0 }
     END { exit ok ? 0 : 1 }' "$tmp/err1" || { echo "rank 0's I/O counts short:"; cat "$tmp/err1"; exit 1; }
! grep -q "^hpcprof: " "$tmp/err1" || { cat "$tmp/err1"; exit 1; }
echo "1 rank x 2 threads: same database as hpcprof"

# A corrupt profile: the last one, which falls to rank 1; skipped by both tools alike.
cp -r "$m" "$tmp/bad.m"
last=$(ls "$tmp"/bad.m/*.hpcrun | tail -1)
head -c 300 "$last" >"$tmp/x" && mv "$tmp/x" "$last"
"$prof" --foreign -j1 -o "$tmp/ref-bad.d" "$tmp/bad.m" 2>"$tmp/err-prof"
# The warning names the file once, then what is wrong with it.
warn=$(grep "warning: skipping" "$tmp/err-prof")
[ "$(grep -o "$(basename "$last")" <<<"$warn" | wc -l)" = 1 ] && grep -q "$(basename "$last"): offset 0x" <<<"$warn" \
  || { cat "$tmp/err-prof"; exit 1; }
"$mpiexec" -n 2 "$mpi" --foreign -j2 -o "$tmp/mpi-bad.d" "$tmp/bad.m" 2>"$tmp/err"
grep -q "^hpcprof-mpi: warning: skipping .*$(basename "$last"): offset 0x" "$tmp/err" || { cat "$tmp/err"; exit 1; }
compare "$tmp/ref-bad.d" "$tmp/mpi-bad.d"
echo "corrupt profile on rank 1: skipped with a warning, same database as hpcprof"

# Traces cut short, unreadable or missing, on both ranks: the profiles stay, with the trace
# lines hpcprof writes (whole records kept, empty lines for the rest).
cp -r "$m" "$tmp/traces.m"
traces=("$tmp"/traces.m/*.hpctrace)
head -c $(( $(stat -c %s "${traces[0]}") - 5 )) "${traces[0]}" >"$tmp/x" && mv "$tmp/x" "${traces[0]}"
printf 'not a trace' >"${traces[1]}"
rm "${traces[3]}"
"$prof" --foreign -j1 -o "$tmp/ref-traces.d" "$tmp/traces.m" 2>/dev/null
"$mpiexec" -n 2 "$mpi" --foreign -j2 -o "$tmp/mpi-traces.d" "$tmp/traces.m" 2>/dev/null
compare "$tmp/ref-traces.d" "$tmp/mpi-traces.d"
echo "damaged traces on both ranks: same database as hpcprof"

# A measured binary missing here, met by both ranks' profiles: one warning, from rank 0.
"$mpiexec" -n 2 "$mpi" --ignore-structs -j1 -o "$tmp/nobin.d" "$m" 2>"$tmp/err"
[ "$(grep -c "^hpcprof-mpi: warning: .*/testmeas-loops: not found here" "$tmp/err")" = 1 ] || { cat "$tmp/err"; exit 1; }
echo "a missing binary: one warning from 2 ranks"

# Rank 1 alone gets a corrupt structure file: it cannot go on, so nobody does.
printf '<HPCToolkitStructure garbage' >"$tmp/bad.hpcstruct"
cat >"$tmp/wrap.sh" <<WRAP
#!/bin/sh
if [ "\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}" = 1 ]; then exec "\$@" -S "$tmp/bad.hpcstruct"; fi
exec "\$@"
WRAP
chmod +x "$tmp/wrap.sh"
mkdir "$tmp/out"
if "$mpiexec" -n 2 "$tmp/wrap.sh" "$mpi" --foreign -j1 -o "$tmp/out/fail.d" "$m" 2>"$tmp/err"; then
  echo "a rank's fatal error did not fail the job"; exit 1
fi
grep -q "error: rank 1: .*bad.hpcstruct.*no database written" "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ -z "$(ls -A "$tmp/out")" ] || { echo "left behind:"; ls -A "$tmp/out"; exit 1; }
echo "fatal input error on rank 1: clear error, nothing written"

# Rank 1 crashes (SIGSEGV): mpiexec ends the job; no database under the target name.
cat >"$tmp/crash.sh" <<'WRAP'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 1 ]; then kill -SEGV $$; fi
exec "$@"
WRAP
chmod +x "$tmp/crash.sh"
if "$mpiexec" -n 2 "$tmp/crash.sh" "$mpi" --foreign -j1 -o "$tmp/out/crash.d" "$m" >"$tmp/err" 2>&1; then
  echo "a crashed rank did not fail the job"; exit 1
fi
test ! -e "$tmp/out/crash.d"
echo "crashed rank: job failed, no database"

# Profiles describing 93 metrics and measuring a few of 25 each, a different few on each rank:
# the ranks agree on the metrics propagated, and the database is hpcprof's.
if [ -n "$gen" ]; then
  "$gen" "$tmp/metrics.m" 6 300 2 10 same 93 25 >/dev/null
  "$prof" --foreign -j1 -o "$tmp/metrics1.d" "$tmp/metrics.m" 2>/dev/null
  "$mpiexec" -n 3 "$mpi" --foreign -j1 -o "$tmp/metrics3.d" "$tmp/metrics.m" 2>/dev/null
  compare "$tmp/metrics1.d" "$tmp/metrics3.d"
  echo "93 metrics, a different few measured on each of 3 ranks: same database as hpcprof"
fi
