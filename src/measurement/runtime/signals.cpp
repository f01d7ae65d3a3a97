#include "signals.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "process.hpp"
#include "sample.hpp"
#include "state.hpp"

namespace hpc::rt {

namespace {

// Every signal whose default action ends the process, but for SIGPROF (profilers inside the
// application send it at high rates; we never do) and SIGKILL/SIGSTOP (no handler can be
// installed): one that arrives with the application's default action writes the
// measurement before the process dies (`prog | head` ended prog by SIGPIPE with no profile).
constexpr int kManaged[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE,  SIGABRT,   SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                            SIGIO,   SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGVTALRM, SIGXCPU, SIGXFSZ, SIGSYS};

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

int gFlags[NSIG];  // the flags our handler for the signal is installed with

// The flags of the application's handler that change how it runs, as it asked for them:
// SA_RESTART (without it a system call the signal interrupts fails with EINTR: an alarm
// that ends a blocking read must not restart it) and SA_ONSTACK (an application's handler
// that did not ask for the alternate stack runs on the thread's stack, as unmeasured, not on
// the runtime's small one). With the default action, our handler writes the measurement and
// dies the default way, on the alternate stack (after a stack overflow it can only do that
// there); a SIGIO it drops restarts what it interrupted.
int wantedFlags(const struct sigaction& app) {
  const bool byDefault = app.sa_flags & SA_SIGINFO ? app.sa_sigaction == nullptr : app.sa_handler == SIG_DFL;
  return SA_SIGINFO | (byDefault ? SA_RESTART | SA_ONSTACK : app.sa_flags & (SA_RESTART | SA_ONSTACK));
}

void installOurs(int sig) {
  struct sigaction sa{};
  sa.sa_sigaction = onManaged;
  sa.sa_flags = wantedFlags(gApp[sig]);
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, gConfig.sampleSignal);
  if (realSigaction(sig, &sa, nullptr) == 0) {
    gOurs[sig] = true;
    gFlags[sig] = sa.sa_flags;
  }
}

// Keeps SIG_IGN real (it must survive exec, as for nohup); otherwise our handler sits in front.
void syncKernel(int sig) {
  if (isIgnored(gApp[sig])) {
    realSigaction(sig, &gApp[sig], nullptr);
    gOurs[sig] = false;
  } else if (!gOurs[sig] || gFlags[sig] != wantedFlags(gApp[sig])) {
    installOurs(sig);
  }
}

bool isDefault(const struct sigaction& a) {
  return a.sa_flags & SA_SIGINFO ? a.sa_sigaction == nullptr : a.sa_handler == SIG_DFL;
}

// The default action, the measurement written first: the kernel's disposition reset, the
// signal unblocked and, where `resend`, sent again (a fault instead re-executes and dies).
// Raw system calls: the interposed ones filter masks and do nothing inside a sample.
void dieByDefault(int sig, bool resend) {
  processFinalize("fatal signal");
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  realSigaction(sig, &dfl, nullptr);
  gOurs[sig] = false;
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, sig);
  syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &unblock, nullptr, _NSIG / 8);
  if (resend) syscall(SYS_tgkill, getpid(), sysGettid(), sig);
}

// Whether this thread runs on the application's own signal stack with less than 48 KiB of it
// left (Rust's is 8 KiB and a page).
bool onSmallAppStack(const ThreadState* ts) {
  constexpr uintptr_t kRoom = 48u << 10;
  const uintptr_t sp = uintptr_t(__builtin_frame_address(0));
  const uintptr_t lo = ts ? uintptr_t(ts->appAltStack.ss_sp) : 0;
  return ts && ts->altStack && ts->appAltStack.ss_size && sp > lo && sp <= lo + ts->appAltStack.ss_size &&
         sp - lo < kRoom;
}

// The application's handler as the kernel would have run it: over the interrupted code's
// mask, its sa_mask and (without SA_NODEFER) the signal itself, never the sampling signal;
// SA_RESETHAND honoured.
void runAppHandler(int sig, siginfo_t* si, void* uc, const struct sigaction& app) {
  // The interrupted code's mask, the application's sa_mask but for the sampling signal (an
  // application's handler is sampled as its code), and the signal itself. Where the
  // interrupted code had the sampling signal blocked (a wait kept whole, waits.cpp, or the
  // runtime's own code), it stays blocked: the samples deferred over that wait are let in by
  // the wait's own wrapper, which records them in the wait.
  sigset_t mask = static_cast<ucontext_t*>(uc)->uc_sigmask, ours;
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&app.sa_mask, s) && s != gConfig.sampleSignal) sigaddset(&mask, s);
  if (!(app.sa_flags & SA_NODEFER)) sigaddset(&mask, sig);
  // On the application's small signal stack the handler runs unsampled: a sample's signal
  // frame (some 3.5 KiB with AVX-512 state) on top of a fault's and the handler's overflowed
  // Rust's 8 KiB as its stack-overflow handler ran (SIGSEGV for SIGABRT, no profile).
  if (onSmallAppStack(currentThread())) sigaddset(&mask, gConfig.sampleSignal);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, &ours, _NSIG / 8);
  if (app.sa_flags & SA_RESETHAND) {
    gApp[sig] = {};
    gApp[sig].sa_handler = SIG_DFL;
  }
  if (app.sa_flags & SA_SIGINFO) app.sa_sigaction(sig, si, uc);
  else app.sa_handler(sig);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &ours, nullptr, _NSIG / 8);
}

void onManaged(int sig, siginfo_t* si, void* uc) {
  if (sig == SIGSEGV || sig == SIGBUS) recoverFromUnwindFault(uc);
  const struct sigaction app = gApp[sig];
  const bool byDefault = isDefault(app);
  // A perf event's overflow signal that found the real-time queue full arrives as a plain
  // SIGIO from the kernel, whose default action ends the process: a lost sample instead.
  if (sig == SIGIO && byDefault && gPerfSources && si->si_code == SI_KERNEL) {
    gOverflowSigio.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (byDefault) {
    // A fault re-executes and now dies by default; an asynchronous signal is sent again.
    dieByDefault(sig, si->si_code <= 0 || (sig != SIGSEGV && sig != SIGBUS && sig != SIGILL && sig != SIGFPE));
    return;
  }
  if (!(app.sa_flags & SA_SIGINFO) && app.sa_handler == SIG_IGN) return;
  runAppHandler(sig, si, uc, app);
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
  // On the thread's alternate stack (the runtime's own where the application set none):
  // never on what is left of a stack the application may have nearly used up.
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
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

const sigset_t* withoutSampleSignal(const sigset_t* set, sigset_t* scratch) {
  if (!set || gConfig.sampleSignal == 0 || !sigismember(set, gConfig.sampleSignal)) return set;
  *scratch = *set;
  sigdelset(scratch, gConfig.sampleSignal);
  return scratch;
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

bool signalsForward(int sig, siginfo_t* si, void* uc, bool appTimer) {
  // Only what the application (or another process) sent: a timer's or a perf event's signal
  // that finds no source of ours (one queued before its thread's sources stopped) is ours.
  if (!appTimer && si->si_code != SI_USER && si->si_code != SI_QUEUE && si->si_code != SI_TKILL) return false;
  const struct sigaction app = gApp[sig];
  if (isDefault(app)) {  // a real-time signal's default action ends the process
    dieByDefault(sig, true);
    return true;
  }
  if (!(app.sa_flags & SA_SIGINFO) && app.sa_handler == SIG_IGN) return true;
  runAppHandler(sig, si, uc, app);
  return true;
}

namespace {

constexpr size_t kAltStackBytes = 64u << 10;
constexpr size_t kGuardBytes = 4096;

// The kernel's sigaltstack, not libc's (which is ours now: interpose.cpp).
int kernelSigaltstack(const stack_t* ss, stack_t* old) { return int(syscall(SYS_sigaltstack, ss, old)); }

bool setOurs(void* sp) {
  stack_t ss{};
  ss.ss_sp = sp;
  ss.ss_size = kAltStackBytes;
  ss.ss_flags = 0;
  return kernelSigaltstack(&ss, nullptr) == 0;
}

// Whether the thread's current alternate stack is the one the runtime gave it.
bool oursIsSet(const ThreadState* ts, stack_t& cur) {
  return ts && ts->altStack && kernelSigaltstack(nullptr, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) &&
         cur.ss_sp == ts->altStack;
}

}  // namespace

// fn(arg) with the stack pointer at `top`, back on the caller's stack after (frame-pointer
// CFI, so debuggers and libunwind walk through it).
extern "C" void hpcCallOnStack(void* top, void (*fn)(void*), void* arg);
asm(R"(
    .text
    .globl hpcCallOnStack
    .hidden hpcCallOnStack
    .type hpcCallOnStack, @function
hpcCallOnStack:
    .cfi_startproc
    endbr64
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    andq $-16, %rdi
    movq %rdi, %rsp
    movq %rdx, %rdi
    call *%rsi
    movq %rbp, %rsp
    .cfi_def_cfa_register %rsp
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    ret
    .cfi_endproc
    .size hpcCallOnStack, .-hpcCallOnStack
)");

void signalsOnRoomyStack(ThreadState* ts, void (*fn)(void*), void* arg) {
  if (!onSmallAppStack(ts)) {
    fn(arg);
    return;
  }
  // The kernel lets no thread change its alternate stack while running on it: that is done
  // from ours.
  struct Call {
    ThreadState* ts;
    void (*fn)(void*);
    void* arg;
  } call{ts, fn, arg};
  hpcCallOnStack(static_cast<char*>(ts->altStack) + kAltStackBytes, [](void* p) {
    const Call& c = *static_cast<Call*>(p);
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    const bool disabled = kernelSigaltstack(&off, nullptr) == 0;
    c.fn(c.arg);
    if (disabled) kernelSigaltstack(&c.ts->appAltStack, nullptr);
  }, &call);
}

void signalsStartThreadStack(ThreadState& ts) {
  stack_t cur{};
  if (ts.altStack || kernelSigaltstack(nullptr, &cur) != 0) return;
  void* m = mmap(nullptr, kAltStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) return;
  mprotect(m, kGuardBytes, PROT_NONE);  // below it: an overflow faults instead of writing on
  void* sp = static_cast<char*>(m) + kGuardBytes;
  // A stack set already (the application's, or the one a forked child inherits) stays the
  // kernel's; ours is kept for the runtime's work (signalsOnRoomyStack).
  if (!(cur.ss_flags & SS_DISABLE)) {
    cur.ss_flags &= ~SS_ONSTACK;
    ts.appAltStack = cur;
  } else if (!setOurs(sp)) {
    munmap(m, kAltStackBytes + kGuardBytes);
    return;
  }
  ts.altStack = sp;
}

void signalsEndThreadStack(ThreadState& ts) {
  if (!ts.altStack) return;
  stack_t cur{};
  if (oursIsSet(&ts, cur)) {
    if (cur.ss_flags & SS_ONSTACK) return;  // ended from a handler running on it: left mapped
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    if (kernelSigaltstack(&off, nullptr) != 0) return;
  }
  munmap(static_cast<char*>(ts.altStack) - kGuardBytes, kAltStackBytes + kGuardBytes);
  ts.altStack = nullptr;
}

int appSigaltstack(const stack_t* ss, stack_t* old) {
  ThreadState* ts = currentThread();
  stack_t cur{};
  if (!oursIsSet(ts, cur)) {
    int rc = kernelSigaltstack(ss, old);
    if (rc == 0 && ss && ts) {
      // The application disabled its own: ours again, where the thread has one.
      if (ss->ss_flags & SS_DISABLE) {
        ts->appAltStack = stack_t{};
        if (ts->altStack) setOurs(ts->altStack);
      } else {
        ts->appAltStack = *ss;
      }
    }
    return rc;
  }
  // Ours is set: the application sees none (unless a handler runs on it now: then as it is).
  if (old) {
    *old = cur;
    if (!(cur.ss_flags & SS_ONSTACK)) {
      old->ss_sp = nullptr;
      old->ss_size = 0;
      old->ss_flags = SS_DISABLE;
    }
  }
  if (!ss || (ss->ss_flags & SS_DISABLE)) return 0;
  const int rc = kernelSigaltstack(ss, nullptr);  // the application's replaces ours (still mapped)
  if (rc == 0) ts->appAltStack = *ss;
  return rc;
}

}  // namespace hpc::rt
