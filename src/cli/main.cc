// wasmkeep: the command-line entry point. main wires the commands; each lives in its own
// file (bucket_cmd.cc, ...).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/log.h"
#include "base/version.h"
#include "cli/actor_cmd.h"
#include "cli/admin_cmd.h"
#include "cli/bucket_cmd.h"
#include "cli/call_cmd.h"
#include "cli/class_cmd.h"
#include "cli/cluster_cmd.h"
#include "cli/serve_cmd.h"
#include "cli/tenant_cmd.h"

int main(int argc, char** argv) {
  using namespace wk::cli;
  CLI::App app{"WasmKeep: durable WebAssembly actors on your own bucket"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "wasmkeep " + std::string(wk::kVersion));

  GlobalOptions globals;
  app.add_option("--bucket", globals.bucket_url,
                 "Bucket URL: sqlite://DIR, file://DIR, s3://BUCKET?endpoint=URL&region=R or mem:// "
                 "(default: the config file's, else sqlite://./wasmkeep-data)")
      ->envname("WASMKEEP_BUCKET");
  app.add_option("--config", globals.config_path, "TOML config file (docs/configuration.md)")
      ->envname("WASMKEEP_CONFIG");
  app.add_option("--timeout", globals.timeout_seconds, "Per-request deadline in seconds (default 30)");

  int result = kExitOk;
  AddServeCommand(app, globals, &result);
  AddClusterCommand(app, globals, &result);
  AddBucketCommand(app, globals, &result);
  AddActorCommand(app, globals, &result);
  AddTenantCommand(app, globals, &result);
  AddClassCommands(app, globals, &result);
  AddCallCommand(app, globals, &result);
  AddAdminCommand(app, globals, &result);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return result;
}
