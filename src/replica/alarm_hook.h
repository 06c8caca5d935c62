// AlarmIndexHook: what a replica tells the alarm index about its actor's alarm, so that the
// index keeps its invariant: whenever the durable state holds alarm T, an entry (actor, T)
// exists (docs/alarms.md, "The invariant, and the three rules that keep it"). "Alarm" here is
// the state's indexed time (actor/storage.h: the alarm, or the wake entry's time when
// earlier), so an actor that must be started is found like one whose alarm is due. Guarantees of
// the replica's side: a batch setting the alarm is reported before any segment holding it is
// sent, and waits for its entry; Durable(seq, alarm) only after every batch up to seq was
// acknowledged through the valid hold's gate; Fenced only after the hold's fence was.
// Implemented by alarms::AlarmIndex. Threading: every call on the Env loop thread. Details:
// docs/internals.md, "AlarmIndexHook".
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
  // resumed_after: 0 for a new hold; for a sleeping hold that wakes, its last batch number
  // before it slept (its entries up to there are an earlier life's, judged like earlier
  // holds'; its batches go on after it).
  virtual void Opened(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm,
                      std::function<bool()> is_valid, std::uint64_t resumed_after) = 0;
  virtual void Committed(const ActorId& actor, Generation generation, std::uint64_t seq,
                         std::optional<std::int64_t> alarm, std::function<void(Status)> entry_written) = 0;
  virtual void Durable(const ActorId& actor, Generation generation, std::uint64_t seq,
                       std::optional<std::int64_t> alarm) = 0;
  virtual void Fenced(const ActorId& actor, Generation generation) = 0;
  virtual void Closed(const ActorId& actor, Generation generation, std::optional<std::int64_t> alarm) = 0;
};

}  // namespace wk::replica
