#include "routing/class_traffic.h"

#include "base/ids.h"
#include "routing/front.h"

namespace wk {

std::optional<std::pair<std::string, std::string>> ClassTrafficTable::ClassOf(std::string_view target) {
  if (!target.starts_with(kActorsPrefix)) return std::nullopt;
  std::string_view path = target.substr(0, target.find('?')).substr(kActorsPrefix.size());
  // Three segments at least (tenant, class, name); empty ones are skipped.
  std::string parts[2];
  int found = 0;
  bool name = false;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const auto slash = path.find('/');
    if (found < 2) {
      parts[found++] = std::string(path.substr(0, slash));
    } else {
      name = true;
      break;
    }
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  if (!name) return std::nullopt;
  if (!ValidateActorId(ActorId{parts[0], parts[1], "n"}).ok()) return std::nullopt;
  return std::make_pair(std::move(parts[0]), std::move(parts[1]));
}

void ClassTrafficTable::Record(std::string_view target, int status, Duration took, const Deployed& deployed) {
  auto cls = ClassOf(target);
  if (!cls) return;
  std::string key = cls->first + "/" + cls->second;
  auto it = rows_.find(key);
  if (it == rows_.end()) {
    if (!deployed || !deployed(cls->first, cls->second)) {
      key = std::string(kUnknownClassRow);
    } else if (class_rows_ >= kMaxTrafficClasses) {
      key = std::string(kOtherClassesRow);
    } else {
      ++class_rows_;
    }
    it = rows_.try_emplace(std::move(key)).first;
  }
  ClassTraffic& t = it->second;
  t.requests += 1;
  if (status >= 500) {
    t.errors += 1;
  } else if (status >= 400) {
    t.client_errors += 1;
  }
  t.seconds += ToSeconds(took);
}

}  // namespace wk
