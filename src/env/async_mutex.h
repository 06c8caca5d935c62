// AsyncMutex: mutual exclusion between coroutines on one Env loop (the "one lock per
// actor" of docs/node-lease.md, "Actors": an acquisition holds it from its read until its hold is registered,
// the resolver from its read until its release's reply).
//
// Lock() suspends until the mutex is free and returns a Guard that unlocks on
// destruction; waiters are served in FIFO order. If the waiting task is cancelled, Lock
// returns an empty Guard (owns() == false) without the mutex.
//
// Threading: Env loop thread only.
#pragma once

#include <deque>
#include <memory>

#include "env/env.h"

namespace wk {

class AsyncMutex {
 public:
  explicit AsyncMutex(Env& env) : env_(env), state_(std::make_shared<State>()) {}

  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
    Guard& operator=(Guard&& o) noexcept {
      if (this != &o) {
        Release();
        m_ = std::exchange(o.m_, nullptr);
      }
      return *this;
    }
    ~Guard() { Release(); }
    bool owns() const { return m_ != nullptr; }

   private:
    friend class AsyncMutex;
    explicit Guard(AsyncMutex* m) : m_(m) {}
    void Release() {
      if (m_) m_->Unlock();
      m_ = nullptr;
    }
    AsyncMutex* m_ = nullptr;
  };

  Task<Guard> Lock() {
    if (!state_->locked) {
      state_->locked = true;
      co_return Guard(this);
    }
    Latch<bool> turn(env_, [] { return false; });
    state_->waiters.push_back(turn);
    if (!co_await turn.Wait()) {
      // Cancelled. If the turn was handed to us anyway, pass it on.
      co_return Guard();
    }
    co_return Guard(this);
  }

  bool locked() const { return state_->locked; }
  std::size_t waiters() const { return state_->waiters.size(); }

 private:
  struct State {
    bool locked = false;
    std::deque<Latch<bool>> waiters;
  };

  void Unlock() {
    // Hand the mutex to the first waiter still waiting (a cancelled one already got its
    // fallback, so its Set fails and the next is tried).
    while (!state_->waiters.empty()) {
      Latch<bool> next = state_->waiters.front();
      state_->waiters.pop_front();
      if (next.Set(true)) return;  // stays locked, now theirs
    }
    state_->locked = false;
  }

  Env& env_;
  std::shared_ptr<State> state_;
};

}  // namespace wk
