#include "symbolize.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

namespace hpc::measurement::test {

namespace {
void load(const std::string& path, std::map<uint64_t, std::string>& starts, std::map<uint64_t, uint64_t>& ends) {
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  for (int pass = 0; pass < 2 && starts.empty(); ++pass) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn))) {
      GElf_Shdr sh;
      gelf_getshdr(scn, &sh);
      if (sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM)) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
      for (size_t i = 0; i < n; ++i) {
        GElf_Sym sym;
        gelf_getsym(data, int(i), &sym);
        if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0) continue;
        const char* nm = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (!nm) continue;
        starts.emplace(sym.st_value, nm);
        ends[sym.st_value] = std::max(ends[sym.st_value], sym.st_value + std::max<uint64_t>(sym.st_size, 1));
      }
    }
  }
  elf_end(elf);
  close(fd);
}
}  // namespace

const std::string& Symbolizer::name(const std::string& module, uint64_t offset) {
  static const std::string none;
  auto it = modules_.find(module);
  if (it == modules_.end()) {
    std::map<uint64_t, std::string> starts;
    std::map<uint64_t, uint64_t> ends;
    load(module, starts, ends);
    std::map<uint64_t, Fn> fns;
    for (auto& [a, n] : starts) fns[a] = Fn{ends[a], n};
    it = modules_.emplace(module, std::move(fns)).first;
  }
  auto& fns = it->second;
  auto f = fns.upper_bound(offset);
  if (f == fns.begin()) return none;
  --f;
  return offset < f->second.end ? f->second.name : none;
}

}  // namespace hpc::measurement::test
