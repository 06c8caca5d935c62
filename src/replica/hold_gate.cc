#include "replica/hold_gate.h"

#include <utility>
#include <vector>

#include "base/check.h"

namespace wk::replica {

using Waiters = std::multimap<std::uint64_t, std::function<void(Status)>>;

struct HoldGate::State {
  explicit State(Deps d) : deps(std::move(d)) {}

  Deps deps;
  mutable std::mutex mu;
  // ---- under mu
  std::optional<Status> failure;
  std::uint64_t durable = 0;  // every batch up to it acknowledged while the hold was valid
  Waiters waiters;            // by sequence, not durable yet
  // ---- loop thread only
  std::function<void(Status)> on_failed;

  // Fails the gate if it is open; returns the waiters it owes (empty if it had failed).
  bool MarkFailed(const Status& why, Waiters* owed) {
    WK_CHECK(!why.ok(), "the gate of " + deps.actor.ToString() + " failed with Ok: a failure must say why");
    std::lock_guard lock(mu);
    if (failure) return false;
    failure = why;
    owed->swap(waiters);
    return true;
  }

  // Loop thread: answers what a failure owes.
  void Settle(const Status& why, Waiters owed) {
    // Sticky: a gate that owes its waiters a failure never opens again.
    WK_CHECK(!current_failure().ok(), "the gate of " + deps.actor.ToString() + " settled its waiters while open");
    for (auto& [seq, fn] : owed) fn(why);
    if (auto fn = std::move(on_failed)) {
      on_failed = nullptr;
      fn(why);
    }
  }

  void FailOnLoop(const Status& why) {
    Waiters owed;
    if (MarkFailed(why, &owed)) Settle(why, std::move(owed));
  }

  Status current_failure() const {
    std::lock_guard lock(mu);
    return failure.value_or(Status::Ok());
  }

  Status HoldEnded() const {
    return Retryable("this node no longer holds " + deps.actor.ToString() + " (its hold at generation " +
                     std::to_string(deps.generation.value) + " ended); nothing more of it is released");
  }

  // Loop thread: a sequence already durable (or released early by a broken model). Its
  // answer needs the hold valid now.
  void DecideOnLoop(std::uint64_t seq, std::function<void(Status)> done) {
    if (Status f = current_failure(); !f.ok()) {
      done(std::move(f));
      return;
    }
    if (!deps.is_valid()) {
      FailOnLoop(HoldEnded());
      done(current_failure());
      return;
    }
    // The output gate's rule: nothing is released before it is durable.
    WK_CHECK(seq <= Durable() || deps.broken.on(BrokenModel::kAckBeforeDurable),
             "the gate of " + deps.actor.ToString() + " would release seq " + std::to_string(seq) +
                 " before it is durable");
    done(Status::Ok());
  }

  std::uint64_t Durable() const {
    std::lock_guard lock(mu);
    return durable;
  }
};

HoldGate::HoldGate(Deps deps) : s_(std::make_shared<State>(std::move(deps))) {
  WK_CHECK(s_->deps.is_valid && s_->deps.post, "a hold gate needs is_valid and post");
}

HoldGate::~HoldGate() {
  // Whatever still waits is owed an answer; on_failed is not (the owner is going away).
  s_->on_failed = nullptr;
  s_->FailOnLoop(Retryable("the gate of " + s_->deps.actor.ToString() + " was destroyed"));
}

void HoldGate::WhenReleasable(std::uint64_t seq, std::function<void(Status)> done) {
  State& s = *s_;
  Status answer;
  {
    std::lock_guard lock(s.mu);
    if (s.failure) {
      answer = *s.failure;
    } else if (seq > s.durable && !s.deps.broken.on(BrokenModel::kAckBeforeDurable)) {
      // Decided by the acknowledgement that covers it, which asks validity then.
      s.waiters.emplace(seq, std::move(done));
      return;
    } else if (s.deps.broken.on(BrokenModel::kReleaseWithoutValidity) && seq <= s.durable) {
      // Broken model: durable once is taken to be releasable forever.
      answer = Status::Ok();
    } else {
      // Durable already: validity must be asked now, on the loop thread.
      std::shared_ptr<State> state = s_;
      s.deps.post([state, seq, done = std::move(done)]() mutable { state->DecideOnLoop(seq, std::move(done)); });
      return;
    }
  }
  done(std::move(answer));
}

HoldGate::AckOutcome HoldGate::Acknowledged(std::uint64_t seq, std::string_view what) {
  State& s = *s_;
  if (s.current_failure().code() != Code::kOk) return AckOutcome::kBroken;
  if (!s.deps.is_valid() && !s.deps.broken.on(BrokenModel::kAckLateUpload)) {
    s.FailOnLoop(Retryable(std::string(what) + " was acknowledged after the hold's validity ended (Late)"));
    return AckOutcome::kLate;
  }
  Waiters ready;
  {
    std::lock_guard lock(s.mu);
    if (s.failure) return AckOutcome::kBroken;
    // One upload at a time (Replica::StartNextUpload): acknowledgements come in order.
    WK_CHECK(seq >= s.durable, "the gate of " + s.deps.actor.ToString() + ": seq " + std::to_string(seq) +
                                   " acknowledged after seq " + std::to_string(s.durable));
    if (seq > s.durable) s.durable = seq;
    auto end = s.waiters.upper_bound(s.durable);
    for (auto it = s.waiters.begin(); it != end; ++it) ready.emplace(it->first, std::move(it->second));
    s.waiters.erase(s.waiters.begin(), end);
  }
  for (auto& [waited, fn] : ready) fn(Status::Ok());
  return AckOutcome::kAcknowledged;
}

void HoldGate::Cut(Status why) { s_->FailOnLoop(why); }

void HoldGate::CutFromAnyThread(Status why) {
  Waiters owed;
  if (!s_->MarkFailed(why, &owed)) return;
  std::shared_ptr<State> state = s_;
  auto shared_owed = std::make_shared<Waiters>(std::move(owed));
  s_->deps.post([state, why, shared_owed] { state->Settle(why, std::move(*shared_owed)); });
}

void HoldGate::set_on_failed(std::function<void(Status)> fn) { s_->on_failed = std::move(fn); }

bool HoldGate::broken() const { return !s_->current_failure().ok(); }
Status HoldGate::failure() const { return s_->current_failure(); }
std::uint64_t HoldGate::durable() const { return s_->Durable(); }

}  // namespace wk::replica
