// The GPU metrics of the reference's measurement files (hpcrun -e gpu=...): the same 63
// descriptors in the same order, names, descriptions, flags and formulas. In our profiles
// they follow the CPU sample sources' metrics, so a descriptor's formula indices (#N) are
// shifted by the number of those when written (formulaText).
#pragma once

#include <cstdint>

namespace hpc::rt::gpu {

struct MetricInfo {
  const char* name;
  const char* description;
  uint8_t valFmt;       // 1 int, 2 real
  uint8_t show;         // 1 show, 3 exclusive, 4 invisible (the _ACUMU accumulators)
  uint8_t showPercent;
  uint8_t move2proc;
  int8_t numerator;     // formula #numerator/#denominator (GPU metric indices), -1: none
  int8_t denominator;
  bool percent;         // formula 100*(#a/#b)
  const char* format;
};

inline constexpr MetricInfo kMetrics[] = {
    {"GPUOP (sec)", "GPU time: all operations (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 0
    {"GKER (sec)", "GPU time: kernel execution (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 1
    {"GMEM (sec)", "GPU time: memory allocation/deallocation (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 2
    {"GMSET (sec)", "GPU time: memory set (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 3
    {"GXCOPY (sec)", "GPU time: explicit data copy (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 4
    {"GICOPY (sec)", "GPU time: implicit data copy (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 5
    {"GSYNC (sec)", "GPU time: synchronization (seconds)", 2, 1, 1, 1, -1, -1, false, ""},  // 6
    {"GMEM:UNK (B)", "GPU memory alloc/free: unknown memory kind (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 7
    {"GMEM:PAG (B)", "GPU memory alloc/free: pageable memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 8
    {"GMEM:PIN (B)", "GPU memory alloc/free: pinned memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 9
    {"GMEM:DEV (B)", "GPU memory alloc/free: device memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 10
    {"GMEM:ARY (B)", "GPU memory alloc/free: array memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 11
    {"GMEM:MAN (B)", "GPU memory alloc/free: managed memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 12
    {"GMEM:DST (B)", "GPU memory alloc/free: device static memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 13
    {"GMEM:MST (B)", "GPU memory alloc/free: managed static memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 14
    {"GMEM:COUNT", "GPU memory alloc/free: count", 1, 1, 1, 0, -1, -1, false, ""},  // 15
    {"GMSET:UNK (B)", "GPU memory set: unknown memory kind (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 16
    {"GMSET:PAG (B)", "GPU memory set: pageable memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 17
    {"GMSET:PIN (B)", "GPU memory set: pinned memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 18
    {"GMSET:DEV (B)", "GPU memory set: device memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 19
    {"GMSET:ARY (B)", "GPU memory set: array memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 20
    {"GMSET:MAN (B)", "GPU memory set: managed memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 21
    {"GMSET:DST (B)", "GPU memory set: device static memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 22
    {"GMSET:MST (B)", "GPU memory set: managed static memory (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 23
    {"GMSET:COUNT", "GPU memory set: count", 1, 1, 1, 0, -1, -1, false, ""},  // 24
    {"GXCOPY:UNK (B)", "GPU explicit memory copy: unknown kind (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 25
    {"GXCOPY:H2D (B)", "GPU explicit memory copy: host to device (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 26
    {"GXCOPY:D2H (B)", "GPU explicit memory copy: device to host (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 27
    {"GXCOPY:H2A (B)", "GPU explicit memory copy: host to array (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 28
    {"GXCOPY:A2H (B)", "GPU explicit memory copy: array to host (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 29
    {"GXCOPY:A2A (B)", "GPU explicit memory copy: array to array (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 30
    {"GXCOPY:A2D (B)", "GPU explicit memory copy: array to device (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 31
    {"GXCOPY:D2A (B)", "GPU explicit memory copy: device to array (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 32
    {"GXCOPY:D2D (B)", "GPU explicit memory copy: device to device (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 33
    {"GXCOPY:H2H (B)", "GPU explicit memory copy: host to host (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 34
    {"GXCOPY:P2P (B)", "GPU explicit memory copy: peer to peer (bytes)", 1, 1, 1, 0, -1, -1, false, ""},  // 35
    {"GXCOPY:COUNT", "GPU explicit memory copy: count", 1, 1, 1, 0, -1, -1, false, ""},  // 36
    {"GSYNC:UNK (sec)", "GPU synchronizations: unknown kind", 2, 0, 1, 0, -1, -1, false, ""},  // 37
    {"GSYNC:EVT (sec)", "GPU synchronizations: event", 2, 0, 1, 0, -1, -1, false, ""},  // 38
    {"GSYNC:STRE (sec)", "GPU synchronizations: stream event wait", 2, 0, 1, 0, -1, -1, false, ""},  // 39
    {"GSYNC:STR (sec)", "GPU synchronizations: stream", 2, 0, 1, 0, -1, -1, false, ""},  // 40
    {"GSYNC:CTX (sec)", "GPU synchronizations: context", 2, 0, 1, 0, -1, -1, false, ""},  // 41
    {"GSYNC:COUNT", "GPU synchronizations: count", 2, 0, 1, 0, -1, -1, false, ""},  // 42
    {"GKER:STMEM_ACUMU (B)", "GPU kernel: static memory accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 43
    {"GKER:DYMEM_ACUMU (B)", "GPU kernel: dynamic memory accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 44
    {"GKER:LMEM_ACUMU (B)", "GPU kernel: local memory accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 45
    {"GKER:FGP_ACT_ACUMU", "GPU kernel: fine-grain parallelism accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 46
    {"GKER:FGP_MAX_ACUMU", "GPU kernel: fine-grain parallelism accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 47
    {"GKER:THR_REG_ACUMU", "GPU kernel: thread register count accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 48
    {"GKER:BLK_THR_ACUMU", "GPU kernel: thread count accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 49
    {"GKER:BLK_SM_ACUMU", "GPU kernel: block local memory accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 50
    {"GKER:BLKS_ACUMU", "GPU kernel: block count accumulator [internal use only]", 1, 4, 1, 1, -1, -1, false, ""},  // 51
    {"GKER:STMEM (B)", "GPU kernel: static memory (bytes)", 1, 3, 0, 1, 43, 61, false, "%6.0f"},  // 52
    {"GKER:DYMEM (B)", "GPU kernel: dynamic memory (bytes)", 1, 3, 0, 1, 44, 61, false, "%6.0f"},  // 53
    {"GKER:LMEM (B)", "GPU kernel: local memory (bytes)", 1, 3, 0, 1, 45, 61, false, "%6.0f"},  // 54
    {"GKER:FGP_ACT", "GPU kernel: fine-grain parallelism, actual", 1, 3, 0, 1, 46, 61, false, "%6.0f"},  // 55
    {"GKER:FGP_MAX", "GPU kernel: fine-grain parallelism, maximum", 1, 3, 0, 1, 47, 61, false, "%6.0f"},  // 56
    {"GKER:THR_REG", "GPU kernel: thread register count", 1, 3, 0, 1, 48, 61, false, "%6.0f"},  // 57
    {"GKER:BLK_THR", "GPU kernel: thread count", 1, 3, 0, 1, 49, 61, false, "%6.0f"},  // 58
    {"GKER:BLK_SM (B)", "GPU kernel: block local memory (bytes)", 1, 3, 0, 1, 50, 61, false, "%6.0f"},  // 59
    {"GKER:BLKS", "GPU kernel: block count", 1, 3, 0, 1, 51, 61, false, "%6.0f"},  // 60
    {"GKER:COUNT", "GPU kernel: launch count", 1, 1, 1, 1, -1, -1, false, ""},  // 61
    {"GKER:OCC_THR", "GPU kernel: theoretical occupancy (FGP_ACT / FGP_MAX)", 1, 3, 0, 1, 46, 47, true, "%6.2f %%"},  // 62
};
inline constexpr unsigned kMetricCount = sizeof kMetrics / sizeof kMetrics[0];
static_assert(kMetricCount == 63);

// Indices into kMetrics of what the backends fill in.
enum Metric : uint8_t {
  kGpuOp = 0, kKernelTime = 1, kMemTime = 2, kMemsetTime = 3, kCopyTime = 4, kSyncTime = 6,
  kMemDevBytes = 10, kMemCount = 15,
  kMemsetDevBytes = 19, kMemsetCount = 24,
  kCopyH2D = 26, kCopyD2H = 27, kCopyD2D = 33, kCopyCount = 36,
  kMemPinnedBytes = 9, kMemPageableBytes = 8,
  kSyncEvent = 38, kSyncStream = 40, kSyncCount = 42,
  kStaticMemAcc = 43, kDynamicMemAcc = 44, kLocalMemAcc = 45, kBlockThreadsAcc = 49, kBlockSharedAcc = 50,
  kBlocksAcc = 51,
  kKernelCount = 61,
};

// "#a/#b" or "100*(#a/#b)" with both indices shifted by base; empty when no formula.
template <typename Text>
void formulaText(const MetricInfo& m, unsigned base, Text& t) {
  if (m.numerator < 0) return;
  if (m.percent) t.str("100*(");
  t.ch('#').dec(base + unsigned(m.numerator)).str("/#").dec(base + unsigned(m.denominator));
  if (m.percent) t.ch(')');
}

}  // namespace hpc::rt::gpu
