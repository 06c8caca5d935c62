#include "control/usage.h"

#include <chrono>
#include <cstdio>
#include <vector>

#include "base/check.h"
#include "base/ids.h"
#include "base/line_format.h"
#include "control/common.h"
#include "control/stored_usage.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

constexpr std::array<std::string_view, kUsageOutcomes> kOutcomeNames = {"ok", "client_error", "throttled",
                                                                          "actor_failed", "unavailable"};

std::string RequestsKey(std::size_t outcome) { return "requests_" + std::string(kOutcomeNames[outcome]); }
std::string BucketKey(std::size_t purpose) {
  return "bucket_" + std::string(BucketPurposeName(static_cast<BucketPurpose>(purpose)));
}

std::string Describe(std::string_view tenant, std::string_view node, UsageHour hour) {
  return "wasmkeep-usage 1 record " + UsageKey(tenant, node, hour);
}

}  // namespace

std::string_view UsageOutcomeName(UsageOutcome outcome) {
  const auto i = static_cast<std::size_t>(outcome);
  WK_CHECK(i < kUsageOutcomes, "UsageOutcomeName: not an outcome");
  return kOutcomeNames[i];
}

UsageOutcome UsageOutcomeOfStatus(int status) {
  if (status < 400) return UsageOutcome::kOk;
  if (status == 429) return UsageOutcome::kThrottled;
  if (status < 500) return UsageOutcome::kClientError;
  if (status == 502 || status == 503 || status == 504) return UsageOutcome::kUnavailable;
  return UsageOutcome::kActorFailed;
}

std::uint64_t UsageCounters::Requests() const {
  std::uint64_t n = 0;
  for (std::uint64_t r : requests) n += r;
  return n;
}

std::uint64_t UsageCounters::BucketRequests() const {
  std::uint64_t n = 0;
  for (std::uint64_t r : bucket_requests) n += r;
  return n;
}

UsageCounters& UsageCounters::operator+=(const UsageCounters& o) {
  for (std::size_t i = 0; i < kUsageOutcomes; ++i) requests[i] += o.requests[i];
  cpu_ms += o.cpu_ms;
  stored_byte_seconds += o.stored_byte_seconds;
  ingress_bytes += o.ingress_bytes;
  egress_bytes += o.egress_bytes;
  resident_actor_seconds += o.resident_actor_seconds;
  for (std::size_t i = 0; i < kBucketPurposes; ++i) bucket_requests[i] += o.bucket_requests[i];
  return *this;
}

UsageHour HourOf(WallTime t) {
  const std::int64_t ms = ToUnixMs(t);
  constexpr std::int64_t kHourMs = 3'600'000;
  return ms >= 0 ? ms / kHourMs : (ms - kHourMs + 1) / kHourMs;
}

WallTime HourStart(UsageHour hour) { return FromUnixMs(hour * 3'600'000); }

std::string HourKey(UsageHour hour) {
  WK_CHECK(hour >= 0, "HourKey: an hour before 1970");
  using namespace std::chrono;
  const sys_days day{days{hour / 24}};
  const year_month_day ymd{day};
  char out[16];
  std::snprintf(out, sizeof out, "%04d%02u%02u%02d", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()), static_cast<int>(hour % 24));
  return out;
}

std::optional<UsageHour> ParseHourKey(std::string_view text) {
  if (text.size() != 10) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  auto num = [&](std::size_t at, std::size_t n) {
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) v = v * 10 + (text[i] - '0');
    return v;
  };
  using namespace std::chrono;
  const int y = num(0, 4), m = num(4, 2), d = num(6, 2), h = num(8, 2);
  if (y < 1970 || h > 23) return std::nullopt;
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(m)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return std::nullopt;
  return static_cast<UsageHour>(sys_days{ymd}.time_since_epoch().count()) * 24 + h;
}

std::string UsageKey(std::string_view tenant, std::string_view node, UsageHour hour) {
  return TenantUsagePrefix(tenant) + std::string(node) + "/" + HourKey(hour);
}

std::string EncodeUsageRecord(const UsageRecord& r) {
  WK_CHECK(ValidateTenantName(r.tenant).ok(), "encoding a usage record with a bad tenant name");
  WK_CHECK(ValidateNodeId(r.node).ok(), "encoding a usage record with a bad node id");
  WK_CHECK(r.hour >= 0, "encoding a usage record before 1970");
  line_format::LineWriter w("usage", 1);
  w.Field("tenant", r.tenant).Field("node", r.node).Field("hour", HourKey(r.hour));
  const UsageCounters& c = r.counters;
  for (std::size_t i = 0; i < kUsageOutcomes; ++i) w.Field(RequestsKey(i), c.requests[i]);
  w.Field("cpu_ms", c.cpu_ms)
      .Field("stored_byte_seconds", c.stored_byte_seconds)
      .Field("ingress_bytes", c.ingress_bytes)
      .Field("egress_bytes", c.egress_bytes)
      .Field("resident_actor_seconds", c.resident_actor_seconds);
  for (std::size_t i = 0; i < kBucketPurposes; ++i) w.Field(BucketKey(i), c.bucket_requests[i]);
  return std::move(w).Take();
}

Result<UsageRecord> DecodeUsageRecord(std::string_view body, std::string_view tenant, std::string_view node,
                                      UsageHour hour) {
  auto reader = line_format::LineReader::Open(body, "usage", 1, Describe(tenant, node, hour));
  if (!reader.ok()) return reader.status();
  UsageRecord r;
  auto name = reader->Field("tenant");
  if (!name.ok()) return name.status();
  if (*name != tenant) return reader->Corrupt("'tenant' names another tenant");
  auto node_field = reader->Field("node");
  if (!node_field.ok()) return node_field.status();
  if (*node_field != node) return reader->Corrupt("'node' names another node");
  auto hour_field = reader->Field("hour");
  if (!hour_field.ok()) return hour_field.status();
  if (*hour_field != HourKey(hour)) return reader->Corrupt("'hour' names another hour");
  r.tenant = std::string(tenant);
  r.node = std::string(node);
  r.hour = hour;
  UsageCounters& c = r.counters;
  auto read = [&reader](std::string_view key, std::uint64_t* out) -> Status {
    auto v = reader->UintField(key);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::Ok();
  };
  for (std::size_t i = 0; i < kUsageOutcomes; ++i) {
    if (Status s = read(RequestsKey(i), &c.requests[i]); !s.ok()) return s;
  }
  const std::pair<std::string_view, std::uint64_t*> fields[] = {
      {"cpu_ms", &c.cpu_ms},
      {"stored_byte_seconds", &c.stored_byte_seconds},
      {"ingress_bytes", &c.ingress_bytes},
      {"egress_bytes", &c.egress_bytes},
      {"resident_actor_seconds", &c.resident_actor_seconds}};
  for (const auto& [key, out] : fields) {
    if (Status s = read(key, out); !s.ok()) return s;
  }
  for (std::size_t i = 0; i < kBucketPurposes; ++i) {
    if (Status s = read(BucketKey(i), &c.bucket_requests[i]); !s.ok()) return s;
  }
  if (Status s = reader->Finish(); !s.ok()) return s;
  return r;
}

Task<Status> WriteUsageRecord(ObjectStore& store, UsageRecord record, CallOptions call) {
  std::string key = UsageKey(record.tenant, record.node, record.hour);
  std::string body = EncodeUsageRecord(record);
  auto put = co_await store.Put(std::move(key), std::move(body), Precondition::None(), call);
  if (!put.ok()) co_return put.status();
  co_return Status::Ok();
}

Task<Result<std::optional<UsageRecord>>> ReadUsageRecord(ObjectStore& store, std::string tenant, std::string node,
                                                         UsageHour hour, CallOptions call) {
  auto got = co_await store.Get(UsageKey(tenant, node, hour), call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return std::optional<UsageRecord>();
    co_return got.status();
  }
  auto record = DecodeUsageRecord(got->body, tenant, node, hour);
  if (!record.ok()) co_return record.status();
  co_return std::optional<UsageRecord>(std::move(record).value());
}

UsageCounters TenantUsage::Total() const {
  UsageCounters total;
  for (const auto& [hour, c] : by_hour) total += c;
  return total;
}

Task<Result<TenantUsage>> SumTenantUsage(ObjectStore& store, std::string tenant, std::optional<UsageHour> since,
                                         CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  const std::string prefix = TenantUsagePrefix(tenant);
  auto keys = co_await detail::ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  TenantUsage out;
  for (const std::string& key : *keys) {
    const std::string_view rest = std::string_view(key).substr(prefix.size());
    const std::size_t slash = rest.find('/');
    const std::string_view node = rest.substr(0, slash);
    std::optional<UsageHour> hour;
    if (slash != std::string_view::npos && ValidateNodeId(node).ok()) hour = ParseHourKey(rest.substr(slash + 1));
    if (!hour) co_return Fatal("corrupt usage: key " + key + " is not usage/<tenant>/<node-id>/<YYYYMMDDHH>");
    if (since && *hour < *since) continue;
    auto record = co_await ReadUsageRecord(store, tenant, std::string(node), *hour, call);
    if (!record.ok()) co_return record.status();
    if (!*record) continue;  // removed since the listing
    // Stored byte-seconds come from stored-usage/ alone (below): what nodes of an earlier
    // version sampled into their records is left out, so a mixed cluster never counts twice.
    UsageCounters counters = (*record)->counters;
    counters.stored_byte_seconds = 0;
    out.by_hour[*hour] += counters;
    out.nodes.insert(std::string(node));
    ++out.records;
  }
  // Stored byte-seconds are integrated cluster-wide (control/stored_usage.h), not per node.
  auto stored = co_await ReadStoredUsage(store, tenant, since, call);
  if (!stored.ok()) co_return stored.status();
  for (const auto& [hour, byte_seconds] : *stored) {
    out.by_hour[hour].stored_byte_seconds += byte_seconds;
    ++out.stored_records;
  }
  co_return out;
}

UsageBook::UsageBook(std::string node_id) : node_id_(std::move(node_id)) {
  WK_CHECK(ValidateNodeId(node_id_).ok(), "UsageBook: a bad node id");
}

UsageCounters& UsageBook::At(const std::string& tenant, UsageHour hour) {
  Entry& e = entries_[{tenant, hour}];
  e.dirty = true;
  return e.totals;
}

std::optional<UsageCounters> UsageBook::Totals(const std::string& tenant, UsageHour hour) const {
  auto it = entries_.find({tenant, hour});
  if (it == entries_.end()) return std::nullopt;
  return it->second.totals;
}

Task<Status> UsageBook::Flush(ObjectStore& store, UsageHour current_hour, CallOptions call) {
  std::vector<std::pair<std::string, UsageHour>> dirty;
  for (const auto& [key, e] : entries_) {
    if (e.dirty) dirty.push_back(key);
  }
  Status first = Status::Ok();
  for (const auto& key : dirty) {
    // Entries are only erased below, after the writes: each lookup finds its entry.
    if (!entries_.at(key).based) {
      auto stored = co_await ReadUsageRecord(store, key.first, node_id_, key.second, call);
      if (!stored.ok()) {
        if (first.ok()) first = stored.status();
        continue;
      }
      Entry& e = entries_.at(key);
      if (*stored) e.totals += (*stored)->counters;
      e.based = true;
    }
    Entry& e = entries_.at(key);
    e.dirty = false;  // what is added from here on is written by the next flush
    UsageRecord record{key.first, node_id_, key.second, e.totals};
    Status s = co_await WriteUsageRecord(store, std::move(record), call);
    if (!s.ok()) {
      entries_.at(key).dirty = true;
      if (first.ok()) first = s;
    }
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->first.second < current_hour && !it->second.dirty) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  if (first.ok()) {
    ++flushes_;
  } else {
    ++flush_failures_;
  }
  co_return first;
}

}  // namespace wk::control
