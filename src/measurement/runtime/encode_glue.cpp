#include "encode_glue.hpp"

// Placeholder until src/formats/hpcrun/encode.hpp exists: writes nothing.
namespace hpc::rt {

bool encodeTraceHeader(int) { return true; }
void encodeTraceRecords(int, const TraceRecord*, uint32_t) {}
bool encodeProfile(int, ThreadState&) { return true; }

}  // namespace hpc::rt
