// OldFormats: objects an earlier WasmKeep left in the bucket (ADR 0020 §1 and §6,
// docs/node-lease.md "Upgrading from per-actor leases"), planted before the nodes start, as
// a piece the `combined` scenario adds (docs/simulation.md, "combined"):
//   - two old-format heartbeats, nodes/old-1 (`wasmkeep-node 1`) and nodes/old-2
//     (`wasmkeep-node 2`), written long ago (so the start guard lets every start through);
//   - t/list/stranded, whose ownership record names old-1: an old-format heartbeat is never
//     free, so no node may ever take it;
//   - t/list/legacy, with no ownership record and a live old per-actor lease
//     (`wasmkeep-lease 1`, expiring 20-60 s into the run, generation 3-9): no node may take
//     it before the lease's expires_at + grace (less the clock skew bound), and then only
//     above the lease's generation.
// A client reads both actors through random nodes all run long.
//
// Checkers (violations name the actor):
//   O1 (online) no ownership record of the stranded actor lands, and it never answers 200;
//   O2 (online) the legacy actor's first record lands after the bound, above the old
//      generation;
//   O3 (after healing) the legacy actor answers a read through a healthy node.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serving.h"
#include "world.h"

namespace wk::sim {

class OldFormats {
 public:
  // Plants the objects in world's bucket. REQUIRES: world and cluster outlive this; the
  // actors' class ("list") is served by the cluster.
  OldFormats(World& world, ServingCluster& cluster);

  static std::vector<ActorId> Actors();
  void Start();
  // World::Hooks::on_landed: O1 and O2.
  void OnLanded(const std::string& key, const std::string& body);
  // After healing (world.finished set): O3.
  void FinalChecks();

 private:
  Task<void> Client();
  Task<int> Read(const ActorId& actor, int slot);

  World& w_;
  ServingCluster& cluster_;
  std::uint64_t old_generation_ = 0;
  std::int64_t expires_at_ms_ = 0;  // unix ms
};

}  // namespace wk::sim
