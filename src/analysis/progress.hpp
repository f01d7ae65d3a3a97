// "hpcprof: <phase> k/n" on one terminal line while a long phase runs: only when stderr is a
// terminal, at most ten updates a second, erased when the phase ends. Never affects results.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace hpc::analysis {

class Progress {
public:
  Progress(bool wanted, const char* phase, size_t total)
      : on_(wanted && total > 1 && isatty(STDERR_FILENO)), phase_(phase), total_(total) {}
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // MT: thread-safe; a tick that finds another one printing does not wait.
  void tick() {
    size_t k = done_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (!on_) return;
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count();
    if (now - last_.load(std::memory_order_relaxed) < 100) return;
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock) return;
    last_.store(now, std::memory_order_relaxed);
    std::fprintf(stderr, "\rhpcprof: %s %zu/%zu", phase_, k, total_);
    std::fflush(stderr);
    shown_ = true;
  }

private:
  bool on_;
  const char* phase_;
  size_t total_;
  std::atomic<size_t> done_{0};
  std::atomic<int64_t> last_{0};
  std::mutex mu_;
  bool shown_ = false;
};

}  // namespace hpc::analysis
