#include "history_model.h"

#include <algorithm>

#include "replica/format.h"
#include "storage_history.h"

namespace wk::sim {
namespace {

// The actor a key of wal/ names ("wal/<tenant>/<class>/<name>/<position>"), if any.
std::optional<ActorId> WalActor(std::string_view key) {
  if (!key.starts_with(replica::kWalPrefix)) return std::nullopt;
  key.remove_prefix(replica::kWalPrefix.size());
  const std::size_t last = key.rfind('/');
  if (last == std::string_view::npos) return std::nullopt;
  const std::string_view path = key.substr(0, last);
  const std::size_t a = path.find('/');
  const std::size_t b = a == std::string_view::npos ? a : path.find('/', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  return ActorId{std::string(path.substr(0, a)), std::string(path.substr(a + 1, b - a - 1)),
                 std::string(path.substr(b + 1))};
}

// Past the skew bound, what a point inside the window keeps to spare: the restore's node
// reads its clock some time after the pick, and times are whole milliseconds.
constexpr std::int64_t kWindowSlackMs = 500;

}  // namespace

HistoryModel::HistoryModel(World& world, std::string key, StateOf state_of)
    : w_(world), key_(std::move(key)), state_of_(std::move(state_of)) {}

void HistoryModel::Watch(const ActorId& actor) { actors_[actor]; }

std::int64_t HistoryModel::NowMs() const { return ToUnixMs(w_.bucket_env().WallNow()); }

std::string HistoryModel::Show(const std::string& value) {
  const std::vector<std::string> ids = StorageHistory::SplitLog(value);
  if (ids.empty()) return "[]";
  std::string out = "[" + std::to_string(ids.size()) + ": ";
  const std::size_t from = ids.size() > 4 ? ids.size() - 4 : 0;
  if (from > 0) out += "...,";
  for (std::size_t i = from; i < ids.size(); ++i) out += (i > from ? "," : "") + ids[i];
  return out + "]";
}

std::string HistoryModel::Describe(const ModelState& state) const {
  auto it = state.find(key_);
  return std::to_string(state.size()) + " keys, " + key_ + " " + Show(it == state.end() ? "" : it->second);
}

void HistoryModel::OnLanded(const std::string& key, const std::string& body) {
  auto actor = WalActor(key);
  if (!actor) return;
  auto rec = actors_.find(*actor);
  if (rec == actors_.end()) return;
  auto seg = replica::DecodeSegment(body);
  if (!seg.ok() || seg->position.seq == 0) return;  // a fence (a corrupt body is the restore checkers')
  SegmentRecord s;
  s.landed_ms = NowMs();
  for (std::size_t i = 0; i < seg->batches.size(); ++i) {
    const actor::Batch& b = seg->batches[i];
    BatchRecord r;
    for (const actor::Mutation& m : b.mutations) {
      if (m.kind == actor::Mutation::Kind::kDeleteAll) {
        r.replace = true;
        r.puts.clear();
      } else if (m.kind == actor::Mutation::Kind::kPut) {
        if (m.key == key_) r.value = m.value;
        r.puts[m.key] = m.value;
      } else {
        if (m.key == key_) r.value.clear();
        r.puts.erase(m.key);
      }
    }
    if (!r.replace) {
      r.puts.clear();  // kept for replacements only
      const std::vector<std::string> ids = StorageHistory::SplitLog(r.value);
      if (!ids.empty()) {
        rec->second.by_last.emplace(ids.back(), replica::BatchId{seg->position, static_cast<std::uint32_t>(i + 1)});
      }
    } else if (on_replacement) {
      on_replacement(*actor, r.value);
    }
    s.batches.push_back(std::move(r));
  }
  rec->second.segments[seg->position] = std::move(s);
}

void HistoryModel::OnAcknowledged(const ActorId& actor, const std::string& last) {
  auto rec = actors_.find(actor);
  if (rec == actors_.end()) return;
  auto it = rec->second.by_last.find(last);
  // Not landed: not durable, which checker 11 (storage) or the clients' checker judges.
  if (it == rec->second.by_last.end()) return;
  rec->second.acked.push_back(Acked{it->second, rec->second.segments.at(it->second.segment).landed_ms});
}

bool HistoryModel::SurelyInside(std::int64_t point_ms, Duration retention) const {
  const std::int64_t slack = World::Ms(w_.timing().max_skew) + kWindowSlackMs;
  return point_ms >= NowMs() - World::Ms(retention) + slack;
}

std::optional<HistoryModel::Point> HistoryModel::Pick(const ActorId& actor, Duration retention) {
  auto rec = actors_.find(actor);
  if (rec == actors_.end()) return std::nullopt;
  const std::int64_t now = NowMs();
  // Twice the slack: the point must still be surely inside when the answer comes.
  const std::int64_t lo = now - World::Ms(retention) + 2 * (World::Ms(w_.timing().max_skew) + kWindowSlackMs);
  std::vector<const Acked*> in;
  for (const Acked& a : rec->second.acked) {
    if (a.landed_ms >= lo) in.push_back(&a);
  }
  if (in.empty()) return std::nullopt;
  const Acked& a = *in[static_cast<std::size_t>(w_.Uniform(0, static_cast<std::int64_t>(in.size()) - 1))];
  const SegmentRecord& s = rec->second.segments.at(a.id.segment);
  Point p;
  if (w_.Chance(0.5)) {
    // A time: while the newest data segment landed is a's and no other landed since, the
    // state is the last batch of a's segment (the chain's segments land in chain order).
    std::optional<std::int64_t> next;
    bool same_ms = false;
    for (const auto& [pos, other] : rec->second.segments) {
      if (pos == a.id.segment || other.landed_ms < s.landed_ms) continue;
      if (other.landed_ms == s.landed_ms) same_ms = true;
      if (!next || other.landed_ms < *next) next = other.landed_ms;
    }
    const std::int64_t hi = next ? *next - 1 : now;
    if (!same_ms && hi >= s.landed_ms) {
      const std::int64_t t = s.landed_ms + w_.Uniform(0, hi - s.landed_ms);
      p.spec.at_ms = t;
      p.value = s.batches.back().value;
      p.time_ms = t;
      p.text = "time " + std::to_string(t - kOriginMs) + "ms (after segment " + a.id.segment.ToString() + ")";
      return p;
    }
  }
  p.spec.batch = a.id;
  p.value = s.batches.at(a.id.index - 1).value;
  p.time_ms = s.landed_ms;
  p.text = "batch " + a.id.ToString();
  return p;
}

void HistoryModel::CheckWritten(const std::string& who, const ActorId& actor, const replica::BatchId& batch,
                                const std::string& expected) {
  auto rec = actors_.find(actor);
  if (rec == actors_.end()) return;
  auto seg = rec->second.segments.find(batch.segment);
  if (seg == rec->second.segments.end() || batch.index == 0 || batch.index > seg->second.batches.size()) {
    w_.Violation(who + ": H1: the batch it wrote, " + batch.ToString() + ", is not in the bucket");
    return;
  }
  const BatchRecord& b = seg->second.batches[batch.index - 1];
  const ModelState want = state_of_(expected);
  if (!b.replace) {
    w_.Violation(who + ": H1: its batch " + batch.ToString() + " does not replace the state");
  } else if (b.puts != want) {
    w_.Violation(who + ": H1: its batch " + batch.ToString() + " wrote " + Describe(b.puts) + ", the point's state is " +
                 Describe(want));
  }
}

void HistoryModel::CheckState(const std::string& who, const ModelState& state, const std::string& expected) {
  const ModelState want = state_of_(expected);
  if (state != want) w_.Violation(who + ": H3: read " + Describe(state) + ", the point's state is " + Describe(want));
}

std::vector<std::pair<replica::BatchId, std::int64_t>> HistoryModel::AckedSince(const ActorId& actor,
                                                                                std::int64_t since_ms) const {
  std::vector<std::pair<replica::BatchId, std::int64_t>> out;
  auto rec = actors_.find(actor);
  if (rec == actors_.end()) return out;
  for (const Acked& a : rec->second.acked) {
    if (a.landed_ms >= since_ms) out.emplace_back(a.id, a.landed_ms);
  }
  return out;
}

}  // namespace wk::sim
