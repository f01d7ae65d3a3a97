// The IO source (io.cpp): read/write and their kin interposed, the bytes each call moved
// added to its calling context under the IO::read and IO::write events.
#pragma once

namespace hpc::rt {

// At start-up, after the event list is known: the real functions looked up (the sample
// handler calls read and write through the wrappers, and must not be the first).
void ioInit();

}  // namespace hpc::rt
