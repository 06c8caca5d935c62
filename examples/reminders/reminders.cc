// reminders: a reminder service per actor (one actor per user: acme/reminders/user-42).
// It keeps the reminders that are not due yet, fires them in order with the actor's one
// alarm, and keeps a log of what fired (docs/alarms.md).
//
//   POST /add?at=<ms>   body: the reminder's text; answers its id ("<at>-<n>\n"). A time
//                       in the past fires at the next alarm (at once).
//   GET  /              the pending reminders, one per line: "<id> <text>"
//   GET  /fired         the fired ones, in the order they fired: "<id> fired_at=<ms> retry=<n> <text>"
//   POST /cancel?id=<id>  removes a pending reminder (404 if there is none)
//
// The alarm always holds the time of the earliest pending reminder (or none). When it
// fires, the handler moves every reminder due by then, oldest first, to the fired log and
// sets the alarm to the next one, all in one atomic batch: a reminder fires at least once
// and is never lost, and a handler that fails (a trap, say) is retried by the node with its
// writes discarded, so a reminder is never logged twice for one run.
//
// Keys: "pending/<at, 19 digits>/<n, 10 digits>" (key order is firing order), "fired/<seq>",
// and the counters "next-id", "next-fired".
#include <cstdio>
#include <string>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kPending = "pending/";
constexpr std::string_view kFired = "fired/";

std::string Padded(int64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", digits, static_cast<long long>(v));
  return buf;
}

// "<at>-<n>" from "pending/<at>/<n>", and back.
std::string IdOf(std::string_view key) {
  std::string_view rest = key.substr(kPending.size());
  const size_t slash = rest.find('/');
  return std::to_string(std::stoll(std::string(rest.substr(0, slash)))) + "-" +
         std::to_string(std::stoll(std::string(rest.substr(slash + 1))));
}
std::optional<std::string> KeyOf(std::string_view id) {
  const size_t dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) return std::nullopt;
  for (char c : id) {
    if (c != '-' && (c < '0' || c > '9')) return std::nullopt;
  }
  return std::string(kPending) + Padded(std::stoll(std::string(id.substr(0, dash))), 19) + "/" +
         Padded(std::stoll(std::string(id.substr(dash + 1))), 10);
}
int64_t AtOf(std::string_view key) { return std::stoll(std::string(key.substr(kPending.size(), 19))); }

// The alarm follows the earliest pending reminder.
void ArmForEarliest() {
  auto first = wasmkeep::storage::list({.prefix = std::string(kPending), .limit = 1});
  if (first.empty()) {
    wasmkeep::alarm::del();
  } else {
    wasmkeep::alarm::set(AtOf(first[0].first));
  }
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.method() == "GET" && (req.path().empty() || req.path() == "/")) {
    std::string out;
    for (const auto& [key, text] : wasmkeep::storage::list({.prefix = std::string(kPending)})) {
      out += IdOf(key) + " " + text + "\n";
    }
    res.text(200, out);
    return;
  }
  if (req.method() == "GET" && req.path() == "/fired") {
    std::string out;
    for (const auto& [key, line] : wasmkeep::storage::list({.prefix = std::string(kFired)})) out += line + "\n";
    res.text(200, out);
    return;
  }
  if (req.method() == "POST" && req.path() == "/add") {
    auto at = req.query_param("at");
    if (!at || at->empty() || at->size() > 18 || at->find_first_not_of("0123456789") != std::string::npos) {
      res.text(400, "POST /add?at=<ms since the epoch> with the reminder's text as the body\n");
      return;
    }
    const int64_t n = wasmkeep::storage::get_int64("next-id").value_or(0) + 1;
    wasmkeep::storage::put_int64("next-id", n);
    const std::string key = std::string(kPending) + Padded(std::stoll(*at), 19) + "/" + Padded(n, 10);
    wasmkeep::storage::put(key, req.body());
    ArmForEarliest();
    res.text(200, IdOf(key) + "\n");
    return;
  }
  if (req.method() == "POST" && req.path() == "/cancel") {
    auto id = req.query_param("id");
    auto key = id ? KeyOf(*id) : std::nullopt;
    if (!key || !wasmkeep::storage::del(*key)) {
      res.text(404, "no pending reminder with that id\n");
      return;
    }
    ArmForEarliest();
    res.text(200, "cancelled\n");
    return;
  }
  if (req.method() != "GET" && req.method() != "POST") {
    res.header("Allow", "GET, POST");
    res.text(405, "use GET /, GET /fired, POST /add?at=<ms>, POST /cancel?id=<id>\n");
    return;
  }
  res.text(404, "use GET /, GET /fired, POST /add?at=<ms>, POST /cancel?id=<id>\n");
}

// Fires every reminder due now, in order, then re-arms for the next one.
void OnAlarm() {
  const int64_t now = wasmkeep::now_ms();
  int64_t seq = wasmkeep::storage::get_int64("next-fired").value_or(0);
  for (const auto& [key, text] : wasmkeep::storage::list({.prefix = std::string(kPending)})) {
    if (AtOf(key) > now) break;  // key order is time order
    ++seq;
    wasmkeep::storage::put(std::string(kFired) + Padded(seq, 10),
                           IdOf(key) + " fired_at=" + std::to_string(now) +
                               " retry=" + std::to_string(wasmkeep::alarm::retry_count()) + " " + text);
    wasmkeep::storage::del(key);
  }
  wasmkeep::storage::put_int64("next-fired", seq);
  ArmForEarliest();
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_ALARM_HANDLER(OnAlarm)
