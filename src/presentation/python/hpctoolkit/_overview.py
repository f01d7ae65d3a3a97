"""Where the time went, by kind of work: Database.overview(). The rules are hpcreport's
(src/presentation/overview.hpp, where they are explained), and the test holds the two to the
same kinds, places and verdict on the same databases (tests/python_api_test.py).

Each context's own value (its inclusive value less its children's) goes to the kind of work
its call path is in, walking from the thread's root: a function of an MPI library enters MPI,
one of an OpenMP runtime the OpenMP runtime, one of a GPU runtime the GPU runtime, one of the
application computation; the system's libraries keep their caller's kind, except that libc's
transfers called from computation are I/O and its waits are waiting. A thread that only
waited, and a runtime's own thread's waits, are idle."""

KINDS = [("compute", "computation"), ("mpi", "MPI"), ("openmp", "OpenMP runtime"),
         ("gpu-runtime", "GPU runtime (CPU)"), ("io", "I/O"), ("waiting", "waiting"), ("idle", "idle threads")]
COMPUTE, MPI, OPENMP, GPU_RUNTIME, IO, WAITING, IDLE = range(7)
APP, SYSTEM, MOD_MPI, MOD_OPENMP, MOD_GPU = range(5)

_MPI_LIBS = ("libmpi", "libpmpi", "libmpich", "libopen-pal", "libopen-rte", "libmca_", "mca_", "libucp", "libucs",
             "libuct", "libucm", "libfabric", "libpsm", "libhcoll", "libpmix", "libmpitrampoline", "libfmpich", "libmpl")
_OPENMP_LIBS = ("libgomp", "libomp.", "libomp-", "libiomp", "libomptarget", "libarcher")
_GPU_LIBS = ("libcuda", "libcudart", "libcupti", "libnvidia-", "libnvrtc", "libOpenCL", "libpocl", "libamdhip64",
             "libhsa-runtime", "libroctracer", "librocprofiler", "libze_", "libigc")
_SYSTEM_LIBS = ("libc.so", "libc-", "libm.so", "libm-", "libmvec", "libstdc++", "libc++", "libgcc_s", "ld-linux",
                "ld64.so", "libpthread", "libdl.", "libdl-", "librt.", "librt-", "libunwind", "libatomic",
                "linux-vdso", "[vdso]", "libevent", "libhwloc", "libnuma", "libltdl", "libudev", "libibverbs",
                "librdmacm", "libnl-", "libffi", "libLLVM", "libclang", "libnvJitLink", "libnvptxcompiler",
                "libamd_comgr")
_IO_NAMES = frozenset((
    "read", "write", "pread", "pread64", "pwrite", "pwrite64", "readv", "writev", "preadv", "preadv64", "preadv2",
    "pwritev", "pwritev64", "pwritev2", "open", "open64", "openat", "openat64", "creat", "close", "fsync",
    "fdatasync", "sync_file_range", "fread", "fwrite", "fflush", "fopen", "fopen64", "fdopen", "fclose", "fgets",
    "fputs", "fputc", "fgetc", "getc", "putc", "getline", "getdelim", "puts", "printf", "fprintf", "vfprintf",
    "vprintf", "dprintf", "scanf", "fscanf", "vfscanf", "sendfile", "sendfile64", "copy_file_range", "splice",
    "recv", "recvfrom", "recvmsg", "recvmmsg", "send", "sendto", "sendmsg", "sendmmsg", "connect", "accept",
    "accept4", "stat", "stat64", "fstat", "fstat64", "lstat", "statx", "newfstatat", "unlink", "rename", "mkdir",
    "getdents64", "opendir", "readdir", "readdir64"))
_WAIT_NAMES = frozenset((
    "nanosleep", "clock_nanosleep", "usleep", "sleep", "poll", "ppoll", "select", "pselect", "pselect6",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "pause", "sigsuspend", "pthread_join", "wait", "waitpid", "wait3",
    "wait4", "waitid", "msgrcv", "semop", "semtimedop", "aio_suspend", "sched_yield", "pthread_barrier_wait"))
_GPU_OPS = (("GKER (sec)", "kernel execution"), ("GMEM (sec)", "memory allocation and release"),
            ("GMSET (sec)", "memory set"), ("GXCOPY (sec)", "explicit data copy"),
            ("GICOPY (sec)", "implicit data copy"), ("GSYNC (sec)", "synchronization"))
_GPU_METRICS = ("GKER", "GMEM", "GMSET", "GXCOPY", "GICOPY", "GSYNC", "GPUOP", "GINS", "GSAMP")


def _module_kind(path):
    b = path.rsplit("/", 1)[-1] if path else ""
    if b.startswith(_MPI_LIBS):
        return MOD_MPI
    if b.startswith(_OPENMP_LIBS):
        return MOD_OPENMP
    if b.startswith(_GPU_LIBS):
        return MOD_GPU
    if b.startswith(_SYSTEM_LIBS) or (len(b) > 5 and b.endswith(".vdso")):
        return SYSTEM
    return APP


def _bare_libc_name(n):
    again = True
    while again:
        again = False
        for p in ("__GI_", "__libc_", "__"):
            if n.startswith(p):
                n, again = n[len(p):], True
    if len(n) > 4 and n.endswith("_chk"):
        n = n[:-4]
    if len(n) > 9 and n.endswith("_unlocked"):
        n = n[:-9]
    return n


def _io_name(raw):
    return raw.startswith("_IO_") or _bare_libc_name(raw) in _IO_NAMES


def _wait_name(raw):
    n = _bare_libc_name(raw)
    if n.startswith(("futex", "lll_lock_wait", "pthread_timedjoin", "pthread_clockjoin", "sigtimedwait", "sigwait")):
        return True
    if n.startswith(("pthread_rwlock_", "pthread_mutex_")):
        return "lock" in n and "unlock" not in n and "try" not in n and "init" not in n
    if n.startswith(("pthread_cond_", "sem_")):
        return "wait" in n
    return n in _WAIT_NAMES


def _mpi_name(n):
    return n.startswith(("MPI_", "PMPI_", "mpi_", "pmpi_", "MPIX_"))


def _openmp_name(n):
    return n.startswith(("GOMP_", "__kmpc_", "__kmp_", "gomp_"))


def _percent(part, whole):
    return f"{100.0 * part / whole if whole > 0 else 0.0:.0f}%"


def _time_metric(db, metric):
    """hpcreport's choice: the metric asked for (by default its default one: the first time
    metric with a value, else the first with a value) unless it counts GPU operations or bytes,
    else the first time metric with a value; where there is none, the one asked for still (its
    values are broken down all the same, as hpcreport does for its verdict)."""
    names = list(dict.fromkeys(db.metrics["metric"]))
    def usable(n):
        return not n.startswith(_GPU_METRICS) and "Bytes " not in n
    if metric is not None:
        asked = db.metric(metric)
    else:
        valued = [n for n in names if db.total(n) != 0]
        timed = [n for n in valued if "TIME" in n or "(sec)" in n]
        asked = timed[0] if timed else valued[0] if valued else names[0] if names else None
    if asked is None or usable(asked):
        return asked
    for n in names:
        if usable(n) and ("TIME" in n or "(sec)" in n) and db.total(n) > 0:
            return n
    return asked


def overview(db, metric=None, where=5):
    functions = {f[5]: f for f in db._functions}
    name = _time_metric(db, metric)
    out = {"metric": name, "total": db.total(name) if name else 0.0,
           "kinds": {key: {"name": label, "value": 0.0, "where": []} for key, label in KINDS},
           "gpu": [], "ipc": None, "mpi_spread": None, "verdict": "no data", "reason": ""}
    if name is not None:
        _kinds(db, name, functions, where, out)
    for mname, what in _GPU_OPS:
        if mname in set(db.metrics["metric"]):
            v = db.total(mname)
            if v != 0:
                out["gpu"].append((what, v))
    cycles, instructions = _counter(db, ("cycles", "tot_cyc")), _counter(db, ("instructions", "tot_ins"))
    if cycles and instructions is not None and cycles > 0:
        out["ipc"] = instructions / cycles
    if name is not None:
        _verdict(out)
    return out


def _counter(db, names):
    for n in dict.fromkeys(db.metrics["metric"]):
        low = n.lower()
        if any(w in low for w in names) and "stall" not in low:
            return db.total(n)
    return None


def _kinds(db, metric, functions, where, out):
    total = out["total"]
    inc = db.inclusive(metric)
    inc_of = inc.to_dict()
    module_kinds = {}
    places, place_ids = [""], {"": 0}
    def place(s):
        if s not in place_ids:
            place_ids[s] = len(places)
            places.append(s)
        return place_ids[s]
    root_kinds = [[0.0] * 7]
    by_root_kind_place = {}
    mpi_entries = []
    stack = [(0, total, COMPUTE, 0, -1, 0)]
    while stack:
        ctx, value, kind, at, helper, root = stack.pop()
        fn = db._function_of.get(ctx) if ctx else None
        f = functions.get(fn) if fn is not None else None
        if f is not None:
            raw = f[0] or ""
            br = raw.rfind(" [")
            if br >= 0 and raw.endswith("]"):
                raw = raw[:br]
            a = raw.find("@")
            if a > 0:
                raw = raw[:a]
            mk = module_kinds.get(f[1])
            if mk is None:
                mk = module_kinds[f[1]] = _module_kind(f[1])
            if helper < 0:
                helper = 1 if mk in (MOD_MPI, MOD_GPU) else 0
                root = len(root_kinds)
                root_kinds.append([0.0] * 7)
            now = kind
            if kind == IDLE:
                pass
            elif helper == 1 and _wait_name(raw):
                now = IDLE
            elif mk == MOD_MPI or _mpi_name(raw):
                now = MPI
            elif mk == MOD_OPENMP or _openmp_name(raw):
                now = OPENMP
            elif mk == MOD_GPU:
                now = GPU_RUNTIME
            elif mk == APP:
                now = COMPUTE
            elif kind == COMPUTE and _io_name(raw):
                now = IO
            elif kind == COMPUTE and _wait_name(raw):
                now = WAITING
            if now != kind or now == COMPUTE:
                shown = f[0] if f[0] else (f"<unknown function> {f[1].rsplit('/', 1)[-1]}+{f[2]:#x}"
                                           if f[1] else "<unknown function>")
                at = place(shown)
            if now == MPI and kind != MPI and helper == 0:
                mpi_entries.append(ctx)
            kind = now
        below = 0.0
        kids = []
        for c in db.children(ctx):
            v = inc_of.get(c, 0.0)
            if v == 0:
                continue
            below += v
            kids.append((int(c), v, kind, at, helper, root))
        stack.extend(reversed(kids))
        own = value - below
        if abs(own) > 1e-12 * max(1.0, abs(total)):
            root_kinds[root][kind] += own
            key = (root, kind, at)
            by_root_kind_place[key] = by_root_kind_place.get(key, 0.0) + own
    idle_root = [False] * len(root_kinds)
    for r in range(1, len(root_kinds)):
        waits = root_kinds[r][WAITING]
        idle_root[r] = waits > 0 and waits + root_kinds[r][IDLE] >= 0.95 * sum(root_kinds[r])
    by_place = [{} for _ in KINDS]
    values = [0.0] * 7
    for (r, k, p), v in by_root_kind_place.items():
        if k == WAITING and idle_root[r]:
            k = IDLE
        values[k] += v
        by_place[k][p] = by_place[k].get(p, 0.0) + v
    for k, (key, _) in enumerate(KINDS):
        w = [(places[p] if places[p] else "<no function>", v) for p, v in by_place[k].items() if v > 0]
        w.sort(key=lambda x: (-x[1], x[0]))
        out["kinds"][key]["value"] = values[k]
        out["kinds"][key]["where"] = w[:where]
    if mpi_entries:
        out["mpi_spread"] = _mpi_spread(db, metric, mpi_entries)


def _mpi_spread(db, metric, entries):
    """MPI's share of each profile's time, its lowest and highest where two profiles or more
    call MPI."""
    mpi, all_ = {}, {}
    def add(ctx, into):
        try:
            v = db.context_values(ctx, metric)
        except KeyError:
            return
        for p, x in v.items():
            into[int(p)] = into.get(int(p), 0.0) + float(x)
    for c in entries:
        add(c, mpi)
    add(0, all_)
    if not all_:
        for c in db.children(0):
            add(int(c), all_)
    shares = []
    for p, v in mpi.items():
        t = all_.get(p, 0.0)
        if v > 0 and t > 0:
            shares.append((min(1.0, v / t), p))
    if len(shares) < 2:
        return None
    lo, hi = min(shares), max(shares)
    return {"profiles": len(shares), "min": lo[0], "max": hi[0],
            "min_profile": db.profile_label(lo[1]), "max_profile": db.profile_label(hi[1])}


def _verdict(out):
    kinds = [out["kinds"][key] for key, _ in KINDS]
    idle = kinds[IDLE]["value"]
    total = out["total"] - idle if out["total"] - idle > 0 else 1
    top = 1
    for k in range(2, 7):
        if k != IDLE and kinds[k]["value"] > kinds[top]["value"]:
            top = k
    compute, other = kinds[COMPUTE]["value"], kinds[top]["value"]
    gpu_ops = sum(v for _, v in out["gpu"])
    ipc = out["ipc"]
    if out["total"] <= 0:
        out["verdict"], out["reason"] = "no data", "the metric's total is 0"
        return
    if other >= 0.3 * total and other >= compute:
        bound = ["compute-bound", "communication-bound", "OpenMP-runtime-bound", "GPU-runtime-bound", "I/O-bound",
                 "wait-bound", "idle"]
        out["verdict"] = bound[top]
        most = f", most in {kinds[top]['where'][0][0]}" if kinds[top]["where"] else ""
        out["reason"] = (f"{_percent(other, total)} of the time in {KINDS[top][1]}{most}; "
                         f"{_percent(compute, total)} in computation")
    elif ipc is not None and ipc < 0.8:
        out["verdict"] = "memory-bound"
        out["reason"] = (f"{_percent(compute, total)} of the time in computation at {ipc:.2f} instructions per "
                         "cycle: the processor mostly waits for data")
    else:
        out["verdict"] = "compute-bound"
        most = f", most in {kinds[COMPUTE]['where'][0][0]}" if kinds[COMPUTE]["where"] else ""
        out["reason"] = f"{_percent(compute, total)} of the time in computation{most}"
        if ipc is not None:
            out["reason"] += f" at {ipc:.2f} instructions per cycle"
        else:
            out["reason"] += (" (whether memory-bound is not known: measure perf::cycles and perf::instructions "
                              "where the processor counts them)")
    spread = out["mpi_spread"]
    if spread and kinds[MPI]["value"] >= 0.1 * total and spread["max"] - spread["min"] >= 0.2:
        out["reason"] += (f"; MPI's share ranges from {_percent(spread['min'], 1)} ({spread['min_profile']}) to "
                          f"{_percent(spread['max'], 1)} ({spread['max_profile']}) across {spread['profiles']} "
                          "profiles: load imbalance, the ranks with less to compute wait for the others")
    if idle > 0:
        out["reason"] += "; shares leave out the idle threads' time"
    if gpu_ops > 0:
        out["reason"] += f"; the GPU's operations took {gpu_ops:.6g} s"

