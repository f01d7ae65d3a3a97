// Python calling contexts (seed 000, section 4.5; `hpcrun -a python`). The launcher puts a
// sitecustomize.py on PYTHONPATH that calls hpcrun_python_thread() (with the GIL held) in
// the main thread and, through threading.setprofile, in every thread the threading module
// starts; that installs a C profile hook (PyEval_SetProfile) which keeps a shadow stack of
// the thread's Python frames: a frame pushed at each call, popped at its return. A sample on
// a thread with Python frames replaces the interpreter's own C frames by them: the path is
// the Python frames (function, file, line), then the C frames below the interpreter (an
// extension's: numpy's, BLAS), then the leaf. A Python frame is a node of the Python
// pseudo-module (loadmap.hpp) at offset (its code object's index << 24 | line); the table of
// the code objects' qualified names, files and first lines is written as the process ends,
// and hpcprof reads it as the module's structure.
//
// Known limits: the extension frames between a Python frame and a Python callback of that
// extension (a coroutine stepped by _asyncio, a ufunc written in Python) are left out; frames active before the hook
// was installed (the site module's) are not shown; a program that sets its own profile
// function (cProfile, sys.setprofile) ends the shadow stack's updates; `python -S`/`-I`
// ignore PYTHONPATH and so are measured as C.
#pragma once

#include <cstddef>
#include <cstdint>

#include "state.hpp"

namespace hpc::rt {

struct PyFrameEntry {
  void* frame;     // the PyFrameObject, alive while on the stack
  uint32_t index;  // its code object's in the table (0: unknown)
  uint32_t line;   // the line it is suspended at (in a call), found at a sample; 0: not yet
};

constexpr uint32_t kMaxPyFrames = 512;

struct PyStack {
  volatile uint32_t depth;  // may exceed kMaxPyFrames: only the outermost are kept
  PyFrameEntry e[kMaxPyFrames];
};

// For a complete unwind (frames[0] the innermost, n frames; leafIsPc: frames[0] is the
// interrupted pc, not a return address): where the thread has Python frames and the unwind
// went through the interpreter, inserts the hybrid path below the thread's fence into its
// CCT and sets node to its leaf; false otherwise (the caller inserts the C path). In the
// sample handler, or with sampling suspended. MT: async-signal-safe.
bool pythonInsertPath(ThreadState& ts, const uintptr_t* frames, size_t n, bool leafIsPc, CctNode*& node);

// At the process's end (and before an exec): the code objects' table, where any Python frame
// was recorded.
void pythonWriteTable();

}  // namespace hpc::rt
