#include "cli/tenant_cmd.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "control/tenants.h"
#include "control/tokens.h"

namespace wk::cli {
namespace {

enum class TenantOp : std::uint8_t { kAdd, kAddToken, kList, kRevokeToken };

struct TenantArgs {
  std::string name;
  std::string token_id;
  bool json = false;
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

int RunTenant(const GlobalOptions& g, const TenantArgs& a, TenantOp op) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  // Names are checked before the bucket is opened: a typo costs no request.
  if (op != TenantOp::kList) {
    if (Status s = control::ValidateTenantName(a.name); !s.ok()) return Fail(s);
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
}

}  // namespace wk::cli
