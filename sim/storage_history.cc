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

std::vector<std::string> StorageHistory::CheckExtends(const std::string& actor, const std::string& log) const {
  std::vector<std::string> out;
  const std::vector<std::string> ids = SplitLog(log);
  const std::vector<std::string> acked = SplitLog(acknowledged(actor));
  std::set<std::string> seen;
  for (const auto& id : ids) {
    if (!seen.insert(id).second) out.push_back("write " + id + " applied twice in " + Show(ids));
  }
  std::size_t common = 0;
  while (common < acked.size() && common < ids.size() && acked[common] == ids[common]) ++common;
  if (common < acked.size()) {
    const std::vector<std::string> missing(acked.begin() + static_cast<std::ptrdiff_t>(common), acked.end());
    out.push_back("acknowledged history " + Show(acked) + " is not a prefix of " + Show(ids) + ": acknowledged " +
                  Show(missing) + " lost or out of order");
  }
  return out;
}

std::vector<std::string> StorageHistory::OnAcknowledged(const std::string& actor, const std::string& log) {
  Acknowledged& acked = acknowledged_[actor];
  // The common case, in time linear in the new ids: log extends the acknowledged one.
  const bool extends = acked.log.empty() || log == acked.log ||
                       (log.size() > acked.log.size() && log.starts_with(acked.log) && log[acked.log.size()] == ',');
  if (extends) {
    std::vector<std::string> out;
    const std::size_t from = acked.log.empty() ? 0 : std::min(log.size(), acked.log.size() + 1);
    for (auto& id : SplitLog(std::string_view(log).substr(from))) {
      if (!acked.ids.insert(id).second) out.push_back("write " + id + " applied twice in " + Show(SplitLog(log)));
    }
    acked.log = log;
    return out;
  }
  std::vector<std::string> out = CheckExtends(actor, log);
  const std::vector<std::string> ids = SplitLog(log);
  acked.log = log;
  acked.ids = std::set<std::string>(ids.begin(), ids.end());
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
