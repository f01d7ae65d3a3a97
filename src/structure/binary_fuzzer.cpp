// hpcstruct over damaged binaries: any bytes, as an ELF file, through the whole analysis
// (functions, control flow, loops, lines, inlined code; GPU control flow from the SASS and
// its .nv.info, never nvdisasm) and through the procedure-at-a-time analyzer hpcprof uses
// (each procedure's call sites). An error is an answer; a crash, hang or leak is not.
// Replayed by the test suite over the conformance kit's binaries and testdata/'s cubin.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "structure/structure.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("binary_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  hpc::structure::Options opt;
  opt.gpucfg = true;
  opt.nvdisasm = false;
  std::string warnings;
  (void)hpc::structure::analyze_binary(path, opt, &warnings);
  auto analyzer = hpc::structure::ProcedureAnalyzer::open(path, opt, &warnings);
  if (analyzer.ok())
    for (size_t i = 0; i < std::min<size_t>((*analyzer)->size(), 256); ++i) (void)(*analyzer)->call_sites(i);
  close(fd);
  return 0;
}
