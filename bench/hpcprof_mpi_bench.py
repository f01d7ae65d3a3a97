#!/usr/bin/python3
"""hpcprof-mpi on synthetic measurements (bench/gen_measurements) at 1, 2 and 4 ranks.

Prints, per run: wall time (whole mpiexec), and per rank: its time, CPU time (user + system,
meaningful where other work shares the cores), peak memory, its work
(profiles, input MB, MB written, cct.db contexts), communication volume and time, the time
in the CCT reduction (tree reduction + broadcast + merge) and its share of the rank's time.
hpcprof -jTHREADS on the same input is the baseline; every database is checked byte-equal to
hpcprof -j1's.

usage: bench/hpcprof_mpi_bench.py BUILD_DIR [profiles=200] [nodes=20000] [threads=1]
"""
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
LINE = re.compile(r"hpcprof-mpi: rank (\d+): (.*)")


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stderr}")
    return wall, p.stderr


def same_db(a, b):
    files = ["meta.db", "profile.db", "cct.db", "trace.db", "metrics/default.yaml"]
    return all(filecmp.cmp(Path(a) / f, Path(b) / f, shallow=False) for f in files if (Path(a) / f).exists())


def main():
    build = Path(sys.argv[1])
    profiles = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    nodes = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    gen, prof, mpi = build / "bin/gen_measurements", build / "bin/hpcprof", build / "bin/hpcprof-mpi"
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    tmp = Path(tempfile.mkdtemp(prefix="hpcprof-mpi-bench-"))
    try:
        meas = tmp / "m"
        subprocess.run([gen, meas, str(profiles), str(nodes), "3", "2000"], check=True, stdout=subprocess.DEVNULL)
        in_mb = sum(f.stat().st_size for f in meas.iterdir()) / 1e6
        base, _ = min(timed([prof, "--foreign", f"-j{threads}", "-o", tmp / "ref.d", meas]) for _ in range(2))
        print(f"synthetic input: {profiles} profiles, {nodes} CCT nodes each, {in_mb:.1f} MB; "
              f"{os.cpu_count()} cores; -j{threads} per rank")
        print(f"hpcprof -j{threads}: {base:.2f} s")
        # hpcprof at -j2 and up places rows in completion order (same content); hpcprof-mpi
        # writes hpcprof -j1's layout at any -j, so the byte comparison is against -j1.
        if threads != 1:
            timed([prof, "--foreign", "-j1", "-o", tmp / "ref1.d", meas])
            shutil.rmtree(tmp / "ref.d")
            (tmp / "ref1.d").rename(tmp / "ref.d")
        print(f"{'ranks':>5} {'wall s':>7} {'speedup':>7} {'same':>4} | {'rank':>4} {'time s':>6} {'peak MiB':>8} "
              f"{'cpu s':>6} {'profiles':>8} {'in MB':>6} {'out MB':>6} {'contexts':>8} {'comm MB':>7} {'comm s':>6} "
              f"{'reduce s':>8} {'reduce %':>8}")
        for ranks in (1, 2, 4):
            out = tmp / f"n{ranks}.d"
            runs = [timed([mpiexec, "-n", str(ranks), mpi, "--foreign", f"-j{threads}", "-v", "-o", out, meas])
                    for _ in range(2)]
            wall, err = min(runs, key=lambda r: r[0])
            same = "yes" if same_db(tmp / "ref.d", out) else "NO"
            for line in err.splitlines():
                m = LINE.match(line)
                if not m:
                    continue
                f = dict(kv.split("=") for kv in m.group(2).split())
                t = float(f["wall_s"])
                head = f"{ranks:>5} {wall:>7.2f} {base / wall:>7.2f} {same:>4}" if m.group(1) == "0" else " " * 26
                print(f"{head} | {m.group(1):>4} {t:>6.2f} {float(f['peak_mib']):>8.1f} "
                      f"{float(f['cpu_s']):>6.2f} {f['profiles']:>8} "
                      f"{int(f['input_bytes']) / 1e6:>6.1f} {int(f['output_bytes']) / 1e6:>6.1f} {f['contexts']:>8} "
                      f"{int(f['comm_bytes']) / 1e6:>7.2f} {float(f['comm_s']):>6.2f} {float(f['reduce_s']):>8.3f} "
                      f"{100 * float(f['reduce_s']) / t:>7.1f}%")
            shutil.rmtree(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
