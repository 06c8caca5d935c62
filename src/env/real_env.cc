#include "env/real_env.h"

#include "env/spin.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>

namespace wk {

RealEnv::RealEnv() : rng_(std::random_device{}()) {
  // Mix in more entropy than one 32-bit random_device draw: instance tokens must differ
  // between processes started at the same moment.
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
  rng_.seed(seq);
}

RealEnv::~RealEnv() {
  DestroyTasks();
  timers_.clear();
}

WallTime RealEnv::WallNow() const {
  auto now = std::chrono::system_clock::now() + wall_skew_;
  return WallTime(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()));
}

MonoTime RealEnv::MonoNow() const {
  return MonoTime(std::chrono::duration_cast<Duration>(
      std::chrono::steady_clock::now().time_since_epoch()));
}

void RealEnv::Post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

void RealEnv::PostFromAnyThread(std::function<void()> fn) {
  boost::asio::post(io_, std::move(fn));  // io_context::post is thread-safe
}

Env::TimerId RealEnv::StartTimer(MonoTime deadline, std::function<void()> fn) {
  TimerId id = next_timer_++;
  auto timer = std::make_unique<boost::asio::steady_timer>(io_);
  // MonoNow is steady_clock's epoch, so the deadline converts directly.
  timer->expires_at(std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline.time_since_epoch())));
  timer->async_wait([this, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled
    if (timers_.erase(id) == 0) return;
    fn();
  });
  timers_.emplace(id, std::move(timer));
  return id;
}

void RealEnv::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  it->second->cancel();
  // The handler still runs (with operation_aborted) and holds no reference to the timer;
  // destroying the timer object now is allowed by Asio.
  timers_.erase(it);
}

std::uint64_t RealEnv::RandomU64() { return rng_(); }

void RealEnv::RunUntil(const std::function<bool()>& done) {
  // The guard keeps run_one waiting while work is on other threads (file I/O pools).
  auto guard = boost::asio::make_work_guard(io_);
  if (io_.stopped()) io_.restart();
  if (idle_spin_ <= Duration::zero()) {
    while (!done()) {
      if (io_.run_one() == 0) break;
    }
    return;
  }
  // Polling first (env/spin.h): poll_one runs a ready handler, or the reactor without
  // blocking; only once nothing came for idle_spin_ does run_one block in epoll_wait.
  // While this thread polls, a post from another thread finds the reactor not blocked
  // and needs no eventfd wake-up (Asio interrupts the reactor only while it waits).
  SpinWindow window(idle_spin_);
  while (!done()) {
    if (io_.poll_one() > 0) {
      window.Worked();
      continue;
    }
    if (io_.stopped()) break;
    if (window.KeepSpinning()) continue;
    if (io_.run_one() == 0) break;
    window.Worked();
  }
}

void RealEnv::DrainTasks(Duration limit) {
  CancelAllTasks();
  if (live_tasks() == 0) return;
  const MonoTime deadline = MonoNow() + limit;
  auto guard = boost::asio::make_work_guard(io_);
  while (live_tasks() > 0 && MonoNow() < deadline) {
    io_.run_one_for(std::chrono::milliseconds(50));
  }
  for (const auto& name : LiveTaskNames()) {
    std::fprintf(stderr, "warning: task '%s' did not end after cancellation\n", name.c_str());
  }
}

}  // namespace wk
