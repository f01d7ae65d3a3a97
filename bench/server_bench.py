#!/usr/bin/python3
"""hpcserver response times over HTTP on a database (issue 7 targets: first screen < 300 ms,
trace screen at 1,920 px < 500 ms, server memory < 10 % of the database).
Memory is the server's resident size (VmRSS, the binary's and libraries' own pages included);
each phase reports its peak (VmHWM, reset between phases through /proc/PID/clear_refs) and
the summary the largest of them, i.e. the peak over the whole run, open included.
Usage: bench/server_bench.py HPCSERVER DB [width=1920] [rows=1000]
Make a large database with: build/bin/gen_viewer_db /tmp/big.d 1000000 1000 10000 100"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

server, db = sys.argv[1], sys.argv[2]
width = int(sys.argv[3]) if len(sys.argv) > 3 else 1920
rows = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(db) for f in fs)

t = time.perf_counter()
proc = subprocess.Popen([server, db, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
line = proc.stdout.readline()
startup = time.perf_counter() - t
m = re.search(r"(http://[^/]+)/\?token=([0-9a-f]+)", line)
if not m:
    sys.exit(f"hpcserver printed no URL: {line}")
base, token = m.group(1), m.group(2)


def get(path, raw=False):
    t = time.perf_counter()
    req = urllib.request.Request(base + path, headers={"X-HPC-Token": token})
    with urllib.request.urlopen(req) as r:
        body = r.read()
    return (time.perf_counter() - t) * 1000, body if raw else json.loads(body)


def status(key):
    with open(f"/proc/{proc.pid}/status") as f:
        for l in f:
            if l.startswith(key + ":"):
                return int(l.split()[1]) / 1024
    return 0


def rss_mib():
    return status("VmRSS")


def reset_peak():
    """Starts a new peak (VmHWM) from the current resident size (Linux clear_refs 5)."""
    with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
        f.write("5")


peaks = []  # (phase, peak MiB)


def pct(mib):
    return 100 * mib * 2**20 / size


def mem(when):
    """Resident memory now and its peak since the last reset_peak() (the phase's), recorded."""
    rss, peak = rss_mib(), status("VmHWM")
    peaks.append((when, peak))
    print(f"  memory {when}: peak {peak:.1f} MiB = {pct(peak):.1f} % of the database; now {rss:.1f} MiB ="
          f" {pct(rss):.1f} % (anonymous {status('RssAnon'):.1f}, file pages {status('RssFile'):.1f})")
    reset_peak()
    return rss


def trace_bands(width, rows, lines, depth=3, band=128, in_flight=4):
    """The web UI's trace screen: bands of `band` rows as binary replies, `in_flight` at a time.
    Returns (ms to the first band, ms to the whole screen)."""
    from concurrent.futures import ThreadPoolExecutor
    n = min(rows, lines)
    bands = [(r0, min(n, r0 + band)) for r0 in range(0, n, band)]
    t = time.perf_counter()
    first = [None]

    def one(b):
        r0, r1 = b
        get(f"/api/trace?width={width}&depth={depth}&encoding=binary&rows={r1 - r0}"
            f"&p0={r0 * lines // n}&p1={r1 * lines // n}", raw=True)
        if first[0] is None:
            first[0] = (time.perf_counter() - t) * 1000
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, bands))
    return first[0], (time.perf_counter() - t) * 1000


try:
    print(f"database: {db}, {size / 2**20:.1f} MiB; server ready (meta.db + profile.db read) in {startup:.2f} s")
    mem("open (meta.db walked, profile.db indexed)")
    ms_info, info = get("/api/info")
    ms_kids, kids = get("/api/children?ctx=0")
    first = ms_info + ms_kids
    # The first screen as the viewer opens it: info, the root's children, then the hot path.
    ctx, hot = kids["children"][0]["ctx"], 0.0
    for _ in range(10):
        ms, j = get(f"/api/children?ctx={ctx}")
        hot += ms
        if not j["children"]:
            break
        ctx = j["children"][0]["ctx"]
    print(f"first screen: info {ms_info:.1f} ms + root children {ms_kids:.1f} ms = {first:.1f} ms"
          f" (target < 300); 10 hot-path expansions {hot:.1f} ms in all")
    mem("first screen + hot path")
    _, probe = get("/api/trace?width=1&rows=1")
    band1, trace_ms = trace_bands(width, rows, probe["lineCount"])
    print(f"trace screen as the web UI fetches it (128-row binary bands, 4 in flight): first band painted after"
          f" {band1:.1f} ms, whole screen {trace_ms:.1f} ms (target < 500)")
    band1b, trace_ms2 = trace_bands(width, rows, probe["lineCount"])
    print(f"  again: first band {band1b:.1f} ms, whole screen {trace_ms2:.1f} ms")
    mem("web UI trace screens (binary bands)")
    q = f"/api/trace?width={width}&rows={rows}&depth=3"
    ms_t1, tr = get(q)
    print(f"trace screen {width} x {min(rows, tr['lineCount'])} px as one JSON request: {ms_t1:.1f} ms (parsing included)")
    mem("one-request JSON trace screen (16 MB reply)")
    ms_tb, _ = get(q + "&encoding=binary", raw=True)
    print(f"  as one binary request: {ms_tb:.1f} ms")
    mem("one-request binary trace screen")
    span = tr["maxTime"] - tr["minTime"]
    ms_z, _ = get(f"/api/trace?width={width}&rows={rows}&depth=3&t0={tr['minTime'] + span // 2}&t1={tr['minTime'] + span // 2 + span // 100}")
    print(f"trace screen zoomed to 1 %: {ms_z:.1f} ms")
    ms_pv1, _ = get(f"/api/profile-values?ctx={ctx}")
    ms_pv2, _ = get(f"/api/profile-values?ctx={kids['children'][0]['ctx']}")
    print(f"values across profiles: first {ms_pv1:.1f} ms (maps cct.db), then {ms_pv2:.1f} ms")
    mem("zoomed trace, values across profiles")
    ms_bl, bl = get(f"/api/trace-blame?samples={width}")
    print(f"GPU idle blame over the whole trace ({width} samples, {bl['gpuLines']} GPU / {bl['cpuLines']} CPU lines): {ms_bl:.1f} ms")
    typical = mem("GPU idle blame")
    ms_f, _ = get("/api/flat?by=function&top=5000")
    print(f"flat by function (computed per request, 5,000 rows as the UI asks): {ms_f:.1f} ms")
    mem("flat by function")
    ms_b, _ = get("/api/bottom-up?top=5000")
    hottest = get("/api/bottom-up?top=1")[1]["rows"][0]["path"]
    ms_b2, _ = get(f"/api/bottom-up?path={hottest}&top=5000")
    print(f"bottom-up roots (5,000 rows): {ms_b:.1f} ms; callers of the hottest function: {ms_b2:.1f} ms")
    mem("bottom-up roots and callers")
    ms_fm, _ = get("/api/flat?by=module")
    ms_ff, _ = get("/api/flat?by=file&top=5000")
    print(f"flat by module {ms_fm:.1f} ms, by file {ms_ff:.1f} ms")
    mem("flat by module and file")
    ms_fl, fl = get("/api/flat?by=line&top=5000")
    print(f"flat by line ({fl['total']:,} lines, the 5,000 hottest sent): {ms_fl:.1f} ms")
    mem("flat by line")
    # Find: a call path query over the whole tree, as the web UI asks (200 rows), and one that
    # matches every context (the server keeps only the rows it sends).
    ms_q, qj = get("/api/query?path=" + urllib.parse.quote("**/fn_1*") + "&metrics=0&top=200")
    ms_all, aj = get("/api/query?path=*&metrics=0&top=5000")
    print(f"find (call path query **/fn_1*: {qj['total']:,} contexts, 200 sent): {ms_q:.1f} ms; "
          f"'*' ({aj['total']:,} contexts, 5,000 sent): {ms_all:.1f} ms")
    mem("find (call path queries)")
    # hpcviewer's flat view: the static structure, as the web UI asks for it (5,000 rows),
    # flattened once, twice... until the server answers 413 (more rows than it holds).
    outline = []
    for depth in range(1, 6):
        try:
            ms_s, st = get(f"/api/structure?depth={depth}&top=5000")
            outline.append(f"depth {depth} {ms_s:.0f} ms ({st['total']:,} rows)")
        except urllib.error.HTTPError as e:
            outline.append(f"depth {depth} {e.code}")
    print("static structure (hpcviewer's flat view, 5,000 rows sent): " + ", ".join(outline))
    mem("static structure, flattened")
    after = rss_mib()
    load = open("/proc/loadavg").read().split()[:3]
    worst = max(peaks, key=lambda p: p[1])
    print(f"SUMMARY (load average {' '.join(load)}): first screen {first:.1f} ms (target < 300);"
          f" trace screen {width} px {trace_ms:.1f} ms, again {trace_ms2:.1f} ms (target < 500);"
          f" server memory: peak over the whole run {worst[1]:.1f} MiB = {pct(worst[1]):.1f} % of the database"
          f" ({worst[0]}) (target < 10 %): {'met' if pct(worst[1]) < 10 else 'NOT met'};"
          f" {pct(typical):.1f} % after typical requests, {pct(after):.1f} % at the end")
finally:
    proc.terminate()
    proc.wait()
