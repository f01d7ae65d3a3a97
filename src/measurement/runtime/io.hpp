// The IO source (io.cpp; stdio's calls in io_stdio.cpp, libhpcrun_io.so): read/write and
// their kin interposed, the bytes each call moved added to its calling context under the
// IO::read and IO::write events.
#pragma once

#include <cstddef>
#include <cstring>

#include "interpose.hpp"

// Adds bytes (dir 0: read, 1: write) at the calling context of the application's I/O call
// being wrapped. Exported for libhpcrun_io.so's stdio wrappers (io_stdio.cpp).
HPC_EXPORT void hpcrun_io_count(int dir, long bytes);

namespace hpc::rt {

// A call's result r, its bytes (r itself, or r items of `size` bytes) counted in direction dir.
template <class R> R counted(int dir, R r, size_t size = 1) {
  hpcrun_io_count(dir, long(r) * long(size));
  return r;
}

// A call's result r, the string it read or wrote (fgets's line, fputs's string; and extra,
// puts's newline) counted where it succeeded (ok).
template <class R> R countedText(int dir, R r, bool ok, const char* text, long extra = 0) {
  if (ok && text) hpcrun_io_count(dir, long(std::strlen(text)) + extra);
  return r;
}

// At start-up, after the event list is known: the real functions looked up (the sample
// handler calls read and write through the wrappers, and must not be the first).
void ioInit();

}  // namespace hpc::rt
