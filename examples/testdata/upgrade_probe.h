// The upgrade probe: one class in three versions (upgrade_v1.cc, _v2.cc, _v3.cc define
// PROBE_VERSION and include this), for the tests of class versions (docs/tenants.md,
// "Class versions"). Each version keeps a counter in its own format:
//   v1: key "n", decimal;  v2 and v3: key "count", "#<n>".
// v2 and v3 export wk_on_upgrade(from): they convert the counter to their format and append
// "<from>><to>" to the key "migrations" (comma-separated), so a test sees each migration an
// actor's state went through, once each. v3's migration fails (returns 1) when the counter is
// odd, writing a key first (which must not be kept).
//   GET  /      "v<V> n=<counter> migrations=<list>"
//   POST /inc   adds 1 to the counter (in this version's format)
#include <string>

#include "wasmkeep.hpp"

namespace {

std::string ToString(int64_t n) { return std::to_string(n); }

int64_t ParseCount(std::string_view text) {
  int64_t n = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9') n = n * 10 + (c - '0');
  }
  return n;
}

// The counter, read in whichever format the state holds (a v1 state read by v2 before its
// migration would be a defect the tests would see: v2 reads only its own key).
int64_t Count() {
#if PROBE_VERSION == 1
  return ParseCount(wasmkeep::storage::get("n").value_or("0"));
#else
  return ParseCount(wasmkeep::storage::get("count").value_or("#0"));
#endif
}

void SetCount(int64_t n) {
#if PROBE_VERSION == 1
  wasmkeep::storage::put("n", ToString(n));
#else
  wasmkeep::storage::put("count", "#" + ToString(n));
#endif
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.method() == "POST" && req.path() == "/inc") {
    SetCount(Count() + 1);
    res.text(200, ToString(Count()) + "\n");
    return;
  }
  res.text(200, "v" + ToString(PROBE_VERSION) + " n=" + ToString(Count()) +
                    " migrations=" + wasmkeep::storage::get("migrations").value_or("") + "\n");
}

#if PROBE_VERSION >= 2
int Upgrade(int from) {
  int64_t n = 0;
  if (auto v1 = wasmkeep::storage::get("n")) {
    n = ParseCount(*v1);
    wasmkeep::storage::del("n");
  } else {
    n = ParseCount(wasmkeep::storage::get("count").value_or("#0"));
  }
  wasmkeep::storage::put("count", "#" + ToString(n));
  std::string list = wasmkeep::storage::get("migrations").value_or("");
  list += (list.empty() ? "" : ",") + ToString(from) + ">" + ToString(PROBE_VERSION);
  wasmkeep::storage::put("migrations", list);
#if PROBE_VERSION == 3
  if (n % 2 == 1) {
    wasmkeep::storage::put("half-done", "must not be kept");
    return 1;
  }
#endif
  return 0;
}
#endif

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
#if PROBE_VERSION >= 2
WASMKEEP_UPGRADE_HANDLER(Upgrade)
#endif
