// Alarm events: the rules every host of actors applies when it runs an actor's alarm
// (docs/alarms.md, "What is promised"), in one place so the V8 executor and the simulator's
// native one apply the same: the handler runs only if the committed state holds an alarm
// due on this node's clock (AlarmDue), so a stale, deleted or replaced alarm never fires;
// the alarm is cleared as the handler starts (a handler may set it again in the same
// batch); a failed handler's writes are discarded and the alarm stays for a retry, except
// on the last attempt (AlarmEvent::last_attempt), where the failure clears it.
//
// Threading: pure functions and value types (SetAlarmAfter reads the storage: the event's
// thread).
#pragma once

#include <cstdint>
#include <optional>

#include "actor/storage.h"
#include "actor/types.h"
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

// What an alarm event reports once its batch is committed: the alarm and the indexed time
// (EventResult::alarm_after, indexed_after). Every host's alarm event ends with it.
inline void SetAlarmAfter(EventResult& result, const ActorStorage& storage) {
  result.alarm_after = storage.Alarm();
  result.indexed_after = storage.IndexedTime();
}

}  // namespace wk::actor
