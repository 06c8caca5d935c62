// RealEnv: the Env of a real process — one Asio io_context run by one thread, the system
// clocks, and a per-process random generator.
//
// Threading: Run/RunMain are called from the thread that becomes the loop thread; every
// other method except PostFromAnyThread must then be called on it. Components that need
// real sockets (the S3 client, the HTTP front) reach the io_context through context();
// they are real-runtime components and never run in the simulator.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <random>
#include <unordered_map>

#include "env/env.h"

namespace wk {

class RealEnv final : public Env {
 public:
  RealEnv();
  ~RealEnv() override;

  WallTime WallNow() const override;
  MonoTime MonoNow() const override;
  void Post(std::function<void()> fn) override;
  void PostFromAnyThread(std::function<void()> fn) override;
  TimerId StartTimer(MonoTime deadline, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;
  std::uint64_t RandomU64() override;

  // Test hook: shifts WallNow by skew (the ADR's clock skew, injected).
  void set_wall_skew(Duration skew) { wall_skew_ = skew; }

  // How long the loop keeps polling for work after it last ran a handler before it blocks
  // in the reactor (0, the default: it blocks at once). A reply posted from a worker
  // thread within that window is then picked up without a kernel wake-up; see
  // env/spin.h for why and what it costs.
  void set_idle_spin(Duration spin) { idle_spin_ = spin; }

  boost::asio::io_context& context() { return io_; }

  // Runs main on the loop until it finishes, then cancels every other task and keeps
  // the loop running until they have ended (at most drain_limit). Returns main's value.
  template <typename T>
  T RunMain(Task<T> main, Duration drain_limit = std::chrono::seconds(10));

 private:
  void RunUntil(const std::function<bool()>& done);
  void DrainTasks(Duration limit);

  boost::asio::io_context io_;
  Duration wall_skew_{0};
  Duration idle_spin_{0};
  std::mt19937_64 rng_;
  TimerId next_timer_ = 1;
  std::unordered_map<TimerId, std::unique_ptr<boost::asio::steady_timer>> timers_;
};

template <typename T>
T RealEnv::RunMain(Task<T> main, Duration drain_limit) {
  std::optional<T> result;
  auto wrapper = [](Task<T> t, std::optional<T>* out) -> Task<void> {
    out->emplace(co_await std::move(t));
  };
  TaskHandle h = Spawn(wrapper(std::move(main), &result), "main");
  RunUntil([&] { return h.done(); });
  DrainTasks(drain_limit);
  WK_CHECK(result.has_value(), "main task ended without a result (cancelled?)");
  return std::move(*result);
}

template <>
inline void RealEnv::RunMain(Task<void> main, Duration drain_limit) {
  TaskHandle h = Spawn(std::move(main), "main");
  RunUntil([&] { return h.done(); });
  DrainTasks(drain_limit);
}

}  // namespace wk
