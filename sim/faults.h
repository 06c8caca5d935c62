// The faults of a scenario run (docs/simulation.md, "Fault model"): the bucket's per-request
// plan (latency, late writes, lost replies, throttling, slow answers; the storage scenario's
// slow segment uploads), and the chaos schedule (kills, partitions, twins, outages, clean
// stops; with actors, drains and deleted heartbeats; with replicas, moves and kills
// mid-upload). Clock skew is the world's (World::slot_skew). Heal() ends every fault.
//
// Every draw goes through the world's random source, in the order the schedule runs.
//
// Threading: single-threaded, like everything on a SimWorld.
#pragma once

#include <functional>

#include "world.h"

namespace wk::sim {

struct FaultOptions {
  bool operator_faults = false;  // drains and deleted heartbeats (the ownership scenario)
  bool storage_faults = false;   // slow segment uploads, moves, kills mid-upload (storage)
};

class Faults {
 public:
  Faults(World& world, FaultOptions options);

  // The fault plan of one request from a slot's process (World::Hooks::fault).
  OpFault Fault(int slot, const OpInfo& op);
  // Every 2-12 s of chaos, one ChaosStep.
  void ScheduleChaos();
  // Storage: every 2-8 s of chaos, one hold of a random node released under its replica.
  void ScheduleMoves();
  // Storage: a segment put sometimes gets its process killed before the reply.
  void MaybeKillMidUpload(int number, const std::string& key);
  // No more faults; every slot without a process restarts.
  void Heal();

  // A drain reported drained (checker 10 judges it).
  std::function<void(Process& p)> on_drained;

 private:
  OpFault StorageFault(const OpInfo& op);
  void ChaosStep();
  Task<void> DrainProcess(Process* p);
  Task<void> StopProcess(Process* p, int slot);

  World& w_;
  FaultOptions options_;
  MonoTime partitioned_until_[kSlots]{};
  MonoTime outage_until_{};
};

}  // namespace wk::sim
