// .hpctrace: a 24-byte magic/version/endian, a flags word (from 01.01 on), then
// fixed-size (time, cct id[, metric id]) records to the end of the file.
#include <cstring>

#include "common/bytes.hpp"
#include "common/file.hpp"
#include "formats/hpcrun/encode.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace hpc::hpcrun {

Expected<Trace> parse_trace(std::span<const uint8_t> bytes, const std::string& name) {
  Trace t;
  HPC_RETURN_IF_ERROR(parse_trace(bytes, name, t));
  return t;
}

Status view_trace(std::span<const uint8_t> bytes, const std::string& name, TraceView& t) {
  return view_trace(bytes, bytes.size(), name, t);
}

Status view_trace(std::span<const uint8_t> bytes, uint64_t size, const std::string& name, TraceView& t) {
  ByteView v(bytes, name);
  t.flags = 0;
  t.count = 0;
  t.trailing = 0;
  t.trailingError = Status();
  HPC_RETURN_IF_ERROR(v.check(0, 24, "the 24-byte trace magic/version/endian"));
  const uint8_t* b = bytes.data();
  if (std::memcmp(b, enc::kTraceMagic, 18) != 0)
    return v.error(0, "expected magic \"HPCRUN-trace______\"");
  t.version.assign(reinterpret_cast<const char*>(b) + 18, 5);
  if (t.version.substr(0, 3) != "01.")
    return v.error(18, "unsupported trace version \"" + t.version + "\"");
  if (b[23] != 'b') return v.error(23, "expected endian marker 'b'");
  uint64_t off = 24;
  if (t.version != "01.00") {
    HPC_ASSIGN_OR_RETURN(t.flags, v.be<uint64_t>(24, "trace flags"));
    off = 32;
  }
  t.stride = (t.flags & kTraceDataCentric) ? 16 : 12;
  if (size < bytes.size() || (size > bytes.size() && bytes.size() < off))
    return Status::error(name + ": internal: the trace's header is not in the bytes given");
  const uint64_t body = size - off;
  t.first = b + off;
  t.count = body / t.stride;  // bounded by the file size, so every record is whole
  t.trailing = body % t.stride;
  if (t.trailing != 0)
    t.trailingError = v.error(size - t.trailing,
                              "expected whole " + std::to_string(t.stride) + "-byte trace records, found " +
                                  std::to_string(t.trailing) + " trailing bytes (truncated file?)");
  return Status();
}

Status parse_trace(std::span<const uint8_t> bytes, const std::string& name, Trace& t) {
  TraceView view;
  t.flags = 0;
  t.records.clear();
  HPC_RETURN_IF_ERROR(view_trace(bytes, name, view));
  HPC_RETURN_IF_ERROR(view.trailingError);
  t.version = std::move(view.version);
  t.flags = view.flags;
  t.records.reserve(view.count);
  for (uint64_t k = 0; k < view.count; ++k) t.records.push_back(view.record(k));
  return Status();
}

Expected<Trace> read_trace(const std::filesystem::path& path) {
  // Read whole into a buffer each thread keeps: no page faults, no unmapping.
  thread_local std::vector<uint8_t> buffer;
  HPC_RETURN_IF_ERROR(read_file_into(path, buffer));
  return parse_trace(buffer, path.string());
}

Expected<std::vector<uint8_t>> encode_trace(const Trace& t) {
  if (t.version.size() != 5 || t.version.substr(0, 3) != "01.")
    return Status::error("cannot encode trace: unsupported version \"" + t.version + "\"");
  if (t.version == "01.00" && t.flags != 0)
    return Status::error("cannot encode trace: version 01.00 has no flags");
  std::vector<uint8_t> out;
  out.reserve(enc::kTraceHeaderSize + t.records.size() * enc::kTraceRecordMax);
  enc::Sink sink{&out, [](void* ctx, const void* p, size_t n) {
                   auto* o = static_cast<std::vector<uint8_t>*>(ctx);
                   auto* c = static_cast<const uint8_t*>(p);
                   o->insert(o->end(), c, c + n);
                   return true;
                 }};
  enc::write_trace_header(sink, t.flags);
  // The encoder writes the current version; keep the model's own version string.
  std::memcpy(out.data() + 18, t.version.data(), 5);
  if (t.version == "01.00") out.resize(24);
  for (auto& r : t.records) enc::write_trace_record(sink, t.flags, {r.time, r.cct_id, r.metric_id});
  return out;
}

Status write_trace(const Trace& t, const std::filesystem::path& path) {
  HPC_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encode_trace(t));
  return write_file_atomically(path, bytes);
}

}  // namespace hpc::hpcrun
