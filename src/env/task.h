// Task<T>: the coroutine type every asynchronous function in WasmKeep returns.
//
// Concept. A Task is a lazily started coroutine: nothing runs until it is co_awaited (or
// handed to Env::Spawn). Awaiting a Task runs it to completion on the same event loop and
// yields its value. There is exactly one consumer per Task (move-only).
//
// Cancellation is cooperative and inherited. Every spawned task has a CancelState; a Task
// awaited inside it shares that state. Leaf awaitables (a sleep, a store request, a Latch)
// register a callback on the state while suspended, so cancelling a task wakes whatever it
// is waiting on, and that leaf returns its documented "cancelled" value (a sleep returns
// false; a store write returns kUnknownOutcome). Code never has to poll, but long CPU-only
// loops should check CurrentCancel().
//
// Threading: a Task and everything it awaits run on one event loop thread (the Env's).
// Nothing here is thread-safe; cross-thread hand-offs go through Env::PostFromAnyThread.
//
// Exceptions: WasmKeep reports errors as Status values. An exception escaping a coroutine
// is a programmer error: it is rethrown to the awaiting coroutine, and one escaping a
// spawned task aborts the process (see env.cc).
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "base/check.h"

namespace wk {

// Shared by a spawned task and every Task it awaits.
class CancelState {
 public:
  using CallbackId = std::uint64_t;

  bool cancelled() const { return cancelled_; }

  // Runs every registered callback once (in registration order). Idempotent.
  void Cancel() {
    if (cancelled_) return;
    cancelled_ = true;
    auto callbacks = std::move(callbacks_);
    callbacks_.clear();
    for (auto& [id, fn] : callbacks) fn();
  }

  // Registers fn to run on Cancel(). REQUIRES: !cancelled().
  CallbackId OnCancel(std::function<void()> fn) {
    WK_CHECK(!cancelled_, "OnCancel after cancellation");
    CallbackId id = next_id_++;
    callbacks_.emplace(id, std::move(fn));
    return id;
  }
  void Forget(CallbackId id) { callbacks_.erase(id); }

 private:
  bool cancelled_ = false;
  CallbackId next_id_ = 1;
  std::map<CallbackId, std::function<void()>> callbacks_;
};
using CancelToken = std::shared_ptr<CancelState>;

namespace internal {

// What every WasmKeep coroutine promise carries: who to resume when done and the
// cancellation state inherited from the awaiting coroutine.
struct PromiseBase {
  std::coroutine_handle<> continuation;
  CancelToken cancel;
  // Where the awaiting coroutine stands. A Task is started from inside the awaiter's
  // await_suspend; if it finishes before its first real suspension, the awaiter simply
  // does not suspend. This keeps a loop of synchronously completing awaits from nesting
  // one stack frame per iteration (symmetric transfer alone relies on tail calls, which
  // GCC does not make in sanitizer builds: a million-iteration loop overflowed).
  enum class AwaitState : unsigned char { kStarting, kCompletedInline, kCallerSuspended };
  AwaitState await_state = AwaitState::kStarting;

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> self) noexcept {
      auto& p = self.promise();
      if (p.await_state == AwaitState::kStarting) {
        p.await_state = AwaitState::kCompletedInline;  // the awaiter continues by itself
        return std::noop_coroutine();
      }
      auto next = p.continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };
  std::suspend_always initial_suspend() noexcept { return {}; }
  FinalAwaiter final_suspend() noexcept { return {}; }
};

template <typename T>
struct TaskPromise;

}  // namespace internal

template <typename T = void>
class [[nodiscard]] Task {
 public:
  using promise_type = internal::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : handle_(h) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { Reset(); }

  bool valid() const { return static_cast<bool>(handle_); }

  // Awaiting: start the coroutine, resume the caller when it finishes.
  bool await_ready() const noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> caller) noexcept {
    auto& p = handle_.promise();
    p.continuation = caller;
    p.cancel = caller.promise().cancel;
    p.await_state = internal::PromiseBase::AwaitState::kStarting;
    handle_.resume();  // runs until the task's first real suspension, or to its end
    if (p.await_state == internal::PromiseBase::AwaitState::kCompletedInline) return false;
    p.await_state = internal::PromiseBase::AwaitState::kCallerSuspended;
    return true;
  }
  T await_resume() { return handle_.promise().TakeResult(); }

  // For Env::Spawn: the root of a task tree sets its cancellation state directly.
  Handle handle() const { return handle_; }

 private:
  void Reset() {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  Handle handle_;
};

namespace internal {

template <typename T>
struct TaskPromise : PromiseBase {
  std::optional<T> value;
  std::exception_ptr error;

  Task<T> get_return_object() { return Task<T>(Task<T>::Handle::from_promise(*this)); }
  template <typename U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  void unhandled_exception() { error = std::current_exception(); }
  T TakeResult() {
    if (error) std::rethrow_exception(error);
    WK_CHECK(value.has_value(), "Task finished without a value");
    return std::move(*value);
  }
};

template <>
struct TaskPromise<void> : PromiseBase {
  std::exception_ptr error;

  Task<void> get_return_object() {
    return Task<void>(Task<void>::Handle::from_promise(*this));
  }
  void return_void() {}
  void unhandled_exception() { error = std::current_exception(); }
  void TakeResult() {
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace internal

// co_await CurrentCancel() yields the running task's CancelToken (never null inside a
// spawned task), so CPU-bound loops can check cancelled().
struct CurrentCancel {
  CancelToken token;
  bool await_ready() const noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    token = h.promise().cancel;
    return false;  // never actually suspends
  }
  CancelToken await_resume() noexcept { return std::move(token); }
};

}  // namespace wk
