// The blocking side of the local stores (file://, sqlite://): a fixed set of threads that
// run blocking work for the Env loop, and the two halves of handing a result back.
//
// WorkerPool<Context>: one thread per context, each running jobs with its own context
// (sqlite://: a reader's connection and statements; file://: nothing of its own), taking
// them in FIFO order from one bounded queue. Submit refuses a job when the queue is full
// (the caller answers Retryable at once instead of queueing without bound). Destroying the
// pool abandons the queued jobs (each job's `abandon` runs instead of `run`, on the
// destroying thread) and joins the threads after their current job.
//
// DeliverToLoop / AwaitOnLoop: a worker hands its result to a Latch on the loop thread;
// the loop awaits it until the call's deadline, after which the answer is kUnknownOutcome
// for a write (it may still land) or for a read. Both touch only their arguments, so the
// store may be destroyed while a call is in flight.
//
// Threading: Submit from any thread; jobs run on the pool's threads; the Latch is set on
// the loop thread only (Env::PostFromAnyThread).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/status.h"
#include "env/env.h"
#include "env/task.h"

namespace wk::local_store {

// The context of a thread that needs none.
struct NoContext {};

template <typename Context>
class WorkerPool {
 public:
  struct Job {
    std::function<void(Context&)> run;
    std::function<void()> abandon;  // instead of run, when the pool stops first
  };

  // One thread per context, started here.
  WorkerPool(std::vector<std::unique_ptr<Context>> contexts, std::size_t max_queued)
      : max_queued_(max_queued), contexts_(std::move(contexts)) {
    threads_.reserve(contexts_.size());
    for (auto& c : contexts_) threads_.emplace_back([this, ctx = c.get()] { Loop(*ctx); });
  }
  // n threads without a context of their own.
  WorkerPool(int n, std::size_t max_queued)
    requires std::is_same_v<Context, NoContext>
      : WorkerPool(MakeContexts(n), max_queued) {}

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  ~WorkerPool() {
    std::deque<Job> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      dropped.swap(queue_);
    }
    cv_.notify_all();
    for (Job& job : dropped) job.abandon();
    for (std::thread& t : threads_) t.join();
  }

  // False (and job dropped unrun) if max_queued jobs are already waiting.
  bool Submit(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.size() >= max_queued_) return false;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

 private:
  static std::vector<std::unique_ptr<Context>> MakeContexts(int n) {
    std::vector<std::unique_ptr<Context>> contexts;
    for (int i = 0; i < n; ++i) contexts.push_back(std::make_unique<Context>());
    return contexts;
  }

  void Loop(Context& context) {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job.run(context);
    }
  }

  const std::size_t max_queued_;
  std::vector<std::unique_ptr<Context>> contexts_;  // outlive the threads (joined first)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Sets latch to r on the loop thread; callable from any thread.
template <typename R>
void DeliverToLoop(Env& env, Latch<R> latch, R r) {
  env.PostFromAnyThread(
      [latch = std::move(latch), r = std::move(r)]() mutable { latch.Set(std::move(r)); });
}

// Awaits latch until timeout from now: past it, kUnknownOutcome naming `where` (for a write,
// "the write may still land").
template <typename R>
Task<R> AwaitOnLoop(Env& env, Latch<R> latch, Duration timeout, std::string where, bool is_write) {
  const Env::TimerId deadline =
      env.StartTimer(env.MonoNow() + timeout, [latch, where, is_write] {
        latch.Set(R(UnknownOutcome(where + ": no result before the deadline" +
                                   (is_write ? "; the write may still land" : ""))));
      });
  R result = co_await latch.Wait();
  env.CancelTimer(deadline);
  co_return result;
}

}  // namespace wk::local_store
