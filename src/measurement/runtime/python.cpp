#include "python.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "arena.hpp"
#include "interpose.hpp"
#include "loadmap.hpp"
#include "output.hpp"
#include "sys.hpp"

namespace hpc::rt {

namespace {

// CPython's C API, found in the process (the python executable or libpython), as far as
// this file uses it: only functions of the stable ABI, so one build serves 3.9 and later.
using TraceFn = int (*)(void* obj, void* frame, int what, void* arg);
struct Api {
  void (*setProfile)(TraceFn, void*);
  void* (*frameCode)(void*);        // PyFrame_GetCode: a new reference
  int (*frameLine)(void*);          // PyFrame_GetLineNumber
  void* (*getAttr)(void*, const char*);
  const char* (*utf8)(void*);
  long (*asLong)(void*);
  void (*incRef)(void*);
  void (*decRef)(void*);
  void (*errClear)();
};
Api gApi;
uint16_t gInterp = 0;  // the interpreter's module (where PyEval_SetProfile lies)
// The function that runs Python code (_PyEval_EvalFrameDefault, CPython 3.6 to 3.13): a
// frame in it is Python executing. Empty where it is not found.
uintptr_t gEvalLo = 0, gEvalHi = 0;

constexpr int kCall = 0, kReturn = 3;  // PyTrace_CALL, PyTrace_RETURN

bool resolveApi() {
  if (gApi.setProfile) return true;
  Api a{};
  a.setProfile = reinterpret_cast<decltype(a.setProfile)>(dlsym(RTLD_DEFAULT, "PyEval_SetProfile"));
  a.frameCode = reinterpret_cast<decltype(a.frameCode)>(dlsym(RTLD_DEFAULT, "PyFrame_GetCode"));
  a.frameLine = reinterpret_cast<decltype(a.frameLine)>(dlsym(RTLD_DEFAULT, "PyFrame_GetLineNumber"));
  a.getAttr = reinterpret_cast<decltype(a.getAttr)>(dlsym(RTLD_DEFAULT, "PyObject_GetAttrString"));
  a.utf8 = reinterpret_cast<decltype(a.utf8)>(dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8"));
  a.asLong = reinterpret_cast<decltype(a.asLong)>(dlsym(RTLD_DEFAULT, "PyLong_AsLong"));
  a.incRef = reinterpret_cast<decltype(a.incRef)>(dlsym(RTLD_DEFAULT, "Py_IncRef"));
  a.decRef = reinterpret_cast<decltype(a.decRef)>(dlsym(RTLD_DEFAULT, "Py_DecRef"));
  a.errClear = reinterpret_cast<decltype(a.errClear)>(dlsym(RTLD_DEFAULT, "PyErr_Clear"));
  if (!a.setProfile || !a.frameCode || !a.frameLine || !a.getAttr || !a.utf8 || !a.asLong || !a.incRef || !a.decRef ||
      !a.errClear)
    return false;
  loadmapRefresh();  // an interpreter dlopen'ed by an embedding program is in the map
  gInterp = loadmapLookup(reinterpret_cast<uintptr_t>(a.setProfile)).id;
  if (!gInterp) return false;
  if (void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault")) {
    Dl_info info;
    ElfW(Sym)* sym = nullptr;
    if (dladdr1(eval, &info, reinterpret_cast<void**>(&sym), RTLD_DL_SYMENT) && sym && sym->st_size)
      gEvalLo = reinterpret_cast<uintptr_t>(eval), gEvalHi = gEvalLo + sym->st_size;
  }
  gApi = a;
  return true;
}

// The code objects met, by address (open addressing; the GIL serialises every hook), and
// the table's text: one line per index, "qualname<TAB>file<TAB>first line".
struct CodeSlot {
  void* code;
  uint32_t index;
};
constexpr size_t kCodeSlots = size_t(1) << 18;
constexpr size_t kTextMax = size_t(64) << 20;
CodeSlot* gCodes = nullptr;
char* gText = nullptr;
size_t gTextLen = 0;
uint32_t gIndices = 0;

// A name or path into the table's text, its tabs and line ends as spaces.
void appendText(const char* s) {
  for (; s && *s && gTextLen + 2 < kTextMax; ++s) gText[gTextLen++] = (*s == '\t' || *s == '\n') ? ' ' : *s;
}
void appendSeparator(char c) {
  if (gTextLen + 1 < kTextMax) gText[gTextLen++] = c;
}

// Its attribute name as UTF-8 into the table's text (nothing where it has none).
void appendAttr(void* code, const char* name, bool number) {
  void* v = gApi.getAttr(code, name);
  if (!v) {
    gApi.errClear();
    return;
  }
  if (number) {
    long n = gApi.asLong(v);
    char buf[24];
    Text t(buf, sizeof buf);
    t.dec(uint64_t(n > 0 ? n : 0));
    appendText(buf);
  } else {
    appendText(gApi.utf8(v));
  }
  gApi.errClear();
  gApi.decRef(v);
}

// The code object's index, taken at its first call. The table keeps a reference to it: one
// freed would leave its address to another, which took its name (in a plain script, the code
// objects exec'd by namedtuple left theirs to the script's own functions). Code objects
// mostly live as long as their modules anyway; a program that compiles code without end
// keeps what it ran, up to the table's 64 MiB of names.
uint32_t intern(void* code) {
  if (!gCodes) {
    gCodes = static_cast<CodeSlot*>(pageAlloc(kCodeSlots * sizeof(CodeSlot)));
    gText = static_cast<char*>(pageAlloc(kTextMax));
    if (!gCodes || !gText) return 0;
  }
  size_t h = (reinterpret_cast<uintptr_t>(code) >> 4) * 0x9E3779B97F4A7C15ull >> 46;
  for (size_t probes = 0; probes < 64; ++probes, h = (h + 1) & (kCodeSlots - 1)) {
    CodeSlot& s = gCodes[h];
    if (s.code == code) return s.index;
    if (s.code) continue;
    if (gTextLen + 4096 >= kTextMax) return 0;
    appendAttr(code, "co_qualname", false);
    appendSeparator('\t');
    appendAttr(code, "co_filename", false);
    appendSeparator('\t');
    appendAttr(code, "co_firstlineno", true);
    appendSeparator('\n');
    gApi.incRef(code);
    s.index = ++gIndices;
    s.code = code;
    return s.index;
  }
  return 0;
}

// The profile hook: the thread's shadow stack follows its calls and returns.
int profileHook(void*, void* frame, int what, void*) {
  if (what != kCall && what != kReturn) return 0;
  ThreadState* ts = currentThread();
  PyStack* s = ts ? ts->py : nullptr;
  if (!s) return 0;
  const uint32_t d = s->depth;
  if (what == kCall) {
    void* code = gApi.frameCode(frame);
    const uint32_t index = code ? intern(code) : 0;
    if (code) gApi.decRef(code);
    if (d < kMaxPyFrames) s->e[d] = PyFrameEntry{frame, index, 0};
    if (d > 0 && d - 1 < kMaxPyFrames) s->e[d - 1].line = 0;  // the caller moved on to this call
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s->depth = d + 1;
    return 0;
  }
  // A return: this frame off the stack, with any above it whose return was not seen. A frame
  // not on it (active before the hook was installed) changes nothing.
  if (d == 0) return 0;
  if (d > kMaxPyFrames) {
    s->depth = d - 1;
    return 0;
  }
  uint32_t at = d;
  while (at > 0 && s->e[at - 1].frame != frame) --at;
  if (at == 0) return 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  s->depth = at - 1;
  return 0;
}

}  // namespace

bool pythonInsertPath(ThreadState& ts, const uintptr_t* frames, size_t n, bool leafIsPc, CctNode*& node) {
  PyStack* s = ts.py;
  const uint32_t depth = s ? s->depth : 0;
  if (!depth || !gInterp || n == 0) return false;
  auto pcOf = [frames, leafIsPc](size_t k) { return k > 0 || !leafIsPc ? frames[k] - 1 : frames[k]; };
  auto interpreter = [&](size_t k) { return loadmapLookup(pcOf(k)).id == gInterp || (k > 0 && loadmapIsSelf(pcOf(k))); };
  bool seen = false;
  size_t inner = 0;  // frames[0, inner) are kept, below the Python frames
  size_t eval = n;   // the innermost frame running Python code
  for (size_t k = 0; gEvalLo && k < n && eval == n; ++k)
    if (pcOf(k) >= gEvalLo && pcOf(k) < gEvalHi) eval = k;
  if (eval < n) {
    // Below it, the interpreter's call machinery (vectorcall, the method's C wrapper) is left
    // out: kept from the first frame of another module inward (an extension's, which may call
    // back into the interpreter's C API). The innermost Python frame is the innermost code
    // running: a callback's, where an extension called Python back (a sort key, asyncio's
    // task steps), and the extension's frames above it are left out.
    seen = true;
    inner = eval;
    while (inner > 0 && interpreter(inner - 1)) --inner;
  } else {
    // From the outermost frame inward: the interpreter's frames, and the first frame past
    // them that is not the interpreter's (an extension's, a library's) starts what is kept.
    for (size_t k = n; k-- > 0;) {
      if (interpreter(k)) seen = true;
      else if (seen) {
        inner = k + 1;
        break;
      }
    }
  }
  if (!seen) return false;  // not in Python (a thread of a library's own)
  const uint16_t module = loadmapPseudoId(Pseudo::Python);
  if (!module) return false;
  CctNode* at = ts.fence;
  const uint32_t kept = depth < kMaxPyFrames ? depth : kMaxPyFrames;
  for (uint32_t j = 0; j < kept && at; ++j) {
    PyFrameEntry& e = s->e[j];
    // A frame suspended in a call stays at its line until the call returns (the hook clears
    // the line at its next call); the innermost one moves on.
    uint32_t line = j + 1 < kept ? e.line : 0;
    if (!line) {
      const int l = gApi.frameLine(e.frame);
      line = l > 0 ? uint32_t(l) & 0xffffff : 0;
      if (j + 1 < kept) e.line = line;
    }
    at = ts.cct.child(at, module, uint64_t(e.index) << 24 | line);
  }
  for (size_t k = inner; k-- > 0 && at;) {
    if (k > 0 && loadmapIsSelf(pcOf(k))) continue;  // a runtime wrapper's frame
    ModuleRef m = loadmapLookupOrAnonymous(pcOf(k));
    if (!m.id) return false;
    at = ts.cct.child(at, m.id, m.offset);
  }
  if (!at) return false;
  node = at;
  return true;
}

void pythonWriteTable() {
  if (!gConfig.selected) return;
  if (!gText || !gTextLen || !loadmapPseudoId(Pseudo::Python)) return;
  char dir[kPathMax], path[kPathMax], tmp[kPathMax];
  Text d(dir, sizeof dir);
  d.str(gConfig.outDir).str("/python");
  mkdir(dir, 0755);
  Text(path, sizeof path).str(gConfig.outDir).ch('/').str(loadmapModulePath(loadmapPseudoId(Pseudo::Python)));
  Text(tmp, sizeof tmp).str(path).str(".tmp");
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = writeAll(fd, gText, gTextLen);
  close(fd);
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

}  // namespace hpc::rt

using namespace hpc::rt;

// Called by hpcrun's sitecustomize.py, with the GIL held, in each thread to be measured:
// installs the profile hook for it. 1 where installed.
HPC_EXPORT int hpcrun_python_thread() {
  ThreadState* ts = currentThread();
  if (!ts || !resolveApi()) return 0;
  if (!ts->py) {
    ++ts->suspend;
    auto* s = static_cast<PyStack*>(ts->arena.alloc(sizeof(PyStack)));
    --ts->suspend;
    if (!s) return 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ts->py = s;
  }
  gApi.setProfile(profileHook, nullptr);
  return 1;
}
