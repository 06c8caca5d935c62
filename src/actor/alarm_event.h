// Alarm events: the rules every host of actors applies when it runs an actor's alarm
// (docs/alarms.md, "What is promised"), in one place so the V8 runtime (runtime.h) and the
// simulator's native host (sim/native_actor_host.h) apply the same ones.
//
//   - An alarm event runs the handler only if the actor's committed state holds an alarm
//     and that alarm is due on this node's clock (AlarmDue): a stale index entry, a
//     deleted or a replaced alarm never fires (rule 3 of docs/alarms.md).
//   - The alarm is cleared when the handler starts; a handler that sets it again re-arms
//     it in the same batch.
//   - A handler that fails has its writes discarded (the alarm stays, for a retry); on the
//     last attempt (AlarmEvent::last_attempt) a failure clears the alarm instead.
//
// Threading: pure functions and value types.
#pragma once

#include <cstdint>
#include <optional>

#include "base/broken_models.h"

namespace wk::actor {

// What the node delivering an alarm tells the event.
struct AlarmEvent {
  // 0 on the first run of this alarm on this node; n on its n-th retry (alarm_retry_count).
  std::int32_t retry_count = 0;
  // The retries are used up: if this run fails, the alarm is cleared.
  bool last_attempt = false;
};

// How early the broken model fire-before-due runs an alarm.
inline constexpr std::int64_t kFireBeforeDueMs = 2000;

// The earliest time, on the node's wall clock (Unix ms), at which an alarm of `alarm_ms` may
// run: the alarm's own time (kFireBeforeDueMs earlier under the broken model
// fire-before-due). Every timer that delivers alarms, and AlarmDue, ask it: one place.
inline std::int64_t EarliestFireMs(std::int64_t alarm_ms, const BrokenModels& broken) {
  return broken.on(BrokenModel::kFireBeforeDue) ? alarm_ms - kFireBeforeDueMs : alarm_ms;
}

// Whether an alarm event that finds `alarm` in the actor's committed state at `now_ms` runs
// the handler.
inline bool AlarmDue(std::optional<std::int64_t> alarm, std::int64_t now_ms, const BrokenModels& broken) {
  return alarm.has_value() && EarliestFireMs(*alarm, broken) <= now_ms;
}

}  // namespace wk::actor
