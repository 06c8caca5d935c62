// HandOvers: an actor leaves this node without a refused request: the drain that waits and
// the move (docs/architecture.md, "Drain and move"; docs/node-lease.md, "Drain" and "Moving
// actors"). Guarantees: no new event starts on a leaving actor, whose requests are held and
// then routed again; a target is told to take the actor only after the release landed, and
// takes it If-Match that release; a drain reports drained only with nothing held, leaving or
// pending. Threading: Env loop thread only. Details (the five steps, why moves go through
// the bucket, the drain's bounds): docs/internals.md, "HandOvers".
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/membership.h"
#include "cluster/owners.h"

namespace wk {

// Hand-overs a drain runs at once: each is a close (a segment upload at most) and a
// release write, so a slow bucket gets at most this many of each in flight (as
// kPendingConcurrency bounds pending releases).
inline constexpr int kHandOverConcurrency = 32;
// One hand-over's limit in a drain or a move: its close may take this long before it is
// cut (as long as a replica's close may take: actors.close_limit in ActorHost).
inline constexpr Duration kHandOverLimit = std::chrono::seconds(10);
// How long a request for an actor that is leaving waits for its hand-over to end before it
// is routed anyway: the hand-over's own bound (the close, cut at kHandOverLimit, then the
// release's tries), so the request is routed once, to wherever the actor went. A shorter
// wait sent it to the target before the release landed; the target's routing read still
// named this node and sent it back, and the request ran out of hops (a 503 in a drain).
inline constexpr Duration kHandOverWait = kHandOverLimit + 2 * kReleaseTries;

// What the node that serves actors provides (ActorHost; the simulator's nodes).
struct HandOverHost {
  // Asks actor to leave memory as hibernation does (its close releases the hold). True if
  // it was resident, false if not (the hold is then released directly).
  std::function<bool(const ActorId&)> unload;
  // Tells node `to` to take actor from the record this node's release left (nobody at
  // generation, at version released). OK once `to` holds it; any error: it does not.
  std::function<Task<Status>(NodeId to, ActorId actor, Version released, Generation generation)> take;
};

struct HandOverResult {
  enum class Kind : std::uint8_t {
    kMoved,     // the target holds it
    kReleased,  // released here; no target, or the target did not take it (detail says why)
    kPending,   // the release is pending (it lands later, or the stop or a fence frees it)
    kNotHeld,   // this node did not hold it
  };
  Kind kind = Kind::kNotHeld;
  std::string detail;
};
std::string_view HandOverKindName(HandOverResult::Kind kind);

struct HandOverStats {
  std::uint64_t started = 0;
  std::uint64_t closed = 0;   // ended by the actor's own close (hibernation's path)
  std::uint64_t cut = 0;      // released under the actor at the limit
  std::uint64_t moved = 0;    // the target took it
  std::uint64_t pending = 0;  // the release did not land
  std::uint64_t waited = 0;   // requests held while their actor was leaving
};

class HandOvers {
 public:
  HandOvers(Env& env, Owners& owners, const Membership& membership, NodeId self, LeaseTiming timing);
  ~HandOvers();
  HandOvers(const HandOvers&) = delete;
  HandOvers& operator=(const HandOvers&) = delete;

  void set_host(HandOverHost host) { host_ = std::move(host); }
  // Broken models (base/broken_models.h): tests and the simulator only.
  void set_broken_models(BrokenModels b) { broken_ = b; }

  // Hands actor over (steps 1-5 above), to `to` if set. Bounded by limit (plus the
  // target's answer). A second hand-over of an actor already leaving waits for the first
  // and reports kNotHeld.
  Task<HandOverResult> HandOver(ActorId actor, std::optional<NodeId> to, Duration limit);
  // The drain that waits (see above). OK only once nothing is held or pending.
  Task<Status> Drain(Duration limit);

  // Whether actor is being handed over now (the front holds its requests).
  bool Leaving(const ActorId& actor) const { return entries_.count(actor) > 0; }
  // Returns once actor's hand-over ended, or after limit.
  Task<void> WaitLeft(ActorId actor, Duration limit);
  // Where this node sends a request for actor that it may not run: the target of its
  // hand-over if one is under way, otherwise, while this node does not accept actors (a
  // drain), DrainTarget; nullopt when there is none.
  std::optional<NodeId> ForwardTarget(const ActorId& actor) const;
  // The live peer (in the membership view, not known to drain) with the highest
  // rendezvous score for actor: every draining node sends an actor's requests to the same
  // peer, and the drained actors spread evenly over the peers. nullopt: no such peer.
  std::optional<NodeId> DrainTarget(const ActorId& actor) const;
  // Peers known to be draining (DrainControl lists them while this node drains).
  void set_draining_peers(std::set<NodeId> peers) { draining_peers_ = std::move(peers); }
  const std::set<NodeId>& draining_peers() const { return draining_peers_; }

  std::size_t leaving() const { return entries_.size(); }
  const HandOverStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::optional<NodeId> to;
    Generation generation;               // of the hold being handed over
    std::optional<HoldEnded> end;        // how that hold ended, once it did
    std::vector<Latch<bool>> waiters;      // requests held (WaitLeft)
    std::vector<Latch<bool>> end_waiters;  // the hand-over awaiting `end` (WaitEnd)
  };
  void OnHoldEnded(const HoldEnded& ended);
  std::optional<HoldEnded> EndOf(const ActorId& actor) const;
  // Returns once actor's hold ended (EndOf is set) or at `until`.
  Task<void> WaitEnd(ActorId actor, MonoTime until);
  // The hand-over of actor is over: not leaving any more; held requests go on.
  void Finish(const ActorId& actor);
  Task<void> DrainWorker(std::shared_ptr<std::deque<ActorId>> queue, MonoTime deadline);

  Env& env_;
  Owners& owners_;
  const Membership& membership_;
  const NodeId self_;
  const LeaseTiming timing_;
  HandOverHost host_;
  BrokenModels broken_;
  std::map<ActorId, Entry> entries_;
  std::set<NodeId> draining_peers_;
  HandOverStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace wk
