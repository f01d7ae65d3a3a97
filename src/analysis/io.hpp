// The analysis' edge to src/formats: opening profiles, loading structure files and
// creating the database writer. Implemented by the adapters beside this header.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analysis/input.hpp"
#include "analysis/sink.hpp"

namespace hpc::structfile {
class AddressIndex;
struct Scope;
}

namespace hpc::analysis {

// A .hpcrun profile and, when present, its .hpctrace companion.
std::unique_ptr<ProfileSource> openHpcrunProfile(const std::filesystem::path& profile,
                                                 const std::filesystem::path& trace);

// Loads the structure files (.hpcstruct), keyed by the load-module path they describe: each
// checked whole now (errors name the file), its procedures parsed when first looked up or
// prepared (a damaged file is refused here; one changed on disk since costs the structure
// of what is read from it afterwards, with a warning). A
// measured module is found at its path or, failing that, at its path as -R rewrites it
// (`replace`); one that a structure file describes under another directory (the same file
// name) is named once in a warning with the -R that would match it.
Expected<std::unique_ptr<StructureSource>> loadStructure(
    const std::vector<std::filesystem::path>& files, unsigned threads,
    std::vector<PathReplacement> replace = {});

// The nesting of `offset` in a structure file's load module (`index` over it), outermost
// first, as a StructureSource gives it; an inline site's identity is its element's id plus
// `siteBase`. False where no statement holds `offset`.
bool structureSteps(const structfile::AddressIndex& index, uint64_t offset, std::vector<ScopeStep>& out,
                    uint64_t siteBase = 0);
// Appends the call sites with a target (C elements' t) found in `scope` and below it: each
// with the entry of the procedure (P) it lies in.
void appendCallSites(const structfile::Scope& scope, std::vector<CallSite>& out);

// Adds function names from the ELF symbol tables of binaries kept in the measurement
// directories (the vdso copies under vdso/) for modules that `structs` does not cover.
// `structs` may be null.
std::unique_ptr<StructureSource> withMeasuredSymbols(std::unique_ptr<StructureSource> structs,
                                                     std::vector<std::filesystem::path> measurementDirs);

// Adds structure analysed from the measured binaries (as hpcstruct would) for modules that
// `structs` does not cover; each binary is read at most once, on first use, with its path
// rewritten by the first matching replacement. `structs` may be null. measuredUntilNs: when
// the measurement ended (Inputs::measuredUntilNs; 0: unknown): a binary modified since gets
// a warning, its addresses being the old build's.
std::unique_ptr<StructureSource> withMeasuredBinaries(std::unique_ptr<StructureSource> structs,
                                                      std::vector<PathReplacement> replace,
                                                      int64_t measuredUntilNs = 0);
// What withMeasuredBinaries analysed so far: binaries opened, their procedures, those
// analysed and the CPU seconds the analyses took (all threads). MT: thread-safe.
struct BinaryAnalysis {
  size_t binaries = 0, procedures = 0, analysed = 0;
  double seconds = 0;
};
BinaryAnalysis binaryAnalysis();

// Warnings about measured binaries (not on this machine, no structure from one, a structure
// file for one under another directory), one line each, kept until the run is done:
// hpcprof prints them, hpcprof-mpi prints every rank's once. MT: thread-safe.
void addBinaryWarning(std::string line);
std::vector<std::string> takeBinaryWarnings();
// The lines to print: binaries not found here a line each where there are at most 4, else
// one line that counts them, names 3 and the directories they were in.
std::vector<std::string> summarizeBinaryWarnings(const std::vector<std::string>& lines);

// Whether a database may be renamed into place at `target` (nothing there, an empty
// directory or a database: db::check_replaceable), checked before any work.
Status checkDatabaseTarget(const std::filesystem::path& target);
// Writes a database v4 into `directory` (created; the caller renames it into place).
Expected<std::unique_ptr<DatabaseSink>> createDatabase(const std::filesystem::path& directory);
// meta.db and metrics/default.yaml into `directory` (what DatabaseSink::finish adds).
Status writeMeta(const std::filesystem::path& directory, const MetaInput& meta);

// What the command line names: measurement directories or single profiles.
struct Inputs {
  std::vector<std::filesystem::path> profiles;  // sorted, one per thread/stream
  std::vector<std::filesystem::path> traces;    // parallel to profiles; empty if none
  std::vector<std::filesystem::path> structs;   // from <measurements>/structs/
  // Measurements named again (the same directory, a profile twice, or a profile in a
  // directory also named), left out: each profile is analysed once.
  std::vector<std::filesystem::path> repeated;
  // When the measurement ended, as far as its files tell (ns since the epoch; 0: unknown):
  // the latest modification of a process's log (written as each process ends), else of a
  // profile.
  int64_t measuredUntilNs = 0;
};
Expected<Inputs> discoverInputs(const std::vector<std::filesystem::path>& measurements,
                                bool ignoreStructs);

}  // namespace hpc::analysis
