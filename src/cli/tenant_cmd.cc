#include "cli/tenant_cmd.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/cost.h"
#include "control/quota_cache.h"
#include "control/quotas.h"
#include "control/stored_ledger.h"
#include "control/tenants.h"
#include "control/usage.h"
#include "control/tokens.h"

namespace wk::cli {
namespace {

enum class TenantOp : std::uint8_t { kAdd, kAddToken, kList, kRevokeToken, kUsage, kSet, kQuotas };

struct TenantArgs {
  std::string name;
  std::string token_id;
  bool json = false;
  // tenant usage
  bool csv = false;
  bool hourly = false;
  std::string since;   // YYYY-MM-DD[THH], UTC
  std::string prices;  // aws-s3, r2 or a price file (cli/cost.h)
  std::vector<std::string> quotas;  // `tenant set --quota NAME=VALUE`, as given
};

// --since: "2025-11-24" (that day's first hour) or "2025-11-24T14"; UTC.
Result<control::UsageHour> ParseSince(const std::string& text) {
  std::optional<control::UsageHour> hour;
  if ((text.size() == 10 || (text.size() == 13 && text[10] == 'T')) && text[4] == '-' && text[7] == '-') {
    const std::string key = text.substr(0, 4) + text.substr(5, 2) + text.substr(8, 2) +
                            (text.size() == 13 ? text.substr(11, 2) : std::string("00"));
    hour = control::ParseHourKey(key);
  }
  if (!hour) return InvalidArgument("--since '" + text.substr(0, 40) + "' must be YYYY-MM-DD or YYYY-MM-DDTHH (UTC)");
  return *hour;
}

// One row of the usage table: an hour or a day (its first hour) and what it summed.
struct UsageRow {
  control::UsageHour start = 0;
  control::UsageCounters c;
};

std::string RowLabel(control::UsageHour start, bool hourly) {
  const std::string k = control::HourKey(start);
  std::string day = k.substr(0, 4) + "-" + k.substr(4, 2) + "-" + k.substr(6, 2);
  return hourly ? day + "T" + k.substr(8, 2) : day;
}

// Storage's price for byte-seconds at the table's per-GB-month rate (a month: 30 days).
double StorageMoney(const PriceTable& prices, std::uint64_t byte_seconds) {
  constexpr double kSecondsPerMonth = 30.0 * 86'400;
  return StoragePerMonth(prices, static_cast<std::uint64_t>(static_cast<double>(byte_seconds) / kSecondsPerMonth));
}

// Bucket requests at the table's request prices, by purpose (cli/cost.h, PricePerRequestOf).
double BucketMoney(const PriceTable& prices, const control::UsageCounters& c) {
  return RequestsMoney(prices, c.bucket_requests);
}

Task<int> Usage(ObjectStore* store, RealEnv*, TenantArgs a, std::optional<control::UsageHour> since,
                std::optional<PriceTable> prices, CallOptions call) {
  auto usage = co_await control::SumTenantUsage(*store, a.name, since, call);
  if (!usage.ok()) co_return Fail(usage.status());
  std::vector<UsageRow> rows;
  for (const auto& [hour, c] : usage->by_hour) {
    const control::UsageHour start = a.hourly ? hour : hour - hour % 24;
    if (rows.empty() || rows.back().start != start) rows.push_back(UsageRow{start, {}});
    rows.back().c += c;
  }
  UsageRow total{0, usage->Total()};
  const char* unit = a.hourly ? "hour" : "day";
  auto money = [&](const control::UsageCounters& c) {
    return prices ? StorageMoney(*prices, c.stored_byte_seconds) + BucketMoney(*prices, c) : 0.0;
  };
  if (a.json) {
    nlohmann::json out = {{"tenant", a.name}, {"by", unit}, {"nodes", usage->nodes}, {"records", usage->records},
                          {"stored_records", usage->stored_records}};
    auto row = [&](const control::UsageCounters& c) {
      nlohmann::json j;
      nlohmann::json req;
      for (std::size_t i = 0; i < control::kUsageOutcomes; ++i) {
        req[std::string(control::UsageOutcomeName(static_cast<control::UsageOutcome>(i)))] = c.requests[i];
      }
      j["requests"] = req;
      j["cpu_ms"] = c.cpu_ms;
      j["stored_byte_seconds"] = c.stored_byte_seconds;
      j["ingress_bytes"] = c.ingress_bytes;
      j["egress_bytes"] = c.egress_bytes;
      j["resident_actor_seconds"] = c.resident_actor_seconds;
      nlohmann::json bucket;
      for (std::size_t i = 0; i < kBucketPurposes; ++i) {
        bucket[std::string(BucketPurposeName(static_cast<BucketPurpose>(i)))] = c.bucket_requests[i];
      }
      j["bucket_requests"] = bucket;
      j["bucket_requests_total"] = c.BucketRequests();
      if (prices) {
        j["money"] = money(c);
        j["money_storage"] = StorageMoney(*prices, c.stored_byte_seconds);
        j["money_bucket_requests"] = BucketMoney(*prices, c);
      }
      return j;
    };
    nlohmann::json list = nlohmann::json::array();
    for (const UsageRow& r : rows) {
      nlohmann::json j = row(r.c);
      j[unit] = RowLabel(r.start, a.hourly);
      list.push_back(j);
    }
    out["rows"] = list;
    out["total"] = row(total.c);
    if (prices) {
      out["prices"] = prices->name;
      out["currency"] = prices->currency;
    }
    std::printf("%s\n", out.dump(2).c_str());
    co_return kExitOk;
  }
  if (a.csv) {
    // The total of bucket requests, then one column per purpose (bucket_lease, ...).
    std::string purposes;
    for (std::size_t i = 0; i < kBucketPurposes; ++i) {
      purposes += ",bucket_" + std::string(BucketPurposeName(static_cast<BucketPurpose>(i)));
    }
    std::printf("%s,requests_ok,requests_client_error,requests_throttled,requests_actor_failed,requests_unavailable,"
                "cpu_ms,stored_byte_seconds,ingress_bytes,egress_bytes,resident_actor_seconds,bucket_requests%s%s\n",
                unit, purposes.c_str(), prices ? ",money" : "");
    for (const UsageRow& r : rows) {
      const control::UsageCounters& c = r.c;
      std::printf("%s", RowLabel(r.start, a.hourly).c_str());
      for (std::uint64_t n : c.requests) std::printf(",%llu", static_cast<unsigned long long>(n));
      for (std::uint64_t n : {c.cpu_ms, c.stored_byte_seconds, c.ingress_bytes, c.egress_bytes, c.resident_actor_seconds,
                              c.BucketRequests()}) {
        std::printf(",%llu", static_cast<unsigned long long>(n));
      }
      for (std::uint64_t n : c.bucket_requests) std::printf(",%llu", static_cast<unsigned long long>(n));
      if (prices) std::printf(",%.6f", money(c));
      std::printf("\n");
    }
    co_return kExitOk;
  }
  std::printf("usage of tenant %s by %s (UTC), summed over %zu record(s) of %zu node(s) and %zu hour(s) of stored "
              "bytes\n",
              a.name.c_str(), unit, usage->records, usage->nodes.size(), usage->stored_records);
  std::printf("%-13s %10s %8s %8s %8s %8s %12s %14s %12s %12s %12s %10s%s\n", a.hourly ? "HOUR" : "DAY", "REQUESTS",
              "4XX", "429", "FAILED", "UNAVAIL", "CPU_MS", "STORED_GB_H", "IN_BYTES", "OUT_BYTES", "ACTOR_H", "BUCKET",
              prices ? "       MONEY" : "");
  auto line = [&](const std::string& label, const control::UsageCounters& c) {
    using control::UsageOutcome;
    auto n = [&](UsageOutcome o) { return static_cast<unsigned long long>(c.requests[static_cast<std::size_t>(o)]); };
    std::printf("%-13s %10llu %8llu %8llu %8llu %8llu %12llu %14.4f %12llu %12llu %12.3f %10llu", label.c_str(),
                static_cast<unsigned long long>(c.Requests()), n(UsageOutcome::kClientError), n(UsageOutcome::kThrottled),
                n(UsageOutcome::kActorFailed), n(UsageOutcome::kUnavailable), static_cast<unsigned long long>(c.cpu_ms),
                static_cast<double>(c.stored_byte_seconds) / (1024.0 * 1024 * 1024 * 3600),
                static_cast<unsigned long long>(c.ingress_bytes), static_cast<unsigned long long>(c.egress_bytes),
                static_cast<double>(c.resident_actor_seconds) / 3600, static_cast<unsigned long long>(c.BucketRequests()));
    if (prices) std::printf(" %11.6f", money(c));
    std::printf("\n");
  };
  for (const UsageRow& r : rows) line(RowLabel(r.start, a.hourly), r.c);
  line("TOTAL", total.c);
  if (rows.empty()) std::printf("(no usage recorded%s)\n", since ? " since then" : "");
  // The total's bucket requests by purpose (the purposes with any).
  std::string by_purpose;
  for (std::size_t i = 0; i < kBucketPurposes; ++i) {
    if (total.c.bucket_requests[i] == 0) continue;
    by_purpose += (by_purpose.empty() ? "" : ", ") + std::string(BucketPurposeName(static_cast<BucketPurpose>(i))) +
                  " " + std::to_string(total.c.bucket_requests[i]);
  }
  if (!by_purpose.empty()) std::printf("bucket requests by purpose: %s\n", by_purpose.c_str());
  if (prices) {
    std::printf("money: %s, %s; stored bytes at its per-GB-month rate (30-day month), bucket requests at the dearest "
                "operation each purpose sends (records count them by purpose, not operation: exact for segment and "
                "snapshot PUTs, at most that for the others)\n",
                prices->title.c_str(), prices->currency.c_str());
  }
  co_return kExitOk;
}

void PrintToken(const control::NewToken& t, bool created) {
  if (created) std::printf("created tenant %s\n", t.tenant.c_str());
  std::printf("token id %s (revoke with `wasmkeep tenant revoke-token %s %s`)\n", t.token_id.c_str(), t.tenant.c_str(),
              t.token_id.c_str());
  std::printf("the token is shown only now (the bucket keeps its hash); send it as 'Authorization: Bearer <token>':\n");
  std::printf("%s\n", t.token.c_str());
}

Task<int> Add(ObjectStore* store, RealEnv* env, TenantArgs a, CallOptions call) {
  auto t = co_await control::CreateTenant(*store, *env, a.name, call);
  if (!t.ok()) co_return Fail(t.status());
  PrintToken(*t, true);
  co_return kExitOk;
}

Task<int> AddToken(ObjectStore* store, RealEnv* env, TenantArgs a, CallOptions call) {
  auto t = co_await control::AddToken(*store, *env, a.name, call);
  if (!t.ok()) co_return Fail(t.status());
  PrintToken(*t, false);
  co_return kExitOk;
}

Task<int> Revoke(ObjectStore* store, RealEnv* env, TenantArgs a, CallOptions call) {
  Status s = co_await control::RevokeToken(*store, *env, a.name, a.token_id, call);
  if (!s.ok()) co_return Fail(s);
  std::printf("revoked token %s of tenant %s: nodes refuse it within %.0f s\n", a.token_id.c_str(), a.name.c_str(),
              ToSeconds(control::kDefaultAuthCacheTtl));
  co_return kExitOk;
}

Task<int> List(ObjectStore* store, RealEnv*, TenantArgs a, CallOptions call) {
  auto tenants = co_await control::ListTenants(*store, call);
  if (!tenants.ok()) co_return Fail(tenants.status());
  bool errors = false;
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : *tenants) {
      nlohmann::json j = {{"tenant", t.tenant}};
      if (t.record) {
        j["created_at_ms"] = ToUnixMs(t.record->created_at);
        nlohmann::json tokens = nlohmann::json::array();
        for (const auto& tok : t.record->tokens) {
          tokens.push_back({{"id", tok.id}, {"created_at_ms", ToUnixMs(tok.created_at)}});
        }
        j["tokens"] = tokens;
      } else {
        j["error"] = t.error;
        errors = true;
      }
      out.push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%-24s %-21s %s\n", "TENANT", "CREATED", "TOKENS");
    for (const auto& t : *tenants) {
      if (!t.record) {
        std::printf("%-24s %-21s %s\n", t.tenant.c_str(), "-", ("ERROR: " + t.error).c_str());
        errors = true;
        continue;
      }
      std::string ids;
      for (const auto& tok : t.record->tokens) ids += (ids.empty() ? "" : " ") + tok.id;
      std::printf("%-24s %-21s %s\n", t.tenant.c_str(), IsoUtc(t.record->created_at).c_str(),
                  ids.empty() ? "(none)" : ids.c_str());
    }
    if (tenants->empty()) std::printf("(no tenants; create one with `wasmkeep tenant add NAME`)\n");
  }
  if (errors) std::fprintf(stderr, "wasmkeep: some tenant records are corrupt: their requests fail until repaired\n");
  co_return kExitOk;
}

// The tenant's quotas (docs/tenants.md, "Quotas"), one per line, every quota named; with
// `stored`, the tenant's stored bytes as the ledger's records sum them (control/stored_ledger.h).
void PrintQuotas(const control::TenantQuotas& q, bool json, std::optional<std::int64_t> stored = std::nullopt) {
  if (json) {
    nlohmann::json limits = nlohmann::json::object();
    for (std::size_t i = 0; i < control::kQuotas; ++i) {
      const auto which = static_cast<control::Quota>(i);
      const auto limit = q.Get(which);
      limits[std::string(control::QuotaName(which))] = limit ? nlohmann::json(*limit) : nlohmann::json("unlimited");
    }
    nlohmann::json out = {{"tenant", q.tenant}, {"revision", q.revision}, {"quotas", limits}};
    if (q.revision > 0) out["updated_at_ms"] = ToUnixMs(q.updated_at);
    if (stored) out["stored_bytes_in_use"] = *stored;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%-22s %s\n", "QUOTA", "LIMIT");
  for (std::size_t i = 0; i < control::kQuotas; ++i) {
    const auto which = static_cast<control::Quota>(i);
    const auto limit = q.Get(which);
    const char* unset = which == control::Quota::kCpuWeight ? "1 (default)" : "unlimited";
    std::string in_use;
    if (which == control::Quota::kStoredBytes && stored) in_use = "  (in use: " + std::to_string(*stored) + ")";
    std::printf("%-22s %s%s\n", std::string(control::QuotaName(which)).c_str(),
                limit ? std::to_string(*limit).c_str() : unset, in_use.c_str());
  }
  if (q.revision > 0) std::printf("(revision %llu, %s)\n", static_cast<unsigned long long>(q.revision), IsoUtc(q.updated_at).c_str());
}

Task<int> Set(ObjectStore* store, RealEnv* env, TenantArgs a, std::vector<control::QuotaSetting> settings,
              CallOptions call) {
  auto q = co_await control::SetQuotas(*store, *env, a.name, std::move(settings), call);
  if (!q.ok()) co_return Fail(q.status());
  std::printf("tenant %s: every node applies these within %.0f s\n", a.name.c_str(),
              ToSeconds(control::kDefaultQuotaPeriod));
  PrintQuotas(*q, false);
  co_return kExitOk;
}

Task<int> Quotas(ObjectStore* store, RealEnv*, TenantArgs a, CallOptions call) {
  auto tenant = co_await control::ReadTenant(*store, a.name, call);
  if (!tenant.ok()) co_return Fail(tenant.status());
  auto q = co_await control::ReadQuotas(*store, a.name, call);
  if (!q.ok()) co_return Fail(q.status());
  auto stored = co_await control::ReadStoredBytes(*store, a.name, call);
  if (!stored.ok()) co_return Fail(stored.status());
  PrintQuotas(*q, a.json, *stored);
  co_return kExitOk;
}

int RunTenant(const GlobalOptions& g, const TenantArgs& a, TenantOp op) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  // Names are checked before the bucket is opened: a typo costs no request.
  if (op != TenantOp::kList) {
    if (Status s = control::ValidateTenantName(a.name); !s.ok()) return Fail(s);
  }
  std::optional<control::UsageHour> since;
  std::optional<PriceTable> prices;
  if (op == TenantOp::kUsage) {
    if (a.json && a.csv) return Fail(InvalidArgument("--json and --csv: choose one"));
    if (!a.since.empty()) {
      auto hour = ParseSince(a.since);
      if (!hour.ok()) return Fail(hour.status());
      since = *hour;
    }
    if (!a.prices.empty()) {
      auto table = LoadPriceTable(a.prices);
      if (!table.ok()) return Fail(table.status());
      prices = std::move(*table);
    }
  }
  // So are the quotas: a malformed one is refused whole, naming it, before anything is read.
  std::vector<control::QuotaSetting> settings;
  for (const std::string& text : a.quotas) {
    auto setting = control::ParseQuotaSetting(text);
    if (!setting.ok()) return Fail(setting.status());
    settings.push_back(*setting);
  }
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  // Only `tenant add` may create the bucket (the first step of a new cluster); the others
  // need its tenants.
  auto store = OpenBucket(env, g, *config, op == TenantOp::kAdd ? BucketOpen::kCreateIfMissing : BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  switch (op) {
    case TenantOp::kAdd: return env.RunMain(Add(store->get(), &env, a, *call));
    case TenantOp::kAddToken: return env.RunMain(AddToken(store->get(), &env, a, *call));
    case TenantOp::kRevokeToken: return env.RunMain(Revoke(store->get(), &env, a, *call));
    case TenantOp::kList: return env.RunMain(List(store->get(), &env, a, *call));
    case TenantOp::kUsage: return env.RunMain(Usage(store->get(), &env, a, since, prices, *call));
    case TenantOp::kSet: return env.RunMain(Set(store->get(), &env, a, std::move(settings), *call));
    case TenantOp::kQuotas: return env.RunMain(Quotas(store->get(), &env, a, *call));
  }
  return kExitError;
}

}  // namespace

void AddTenantCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto args = std::make_shared<TenantArgs>();
  CLI::App* tenant = app.add_subcommand("tenant", "Tenants and their access tokens");
  tenant->require_subcommand(1);

  CLI::App* add = tenant->add_subcommand("add", "Create tenant NAME with one token (printed as the last line)");
  add->add_option("name", args->name, "Tenant name: 1-63 of a-z, 0-9, '_', '-', starting with a letter or digit")
      ->required();
  add->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kAdd); });

  CLI::App* add_token = tenant->add_subcommand("add-token", "Mint another token for NAME (printed as the last line)");
  add_token->add_option("name", args->name, "Tenant name")->required();
  add_token->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kAddToken); });

  CLI::App* list = tenant->add_subcommand("list", "Every tenant with its creation time and token ids");
  list->add_flag("--json", args->json, "Print JSON");
  list->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kList); });

  CLI::App* revoke = tenant->add_subcommand("revoke-token", "Revoke token TOKEN_ID of NAME (see `tenant list`)");
  revoke->add_option("name", args->name, "Tenant name")->required();
  revoke->add_option("token_id", args->token_id, "Token id (16 hex characters)")->required();
  revoke->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kRevokeToken); });

  CLI::App* usage = tenant->add_subcommand("usage", "NAME's usage summed over the cluster's nodes, by day or hour");
  usage->add_option("name", args->name, "Tenant name")->required();
  usage->add_option("--since", args->since, "From this UTC day or hour on: YYYY-MM-DD or YYYY-MM-DDTHH");
  usage->add_flag("--hourly", args->hourly, "One row per hour (default: per day)");
  usage->add_flag("--json", args->json, "Print JSON");
  usage->add_flag("--csv", args->csv, "Print CSV");
  usage->add_option("--prices", args->prices, "aws-s3, r2 or a price file (as `cluster cost`): money per row");
  usage->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kUsage); });
  CLI::App* set = tenant->add_subcommand("set", "Set tenant NAME's quotas (docs/tenants.md, \"Quotas\")");
  set->add_option("name", args->name, "Tenant name")->required();
  set->add_option("--quota", args->quotas,
                  "NAME=VALUE, repeatable: " + control::QuotaNames() +
                      "; VALUE a positive integer (module_bytes also with KiB, MiB, GiB, TiB) or 'unlimited'")
      ->required();
  set->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kSet); });

  CLI::App* quotas = tenant->add_subcommand("quotas", "Show tenant NAME's quotas");
  quotas->add_option("name", args->name, "Tenant name")->required();
  quotas->add_flag("--json", args->json, "Print JSON");
  quotas->callback([&globals, args, result] { *result = RunTenant(globals, *args, TenantOp::kQuotas); });
}

}  // namespace wk::cli
