"""A database written by hpcprof (ours or the reference's: database v4), in pandas.

    import hpctoolkit
    db = hpctoolkit.open("hpctoolkit-app-database")
    db.metrics                     # one row per metric: its scopes' ids and summary statistics
    db.contexts                    # one row per calling context: parent, kind, name, file, line, ...
    db.profiles                    # one row per profile (thread, rank, GPU stream): its identifiers
    db.total("CPUTIME (sec)")      # the whole program's
    db.inclusive("CPUTIME (sec)")  # by context, summed over the profiles (also "min", "max", "mean",
    db.exclusive("CPUTIME (sec)")  #   "stddev", "cv", "count" where hpcprof ran with -M stats)
    db.flat("CPUTIME (sec)", by="function")   # inclusive and exclusive by function/module/file/line
    db.context_values(ctx, "CPUTIME (sec)")   # one context across the profiles (cct.db)
    db.values("CPUTIME (sec)", contexts=[ctx]) # long form: ctx, profile, value (join with profiles)
    db.profile_values(1, "CPUTIME (sec)")     # one profile's contexts (profile.db)
    db.path(ctx), db.children(ctx), db.hot_path("CPUTIME (sec)")
    db.query("**/function:MPI_*", "CPUTIME (sec)")  # the contexts a call path query matches
    db.trace(1)                    # one profile's trace: time (ns) and context
    db.trace_time(depth=1)         # each trace line's time by function (at a call depth), in a time range
    db.overview()                  # where the time went by kind of work, and a verdict
    db.structure("CPUTIME (sec)")  # hpcviewer's flat view: modules, files, functions, loops, lines
    hpctoolkit.compare(base, db, "CPUTIME (sec)")  # two runs' flat views side by side, the change

Inclusive values are the "execution" scope (a context and everything below it); exclusive
values the "function" scope (a context and what lies lexically inside it, calls excluded), as
hpcreport and hpcviewer show them. Metric names may be given exactly or by a unique prefix.
Errors in a database's files raise FormatError naming the file."""
import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import _files
from ._files import FormatError

__all__ = ["open", "Database", "FormatError"]

_STATS = {("$$", "sum"): "sum", ("1", "sum"): "count", ("$$^2", "sum"): "sumsq", ("$$", "min"): "min",
          ("$$", "max"): "max"}


def open(path):  # noqa: A001 (the natural name for the entry point)
    """The database in directory `path` (hpcprof's output)."""
    return Database(path)


class Database:
    def __init__(self, path):
        self.directory = Path(path)
        if not self.directory.is_dir():
            raise FormatError(f"{self.directory}: not a database directory")
        meta = _files.read_meta(self.directory / "meta.db")
        self.title, self.description = meta["title"], meta["description"]
        self._id_names = meta["id_names"]
        self._prof_file, self._profiles = _files.read_profiles(self.directory / "profile.db")
        self._cct = None  # cct.db and trace.db are opened when first asked for
        self._traces = None

        rows, self._prop, self._stat = [], {}, {}
        for m in meta["metrics"]:
            stats = {}
            for scope, formula, combine, sid in m["stats"]:
                kind = _STATS.get((formula, combine))
                if kind:
                    stats.setdefault(scope, {})[kind] = sid
            for scope, pid in m["props"]:
                self._prop[(m["name"], scope)] = pid
                self._stat[(m["name"], scope)] = stats.get(scope, {})
                rows.append({"metric": m["name"], "scope": scope, "id": pid,
                             "statistics": ",".join(sorted(stats.get(scope, {})))})
        self.metrics = pd.DataFrame(rows, columns=["metric", "scope", "id", "statistics"])

        c = meta["contexts"]
        fn, kind = _objects(c["function"]), _objects(c["kind"])
        module, file = _objects(c["module"]), _objects(c["file"])
        offset = np.asarray(c["offset"], dtype=np.uint64)
        line = np.asarray(c["line"], dtype=np.int64)
        # A function context takes its function's module, entry, file and line; every column
        # is filled by whole arrays (a row at a time took seconds a million contexts).
        is_fn = (kind == "function") & np.array([f is not None for f in fn], dtype=bool)
        functions = meta["functions"]
        fidx = np.array([f[5] for f in fn[is_fn]], dtype=np.int64)
        def of_function(k, dtype):
            values = _files.object_array([f[k] for f in functions])
            return values[fidx].astype(dtype)
        if len(fidx):
            module[is_fn] = of_function(1, object)
            offset[is_fn] = of_function(2, np.uint64)
            file[is_fn] = of_function(3, object)
            line[is_fn] = of_function(4, np.int64)
        name = np.empty(len(kind), dtype=object)
        entry = kind == "entry"
        name[entry] = fn[entry]
        fnames = np.empty(len(functions), dtype=object)
        fnames[:] = [_function_name(f) for f in functions]
        name[is_fn] = fnames[fidx] if len(fidx) else []
        name[(kind == "function") & ~is_fn] = _function_name(None)
        bases = {v: _base(v) for v in set(file.tolist()) | set(module.tolist())}
        loop, lexline = kind == "loop", kind == "line"
        other = ~(entry | (kind == "function") | loop | lexline)
        name[loop] = [f"loop at {bases[x]}:{n}" for x, n in zip(file[loop].tolist(), line[loop].tolist())]
        name[lexline] = [f"{bases[x]}:{n}" for x, n in zip(file[lexline].tolist(), line[lexline].tolist())]
        name[other] = [f"{bases[m]}+{o:#x}" for m, o in zip(module[other].tolist(), offset[other].tolist())]
        self.contexts = pd.DataFrame({
            "parent": np.asarray(c["parent"], dtype=np.int64),
            "depth": np.asarray(c["depth"], dtype=np.int64),
            "relation": _objects(c["relation"]),
            "kind": kind,
            "name": name,
            "module": module,
            "offset": offset,
            "file": file,
            "line": line,
        }, index=pd.Index(np.asarray(c["id"], dtype=np.int64), name="ctx"))
        if not self.contexts.index.is_unique:
            dup = self.contexts.index[self.contexts.index.duplicated()][0]
            raise FormatError(f"{self.directory / 'meta.db'}: context id {dup} is listed more than once in the tree")
        self._tree_ids = np.sort(self.contexts.index.to_numpy())
        # A function listed more than once alike (one entry per inline site) is one function.
        first = {}
        self._function_of = {}
        for cid, ok, f in zip(c["id"], is_fn, fn):
            if ok:
                self._function_of[cid] = first.setdefault(f[:5], f[5])
        self._function_name = {f[5]: _function_name(f) for f in meta["functions"]}
        self._functions = meta["functions"]
        self._children = None

        prow = []
        for i, (_, ids, summary) in enumerate(self._profiles):
            row = {"profile": i, "summary": summary}
            for kind, logical, physical in ids:
                key = (self._id_names[kind] if kind < len(self._id_names) else f"kind{kind}").lower()
                row[key] = physical if key in ("node", "core") else logical
            prow.append(row)
        self.profiles = pd.DataFrame(prow).set_index("profile")
        for col in self.profiles.columns:
            if col != "summary":  # the summary profile has no identifiers: nullable integers
                self.profiles[col] = self.profiles[col].astype("UInt64" if col in ("node", "core") else "Int64")

    def __repr__(self):
        metrics = ", ".join(dict.fromkeys(self.metrics["metric"]))
        return (f"<hpctoolkit database {str(self.directory)!r}: {self.title!r}, {len(self.contexts)} contexts, "
                f"{len(self.profiles) - 1} profiles; metrics: {metrics}>")

    # -- metrics ------------------------------------------------------------------------------
    def metric(self, name):
        """The metric's full name, from its exact name or a unique prefix."""
        names = list(dict.fromkeys(self.metrics["metric"]))
        if name in names:
            return name
        hits = [n for n in names if n.startswith(name)]
        if len(hits) == 1:
            return hits[0]
        raise KeyError(f"metric '{name}' {'is ambiguous' if hits else 'not found'}; metrics: {', '.join(names)}")

    def _pid(self, metric, scope):
        key = (self.metric(metric), scope)
        if key not in self._prop:
            raise KeyError(f"metric '{key[0]}' has no '{scope}' scope")
        return self._prop[key]

    def summary(self, metric, scope="execution", stat="sum"):
        """A statistic over the profiles, by context (a Series without the contexts where it is 0).
        stat: sum, count, min, max, mean, stddev or cv (all but sum need hpcprof -M stats)."""
        key = (self.metric(metric), scope)
        if key not in self._stat:
            raise KeyError(f"metric '{key[0]}' has no '{scope}' scope")
        have = self._stat[key]
        need = {"mean": ["sum", "count"], "stddev": ["sum", "count", "sumsq"],
                "cv": ["sum", "count", "sumsq"]}.get(stat, [stat])
        missing = [s for s in need if s not in have]
        if missing:
            raise KeyError(f"statistic '{stat}' of '{key[0]}' needs {', '.join(missing)}, which this database "
                           f"lacks (hpcprof -M stats writes them); it has: {', '.join(sorted(have)) or 'none'}")
        values = {s: self._summary_series(have[s]) for s in need}
        if stat in ("mean", "stddev", "cv"):
            s, n = values["sum"], values["count"]
            mean = (s / n).fillna(0.0)
            if stat == "mean":
                return mean
            var = (values["sumsq"].reindex(n.index, fill_value=0.0) / n - mean * mean).clip(lower=0.0)
            sd = np.sqrt(var).fillna(0.0)
            return sd if stat == "stddev" else (sd / mean.where(mean != 0)).fillna(0.0)
        return values[stat]

    def _summary_series(self, stat_id, tree_only=True):
        for i, (block, _, is_summary) in enumerate(self._profiles):
            if is_summary:
                return self._block_series(block, stat_id, tree_only)
        raise FormatError(f"{self.directory / 'profile.db'}: no summary profile")

    def total(self, metric, profile=None, stat="sum"):
        """The whole program's inclusive value (the global context's): a statistic over the
        profiles, or one profile's."""
        if profile is not None:
            s = self._profile_series(profile, self._pid(metric, "execution"), tree_only=False)
        else:
            name = self.metric(metric)
            if stat not in ("sum", "count", "min", "max"):
                raise KeyError(f"total: statistic '{stat}' is not one hpcprof writes (sum, count, min, max)")
            have = self._stat.get((name, "execution"), {})
            if stat not in have:
                raise KeyError(f"statistic '{stat}' of '{name}' is not in this database (hpcprof -M stats writes it)")
            s = self._summary_series(have[stat], tree_only=False)
        return float(s.get(0, 0.0))

    def _block_series(self, block, metric_id, tree_only=True):
        """A value block's values of one metric by context; tree_only: only the contexts of
        meta.db's tree (not the global context 0, nor the instruction contexts hpcprof keeps
        below a line without listing them, whose values their parents already include)."""
        idx, vals = _files.profile_block(self._prof_file, block)
        if len(idx) == 0:
            return pd.Series([], dtype=np.float64, index=pd.Index([], dtype=np.int64, name="ctx"))
        starts = idx["start"].astype(np.int64)
        if len(vals) and (starts[-1] > len(vals) or np.any(np.diff(starts) < 0)):
            self._prof_file.fail("a profile's context index points outside its values")
        hit = vals["metric"] == metric_id
        ctx_of_value = np.repeat(idx["ctx"].astype(np.int64), np.diff(np.append(starts, len(vals))))
        if tree_only:
            hit &= np.isin(ctx_of_value, self._tree_ids)
        out = pd.Series(vals["value"][hit].astype(np.float64), index=pd.Index(ctx_of_value[hit], name="ctx"))
        # One value a context and metric (a damaged index listing a context twice made every
        # lookup of it a Series, and hot_path's max() fail).
        if not out.index.is_unique:
            dup = out.index[out.index.duplicated()][0]
            self._prof_file.fail(f"context {dup} has two values of metric {metric_id} in one profile")
        return out

    def inclusive(self, metric, stat="sum"):
        return self.summary(metric, "execution", stat)

    def exclusive(self, metric, stat="sum"):
        """The "function" scope, else "lex_aware", else "point" (as hpcreport picks it)."""
        name = self.metric(metric)
        for scope in ("function", "lex_aware", "point"):
            if (name, scope) in self._stat:
                return self.summary(name, scope, stat)
        raise KeyError(f"metric '{name}' has no exclusive scope (function, lex_aware or point)")

    def profile_values(self, profile, metric, scope="execution"):
        """One profile's values of a metric, by context (profile.db)."""
        return self._profile_series(profile, self._pid(metric, scope))

    def _profile_series(self, profile, metric_id, tree_only=True):
        if not 0 <= profile < len(self._profiles) or self._profiles[profile][2]:
            raise KeyError(f"profile {profile} is not a measured profile (1..{len(self._profiles) - 1})")
        return self._block_series(self._profiles[profile][0], metric_id, tree_only)

    def context_values(self, ctx, metric, scope="execution"):
        """One context's values of a metric, by profile (cct.db; 0: the whole program)."""
        return self._context_series(ctx, self._pid(metric, scope))

    def _context_series(self, ctx, pid):
        if self._cct is None:
            self._cct = _files.read_contexts(self.directory / "cct.db")
        f, blocks = self._cct
        if not 0 <= ctx < len(blocks):
            raise KeyError(f"context {ctx} is not in cct.db ({len(blocks)} contexts)")
        idx, vals = _files.context_block(f, blocks[ctx])
        at = np.nonzero(idx["metric"] == pid)[0]
        if len(at) == 0:
            return pd.Series([], dtype=np.float64, index=pd.Index([], dtype=np.int64, name="profile"))
        start = int(idx["start"][at[0]])
        end = int(idx["start"][at[0] + 1]) if at[0] + 1 < len(idx) else len(vals)
        if not 0 <= start <= end <= len(vals):
            f.fail(f"context {ctx}'s metric index points outside its values")
        part = vals[start:end]
        return pd.Series(part["value"].astype(np.float64), index=pd.Index(part["profile"].astype(np.int64), name="profile"))

    def values(self, metric, scope="execution", contexts=None):
        """A metric's values by context and profile (cct.db), long form: a DataFrame of ctx,
        profile and value for the contexts given (default: every context of the tree), ready
        to join with `profiles` (for instance to compare ranks or threads)."""
        pid = self._pid(metric, scope)
        if self._cct is None:
            self._cct = _files.read_contexts(self.directory / "cct.db")
        f, blocks = self._cct
        ids = self._tree_ids if contexts is None else np.asarray(list(contexts), dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < len(blocks))]
        ids = ids[blocks["n_values"][ids] > 0]
        n_idx = len(ids)
        heads = blocks[ids]
        parts_ctx, parts_val = [], []
        for k in range(n_idx):
            h = heads[k]
            idx = f.array(int(h["p_index"]), _files.CONTEXT_INDEX, int(h["n_metrics"]))
            at = np.searchsorted(idx["metric"], pid)
            if at == len(idx) or idx["metric"][at] != pid:
                continue
            first = int(idx["start"][at])
            last = int(idx["start"][at + 1]) if at + 1 < len(idx) else int(h["n_values"])
            if not 0 <= first <= last <= int(h["n_values"]):
                f.fail(f"context {int(ids[k])}'s metric index points outside its values")
            parts_val.append(f.array(int(h["p_values"]) + first * _files.CONTEXT_VALUE.itemsize,
                                     _files.CONTEXT_VALUE, last - first))
            parts_ctx.append(np.full(last - first, int(ids[k]), dtype=np.int64))
        if not parts_ctx:
            return pd.DataFrame({"ctx": np.zeros(0, np.int64), "profile": np.zeros(0, np.int64),
                                 "value": np.zeros(0, np.float64)})
        vals = np.concatenate(parts_val)
        return pd.DataFrame({"ctx": np.concatenate(parts_ctx), "profile": vals["profile"].astype(np.int64),
                             "value": vals["value"].astype(np.float64)})

    def profile_label(self, profile):
        """A profile as hpcreport names it: its identifiers' kinds and logical ids ("RANK 1
        THREAD 0"), or "summary"."""
        _, ids, summary = self._profiles[profile]
        if summary:
            return "summary"
        return " ".join(f"{self._id_names[k] if k < len(self._id_names) else f'KIND{k}'} {logical}"
                        for k, logical, _ in ids)

    def overview(self, metric=None, where=5):
        """Where the time went, by kind of work, as hpcreport --view overview: a dict with the
        time metric used ("metric", by default the first with a value) and its "total"; "kinds"
        (computation, MPI, OpenMP runtime, GPU runtime, I/O, waiting, idle threads: each its
        "value" and the `where` places it was spent, hottest first); "gpu" (the GPU's operations,
        (what, seconds)); "ipc" (instructions per cycle, where both counters were measured);
        "mpi_spread" (MPI's lowest and highest share of a profile's time); a "verdict"
        (compute-bound, communication-bound, ...) and the "reason" for it."""
        from ._overview import overview
        return overview(self, metric, where)

    # -- the tree -----------------------------------------------------------------------------
    def children(self, ctx):
        """The ids of a context's children (0: the entry points)."""
        if self._children is None:
            self._children = self.contexts.groupby("parent").groups
        return list(self._children.get(ctx, []))

    def path(self, ctx):
        """The context ids from an entry point down to ctx."""
        out = []
        parent = self.contexts["parent"]
        while ctx != 0:
            if ctx not in parent.index:
                raise KeyError(f"context {ctx} is not in the database's tree")
            out.append(ctx)
            ctx = int(parent[ctx])
        return out[::-1]

    def query(self, path, metric=None, stat="sum"):
        """The calling contexts a call path query matches, as rows of `contexts`, with a column
        `outermost` (no context above it on its path matched too: summing `inclusive` over
        those counts each cost once) and, given a metric, `inclusive` and `exclusive` (hottest
        first). hpcreport's --query reads the same language and gives the same contexts.

        A path is steps separated by "/" (or a list of steps); the contexts matched are those
        the last step matches, along a path on which the steps before matched in order:
            **              any number of contexts, none included
            *               any one context
            GLOB            a context whose name matches (fnmatch: * ? [...]); a function's
                            name also without an inlined call's "[I] ", the " [file]"
                            hpcstruct appends and its compiler clones' suffixes
                            (".constprop.0", ".isra.0", ".cold"...); a loop is
                            "loop at file.c:12", a line "file.c:12"
            KIND:GLOB       the same, of one kind: entry, function (called or inlined),
                            inlined, loop, line, instruction
            module:GLOB     a context of a module whose path or file name matches (a function
                            context's module is its function's)
            file:GLOB       a context whose source file's path or file name matches
        A leading "/" anchors the path at the top (its first step is an entry point such as
        "main thread"); without it the path may start anywhere. "\\/" is a "/" in a glob.
        Examples: "**/function:MPI_*" (every MPI call's context), "main/**/loop:*" (loops
        anywhere below main), "**/module:libcuda*" (contexts in the CUDA driver)."""
        from . import _query
        matched, outermost = _query.run(self, path)
        out = self.contexts[matched].copy()
        out["outermost"] = outermost[matched]
        if metric is not None:
            ids = out.index
            out["inclusive"] = self.inclusive(metric, stat).reindex(ids, fill_value=0.0).to_numpy()
            out["exclusive"] = self.exclusive(metric, stat).reindex(ids, fill_value=0.0).to_numpy()
            out = out.sort_values("inclusive", ascending=False, kind="stable")
        return out

    def hot_path(self, metric, threshold=0.5, stat="sum"):
        """From the hottest entry point down, the child holding more than `threshold` of its
        parent's inclusive value, while there is one (as hpcviewer's hot path)."""
        inc = self.inclusive(metric, stat)
        out, ctx = [], 0
        while True:
            kids = [(inc.get(k, 0.0), k) for k in self.children(ctx)]
            if not kids:
                return out
            v, k = max(kids)
            parent = inc.get(ctx, 0.0) if ctx else sum(x for x, _ in kids)
            if v <= 0 or (ctx and v <= threshold * parent):
                return out
            out.append(k)
            ctx = k

    def flat(self, metric, by="function", stat="sum"):
        """Inclusive and exclusive values by function, module, file, line or loop, hottest
        exclusive first, as hpcreport's flat view: functions, modules and files sum the function
        contexts of the function, of the functions in the module or defined in the file; lines
        and loops sum the line or loop contexts at each source line. An inclusive value counts each call chain once (a recursive
        function's nested instances are inside its outermost one's)."""
        if by not in ("function", "module", "file", "line", "loop"):
            raise ValueError(f"flat: by must be function, module, file, line or loop, not '{by}'")
        inc = self.inclusive(metric, stat)
        exc = self.exclusive(metric, stat)
        ctxs = self.contexts
        # As hpcreport: functions, modules and files group function contexts (by the function,
        # its module, the file of its definition); lines group line contexts.
        if by == "function":
            group = dict(self._function_of)
            keys = {c: self._function_name[f] for c, f in group.items()}
        elif by in ("module", "file"):
            col = ctxs[by]
            group = {c: col[c] or f"<unknown {by}>" for c in self._function_of}
            keys = group
        else:  # line or loop contexts, by file and line
            lines = ctxs[ctxs["kind"] == by]
            group = {c: (x, ln) for c, x, ln in zip(lines.index, lines["file"], lines["line"])}
            prefix = "loop at " if by == "loop" else ""
            keys = {c: f"{prefix}{_base(x)}:{ln}" for c, (x, ln) in group.items()}
        # Each context's nearest ancestor that belongs to a group (contexts are listed parents
        # first), so that a nested instance is found by following grouped ancestors only.
        near = {}
        for c, p in zip(ctxs.index.tolist(), ctxs["parent"].tolist()):
            near[c] = p if p in group else near.get(p, 0)
        inc, exc = inc.to_dict(), exc.to_dict()
        rows = {}
        for c, g in group.items():
            e, i = exc.get(c, 0.0), inc.get(c, 0.0)
            if e == 0 and i == 0:
                continue
            r = rows.setdefault(g, {"name": keys[c], "inclusive": 0.0, "exclusive": 0.0})
            r["exclusive"] += e
            a = near[c]
            while a and group[a] != g:
                a = near[a]
            if not a:
                r["inclusive"] += i
        df = pd.DataFrame(list(rows.values()), columns=["name", "inclusive", "exclusive"])
        return df.sort_values(["exclusive", "inclusive"], ascending=False, kind="stable").reset_index(drop=True)

    def structure(self, metric, stat="sum"):
        """hpcviewer's flat view, as hpcreport --view structure: the static structure as an
        outline, one row per load module, file, function, and below a function its loops,
        lines, inlined code ("[I] f", its body below) and call sites ("-> f": the callee's
        inclusive cost from there, no exclusive value), nested as in the source. Columns:
        parent (the parent row's index, -1 for a module), depth (0: modules), kind (module,
        file, function, loop, line, inlined, call, instruction), name, inclusive, exclusive; in
        tree order, siblings hottest first. A function is every context of it, called or
        inlined; a context without one is a function of its module's address. Inclusive values
        count a context only where none above it on its path has the same row (recursion
        counts once)."""
        inc = self.inclusive(metric, stat).to_dict()
        exc = self.exclusive(metric, stat).to_dict()
        ctxs = self.contexts
        fns = self._functions
        ids = ctxs.index.tolist()
        cols = {k: ctxs[k].tolist() for k in ("parent", "relation", "kind", "name", "module", "offset", "file", "line")}
        at = {c: i for i, c in enumerate(ids)}

        def step(i):
            """(key, kind, name, root top or None, leaf) of context row i."""
            c = ids[i]
            kind, rel = cols["kind"][i], cols["relation"][i]
            if kind == "entry":
                return None
            f = self._function_of.get(c)
            if kind == "function" and f is not None:
                fn = fns[f] if f < len(fns) else None
                top = ((("m", (fn[1] or None) if fn else None), ("f", (fn[3] or None) if fn else None), ("fn", f)),
                       (_base(fn[1]) if fn and fn[1] else "<unknown module>",
                        _base(fn[3]) if fn and fn[3] else "<unknown file>", self._function_name[f]))
                if rel == "inlined call":
                    return ("inlined", f), "inlined", "[I] " + self._function_name[f], top, False
                return ("call", f), "call", "-> " + self._function_name[f], top, True
            if kind in ("loop", "line"):
                return (kind, cols["file"][i], cols["line"][i]), kind, cols["name"][i], None, False
            addr = (cols["module"][i], cols["offset"][i])
            if rel != "lexical":
                m = cols["module"][i]
                top = ((("m", m or None), ("f", None), ("addr",) + addr),
                       (_base(m) if m else "<unknown module>", "<unknown file>", cols["name"][i]))
                return ("calladdr",) + addr, "call", "-> " + cols["name"][i], top, True
            return ("instruction",) + addr, "instruction", cols["name"][i], None, False

        rows = {}  # path (tuple of keys) -> [name, kind, inclusive, exclusive]
        active = {}

        def add(path, name, kind, c, with_exc):
            r = rows.setdefault(path, [name, kind, 0.0, 0.0])
            if active.get(path, 0) == 0:
                r[2] += inc.get(c, 0.0)
            active[path] = active.get(path, 0) + 1
            if with_exc:
                r[3] += exc.get(c, 0.0)

        kids = {}
        for i, p in enumerate(cols["parent"]):
            kids.setdefault(p, []).append(i)
        # Depth-first, iteratively: each entry (row, open instances' paths, leaving, counted).
        stack = [(i, [], False, None) for i in reversed(kids.get(0, []))]
        while stack:
            i, opened, leaving, counted = stack.pop()
            if leaving:
                for path in counted:
                    active[path] -= 1
                continue
            st = step(i)
            counted, mine = [], []
            if st is not None:
                key, kind, name, top, leaf = st
                for path in opened:
                    q = path + (key,)
                    add(q, name, kind, ids[i], kind != "call")
                    counted.append(q)
                    if not leaf:
                        mine.append(q)
                if top is not None:
                    keys, names = top
                    for d, k in enumerate(("module", "file", "function")):
                        q = keys[:d + 1]
                        add(q, names[d], k, ids[i], True)
                        counted.append(q)
                    mine.append(keys)
            stack.append((i, None, True, counted))
            for k in reversed(kids.get(ids[i], [])):
                stack.append((k, mine, False, None))

        # Tree order, siblings hottest first (inclusive, then exclusive).
        by_parent = {}
        for path in rows:
            by_parent.setdefault(path[:-1], []).append(path)
        out = []
        todo = [(q, -1) for q in reversed(sorted(by_parent.get((), []), key=lambda q: (-rows[q][2], -rows[q][3])))]
        while todo:
            q, prow = todo.pop()
            name, kind, i_v, e_v = rows[q]
            out.append({"parent": prow, "depth": len(q) - 1, "kind": kind, "name": name,
                        "inclusive": i_v, "exclusive": e_v})
            me = len(out) - 1
            ch = sorted(by_parent.get(q, []), key=lambda x: (-rows[x][2], -rows[x][3]))
            for x in reversed(ch):
                todo.append((x, me))
        return pd.DataFrame(out, columns=["parent", "depth", "kind", "name", "inclusive", "exclusive"])

    # -- traces -------------------------------------------------------------------------------
    def trace(self, profile):
        """One profile's trace (trace.db): time in ns since the epoch, and the context then
        (0: not running)."""
        self._open_traces()
        f, lines, _, _ = self._traces
        for prof, start, end in lines:
            if prof == profile:
                a = f.array(start, _files.TRACE_ELEMENT, (end - start) // _files.TRACE_ELEMENT.itemsize)
                return pd.DataFrame({"time": a["time"].astype(np.int64), "ctx": a["ctx"].astype(np.int64)})
        raise KeyError(f"profile {profile} has no trace")

    def trace_time(self, depth=None, t0=None, t1=None, profiles=None, within=None):
        """Time each trace line spent in each function (trace.db), in seconds: a DataFrame of
        profile, key (function index; -1 idle, -2 a context meta.db does not list, -3 no
        function on the path), function (its
        name, "<idle>" before a line's first record and where it is not running) and seconds,
        each profile's hottest first. A record holds from its time until the next one's, the
        last until the end of the range, as the trace view draws them. `depth`: the function
        at that call depth (0: the outermost), as the trace view colours a line at that
        depth (the innermost where a path is not that deep); default the innermost function.
        `t0`, `t1`: the range [t0, t1) in ns since the epoch (default the whole trace, see
        trace_range()). `profiles`: the trace lines (default all). `within`: context ids (a
        query's index): only time at contexts in their subtrees counts (no idle time), e.g.
        each thread's time in MPI over a phase of the run."""
        from . import _trace
        return _trace.trace_time(self, depth, t0, t1, profiles, within)

    def trace_range(self):
        """(first, last) timestamp of all traces, in ns since the epoch."""
        self._open_traces()
        return self._traces[2], self._traces[3]

    def _open_traces(self):
        if self._traces is None:
            path = self.directory / "trace.db"
            if not path.exists():
                raise KeyError(f"{self.directory}: no trace.db (the measurement was made without hpcrun -t)")
            self._traces = _files.read_traces(path)


def compare(base, db, metric, by="function", stat="sum"):
    """Two databases' flat views side by side (hpcreport DB --compare BASE): for each function
    (module, file, line or loop) by name, its exclusive and inclusive values in the baseline
    `base` and in `db`, and the change of exclusive value ("change": db's less base's); a row
    for what only one of them has (0 in the other); largest change first. The metric is named
    as in both. As hpcreport, the two programs' executables match whatever their file names
    (two builds: "main [app]" and "main [app.O3]"), and a row is named as `db` names it."""

    def keyed(d):
        f = d.flat(metric, by=by, stat=stat)
        program = _program_module(d)
        if program is None or by not in ("function", "module"):
            f["key"] = f["name"]
        elif by == "module":
            f["key"] = f["name"].where(f["name"] != program, "\x01program")
        else:
            suffix = f" [{_base(program)}]"
            f["key"] = [n[: -len(suffix)] + " [\x01program]" if n.endswith(suffix) else n for n in f["name"]]
        return f.groupby("key", sort=False).agg(name=("name", "first"), inclusive=("inclusive", "sum"),
                                                exclusive=("exclusive", "sum"))

    a, b = keyed(base), keyed(db)
    j = a.join(b, how="outer", lsuffix="_base", rsuffix="")
    j["name"] = j["name"].fillna(j["name_base"])
    for c in ("inclusive_base", "inclusive", "exclusive_base", "exclusive"):
        j[c] = j[c].fillna(0.0)
    j = j[["name", "inclusive_base", "inclusive", "exclusive_base", "exclusive"]].reset_index(drop=True)
    j["change"] = j["exclusive"] - j["exclusive_base"]
    order = j["change"].abs().sort_values(ascending=False, kind="stable").index
    return j.loc[order].reset_index(drop=True)


def _program_module(db):
    """The program's executable (its module's path), as hpcreport finds it: the module of a
    function named main (or "main [file]"), else the module named as the database's title."""
    for f in db._functions:
        if f[0] and (f[0] == "main" or f[0].startswith("main [")) and f[1]:
            return f[1]
    for m in db.contexts["module"].dropna().unique():
        if _base(m) == db.title:
            return m
    return None


def _base(path):
    return path.rsplit("/", 1)[-1] if path else "?"


def _objects(values):
    """values (a list, tuple or array) as a one-dimensional object array (tuples kept whole)."""
    if isinstance(values, np.ndarray):
        return values.astype(object)
    return _files.object_array(values)


def _function_name(f):
    if f is None:
        return "<unknown function>"
    name, module, offset = f[0], f[1], f[2]
    if name:
        return name
    return f"{_base(module)}+{offset:#x}" if module else "<unknown function>"
