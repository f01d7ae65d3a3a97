// The only place the runtime touches file bytes: it hands its data to the allocation-free
// encoder of src/formats/hpcrun. All functions are async-signal-safe.
#pragma once

#include <cstdint>

#include "state.hpp"

namespace hpc::rt {

// One identifier of a profile's id tuple (kind with its interpretation in the high 2 bits).
struct IdEntry {
  uint16_t kind;
  uint64_t physical, logical;
};

// What a profile holds besides the process-wide header fields and metric table.
struct ProfileSpec {
  Cct* cct;
  Arena* arena;            // scratch for the write buffer
  uint32_t threadIndex;
  uint64_t traceMin, traceMax;
  bool traced;             // write the trace-* header fields
  bool disorder;           // the trace's records are not in time order
  const IdEntry* ids;
  uint16_t nids;
};

bool encodeTraceHeader(int fd, uint64_t flags = 0);
void encodeTraceRecords(int fd, const TraceRecord* recs, uint32_t n);
bool encodeProfile(int fd, ThreadState& ts);
bool encodeCctProfile(int fd, const ProfileSpec& spec);

}  // namespace hpc::rt
