// The functions libhpcrun.so exports to take control at the points of seed 003's libmonitor:
// process start, thread create/exit, fork, exec, exit paths, dlopen/dlclose and signal
// disposition. Each one resolves the next definition lazily with dlsym(RTLD_NEXT).
#include <dlfcn.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <threads.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "arena.hpp"
#include "deepbind.hpp"
#include "gpu/gpu.hpp"
#include "interpose.hpp"
#include "loadmap.hpp"
#include "process.hpp"
#include "signals.hpp"
#include "unwind.hpp"
#include "waits.hpp"

using namespace hpc::rt;

#define HPC_TRAMPOLINE __attribute__((noinline, used, section("hpcrun_tramp")))

namespace {

using MainFn = int (*)(int, char**, char**);
using StartMainFn = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);
using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);

StartMainFn real___libc_start_main;
PthreadCreateFn real_pthread_create;
void (*real_pthread_exit)(void*);
pid_t (*real_fork)();
ExecveFn real_execve;
ExecvFn real_execv;
ExecvFn real_execvp;
ExecveFn real_execvpe;
int (*real_fexecve)(int, char* const[], char* const[]);
int (*real_execveat)(int, const char*, char* const[], char* const[], int);
void (*real__exit)(int);
void (*real__Exit)(int);
long (*real_syscall)(long, ...);
int (*real_timer_create)(clockid_t, struct sigevent*, timer_t*);
int (*real_mq_notify)(mqd_t, const struct sigevent*);
void* (*real_dlopen)(const char*, int);
int (*real_dlclose)(void*);
int (*real_sigprocmask)(int, const sigset_t*, sigset_t*);
int (*real_pthread_sigmask)(int, const sigset_t*, sigset_t*);

MainFn gAppMain = nullptr;
volatile int gMainResult;

// Trampolines: the unwinder stops at a frame inside them, so their callees (main, a thread's
// start routine) are the outermost frames recorded. Code after each call keeps the call from
// becoming a tail jump, which would remove the trampoline's frame.
HPC_TRAMPOLINE int mainTrampoline(int argc, char** argv, char** envp) {
  processStartMain(reinterpret_cast<uintptr_t>(gAppMain));
  int rc = gAppMain(argc, argv, envp);
  processMainReturned();
  gMainResult = rc;
  return rc;
}

struct Launch {
  void* (*start)(void*);
  int (*startC11)(void*);
  void* arg;
};

// A new thread's Launch, handed from its creator to its trampoline: from a fixed pool (a
// page mapped and unmapped for each, as before, cost the creator an mmap and the new thread
// an munmap, which on a process with threads running is a TLB shootdown on each of them);
// from pageAlloc only while more than the pool's threads are starting at once.
constexpr int kLaunchPool = 64;
Launch gLaunch[kLaunchPool];
std::atomic<uint8_t> gLaunchUsed[kLaunchPool];

Launch* launchTake() {
  for (int i = 0; i < kLaunchPool; ++i)
    if (!gLaunchUsed[i].load(std::memory_order_relaxed) && !gLaunchUsed[i].exchange(1, std::memory_order_acquire))
      return &gLaunch[i];
  return static_cast<Launch*>(pageAlloc(sizeof(Launch)));
}

void launchGive(Launch* l) {
  if (l >= gLaunch && l < gLaunch + kLaunchPool) gLaunchUsed[l - gLaunch].store(0, std::memory_order_release);
  else pageFree(l, sizeof(Launch));
}

// Ends the thread's measurement as its start routine returns, and as a cancellation's forced
// unwind passes (before, a cancelled thread's profile waited for the process's end, its
// memory held until then: a program cancelling threads as it goes grew by each one). The
// state is the one the thread has then: a fork child's, or one taken up after a failed exec.
// glibc's cleanup buffer, not a destructor: the runtime is built without exceptions.
void endThread(void*) { threadEnd(currentThread()); }

HPC_TRAMPOLINE void* threadTrampoline(void* p) {
  Launch l = *static_cast<Launch*>(p);
  launchGive(static_cast<Launch*>(p));
  threadBegin(l.startC11 ? reinterpret_cast<uintptr_t>(l.startC11) : reinterpret_cast<uintptr_t>(l.start));
  void* rv;
  pthread_cleanup_push(endThread, nullptr);
  rv = l.startC11 ? reinterpret_cast<void*>(intptr_t(l.startC11(l.arg))) : l.start(l.arg);
  pthread_cleanup_pop(1);
  return rv;
}

int createThread(pthread_t* t, const pthread_attr_t* attr, void* (*start)(void*), int (*c11)(void*), void* arg) {
  // Threads of GPU runtimes (their start routine in the ICD loader, PoCL, ...) are not measured.
  if (start && gpu::ignoreThreadStart(reinterpret_cast<const void*>(start)))
    return REAL(pthread_create)(t, attr, start, arg);
  Launch* l = launchTake();
  if (!l) return EAGAIN;
  *l = Launch{start, c11, arg};
  int rc = REAL(pthread_create)(t, attr, threadTrampoline, l);
  if (rc != 0) launchGive(l);
  return rc;
}

// glibc runs a SIGEV_THREAD timer's callback (and a message queue's notification, mq_notify)
// on a thread it creates inside libc, past the pthread_create wrapper: such threads went
// unmeasured (20 callbacks of 8 ms: no sample at all). timer_create and mq_notify hand glibc
// this trampoline instead, with a record of the callback as
// its value; the trampoline measures the thread as threadTrampoline does. Records stay (a
// callback may run after its timer was deleted): a fixed table, one record per callback
// and value alike, so that timers made again and again with the same ones reuse it; where
// it is full, a timer's callbacks go unmeasured as before.
struct TimerCallback {
  std::atomic<uintptr_t> fn;  // 0: free; 1: being filled
  uintptr_t value;            // the sigval's bits
};
constexpr size_t kTimerCallbacks = 4096;
TimerCallback gTimerCallbacks[kTimerCallbacks];

uintptr_t sigvalBits(const union sigval& v) {
  uintptr_t bits = 0;
  static_assert(sizeof v <= sizeof bits);
  memcpy(&bits, &v, sizeof v);
  return bits;
}

TimerCallback* timerCallback(uintptr_t fn, uintptr_t value) {
  const size_t start = size_t((fn * 0x9e3779b97f4a7c15ull) ^ (value * 0xc2b2ae3d27d4eb4full)) % kTimerCallbacks;
  for (size_t i = 0; i < kTimerCallbacks; ++i) {
    TimerCallback& c = gTimerCallbacks[(start + i) % kTimerCallbacks];
    uintptr_t f = c.fn.load(std::memory_order_acquire);
    if (f == 0) {
      if (!c.fn.compare_exchange_strong(f, 1, std::memory_order_acquire)) continue;  // taken meanwhile
      c.value = value;
      c.fn.store(fn, std::memory_order_release);
      return &c;
    }
    if (f == fn && c.value == value) return &c;
  }
  return nullptr;
}

HPC_TRAMPOLINE void timerTrampoline(union sigval v) {
  const TimerCallback& c = *static_cast<const TimerCallback*>(v.sival_ptr);
  auto* fn = reinterpret_cast<void (*)(union sigval)>(c.fn.load(std::memory_order_acquire));
  union sigval arg;
  memcpy(&arg, &c.value, sizeof arg);
  // glibc starts these threads with every signal blocked (its helper thread's mask): the
  // sampling signal is let in, the application's stay as glibc set them.
  sigset_t ours;
  sigemptyset(&ours);
  sigaddset(&ours, gConfig.sampleSignal);
  syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &ours, nullptr, _NSIG / 8);
  threadBegin(reinterpret_cast<uintptr_t>(fn));
  pthread_cleanup_push(endThread, nullptr);
  fn(arg);
  pthread_cleanup_pop(1);
}

}  // namespace

HPC_EXPORT int timer_create(clockid_t clock, struct sigevent* sev, timer_t* id) {
  if (sev && sev->sigev_notify == SIGEV_THREAD && sev->sigev_notify_function)
    if (TimerCallback* c = timerCallback(reinterpret_cast<uintptr_t>(sev->sigev_notify_function), sigvalBits(sev->sigev_value))) {
      struct sigevent ours = *sev;
      ours.sigev_notify_function = timerTrampoline;
      ours.sigev_value.sival_ptr = c;
      return REAL(timer_create)(clock, &ours, id);
    }
  return REAL(timer_create)(clock, sev, id);
}

// A message queue's SIGEV_THREAD notification runs on a thread glibc creates the same way:
// measured through the same trampoline.
HPC_EXPORT int mq_notify(mqd_t q, const struct sigevent* sev) {
  if (sev && sev->sigev_notify == SIGEV_THREAD && sev->sigev_notify_function)
    if (TimerCallback* c = timerCallback(reinterpret_cast<uintptr_t>(sev->sigev_notify_function), sigvalBits(sev->sigev_value))) {
      struct sigevent ours = *sev;
      ours.sigev_notify_function = timerTrampoline;
      ours.sigev_value.sival_ptr = c;
      return REAL(mq_notify)(q, &ours);
    }
  return REAL(mq_notify)(q, sev);
}

int hpc::rt::realPthreadCreate(pthread_t* t, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  return REAL(pthread_create)(t, attr, start, arg);
}

namespace {

// An exec ends the measurement first: the image that follows knows nothing of it. Where the
// exec cannot start anything (no such file, not executable, not a regular file, as when
// execvp's search finds nothing), the measurement is not ended for it: the exec fails as it
// would bare. One that fails all the same (ENOEXEC, E2BIG, ...) takes the measurement up
// again (processResumeAfterFailedExec).
bool mayExecAt(int dirfd, const char* path, int flags) {
  struct stat st;
  if (!path) return false;
  if (*path == 0 && (flags & AT_EMPTY_PATH)) return fstat(dirfd, &st) == 0 && S_ISREG(st.st_mode);
  return fstatat(dirfd, path, &st, flags & AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         faccessat(dirfd, path, X_OK, AT_EACCESS) == 0;
}

bool mayExec(const char* path) { return mayExecAt(AT_FDCWD, path, 0); }

// Whether execvp's search (glibc's: $PATH, or /bin:/usr/bin without it; an empty entry is the
// working directory) finds a file it could start.
bool mayExecSearched(const char* file) {
  if (!file || !*file) return false;
  for (const char* c = file; *c; ++c)
    if (*c == '/') return mayExec(file);
  const char* path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  const size_t flen = strlen(file);
  char buf[4096];
  for (const char* dir = path;; ++dir) {
    const char* end = dir;
    while (*end && *end != ':') ++end;
    const size_t dlen = size_t(end - dir);
    if (dlen + 1 + flen < sizeof buf) {
      size_t n = 0;
      if (dlen) {
        memcpy(buf, dir, dlen);
        n = dlen;
        buf[n++] = '/';
      }
      memcpy(buf + n, file, flen + 1);
      if (mayExec(buf)) return true;
    }
    if (!*end) return false;
    dir = end;
  }
}

void finalizeForExec() {
  SuspendSampling guard;
  processFinalize("exec");
}

// The exec returned: it failed.
int execFailed(int rc) {
  const int err = errno;
  processResumeAfterFailedExec(err);
  errno = err;
  return rc;
}

}  // namespace

__attribute__((constructor)) static void hpcrunConstructor() {
  REAL(syscall);  // not in a signal handler, later
  processInit();
}

HPC_EXPORT int __libc_start_main(MainFn main, int argc, char** argv, void (*init)(), void (*fini)(),
                                 void (*rtldFini)(), void* stackEnd) {
  gAppMain = main;
  return REAL(__libc_start_main)(mainTrampoline, argc, argv, init, fini, rtldFini, stackEnd);
}

HPC_EXPORT int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  return createThread(t, attr, start, nullptr, arg);
}

HPC_EXPORT int thrd_create(thrd_t* t, thrd_start_t fn, void* arg) {
  int rc = createThread(reinterpret_cast<pthread_t*>(t), nullptr, nullptr, fn, arg);
  return rc == 0 ? thrd_success : rc == ENOMEM ? thrd_nomem : thrd_error;
}

HPC_EXPORT void pthread_exit(void* rv) {
  threadEnd(currentThread());
  REAL(pthread_exit)(rv);
  __builtin_unreachable();
}

HPC_EXPORT void thrd_exit(int rv) { pthread_exit(reinterpret_cast<void*>(intptr_t(rv))); }

// The child's fresh measurement starts from a pthread_atfork handler (process.cpp), which
// glibc's own forks run too.
HPC_EXPORT pid_t fork() {
  SuspendSampling guard;
  return REAL(fork)();
}

// daemon(3) as its manual page says it behaves: a fork whose parent leaves with _exit(0) and
// whose child starts a new session, moves to / unless nochdir, and has stdin, stdout and
// stderr on /dev/null unless noclose. glibc's own forks inside libc and leaves by its
// internal _exit, which no wrapper sees: the parent's measurement (its work before
// daemonising) was never written. Here the parent leaves through our _exit.
HPC_EXPORT int daemon(int nochdir, int noclose) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child > 0) _exit(0);
  if (setsid() < 0) return -1;
  if (!nochdir) {
    [[maybe_unused]] const int rc = chdir("/");  // its failure is not daemon's, as in glibc
  }
  if (!noclose) {
    const int fd = open("/dev/null", O_RDWR);
    if (fd < 0) return -1;
    struct stat st;
    const int err = fstat(fd, &st) != 0 ? errno : !S_ISCHR(st.st_mode) ? ENODEV : 0;
    if (err) {
      close(fd);
      errno = err;
      return -1;
    }
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO) close(fd);
  }
  return 0;
}

// vfork stays a vfork: the child runs in the parent's memory, on its stack, until it execs or
// exits, and the parent waits. Made a fork (as libmonitor does), it copied the page tables of
// the whole process (CPython's subprocess, which vforks, paid that per child) and could fail
// with ENOMEM under strict overcommit where the vfork would not; and code relying on the
// shared memory (undefined by POSIX, Linux's behaviour) saw otherwise. The system call is
// made from a frame-less stub, as glibc's own: the return address is held in a register over
// it, so the child returning and calling on cannot clobber it for the parent. Each side then
// calls hpcVforkReturned: the child marks itself in the thread-local storage it shares with
// the waiting parent thread (finalization off, and where the thread is measured its samples
// and I/O counts: its exec or exit writes nothing of the parent's, measured thread or not),
// and the parent, resumed once the child has exec'd or exited, clears the mark.
#if defined(__x86_64__)
extern "C" __attribute__((visibility("hidden"), used)) long hpcVforkReturned(long raw) {
  if (raw < 0 && raw >= -4095) {
    errno = int(-raw);
    return -1;
  }
  ThreadState* ts = currentThread();
  if (raw == 0) {
    if (ts) ++ts->suspend;
    setVforkChild(true);
  } else if (inVforkChild()) {
    setVforkChild(false);
    if (ts) --ts->suspend;
  }
  return raw;
}

asm(R"(
    .text
    .globl vfork
    .type vfork, @function
    .p2align 4
vfork:
    .cfi_startproc
    endbr64
    popq %rdi
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rdi
    movl $58, %eax
    syscall
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rip, 0
    movq %rax, %rdi
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call hpcVforkReturned
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    # Under a shadow stack (CET; rdsspq leaves %rsi 0 where there is none) the child, which
    # shares it with the parent, returns by an indirect jump, as glibc's vfork does: a ret
    # would pop the parent's entry.
    xorl %esi, %esi
    rdsspq %rsi
    testq %rsi, %rsi
    je 1f
    testq %rax, %rax
    jnz 1f
    popq %rdi
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rdi
    jmp *%rdi
1:
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rip, 0
    ret
    .cfi_endproc
    .size vfork, .-vfork
)");
#else
HPC_EXPORT pid_t vfork() { return fork(); }
#endif

HPC_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  if (!mayExec(path)) return REAL(execve)(path, argv, envp);
  finalizeForExec();
  return execFailed(REAL(execve)(path, argv, envp));
}

HPC_EXPORT int execv(const char* path, char* const argv[]) {
  if (!mayExec(path)) return REAL(execv)(path, argv);
  finalizeForExec();
  return execFailed(REAL(execv)(path, argv));
}

HPC_EXPORT int execvp(const char* file, char* const argv[]) {
  if (!mayExecSearched(file)) return REAL(execvp)(file, argv);
  finalizeForExec();
  return execFailed(REAL(execvp)(file, argv));
}

HPC_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  if (!mayExecSearched(file)) return REAL(execvpe)(file, argv, envp);
  finalizeForExec();
  return execFailed(REAL(execvpe)(file, argv, envp));
}

// glibc's own fexecve and execveat call the kernel directly: without these the image before
// them was never written.
HPC_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  if (!mayExecAt(fd, "", AT_EMPTY_PATH)) return REAL(fexecve)(fd, argv, envp);
  finalizeForExec();
  return execFailed(REAL(fexecve)(fd, argv, envp));
}

HPC_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  if (!mayExecAt(dirfd, path, flags)) return REAL(execveat)(dirfd, path, argv, envp, flags);
  finalizeForExec();
  return execFailed(REAL(execveat)(dirfd, path, argv, envp, flags));
}

namespace {
constexpr int kMaxExecArgs = 4096;
// Collects a NULL-terminated variadic argument list; returns the trailing envp for execle.
char* const* collectArgs(const char* first, va_list ap, char** argv, bool wantEnv) {
  int n = 0;
  argv[n++] = const_cast<char*>(first);
  while (n < kMaxExecArgs - 1 && (argv[n] = va_arg(ap, char*)) != nullptr) ++n;
  argv[n] = nullptr;
  return wantEnv ? va_arg(ap, char* const*) : nullptr;
}
}  // namespace

HPC_EXPORT int execl(const char* path, const char* arg, ...) {
  char* argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  collectArgs(arg, ap, argv, false);
  va_end(ap);
  return execv(path, argv);
}

HPC_EXPORT int execlp(const char* file, const char* arg, ...) {
  char* argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  collectArgs(arg, ap, argv, false);
  va_end(ap);
  return execvp(file, argv);
}

HPC_EXPORT int execle(const char* path, const char* arg, ...) {
  char* argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  char* const* envp = collectArgs(arg, ap, argv, true);
  va_end(ap);
  return execve(path, argv, envp);
}

HPC_EXPORT void _exit(int status) {
  processFinalize("_exit");
  REAL(_exit)(status);
  __builtin_unreachable();
}

HPC_EXPORT void _Exit(int status) {
  processFinalize("_Exit");
  REAL(_Exit)(status);
  __builtin_unreachable();
}

// The process ended by the system call itself (`syscall(SYS_exit_group, n)`, as some
// runtimes and test harnesses do): no exit path of libc's runs, and main's profile was lost.
// The runtime's own raw calls (in the sample handler too) come through here: the real
// function is looked up by the constructor, before any handler runs.
HPC_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  const long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
  const long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_exit_group) processFinalize("exit_group");
  auto* real = REAL(syscall);
  // A wait that a sample would end with EINTR (under REALTIME), kept whole as waits.cpp keeps
  // the libc wrappers' (before, libaio's io_getevents and a raw nanosleep failed with EINTR).
  if (isRawWait(number))
    if (long result; rawWait(real, number, {a, b, c, d, e, f}, result)) return result;
  return real(number, a, b, c, d, e, f);
}

// A library opened with RTLD_DEEPBIND binds libc's functions ahead of the runtime's: its
// interposed imports are pointed at the runtime's (deepbind.cpp), so that its threads are
// measured and its calls counted as everyone else's.
HPC_EXPORT void* dlopen(const char* file, int flags) {
  SuspendSampling guard;
  std::vector<uintptr_t> before;
  if (flags & RTLD_DEEPBIND) before = deepbindBefore();
  void* h = REAL(dlopen)(file, flags);
  if (h && (flags & RTLD_DEEPBIND)) deepbindRebind(h, before);
  loadmapRefresh();
  return h;
}

HPC_EXPORT int dlclose(void* handle) {
  SuspendSampling guard;
  int rc = REAL(dlclose)(handle);
  loadmapRefresh();
  unwindFlushCache();
  return rc;
}

HPC_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return virtualSigaction(sig, act, old);
}

HPC_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act{}, old{};
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;  // BSD semantics, as glibc's signal()
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  if (virtualSigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

HPC_EXPORT int sigaltstack(const stack_t* ss, stack_t* old) { return appSigaltstack(ss, old); }

HPC_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  if (maskCallInHandler(old)) return 0;
  sigset_t scratch;
  return REAL(sigprocmask)(how, filterMask(how, set, &scratch), old);
}

HPC_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  if (maskCallInHandler(old)) return 0;
  sigset_t scratch;
  return REAL(pthread_sigmask)(how, filterMask(how, set, &scratch), old);
}
