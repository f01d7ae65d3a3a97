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

    # The context tree, depth first: parents before children.
    cp, _ = f.section(3)
    p_entries, n_entries, sz_entry = f.u64(cp), f.u16(cp + 8), f.u8(cp + 0xA)
    rows = []
    add = rows.append

    stack = []
    for i in range(n_entries):
        e = p_entries + i * sz_entry
        cid, ep = f.u32(e + 0x10), f.u16(e + 0x14)
        pretty = f.string(f.u64(e + 0x18)) if f.u64(e + 0x18) else ENTRY_NAMES.get(ep, f"entry {ep}")
        add((cid, 0, 1, "call", "entry", pretty, "", 0, "", 0, ep))
        stack.append((f.u64(e + 8), f.u64(e), cid, 2))
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
    keys = ("id", "parent", "depth", "relation", "kind", "function", "module", "offset", "file", "line", "entry")
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
