// Env: everything nondeterministic a node does goes through this interface — its clocks,
// timers, task spawning and randomness. (Bucket I/O goes through ObjectStore.)
//
// Why: the cluster and replica code must run unchanged on the real runtime and inside the
// deterministic simulator (docs/architecture.md, "The one rule that makes simulation
// possible"). Code above this interface never reads the system clock, sleeps, starts a
// thread or opens a socket by itself.
//
// Implementations provide only the primitives (clocks, Post, timers, random numbers); the
// coroutine helpers (SleepFor, Spawn, Latch) are built on them here, once.
//   - RealEnv (real_env.h): one Asio event loop on one thread, the system clocks.
//   - SimEnv (sim_env.h): virtual time, one queue for several nodes, seeded randomness.
//
// Threading model. Each Env has one loop thread. Every method except PostFromAnyThread
// must be called on that thread, and every callback and coroutine it runs runs there. A
// node's cluster, replica and front-end code all share that one loop; blocking work
// (file I/O, the WebAssembly engine) runs on worker threads owned by the component that
// needs them, which hand results back with PostFromAnyThread.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/time.h"
#include "env/task.h"

namespace wk {

class Env;

// A one-shot value slot between an operation and the one coroutine awaiting it.
//
// The first Set wins; later ones are ignored (an operation that completes after its
// waiter timed out or was cancelled is simply dropped). The waiter is resumed through
// Env::Post, never inline, so a Set never runs the waiter's code in the setter's stack.
// If the awaiting task is cancelled, the waiter receives on_cancel() instead.
//
// Copies share one slot. Loop thread only.
template <typename T>
class Latch {
  struct State;  // declared before Awaiter names it (clang requires it)

 public:
  Latch(Env& env, std::function<T()> on_cancel)
      : state_(std::make_shared<State>(&env, std::move(on_cancel))) {}

  // Returns true if this call delivered the value.
  bool Set(T value) const;
  bool IsSet() const { return state_->value.has_value(); }

  class Awaiter {
   public:
    explicit Awaiter(std::shared_ptr<typename Latch::State> s) : s_(std::move(s)) {}
    bool await_ready() const noexcept { return s_->value.has_value(); }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) {
      WK_CHECK(!s_->waiter, "a Latch has one waiter");
      const CancelToken& token = h.promise().cancel;
      if (token && token->cancelled()) {
        s_->value.emplace(s_->on_cancel());
        return false;
      }
      s_->waiter = h;
      if (token) {
        s_->cancel = token;
        std::weak_ptr<typename Latch::State> weak = s_;
        s_->cancel_id = token->OnCancel([weak] {
          if (auto s = weak.lock()) Latch(s).Set(s->on_cancel());
        });
      }
      return true;
    }
    T await_resume() {
      if (s_->cancel) s_->cancel->Forget(s_->cancel_id);
      s_->cancel.reset();
      return std::move(*s_->value);
    }

   private:
    std::shared_ptr<typename Latch::State> s_;
  };
  // co_await latch.Wait() yields the value.
  Awaiter Wait() const { return Awaiter(state_); }

 private:
  struct State {
    State(Env* e, std::function<T()> c) : env(e), on_cancel(std::move(c)) {}
    Env* env;
    std::function<T()> on_cancel;
    std::optional<T> value;
    std::coroutine_handle<> waiter;
    CancelToken cancel;
    CancelState::CallbackId cancel_id = 0;
  };
  explicit Latch(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

// The state of one spawned task, shared by its handle(s) and the Env.
struct TaskState;

// Refers to a spawned task. Copyable; dropping every handle does not stop the task.
class TaskHandle {
 public:
  TaskHandle() = default;
  explicit TaskHandle(std::shared_ptr<TaskState> s) : state_(std::move(s)) {}

  // Asks the task to stop: whatever it awaits returns its "cancelled" value.
  void Cancel() const;
  bool done() const;
  bool valid() const { return static_cast<bool>(state_); }
  // Waits until the task has finished. Returns false if the waiting task was cancelled
  // first (the awaited task may still be running then).
  Task<bool> Join() const;

 private:
  std::shared_ptr<TaskState> state_;
};

class Env {
 public:
  using TimerId = std::uint64_t;

  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env();

  // ---- Primitives each implementation provides.

  // This node's wall clock, including any injected skew.
  virtual WallTime WallNow() const = 0;
  // This node's monotonic clock.
  virtual MonoTime MonoNow() const = 0;
  // Runs fn on the loop thread soon, after callbacks already queued. Loop thread only.
  virtual void Post(std::function<void()> fn) = 0;
  // As Post, callable from any thread (worker pools hand results back with it). Not
  // available in the simulator, which has no other threads.
  virtual void PostFromAnyThread(std::function<void()> fn) = 0;
  // Runs fn on the loop at or after deadline (this node's monotonic clock).
  virtual TimerId StartTimer(MonoTime deadline, std::function<void()> fn) = 0;
  // Cancels a timer; a no-op if it already fired or was cancelled.
  virtual void CancelTimer(TimerId id) = 0;
  // Uniform random bits. Seeded per process on the real runtime, from the seed in the
  // simulator. Not for secrets (keys, cluster secrets use a CSPRNG).
  virtual std::uint64_t RandomU64() = 0;

  // ---- Helpers built on the primitives.

  // Suspends the calling coroutine. Returns true when the time has passed, false when
  // the task was cancelled first.
  Task<bool> SleepFor(Duration d);
  Task<bool> SleepUntil(MonoTime deadline);

  // Starts task on the loop (not inline: it begins after the caller's next suspension).
  // name appears in logs and in the list of tasks that outlive a shutdown.
  TaskHandle Spawn(Task<void> task, std::string name);

  // Cancels every live task spawned on this Env. They finish on the loop as it runs.
  void CancelAllTasks();
  std::size_t live_tasks() const { return live_.size(); }
  // Names of live tasks, for diagnostics.
  std::vector<std::string> LiveTaskNames() const;

  // Internal: called by a task's root frame as it ends.
  void TaskFinished(TaskState* state);


  // Uniform in [0, bound). REQUIRES: bound > 0.
  std::uint64_t RandomBelow(std::uint64_t bound);
  // 2 * bytes lowercase hex characters of randomness (instance tokens, temp names).
  std::string RandomHex(std::size_t bytes);

 protected:
  // Destroys the frames of tasks that never finished. Implementations call it first in
  // their destructor, while the whole object still works: a frame's destructors may
  // still Post (an AsyncMutex guard handing over, say).
  void DestroyTasks();

 private:
  std::uint64_t next_task_id_ = 1;
  std::unordered_map<std::uint64_t, std::shared_ptr<TaskState>> live_;
};

struct TaskState {
  std::uint64_t id = 0;
  std::string name;
  Env* env = nullptr;
  CancelToken cancel = std::make_shared<CancelState>();
  bool done = false;
  std::coroutine_handle<> root;  // the frame that runs the task; owned until it ends
  std::vector<Latch<bool>> joiners;
};

template <typename T>
bool Latch<T>::Set(T value) const {
  auto& s = *state_;
  if (s.value.has_value()) return false;
  s.value.emplace(std::move(value));
  if (s.waiter) {
    auto state = state_;
    s.env->Post([state] {
      auto waiter = std::exchange(state->waiter, {});
      if (waiter) waiter.resume();
    });
  }
  return true;
}

}  // namespace wk
