// The test hooks of `wasmkeep serve` (cli/test_hooks.h), built with WK_TEST_HOOKS=ON. Each
// is logged loudly when set; none exists in a release binary.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/log.h"
#include "cli/test_hooks.h"
#include "cli/testing/debug_writer.h"
#include "store/open_store.h"
#include "store/testing/faulty_store.h"

namespace wk::cli {
namespace {

// WASMKEEP_DEBUG_ACQUIRE=t/c/a,t/c/b: the multi-process ownership tests need a node that
// holds actors without running them (record races the HTTP API cannot stage). Acquires each
// listed actor once the lease is valid, and again after it lost it, every second.
Task<void> HoldActors(RealEnv* env, ClusterNode* node, std::vector<ActorId> actors) {
  while (co_await env->SleepFor(std::chrono::seconds(1))) {
    for (const ActorId& a : actors) {
      if (!node->lease().IsValid() || node->owners().Find(a).IsValid()) continue;
      AcquireResult r = co_await node->owners().Acquire(a);
      if (r.kind == AcquireResult::Kind::kAcquired) {
        WK_LOG_INFO("debug hold acquired",
                    {{"actor", a.ToString()}, {"generation", std::to_string(r.hold.generation().value)}});
      }
    }
  }
}

void SpawnHoldActors(RealEnv* env, ClusterNode* node, std::vector<ActorId> actors) {
  env->Spawn(HoldActors(env, node, std::move(actors)), "debug acquire");
}

std::vector<ActorId> ParseActorList(std::string_view list) {
  std::vector<ActorId> actors;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    auto id = ParseActorId(list.substr(pos, comma - pos));
    if (id.ok()) actors.push_back(*id);
    pos = comma + 1;
  }
  return actors;
}

// WASMKEEP_DEBUG_CAPTURE_FORWARDED=DIR: each request the peer listener gets is written to
// DIR/<n>.http as it arrived ("METHOD TARGET", one "Name: value" line per header, an empty
// line, the body), so a cluster test can check what crossed between nodes and replay it.
struct ForwardCapture {
  std::string dir;
  std::uint64_t count = 0;
  void Write(const ServerRequest& r) {
    std::ofstream out(dir + "/" + std::to_string(++count) + ".http", std::ios::binary);
    out << r.method << ' ' << r.target << '\n';
    for (const auto& [n, v] : r.headers) out << n << ": " << v << '\n';
    out << '\n' << r.body;
  }
};

}  // namespace

bool TestHooksBuilt() { return true; }

Status CheckTestHooksAvailable() { return Status::Ok(); }

// WASMKEEP_DEBUG_FAULTS: bucket faults (store/testing/faulty_store.h).
Result<std::unique_ptr<ObjectStore>> WrapBucketForTests(RealEnv& env, std::unique_ptr<ObjectStore> bucket) {
  auto faults = ProcessGetEnv("WASMKEEP_DEBUG_FAULTS");
  if (!faults || faults->empty()) return bucket;
  auto spec = ParseFaultSpec(*faults);
  if (!spec.ok()) return InvalidArgument("WASMKEEP_DEBUG_FAULTS: " + spec.status().message());
  WK_LOG_WARN("injecting bucket faults (WASMKEEP_DEBUG_FAULTS); for tests only", {{"faults", *faults}});
  return std::unique_ptr<ObjectStore>(std::make_unique<FaultyStore>(env, std::move(bucket), *spec));
}

Status ApplyTestHooks(NodeOptions& options) {
  // WASMKEEP_DEBUG_PEER_KEY_FILE: the peer listener's identity around a key the test made,
  // so the test can present it.
  if (auto key_file = ProcessGetEnv("WASMKEEP_DEBUG_PEER_KEY_FILE"); key_file && !key_file->empty()) {
    std::ifstream in(*key_file, std::ios::binary);
    if (!in) return Fatal("WASMKEEP_DEBUG_PEER_KEY_FILE: cannot read " + *key_file);
    std::stringstream pem;
    pem << in.rdbuf();
    WK_LOG_WARN("WASMKEEP_DEBUG_PEER_KEY_FILE: the peer TLS key comes from a file, for tests only",
                {{"file", *key_file}});
    auto identity = TlsIdentity::FromPrivateKeyPem(pem.str(), "wasmkeep node " + options.node_id.str());
    if (!identity.ok()) return identity.status();
    options.peer_identity = std::move(*identity);
  }
  if (auto dir = ProcessGetEnv("WASMKEEP_DEBUG_CAPTURE_FORWARDED"); dir && !dir->empty()) {
    WK_LOG_WARN("WASMKEEP_DEBUG_CAPTURE_FORWARDED: writing every peer request to files, for tests only",
                {{"dir", *dir}});
    auto capture = std::make_shared<ForwardCapture>();
    capture->dir = *dir;
    options.on_peer_request = [capture](const ServerRequest& request) { capture->Write(request); };
  }
  return Status::Ok();
}

Status StartTestHooks(Node& node, const replica::ReplicaOptions& storage) {
  if (auto list = ProcessGetEnv("WASMKEEP_DEBUG_ACQUIRE"); list && !list->empty()) {
    WK_LOG_WARN("WASMKEEP_DEBUG_ACQUIRE: holding actors for tests", {{"actors", *list}});
    SpawnHoldActors(&node.env(), &node.cluster(), ParseActorList(*list));
  }
  // WASMKEEP_DEBUG_WRITER (testing/debug_writer.h): actors this node writes to through the
  // replica directly, without the actor API.
  if (auto actors = ProcessGetEnv("WASMKEEP_DEBUG_WRITER"); actors && !actors->empty()) {
    auto parsed = ParseDebugWriter(*actors, ProcessGetEnv("WASMKEEP_DEBUG_WRITER_OPTIONS").value_or(""), storage);
    if (!parsed.ok()) return parsed.status();
    WK_LOG_WARN("WASMKEEP_DEBUG_WRITER: writing to actors through the replica, for tests only", {{"actors", *actors}});
    StartDebugWriters(&node.env(), &node.cluster(), &node.store(), &node.replica_totals(), node.identity().node_id,
                      std::make_shared<const DebugWriterOptions>(std::move(parsed).value()));
  }
  return Status::Ok();
}

}  // namespace wk::cli
