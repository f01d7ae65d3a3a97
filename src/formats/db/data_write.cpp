// profile.db, cct.db and trace.db v4 writers, whole-file (in memory).
// Layouts: header, info section, (profile.db: id tuples), value blocks, footer.
#include "formats/db/data_block.hpp"
#include "formats/db/internal.hpp"

namespace hpc::db {

std::vector<uint8_t> write_profile_db(std::span<const Profile> profiles) {
  ByteWriter w;
  detail::begin_file(w, "prof", 2);
  size_t info = w.size();
  w.zeros(0x10 + 0x30 * profiles.size());
  w.patch_le<uint64_t>(info, profiles.empty() ? 0 : info + 0x10);
  w.patch_le<uint32_t>(info + 8, uint32_t(profiles.size()));
  w.patch_le<uint8_t>(info + 0xc, 0x30);
  detail::set_section(w, 0, info, w.size() - info);
  size_t tuples = w.size();
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (!profiles[i].idTuple) continue;
    w.patch_le<uint64_t>(info + 0x10 + 0x30 * i + 0x20, w.size());
    detail::put_id_tuple(w, *profiles[i].idTuple);
  }
  detail::set_section(w, 1, tuples, w.size() - tuples);
  for (size_t i = 0; i < profiles.size(); ++i) {
    size_t a = info + 0x10 + 0x30 * i;
    w.align(8);
    detail::BlockPtrs b = detail::put_block(w, profiles[i].values, 4, w.size());
    detail::patch_block_header(w, a, b, profiles[i].values.size(), profiles[i].values.key.size());
    w.patch_le<uint32_t>(a + 0x28, profiles[i].flags);
  }
  w.align(8);
  w.str("_prof.db");
  return std::move(w.buffer());
}

std::vector<uint8_t> write_cct_db(std::span<const ContextValues> contexts) {
  ByteWriter w;
  detail::begin_file(w, "ctxt", 1);
  size_t info = w.size();
  w.zeros(0x10 + 0x20 * contexts.size());
  w.patch_le<uint64_t>(info, contexts.empty() ? 0 : info + 0x10);
  w.patch_le<uint32_t>(info + 8, uint32_t(contexts.size()));
  w.patch_le<uint8_t>(info + 0xc, 0x20);
  detail::set_section(w, 0, info, w.size() - info);
  for (size_t i = 0; i < contexts.size(); ++i) {
    w.align(8);
    detail::BlockPtrs b = detail::put_block(w, contexts[i], 2, w.size());
    detail::patch_block_header(w, info + 0x10 + 0x20 * i, b, contexts[i].size(), contexts[i].key.size());
  }
  w.align(8);
  w.str("__ctx.db");
  return std::move(w.buffer());
}

std::vector<uint8_t> write_trace_db(const TraceDb& t) {
  ByteWriter w;
  detail::begin_file(w, "trce", 1);
  size_t sec = w.size();
  w.zeros(0x20 + 0x18 * t.traces.size());
  w.patch_le<uint64_t>(sec, t.traces.empty() ? 0 : sec + 0x20);
  w.patch_le<uint32_t>(sec + 8, uint32_t(t.traces.size()));
  w.patch_le<uint8_t>(sec + 0xc, 0x18);
  w.patch_le<uint64_t>(sec + 0x10, t.minTimestamp);
  w.patch_le<uint64_t>(sec + 0x18, t.maxTimestamp);
  detail::set_section(w, 0, sec, w.size() - sec);
  for (size_t i = 0; i < t.traces.size(); ++i) {
    size_t a = sec + 0x20 + 0x18 * i;
    w.align(8);
    w.patch_le<uint32_t>(a, t.traces[i].profIndex);
    w.patch_le<uint64_t>(a + 8, w.size());
    for (auto& e : t.traces[i].line) {
      w.le<uint64_t>(e.timestamp);
      w.le<uint32_t>(e.ctxId);
    }
    w.patch_le<uint64_t>(a + 0x10, w.size());
  }
  w.align(8);
  w.str("trace.db");
  return std::move(w.buffer());
}

}  // namespace hpc::db
