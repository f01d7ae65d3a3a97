#!/usr/bin/python3
"""hpcreport against the reference checker's own reader (shared/conformance/hpctesttool):
every context's inclusive/exclusive value and every function's flat values must agree;
the hot function is named; missing and corrupt databases give an error naming the file.
Usage: hpcreport_test.py HPCREPORT SHARED_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

hpcreport, shared = os.path.abspath(sys.argv[1]), Path(sys.argv[2]).resolve()
sys.path.insert(0, str(shared / "conformance"))
from hpctesttool.formats import from_path_extended  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def run(*args):
    return subprocess.run([hpcreport, *map(str, args)], capture_output=True, text=True)


def report(db, *args):
    r = run(db, "--format", "json", "--top", "100000", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def reference(db):
    """(inclusive by ctx, exclusive by ctx, function index by ctx, function names) from the checker."""
    d = from_path_extended(db)
    metric = d.meta.metrics.metrics[0]
    stat = {s.scope.scope_name: s.stat_metric_id for s in metric.summaries if s.formula == "$$"}
    summary = d.profile.profile_infos.profiles[0].values
    fns = d.meta.functions.functions
    # A function listed more than once alike (the reference writes an entry per inline site)
    # is one function: its instances count under the first entry.
    first = {}
    fn_index = {}
    for i, f in enumerate(fns):
        key = (f.name, id(f.module) if f.module else None, f.offset, id(f.file) if f.file else None, f.line)
        fn_index[id(f)] = first.setdefault(key, i)
    inc, exc, fn_of = {}, {}, {}

    def walk(node):
        v = summary.get(node.ctx_id, {})
        inc[node.ctx_id] = v.get(stat["execution"], 0.0)
        exc[node.ctx_id] = v.get(stat["function"], 0.0)
        lex = getattr(node, "lexical_type", None)
        if lex is not None and lex.name == "function" and node.function is not None:
            fn_of[node.ctx_id] = fn_index[id(node.function)]
        for c in node.children:
            walk(c)

    for ep in d.meta.context.entry_points:
        walk(ep)
    inc[0] = summary.get(0, {}).get(stat["execution"], 0.0)
    return inc, exc, fn_of, [f.name for f in fns]


for name, hot in [("small.d", "spinsleep"), ("loops-cputime-t.d", "main._omp_fn.0")]:
    db = shared / "conformance" / "dbase" / name
    inc, exc, fn_of, fnames = reference(db)

    td = report(db, "--view", "top-down")
    nonzero = {c for c, v in inc.items() if v > 0}
    check({int(r["id"]) for r in td["rows"]} == nonzero,
          f"{name}: top-down lists every context with a value ({len(td['rows'])} vs {len(nonzero)})")
    check(abs(td["total"] - inc[0]) < 1e-9, f"{name}: total {td['total']} vs {inc[0]}")
    for r in td["rows"]:
        c = int(r["id"])
        check(abs(r["inclusive"] - inc[c]) < 1e-9, f"{name}: ctx {c} inclusive {r['inclusive']} vs {inc[c]}")
        if c in exc:
            check(abs(r["exclusive"] - exc[c]) < 1e-9, f"{name}: ctx {c} exclusive {r['exclusive']} vs {exc[c]}")

    # Flat by function: exclusive sums every instance (loops-cputime-t.d lists
    # test_separated_loops_helper twice, inlined at two sites: one row).
    want = {}
    for c, f in fn_of.items():
        want[f] = want.get(f, 0.0) + exc[c]
    flat = report(db, "--view", "flat", "--by", "function")
    got = {int(r["id"]): r for r in flat["rows"]}
    check(set(got) == set(want), f"{name}: flat functions {sorted(got)} vs {sorted(want)}")
    for f, v in want.items():
        if f in got:
            check(abs(got[f]["exclusive"] - v) < 1e-9, f"{name}: function {fnames[f]} exclusive {got[f]['exclusive']} vs {v}")
            check(got[f]["name"] == fnames[f], f"{name}: function {f} named {got[f]['name']} vs {fnames[f]}")
    hottest = max(want, key=lambda f: want[f])
    check(fnames[hottest] == hot and flat["rows"][0]["name"] == hot,
          f"{name}: hottest function {flat['rows'][0]['name']} (reference {fnames[hottest]}), expected {hot}")

    text = run(db, "--top", "5")
    check(text.returncode == 0 and hot in text.stdout, f"{name}: text report names {hot}:\n{text.stdout}")
    csv = run(db, "--view", "bottom-up", "--format", "csv", "--top", "5")
    check(csv.returncode == 0 and csv.stdout.splitlines()[1].split(",")[3] == hot,
          f"{name}: bottom-up CSV starts with {hot}:\n{csv.stdout}")

# Errors name the file.
r = run("/nonexistent/x.d")
check(r.returncode != 0 and "/nonexistent/x.d" in r.stderr, f"missing database: {r.stderr}")
with tempfile.TemporaryDirectory() as tmp:
    db = Path(tmp) / "bad.d"
    shutil.copytree(shared / "conformance" / "dbase" / "small.d", db)
    for p in db.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(db, 0o755)
    with open(db / "meta.db", "r+b") as f:
        f.seek(16)
        f.write(b"\xff" * 16)
    r = run(db)
    check(r.returncode != 0 and "meta.db" in r.stderr and "offset" in r.stderr, f"corrupt meta.db: {r.stderr}")
    (db / "profile.db").unlink()
    shutil.copy(shared / "conformance" / "dbase" / "small.d" / "meta.db", db / "meta.db")
    r = run(db)
    check(r.returncode != 0 and "profile.db" in r.stderr, f"missing profile.db: {r.stderr}")
# --profiles: the values of chosen profiles alone, summed (hpcviewer's thread view). Each of
# loops-cputime-t.d's four threads has its share; all four together are the summary.
loops = shared / "conformance" / "dbase" / "loops-cputime-t.d"
r = run(loops, "--list-profiles")
listed = r.stdout.splitlines()
check(r.returncode == 0 and len(listed) == 4 and all("THREAD" in l for l in listed), f"--list-profiles: {r.stdout}")
totals = []
for p in range(1, 5):
    j = json.loads(run(loops, "--profiles", str(p), "--format", "json", "--view", "top-down").stdout)
    check(j["profiles"] == [p], f"--profiles {p}: {j.get('profiles')}")
    totals.append(j["total"])
whole = json.loads(run(loops, "--format", "json", "--view", "flat").stdout)
check(abs(sum(totals) - whole["total"]) < 1e-9 and all(t > 0 for t in totals), f"per-profile totals {totals} vs {whole['total']}")
every = json.loads(run(loops, "--profiles", "1-4", "--format", "json", "--view", "flat").stdout)
check(all(abs(a["exclusive"] - b["exclusive"]) < 1e-9 and a["name"] == b["name"] for a, b in zip(every["rows"], whole["rows"]))
      and len(every["rows"]) == len(whole["rows"]), "--profiles 1-4 is not the summary's flat view")
r = run(loops, "--profiles", "1,2")
check(r.returncode == 0 and "# Selected: 2 of them, their values alone: " + listed[0].split("\t")[1] in r.stdout,
      f"--profiles header: {r.stdout[:400]}")
# Flat by loop (each loop's source line; the reference viewer ranks loops by flattening its
# flat view): loops-cputime-t.d's outermost loop holds all the time.
j = json.loads(run(loops, "--format", "json", "--view", "flat", "--by", "loop").stdout)
check(j["rows"] and j["rows"][0]["name"] == "loop at loops.c:1010" and abs(j["rows"][0]["inclusive"] - whole["total"]) < 1e-9
      and all(r["name"].startswith("loop at ") and r["section"] == "flat-loop" for r in j["rows"]), f"flat by loop: {j['rows'][:3]}")
r = run(loops, "--profiles", "9")
check(r.returncode == 2 and "--profiles: '9' is not a profile or range of 1 to 4" in r.stderr, f"--profiles 9: {r.stderr}")
r = run(shared / "conformance" / "dbase" / "small.d", "--metric", "NOPE")
check(r.returncode != 0 and "CPUTIME (sec)" in r.stderr, f"unknown metric lists metrics: {r.stderr}")

# --query as text: the header counts what matches and what the outermost hold; nested
# matches are indented. --at-most / --at-least: exit status 3 and why, 0 when within.
r = run(loops, "--query", "main/**/loop:*", "--top", "3")
check(r.returncode == 0 and "# Query: main/**/loop:*: 11 contexts, 1 outermost" in r.stdout and
      "0.994165 = 25.02% of the total" in r.stdout, f"--query header: {r.stdout[:600]}")
body = [l for l in r.stdout.splitlines() if not l.startswith("#")]
check(len(body) == 3 and body[0].split("%  ")[-1].startswith("main thread > main > GOMP_parallel") and
      body[1].split("%  ")[-1].startswith("  main thread"), f"--query rows: {body}")
for args, status, says in ((("--at-most", "30"), 0, None), (("--at-most", "20"), 3, "25.02 % of CPUTIME (sec), more than 20 %"),
                           (("--at-least", "25"), 0, None), (("--at-least", "26"), 3, "less than 26 %")):
    r = run(loops, "--query", "main/**/loop:*", *args)
    check(r.returncode == status and (says is None or says in r.stderr), f"--query {args}: {r.returncode} {r.stderr}")
r = run(loops, "--at-most", "5")
check(r.returncode == 2 and "give --query" in r.stderr, f"--at-most without --query: {r.stderr}")
r = run(loops, "--query", "**/loop:*", "--view", "flat")
check(r.returncode == 2 and "--query is a view of its own" in r.stderr, f"--query with --view: {r.stderr}")

# --query with --compare: what it matches in each run and the change; the checks apply to DB.
small = shared / "conformance" / "dbase" / "small.d"
r = run(loops, "--compare", small, "--query", "**/function:main", "--format", "json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check(j.get("baseline", {}).get("outermost") == 1 and abs(j["baseline"]["inclusive"] - 1.210259) < 1e-9 and
      abs(j["run"]["inclusive"] - 0.994165) < 1e-9 and abs(j["run"]["percent"] - 25.0211) < 1e-3 and
      abs(j["change"] + 0.216094) < 1e-9 and abs(j["change_percent_points"] - (j["run"]["percent"] - 100.0)) < 1e-9,
      f"--compare --query json: {r.stdout[:500]} {r.stderr}")
r = run(loops, "--compare", small, "--query", "**/loop:*")
check(r.returncode == 0 and "21 contexts, 2 outermost  this run: " in r.stdout and "2 contexts, 2 outermost  baseline: " in r.stdout,
      f"--compare --query text: {r.stdout}")
r = run(loops, "--compare", small, "--query", "main/**/loop:*", "--at-most", "20")
check(r.returncode == 3 and "25.02 %" in r.stderr, f"--compare --query --at-most: {r.returncode} {r.stderr}")

# --view trace with --profiles: those lines alone; their sum is what each line spent in all.
j = json.loads(run(loops, "--view", "trace", "--format", "json", "--profiles", "2").stdout)
sec = sum(r["inclusive"] for r in j["rows"])
check(j["rows"] and abs(sec - 1.000874) < 1e-6 and all(abs(r["inclusive"] - r["exclusive"]) < 1e-12 for r in j["rows"]),
      f"--view trace --profiles 2: one line's rows {j['rows'][:3]}, {sec} s in all")
with tempfile.TemporaryDirectory() as tmp:  # a database without trace.db: said so, status 1
    for f in ("meta.db", "profile.db", "cct.db"):
        shutil.copy(shared / "conformance" / "dbase" / "small.d" / f, tmp)
    r = run(tmp, "--view", "trace")
    check(r.returncode == 1 and "trace.db: no traces (measure with hpcrun -t)" in r.stderr, f"--view trace without traces: {r.stderr}")

print("hpcreport_test:", "FAILED" if failures else "ok", f"({failures} failures)")
sys.exit(1 if failures else 0)
