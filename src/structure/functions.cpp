#include "structure/functions.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "structure/debug_info.hpp"
#include "structure/elf_image.hpp"

namespace hpc::structure {

std::string address_name(uint64_t addr) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "targ%llx", static_cast<unsigned long long>(addr));
  return buf;
}

namespace {

bool in_plt(const ElfImage& image, uint64_t a) {
  const Section* s = image.section_at(a);
  return !s || s->name.rfind(".plt", 0) == 0;
}

// Unsized procedures reach the next one or the end of their section; sized ones stop there too.
void set_extents(std::vector<FunctionSpec>& fns, const ElfImage& image) {
  for (size_t i = 0; i < fns.size(); ++i) {
    const Section* sec = image.section_at(fns[i].begin);
    uint64_t limit = sec ? sec->addr + sec->size : fns[i].begin + 1;
    if (i + 1 < fns.size() && fns[i + 1].begin < limit) limit = fns[i + 1].begin;
    if (!fns[i].sized || fns[i].end > limit) fns[i].end = limit;
    if (fns[i].end <= fns[i].begin) fns[i].end = fns[i].begin + 1;
  }
}

// Whether some code lies outside every sized procedure (16 bytes or more: less is padding).
bool has_unbounded_code(const std::vector<FunctionSpec>& fns, const ElfImage& image) {
  for (const Section& sec : image.sections()) {
    if (!sec.executable() || sec.size == 0 || in_plt(image, sec.addr) || sec.name == ".init" || sec.name == ".fini")
      continue;
    uint64_t at = sec.addr, end = sec.addr + sec.size;
    auto it = std::lower_bound(fns.begin(), fns.end(), sec.addr,
                               [](const FunctionSpec& f, uint64_t a) { return f.begin < a; });
    for (; it != fns.end() && it->begin < end; ++it) {
      if (!it->sized) continue;
      if (it->begin >= at + 16) return true;
      at = std::max(at, it->end);
    }
    if (end >= at + 16) return true;
  }
  return false;
}

// A stripped program's `_start` and `main`, found from the entry point as the x86-64 ABI's
// start code has them: `xor %ebp,%ebp` first (after an `endbr64`), then main's address put in
// %rdi (`lea main(%rip),%rdi`, or `mov $main,%rdi` in a program not position-independent) for
// the call to __libc_start_main. Without this, `main` showed as "targ11b0" at the top of every
// path of the main thread. Names only procedures known by their address alone.
void name_start_and_main(std::vector<FunctionSpec>& fns, const ElfImage& image) {
  const uint64_t entry = image.entry();
  if (!image.is_x86_64() || entry == 0 || !image.section_at(entry) || in_plt(image, entry)) return;
  auto code = image.code(entry, 64);
  size_t k = 0;
  if (code.size() >= 4 && code[0] == 0xF3 && code[1] == 0x0F && code[2] == 0x1E && code[3] == 0xFA) k = 4;
  if (code.size() < k + 2 || code[k] != 0x31 || code[k + 1] != 0xED) return;
  uint64_t main = 0;
  for (k += 2; k + 7 <= code.size(); ++k) {
    const uint8_t* b = code.data() + k;
    const uint32_t imm = uint32_t(b[3]) | uint32_t(b[4]) << 8 | uint32_t(b[5]) << 16 | uint32_t(b[6]) << 24;
    if (b[0] == 0x48 && b[1] == 0x8D && b[2] == 0x3D) {  // lea disp32(%rip),%rdi
      main = entry + k + 7 + uint64_t(int64_t(int32_t(imm)));
      k += 6;
    } else if (b[0] == 0x48 && b[1] == 0xC7 && b[2] == 0xC7) {  // mov $imm32,%rdi
      main = uint64_t(int64_t(int32_t(imm)));
      k += 6;
    } else if (b[0] == 0xFF && b[1] == 0x15) {  // call *disp32(%rip): __libc_start_main's GOT slot
      break;
    } else if (b[0] == 0xE8 || b[0] == 0xF4) {  // a direct call (through the PLT), or hlt
      break;
    }
  }
  auto name = [&](uint64_t at, const char* what) {
    if (at == 0 || !image.section_at(at) || in_plt(image, at)) return;
    auto it = std::lower_bound(fns.begin(), fns.end(), at, [](const FunctionSpec& f, uint64_t a) { return f.begin < a; });
    if (it != fns.end() && it->begin == at) {
      if (it->name != address_name(at)) return;  // a symbol or DWARF named it
      it->name = it->link_name = what;
      it->mangled = false;
      return;
    }
    if (it != fns.begin() && std::prev(it)->sized && at < std::prev(it)->end) return;  // inside another
    fns.insert(it, FunctionSpec{what, what, at, 0, false, false});
  };
  name(main, "main");
  name(entry, "_start");
}

}  // namespace

void add_called_procedures(std::vector<FunctionSpec>& fns, const ElfImage& image, const CallTargets& calls,
                           const ForEachIndex& each) {
  // With a .symtab, every compiled function has a symbol (static ones and .cold parts too).
  if (fns.empty() || image.section_named(".symtab") || !has_unbounded_code(fns, image)) return;
  auto known = [&](uint64_t t) {
    auto it = std::upper_bound(fns.begin(), fns.end(), t, [](uint64_t a, const FunctionSpec& f) { return a < f.begin; });
    if (it == fns.begin()) return false;
    --it;
    return it->begin == t || (it->sized && t < it->end);
  };
  // Decoding every procedure to find its calls would double the cost of a big stripped
  // library. A direct call is the byte E8 and a 32-bit displacement: only procedures with
  // such a byte pair aiming at unknown code are decoded (every real call is among them).
  std::vector<uint8_t> calls_unknown(fns.size(), 0);
  auto scan = [&](size_t i) {
    if (fns[i].plt) return;
    auto bytes = image.code(fns[i].begin, fns[i].end - fns[i].begin);
    for (size_t k = 0; k + 5 <= bytes.size(); ++k) {
      if (bytes[k] != 0xE8) continue;
      int32_t rel = static_cast<int32_t>(uint32_t(bytes[k + 1]) | uint32_t(bytes[k + 2]) << 8 |
                                         uint32_t(bytes[k + 3]) << 16 | uint32_t(bytes[k + 4]) << 24);
      uint64_t t = fns[i].begin + k + 5 + static_cast<uint64_t>(static_cast<int64_t>(rel));
      if (image.section_at(t) && !in_plt(image, t) && !known(t)) {
        calls_unknown[i] = 1;
        return;
      }
    }
  };
  if (each) each(fns.size(), scan);
  else for (size_t i = 0; i < fns.size(); ++i) scan(i);
  std::vector<size_t> todo;
  for (size_t i = 0; i < fns.size(); ++i)
    if (calls_unknown[i]) todo.push_back(i);
  while (!todo.empty()) {
    std::vector<uint64_t> found;
    for (const auto& targets : calls(fns, todo))
      for (uint64_t t : targets)
        if (image.section_at(t) && !in_plt(image, t) && !known(t)) found.push_back(t);
    std::sort(found.begin(), found.end());
    found.erase(std::unique(found.begin(), found.end()), found.end());
    for (uint64_t t : found) fns.push_back({address_name(t), address_name(t), t, 0, false, false});
    std::sort(fns.begin(), fns.end(), [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin < b.begin; });
    set_extents(fns, image);
    todo.clear();
    for (size_t i = 0; i < fns.size(); ++i)
      if (std::binary_search(found.begin(), found.end(), fns[i].begin)) todo.push_back(i);
  }
}

std::vector<FunctionSpec> discover_functions(const ElfImage& image, const DebugInfo& debug) {
  std::vector<FunctionSpec> fns;
  fns.reserve(image.functions().size());
  for (const auto& s : image.functions())
    fns.push_back({s.name, s.name, s.addr, s.size ? s.addr + s.size : 0, s.plt, false, !s.plt});

  std::sort(fns.begin(), fns.end(), [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin < b.begin; });
  auto covered = [&](uint64_t a) {
    auto it = std::upper_bound(fns.begin(), fns.end(), a, [](uint64_t x, const FunctionSpec& f) { return x < f.begin; });
    if (it == fns.begin()) return false;
    --it;
    return it->begin == a || (it->end && a < it->end);
  };
  auto inPlt = [&](uint64_t a) { return in_plt(image, a); };
  // Recover stripped procedures; each only where no symbol already says something.
  std::vector<FunctionSpec> extra;
  for (const auto& [lo, hi] : image.fde_ranges())
    if (!inPlt(lo) && !covered(lo)) extra.push_back({address_name(lo), address_name(lo), lo, hi, false});
  // DWARF subprograms matter only where stripped symbols leave code without a procedure or
  // an FDE without a name; reading their names costs a pass over all the DIEs.
  auto unbounded = [&] {
    // A copy: for binaries with a .symtab (millions of symbols) it is never made.
    std::vector<FunctionSpec> known = fns;
    known.insert(known.end(), extra.begin(), extra.end());
    std::sort(known.begin(), known.end(), [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin < b.begin; });
    for (auto& f : known) f.sized = f.end != 0;
    return has_unbounded_code(known, image);
  };
  std::vector<const SubprogramInfo*> subs;
  if (image.is_cuda() || !extra.empty() || (!image.section_named(".symtab") && unbounded()))
    subs = debug.all_subprograms();
  for (const SubprogramInfo* sp : subs) {
    uint64_t lo = sp->ranges.front().first, hi = sp->ranges.front().second;
    if (sp->synthetic || inPlt(lo) || covered(lo)) continue;
    bool dup = false;
    for (auto& e : extra)
      if (e.begin == lo) {
        e.name = sp->name;
        e.link_name = sp->link_name.empty() ? sp->name : sp->link_name;
        e.mangled = false;
        dup = true;
      }
    if (!dup) extra.push_back({sp->name, sp->link_name.empty() ? sp->name : sp->link_name, lo, hi, false});
  }
  fns.insert(fns.end(), extra.begin(), extra.end());
  std::sort(fns.begin(), fns.end(), [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin < b.begin; });
  fns.erase(std::unique(fns.begin(), fns.end(),
                        [](const FunctionSpec& a, const FunctionSpec& b) { return a.begin == b.begin; }),
            fns.end());

  for (auto& f : fns) f.sized = f.end != 0;
  name_start_and_main(fns, image);
  set_extents(fns, image);
  return fns;
}

Expected<ProcedureTable> ProcedureTable::make(const std::vector<FunctionSpec>& fns) {
  ProcedureTable t;
  size_t bytes = 0;
  for (const auto& f : fns)
    bytes += 1 + f.name.size() + 1 + (f.link_name != f.name ? f.link_name.size() + 1 : 0) +
             (f.end - f.begin >= kLong ? 8 : 0);
  if (bytes > UINT32_MAX) return Status::error("more than 4 GiB of procedure names");
  t.entries_.reserve(fns.size());
  t.names_.reserve(bytes);
  auto put = [&](std::string_view s) {
    t.names_.insert(t.names_.end(), s.begin(), s.end());
    t.names_.push_back('\0');
  };
  for (const auto& f : fns) {
    uint64_t length = f.end - f.begin;
    t.entries_.push_back({f.begin, length >= kLong ? kLong : static_cast<uint32_t>(length),
                          static_cast<uint32_t>(t.names_.size())});
    bool ownLink = f.link_name != f.name;
    t.names_.push_back(static_cast<char>((f.plt ? kPlt : 0) | (f.sized ? kSized : 0) | (f.mangled ? kMangled : 0) |
                                         (ownLink ? kOwnLink : 0)));
    put(f.name);
    if (ownLink) put(f.link_name);
    if (length >= kLong) {
      char end[8];
      std::memcpy(end, &f.end, 8);
      t.names_.insert(t.names_.end(), end, end + 8);
    }
  }
  return t;
}

uint64_t ProcedureTable::end(size_t i) const {
  const Entry& e = entries_[i];
  if (e.length != kLong) return e.begin + e.length;
  const char* p = names_.data() + e.record;
  uint8_t flags = static_cast<uint8_t>(*p++);
  p += std::strlen(p) + 1;
  if (flags & kOwnLink) p += std::strlen(p) + 1;
  uint64_t end = 0;
  std::memcpy(&end, p, 8);
  return end;
}

FunctionSpec ProcedureTable::at(size_t i) const {
  const Entry& e = entries_[i];
  const char* p = names_.data() + e.record;
  auto flags = static_cast<uint8_t>(*p++);
  FunctionSpec f;
  f.name = p;
  f.link_name = flags & kOwnLink ? std::string(p + f.name.size() + 1) : f.name;
  f.begin = e.begin;
  f.end = end(i);
  f.plt = flags & kPlt;
  f.sized = flags & kSized;
  f.mangled = flags & kMangled;
  return f;
}

}  // namespace hpc::structure
