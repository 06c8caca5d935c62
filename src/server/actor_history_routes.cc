// ActorAdmin's history routes (server/actor_admin.h; docs/http-api.md, "An actor's
// history"): the batches of an actor's retention window and its state at a point, read-only
// from the bucket (replica/history.h); a restore and a fork, each made as an owner — the
// actor taken out of memory and acquired through the ownership protocol (a new hold, at a
// new generation), the point's state written as one batch of that hold after the current
// chain (so the state before stays in the history: a restore is undone by another), made
// durable, and the hold released.
#include <chrono>

#include "base/log.h"
#include "base/time_text.h"
#include "control/classes.h"
#include "replica/format.h"
#include "replica/history.h"
#include "server/actor_admin.h"
#include "server/admin_http.h"
#include "server/json_writer.h"

namespace wk {
namespace {

using namespace admin_http;  // NOLINT: the routes' small HTTP helpers

constexpr std::int64_t kDefaultHistoryLimit = 100;
constexpr std::int64_t kMaxHistoryLimit = 10'000;
constexpr std::int64_t kDefaultStateLimit = 100;
constexpr std::int64_t kMaxStateLimit = 1'000;
constexpr std::size_t kStateValueBytes = 1024;
// A restore's or fork's batch: durable within this, and its replica closed within this.
constexpr Duration kWriteLimit = std::chrono::seconds(30);

// The point a query names: at=TIME (RFC 3339 or Unix ms) or batch=GEN-SEG.INDEX, one of them.
Result<replica::PointSpec> PointOf(const std::map<std::string, std::string>& q) {
  const auto at = q.find("at");
  const auto batch = q.find("batch");
  if ((at == q.end()) == (batch == q.end())) {
    return InvalidArgument("give the point as at=TIME (RFC 3339 or Unix ms) or batch=GEN-SEG.INDEX, one of them");
  }
  replica::PointSpec point;
  if (at != q.end()) {
    auto t = ParseTimeMs(at->second);
    if (!t.ok()) return InvalidArgument("at: " + t.status().message());
    point.at_ms = *t;
  } else {
    auto b = replica::ParseBatchId(batch->second);
    if (!b.ok()) return InvalidArgument("batch: " + b.status().message());
    point.batch = *b;
  }
  return point;
}

replica::HistoryOptions OptionsFor(Env& env, Duration retention) {
  replica::HistoryOptions o;
  o.now_ms = ToUnixMs(env.WallNow());
  o.retention = retention;
  return o;
}

std::int64_t Ms(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

void WriteOptionalMs(JsonWriter& w, std::string_view name, std::optional<std::int64_t> ms) {
  w.Key(name);
  if (ms) {
    w.Int(*ms);
  } else {
    w.Null();
  }
}

}  // namespace

Task<ServerResponse> ActorAdmin::History(ActorId id, std::string query) {
  std::shared_ptr<bool> alive = alive_;
  const auto q = ParseQuery(query);
  replica::HistoryOptions o = OptionsFor(deps_.env, deps_.retention.For(id.tenant));
  std::int64_t limit = kDefaultHistoryLimit;
  if (auto it = q.find("limit"); it != q.end() && !ParseInt(it->second, 1, kMaxHistoryLimit, &limit)) {
    co_return Error(400, "limit is a whole number from 1 to " + std::to_string(kMaxHistoryLimit));
  }
  o.limit = static_cast<std::size_t>(limit);
  if (auto it = q.find("since"); it != q.end()) {
    auto t = ParseTimeMs(it->second);
    if (!t.ok()) co_return Error(400, "since: " + t.status().message());
    o.since_ms = *t;
  }
  auto h = co_await replica::ReadHistory(deps_.env, store_, id, o);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!h.ok()) co_return ErrorFor(h.status(), "the history of " + id.ToString());
  if (h->batches.empty() && !h->earliest_ms) {
    auto stored = co_await AnythingStored(id);
    if (!*alive) co_return Error(503, "node stopping", true);
    if (stored.ok() && !*stored) co_return Error(404, "nothing is stored for " + id.ToString());
  }
  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString()).Member("retention_ms", Ms(deps_.retention.For(id.tenant)));
  WriteOptionalMs(w, "earliest_ms", h->earliest_ms);
  WriteOptionalMs(w, "latest_ms", h->latest_ms);
  w.Member("truncated", h->truncated).Key("batches").BeginArray();
  for (const auto& b : h->batches) {
    w.BeginObject()
        .Member("batch", b.id.ToString())
        .Member("time_ms", b.time_ms)
        .Member("time", FormatTimeMs(b.time_ms))
        .Member("generation", b.id.segment.generation.value)
        .Member("puts", std::uint64_t{b.puts})
        .Member("deletes", std::uint64_t{b.deletes})
        .Member("delete_all", b.delete_all)
        .Member("bytes", b.bytes)
        .Member("system", std::uint64_t{b.system});
    w.Key("keys").BeginArray();
    for (const auto& k : b.keys) w.String(IsText(k) ? k : Hex(k));
    w.EndArray();
    w.Key("alarm");
    if (!b.alarm) {
      w.String("unchanged");
    } else if (!*b.alarm) {
      w.String("deleted");
    } else {
      w.Int(**b.alarm);
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::HistoryState(ActorId id, std::string query) {
  std::shared_ptr<bool> alive = alive_;
  const auto q = ParseQuery(query);
  auto point = PointOf(q);
  if (!point.ok()) co_return Error(400, point.status().message());
  std::int64_t limit = kDefaultStateLimit;
  if (auto it = q.find("limit"); it != q.end() && !ParseInt(it->second, 1, kMaxStateLimit, &limit)) {
    co_return Error(400, "limit is a whole number from 1 to " + std::to_string(kMaxStateLimit));
  }
  const std::string after = q.count("after") ? q.at("after") : std::string();
  const std::string format = q.count("format") ? q.at("format") : std::string("auto");
  auto s = co_await replica::StateAt(deps_.env, store_, id, *point, OptionsFor(deps_.env, deps_.retention.For(id.tenant)));
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!s.ok()) co_return ErrorFor(s.status(), "the state of " + id.ToString());
  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString());
  w.Key("batch");
  if (s->last) {
    w.String(s->last->ToString());
  } else {
    w.Null();
  }
  w.Member("time_ms", s->time_ms).Member("keys_total", static_cast<std::uint64_t>(s->state.entries().size()));
  w.Member("bytes", s->state.bytes());
  WriteOptionalMs(w, "alarm_ms", s->state.alarm());
  w.Key("keys").BeginArray();
  std::int64_t shown = 0;
  std::optional<std::string> next_after;
  for (auto it = s->state.entries().upper_bound(after); it != s->state.entries().end(); ++it) {
    if (shown == limit) {
      next_after = std::prev(it)->first;
      break;
    }
    const std::string_view value = std::string_view(it->second).substr(0, kStateValueBytes);
    w.BeginObject();
    WriteBytes(w, "key", it->first, format);
    WriteBytes(w, "value", value, format);
    w.Member("value_bytes", static_cast<std::uint64_t>(it->second.size())).EndObject();
    ++shown;
  }
  w.EndArray();
  if (next_after) w.Member("next_after", *next_after);
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<Result<Generation>> ActorAdmin::WriteAsOwner(ActorId id, const AcquireResult& acquired, actor::StateMap target,
                                                 bool require_empty) {
  std::shared_ptr<bool> alive = alive_;
  Owners& owners = deps_.node.owners();
  const Generation generation = acquired.hold.generation();
  replica::Replica::Hold hold{generation, [h = acquired.hold] { return h.IsValid(); }};
  auto opened = co_await deps_.provider.OpenOwned(id, std::move(hold));
  if (!*alive) co_return Cancelled("node stopping");
  if (!opened.ok()) {
    (void)co_await owners.Release(id);
    co_return opened.status();
  }
  std::unique_ptr<replica::Replica> replica = std::move(*opened);
  Status outcome = Status::Ok();
  if (require_empty &&
      (!replica->restored().listed_segments.empty() || !replica->restored().listed_snapshots.empty())) {
    outcome = PreconditionFailed(id.ToString() + " exists (it was created meanwhile)");
  } else {
    const std::uint64_t seq = replica->Commit(replica::ReplacementBatch(target));
    Latch<Status> durable(deps_.env, [] { return Cancelled("node stopping"); });
    Env& env = deps_.env;
    replica->WhenReleasable(seq, [&env, durable](Status s) {
      env.PostFromAnyThread([durable, s = std::move(s)]() mutable { durable.Set(std::move(s)); });
    });
    const Env::TimerId timer = deps_.env.StartTimer(deps_.env.MonoNow() + kWriteLimit, [durable] {
      durable.Set(Retryable("the batch was not durable in time"));
    });
    outcome = co_await durable.Wait();
    if (!*alive) co_return Cancelled("node stopping");
    deps_.env.CancelTimer(timer);
  }
  Status closed = co_await replica->Close(kWriteLimit);
  if (!*alive) co_return Cancelled("node stopping");
  replica.reset();
  (void)co_await owners.Release(id);
  if (!*alive) co_return Cancelled("node stopping");
  if (!outcome.ok()) co_return outcome;
  if (!closed.ok()) co_return closed;
  co_return generation;
}

Task<ServerResponse> ActorAdmin::Restore(ActorId id, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  const auto q = ParseQuery(QueryOf(request.target));
  auto point = PointOf(q);
  if (!point.ok()) co_return Error(400, point.status().message());
  const replica::HistoryOptions o = OptionsFor(deps_.env, deps_.retention.For(id.tenant));

  if (deps_.broken.on(BrokenModel::kRestoreWithoutAcquire)) {
    // Broken model: the point's state written into the log straight after its tip, under
    // the newest generation there, by a node that holds nothing.
    auto state = co_await replica::StateAt(deps_.env, store_, id, *point, o);
    if (!*alive) co_return Error(503, "node stopping", true);
    if (!state.ok()) co_return ErrorFor(state.status(), "the state of " + id.ToString());
    auto listing = co_await replica::ListLog(deps_.env, store_, id, o.read);
    if (!*alive) co_return Error(503, "node stopping", true);
    if (!listing.ok() || listing->segments.empty()) co_return Error(503, "cannot list the log", true);
    const replica::Position tip = listing->segments.rbegin()->first;
    std::string payload;
    replica::AppendBatch(replica::ReplacementBatch(state->state), payload);
    const replica::Position at{tip.generation, tip.seq + 1};
    auto put = co_await store_.Put(replica::SegmentKey(id, at), replica::EncodeDataSegment(id, at, 1, payload, false),
                                   Precondition::IfNoneMatchAny(), CallOptions{std::chrono::seconds(10)});
    if (!*alive) co_return Error(503, "node stopping", true);
    if (!put.ok()) co_return ErrorFor(put.status(), "writing the restore");
    JsonWriter w;
    w.BeginObject().Member("actor", id.ToString()).Member("restored", true).Member("batch", at.ToString() + ".1");
    w.Member("generation", at.generation.value).Member("node", deps_.node_id.str()).EndObject();
    co_return Json(200, std::move(w).Take());
  }

  if (!deps_.deletions.Block(id)) {
    co_return Error(409, "a deletion or restore of " + id.ToString() + " is under way on this node");
  }
  BlockedActor blocked(deps_.deletions, id, alive);
  Taken taken = co_await TakeAsOwner(id, request, who, true);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (taken.answer) co_return std::move(*taken.answer);
  // Under our own hold the log cannot change: the point's state, and the newest batch (the
  // point that undoes this restore).
  auto state = co_await replica::StateAt(deps_.env, store_, id, *point, o);
  if (!*alive) co_return Error(503, "node stopping", true);
  replica::HistoryOptions newest = o;
  newest.limit = 1;
  // Not a co_await inside ?: (GCC 12 destroys the result early there: docs/DEVELOPING.md).
  Result<replica::History> before = Fatal("not read");
  if (state.ok()) before = co_await replica::ReadHistory(deps_.env, store_, id, newest);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!state.ok() || !before.ok()) {
    (void)co_await deps_.node.owners().Release(id);
    if (!*alive) co_return Error(503, "node stopping", true);
    const Status& why = state.ok() ? before.status() : state.status();
    co_return ErrorFor(why, "restoring " + id.ToString());
  }
  const std::optional<replica::BatchId> to = state->last;
  const std::int64_t to_ms = state->time_ms;
  auto written = co_await WriteAsOwner(id, taken.acquired, std::move(state->state), false);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!written.ok()) co_return ErrorFor(written.status(), "restoring " + id.ToString());
  const std::string batch = replica::BatchId{replica::Position{*written, 1}, 1}.ToString();
  const std::string undo = before->batches.empty() ? std::string() : before->batches.back().id.ToString();
  WK_LOG_INFO("actor restored", {{"node", deps_.node_id.str()},
                                 {"actor", id.ToString()},
                                 {"to", to ? to->ToString() : "empty"},
                                 {"generation", std::to_string(written->value)},
                                 {"undo", undo}});
  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString()).Member("restored", true).Member("node", deps_.node_id.str());
  w.Key("to");
  if (to) {
    w.String(to->ToString());
  } else {
    w.Null();
  }
  w.Member("to_time_ms", to_ms).Member("generation", written->value).Member("batch", batch);
  if (!undo.empty()) w.Member("undo", undo);
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::Fork(ActorId id, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  const auto q = ParseQuery(QueryOf(request.target));
  auto point = PointOf(q);
  if (!point.ok()) co_return Error(400, point.status().message());
  const auto to_it = q.find("to");
  if (to_it == q.end() || to_it->second.empty()) co_return Error(400, "to=<class>/<name> (or <name>, the same class) is required");
  const std::string& to_text = to_it->second;
  const auto slash = to_text.find('/');
  ActorId to{id.tenant, slash == std::string::npos ? id.class_name : to_text.substr(0, slash),
             slash == std::string::npos ? to_text : to_text.substr(slash + 1)};
  if (Status s = ValidateActorId(to); !s.ok()) co_return Error(400, "to: " + s.message());
  if (to == id) co_return Error(400, "to: a fork needs another name (restore changes an actor in place)");
  auto cls = co_await control::CurrentClass(store_, to.tenant, to.class_name, CallOptions{std::chrono::seconds(10)});
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!cls.ok()) co_return ErrorFor(cls.status(), "the class " + to.tenant + "/" + to.class_name);
  if (!cls->has_value()) co_return Error(404, "to: tenant " + to.tenant + " has no class " + to.class_name);
  auto exists = co_await AnythingStored(to);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!exists.ok()) co_return ErrorFor(exists.status(), "looking for " + to.ToString());
  if (*exists) co_return Error(409, to.ToString() + " exists: a fork makes a new actor");
  // The source's state from the bucket: a point of its history needs no hold of it.
  auto state = co_await replica::StateAt(deps_.env, store_, id, *point, OptionsFor(deps_.env, deps_.retention.For(id.tenant)));
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!state.ok()) co_return ErrorFor(state.status(), "the state of " + id.ToString());
  if (!deps_.deletions.Block(to)) co_return Error(409, "a change of " + to.ToString() + " is under way on this node");
  BlockedActor blocked(deps_.deletions, to, alive);
  Taken taken = co_await TakeAsOwner(to, request, who, false);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (taken.answer) co_return std::move(*taken.answer);
  const std::optional<replica::BatchId> from = state->last;
  const std::int64_t from_ms = state->time_ms;
  auto written = co_await WriteAsOwner(to, taken.acquired, std::move(state->state), true);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!written.ok()) {
    if (written.code() == Code::kPreconditionFailed) co_return Error(409, written.status().message());
    co_return ErrorFor(written.status(), "forking " + id.ToString());
  }
  WK_LOG_INFO("actor forked", {{"node", deps_.node_id.str()},
                               {"actor", id.ToString()},
                               {"to", to.ToString()},
                               {"from", from ? from->ToString() : "empty"}});
  JsonWriter w;
  w.BeginObject().Member("actor", to.ToString()).Member("forked_from", id.ToString());
  w.Key("from");
  if (from) {
    w.String(from->ToString());
  } else {
    w.Null();
  }
  w.Member("from_time_ms", from_ms).Member("generation", written->value).Member("node", deps_.node_id.str());
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

}  // namespace wk
