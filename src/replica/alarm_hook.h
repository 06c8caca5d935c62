// AlarmIndexHook: what a replica tells the alarm index about its actor's alarm, so that the
// index can keep its invariant (docs/alarms.md, "The invariant, and the three rules that
// keep it"): whenever the durable state holds alarm T, an index entry for (actor, T) exists.
//
// The replica's side of the rules:
//   1. Entry before state. Each committed batch that changes the alarm is reported
//      (Committed) in commit order, before any segment holding it is sent. For a set, the
//      segment carrying the batch (and so every later one) waits until the hook calls
//      `entry_written` with Ok; an error fails the replica (its gate: nothing of the event
//      is acknowledged).
//   2. Removal after durability. Durable(seq, alarm) is reported only once the bucket
//      acknowledged, through the hold's gate (valid at that instant), every batch up to
//      `seq`; `alarm` is the actor's alarm as of that batch. The index removes entries only
//      on such a report (or on an alarm event's released answer).
//   Fenced is reported once the bucket acknowledged the hold's fence (its first segment,
//      naming the chain it restored) while the hold was valid. Before that, a segment an
//      earlier hold still has in flight may land and, should this hold's fence never land,
//      be on the chain the next restore follows: so entries of earlier holds are judged only
//      after Fenced (simulator, `alarms` seed 303).
// Opened gives the restored (durable) alarm and the hold's validity; Closed ends the
// replica's reports.
//
// Implemented by alarms::AlarmIndex (src/alarms/alarm_index.h); the replica knows only this
// interface, so the replica layer does not depend on the alarms layer.
//
// Threading: every call on the Env loop thread. `entry_written` may be called on the loop
// thread at any later time, also after the replica failed or closed (it is then ignored).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "base/ids.h"
#include "base/status.h"

namespace wk::replica {

class AlarmIndexHook {
 public:
  virtual ~AlarmIndexHook() = default;
  virtual void Opened(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm,
                      std::function<bool()> is_valid) = 0;
  virtual void Committed(const ActorId& actor, Generation generation, std::uint64_t seq,
                         std::optional<std::int64_t> alarm, std::function<void(Status)> entry_written) = 0;
  virtual void Durable(const ActorId& actor, Generation generation, std::uint64_t seq,
                       std::optional<std::int64_t> alarm) = 0;
  virtual void Fenced(const ActorId& actor, Generation generation) = 0;
  virtual void Closed(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm) = 0;
};

}  // namespace wk::replica
