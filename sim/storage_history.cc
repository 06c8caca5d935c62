#include "storage_history.h"

#include <algorithm>

namespace wk::sim {
namespace {

// At most this many ids named in one message: a lost history can be long.
constexpr std::size_t kIdsShown = 6;

std::string Show(const std::vector<std::string>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < kIdsShown; ++i) out += (i ? "," : "") + ids[i];
  if (ids.size() > kIdsShown) out += ",... (" + std::to_string(ids.size()) + ")";
  return "[" + out + "]";
}

}  // namespace

std::vector<std::string> StorageHistory::SplitLog(std::string_view log) {
  std::vector<std::string> ids;
  while (!log.empty()) {
    const std::size_t comma = log.find(',');
    ids.emplace_back(log.substr(0, comma));
    if (comma == std::string_view::npos) break;
    log.remove_prefix(comma + 1);
  }
  return ids;
}

const std::string& StorageHistory::acknowledged(const std::string& actor) const {
  static const std::string kEmpty;
  auto it = acknowledged_.find(actor);
  return it == acknowledged_.end() ? kEmpty : it->second.log;
}

namespace {

bool Extends(const std::string& log, const std::string& base) {
  return base.empty() || log == base || (log.size() > base.size() && log.starts_with(base) && log[base.size()] == ',');
}

}  // namespace

void StorageHistory::OnReplacementLanded(const std::string& actor, const std::string& log) {
  acknowledged_[actor].replacements.push_back(log);
}

void StorageHistory::OnReplacementAcknowledged(const std::string& actor, const std::string& log,
                                               std::uint64_t issued_at) {
  Acknowledged& acked = acknowledged_[actor];
  const std::vector<std::string> ids = SplitLog(log);
  const std::set<std::string> kept(ids.begin(), ids.end());
  // Every write acknowledged before the change was asked for came before its batch: gone
  // unless the point holds it.
  acked.wiped.clear();
  for (const auto& [id, at] : acked.first_acked) {
    if (at <= issued_at && !kept.count(id)) acked.wiped.insert(id);
  }
  // A write acknowledged since (on the replaced state) already stands for the history.
  if (acked.acked_at > issued_at && Extends(acked.log, log)) return;
  acked.log = log;
  acked.ids = kept;
  acked.acked_at = acks_;
  acked.replacements.clear();
}

std::vector<std::string> StorageHistory::CheckExtends(const std::string& actor, const std::string& log) const {
  std::vector<std::string> out;
  const std::vector<std::string> ids = SplitLog(log);
  const std::vector<std::string> acked = SplitLog(acknowledged(actor));
  std::set<std::string> seen;
  for (const auto& id : ids) {
    if (!seen.insert(id).second) out.push_back("write " + id + " applied twice in " + Show(ids));
  }
  auto it = acknowledged_.find(actor);
  // A replacement that landed since the acknowledgement may have taken effect.
  if (it != acknowledged_.end()) {
    for (const std::string& r : it->second.replacements) {
      if (Extends(log, r)) return out;
    }
  }
  std::size_t common = 0;
  while (common < acked.size() && common < ids.size() && acked[common] == ids[common]) ++common;
  if (common < acked.size()) {
    const std::vector<std::string> missing(acked.begin() + static_cast<std::ptrdiff_t>(common), acked.end());
    out.push_back("acknowledged history " + Show(acked) + " is not a prefix of " + Show(ids) + ": acknowledged " +
                  Show(missing) + " lost or out of order");
  }
  if (it != acknowledged_.end()) {
    std::vector<std::string> back;
    for (const auto& id : ids)
      if (it->second.wiped.count(id)) back.push_back(id);
    if (!back.empty()) {
      out.push_back("H2: " + Show(back) + ", acknowledged before the last acknowledged restore and not in its point, " +
                    "are in " + Show(ids) + ": the restore did not take effect");
    }
  }
  return out;
}

std::vector<std::string> StorageHistory::OnAcknowledged(const std::string& actor, const std::string& log) {
  Acknowledged& acked = acknowledged_[actor];
  const std::uint64_t at = ++acks_;
  // The common case, in time linear in the new ids: log extends the acknowledged one.
  if (Extends(log, acked.log)) {
    const std::size_t from = acked.log.empty() ? 0 : std::min(log.size(), acked.log.size() + 1);
    const std::vector<std::string> added = SplitLog(std::string_view(log).substr(from));
    bool wiped = false;
    for (const auto& id : added) wiped = wiped || acked.wiped.count(id) > 0;
    if (!wiped) {
      acked.replacements.clear();
      std::vector<std::string> out;
      for (auto& id : added) {
        if (!acked.ids.insert(id).second) out.push_back("write " + id + " applied twice in " + Show(SplitLog(log)));
        acked.first_acked.emplace(id, at);
      }
      acked.log = log;
      acked.acked_at = at;
      return out;
    }
  }
  std::vector<std::string> out = CheckExtends(actor, log);
  const std::vector<std::string> ids = SplitLog(log);
  for (const std::string& r : acked.replacements) {
    if (!Extends(log, r)) continue;
    // A restore whose answer never came took effect: what its point holds is history again.
    for (const auto& id : SplitLog(r)) acked.wiped.erase(id);
  }
  for (const auto& id : ids) acked.first_acked.emplace(id, at);
  acked.log = log;
  acked.ids = std::set<std::string>(ids.begin(), ids.end());
  acked.acked_at = at;
  acked.replacements.clear();
  return out;
}

std::vector<std::string> StorageHistory::OnRestored(const std::string& actor, const std::string& log,
                                                    const std::set<std::string>& entry_ids) const {
  std::vector<std::string> out = CheckExtends(actor, log);
  const std::vector<std::string> ids = SplitLog(log);
  const std::set<std::string> in_log(ids.begin(), ids.end());
  std::vector<std::string> without_id, without_entry;
  for (const auto& e : entry_ids)
    if (!in_log.count(e)) without_id.push_back(e);
  for (const auto& id : in_log)
    if (!entry_ids.count(id)) without_entry.push_back(id);
  if (!without_id.empty()) out.push_back("restored state has e/ entries " + Show(without_id) + " whose writes are not in its log");
  if (!without_entry.empty()) out.push_back("restored log names " + Show(without_entry) + " without their e/ entries");
  return out;
}

}  // namespace wk::sim
