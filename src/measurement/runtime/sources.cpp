#include "sources.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "sys.hpp"

namespace hpc::rt {

namespace {

constexpr uint32_t kPerfRefresh = 1u << 20;  // overflows a perf event is armed for

// A draw from (0, n] for this thread and event, from its thread id, the event and the clock
// (splitmix64's finalizer over them).
uint64_t firstInterval(const ThreadState& ts, unsigned i, uint64_t n) {
  uint64_t z = monotonicNs() ^ (uint64_t(uint32_t(ts.tid)) << 32) ^ (uint64_t(i) << 24);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return n == 0 ? 0 : 1 + z % n;
}

// The kernel ids of the timers made lately (the last 256): a signal of one of ours queued
// before its timer was deleted can come after its thread took up new state (a failed exec:
// the thread's new timer has another id), and must not be taken for the application's.
constexpr unsigned kRecentTimers = 256;
std::atomic<int> gRecentTimers[kRecentTimers];
std::atomic<unsigned> gRecentNext{0};

void rememberTimer(int id) {
  gRecentTimers[gRecentNext.fetch_add(1, std::memory_order_relaxed) % kRecentTimers].store(id + 1,
                                                                                       std::memory_order_relaxed);
}

bool startTimer(ThreadState& ts, unsigned i, const EventSpec& ev) {
  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = gConfig.sampleSignal;
  sev.sigev_value.sival_int = int(i);
  sev._sigev_un._tid = ts.tid;
  clockid_t clock = ev.kind == SourceKind::CpuTime ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  // By the system call, not glibc's timer_create: the kernel's id is what each of its signals
  // carries (si_timerid), which tells ours from an application's timer on the same signal.
  if (syscall(SYS_timer_create, clock, &sev, &ts.timers[i]) != 0) return false;
  rememberTimer(ts.timers[i]);
  itimerspec its{};
  its.it_interval.tv_sec = time_t(ev.value / 1000000);
  its.it_interval.tv_nsec = long(ev.value % 1000000) * 1000;
  // The first interval is drawn from (0, period]: a thread running for T then expects T over
  // the period samples, each weighing a period, whatever T, so short threads count what they
  // cost on average. With a whole first period a thread shorter than one was never sampled
  // (800 threads of 0.4 ms each at REALTIME@1000: none of their time was seen), and every
  // thread lost its last partial period, half a period on average. (CPUTIME's timers advance
  // only at the kernel's tick, which still hides most threads shorter than a tick: README.)
  const uint64_t first = firstInterval(ts, i, ev.value * 1000);
  its.it_value.tv_sec = time_t(first / 1000000000);
  its.it_value.tv_nsec = long(first % 1000000000);
  if (syscall(SYS_timer_settime, ts.timers[i], 0, &its, nullptr) != 0) {
    syscall(SYS_timer_delete, ts.timers[i]);
    return false;
  }
  ts.timerLive[i] = true;
  return true;
}

// The kernel samples its clock events (cpu-clock, task-clock: nanoseconds, by an hrtimer)
// at a frequency by the fixed period 1 s / frequency; so do we, to draw their first period
// too (below). Other events at a frequency keep the kernel's adaptive periods: 0 for those.
uint64_t fixedPeriod(const EventSpec& ev) {
  const bool clock = ev.perfType == PERF_TYPE_SOFTWARE &&
                     (ev.perfConfig == PERF_COUNT_SW_CPU_CLOCK || ev.perfConfig == PERF_COUNT_SW_TASK_CLOCK);
  if (ev.frequency && !(clock && ev.value <= 1000000000ull)) return 0;
  return ev.frequency ? (ev.value ? 1000000000ull / ev.value : 0) : ev.value;
}

// The event's attributes as the launcher resolved them, counting in user mode only.
perf_event_attr userAttr(const EventSpec& ev) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = ev.perfType;
  attr.config = ev.perfConfig;
  attr.config1 = ev.perfConfig1;
  attr.config2 = ev.perfConfig2;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return attr;
}

// A counter group's member: counting only, in its leader's group (the kernel schedules the
// group's events together, so that where hardware counters are multiplexed a member counts
// exactly while its leader does). Its owner and signal set as the leader's, though it never
// signals: ownPerfFd tells it from a file of the application's on the same number.
bool startMember(ThreadState& ts, unsigned i, const EventSpec& ev) {
  const int leaderFd = ts.perfFd[ev.leader];
  if (!ev.resolved || leaderFd < 0) return false;
  perf_event_attr attr = userAttr(ev);
  int fd = int(syscall(SYS_perf_event_open, &attr, ts.tid, -1, leaderFd, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return false;
  fd = keptMoveHigh(fd);
  f_owner_ex owner{F_OWNER_TID, ts.tid};
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, gConfig.sampleSignal) != 0) {
    close(fd);
    return false;
  }
  ts.perfFd[i] = fd;
  ts.perfLast[i] = 0;
  ts.perfPeriod[i] = 0;
  ts.perfArmed[i] = 0;
  return true;
}

bool startPerf(ThreadState& ts, unsigned i, const EventSpec& ev) {
  if (ev.member) return startMember(ts, i, ev);
  if (!ev.resolved) return false;
  perf_event_attr attr = userAttr(ev);
  const uint64_t fixed = fixedPeriod(ev);
  const bool frequency = fixed == 0 && ev.frequency;
  const uint64_t period = ev.frequency ? (ev.value ? 1000000000ull / ev.value : 0) : ev.value;
  attr.freq = frequency;
  // A fixed period's first is drawn from (0, period] (as a timer's, above) and every sample
  // weighs a period: a thread counting N events then expects N over the period samples,
  // where with a whole first period a thread counting fewer than a period was never sampled
  // and each thread's last partial period was lost. The period itself is set at the first
  // overflow. A frequency leaves the periods to the kernel; samples weigh what was counted.
  const uint64_t first = frequency || period == 0 ? 0 : firstInterval(ts, i, period);
  if (frequency) attr.sample_freq = ev.value;
  else attr.sample_period = first;
  attr.disabled = 1;
  int fd = int(syscall(SYS_perf_event_open, &attr, ts.tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return false;
  // Above the numbers the application's own opens get (sys.hpp).
  fd = keptMoveHigh(fd);
  // Overflow notification as our real-time signal, sent to this thread only.
  f_owner_ex owner{F_OWNER_TID, ts.tid};
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, gConfig.sampleSignal) != 0 ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0) {
    close(fd);
    return false;
  }
  ts.perfFd[i] = fd;
  // The first sample's count (about `first`) less this is the period (modulo 2^64).
  ts.perfLast[i] = frequency ? 0 : first - period;
  ts.perfPeriod[i] = frequency || first == period ? 0 : period;
  // A drawn first period is armed for one overflow alone: the kernel then stops the event
  // until the handler sets the period and arms it for many. Armed for many at once, a short
  // first period overflowed again and again while a new thread still had the signal blocked
  // (each a queued real-time signal: 1,000 and more in a run of 200 short threads).
  ts.perfArmed[i] = ts.perfPeriod[i] ? 1 : kPerfRefresh;
  ioctl(fd, PERF_EVENT_IOC_REFRESH, int(ts.perfArmed[i]));
  return true;
}

}  // namespace

bool sourcesRecentTimer(int id) {
  for (const auto& t : gRecentTimers)
    if (t.load(std::memory_order_relaxed) == id + 1) return true;
  return false;
}

namespace {

// Whether fd is still this thread's perf event, as set up above: the application may have
// closed it (a daemon closes every descriptor) and opened one of its own on the number, which
// is then never closed or disabled by us.
bool ownPerfFd(const ThreadState& ts, int fd) {
  f_owner_ex owner{};
  return fcntl(fd, F_GETSIG) == gConfig.sampleSignal && fcntl(fd, F_GETOWN_EX, &owner) == 0 &&
         owner.type == F_OWNER_TID && owner.pid == ts.tid;
}

}  // namespace

bool sourcesStartThread(ThreadState& ts) {
  bool all = true;
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    const EventSpec& ev = gConfig.events[i];
    if (isCounted(ev.kind)) continue;  // counted by the calls' wrappers (io.cpp, memleak.cpp)
    bool ok = ev.kind == SourceKind::Perf ? startPerf(ts, i, ev) : startTimer(ts, i, ev);
    if (!ok) {
      ++ts.sourceFailures;
      all = false;
    }
  }
  return all;
}

void sourcesStopThread(ThreadState& ts) {
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    if (ts.timerLive[i]) {
      ts.timerLive[i] = false;
      syscall(SYS_timer_delete, ts.timers[i]);
    }
    int fd = ts.perfFd[i];
    if (fd >= 0) {
      ts.perfFd[i] = -1;
      if (ownPerfFd(ts, fd)) {
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        close(fd);
      }
    }
  }
}

int sourcesIdentify(ThreadState& ts, const siginfo_t* si, double& value) {
  if (si->si_code == SI_TIMER) {
    // Ours carry the event's index and the timer's id. A timer's signal with another value,
    // or with another id where this thread's timer for that index runs, is one of the
    // application's own on the sampling signal (before: taken for a sample, never delivered).
    // One of an index whose timer is not running is a signal of ours queued before its
    // timer was deleted (the kernel delivers it still): dropped.
    const int i = si->si_value.sival_int;
    if (i < 0 || unsigned(i) >= gConfig.nEvents || gConfig.events[i].kind == SourceKind::Perf ||
        isCounted(gConfig.events[i].kind))
      return kAppTimer;
    if (!ts.timerLive[i]) return -1;
    if (si->si_timerid != ts.timers[i]) return sourcesRecentTimer(si->si_timerid) ? -1 : kAppTimer;
    // An overrun means the timer expired more often than it was delivered (CPUTIME only
    // advances on the kernel tick): credit the time it stands for, not one period.
    double periods = 1.0 + (si->si_overrun > 0 ? si->si_overrun : 0);
    ++ts.timerSignals;
    ts.timerPeriods += uint64_t(periods);
    ts.periodsOf[i] += uint64_t(periods);
    value = periods * double(gConfig.events[i].value) * 1e-6;
    return i;
  }
  // A perf event's overflow comes from the kernel (POLL_IN, or POLL_HUP where its refresh
  // count ran out); one sent by a process (kill, sigqueue) has no si_fd.
  if (si->si_code <= 0) return -1;
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    int fd = ts.perfFd[i];
    if (fd < 0 || fd != si->si_fd) continue;
    // At a fixed period every sample weighs the period (the first, drawn shorter, too):
    // nothing to read, no system call. (Read, the count since the last sample was the period
    // but for a few events of jitter; a signal lost to a full queue is counted in the log.)
    if (const uint64_t fixed = fixedPeriod(gConfig.events[i]); fixed != 0) {
      value = double(fixed);
      return int(i);
    }
    // A signal queued before the application closed the event and opened a file of its own
    // on the number: nothing is read from that file.
    if (fcntl(fd, F_GETSIG) != gConfig.sampleSignal) return -1;
    uint64_t count = 0;
    if (read(fd, &count, sizeof count) != sizeof count) count = ts.perfLast[i];
    value = double(count - ts.perfLast[i]);
    ts.perfLast[i] = count;
    return int(i);
  }
  return -1;
}

bool sourcesReadMembers(ThreadState& ts, int leader, double* values) {
  bool any = false;
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    const EventSpec& ev = gConfig.events[i];
    if (!ev.member || ev.leader != unsigned(leader)) continue;
    any = true;
    values[i] = 0;
    const int fd = ts.perfFd[i];
    // Not read where the application closed it and opened a file of its own on the number.
    if (fd < 0 || fcntl(fd, F_GETSIG) != gConfig.sampleSignal) continue;
    uint64_t count = 0;
    if (read(fd, &count, sizeof count) != sizeof count) continue;
    values[i] = double(count - ts.perfLast[i]);
    ts.perfLast[i] = count;
  }
  return any;
}

void sourcesRearm(ThreadState& ts, int event) {
  if (event < 0 || ts.perfFd[event] < 0) return;
  if (ts.perfPeriod[event] != 0) {  // after the drawn first period, the event's own
    uint64_t period = ts.perfPeriod[event];
    ts.perfPeriod[event] = 0;
    if (ioctl(ts.perfFd[event], PERF_EVENT_IOC_PERIOD, &period) != 0) {
      // Left at the drawn period the event would sample far too often: stopped, and counted
      // with the sources that failed (the log says how many).
      if (ownPerfFd(ts, ts.perfFd[event])) close(ts.perfFd[event]);
      ts.perfFd[event] = -1;
      ++ts.sourceFailures;
      return;
    }
    ts.perfArmed[event] = kPerfRefresh;
    ioctl(ts.perfFd[event], PERF_EVENT_IOC_REFRESH, int(kPerfRefresh));
    return;
  }
  // The event was armed for many overflows at once: an ioctl per sample would cost a system
  // call each. Topped up long before the kernel's count runs out.
  if (--ts.perfArmed[event] > kPerfRefresh / 2) return;
  ioctl(ts.perfFd[event], PERF_EVENT_IOC_REFRESH, int(kPerfRefresh - ts.perfArmed[event]));
  ts.perfArmed[event] = kPerfRefresh;
}

}  // namespace hpc::rt
