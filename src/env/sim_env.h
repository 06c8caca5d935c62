// SimWorld and SimEnv: deterministic virtual time for tests and the simulator.
//
// A SimWorld is one timeline: a queue of callbacks ordered by (virtual time, insertion
// order). Nothing runs unless the test drives the world (RunUntilIdle, RunFor, RunUntil),
// so a run is a pure function of the code and the seed. Each simulated node gets its own
// SimEnv on the world, with its own wall-clock skew and its own random stream.
//
// Freezing (SimEnv::Freeze/Thaw) models a process that stops running for a while (a long
// GC pause, SIGSTOP, a VM migration) and then carries on with its memory as it was: while
// frozen, nothing of that node runs; its posts and timers that come due wait, and run in
// their order at the thaw. Virtual time goes on meanwhile, so the thawed node sees its
// monotonic clock jump.
//
// Threading: single-threaded by construction. PostFromAnyThread is refused: code that
// needs real threads (file I/O pools, sockets) is real-runtime code and has no place in a
// simulation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <optional>
#include <queue>
#include <random>
#include <unordered_set>
#include <vector>

#include "env/env.h"

namespace wk {

class SimWorld {
 public:
  explicit SimWorld(std::uint64_t seed) : seed_(seed), rng_(seed) {}

  std::uint64_t seed() const { return seed_; }
  MonoTime Now() const { return now_; }

  using EventId = std::uint64_t;
  // Schedules fn at time at (clamped to now). Equal times run in scheduling order.
  EventId Schedule(MonoTime at, std::function<void()> fn);
  void Cancel(EventId id);

  // Runs the next event, advancing time to it. Returns false when the queue is empty.
  bool RunOne();
  // Runs until the queue is empty or max_events ran. Returns the number run.
  std::size_t RunUntilIdle(std::size_t max_events = 10'000'000);
  // Runs every event due within d of now, then sets the time to now + d.
  void RunFor(Duration d);
  // Runs until done() holds, the queue empties, or virtual time passes limit from now.
  // Returns done().
  bool RunUntil(const std::function<bool()>& done, Duration limit);

  // A seed for one node's random stream, drawn from the world's.
  std::uint64_t NextSeed() { return rng_(); }

 private:
  struct Event {
    MonoTime at;
    std::uint64_t seq;
    EventId id;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  std::uint64_t seed_;
  std::mt19937_64 rng_;
  MonoTime now_{Duration(0)};
  std::uint64_t next_seq_ = 0;
  EventId next_id_ = 1;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::unordered_set<EventId> cancelled_;
};

class SimEnv final : public Env {
 public:
  // wall_origin is this node's wall clock at virtual time zero; skew shifts it further.
  SimEnv(SimWorld& world, WallTime wall_origin, Duration wall_skew = Duration(0));
  ~SimEnv() override;

  WallTime WallNow() const override;
  MonoTime MonoNow() const override { return world_.Now(); }
  void Post(std::function<void()> fn) override;
  void PostFromAnyThread(std::function<void()> fn) override;
  TimerId StartTimer(MonoTime deadline, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;
  std::uint64_t RandomU64() override { return rng_(); }

  void set_wall_skew(Duration skew) { wall_skew_ = skew; }
  SimWorld& world() { return world_; }

  // See "Freezing" above. Freeze on a frozen env, or Thaw on one that is not, does nothing.
  // posts_first: at the thaw, what was posted (deliveries, resumptions) runs before the
  // timers that came due, as a loop that polls its sockets before its timer queue would;
  // otherwise everything runs in the order it came due.
  void Freeze();
  void Thaw(bool posts_first = false);
  bool frozen() const { return state_->frozen; }

 private:
  struct State {
    // False once the SimEnv is destroyed: events of this node still queued do nothing, so a
    // destroyed SimEnv leaves nothing behind that would call into it.
    bool alive = true;
    bool frozen = false;
    // What came due while frozen, in order: (timer id, or 0 for a post; the callback).
    std::vector<std::pair<TimerId, std::function<void()>>> backlog;
    // Timers the thaw queued again (under new world events), and those of them cancelled
    // since: CancelTimer's id names the original event.
    std::unordered_set<TimerId> requeued;
    std::unordered_set<TimerId> cancelled;
  };
  static void Deliver(const std::shared_ptr<State>& state, TimerId id, std::function<void()>& fn);

  SimWorld& world_;
  WallTime wall_origin_;
  Duration wall_skew_;
  std::mt19937_64 rng_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Runs task on env, driving world until it finishes or limit of virtual time passes, and
// returns its value (nullopt if it did not finish). For tests and the simulator.
template <typename T>
std::optional<T> RunTask(SimWorld& world, Env& env, Task<T> task, Duration limit = std::chrono::hours(1)) {
  std::optional<T> out;
  env.Spawn([](Task<T> t, std::optional<T>* o) -> Task<void> { o->emplace(co_await std::move(t)); }(std::move(task), &out),
            "run task");
  world.RunUntil([&] { return out.has_value(); }, limit);
  return out;
}

}  // namespace wk
