#include "cluster/drain_control.h"

#include <charconv>

#include "base/log.h"

namespace wk {

std::string EncodeDrainRecord(const DrainRecord& r) {
  return std::string("wasmkeep-drain 1\nstate ") + (r.state == DrainState::kRequested ? "requested" : "drained") +
         "\nat " + std::to_string(ToUnixMs(r.at)) + "\n";
}

Result<DrainRecord> DecodeDrainRecord(std::string_view body) {
  constexpr std::string_view kHeader = "wasmkeep-drain 1\nstate ";
  if (!body.starts_with(kHeader) || body.back() != '\n') return Fatal("corrupt wasmkeep-drain 1 object");
  body.remove_prefix(kHeader.size());
  DrainRecord r;
  if (body.starts_with("requested\n")) {
    body.remove_prefix(10);
  } else if (body.starts_with("drained\n")) {
    r.state = DrainState::kDrained;
    body.remove_prefix(8);
  } else {
    return Fatal("corrupt wasmkeep-drain 1 object: bad state");
  }
  if (!body.starts_with("at ")) return Fatal("corrupt wasmkeep-drain 1 object: no 'at' line");
  body.remove_prefix(3);
  body.remove_suffix(1);
  std::int64_t ms = 0;
  auto [p, ec] = std::from_chars(body.data(), body.data() + body.size(), ms);
  if (ec != std::errc() || p != body.data() + body.size() || ms < 0) return Fatal("corrupt wasmkeep-drain 1 object: bad time");
  r.at = FromUnixMs(ms);
  return r;
}

DrainControl::DrainControl(Env& env, ObjectStore& store, Owners& owners, std::string node_id, LeaseTiming timing)
    : env_(env), store_(store), owners_(owners), node_id_(std::move(node_id)), timing_(timing) {}

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
      WK_LOG_INFO("drain lifted: taking actors again", {{"node", node_id_}});
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
  if (rec->state == DrainState::kDrained) co_return;
  WK_LOG_INFO("draining", {{"node", node_id_}});
  // Bounded by a few lease periods; a drain not done by then is tried again at the next
  // listing (the request stays).
  Status s = co_await owners_.Drain(timing_.ttl);
  if (!s.ok()) {
    WK_LOG_WARN("drain not finished yet", {{"node", node_id_}, {"why", s.ToString()}});
    co_return;
  }
  std::string body = EncodeDrainRecord(DrainRecord{DrainState::kDrained, env_.WallNow()});
  auto put = co_await store_.Put(key, std::move(body), Precondition::IfMatch(got->version),
                                 CallOptions{timing_.attempt_timeout()});
  if (put.ok()) WK_LOG_INFO("drained", {{"node", node_id_}});
}

}  // namespace wk
