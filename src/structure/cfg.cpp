#include "structure/cfg.hpp"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

namespace hpc::structure {

int Cfg::block_at(uint64_t addr) const {
  auto it = std::upper_bound(blocks.begin(), blocks.end(), addr,
                             [](uint64_t a, const Block& b) { return a < b.begin; });
  if (it == blocks.begin()) return -1;
  --it;
  return addr < it->end ? static_cast<int>(it - blocks.begin()) : -1;
}

namespace {

struct Insn {
  uint8_t len = 0;
  bool ends = false;          // no fall-through after it
  bool branch = false;        // ends a block
  std::vector<uint64_t> targets;
};

struct Decoded {
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  uint64_t addr;
};

class Builder {
public:
  Builder(const CodeRange& code, const std::function<bool(uint64_t)>& noreturn)
      : code_(code), noreturn_(noreturn) {
    ZydisDecoderInit(&dec_, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  }

  Cfg run(uint64_t entry) {
    std::deque<uint64_t> work{entry};
    leaders_.insert(entry);
    queued_.insert(entry);
    while (!work.empty()) {
      uint64_t a = work.front();
      work.pop_front();
      decode_run(a, work);
    }
    return make_blocks(entry);
  }

private:
  bool inside(uint64_t a) const { return a >= code_.begin && a < code_.end; }

  bool decode_at(uint64_t a, Decoded& d) const {
    d.addr = a;
    auto off = a - code_.begin;
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec_, code_.bytes.data() + off, code_.end - a, &d.insn, d.ops));
  }

  // Decodes straight-line code from `a` until a block-ending instruction or code
  // already decoded; queues branch targets.
  void decode_run(uint64_t a, std::deque<uint64_t>& work) {
    std::vector<Decoded> history;
    while (inside(a) && !insns_.count(a)) {
      Decoded d;
      if (!decode_at(a, d)) return;
      Insn in;
      in.len = d.insn.length;
      classify(d, history, in);
      for (uint64_t t : in.targets) {
        if (!inside(t)) continue;
        leaders_.insert(t);
        if (queued_.insert(t).second) work.push_back(t);
      }
      bool stop = in.ends;
      if (in.branch) leaders_.insert(a + in.len);
      insns_.emplace(a, std::move(in));
      history.push_back(d);
      if (history.size() > 24) history.erase(history.begin());
      if (stop) return;
      a += d.insn.length;
    }
  }

  void classify(const Decoded& d, const std::vector<Decoded>& history, Insn& in) {
    const auto& i = d.insn;
    auto direct = [&](uint64_t& t) {
      return i.operand_count_visible > 0 && d.ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
             ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&i, &d.ops[0], d.addr, &t));
    };
    switch (i.meta.category) {
      case ZYDIS_CATEGORY_RET:
        in.ends = in.branch = true;
        return;
      case ZYDIS_CATEGORY_UNCOND_BR: {
        in.ends = in.branch = true;
        uint64_t t;
        if (direct(t)) {
          if (inside(t)) in.targets.push_back(t);
        } else {
          jump_table(d, history, in.targets);
        }
        return;
      }
      case ZYDIS_CATEGORY_COND_BR: {
        in.branch = true;
        uint64_t t;
        if (direct(t) && inside(t)) in.targets.push_back(t);
        return;
      }
      case ZYDIS_CATEGORY_CALL: {
        uint64_t t;
        if (!direct(t)) return;
        calls_.push_back(t);
        if (noreturn_ && noreturn_(t)) in.ends = in.branch = true;
        return;
      }
      default:
        break;
    }
    if (i.mnemonic == ZYDIS_MNEMONIC_HLT || i.mnemonic == ZYDIS_MNEMONIC_UD2 || i.mnemonic == ZYDIS_MNEMONIC_UD0 ||
        i.mnemonic == ZYDIS_MNEMONIC_UD1)
      in.ends = in.branch = true;
  }

  uint64_t read_le(uint64_t addr, int n, bool& ok) const {
    ok = inside(addr) && addr + n <= code_.end;
    if (!ok) return 0;
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= uint64_t(code_.bytes[addr - code_.begin + k]) << (8 * k);
    return v;
  }

  // Recognises the two table shapes compilers emit for switches:
  //   jmp [T + idx*8]                  (absolute entries)
  //   lea B,[rip+T]; movsxd R,[B+idx*4]; add R,B; jmp R   (entries relative to T)
  // The entry count comes from the guarding "cmp idx, N; ja default" when present,
  // otherwise entries are read while they point into the procedure.
  void jump_table(const Decoded& d, const std::vector<Decoded>& history, std::vector<uint64_t>& out) {
    uint64_t table = 0;
    int entSize = 0;
    bool relative = false;
    const auto& op = d.ops[0];
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_NONE && op.mem.scale == 8) {
      table = static_cast<uint64_t>(op.mem.disp.value);
      entSize = 8;
    } else if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
      for (auto it = history.rbegin(); it != history.rend() && !entSize; ++it) {
        const auto& h = *it;
        if (h.insn.operand_count_visible < 2 || h.ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
        const auto& m = h.ops[1].mem;
        if (h.insn.mnemonic == ZYDIS_MNEMONIC_MOVSXD && m.scale == 4) {
          // Find where the base register got the table address.
          for (auto jt = it; jt != history.rend(); ++jt) {
            if (jt->insn.mnemonic == ZYDIS_MNEMONIC_LEA && jt->ops[0].reg.value == m.base &&
                jt->ops[1].mem.base == ZYDIS_REGISTER_RIP &&
                ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&jt->insn, &jt->ops[1], jt->addr, &table))) {
              entSize = 4;
              relative = true;
              break;
            }
          }
          if (!entSize) return;
        } else if (h.insn.mnemonic == ZYDIS_MNEMONIC_MOV && m.scale == 8 && m.base == ZYDIS_REGISTER_NONE &&
                   h.ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER) {
          table = static_cast<uint64_t>(m.disp.value);
          entSize = 8;
        }
      }
    }
    if (!entSize) return;
    uint64_t limit = 1024;
    for (auto it = history.rbegin(); it != history.rend(); ++it) {
      if (it->insn.mnemonic != ZYDIS_MNEMONIC_CMP || it->ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) continue;
      auto next = it.base();  // the instruction after the cmp
      if (next == history.end() || next->insn.meta.category != ZYDIS_CATEGORY_COND_BR) break;
      auto n = static_cast<uint64_t>(it->ops[1].imm.value.u);
      if (next->insn.mnemonic == ZYDIS_MNEMONIC_JNBE) limit = n + 1;
      else if (next->insn.mnemonic == ZYDIS_MNEMONIC_JNB) limit = n;
      break;
    }
    std::set<uint64_t> seen;
    for (uint64_t k = 0; k < limit; ++k) {
      bool ok = false;
      uint64_t raw = table_read(table + k * entSize, entSize, ok);
      if (!ok) break;
      uint64_t t = relative ? table + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(raw))) : raw;
      if (!inside(t)) break;
      if (seen.insert(t).second) out.push_back(t);
    }
  }

  // Tables usually live in .rodata, outside the procedure's own bytes.
  uint64_t table_read(uint64_t addr, int n, bool& ok) const {
    if (tables_) {
      auto bytes = tables_(addr, n);
      ok = bytes.size() == static_cast<size_t>(n);
      uint64_t v = 0;
      for (int k = 0; ok && k < n; ++k) v |= uint64_t(bytes[k]) << (8 * k);
      return v;
    }
    return read_le(addr, n, ok);
  }

  Cfg make_blocks(uint64_t entry) {
    Cfg cfg;
    Block* cur = nullptr;
    uint64_t prevEnd = 0;
    for (auto& [a, in] : insns_) {
      if (!cur || leaders_.count(a) || a != prevEnd) {
        cfg.blocks.push_back(Block{a, a, a, {}, {}});
        cur = &cfg.blocks.back();
      }
      cur->end = a + in.len;
      cur->last = a;
      prevEnd = cur->end;
      if (in.branch) cur = nullptr;
    }
    for (size_t b = 0; b < cfg.blocks.size(); ++b) {
      auto& blk = cfg.blocks[b];
      const Insn& last = insns_.at(blk.last);
      std::vector<uint64_t> targets = last.targets;
      if (!last.ends) targets.push_back(blk.end);
      for (uint64_t t : targets) {
        int s = cfg.block_at(t);
        if (s < 0 || cfg.blocks[s].begin != t) continue;
        if (std::find(blk.succs.begin(), blk.succs.end(), uint32_t(s)) == blk.succs.end())
          blk.succs.push_back(static_cast<uint32_t>(s));
      }
    }
    for (size_t b = 0; b < cfg.blocks.size(); ++b)
      for (uint32_t s : cfg.blocks[b].succs) cfg.blocks[s].preds.push_back(static_cast<uint32_t>(b));
    int e = cfg.block_at(entry);
    cfg.entry = e < 0 ? 0 : static_cast<uint32_t>(e);
    std::sort(calls_.begin(), calls_.end());
    calls_.erase(std::unique(calls_.begin(), calls_.end()), calls_.end());
    cfg.calls = std::move(calls_);
    return cfg;
  }

public:
  std::function<std::span<const uint8_t>(uint64_t, uint64_t)> tables_;

private:
  const CodeRange& code_;
  const std::function<bool(uint64_t)>& noreturn_;
  ZydisDecoder dec_;
  std::map<uint64_t, Insn> insns_;
  std::set<uint64_t> leaders_;
  std::set<uint64_t> queued_;
  std::vector<uint64_t> calls_;
};

}  // namespace

Cfg build_cfg(const CodeRange& code, uint64_t entry, const std::function<bool(uint64_t)>& noreturn,
              const std::function<std::span<const uint8_t>(uint64_t, uint64_t)>& data) {
  if (entry < code.begin || entry >= code.end) return {};
  Builder b(code, noreturn);
  b.tables_ = data;
  return b.run(entry);
}

}  // namespace hpc::structure
