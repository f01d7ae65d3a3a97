#!/usr/bin/env bash
# hpcstruct as a tool: the content-keyed cache (--cache, --nocache, $HPCTOOLKIT_HPCSTRUCT_CACHE),
# measurement-directory mode (CPU binaries and the directory's gpubins/, -j1 = -j2; --cpu and
# --gpu), malformed binaries named in the error while the other binaries are still analysed,
# and the reference's other options (-v, --time, --pretty-print, and those accepted without
# effect).
set -euo pipefail
hs=$1 conf=$2
tmp=$(mktemp -d); trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
bin=$conf/struct/bin/inlines+loops-x86_64-gcc10-d

# An output that cannot be made: the error names it once, and why.
if "$hs" --nocache -o "$tmp/no/such/dir/x.hpcstruct" "$bin" 2>"$tmp/err0"; then fail "unwritable output accepted"; fi
[ "$(grep -o "$tmp/no/such/dir/x.hpcstruct" "$tmp/err0" | wc -l)" = 1 ] && grep -q "No such file or directory" "$tmp/err0" \
  || fail "unwritable output: $(cat "$tmp/err0")"
# An output that is a directory: refused by name before any analysis, and left as it is.
mkdir -p "$tmp/out.d" && echo keep >"$tmp/out.d/notes"
if "$hs" --nocache -o "$tmp/out.d" "$bin" 2>"$tmp/errd"; then fail "a directory as output accepted"; fi
grep -q "^hpcstruct: $tmp/out.d: is a directory; name the structure file to write (it is left as it is)$" "$tmp/errd" \
  && [ "$(cat "$tmp/out.d/notes")" = keep ] && [ "$(ls -A "$tmp")" != "" ] && [ -z "$(find "$tmp" -name '.*tmp-*')" ] \
  || fail "a directory as output: $(cat "$tmp/errd")"

# Cache: the first run fills it, the second copies from it, --nocache bypasses it.
"$hs" --cache "$tmp/cache" -o "$tmp/a.hpcstruct" "$bin" 2>"$tmp/err1"
grep -q 'copied from cache' "$tmp/err1" && fail "empty cache hit"
[ "$(ls "$tmp/cache" | wc -l)" = 1 ] || fail "cache has no single entry: $(ls "$tmp/cache")"
"$hs" --cache "$tmp/cache" -o "$tmp/b.hpcstruct" "$bin" 2>"$tmp/err2"
grep -q 'copied from cache' "$tmp/err2" || fail "second run not served by the cache: $(cat "$tmp/err2")"
cmp "$tmp/a.hpcstruct" "$tmp/b.hpcstruct" || fail "cached output differs"
HPCTOOLKIT_HPCSTRUCT_CACHE=$tmp/cache "$hs" -o "$tmp/c.hpcstruct" "$bin" 2>"$tmp/err3"
grep -q 'copied from cache' "$tmp/err3" || fail "\$HPCTOOLKIT_HPCSTRUCT_CACHE ignored"
"$hs" --cache "$tmp/cache" --nocache -o "$tmp/d.hpcstruct" "$bin" 2>"$tmp/err4"
grep -q 'copied from cache' "$tmp/err4" && fail "--nocache used the cache"
cmp "$tmp/a.hpcstruct" "$tmp/d.hpcstruct" || fail "uncached output differs"

# Any -j gives the same bytes.
"$hs" --nocache -j1 -o "$tmp/j1.hpcstruct" "$bin"
"$hs" --nocache -j3 -o "$tmp/j3.hpcstruct" "$bin"
cmp "$tmp/j1.hpcstruct" "$tmp/j3.hpcstruct" || fail "-j1 and -j3 differ"

# A malformed binary: the error names it.
printf 'not an ELF file' >"$tmp/bad.so"
if "$hs" --nocache -o "$tmp/bad.hpcstruct" "$tmp/bad.so" 2>"$tmp/err5"; then fail "malformed binary accepted"; fi
grep -q "$tmp/bad.so" "$tmp/err5" || fail "error does not name the binary: $(cat "$tmp/err5")"

# Directory mode: only the binaries the profiles use (load-map flag 1, as the reference's
# hpcrun writes it), the GPU one from the directory's own gpubins/. The reference measured
# libc without using it (flag 0), so it is skipped; marked used, it is analysed.
mark_libc_used() {  # the load-map entry's 8-byte big-endian flags follow its name
  /usr/bin/python3 - "$1" <<'PY'
import glob, sys
name = b"/usr/lib/x86_64-linux-gnu/libc.so.6"
for f in glob.glob(sys.argv[1] + "/*-000-*.hpcrun"):
    data = open(f, "rb").read()
    i = data.index(name) + len(name)
    assert data[i:i + 8] == bytes(8), "libc's flags are not 0"
    open(f, "wb").write(data[:i] + bytes(7) + b"\x01" + data[i + 8:])
PY
}
cp -r "$conf/meas/loops-cuda-nvidia-t.m" "$tmp/m"; chmod -R u+w "$tmp/m"; rm -rf "$tmp/m/structs"
"$hs" --nocache -j2 "$tmp/m" 2>"$tmp/errm0" || fail "directory mode: $(cat "$tmp/errm0")"
ls "$tmp/m/structs"/*.gpubin.hpcstruct >/dev/null || fail "gpubin not analysed"
[ -e "$tmp/m/structs/libc.so.6.hpcstruct" ] && fail "libc.so.6 analysed although no profile uses it"
mark_libc_used "$tmp/m"
for j in 1 2; do
  rm -rf "$tmp/m/structs"
  "$hs" --nocache -j$j "$tmp/m" 2>"$tmp/errm$j" || fail "directory mode -j$j: $(cat "$tmp/errm$j")"
  ls "$tmp/m/structs"/*.gpubin.hpcstruct >/dev/null || fail "gpubin not analysed (-j$j)"
  [ -s "$tmp/m/structs/libc.so.6.hpcstruct" ] || fail "libc.so.6 marked used but not analysed (-j$j)"
  mv "$tmp/m/structs" "$tmp/structs$j"
done
diff -r "$tmp/structs1" "$tmp/structs2" >/dev/null || fail "directory mode -j1 and -j2 differ"

# A malformed GPU binary in the directory: named, the others still written, exit status 1.
cp -r "$conf/meas/loops-cuda-nvidia-t.m" "$tmp/mb"; chmod -R u+w "$tmp/mb"; rm -rf "$tmp/mb/structs"
mark_libc_used "$tmp/mb"
gpubin=$(ls "$tmp/mb/gpubins"/*.gpubin)
printf 'garbage' >"$gpubin"
if "$hs" --nocache -j2 "$tmp/mb" 2>"$tmp/errmb"; then fail "directory with a malformed binary succeeded"; fi
grep -q "$gpubin" "$tmp/errmb" || fail "error does not name $gpubin: $(cat "$tmp/errmb")"
grep -q '1 of .* binaries could not be analysed' "$tmp/errmb" || fail "no summary: $(cat "$tmp/errmb")"
[ -s "$tmp/mb/structs/libc.so.6.hpcstruct" ] || fail "other binaries not analysed after a failure"
# The reference's options. --cpu no / --gpu no: a directory's binaries of one kind alone;
# both no, nothing to do (exit 0, said).
cp -r "$conf/meas/loops-cuda-nvidia-t.m" "$tmp/mk"; chmod -R u+w "$tmp/mk"; rm -rf "$tmp/mk/structs"
mark_libc_used "$tmp/mk"
"$hs" --nocache --gpu no "$tmp/mk" 2>"$tmp/errk1" || fail "--gpu no: $(cat "$tmp/errk1")"
[ "$(ls "$tmp/mk/structs")" = libc.so.6.hpcstruct ] || fail "--gpu no wrote: $(ls "$tmp/mk/structs")"
rm -rf "$tmp/mk/structs"
"$hs" --nocache --cpu no "$tmp/mk" 2>"$tmp/errk2" || fail "--cpu no: $(cat "$tmp/errk2")"
[ "$(ls "$tmp/mk/structs")" = "$(basename "$(ls "$tmp/mk/gpubins"/*.gpubin)").hpcstruct" ] \
  || fail "--cpu no wrote: $(ls "$tmp/mk/structs")"
rm -rf "$tmp/mk/structs"
"$hs" --nocache --cpu no --gpu no "$tmp/mk" 2>"$tmp/errk3" || fail "--cpu no --gpu no failed"
[ -z "$(ls "$tmp/mk/structs" 2>/dev/null)" ] && grep -q "no binary to analyse (--cpu no --gpu no)" "$tmp/errk3" || fail "--cpu no --gpu no: $(cat "$tmp/errk3")"
# -v 0: no line per structure file; --time (and -v 2): each binary's time and the run's.
rm -rf "$tmp/mk/structs"
"$hs" --nocache -v 0 "$tmp/mk" 2>"$tmp/errk4" || fail "-v 0 failed"
[ -s "$tmp/errk4" ] && fail "-v 0 said: $(cat "$tmp/errk4")"
[ "$(ls "$tmp/mk/structs" | wc -l)" = 2 ] || fail "-v 0 wrote: $(ls "$tmp/mk/structs")"
for opt in --time "-v 2"; do
  "$hs" --nocache $opt -o "$tmp/t.hpcstruct" "$bin" 2>"$tmp/errt"
  grep -q "^hpcstruct: $bin: [0-9.]* s$" "$tmp/errt" && grep -q "^hpcstruct: [0-9.]* s, [0-9.]* s CPU, peak memory [0-9.]* MiB$" "$tmp/errt" \
    || fail "$opt: $(cat "$tmp/errt")"
done
# --pretty-print: each element indented by its depth, the same file otherwise.
"$hs" --nocache --pretty-print -o "$tmp/pretty.hpcstruct" "$bin"
grep -q '^  <LM ' "$tmp/pretty.hpcstruct" && grep -q '^    <F ' "$tmp/pretty.hpcstruct" && grep -q '^      <P ' "$tmp/pretty.hpcstruct" \
  && grep -q '^</HPCToolkitStructure>' "$tmp/pretty.hpcstruct" || fail "--pretty-print: not indented"
diff <(sed 's/^ *//' "$tmp/pretty.hpcstruct") <(sed 's/^ *//' "$tmp/a.hpcstruct") >/dev/null \
  || fail "--pretty-print changed more than the indentation"
# Tuning and developer options the reference's scripts pass: accepted, the same structure.
"$hs" --nocache --psize 1000 -s 32M --jobs-struct 2 --jobs-parse 2 --jobs-symtab 1 --show-gaps -M "$tmp/mk" \
  -o "$tmp/opts.hpcstruct" "$bin" 2>"$tmp/erro" || fail "the reference's options refused: $(cat "$tmp/erro")"
cmp "$tmp/opts.hpcstruct" "$tmp/a.hpcstruct" || fail "the reference's options changed the structure"

# --gpucfg=yes: loops from nvdisasm's control-flow graph (a fake nvdisasm prints a fixture
# for f3_2, symbol 47, and an empty graph for the others); without it, our own reading of
# the SASS (below).
cubin=$conf/struct/bin/inlines+loops-sm_75-nvcc112-0
fixture=$(cd "$(dirname "$0")/.." && pwd)/src/structure/testdata/nvdisasm_cfg_sm75.dot
mkdir "$tmp/fakebin"
{
  echo '#!/bin/sh'
  echo '# Called as: nvdisasm -cfg -poff -fun <symbol> <cubin>'
  echo '[ "$1 $2 $3" = "-cfg -poff -fun" ] || exit 2'
  echo "if [ \"\$4\" = 47 ]; then cat '$fixture'; else echo 'digraph f { }'; fi"
} >"$tmp/fakebin/nvdisasm"
chmod +x "$tmp/fakebin/nvdisasm"
for j in 1 2; do
  PATH="$tmp/fakebin:$PATH" "$hs" --nocache -j$j --gpucfg=yes -o "$tmp/gpu$j.hpcstruct" "$cubin" 2>"$tmp/errg$j" \
    || fail "--gpucfg=yes with nvdisasm: $(cat "$tmp/errg$j")"
done
[ -s "$tmp/errg1" ] && fail "--gpucfg=yes with nvdisasm warned: $(cat "$tmp/errg1")"
cmp "$tmp/gpu1.hpcstruct" "$tmp/gpu2.hpcstruct" || fail "--gpucfg=yes: -j1 and -j2 differ"
f32=$(awk '/n="f3_2\(\)"/,/<\/P>/' "$tmp/gpu1.hpcstruct")
loops=$(grep -o '<L [^>]*>' <<<"$f32" | sed 's/ i="[0-9]*"//')
want32='<L l="29" f="/src/inlines+loops.cu" v="{[0x13370-0x13371)}">
<L l="30" f="/src/inlines+loops.cu" v="{[0x13500-0x13501)}">'
[ "$loops" = "$want32" ] || fail "f3_2's loops from nvdisasm: $loops"
[ "$(grep -c '^</L>' <<<"$f32")" = 2 ] && grep -q '^</L>$' <<<"$(tail -3 <<<"$f32" | head -1)" \
  || fail "f3_2's loops are not nested: $f32"
[ "$(grep -c '<L ' "$tmp/gpu1.hpcstruct")" = 2 ] || fail "loops outside f3_2"
grep -q 'has-calls="1"' "$tmp/gpu1.hpcstruct" || fail "--gpucfg=yes: LM has-calls is not 1"
# The control-flow graph CUDA 13.0's nvdisasm printed for an sm_90 cubin of its nvcc (recorded
# on an H100 machine; src/structure/testdata/gpu_loops.cu): four copies of the r loop, the
# last holding the k loop.
src=$(cd "$(dirname "$0")/.." && pwd)/src/structure/testdata
mkdir "$tmp/fake13"
{
  echo '#!/bin/sh'
  echo '[ "$1 $2 $3 $4" = "-cfg -poff -fun 11" ] || exit 2'
  echo "cat '$src/nvdisasm13_cfg_sm90.dot'"
} >"$tmp/fake13/nvdisasm"
chmod +x "$tmp/fake13/nvdisasm"
for j in 1 2; do
  PATH="$tmp/fake13:$PATH" "$hs" --nocache -j$j --gpucfg=yes -o "$tmp/sm90_$j.hpcstruct" \
    "$src/gpu_loops_sm90_nvcc13.cubin" 2>"$tmp/err90_$j" || fail "sm_90 cubin: $(cat "$tmp/err90_$j")"
done
[ -s "$tmp/err90_1" ] && fail "sm_90 cubin warned: $(cat "$tmp/err90_1")"
cmp "$tmp/sm90_1.hpcstruct" "$tmp/sm90_2.hpcstruct" || fail "sm_90 cubin: -j1 and -j2 differ"
loops=$(grep -o '<L [^>]*>\|</L>' "$tmp/sm90_1.hpcstruct" | sed 's/ i="[0-9]*"//; s/ f="[^"]*"//' | tr '\n' ' ')
want='<L l="3" v="{[0x1e70-0x1e71)}"> </L> <L l="3" v="{[0x2540-0x2541)}"> </L> <L l="3" v="{[0x26c0-0x26c1)}"> </L> <L l="3" v="{[0x2800-0x2801)}"> <L l="5" v="{[0x29d0-0x29d1)}"> </L> </L> '
[ "$loops" = "$want" ] || fail "sm_90 cubin's loops from nvdisasm 13: $loops"
# Without nvdisasm, hpcstruct reads the SASS itself (sm_50-62, sm_70-90): for the
# sm_90 cubin the same file as from nvdisasm 13's graph.
if [ ! -x /usr/local/cuda/bin/nvdisasm ]; then  # found there even off PATH
mkdir "$tmp/nopath"
PATH="$tmp/nopath" "$hs" --nocache --gpucfg=yes -o "$tmp/sm90_own.hpcstruct" "$src/gpu_loops_sm90_nvcc13.cubin" \
  2>"$tmp/err90o" || fail "sm_90 cubin without nvdisasm: $(cat "$tmp/err90o")"
[ -s "$tmp/err90o" ] && fail "sm_90 cubin without nvdisasm warned: $(cat "$tmp/err90o")"
cmp "$tmp/sm90_1.hpcstruct" "$tmp/sm90_own.hpcstruct" || fail "sm_90: our reading of the SASS differs from nvdisasm 13's"
PATH="$tmp/nopath" "$hs" --nocache --gpucfg=yes -o "$tmp/own.hpcstruct" "$cubin" 2>"$tmp/errn" \
  || fail "--gpucfg=yes without nvdisasm failed"
[ -s "$tmp/errn" ] && fail "--gpucfg=yes without nvdisasm warned on sm_75: $(cat "$tmp/errn")"
f32=$(awk '/n="f3_2\(\)"/,/<\/P>/' "$tmp/own.hpcstruct")
loops=$(grep -o '<L [^>]*>' <<<"$f32" | sed 's/ i="[0-9]*"//')
[ "$loops" = "$want32" ] || fail "f3_2's loops from the SASS: $loops"
# An sm_80 cubin a measurement holds (the kit's CUDA case): the structure the reference wrote
# with nvdisasm beside it (structs/*-gpucfg-yes.hpcstruct), by the reference's checker.
gm=$conf/meas/loops-cuda-nvidia-t.m
PATH="$tmp/nopath" "$hs" --nocache --gpucfg=yes -o "$tmp/sm80.hpcstruct" "$gm/gpubins/1165a3eeddeea5ea3616d1cdbc6faa59.gpubin" \
  2>"$tmp/err80" || fail "sm_80 gpubin without nvdisasm: $(cat "$tmp/err80")"
[ -s "$tmp/err80" ] && fail "sm_80 gpubin without nvdisasm warned: $(cat "$tmp/err80")"
grep -q '<L ' "$tmp/sm80.hpcstruct" || fail "sm_80 gpubin: no loop"
PYTHONPATH=$conf /usr/bin/python3 -m hpctesttool test struct-compare "$tmp/sm80.hpcstruct" \
  "$gm/structs/1165a3eeddeea5ea3616d1cdbc6faa59.gpubin-gpucfg-yes.hpcstruct" >"$tmp/cmp80" 2>&1 \
  || fail "sm_80 gpubin: not the reference's structure: $(tail -20 "$tmp/cmp80")"
# nvdisasm refusing (CUDA 13.0's does for the CUDA 11.2 cubin, its messages as printed there):
# our reading stands in, with no warning.
mkdir "$tmp/refuse"
{
  echo '#!/bin/sh'
  echo 'echo "nvdisasm warning : Disassembling Std Elf to Old format or Old Elf to Std format not supported yet, switching to Old format" >&2'
  echo 'echo "nvdisasm warning : Dataflow analysis disabled due to previous warnings" >&2'
  echo 'echo "nvdisasm error   : Cannot print control flow graph as flow analysis is disabled" >&2'
  echo 'exit 1'
} >"$tmp/refuse/nvdisasm"
chmod +x "$tmp/refuse/nvdisasm"
PATH="$tmp/refuse:$PATH" "$hs" --nocache -j2 --gpucfg=yes -o "$tmp/refused.hpcstruct" "$cubin" 2>"$tmp/errr" \
  || fail "--gpucfg=yes with a refusing nvdisasm failed: $(cat "$tmp/errr")"
[ -s "$tmp/errr" ] && fail "a refusing nvdisasm: warned although the SASS was read: $(cat "$tmp/errr")"
cmp "$tmp/refused.hpcstruct" "$tmp/own.hpcstruct" || fail "a refusing nvdisasm: not our reading's loops"
# An SM whose encoding hpcstruct does not know (the sm_75 cubin relabelled sm_100), no
# nvdisasm: one warning naming the binary, no loops, functions kept.
cp "$cubin" "$tmp/sm100.cubin"
printf '\x64\x05\x64\x00' | dd of="$tmp/sm100.cubin" bs=1 seek=48 conv=notrunc status=none
PATH="$tmp/nopath" "$hs" --nocache --gpucfg=yes -o "$tmp/nogpu.hpcstruct" "$tmp/sm100.cubin" 2>"$tmp/errn" \
  || fail "--gpucfg=yes without nvdisasm failed on sm_100"
[ "$(wc -l <"$tmp/errn")" = 1 ] && grep -q "$tmp/sm100.cubin: .*sm_100.*nvdisasm.*loops are omitted" "$tmp/errn" \
  || fail "no one-line warning naming the binary: $(cat "$tmp/errn")"
grep -q "<L " "$tmp/nogpu.hpcstruct" && fail "loops without nvdisasm on sm_100"
grep -q 'n="f3_2()"' "$tmp/nogpu.hpcstruct" || fail "functions lost without nvdisasm"
fi
echo "hpcstruct: cache, directory mode, -j, malformed binaries, --gpucfg and the reference's options behave"
