#include "cli/actor_cmd.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "actor/abi.h"
#include "actor/runtime.h"
#include "engine/engine.h"

namespace wk::cli {
namespace {

struct CheckOptions {
  std::string file;
  bool json = false;
};

int RunCheck(const GlobalOptions& globals, const CheckOptions& opts) {
  auto config = LoadConfigFromOptions(globals);
  if (!config.ok()) {
    std::fprintf(stderr, "wasmkeep: %s\n", config.status().ToString().c_str());
    return kExitUsage;
  }
  std::ifstream in(opts.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "wasmkeep: cannot read %s\n", opts.file.c_str());
    return kExitUsage;
  }
  std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  engine::Engine engine;
  auto module = actor::CompileActorModule(engine, bytes, config->actors.limits);
  if (!module.ok()) {
    std::fprintf(stderr, "wasmkeep: %s: %s\n", opts.file.c_str(), module.status().message().c_str());
    return kExitUsage;
  }
  const engine::Module& m = **module;
  std::vector<std::string> imports;
  for (const auto& imp : m.info().imports) imports.push_back(imp.module + "." + imp.name);
  const bool has_alarm = m.HasExport(actor::kAlarmExport);
  const double compile_ms = std::chrono::duration<double, std::milli>(m.compile_time()).count();
  if (opts.json) {
    nlohmann::json j = {{"file", opts.file},         {"bytes", bytes.size()},
                        {"abi", "wasmkeep_v1"},      {"alarm_handler", has_alarm},
                        {"max_memory_bytes", m.max_memory_bytes()},
                        {"compile_ms", compile_ms},  {"imports", imports}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%s: ok (ABI wasmkeep_v1)\n", opts.file.c_str());
    std::printf("  size            %zu bytes\n", bytes.size());
    std::printf("  alarm handler   %s\n", has_alarm ? "yes (wk_on_alarm)" : "no");
    std::printf("  memory maximum  %llu bytes\n", static_cast<unsigned long long>(m.max_memory_bytes()));
    std::printf("  compile time    %.1f ms\n", compile_ms);
    std::printf("  imports         %zu:", imports.size());
    for (const auto& i : imports) std::printf(" %s", i.c_str());
    std::printf("\n");
  }
  return kExitOk;
}

}  // namespace

void AddActorCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  CLI::App* actor = app.add_subcommand("actor", "Work with actor modules (WebAssembly classes)");
  actor->require_subcommand(1);
  auto check = std::make_shared<CheckOptions>();
  CLI::App* c = actor->add_subcommand("check", "Check a module against the ABI and the [actors] limits, and compile it");
  c->add_option("file", check->file, "The module (.wasm)")->required();
  c->add_flag("--json", check->json, "Print the summary as JSON");
  c->callback([&globals, check, result] { *result = RunCheck(globals, *check); });
}

}  // namespace wk::cli
