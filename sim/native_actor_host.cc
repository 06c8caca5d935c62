#include "native_actor_host.h"

#include <algorithm>
#include <cstdlib>

#include "actor/messages.h"
#include "base/check.h"

namespace wk::sim {

void NativeVersions::Set(const std::string& class_name, actor::VersionChooser chooser,
                         const std::vector<std::uint32_t>& in_play) {
  Class& c = classes_[class_name];
  c.chooser = std::move(chooser);
  c.loaded.insert(in_play.begin(), in_play.end());
}

void NativeVersions::AddLoaded(const std::string& class_name, std::uint32_t version) {
  classes_[class_name].loaded.insert(version);
}

bool NativeVersions::Versioned(const std::string& class_name) const {
  const auto it = classes_.find(class_name);
  return it != classes_.end() && it->second.chooser != nullptr;
}

actor::VersionPick NativeVersions::Choose(const std::string& class_name, std::string_view name, std::uint32_t mark,
                                          bool empty) const {
  return classes_.at(class_name).chooser(name, mark, empty);
}

bool NativeVersions::Loaded(const std::string& class_name, std::uint32_t version) const {
  const auto it = classes_.find(class_name);
  return it != classes_.end() && it->second.loaded.contains(version);
}

struct NativeExecutor::Actor final : actor::ExecutorActor {
  ActorId id;
  bool alarm_class = false;
  bool poison_class = false;
  bool mail_class = false;
  bool ledger_class = false;
  bool has_instance = false;
  std::uint64_t last_seq = 0;  // the last batch committed in this residency
  actor::ActorVersions versions;  // the ledger class's
};

NativeExecutor::NativeExecutor(Env& env, const NativeActorHostOptions& options) : env_(env), options_(options) {}

NativeExecutor::~NativeExecutor() { *alive_ = false; }

std::shared_ptr<actor::ExecutorActor> NativeExecutor::NewActor(const ActorId& id, const std::string&) {
  auto a = std::make_shared<Actor>();
  a->id = id;
  a->alarm_class = id.class_name == "alarm";
  a->poison_class = id.class_name == "poison";
  a->mail_class = id.class_name == "mail";
  a->ledger_class = id.class_name == "ledger";
  if (a->ledger_class && (options_.versions == nullptr || !options_.versions->Versioned(id.class_name))) return nullptr;
  return a;
}

void NativeExecutor::Started(actor::ExecutorActor& actor, const actor::ActorStorage& storage) {
  auto& a = static_cast<Actor&>(actor);
  a.last_seq = 0;
  if (!a.ledger_class) return;
  a.versions.Start(storage);
  ChooseVersion(a);
}

std::vector<std::uint32_t> NativeExecutor::VersionsMissing(const actor::ExecutorActor& actor,
                                                           const actor::ActorStorage& storage) {
  const auto& a = static_cast<const Actor&>(actor);
  if (!a.ledger_class) return {};
  const NativeVersions& v = *options_.versions;
  const actor::VersionPick pick = v.Choose(a.id.class_name, a.id.name,
                                           actor::ParseClassVersion(storage.GetSystem(actor::kClassVersionKey)),
                                           actor::StoresNothing(storage));
  return actor::VersionsNeeded(pick, [&](std::uint32_t n) { return v.Loaded(a.id.class_name, n); });
}

bool NativeExecutor::UseCurrentCode(actor::ExecutorActor& actor) {
  auto& a = static_cast<Actor&>(actor);
  return a.ledger_class && ChooseVersion(a);
}

bool NativeExecutor::CodeMissing(const actor::ExecutorActor& actor) const {
  return static_cast<const Actor&>(actor).versions.missing != 0;
}

bool NativeExecutor::ChooseVersion(Actor& a) {
  const NativeVersions& v = *options_.versions;
  const std::uint32_t before = a.versions.run;
  const auto loaded = [&](std::uint32_t n) { return v.Loaded(a.id.class_name, n); };
  if (!a.versions.Apply(v.Choose(a.id.class_name, a.id.name, a.versions.mark, a.versions.empty), loaded,
                        options_.broken)) {
    return false;
  }
  a.version = a.versions.run;
  return a.versions.run != before;
}

void NativeExecutor::Finish(Actor& a, actor::ActorStorage& storage, actor::ExecutedEvent ran,
                            const std::function<void(actor::ExecutedEvent)>& done) {
  ran.wait_seq = a.last_seq;
  ran.memory.has_instance = a.has_instance;
  ran.memory.state = storage.MemoryBytes();
  ran.ran = env_.MonoNow();
  done(std::move(ran));
}

bool NativeExecutor::FinishIfStorageFailed(Actor& a, actor::ActorStorage& storage, actor::ExecutedEvent& ran,
                                           const std::function<void(actor::ExecutedEvent)>& done) {
  if (storage.failure().ok()) return false;
  ran.result.outcome = actor::EventOutcome::kUnavailable;
  ran.result.error = storage.failure().ToString();
  Finish(a, storage, std::move(ran), done);
  return true;
}

void NativeExecutor::Run(std::shared_ptr<actor::ExecutorActor> actor, actor::ActorStorage* storage,
                         std::shared_ptr<const actor::ExecutorEvent> event,
                         std::function<void(actor::ExecutedEvent)> done) {
  auto a = std::static_pointer_cast<Actor>(std::move(actor));
  std::weak_ptr<bool> alive = alive_;
  env_.Post([this, alive, a, storage, event, done = std::move(done)] {
    auto l = alive.lock();
    if (!l || !*l) return;
    actor::ExecutedEvent ran;
    ran.started = env_.MonoNow();
    if (!a->has_instance) {
      a->has_instance = true;
      ran.instantiated = true;
    }
    if (Status failed = storage->failure(); !failed.ok()) {
      // The gate will refuse this answer anyway: run nothing over a void state.
      ran.result.outcome = actor::EventOutcome::kUnavailable;
      ran.result.error = failed.ToString();
      Finish(*a, *storage, std::move(ran), done);
      return;
    }
    if (event->socket) {
      ran.result = ExecuteRoomSocket(*a, *storage, *event);
      Finish(*a, *storage, std::move(ran), done);
      return;
    }
    if (a->poison_class) {
      ran.result = ExecutePoison(*a, *storage, *event);
      Finish(*a, *storage, std::move(ran), done);
      return;
    }
    if (a->ledger_class) {
      RunLedger(a, storage, event, std::move(ran), std::move(done));
      return;
    }
    if (a->mail_class && (event->request || event->message)) {  // its alarm events: ExecuteAlarm's
      RunMail(a, storage, event, std::move(ran), std::move(done));
      return;
    }
    if (!event->request) {
      ran.result = ExecuteAlarm(*a, *storage, *event);
      Finish(*a, *storage, std::move(ran), done);
      return;
    }
    const actor::Request& request = *event->request;
    if (a->alarm_class || request.method != "POST") {
      ran.result.response = ExecuteAlarmRequest(*a, *storage, request);
      Finish(*a, *storage, std::move(ran), done);
      return;
    }
    // An append: read, take a little time, write back (see the header).
    std::string list = storage->Get("list").value_or("");
    list = list.empty() ? request.body : list + "," + request.body;
    const MonoTime at = env_.MonoNow() + std::chrono::microseconds(env_.RandomBelow(2001));
    env_.StartTimer(at, [this, alive, a, storage, event, list = std::move(list), ran = std::move(ran), done]() mutable {
      auto l = alive.lock();
      if (!l || !*l) return;
      if (storage->failure().ok()) {
        actor::Batch batch;
        batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "list", std::move(list)});
        ran.result.response.body = "appended";
        // As the V8 executor does: a keyed request's answer joins its batch (actor/idempotency.h).
        if (event->idempotent && !options_.broken.on(BrokenModel::kIdempotentAnswerNotInBatch)) {
          actor::AddIdempotencyRecord(*event->idempotent, ran.result.response, event->now_ms, *storage, batch);
        }
        a->last_seq = storage->Commit(std::move(batch));
      } else {
        ran.result.outcome = actor::EventOutcome::kUnavailable;
        ran.result.error = storage->failure().ToString();
      }
      Finish(*a, *storage, std::move(ran), done);
    });
  });
}

namespace {

// The mail class's list values: comma-separated, "" is empty.
void AppendTo(std::string& list, std::string_view item) {
  if (!list.empty()) list += ",";
  list += item;
}

std::string QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=') {
      return std::string(pair.substr(name.size() + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

}  // namespace

void NativeExecutor::RunMail(std::shared_ptr<Actor> a, actor::ActorStorage* storage,
                             std::shared_ptr<const actor::ExecutorEvent> event, actor::ExecutedEvent ran,
                             std::function<void(actor::ExecutedEvent)> done) {
  if (event->request && event->request->method != "POST") {
    ran.result.response.body = storage->Get("got").value_or("");
    Finish(*a, *storage, std::move(ran), done);
    return;
  }
  if (!event->request && !event->message) {  // an alarm: the mail class has none
    Finish(*a, *storage, std::move(ran), done);
    return;
  }
  // A send or a handler's run reads, takes a little time, then writes back (as an append):
  // two running at once would lose one.
  std::string sent = storage->Get("sent").value_or("");
  std::string got = storage->Get("got").value_or("");
  const bool fail = event->message && static_cast<int>(env_.RandomBelow(100)) < options_.mail_failure_percent;
  std::weak_ptr<bool> alive = alive_;
  const MonoTime at = env_.MonoNow() + std::chrono::microseconds(env_.RandomBelow(2001));
  env_.StartTimer(at, [this, alive, a, storage, event, sent = std::move(sent), got = std::move(got), fail,
                       ran = std::move(ran), done]() mutable {
    auto l = alive.lock();
    if (!l || !*l) return;
    if (FinishIfStorageFailed(*a, *storage, ran, done)) return;
    if (fail) {
      ran.result.outcome = actor::EventOutcome::kActorFailed;
      ran.result.error = "the mail handler failed";
      Finish(*a, *storage, std::move(ran), done);
      return;
    }
    actor::MessageSendBuffer outbox(*storage, actor::MessageLimits{}, options_.broken);
    actor::Batch batch;
    auto send = [&](const std::string& to, const std::string& body) {
      auto seq = outbox.Send(a->id, "mail/" + to, body, event->now_ms);
      WK_CHECK(seq.ok(), "the mail class sends to its own tenant: " + seq.status().ToString());
    };
    if (event->request) {
      // POST /send?to=a,b&hops=H with body <id>: sends "<id>:<H>" to each.
      const actor::Request& r = *event->request;
      const std::string hops = QueryValue(r.query, "hops");
      std::string to = QueryValue(r.query, "to");
      AppendTo(sent, r.body);
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "sent", sent});
      for (std::size_t start = 0; start <= to.size();) {
        const auto comma = std::min(to.find(',', start), to.size());
        if (comma > start) send(to.substr(start, comma - start), r.body + ":" + hops);
        start = comma + 1;
      }
      ran.result.response.body = "sent";
    } else {
      // A message "<id>:<hops>": logged as "<from>#<seq>:<id>:<hops>", and passed on round
      // the ring (m<i> to m<i+1>) while hops are left.
      const actor::IncomingMessage& m = *event->message;
      AppendTo(got, m.from.name + "#" + std::to_string(m.seq) + ":" + m.body);
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "got", got});
      const auto colon = m.body.rfind(':');
      const int hops = colon == std::string::npos ? 0 : std::atoi(m.body.c_str() + colon + 1);
      if (hops > 0 && options_.mail_ring > 0 && a->id.name.size() > 1) {
        const int self = std::atoi(a->id.name.c_str() + 1);
        send("m" + std::to_string((self + 1) % options_.mail_ring),
             m.body.substr(0, colon) + ":" + std::to_string(hops - 1));
      }
      if (!options_.broken.on(BrokenModel::kAppliedRecordNotInBatch)) actor::RecordApplied(batch, m.from, m.seq);
    }
    outbox.AddTo(batch);
    ran.result.messages_sent = outbox.size();
    a->last_seq = storage->Commit(std::move(batch));
    Finish(*a, *storage, std::move(ran), done);
  });
}

void NativeExecutor::RunLedger(std::shared_ptr<Actor> a, actor::ActorStorage* storage,
                               std::shared_ptr<const actor::ExecutorEvent> event, actor::ExecutedEvent ran,
                               std::function<void(actor::ExecutedEvent)> done) {
  actor::ActorVersions& versions = a->versions;
  auto refuse = [&](std::string why) {
    ran.result.outcome = actor::EventOutcome::kUnavailable;
    ran.result.error = std::move(why);
    Finish(*a, *storage, std::move(ran), done);
  };
  if (versions.missing != 0) return refuse("version " + std::to_string(versions.missing) + " is not loaded");
  if (versions.blocked != 0) {
    return refuse("the migration to version " + std::to_string(versions.blocked) + " failed and the state's version is broken");
  }
  if (versions.upgrade_from) {
    // The migration first, in a batch of its own with the mark (actor_versions.h).
    const std::uint32_t from = *versions.upgrade_from;
    const std::uint32_t to = versions.run;
    const bool ok = static_cast<int>(env_.RandomBelow(100)) >= options_.migration_failure_percent;
    if (options_.on_migration) options_.on_migration(a->id, from, to, ok);
    if (ok) {
      std::string log = storage->Get("log").value_or("");
      AppendTo(log, "u" + std::to_string(from) + ">" + std::to_string(to));
      actor::Batch batch;
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", std::move(log)});
      versions.Upgraded(batch, options_.broken);
      a->last_seq = storage->Commit(std::move(batch));
      versions.Committed(*storage);
    } else if (versions.UpgradeFailed()) {
      a->version = versions.run;
    } else {
      return refuse("the migration to version " + std::to_string(to) + " failed and the state's version is broken");
    }
  }
  const std::string run = std::to_string(versions.run);
  if (!event->request) {  // no alarms, messages or sockets of its own
    actor::SetAlarmAfter(ran.result, *storage);
    Finish(*a, *storage, std::move(ran), done);
    return;
  }
  if (event->request->method != "POST") {
    ran.result.response.body = run + "|" + std::to_string(versions.mark) + "|" + storage->Get("log").value_or("");
    Finish(*a, *storage, std::move(ran), done);
    return;
  }
  // An append: read, take a little time, write back (as the list class's).
  std::string log = storage->Get("log").value_or("");
  AppendTo(log, run + "." + event->request->body);
  std::weak_ptr<bool> alive = alive_;
  const MonoTime at = env_.MonoNow() + std::chrono::microseconds(env_.RandomBelow(2001));
  env_.StartTimer(at, [this, alive, a, storage, run, log = std::move(log), ran = std::move(ran), done]() mutable {
    auto l = alive.lock();
    if (!l || !*l) return;
    if (FinishIfStorageFailed(*a, *storage, ran, done)) return;
    actor::Batch batch;
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", std::move(log)});
    a->versions.Mark(batch);
    a->last_seq = storage->Commit(std::move(batch));
    a->versions.Committed(*storage);
    ran.result.response.body = run;
    Finish(*a, *storage, std::move(ran), done);
  });
}

void NativeExecutor::DropInstance(std::shared_ptr<actor::ExecutorActor> actor) {
  auto a = std::static_pointer_cast<Actor>(std::move(actor));
  std::weak_ptr<bool> alive = alive_;
  env_.Post([alive, a] {
    auto l = alive.lock();
    if (l && *l) a->has_instance = false;
  });
}

void NativeExecutor::Close(std::shared_ptr<actor::ExecutorActor> actor, std::function<void()> done) {
  auto a = std::static_pointer_cast<Actor>(std::move(actor));
  std::weak_ptr<bool> alive = alive_;
  env_.Post([alive, a, done = std::move(done)] {
    auto l = alive.lock();
    if (!l || !*l) return;
    a->has_instance = false;
    done();
  });
}

actor::EventResult NativeExecutor::ExecuteRoomSocket(Actor& a, actor::ActorStorage& storage,
                                                     const actor::ExecutorEvent& event) {
  actor::EventResult result;
  const actor::SocketEvent& e = *event.socket;
  actor::SocketEventState sockets(event.sockets, actor::SocketLimits{}, &e);
  switch (e.kind) {
    case actor::SocketEventKind::kOpen: {
      // The newest message first, as the chat room sends its history on open: a broadcast
      // released after this must not reach the new member again (S2 catches it twice).
      (void)sockets.Tag(e.id, "m");
      const std::string list = storage.Get("list").value_or("");
      if (!list.empty()) {
        const auto comma = list.rfind(',');
        const auto n = std::count(list.begin(), list.end(), ',') + 1;
        const std::string last = comma == std::string::npos ? list : list.substr(comma + 1);
        (void)sockets.Send(e.id, std::to_string(n) + ":" + last, false);
      }
      break;
    }
    case actor::SocketEventKind::kMessage: {
      std::string list = storage.Get("list").value_or("");
      list = list.empty() ? e.data : list + "," + e.data;
      const auto n = std::count(list.begin(), list.end(), ',') + 1;
      (void)sockets.Broadcast("m", std::to_string(n) + ":" + e.data, false);
      actor::Batch batch;
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "list", std::move(list)});
      a.last_seq = storage.Commit(std::move(batch));
      break;
    }
    case actor::SocketEventKind::kClose:
      break;
  }
  result.sockets = sockets.TakeEffects();
  return result;
}

actor::EventResult NativeExecutor::ExecuteAlarm(Actor& a, actor::ActorStorage& storage,
                                                const actor::ExecutorEvent& event) {
  actor::EventResult r;
  const std::optional<std::int64_t> current = storage.Alarm();
  const std::int64_t now = event.now_ms;
  if (!a.alarm_class || !actor::AlarmDue(current, now, options_.broken)) {
    actor::SetAlarmAfter(r, storage);  // nothing runs: a stale or early delivery (actor/alarm_event.h)
    return r;
  }
  const std::int64_t due = *current;
  const actor::AlarmEvent& alarm = event.alarm;
  const bool fail = PoisonedAlarm(due) || static_cast<int>(env_.RandomBelow(100)) < options_.alarm_failure_percent;
  if (options_.on_alarm_run) options_.on_alarm_run(a.id, due, now, alarm.retry_count, fail, alarm.last_attempt);
  if (fail) {
    r.outcome = actor::EventOutcome::kActorFailed;
    r.error = "the alarm handler failed";
    if (alarm.last_attempt) {
      actor::Batch clear;
      clear.alarm = std::optional<std::int64_t>();
      a.last_seq = storage.Commit(std::move(clear));
    }
    actor::SetAlarmAfter(r, storage);
    return r;
  }
  std::string log = storage.Get("log").value_or("");
  auto append = [&log](const std::string& op) { log = log.empty() ? op : log + "," + op; };
  append("f" + std::to_string(due) + ":" + std::to_string(alarm.retry_count) + ":" + std::to_string(now));
  actor::Batch batch;
  batch.alarm = std::optional<std::int64_t>();  // cleared as the handler starts
  if (static_cast<int>(env_.RandomBelow(100)) < options_.alarm_rearm_percent) {
    const std::int64_t next = now + 500 + static_cast<std::int64_t>(env_.RandomBelow(7500));
    batch.alarm = std::optional<std::int64_t>(next);
    append("s" + std::to_string(next));
  }
  batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", log});
  a.last_seq = storage.Commit(std::move(batch));
  r.alarm_fired = true;
  actor::SetAlarmAfter(r, storage);
  return r;
}

actor::EventResult NativeExecutor::ExecutePoison(Actor& a, actor::ActorStorage& storage,
                                                 const actor::ExecutorEvent& event) {
  actor::EventResult r;
  if (event.request) {
    const actor::Request& request = *event.request;
    if (request.method == "GET") {
      r.response.body = storage.Get("armed").value_or("0");
      return r;
    }
    if (request.method == "POST" && request.path == "/arm" && request.query.starts_with("t=")) {
      actor::Batch batch;
      batch.alarm = std::optional<std::int64_t>(std::stoll(request.query.substr(2)));
      batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "armed",
                                                std::to_string(std::stoll(storage.Get("armed").value_or("0")) + 1)});
      a.last_seq = storage.Commit(std::move(batch));
      r.response.body = "armed";
      return r;
    }
  } else {
    const std::optional<std::int64_t> current = storage.Alarm();
    if (!actor::AlarmDue(current, event.now_ms, options_.broken)) {
      actor::SetAlarmAfter(r, storage);
      return r;
    }
    if (event.alarm.last_attempt) {
      actor::Batch clear;
      clear.alarm = std::optional<std::int64_t>();
      a.last_seq = storage.Commit(std::move(clear));
    }
    actor::SetAlarmAfter(r, storage);
  }
  // What reaching the worker's heap limit looks like to the runtime: the event fails and its
  // instance is gone; the node's quarantine counts it.
  r.outcome = actor::EventOutcome::kActorFailed;
  r.error = "the event reached the worker's heap limit (simulated)";
  a.has_instance = false;
  if (options_.strike) options_.strike(a.id, std::string(event.request ? "request" : "alarm") + " exhausted the heap");
  return r;
}

actor::Response NativeExecutor::ExecuteAlarmRequest(Actor& a, actor::ActorStorage& storage,
                                                    const actor::Request& request) {
  actor::Response response;
  if (a.alarm_class) {
    std::string log = storage.Get("log").value_or("");
    if (request.method == "GET") {
      response.body = log;
      return response;
    }
    actor::Batch batch;
    std::string op;
    if (request.method == "POST" && request.path == "/set" && request.query.starts_with("t=")) {
      const std::int64_t t = std::stoll(request.query.substr(2));
      batch.alarm = std::optional<std::int64_t>(t);
      op = "s" + std::to_string(t);
    } else if (request.method == "POST" && request.path == "/del") {
      batch.alarm = std::optional<std::int64_t>();
      op = "d";
    } else {
      response.status = 400;
      response.body = "the alarm actor takes GET, POST /set?t=<ms> and POST /del";
      return response;
    }
    batch.mutations.push_back(actor::Mutation{actor::Mutation::Kind::kPut, "log", log.empty() ? op : log + "," + op});
    a.last_seq = storage.Commit(std::move(batch));
    response.body = op;
    return response;
  }
  if (request.method == "GET") {
    response.body = storage.Get("list").value_or("");
    return response;
  }
  response.status = 405;
  response.body = "the list actor takes GET and POST";
  return response;
}

NativeActorHost::NativeActorHost(Env& env, actor::StorageProvider& storage, NativeActorHostOptions options)
    : executor_(env, options) {
  actor::RuntimeCoreOptions core;
  core.idle_hibernate = options.idle_hibernate;
  core.idle_instance = options.idle_hibernate / 2;
  core.broken = options.broken;
  // With mail actors, a ring's messages queue behind the clients' sends.
  if (options.mail_ring > 0) core.limits.max_queued_events = 256;
  core.load_version = options.load_version;
  core.resident_limit = options.resident_limit;
  core_ = std::make_unique<actor::ActorRuntimeCore>(
      env, executor_, storage, std::move(core), [this](const ActorId& id, actor::UnloadReason reason) {
        if (on_closed_) on_closed_(id, std::string(actor::UnloadReasonName(reason)));
      });
}

NativeActorHost::~NativeActorHost() { core_.reset(); }

}  // namespace wk::sim
