#include "structure/functions.hpp"

#include <algorithm>
#include <cstdio>

#include "structure/debug_info.hpp"
#include "structure/elf_image.hpp"

namespace hpc::structure {

std::string address_name(uint64_t addr) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "targ%llx", static_cast<unsigned long long>(addr));
  return buf;
}

std::vector<FunctionSpec> discover_functions(const ElfImage& image, const DebugInfo& debug) {
  std::vector<FunctionSpec> fns;
  for (const auto& s : image.functions())
    fns.push_back({s.plt ? s.name : demangle(s.name), s.name, s.addr, s.size ? s.addr + s.size : 0, s.plt});

  std::sort(fns.begin(), fns.end(), [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin < b.begin; });
  auto covered = [&](uint64_t a) {
    auto it = std::upper_bound(fns.begin(), fns.end(), a, [](uint64_t x, const FunctionSpec& f) { return x < f.begin; });
    if (it == fns.begin()) return false;
    --it;
    return it->begin == a || (it->end && a < it->end);
  };
  auto inPlt = [&](uint64_t a) {
    const Section* s = image.section_at(a);
    return !s || s->name.rfind(".plt", 0) == 0;
  };
  // Recover stripped procedures; each only where no symbol already says something.
  std::vector<FunctionSpec> extra;
  for (const auto& [lo, hi] : image.fde_ranges())
    if (!inPlt(lo) && !covered(lo)) extra.push_back({address_name(lo), address_name(lo), lo, hi, false});
  auto subs = debug.subprograms_in(0, UINT64_MAX);
  for (const SubprogramInfo* sp : subs) {
    uint64_t lo = sp->ranges.front().first, hi = sp->ranges.front().second;
    if (sp->synthetic || inPlt(lo) || covered(lo)) continue;
    bool dup = false;
    for (auto& e : extra)
      if (e.begin == lo) {
        e.name = sp->name;
        e.link_name = sp->link_name.empty() ? sp->name : sp->link_name;
        dup = true;
      }
    if (!dup) extra.push_back({sp->name, sp->link_name.empty() ? sp->name : sp->link_name, lo, hi, false});
  }
  fns.insert(fns.end(), extra.begin(), extra.end());
  std::sort(fns.begin(), fns.end(), [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin < b.begin; });
  fns.erase(std::unique(fns.begin(), fns.end(),
                        [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin == b.begin; }),
            fns.end());

  for (size_t i = 0; i < fns.size(); ++i) {
    const Section* sec = image.section_at(fns[i].begin);
    uint64_t limit = sec ? sec->addr + sec->size : fns[i].begin + 1;
    if (i + 1 < fns.size() && fns[i + 1].begin < limit) limit = fns[i + 1].begin;
    if (fns[i].end == 0 || fns[i].end > limit) fns[i].end = limit;
    if (fns[i].end <= fns[i].begin) fns[i].end = fns[i].begin + 1;
  }
  return fns;
}

}  // namespace hpc::structure
