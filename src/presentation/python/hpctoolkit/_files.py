"""The bytes of a database v4 (meta.db, profile.db, cct.db, trace.db), as FORMATS.md in the
reference lays them out: little-endian structures found through the file header's section
pointers. Each file is memory-mapped and read where asked; value arrays come back as numpy
views of the mapping (nothing is copied until a caller needs it). Anything out of bounds or
unlike the format raises FormatError naming the file and what is wrong."""
import mmap
import struct

import numpy as np


class FormatError(Exception):
    """A database file that cannot be read: the message names the file and the problem."""


# Packed (unaligned) arrays of the value blocks.
PROFILE_VALUE = np.dtype({"names": ["metric", "value"], "formats": ["<u2", "<f8"], "offsets": [0, 2], "itemsize": 10})
PROFILE_INDEX = np.dtype({"names": ["ctx", "start"], "formats": ["<u4", "<u8"], "offsets": [0, 4], "itemsize": 12})
CONTEXT_VALUE = np.dtype({"names": ["profile", "value"], "formats": ["<u4", "<f8"], "offsets": [0, 4], "itemsize": 12})
CONTEXT_INDEX = np.dtype({"names": ["metric", "start"], "formats": ["<u2", "<u8"], "offsets": [0, 2], "itemsize": 10})
TRACE_ELEMENT = np.dtype({"names": ["time", "ctx"], "formats": ["<u8", "<u4"], "offsets": [0, 8], "itemsize": 12})


class File:
    """One mapped database file: its header checked, readers for its fields."""

    def __init__(self, path, kind, footer):
        self.path = str(path)
        try:
            with open(path, "rb") as f:
                self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise FormatError(f"{self.path}: no such file") from None
        except ValueError:  # mmap of an empty file
            raise FormatError(f"{self.path}: empty file") from None
        except OSError as e:
            raise FormatError(f"{self.path}: {e.strerror}") from None
        self.size = len(self.buf)
        if self.size < 24 or self.buf[:10] != b"HPCTOOLKIT":
            self.fail("not an HPCToolkit database file (no HPCTOOLKIT magic)")
        if self.buf[10:14] != kind:
            self.fail(f"a '{self.buf[10:14].decode('ascii', 'replace')}' file where '{kind.decode()}' was expected")
        if self.buf[14] != 4:
            self.fail(f"major version {self.buf[14]}, only version 4 is read")
        if self.buf[self.size - 8:] != footer:
            self.fail(f"truncated: the footer '{footer.decode()}' is missing")

    def fail(self, what):
        raise FormatError(f"{self.path}: {what}")

    def _unpack(self, fmt, off):
        if off < 0 or off + struct.calcsize(fmt) > self.size:
            self.fail(f"a field at offset {off:#x} lies outside the file ({self.size} bytes)")
        return struct.unpack_from(fmt, self.buf, off)

    def u8(self, off):
        return self._unpack("<B", off)[0]

    def u16(self, off):
        return self._unpack("<H", off)[0]

    def u32(self, off):
        return self._unpack("<I", off)[0]

    def u64(self, off):
        return self._unpack("<Q", off)[0]

    def string(self, off):
        if off <= 0 or off >= self.size:
            self.fail(f"a string pointer {off:#x} outside the file")
        end = self.buf.find(b"\0", off)
        if end < 0:
            self.fail(f"the string at {off:#x} has no terminating NUL")
        return self.buf[off:end].decode("utf-8", "replace")

    def section(self, index):
        """(pointer, size) of the file header's section `index` (0-based)."""
        size, ptr = self._unpack("<QQ", 0x10 + 0x10 * index)
        if ptr + size > self.size:
            self.fail(f"section {index + 1} ({size} bytes at {ptr:#x}) runs past the end of the file")
        return ptr, size

    def array(self, off, dtype, count):
        end = off + dtype.itemsize * count
        if count < 0 or off < 0 or end > self.size:
            self.fail(f"an array of {count} values at {off:#x} runs past the end of the file")
        if count == 0:
            return np.zeros(0, dtype)
        return np.frombuffer(self.buf, dtype=dtype, count=count, offset=off)


CTX_HEAD = struct.Struct("<QQIBBBB")  # szChildren, pChildren, ctxId, flags, relation, lexicalType, nFlexWords
U64 = struct.Struct("<Q")
FILE_LINE = struct.Struct("<QI")
MODULE_OFFSET = struct.Struct("<QQ")

ENTRY_NAMES = {0: "unknown entry", 1: "main thread", 2: "application thread"}
LEXICAL = {0: "function", 1: "loop", 2: "line", 3: "instruction"}
RELATION = {0: "lexical", 1: "call", 2: "inlined call"}
COMBINE = {0: "sum", 1: "min", 2: "max"}


def read_meta(path):
    """meta.db: a dict of title, description, id names, scopes, metrics, modules, files,
    functions and the context tree as flat lists (one entry per context, parents first)."""
    f = File(path, b"meta", b"_meta.db")
    out = {}
    gp, _ = f.section(0)
    out["title"] = f.string(f.u64(gp)) if f.u64(gp) else ""
    out["description"] = f.string(f.u64(gp + 8)) if f.u64(gp + 8) else ""

    ip, _ = f.section(1)
    pp, n = f.u64(ip), f.u8(ip + 8)
    out["id_names"] = [f.string(f.u64(pp + 8 * i)) for i in range(n)]

    mp, _ = f.section(2)
    p_metrics, n_metrics = f.u64(mp), f.u32(mp + 8)
    sz_metric, sz_inst, sz_summary = f.u8(mp + 0xC), f.u8(mp + 0xD), f.u8(mp + 0xE)
    p_scopes, n_scopes, sz_scope = f.u64(mp + 0x10), f.u16(mp + 0x18), f.u8(mp + 0x1A)
    scopes = {}
    for i in range(n_scopes):
        s = p_scopes + i * sz_scope
        scopes[s] = {"name": f.string(f.u64(s)), "type": f.u8(s + 8), "bit": f.u8(s + 9)}
    out["scopes"] = list(scopes.values())
    metrics = []
    for i in range(n_metrics):
        m = p_metrics + i * sz_metric
        name = f.string(f.u64(m))
        p_inst, p_sum, n_inst, n_sum = f.u64(m + 8), f.u64(m + 0x10), f.u16(m + 0x18), f.u16(m + 0x1A)
        props, stats = [], []
        for k in range(n_inst):
            a = p_inst + k * sz_inst
            sc = f.u64(a)
            if sc not in scopes:
                f.fail(f"metric '{name}' names a propagation scope at {sc:#x} that is not listed")
            props.append((scopes[sc]["name"], f.u16(a + 8)))
        for k in range(n_sum):
            a = p_sum + k * sz_summary
            sc = f.u64(a)
            if sc not in scopes:
                f.fail(f"metric '{name}' names a propagation scope at {sc:#x} that is not listed")
            stats.append((scopes[sc]["name"], f.string(f.u64(a + 8)), COMBINE.get(f.u8(a + 0x10), "?"), f.u16(a + 0x12)))
        metrics.append({"name": name, "props": props, "stats": stats})
    out["metrics"] = metrics

    def listing(index, stride_off):
        p, _ = f.section(index)
        return f.u64(p), f.u32(p + 8), f.u16(p + stride_off)

    modules = {}
    p, n, sz = listing(5, 0xC)
    for i in range(n):
        modules[p + i * sz] = f.string(f.u64(p + i * sz + 8))
    files = {}
    p, n, sz = listing(6, 0xC)
    for i in range(n):
        files[p + i * sz] = f.string(f.u64(p + i * sz + 8))
    functions = {}
    p, n, sz = listing(7, 0xC)
    for i in range(n):
        a = p + i * sz
        pn, pm, pf = f.u64(a), f.u64(a + 8), f.u64(a + 0x18)
        functions[a] = (f.string(pn) if pn else "", modules.get(pm, ""), f.u64(a + 0x10) if pm else 0,
                        files.get(pf, ""), f.u32(a + 0x20) if pf else 0, i)
    out["modules"], out["files"] = list(modules.values()), list(files.values())
    out["functions"] = list(functions.values())

    # The context tree: read with numpy where its records lie as every writer lays them
    # (sibling arrays one after another, a parent's range holding exactly its children),
    # else one context at a time, which also says what is wrong with a damaged file.
    cp, csize = f.section(3)
    entries = _entries(f, cp)
    keys = ("id", "parent", "depth", "relation", "kind", "function", "module", "offset", "file", "line", "entry")
    try:
        columns = _tree_vectorized(f, cp, csize, entries, functions, files, modules)
    except (OverflowError, ValueError, IndexError, MemoryError):  # damaged pointers and sizes
        columns = None
    if columns is None:
        rows = _tree_loop(f, entries, functions, files, modules)
        columns = list(zip(*rows)) if rows else [[] for _ in keys]
    out["contexts"] = dict(zip(keys, columns))
    return out


def read_profiles(path):
    """profile.db: (File, list of (value block, id tuple [(kind, logical, physical)], summary))."""
    f = File(path, b"prof", b"_prof.db")
    pp, _ = f.section(0)
    p, n, sz = f.u64(pp), f.u32(pp + 8), f.u8(pp + 0xC)
    profiles = []
    for i in range(n):
        a = p + i * sz
        block = (f.u64(a), f.u64(a + 8), f.u32(a + 0x10), f.u64(a + 0x18))
        tp, ids = f.u64(a + 0x20), []
        if tp:
            for k in range(f.u16(tp)):
                e = tp + 8 + 16 * k
                ids.append((f.u8(e), f.u32(e + 4), f.u64(e + 8)))
        profiles.append((block, ids, bool(f.u32(a + 0x28) & 1)))
    return f, profiles


def profile_block(f, block):
    """(ctx index array, value array) of one profile's value block."""
    n_values, p_values, n_ctxs, p_idx = block
    return f.array(p_idx, PROFILE_INDEX, n_ctxs), f.array(p_values, PROFILE_VALUE, n_values)


def read_contexts(path):
    """cct.db: (File, a numpy array of each context's value block header, by context id)."""
    f = File(path, b"ctxt", b"__ctx.db")
    cp, _ = f.section(0)
    p, n, sz = f.u64(cp), f.u32(cp + 8), f.u8(cp + 0xC)
    if sz < 0x20:
        f.fail(f"context info records of {sz} bytes, fewer than the 32 of version 4.0")
    head = np.dtype({"names": ["n_values", "p_values", "n_metrics", "p_index"], "formats": ["<u8", "<u8", "<u2", "<u8"],
                     "offsets": [0, 8, 0x10, 0x18], "itemsize": sz})
    return f, f.array(p, head, n)


def context_block(f, block):
    return (f.array(int(block["p_index"]), CONTEXT_INDEX, int(block["n_metrics"])),
            f.array(int(block["p_values"]), CONTEXT_VALUE, int(block["n_values"])))


def read_traces(path):
    """trace.db: (File, [(profile index, start, end)], min time, max time)."""
    f = File(path, b"trce", b"trace.db")
    tp, _ = f.section(0)
    p, n, sz = f.u64(tp), f.u32(tp + 8), f.u8(tp + 0xC)
    lines = []
    for i in range(n):
        a = p + i * sz
        start, end = f.u64(a + 8), f.u64(a + 0x10)
        if end < start or (end - start) % TRACE_ELEMENT.itemsize:
            f.fail(f"trace {i}'s line is not a whole number of elements")
        lines.append((f.u32(a), start, end))
    return f, lines, f.u64(tp + 0x10), f.u64(tp + 0x18)


def _entries(f, cp):
    """The entry points: (szChildren, pChildren, ctx id, entry point, pretty name)."""
    p_entries, n_entries, sz_entry = f.u64(cp), f.u16(cp + 8), f.u8(cp + 0xA)
    out = []
    for i in range(n_entries):
        e = p_entries + i * sz_entry
        cid, ep = f.u32(e + 0x10), f.u16(e + 0x14)
        pretty = f.string(f.u64(e + 0x18)) if f.u64(e + 0x18) else ENTRY_NAMES.get(ep, f"entry {ep}")
        out.append((f.u64(e), f.u64(e + 8), cid, ep, pretty))
    return out


def _tree_loop(f, entries, functions, files, modules):
    """The context tree one context at a time, depth first: parents before children."""
    rows = []
    add = rows.append
    stack = []
    for size, children, cid, ep, pretty in entries:
        add((cid, 0, 1, "call", "entry", pretty, "", 0, "", 0, ep))
        stack.append((children, size, cid, 2))
    seen, buf = 0, f.buf
    while stack:
        p, size, parent, depth = stack.pop()
        end = p + size
        if end > f.size:
            f.fail(f"the children of context {parent} run past the end of the file")
        if end > f.size - 8:
            f.fail(f"the children of context {parent} run past the end of the file")
        kids = []
        while p < end:
            if p + 0x20 > end:
                f.fail(f"a child of context {parent} at {p:#x} is cut short")
            size, children, cid, flags, rel, lex, words = CTX_HEAD.unpack_from(buf, p)
            flex, word = p + 0x20, 0
            fn, module, offset, file, line = None, "", 0, "", 0
            if p + 0x20 + 8 * words > end:
                f.fail(f"context {cid}'s fields at {p:#x} run past its siblings' array")
            if flags & 1:
                fn = functions.get(U64.unpack_from(buf, flex)[0])
                word += 1
            if flags & 2:
                pf, line = FILE_LINE.unpack_from(buf, flex + 8 * word)
                file = files.get(pf, "")
                word += 2  # the line's u32 in the low half of the word after the file's
            if flags & 4:
                pm, offset = MODULE_OFFSET.unpack_from(buf, flex + 8 * word)
                module = modules.get(pm, "")
            kids.append((children, size, cid))
            add((cid, parent, depth, RELATION.get(rel, "?"), LEXICAL.get(lex, "?"), fn, module, offset, file, line, -1))
            p += 0x20 + 8 * words
            seen += 1
            if seen > f.size:  # a cycle of pointers
                f.fail("the context tree does not end (a cycle of child pointers)")
        for children, size, cid in reversed(kids):
            if size:
                stack.append((children, size, cid, depth + 1))
    return rows


def object_array(values):
    """A one-dimensional object array of values (tuples kept whole, whatever their lengths)."""
    out = np.empty(len(values), dtype=object)
    try:
        out[:] = values
    except ValueError:  # a numpy that reads equal-length tuples as a second dimension
        for i, v in enumerate(values):
            out[i] = v
    return out


def _lookup(table, pointers, missing):
    """Each pointer's entry of table (a dict by pointer), or `missing`, as an object array."""
    out = np.empty(len(pointers), dtype=object)
    out[:] = [missing]
    if not table or not len(pointers):
        return out
    keys = np.fromiter(table.keys(), dtype=np.uint64, count=len(table))
    order = np.argsort(keys)
    keys = keys[order]
    values = object_array(list(table.values()))[order]
    at = np.minimum(np.searchsorted(keys, pointers), len(keys) - 1)
    hit = keys[at] == pointers
    out[hit] = values[at[hit]]
    return out


def _tree_vectorized(f, cp, csize, entries, functions, files, modules):
    """The context tree read with numpy, parents before children (by depth); None where the
    records do not lie as expected (then the loop reads them, and says what is wrong). The
    records are looked for from the end of the section's header (the reference writes
    children before their parents, and its entry points last; a 32-byte entry point reads as
    a record without fields, so a run through them stays in step) or else from the first
    entry point's children (ours)."""
    starts = [children for size, children, _, _, _ in entries if size]
    if not starts:
        return None
    # The entry points' own array is no records' (the run from the header passes through it).
    p_entries, n_entries, sz_entry = f.u64(cp), f.u16(cp + 8), f.u8(cp + 0xA)
    skip = (p_entries, p_entries + n_entries * sz_entry)
    for lo in (cp + 0x10, min(starts)):
        if cp <= lo <= min(starts):
            columns = _tree_from(f, lo, cp + csize, skip, entries, functions, files, modules)
            if columns is not None:
                return columns
    return None


def _tree_from(f, lo, hi, skip, entries, functions, files, modules):
    """_tree_vectorized with the records looked for from lo."""
    if lo % 8 or hi > f.size:
        return None
    # Every record from the first child array on, one after another (a record's size is in
    # its header): those that lie in some parent's range are the contexts.
    buf, pos, p, limit = f.buf, [], lo, hi - 0x20
    append = pos.append
    try:
        while p <= limit:
            append(p)
            p += 0x20 + 8 * buf[p + 0x17]
    except IndexError:
        return None
    if not pos:
        return None
    P = np.array(pos, dtype=np.int64)
    P = P[(P < skip[0]) | (P >= skip[1])]
    if not len(P):
        return None
    nflex = np.frombuffer(buf, dtype=np.uint8, count=f.size)[P + 0x17].astype(np.int64)
    ends = P + 0x20 + 8 * nflex
    if (ends > hi).any():
        P, nflex, ends = P[ends <= hi], nflex[ends <= hi], ends[ends <= hi]
    words = np.frombuffer(buf, dtype="<u8", count=f.size // 8)
    W = P // 8
    sz, pc = words[W], words[W + 1]
    cid = (words[W + 2] & 0xFFFFFFFF).astype(np.int64)
    u8 = np.frombuffer(buf, dtype=np.uint8, count=f.size)
    flags, rel, lex = u8[P + 0x14], u8[P + 0x15], u8[P + 0x16]
    # Each parent's children: the records from its pChildren to pChildren + szChildren.
    par_ptr = np.concatenate([np.array([c for s_, c, _, _, _ in entries if s_], dtype=np.int64), pc[sz > 0].astype(np.int64)])
    par_size = np.concatenate([np.array([s_ for s_, _, _, _, _ in entries if s_], dtype=np.int64), sz[sz > 0].astype(np.int64)])
    n_entry_parents = sum(1 for s_, _, _, _, _ in entries if s_)
    par_id = np.concatenate([np.array([c for s_, _, c, _, _ in entries if s_], dtype=np.int64), cid[sz > 0]])
    par_rec = np.concatenate([np.full(n_entry_parents, -1, dtype=np.int64), np.nonzero(sz > 0)[0]])
    first = np.searchsorted(P, par_ptr)
    last = np.searchsorted(P, par_ptr + par_size)
    if (first >= len(P)).any() or (P[np.minimum(first, len(P) - 1)] != par_ptr).any() or (last <= first).any():
        return None
    if (ends[last - 1] != par_ptr + par_size).any():
        return None
    counts = last - first
    if counts.sum() > len(P):
        return None
    child = np.repeat(first - np.cumsum(np.concatenate([[0], counts[:-1]])), counts) + np.arange(counts.sum())
    owner = np.full(len(P), -2, dtype=np.int64)  # -2: in no parent's range
    parent_id = np.zeros(len(P), dtype=np.int64)
    if len(np.unique(child)) != len(child):
        return None  # a record in two parents' ranges
    owner[child] = np.repeat(par_rec, counts)
    parent_id[child] = np.repeat(par_id, counts)
    keep = owner != -2
    # Depth by pointer jumping: each record's distance to a child of an entry point.
    up = owner.copy()
    dist = (up >= 0).astype(np.int64)
    for _ in range(64):
        m = up >= 0
        if not m.any():
            break
        nxt = up.copy()
        dist[m] += dist[up[m]]
        nxt[m] = up[up[m]]
        up = nxt
    else:
        return None  # a cycle
    if (up[keep] != -1).any():
        return None
    # The flex fields: the function pointer, then file and line, then module and offset.
    has_fn, has_src, has_mod = (flags & 1).astype(np.int64), (flags & 2) >> 1, (flags & 4) >> 2
    if (4 + has_fn + 2 * has_src + 2 * has_mod > 4 + nflex).any():
        return None
    fw = W + 4
    fn_ptr = np.where(has_fn == 1, words[np.minimum(fw, len(words) - 1)], 0)
    sw = fw + has_fn
    file_ptr = np.where(has_src == 1, words[np.minimum(sw, len(words) - 1)], 0)
    line = np.where(has_src == 1, words[np.minimum(sw + 1, len(words) - 1)] & 0xFFFFFFFF, 0)
    mw = sw + 2 * has_src
    mod_ptr = np.where(has_mod == 1, words[np.minimum(mw, len(words) - 1)], 0)
    offset = np.where(has_mod == 1, words[np.minimum(mw + 1, len(words) - 1)], 0)
    fn = _lookup(functions, fn_ptr, None)
    fn[has_fn == 0] = None
    file = _lookup(files, file_ptr, "")
    module = _lookup(modules, mod_ptr, "")
    relation = np.array([RELATION.get(i, "?") for i in range(256)], dtype=object)[rel]
    kind = np.array([LEXICAL.get(i, "?") for i in range(256)], dtype=object)[lex]
    depth = dist + 2
    idx = np.nonzero(keep)[0]
    idx = idx[np.argsort(depth[idx], kind="stable")]
    # Columns, the entry points first.
    ne = len(entries)
    def col(head, values):
        out = np.empty(ne + len(idx), dtype=values.dtype)
        out[:ne] = head
        out[ne:] = values[idx]
        return out
    return [col([e[2] for e in entries], cid), col([0] * ne, parent_id), col([1] * ne, depth),
            col(["call"] * ne, relation), col(["entry"] * ne, kind), col([e[4] for e in entries], fn),
            col([""] * ne, module), col([0] * ne, offset.astype(np.uint64)), col([""] * ne, file),
            col([0] * ne, line.astype(np.int64)), np.concatenate([np.array([e[3] for e in entries], dtype=np.int64),
                                                                   np.full(len(idx), -1, dtype=np.int64)])]
