// The faults of a scenario run (docs/simulation.md, "Where things live"): the bucket's per-request
// plan (latency, late writes, lost replies, throttling, slow answers; the storage scenario's
// slow segment uploads), and the chaos schedule (kills, partitions, twins, outages, clean
// stops; with actors, drains and deleted heartbeats; with replicas, moves and kills
// mid-upload). Clock skew is the world's (World::slot_skew). Heal() ends every fault.
//
// The serving scenarios (serving.h: routing, move, alarms) have a profile of their own
// (FaultOptions::serving): a milder request plan with slow-bucket periods, and a chaos of
// kill -9, processes frozen past their lease and then thawed (zombies), partitions between
// two nodes or between a node and the bucket, and lost peer replies (PeerFault).
//
// Every draw goes through the world's random source, in the order the schedule runs.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <functional>
#include <map>
#include <string_view>
#include <utility>

#include "sim_peer_network.h"
#include "world.h"

namespace wk::sim {

// The serving profile's chaos step: cumulative percentages of a roll in [0, 100); the rest
// is a slow-bucket period.
struct ServingChaos {
  int kill = 20;        // kill -9, restart 0.5-10 s later
  int freeze = 45;      // frozen for ttl + grace + 2-12 s
  int peer_cut = 65;    // two nodes cannot reach each other for 2-20 s
  int bucket_cut = 85;  // a node cannot reach the bucket for 2-20 s
};

struct FaultOptions {
  bool operator_faults = false;  // drains and deleted heartbeats (the ownership scenario)
  bool storage_faults = false;   // slow segment uploads, moves, kills mid-upload (storage)
  bool serving = false;          // the serving profile (above) instead of the lease one
  // Serving: more late writes where the ownership and storage scenarios put them (owner
  // records 5 %, 2-6 s: unresolved acquires and the resolver; segment PUTs 4 %, 3-20 s:
  // off-chain segments and Late uploads) instead of the profile's 2 %; their lost replies,
  // SlowDown and slow answers as the profile's.
  bool serving_late_records = false;
  ServingChaos serving_chaos;
  // One chaos step every chaos_min..chaos_max.
  Duration chaos_min = std::chrono::seconds(2);
  Duration chaos_max = std::chrono::seconds(12);
};

// What the clients' transport is called on the peer network (serving.h; no node has this
// id): their messages are never cut or lost.
inline constexpr std::string_view kClientNodeId = "client";

class Faults {
 public:
  Faults(World& world, FaultOptions options);

  // The fault plan of one request from a slot's process (World::Hooks::fault).
  OpFault Fault(int slot, const OpInfo& op);
  // Serving: what happens to one message between two nodes (SimPeerNetwork's FaultFn).
  SimPeerNetwork::MessageFault PeerFault(const NodeId& from, const NodeId& to);
  // Every chaos_min..chaos_max of chaos, one chaos step (the serving profile's or the lease one).
  void ScheduleChaos();
  // Storage: every 2-8 s of chaos, one hold of a random node released under its replica.
  void ScheduleMoves();
  // Storage: a segment put sometimes gets its process killed before the reply.
  void MaybeKillMidUpload(int number, const std::string& key);
  // No more faults; every slot without a process restarts.
  void Heal();
  // Kills slot's running process; its supervisor restarts it 0.5 s to restart_max later.
  void Kill(int slot, std::int64_t restart_max_ms);
  // A clean stop of p (ClusterNode::Stop: its holds released, `released` written), reaped
  // and restarted 0.2-10 s later.
  Task<void> StopProcess(Process* p, int slot);

  // A drain reported drained (checker 10 judges it).
  std::function<void(Process& p)> on_drained;

 private:
  OpFault StorageFault(const OpInfo& op);
  OpFault ServingFault(const OpInfo& op);
  void ChaosStep();
  void ServingChaosStep();
  void Thaw(int number);
  Task<void> DrainProcess(Process* p);

  World& w_;
  FaultOptions options_;
  std::vector<MonoTime> partitioned_until_;  // per slot: cut off from the bucket until
  MonoTime outage_until_{};
  // Serving: pairs of nodes cut off from each other, and the slow bucket.
  std::map<std::pair<NodeId, NodeId>, MonoTime> peer_cut_until_;
  MonoTime slow_until_{};
};

}  // namespace wk::sim
