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
// The "alarm" class (the `alarms` scenario, docs/alarms.md): its state is a log (key "log",
// comma-separated) and its alarm. POST /set?t=<ms> sets the alarm (logs s<ms>), POST /del
// deletes it (logs d), GET answers the log. Its alarm events follow actor/alarm_event.h
// exactly as the runtime does: nothing runs unless the state's alarm is due on this node's
// clock; the alarm is cleared as the handler starts; the handler logs f<due>:<retry>:<now>,
// fails (writes discarded) for a poisoned time (due % 97 == 0) or at the seed's failure
// rate, and sometimes re-arms (logs s<ms>); a failure on the last attempt clears the alarm.
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
  // The alarm class: the broken models of alarm events (fire-before-due), the percentage of
  // handler runs that fail, the percentage that re-arm, and a report of every handler run
  // (actor, due, the node's clock at the run, retry count, failed, last attempt).
  BrokenModels broken;
  int alarm_failure_percent = 10;
  int alarm_rearm_percent = 15;
  std::function<void(const ActorId&, std::int64_t due_ms, std::int64_t now_ms, int retry, bool failed, bool last)>
      on_alarm_run;
};

// A poisoned alarm time: its handler always fails (the alarms scenario's given-up alarms).
inline bool PoisonedAlarm(std::int64_t due_ms) { return due_ms % 97 == 0; }

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
  Task<actor::EventResult> HandleAlarm(ActorId id, actor::AlarmEvent event) override;
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

  Task<actor::EventResult> Submit(ActorId id, std::optional<actor::Request> request, actor::AlarmEvent alarm);
  Task<actor::EventResult> Run(std::shared_ptr<Slot> slot, std::optional<actor::Request> request,
                               actor::AlarmEvent alarm);
  // Opens a warmed slot's storage (Warm), as a first event would, without one.
  Task<void> Open(std::shared_ptr<Slot> slot);
  // What the list or alarm actor does with one request, against its storage.
  actor::Response Execute(Slot& slot, const actor::Request& request);
  // The alarm actor's alarm event (its result's outcome, alarm_fired and alarm_after).
  actor::EventResult ExecuteAlarm(Slot& slot, const actor::AlarmEvent& alarm);
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
