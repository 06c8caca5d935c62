// NativeActorHost: the simulator's actor host: the real runtime's core
// (actor/runtime_core.h: the gates, instance drops, hibernation, eviction, a failed storage
// closed and restored afresh) over a NativeExecutor that runs native C++ test actors in
// place of WebAssembly, against the same StorageProvider as a node. So the gates and the
// lifecycle run under the simulator's faults, with their broken models switched in the
// core itself. Its classes ("list", "alarm", "poison", "mail", "room", and the versioned
// "ledger") are described at NativeExecutor.
//
// Threading: the Env loop thread (single-threaded in the simulator).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "actor/actor_versions.h"
#include "actor/event_host.h"
#include "actor/executor.h"
#include "actor/runtime_core.h"
#include "actor/storage.h"
#include "env/env.h"

namespace wk::sim {

// The versioned classes a simulated node has read (what ActorHost's ClassRegistry holds for
// modules): per class, the chooser of its rollout and the versions whose code is "loaded"
// here (native code needs no compiling: a version is loaded once the node has read a record
// naming it). Loop thread only.
class NativeVersions {
 public:
  // The class's rollout read: `chooser` from now on; `in_play` loaded (added to those before).
  void Set(const std::string& class_name, actor::VersionChooser chooser, const std::vector<std::uint32_t>& in_play);
  // Version `version` of the class read (its record exists).
  void AddLoaded(const std::string& class_name, std::uint32_t version);
  bool Versioned(const std::string& class_name) const;
  // REQUIRES: Versioned(class_name).
  actor::VersionPick Choose(const std::string& class_name, std::string_view name, std::uint32_t mark, bool empty) const;
  bool Loaded(const std::string& class_name, std::uint32_t version) const;

 private:
  struct Class {
    actor::VersionChooser chooser;
    std::set<std::uint32_t> loaded;
  };
  std::map<std::string, Class> classes_;
};

struct NativeActorHostOptions {
  // Idle actors leave memory after this; their instances go after half of it.
  Duration idle_hibernate = std::chrono::seconds(5);
  // The broken models of the core (answer-without-gate, input-gate-concurrent) and of alarm
  // events (fire-before-due).
  BrokenModels broken;
  // The alarm class: the percentage of handler runs that fail, the percentage that re-arm,
  // and a report of every handler run (actor, due, the event's time, retry count, failed,
  // last attempt).
  int alarm_failure_percent = 10;
  int alarm_rearm_percent = 15;
  std::function<void(const ActorId&, std::int64_t due_ms, std::int64_t now_ms, int retry, bool failed, bool last)>
      on_alarm_run;
  // The poison class: every event that reaches its code is a strike, reported here as the V8
  // executor's hooks report an event that exhausted the worker's heap to the node's
  // QuarantineService (src/server/quarantine_service.h). Unset: no strikes.
  std::function<void(const ActorId&, std::string reason)> strike;
  // The mail class (messages between actors): the percentage of handler runs that fail, and
  // the ring's size (m0 .. m<ring-1>; a message with hops left goes on to the next).
  int mail_failure_percent = 10;
  int mail_ring = 0;
  // The ledger class (class versions): the node's versioned classes (unset: the ledger class
  // is unknown), the percentage of migrations that fail, the core's loading of a version an
  // actor needs (RuntimeCoreOptions::load_version), and a report of every migration run.
  NativeVersions* versions = nullptr;
  int migration_failure_percent = 30;
  std::function<Task<Status>(ActorId, std::uint32_t version)> load_version;
  // RuntimeCoreOptions::resident_limit: the tenant's resident_actors share here (quotas).
  std::function<std::optional<std::size_t>(const std::string& tenant)> resident_limit;
  std::function<void(const ActorId&, std::uint32_t from, std::uint32_t to, bool ok)> on_migration;
};

// A poisoned alarm time: its handler always fails (the alarms scenario's given-up alarms).
inline bool PoisonedAlarm(std::int64_t due_ms) { return due_ms % 97 == 0; }

// The list and alarm classes as an actor::Executor: one lane; every job a task on the Env
// loop; an "instance" is a flag (made by an event, dropped as the core asks).
//
// The "list" class (any class but "alarm"): POST <anything> appends the request's body to
// the list (kept under one key, "list", comma-separated) and answers 200 "appended"; GET
// answers 200 with the list; any other method is 405. An append reads the list, then takes
// 0-2 ms of simulated time before it writes it back: two appends of one actor running at
// once (what the input gate forbids) lose one of them.
//
// The "alarm" class (docs/alarms.md): its state is a log (key "log", comma-separated) and
// its alarm. POST /set?t=<ms> sets the alarm (logs s<ms>), POST /del deletes it (logs d),
// GET answers the log. Its alarm events follow actor/alarm_event.h as the V8 executor's
// do: nothing runs unless the state's alarm is due at the event's time; the alarm is
// cleared as the handler starts; the handler logs f<due>:<retry>:<now>, fails (writes
// discarded) for a poisoned time (PoisonedAlarm) or at alarm_failure_percent, and
// sometimes re-arms (logs s<ms>); a failure on the last attempt clears the alarm.
//
// The "poison" class (docs/security.md, "Poisoned actors"): POST /arm?t=<ms> sets its
// alarm; any other request, and its alarm when due, "exhausts the worker's heap": the event
// fails (500, writes discarded) and is reported as a strike (NativeActorHostOptions::strike).
// GET answers how often it was armed.
//
// The "mail" class (docs/messages.md; the `messages` scenario): POST /send?to=<a>,<b>&hops=<h>
// with body <id> appends <id> to its key "sent" and sends "<id>:<h>" to mail/<a>, mail/<b>
// in the same batch. Its message handler takes 0-2 ms, fails (writes discarded) at
// mail_failure_percent, else appends "<sender>#<seq>:<body>" to its key "got", records the
// message applied in the same batch (unless applied-record-not-in-batch) and, with hops
// left, sends "<id>:<h-1>" to the next actor of the ring. GET answers "got".
//
// The "room" class (docs/websockets.md; the combined scenario's socket clients): a WebSocket
// open is accepted, its connection tagged "m" and sent the newest message "<n>:<text>" (the
// chat room's history, cut to one); a message <text> appends <text> to its
// list (key "list", comma-separated, as the list class's) and broadcasts "<n>:<text>" to
// "m", n the list's new length, in the same event; a close runs nothing. GET answers the list.
//
// The "ledger" class (docs/tenants.md, "Class versions"; the combined scenario's version
// clients): a versioned class whose every version runs the same native code, choosing and
// migrating by actor/actor_versions.h as the V8 executor does. Its state is a log (key
// "log", comma-separated): POST appends "<v>.<body>" (v: the version running; read, 0-2 ms of
// simulated time, written back) and answers "<v>"; GET answers "<v>|<mark>|<log>" (mark: the
// version the state records). A migration from a to b (before the first event on b) appends
// "u<a>><b>" in a batch of its own with the mark, and fails (nothing kept) at
// migration_failure_percent.
class NativeExecutor final : public actor::Executor {
 public:
  NativeExecutor(Env& env, const NativeActorHostOptions& options);
  ~NativeExecutor() override;

  std::size_t lanes() const override { return 1; }
  std::shared_ptr<actor::ExecutorActor> NewActor(const ActorId& id, const std::string& key) override;
  void Started(actor::ExecutorActor& actor, const actor::ActorStorage& storage) override;
  std::vector<std::uint32_t> VersionsMissing(const actor::ExecutorActor& actor,
                                             const actor::ActorStorage& storage) override;
  bool UseCurrentCode(actor::ExecutorActor& actor) override;
  bool CodeMissing(const actor::ExecutorActor& actor) const override;
  void Run(std::shared_ptr<actor::ExecutorActor> actor, actor::ActorStorage* storage,
           std::shared_ptr<const actor::ExecutorEvent> event, std::function<void(actor::ExecutedEvent)> done) override;
  void DropInstance(std::shared_ptr<actor::ExecutorActor> actor) override;
  void Close(std::shared_ptr<actor::ExecutorActor> actor, std::function<void()> done) override;
  void Stop() override { *alive_ = false; }
  actor::ExecutorStats stats() const override { return {}; }
  std::uint64_t InstanceReservation(const actor::ExecutorActor&) const override { return 0; }
  std::uint64_t live_reservation_limit() const override { return UINT64_MAX; }
  void InstanceForgotten(const actor::ExecutorActor&, std::uint64_t) override {}
  void AfterInstancesGone(std::size_t, std::uint64_t, std::uint64_t) override {}
  void AfterIdleSweep(const std::vector<bool>&) override {}
  void ReclaimNow(std::size_t) override {}

 private:
  struct Actor;
  // Ends an event: measures the actor and hands the result to the core.
  void Finish(Actor& actor, actor::ActorStorage& storage, actor::ExecutedEvent ran,
              const std::function<void(actor::ExecutedEvent)>& done);
  // An event whose storage failed while it ran (a timer's wait): answered "unavailable",
  // nothing committed. True if so.
  bool FinishIfStorageFailed(Actor& actor, actor::ActorStorage& storage, actor::ExecutedEvent& ran,
                             const std::function<void(actor::ExecutedEvent)>& done);
  // The alarm actor's alarm event (its result's outcome, alarm_fired and alarm_after).
  actor::EventResult ExecuteAlarm(Actor& actor, actor::ActorStorage& storage, const actor::ExecutorEvent& event);
  // The alarm actor's requests; the list actor's GET and refusals (an append is Run's).
  actor::Response ExecuteAlarmRequest(Actor& actor, actor::ActorStorage& storage, const actor::Request& request);
  // The mail class's events (see above).
  void RunMail(std::shared_ptr<Actor> a, actor::ActorStorage* storage, std::shared_ptr<const actor::ExecutorEvent> event,
               actor::ExecutedEvent ran, std::function<void(actor::ExecutedEvent)> done);
  // The room class's socket events (see above).
  actor::EventResult ExecuteRoomSocket(Actor& actor, actor::ActorStorage& storage, const actor::ExecutorEvent& event);
  // The ledger class's version for the actor, chosen again; true if it changed.
  bool ChooseVersion(Actor& actor);
  // The ledger class's events (see above).
  void RunLedger(std::shared_ptr<Actor> a, actor::ActorStorage* storage, std::shared_ptr<const actor::ExecutorEvent> event,
                 actor::ExecutedEvent ran, std::function<void(actor::ExecutedEvent)> done);
  // The poison actor's events, requests and alarms.
  actor::EventResult ExecutePoison(Actor& actor, actor::ActorStorage& storage, const actor::ExecutorEvent& event);

  Env& env_;
  NativeActorHostOptions options_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class NativeActorHost final : public actor::EventHost {
 public:
  NativeActorHost(Env& env, actor::StorageProvider& storage, NativeActorHostOptions options);
  ~NativeActorHost() override;
  NativeActorHost(const NativeActorHost&) = delete;
  NativeActorHost& operator=(const NativeActorHost&) = delete;

  Task<actor::EventResult> HandleRequest(ActorId id, actor::Request request) override {
    return core_->HandleRequest(std::move(id), std::move(request));
  }
  Task<actor::EventResult> HandleAlarm(ActorId id, actor::AlarmEvent event) override {
    return core_->HandleAlarm(std::move(id), event);
  }
  Task<actor::EventResult> HandleMessage(ActorId id, actor::IncomingMessage message) override {
    return core_->HandleMessage(std::move(id), std::move(message));
  }
  Task<Result<std::vector<std::pair<std::uint64_t, actor::OutboxMessage>>>> ReadOutbox(ActorId id,
                                                                                       std::size_t max) override {
    return core_->ReadOutbox(std::move(id), max);
  }
  Task<actor::EventResult> HandleSocket(ActorId id, actor::SocketEvent event) override {
    return core_->HandleSocket(std::move(id), std::move(event));
  }
  void SetSocketDirectory(actor::SocketDirectory* sockets) { core_->SetSocketDirectory(sockets); }
  Task<Status> CommitSystem(ActorId id, actor::Batch batch) override {
    return core_->CommitSystem(std::move(id), std::move(batch));
  }
  Task<Result<std::uint64_t>> ResolveDead(ActorId id, std::uint64_t seq, actor::DeadAction action) override {
    return core_->ResolveDead(std::move(id), seq, action);
  }
  void SetOutboxListener(std::function<void(const ActorId&)> fn) { core_->SetOutboxListener(std::move(fn)); }
  void Unload(const ActorId& id) override { core_->Unload(id); }
  void Warm(const ActorId& id) override { core_->Warm(id); }
  bool IsResident(const ActorId& id) const override { return core_->IsResident(id); }

  actor::RuntimeStats stats() const { return core_->stats(); }
  // Called with (actor, why) when an actor leaves memory (tracing).
  void set_on_closed(std::function<void(const ActorId&, const std::string&)> fn) { on_closed_ = std::move(fn); }

 private:
  NativeExecutor executor_;
  std::unique_ptr<actor::ActorRuntimeCore> core_;  // after executor_: destroyed first
  std::function<void(const ActorId&, const std::string&)> on_closed_;
};

}  // namespace wk::sim
