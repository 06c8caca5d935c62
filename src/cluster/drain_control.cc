#include "cluster/drain_control.h"

#include <limits>

#include "base/check.h"
#include "base/line_format.h"
#include "base/log.h"

namespace wk {

std::string EncodeDrainRecord(const DrainRecord& r) {
  WK_CHECK(ToUnixMs(r.at) >= 0, "a drain record's time is after 1970");
  line_format::LineWriter w("drain", 1);
  w.Field("state", r.state == DrainState::kRequested ? "requested" : "drained");
  w.Field("at", static_cast<std::uint64_t>(ToUnixMs(r.at)));
  return std::move(w).Take();
}

Result<DrainRecord> DecodeDrainRecord(std::string_view body) {
  auto reader = line_format::LineReader::Open(body, "drain", 1, "wasmkeep-drain 1 object");
  if (!reader.ok()) return reader.status();
  DrainRecord r;
  auto state = reader->Field("state");
  if (!state.ok()) return state.status();
  if (*state == "requested") {
    r.state = DrainState::kRequested;
  } else if (*state == "drained") {
    r.state = DrainState::kDrained;
  } else {
    return reader->Corrupt("bad state '" + std::string(state->substr(0, 20)) + "'");
  }
  auto at = reader->UintField("at", static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  if (!at.ok()) return at.status();
  r.at = FromUnixMs(static_cast<std::int64_t>(*at));
  if (Status s = reader->Finish(); !s.ok()) return s;
  return r;
}

DrainControl::DrainControl(Env& env, ObjectStore& store, Owners& owners, HandOvers& hand_overs, NodeId node_id,
                           LeaseTiming timing)
    : env_(env),
      store_(store.ForPurpose(BucketPurpose::kControl)),
      owners_(owners),
      hand_overs_(hand_overs),
      node_id_(std::move(node_id)),
      timing_(timing) {}

void DrainControl::Start() {
  // Not one actor before the first check: a node restarted while its record says drained
  // would otherwise take actors (and alarm shards) that it then neither serves nor hands on.
  if (!checked_ && !broken_.on(BrokenModel::kDrainAcceptsBeforeCheck)) owners_.SetAccepting(false);
}

std::set<NodeId> DrainControl::draining_nodes() const {
  std::set<NodeId> out = hand_overs_.draining_peers();
  if (held_) out.insert(node_id_);
  return out;
}

void DrainControl::OnListing(bool lease_valid) {
  if (!check_.done()) return;  // one check (and drain) at a time
  check_ = env_.Spawn(Check(lease_valid), "drain control");
}

Task<void> DrainControl::Check(bool lease_valid) {
  // One LIST instead of a GET of our own key: the same request count, and every node learns
  // which peers drain (the alarm shards' ranking and the drain target skip them).
  ListOptions options;
  options.prefix = std::string(kDrainPrefix);
  auto listed = co_await store_.List(options, CallOptions{timing_.attempt_timeout()});
  if (!listed.ok()) co_return;  // keep what we knew
  // One page (1,000 keys): more nodes draining at once than that is not a cluster we run.
  std::set<NodeId> peers;
  bool own = false;
  for (const auto& e : listed->entries) {
    std::string_view id = std::string_view(e.key).substr(kDrainPrefix.size());
    if (!ValidateNodeId(id).ok()) continue;  // a stray key names no node
    NodeId node{std::string(id)};
    if (node == node_id_) {
      own = true;
    } else {
      peers.insert(std::move(node));
    }
  }
  hand_overs_.set_draining_peers(std::move(peers));
  const std::string key = DrainKey(node_id_);
  // (No conditional expression around the co_await: GCC 12 miscompiles one; docs/DEVELOPING.md.)
  Result<GetOutput> got = NotFound(key);
  if (own) got = co_await store_.Get(key, CallOptions{timing_.attempt_timeout()});
  if (!got.ok()) {
    if (got.code() != Code::kNotFound) co_return;
    if (held_ || !checked_) {
      if (held_) WK_LOG_INFO("drain lifted: taking actors again", {{"node", node_id_.str()}});
      held_ = false;
      owners_.SetAccepting(true);
    }
    checked_ = true;
    co_return;
  }
  checked_ = true;
  auto rec = DecodeDrainRecord(got->body);
  if (!rec.ok()) {
    // Unreadable: the node keeps taking actors (an operator's typo must not empty a node),
    // and the record is reported until it is fixed or deleted.
    WK_LOG_ERROR("unreadable drain request; ignored", {{"key", key}, {"error", rec.status().message()}});
    if (!held_) owners_.SetAccepting(true);
    co_return;
  }
  held_ = true;
  owners_.SetAccepting(false);
  if (!lease_valid) co_return;  // a drain hands over only under a valid lease
  // A record that says drained ends the work, unless something is held here again (an
  // acquisition that was past its checks when the record appeared): it is handed over as a
  // requested drain's actors are.
  if (rec->state == DrainState::kDrained && owners_.holds() == 0 && owners_.pending() == 0 &&
      hand_overs_.leaving() == 0) {
    co_return;
  }
  WK_LOG_INFO("draining", {{"node", node_id_.str()}, {"holds", std::to_string(owners_.holds())}});
  // Bounded by a lease ttl; a drain not done by then goes on at the next listing (the
  // request stays), where it left off.
  Status s = co_await hand_overs_.Drain(timing_.ttl);
  if (!s.ok()) {
    WK_LOG_WARN("drain not finished yet", {{"node", node_id_.str()}, {"why", s.ToString()}});
    co_return;
  }
  if (rec->state == DrainState::kDrained) co_return;
  std::string body = EncodeDrainRecord(DrainRecord{DrainState::kDrained, env_.WallNow()});
  auto put = co_await store_.Put(key, std::move(body), Precondition::IfMatch(got->version),
                                 CallOptions{timing_.attempt_timeout()});
  if (put.ok()) WK_LOG_INFO("drained", {{"node", node_id_.str()}});
}

}  // namespace wk
