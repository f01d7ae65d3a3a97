#!/usr/bin/python3
"""hpcprof throughput, scaling and memory on synthetic measurements (bench/gen_measurements).

Prints, from one run: the time to read the input bytes from the page cache (the floor: the
best of reads taken before every hpcprof run, by bin/io_floor, compiled code reading into a
page-aligned buffer), hpcprof wall time at -j1 and -j2 (best of 3)
and both against the floor (the target is 3x), the time to write the database's bytes to a
new file and -j2 against reading plus writing, CPU time at -j1, input MB/s per core, the
-j1 -> -j2 speedup, peak memory at N, 2N and 4N profiles (it should not grow with the
profile count), the database size against a dense matrix of the same values, hpcprof's fixed
cost (a run on one tiny profile: process start, heap on huge pages, output set-up),
nine other shapes (N profiles each lacking about 1 % of the tree's leaves; 10,000 profiles of
5,000 nodes; 100 profiles of 400,000 nodes; N profiles of a shallow tree, listed alike and
each in its own order; N profiles describing 93 metrics with 1, then 25, measured (and 16
profiles of 200,000 nodes with 25); 64 profiles
with traces of 500,000 records: x read and peak
memory, and one more -j2 run with -v: the time its threads spent in reads and in writes;
for the 400,000-node tree also its first profile alone at -j2, what the tree costs whatever
the profile count, and the other 99 profiles' time beyond it against their read),
peak memory at 500 and 4,000 profiles that each describe 40 metrics, hpcprof -v's
per-phase times at -j1 for N (with each phase's time in reads and writes), and what new
memory costs the machine at the end of the run (the first touch after a pause, then again).

usage: bench/hpcprof_bench.py BUILD_DIR [profiles=500] [nodes=20000]
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(cmd, out=None):
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)  # replacing an old database is not analysis
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}")
    return wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime  # s, MiB, CPU s


# bin/io_floor of the build under test (set by main; a script importing read_all sets it too).
IO_FLOOR = None


def read_all(d):
    """Wall time to read every file of d from the page cache, and the bytes, as measured by
    bin/io_floor: compiled code reading into one page-aligned 1 MiB buffer. Python's own
    reads took about twice as long (its buffers lie a few bytes off a page boundary, and each
    file cost its interpreter ~10 us), which flattered the ratios; before that, a new object
    per MiB read took 17 times as long on large files."""
    out = subprocess.run([IO_FLOOR, "read", d], check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def write_new(d, nbytes):
    """Wall time to write nbytes into a new file of d in 1 MiB writes (as a database's files are
    written: fresh page-cache pages, no fsync), the file removed after; by bin/io_floor."""
    out = subprocess.run([IO_FLOOR, "write", d, str(nbytes)], check=True, capture_output=True, text=True).stdout
    return float(out.split()[0])


def fresh_memory(mib=128):
    """Seconds to touch mib MiB of new anonymous memory advised for huge pages, as hpcprof's heap
    is, a write to each 4 KiB page. On the benchmark's VM the guest reports freed memory to
    the host (free page reporting), which takes it back after a few seconds: the first touch
    of such memory costs the host's faults (about 3 ms a MiB against 0.12 when the guest
    still holds it), and so does every new page a run takes, its heap and its files' page
    cache alike."""
    import mmap
    m = mmap.mmap(-1, mib << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # shared would be shmem
    if hasattr(m, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE)
    t0 = time.perf_counter()
    for off in range(0, mib << 20, 4096):
        m[off] = 1
    t = time.perf_counter() - t0
    m.close()
    return t


def phases(cmd):
    """hpcprof -v's per-phase lines: [(phase, wall seconds, CPU seconds or None, seconds in
    reads, seconds in writes)]."""
    err = subprocess.run(cmd + ["-v"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, check=True).stderr
    out = []
    for line in err.splitlines():
        m = re.match(r"hpcprof: (.+?)\s+([\d.]+) s(?: \(CPU ([\d.]+) s.*\))?$", line.rstrip())
        if m:
            io = re.search(r"read [\d.]+ MB in ([\d.]+) s, wrote [\d.]+ MB in ([\d.]+) s", line)
            # "found N profiles; checked and indexed K structure files (X MB)": before the pipeline
            name = "inputs, structure files" if m.group(1).startswith("found ") else m.group(1)
            out.append((name, float(m.group(2)), float(m.group(3)) if m.group(3) else None,
                        float(io.group(1)) if io else 0.0, float(io.group(2)) if io else 0.0))
    return out


def io_split(prof, meas, out):
    """One more -j2 run with -v after the input was read: its wall time and the time its
    threads spent in reads and in writes (summed over threads, so up to twice the wall
    time's share), as a string. `out` is the best runs' database, removed first as before
    each of them: a database written while the last one still holds its page cache is
    written into fresh memory, which this VM makes up to ten times slower."""
    shutil.rmtree(out, ignore_errors=True)
    read_all(meas)
    ph = phases([prof, "--foreign", "-j2", "-o", out, meas])
    shutil.rmtree(out, ignore_errors=True)
    wall, rd, wr = (sum(p[k] for p in ph) for k in (1, 3, 4))
    return f"a -v run at -j2 {wall:.3f} s, in reads {rd:.3f} s and writes {wr:.3f} s"


def n_contexts(db):
    # Only the header: reading the whole file would grow this process, and a child forked
    # from it reports the parent's resident size at the fork as its own peak (ru_maxrss
    # keeps the pre-exec high-water mark).
    with open(Path(db) / "cct.db", "rb") as f:
        f.seek(0x18)
        p = struct.unpack("<Q", f.read(8))[0]
        f.seek(p + 8)
        return struct.unpack("<I", f.read(4))[0]


def best_runs(prof, meas, out, reads):
    """hpcprof at -j1 and -j2, best of 3 each, the input read before every run (appended to
    `reads`): {j: (wall s, peak MiB, CPU s)}."""
    res = {}
    for j in (1, 2):
        runs = []
        for _ in range(3):
            reads.append(read_all(meas))
            runs.append(run([prof, "--foreign", f"-j{j}", "-o", out(j), meas], out(j)))
        res[j] = min(runs)
    return res


def one_profile(gen, prof, tmp, nodes, trace, kind):
    """The first profile of a shape alone (the generator makes the same first profile
    whatever the count): best of 3 at -j2 and its best read, (wall s, read s). What a tree
    costs whatever the number of profiles (its contexts made, ordered, described in meta.db)."""
    meas = tmp / f"one{nodes}"
    subprocess.run([gen, meas, "1", str(nodes), "3", str(trace), kind], check=True, stdout=subprocess.DEVNULL)
    os.sync()
    read_all(meas)
    reads, runs = [], []
    for _ in range(3):
        reads.append(read_all(meas)[0])
        runs.append(run([prof, "--foreign", "-j2", "-o", tmp / "done", meas], tmp / "done")[0])
    shutil.rmtree(tmp / "done", ignore_errors=True)
    shutil.rmtree(meas)
    return min(runs), min(reads)


def other_shape(gen, prof, tmp, label, profiles, nodes, trace, kind="same", alone=False, metrics=None):
    """One more input shape: best of 3 at -j1 and -j2 against the best of the reads before
    each run, and peak memory; with `alone`, also its first profile alone at -j2 and the
    other profiles' share (the -j2 time beyond that one's over the reading beyond its); with
    `metrics` (described, measured), each profile describes that many metrics and has values
    of the first few; one printed line."""
    meas = tmp / f"x{profiles}x{nodes}"
    extra = [str(metrics[0]), str(metrics[1])] if metrics else []
    subprocess.run([gen, meas, str(profiles), str(nodes), "3", str(trace), kind] + extra, check=True,
                   stdout=subprocess.DEVNULL)
    os.sync()
    read_all(meas)
    reads = [read_all(meas) for _ in range(2)]
    res = best_runs(prof, meas, lambda j: tmp / "dx", reads)
    db = tmp / "dx"
    dbsize = sum(f.stat().st_size for f in db.rglob("*") if f.is_file())
    split = io_split(prof, meas, db)
    shutil.rmtree(meas)
    t_write = min(write_new(tmp, dbsize) for _ in range(3))
    t_read, nbytes = min(reads)
    (w1, m1, _), (w2, m2, _) = res[1], res[2]
    one = ""
    if alone:
        w_one, r_one = one_profile(gen, prof, tmp, nodes, trace, kind)
        one = (f"; its first profile alone at -j2 {w_one:.3f} s (read {r_one * 1000:.1f} ms), the other "
               f"{profiles - 1} at -j2 {(w2 - w_one) / (t_read - r_one):.1f} x their read")
    return (f"{label}, {profiles} profiles of {nodes} CCT nodes: {nbytes / 1e6:.0f} MB, read {t_read:.3f} s, "
            f"-j1 {w1:.3f} s ({w1 / t_read:.1f} x read), -j2 {w2:.3f} s ({w2 / t_read:.1f} x read), "
            f"peak {m1:.1f} / {m2:.1f} MiB; database {dbsize / 1e6:.0f} MB, written in {t_write:.3f} s, "
            f"-j2 {w2 / (t_read + t_write):.1f} x (read + write); {split}{one}")


def metric_tables(gen, prof, tmp, metrics=40, nodes=100, counts=(500, 4000)):
    """Peak memory at -j2 against the profile count where each profile describes many metrics
    (a GPU measurement's table): small trees, so that what grows with the count shows; one
    printed line."""
    peaks = []
    for n in counts:
        meas = tmp / f"t{n}"
        subprocess.run([gen, meas, str(n), str(nodes), "3", "20", "same", str(metrics)], check=True,
                       stdout=subprocess.DEVNULL)
        peaks.append(min(run([prof, "--foreign", "-j2", "-o", tmp / "dt", meas], tmp / "dt")[1] for _ in range(3)))
        shutil.rmtree(meas)
    shutil.rmtree(tmp / "dt", ignore_errors=True)
    per = (peaks[-1] - peaks[0]) * 1024 / (counts[-1] - counts[0])
    return (f"metric tables, profiles of {nodes} CCT nodes describing {metrics} metrics: peak -j2 "
            + ", ".join(f"{p:.1f} MiB at {n}" for n, p in zip(counts, peaks))
            + f" ({per:.1f} KiB more a profile)")


def main():
    build = Path(sys.argv[1])
    profiles = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    nodes = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    gen, prof = build / "bin/gen_measurements", build / "bin/hpcprof"
    global IO_FLOOR
    IO_FLOOR = build / "bin/io_floor"
    tmp = Path(tempfile.mkdtemp(prefix="hpcprof-bench-"))
    try:
        rows = {}
        breakdown = None
        shuffled = None
        tiny = tmp / "tiny"
        subprocess.run([gen, tiny, "1", "100", "3", "10"], check=True, stdout=subprocess.DEVNULL)
        fixed = min(run([prof, "--foreign", "-j1", "-o", tmp / "dtiny", tiny], tmp / "dtiny") for _ in range(5))
        for n in (profiles, 2 * profiles, 4 * profiles):
            meas = tmp / f"m{n}"
            subprocess.run([gen, meas, str(n), str(nodes), "3", "2000"], check=True,
                           stdout=subprocess.DEVNULL)
            os.sync()  # no write-back of the new files during the timings
            read_all(meas)  # warm the page cache
            # The floor: the best of reads taken before each hpcprof run too (a slow moment
            # of the machine must not make the floor, and so the ratios, look better).
            reads = [read_all(meas) for _ in range(3)]
            res = best_runs(prof, meas, lambda j: tmp / f"d{n}j{j}", reads)
            t_read, nbytes = min(reads)
            if breakdown is None:
                # Into the -j2 runs' database, removed first: a third database beside the two
                # would be written into memory the VM has to find afresh (six times slower).
                shutil.rmtree(tmp / f"d{n}j2")
                breakdown = (t_read, phases([prof, "--foreign", "-j1", "-o", tmp / f"d{n}j2", meas]))
            db = tmp / f"d{n}j1"
            dbsize = sum(f.stat().st_size for f in db.rglob("*") if f.is_file())
            dense = n_contexts(db) * 4 * (n + 1) * 8  # contexts x (metric x 4 scopes) x profiles
            t_write = min(write_new(tmp, dbsize) for _ in range(3))
            rows[n] = (nbytes, t_read, res, dbsize, dense, t_write)
            for j in (1, 2):
                shutil.rmtree(tmp / f"d{n}j{j}", ignore_errors=True)
            shutil.rmtree(meas)
            if n == profiles:
                # The same tree listed in each profile's own order (as hpcrun numbers nodes in
                # the order a thread reaches them): no profile's node list repeats the last one's.
                sh = tmp / f"s{n}"
                subprocess.run([gen, sh, str(n), str(nodes), "3", "2000", "shuffled"], check=True,
                               stdout=subprocess.DEVNULL)
                os.sync()
                read_all(sh)
                s_reads = [read_all(sh) for _ in range(3)]
                s_res = best_runs(prof, sh, lambda j: tmp / f"ds{j}", s_reads)
                s_read, s_bytes = min(s_reads)
                shutil.rmtree(tmp / "ds2")
                shuffled = (n, s_bytes, s_read, s_res,
                            phases([prof, "--foreign", "-j1", "-o", tmp / "ds2", sh]))
                for j in (1, 2):
                    shutil.rmtree(tmp / f"ds{j}", ignore_errors=True)
                shutil.rmtree(sh)
        # Three other shapes: many small profiles (the ratio falls as fixed costs spread), a
        # large tree (memory and time then follow the tree's size), and the standard input's
        # size with a shallow tree (paths of about 10 contexts, as most programs' are, where the
        # standard tree's are about 800 deep: fewer values to propagate and transpose).
        # And the standard shape with each profile lacking a few leaves of its own (as threads
        # of one program reach not quite the same code): no node list is byte-equal to another.
        others = [other_shape(gen, prof, tmp, "varied node lists", profiles, nodes, 2000, "varied"),
                  other_shape(gen, prof, tmp, "many profiles", 10000, 5000, 500),
                  other_shape(gen, prof, tmp, "large tree", 100, 400000, 2000, alone=True),
                  other_shape(gen, prof, tmp, "shallow tree", profiles, nodes, 2000, "bushy"),
                  # The shallow tree listed in each profile's own order: most programs' threads.
                  other_shape(gen, prof, tmp, "shallow tree, own orders", profiles, nodes, 2000, "shuffled-bushy"),
                  # A GPU measurement's metric table (the reference's CUDA profiles describe 93
                  # metrics) with one of them measured, then 25 (PC sampling's stall reasons),
                  # each valued node's value on one of those.
                  other_shape(gen, prof, tmp, "93 metrics described, 1 measured", profiles, nodes, 2000,
                              metrics=(93, 1)),
                  other_shape(gen, prof, tmp, "93 metrics described, 25 measured", profiles, nodes, 2000,
                              metrics=(93, 25)),
                  # The same on a large tree: a propagator's memory follows the values a profile
                  # has, not the tree times the metrics.
                  other_shape(gen, prof, tmp, "93 metrics described, 25 measured, large tree", 16, 200000, 2000,
                              metrics=(93, 25)),
                  # Long traces (a 4 kHz sample rate over two minutes): the trace is most of
                  # the input and the database.
                  other_shape(gen, prof, tmp, "long traces (500,000 records)", 64, nodes, 500000),
                  metric_tables(gen, prof, tmp)]
        time.sleep(5)  # freed memory goes back to the host meanwhile
        fresh = [fresh_memory() for _ in range(3)]
        print(f"synthetic input: {nodes} CCT nodes per profile, 3% non-zero, 2000 trace records")
        print(f"load average before: {os.getloadavg()[0]:.2f} (wall times are only comparable on a quiet machine; "
              f"CPU s is steadier)")
        print(f"fixed cost (one profile of 100 nodes): {fixed[0]:.3f} s wall, {fixed[2]:.3f} s CPU")
        print("fresh memory (128 MiB of new pages, huge pages advised as hpcprof's heap; after a 5 s pause, then "
              "twice more at once): " + ", ".join(f"{t * 1000 / 128:.2f}" for t in fresh) + " ms a MiB")
        print(f"{'profiles':>8} {'input MB':>9} {'read s':>7} {'-j1 s':>7} {'-j2 s':>7} {'CPU s j1':>8} "
              f"{'MB/s/core j1':>12} {'speedup':>7} {'x read j1':>9} {'x read j2':>9} {'CPU x read':>10} "
              f"{'peak MiB j1':>11} {'peak MiB j2':>11} {'db MB':>6} {'dense MB':>8} {'write db s':>10} "
              f"{'x r+w j2':>8}")
        for n, (nbytes, t_read, res, dbsize, dense, t_write) in rows.items():
            mb = nbytes / 1e6
            (w1, m1, c1), (w2, m2, _) = res[1], res[2]
            print(f"{n:>8} {mb:>9.1f} {t_read:>7.3f} {w1:>7.3f} {w2:>7.3f} {c1:>8.3f} {mb / w1:>12.1f} "
                  f"{w1 / w2:>7.2f} {w1 / t_read:>9.1f} {w2 / t_read:>9.1f} {c1 / t_read:>10.1f} {m1:>11.1f} "
                  f"{m2:>11.1f} {dbsize / 1e6:>6.1f} {dense / 1e6:>8.1f} {t_write:>10.3f} "
                  f"{w2 / (t_read + t_write):>8.1f}")
        print("(write db s: the time to write the database's bytes to a new file, same run; x r+w j2: -j2 time "
              "over reading the input plus writing the database, the I/O no analysis can skip)")
        n, s_bytes, s_read, s_res, s_ph = shuffled
        (w1, m1, c1), (w2, m2, _) = s_res[1], s_res[2]
        print(f"shuffled node order, {n} profiles: {s_bytes / 1e6:.1f} MB, read {s_read:.3f} s, -j1 {w1:.3f} s "
              f"({w1 / s_read:.1f} x read, CPU {c1:.3f} s = {c1 / s_read:.1f} x), -j2 {w2:.3f} s "
              f"({w2 / s_read:.1f} x read), peak {m1:.1f} / {m2:.1f} MiB; "
              + ", ".join(f"{name} {cpu:.3f} s CPU" for name, _, cpu, _, _ in s_ph if cpu is not None and name.startswith("unify")))
        for line in others:
            print(line)
        t_read, ph = breakdown
        print(f"-j1 phases at {profiles} profiles (x read = phase time / time to read the input):")
        for name, secs, cpu, rd, wr in ph:
            cpus = f"  CPU {cpu:>6.3f} s {cpu / t_read:>6.1f} x read" if cpu is not None else ""
            print(f"  {name:<32} {secs:>7.3f} s {secs / t_read:>8.1f} x read{cpus}  in reads {rd:.3f} s, writes {wr:.3f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
