#include "cli/class_cmd.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ctime>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "actor/abi.h"
#include "actor/runtime.h"
#include "control/class_versions.h"
#include "control/classes.h"
#include "control/tenants.h"
#include "engine/engine.h"
#include "engine/wasm_module_info.h"

namespace wk::cli {
namespace {

struct ClassArgs {
  std::string tenant;
  std::string class_name;
  std::string file;
  bool json = false;
  std::optional<std::uint32_t> rollout;  // deploy --rollout PERCENT
  std::string by;                        // deploy --by NAME
  bool migrates = false;                 // the module exports wk_on_upgrade
  std::vector<std::string> imports;      // its kAbiModule imports
};

// What `deploy` records as its author by default: $USER@<host>, kept to the record's
// alphabet ([A-Za-z0-9._@+-], 64 bytes).
std::string DefaultDeployer() {
  const char* user = std::getenv("USER");
  std::string host(256, '\0');
  if (gethostname(host.data(), host.size()) != 0) host.clear();
  host.resize(std::strlen(host.c_str()));
  std::string by = std::string(user != nullptr && *user != '\0' ? user : "unknown") + (host.empty() ? "" : "@" + host);
  for (char& c : by) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '@' || c == '+' || c == '-';
    if (!ok) c = '-';
  }
  return by.substr(0, 64);
}

// The host calls of kAbiModule this binary provides: a module importing another is refused
// here, and a version naming one is refused by `class rollout` (docs/tenants.md).
Status CheckImports(const std::vector<std::string>& imports, std::string_view what) {
  auto host = actor::AbiHostInterface();
  for (const std::string& name : imports) {
    if (host->Find(actor::kAbiModule, name) == nullptr) {
      return InvalidArgument(std::string(what) + " imports the host call " + std::string(actor::kAbiModule) + "." + name +
                             ", which this release of wasmkeep does not have: upgrade the nodes (and this CLI) first");
    }
  }
  return Status::Ok();
}

Task<int> Deploy(ObjectStore* store, RealEnv* env, ClassArgs a, std::string bytes, CallOptions call) {
  control::DeployRequest request;
  request.tenant = a.tenant;
  request.class_name = a.class_name;
  request.wasm_bytes = std::move(bytes);
  request.deployed_by = a.by;
  request.migrates = a.migrates;
  request.imports = a.imports;
  request.percent = a.rollout;
  auto d = co_await control::DeployVersion(*store, *env, std::move(request), call);
  if (!d.ok()) {
    if (d.code() == Code::kNotFound) {
      co_return Fail(NotFound(d.status().message() + " (create it with `wasmkeep tenant add " + a.tenant + "`)"));
    }
    co_return Fail(d.status());
  }
  const control::VersionRecord& v = d->version;
  const control::Rollout& r = d->rollout;
  if (a.json) {
    nlohmann::json j = {{"tenant", a.tenant},
                        {"class", a.class_name},
                        {"version", v.number},
                        {"module_sha256", v.module.hex},
                        {"size", v.size_bytes},
                        {"deployed_at_ms", ToUnixMs(v.deployed_at)},
                        {"deployed_by", v.deployed_by},
                        {"migrates", v.migrates},
                        {"stable", r.stable},
                        {"candidate", r.candidate},
                        {"percent", r.percent}};
    std::printf("%s\n", j.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("deployed %s/%s version %u: module sha256 %s (%llu bytes)\n", a.tenant.c_str(), a.class_name.c_str(),
              v.number, v.module.hex.c_str(), static_cast<unsigned long long>(v.size_bytes));
  if (r.stable == v.number) {
    std::printf("every actor of the class runs it, within a second and one event of the class on its node\n");
  } else if (r.candidate == v.number) {
    std::printf("rolled out to %u%% of the actors (version %u stays for the rest); raise it with "
                "`wasmkeep class rollout %s/%s %u PERCENT`\n",
                r.percent, r.stable, a.tenant.c_str(), a.class_name.c_str(), v.number);
  } else {
    std::printf("run by no actor yet: start it with `wasmkeep class rollout %s/%s %u PERCENT`\n", a.tenant.c_str(),
                a.class_name.c_str(), v.number);
  }
  if (v.migrates) {
    std::printf("it exports wk_on_upgrade: each actor's state is converted once, before its first event on it; a "
                "rollback leaves converted actors on it unless it is marked broken (`wasmkeep class broken`)\n");
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
  ClassArgs args = a;
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
    args.migrates = (*module)->HasExport(actor::kUpgradeExport);
    auto info = engine::ReadModuleInfo(wasm);
    if (!info.ok()) return Fail(InvalidArgument(a.file + ": " + info.status().message()));
    for (const engine::Import& i : info->imports) {
      if (i.module == actor::kAbiModule) args.imports.push_back(i.name);
    }
  }
  if (args.by.empty()) args.by = DefaultDeployer();
  if (Status s = control::ValidateDeployer(args.by); !s.ok()) return Fail(InvalidArgument("--by: " + s.message()));
  if (args.rollout && *args.rollout > 100) {
    return Fail(InvalidArgument("--rollout " + std::to_string(*args.rollout) + " is not a percentage (0..100)"));
  }
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(Deploy(store->get(), &env, args, std::move(bytes), *call));
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

// TENANT/CLASS, checked.
Result<std::pair<std::string, std::string>> ParseClassRef(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos) {
    return InvalidArgument("expected TENANT/CLASS, got '" + text.substr(0, 100) + "'");
  }
  std::pair<std::string, std::string> out{text.substr(0, slash), text.substr(slash + 1)};
  if (Status s = control::ValidateTenantName(out.first); !s.ok()) return s;
  if (Status s = control::ValidateClassName(out.second); !s.ok()) return s;
  return out;
}

nlohmann::json RolloutJson(const control::Rollout& r) {
  nlohmann::json pins = nlohmann::json::object();
  for (const auto& [name, v] : r.pins) pins[name] = v;
  nlohmann::json broken = nlohmann::json::object();
  for (const auto& [v, run] : r.broken) broken[std::to_string(v)] = run == 0 ? r.stable : run;
  nlohmann::json failures = nlohmann::json::object();
  for (const auto& [v, n] : r.failures) failures[std::to_string(v)] = n;
  nlohmann::json j = {{"revision", r.revision}, {"stable", r.stable},      {"candidate", r.candidate},
                      {"percent", r.percent},   {"paused", r.paused},      {"failure_limit", r.failure_limit},
                      {"failures", failures},   {"pins", pins},            {"broken", broken},
                      {"updated_at_ms", ToUnixMs(r.updated_at)}};
  if (r.paused) j["paused_reason"] = r.paused_reason;
  return j;
}

void PrintRollout(const control::Rollout& r) {
  std::printf("stable %u", r.stable);
  if (r.candidate != 0) std::printf(", candidate %u at %u%%", r.candidate, r.percent);
  std::printf(" (rollout revision %llu, changed %s)\n", static_cast<unsigned long long>(r.revision),
              IsoUtc(r.updated_at).c_str());
  if (r.paused) std::printf("PAUSED: %s (resume with `wasmkeep class rollout ... VERSION PERCENT`)\n", r.paused_reason.c_str());
  for (const auto& [v, n] : r.failures) {
    std::printf("failed migrations to version %u: %llu (limit %u)\n", v, static_cast<unsigned long long>(n),
                r.failure_limit);
  }
  for (const auto& [name, v] : r.pins) std::printf("pinned: %s runs version %u\n", name.c_str(), v);
  for (const auto& [v, run] : r.broken) {
    std::printf("broken: version %u (its actors run version %u on the state it left)\n", v, run == 0 ? r.stable : run);
  }
}

Task<int> Versions(ObjectStore* store, std::string tenant, std::string class_name, bool json, CallOptions call) {
  auto versions = co_await control::ListVersions(*store, tenant, class_name, call);
  if (!versions.ok()) co_return Fail(versions.status());
  auto rollout = co_await control::ReadRollout(*store, tenant, class_name, call);
  if (!rollout.ok()) co_return Fail(rollout.status());
  if (versions->empty() && !rollout->has_value()) {
    auto current = co_await control::CurrentClass(*store, tenant, class_name, call);
    if (!current.ok()) co_return Fail(current.status());
    if (!current->has_value()) co_return Fail(NotFound("no class " + tenant + "/" + class_name + " is deployed"));
    std::printf("%s/%s was deployed before class versions: its module %s runs as version 1; the next deploy numbers "
                "it\n",
                tenant.c_str(), class_name.c_str(), (*current)->module.hex.c_str());
    co_return kExitOk;
  }
  if (json) {
    nlohmann::json out = {{"tenant", tenant}, {"class", class_name}, {"versions", nlohmann::json::array()}};
    for (const auto& v : *versions) {
      out["versions"].push_back({{"version", v.number},
                                 {"module_sha256", v.module.hex},
                                 {"size", v.size_bytes},
                                 {"deployed_at_ms", ToUnixMs(v.deployed_at)},
                                 {"deployed_by", v.deployed_by},
                                 {"migrates", v.migrates},
                                 {"imports", v.imports}});
    }
    if (rollout->has_value()) out["rollout"] = RolloutJson(**rollout);
    std::printf("%s\n", out.dump(2).c_str());
    co_return kExitOk;
  }
  std::printf("%-8s %-21s %-24s %-9s %-10s %s\n", "VERSION", "DEPLOYED", "BY", "MIGRATES", "SIZE", "MODULE (SHA-256)");
  for (const auto& v : *versions) {
    std::printf("%-8u %-21s %-24s %-9s %-10llu %s\n", v.number, IsoUtc(v.deployed_at).c_str(), v.deployed_by.c_str(),
                v.migrates ? "yes" : "no", static_cast<unsigned long long>(v.size_bytes), v.module.hex.c_str());
  }
  if (rollout->has_value()) PrintRollout(**rollout);
  co_return kExitOk;
}

struct RolloutArgs {
  std::string target;                 // TENANT/CLASS
  std::vector<std::string> positional;  // VERSION PERCENT
  std::vector<std::string> pins;      // NAME=VERSION
  std::vector<std::string> unpins;    // NAME
  std::uint32_t run = 0;              // broken --run
  bool clear = false;                 // broken --clear
  std::string reason;                 // pause --reason
  bool json = false;
};

Task<int> ChangeRollout(ObjectStore* store, RealEnv* env, std::string tenant, std::string class_name,
                        std::vector<control::RolloutChange> changes, bool json, CallOptions call) {
  Result<control::Rollout> r = NotFound("no change");
  for (auto& change : changes) {
    r = co_await control::UpdateRollout(*store, *env, tenant, class_name, std::move(change), call);
    if (!r.ok()) co_return Fail(r.status());
  }
  if (json) {
    std::printf("%s\n", RolloutJson(*r).dump(2).c_str());
  } else {
    std::printf("%s/%s: ", tenant.c_str(), class_name.c_str());
    PrintRollout(*r);
    std::printf("each node applies it within a second and one event of the class there\n");
  }
  co_return kExitOk;
}

Result<std::uint32_t> ParseNumber(const std::string& text, std::string_view what, std::uint32_t max) {
  std::uint64_t n = 0;
  if (text.empty() || text.size() > 10) return InvalidArgument(std::string(what) + " '" + text.substr(0, 20) + "' is not a number");
  for (char c : text) {
    if (c < '0' || c > '9') return InvalidArgument(std::string(what) + " '" + text.substr(0, 20) + "' is not a number");
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n > max) return InvalidArgument(std::string(what) + " " + text + " is over " + std::to_string(max));
  return static_cast<std::uint32_t>(n);
}

// A pin's actor: NAME, or TENANT/CLASS/NAME of this class.
Result<std::string> PinnedName(const std::string& text, const std::string& tenant, const std::string& class_name) {
  if (text.find('/') == std::string::npos) return text;
  auto id = ParseActorId(text);
  if (!id.ok()) return id.status();
  if (id->tenant != tenant || id->class_name != class_name) {
    return InvalidArgument("--pin " + text + ": not an actor of " + tenant + "/" + class_name);
  }
  return id->name;
}

// The checks that need the version's record before a rollout names it: its host calls.
Task<Status> CheckVersionRunsHere(ObjectStore* store, std::string tenant, std::string class_name,
                                  control::VersionNumber v, CallOptions call) {
  auto record = co_await control::ReadVersion(*store, tenant, class_name, v, call);
  if (!record.ok()) co_return record.status();
  co_return CheckImports(record->imports, "version " + std::to_string(v) + " of " + tenant + "/" + class_name);
}

Task<int> Rollout(ObjectStore* store, RealEnv* env, std::string tenant, std::string class_name, RolloutArgs a,
                  CallOptions call) {
  std::vector<control::RolloutChange> changes;
  if (!a.positional.empty()) {
    if (a.positional.size() != 2) co_return Fail(InvalidArgument("expected VERSION PERCENT after TENANT/CLASS"));
    auto v = ParseNumber(a.positional[0], "VERSION", control::kMaxVersion);
    if (!v.ok()) co_return Fail(v.status());
    auto percent = ParseNumber(a.positional[1], "PERCENT", 100);
    if (!percent.ok()) co_return Fail(percent.status());
    if (*percent > 0) {
      if (Status s = co_await CheckVersionRunsHere(store, tenant, class_name, *v, call); !s.ok()) co_return Fail(s);
    }
    changes.push_back(control::SetShare(*v, *percent));
  }
  for (const std::string& pin : a.pins) {
    const auto eq = pin.find('=');
    if (eq == std::string::npos) co_return Fail(InvalidArgument("--pin '" + pin.substr(0, 100) + "': expected NAME=VERSION"));
    auto v = ParseNumber(pin.substr(eq + 1), "--pin's VERSION", control::kMaxVersion);
    if (!v.ok()) co_return Fail(v.status());
    if (Status s = co_await CheckVersionRunsHere(store, tenant, class_name, *v, call); !s.ok()) co_return Fail(s);
    auto name = PinnedName(pin.substr(0, eq), tenant, class_name);
    if (!name.ok()) co_return Fail(name.status());
    changes.push_back(control::Pin(*name, *v));
  }
  for (const std::string& unpin : a.unpins) {
    auto name = PinnedName(unpin, tenant, class_name);
    if (!name.ok()) co_return Fail(name.status());
    changes.push_back(control::Unpin(*name));
  }
  if (changes.empty()) co_return Fail(InvalidArgument("nothing to change: give VERSION PERCENT, --pin or --unpin"));
  co_return co_await ChangeRollout(store, env, tenant, class_name, std::move(changes), a.json, call);
}

// Runs `body` against the bucket for TENANT/CLASS.
int WithClass(const GlobalOptions& g, const std::string& target,
              const std::function<Task<int>(ObjectStore*, RealEnv*, std::string, std::string, CallOptions)>& body) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  auto ref = ParseClassRef(target);
  if (!ref.ok()) return Fail(ref.status());
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(body(store->get(), &env, ref->first, ref->second, *call));
}

}  // namespace

void AddClassCommands(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto deploy_args = std::make_shared<ClassArgs>();
  CLI::App* deploy = app.add_subcommand("deploy", "Check a module and deploy it as the next version of a tenant's class");
  deploy->add_option("--tenant", deploy_args->tenant, "The tenant (it must exist: `wasmkeep tenant add`)")->required();
  deploy->add_option("--class", deploy_args->class_name,
                     "The class: 1-63 of a-z, 0-9, '_', '-', starting with a letter or digit")
      ->required();
  deploy->add_option("file", deploy_args->file, "The module (.wasm)")->required();
  deploy->add_flag("--json", deploy_args->json, "Print the new version as JSON");
  deploy->add_option("--rollout", deploy_args->rollout,
                     "Run the new version on this percentage of the class's actors only (0-100; default 100: all)");
  deploy->add_option("--by", deploy_args->by, "Who deploys, as recorded with the version (default $USER@host)");
  deploy->callback([&globals, deploy_args, result] { *result = RunDeploy(globals, *deploy_args); });

  auto list_args = std::make_shared<ClassArgs>();
  CLI::App* cls = app.add_subcommand("class", "Deployed classes");
  cls->require_subcommand(1);
  CLI::App* list = cls->add_subcommand("list", "Every deployed class (of one tenant with --tenant) and its current module");
  list->add_option("--tenant", list_args->tenant, "Only this tenant's classes");
  list->add_flag("--json", list_args->json, "Print JSON");
  list->callback([&globals, list_args, result] { *result = RunList(globals, *list_args); });

  // Versions and their rollout (docs/tenants.md, "Deploying"; docs/cli.md).
  auto versions_args = std::make_shared<RolloutArgs>();
  CLI::App* versions = cls->add_subcommand("versions", "A class's versions (who deployed each, when, its digest, "
                                                        "whether it migrates state) and its rollout");
  versions->add_option("class", versions_args->target, "TENANT/CLASS")->required();
  versions->add_flag("--json", versions_args->json, "Print JSON");
  versions->callback([&globals, versions_args, result] {
    const bool json = versions_args->json;
    *result = WithClass(globals, versions_args->target,
                        [json](ObjectStore* store, RealEnv*, std::string t, std::string c, CallOptions call) {
                          return Versions(store, std::move(t), std::move(c), json, call);
                        });
  });

  auto rollout_args = std::make_shared<RolloutArgs>();
  CLI::App* rollout = cls->add_subcommand(
      "rollout", "Run VERSION on PERCENT of the class's actors (stable in the actor's name; 100 makes it the stable "
                 "version, 0 ends a candidate's rollout), and pin single actors to a version");
  rollout->add_option("class", rollout_args->target, "TENANT/CLASS")->required();
  rollout->add_option("version_percent", rollout_args->positional, "VERSION PERCENT")->expected(0, 2);
  rollout->add_option("--pin", rollout_args->pins,
                      "NAME=VERSION (or TENANT/CLASS/NAME=VERSION): that actor of the class runs VERSION");
  rollout->add_option("--unpin", rollout_args->unpins, "NAME (or TENANT/CLASS/NAME): the actor follows the rollout again");
  rollout->add_flag("--json", rollout_args->json, "Print the rollout as JSON");
  rollout->callback([&globals, rollout_args, result] {
    RolloutArgs a = *rollout_args;
    *result = WithClass(globals, a.target, [a](ObjectStore* store, RealEnv* env, std::string t, std::string c, CallOptions call) {
      return Rollout(store, env, std::move(t), std::move(c), a, call);
    });
  });

  auto broken_args = std::make_shared<RolloutArgs>();
  CLI::App* broken = cls->add_subcommand(
      "broken", "Mark VERSION broken: the actors whose state it committed run --run VERSION (default: the stable one) "
                "on that state, and the rollout stops naming it");
  broken->add_option("class", broken_args->target, "TENANT/CLASS")->required();
  broken->add_option("version", broken_args->positional, "VERSION")->expected(1)->required();
  broken->add_option("--run", broken_args->run, "The version its actors run instead (default: the stable version)");
  broken->add_flag("--clear", broken_args->clear, "Clear the mark: its actors run it again");
  broken->add_flag("--json", broken_args->json, "Print the rollout as JSON");
  broken->callback([&globals, broken_args, result] {
    RolloutArgs a = *broken_args;
    *result = WithClass(globals, a.target, [a](ObjectStore* store, RealEnv* env, std::string t, std::string c,
                                               CallOptions call) -> Task<int> {
      auto v = ParseNumber(a.positional.at(0), "VERSION", control::kMaxVersion);
      if (!v.ok()) co_return Fail(v.status());
      if (a.clear && a.run != 0) co_return Fail(InvalidArgument("--clear and --run: give one"));
      if (!a.clear && a.run != 0) {
        if (Status s = co_await CheckVersionRunsHere(store, t, c, a.run, call); !s.ok()) co_return Fail(s);
      }
      std::vector<control::RolloutChange> changes;
      changes.push_back(a.clear ? control::ClearBroken(*v) : control::MarkBroken(*v, a.run));
      co_return co_await ChangeRollout(store, env, std::move(t), std::move(c), std::move(changes), a.json, call);
    });
  });

  auto pause_args = std::make_shared<RolloutArgs>();
  CLI::App* pause = cls->add_subcommand(
      "pause", "Pause the class's rollout: no actor moves to a newer version (none is migrated) until "
               "`class rollout` sets a share again");
  pause->add_option("class", pause_args->target, "TENANT/CLASS")->required();
  pause->add_option("--reason", pause_args->reason, "Why (shown by `class versions`)")->default_val("paused by an operator");
  pause->add_flag("--json", pause_args->json, "Print the rollout as JSON");
  pause->callback([&globals, pause_args, result] {
    RolloutArgs a = *pause_args;
    *result = WithClass(globals, a.target, [a](ObjectStore* store, RealEnv* env, std::string t, std::string c,
                                               CallOptions call) -> Task<int> {
      std::vector<control::RolloutChange> changes;
      changes.push_back(control::Pause(a.reason));
      co_return co_await ChangeRollout(store, env, std::move(t), std::move(c), std::move(changes), a.json, call);
    });
  });
}

}  // namespace wk::cli
