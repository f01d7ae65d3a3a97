// Fuzz target for both measurement formats (dispatch on magic). A successful parse
// must survive encode -> parse unchanged. A profile is also read as hpcprof reads it
// (parse_profile_flat with the SectionReuse and Profile kept from the inputs before, as a
// thread keeps them from file to file), which must give what a fresh read gives.
#include <cstdint>
#include <cstdlib>

#include "formats/hpcrun/hpcrun.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpc::hpcrun;
  std::span<const uint8_t> in(data, size);
  switch (sniff(in)) {
    case FileKind::Profile: {
      static SectionReuse reuse;
      static Profile kept;
      Profile fresh;
      CctView keptCct, freshCct;
      hpc::Status keptValues, freshValues;
      const hpc::Status a = parse_profile_flat(in, "fuzz", kept, keptCct, keptValues, &reuse);
      const hpc::Status b = parse_profile_flat(in, "fuzz", fresh, freshCct, freshValues);
      if (a.ok() != b.ok() || a.message() != b.message()) std::abort();
      if (a.ok() && (!(kept == fresh) || keptCct.data != freshCct.data || keptCct.count != freshCct.count ||
                     keptValues.message() != freshValues.message()))
        std::abort();
      auto p = parse_profile(in, "fuzz");
      if (!p.ok()) return 0;
      auto bytes = encode_profile(*p);
      if (!bytes.ok()) std::abort();
      auto again = parse_profile(*bytes, "fuzz-reencoded");
      if (!again.ok() || !(*again == *p)) std::abort();
      return 0;
    }
    case FileKind::Trace: {
      auto t = parse_trace(in, "fuzz");
      if (!t.ok()) return 0;
      auto bytes = encode_trace(*t);
      if (!bytes.ok() || bytes->size() != size) std::abort();
      auto again = parse_trace(*bytes, "fuzz-reencoded");
      if (!again.ok() || !(*again == *t)) std::abort();
      return 0;
    }
    case FileKind::Unknown:
      // Still exercise both parsers' rejection paths.
      (void)parse_profile(in, "fuzz");
      (void)parse_trace(in, "fuzz");
      return 0;
  }
  return 0;
}
