// A thread waits for the ending signals with sigwait(): the removal runs as ordinary code
// (std::filesystem allocates), never inside a signal handler.
#include "common/interrupt.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace hpc {

namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}

std::vector<std::filesystem::path>& temporaries() {
  static std::vector<std::filesystem::path> t;
  return t;
}

// The ending signals this process was not started ignoring (nohup ignores SIGHUP, a
// shell's background job SIGINT): those stay ignored.
sigset_t endingSignals() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_IGN) sigaddset(&s, sig);
  }
  return s;
}

[[noreturn]] void watch(sigset_t s) {
  int sig = 0;
  while (sigwait(&s, &sig) != 0) {
  }
  {
    std::lock_guard lock(mu());
    for (const auto& p : temporaries()) {
      std::error_code ec;
      if (std::filesystem::remove_all(p, ec) > 0 && !ec)
        std::fprintf(stderr, "%s: %s: removed the unfinished %s\n", program_invocation_short_name, strsignal(sig),
                     p.c_str());
    }
    temporaries().clear();
    // Ends the process by the same signal, the lock still held: nothing is renamed into
    // place after the removal.
    std::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(sig);
  }
  std::_Exit(128 + sig);  // not reached: the signal's default action ends the process
}

}  // namespace

void remove_temporaries_on_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::signal(SIGPIPE, SIG_IGN);
    const sigset_t s = endingSignals();
    if (sigisemptyset(&s)) return;  // all three ignored: nothing to wait for
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
    std::thread(watch, s).detach();
  });
}

void add_temporary(const std::filesystem::path& path) {
  std::lock_guard lock(mu());
  temporaries().push_back(path);
}

void drop_temporary(const std::filesystem::path& path) {
  std::lock_guard lock(mu());
  auto& t = temporaries();
  t.erase(std::remove(t.begin(), t.end(), path), t.end());
}

std::unique_lock<std::mutex> lock_temporaries() { return std::unique_lock<std::mutex>(mu()); }

}  // namespace hpc
