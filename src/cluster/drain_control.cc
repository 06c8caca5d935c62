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

void DrainControl::OnListing() {
  if (!check_.done()) return;  // one check (and drain) at a time
  check_ = env_.Spawn(Check(), "drain control");
}

Task<void> DrainControl::Check() {
  const std::string key = DrainKey(node_id_);
  auto got = co_await store_.Get(key, CallOptions{timing_.attempt_timeout()});
  if (!got.ok()) {
    if (got.code() == Code::kNotFound && held_) {
      held_ = false;
      owners_.SetAccepting(true);
      WK_LOG_INFO("drain lifted: taking actors again", {{"node", node_id_.str()}});
    }
    co_return;
  }
  auto rec = DecodeDrainRecord(got->body);
  if (!rec.ok()) {
    WK_LOG_ERROR("unreadable drain request; ignored", {{"key", key}, {"error", rec.status().message()}});
    co_return;
  }
  held_ = true;
  owners_.SetAccepting(false);
  co_await ListDrainingPeers();
  if (rec->state == DrainState::kDrained) co_return;
  WK_LOG_INFO("draining", {{"node", node_id_.str()}, {"holds", std::to_string(owners_.holds())}});
  // Bounded by a lease ttl; a drain not done by then goes on at the next listing (the
  // request stays), where it left off.
  Status s = co_await hand_overs_.Drain(timing_.ttl);
  if (!s.ok()) {
    WK_LOG_WARN("drain not finished yet", {{"node", node_id_.str()}, {"why", s.ToString()}});
    co_return;
  }
  std::string body = EncodeDrainRecord(DrainRecord{DrainState::kDrained, env_.WallNow()});
  auto put = co_await store_.Put(key, std::move(body), Precondition::IfMatch(got->version),
                                 CallOptions{timing_.attempt_timeout()});
  if (put.ok()) WK_LOG_INFO("drained", {{"node", node_id_.str()}});
}

Task<void> DrainControl::ListDrainingPeers() {
  ListOptions options;
  options.prefix = std::string(kDrainPrefix);
  auto listed = co_await store_.List(options, CallOptions{timing_.attempt_timeout()});
  if (!listed.ok()) co_return;  // keep what we knew
  std::set<NodeId> peers;
  for (const auto& e : listed->entries) {
    NodeId id(e.key.substr(kDrainPrefix.size()));
    if (id != node_id_) peers.insert(std::move(id));
  }
  hand_overs_.set_draining_peers(std::move(peers));
}

}  // namespace wk
