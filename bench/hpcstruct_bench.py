#!/usr/bin/python3
"""hpcstruct speed, scaling and memory on large binaries.

For each binary, prints from one run: its code size (executable sections), the time and peak
memory of `objdump -d` plus `readelf --debug-dump=decodedline` (the reading-speed baseline),
hpcstruct at -j1 and -j2 (no cache), MB of code per second, the -j1 -> -j2 speedup, whether
the -j1 and -j2 outputs are byte-identical, and the time of a second run served by the cache.

usage: bench/hpcstruct_bench.py BUILD_DIR [BINARY...]
Default binaries: Debian's libLLVM-14.so.1 (package libllvm14; installed on request, it is
not a build dependency) and BUILD_DIR/bin/hpcprof and hpcstruct (build them -g -O2, i.e.
RelWithDebInfo). HPCSTRUCT_BENCH_REPS=N takes the best of N runs (default 1).
HPCSTRUCT_BENCH_DWARF_CACHE=MiB passes --dwarf-cache to hpcstruct. A binary named
`many-units` is generated first (bench/gen_many_units.py: 161 C units, 5 MB of DWARF) to
show memory bounded by the DWARF budget rather than by the debug information.
"""
import filecmp
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LLVM = Path("/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1")


def run(cmd, reps=1):
    """Best wall time (s), the peak RSS (MiB) and CPU time (s) of that run; output discarded."""
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        if status != 0:
            sys.exit(f"failed ({status}): {' '.join(map(str, cmd))}")
        if best is None or wall < best[0]:
            best = (wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime)
    return best


def code_bytes(path):
    """Sum of the sizes of SHF_EXECINSTR sections of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        hdr = f.read(64)
        if hdr[:4] != b"\x7fELF" or hdr[4] != 2 or hdr[5] != 1:
            sys.exit(f"{path}: not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", hdr, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", hdr, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
    total = 0
    for i in range(shnum):
        sh_type, sh_flags = struct.unpack_from("<IQ", table, i * shentsize + 4)
        sh_size, = struct.unpack_from("<Q", table, i * shentsize + 32)
        if sh_flags & 0x4 and sh_type != 8:  # SHF_EXECINSTR, not NOBITS
            total += sh_size
    return total


def ensure_llvm():
    if LLVM.exists():
        return True
    print(f"{LLVM} is missing: it comes with Debian's libllvm14 package.", file=sys.stderr)
    if os.geteuid() == 0 and sys.stdin.isatty():
        if input("install it with apt-get now? [y/N] ").strip().lower() == "y":
            subprocess.run(["apt-get", "install", "-y", "libllvm14"], check=True)
            return LLVM.exists()
    print("install it with `apt-get install libllvm14`; skipping it", file=sys.stderr)
    return False


def scale(build, counts, where):
    """Peak memory and CPU time against code size on generated binaries."""
    hpcstruct = build / "bin/hpcstruct"
    before = os.environ.get("HPCSTRUCT_BENCH_BEFORE")
    extra = []
    if os.environ.get("HPCSTRUCT_BENCH_DWARF_CACHE"):
        extra = ["--dwarf-cache", os.environ["HPCSTRUCT_BENCH_DWARF_CACHE"]]
    where.mkdir(parents=True, exist_ok=True)
    base = where / "many-units"
    missing = [c for c in counts if not (where / f"many-units.x{c}").exists()]
    if missing:
        gen = Path(__file__).with_name("gen_many_units.py")
        subprocess.run([sys.executable, gen, base, "160", ",".join(map(str, missing)) + ","], check=True)
    tools = [("after", hpcstruct)] + ([("before", Path(before))] if before else [])
    print(f"-j2 {' '.join(extra)}; after = {hpcstruct}" + (f", before = {before}" if before else ""))
    print(f"{'binary':<18} {'code MB':>8} {'file MB':>8} " +
          " ".join(f"{t + ' cpu s':>13} {t + ' wall s':>13} {t + ' MiB':>11} {'MiB/MB':>6}" for t, _ in tools) +
          (f" {'same':>4}" if before else ""))
    out = where / "out"
    out.mkdir(exist_ok=True)
    try:
        for c in counts:
            b = where / f"many-units.x{c}"
            mb = code_bytes(b) / 1e6
            cells, outs = [], []
            for t, tool in tools:
                o = out / f"{b.name}.{t}.hpcstruct"
                w, m, cpu = run([tool, "--nocache", "-j2", *extra, "-o", o, b])
                cells.append(f"{cpu:>13.2f} {w:>13.2f} {m:>11.1f} {m / mb:>6.2f}")
                outs.append(o)
            same = (" " + ("yes" if filecmp.cmp(outs[0], outs[1], shallow=False) else "NO").rjust(4)) if before else ""
            print(f"{b.name:<18} {mb:>8.1f} {b.stat().st_size / 1e6:>8.1f} " + " ".join(cells) + same, flush=True)
            for o in outs:
                o.unlink()
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if len(sys.argv) > 2 and sys.argv[2] == "--scale":
        counts = [int(c) for c in sys.argv[3].split(",")]
        if len(sys.argv) > 4:
            scale(Path(sys.argv[1]), counts, Path(sys.argv[4]))
        else:
            with tempfile.TemporaryDirectory(prefix="hpcstruct-scale-") as d:
                scale(Path(sys.argv[1]), counts, Path(d))
        return
    build = Path(sys.argv[1])
    hpcstruct = build / "bin/hpcstruct"
    if not hpcstruct.exists():
        sys.exit(f"{hpcstruct}: not built")
    reps = int(os.environ.get("HPCSTRUCT_BENCH_REPS", "1"))
    binaries = [Path(b) for b in sys.argv[2:]]
    for i, b in enumerate(binaries):
        if b.name == "many-units" and not b.exists():
            gen = Path(__file__).with_name("gen_many_units.py")
            subprocess.run([sys.executable, gen, b], check=True)
    extra = []
    if os.environ.get("HPCSTRUCT_BENCH_DWARF_CACHE"):
        extra = ["--dwarf-cache", os.environ["HPCSTRUCT_BENCH_DWARF_CACHE"]]
    if not binaries:
        if ensure_llvm():
            binaries.append(LLVM)
        binaries += [build / "bin/hpcprof", build / "bin/hpcstruct"]
    tmp = Path(tempfile.mkdtemp(prefix="hpcstruct-bench-"))
    cols = (f"{'binary':<20} {'code MB':>7} {'base s':>7} {'base MiB':>8} {'-j1 s':>7} {'-j2 s':>7} "
            f"{'MB/s j1':>7} {'MB/s j2':>7} {'speedup':>7} {'x base':>6} {'MiB j1':>7} {'MiB j2':>7} "
            f"{'cpu j1':>6} {'cpu j2':>6} {'same':>4} {'cached s':>8}")
    try:
        print(f"{os.cpu_count()} CPUs; best of {reps}; hpcstruct {hpcstruct} {' '.join(extra)}")
        print(cols)
        for b in binaries:
            if not b.exists():
                print(f"{b}: missing, skipped", file=sys.stderr)
                continue
            mb = code_bytes(b) / 1e6
            with open(b, "rb") as fh:  # warm the page cache
                while fh.read(1 << 24):
                    pass
            od = run(["objdump", "-d", b], reps)
            rd = run(["readelf", "--debug-dump=decodedline", b], reps)
            base, base_mib = od[0] + rd[0], max(od[1], rd[1])
            res, outs = {}, {}
            for j in (1, 2):
                outs[j] = tmp / f"{b.name}.j{j}.hpcstruct"
                res[j] = run([hpcstruct, "--nocache", f"-j{j}", *extra, "-o", outs[j], b], reps)
            same = filecmp.cmp(outs[1], outs[2], shallow=False)
            cache = tmp / "cache"
            run([hpcstruct, "--cache", cache, "-j2", "-o", tmp / "c1", b])
            cached = run([hpcstruct, "--cache", cache, "-j2", "-o", tmp / "c2", b])[0]
            (w1, m1, c1), (w2, m2, c2) = res[1], res[2]
            print(f"{b.name:<20} {mb:>7.1f} {base:>7.2f} {base_mib:>8.1f} {w1:>7.2f} {w2:>7.2f} "
                  f"{mb / w1:>7.2f} {mb / w2:>7.2f} {w1 / w2:>7.2f} {w2 / base:>6.2f} {m1:>7.1f} {m2:>7.1f} "
                  f"{c1:>6.2f} {c2:>6.2f} {'yes' if same else 'NO':>4} {cached:>8.3f}", flush=True)
        print("base = objdump -d + readelf --debug-dump=decodedline (seconds summed, peak MiB the larger);"
              " x base = hpcstruct -j2 time / base time;\n"
              "cpu = user+sys seconds (on a shared machine, cpu j2 close to cpu j1 means the threads scale)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
