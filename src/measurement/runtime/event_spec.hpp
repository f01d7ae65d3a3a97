// The event list as the launcher hands it to libhpcrun.so through HPCRUN_EVENT_LIST:
//   EVENT[;EVENT]...   EVENT = NAME[#type,config,config1,config2]@[f]NUMBER
// or, for a member of a counter group (hpcrun -e LEADER,MEMBER...), NAME#...@=K where K is
// its leader's index in the list: counted, not sampled, read at each of the leader's samples.
// The '#' part carries a perf_event attr already resolved by the launcher (with libpfm4), so
// the runtime needs no event tables. Header-only and allocation-free: the runtime parses it
// in its constructor, the launcher uses the same code to validate what the user typed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpc::measurement {

enum class SourceKind : uint8_t { None, CpuTime, RealTime, Perf, IoRead, IoWrite, MemAlloc, MemFree };

// Bytes moved by the application's I/O calls (read/write and their kin, fread/fwrite), at
// each call's own calling context: not sampled, every call counts. `-e IO` is both.
inline bool isIo(SourceKind k) { return k == SourceKind::IoRead || k == SourceKind::IoWrite; }
// The bytes of the application's heap allocations tracked by `-e MEMLEAK` (memleak.hpp), at
// the allocating context: allocated, and freed again.
inline bool isMem(SourceKind k) { return k == SourceKind::MemAlloc || k == SourceKind::MemFree; }
// Counted by wrappers of the application's calls, not sampled: no period, integer values.
inline bool isCounted(SourceKind k) { return isIo(k) || isMem(k); }

struct EventSpec {
  static constexpr size_t kNameMax = 96;
  char name[kNameMax] = {};  // as typed, e.g. "CPUTIME" or "perf::cpu-clock"
  SourceKind kind = SourceKind::None;
  bool frequency = false;    // @fN: N samples/s (perf only)
  bool explicitRate = false; // the user wrote @...
  uint64_t value = 0;        // period (µs for timers, events for perf) or frequency
  bool member = false;       // a counter group's member (perf only): read at its leader's samples
  uint8_t leader = 0;        // the leader's index, where member
  bool resolved = false;     // perf attr fields below are valid
  uint32_t perfType = 0;
  uint64_t perfConfig = 0, perfConfig1 = 0, perfConfig2 = 0;
};

constexpr uint64_t kDefaultTimerPeriodUs = 5000;
constexpr uint64_t kDefaultPerfFrequency = 300;
constexpr size_t kMaxEvents = 8;

namespace detail {
inline bool eq(const char* a, size_t n, const char* b) {
  size_t i = 0;
  for (; i < n && b[i]; ++i)
    if (a[i] != b[i]) return false;
  return i == n && b[i] == 0;
}
inline bool parseU64(const char* s, size_t n, uint64_t& out) {
  if (n == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    uint64_t d = uint64_t(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}
}  // namespace detail

// Parses one event of length n. Returns nullptr on success, else a static message.
inline const char* parseEvent(const char* s, size_t n, EventSpec& ev) {
  ev = EventSpec{};
  size_t at = n, hash = n;
  for (size_t i = 0; i < n; ++i) {
    if (s[i] == '@' && at == n) at = i;
    if (s[i] == '#' && hash == n && at == n) hash = i;
  }
  size_t nameLen = hash < at ? hash : at;
  if (nameLen == 0) return "empty event name";
  if (nameLen >= EventSpec::kNameMax) return "event name too long";
  for (size_t i = 0; i < nameLen; ++i) ev.name[i] = s[i];
  if (detail::eq(s, nameLen, "CPUTIME")) ev.kind = SourceKind::CpuTime;
  else if (detail::eq(s, nameLen, "REALTIME")) ev.kind = SourceKind::RealTime;
  else if (nameLen > 6 && detail::eq(s, 6, "perf::")) ev.kind = SourceKind::Perf;
  else if (detail::eq(s, nameLen, "IO::read")) ev.kind = SourceKind::IoRead;
  else if (detail::eq(s, nameLen, "IO::write")) ev.kind = SourceKind::IoWrite;
  else if (detail::eq(s, nameLen, "MEMLEAK::alloc")) ev.kind = SourceKind::MemAlloc;
  else if (detail::eq(s, nameLen, "MEMLEAK::free")) ev.kind = SourceKind::MemFree;
  else return "unknown event (expected CPUTIME, REALTIME, IO, MEMLEAK or perf::NAME)";
  if (isCounted(ev.kind)) {  // every call counts: no period
    ev.value = 1;
    return at == n || detail::eq(s + at, n - at, "@1") ? nullptr : "IO and MEMLEAK take no period";
  }

  if (hash < at) {
    uint64_t f[4] = {};
    size_t k = 0, start = hash + 1;
    for (size_t i = hash + 1; i <= at; ++i) {
      if (i == at || s[i] == ',') {
        if (k == 4 || !detail::parseU64(s + start, i - start, f[k])) return "bad perf attr";
        ++k;
        start = i + 1;
      }
    }
    if (k != 4) return "bad perf attr";
    ev.resolved = true;
    ev.perfType = uint32_t(f[0]);
    ev.perfConfig = f[1];
    ev.perfConfig1 = f[2];
    ev.perfConfig2 = f[3];
  }

  if (at == n) {
    ev.frequency = ev.kind == SourceKind::Perf;
    ev.value = ev.frequency ? kDefaultPerfFrequency : kDefaultTimerPeriodUs;
    return nullptr;
  }
  const char* r = s + at + 1;
  size_t rn = n - at - 1;
  ev.explicitRate = true;
  if (rn > 0 && r[0] == '=') {
    uint64_t k = 0;
    if (ev.kind != SourceKind::Perf) return "only perf:: events can be members of a counter group";
    if (!detail::parseU64(r + 1, rn - 1, k) || k >= kMaxEvents) return "bad counter group leader";
    ev.member = true;
    ev.leader = uint8_t(k);
    ev.value = 1;
    return nullptr;
  }
  if (rn > 0 && r[0] == 'f') {
    if (ev.kind != SourceKind::Perf) return "@f (frequency) is only valid for perf:: events";
    ev.frequency = true;
    ++r;
    --rn;
  }
  if (!detail::parseU64(r, rn, ev.value)) return "period must be a positive decimal integer";
  if (ev.value == 0) return "period must be positive";
  if (ev.kind != SourceKind::Perf && ev.value < 10) return "timer period below 10 microseconds";
  if (ev.frequency && ev.value > 100000) return "frequency above 100000 samples/s";
  return nullptr;
}

// Calls fn(const char* event, size_t len) for each ';'-separated event.
template <typename Fn>
inline void forEachEvent(const char* list, Fn&& fn) {
  const char* p = list;
  while (p && *p) {
    const char* e = p;
    while (*e && *e != ';') ++e;
    if (e > p) fn(p, size_t(e - p));
    p = *e ? e + 1 : e;
  }
}

}  // namespace hpc::measurement
