#!/usr/bin/env python3
"""Reads a database with the reference checker's own reader (independent of ours) and prints
JSON: per function, the summary inclusive value of the first metric over its function
contexts (not nested in another context of the same function), and, per function, how many
loop and inlined-call contexts lie below it. Usage: db_summary.py DB (PYTHONPATH = conformance)."""
import json
import sys
from pathlib import Path

from hpctesttool.formats import from_path

db = from_path(Path(sys.argv[1]))
if db is None:
    sys.exit(f"db_summary: {sys.argv[1]}: not a database")
meta, prof = db.meta, db.profile
metric = meta.metrics.metrics[0]
inc = next(si.prop_metric_id for si in metric.scope_insts if si.scope.scope_name == "execution")
summary = next(p for p in prof.profile_infos.profiles if p.flags.is_summary)

out = {"metric": metric.name, "functions": {}, "profiles": len(prof.profile_infos.profiles) - 1}


def fn_entry(name):
    return out["functions"].setdefault(name, {"inclusive": 0.0, "loops": 0, "inlined": 0})


def walk(ctx, open_fns):
    name = ctx.function.name if ctx.function is not None else None
    is_fn = ctx.lexical_type is not None and ctx.lexical_type.name == "function" and name
    inner = open_fns
    if is_fn:
        if name not in open_fns:
            fn_entry(name)["inclusive"] += summary.values.get(ctx.ctx_id, {}).get(inc, 0.0)
        inner = open_fns + [name]
        if ctx.relation is not None and ctx.relation.name == "inlined_call" and open_fns:
            fn_entry(open_fns[-1])["inlined"] += 1
    if ctx.lexical_type is not None and ctx.lexical_type.name == "loop" and open_fns:
        fn_entry(open_fns[-1])["loops"] += 1
    for c in ctx.children:
        walk(c, inner)


for ep in meta.context.entry_points:
    for c in ep.children:
        walk(c, [])
json.dump(out, sys.stdout, indent=1, sort_keys=True)
