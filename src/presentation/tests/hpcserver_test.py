#!/usr/bin/python3
"""hpcserver's JSON API over HTTP on the conformance databases: each endpoint's real
content (values as the reference checker's reader prints them), malformed requests, a
wrong or missing token, path traversal, and a database with corrupted files (a clean
error, and the server stays up). hpcviewer starts on a free port.
With BIN_DIR and DEMO, also a database from our own pipeline (hpcrun -t on the demo
program, then hpcprof), traces included.
Usage: hpcserver_test.py HPCSERVER HPCVIEWER DBASE_DIR [BIN_DIR DEMO]"""
import bisect
import http.client
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.parse

server, viewer, dbase = sys.argv[1], sys.argv[2], sys.argv[3]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


class Server:
    def __init__(self, exe, db, *extra):
        self.p = subprocess.Popen([exe, db, "--port", "0", *extra], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        line = self.p.stdout.readline()
        check("http://127.0.0.1:" in line, f"{exe} printed no URL: {line!r}")
        url = urllib.parse.urlsplit(line.split(" at ")[1].strip())
        self.port, self.token = url.port, urllib.parse.parse_qs(url.query)["token"][0]
        check(len(self.token) == 32, "token is 128 random bits in hex")

    def raw(self, target):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", target)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body

    def get(self, endpoint, token=None, **params):
        params["token"] = self.token if token is None else token
        status, body = self.raw(f"/api/{endpoint}?" + urllib.parse.urlencode(params))
        try:
            return status, json.loads(body)
        except ValueError:
            return status, {"raw": body[:200]}

    def ok(self, endpoint, **params):
        status, j = self.get(endpoint, **params)
        check(status == 200, f"/api/{endpoint} {params}: status {status} {j}")
        return j

    def bad(self, status, endpoint, what, **params):
        got, j = self.get(endpoint, **params)
        check(got == status and "error" in j, f"/api/{endpoint} {params}: want {status}, got {got} {j} ({what})")
        return j

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=10)


def near(a, b):
    return abs(a - b) < 1e-6


# ---- small.d: one thread; spinsleep is the hot function (0.604943 from main, 0.605316 from caller).
s = Server(server, f"{dbase}/small.d")
info = s.ok("info")
check(info["title"] == "testmeas-small" and info["metrics"][0]["name"] == "CPUTIME (sec)", f"info {info}")
check(near(info["metrics"][0]["total"], 1.210259), "total")

# Hot path: follow the hottest child until spinsleep.
ctx, names, value = 0, [], None
for _ in range(10):
    kids = s.ok("children", ctx=ctx, metrics="0")["children"]
    if not kids:
        break
    ctx = kids[0]["ctx"]
    names.append(kids[0]["name"])
    if kids[0]["name"] == "spinsleep":
        value = kids[0]["inc"][0]
        break
check(names[:2] == ["main thread", "main"] and value is not None and near(value, 0.605316), f"hot path {names} {value}")
c = s.ok("context", ctx=ctx)
check([p["name"] for p in c["path"]][:3] == ["<program root>", "main thread", "main"], f"context path {c['path']}")
check(near(c["metrics"][0]["exc"]["sum"], 0.605316), f"context stats {c['metrics']}")

bu = s.ok("bottom-up", metrics="0")
top = bu["rows"][0]
check(top["name"] == "spinsleep" and near(top["exc"][0], 1.210259), f"bottom-up roots {top}")
callers = s.ok("bottom-up", path=top["path"])["rows"]
check([(r["name"], round(r["exc"][0], 6)) for r in callers] == [("caller", 0.605316), ("main", 0.604943)],
      f"callers of spinsleep {callers}")
flat = s.ok("flat", by="function")["rows"]
check(flat[0]["name"] == "spinsleep" and near(flat[0]["inc"][0], 1.210259), f"flat {flat[0]}")
lines = s.ok("flat", by="line")["rows"]
check(lines[0]["name"] == "small.c:3", f"flat by line {lines[0]}")
check(len(s.ok("flat", by="module")["rows"]) == 1, "flat by module")
# Call path queries: spinsleep under main directly and through caller, both outermost; the
# loop inside each; rows hottest first with their paths of context ids from the entry point.
qj = s.ok("query", path="**/spinsleep", metrics="0")
check(qj["total"] == 2 and qj["outermost"] == 2 and near(qj["outermostInclusive"][0], 1.210259),
      f"query **/spinsleep: {qj['total']} {qj['outermost']} {qj['outermostInclusive']}")
r0 = qj["rows"][0]
check(r0["name"] == "spinsleep" and near(r0["inc"][0], 0.605316) and r0["pathNames"] ==
      "main thread > main > caller > spinsleep", f"query first row {r0}")
walk, ok_path = 0, True
for c in r0["path"]:  # each id a child of the one before
    ok_path &= any(k["ctx"] == c for k in s.ok("children", ctx=walk)["children"])
    walk = c
check(ok_path and walk == r0["ctx"], f"query path {r0['path']} does not lead to {r0['ctx']}")
ql = s.ok("query", path="**/spinsleep/**/loop:*", metrics="0")
check(ql["total"] == 2 and all(r["outermost"] for r in ql["rows"]), f"query loops {ql}")
qn = s.ok("query", path="main/**/spinsleep/**/spinsleep")
check(qn["total"] == 0 and qn["rows"] == [], f"query nested {qn}")
qp = s.ok("query", path="**/spinsleep", metrics="0", profiles="1")  # the thread view: small.d's one thread
check(qp.get("profiles") == [1] and near(qp["outermostInclusive"][0], 1.210259) and qp["rows"][0]["ctx"] == r0["ctx"],
      f"query with profiles: {qp}")
s.bad(400, "query", "bad profiles", path="*", profiles="9")
s.bad(400, "query", "empty step", path="a//b")
s.bad(400, "query", "no path")
s.bad(400, "query", "top too large", path="*", top=10**6)
profs = s.ok("profiles")["profiles"]
check(len(profs) == 2 and profs[0]["summary"] and not profs[1]["summary"], f"profiles {profs}")

# Malformed requests, bounds, wrong token, traversal.
s.bad(400, "children", "not a number", ctx="abc")
s.bad(400, "children", "negative", ctx="-1")
s.bad(404, "children", "no such context", ctx="999999")
s.bad(400, "children", "unknown metric", metrics="NOPE")
s.bad(400, "flat", "bad grouping", by="planet")
s.bad(400, "bottom-up", "bad path", path="x3/../f1")
s.bad(400, "bottom-up", "bad path number", path="f99999999999")
s.bad(400, "trace", "width missing")
s.bad(400, "trace", "width too large", width="100000")
s.bad(404, "nothing", "unknown endpoint")
# Each endpoint's own parameters, malformed or out of range: a 400/404 with a message.
for status, endpoint, what, params in [
        (400, "context", "ctx not a number", {"ctx": "1x"}),
        (404, "context", "no such context", {"ctx": 4000000000}),
        (400, "context", "ctx beyond 32 bits", {"ctx": 2**40}),
        (400, "children", "top not a number", {"top": "ten"}),
        (400, "children", "top too large", {"top": 10**9}),
        (400, "bottom-up", "negative top", {"top": -5}),
        (400, "bottom-up", "one unknown metric", {"metrics": "0,NOPE"}),
        (400, "bottom-up", "path too long", {"path": "/".join(["f1"] * 300)}),
        (400, "flat", "top overflows 64 bits", {"top": "9" * 30}),
        (400, "profile-values", "ctx not a number", {"ctx": "x"}),
        (404, "profile-values", "no such context", {"ctx": 999999}),
        (404, "profile-values", "no such metric", {"ctx": 0, "metric": 77}),
        (400, "profile-values", "bad scope", {"ctx": 0, "scope": "both"}),
        (400, "trace", "p0 not a number", {"width": 10, "p0": "a"}),
        (400, "trace", "no rows", {"width": 10, "rows": 0}),
        (400, "trace", "empty line range", {"width": 10, "p0": 1, "p1": 1}),
        (400, "trace", "t1 before t0", {"width": 10, "t0": 10**18, "t1": 5}),
        (400, "trace-sample", "no such line", {"line": 5, "t": 1}),
        (400, "trace-sample", "t not a number", {"line": 0, "t": "soon"}),
        (400, "trace-blame", "samples not a number", {"samples": "many"}),
        (404, "source", "no such file index", {"file": 999}),
        (400, "source", "file not a number", {"file": "x"}),
        (404, "source", "no such path", {"path": "nope.c"})]:
    s.bad(status, endpoint, what, **params)
s.bad(403, "info", "wrong token", token="0" * 32)
s.bad(403, "info", "empty token", token="")
status, _ = s.raw("/api/info")
check(status == 403, f"no token: {status}")
status, _ = s.raw("/index.html")
check(status == 403, f"static file without token: {status}")
s.bad(403, "source", "traversal", path="../../../../etc/passwd")
s.bad(403, "source", "absolute traversal", path="/../../etc/passwd")
s.bad(400, "source", "no file")
for target in ("/../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2fetc%2fpasswd"):
    status, body = s.raw(target + "?token=" + s.token)
    check(status in (400, 403, 404) and b"root:" not in body, f"static traversal {target}: {status} {body[:80]}")
status, _ = s.raw("/api/info?token=" + s.token + "&x=" + "a" * 20000)
check(status in (400, 414), f"oversized request: {status}")
check(s.ok("info")["title"] == "testmeas-small", "server up after bad requests")
s.stop()

# ---- loops-cputime-t.d: four threads with traces.
s = Server(server, f"{dbase}/loops-cputime-t.d")
profs = s.ok("profiles")["profiles"]
check(len(profs) == 5 and "THREAD" in profs[1]["label"], f"profiles {profs[:2]}")
pv = s.ok("profile-values", ctx=0, metric=0)
check(len(pv["values"]) == 4 and near(sum(v for _, v in pv["values"]), 3.973308), f"profile-values {pv}")
# The thread view: children with the values of chosen profiles alone, summed, and their
# totals; all four give the summary's values; a bad list is refused.
byProfile = dict(pv["values"])
for chosen in ([1], [2, 3], [1, 2, 3, 4]):
    j = s.ok("children", ctx=0, profiles=",".join(map(str, chosen)))
    want = sum(byProfile.get(p, 0.0) for p in chosen)
    check(j["profiles"] == chosen and near(j["totals"][0], want) and near(sum(c["inc"][0] for c in j["children"]), want),
          f"children of profiles {chosen}: {j}")
whole = s.ok("children", ctx=0)["children"]
check([c["inc"] for c in s.ok("children", ctx=0, profiles="1-4")["children"]] == [c["inc"] for c in whole],
      "children of all profiles differ from the summary's")
for bad in ("0", "5", "2-1", "x", "1,,2"):
    s.bad(400, "children", f"profiles={bad}", ctx=0, profiles=bad)
# Requests at once on the server's threads, each with its own block cache of meta.db and
# profile.db: every reply equals the same request's made alone.
mixed = [("query", {"path": "**/loop:*", "metrics": "0"}), ("children", {"ctx": 0}), ("flat", {"by": "function"}),
         ("bottom-up", {}), ("structure", {"depth": 3}), ("query", {"path": "**/func*", "metrics": "0", "profiles": "2"}),
         ("flat", {"by": "line"}), ("context", {"ctx": 127})]
alone = [s.ok(ep, **params) for ep, params in mixed]
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
with ThreadPoolExecutor(8) as pool:
    together = list(pool.map(lambda i: s.ok(mixed[i % len(mixed)][0], **mixed[i % len(mixed)][1]), range(8 * len(mixed))))
check(all(together[i] == alone[i % len(mixed)] for i in range(len(together))),
      f"replies made at once differ from those made alone: {[mixed[i % len(mixed)][0] for i in range(len(together)) if together[i] != alone[i % len(mixed)]][:4]}")

# A query in the thread view: each row's value is that of the chosen profiles (profile-values),
# the totals theirs; the rows ranked by them.
for chosen in ([1], [2, 4]):
    qj = s.ok("query", path="**/loop:*", metrics="0", profiles=",".join(map(str, chosen)), top=50)
    rows_ok = all(near(r["inc"][0], sum(v for p, v in s.ok("profile-values", ctx=r["ctx"], metric=0)["values"] if p in chosen))
                  for r in qj["rows"])
    incs = [r["inc"][0] for r in qj["rows"]]
    outer = sum(r["inc"][0] for r in qj["rows"] if r["outermost"])
    check(qj["profiles"] == chosen and rows_ok and incs == sorted(incs, reverse=True) and qj["total"] == len(qj["rows"]) and
          near(qj["outermostInclusive"][0], outer) and near(outer, sum(byProfile[p] for p in chosen)),
          f"query of profiles {chosen}: {qj['outermostInclusive']} {incs[:4]}")
flat = s.ok("flat", by="function", top=2)["rows"]
# test_separated_loops_helper is listed twice in meta.db (inlined at two sites): one row,
# its instances summed, now above func2 (0.96945).
check(flat[1]["name"] == "test_separated_loops_helper" and near(flat[1]["exc"][0], 0.992777), f"flat top 2 {flat}")
loopsFlat = s.ok("flat", by="loop", top=1)["rows"]
check(loopsFlat and loopsFlat[0]["name"] == "loop at loops.c:1010", f"flat by loop {loopsFlat}")
names = [r["name"] for r in s.ok("flat", by="function")["rows"]]
check(len(names) == len(set(names)), f"flat by function lists a name twice: {sorted(names)}")
# Where the time went: all of it computation, main._omp_fn.0 first; the verdict.
ov = s.ok("overview", top=2)
check(ov["kinds"][0]["key"] == "compute" and near(ov["kinds"][0]["value"], 3.973308)
      and ov["kinds"][0]["where"][0]["name"] == "main._omp_fn.0" and len(ov["kinds"][0]["where"]) == 2
      and ov["verdict"] == "compute-bound", f"overview {ov}")
s.bad(400, "overview", "metric out of range", metric=7)
tr = s.ok("trace", width=100)
check(len(tr["lines"]) == 4 and all(sum(n for _, n in l["runs"]) == 100 for l in tr["lines"]), f"trace {tr}")
fnames = set(tr["functions"].values())
check("main._omp_fn.0" in fnames and "main" in fnames, f"trace functions {fnames}")
deep = s.ok("trace", width=50, depth=2, p0=1, p1=3)
check([l["line"] for l in deep["lines"]] == [1, 2], f"trace line range {deep['lines']}")
mid = (tr["minTime"] + tr["maxTime"]) // 2
smp = s.ok("trace-sample", line=0, t=mid)
check(smp["found"] and smp["stack"] and smp["stack"][-1]["ctx"] == smp["ctx"], f"trace sample {smp}")


def decode_binary(raw):
    """The binary trace reply: frames of (u32 length, JSON header, runs). Returns the first
    header, the lines with their runs, the merged function names and the frame count."""
    off, first, lines, names, frames = 0, None, [], {}, 0
    while off < len(raw):
        n = int.from_bytes(raw[off:off + 4], "little")
        head = json.loads(raw[off + 4:off + 4 + n])
        first = first or head
        off += 4 + n
        for l in head["lines"]:
            lines.append({"line": l["line"], "profile": l["profile"],
                          "runs": [list(struct.unpack_from("<iI", raw, off + 8 * i)) for i in range(l["runs"])]})
            off += 8 * l["runs"]
        check(not set(names) & set(head["functions"]), "each function named once")
        names.update(head["functions"])
        frames += 1
    check(off == len(raw), f"binary reply ends with its last frame ({off} of {len(raw)} bytes)")
    return first, lines, names, frames


status, raw = s.raw("/api/trace?width=100&encoding=binary&token=" + s.token)
head, blines, bnames, _ = decode_binary(raw)
check(status == 200 and blines == tr["lines"] and bnames == tr["functions"]
      and all(head[k] == tr[k] for k in ("t0", "t1", "minTime", "maxTime", "width", "depth", "lineCount")),
      "binary trace equals the JSON one")
s.bad(400, "trace", "bad encoding", width=10, encoding="xml")
s.bad(400, "trace", "empty time range", width=10, t0=5, t1=5)
s.bad(400, "trace-sample", "no time", line=0)
bl = s.ok("trace-blame")
check(bl["gpuLines"] == 0 and bl["cpuLines"] == 4 and bl["gpuIdle"] == 0 and bl["rows"] == [], f"no GPU lines, no blame {bl}")
s.bad(400, "trace-blame", "empty time range", t0=5, t1=5)
s.bad(400, "trace-blame", "too many samples", samples=100000)
s.stop()

# ---- loops-cuda-nvidia-t.d: a GPU stream line (context 0 between kernels) and a CPU line.
s = Server(server, f"{dbase}/loops-cuda-nvidia-t.d")
ov = s.ok("overview")  # GPU metrics only: the GPU's operations, no breakdown of CPU time
check(ov["metric"] is None and ov["kinds"] == [] and "verdict" not in ov
      and ov["gpu"] == [{"name": "kernel execution", "value": ov["gpu"][0]["value"]}]
      and near(ov["gpu"][0]["value"], 0.0297944), f"overview {ov}")
bl = s.ok("trace-blame", samples=1000)
check(bl["gpuLines"] == 1 and bl["cpuLines"] == 1 and 0 < bl["gpuIdle"] < bl["span"], f"GPU idle time {bl}")
check(bl["unattributed"] == bl["gpuIdle"] and bl["rows"] == [], f"no CPU samples: all unattributed {bl}")
tr = s.ok("trace", width=1000, p0=0, p1=1)
idle = sum(n for k, n in tr["lines"][0]["runs"] if k == -1)
check(abs(idle / 1000 - bl["gpuIdle"] / bl["span"]) < 0.01, f"blame idle share {bl['gpuIdle'] / bl['span']} = trace idle {idle / 1000}")
s.stop()

# ---- GPU idleness blame checked against a brute-force computation over the reference
# checker's reader (hpctesttool): at each sampled instant (the middle of each of `samples`
# equal parts of [t0, t1)), every GPU line idle (no record yet, or context 0) makes the
# instant's share of time idle; the CPU lines running then (a record of a context other
# than 0) split it evenly, each charging the innermost function on its context's path.
# loops-cuda-nvidia-t.d's CPU line has no records, so a copy gets two CPU lines written
# into its trace.db.
sys.path.insert(0, os.path.dirname(os.path.abspath(dbase)))
from hpctesttool.formats import from_path  # noqa: E402


def write_trace_db(path, lines):
    """lines: [(profIndex, [(timestamp, ctxId)])] as a trace.db v4.0."""
    n = len(lines)
    ts = [t for _, l in lines for t, _ in l]
    out = bytearray(b"HPCTOOLKITtrce\x04\x00")
    out += struct.pack("<QQ", 0x20 + 24 * n, 0x20)
    out += struct.pack("<QIB3xQQ", 0x40, n, 24, min(ts), max(ts))
    elems, at = bytearray(), 0x40 + 24 * n
    for prof, l in lines:
        out += struct.pack("<I4xQQ", prof, at + len(elems), at + len(elems) + 12 * len(l))
        for t, c in l:
            elems += struct.pack("<QI", t, c)
    path.write_bytes(bytes(out + elems + b"trace.db"))


def reference_blame(db, t0, t1, samples):
    """(gpuIdle, unattributed, {function name: blame}) by brute force over every instant."""
    meta, profs = db.meta, db.profile.profile_infos.profiles
    parent, byid = {}, {}

    def walk(c, p):
        byid[c.ctx_id], parent[c.ctx_id] = c, p
        for k in c.children:
            walk(k, c.ctx_id)
    for r in meta.context.entry_points:
        walk(r, None)

    def leaf(ctx):
        if ctx not in byid:
            return "<unknown context>"
        c = ctx
        while c is not None:
            x = byid[c]
            if getattr(x, "lexical_type", None) is not None and x.lexical_type.name == "function" and x.function:
                return x.function.name
            c = parent[c]
        return "<no function>"

    gpu_kinds = {i for i, k in enumerate(meta.id_names.names) if k in ("GPUSTREAM", "GPUCONTEXT")}
    gpu, cpu = [], []
    for tr in db.trace.ctx_traces.traces:
        ids = profs[tr.prof_index].id_tuple
        is_gpu = ids is not None and any(i.kind in gpu_kinds for i in ids.ids)
        (gpu if is_gpu else cpu).append(([e.timestamp for e in tr.line], [e.ctx_id for e in tr.line]))

    def at(line, t):
        i = bisect.bisect_right(line[0], t) - 1
        return 0 if i < 0 else line[1][i]
    dt = (t1 - t0) / samples
    idle = unattributed = 0.0
    blame = {}
    for x in range(samples):
        t = t0 + (t1 - t0) * (2 * x + 1) // (2 * samples)
        if not gpu or any(at(l, t) for l in gpu):
            continue
        idle += dt
        running = [at(l, t) for l in cpu if at(l, t)]
        if not running:
            unattributed += dt
        for c in running:
            blame[leaf(c)] = blame.get(leaf(c), 0.0) + dt / len(running)
    return idle, unattributed, blame


def check_blame(s, db, what, samples, **params):
    got = s.ok("trace-blame", samples=samples, **params)
    t0 = int(params.get("t0", db.trace.ctx_traces.timestamp_range["min"]))
    t1 = int(params.get("t1", db.trace.ctx_traces.timestamp_range["max"] + 1))
    idle, unattributed, blame = reference_blame(db, t0, t1, samples)
    mine = {r["name"]: r["blame"] for r in got["rows"]}
    close = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))  # noqa: E731
    check(close(got["gpuIdle"], idle) and close(got["unattributed"], unattributed),
          f"{what}: idle/unattributed {got['gpuIdle']}/{got['unattributed']}, brute force {idle}/{unattributed}")
    check(mine.keys() == blame.keys() and all(close(mine[k], blame[k]) for k in blame),
          f"{what}: blame {mine}, brute force {blame}")
    attributed = idle - unattributed
    check(all(close(r["share"], r["blame"] / attributed) for r in got["rows"]), f"{what}: shares {got['rows']}")
    check([r["blame"] for r in got["rows"]] == sorted((r["blame"] for r in got["rows"]), reverse=True),
          f"{what}: sorted by blame")
    return got


cuda = f"{dbase}/loops-cuda-nvidia-t.d"
ref = from_path(pathlib.Path(cuda))
s = Server(server, cuda)
g = check_blame(s, ref, "reference cuda trace", 1000)
check(g["gpuLines"] == 1 and g["cpuLines"] == 1 and g["rows"] == [] and g["gpuIdle"] > 0, f"cuda blame {g}")
s.bad(400, "trace-blame", "t0 not a number", t0="x")
s.bad(400, "trace-blame", "samples zero", samples=0)
s.bad(400, "trace-blame", "top not a number", top="1e3")
s.stop()

tmp = tempfile.mkdtemp()
try:
    shutil.copytree(cuda, f"{tmp}/db")
    os.chmod(f"{tmp}/db", 0o755)
    os.chmod(f"{tmp}/db/trace.db", 0o644)
    gline = ref.trace.ctx_traces.traces[0]
    gts = [e.timestamp for e in gline.line]
    # CPU line 1: 7 us after each GPU record, cycling through main's loop, kernmain, idle, the
    # launch stub, cudaLaunchKernel, kernmain; CPU line 2 (the same thread profile): every
    # other GPU record plus 13 us, its own cycle.
    c1 = [(t + 7000, [16, 22, 0, 19, 14, 22][i % 6]) for i, t in enumerate(gts)]
    c2 = [(t + 13000, [22, 0, 16, 14][i % 4]) for i, t in enumerate(gts[::2])]
    write_trace_db(pathlib.Path(f"{tmp}/db/trace.db"),
                   [(gline.prof_index, [(e.timestamp, e.ctx_id) for e in gline.line]), (2, c1), (2, c2)])
    syn = from_path(pathlib.Path(f"{tmp}/db"))
    check(len(syn.trace.ctx_traces.traces) == 3, "synthetic trace.db reads back")
    s = Server(server, f"{tmp}/db")
    g = check_blame(s, syn, "two CPU lines", 4096)
    check(g["cpuLines"] == 2 and len(g["rows"]) == 4 and 0 < g["unattributed"] < g["gpuIdle"], f"synthetic blame {g}")
    lo, hi = syn.trace.ctx_traces.timestamp_range["min"], syn.trace.ctx_traces.timestamp_range["max"]
    check_blame(s, syn, "a sub-range", 997, t0=lo + (hi - lo) // 3, t1=lo + (hi - lo) // 2 + 12345)
    top1 = s.ok("trace-blame", top=1)
    check(len(top1["rows"]) == 1 and top1["total"] == 4, f"top=1 {top1}")
    s.stop()
    # Dense lines (a record every us, main and kernmain in turn, every 7th idle): each row's
    # binary runs pass the 16 KiB after which a frame closes, so the reply is one frame per
    # row, and the frames together equal the JSON reply.
    t0 = gts[0]
    dense = [(t0 + 1000 * i, [16, 22, 16, 22, 0, 22, 16][i % 7]) for i in range(30000)]
    write_trace_db(pathlib.Path(f"{tmp}/db/trace.db"), [(2, dense), (2, dense[5:]), (2, dense[::3])])
    s = Server(server, f"{tmp}/db")
    tr = s.ok("trace", width=8192, depth=9)
    status, raw = s.raw("/api/trace?width=8192&depth=9&encoding=binary&token=" + s.token)
    _, blines, bnames, frames = decode_binary(raw)
    check(status == 200 and blines == tr["lines"] and bnames == tr["functions"] and frames == 3
          and all(len(l["runs"]) * 8 > 16384 for l in blines),
          f"multi-frame binary trace: {frames} frames, runs {[len(l['runs']) for l in blines]}")
    s.stop()
finally:
    shutil.rmtree(tmp)

# ---- corrupted files: meta.db and profile.db are read at start; cct.db and trace.db on use.
tmp = tempfile.mkdtemp()
try:
    bad = os.path.join(tmp, "bad.d")
    shutil.copytree(f"{dbase}/loops-cputime-t.d", bad)
    for f in ("cct.db", "trace.db"):
        os.chmod(os.path.join(bad, f), 0o644)
        with open(os.path.join(bad, f), "r+b") as fh:
            fh.truncate(100)
    os.makedirs(os.path.join(bad, "src"))
    with open(os.path.join(bad, "src", "x.c"), "w") as fh:
        fh.write("int main() { return 0; }\n")
    s = Server(server, bad)
    # Concurrent first uses of the corrupt files (the lazy loaders run once) among good requests.
    from concurrent.futures import ThreadPoolExecutor
    calls = [("profile-values", {"ctx": 0, "metric": 0}, 500), ("trace", {"width": 10}, 500),
             ("children", {"ctx": 0}, 200), ("flat", {"by": "line"}, 200), ("bottom-up", {}, 200)] * 12
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda c: (s.get(c[0], **c[1])[0], c[2]), calls))
    check(all(g == want for g, want in got), f"concurrent requests: {[g for g in got if g[0] != g[1]][:5]}")
    j = s.bad(500, "profile-values", "corrupt cct.db", ctx=0, metric=0)
    check("cct.db" in j["error"], f"cct.db error names the file: {j}")
    j = s.bad(500, "trace", "corrupt trace.db", width=10)
    check("trace.db" in j["error"], f"trace.db error names the file: {j}")
    check(s.ok("info")["title"] == "testmeas-loops", "server up after corrupt files")
    check(s.ok("source", path="src/x.c")["text"].startswith("int main"), "source inside the database")
    # A source longer than one streamed piece (16 KiB), multi-byte UTF-8 across the pieces'
    # ends, comes back exactly; an invalid byte becomes U+FFFD.
    big = "".join(f"/* {i} é 漢字 😀 */\n" for i in range(4000))
    with open(os.path.join(bad, "src", "big.c"), "w", encoding="utf-8") as fh:
        fh.write(big)
    check(s.ok("source", path="src/big.c")["text"] == big, "a long UTF-8 source file exactly")
    with open(os.path.join(bad, "src", "latin1.c"), "wb") as fh:
        fh.write(b"caf\xe9;\n")
    check(s.ok("source", path="src/latin1.c")["text"] == "caf\ufffd;\n", "an invalid UTF-8 byte replaced")
    os.symlink("/etc/passwd", os.path.join(bad, "src", "link.c"))
    s.bad(403, "source", "symlink out of the database", path="src/link.c")
    s.stop()

    os.chmod(os.path.join(bad, "profile.db"), 0o644)
    with open(os.path.join(bad, "profile.db"), "r+b") as fh:
        fh.seek(0x10)
        fh.write(b"\xff" * 16)  # the first section's size and offset point past the file
    r = subprocess.run([server, bad, "--port", "0"], capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "bad.d/profile.db" in r.stderr, f"corrupt profile.db refused: {r.stderr!r}")
    with open(os.path.join(bad, "meta.db"), "r+b") as fh:
        fh.truncate(200)
    r = subprocess.run([server, bad, "--port", "0"], capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "bad.d/meta.db" in r.stderr, f"corrupt meta.db refused: {r.stderr!r}")
    r = subprocess.run([server, os.path.join(tmp, "none.d")], capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "none.d" in r.stderr, f"missing database: {r.stderr!r}")
finally:
    shutil.rmtree(tmp)

# ---- our own pipeline: hpcrun -t -> hpcprof -> hpcserver.
pipeline = sys.argv[4:6]
if len(pipeline) == 2 and not all(os.access(p, os.X_OK) for p in
                                  (f"{pipeline[0]}/hpcrun", f"{pipeline[0]}/hpcprof", pipeline[1])):
    print("hpcserver: hpcrun, hpcprof or demo not built; pipeline database skipped")
    pipeline = []
if len(pipeline) == 2:
    bindir, demo = pipeline
    tmp = tempfile.mkdtemp()
    try:
        m, d = os.path.join(tmp, "demo.m"), os.path.join(tmp, "demo.d")
        subprocess.run([f"{bindir}/hpcrun", "-e", "REALTIME@1000", "-t", "-o", m, demo], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        subprocess.run([f"{bindir}/hpcprof", "-o", d, m], check=True, stdout=subprocess.DEVNULL, timeout=300)
        s = Server(server, d)
        info = s.ok("info")
        check(info["hasTrace"] and info["profiles"] >= 2, f"pipeline info {info}")
        total = info["metrics"][0]["total"]
        flat = s.ok("flat", by="function", metrics="0")["rows"]
        check(total > 0 and abs(sum(r["exc"][0] for r in flat) - total) < 1e-6 * max(1, total),
              f"pipeline: function exclusive values sum to the total {total}")
        check(any("stencil" in r["name"] for r in flat[:3]), f"pipeline: stencil among the hottest {flat[:3]}")
        tr = s.ok("trace", width=200)
        check(len(tr["lines"]) >= 2 and all(sum(n for _, n in l["runs"]) == 200 for l in tr["lines"]), "pipeline trace")
        files = s.ok("flat", by="file")["rows"]
        demo_c = [r for r in files if r["name"].endswith("demo.c")]
        check(demo_c and "stencil" in s.ok("source", file=demo_c[0]["key"])["text"], "pipeline: demo.c from src/")
        smp = s.ok("trace-sample", line=0, t=(tr["minTime"] + tr["maxTime"]) // 2)
        check(smp["found"] and any(f["name"].startswith("main") for f in smp["stack"]), f"pipeline sample {smp}")
        s.stop()
    finally:
        shutil.rmtree(tmp)

# ---- hpcviewer: a free port, the URL printed; the reference viewer's -jh SIZE (its JVM's
# heap) accepted, as its users' scripts pass it.
for extra in ([], ["-jh", "3G"], ["--java-heap", "3076M"]):
    v = Server(viewer, f"{dbase}/small.d", "--no-open", *extra)
    check(v.ok("info")["title"] == "testmeas-small", f"hpcviewer {extra} serves the API")
    v.stop()

# The same at once on a database of 100,000 contexts (bench/gen_viewer_db, 4 MB of meta.db:
# every thread's 512 KiB cache turns over many times a walk).
gen = pathlib.Path(server).parent / "gen_viewer_db"
if gen.exists():
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([str(gen), f"{tmp}/mid.d", "100000", "20", "1000", "100"], capture_output=True, text=True)
        check(r.returncode == 0, f"gen_viewer_db: {r.stderr}")
        s = Server(server, f"{tmp}/mid.d")
        kids = s.ok("children", ctx=0)["children"]
        mixed = [("query", {"path": "**/fn_1*", "metrics": "0", "top": 500}), ("flat", {"by": "function", "top": 2000}),
                 ("bottom-up", {"top": 2000}), ("structure", {"depth": 3, "top": 2000}), ("flat", {"by": "line", "top": 2000}),
                 ("children", {"ctx": kids[0]["ctx"]}), ("query", {"path": "**/fn_2*/**", "metrics": "0", "profiles": "3"})]
        alone = [s.ok(ep, **params) for ep, params in mixed]
        check(all(len(a.get("rows", a.get("children", []))) > 0 for a in alone), "mixed requests on the generated database: empty replies")
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda i: s.ok(mixed[i % len(mixed)][0], **mixed[i % len(mixed)][1]), range(4 * len(mixed))))
        check(all(together[i] == alone[i % len(mixed)] for i in range(len(together))),
              f"generated database: replies made at once differ from those made alone: "
              f"{[mixed[i % len(mixed)][0] for i in range(len(together)) if together[i] != alone[i % len(mixed)]][:4]}")
        s.stop()
else:
    print(f"note: {gen} not built; the concurrent requests on a large database were not made")

print("hpcserver: all checks passed" if not failures else f"hpcserver: {failures} failures")
sys.exit(1 if failures else 0)
