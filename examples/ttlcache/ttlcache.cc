// ttlcache: a cache entry with a time to live that deletes itself (one actor per cached
// key: acme/ttlcache/session-42). docs/alarms.md.
//
//   PUT /?ttl_ms=<ms>   body: the value; stores it until now + ttl_ms (1 ms to 30 days),
//                       replacing any earlier value and time to live; answers "stored\n"
//   GET /               200 with the value while it lives; 404 once it expired
//   DELETE /            removes it now ("deleted\n", or 404 if there was none)
//
// The actor's alarm is the expiry: when it fires, the handler deletes the value, so an
// expired entry costs no storage, even if nobody reads it again (the node wakes the actor
// for its alarm). Until the alarm has run, a GET still checks the time itself, so an entry
// is never served past its time to live, whatever the alarm's lateness.
#include <string>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kValue = "value";
constexpr std::string_view kExpires = "expires_at";
constexpr int64_t kMaxTtlMs = 30LL * 24 * 3600 * 1000;

bool Live() {
  auto expires = wasmkeep::storage::get_int64(kExpires);
  return expires && *expires > wasmkeep::now_ms() && wasmkeep::storage::get(kValue).has_value();
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (!req.path().empty() && req.path() != "/") {
    res.text(404, "one entry per actor: GET, PUT /?ttl_ms=<ms>, DELETE at the actor's path\n");
    return;
  }
  if (req.method() == "GET") {
    if (!Live()) {
      res.text(404, "no live entry\n");
      return;
    }
    res.status(200).write(*wasmkeep::storage::get(kValue));
    return;
  }
  if (req.method() == "PUT") {
    auto ttl = req.query_param("ttl_ms");
    int64_t ms = 0;
    if (ttl && !ttl->empty() && ttl->size() <= 11 && ttl->find_first_not_of("0123456789") == std::string::npos) {
      ms = std::stoll(*ttl);
    }
    if (ms < 1 || ms > kMaxTtlMs) {
      res.text(400, "PUT /?ttl_ms=<1 to 2592000000> with the value as the body\n");
      return;
    }
    const int64_t expires = wasmkeep::now_ms() + ms;
    wasmkeep::storage::put(kValue, req.body());
    wasmkeep::storage::put_int64(kExpires, expires);
    wasmkeep::alarm::set(expires);  // replaces the earlier entry's expiry
    res.text(200, "stored\n");
    return;
  }
  if (req.method() == "DELETE") {
    const bool had = Live();
    wasmkeep::storage::delete_all();
    wasmkeep::alarm::del();
    res.text(had ? 200 : 404, had ? "deleted\n" : "no live entry\n");
    return;
  }
  res.header("Allow", "GET, PUT, DELETE");
  res.text(405, "use GET, PUT /?ttl_ms=<ms> or DELETE\n");
}

// The expiry: the entry deletes itself.
void OnAlarm() { wasmkeep::storage::delete_all(); }

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_ALARM_HANDLER(OnAlarm)
