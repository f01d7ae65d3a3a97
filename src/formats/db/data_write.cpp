// profile.db, cct.db and trace.db v4 writers, whole-file (in memory).
// Layouts: header, info section, (profile.db: id tuples), value blocks, footer.
#include "formats/db/internal.hpp"
#include "formats/db/regions.hpp"

namespace hpc::db {

namespace {

uint64_t align8(uint64_t n) { return (n + 7) / 8 * 8; }

// header bytes (8-aligned length), then the region, then the footer.
std::vector<uint8_t> assemble(std::vector<uint8_t> head, Region& body, std::string_view footer) {
  head.resize(align8(head.size()));
  auto b = body.bytes();
  head.insert(head.end(), b.begin(), b.end());
  head.insert(head.end(), footer.begin(), footer.end());
  return head;
}

}  // namespace

// The whole-file writers place the same pieces as the streaming and per-rank writers
// (regions.hpp), all at once.
std::vector<uint8_t> write_profile_db(std::span<const Profile> profiles) {
  std::vector<ProfileInfo> infos(profiles.size());
  Region body;
  for (size_t i = 0; i < profiles.size(); ++i) {
    infos[i].flags = profiles[i].flags;
    infos[i].idTuple = profiles[i].idTuple;
    infos[i].block = body.add(profiles[i].values);
  }
  uint64_t tuplesAt = profile_db_header_size(uint32_t(profiles.size()));
  std::vector<uint8_t> tuples = profile_db_tuples(infos);
  uint64_t origin = align8(tuplesAt + tuples.size());
  for (ProfileInfo& i : infos) i.block = at(i.block, origin);
  std::vector<uint8_t> head = profile_db_header(infos, tuplesAt);
  head.insert(head.end(), tuples.begin(), tuples.end());
  return assemble(std::move(head), body, kProfileDbFooter);
}

std::vector<uint8_t> write_cct_db(std::span<const ContextValues> contexts) {
  std::vector<BlockRef> refs;
  Region body;
  for (const ContextValues& c : contexts) refs.push_back(body.add(c));
  uint64_t origin = cct_db_header_size(uint32_t(contexts.size()));
  for (BlockRef& r : refs) r = at(r, origin);
  return assemble(cct_db_header(refs), body, kCctDbFooter);
}

std::vector<uint8_t> write_trace_db(const TraceDb& t) {
  std::vector<TraceRef> refs;
  Region body;
  for (const Trace& tr : t.traces) refs.push_back(body.add(tr.profIndex, tr.line));
  uint64_t origin = trace_db_header_size(uint32_t(t.traces.size()));
  for (TraceRef& r : refs) r = at(r, origin);
  return assemble(trace_db_header(refs, t.minTimestamp, t.maxTimestamp), body, kTraceDbFooter);
}

}  // namespace hpc::db
