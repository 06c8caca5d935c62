// ActorAdmin's history routes (server/actor_admin.h; docs/http-api.md, "An actor's
// history"): the batches of an actor's retention window and its state at a point, read-only
// from the bucket (replica/history.h); a restore and a fork, each made as an owner by
// routing/owner_changes.h — the actor taken out of memory and acquired through the ownership
// protocol (a new hold, at a new generation), the point's state written as one batch of that
// hold after the current chain (so the state before stays in the history: a restore is
// undone by another), made durable, and the hold released. Here: the requests parsed, the
// holder asked when another live node holds the actor, the answers written.
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
  replica::HistoryOptions o = changes_.HistoryNow(id.tenant);
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
    auto stored = co_await changes_.AnythingStored(id);
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
  auto s = co_await replica::StateAt(deps_.env, store_, id, *point, changes_.HistoryNow(id.tenant));
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
  if (s->snapshot) w.Member("snapshot", s->snapshot->ToString());
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

Task<ServerResponse> ActorAdmin::Restore(ActorId id, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  const auto q = ParseQuery(QueryOf(request.target));
  auto point = PointOf(q);
  if (!point.ok()) co_return Error(400, point.status().message());
  OwnerChange change = co_await changes_.Restore(id, *point);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (change.holder) co_return co_await AskHolder(id, *change.holder, std::move(request), who);
  if (change.conflict) co_return Error(409, change.status.message());
  if (!change.status.ok()) co_return ErrorOf(change.status);
  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString()).Member("restored", true).Member("node", deps_.node_id.str());
  w.Key("to");
  if (change.point) {
    w.String(change.point->ToString());
  } else {
    w.Null();
  }
  if (change.point_snapshot) w.Member("to_snapshot", change.point_snapshot->ToString());
  w.Member("to_time_ms", change.point_ms).Member("generation", change.generation.value);
  w.Member("batch", change.batch.ToString());
  if (change.undo) w.Member("undo", change.undo->ToString());
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
  OwnerChange change = co_await changes_.Fork(id, *point, to);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (change.holder) co_return co_await AskHolder(to, *change.holder, std::move(request), who);
  if (change.conflict) co_return Error(409, change.status.message());
  if (!change.status.ok()) co_return ErrorOf(change.status);
  JsonWriter w;
  w.BeginObject().Member("actor", to.ToString()).Member("forked_from", id.ToString());
  w.Key("from");
  if (change.point) {
    w.String(change.point->ToString());
  } else {
    w.Null();
  }
  if (change.point_snapshot) w.Member("from_snapshot", change.point_snapshot->ToString());
  w.Member("from_time_ms", change.point_ms).Member("generation", change.generation.value).Member("node", deps_.node_id.str());
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

}  // namespace wk
