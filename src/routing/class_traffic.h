// The console's traffic per tenant/class (GET /v1/admin/node's `classes`, docs/console.md
// "Traffic"): requests, errors and time of the actor API as this node's client listener saw
// them; a forwarded request is counted once, where it arrived.
//
// Bounded by what is deployed, not by what clients name. Any client, even one without a
// token, can send requests for /v1/actors/<tenant>/<class>/... with names that exist
// nowhere; a row per name would grow the node's memory and every /v1/admin/cluster answer
// without end. So a request gets its class's own row only when the class is known to be
// deployed (the caller says: ActorHost knows a class it loaded, and a request the front
// routed to an actor, run here or forwarded to its holder, is of a class an actor of which
// was started); every other request is counted in the one row kUnknownClassRow. Past
// kMaxTrafficClasses deployed classes, the rest share kOtherClassesRow.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/time.h"

namespace wk {

struct ClassTraffic {
  std::uint64_t requests = 0;
  std::uint64_t client_errors = 0;  // 4xx
  std::uint64_t errors = 0;         // 5xx
  double seconds = 0;               // summed, from arrival to answer
};

// Deployed classes a node keeps a row each for.
inline constexpr std::size_t kMaxTrafficClasses = 1'000;
// Requests for a class this node does not know to be deployed.
inline constexpr std::string_view kUnknownClassRow = "(unknown class)";
// Requests for deployed classes past kMaxTrafficClasses.
inline constexpr std::string_view kOtherClassesRow = "(other)";

class ClassTrafficTable {
 public:
  // Whether tenant/class_name is deployed, as far as the caller knows.
  using Deployed = std::function<bool(const std::string& tenant, const std::string& class_name)>;

  // The tenant and class an actor API target (/v1/actors/<tenant>/<class>/<name>...) names,
  // if it is one with valid names; nullopt otherwise (not counted).
  static std::optional<std::pair<std::string, std::string>> ClassOf(std::string_view target);

  // Counts one request for target that was answered with status after took. deployed is
  // asked only for a class that has no row yet.
  void Record(std::string_view target, int status, Duration took, const Deployed& deployed);

  // "<tenant>/<class>", kUnknownClassRow or kOtherClassesRow -> counts.
  const std::map<std::string, ClassTraffic>& rows() const { return rows_; }

 private:
  std::map<std::string, ClassTraffic> rows_;
  std::size_t class_rows_ = 0;  // rows of deployed classes
};

}  // namespace wk
