#!/usr/bin/python3
"""Prints a v4 database as canonical text using the reference checker's reader.

Run with PYTHONPATH=/work/shared/conformance. db_test.cpp diffs this against
hpc::db::canonical_text() over the same database.
"""
import struct
import sys
from pathlib import Path

from hpctesttool.formats import from_path


def fbits(v):
    return "%016x" % struct.unpack("<Q", struct.pack("<d", v))[0]


def opt(v):
    return "-" if v is None else str(v)


def main():
    db = from_path(Path(sys.argv[1]))
    out = []
    meta = db.meta

    def ctx(c, parent):
        fn = c.function.name if c.function is not None else None
        fp = c.file.path if c.file is not None else None
        mp = c.module.path if c.module is not None else None
        off = "-" if c.offset is None else "%x" % c.offset
        out.append(
            "ctx %d|parent %d|rel %s|lex %s|prop %d|fn %s|file %s|line %s|mod %s|off %s"
            % (c.ctx_id, parent, opt(c.relation.value if c.relation is not None else None),
               opt(c.lexical_type.value if c.lexical_type is not None else None),
               c.propagation, opt(fn), opt(fp), opt(c.line), opt(mp), off))
        for ch in c.children:
            ctx(ch, c.ctx_id)

    for e in meta.context.entry_points:
        out.append("entry %d|kind %s|name %s" % (
            e.ctx_id, opt(e.entry_point.value if e.entry_point is not None else None),
            e.pretty_name))
        for ch in e.children:
            ctx(ch, e.ctx_id)

    for i, p in enumerate(db.profile.profile_infos.profiles):
        ids = []
        if p.id_tuple is not None:
            ids = ["%d:%d:%d:%d" % (x.kind, x.flags.value, x.logical_id, x.physical_id)
                   for x in p.id_tuple.ids]
        out.append("prof %d|flags %d|ids %s" % (i, p.flags.value, " ".join(ids)))
        for c in sorted(p.values):
            for m in sorted(p.values[c]):
                v = p.values[c][m]
                if v != 0:
                    out.append("pv %d %d %d %s" % (i, c, m, fbits(v)))

    for c, pc in enumerate(db.context.ctx_infos.contexts):
        for m in sorted(pc.values):
            for pi in sorted(pc.values[m]):
                v = pc.values[m][pi]
                if v != 0:
                    out.append("cv %d %d %d %s" % (c, m, pi, fbits(v)))

    if db.trace is not None:
        tr = db.trace.ctx_traces
        out.append("trange %d %d" % (tr.timestamp_range["min"], tr.timestamp_range["max"]))
        for t in tr.traces:
            out.append("trace %d|%s" % (t.prof_index, " ".join(
                "%d:%d" % (e.timestamp, e.ctx_id) for e in t.line)))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
