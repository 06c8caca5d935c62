#include "server/actor_admin.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <tuple>

#include "actor/messages.h"
#include "alarms/index_reader.h"
#include "base/ascii.h"
#include "base/log.h"
#include "base/version.h"
#include "cluster/operator.h"
#include "cluster/owner_record.h"
#include "control/classes.h"
#include "control/tenants.h"
#include "replica/format.h"
#include "replica/inspect.h"
#include "server/admin_http.h"
#include "server/json_writer.h"

namespace wk {
namespace {

using namespace admin_http;  // NOLINT: the routes' small HTTP helpers

constexpr std::string_view kClassesPath = "/v1/classes";
constexpr std::string_view kAdminPrefix = "/v1/admin/";
constexpr std::string_view kWhoamiPath = "/v1/whoami";
// Not under /v1/alarms/: that is the alarm hand-over between nodes (the front's).
constexpr std::string_view kDueAlarmsPath = "/v1/due-alarms";
// Due alarms: entries shown at most (the counts cover every entry read), and the window.
constexpr int kDefaultDueAlarmsLimit = 100;
constexpr int kMaxDueAlarmsLimit = 1000;
constexpr std::int64_t kMaxDueWithinMs = 24LL * 3600 * 1000;
// LIST pages of 1,000 entries read per shard, for a listing page's alarms and for the
// due alarms: a bound on what one request costs (more than this: said so, not guessed).
constexpr int kAlarmIndexPages = 4;
// Inspect: keys per page, and the bytes of each value shown (the rest is cut, and said so).
constexpr int kDefaultInspectLimit = 100;
constexpr int kMaxInspectLimit = 1000;
constexpr std::uint64_t kDefaultMaxValueBytes = 1024;
constexpr std::uint64_t kMaxMaxValueBytes = 1 << 20;
// A peer's /v1/admin/node for /v1/admin/cluster: a node that does not answer within this
// is shown as not answering (the console refreshes every 2 s).
constexpr Duration kPeerStatusTimeout = std::chrono::milliseconds(1500);
// An inspection or deletion forwarded to the owner.
constexpr Duration kPeerActorTimeout = std::chrono::seconds(30);
// An actor's messages: entries shown at most per list (outbox, dead, applied).
constexpr std::size_t kMaxListedMessages = 1000;

// A request to a peer, bounded: the forward (a task of its own) and a timer race to set
// one latch (a plain function spawns the task: GCC 12 and coroutines that spawn,
// docs/DEVELOPING.md).
Task<void> ForwardInto(Forwarder* forwarder, PeerTarget to, ServerRequest request, int hops,
                       Latch<Result<ServerResponse>> done) {
  auto r = co_await forwarder->Forward(std::move(to), std::move(request), "-", hops);
  done.Set(std::move(r));
}
TaskHandle SpawnForward(Env& env, Forwarder& forwarder, PeerTarget to, ServerRequest request, int hops,
                        const Latch<Result<ServerResponse>>& done) {
  return env.Spawn(ForwardInto(&forwarder, std::move(to), std::move(request), hops, done), "admin ask peer");
}

}  // namespace

// ---- ActorAdmin.

ActorAdmin::ActorAdmin(ActorAdminDeps deps)
    : deps_(std::move(deps)),
      store_(deps_.store.ForPurpose(BucketPurpose::kAdmin)),
      changes_(OwnerChangesDeps{deps_.env, store_, deps_.node.owners(), deps_.runtime, deps_.provider, deps_.deletions,
                                deps_.node_id, deps_.retention, deps_.broken}) {}

bool ActorAdmin::Matches(std::string_view target) {
  const std::string_view path = PathOf(target);
  return path == kWhoamiPath || path == kDueAlarmsPath || path == kClassesPath || path.starts_with(std::string(kClassesPath) + "/") ||
         path.starts_with(kAdminPrefix);
}

std::optional<ServerResponse> ActorAdmin::CheckBeforeBody(const ServerRequest& request) const {
  auto length = request.Header("Content-Length");
  if ((length && *length != "0") || request.Header("Transfer-Encoding")) {
    return Error(413, "these routes take no request body");
  }
  return std::nullopt;
}

Task<Result<ActorAdmin::Principal>> ActorAdmin::Authenticate(const ServerRequest& request, Via via) {
  Principal who;
  if (via == Via::kPeer) {
    auto from = deps_.forwarder.Verify(request);
    if (!from.ok()) co_return InvalidArgument(from.status().message());
    if (!from->has_value()) co_return InvalidArgument("the peer listener takes other nodes' signed requests only");
    // As the front does: the TLS identity must be the signer's live record's.
    const auto& view = deps_.node.membership().view();
    auto it = view.find((*from)->node_id);
    if (it == view.end() || !it->second.live() || it->second.record->cert_pin.empty() ||
        it->second.record->cert_pin != request.peer_cert_pin) {
      co_return InvalidArgument("the TLS certificate is not that of " + (*from)->node_id.str() + "'s live node record");
    }
    who.peer = true;
    who.hops = (*from)->hops;
    co_return who;
  }
  if (Forwarder::HasNodeHeaders(request)) {
    co_return InvalidArgument("headers named X-Wasmkeep-* are the nodes' own: forwarded requests are accepted on the peer listener only");
  }
  auto header = request.Header("Authorization");
  auto token = control::BearerToken(header ? *header : std::string_view());
  if (!token.ok()) co_return InvalidArgument(token.status().message());
  if (control::LooksLikeOperatorToken(*token)) {
    Status s = co_await deps_.operators.Authenticate(*token);
    if (!s.ok()) co_return s;
    who.operator_ = true;
    co_return who;
  }
  auto tenant = co_await deps_.tenants.Authenticate(*header);
  if (!tenant.ok()) co_return tenant.status();
  who.tenant = std::move(*tenant);
  co_return who;
}

Task<ServerResponse> ActorAdmin::Handle(ServerRequest request, Via via) {
  std::shared_ptr<bool> alive = alive_;
  auto who = co_await Authenticate(request, via);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!who.ok()) {
    switch (who.code()) {
      case Code::kInvalidArgument:
      case Code::kNotFound: co_return Error(401, who.status().message());
      case Code::kFatal: co_return Error(500, "cannot check the token: " + who.status().message());
      default: co_return Error(503, "cannot check the token: " + who.status().message(), true);
    }
  }
  const std::string path(PathOf(request.target));
  const std::string query(QueryOf(request.target));
  const auto parts = Segments(path);  // "v1", ...
  const bool get = request.method == "GET" || request.method == "HEAD";

  if (path == kWhoamiPath) {
    if (!get) co_return Error(405, "GET only");
    JsonWriter w;
    w.BeginObject();
    if (who->operator_ || who->peer) {
      w.Member("kind", "operator");
    } else {
      w.Member("kind", "tenant").Member("tenant", who->tenant);
    }
    w.Member("node", deps_.node_id.str()).EndObject();
    co_return Json(200, std::move(w).Take());
  }
  if (path == kDueAlarmsPath) {
    if (!get) co_return Error(405, "GET only");
    co_return co_await DueAlarms(*who, query);
  }
  if (path.starts_with(kAdminPrefix)) {
    if (!who->operator_ && !who->peer) co_return Error(403, "the admin routes take an operator token (wasmkeep admin token add)");
    if (!get) co_return Error(405, "GET only");
    const std::string_view what = std::string_view(path).substr(kAdminPrefix.size());
    if (what == "node") co_return Json(200, NodeJson());
    if (what == "cluster" && !who->peer) co_return co_await Cluster();
    if (what == "metrics") co_return co_await Metrics(std::move(request));
    if (what == "tenants" && !who->peer) co_return co_await Tenants();
    if (what.starts_with("tenants/") && what.ends_with("/usage") && !who->peer) {
      const std::string_view tenant = what.substr(8, what.size() - 8 - 6);
      co_return co_await TenantUsage(std::string(tenant), query);
    }
    co_return Error(404, "no such admin route: /v1/admin/node, /v1/admin/cluster, /v1/admin/metrics, /v1/admin/tenants, "
                         "/v1/admin/tenants/<tenant>/usage");
  }
  // /v1/classes[/<tenant>/<class>/actors[/<name>]]
  if (parts.size() == 2) {
    if (!get) co_return Error(405, "GET only");
    co_return co_await ListClasses(*who);
  }
  const bool history_route = parts.size() > 6 && (parts[6] == "history" || parts[6] == "restore" || parts[6] == "fork");
  if (parts.size() < 5 || parts[4] != "actors" || (parts.size() > 6 && parts[6] != "messages" && !history_route) ||
      parts.size() > 10) {
    co_return Error(404,
                    "not found: /v1/classes/<tenant>/<class>/actors[/<name>[/messages[/dead/<seq>[/retry]] | /history[/state] "
                    "| /restore | /fork]]");
  }
  ActorId id{std::string(parts[2]), std::string(parts[3]), parts.size() >= 6 ? std::string(parts[5]) : "n"};
  if (Status s = ValidateActorId(id); !s.ok()) co_return Error(400, "bad actor name: " + s.message());
  if (!who->Opens(id.tenant)) co_return Error(403, "this token is for tenant " + who->tenant + ", not " + id.tenant);
  if (parts.size() == 5) {
    if (!get) co_return Error(405, "GET only");
    co_return co_await ListActors(id.tenant, id.class_name, query);
  }
  if (history_route) {
    // docs/http-api.md, "An actor's history".
    if (parts[6] == "history" && parts.size() <= 8 && (parts.size() == 7 || parts[7] == "state")) {
      if (!get) co_return Error(405, "GET only");
      if (parts.size() == 7) co_return co_await History(std::move(id), query);
      co_return co_await HistoryState(std::move(id), query);
    }
    if (parts.size() == 7 && parts[6] != "history") {
      if (request.method != "POST") co_return Error(405, "POST only");
      if (parts[6] == "restore") co_return co_await Restore(std::move(id), std::move(request), *who);
      co_return co_await Fork(std::move(id), std::move(request), *who);
    }
    co_return Error(404, "not found: .../history, .../history/state, .../restore (POST) or .../fork (POST)");
  }
  if (parts.size() == 7) {
    if (!get) co_return Error(405, "GET only");
    co_return co_await Messages(std::move(id), std::move(request), *who);
  }
  if (parts.size() > 7) {
    // .../messages/dead/<seq> (DELETE: drop it) and .../messages/dead/<seq>/retry (POST).
    const bool retry = parts.size() == 10 && parts[9] == "retry";
    if (parts[7] != "dead" || parts.size() == 8 || (parts.size() == 10 && !retry)) {
      co_return Error(404, "not found: .../messages/dead/<seq> (DELETE) or .../messages/dead/<seq>/retry (POST)");
    }
    std::int64_t seq = 0;
    if (!ParseInt(std::string(parts[8]), 1, INT64_MAX, &seq)) {
      co_return Error(400, "bad message number '" + std::string(parts[8]).substr(0, 40) + "': a whole number from 1");
    }
    if (retry && request.method != "POST") co_return Error(405, "POST only");
    if (!retry && request.method != "DELETE") co_return Error(405, "DELETE only (POST .../retry sends it again)");
    co_return co_await ResolveDead(std::move(id), static_cast<std::uint64_t>(seq),
                                   retry ? actor::DeadAction::kRetry : actor::DeadAction::kDrop, std::move(request),
                                   *who);
  }
  if (get) co_return co_await Inspect(std::move(id), std::move(request), *who);
  if (request.method == "DELETE") co_return co_await Delete(std::move(id), std::move(request), *who);
  co_return Error(405, "GET or DELETE");
}

namespace {

void UsageJson(JsonWriter& w, const control::UsageCounters& c) {
  w.Key("requests").BeginObject();
  for (std::size_t i = 0; i < control::kUsageOutcomes; ++i) {
    w.Member(control::UsageOutcomeName(static_cast<control::UsageOutcome>(i)), c.requests[i]);
  }
  w.EndObject()
      .Member("cpu_ms", c.cpu_ms)
      .Member("stored_byte_seconds", c.stored_byte_seconds)
      .Member("ingress_bytes", c.ingress_bytes)
      .Member("egress_bytes", c.egress_bytes)
      .Member("resident_actor_seconds", c.resident_actor_seconds);
}

}  // namespace

Task<ServerResponse> ActorAdmin::Tenants() {
  auto tenants = co_await control::ListTenants(store_, CallOptions{std::chrono::seconds(10)});
  if (!tenants.ok()) co_return ErrorFor(tenants.status(), "cannot list the tenants");
  std::map<std::string, std::size_t> resident;
  for (const actor::TenantMemory& m : deps_.runtime.MemoryByTenant()) resident[m.tenant] = m.actors;
  const control::UsageHour hour = control::HourOf(deps_.env.WallNow());
  JsonWriter w;
  w.BeginObject().Member("node", deps_.node_id.str()).Member("hour_ms", ToUnixMs(control::HourStart(hour)));
  w.Key("tenants").BeginArray();
  for (const control::TenantSummary& t : *tenants) {
    w.BeginObject().Member("tenant", t.tenant);
    if (!t.record) {
      w.Member("error", t.error).EndObject();
      continue;
    }
    w.Member("created_at_ms", ToUnixMs(t.record->created_at)).Member("tokens", t.record->tokens.size());
    // Quotas as this node applies them (read every 5 s): null is unlimited.
    const control::TenantQuotas* q = deps_.quotas != nullptr ? deps_.quotas->For(t.tenant) : nullptr;
    w.Key("quotas").BeginObject();
    for (std::size_t i = 0; i < control::kQuotas; ++i) {
      const auto which = static_cast<control::Quota>(i);
      const auto limit = q != nullptr ? q->Get(which) : std::nullopt;
      w.Key(control::QuotaName(which));
      if (limit) {
        w.Uint(*limit);
      } else {
        w.Null();
      }
    }
    w.EndObject();
    w.Member("resident_actors", resident.contains(t.tenant) ? resident[t.tenant] : std::size_t{0});
    if (deps_.usage != nullptr) {
      if (auto now = deps_.usage->Totals(t.tenant, hour)) {
        w.Key("this_hour").BeginObject();
        UsageJson(w, *now);
        w.EndObject();
      }
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::TenantUsage(std::string tenant, std::string query) {
  if (Status s = control::ValidateTenantName(tenant); !s.ok()) co_return Error(400, s.message());
  std::int64_t hours = 24;
  const auto params = ParseQuery(query);
  if (auto h = params.find("hours"); h != params.end() && !ParseInt(h->second, 1, 24 * 31, &hours)) {
    co_return Error(400, "bad hours '" + h->second.substr(0, 20) + "': a whole number from 1 to 744");
  }
  const control::UsageHour now = control::HourOf(deps_.env.WallNow());
  auto usage = co_await control::SumTenantUsage(store_, tenant, now - hours + 1, CallOptions{std::chrono::seconds(10)});
  if (!usage.ok()) co_return ErrorFor(usage.status(), "cannot sum the usage of " + tenant);
  JsonWriter w;
  w.BeginObject().Member("tenant", tenant).Member("hours", hours).Member("nodes", usage->nodes.size());
  w.Key("by_hour").BeginArray();
  for (control::UsageHour h = now - hours + 1; h <= now; ++h) {  // every hour, 0 where none
    const auto it = usage->by_hour.find(h);
    w.BeginObject().Member("hour_ms", ToUnixMs(control::HourStart(h)));
    UsageJson(w, it != usage->by_hour.end() ? it->second : control::UsageCounters{});
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::ListClasses(Principal who) {
  std::optional<std::string> tenant;
  if (!who.operator_ && !who.peer) tenant = who.tenant;
  auto classes = co_await control::ListClasses(store_, tenant, CallOptions{std::chrono::seconds(10)});
  if (!classes.ok()) co_return ErrorFor(classes.status(), "cannot list the classes");
  JsonWriter w;
  w.BeginObject().Key("classes").BeginArray();
  for (const auto& c : *classes) {
    w.BeginObject().Member("tenant", c.tenant).Member("class", c.class_name);
    if (c.current) {
      w.Member("module_sha256", c.current->module.hex)
          .Member("size", c.current->size_bytes)
          .Member("deployed_at_ms", ToUnixMs(c.current->deployed_at));
    } else {
      w.Member("error", c.error);
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::DueAlarms(Principal who, std::string query) {
  auto q = ParseQuery(query);
  std::int64_t within_ms = 0;
  if (!q["within_ms"].empty() && !ParseInt(q["within_ms"], 0, kMaxDueWithinMs, &within_ms)) {
    co_return Error(400, "within_ms must be 0.." + std::to_string(kMaxDueWithinMs));
  }
  std::int64_t limit = kDefaultDueAlarmsLimit;
  if (!q["limit"].empty() && !ParseInt(q["limit"], 1, kMaxDueAlarmsLimit, &limit)) {
    co_return Error(400, "limit must be 1.." + std::to_string(kMaxDueAlarmsLimit));
  }
  std::string tenant = q["tenant"];
  if (!who.operator_ && !who.peer) {
    if (!tenant.empty() && tenant != who.tenant) {
      co_return Error(403, "this token is for tenant " + who.tenant + ", not " + tenant);
    }
    tenant = who.tenant;
  }
  std::shared_ptr<bool> alive = alive_;
  const std::int64_t now_ms = ToUnixMs(deps_.env.WallNow());
  alarms::IndexReadOptions io;
  io.max_pages = kAlarmIndexPages;
  io.due_until_ms = now_ms + within_ms;
  std::vector<int> shards;
  for (int s = 0; s < alarms::kShards; ++s) shards.push_back(s);
  std::map<int, Result<alarms::ShardListing>> index = co_await alarms::ReadShards(deps_.env, store_, std::move(shards), io);
  if (!*alive) co_return Error(503, "node stopping", true);
  // Every entry read, the tenant's only, by due time; counted all, shown up to the limit.
  std::vector<alarms::EntryKey> entries;
  std::vector<std::string> errors;
  bool complete = true;
  std::uint64_t lists = 0;
  for (auto& [shard, listing] : index) {
    if (!listing.ok()) {
      errors.push_back("shard " + std::to_string(shard) + ": " + listing.status().message());
      complete = false;
      continue;
    }
    lists += listing->lists;
    complete = complete && listing->complete;
    for (auto& e : listing->entries) {
      if (tenant.empty() || e.actor.tenant == tenant) entries.push_back(std::move(e));
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const alarms::EntryKey& a, const alarms::EntryKey& b) { return std::tie(a.due_ms, a.actor) < std::tie(b.due_ms, b.actor); });
  std::uint64_t due = 0;
  for (const auto& e : entries) due += e.due_ms <= now_ms ? 1 : 0;
  JsonWriter w;
  w.BeginObject()
      .Member("time_ms", now_ms)
      .Member("within_ms", within_ms)
      .Member("complete", complete)
      .Member("lists", lists)
      .Member("due", due)
      .Member("upcoming", static_cast<std::uint64_t>(entries.size()) - due);
  if (!tenant.empty()) w.Member("tenant", tenant);
  w.Key("errors").BeginArray();
  for (const auto& e : errors) w.String(e);
  w.EndArray().Key("alarms").BeginArray();
  std::int64_t shown = 0;
  for (const auto& e : entries) {
    if (shown++ == limit) break;
    w.BeginObject()
        .Member("actor", e.actor.ToString())
        .Member("tenant", e.actor.tenant)
        .Member("class", e.actor.class_name)
        .Member("name", e.actor.name)
        .Member("due_ms", e.due_ms)
        .Member("late_ms", now_ms - e.due_ms)
        .Member("generation", e.generation.value)
        .Member("batch", e.batch)
        .Member("shard", e.shard)
        .EndObject();
  }
  w.EndArray().Member("truncated", static_cast<std::int64_t>(entries.size()) > limit).EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::ListActors(std::string tenant, std::string class_name, std::string query) {
  auto q = ParseQuery(query);
  replica::ListActorsOptions o;
  o.prefix = q["prefix"];
  o.after = q["after"];
  if (!q["limit"].empty()) {
    std::int64_t limit = 0;
    if (!ParseInt(q["limit"], 1, replica::kMaxListActorsLimit, &limit)) {
      co_return Error(400, "limit must be 1.." + std::to_string(replica::kMaxListActorsLimit));
    }
    o.limit = static_cast<int>(limit);
  }
  std::shared_ptr<bool> alive = alive_;
  auto page = co_await replica::ListStoredActors(deps_.env, store_, tenant, class_name, o);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!page.ok()) co_return ErrorFor(page.status(), "cannot list the actors of " + tenant + "/" + class_name);
  // The page's alarms, by the alarm index (alarms/index_reader.h): the shards of its actors,
  // read at once. A shard that cannot be read, or holds more than one read covers, leaves
  // its actors' alarms unknown (said so), never "none".
  std::vector<int> shards;
  for (const auto& a : page->actors) shards.push_back(alarms::ShardOf(ActorId{tenant, class_name, a.name}));
  alarms::IndexReadOptions io;
  io.max_pages = kAlarmIndexPages;
  std::map<int, Result<alarms::ShardListing>> index =
      co_await alarms::ReadShards(deps_.env, store_, std::move(shards), io);
  if (!*alive) co_return Error(503, "node stopping", true);
  std::map<ActorId, alarms::IndexedAlarm> indexed;
  std::set<int> unknown_shards;
  for (const auto& [shard, listing] : index) {
    if (!listing.ok() || !listing->complete) {
      unknown_shards.insert(shard);
      continue;
    }
    for (auto& [id, alarm] : alarms::LatestSetPerActor(listing->entries)) indexed.insert_or_assign(id, alarm);
  }
  const Membership& membership = deps_.node.membership();
  JsonWriter w;
  w.BeginObject().Member("tenant", tenant).Member("class", class_name).Key("actors").BeginArray();
  for (const auto& a : page->actors) {
    const ActorId id{tenant, class_name, a.name};
    w.BeginObject().Member("name", a.name);
    if (a.record) {
      const OwnerRecord& r = *a.record;
      // held: named by the record, live under that instance in this node's view; stale: the
      // record names a process that is gone (the next request takes it over); idle: nobody.
      std::string state = r.names_nobody() ? "idle" : membership.IsLive(r.node_id, r.instance) ? "held" : "stale";
      w.Member("state", state);
      if (!r.names_nobody()) w.Member("node", r.node_id.str());
      w.Member("generation", r.generation.value);
    } else if (!a.record_error.empty()) {
      w.Member("state", "corrupt").Member("error", a.record_error);
    } else {
      w.Member("state", "gone");
    }
    if (unknown_shards.count(alarms::ShardOf(id))) {
      w.Key("alarm_ms").Null().Member("alarm_unknown", true);
    } else if (auto it = indexed.find(id); it != indexed.end()) {
      w.Member("alarm_ms", it->second.latest.due_ms).Member("alarm_entries", it->second.entries);
    } else {
      w.Key("alarm_ms").Null();
    }
    w.Member("resident_here", deps_.runtime.IsResident(id))
        .Member("stored_bytes", a.stored_bytes)
        .Member("segments", a.segments)
        .Member("snapshots", a.snapshots)
        .EndObject();
  }
  w.EndArray();
  if (page->next_after) {
    w.Member("next_after", *page->next_after);
  } else {
    w.Key("next_after").Null();
  }
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::Inspect(ActorId id, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  auto q = ParseQuery(QueryOf(request.target));
  std::int64_t limit = kDefaultInspectLimit;
  if (!q["limit"].empty() && !ParseInt(q["limit"], 1, kMaxInspectLimit, &limit)) {
    co_return Error(400, "limit must be 1.." + std::to_string(kMaxInspectLimit));
  }
  std::int64_t max_value = static_cast<std::int64_t>(kDefaultMaxValueBytes);
  if (!q["max_value_bytes"].empty() &&
      !ParseInt(q["max_value_bytes"], 0, static_cast<std::int64_t>(kMaxMaxValueBytes), &max_value)) {
    co_return Error(400, "max_value_bytes must be 0.." + std::to_string(kMaxMaxValueBytes));
  }
  const std::string format = q.count("format") ? q["format"] : "auto";
  if (format != "auto" && format != "text" && format != "hex") co_return Error(400, "format must be auto, text or hex");
  std::string after = q["after"];
  if (!q["after_hex"].empty() && !FromHex(q["after_hex"], &after)) co_return Error(400, "after_hex is not hex");
  const std::string prefix = q["prefix"];

  // Where the state is: resident here, on the live owner (asked once), else the bucket.
  StateSource located = co_await LocateState(id, request, who);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (located.answer) co_return std::move(*located.answer);
  std::optional<actor::StateMap>& restored = located.restored;
  const replica::Replica* resident = located.resident;
  const std::string& source = located.source;
  const std::string& owner_error = located.owner_error;
  const std::uint64_t generation = located.generation;

  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString()).Member("source", source);
  if (source == "owner") w.Member("node", deps_.node_id.str());
  if (!owner_error.empty()) w.Member("owner_error", owner_error);
  w.Member("generation", generation);
  std::uint64_t keys = 0, bytes = 0;
  std::optional<std::int64_t> alarm;
  w.Key("entries").BeginArray();
  // The cursor is the last key shown: the next page starts after it.
  std::optional<std::string> next_after;
  std::string last_shown;
  std::int64_t shown = 0;
  auto visit = [&](std::string_view key, std::string_view value) {
    if (!prefix.empty() && !key.starts_with(prefix)) return true;
    if (!after.empty() && key <= after) return true;
    if (shown == limit) {
      next_after = last_shown;
      return false;
    }
    ++shown;
    last_shown.assign(key);
    w.BeginObject();
    WriteBytes(w, "key", key, format);
    const std::string_view cut = value.substr(0, static_cast<std::size_t>(max_value));
    WriteBytes(w, "value", cut, format);
    w.Member("value_bytes", static_cast<std::uint64_t>(value.size()));
    if (cut.size() < value.size()) w.Member("truncated", true);
    w.EndObject();
    return true;
  };
  // A range from the cursor (or the prefix) to the prefix's end, so a page costs its own
  // keys, not the keys of the pages before it.
  actor::ListQuery query;
  query.start = prefix;
  if (!after.empty() && after >= prefix) {
    query.start = after;
    query.start.push_back('\0');  // the smallest key after `after`
  }
  if (!prefix.empty()) query.end = actor::PrefixEnd(prefix);
  if (restored) {
    keys = restored->entries().size();
    bytes = restored->bytes();
    alarm = restored->alarm();
    restored->List(query, visit);
  } else {
    // Under the replica's own lock, as a worker's reads are (replica.h).
    keys = 0;
    resident->List(actor::ListQuery{}, [&keys](std::string_view, std::string_view) {
      ++keys;
      return true;
    });
    bytes = resident->StoredBytes();
    alarm = resident->Alarm();
    resident->List(query, visit);
  }
  w.EndArray();
  if (next_after) {
    w.Member("next_after_hex", Hex(*next_after));
  } else {
    w.Key("next_after_hex").Null();
  }
  w.Member("keys", keys).Member("stored_bytes", bytes);
  // Class versions (docs/tenants.md, "Deploying"): the version that last committed the
  // state (0: none recorded), and the one the actor runs while resident here.
  const std::uint32_t state_version = actor::ParseClassVersion(
      restored ? restored->GetSystem(actor::kClassVersionKey) : resident->GetSystem(actor::kClassVersionKey));
  w.Member("state_version", static_cast<std::uint64_t>(state_version));
  if (auto running = deps_.runtime.VersionOf(id); running && *running != 0) {
    w.Member("running_version", static_cast<std::uint64_t>(*running));
  } else {
    w.Key("running_version").Null();
  }
  if (alarm) {
    w.Member("alarm_ms", *alarm);
  } else {
    w.Key("alarm_ms").Null();
  }
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ActorAdmin::StateSource> ActorAdmin::LocateState(ActorId id, const ServerRequest& request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  StateSource out;
  out.resident = deps_.provider.Find(id);
  out.source = "owner";
  if (out.resident != nullptr) {
    out.generation = out.resident->generation().value;
    co_return out;
  }
  if (who.hops == 0) {
    auto other = co_await deps_.node.owners().OtherOwner(id);
    if (!*alive) {
      out.answer = Error(503, "node stopping", true);
      co_return out;
    }
    if (other.ok() && other->has_value()) {
      auto answer = co_await AskPeer((*other)->node_id, request, kPeerActorTimeout, 1);
      if (!*alive) {
        out.answer = Error(503, "node stopping", true);
        co_return out;
      }
      if (answer.ok()) {
        out.answer = std::move(*answer);
        co_return out;
      }
      // The owner did not answer (it may have just died): the bucket still has every
      // write it acknowledged, and reading it is always safe.
      out.owner_error = "the owner " + (*other)->node_id.str() + " did not answer: " + answer.status().message();
    }
    if (!other.ok() && other.code() == Code::kFatal) {
      out.answer = ErrorFor(other.status(), "the owner record");
      co_return out;
    }
  }
  auto state = co_await replica::RestoreReadOnly(deps_.env, store_, id, replica::RestoreOptions{});
  if (!*alive) {
    out.answer = Error(503, "node stopping", true);
    co_return out;
  }
  if (!state.ok()) {
    out.answer = ErrorFor(state.status(), "cannot restore " + id.ToString() + " from the bucket");
    co_return out;
  }
  out.restored = std::move(state->state);
  out.source = "bucket";
  for (const auto& p : state->listed_segments) out.generation = std::max(out.generation, p.generation.value);
  co_return out;
}

namespace {

void WriteMessages(JsonWriter& w, const char* name, const std::vector<std::pair<std::uint64_t, actor::OutboxMessage>>& list) {
  w.Key(name).BeginArray();
  for (const auto& [seq, m] : list) {
    w.BeginObject()
        .Member("seq", seq)
        .Member("to", m.to.ToString())
        .Member("bytes", static_cast<std::uint64_t>(m.body.size()))
        .Member("sent_ms", m.sent_ms)
        .Member("attempts", static_cast<std::uint64_t>(m.attempts))
        .Member("next_try_ms", m.next_try_ms)
        .Member("last_error", m.last_error)
        .EndObject();
  }
  w.EndArray();
}

}  // namespace

Task<ServerResponse> ActorAdmin::Messages(ActorId id, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  StateSource located = co_await LocateState(id, request, who);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (located.answer) co_return std::move(*located.answer);
  Result<actor::MessageListing> listing = located.restored ? actor::ListMessages(*located.restored, kMaxListedMessages)
                                                           : actor::ListMessages(*located.resident, kMaxListedMessages);
  if (!listing.ok()) co_return ErrorFor(listing.status(), "the messages of " + id.ToString());
  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString()).Member("source", located.source);
  if (located.source == "owner") w.Member("node", deps_.node_id.str());
  if (!located.owner_error.empty()) w.Member("owner_error", located.owner_error);
  w.Member("generation", located.generation);
  WriteMessages(w, "outbox", listing->outbox);
  WriteMessages(w, "dead", listing->dead);
  w.Key("applied").BeginArray();
  for (const auto& [from, seq] : listing->applied) w.BeginObject().Member("from", from).Member("seq", seq).EndObject();
  w.EndArray().Member("truncated", listing->truncated).EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::ResolveDead(ActorId id, std::uint64_t seq, actor::DeadAction action,
                                             ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  // Made by the node that holds the actor, at its input gate: here, or forwarded there.
  std::optional<ServerResponse> elsewhere = co_await deps_.front.RouteOperatorJob(id, std::move(request), who.hops);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (elsewhere) co_return std::move(*elsewhere);
  Result<std::uint64_t> done = co_await deps_.runtime.ResolveDead(id, seq, action);
  if (!*alive) co_return Error(503, "node stopping", true);
  const bool retry = action == actor::DeadAction::kRetry;
  if (!done.ok()) {
    const std::string what = std::string(retry ? "retrying" : "dropping") + " dead message " + std::to_string(seq) +
                             " of " + id.ToString();
    co_return ErrorFor(done.status(), what);
  }
  WK_LOG_INFO(retry ? "dead message sent again" : "dead message dropped",
              {{"node", deps_.node_id.str()},
               {"actor", id.ToString()},
               {"seq", std::to_string(seq)},
               {"new_seq", retry ? std::to_string(*done) : std::string("-")}});
  JsonWriter w;
  w.BeginObject().Member("actor", id.ToString()).Member("node", deps_.node_id.str()).Member("seq", seq);
  if (retry) {
    w.Member("retried_as", *done);
  } else {
    w.Member("dropped", true);
  }
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<ServerResponse> ActorAdmin::AskHolder(ActorId id, NodeId holder, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  if (who.hops >= 1) co_return Error(503, id.ToString() + " is moving between nodes", true);
  auto answer = co_await AskPeer(holder, std::move(request), kPeerActorTimeout, 1);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (answer.ok()) co_return std::move(*answer);
  co_return Error(503, "the owner " + holder.str() + " did not answer: " + answer.status().message(), true);
}

Task<ServerResponse> ActorAdmin::Delete(ActorId id, ServerRequest request, Principal who) {
  std::shared_ptr<bool> alive = alive_;
  Owners& owners = deps_.node.owners();
  if (!deps_.deletions.Block(id)) co_return Error(409, "a deletion of " + id.ToString() + " is under way on this node");
  BlockedActor blocked(deps_.deletions, id, alive);
  OwnerChanges::Taken taken = co_await changes_.TakeAsOwner(id, true);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (taken.holder) co_return co_await AskHolder(id, *taken.holder, std::move(request), who);
  if (!taken.status.ok()) co_return ErrorOf(taken.status);
  const AcquireResult& acquired = taken.acquired;
  // 3. Under our own hold: the empty fence, then the log.
  // The validity check is bound to a named local before the co_await (GCC 12 destroys a
  // lambda-to-std::function temporary in a co_await operand twice: docs/DEVELOPING.md).
  const Generation generation = acquired.hold.generation();
  std::function<bool()> hold_valid = [hold = acquired.hold] { return hold.IsValid(); };
  auto deleted =
      co_await replica::DeleteStoredActor(deps_.env, store_, id, generation, std::move(hold_valid));
  if (!*alive) co_return Error(503, "node stopping", true);
  // 4. Its alarm index entries of earlier holds, once the empty fence is durable (the
  // deletion wrote it, outcome known, before deleting anything).
  Result<std::uint64_t> alarm_entries = std::uint64_t{0};
  if (deleted.ok()) {
    std::function<bool()> still_valid = [hold = acquired.hold] { return hold.IsValid(); };
    alarm_entries = co_await DeleteAlarmEntries(id, generation, std::move(still_valid));
    if (!*alive) co_return Error(503, "node stopping", true);
  }
  // 5. Released either way: the record names nobody at this generation.
  Status released = co_await owners.Release(id);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!deleted.ok()) co_return ErrorFor(deleted.status(), "deleting " + id.ToString());
  WK_LOG_INFO("actor deleted", {{"node", deps_.node_id.str()},
                                {"actor", id.ToString()},
                                {"generation", std::to_string(generation.value)},
                                {"objects", std::to_string(deleted->objects)}});
  JsonWriter w;
  w.BeginObject()
      .Member("actor", id.ToString())
      .Member("deleted", true)
      .Member("node", deps_.node_id.str())
      .Member("generation", generation.value)
      .Member("objects", deleted->objects)
      .Member("bytes", deleted->bytes)
      .Member("record", released.ok() ? "released" : "release pending");
  if (alarm_entries.ok()) {
    w.Member("alarm_entries", *alarm_entries);
  } else {
    w.Member("alarm_entries_error", alarm_entries.status().message());
  }
  w.EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<Result<std::uint64_t>> ActorAdmin::DeleteAlarmEntries(ActorId id, Generation generation,
                                                           std::function<bool()> valid) {
  alarms::IndexReadOptions o;
  o.max_pages = kAlarmIndexPages;
  auto listed = co_await alarms::ReadShard(deps_.env, store_, alarms::ShardOf(id), o);
  if (!listed.ok()) co_return listed.status();
  std::uint64_t deleted = 0;
  for (const alarms::EntryKey& e : listed->entries) {
    // Another actor's, or of our hold or a later one (never ours to delete: rule 2).
    if (e.actor != id || e.generation >= generation) continue;
    if (!valid()) co_return Retryable("the hold ended while its alarm entries were deleted");
    Status s = co_await store_.Delete(alarms::EncodeEntryKey(e), Precondition::None(), CallOptions{std::chrono::seconds(5)});
    if (!s.ok() && s.code() != Code::kNotFound) co_return s;
    deleted += s.ok() ? 1 : 0;
  }
  if (!listed->complete) co_return Retryable("the alarm shard holds more entries than one read covers; the rest stay");
  co_return deleted;
}

Task<Result<ServerResponse>> ActorAdmin::AskPeer(NodeId node, ServerRequest request, Duration timeout, int hops) {
  const auto& view = deps_.node.membership().view();
  auto it = view.find(node);
  if (it == view.end() || !it->second.live() || it->second.record->address.empty()) {
    co_return Retryable(node.str() + " is not live with an address in the membership view");
  }
  PeerTarget to{node, it->second.record->instance, it->second.record->address};
  // The client's credentials never leave this node (forwarder.h drops them).
  ServerRequest out;
  out.method = request.method;
  out.target = request.target;
  Latch<Result<ServerResponse>> done(deps_.env, [] { return Result<ServerResponse>(Cancelled("cancelled")); });
  TaskHandle forward = SpawnForward(deps_.env, deps_.forwarder, std::move(to), std::move(out), hops, done);
  const Env::TimerId timer = deps_.env.StartTimer(deps_.env.MonoNow() + timeout, [done] {
    done.Set(Retryable("no answer within the time allowed"));
  });
  Result<ServerResponse> r = co_await done.Wait();
  deps_.env.CancelTimer(timer);
  forward.Cancel();
  co_return r;
}

std::string ActorAdmin::NodeJson() const {
  ClusterNode& node = deps_.node;
  const NodeLease& lease = node.lease();
  const bool draining = node.drain_control().drained_or_draining();
  const bool ready = lease.IsReady() && !draining;
  const actor::RuntimeStats rs = deps_.runtime.stats();
  const OwnersStats& os = node.owners().stats();
  // Resident actors per class (the provider's open replicas).
  std::map<std::string, std::uint64_t> resident;
  for (const ActorId& id : deps_.provider.OpenActors()) resident[id.tenant + "/" + id.class_name] += 1;
  JsonWriter w;
  w.BeginObject()
      .Member("node", deps_.node_id.str())
      .Member("instance", deps_.instance.str())
      .Member("version", kVersion)
      .Member("address", lease.identity().address)
      .Member("time_ms", ToUnixMs(deps_.env.WallNow()))
      .Member("ready", ready)
      .Member("ready_detail", draining ? "drained or draining"
                              : ready  ? "ready"
                              : lease.epoch() == 0 ? "start check in progress"
                                                   : "node lease not valid")
      .Member("lease_valid", lease.IsValid())
      .Member("lease_epoch", lease.epoch())
      .Member("accepting", node.owners().accepting())
      .Member("draining", draining)
      .Member("resident_actors", static_cast<std::uint64_t>(rs.resident_actors))
      .Member("holds", static_cast<std::uint64_t>(node.owners().holds()))
      .Member("pending_releases", static_cast<std::uint64_t>(node.owners().pending()))
      .Member("memory_bytes", rs.memory_bytes)
      .Member("events", rs.events)
      .Member("failed_events", rs.failed_events)
      .Member("acquisitions", os.acquisitions);
  const replica::ReplicaTotals& t = deps_.replica_totals;
  w.Key("durable_writes")
      .BeginObject()
      .Member("segments", t.segments)
      .Member("batches", t.batches)
      .Member("bytes", t.segment_bytes)
      .Member("late", t.late)
      .Member("failures", t.upload_failures)
      .Member("upload_seconds_count", t.upload_seconds.count())
      .Member("upload_seconds_sum", t.upload_seconds.sum())
      .Key("upload_seconds_buckets")
      .BeginArray();
  for (std::size_t i = 0; i <= t.upload_seconds.bounds().size(); ++i) {
    w.BeginArray();
    if (i < t.upload_seconds.bounds().size()) {
      w.Double(t.upload_seconds.bounds()[i]);
    } else {
      w.Null();
    }
    w.Uint(t.upload_seconds.CumulativeCount(i)).EndArray();
  }
  w.EndArray().Member("restores", t.restores).EndObject();
  // Requests to the bucket by purpose and operation, every outcome (store/counting_store.h):
  // the console's bucket page sums them over the nodes and prices them.
  if (const BucketRequestStats* b = deps_.bucket_requests) {
    w.Key("bucket_requests").BeginObject();
    for (std::size_t p = 0; p < kBucketPurposes; ++p) {
      const auto purpose = static_cast<BucketPurpose>(p);
      if (b->Requests(purpose) == 0) continue;
      w.Key(BucketPurposeName(purpose)).BeginObject();
      for (std::size_t op = 0; op < kBucketOps; ++op) {
        const std::uint64_t n = b->Requests(static_cast<BucketOp>(op), purpose);
        if (n != 0) w.Member(BucketOpName(static_cast<BucketOp>(op)), n);
      }
      w.EndObject();
    }
    w.EndObject();
  }
  if (const alarms::AlarmStats* a = deps_.alarm_stats) {
    w.Key("alarms")
        .BeginObject()
        .Member("due", a->due)
        .Member("fired", a->fired)
        .Member("retried", a->retried)
        .Member("gave_up", a->gave_up)
        .Member("stale", a->stale)
        .Member("not_run", a->not_run)
        .Member("handed", a->handed)
        .Member("late_seconds_count", a->late_seconds.count())
        .Member("late_seconds_sum", a->late_seconds.sum())
        .Key("late_seconds_buckets")
        .BeginArray();
    for (std::size_t i = 0; i <= a->late_seconds.bounds().size(); ++i) {
      w.BeginArray();
      if (i < a->late_seconds.bounds().size()) {
        w.Double(a->late_seconds.bounds()[i]);
      } else {
        w.Null();
      }
      w.Uint(a->late_seconds.CumulativeCount(i)).EndArray();
    }
    w.EndArray();
    if (const alarms::ShardScannerStats* s = deps_.scanner_stats) {
      w.Member("shards_held", static_cast<std::uint64_t>(s->shards_held))
          .Member("index_due_entries", static_cast<std::uint64_t>(s->index_due_entries))
          .Member("scans", s->scans)
          .Member("scan_failures", s->scan_failures);
    }
    w.EndObject();
  }
  w.Key("classes").BeginArray();
  std::set<std::string> names;
  for (const auto& [k, v] : traffic_.rows()) names.insert(k);
  for (const auto& [k, v] : resident) names.insert(k);
  for (const std::string& k : names) {
    const auto it = traffic_.rows().find(k);
    const ClassTraffic t0 = it == traffic_.rows().end() ? ClassTraffic{} : it->second;
    const auto r = resident.find(k);
    w.BeginObject()
        .Member("class", k)
        .Member("resident", r == resident.end() ? std::uint64_t{0} : r->second)
        .Member("requests", t0.requests)
        .Member("client_errors", t0.client_errors)
        .Member("errors", t0.errors)
        .Member("seconds", t0.seconds)
        .EndObject();
  }
  w.EndArray().EndObject();
  return std::move(w).Take();
}

Task<ServerResponse> ActorAdmin::Cluster() {
  std::shared_ptr<bool> alive = alive_;
  const Membership::View view = deps_.node.membership().view();  // a copy: peers answer meanwhile
  const LeaseTiming& timing = deps_.node.lease().timing();
  const WallTime now = deps_.env.WallNow();
  // Every live peer's status, at once, each bounded.
  auto answers = std::make_shared<std::map<NodeId, Result<ServerResponse>>>();
  std::vector<TaskHandle> asks = SpawnStatusAsks(view, answers);
  for (auto& h : asks) {
    if (!co_await h.Join() || !*alive) {
      for (auto& other : asks) other.Cancel();
      co_return Error(503, "node stopping", true);
    }
  }
  JsonWriter w;
  w.BeginObject().Member("self", deps_.node_id.str()).Member("time_ms", ToUnixMs(now));
  w.Key("timing").BeginObject()
      .Member("ttl_ms", static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(timing.ttl).count()))
      .Member("grace_ms", static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(timing.grace).count()))
      .EndObject();
  w.Key("nodes").BeginArray();
  for (const auto& [id, v] : view) {
    NodeStatus s = DescribeNode(v, now, timing);
    if (v.live() && !v.body_current) {
      // The listing saw renewals whose bodies it did not read (it reads a body only when it
      // can change a decision: cluster/membership.h), so written_at is the last body read,
      // not the last write. Shown instead: the time since the listing that first showed the
      // latest renewal (at most one listing period younger than the write). For display
      // only: the fence watch decides on bodies it read.
      const Duration seen = deps_.env.MonoNow() - v.unchanged_since;
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.1f", ToSeconds(seen));
      s.age = seen;
      s.state = seen <= timing.ttl ? "live" : "live-expired";
      s.detail = std::string("renewal seen by the listing ") + seconds + " s ago";
    }
    w.BeginObject()
        .Member("node", id.str())
        .Member("state", s.state)
        .Member("detail", s.detail)
        .Member("instance", s.instance.str())
        .Member("address", s.address)
        .Member("version", s.software_version)
        .Member("error", s.error);
    if (s.age) {
      w.Member("age_ms", static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(*s.age).count()));
    } else {
      w.Key("age_ms").Null();
    }
    if (id == deps_.node_id) {
      w.Key("status").Raw(NodeJson());
    } else if (auto it = answers->find(id); it != answers->end()) {
      if (it->second.ok() && it->second->status == 200) {
        std::string body = it->second->body;
        while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
        w.Key("status").Raw(body);
      } else {
        w.Member("status_error", it->second.ok() ? "HTTP " + std::to_string(it->second->status) + ": " + it->second->body
                                                 : it->second.status().message());
      }
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  co_return Json(200, std::move(w).Take());
}

Task<void> ActorAdmin::AskStatusInto(NodeId node, std::shared_ptr<std::map<NodeId, Result<ServerResponse>>> out) {
  ServerRequest r;
  r.method = "GET";
  r.target = "/v1/admin/node";
  auto answer = co_await AskPeer(node, std::move(r), kPeerStatusTimeout, 1);
  out->emplace(std::move(node), std::move(answer));
}

std::vector<TaskHandle> ActorAdmin::SpawnStatusAsks(const Membership::View& view,
                                                    const std::shared_ptr<std::map<NodeId, Result<ServerResponse>>>& out) {
  std::vector<TaskHandle> handles;
  for (const auto& [id, v] : view) {
    if (id == deps_.node_id || !v.live()) continue;
    handles.push_back(deps_.env.Spawn(AskStatusInto(id, out), "admin node status"));
  }
  return handles;
}

Task<ServerResponse> ActorAdmin::Metrics(ServerRequest request) {
  auto q = ParseQuery(QueryOf(request.target));
  const std::string node = q["node"];
  if (node.empty() || node == deps_.node_id.str()) {
    ServerResponse r;
    r.headers.emplace_back("Content-Type", kPrometheusTextContentType);
    r.headers.emplace_back("Cache-Control", "no-store");
    r.body = deps_.metrics.RenderText();
    co_return r;
  }
  std::shared_ptr<bool> alive = alive_;
  ServerRequest out;
  out.method = "GET";
  out.target = "/v1/admin/metrics";
  auto answer = co_await AskPeer(NodeId(node), std::move(out), kPeerStatusTimeout, 1);
  if (!*alive) co_return Error(503, "node stopping", true);
  if (!answer.ok()) co_return Error(503, "node " + node + " did not answer: " + answer.status().message(), true);
  co_return std::move(*answer);
}

}  // namespace wk
