// RunningEvents: the node's local journal of the actors whose events are executing right
// now, so that after a crash of the process the next start knows which actors were running
// when it died and records a quarantine strike against each (docs/security.md, "Poisoned
// actors"; quarantine_service.h).
//
// The file (<node.data_dir>/running-events-<node id>) is fixed-size slots of kSlotBytes:
// slot 0 holds the header "wasmkeep-running-events 1\n"; slot 1 + w belongs to worker w
// (a worker runs one event at a time, so one slot is all it needs). An event's start writes
// "<tenant>/<class>/<name>\n" at the start of its worker's slot, its end writes one NUL byte
// there: one pwrite each, no allocation, no lock shared between workers.
//
// Durability: no fsync, on purpose. The journal must survive only the death of the process
// (a V8 abort, a kill -9, a segfault): a pwrite that returned is in the kernel's page cache,
// which outlives the process and is written back by the kernel. A crash of the machine may
// lose it; that costs one strike, which is all the journal is for.
//
// Ownership: Open takes an exclusive flock on the file, which the kernel releases when the
// process ends however it ends. A second process on the same file (a twin with the same node
// id, which the node lease refuses anyway) cannot open it, so it never takes the running
// node's events for a crash.
//
// Threading: Open and the destructor on one thread; Started/Ended from any number of
// threads at once, each worker on its own slot.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace wk {

class RunningEvents {
 public:
  // Room for the longest actor id (63 + 1 + 63 + 1 + 128 bytes) and its newline.
  static constexpr std::size_t kSlotBytes = 512;
  // Workers beyond this have no slot (their events are not journaled): bounds the file at
  // 2 MiB. actors.workers is at most 256; only "one per core" on a larger machine gets here.
  static constexpr std::size_t kMaxWorkers = 4096;

  struct Opened {
    std::unique_ptr<RunningEvents> journal;
    // The actors whose events were executing when the previous process on this file ended
    // (each once, in slot order). Empty after a clean stop.
    std::vector<ActorId> left_behind;
    // Slots that held something that is not an actor id (a torn or foreign file): ignored.
    std::size_t unreadable = 0;
  };
  // Creates the directory and the file if missing, locks the file, reads what a previous
  // process left and empties it. kFatal naming the path if it cannot (unwritable
  // directory, or another live process holds the lock).
  static Result<Opened> Open(const std::string& path);

  ~RunningEvents();
  RunningEvents(const RunningEvents&) = delete;
  RunningEvents& operator=(const RunningEvents&) = delete;

  // REQUIRES: a valid actor id. Thread-safe across workers; never blocks on a lock.
  void Started(std::size_t worker, const ActorId& actor);
  void Ended(std::size_t worker);

  const std::string& path() const { return path_; }
  // pwrites that failed (a full disk); the first one is logged.
  std::uint64_t write_failures() const { return write_failures_.load(std::memory_order_relaxed); }

 private:
  RunningEvents(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Write(const char* data, std::size_t n, std::size_t worker);

  int fd_ = -1;
  std::string path_;
  std::atomic<std::uint64_t> write_failures_{0};
};

}  // namespace wk
