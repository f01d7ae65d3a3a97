"""Call path queries: Database.query(path). The same language and answers as hpcreport's
--query (views.hpp `PathQuery`); the grammar is in Database.query's docstring."""
import fnmatch
import re

import numpy as np
import pandas as pd

KINDS = ("entry", "function", "inlined", "loop", "line", "instruction")
_MAX_STEPS = 62  # the states of a path are bits of an int64


def parse(path):
    """[(kind, glob)] and whether the path is anchored at the top. kind: "**", "*", one of
    KINDS, "module", "file", or None (a name of any kind)."""
    if isinstance(path, (list, tuple)):
        parts, anchored = [str(p) for p in path], False
        if parts and parts[0] == "":
            parts, anchored = parts[1:], True
    else:
        text = str(path)
        anchored = text.startswith("/")
        if anchored:
            text = text[1:]
        # "/" separates steps; "\/" is a slash within a glob.
        parts = [p.replace("\0", "/") for p in text.replace("\\/", "\0").split("/")]
    steps = []
    for p in parts:
        if p == "":
            raise ValueError(f"call path query {path!r}: an empty step (two '/' in a row, or one at the end)")
        if p in ("**", "*"):
            steps.append((p, None))
            continue
        kind, sep, glob = p.partition(":")
        if sep and kind in KINDS + ("module", "file"):
            if glob == "":
                raise ValueError(f"call path query {path!r}: step {p!r} has no pattern after ':'")
            steps.append((kind, glob))
        else:
            steps.append((None, p))  # a name (a ':' of a line's "file.c:12" stays in it)
    if not steps:
        raise ValueError(f"call path query {path!r}: no step")
    if len(steps) + 1 > _MAX_STEPS:
        raise ValueError(f"call path query {path!r}: more than {_MAX_STEPS - 1} steps")
    return steps, anchored


_CLONE = re.compile(r"\.(constprop|isra|part|cold|lto_priv|localalias|llvm)(\.[0-9]+)?$")


def _bare(name):
    """A name without an inlined call's "[I] " and the " [file]" hpcstruct appends to a
    procedure's name, as views.cpp filter_matches strips them."""
    b = name[4:] if name.startswith("[I] ") else name
    if len(b) > 3 and b.endswith("]"):
        at = b.rfind(" [")
        if at > 0:
            b = b[:at]
    return b


def _unclone(name):
    """A function's name without its compiler clones' suffixes ("f.constprop.0.isra.0" is f),
    as views.cpp strip_clone_suffixes."""
    while True:
        m = _CLONE.search(name)
        if not m or m.start() == 0:
            return name
        name = name[:m.start()]


def _name_matches(rx, name):
    """As views.cpp filter_matches: the name, else its bare form, else that without clone suffixes."""
    if rx.match(name):
        return True
    b = _bare(name)
    if b != name and rx.match(b):
        return True
    u = _unclone(b)
    return u != b and rx.match(u) is not None


def _glob_on(values, glob, also=None):
    """Boolean array: values (an object array) matching glob, or (where `also` is given) the
    value `also` maps each to matching it."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object).fillna(""), sort=False)
    rx = re.compile(fnmatch.translate(glob), re.DOTALL)
    hit = np.fromiter((rx.match(u) is not None or (also is not None and rx.match(also(u)) is not None)
                       for u in uniques), dtype=bool, count=len(uniques))
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)


def _glob_names(values, glob):
    """Boolean array: names matching glob as filter_matches matches them."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object).fillna(""), sort=False)
    rx = re.compile(fnmatch.translate(glob), re.DOTALL)
    hit = np.fromiter((_name_matches(rx, u) for u in uniques), dtype=bool, count=len(uniques))
    return hit[codes] if len(codes) else np.zeros(0, dtype=bool)


def _basename_or_path(v):
    return v.rsplit("/", 1)[-1]


def step_matches(db, kind, glob):
    """Boolean array over db.contexts' rows: the contexts step (kind, glob) matches."""
    c = db.contexts
    n = len(c)
    if kind == "*":
        return np.ones(n, dtype=bool)
    k = c["kind"].to_numpy()
    if kind in ("module", "file"):
        return _glob_on(c[kind].to_numpy(), glob, _basename_or_path)
    hit = _glob_names(c["name"].to_numpy(), glob)
    if kind is None:
        return hit
    if kind == "inlined":
        return hit & (k == "function") & (c["relation"].to_numpy() == "inlined call")
    return hit & (k == kind)


def run(db, path):
    """(matched, outermost): boolean arrays over db.contexts' rows."""
    steps, anchored = parse(path)
    if not anchored:
        steps = [("**", None)] + steps
    n = len(steps)
    star = [kind == "**" for kind, _ in steps]
    match = [None if star[i] else step_matches(db, *steps[i]) for i in range(n)]

    def closure(x):  # a "**" may match no context: the step after it is waiting too
        for i in range(n):
            if star[i]:
                x = x | (((x >> i) & 1) << (i + 1))
        return x

    c = db.contexts
    rows = len(c)
    pos = pd.Index(c.index).get_indexer(c["parent"].to_numpy())  # -1: the root
    depth = c["depth"].to_numpy()
    order = np.argsort(depth, kind="stable")
    bounds = np.flatnonzero(np.diff(depth[order])) + 1
    state = np.zeros(rows, dtype=np.int64)
    matched = np.zeros(rows, dtype=bool)
    above = np.zeros(rows, dtype=bool)  # a context above it matched
    top = np.int64(closure(np.int64(1)))
    accept = np.int64(1) << n
    for rows_at in np.split(order, bounds):
        if len(rows_at) == 0:
            continue
        ps = pos[rows_at]
        has_parent = ps >= 0
        s = np.where(has_parent, state[np.maximum(ps, 0)], top)
        new = np.zeros(len(rows_at), dtype=np.int64)
        for i in range(n):
            waiting = ((s >> i) & 1).astype(bool)
            if star[i]:
                new |= np.where(waiting, np.int64(1) << i, 0)
            else:
                new |= np.where(waiting & match[i][rows_at], np.int64(1) << (i + 1), 0)
        new = closure(new)
        state[rows_at] = new
        matched[rows_at] = (new & accept) != 0
        above[rows_at] = has_parent & (above[np.maximum(ps, 0)] | matched[np.maximum(ps, 0)])
    return matched, matched & ~above
