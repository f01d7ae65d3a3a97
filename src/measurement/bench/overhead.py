#!/usr/bin/env python3
"""Sampling overhead of hpcrun, side by side with the machine's floor and with perf.

Usage: overhead.py BUILD_DIR [--scale S] [--pairs N] [--workloads callheavy,recursion,...]

For each workload (built -O2 -fomit-frame-pointer by src/measurement/workloads) it runs, in
alternating rounds, the bare program, the floor (../shared/bench/nullsample.c: a timer
signal into an empty handler, LD_PRELOADed), the perf floor (nullperf.c here: a perf_event
cpu-clock's overflow signal into an empty handler, set up as hpcrun sets its events up),
hpcrun, and perf record when perf is installed, at 200 Hz and 4 kHz. Every figure is the CPU
time (user + system, the measuring tool's own processes included) of one run; a ratio is the
median over rounds of run / bare of the same round. REALTIME uses CLOCK_MONOTONIC like the
floor, so those two compare directly; perf::cpu-clock compares with the perf floor (the
"floor" column of its row): the kernel's perf path costs more than a timer's.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "../../../../shared"))


def cpu_of(cmd, env=None):
    """Runs cmd with stdout discarded and returns its CPU seconds (children included)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"overhead: {' '.join(cmd)} failed with status {status}")
    return ru.ru_utime + ru.ru_stime


def build_floor(build):
    src = os.path.join(SHARED, "bench", "nullsample.c")
    out = os.path.join(build, "bench-nullsample.so")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.check_call(["gcc", "-O2", "-shared", "-fPIC", src, "-o", out, "-lunwind", "-lrt"])
    return out


def build_perf_floor(build):
    src = os.path.join(HERE, "nullperf.c")
    out = os.path.join(build, "bench-nullperf.so")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.check_call(["gcc", "-O2", "-shared", "-fPIC", src, "-o", out])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--scale", type=float, default=3.0, help="workload scale (callheavy: ~0.45 s per unit)")
    ap.add_argument("--pairs", type=int, default=5, help="alternating rounds per configuration")
    ap.add_argument("--workloads", default="callheavy,recursion")
    ap.add_argument("--compiler", default="gcc")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    hpcrun = os.path.join(build, "bin", "hpcrun")
    floor = build_floor(build)
    perf_floor = build_perf_floor(build)
    perf = shutil.which("perf")
    if perf and subprocess.run([perf, "record", "-q", "-o", "/dev/null", "true"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        perf = None
    scratch = tempfile.mkdtemp(prefix="hpcrun-overhead-")
    meas = os.path.join(scratch, "m")
    perfdata = os.path.join(scratch, "perf.data")

    def configs(hz):
        us = 1000000 // hz
        env = dict(os.environ, NULLSAMPLE_US=str(us), LD_PRELOAD=floor)
        penv = dict(os.environ, NULLPERF_HZ=str(hz), LD_PRELOAD=perf_floor)
        c = [("floor", lambda w: cpu_of(w, env)),
             ("perf floor", lambda w: cpu_of(w, penv)),
             (f"hpcrun REALTIME@{us}", lambda w: cpu_of([hpcrun, "-e", f"REALTIME@{us}", "-o", meas] + w)),
             (f"hpcrun perf::cpu-clock@f{hz}",
              lambda w: cpu_of([hpcrun, "-e", f"perf::cpu-clock@f{hz}", "-o", meas] + w))]
        if perf:
            c.append(("perf record -g", lambda w: cpu_of([perf, "record", "-q", "-F", str(hz), "-g", "-o", perfdata, "--"] + w)))
            c.append(("perf record --call-graph dwarf",
                      lambda w: cpu_of([perf, "record", "-q", "-F", str(hz), "--call-graph", "dwarf", "-o", perfdata, "--"] + w)))
        return c

    # Fixed cost of measuring at all (loading the runtime, writing the files), per process:
    # it is in every ratio below, so short runs look worse than long ones.
    tiny = [os.path.join(build, "measurement-workloads", f"callheavy-{args.compiler}"), "0.001"]
    fixed = statistics.median(cpu_of([hpcrun, "-o", meas] + tiny) - cpu_of(tiny) for _ in range(5))
    shutil.rmtree(meas, ignore_errors=True)
    print(f"# hpcrun start-up and finish: {fixed * 1000:.1f} ms CPU per process")
    print(f"# CPU time ratio to bare, median of {args.pairs} alternating rounds; scale {args.scale}")
    print(f"| workload | rate | bare s | {'floor':>8} | what | ratio |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    for wl in args.workloads.split(","):
        exe = [os.path.join(build, "measurement-workloads", f"{wl}-{args.compiler}"), str(args.scale)]
        for hz in (200, 4000):
            cs = configs(hz)
            bare, runs = [], {name: [] for name, _ in cs}
            for _ in range(args.pairs):
                b = cpu_of(exe)
                bare.append(b)
                for name, fn in cs:
                    runs[name].append(fn(exe) / b)
                    shutil.rmtree(meas, ignore_errors=True)
            fl, pfl = statistics.median(runs["floor"]), statistics.median(runs["perf floor"])
            for name, _ in cs:
                # A perf event's row against the perf floor, the others against the timer's.
                f = pfl if "perf::" in name or name == "perf floor" else fl
                print(f"| {wl} | {hz} Hz | {statistics.median(bare):.2f} | {f:8.3f} | {name} | "
                      f"{statistics.median(runs[name]):.3f} |", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
