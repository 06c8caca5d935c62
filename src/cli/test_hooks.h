// The test hooks of `wasmkeep serve`: WASMKEEP_DEBUG_* environment variables that let the
// multi-process tests (tests/cluster/) stage what the HTTP API cannot — bucket faults, holds
// kept without running actors, writes straight through the replica, a captured peer
// listener, a peer TLS key the test knows (docs/DEVELOPING.md, "Test hooks").
//
// Built only with WK_TEST_HOOKS=ON (every preset but `release`): testing/test_hooks.cc.
// Without them (test_hooks_off.cc) the binary contains none of the hooks and refuses to
// start when the environment asks for one, rather than run without what a test expects.
//
// Threading: the RealEnv's loop thread (StartBeside's tasks run there).
#pragma once

#include <memory>

#include "base/status.h"
#include "env/real_env.h"
#include "replica/replica.h"
#include "server/node.h"
#include "store/object_store.h"

namespace wk::cli {

// Whether this binary was built with the hooks.
bool TestHooksBuilt();
// Refuses (kInvalidArgument naming the variable) a hook set in a build without hooks.
Status CheckTestHooksAvailable();
// The bucket as the hooks want it (bucket faults); otherwise `bucket` itself.
Result<std::unique_ptr<ObjectStore>> WrapBucketForTests(RealEnv& env, std::unique_ptr<ObjectStore> bucket);
// Hooks that shape the node before it starts (its peer TLS key, the capture of peer requests).
Status ApplyTestHooks(NodeOptions& options);
// Hooks that run beside a started node (holding actors, writing through the replica).
// `storage`: the config's [storage], the writers' defaults.
Status StartTestHooks(Node& node, const replica::ReplicaOptions& storage);

}  // namespace wk::cli
