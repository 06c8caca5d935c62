#include "control/stored_ledger.h"

#include <set>
#include <vector>

#include "base/check.h"
#include "base/ids.h"
#include "base/line_format.h"
#include "base/log.h"
#include "control/common.h"
#include "control/tenants.h"

namespace wk::control {

std::string StoredKey(std::string_view tenant, std::string_view node) {
  return std::string(kStoredPrefix) + std::string(tenant) + "/" + std::string(node);
}

std::string EncodeStored(const StoredRecord& r) {
  WK_CHECK(ValidateTenantName(r.tenant).ok() && ValidateNodeId(r.node).ok(), "encoding an invalid stored record");
  line_format::LineWriter w("stored", 1);
  w.Field("tenant", r.tenant).Field("node", r.node).IntField("bytes", r.bytes).UnixMsField("updated_at", r.updated_at);
  return std::move(w).Take();
}

Result<StoredRecord> DecodeStored(std::string_view body, std::string_view tenant, std::string_view node) {
  auto reader = line_format::LineReader::Open(body, "stored", 1,
                                              "wasmkeep-stored 1 record " + StoredKey(tenant, node));
  if (!reader.ok()) return reader.status();
  StoredRecord r;
  auto t = reader->Field("tenant");
  if (!t.ok()) return t.status();
  if (*t != tenant) return reader->Corrupt("'tenant' names another tenant");
  auto n = reader->Field("node");
  if (!n.ok()) return n.status();
  if (*n != node) return reader->Corrupt("'node' names another node");
  auto bytes = reader->IntField("bytes");
  if (!bytes.ok()) return bytes.status();
  auto updated = reader->UnixMsField("updated_at");
  if (!updated.ok()) return updated.status();
  if (!reader->AtEnd()) return reader->Corrupt("unexpected lines after 'updated_at'");
  r.tenant = std::string(tenant);
  r.node = std::string(node);
  r.bytes = *bytes;
  r.updated_at = *updated;
  return r;
}

namespace {

// The tenant's records: node -> (version, bytes). Corrupt ones are counted and left out.
struct Listed {
  std::map<std::string, std::pair<Version, std::int64_t>> nodes;
  std::uint64_t corrupt = 0;
};

// Lists stored/<tenant>/ and reads the records whose version is not the one in `known`.
Task<Result<Listed>> ReadTenant(ObjectStore& store, const std::string& tenant,
                                const std::map<std::string, std::pair<Version, std::int64_t>>& known,
                                CallOptions call) {
  const std::string prefix = std::string(kStoredPrefix) + tenant + "/";
  auto entries = co_await detail::ListEntries(store, prefix, call);
  if (!entries.ok()) co_return entries.status();
  Listed out;
  for (const ListEntry& e : *entries) {
    const std::string node = e.key.substr(prefix.size());
    if (!ValidateNodeId(node).ok()) continue;  // not one of ours
    auto it = known.find(node);
    if (it != known.end() && it->second.first == e.version) {
      out.nodes[node] = it->second;
      continue;
    }
    auto got = co_await store.Get(e.key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;
      co_return got.status();
    }
    auto decoded = DecodeStored(got->body, tenant, node);
    if (!decoded.ok()) {
      ++out.corrupt;
      WK_LOG_WARN("stored-bytes record not read", {{"key", e.key}, {"error", decoded.status().ToString()}});
      continue;
    }
    out.nodes[node] = {got->version, decoded->bytes};
  }
  co_return out;
}

}  // namespace

Task<Result<std::int64_t>> ReadStoredBytes(ObjectStore& store, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  auto listed = co_await ReadTenant(store.ForPurpose(BucketPurpose::kControl), tenant, {}, call);
  if (!listed.ok()) co_return listed.status();
  std::int64_t sum = 0;
  for (const auto& [node, record] : listed->nodes) sum += record.second;
  co_return sum;
}

struct StoredLedger::State {
  Env& env;
  ObjectStore& store;
  std::string node;
  Duration period;
  Duration quiet_period;
  StoredLedgerHooks hooks;
  bool alive = true;
  struct Written {
    std::int64_t bytes = 0;
    MonoTime at{};
  };
  std::map<std::string, Written> written;  // what this node last wrote per tenant
  // Per tenant with a quota: the records read last (node -> version, bytes).
  std::map<std::string, std::map<std::string, std::pair<Version, std::int64_t>>> read;
  StoredLedgerStats stats;
};

StoredLedger::StoredLedger(Env& env, ObjectStore& store, std::string node, Duration period, Duration quiet_period,
                           StoredLedgerHooks hooks)
    : state_(std::make_shared<State>(State{env, store.ForPurpose(BucketPurpose::kControl), std::move(node), period,
                                           quiet_period, std::move(hooks)})) {}

StoredLedger::~StoredLedger() { Stop(); }

namespace {

Task<Status> TickOnce(std::shared_ptr<StoredLedger::State> s, bool all) {
  const CallOptions call{std::chrono::seconds(10)};
  Status first = Status::Ok();
  auto failed = [&](Status st) {
    ++s->stats.failed;
    if (first.ok()) first = std::move(st);
  };
  std::vector<std::string> limited = s->hooks.limited();
  const std::set<std::string> with_quota(limited.begin(), limited.end());
  // 1. The tenants with a quota: the other nodes' records (and this node's base, found there).
  // One look at this node's counts serves every tenant (LoadBase adds a base once anyway).
  const auto own = s->hooks.own();
  for (const std::string& tenant : limited) {
    auto listed = co_await ReadTenant(s->store, tenant, s->read[tenant], call);
    if (!s->alive) co_return Cancelled("stopped");
    if (!listed.ok()) {
      failed(listed.status());
      continue;
    }
    s->stats.corrupt += listed->corrupt;
    std::int64_t others = 0;
    for (const auto& [node, record] : listed->nodes) {
      if (node != s->node) others += record.second;
    }
    const auto mine = own.find(tenant);
    if (mine == own.end() || !mine->second.base_loaded) {
      const auto stored = listed->nodes.find(s->node);
      s->hooks.load_base(tenant, stored != listed->nodes.end() ? stored->second.second : 0);
    }
    s->hooks.set_others(tenant, others);
    s->read[tenant] = std::move(listed->nodes);
  }
  std::erase_if(s->read, [&](const auto& r) { return !with_quota.contains(r.first); });
  // 2. This node's records that changed.
  const MonoTime now = s->env.MonoNow();
  for (const auto& [tenant, own] : s->hooks.own()) {
    auto w = s->written.find(tenant);
    const bool due = all || with_quota.contains(tenant) || w == s->written.end() || now - w->second.at >= s->quiet_period;
    if (!due) continue;
    std::int64_t bytes = own.bytes;
    if (!own.base_loaded) {
      // Continue the count this node (by its id) left in the bucket, before overwriting it.
      auto got = co_await s->store.Get(StoredKey(tenant, s->node), call);
      if (!s->alive) co_return Cancelled("stopped");
      std::int64_t base = 0;
      if (got.ok()) {
        auto decoded = DecodeStored(got->body, tenant, s->node);
        if (decoded.ok()) {
          base = decoded->bytes;
        } else {
          ++s->stats.corrupt;  // this node's own record, unreadable: counted afresh
          WK_LOG_WARN("this node's stored-bytes record not read", {{"tenant", tenant}, {"error", decoded.status().ToString()}});
        }
      } else if (got.code() != Code::kNotFound) {
        failed(got.status());
        continue;
      }
      s->hooks.load_base(tenant, base);
      bytes += base;
    }
    if (w != s->written.end() && w->second.bytes == bytes) continue;
    StoredRecord r{tenant, s->node, bytes, s->env.WallNow()};
    auto put = co_await s->store.Put(StoredKey(tenant, s->node), EncodeStored(r), Precondition::None(), call);
    if (!s->alive) co_return Cancelled("stopped");
    if (!put.ok()) {
      failed(put.status());
      continue;
    }
    ++s->stats.writes;
    s->written[tenant] = StoredLedger::State::Written{bytes, now};
  }
  co_return first;
}

Task<void> TickLoop(std::shared_ptr<StoredLedger::State> s) {
  while (s->alive) {
    Status done = co_await TickOnce(s, false);
    if (!s->alive) co_return;
    if (!done.ok()) WK_LOG_DEBUG("stored-bytes ledger: a period's work failed", {{"error", done.ToString()}});
    if (!co_await s->env.SleepFor(s->period)) co_return;
  }
}

}  // namespace

void StoredLedger::Start() {
  if (loop_.valid()) return;
  loop_ = state_->env.Spawn(TickLoop(state_), "stored-bytes ledger");
}

void StoredLedger::Stop() {
  if (loop_.valid()) loop_.Cancel();
}

Task<Status> StoredLedger::Tick(bool all) { return TickOnce(state_, all); }

StoredLedgerStats StoredLedger::stats() const { return state_->stats; }

}  // namespace wk::control
