// NativeActorHost: an actor::EventHost (actor/event_host.h) for the simulator. It runs
// native C++ test actors instead of WebAssembly, with the real runtime's discipline over
// the same StorageProvider (the durable ReplicaProvider in the `routing` scenario):
//   - one event at a time per actor (the input gate), the next starting once the previous
//     one committed (so batches group-commit);
//   - an actor starts on its first event (StorageProvider::Open: acquire the hold, restore)
//     and leaves memory after `idle_hibernate` without events, or when asked (Unload),
//     once nothing is running or owed (StorageProvider::Close: durable, then released);
//   - every answer waits for ActorStorage::WhenReleasable of the last committed batch (the
//     output gate) — reads too, since a read answered from memory must pass the gate as
//     much as a write;
//   - a gate that reports an error voids the actor: that event and every event answered
//     meanwhile are unavailable, and the actor is closed and restored afresh for the next.
//
// The one actor class, "list": POST <anything> appends the request's body to the list
// (kept under one key, "list", comma-separated) and answers 200 "appended"; GET answers
// 200 with the list. Any other method is 405.
//
// Broken model (answer_without_gate): events are answered straight from memory, without
// asking the gate — an append before it is durable, a read without the hold's validity.
//
// Threading: the Env loop thread (single-threaded in the simulator).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actor/event_host.h"
#include "actor/storage.h"
#include "env/async_mutex.h"
#include "env/env.h"

namespace wk::sim {

struct NativeActorHostOptions {
  Duration idle_hibernate = std::chrono::seconds(5);
  bool answer_without_gate = false;
};

struct NativeActorHostStats {
  std::uint64_t events = 0;
  std::uint64_t starts = 0;          // Open succeeded
  std::uint64_t start_failures = 0;  // Open failed
  std::uint64_t gate_failures = 0;   // WhenReleasable reported an error
  std::uint64_t closes = 0;
};

class NativeActorHost final : public actor::EventHost {
 public:
  NativeActorHost(Env& env, actor::StorageProvider& storage, NativeActorHostOptions options);
  ~NativeActorHost() override;
  NativeActorHost(const NativeActorHost&) = delete;
  NativeActorHost& operator=(const NativeActorHost&) = delete;

  Task<actor::EventResult> HandleRequest(ActorId id, actor::Request request) override;
  void Unload(const ActorId& id) override;
  void Warm(const ActorId& id) override;
  bool IsResident(const ActorId& id) const override;

  const NativeActorHostStats& stats() const { return stats_; }
  // Called with (actor, why) when an actor leaves memory (tracing).
  void set_on_closed(std::function<void(const ActorId&, const std::string&)> fn) { on_closed_ = std::move(fn); }

 private:
  struct Slot {
    Slot(Env& env, ActorId a) : id(std::move(a)), mu(env) {}
    ActorId id;
    AsyncMutex mu;  // the input gate
    std::unique_ptr<actor::ActorStorage> storage;
    std::uint64_t last_seq = 0;
    int inflight = 0;       // events entered and not yet answered
    bool gone = false;      // closed (or failed to open): events still queued answer unavailable
    bool broken = false;    // a gate failed: close once nothing is owed
    bool unloading = false;
    std::optional<Env::TimerId> idle_timer;
  };

  Task<actor::EventResult> Run(std::shared_ptr<Slot> slot, actor::Request request);
  // Opens a warmed slot's storage (Warm), as a first event would, without one.
  Task<void> Open(std::shared_ptr<Slot> slot);
  // What the list actor does with one request, against its storage.
  actor::Response Execute(Slot& slot, const actor::Request& request);
  static Task<Status> Gate(Env* env, actor::ActorStorage* storage, std::uint64_t seq);
  void AfterEvent(const std::shared_ptr<Slot>& slot);
  void Close(const std::shared_ptr<Slot>& slot, const std::string& why);

  Env& env_;
  actor::StorageProvider& storage_;
  NativeActorHostOptions options_;
  std::map<ActorId, std::shared_ptr<Slot>> slots_;
  NativeActorHostStats stats_;
  std::function<void(const ActorId&, const std::string&)> on_closed_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk::sim
