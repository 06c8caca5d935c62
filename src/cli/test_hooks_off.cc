// A build without test hooks (WK_TEST_HOOKS=OFF, the release preset): see test_hooks.h.
#include <unistd.h>

#include <string_view>

#include "cli/test_hooks.h"

namespace wk::cli {

bool TestHooksBuilt() { return false; }

Status CheckTestHooksAvailable() {
  // The hooks' names are not in this binary: any variable with their common prefix is one.
  constexpr std::string_view kPrefix = "WASMKEEP_DEBUG_";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with(kPrefix)) {
      return InvalidArgument(std::string(entry.substr(0, entry.find('='))) +
                             ": this build has no test hooks (built with WK_TEST_HOOKS=OFF)");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<ObjectStore>> WrapBucketForTests(RealEnv&, std::unique_ptr<ObjectStore> bucket) {
  return bucket;
}

Status ApplyTestHooks(NodeOptions&) { return Status::Ok(); }

Status StartTestHooks(Node&, const replica::ReplicaOptions&) { return Status::Ok(); }

}  // namespace wk::cli
