#include "cli/class_cmd.h"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "actor/runtime.h"
#include "control/classes.h"
#include "control/tenants.h"
#include "engine/engine.h"

namespace wk::cli {
namespace {

struct ClassArgs {
  std::string tenant;
  std::string class_name;
  std::string file;
  bool json = false;
};

Task<int> Deploy(ObjectStore* store, RealEnv* env, ClassArgs a, std::string bytes, CallOptions call) {
  auto v = co_await control::DeployClass(*store, *env, a.tenant, a.class_name, std::move(bytes), call);
  if (!v.ok()) {
    if (v.code() == Code::kNotFound) {
      co_return Fail(NotFound(v.status().message() + " (create it with `wasmkeep tenant add " + a.tenant + "`)"));
    }
    co_return Fail(v.status());
  }
  if (a.json) {
    nlohmann::json j = {{"tenant", a.tenant},           {"class", a.class_name},
                        {"module_sha256", v->module.hex}, {"size", v->size_bytes},
                        {"deployed_at_ms", ToUnixMs(v->deployed_at)}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("deployed %s/%s: module sha256 %s (%llu bytes)\n", a.tenant.c_str(), a.class_name.c_str(),
                v->module.hex.c_str(), static_cast<unsigned long long>(v->size_bytes));
    std::printf("actors of the class run it from their next start\n");
  }
  co_return kExitOk;
}

Task<int> List(ObjectStore* store, std::optional<std::string> tenant, bool json, CallOptions call) {
  auto classes = co_await control::ListClasses(*store, tenant, call);
  if (!classes.ok()) co_return Fail(classes.status());
  bool errors = false;
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : *classes) {
      nlohmann::json j = {{"tenant", c.tenant}, {"class", c.class_name}};
      if (c.current) {
        j["module_sha256"] = c.current->module.hex;
        j["size"] = c.current->size_bytes;
        j["deployed_at_ms"] = ToUnixMs(c.current->deployed_at);
      } else {
        j["error"] = c.error;
        errors = true;
      }
      out.push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%-24s %-24s %-21s %-10s %s\n", "TENANT", "CLASS", "DEPLOYED", "SIZE", "MODULE (SHA-256)");
    for (const auto& c : *classes) {
      if (!c.current) {
        std::printf("%-24s %-24s %s\n", c.tenant.c_str(), c.class_name.c_str(), ("ERROR: " + c.error).c_str());
        errors = true;
        continue;
      }
      std::printf("%-24s %-24s %-21s %-10llu %s\n", c.tenant.c_str(), c.class_name.c_str(),
                  IsoUtc(c.current->deployed_at).c_str(), static_cast<unsigned long long>(c.current->size_bytes),
                  c.current->module.hex.c_str());
    }
    if (classes->empty()) std::printf("(no classes deployed)\n");
  }
  if (errors) std::fprintf(stderr, "wasmkeep: some class pointers are corrupt: their actors cannot start until redeployed\n");
  co_return kExitOk;
}

int RunDeploy(const GlobalOptions& g, const ClassArgs& a) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  if (Status s = control::ValidateTenantName(a.tenant); !s.ok()) return Fail(s);
  if (Status s = control::ValidateClassName(a.class_name); !s.ok()) return Fail(s);
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  std::ifstream in(a.file, std::ios::binary);
  if (!in) return Fail(InvalidArgument("cannot read " + a.file));
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  if (!in.eof() && in.fail()) return Fail(InvalidArgument("cannot read " + a.file));
  {
    // The checks a node runs before it runs a class (as `wasmkeep actor check`), so a
    // module a node would refuse is never stored.
    engine::Engine engine;
    std::span<const std::uint8_t> wasm(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    auto module = actor::CompileActorModule(engine, wasm, config->actors.limits);
    if (!module.ok()) return Fail(InvalidArgument(a.file + ": " + module.status().message()));
  }
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(Deploy(store->get(), &env, a, std::move(bytes), *call));
}

int RunList(const GlobalOptions& g, const ClassArgs& a) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  std::optional<std::string> tenant;
  if (!a.tenant.empty()) {
    if (Status s = control::ValidateTenantName(a.tenant); !s.ok()) return Fail(s);
    tenant = a.tenant;
  }
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(List(store->get(), tenant, a.json, *call));
}

}  // namespace

void AddClassCommands(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto deploy_args = std::make_shared<ClassArgs>();
  CLI::App* deploy = app.add_subcommand("deploy", "Check a module and make it the current version of a tenant's class");
  deploy->add_option("--tenant", deploy_args->tenant, "The tenant (it must exist: `wasmkeep tenant add`)")->required();
  deploy->add_option("--class", deploy_args->class_name,
                     "The class: 1-63 of a-z, 0-9, '_', '-', starting with a letter or digit")
      ->required();
  deploy->add_option("file", deploy_args->file, "The module (.wasm)")->required();
  deploy->add_flag("--json", deploy_args->json, "Print the new version as JSON");
  deploy->callback([&globals, deploy_args, result] { *result = RunDeploy(globals, *deploy_args); });

  auto list_args = std::make_shared<ClassArgs>();
  CLI::App* cls = app.add_subcommand("class", "Deployed classes");
  cls->require_subcommand(1);
  CLI::App* list = cls->add_subcommand("list", "Every deployed class (of one tenant with --tenant) and its current module");
  list->add_option("--tenant", list_args->tenant, "Only this tenant's classes");
  list->add_flag("--json", list_args->json, "Print JSON");
  list->callback([&globals, list_args, result] { *result = RunList(globals, *list_args); });
}

}  // namespace wk::cli
