#!/usr/bin/env python3
"""Overhead of hpcrun's OpenCL wrappers (hpcrun -e gpu=opencl) on many small kernels.

Usage: opencl_overhead.py BUILD_DIR [--kernels N] [--batch B] [--rounds R]

Runs the opencl_small_kernels workload (N tiny kernels, a clFinish every B) bare, under
hpcrun -e gpu=opencl, with -t (stream tracing) and with -e CPUTIME -e gpu=opencl -t, in
alternating rounds. The workload prints the wall time of its enqueue/finish loop alone
(the program build excluded); per configuration the script prints the median loop time,
the median ratio to the bare run of the same round, and the added time per kernel.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def loop_ns(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if out.returncode != 0:
        sys.exit(f"opencl_overhead: {' '.join(cmd)} failed with status {out.returncode}")
    for line in out.stdout.splitlines():
        if line.startswith("loop_ns "):
            return int(line.split()[1])
    sys.exit("opencl_overhead: no loop_ns line")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--kernels", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    exe = os.path.join(a.build, "measurement-workloads", "opencl_small_kernels-gcc")
    hpcrun = os.path.join(a.build, "bin", "hpcrun")
    if not os.path.exists(exe):
        sys.exit("opencl_overhead: build the measurement_workloads target with OpenCL first")
    tmp = tempfile.mkdtemp(prefix="opencl-overhead-")
    args = [str(a.kernels), str(a.batch)]
    configs = {
        "bare": lambda d: [exe] + args,
        "gpu=opencl": lambda d: [hpcrun, "-o", d, "-e", "gpu=opencl", exe] + args,
        "gpu=opencl -t": lambda d: [hpcrun, "-o", d, "-e", "gpu=opencl", "-t", exe] + args,
        "CPUTIME + gpu=opencl -t": lambda d: [hpcrun, "-o", d, "-e", "CPUTIME", "-e", "gpu=opencl", "-t", exe] + args,
    }
    times = {k: [] for k in configs}
    ratios = {k: [] for k in configs}
    try:
        loop_ns(configs["bare"](None))  # warm PoCL's kernel cache
        for r in range(a.rounds):
            bare = None
            for name, cmd in configs.items():
                d = os.path.join(tmp, f"{r}-{len(times[name])}")
                t = loop_ns(cmd(d))
                shutil.rmtree(d, ignore_errors=True)
                if name == "bare":
                    bare = t
                times[name].append(t)
                ratios[name].append(t / bare)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["bare"])
    print(f"{a.kernels} kernels, clFinish every {a.batch}, {a.rounds} rounds (median)")
    print(f"{'configuration':<26} {'loop ms':>9} {'ratio':>7} {'us/kernel added':>16}")
    for name in configs:
        med = statistics.median(times[name])
        print(f"{name:<26} {med / 1e6:9.1f} {statistics.median(ratios[name]):7.3f} "
              f"{(med - base) / 1e3 / a.kernels:16.2f}")


if __name__ == "__main__":
    main()
