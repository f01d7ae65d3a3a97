// Compiled with -fno-exceptions -fno-rtti: encode.hpp must stay in the runtime dialect.
#include "formats/hpcrun/encode.hpp"

namespace {
bool discard(void*, const void*, size_t) { return true; }
}  // namespace

bool hpc_hpcrun_encode_check() {
  using namespace hpc::hpcrun::enc;
  ProfileEncoder e(Sink{nullptr, &discard});
  NvPair nv{"program-name", "x"};
  e.header(&nv, 1);
  e.loadmap_begin(0);
  e.cct_begin(0);
  e.metrics_begin(0);
  e.idtuple_dictionary();
  e.sparse_begin(nullptr, 0, 0, 0);
  e.finish();
  uint8_t rec[kTraceRecordMax];
  return e.ok() && encode_trace_record(rec, 0, {1, 2, 0}) == 12;
}
