#!/usr/bin/env python3
"""hpcprof on real measurements: g++ compiling some of this project's sources, two compilations
at a time, measured by our hpcrun (CPUTIME at 4 kHz, with traces). Real programs' profiles
differ from the synthetic ones in what costs: many processes of several programs (the g++
driver, cc1plus, as, sh), and large binaries without structure files, whose procedures
hpcprof analyses itself.

Prints, from one run: the measurement (profiles, MB, the time to read it from page cache),
then hpcprof at -j1 and -j2 (best of 3; the database's contexts) with the structure analysed
from the binaries (hpcprof's default), without structure (--foreign: the floor of the rest),
hpcstruct on the measurements (-j2: every binary whole) and hpcprof with its structure files,
each also as x read. The databases with and without structure files must agree (checked
with hpcdump: the same contexts and values).

usage: bench/hpcprof_real_bench.py BUILD [sources...]   (default: 9 files of src/analysis)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hpcprof_bench
from hpcprof_bench import read_all  # the read floor, as the synthetic benchmark takes it

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd, out=None):
    """hpcprof_bench.run's measure with stderr silenced too (hpcstruct names each binary)."""
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def best(cmd, out, meas, runs=3):
    """Best wall of `runs`, the input read before each; (wall, CPU, peak MiB, best read)."""
    res, reads = [], []
    for _ in range(runs):
        reads.append(read_all(meas)[0])
        res.append(timed(cmd, out))
    return min(res), min(reads)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = Path(sys.argv[1]).resolve()
    hpcprof_bench.IO_FLOOR = build / "bin/io_floor"
    sources = sys.argv[2:] or [str(ROOT / "src/analysis" / f"{n}.cpp") for n in (
        "pipeline", "transpose", "expand", "propagate", "db_sink", "cct", "hpcrun_source", "options",
        "binary_source")]
    hpcrun, hpcprof, hpcstruct, hpcdump = (build / "bin" / t for t in ("hpcrun", "hpcprof", "hpcstruct", "hpcdump"))
    cxx = shutil.which("c++") or sys.exit("no c++ to measure")
    tmp = Path(tempfile.mkdtemp(prefix="hpcprof-real-"))
    try:
        # Two streams of compilations, as make -j2 would run them.
        half = (len(sources) + 1) // 2
        streams = [sources[:half], sources[half:]]
        script = tmp / "compile.sh"
        lines = ["#!/bin/sh"]
        for k, s in enumerate(streams):
            cmds = "; ".join(f"{cxx} -I{ROOT / 'src'} -O2 -g -DNDEBUG -std=c++20 -c {f} -o {tmp}/o{k}_{i}.o"
                             for i, f in enumerate(s))
            lines.append(f"( {cmds} ) &")
        lines.append("wait")
        script.write_text("\n".join(lines) + "\n")
        script.chmod(0o755)
        meas = tmp / "m"
        t0 = time.perf_counter()
        subprocess.run([hpcrun, "-e", "CPUTIME@250", "-t", "-o", meas, script], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        measured = time.perf_counter() - t0
        profiles = len(list(meas.glob("*.hpcrun")))
        t_read, nbytes = min(read_all(meas) for _ in range(5))
        print(f"measured: {len(sources)} compilations (2 at a time) in {measured:.1f} s, {profiles} profiles, "
              f"{nbytes / 1e6:.1f} MB, read {t_read * 1e3:.1f} ms")

        def line(name, cmd, out):
            rows = []
            for j in (1, 2):
                (wall, cpu, peak), r = best([*cmd[:1], f"-j{j}", *cmd[1:]], out(j), meas)
                rows.append(f"-j{j} {wall:.3f} s (CPU {cpu:.3f} s, {wall / r:.0f} x read), peak {peak:.0f} MiB")
            print(f"  {name:<34} " + "; ".join(rows))

        print("hpcprof:")
        line("structure from the binaries", [hpcprof, "-o", tmp / "db", meas], lambda j: tmp / "db")
        shutil.copytree(tmp / "db", tmp / "db.binaries")
        line("no structure (--foreign)", [hpcprof, "--foreign", "-o", tmp / "dbf", meas], lambda j: tmp / "dbf")
        t_struct = min(timed([hpcstruct, "-j2", "--nocache", meas])[0] for _ in range(1))
        print(f"  hpcstruct -j2 on the measurements  {t_struct:.3f} s (every binary whole)")
        line("structure files from hpcstruct", [hpcprof, "-o", tmp / "dbs", meas], lambda j: tmp / "dbs")
        a = subprocess.run([hpcdump, tmp / "db.binaries"], capture_output=True, text=True, check=True).stdout
        b = subprocess.run([hpcdump, tmp / "dbs"], capture_output=True, text=True, check=True).stdout
        print(f"databases from the binaries and from hpcstruct's files: {'the same' if a == b else 'DIFFER'}"
              f" (hpcdump, {len(a.splitlines())} lines)")
        if a != b:
            sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
