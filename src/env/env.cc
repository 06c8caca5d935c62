#include "env/env.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "base/digest.h"

namespace wk {
namespace {

// The coroutine at the root of a spawned task: it awaits the task, then tells the Env.
// It is started by Spawn through Post and destroys itself when it ends; if the Env dies
// first, the Env destroys the suspended frame (and with it the task's own frames).
struct RootCoroutine {
  struct promise_type : internal::PromiseBase {
    RootCoroutine get_return_object() {
      return {std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    [[noreturn]] void unhandled_exception() {
      // An exception escaping a task is a programmer error (errors are Status values).
      try {
        throw;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FATAL: exception escaped a task: %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "FATAL: unknown exception escaped a task\n");
      }
      std::abort();
    }
  };
  std::coroutine_handle<promise_type> handle;
};

RootCoroutine RunRoot(Task<void> task, std::shared_ptr<TaskState> state) {
  co_await std::move(task);
  state->root = {};  // this frame ends right after; nobody may destroy it
  state->env->TaskFinished(state.get());
}

}  // namespace

Env::~Env() { DestroyTasks(); }

void Env::DestroyTasks() {
  // Frames still suspended belong to tasks that never finished (the loop stopped first).
  // Destroying them runs their destructors; nothing resumes them afterwards because the
  // implementation's queue dies with it.
  auto live = std::move(live_);
  live_.clear();
  for (auto& [id, state] : live) {
    if (state->root) {
      auto root = std::exchange(state->root, {});
      root.destroy();
    }
  }
}

TaskHandle Env::Spawn(Task<void> task, std::string name) {
  auto state = std::make_shared<TaskState>();
  state->id = next_task_id_++;
  state->name = std::move(name);
  state->env = this;
  RootCoroutine root = RunRoot(std::move(task), state);
  root.handle.promise().cancel = state->cancel;
  state->root = root.handle;
  live_.emplace(state->id, state);
  std::weak_ptr<TaskState> weak = state;
  Post([weak] {
    auto s = weak.lock();
    if (s && s->root) s->root.resume();
  });
  return TaskHandle(state);
}

void Env::TaskFinished(TaskState* state) {
  state->done = true;
  live_.erase(state->id);  // the root frame still holds a reference to *state
  auto joiners = std::move(state->joiners);
  state->joiners.clear();
  for (auto& j : joiners) j.Set(true);
}

void Env::CancelAllTasks() {
  std::vector<std::shared_ptr<TaskState>> all;
  all.reserve(live_.size());
  for (auto& [id, s] : live_) all.push_back(s);
  for (auto& s : all) s->cancel->Cancel();
}

std::vector<std::string> Env::LiveTaskNames() const {
  std::vector<std::string> names;
  for (auto& [id, s] : live_) names.push_back(s->name);
  return names;
}

Task<bool> Env::SleepFor(Duration d) { return SleepUntil(MonoNow() + d); }

Task<bool> Env::SleepUntil(MonoTime deadline) {
  Latch<bool> latch(*this, [] { return false; });
  TimerId id = StartTimer(deadline, [latch] { latch.Set(true); });
  bool slept = co_await latch.Wait();
  if (!slept) CancelTimer(id);
  co_return slept;
}

std::uint64_t Env::RandomBelow(std::uint64_t bound) {
  WK_CHECK(bound > 0, "RandomBelow(0)");
  // Rejection sampling keeps the distribution uniform.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t r;
  do {
    r = RandomU64();
  } while (r >= limit);
  return r % bound;
}

std::string Env::RandomHex(std::size_t bytes) {
  std::string raw;
  raw.reserve(bytes);
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    if (i % 8 == 0) bits = RandomU64();
    raw.push_back(static_cast<char>(bits & 0xff));
    bits >>= 8;
  }
  return ToHex(raw);
}

void TaskHandle::Cancel() const {
  if (state_) state_->cancel->Cancel();
}

bool TaskHandle::done() const { return !state_ || state_->done; }

Task<bool> TaskHandle::Join() const {
  if (!state_ || state_->done) co_return true;
  Latch<bool> latch(*state_->env, [] { return false; });
  state_->joiners.push_back(latch);
  co_return co_await latch.Wait();
}

}  // namespace wk
