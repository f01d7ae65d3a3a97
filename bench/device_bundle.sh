#!/bin/bash
# Packs what the hpcprof benchmarks need into .devbundle/ (git-ignored through
# .git/info/exclude) for a machine that has none of this project's Debian packages (the
# device machine of a session that draws one: an x86-64 host with its own Python 3, no
# elfutils, TBB or Zydis): hpcprof, gen_measurements and io_floor stripped, the shared libraries they
# take from Debian, the benchmark scripts, and run.sh, which generates the inputs and runs
# bench/hpcprof_scaling.py there.
#
# usage: bench/device_bundle.sh BUILD_DIR [OTHER_HPCPROF...]
#   OTHER_HPCPROF: more hpcprof binaries to time against BUILD_DIR's (a baseline), each
#   bundled as build/bin/hpcprof.<its file name> (a name that begins with "hpcprof." as it is).
# then, with the device tool: run command ".devbundle/run.sh [THREADS] [RUNS]", carry
# [".devbundle"] (THREADS defaults to 1,2,4,8,16 and RUNS to 3; about 50 s on 16 cores for
# one binary, plus a minute or two to start the machine).
set -euo pipefail
build=${1:?usage: bench/device_bundle.sh BUILD_DIR [OTHER_HPCPROF...]}
shift
root=$(git rev-parse --show-toplevel)
out="$root/.devbundle"
mkdir -p "$root/.git/info"
grep -qx '/.devbundle/' "$root/.git/info/exclude" 2>/dev/null || echo '/.devbundle/' >>"$root/.git/info/exclude"
rm -rf "$out"
mkdir -p "$out/build/bin" "$out/lib"
strip -o "$out/build/bin/hpcprof" "$build/bin/hpcprof"
strip -o "$out/build/bin/gen_measurements" "$build/bin/gen_measurements"
strip -o "$out/build/bin/io_floor" "$build/bin/io_floor"
for other in "$@"; do
  name=$(basename "$other")
  case "$name" in
    hpcprof) name=hpcprof.other ;;
    hpcprof.*) ;;
    *) name=hpcprof.$name ;;
  esac
  strip -o "$out/build/bin/$name" "$other"
done
# The libraries not in a plain distribution's base system (glibc and libstdc++ there are
# newer than Debian 12's, which is what these binaries need).
for lib in libtbb.so.12 libZydis.so.4.0 libdw.so.1 libelf.so.1 libexpat.so.1; do
  path=$(ldd "$build/bin/hpcprof" | awk -v l="$lib" '$1 == l { print $3 }')
  [ -n "$path" ] && cp -L "$path" "$out/lib/"
done
cp "$root/bench/hpcprof_bench.py" "$root/bench/hpcprof_scaling.py" "$out/"
cat >"$out/run.sh" <<'EOF'
#!/bin/bash
# On the device machine: the machine, then hpcprof_scaling.py on three shapes of 2000 / 100
# profiles, every hpcprof of build/bin against each other; results also under $OUT.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib PYTHONUNBUFFERED=1
threads=${1:-1,2,4,8,16}
runs=${2:-3}
out=${OUT:-/tmp}
{ nproc; lscpu | grep -E 'Model name|Thread'; free -g | head -2; } | tee "$out/machine.txt"
meas=$(mktemp -d)
trap 'rm -rf "$meas"' EXIT
build/bin/gen_measurements "$meas/m2000" 2000 20000 >/dev/null
build/bin/gen_measurements "$meas/mshuf" 2000 20000 3 2000 shuffled >/dev/null
build/bin/gen_measurements "$meas/mlarge" 100 400000 >/dev/null
for m in m2000 mshuf mlarge; do
  echo "== $m"
  python3 hpcprof_scaling.py "$meas/$m" "$runs" "$threads" build/bin/hpcprof*
done 2>&1 | tee "$out/scaling.txt"
EOF
chmod +x "$out/run.sh"
du -sh "$out"
