#!/usr/bin/python3
"""Interleaved A/B timing of hpcprof builds on one measurement directory.

Runs each binary N times, alternating between them in an order shuffled each round (so a
drift of the machine's speed hits all alike, and so does anything periodic: on the benchmark's
VM the pages the previous run's database freed seem to go back to the host on a timer, and a
fixed order put one binary in the slow slot every round), and prints per binary the minimum
and median wall and CPU (user + system, from wait4) seconds and the peak resident memory. The
database of each run goes to a scratch directory that is removed before the next run
(replacing it is not analysis), and the input is read once before each run (the kernel may
have dropped part of it from the page cache since).

usage: bench/hpcprof_ab.py MEASUREMENTS THREADS RUNS HPCPROF...
Each run gets --foreign (the synthetic measurements' binaries are not on this machine); set
HPCPROF_AB_FLAGS to give other flags instead (HPCPROF_AB_FLAGS= for none: structure from the
measured binaries, as on a real measurement).
"""
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def warm(d):
    for f in os.listdir(d):
        if not os.path.isfile(os.path.join(d, f)):  # a real measurement's vdso/ and structs/
            continue
        with open(os.path.join(d, f), "rb") as fh:
            while fh.read(1 << 20):
                pass


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    meas, threads, runs, bins = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    flags = os.environ.get("HPCPROF_AB_FLAGS", "--foreign").split()
    out = os.path.join(tempfile.mkdtemp(prefix="hpcprof-ab-"), "db")
    res = {b: [] for b in bins}
    try:
        rng = random.Random(1)
        for _ in range(runs):
            for b in rng.sample(bins, len(bins)):
                shutil.rmtree(out, ignore_errors=True)
                warm(meas)
                t0 = time.perf_counter()
                p = subprocess.Popen([b, *flags, f"-j{threads}", "-o", out, meas],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                if status != 0:
                    sys.exit(f"{b} failed on {meas}")
                res[b].append((time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024))
    finally:
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    for b in bins:
        wall = [r[0] for r in res[b]]
        cpu = [r[1] for r in res[b]]
        print(f"{b}: wall min {min(wall):.3f} median {statistics.median(wall):.3f} s, "
              f"CPU min {min(cpu):.3f} median {statistics.median(cpu):.3f} s, "
              f"peak {max(r[2] for r in res[b]):.1f} MiB")


if __name__ == "__main__":
    main()
