#include "cli/tenant_cmd.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "control/quota_cache.h"
#include "control/quotas.h"
#include "control/tenants.h"
#include "control/tokens.h"

namespace wk::cli {
namespace {

enum class TenantOp : std::uint8_t { kAdd, kAddToken, kList, kRevokeToken, kSet, kQuotas };

struct TenantArgs {
  std::string name;
  std::string token_id;
  bool json = false;
  std::vector<std::string> quotas;  // `tenant set --quota NAME=VALUE`, as given
};

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

// The tenant's quotas (docs/tenants.md, "Quotas"), one per line, every quota named.
void PrintQuotas(const control::TenantQuotas& q, bool json) {
  if (json) {
    nlohmann::json limits = nlohmann::json::object();
    for (std::size_t i = 0; i < control::kQuotas; ++i) {
      const auto which = static_cast<control::Quota>(i);
      const auto limit = q.Get(which);
      limits[std::string(control::QuotaName(which))] = limit ? nlohmann::json(*limit) : nlohmann::json("unlimited");
    }
    nlohmann::json out = {{"tenant", q.tenant}, {"revision", q.revision}, {"quotas", limits}};
    if (q.revision > 0) out["updated_at_ms"] = ToUnixMs(q.updated_at);
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%-22s %s\n", "QUOTA", "LIMIT");
  for (std::size_t i = 0; i < control::kQuotas; ++i) {
    const auto which = static_cast<control::Quota>(i);
    const auto limit = q.Get(which);
    std::printf("%-22s %s\n", std::string(control::QuotaName(which)).c_str(),
                limit ? std::to_string(*limit).c_str() : "unlimited");
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
  PrintQuotas(*q, a.json);
  co_return kExitOk;
}

int RunTenant(const GlobalOptions& g, const TenantArgs& a, TenantOp op) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  // Names are checked before the bucket is opened: a typo costs no request.
  if (op != TenantOp::kList) {
    if (Status s = control::ValidateTenantName(a.name); !s.ok()) return Fail(s);
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
