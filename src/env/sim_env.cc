#include "env/sim_env.h"

#include <algorithm>

namespace wk {

SimWorld::EventId SimWorld::Schedule(MonoTime at, std::function<void()> fn) {
  if (at < now_) at = now_;
  EventId id = next_id_++;
  queue_.push(Event{at, next_seq_++, id, std::move(fn)});
  return id;
}

void SimWorld::Cancel(EventId id) { cancelled_.insert(id); }

bool SimWorld::RunOne() {
  while (!queue_.empty()) {
    // Moving out of top() is safe: the element is popped before anything else reads it.
    Event ev = std::move(const_cast<Event&>(queue_.top()));
    queue_.pop();
    if (cancelled_.erase(ev.id) > 0) continue;
    now_ = ev.at;
    ev.fn();
    return true;
  }
  return false;
}

std::size_t SimWorld::RunUntilIdle(std::size_t max_events) {
  std::size_t n = 0;
  while (n < max_events && RunOne()) ++n;
  return n;
}

void SimWorld::RunFor(Duration d) {
  const MonoTime end = now_ + d;
  while (!queue_.empty()) {
    const Event& top = queue_.top();
    if (cancelled_.count(top.id) > 0) {
      cancelled_.erase(top.id);
      queue_.pop();
      continue;
    }
    if (top.at > end) break;
    RunOne();
  }
  now_ = end;
}

bool SimWorld::RunUntil(const std::function<bool()>& done, Duration limit) {
  const MonoTime end = now_ + limit;
  while (!done()) {
    if (queue_.empty()) return done();
    if (queue_.top().at > end) {
      now_ = end;
      return done();
    }
    RunOne();
  }
  return true;
}

SimEnv::SimEnv(SimWorld& world, WallTime wall_origin, Duration wall_skew)
    : world_(world), wall_origin_(wall_origin), wall_skew_(wall_skew), rng_(world.NextSeed()) {}

SimEnv::~SimEnv() {
  state_->alive = false;  // anything the frames' destructors schedule never runs
  state_->backlog.clear();
  DestroyTasks();
}

WallTime SimEnv::WallNow() const {
  return wall_origin_ +
         std::chrono::duration_cast<std::chrono::milliseconds>(world_.Now().time_since_epoch() +
                                                               wall_skew_);
}

void SimEnv::Deliver(const std::shared_ptr<State>& state, TimerId id, std::function<void()>& fn) {
  if (!state->alive) return;
  if (state->frozen) {
    state->backlog.emplace_back(id, std::move(fn));
    return;
  }
  fn();
}

void SimEnv::Post(std::function<void()> fn) {
  world_.Schedule(world_.Now(), [state = state_, fn = std::move(fn)]() mutable { Deliver(state, 0, fn); });
}

void SimEnv::PostFromAnyThread(std::function<void()>) {
  WK_CHECK(false, "PostFromAnyThread in the simulator: real threads cannot be simulated");
}

Env::TimerId SimEnv::StartTimer(MonoTime deadline, std::function<void()> fn) {
  auto id = std::make_shared<TimerId>(0);
  *id = world_.Schedule(deadline, [state = state_, id, fn = std::move(fn)]() mutable { Deliver(state, *id, fn); });
  return *id;
}

void SimEnv::CancelTimer(TimerId id) {
  world_.Cancel(id);
  if (state_->requeued.count(id) > 0) state_->cancelled.insert(id);
  // A timer that came due while frozen waits in the backlog.
  std::erase_if(state_->backlog, [id](const auto& e) { return e.first == id; });
}

void SimEnv::Freeze() { state_->frozen = true; }

void SimEnv::Thaw(bool posts_first) {
  if (!state_->frozen) return;
  state_->frozen = false;
  if (posts_first) {
    std::stable_partition(state_->backlog.begin(), state_->backlog.end(), [](const auto& e) { return e.first == 0; });
  }
  // Everything that came due runs now, in its order, as ordinary events (a callback may
  // freeze the env again; the rest then waits once more).
  auto backlog = std::move(state_->backlog);
  state_->backlog.clear();
  for (auto& [id, fn] : backlog) {
    if (id != 0) state_->requeued.insert(id);
    world_.Schedule(world_.Now(), [state = state_, id = id, fn = std::move(fn)]() mutable {
      if (id != 0) {
        state->requeued.erase(id);
        if (state->cancelled.erase(id) > 0) return;
      }
      Deliver(state, id, fn);
    });
  }
}

}  // namespace wk
