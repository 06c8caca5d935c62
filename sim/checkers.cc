#include "checkers.h"

#include "cluster/owner_record.h"
#include "replica/format.h"
#include "replica/restore.h"

namespace wk::sim {

Checkers::Checkers(World& world, CheckerOptions options) : w_(world), options_(options) {}

World::Stages Connect(World& world, Faults& faults, Checkers& checkers) {
  world.hooks.fault = [&faults](int slot, const OpInfo& op) { return faults.Fault(slot, op); };
  world.hooks.on_send = [&checkers](int number, const std::string& key, const std::string& body) {
    checkers.OnSend(number, key, body);
  };
  world.hooks.on_landed = [&checkers](const std::string& key, const std::string& body) { checkers.OnLanded(key, body); };
  faults.on_drained = [&checkers](Process& p) { checkers.OnDrained(p); };
  World::Stages stages;
  stages.begin = [&faults] { faults.ScheduleChaos(); };
  stages.heal = [&faults] { faults.Heal(); };
  stages.every_step = [&checkers] { checkers.CheckEveryStep(); };
  stages.final_checks = [&checkers] { checkers.FinalChecks(); };
  return stages;
}

MonoTime Checkers::SendTrue(const InstanceToken& instance, WallTime written_at) const {
  auto it = w_.instance_skew.find(instance);
  const Duration skew = it == w_.instance_skew.end() ? Duration(0) : it->second;
  return MonoTime(milliseconds(ToUnixMs(written_at) - kOriginMs)) - skew;
}

void Checkers::OnSend(int number, const std::string& key, const std::string& body) {
  auto it = w_.processes().find(number);
  if (it == w_.processes().end()) return;
  Process& p = *it->second;
  // 5. Lost means gone.
  if (p.end && p.end->reason != LeaseEndReason::kStopped) {
    w_.Violation("p" + std::to_string(number) + " sent a write to " + key + " after its lease was lost");
  }
  // H4. Only a holder writes an actor's log: a segment of generation g is sent by a process
  // whose hold of the actor at g is valid (a restore or fork writes under a hold of its own).
  if (options_.holders && key.starts_with(replica::kWalPrefix) && p.node) {
    const std::size_t slash = key.rfind('/');
    const std::string path = key.substr(replica::kWalPrefix.size(), slash - replica::kWalPrefix.size());
    const std::size_t a = path.find('/');
    const std::size_t b = a == std::string::npos ? a : path.find('/', a + 1);
    auto position = replica::ParseKeyPosition(key.substr(0, slash + 1), key);
    if (b != std::string::npos && position.ok()) {
      const ActorId actor{path.substr(0, a), path.substr(a + 1, b - a - 1), path.substr(b + 1)};
      const HoldView hold = p.node->owners().Find(actor);
      if (hold.generation() != position->generation || !hold.IsValid()) {
        w_.Violation("H4: p" + std::to_string(number) + " sent " + key + " without a valid hold of " + actor.name +
                     " at generation " + std::to_string(position->generation.value) +
                     (hold.empty() ? " (it holds none)"
                                   : " (its hold: generation " + std::to_string(hold.generation().value) +
                                         (hold.IsValid() ? ", valid)" : ", not valid)")));
      }
    }
  }
  auto obj = DecodeNodeObject(body);
  if (!obj.ok() || !std::holds_alternative<NodeRecord>(*obj)) return;
  const auto& r = std::get<NodeRecord>(*obj);
  if (r.state == LeaseState::kFenced) {
    fence_sends_[body] = FenceSend{number, w_.Now(), p.env()->WallNow(), p.node->lease().IsValid(),
                                   p.node->lease().valid_since()};
  }
}

void Checkers::OnLanded(const std::string& key, const std::string& body) {
  if (options_.logs && OnLogLanded(key)) return;
  RunResult& result = w_.result();
  if (key.starts_with(kOwnersPrefix)) {
    auto rec = DecodeOwnerRecord(body);
    if (!rec.ok()) {
      w_.Violation(key + " written corrupt");
      return;
    }
    if (rec->names_nobody()) return;
    ++result.acquisitions;
    // 9. Never one generation for two holds.
    auto& last = last_generation_[key];
    if (rec->generation <= last) {
      w_.Violation(key + " acquired at generation " + std::to_string(rec->generation.value) + " by " + rec->node_id.str() +
                   "/" + rec->instance.str() + ", not above " + std::to_string(last.value) + ": one generation for two holds");
    }
    last = std::max(last, rec->generation);
    return;
  }
  if (!options_.leases || !key.starts_with(kNodesPrefix)) return;
  auto obj = DecodeNodeObject(body);
  if (!obj.ok() || !std::holds_alternative<NodeRecord>(*obj)) return;
  const auto& r = std::get<NodeRecord>(*obj);
  const MonoTime bound = SendTrue(r.instance, r.written_at) + w_.timing().validity();
  if (r.state == LeaseState::kLive) {
    ++result.lease_writes;
    auto& b = landed_bound_[r.instance];
    b = std::max(b, bound);
    // A live write of this instance that lands after a fence naming it: conditioned on a
    // version read after the fence, so written by a fresh start check (ADR §1: a first
    // write whose outcome was unknown re-reads, then goes back to the check).
    if (fence_bound_.count(r.instance)) renewed_after_fence_.insert(r.instance);
    return;
  }
  w_.Trace(key + " " + std::string(LeaseStateName(r.state)) + " instance " + r.instance.str() + " written_at " +
           std::to_string(ToUnixMs(r.written_at) - kOriginMs));
  if (r.state != LeaseState::kFenced) return;
  ++result.fences;
  auto f = fence_bound_.find(r.instance);
  if (f == fence_bound_.end() || bound < f->second) fence_bound_[r.instance] = bound;
  auto sent = fence_sends_.find(body);
  if (sent == fence_sends_.end()) {
    w_.Violation("a fence of " + key + " landed that no node sent");
    return;
  }
  const FenceSend& s = sent->second;
  const std::string who = "p" + std::to_string(s.sender);
  // 3. No node treats another as free earlier than written_at + ttl + grace on its clock.
  if (s.sender_wall < r.written_at + w_.timing().takeover_after()) {
    w_.Violation(who + " fenced " + key + " at its wall " + std::to_string(ToUnixMs(s.sender_wall) - kOriginMs) +
                 "ms, before written_at + ttl + grace");
  }
  if (!s.sender_valid) w_.Violation(who + " fenced " + key + " without a valid lease of its own");
  // 4. Judged only from a full watch after its own first acknowledged write after a lapse.
  if (!s.sender_valid_since || s.sent - *s.sender_valid_since < w_.timing().fence_watch()) {
    w_.Violation(who + " fenced " + key +
                 " less than a lease period plus an attempt timeout after its own lease became valid");
  }
  // 2. The fenced process must already have stopped acting.
  CheckProcessBound(r.instance);
}

// 1. Validity bound and 2. fence bound, for one instance.
void Checkers::CheckProcessBound(const InstanceToken& instance) {
  auto pn = w_.instance_process.find(instance);
  if (pn == w_.instance_process.end()) return;
  auto it = w_.processes().find(pn->second);
  if (it == w_.processes().end() || !it->second->running || !it->second->node) return;
  const NodeLease& lease = it->second->node->lease();
  if (!lease.IsValid()) return;
  const std::string who = "p" + std::to_string(pn->second);
  auto landed = landed_bound_.find(instance);
  if (landed == landed_bound_.end() || lease.valid_until() > landed->second + kTolerance) {
    w_.Violation(who + " is valid until " + std::to_string(World::Ms(lease.valid_until().time_since_epoch())) +
                 "ms, past send + ttl - safety of its last landed write");
  }
  auto fenced = fence_bound_.find(instance);
  if (fenced != fence_bound_.end() && lease.valid_until() > fenced->second + kTolerance &&
      !renewed_after_fence_.count(instance)) {
    w_.Violation(who + " is valid until " + std::to_string(World::Ms(lease.valid_until().time_since_epoch())) +
                 "ms, past the bound of the fence that names it (" +
                 std::to_string(World::Ms(fenced->second.time_since_epoch())) + "ms)");
  }
}

void Checkers::CheckEveryStep() {
  if (options_.owners && options_.owners_from_holds) {
    // 8, from each process's holds (the same judgement, in time linear in the holds).
    std::map<ActorId, int> owners;
    for (auto& [n, p] : w_.processes()) {
      if (!p->running || !p->node) continue;
      for (const ActorId& a : p->node->owners().HeldActors()) {
        if (p->node->owners().Find(a).IsValid() && ++owners[a] > 1) {
          w_.Violation("two owners act for " + a.ToString() + " (one is p" + std::to_string(n) + ")");
        }
      }
    }
  } else if (options_.owners) {
    // 8. Never two owners acting for one actor (validity in true time: the simulator's
    // monotonic clock is true time, and each node measures its validity on it).
    std::vector<int> owners(static_cast<std::size_t>(w_.actors()), 0);
    for (auto& [n, p] : w_.processes()) {
      if (!p->running || !p->node) continue;
      for (std::int64_t i = 0; i < w_.actors(); ++i) {
        const ActorId& a = w_.ActorAt(i);
        if (p->node->owners().Find(a).IsValid() && ++owners[static_cast<std::size_t>(i)] > 1) {
          w_.Violation("two owners act for " + a.ToString() + " (one is p" + std::to_string(n) + ")");
        }
      }
    }
  }
  if (!options_.leases) return;
  // 6. One holder per id.
  std::map<NodeId, int> valid_per_id;
  for (auto& [n, p] : w_.processes()) {
    if (!p->running || !p->node) continue;
    const NodeLease& lease = p->node->lease();
    w_.result().adoptions = std::max<std::uint64_t>(w_.result().adoptions, lease.stats().adoptions);
    if (!lease.IsValid()) continue;
    if (++valid_per_id[p->node_id] > 1) w_.Violation("two processes hold a valid lease for " + p->node_id.str());
    CheckProcessBound(p->instance);
  }
}

void Checkers::LivenessFailure(const std::string& what) {
  if (options_.liveness_report) {
    ++liveness_failures_;
    if (liveness_samples_.size() < 3) liveness_samples_.push_back(what);
  }
  if (options_.liveness_violations) w_.Violation(what);
}

// 7. Liveness after healing.
void Checkers::FinalChecks() {
  if (!options_.leases) return;
  const int slots = w_.slots();
  std::vector<Process*> primary(static_cast<std::size_t>(slots));
  for (int s = 0; s < slots; ++s) primary[static_cast<std::size_t>(s)] = w_.Primary(s);
  for (int s = 0; s < slots; ++s) {
    Process* p = primary[static_cast<std::size_t>(s)];
    const NodeId id = SlotNodeId(s);
    if (p == nullptr) {
      LivenessFailure(id.str() + " has no running process after " + std::to_string(World::Ms(w_.heal_for)) +
                      "ms without faults");
      continue;
    }
    if (!p->node->lease().IsValid()) {
      LivenessFailure("p" + std::to_string(p->number) + " (" + id.str() + ") is not valid after healing");
    }
    auto obj = w_.bucket()->objects().find(NodeKey(id));
    if (obj == w_.bucket()->objects().end()) {
      LivenessFailure(NodeKey(id) + " is missing after healing");
      continue;
    }
    auto decoded = DecodeNodeObject(obj->second.body);
    const auto* r = decoded.ok() ? std::get_if<NodeRecord>(&*decoded) : nullptr;
    if (!r || r->state != LeaseState::kLive || r->instance != p->instance) {
      LivenessFailure(NodeKey(id) + " does not name the running process p" + std::to_string(p->number) + " live");
    }
  }
  // 7b. The views converge: every node that has run a while sees every other that has,
  // live under its running instance (the listing read what changed; docs/node-lease.md).
  // A process started less than ttl + grace + three periods ago may not be listed yet.
  const Duration settled = w_.timing().takeover_after() + 3 * w_.timing().heartbeat_period;
  for (int observer = 0; observer < slots; ++observer) {
    Process* o = primary[static_cast<std::size_t>(observer)];
    if (o == nullptr || w_.Now() - o->started < settled) continue;
    for (int s = 0; s < slots; ++s) {
      Process* p = primary[static_cast<std::size_t>(s)];
      if (p == nullptr || w_.Now() - p->started < settled) continue;
      if (!o->node->membership().IsLive(p->node_id, p->instance)) {
        auto v = o->node->membership().view().find(p->node_id);
        const std::string shown = v == o->node->membership().view().end() ? "nothing"
                                  : v->second.record ? std::string(LeaseStateName(v->second.record->state)) + " " +
                                                           v->second.record->instance.str()
                                                     : "no record";
        LivenessFailure("p" + std::to_string(o->number) + "'s view does not show p" + std::to_string(p->number) + " (" +
                        p->node_id.str() + ", instance " + p->instance.str() + ") live after healing; it shows " +
                        shown);
      }
    }
  }
  for (int s = 0; s < slots; ++s) {
    if (w_.Running(s) > 1) {
      LivenessFailure(SlotNodeId(s).str() + " still has " + std::to_string(w_.Running(s)) + " processes after healing");
    }
  }
}

// 10. A drain never reports drained with a release pending: no record names it now.
void Checkers::OnDrained(Process& p) {
  for (const auto& [key, obj] : w_.bucket()->objects()) {
    if (!key.starts_with(kOwnersPrefix)) continue;
    auto rec = DecodeOwnerRecord(obj.body);
    if (rec.ok() && rec->instance == p.instance) {
      w_.Violation("p" + std::to_string(p.number) + " reported drained while " + key + " still names it");
    }
  }
}

void Checkers::OnAcknowledged(const std::string& who, const ActorId& actor, const std::string& id,
                              const std::string& log) {
  for (const auto& v : history_.OnAcknowledged(actor.ToString(), log)) w_.Violation(who + " acknowledged " + id + ": " + v);
}

void Checkers::OnRestored(const ActorId& actor, Generation generation) {
  auto& newest = opened_generation_[actor.ToString()];
  newest = std::max(newest, generation);
}

// 14. No restore fails for good.
void Checkers::OnRestoreFailed(const std::string& who, const Status& status) {
  if (status.code() == Code::kFatal) {
    w_.Violation(who + " restore failed: " + status.ToString());
  } else if (status.code() == Code::kPreconditionFailed) {
    w_.Violation(who + " restore found a log of its own generation or later: " + status.ToString());
  }
}

// 15. Garbage collection deletes only the actor's own log, never nodes/, owners/ or leases/.
void Checkers::OnReplicaDelete(int number, const std::string& key) {
  ++w_.result().gc_deletes;
  w_.Trace("p" + std::to_string(number) + " gc deletes " + key);
  if (!IsLogKey(key)) w_.Violation("p" + std::to_string(number) + " deleted " + key + ", outside every actor's log");
}

bool Checkers::OnLogLanded(const std::string& key) {
  if (!IsLogKey(key)) return false;
  RunResult& result = w_.result();
  const std::size_t slash = key.rfind('/');
  const std::string prefix = key.substr(0, slash + 1);
  auto position = replica::ParseKeyPosition(prefix, key);
  if (!position.ok()) {
    w_.Violation(key + " landed with a malformed key");
    return true;
  }
  if (key.starts_with(replica::kSnapshotPrefix)) {
    ++result.snapshots;
    w_.Trace(key + " landed");
    return true;
  }
  ++result.segments;
  const std::string actor = prefix.substr(replica::kWalPrefix.size(), prefix.size() - replica::kWalPrefix.size() - 1);
  auto opened = opened_generation_.find(actor);
  if (opened != opened_generation_.end() && position->generation < opened->second) {
    // A later hold already restored without it: off the chain, garbage (the output gate
    // acknowledged nothing of it).
    ++result.off_chain_segments;
    w_.Trace(key + " landed late, off the chain (g" + std::to_string(opened->second.value) + " restored already)");
  } else {
    w_.Trace(key + " landed");
  }
  return true;
}

// Above every hold's generation: the audit only reads, and a restore refuses a log that
// already holds its own generation or a later one.
constexpr Generation kAuditGeneration{~std::uint64_t{0}};

// 16. After the run: every process gone, every request in transit landed, each actor's log
// restored once more from the bucket as it is (no faults) and judged like any restore.
void Checkers::FinalAudit() {
  w_.finished = true;
  w_.sim().RunFor(kTransitDrain);
  MemStore audit(w_.bucket_env(), w_.bucket());
  for (std::int64_t i = 0; i < w_.actors() && w_.result().violations.empty(); ++i) {
    const ActorId actor = w_.ActorAt(i);
    const std::string who = "final audit of " + actor.name;
    replica::RestoreOptions ro;
    auto restored = RunTask(w_.sim(), w_.bucket_env(),
                            replica::Restore(w_.bucket_env(), audit, actor, kAuditGeneration, ro), seconds(120));
    if (!restored) {
      w_.Violation(who + ": the restore did not finish");
    } else if (!restored->ok()) {
      w_.Violation(who + ": the restore failed: " + restored->status().ToString());
    } else {
      w_.Trace(who + ": " +
               std::to_string(StorageHistory::SplitLog((*restored)->state.Get("log").value_or("")).size()) + " writes");
      CheckRestore(who, actor, (*restored)->state);
    }
  }
}

}  // namespace wk::sim
