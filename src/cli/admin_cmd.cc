#include "cli/admin_cmd.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "control/operators.h"

namespace wk::cli {
namespace {

enum class TokenOp : std::uint8_t { kAdd, kList, kRevoke };

struct AdminArgs {
  std::string label;
  std::string token_id;
  bool json = false;
};

Task<int> Add(ObjectStore* store, RealEnv* env, AdminArgs a, CallOptions call) {
  auto t = co_await control::AddOperatorToken(*store, *env, a.label, call);
  if (!t.ok()) co_return Fail(t.status());
  std::printf("operator token id %s, label %s (revoke with `wasmkeep admin token revoke %s`)\n", t->token_id.c_str(),
              a.label.c_str(), t->token_id.c_str());
  std::printf("it opens the console (/console/) and the admin routes of every node; shown only now "
              "(the bucket keeps its hash):\n");
  std::printf("%s\n", t->token.c_str());
  co_return kExitOk;
}

Task<int> Revoke(ObjectStore* store, RealEnv* env, AdminArgs a, CallOptions call) {
  Status s = co_await control::RevokeOperatorToken(*store, *env, a.token_id, call);
  if (!s.ok()) co_return Fail(s);
  std::printf("revoked operator token %s: nodes refuse it within %.0f s\n", a.token_id.c_str(),
              ToSeconds(control::kDefaultAuthCacheTtl));
  co_return kExitOk;
}

Task<int> List(ObjectStore* store, RealEnv*, AdminArgs a, CallOptions call) {
  auto record = co_await control::ReadOperators(*store, call);
  if (!record.ok()) co_return Fail(record.status());
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : record->tokens) {
      out.push_back({{"id", t.entry.id}, {"label", t.label}, {"created_at_ms", ToUnixMs(t.entry.created_at)}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("%-17s %-21s %s\n", "TOKEN ID", "CREATED", "LABEL");
  for (const auto& t : record->tokens) {
    std::printf("%-17s %-21s %s\n", t.entry.id.c_str(), IsoUtc(t.entry.created_at).c_str(), t.label.c_str());
  }
  if (record->tokens.empty()) std::printf("(no operator tokens; mint one with `wasmkeep admin token add LABEL`)\n");
  co_return kExitOk;
}

int RunToken(const GlobalOptions& g, const AdminArgs& a, TokenOp op) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  // Checked before the bucket is opened: a typo costs no request.
  if (op == TokenOp::kAdd) {
    if (Status s = control::ValidateOperatorLabel(a.label); !s.ok()) return Fail(s);
  }
  if (op == TokenOp::kRevoke && !control::IsTokenId(a.token_id)) {
    return Fail(InvalidArgument("token id '" + a.token_id.substr(0, 80) +
                                "' must be 16 lowercase hex characters (see `wasmkeep admin token list`)"));
  }
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  // As `tenant add`: minting the first token may create the bucket; listing and revoking
  // never do (exit 8 naming it, cli/common.h).
  auto store = OpenBucket(env, g, *config, op == TokenOp::kAdd ? BucketOpen::kCreateIfMissing : BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  switch (op) {
    case TokenOp::kAdd: return env.RunMain(Add(store->get(), &env, a, *call));
    case TokenOp::kRevoke: return env.RunMain(Revoke(store->get(), &env, a, *call));
    case TokenOp::kList: return env.RunMain(List(store->get(), &env, a, *call));
  }
  return kExitError;
}

}  // namespace

void AddAdminCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto args = std::make_shared<AdminArgs>();
  CLI::App* admin = app.add_subcommand("admin", "Operators' access: tokens for the console and the admin routes");
  admin->require_subcommand(1);
  CLI::App* token = admin->add_subcommand("token", "Operator tokens (stored hashed under control/operators)");
  token->require_subcommand(1);

  CLI::App* add = token->add_subcommand("add", "Mint an operator token labelled LABEL (printed as the last line)");
  add->add_option("label", args->label, "Whose token: 1-63 of A-Z, a-z, 0-9, '.', '_', '-'")->required();
  add->callback([&globals, args, result] { *result = RunToken(globals, *args, TokenOp::kAdd); });

  CLI::App* list = token->add_subcommand("list", "Every operator token's id, label and creation time");
  list->add_flag("--json", args->json, "Print JSON");
  list->callback([&globals, args, result] { *result = RunToken(globals, *args, TokenOp::kList); });

  CLI::App* revoke = token->add_subcommand("revoke", "Revoke operator token TOKEN_ID (see `admin token list`)");
  revoke->add_option("token_id", args->token_id, "Token id (16 hex characters)")->required();
  revoke->callback([&globals, args, result] { *result = RunToken(globals, *args, TokenOp::kRevoke); });
}

}  // namespace wk::cli
