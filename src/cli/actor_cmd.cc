#include "cli/actor_cmd.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "actor/abi.h"
#include "actor/messages.h"
#include "cli/actor_api_cmd.h"
#include "actor/runtime.h"
#include "alarms/format.h"
#include "cluster/balance.h"
#include "cluster/operator.h"
#include "cluster/owner_record.h"
#include "control/quarantine.h"
#include "control/tenants.h"
#include "engine/engine.h"
#include "base/time_text.h"
#include "replica/history.h"
#include "replica/restore.h"

namespace wk::cli {
namespace {

struct CheckOptions {
  std::string file;
  bool json = false;
};

int RunCheck(const GlobalOptions& globals, const CheckOptions& opts) {
  auto config = LoadConfigFromOptions(globals);
  if (!config.ok()) {
    std::fprintf(stderr, "wasmkeep: %s\n", config.status().ToString().c_str());
    return kExitUsage;
  }
  std::ifstream in(opts.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "wasmkeep: cannot read %s\n", opts.file.c_str());
    return kExitUsage;
  }
  std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  engine::Engine engine;
  auto module = actor::CompileActorModule(engine, bytes, config->actors.limits);
  if (!module.ok()) {
    std::fprintf(stderr, "wasmkeep: %s: %s\n", opts.file.c_str(), module.status().message().c_str());
    return kExitUsage;
  }
  const engine::Module& m = **module;
  std::vector<std::string> imports;
  for (const auto& imp : m.info().imports) imports.push_back(imp.module + "." + imp.name);
  const bool has_alarm = m.HasExport(actor::kAlarmExport);
  const double compile_ms = std::chrono::duration<double, std::milli>(m.compile_time()).count();
  if (opts.json) {
    nlohmann::json j = {{"file", opts.file},         {"bytes", bytes.size()},
                        {"abi", "wasmkeep_v1"},      {"alarm_handler", has_alarm},
                        {"max_memory_bytes", m.max_memory_bytes()},
                        {"compile_ms", compile_ms},  {"imports", imports}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%s: ok (ABI wasmkeep_v1)\n", opts.file.c_str());
    std::printf("  size            %zu bytes\n", bytes.size());
    std::printf("  alarm handler   %s\n", has_alarm ? "yes (wk_on_alarm)" : "no");
    std::printf("  memory maximum  %llu bytes\n", static_cast<unsigned long long>(m.max_memory_bytes()));
    std::printf("  compile time    %.1f ms\n", compile_ms);
    std::printf("  imports         %zu:", imports.size());
    for (const auto& i : imports) std::printf(" %s", i.c_str());
    std::printf("\n");
  }
  return kExitOk;
}

struct QuarantineArgs {
  std::string actor;   // unquarantine
  std::string tenant;  // quarantined: only this tenant
  bool all = false;    // quarantined: records past their quarantine too
  bool json = false;
};

Task<int> Unquarantine(ObjectStore* store, ActorId actor, CallOptions call) {
  Status s = co_await control::LiftQuarantine(*store, actor, call);
  if (!s.ok()) co_return Fail(s);
  std::printf("lifted the quarantine of %s (its strikes are forgotten too); every node starts it again within "
              "2 seconds\n",
              actor.ToString().c_str());
  co_return kExitOk;
}

Task<int> ListQuarantined(ObjectStore* store, RealEnv* env, QuarantineArgs a, CallOptions call) {
  std::optional<std::string> tenant;
  if (!a.tenant.empty()) tenant = a.tenant;
  auto list = co_await control::ListQuarantine(*store, tenant, call);
  if (!list.ok()) co_return Fail(list.status());
  const WallTime now = env->WallNow();
  bool errors = false;
  nlohmann::json out = nlohmann::json::array();
  if (!a.json) std::printf("%-40s %-11s %-24s %-8s %s\n", "ACTOR", "STATE", "UNTIL", "STRIKES", "LAST REASON");
  std::size_t shown = 0;
  for (const auto& q : *list) {
    if (!q.record) {
      errors = true;
      if (a.json) {
        out.push_back({{"actor", q.actor.ToString()}, {"error", q.error}});
      } else {
        std::printf("%-40s ERROR: %s\n", q.actor.ToString().c_str(), q.error.c_str());
      }
      continue;
    }
    const control::QuarantineRecord& r = *q.record;
    const bool quarantined = r.QuarantinedAt(now);
    if (!quarantined && !a.all) continue;
    ++shown;
    const char* state = quarantined ? "quarantined" : "strikes";
    if (a.json) {
      nlohmann::json strikes = nlohmann::json::array();
      for (const auto& st : r.strikes) strikes.push_back({{"at_ms", ToUnixMs(st.at)}, {"node", st.node}});
      out.push_back({{"actor", r.actor.ToString()},
                     {"quarantined", quarantined},
                     {"until_ms", ToUnixMs(r.until)},
                     {"reason", r.reason},
                     {"strikes", strikes}});
    } else {
      const std::string until = ToUnixMs(r.until) == 0 ? std::string("-") : control::FormatUtc(r.until);
      std::printf("%-40s %-11s %-24s %-8zu %s\n", r.actor.ToString().c_str(), state, until.c_str(), r.strikes.size(),
                  r.reason.c_str());
    }
  }
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else if (shown == 0 && !errors) {
    std::printf(a.all ? "(no quarantine records)\n" : "(no actor is quarantined)\n");
  }
  if (errors) std::fprintf(stderr, "wasmkeep: some quarantine records are corrupt: their actors answer 500 until `actor unquarantine` removes them\n");
  co_return kExitOk;
}

int RunQuarantine(const GlobalOptions& g, const QuarantineArgs& a, bool lift) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  ActorId actor;
  if (lift) {
    auto id = ParseActorId(a.actor);
    if (!id.ok()) return Fail(id.status());
    actor = *id;
  } else if (!a.tenant.empty()) {
    if (Status s = control::ValidateTenantName(a.tenant); !s.ok()) return Fail(s);
  }
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  if (lift) return env.RunMain(Unquarantine(store->get(), actor, *call));
  return env.RunMain(ListQuarantined(store->get(), &env, a, *call));
}

struct MoveArgs {
  std::string actor;
  std::string to;
  double wait_seconds = 30;
};

// `actor move T/C/N --to NODE`: a request in the bucket for the node that holds the actor
// (control/move/..., cluster/move_control.h), then the node's outcome.
Task<int> Move(RealEnv* env, ObjectStore* store, LeaseTiming timing, ActorId actor, NodeId to, double wait_seconds) {
  const CallOptions call{timing.ttl};
  auto got = co_await store->Get(OwnerKey(actor), call);
  if (!got.ok() && got.code() != Code::kNotFound) co_return Fail(got.status());
  std::optional<OwnerRecord> rec;
  if (got.ok()) {
    auto decoded = DecodeOwnerRecord(got->body);
    if (!decoded.ok()) co_return Fail(decoded.status());
    rec = *decoded;
  }
  if (!rec || rec->names_nobody()) {
    co_return Fail(NotFound("no node holds " + actor.ToString() + ": it starts wherever its next request lands"));
  }
  const NodeId from = rec->node_id;
  if (from == to) {
    std::printf("%s is already held by %s\n", actor.ToString().c_str(), to.str().c_str());
    co_return kExitOk;
  }
  Membership membership(*env, *store, timing);
  if (Status s = co_await membership.ListOnce(); !s.ok()) co_return Fail(s);
  const WallTime now = env->WallNow();
  auto live = [&](const NodeId& id, const InstanceToken* instance) {
    auto it = membership.view().find(id);
    if (it == membership.view().end() || DescribeNode(it->second, now, timing).state != "live") return false;
    return instance == nullptr || it->second.record->instance == *instance;
  };
  if (!live(from, &rec->instance)) {
    co_return Fail(PreconditionFailed(actor.ToString() + " is recorded to " + from.str() +
                                      ", which is not live: it is freed ttl + grace after that node's last write"));
  }
  if (!live(to, nullptr)) co_return Fail(PreconditionFailed(to.str() + " is not live"));
  // A named local, not a braced temporary in the co_await operand: GCC 12 destroys such a
  // temporary twice (docs/DEVELOPING.md).
  PlannedMove move{actor, from, to};
  Status requested = co_await RequestMove(*env, *store, std::move(move), call);
  if (!requested.ok()) co_return Fail(requested);
  std::printf("move of %s from %s to %s requested\n", actor.ToString().c_str(), from.str().c_str(), to.str().c_str());
  const MonoTime deadline =
      env->MonoNow() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait_seconds));
  auto outcome = co_await AwaitMove(*env, *store, from, actor, deadline, call);
  if (!outcome.ok()) co_return Fail(outcome.status());
  const std::string detail = outcome->detail.empty() ? "" : " (" + outcome->detail + ")";
  switch (outcome->state) {
    case MoveState::kMoved:
      std::printf("%s moved from %s to %s%s\n", actor.ToString().c_str(), from.str().c_str(), to.str().c_str(), detail.c_str());
      co_return kExitOk;
    case MoveState::kRequested:
      std::fprintf(stderr, "wasmkeep: %s has not carried the move out yet (it reads requests after each listing); "
                   "the request stays\n", from.str().c_str());
      co_return kExitUnknownOutcome;
    case MoveState::kPending:
      std::fprintf(stderr, "wasmkeep: %s stopped acting for %s, but its release is pending%s: the actor is freed when "
                   "it lands, or when %s stops or is fenced\n",
                   from.str().c_str(), actor.ToString().c_str(), detail.c_str(), from.str().c_str());
      co_return kExitUnknownOutcome;
    case MoveState::kReleased:
      std::fprintf(stderr, "wasmkeep: %s released %s, but %s did not take it%s: it starts wherever its next request "
                   "lands\n", from.str().c_str(), actor.ToString().c_str(), to.str().c_str(), detail.c_str());
      co_return kExitError;
    case MoveState::kRefused:
      break;
  }
  co_return Fail(PreconditionFailed(from.str() + " refused the move" + detail));
}

int RunMove(const GlobalOptions& g, const MoveArgs& a) {
  auto id = ParseActorId(a.actor);
  if (!id.ok()) return Fail(id.status());
  const NodeId to(a.to);
  if (Status s = ValidateNodeId(to); !s.ok()) return Fail(InvalidArgument("--to: " + s.message()));
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);  // a move needs a cluster: never creates one
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(Move(&env, store->get(), config->lease, *id, to, a.wait_seconds));
}

struct AlarmArgs {
  std::string actor;
  bool json = false;
};

// Pages of the actor's shard listed to find its index entries (stale ones included).
constexpr int kAlarmShardPages = 10;

// `actor alarm`: the actor's alarm as its durable state holds it (a read-only restore, as
// a node's; nothing is written), who holds the actor, and its index entries
// (docs/alarms.md).
Task<int> ShowAlarm(ObjectStore* store, RealEnv* env, AlarmArgs a, ActorId actor, CallOptions call) {
  replica::RestoreOptions ro;
  ro.read_timeout = call.timeout;
  ro.list_timeout = call.timeout;
  // The highest generation there is: a restore that reads and never writes.
  auto restored = co_await replica::Restore(*env, *store, actor, Generation{UINT64_MAX - 1}, ro);
  if (!restored.ok()) co_return Fail(restored.status());
  const std::optional<std::int64_t> alarm = restored->state.alarm();
  // The index keeps the indexed time: the alarm, or an outbox's wake time when earlier
  // (docs/alarms.md, "The index"). An entry for another time is stale.
  const std::optional<std::int64_t> indexed = restored->state.indexed_time();
  const std::optional<std::int64_t> wake =
      actor::ParseWake(restored->state.GetSystem(actor::kWakeKey).value_or(std::string()));
  auto owner = co_await store->Get(OwnerKey(actor), call);
  if (!owner.ok() && owner.code() != Code::kNotFound) co_return Fail(owner.status());
  std::optional<OwnerRecord> record;
  if (owner.ok()) {
    auto decoded = DecodeOwnerRecord(owner->body);
    if (!decoded.ok()) co_return Fail(decoded.status());
    record = *decoded;
  }
  std::vector<alarms::EntryKey> entries;
  bool more = false;
  ListOptions lo;
  lo.prefix = alarms::ShardPrefix(alarms::ShardOf(actor));
  for (int page = 0; page < kAlarmShardPages; ++page) {
    ListOptions this_page = lo;
    auto listed = co_await store->List(std::move(this_page), call);
    if (!listed.ok()) co_return Fail(listed.status());
    for (const ListEntry& e : listed->entries) {
      auto k = alarms::ParseEntryKey(e.key);
      if (k.ok() && k->actor == actor) entries.push_back(*k);
    }
    more = listed->next_continuation.has_value();
    if (!more) break;
    lo.continuation = *listed->next_continuation;
  }
  const std::int64_t now_ms = ToUnixMs(env->WallNow());
  if (a.json) {
    nlohmann::json j = {{"actor", actor.ToString()}};
    j["alarm_ms"] = alarm ? nlohmann::json(*alarm) : nlohmann::json(nullptr);
    j["wake_ms"] = wake ? nlohmann::json(*wake) : nlohmann::json(nullptr);
    if (record) {
      j["owner"] = {{"node", record->names_nobody() ? std::string() : record->node_id.str()},
                    {"generation", record->generation.value}};
    } else {
      j["owner"] = nullptr;
    }
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : entries) {
      list.push_back({{"due_ms", e.due_ms}, {"generation", e.generation.value}, {"batch", e.batch},
                      {"key", alarms::EncodeEntryKey(e)}, {"stale", indexed != std::optional<std::int64_t>(e.due_ms)}});
    }
    j["index_entries"] = list;
    j["index_listing_complete"] = !more;
    std::printf("%s\n", j.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("actor     %s\n", actor.ToString().c_str());
  if (alarm) {
    const std::int64_t in = *alarm - now_ms;
    std::printf("alarm     %s (%lld ms since the epoch), %s %.1f s\n", UtcFromUnixMs(*alarm).c_str(),
                static_cast<long long>(*alarm), in >= 0 ? "due in" : "due", static_cast<double>(in >= 0 ? in : -in) / 1000.0);
    if (in < 0) std::printf("          (%s)\n", "past due: it fires at its holder's next delivery, or is firing now");
  } else {
    std::printf("alarm     none\n");
  }
  if (wake) {
    std::printf("wake      %s (%lld ms since the epoch): its outbox has messages to deliver (docs/messages.md)\n",
                UtcFromUnixMs(*wake).c_str(), static_cast<long long>(*wake));
  }
  if (!record) {
    std::printf("held by   nobody (no ownership record yet)\n");
  } else if (record->names_nobody()) {
    std::printf("held by   nobody (generation %llu)\n", static_cast<unsigned long long>(record->generation.value));
  } else {
    std::printf("held by   %s (generation %llu)\n", record->node_id.str().c_str(),
                static_cast<unsigned long long>(record->generation.value));
  }
  std::printf("index     %zu entr%s%s\n", entries.size(), entries.size() == 1 ? "y" : "ies",
              more ? " (the shard is larger than this listing: there may be more)" : "");
  for (const auto& e : entries) {
    std::printf("          due %lld, set by generation %llu batch %llu%s\n", static_cast<long long>(e.due_ms),
                static_cast<unsigned long long>(e.generation.value), static_cast<unsigned long long>(e.batch),
                indexed == std::optional<std::int64_t>(e.due_ms) ? "" : "  (stale: removed at its next delivery)");
  }
  co_return kExitOk;
}

// Runs show(store, env, actor, call) for a command that reads one actor's objects straight
// from the bucket (never creating one): `actor alarm`, `actor messages`.
template <typename Show>
int RunOnActorBucket(const GlobalOptions& g, const std::string& actor, Show show) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  auto id = ParseActorId(actor);
  if (!id.ok()) return Fail(id.status());
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(show(store->get(), &env, *id, *call));
}

int RunAlarm(const GlobalOptions& g, const AlarmArgs& a) {
  return RunOnActorBucket(g, a.actor, [&a](ObjectStore* store, RealEnv* env, ActorId id, CallOptions call) {
    return ShowAlarm(store, env, a, std::move(id), std::move(call));
  });
}

// `actor messages`: the outbox, the dead messages and the applied records in the actor's
// durable state (docs/messages.md), read from the bucket without acquiring anything. With
// --retry or --drop, a dead message is sent again or dropped through a node instead
// (cli/actor_api_cmd.h: only the node holding the actor writes its state).
struct MessagesArgs {
  std::string actor;
  bool json = false;
  std::uint64_t retry = 0;
  std::uint64_t drop = 0;
  std::string token;
  std::string node;
};

Task<int> ShowMessages(ObjectStore* store, RealEnv* env, MessagesArgs a, ActorId actor, CallOptions call) {
  replica::RestoreOptions ro;
  ro.read_timeout = call.timeout;
  ro.list_timeout = call.timeout;
  auto restored = co_await replica::Restore(*env, *store, actor, Generation{UINT64_MAX - 1}, ro);
  if (!restored.ok()) co_return Fail(restored.status());
  auto listing = actor::ListMessages(restored->state, SIZE_MAX);
  if (!listing.ok()) co_return Fail(listing.status());
  nlohmann::json outbox = nlohmann::json::array(), dead = nlohmann::json::array(), applied = nlohmann::json::array();
  for (const auto& [list, out] : {std::pair{&listing->outbox, &outbox}, std::pair{&listing->dead, &dead}}) {
    for (const auto& [seq, m] : *list) {
      out->push_back({{"seq", seq},          {"to", m.to.ToString()},   {"bytes", m.body.size()},
                      {"sent_ms", m.sent_ms}, {"attempts", m.attempts}, {"next_try_ms", m.next_try_ms},
                      {"last_error", m.last_error}});
    }
  }
  for (const auto& [from, seq] : listing->applied) applied.push_back({{"from", from}, {"seq", seq}});
  if (a.json) {
    nlohmann::json j = {{"actor", actor.ToString()}, {"outbox", outbox}, {"dead", dead}, {"applied", applied}};
    std::printf("%s\n", j.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("%s: %zu to deliver, %zu dead, applied from %zu senders\n", actor.ToString().c_str(), outbox.size(),
              dead.size(), applied.size());
  for (const auto& [title, list] : {std::pair{"to deliver", &outbox}, std::pair{"dead", &dead}}) {
    for (const auto& e : *list) {
      std::printf("  %-10s seq %s to %s, %s bytes, %s failed attempts%s%s\n", title, e["seq"].dump().c_str(),
                  e["to"].get<std::string>().c_str(), e["bytes"].dump().c_str(), e["attempts"].dump().c_str(),
                  e["last_error"].get<std::string>().empty() ? "" : ": ",
                  e["last_error"].get<std::string>().c_str());
    }
  }
  for (const auto& e : applied) {
    std::printf("  applied    up to seq %s from %s\n", e["seq"].dump().c_str(), e["from"].get<std::string>().c_str());
  }
  co_return kExitOk;
}

int RunMessages(const GlobalOptions& g, const MessagesArgs& a) {
  return RunOnActorBucket(g, a.actor, [&a](ObjectStore* store, RealEnv* env, ActorId id, CallOptions call) {
    return ShowMessages(store, env, a, std::move(id), std::move(call));
  });
}

// `actor history`: the actor's batches in the retention window, read from the bucket
// without acquiring anything (replica/history.h); with --at or --batch, its state at that
// point instead (read-only). The window is the config's storage.retention_ms.
struct HistoryArgs {
  std::string actor;
  std::string since;
  std::string at;
  std::string batch;
  std::size_t limit = 100;
  bool json = false;
};

// A value as text when it is printable ASCII, else 0x and hex.
std::string Printable(std::string_view v) {
  bool text = true;
  for (const char ch : v) text = text && ch >= 0x20 && ch < 0x7f;
  if (text) return std::string(v);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string AlarmText(const std::optional<std::optional<std::int64_t>>& alarm) {
  if (!alarm) return "";
  if (!*alarm) return "alarm deleted";
  return "alarm " + FormatTimeMs(**alarm);
}

Task<int> ShowState(ObjectStore* store, RealEnv* env, HistoryArgs a, ActorId actor, replica::HistoryOptions o) {
  replica::PointSpec point;
  if (!a.at.empty()) {
    auto t = ParseTimeMs(a.at);
    if (!t.ok()) co_return Fail(InvalidArgument("--at: " + t.status().message()));
    point.at_ms = *t;
  } else {
    auto b = replica::ParseBatchId(a.batch);
    if (!b.ok()) co_return Fail(InvalidArgument("--batch: " + b.status().message()));
    point.batch = *b;
  }
  auto s = co_await replica::StateAt(*env, *store, actor, point, o);
  if (!s.ok()) co_return Fail(s.status());
  const std::string last = s->last       ? s->last->ToString()
                           : s->snapshot ? "none after snapshot " + s->snapshot->ToString() + " (its state)"
                                         : std::string("none (the empty state)");
  if (a.json) {
    nlohmann::json keys = nlohmann::json::object();
    for (const auto& [k, v] : s->state.entries()) keys[Printable(k)] = Printable(v);
    nlohmann::json j = {{"actor", actor.ToString()},
                        {"batch", s->last ? nlohmann::json(s->last->ToString()) : nlohmann::json(nullptr)},
                        {"time_ms", s->time_ms},
                        {"time", FormatTimeMs(s->time_ms)},
                        {"snapshot", s->snapshot ? nlohmann::json(s->snapshot->ToString()) : nlohmann::json(nullptr)},
                        {"alarm_ms", s->state.alarm() ? nlohmann::json(*s->state.alarm()) : nlohmann::json(nullptr)},
                        {"keys", keys}};
    std::printf("%s\n", j.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("%s as of batch %s (%s): %zu keys, %llu bytes%s%s\n", actor.ToString().c_str(), last.c_str(),
              FormatTimeMs(s->time_ms).c_str(), s->state.entries().size(),
              static_cast<unsigned long long>(s->state.bytes()), s->state.alarm() ? ", alarm " : "",
              s->state.alarm() ? FormatTimeMs(*s->state.alarm()).c_str() : "");
  for (const auto& [k, v] : s->state.entries()) std::printf("  %s = %s\n", Printable(k).c_str(), Printable(v).c_str());
  co_return kExitOk;
}

Task<int> ShowHistory(ObjectStore* store, RealEnv* env, HistoryArgs a, ActorId actor, CallOptions call,
                      Duration retention) {
  replica::HistoryOptions o;
  o.now_ms = ToUnixMs(env->WallNow());
  o.retention = retention;
  o.limit = a.limit;
  o.read.read_timeout = call.timeout;
  o.read.list_timeout = call.timeout;
  if (!a.at.empty() || !a.batch.empty()) co_return co_await ShowState(store, env, a, actor, o);
  if (!a.since.empty()) {
    auto t = ParseTimeMs(a.since);
    if (!t.ok()) co_return Fail(InvalidArgument("--since: " + t.status().message()));
    o.since_ms = *t;
  }
  auto h = co_await replica::ReadHistory(*env, *store, actor, o);
  if (!h.ok()) co_return Fail(h.status());
  if (a.json) {
    nlohmann::json batches = nlohmann::json::array();
    for (const auto& b : h->batches) {
      batches.push_back({{"batch", b.id.ToString()},
                         {"time_ms", b.time_ms},
                         {"generation", b.id.segment.generation.value},
                         {"puts", b.puts},
                         {"deletes", b.deletes},
                         {"delete_all", b.delete_all},
                         {"keys", b.keys},
                         {"bytes", b.bytes},
                         {"alarm", AlarmText(b.alarm)},
                         {"system", b.system}});
    }
    nlohmann::json j = {{"actor", actor.ToString()},
                        {"batches", batches},
                        {"truncated", h->truncated},
                        {"earliest_ms", h->earliest_ms ? nlohmann::json(*h->earliest_ms) : nlohmann::json(nullptr)},
                        {"latest_ms", h->latest_ms ? nlohmann::json(*h->latest_ms) : nlohmann::json(nullptr)},
                        {"retention_ms", std::chrono::duration_cast<std::chrono::milliseconds>(retention).count()}};
    std::printf("%s\n", j.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("%s: %zu batches%s; restorable from %s\n", actor.ToString().c_str(), h->batches.size(),
              h->truncated ? " (the newest; more with --limit or --since)" : "",
              h->earliest_ms ? FormatTimeMs(*h->earliest_ms).c_str() : "nothing");
  for (const auto& b : h->batches) {
    std::string keys;
    for (const auto& k : b.keys) keys += (keys.empty() ? "" : ", ") + Printable(k);
    if (b.puts + b.deletes > b.keys.size()) keys += ", ...";
    std::printf("  %s  %-12s gen %-4llu %3u put %3u del%s %6llu B  %s%s%s\n", FormatTimeMs(b.time_ms).c_str(),
                b.id.ToString().c_str(), static_cast<unsigned long long>(b.id.segment.generation.value), b.puts,
                b.deletes, b.delete_all ? " (all cleared first)" : "", static_cast<unsigned long long>(b.bytes),
                keys.c_str(), b.alarm ? "  " : "", AlarmText(b.alarm).c_str());
  }
  co_return kExitOk;
}

int RunHistory(const GlobalOptions& g, const HistoryArgs& a) {
  if (a.limit == 0 || a.limit > 100'000) return Fail(InvalidArgument("--limit is from 1 to 100000"));
  if (!a.at.empty() && !a.batch.empty()) return Fail(InvalidArgument("--at and --batch exclude each other"));
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  const replica::Retention retention = config->storage.retention;
  return RunOnActorBucket(g, a.actor, [&a, retention](ObjectStore* store, RealEnv* env, ActorId id, CallOptions call) {
    const Duration window = retention.For(id.tenant);
    return ShowHistory(store, env, a, std::move(id), std::move(call), window);
  });
}

}  // namespace

void AddActorCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  CLI::App* actor =
      app.add_subcommand("actor", "Work with actor modules (WebAssembly classes), quarantined actors and alarms");
  actor->require_subcommand(1);
  auto check = std::make_shared<CheckOptions>();
  CLI::App* c = actor->add_subcommand("check", "Check a module against the ABI and the [actors] limits, and compile it");
  c->add_option("file", check->file, "The module (.wasm)")->required();
  c->add_flag("--json", check->json, "Print the summary as JSON");
  c->callback([&globals, check, result] { *result = RunCheck(globals, *check); });

  // Quarantine (docs/security.md, "Poisoned actors").
  auto lift = std::make_shared<QuarantineArgs>();
  CLI::App* u = actor->add_subcommand("unquarantine", "Lift an actor's quarantine now (and forget its strikes)");
  u->add_option("actor", lift->actor, "TENANT/CLASS/NAME")->required();
  u->callback([&globals, lift, result] { *result = RunQuarantine(globals, *lift, true); });
  auto list = std::make_shared<QuarantineArgs>();
  CLI::App* q = actor->add_subcommand("quarantined", "List quarantined actors");
  q->add_option("--tenant", list->tenant, "Only this tenant's actors");
  q->add_flag("--all", list->all, "Also actors with strikes that are not quarantined (now)");
  q->add_flag("--json", list->json, "Print JSON");
  q->callback([&globals, list, result] { *result = RunQuarantine(globals, *list, false); });

  // Moving actors (docs/node-lease.md, "Moving actors").
  auto move = std::make_shared<MoveArgs>();
  CLI::App* m = actor->add_subcommand(
      "move", "Move an actor to NODE: closed where it is (durable, released), taken and restored by NODE at once");
  m->add_option("actor", move->actor, "TENANT/CLASS/NAME")->required();
  m->add_option("--to", move->to, "The node that takes it")->required();
  m->add_option("--wait", move->wait_seconds, "Seconds to wait for the outcome (default 30)");
  m->callback([&globals, move, result] { *result = RunMove(globals, *move); });

  // Alarms (docs/alarms.md).
  auto alarm = std::make_shared<AlarmArgs>();
  CLI::App* al = actor->add_subcommand("alarm", "Print an actor's alarm, who holds it, and its index entries");
  al->add_option("actor", alarm->actor, "TENANT/CLASS/NAME")->required();
  al->add_flag("--json", alarm->json, "Print JSON");
  al->callback([&globals, alarm, result] { *result = RunAlarm(globals, *alarm); });

  // Messages between actors (docs/messages.md).
  auto messages = std::make_shared<MessagesArgs>();
  CLI::App* ms = actor->add_subcommand(
      "messages",
      "Print an actor's messages to deliver, its dead messages and what it applied (its durable state); with "
      "--retry SEQ or --drop SEQ, send a dead message again or drop it (through a node)");
  ms->add_option("actor", messages->actor, "TENANT/CLASS/NAME")->required();
  ms->add_flag("--json", messages->json, "Print JSON");
  CLI::Option* retry = ms->add_option("--retry", messages->retry,
                                      "Send the dead message SEQ again (through a node; it gets a new number)");
  CLI::Option* drop = ms->add_option("--drop", messages->drop, "Drop the dead message SEQ (through a node)");
  retry->excludes(drop);
  ms->add_option("--token", messages->token,
                 "With --retry or --drop: a tenant's token (its own actors) or an operator's (default: WASMKEEP_TOKEN)");
  ms->add_option("--node", messages->node,
                 "With --retry or --drop: the node, HOST:PORT or http(s)://HOST:PORT (default: the config's "
                 "node.listen, else 127.0.0.1:8080)");
  ms->callback([&globals, messages, result, retry, drop] {
    if (retry->count() == 0 && drop->count() == 0) {
      *result = RunMessages(globals, *messages);
      return;
    }
    DeadMessageArgs d;
    d.actor = messages->actor;
    d.retry = retry->count() > 0;
    d.seq = d.retry ? messages->retry : messages->drop;
    d.token = messages->token;
    d.node = messages->node;
    d.json = messages->json;
    *result = RunDeadMessage(globals, d);
  });

  // History (docs/storage.md, "History and point-in-time restore").
  auto history = std::make_shared<HistoryArgs>();
  CLI::App* hi = actor->add_subcommand(
      "history", "List an actor's batches in the retention window (from the bucket); with --at or --batch, its state then");
  hi->add_option("actor", history->actor, "TENANT/CLASS/NAME")->required();
  hi->add_option("--since", history->since, "Only batches from this time (RFC 3339 or Unix ms)");
  hi->add_option("--limit", history->limit, "At most this many batches, the newest (default 100)");
  hi->add_option("--at", history->at, "Print the state at this time instead (RFC 3339 or Unix ms)");
  hi->add_option("--batch", history->batch, "Print the state after this batch instead (GEN-SEG.INDEX, as listed)");
  hi->add_flag("--json", history->json, "Print JSON");
  hi->callback([&globals, history, result] { *result = RunHistory(globals, *history); });

  // Listing, inspecting and deleting actors through a node (cli/actor_api_cmd.h).
  AddActorApiCommands(*actor, globals, result);
}

}  // namespace wk::cli
