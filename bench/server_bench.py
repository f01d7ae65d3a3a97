#!/usr/bin/python3
"""hpcserver response times over HTTP on a database (issue 7 targets: first screen < 300 ms,
trace screen at 1,920 px < 500 ms, server memory < 10 % of the database).
Usage: bench/server_bench.py HPCSERVER DB [width=1920] [rows=1000]
Make a large database with: build/bin/gen_viewer_db /tmp/big.d 1000000 1000 10000 100"""
import json
import os
import re
import subprocess
import sys
import time
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


def get(path):
    t = time.perf_counter()
    req = urllib.request.Request(base + path, headers={"X-HPC-Token": token})
    with urllib.request.urlopen(req) as r:
        body = r.read()
    return (time.perf_counter() - t) * 1000, json.loads(body)


def rss_mib():
    with open(f"/proc/{proc.pid}/status") as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1]) / 1024
    return 0


try:
    print(f"database: {db}, {size / 2**20:.1f} MiB; server ready (meta.db + profile.db read) in {startup:.2f} s")
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
    print(f"server memory after first screen: {rss_mib():.1f} MiB = {100 * rss_mib() * 2**20 / size:.1f} % of the database")
    q = f"/api/trace?width={width}&rows={rows}&depth=3"
    ms_t1, tr = get(q)
    ms_t2, _ = get(q)
    print(f"trace screen {width} x {min(rows, tr['lineCount'])} px: first {ms_t1:.1f} ms (reads trace.db),"
          f" then {ms_t2:.1f} ms (target < 500)")
    span = tr["maxTime"] - tr["minTime"]
    ms_z, _ = get(f"/api/trace?width={width}&rows={rows}&depth=3&t0={tr['minTime'] + span // 2}&t1={tr['minTime'] + span // 2 + span // 100}")
    print(f"trace screen zoomed to 1 %: {ms_z:.1f} ms")
    ms_pv1, _ = get(f"/api/profile-values?ctx={ctx}")
    ms_pv2, _ = get(f"/api/profile-values?ctx={kids['children'][0]['ctx']}")
    print(f"values across profiles: first {ms_pv1:.1f} ms (reads cct.db), then {ms_pv2:.1f} ms")
    ms_f, _ = get("/api/flat?by=function&top=200")
    ms_b, _ = get("/api/bottom-up?top=200")
    print(f"flat by function (first, computed): {ms_f:.1f} ms; bottom-up roots (first, indexed): {ms_b:.1f} ms")
    print(f"server memory at the end: {rss_mib():.1f} MiB = {100 * rss_mib() * 2**20 / size:.1f} % of the database"
          " (target < 10 %)")
finally:
    proc.terminate()
    proc.wait()
