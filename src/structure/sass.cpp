// SASS control flow (sass.hpp). The fields read, by encoding:
//  sm_70-sm_90, 16 bytes (two little-endian words lo, hi): the opcode in lo bits
//    0-11, the guard predicate in bits 12-15 (7: PT, always; bit 3 negates), a branch's own
//    predicate operand in bits 87-90 (hi bits 23-26, 7: PT), a branch's or relative call's
//    offset from the next instruction as a signed 50-bit field in bits 32-81 (also BSSY's,
//    where its BSYNC's threads meet again: a label, so a block), in 4-byte words from bit 34
//    up to sm_89 (bits 32-33: modifiers, bit 32 BRA.U's); on sm_90 BRA's and CALL.REL's
//    field counts 256 bytes, and bits 16-23 the 4-byte words beyond (BSSY's counts bytes).
//  sm_50-sm_62, 8 bytes, a control word at every 32-byte boundary of the function: the
//    opcode in bits 52-63 (SYNC: bits 48-63), the guard predicate of branches and exits in
//    bits 16-19, their condition code test in bits 0-4 (15: always), a signed 24-bit offset
//    from the next instruction in bits 20-43 (branches, relative calls, and the SSY, PBK and
//    PCNT that set where SYNC, BRK and CONT go).
// An indirect branch's targets come from the cubin's .nv.info.<function> section
// (nv_info_indirect_targets), whose EIATTR_INDIRECT_BRANCH_TARGETS record lists them.
// Checked against the reference's structure for the conformance kit's sm_62 and sm_75 cubins
// and its measurements' sm_80 one, and against CUDA 13.0's nvdisasm graph of sm_90 code
// (structure_test.cpp, tests/hpcstruct_cli_test.sh), sm_86's branches, exit and calls
// against cuobjdump's listing of real sm_86 code, and sm_90's branches, BSSY, relative calls,
// RET and a switch's BRX against cuobjdump's listing of real sm_90 code
// (testdata/sass_sm90_call_switch.tsv); sm_89 shares sm_80's and sm_86's encoding.
#include "structure/sass.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "structure/elf_image.hpp"

namespace hpc::structure {
namespace {

enum class Flow : uint8_t {
  Other,
  Branch,    // direct: BRA
  Indirect,  // BRX, JMP, JMX: to the targets listed for it, if any
  Exit,      // EXIT, RET, KIL
  Bpt,       // ends a block, falls through
  Sync,      // to the last SSY's target
  Brk,       // to the last PBK's target
  Cont,      // to the last PCNT's target
  Ssy,
  Pbk,
  Pcnt,
  Bssy,      // sm_70 and later: where its BSYNC's threads meet again (a label, so a block)
  CallRel,
  CallAbs,
};

struct Inst {
  uint64_t addr = 0;
  Flow flow = Flow::Other;
  bool conditional = false;  // may not be taken (guarded, or a condition other than always)
  uint64_t target = 0;       // Branch, Ssy, Pbk, Pcnt, CallRel
};

int64_t sign_extend(uint64_t v, unsigned bits) {
  const uint64_t m = uint64_t(1) << (bits - 1);
  v &= (m << 1) - 1;
  return static_cast<int64_t>((v ^ m) - m);
}

bool ends_block(Flow f) {
  return f == Flow::Branch || f == Flow::Indirect || f == Flow::Exit || f == Flow::Bpt || f == Flow::Sync ||
         f == Flow::Brk || f == Flow::Cont;
}

Inst decode_wide(uint64_t lo, uint64_t hi, uint64_t addr, bool hopper) {
  Inst in;
  in.addr = addr;
  const uint64_t next = addr + 16;
  const int64_t field = sign_extend((lo >> 32) | ((hi & 0x3ffff) << 32), 50);
  // sm_70-sm_89: the offset counts 4-byte words from bit 34; bits 32-33 are the branch's
  // modifiers (bit 32: BRA.U, a uniform branch: 0x131 for an offset of 0x130).
  const int64_t rel = hopper ? field : field & ~int64_t(3);
  // sm_90's BRA and CALL.REL: the field counts 256 bytes, bits 16-23 the 4-byte words beyond.
  const int64_t bra = hopper ? field * 256 + int64_t(((lo >> 16) & 0xff) << 2) : rel;
  switch (lo & 0xfff) {
    case 0x947: in.flow = Flow::Branch, in.target = next + bra; break;    // BRA
    case 0x949: case 0x94a: case 0x94c: in.flow = Flow::Indirect; break;  // BRX, JMP, JMX
    case 0x94d: case 0x950: case 0x94f: in.flow = Flow::Exit; break;      // EXIT, RET, RTT
    case 0x95c: in.flow = Flow::Bpt; break;                               // BPT
    case 0x945: in.flow = Flow::Bssy, in.target = next + rel; break;      // BSSY
    case 0x944: in.flow = Flow::CallRel, in.target = next + bra; break;  // CALL.REL
    case 0x943: in.flow = Flow::CallAbs; break;                           // CALL.ABS
    default: break;
  }
  const unsigned guard = (lo >> 12) & 0xf, own = (hi >> 23) & 0xf;
  in.conditional = guard != 7 || (in.flow == Flow::Branch && own != 7);
  return in;
}

Inst decode_narrow(uint64_t w, uint64_t addr) {
  Inst in;
  in.addr = addr;
  const uint64_t next = addr + 8;
  const int64_t rel = sign_extend(w >> 20, 24);
  bool guarded = false;  // the guard and condition fields mean that for this instruction
  switch (w >> 52) {
    case 0xe24: in.flow = Flow::Branch, in.target = next + rel, guarded = true; break;  // BRA
    case 0xe25: case 0xe21: case 0xe20: in.flow = Flow::Indirect, guarded = true; break;  // BRX, JMP, JMX
    case 0xe30: case 0xe32: case 0xe33: in.flow = Flow::Exit, guarded = true; break;  // EXIT, RET, KIL
    case 0xe34: in.flow = Flow::Brk, guarded = true; break;
    case 0xe35: in.flow = Flow::Cont, guarded = true; break;
    case 0xe3a: in.flow = Flow::Bpt; break;
    case 0xe29: in.flow = Flow::Ssy, in.target = next + rel; break;
    case 0xe2a: in.flow = Flow::Pbk, in.target = next + rel; break;
    case 0xe2b: in.flow = Flow::Pcnt, in.target = next + rel; break;
    case 0xe26: in.flow = Flow::CallRel, in.target = next + rel; break;  // CAL
    case 0xe22: in.flow = Flow::CallAbs; break;                          // JCAL
    default:
      if ((w >> 48) == 0xf0f8) in.flow = Flow::Sync, guarded = true;  // SYNC (-G code: @P0 SYNC)
      break;
  }
  const bool always = (w & 0x1f) == 0xf;
  in.conditional = guarded && (((w >> 16) & 0xf) != 7 || (in.flow != Flow::Indirect && !always));
  return in;
}

}  // namespace

unsigned cuda_sm_of_flags(uint32_t e_flags) {
  const unsigned low = e_flags & 0xff, mid = (e_flags >> 8) & 0xff;
  if (low >= 20) return low;  // EF_CUDA_SM of CUDA 12.x and older (sm_20 the first)
  return mid;
}

bool sass_decodable(unsigned sm) { return (sm >= 50 && sm <= 62) || (sm >= 70 && sm <= 90); }

std::map<uint64_t, std::vector<uint64_t>> nv_info_indirect_targets(std::span<const uint8_t> info,
                                                                   uint64_t code_addr, uint64_t code_size) {
  std::map<uint64_t, std::vector<uint64_t>> out;
  auto u16 = [&](size_t at) { return uint32_t(info[at]) | uint32_t(info[at + 1]) << 8; };
  auto u32 = [&](size_t at) { return u16(at) | u16(at + 2) << 16; };
  // Each attribute: a format byte, an attribute byte, then by format nothing (1), a 16-bit
  // value (3), or a 16-bit size and that many bytes (4).
  size_t at = 0;
  while (at + 2 <= info.size()) {
    const uint8_t format = info[at], attr = info[at + 1];
    if (format == 1) {
      at += 2;
      continue;
    }
    if (format != 3 && format != 4) break;
    if (at + 4 > info.size()) break;
    if (format == 3) {
      at += 4;
      continue;
    }
    const size_t size = u16(at + 2), value = at + 4;
    if (value + size > info.size()) break;
    at = value + size;
    if (attr != 0x34) continue;
    for (size_t r = value; r + 12 <= value + size;) {
      const uint64_t branch = u32(r), n = u32(r + 8);
      r += 12;
      if (n > (value + size - r) / 4) break;
      std::vector<uint64_t> targets;
      bool inside = branch < code_size;
      for (uint64_t k = 0; k < n; ++k, r += 4) {
        const uint64_t t = u32(r);
        inside = inside && t < code_size;
        targets.push_back(code_addr + t);
      }
      if (inside) {
        auto& to = out[code_addr + branch];
        to.insert(to.end(), targets.begin(), targets.end());
      }
    }
  }
  return out;
}

std::map<uint64_t, std::vector<uint64_t>> cuda_indirect_branch_targets(const ElfImage& image) {
  std::map<uint64_t, std::vector<uint64_t>> out;
  const auto& secs = image.sections();
  const auto bytes = image.file_bytes();
  for (const Section& s : secs) {
    if (!s.name.starts_with(".nv.info.") || s.info == 0 || s.info > secs.size()) continue;
    const Section& code = secs[s.info - 1];
    if (!code.executable() || s.type == 8 /* SHT_NOBITS */ || s.offset > bytes.size() ||
        s.size > bytes.size() - s.offset)
      continue;
    for (auto& [branch, to] : nv_info_indirect_targets(bytes.subspan(s.offset, s.size), code.addr, code.size)) {
      auto& all = out[branch];
      all.insert(all.end(), to.begin(), to.end());
    }
  }
  return out;
}

std::optional<Cfg> cfg_from_sass(std::span<const uint8_t> code, uint64_t begin, unsigned sm,
                                 const RelocTarget& reloc_target, const IndirectTargets& indirect) {
  if (!sass_decodable(sm)) return std::nullopt;
  const bool narrow = sm < 70;
  const uint64_t size = narrow ? 8 : 16;
  std::vector<Inst> insts;
  insts.reserve(code.size() / size);
  for (uint64_t off = 0; off + size <= code.size(); off += size) {
    if (narrow && (begin + off) % 32 == 0) continue;  // the control word of the next three
    uint64_t w[2] = {0, 0};
    std::memcpy(w, code.data() + off, size);
    insts.push_back(narrow ? decode_narrow(w[0], begin + off) : decode_wide(w[0], w[1], begin + off, sm >= 90));
  }
  Cfg cfg;
  if (insts.empty()) return cfg;
  // A branch to a control word goes to the instruction after it (a call's target stays the
  // callee's address, which is its first control word).
  if (narrow)
    for (Inst& in : insts)
      if ((in.flow == Flow::Branch || in.flow == Flow::Ssy || in.flow == Flow::Pbk || in.flow == Flow::Pcnt) &&
          in.target % 32 == 0)
        in.target += 8;
  auto index_of = [&](uint64_t addr) -> int64_t {
    auto it = std::lower_bound(insts.begin(), insts.end(), addr, [](const Inst& i, uint64_t a) { return i.addr < a; });
    return it != insts.end() && it->addr == addr ? it - insts.begin() : -1;
  };
  auto targets_of = [&](const Inst& in) {
    return in.flow == Flow::Indirect && indirect ? indirect(in.addr) : std::span<const uint64_t>();
  };
  auto landing = [&](uint64_t to) { return narrow && to % 32 == 0 ? to + 8 : to; };  // as above
  // Blocks begin at the entry, after every instruction that ends one and at every place
  // control is sent to.
  std::vector<uint8_t> leader(insts.size(), 0);
  leader[0] = 1;
  for (size_t i = 0; i < insts.size(); ++i) {
    const Inst& in = insts[i];
    if (ends_block(in.flow) && i + 1 < insts.size()) leader[i + 1] = 1;
    if (in.flow == Flow::Branch || in.flow == Flow::Ssy || in.flow == Flow::Pbk || in.flow == Flow::Pcnt ||
        in.flow == Flow::Bssy)
      if (int64_t t = index_of(in.target); t >= 0) leader[t] = 1;
    for (uint64_t to : targets_of(in))
      if (int64_t t = index_of(landing(to)); t >= 0) leader[t] = 1;
  }
  // A control word belongs to the block of the instruction after it (the reference's blocks
  // hold the control word before their first instruction).
  std::vector<size_t> last;            // each block's last instruction
  std::vector<int64_t> block_of(insts.size(), -1);  // of a block's first instruction
  for (size_t i = 0; i < insts.size(); ++i) {
    if (leader[i]) {
      const uint64_t b = narrow && insts[i].addr % 32 == 8 ? insts[i].addr - 8 : insts[i].addr;
      block_of[i] = int64_t(cfg.blocks.size());
      cfg.blocks.push_back(Block{b, insts[i].addr + size, insts[i].addr, {}, {}});
      last.push_back(i);
    }
    cfg.blocks.back().end = insts[i].addr + size;
    cfg.blocks.back().last = insts[i].addr;
    last.back() = i;
  }
  auto edge = [&](size_t from, uint64_t to) {
    const int64_t i = index_of(to);
    const int64_t b = i >= 0 ? block_of[i] : -1;
    if (b < 0) return;
    auto& s = cfg.blocks[from].succs;
    if (std::find(s.begin(), s.end(), uint32_t(b)) == s.end()) s.push_back(uint32_t(b));
  };
  // SYNC, BRK and CONT go where the last SSY, PBK and PCNT before them (in address order) said.
  uint64_t ssy = 0, pbk = 0, pcnt = 0;
  size_t next = 0;  // the next instruction whose SSY, PBK or PCNT is not yet taken in
  for (size_t b = 0; b < cfg.blocks.size(); ++b) {
    for (; next <= last[b]; ++next) {
      const Inst& in = insts[next];
      if (in.flow == Flow::Ssy) ssy = in.target;
      if (in.flow == Flow::Pbk) pbk = in.target;
      if (in.flow == Flow::Pcnt) pcnt = in.target;
    }
    const Inst& in = insts[last[b]];
    const bool falls = !ends_block(in.flow) || in.conditional || in.flow == Flow::Bpt;
    if (falls && last[b] + 1 < insts.size()) edge(b, insts[last[b] + 1].addr);
    if (in.flow == Flow::Branch) edge(b, in.target);
    for (uint64_t to : targets_of(in)) edge(b, landing(to));
    if (in.flow == Flow::Sync && ssy) edge(b, ssy);
    if (in.flow == Flow::Brk && pbk) edge(b, pbk);
    if (in.flow == Flow::Cont && pcnt) edge(b, pcnt);
  }
  for (size_t b = 0; b < cfg.blocks.size(); ++b)
    for (uint32_t s : cfg.blocks[b].succs) cfg.blocks[s].preds.push_back(uint32_t(b));
  cfg.entry = 0;
  for (const Inst& in : insts) {
    std::optional<uint64_t> callee;
    if (in.flow == Flow::CallRel) callee = in.target;
    if (in.flow == Flow::CallAbs && reloc_target) callee = reloc_target(in.addr);
    if (callee) cfg.call_sites.push_back({in.addr, size, *callee});
  }
  return cfg;
}

}  // namespace hpc::structure
