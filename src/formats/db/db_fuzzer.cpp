// Fuzz target: any bytes through all four readers; errors are fine, crashes are not.
#include <cstddef>
#include <cstdint>

#include "formats/db/db.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hpc::ByteView v({data, size}, "fuzz.db");
  (void)hpc::db::read_meta(v);
  (void)hpc::db::read_profile_db(v);
  (void)hpc::db::read_cct_db(v);
  (void)hpc::db::read_trace_db(v);
  return 0;
}
