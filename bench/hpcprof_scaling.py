#!/usr/bin/python3
"""hpcprof builds against each other at several thread counts, phase by phase.

For each thread count, runs each build RUNS times (builds in an order shuffled each round,
the input read before every run, each database removed before the next) with -v, and prints
per build the median and minimum wall time, the median against the time to read the input
from the page cache (the best of the reads before the runs, by bin/io_floor beside the first
build's hpcprof: one reused page-aligned 1 MiB buffer),
the median CPU time, the largest peak memory, and the median wall time of each -v phase.
For many-core machines (the thread counts default to 1, 2, 4, ... up to the CPUs there are).

usage: bench/hpcprof_scaling.py MEASUREMENTS RUNS [THREADS,THREADS,...] HPCPROF...
"""
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

_BUFFER = memoryview(bytearray(1 << 20))
IO_FLOOR = None  # bin/io_floor beside the first build's hpcprof, where there is one


def read_all(d):
    if IO_FLOOR is not None:  # compiled, into a page-aligned buffer: the system's floor
        return float(subprocess.run([IO_FLOOR, "read", d], check=True, capture_output=True,
                                    text=True).stdout.split()[0])
    t0 = time.perf_counter()  # a machine with hpcprof alone: Python's reads, about twice as slow
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), "rb", buffering=0) as fh:
            while fh.readinto(_BUFFER):
                pass
    return time.perf_counter() - t0


PHASE = re.compile(r"^\S+: (\S.*?)\s+([0-9.]+) s \(CPU")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    meas, runs = sys.argv[1], int(sys.argv[2])
    rest = sys.argv[3:]
    if re.fullmatch(r"[0-9]+(,[0-9]+)*", rest[0]):
        threads = [int(t) for t in rest[0].split(",")]
        bins = rest[1:]
    else:
        cpus = len(os.sched_getaffinity(0))
        threads = [1]
        while threads[-1] * 2 <= cpus:
            threads.append(threads[-1] * 2)
        bins = rest
    if not bins:
        sys.exit(__doc__)
    global IO_FLOOR
    floor_bin = os.path.join(os.path.dirname(os.path.abspath(bins[0])), "io_floor")
    if os.access(floor_bin, os.X_OK):
        IO_FLOOR = floor_bin
    else:
        print(f"no {floor_bin}: the read floor is Python's, about twice the system's", file=sys.stderr)
    out = os.path.join(tempfile.mkdtemp(prefix="hpcprof-scaling-"), "db")
    size = sum(os.path.getsize(os.path.join(meas, f)) for f in os.listdir(meas))
    try:
        for j in threads:
            res = {b: [] for b in bins}
            floor = min(read_all(meas) for _ in range(3))
            rng = random.Random(j)
            for _ in range(runs):
                for b in rng.sample(bins, len(bins)):
                    shutil.rmtree(out, ignore_errors=True)
                    floor = min(floor, read_all(meas))
                    t0 = time.perf_counter()
                    p = subprocess.Popen([b, "--foreign", "-v", f"-j{j}", "-o", out, meas],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    err = p.stderr.read()
                    _, status, ru = os.wait4(p.pid, 0)
                    wall = time.perf_counter() - t0
                    if status != 0:
                        sys.exit(f"{b} failed on {meas}:\n{err}")
                    phases = {}
                    for line in err.splitlines():
                        if m := PHASE.match(line):
                            phases[m.group(1)] = float(m.group(2))
                    res[b].append((wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, phases))
            print(f"-j{j}: input {size / 1e6:.1f} MB, read {floor:.3f} s")
            for b in bins:
                walls = [r[0] for r in res[b]]
                med = statistics.median(walls)
                names = list(res[b][0][3])
                ph = ", ".join(f"{n} {statistics.median(r[3].get(n, 0) for r in res[b]):.3f}" for n in names)
                print(f"  {b}: wall median {med:.3f} min {min(walls):.3f} s ({med / floor:.1f} x read), "
                      f"CPU {statistics.median(r[1] for r in res[b]):.3f} s, "
                      f"peak {max(r[2] for r in res[b]):.0f} MiB; {ph}")
            sys.stdout.flush()
    finally:
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)


if __name__ == "__main__":
    main()
