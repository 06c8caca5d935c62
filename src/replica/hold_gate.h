// HoldGate: the output gate of one hold, the one place that decides whether anything an
// actor did may be seen outside it (docs/storage.md, "The output gate"). Guarantees:
// WhenReleasable(seq) answers Ok only when every batch up to seq was acknowledged while the
// hold was valid and the hold is valid at the answer (also for seq 0 and for old seqs); an
// acknowledgement after validity ended (Late), a Cut, or validity found ended fails the gate
// for good, and every waiter then and later gets the failure (kRetryable). Threading:
// WhenReleasable, CutFromAnyThread and the accessors from any thread; the rest on the Env
// loop thread; callbacks never run under its mutex; simulator-clean. REQUIRES: destroy it
// only after Cut. Details: docs/internals.md, "HoldGate".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/broken_models.h"
#include "base/status.h"
#include "cluster/owner_record.h"

namespace wk::replica {

class HoldGate {
 public:
  struct Deps {
    // The hold's validity (loop thread only).
    std::function<bool()> is_valid;
    // Hands a function to the loop thread from any thread.
    std::function<void(std::function<void()>)> post;
    // For messages: the actor and the hold's generation.
    ActorId actor;
    Generation generation;
    // ack-before-durable, ack-late-upload, release-without-validity (base/broken_models.h).
    BrokenModels broken;
  };
  enum class AckOutcome : std::uint8_t {
    kAcknowledged,  // durable up to the sequence; waiters up to it released
    kLate,          // acknowledged after validity ended: the gate failed now
    kBroken,        // the gate had already failed: nothing changed
  };

  explicit HoldGate(Deps deps);
  ~HoldGate();
  HoldGate(const HoldGate&) = delete;
  HoldGate& operator=(const HoldGate&) = delete;

  // Any thread. Calls `done` once: Ok when every batch up to `seq` is durable and the hold
  // is valid at the moment of the answer; the gate's failure otherwise. A hold found no
  // longer valid fails the gate (the lost-lease cut: validity never comes back).
  void WhenReleasable(std::uint64_t seq, std::function<void(Status)> done);

  // Loop thread. The bucket acknowledged every batch up to `seq` (`what` names the upload,
  // for the Late message).
  AckOutcome Acknowledged(std::uint64_t seq, std::string_view what);
  // Loop thread. Fails the gate (sticky; a no-op if it already failed): pending waiters get
  // `why`, and then on_failed, before this returns.
  void Cut(Status why);
  // Any thread. As Cut, but the waiters and on_failed are answered on the loop thread.
  void CutFromAnyThread(Status why);
  // Loop thread. Called once, on the loop thread, when the gate fails.
  void set_on_failed(std::function<void(Status)> fn);

  bool broken() const;
  Status failure() const;  // Ok while open
  std::uint64_t durable() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

}  // namespace wk::replica
