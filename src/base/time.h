// Time types. Wall time and monotonic time are distinct types so that one can never be
// compared with the other by mistake.
//
// - WallTime: a node's wall clock (Unix epoch, millisecond resolution, the resolution the
//   bucket formats store, e.g. a node lease's written_at). Wall clocks of different nodes
//   disagree by up to the configured skew bound; only the ADR's bounds make them usable.
// - MonoTime: a node's monotonic clock (nanoseconds since an arbitrary origin). Only
//   differences are meaningful, and only within one process.
#pragma once

#include <chrono>
#include <cstdint>

namespace wk {

using Duration = std::chrono::nanoseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::microseconds;

struct WallClockTag {
  using duration = std::chrono::milliseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<WallClockTag, duration>;
  static constexpr bool is_steady = false;
};
struct MonoClockTag {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<MonoClockTag, duration>;
  static constexpr bool is_steady = true;
};

using WallTime = WallClockTag::time_point;
using MonoTime = MonoClockTag::time_point;

inline std::int64_t ToUnixMs(WallTime t) { return t.time_since_epoch().count(); }
inline WallTime FromUnixMs(std::int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }
inline double ToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace wk
