// Structure -> structure file (reference/hpc-structure.dtd), through src/formats.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "formats/structfile/structfile.hpp"
#include "structure/model.hpp"

namespace hpc::structure {

// Writes atomically: a failed run leaves no partial file at `path`.
Status write_structure_file(const Structure& s, const std::string& path);

// One procedure formatted on its own, its ids numbered from 0: procedures can be formatted
// concurrently and in any order, then placed by StructureFileWriter::add_formatted.
struct FormattedProcedure {
  std::string text;
  uint32_t file = 0;      // the <F> it goes in
  uint64_t elements = 0;  // ids it takes
};

// MT: format() is thread-safe.
class ProcedureFormatter {
public:
  ProcedureFormatter(const std::string& binary_path, std::shared_ptr<const DebugInfo> debug, bool gpu);
  Expected<FormattedProcedure> format(const Procedure& p) const;

private:
  Structure shell_;  // names files; holds no procedures
};

// The same file written one procedure at a time, for callers that do not hold them all.
// Procedures of one source file must come together; write_structure_file's order is
// file_order(). MT: externally synchronized.
class StructureFileWriter {
public:
  static Expected<std::unique_ptr<StructureFileWriter>> create(const std::string& path, const std::string& binary_path,
                                                               std::shared_ptr<const DebugInfo> debug, bool gpu,
                                                               bool gpu_cfg = false);
  StructureFileWriter(const StructureFileWriter&) = delete;
  StructureFileWriter& operator=(const StructureFileWriter&) = delete;
  ~StructureFileWriter();
  Status add(const Procedure& p);
  // The same bytes as add() of the procedure `f` was formatted from.
  Status add_formatted(const FormattedProcedure& f);
  // Commits the file; without it nothing appears at `path`.
  Status finish();

private:
  StructureFileWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One procedure as the format library's model, as a structure file would hold it: the load
// module (`shell`'s binary) holding the procedure's file holding the procedure, ids in
// document order from 0. What a reader of the whole file would find of that procedure.
structfile::Scope procedure_model(const Structure& shell, const Procedure& p);

// The reference's order of procedures given each one's file id: files in order of first
// appearance, each file's procedures in their given order. Returns indices into `files`.
std::vector<uint32_t> file_order(const std::vector<uint32_t>& files);

}  // namespace hpc::structure
