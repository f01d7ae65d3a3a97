#include "signals.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>

#include "process.hpp"
#include "sample.hpp"
#include "state.hpp"

namespace hpc::rt {

namespace {

constexpr int kManaged[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGIO};

struct sigaction gApp[NSIG];    // what the application believes is installed
bool gManaged[NSIG];
bool gOurs[NSIG];               // our handler is what the kernel has
bool gPerfSources = false;      // some sample source is a perf event
std::atomic<uint64_t> gOverflowSigio{0};
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
SigactionFn gRealSigaction = nullptr;

bool isIgnored(const struct sigaction& a) {
  return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN;
}

void onManaged(int sig, siginfo_t* si, void* uc);

void installOurs(int sig) {
  struct sigaction sa{};
  sa.sa_sigaction = onManaged;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, gConfig.sampleSignal);
  if (realSigaction(sig, &sa, nullptr) == 0) gOurs[sig] = true;
}

// Keeps SIG_IGN real (it must survive exec, as for nohup); otherwise our handler sits in front.
void syncKernel(int sig) {
  if (isIgnored(gApp[sig])) {
    realSigaction(sig, &gApp[sig], nullptr);
    gOurs[sig] = false;
  } else if (!gOurs[sig]) {
    installOurs(sig);
  }
}

void onManaged(int sig, siginfo_t* si, void* uc) {
  if (sig == SIGSEGV || sig == SIGBUS) recoverFromUnwindFault(uc);
  struct sigaction app = gApp[sig];
  const bool byDefault = app.sa_flags & SA_SIGINFO ? app.sa_sigaction == nullptr : app.sa_handler == SIG_DFL;
  // A perf event's overflow signal that found the real-time queue full arrives as a plain
  // SIGIO from the kernel, whose default action ends the process: a lost sample instead.
  if (sig == SIGIO && byDefault && gPerfSources && si->si_code == SI_KERNEL) {
    gOverflowSigio.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (byDefault) {
    processFinalize("fatal signal");
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    realSigaction(sig, &dfl, nullptr);
    gOurs[sig] = false;
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, sig);
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
    // A fault re-executes and now dies by default; an asynchronous signal is re-sent.
    if (si->si_code <= 0 || (sig != SIGSEGV && sig != SIGBUS && sig != SIGILL && sig != SIGFPE)) raise(sig);
    return;
  }
  if (!(app.sa_flags & SA_SIGINFO) && app.sa_handler == SIG_IGN) return;
  sigset_t mask = app.sa_mask, old;
  if (!(app.sa_flags & SA_NODEFER)) sigaddset(&mask, sig);
  sigdelset(&mask, gConfig.sampleSignal);
  pthread_sigmask(SIG_BLOCK, &mask, &old);
  if (app.sa_flags & SA_RESETHAND) {
    gApp[sig] = {};
    gApp[sig].sa_handler = SIG_DFL;
  }
  if (app.sa_flags & SA_SIGINFO) app.sa_sigaction(sig, si, uc);
  else app.sa_handler(sig);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

int realSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!gRealSigaction) gRealSigaction = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
  return gRealSigaction(sig, act, old);
}

uint64_t signalsOverflowSigio() { return gOverflowSigio.load(std::memory_order_relaxed); }

void signalsInit() {
  for (unsigned i = 0; i < gConfig.nEvents; ++i) gPerfSources |= gConfig.events[i].kind == SourceKind::Perf;
  struct sigaction sa{};
  sa.sa_sigaction = onSampleSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  // Nothing interrupts a sample, but faults must stay deliverable (a blocked synchronous
  // fault kills the process) so a bad read in the unwinder can be recovered.
  sigfillset(&sa.sa_mask);
  for (int f : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP}) sigdelset(&sa.sa_mask, f);
  realSigaction(gConfig.sampleSignal, &sa, nullptr);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, gConfig.sampleSignal);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  for (int sig : kManaged) {
    gManaged[sig] = true;
    realSigaction(sig, nullptr, &gApp[sig]);
    syncKernel(sig);
  }
}

int virtualSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig <= 0 || sig >= NSIG || gConfig.sampleSignal == 0 || (sig != gConfig.sampleSignal && !gManaged[sig]))
    return realSigaction(sig, act, old);
  struct sigaction prev = gApp[sig];
  if (act) {
    gApp[sig] = *act;
    if (sig != gConfig.sampleSignal) syncKernel(sig);
  }
  if (old) *old = prev;
  return 0;
}

bool maskCallInHandler(sigset_t* old) {
  ThreadState* ts = currentThread();
  // In the sample handler, or in the unwind at a GPU launch (samples are suspended there,
  // so no handler of ours re-enters libunwind): libunwind's masking around its cache lock
  // and dl_iterate_phdr is skipped, two system calls per frame.
  if (!ts || !(ts->inHandler.load(std::memory_order_relaxed) || ts->inUnwind.load(std::memory_order_relaxed)))
    return false;
  if (old) {
    sigfillset(old);
    for (int f : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP}) sigdelset(old, f);
  }
  return true;
}

const sigset_t* filterMask(int how, const sigset_t* set, sigset_t* scratch) {
  if (!set || how == SIG_UNBLOCK || gConfig.sampleSignal == 0 || !sigismember(set, gConfig.sampleSignal))
    return set;
  // Our own code (libunwind restoring its mask inside the handler, say) is not filtered.
  ThreadState* ts = currentThread();
  if (ts && (ts->inHandler.load(std::memory_order_relaxed) || ts->suspend > 0)) return set;
  *scratch = *set;
  sigdelset(scratch, gConfig.sampleSignal);
  return scratch;
}

}  // namespace hpc::rt
