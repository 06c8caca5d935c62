#include "control/stored_usage.h"

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

#include "base/check.h"
#include "base/ids.h"
#include "base/line_format.h"
#include "base/log.h"
#include "control/common.h"
#include "control/stored_ledger.h"
#include "control/tenants.h"

namespace wk::control {

std::string StoredUsageKey(std::string_view tenant, UsageHour hour) {
  return std::string(kStoredUsagePrefix) + std::string(tenant) + "/" + HourKey(hour);
}

namespace {

bool InsideHour(WallTime t, UsageHour hour) { return t >= HourStart(hour) && t <= HourStart(hour + 1); }

// bytes (clamped at 0: a ledger that sums below zero has lost counts, not stored less than
// nothing) for the time from `from` to `to`, in byte-seconds.
std::uint64_t ByteSeconds(std::int64_t bytes, WallTime from, WallTime to) {
  if (bytes <= 0 || to <= from) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
  const unsigned __int128 product = static_cast<unsigned __int128>(bytes) * static_cast<unsigned __int128>(ms) / 1000;
  return product > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                             : static_cast<std::uint64_t>(product);
}

std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

}  // namespace

std::string EncodeStoredUsage(const StoredUsageRecord& r) {
  WK_CHECK(ValidateTenantName(r.tenant).ok() && r.hour >= 0, "encoding an invalid stored-usage record");
  line_format::LineWriter w("stored_usage", 1);
  w.Field("tenant", r.tenant)
      .Field("hour", HourKey(r.hour))
      .Field("byte_seconds", r.byte_seconds)
      .UnixMsField("as_of", r.as_of);
  return std::move(w).Take();
}

Result<StoredUsageRecord> DecodeStoredUsage(std::string_view body, std::string_view tenant, UsageHour hour) {
  auto reader = line_format::LineReader::Open(body, "stored_usage", 1,
                                              "wasmkeep-stored_usage 1 record " + StoredUsageKey(tenant, hour));
  if (!reader.ok()) return reader.status();
  auto t = reader->Field("tenant");
  if (!t.ok()) return t.status();
  if (*t != tenant) return reader->Corrupt("'tenant' names another tenant");
  auto h = reader->Field("hour");
  if (!h.ok()) return h.status();
  if (ParseHourKey(*h) != hour) return reader->Corrupt("'hour' names another hour");
  auto seconds = reader->UintField("byte_seconds");
  if (!seconds.ok()) return seconds.status();
  auto as_of = reader->UnixMsField("as_of");
  if (!as_of.ok()) return as_of.status();
  if (!InsideHour(*as_of, hour)) return reader->Corrupt("'as_of' is outside the record's hour");
  if (!reader->AtEnd()) return reader->Corrupt("unexpected lines after 'as_of'");
  return StoredUsageRecord{std::string(tenant), hour, *seconds, *as_of};
}

Task<Result<std::map<UsageHour, std::uint64_t>>> ReadStoredUsage(ObjectStore& store, std::string tenant,
                                                                 std::optional<UsageHour> since, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  const std::string prefix = std::string(kStoredUsagePrefix) + tenant + "/";
  auto keys = co_await detail::ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::map<UsageHour, std::uint64_t> out;
  for (const std::string& key : *keys) {
    const std::optional<UsageHour> hour = ParseHourKey(std::string_view(key).substr(prefix.size()));
    if (!hour) co_return Fatal("corrupt stored usage: key " + key + " is not stored-usage/<tenant>/<YYYYMMDDHH>");
    if (since && *hour < *since) continue;
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // removed since the listing
      co_return got.status();
    }
    auto decoded = DecodeStoredUsage(got->body, tenant, *hour);
    if (!decoded.ok()) co_return decoded.status();
    out[*hour] = decoded->byte_seconds;
  }
  co_return out;
}

StoredUsageIntegrator::StoredUsageIntegrator(ObjectStore& store, Duration refresh, BrokenModels broken)
    : store_(store.ForPurpose(BucketPurpose::kControl)), refresh_(refresh), broken_(broken) {}

void StoredUsageIntegrator::Corrupt(const std::string& key, const Status& why) {
  if (!corrupt_keys_.insert(key).second) return;
  ++stats_.corrupt;
  WK_LOG_WARN("stored usage: a corrupt record is left alone", {{"key", key}, {"error", why.ToString()}});
}

Task<Result<std::map<std::string, std::int64_t>>> StoredUsageIntegrator::ReadLedger(CallOptions call) {
  auto entries = co_await detail::ListEntries(store_, std::string(kStoredPrefix), call);
  if (!entries.ok()) co_return entries.status();
  std::map<std::string, std::pair<Version, std::int64_t>> seen;
  std::map<std::string, std::int64_t> sums;
  for (const ListEntry& e : *entries) {
    const std::string_view rest = std::string_view(e.key).substr(kStoredPrefix.size());
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos) continue;
    const std::string tenant(rest.substr(0, slash));
    const std::string node(rest.substr(slash + 1));
    if (!ValidateTenantName(tenant).ok() || !ValidateNodeId(node).ok()) continue;  // not one of ours
    auto known = ledger_.find(e.key);
    if (known == ledger_.end() || known->second.first != e.version) {
      auto got = co_await store_.Get(e.key, call);
      if (!got.ok()) {
        if (got.code() == Code::kNotFound) continue;
        co_return got.status();
      }
      auto decoded = DecodeStored(got->body, tenant, node);
      if (!decoded.ok()) {
        Corrupt(e.key, decoded.status());  // left out of the sum
        continue;
      }
      known = ledger_.insert_or_assign(e.key, std::pair{got->version, decoded->bytes}).first;
    }
    seen.emplace(e.key, known->second);
    std::int64_t& sum = sums[tenant];
    if (__builtin_add_overflow(sum, known->second.second, &sum)) {
      sum = known->second.second > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    }
  }
  ledger_ = std::move(seen);  // records removed since are forgotten
  co_return sums;
}

Task<Result<std::optional<std::pair<StoredUsageRecord, Version>>>> StoredUsageIntegrator::ReadRecord(
    const std::string& tenant, UsageHour hour, CallOptions call) {
  auto got = co_await store_.Get(StoredUsageKey(tenant, hour), call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return std::nullopt;
    co_return got.status();
  }
  auto decoded = DecodeStoredUsage(got->body, tenant, hour);
  if (!decoded.ok()) co_return decoded.status();
  co_return std::pair{std::move(*decoded), got->version};
}

Task<Result<Version>> StoredUsageIntegrator::WriteRecord(StoredUsageRecord r, Precondition condition,
                                                       CallOptions call) {
  const std::string key = StoredUsageKey(r.tenant, r.hour);
  if (broken_.on(BrokenModel::kStoredUsageUnconditional)) condition = Precondition::None();
  auto put = co_await store_.Put(key, EncodeStoredUsage(r), std::move(condition), call);
  if (put.ok()) {
    ++stats_.written;
  } else if (put.code() == Code::kPreconditionFailed) {
    ++stats_.conflicts;  // another integrator covered this time
  }
  co_return put;
}

Task<Status> StoredUsageIntegrator::WriteAndRemember(const std::string& tenant, std::int64_t bytes, WallTime now,
                                                     StoredUsageRecord r, Precondition condition, CallOptions call) {
  const StoredUsageRecord written = r;
  auto put = co_await WriteRecord(std::move(r), std::move(condition), call);
  if (!put.ok()) {
    known_.erase(tenant);  // read again next pass
    co_return put.code() == Code::kPreconditionFailed ? Status::Ok() : put.status();
  }
  known_[tenant] = Known{written, *put, bytes, now};
  co_return Status::Ok();
}

Task<Status> StoredUsageIntegrator::IntegrateTenant(const std::string& tenant, std::int64_t bytes, WallTime now,
                                                    CallOptions call) {
  const UsageHour hour = HourOf(now);
  // 1. This hour's record as this integrator last wrote it: no read.
  if (auto k = known_.find(tenant); k != known_.end() && k->second.record.hour == hour) {
    Known& known = k->second;
    if (now <= known.record.as_of) co_return Status::Ok();
    if (bytes == known.sum && now - known.record.as_of < refresh_) {
      known.seen = now;  // counted at this sum when next written
      ++stats_.unchanged;
      co_return Status::Ok();
    }
    // The sum held until the last pass that saw it; the new one is counted from then.
    StoredUsageRecord r = known.record;
    const WallTime seen = std::clamp(known.seen, r.as_of, now);
    r.byte_seconds = SaturatingAdd(r.byte_seconds, ByteSeconds(known.sum, r.as_of, seen));
    r.byte_seconds = SaturatingAdd(r.byte_seconds, ByteSeconds(bytes, seen, now));
    r.as_of = now;
    const Version version = known.version;
    co_return co_await WriteAndRemember(tenant, bytes, now, std::move(r), Precondition::IfMatch(version), call);
  }
  // 2. Read: this hour's record (another integrator's, or this one's forgotten).
  auto current = co_await ReadRecord(tenant, hour, call);
  if (!current.ok()) {
    if (current.code() != Code::kFatal) co_return current.status();
    Corrupt(StoredUsageKey(tenant, hour), current.status());  // this tenant's hour is left to an operator
    co_return Status::Ok();
  }
  if (*current) {
    auto& [r, version] = **current;
    if (now <= r.as_of) co_return Status::Ok();  // nothing new (or this clock is behind another's)
    r.byte_seconds = SaturatingAdd(r.byte_seconds, ByteSeconds(bytes, r.as_of, now));
    r.as_of = now;
    co_return co_await WriteAndRemember(tenant, bytes, now, std::move(r), Precondition::IfMatch(version), call);
  }
  // 3. A new hour: close the previous one at its end (if it was being integrated), then
  // start this one from its start; a tenant without a record before starts now.
  WallTime from = now;
  auto previous = co_await ReadRecord(tenant, hour - 1, call);
  if (!previous.ok() && previous.code() != Code::kFatal) co_return previous.status();
  if (!previous.ok()) {
    Corrupt(StoredUsageKey(tenant, hour - 1), previous.status());  // left alone; this hour starts now
  } else if (*previous) {
    auto& [r, version] = **previous;
    const WallTime end = HourStart(hour);
    if (r.as_of < end) {
      // The sum this integrator last wrote it with held until the last pass that saw it.
      WallTime seen = r.as_of;
      std::int64_t before = bytes;
      if (auto k = known_.find(tenant); k != known_.end() && k->second.version == version) {
        seen = std::clamp(k->second.seen, r.as_of, end);
        before = k->second.sum;
      }
      r.byte_seconds = SaturatingAdd(r.byte_seconds, ByteSeconds(before, r.as_of, seen));
      r.byte_seconds = SaturatingAdd(r.byte_seconds, ByteSeconds(bytes, seen, end));
      r.as_of = end;
      auto closed = co_await WriteRecord(std::move(r), Precondition::IfMatch(version), call);
      if (!closed.ok()) {
        known_.erase(tenant);
        // Another integrator is at it (it closes the hour and starts this one).
        co_return closed.code() == Code::kPreconditionFailed ? Status::Ok() : closed.status();
      }
    }
    from = end;
  } else if (bytes <= 0) {
    co_return Status::Ok();  // nothing stored and nothing counted yet: no record
  }
  // A named record, not a braced temporary, as the coroutine's argument (GCC 12 frees such a
  // temporary's string twice: docs/DEVELOPING.md).
  StoredUsageRecord fresh{tenant, hour, ByteSeconds(bytes, from, now), now};
  co_return co_await WriteAndRemember(tenant, bytes, now, std::move(fresh), Precondition::IfNoneMatchAny(), call);
}

Task<Status> StoredUsageIntegrator::Integrate(WallTime now, CallOptions call) {
  ++stats_.passes;
  auto sums = co_await ReadLedger(call);
  if (!sums.ok()) {
    ++stats_.failed;
    co_return sums.status();
  }
  std::erase_if(known_, [&](const auto& k) { return !sums->contains(k.first); });
  Status first = Status::Ok();
  for (const auto& [tenant, bytes] : *sums) {
    Status s = co_await IntegrateTenant(tenant, bytes, now, call);
    if (!s.ok() && first.ok()) first = std::move(s);
  }
  if (!first.ok()) ++stats_.failed;
  co_return first;
}

}  // namespace wk::control
