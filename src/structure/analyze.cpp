#include "structure/analyze.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "structure/cfg.hpp"
#include "structure/debug_info.hpp"
#include "structure/elf_image.hpp"
#include "structure/loop_place.hpp"
#include "structure/loops.hpp"

namespace hpc::structure {

void RangeSet::add(uint64_t lo, uint64_t hi) {
  if (lo >= hi) return;
  auto it = std::lower_bound(r_.begin(), r_.end(), Range{lo, hi});
  it = r_.insert(it, {lo, hi});
  // Merge with neighbours that touch or overlap.
  if (it != r_.begin() && std::prev(it)->second >= it->first) {
    auto p = std::prev(it);
    p->second = std::max(p->second, it->second);
    it = r_.erase(it);
    it = std::prev(it);
  }
  while (std::next(it) != r_.end() && std::next(it)->first <= it->second) {
    it->second = std::max(it->second, std::next(it)->second);
    r_.erase(std::next(it));
  }
}

bool same_call(const InlineCall* a, const InlineCall* b) {
  return a == b || (a->call_file == b->call_file && a->call_line == b->call_line &&
                    a->callee_file == b->callee_file && a->callee == b->callee);
}

namespace {

// Inline chain (outermost call first) of every address of one procedure.
class InlineMap {
public:
  InlineMap(const DebugInfo::View& debug, uint64_t lo, uint64_t hi) : subs_(debug.subprograms_in(lo, hi)) {
    for (const auto* s : subs_)
      for (const auto& c : s->inlines)
        for (const auto& r : c.ranges) {
          bounds_.push_back(r.first);
          bounds_.push_back(r.second);
        }
    std::sort(bounds_.begin(), bounds_.end());
    // Per subprogram, the innermost call over each stretch between range bounds (deepest
    // first, then the first listed), found in one sweep: chain_at is then a binary search.
    for (const auto* s : subs_) {
      std::vector<int> depth(s->inlines.size(), 0);
      for (size_t i = 0; i < s->inlines.size(); ++i)
        if (int p = s->inlines[i].parent; p >= 0) depth[i] = depth[p] + 1;
      std::vector<std::pair<uint64_t, int>> events;  // (address, call + 1 opening / -(call + 1) closing)
      for (size_t i = 0; i < s->inlines.size(); ++i)
        for (const auto& r : s->inlines[i].ranges) {
          events.emplace_back(r.first, static_cast<int>(i) + 1);
          events.emplace_back(r.second, -static_cast<int>(i) - 1);
        }
      std::sort(events.begin(), events.end());
      std::vector<int> open(s->inlines.size(), 0);
      std::set<std::pair<int, int>> active;  // (-depth, call)
      auto& segs = segs_.emplace_back();
      for (size_t e = 0; e < events.size();) {
        uint64_t at = events[e].first;
        for (; e < events.size() && events[e].first == at; ++e) {
          int i = std::abs(events[e].second) - 1;
          if (events[e].second > 0 ? open[i]++ == 0 : --open[i] == 0) {
            if (events[e].second > 0) active.insert({-depth[i], i});
            else active.erase({-depth[i], i});
          }
        }
        segs.push_back({at, active.empty() ? -1 : active.begin()->second});
      }
    }
  }
  uint64_t next_bound_after(uint64_t a) const {
    auto it = std::upper_bound(bounds_.begin(), bounds_.end(), a);
    return it == bounds_.end() ? UINT64_MAX : *it;
  }
  Chain chain_at(uint64_t a) const {
    Chain chain;
    for (size_t k = 0; k < subs_.size(); ++k) {
      const SubprogramInfo* s = subs_[k];
      bool in = false;
      for (const auto& r : s->ranges) in |= a >= r.first && a < r.second;
      if (!in) continue;
      const auto& segs = segs_[k];
      auto it = std::upper_bound(segs.begin(), segs.end(), a, [](uint64_t x, const Seg& g) { return x < g.lo; });
      int inner = it == segs.begin() ? -1 : std::prev(it)->inner;
      for (int i = inner; i >= 0; i = s->inlines[i].parent) chain.push_back(&s->inlines[i]);
      std::reverse(chain.begin(), chain.end());
      break;
    }
    return chain;
  }

private:
  struct Seg {
    uint64_t lo;  // up to the next Seg's lo
    int inner;    // innermost call there, -1: none
  };
  std::vector<const SubprogramInfo*> subs_;
  std::vector<std::vector<Seg>> segs_;  // per subprogram, sorted
  std::vector<uint64_t> bounds_;
};

class TreeBuilder {
public:
  // guards: code of lines outside the procedure's range goes into a guard alien, in GPU
  // code (gpu) only outside loops, as the reference's GPU loops keep it as statements.
  TreeBuilder(Procedure& proc, const std::vector<LoopPlace>& places, bool guards, bool gpu)
      : proc_(proc), places_(places), guards_(guards), gpu_(gpu) {}

  void add(const Piece& p, const LoopForest& forest) {
    std::vector<int> loops;
    for (int l = p.loop; l >= 0; l = forest.loops[l].parent) loops.push_back(l);
    std::reverse(loops.begin(), loops.end());
    Scope* node = &proc_.root;
    size_t depth = 0;
    bool inlined = false;
    for (int l : loops) {
      const LoopPlace& lp = places_[l];
      for (; depth < lp.path.size(); ++depth, inlined = true) node = inline_child(node, lp.path[depth]);
      node = loop_child(node, l, lp);
    }
    for (; depth < p.chain.size(); ++depth, inlined = true) node = inline_child(node, p.chain[depth]);
    if (guards_ && !inlined && !(gpu_ && !loops.empty()) && proc_.file != 0 && p.loc.line != 0 &&
        (p.loc.file != proc_.file || p.loc.line < proc_.line))
      node = guard_child(node, p.loc);
    if (p.call)
      node->calls.push_back({p.loc.line, p.begin, p.end, p.call->target});
    else
      node->stmts[p.loc.line].add(p.begin, p.end);
  }

private:
  Scope* inline_child(Scope* node, const InlineCall* c) {
    for (auto& ch : node->children)
      if (ch->kind == Scope::Kind::Inline && ch->file == c->call_file && ch->line == c->call_line &&
          ch->callee_file == c->callee_file && ch->callee == c->callee)
        return ch.get();
    auto s = std::make_unique<Scope>();
    s->kind = Scope::Kind::Inline;
    s->file = c->call_file;
    s->line = c->call_line;
    s->callee_file = c->callee_file;
    s->callee = c->callee;
    node->children.push_back(std::move(s));
    return node->children.back().get();
  }
  Scope* loop_child(Scope* node, int id, const LoopPlace& lp) {
    for (auto& ch : node->children)
      if (ch->kind == Scope::Kind::Loop && ch->loop_id == id) return ch.get();
    auto s = std::make_unique<Scope>();
    s->kind = Scope::Kind::Loop;
    s->loop_id = id;
    s->file = lp.loc.file;
    s->line = lp.loc.line;
    s->loop_header = lp.header;
    node->children.push_back(std::move(s));
    return node->children.back().get();
  }
  Scope* guard_child(Scope* node, SourceLoc loc) {
    for (auto& ch : node->children)
      if (ch->kind == Scope::Kind::Guard && ch->file == loc.file) return ch.get();
    auto s = std::make_unique<Scope>();
    s->kind = Scope::Kind::Guard;
    s->file = loc.file;
    s->line = loc.line;
    node->children.push_back(std::move(s));
    return node->children.back().get();
  }

  Procedure& proc_;
  const std::vector<LoopPlace>& places_;
  bool guards_;
  bool gpu_;
};

// The callee alien's line: the smallest line of code directly inside it.
void finish_callee_lines(Scope& s) {
  for (auto& ch : s.children) finish_callee_lines(*ch);
  if (s.kind != Scope::Kind::Inline) return;
  uint32_t best = 0;
  auto consider = [&](uint32_t l) {
    if (l != 0 && (best == 0 || l < best)) best = l;
  };
  for (const auto& [line, r] : s.stmts) consider(line);
  for (const auto& ch : s.children)
    if (ch->kind == Scope::Kind::Loop || ch->kind == Scope::Kind::Guard) consider(ch->line);
  s.callee_line = best;
}

}  // namespace

Procedure analyze_procedure(const AnalysisContext& ctx, const FunctionSpec& fn) {
  Procedure proc;
  proc.name = fn.mangled ? demangle(fn.name) : fn.name;
  proc.link_name = fn.link_name;
  proc.entry = fn.begin;
  proc.device = ctx.gpu_device;
  // The compilation units of this procedure, read now if no other procedure holds them.
  const DebugInfo::View debug = ctx.debug.view(fn.begin, fn.end);
  SourceLoc entryLoc = debug.line_at(fn.begin);
  proc.file = entryLoc.file;
  proc.line = entryLoc.line;

  auto bytes = ctx.image.code(fn.begin, fn.end - fn.begin);
  CodeRange code{fn.begin, fn.begin + bytes.size(), bytes};
  Cfg cfg;
  if (ctx.loops && !fn.plt && !bytes.empty())
    cfg = build_cfg(code, fn.begin, ctx.noreturn,
                    [&](uint64_t a, uint64_t n) { return ctx.image.code(a, n); });
  else if (auto g = ctx.gpu_cfg ? ctx.gpu_cfg(fn.begin, fn.end) : std::nullopt)
    cfg = std::move(*g);
  LoopForest forest = find_loops(cfg);
  InlineMap inl(debug, fn.begin, fn.end);

  std::vector<Piece> pieces;
  size_t after = 0;  // the first block beginning after a (a only grows)
  size_t site = 0;   // the first call site not wholly before a
  for (uint64_t a = fn.begin; a < fn.end;) {
    while (after < cfg.blocks.size() && cfg.blocks[after].begin <= a) ++after;
    const int b = after > 0 && a < cfg.blocks[after - 1].end ? int(after - 1) : -1;
    uint64_t stop = fn.end;
    int loop = -1;
    if (b >= 0) {
      stop = cfg.blocks[b].end;
      loop = forest.innermost[b];
    } else if (after < cfg.blocks.size()) {
      stop = std::min(stop, cfg.blocks[after].begin);
    }
    stop = std::min({stop, debug.next_row_after(a), inl.next_bound_after(a)});
    // A call instruction of GPU code with its callee known is a piece of its own.
    const CallSite* call = nullptr;
    while (site < cfg.call_sites.size() && cfg.call_sites[site].addr + cfg.call_sites[site].size <= a) ++site;
    if (site < cfg.call_sites.size()) {
      const CallSite& c = cfg.call_sites[site];
      if (c.addr <= a) {
        call = &c;
        stop = std::min(stop, c.addr + c.size);
      } else {
        stop = std::min(stop, c.addr);
      }
    }
    pieces.push_back(Piece{a, stop, debug.line_at(a), inl.chain_at(a), loop, call});
    a = stop;
  }

  auto places = place_loops(cfg, forest, pieces, [&](uint64_t a) {
    return std::make_pair(debug.line_at(a), inl.chain_at(a));
  });
  // GPU procedures known only to the line map (nvcc -lineinfo) are named by their
  // smallest line and keep all their own lines.
  bool lineOnly = ctx.gpu;
  for (const SubprogramInfo* sp : debug.subprograms_in(fn.begin, fn.end)) lineOnly &= sp->synthetic;
  if (lineOnly) {
    proc.line = 0;
    for (const auto& p : pieces)
      if (p.loc.line != 0 && (proc.line == 0 || p.loc.line < proc.line)) {
        proc.line = p.loc.line;
        if (proc.file == 0) proc.file = p.loc.file;  // no line at the entry
      }
  }
  // With full DWARF the reference names a GPU procedure by its smallest line counting code
  // inlined at most one lexical block deep (nvcc 10.2 and 11.2 agree), else by its entry.
  if (ctx.gpu && !lineOnly)
    for (const auto& p : pieces)
      if (!p.chain.empty() && p.chain.front()->blocks <= 1 && p.loc.line != 0 && p.loc.file == proc.file &&
          p.loc.line < proc.line)
        proc.line = p.loc.line;
  // A GPU loop takes the smallest of its test's line and the lines of the loops nested in it
  // at its own inline depth (not those inside inlined calls): so the reference names them in
  // the kit's cubins, where code of an inlined call the line map alone does not mark as
  // such (nvcc 10.2 -lineinfo) names the loops around it.
  if (ctx.gpu) {
    std::vector<uint32_t> order(places.size());
    for (uint32_t l = 0; l < order.size(); ++l) order[l] = l;
    auto depth = [&](uint32_t l) {
      int d = 0;
      for (int x = forest.loops[l].parent; x >= 0; x = forest.loops[x].parent) ++d;
      return d;
    };
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return depth(a) > depth(b); });
    for (uint32_t l : order) {  // the innermost first
      const int up = forest.loops[l].parent;
      if (up < 0 || places[l].path.size() != places[up].path.size() || places[l].loc.line == 0) continue;
      SourceLoc& parent = places[up].loc;
      if (parent.line == 0 || places[l].loc.line < parent.line) parent = places[l].loc;
    }
  }
  TreeBuilder tb(proc, places, !lineOnly, ctx.gpu);
  for (const auto& p : pieces) tb.add(p, forest);
  finish_callee_lines(proc.root);
  return proc;
}

}  // namespace hpc::structure
