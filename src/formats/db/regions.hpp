// The pieces profile.db, cct.db and trace.db are assembled from, for writers that place
// file regions themselves: hpcprof-mpi, where every process encodes its own rows into a
// region whose offset is agreed with the others, and one process writes the headers.
// The streaming writers of db.hpp use the same pieces, so both produce the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "formats/db/db.hpp"

namespace hpc::db {

// A {PSVB}/{CSVB} value block in its file: nKeys contexts (profile.db) or metrics (cct.db).
// Null pointers for an empty block.
struct BlockRef {
  uint64_t nValues = 0, nKeys = 0, pValues = 0, pIdx = 0;
};
// One {TH} trace header: the line of profile profIndex is [pStart, pEnd).
struct TraceRef {
  uint32_t profIndex = 0;
  uint64_t pStart = 0, pEnd = 0;
};

// Blocks and trace lines laid out one after another, each 8-aligned, from an origin whose
// file offset is not known yet (it must be 8-aligned). References are relative to the
// origin until moved with at().
class Region {
public:
  BlockRef add(const ProfileValues& v);
  BlockRef add(const ContextValues& v);
  TraceRef add(uint32_t profIndex, std::span<const TraceElem> line);
  // Appends another region (its references move by the returned offset).
  uint64_t append(const Region& other);
  // The bytes, padded to a multiple of 8 (where the next region may begin).
  std::span<const uint8_t> bytes();
  uint64_t size() const { return (w_.size() + 7) / 8 * 8; }

private:
  ByteWriter w_;
};
BlockRef at(BlockRef r, uint64_t origin);
TraceRef at(TraceRef r, uint64_t origin);

// Where the first region after a file's header (and so the first block) begins.
uint64_t profile_db_header_size(uint32_t numProfiles);
uint64_t cct_db_header_size(uint32_t numContexts);
uint64_t trace_db_header_size(uint32_t numTraces);

inline constexpr std::string_view kProfileDbFooter = "_prof.db";
inline constexpr std::string_view kCctDbFooter = "__ctx.db";
inline constexpr std::string_view kTraceDbFooter = "trace.db";

struct ProfileInfo {
  BlockRef block;
  uint32_t flags = 0;                              // bit 0: isSummary
  std::optional<std::vector<Identifier>> idTuple;  // absent: pIdTuple == 0
};
// The identifier-tuple section, to be placed at tuplesAt (8-aligned), and the header that
// points at it and at every profile's block. The header goes at offset 0.
std::vector<uint8_t> profile_db_tuples(std::span<const ProfileInfo> infos);
std::vector<uint8_t> profile_db_header(std::span<const ProfileInfo> infos, uint64_t tuplesAt);
std::vector<uint8_t> cct_db_header(std::span<const BlockRef> contexts);
std::vector<uint8_t> trace_db_header(std::span<const TraceRef> traces, uint64_t minTime,
                                     uint64_t maxTime);

// Reads the part of a profile.db block with ctxId in [lo, hi) through `read` (file
// offset, bytes to fill): the context index, then only the values of that range.
using ReadAt = std::function<Status(uint64_t offset, std::span<uint8_t> into)>;
Status read_profile_block(const ReadAt& read, const BlockRef& block, uint32_t lo, uint32_t hi,
                          ProfileValues& out);

// Where reading one block in ascending context ranges stopped: a range starting where the
// last one ended goes on from there, reading only its own part of the index (a transpose
// in many rounds then reads each index entry about once, not once a round).
struct RowCursor {
  bool valid = false;
  uint32_t hi = 0;   // the end of the last range read
  uint64_t key = 0;  // the block's first index entry with ctxId >= hi
  uint64_t last = 0;  // how many entries the last range had (the next is read about as many)
};
Status read_profile_block(const ReadAt& read, const BlockRef& block, uint32_t lo, uint32_t hi,
                          ProfileValues& out, RowCursor& cursor);

}  // namespace hpc::db
