// Fuzz target: any bytes through all four readers, and through the viewer's lazy readers of
// profile.db, cct.db and trace.db (over a mapping of the bytes, then a few lookups each);
// errors are fine, crashes are not.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/db/db.hpp"
#include "formats/db/lazy.hpp"

namespace {

void lazy_readers(const uint8_t* data, size_t size) {
  const int fd = memfd_create("db_fuzzer", 0);
  if (fd < 0) return;
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (auto p = hpc::db::LazyProfileDb::open(path); p.ok()) {
    for (uint32_t prof = 0; prof < p->profiles().size() && prof < 4; ++prof) {
      (void)p->values(prof);
      for (uint32_t ctx : {0u, 1u, 2u, 7u, 64u, 1000u, UINT32_MAX})
        for (uint16_t m : {uint16_t(0), uint16_t(1), uint16_t(0xffff)}) (void)p->value(prof, ctx, m);
    }
    p->release();
  }
  if (auto c = hpc::db::LazyCctDb::open(path); c.ok()) {
    for (uint32_t ctx = 0; ctx < c->size() && ctx < 64; ++ctx) (void)c->values(ctx);
    (void)c->values(UINT32_MAX);
  }
  if (auto t = hpc::db::LazyTraceDb::open(path); t.ok()) {
    for (size_t i = 0; i < t->size() && i < 4; ++i) {
      const auto& line = t->line(i);
      uint64_t at = 0;
      for (uint64_t time : {t->minTimestamp(), (t->minTimestamp() + t->maxTimestamp()) / 2, t->maxTimestamp(), UINT64_MAX})
        if (line.size()) {
          at = line.last_at_or_before(time, at < line.size() ? at : 0);
          if (at < line.size()) (void)line.ctx(at);
        }
    }
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hpc::ByteView v({data, size}, "fuzz.db");
  (void)hpc::db::read_meta(v);
  (void)hpc::db::read_profile_db(v);
  (void)hpc::db::read_cct_db(v);
  (void)hpc::db::read_trace_db(v);
  lazy_readers(data, size);
  return 0;
}
