// How many CPUs a tool's default thread count should use.
#pragma once

#include <sched.h>

#include <algorithm>
#include <thread>

namespace hpc {

// The CPUs this process may run on: its affinity mask (a batch job's share of a node, a
// container's cpuset, taskset), not the machine's count, which would oversubscribe the
// share and multiply per-thread memory.
inline unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return unsigned(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace hpc
