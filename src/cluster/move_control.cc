#include "cluster/move_control.h"

#include <algorithm>

#include "base/check.h"
#include "base/line_format.h"
#include "base/log.h"

namespace wk {
namespace {

constexpr std::size_t kMaxDetailBytes = 200;

// The detail as the format stores it: printable ASCII, no leading or trailing space,
// bounded; "-" for none.
std::string CleanDetail(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, kMaxDetailBytes)) out.push_back(c >= 0x20 && c <= 0x7e ? c : '?');
  while (!out.empty() && out.back() == ' ') out.pop_back();
  std::size_t first = out.find_first_not_of(' ');
  out = first == std::string::npos ? std::string() : out.substr(first);
  return out.empty() ? "-" : out;
}

}  // namespace

std::string_view MoveStateName(MoveState s) {
  switch (s) {
    case MoveState::kRequested: return "requested";
    case MoveState::kMoved: return "moved";
    case MoveState::kReleased: return "released";
    case MoveState::kPending: return "pending";
    case MoveState::kRefused: return "refused";
  }
  return "?";
}

std::string EncodeMoveRecord(const MoveRecord& r) {
  WK_CHECK(ToUnixMs(r.at) >= 0, "a move record's time is after 1970");
  line_format::LineWriter w("move", 1);
  w.Field("to", r.to.str());
  w.Field("state", MoveStateName(r.state));
  w.Field("at", static_cast<std::uint64_t>(ToUnixMs(r.at)));
  w.Field("detail", CleanDetail(r.detail));
  return std::move(w).Take();
}

Result<MoveRecord> DecodeMoveRecord(std::string_view body) {
  auto reader = line_format::LineReader::Open(body, "move", 1, "wasmkeep-move 1 object");
  if (!reader.ok()) return reader.status();
  MoveRecord r;
  auto to = reader->Field("to");
  if (!to.ok()) return to.status();
  r.to = NodeId(std::string(*to));
  if (Status s = ValidateNodeId(r.to); !s.ok()) return reader->Corrupt("bad node id: " + s.message());
  auto state = reader->Field("state");
  if (!state.ok()) return state.status();
  bool known = false;
  for (MoveState s : {MoveState::kRequested, MoveState::kMoved, MoveState::kReleased, MoveState::kPending,
                      MoveState::kRefused}) {
    if (*state == MoveStateName(s)) {
      r.state = s;
      known = true;
    }
  }
  if (!known) return reader->Corrupt("bad state '" + std::string(state->substr(0, 20)) + "'");
  auto at = reader->UnixMsField("at");
  if (!at.ok()) return at.status();
  r.at = *at;
  auto detail = reader->Field("detail");
  if (!detail.ok()) return detail.status();
  r.detail = *detail == "-" ? std::string() : std::string(*detail);
  if (Status s = reader->Finish(); !s.ok()) return s;
  return r;
}

MoveControl::MoveControl(Env& env, ObjectStore& store, Owners& owners, HandOvers& hand_overs,
                         const Membership& membership, NodeId node_id, LeaseTiming timing, double per_second)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kControl)), owners_(owners), hand_overs_(hand_overs), membership_(membership),
      node_id_(std::move(node_id)), timing_(timing), per_second_(per_second) {}

MoveControl::~MoveControl() { *alive_ = false; }

void MoveControl::OnListing() {
  if (!enabled_ || !pass_.done()) return;  // one pass at a time: a long one is paced by per_second
  pass_ = env_.Spawn(Pass(), "move control");
}

Task<void> MoveControl::Pass() {
  std::shared_ptr<bool> alive = alive_;
  ListOptions options;
  options.prefix = MovePrefix(node_id_);
  auto listed = co_await store_.List(options, CallOptions{timing_.attempt_timeout()});
  if (!*alive || !listed.ok() || listed->entries.empty()) co_return;
  const Duration spacing = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(1.0 / per_second_));
  std::vector<TaskHandle> running;
  MonoTime next_start = env_.MonoNow();
  for (const ListEntry& e : listed->entries) {
    auto id = ParseActorId(std::string_view(e.key).substr(options.prefix.size()));
    if (!id.ok()) continue;
    auto got = co_await store_.Get(e.key, CallOptions{timing_.attempt_timeout()});
    if (!*alive) co_return;
    if (!got.ok()) continue;
    auto request = DecodeMoveRecord(got->body);
    if (!request.ok()) {
      WK_LOG_ERROR("unreadable move request; ignored", {{"key", e.key}, {"error", request.status().message()}});
      continue;
    }
    if (request->state != MoveState::kRequested) {
      unwritten_.erase(e.key);
      continue;  // done: its command deletes it
    }
    if (auto kept = unwritten_.find(e.key); kept != unwritten_.end()) {
      // Carried out already; only its outcome did not land. Written again, never carried
      // out again (a second try would find the actor gone and say `refused`).
      if (kept->second.first == got->version) {
        MoveRecord outcome = kept->second.second;
        co_await WriteOutcome(e.key, got->version, std::move(outcome));
        if (!*alive) co_return;
        continue;
      }
      unwritten_.erase(kept);  // replaced by the operator: a new request
    }
    ++stats_.requests;
    // Paced: at most per_second hand-overs started per second.
    if (env_.MonoNow() < next_start) {
      if (!co_await env_.SleepUntil(next_start)) co_return;
    }
    if (!*alive) co_return;
    next_start = env_.MonoNow() + spacing;
    running.push_back(env_.Spawn(Carry(e.key, got->version, *id, *request), "move " + e.key));
  }
  for (TaskHandle& h : running) {
    if (!co_await h.Join()) co_return;
  }
}

Task<void> MoveControl::Carry(std::string key, Version version, ActorId actor, MoveRecord request) {
  std::shared_ptr<bool> alive = alive_;
  std::string refusal;
  auto target = membership_.view().find(request.to);
  if (request.to == node_id_) {
    refusal = "the target is this node";
  } else if (!owners_.accepting()) {
    refusal = "this node is draining";
  } else if (target == membership_.view().end() || !target->second.live()) {
    refusal = request.to.str() + " is not live";
  } else if (!owners_.Find(actor).IsValid()) {
    refusal = "this node does not hold it";
  }
  if (!refusal.empty()) {
    co_await Finish(std::move(key), std::move(version), std::move(request), MoveState::kRefused, std::move(refusal));
    co_return;
  }
  WK_LOG_INFO("moving", {{"node", node_id_.str()}, {"actor", actor.ToString()}, {"to", request.to.str()}});
  HandOverResult r = co_await hand_overs_.HandOver(actor, request.to, kHandOverLimit);
  if (!*alive) co_return;
  MoveState state = MoveState::kPending;
  switch (r.kind) {
    case HandOverResult::Kind::kMoved: state = MoveState::kMoved; break;
    case HandOverResult::Kind::kReleased: state = MoveState::kReleased; break;
    case HandOverResult::Kind::kPending: state = MoveState::kPending; break;
    case HandOverResult::Kind::kNotHeld: state = MoveState::kRefused; break;
  }
  WK_LOG_INFO("move done", {{"node", node_id_.str()}, {"actor", actor.ToString()}, {"to", request.to.str()},
                            {"outcome", std::string(MoveStateName(state))}, {"detail", r.detail}});
  co_await Finish(std::move(key), std::move(version), std::move(request), state, std::move(r.detail));
}

Task<void> MoveControl::Finish(std::string key, Version version, MoveRecord request, MoveState state,
                               std::string detail) {
  // Nothing is written without a valid lease (WriteOutcome: a lost one sends nothing at all;
  // the simulator's checker 5, `combined` seed 5: a hand-over ended by the loss). The
  // outcome is kept for the next pass, which runs only with a valid lease.
  switch (state) {
    case MoveState::kMoved: ++stats_.moved; break;
    case MoveState::kRefused: ++stats_.refused; break;
    default: ++stats_.other; break;
  }
  request.state = state;
  request.at = env_.WallNow();
  request.detail = std::move(detail);
  co_await WriteOutcome(std::move(key), std::move(version), std::move(request));
}

Task<void> MoveControl::WriteOutcome(std::string key, Version version, MoveRecord outcome) {
  std::shared_ptr<bool> alive = alive_;
  // Checked here, right before the only write, not only where a pass starts: a pass's reads
  // may be answered after the lease ended (a frozen node thawing, `combined` seed 7419 of
  // the deep run), and a lost lease sends nothing. Kept for the next valid pass.
  if (!owners_.lease_valid()) {
    unwritten_.insert_or_assign(key, std::make_pair(version, std::move(outcome)));
    co_return;
  }
  std::string body = EncodeMoveRecord(outcome);
  // If-Match the request as read: an operator who withdrew or replaced it meanwhile wins.
  auto put = co_await store_.Put(key, body, Precondition::IfMatch(version), CallOptions{timing_.attempt_timeout()});
  if (!*alive) co_return;
  if (put.ok() || put.code() == Code::kPreconditionFailed || put.code() == Code::kNotFound ||
      broken_.on(BrokenModel::kMoveOutcomeUnchecked)) {
    unwritten_.erase(key);
    co_return;
  }
  // Not landed, or not known to have: kept for the next pass, which writes it again if the
  // request is still `requested` at this version (an unknown outcome that landed changed it).
  WK_LOG_WARN("a move's outcome was not written; the next pass writes it again",
              {{"key", key}, {"outcome", std::string(MoveStateName(outcome.state))}, {"error", put.status().ToString()}});
  unwritten_[key] = {std::move(version), std::move(outcome)};
}

}  // namespace wk
