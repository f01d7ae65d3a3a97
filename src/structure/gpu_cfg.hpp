// Control flow of CUDA code from NVIDIA's nvdisasm, which alone can decode SASS:
// `nvdisasm -cfg -poff -fun <symbol index> cubin` prints the function's basic blocks as a
// Graphviz digraph of record nodes, one instruction per `\l`-ended line ("00f0:  @P0 BRA
// `(.L_3);"), and its branch edges between ports ("A":exit0:e -> "B":entry:n).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "structure/cfg.hpp"

namespace hpc::structure {

// The digraph as nvdisasm writes it, instruction text unescaped.
struct NvGraph {
  struct Inst {
    uint64_t offset = 0;  // from the start of the function's section
    std::string text;     // "@!P0 BRA `(.L_1)", braces of dual issue and ';' removed
  };
  struct Field {          // one cell of a record label
    std::string port;     // "entry", "exit0", "exitpost0" or empty
    std::vector<Inst> insts;
  };
  struct Node {
    std::string name;     // ".L_4" or the function's symbol
    std::vector<Field> fields;
  };
  struct Edge {
    std::string from, from_port, to;
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;
};

// Fails, saying where, on text that is not such a digraph.
Expected<NvGraph> parse_nvdisasm_cfg(std::string_view dot);

// The blocks of `g` that lie in [begin, end) once offsets are rebased on `section`, split
// after every branch, with their edges; the entry is the block at `begin` (or the first
// instruction's). Blocks are whole instructions: 16 bytes, or 8 where offsets show sm_6x
// and older encodings.
Cfg cfg_from_nvgraph(const NvGraph& g, uint64_t section, uint64_t begin, uint64_t end);

// nvdisasm on PATH or in /usr/local/cuda/bin, else nothing.
std::optional<std::string> find_nvdisasm();

// Runs `nvdisasm -cfg -poff -fun <symbol> <cubin>` and returns what it printed; an error
// names the cubin, the exit status and what nvdisasm said (nvdisasm_complaint), not the
// function.
Expected<std::string> run_nvdisasm(const std::string& nvdisasm, const std::string& cubin, uint32_t symbol);

// The line of nvdisasm's messages that says why it failed: the last error line, else the
// last line, without its "nvdisasm error   : " prefix. CUDA 13.0's nvdisasm, for example,
// refuses control flow for cubins built by CUDA 10.2 and 11.2 ("Cannot print control flow
// graph as flow analysis is disabled").
std::string nvdisasm_complaint(std::string_view said);

}  // namespace hpc::structure
