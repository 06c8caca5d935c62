// HoldGate: the output gate of one hold — the one place that decides whether anything an
// actor did may be seen outside it (docs/storage.md, "The output gate").
//
// The rule. An answer, a `sync` returning, or any other effect visible outside the actor is
// released only when the writes it depends on are durable AND the node still holds the
// actor at that instant. WhenReleasable(seq, done) answers Ok only when every batch up to
// `seq` was acknowledged by the bucket while the hold was valid, and the hold is still valid
// when the answer is decided — every time, also for a sequence that became durable long
// ago, and for seq 0 ("nothing written": a read must still be answered by an owner).
//
// States (one field, `failure_`):
//   open --Cut / upload Late / validity found ended--> failed (sticky: never open again)
// A failed gate answers every waiter it holds, and every later WhenReleasable, with its
// failure (kRetryable): the actor's in-memory state is void and whoever runs it throws it
// away (the runtime closes the actor and restores it afresh under a new hold). As in
// workerd's output gate, a broken gate stays broken.
//
// Durability. The replica tells the gate when the bucket acknowledged a segment
// (Acknowledged(last_seq)); the gate asks the hold's validity at that instant. Acknowledged
// after validity ended is Late: the gate fails, nothing waiting on it is released.
//
// Threading. The hold's validity (`is_valid`, LeaseView::is_valid of the hold) reads the
// loop thread's cluster state, so it is asked on the Env loop thread only.
//   - WhenReleasable: any thread (the runtime calls it from the worker running the event).
//     A sequence not durable yet waits, and is decided on the loop thread by the
//     acknowledgement that covers it. An already durable one cannot be decided off the loop
//     (its validity must be asked now): it is handed to the loop with `post` and decided
//     there. `done` runs at once on the caller's thread only when the gate has already
//     failed; otherwise on the loop thread.
//   - Acknowledged, Cut, set_on_failed: loop thread.
//   - CutFromAnyThread: any thread; the gate fails at once (broken() is true on return),
//     its waiters and on_failed are answered on the loop thread.
//   - broken, failure, durable: any thread.
// An internal mutex guards the failure, the durable sequence and the waiters; callbacks
// are never called under it. Simulator-clean: no clock, thread or socket of its own (the
// simulator's `post` is Env::Post; the real runtime's is Env::PostFromAnyThread).
//
// Lifetime. Not copyable; closures handed to `post` keep the gate's state alive until they
// run (a gate destroyed first answers them with its failure: destroy it only after Cut).
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
