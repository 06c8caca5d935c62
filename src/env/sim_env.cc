#include "env/sim_env.h"

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
  *alive_ = false;  // anything the frames' destructors schedule never runs
  DestroyTasks();
}

WallTime SimEnv::WallNow() const {
  return wall_origin_ +
         std::chrono::duration_cast<std::chrono::milliseconds>(world_.Now().time_since_epoch() +
                                                               wall_skew_);
}

void SimEnv::Post(std::function<void()> fn) {
  world_.Schedule(world_.Now(), [alive = alive_, fn = std::move(fn)] {
    if (*alive) fn();
  });
}

void SimEnv::PostFromAnyThread(std::function<void()>) {
  WK_CHECK(false, "PostFromAnyThread in the simulator: real threads cannot be simulated");
}

Env::TimerId SimEnv::StartTimer(MonoTime deadline, std::function<void()> fn) {
  return world_.Schedule(deadline, [alive = alive_, fn = std::move(fn)] {
    if (*alive) fn();
  });
}

void SimEnv::CancelTimer(TimerId id) { world_.Cancel(id); }

}  // namespace wk
