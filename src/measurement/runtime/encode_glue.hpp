// The only place the runtime touches file bytes: it hands its data to the allocation-free
// encoder of src/formats/hpcrun. All functions are async-signal-safe.
#pragma once

#include <cstdint>

#include "state.hpp"

namespace hpc::rt {

bool encodeTraceHeader(int fd);
void encodeTraceRecords(int fd, const TraceRecord* recs, uint32_t n);
bool encodeProfile(int fd, ThreadState& ts);

}  // namespace hpc::rt
