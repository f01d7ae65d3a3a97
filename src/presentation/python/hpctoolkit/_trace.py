"""Time by function over the traces: Database.trace_time(). A record holds from its time until
the next record's, the last until the end of the range asked (as the trace view draws them);
before a line's first record, and at context 0, the line is idle."""
import numpy as np
import pandas as pd

IDLE, UNKNOWN, NO_FUNCTION = -1, -2, -3


def _by_level(db, init, step):
    """For each row of db.contexts (by depth, parents first): step(values of the parents'
    rows, rows) gives the rows' values; init is what the roots' parent holds."""
    c = db.contexts
    pos = pd.Index(c.index).get_indexer(c["parent"].to_numpy())
    depth = c["depth"].to_numpy()
    order = np.argsort(depth, kind="stable")
    bounds = np.flatnonzero(np.diff(depth[order])) + 1
    out = np.empty(len(c), dtype=np.int64)
    for rows in np.split(order, bounds):
        if len(rows) == 0:
            continue
        ps = pos[rows]
        parent = np.where(ps >= 0, out[np.maximum(ps, 0)], init)
        out[rows] = step(parent, rows)
    return out


def function_keys(db, depth=None):
    """By row of db.contexts: the function index a trace sample at that context shows: the
    innermost function on its path, or with `depth` the one at that call depth (0: the
    outermost), else the innermost where the path is not that deep (views' context_at_depth);
    NO_FUNCTION where no function is on the path."""
    c = db.contexts
    fn = np.array([db._function_of.get(int(x), -1) for x in c.index], dtype=np.int64)
    is_fn = fn >= 0
    inner = _by_level(db, NO_FUNCTION, lambda parent, rows: np.where(is_fn[rows], fn[rows], parent))
    if depth is None:
        return inner
    calls = _by_level(db, 0, lambda parent, rows: parent + is_fn[rows])
    at = _by_level(db, -1, lambda parent, rows: np.where(is_fn[rows] & (calls[rows] == depth + 1), fn[rows], parent))
    return np.where(at >= 0, at, inner)


def trace_time(db, depth=None, t0=None, t1=None, profiles=None, within=None):
    lo, hi = db.trace_range()
    t0 = lo if t0 is None else int(t0)
    t1 = hi if t1 is None else int(t1)
    if t1 <= t0:
        raise ValueError(f"trace_time: the range [{t0}, {t1}) is empty")
    keys = function_keys(db, depth)
    ids = pd.Index(db.contexts.index)
    inside = None
    if within is not None:
        chosen = np.zeros(len(ids), dtype=bool)
        at = ids.get_indexer(np.asarray(list(within), dtype=np.int64))
        chosen[at[at >= 0]] = True
        inside = _by_level(db, 0, lambda parent, rows: parent | chosen[rows]).astype(bool)
    if profiles is None:
        db._open_traces()
        profiles = [p for p, _, _ in db._traces[1]]
    rows = []
    for p in profiles:
        t = db.trace(p)
        times = t["time"].to_numpy(dtype=np.int64)
        ctx = t["ctx"].to_numpy(dtype=np.int64)
        ends = np.append(times[1:], max(t1, times[-1] if len(times) else t1))
        dur = np.clip(ends, t0, t1) - np.clip(times, t0, t1)
        at = ids.get_indexer(ctx)
        key = np.where(ctx == 0, IDLE, np.where(at >= 0, keys[np.maximum(at, 0)], UNKNOWN))
        keep = dur > 0
        if inside is not None:
            keep &= (at >= 0) & inside[np.maximum(at, 0)] & (ctx != 0)
        sums = pd.Series(dur[keep]).groupby(key[keep]).sum()
        if inside is None and len(times) and times[0] > t0:  # idle before the first record
            sums = sums.add(pd.Series({IDLE: min(times[0], t1) - t0}), fill_value=0)
        elif inside is None and not len(times):
            sums = pd.Series({IDLE: t1 - t0})
        for k, ns in sums.items():
            if ns > 0:
                rows.append((int(p), int(k), ns / 1e9))
    names = {IDLE: "<idle>", UNKNOWN: "<unknown context>", NO_FUNCTION: "<no function>"}
    out = pd.DataFrame(rows, columns=["profile", "key", "seconds"])
    out.insert(2, "function", [names.get(k) or db._function_name.get(k, f"<function {k}>") for k in out["key"]])
    return out.sort_values(["profile", "seconds"], ascending=[True, False], kind="stable").reset_index(drop=True)
