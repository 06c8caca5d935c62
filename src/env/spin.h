// SpinWindow: keep a thread awake for a short while after it last did work, so that the
// next piece of work, if it comes soon, is picked up without a kernel wake-up.
//
// Why: an event crosses threads twice (the loop hands it to its actor's worker thread,
// the worker hands the result back), and on the virtual machines WasmKeep runs on each
// wake-up of a sleeping thread (a futex or an eventfd, then the scheduler) costs 10-30 us:
// several times the 3-5 us an event itself takes (docs/benchmarks.md, "Actor runtime").
// A thread that has just finished something polls for the next thing for `window` before
// it sleeps; a hand-off that lands inside the window costs a cache miss instead.
//
// What it costs: up to `window` of CPU after each burst of work, per spinning thread (the
// loop and each worker), and nothing while a node is idle. Under a steady stream of events
// closer together than the window the threads never sleep, as in a polling runtime.
// The window is `actors.spin_us` (docs/configuration.md); 0 turns spinning off.
//
// Real threads only: the simulator never spins (it has no threads to hand over to).
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>

#include "base/time.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace wk {

// One pause of a spin loop: tells the core this is a busy-wait (lets a hyper-thread
// sibling run, saves power) without giving the thread up.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class SpinWindow {
 public:
  explicit SpinWindow(Duration window) : window_(window) { Worked(); }

  // The thread has just done something: the window starts again.
  void Worked() { last_work_ = std::chrono::steady_clock::now(); }

  // Called when a poll found nothing: pauses briefly and says whether to poll again (true)
  // or to go to sleep (false, the window has passed since the last work). Every 32 calls
  // it reads the clock (a vDSO call, cheap but not free) and yields the core: where more
  // threads are runnable than there are cores (the thread it waits for among them), a
  // spinner must not keep the core from them for a whole time slice.
  bool KeepSpinning() {
    CpuRelax();
    if ((++polls_ & 31u) != 0) return true;
    sched_yield();
    return std::chrono::steady_clock::now() - last_work_ < window_;
  }

 private:
  Duration window_;
  std::chrono::steady_clock::time_point last_work_;
  std::uint32_t polls_ = 0;
};

}  // namespace wk
