// alarm_probe: the cluster tests' alarm actor (tests/cluster/alarms_test.sh). Its log, in its
// durable state, says what happened to its alarm, so a test counts firings from the actors'
// own durable logs.
//
//   POST /set?t=<ms>[&rearm=<ms>[&count=<k>]][&fail=<n>]  sets the alarm (logs s<ms>); when
//                        it fires the handler re-arms it rearm ms later, k times (default
//                        once), and fails (a trap) while its retry count is below n
//   POST /del            deletes the alarm (logs d)
//   GET                  the log: s<ms> | d | f<ms>:<retry>:<now_ms>, comma-separated
#include <stdlib.h>

#include <string>

#include "wasmkeep.hpp"

namespace {

void Log(const std::string& op) {
  std::string log = wasmkeep::storage::get("log").value_or("");
  wasmkeep::storage::put("log", log.empty() ? op : log + "," + op);
}

int64_t Num(const std::optional<std::string>& s) { return s && !s->empty() ? atoll(s->c_str()) : 0; }

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  if (req.method() == "GET") {
    res.text(200, wasmkeep::storage::get("log").value_or(""));
    return;
  }
  if (req.method() == "POST" && req.path() == "/set") {
    const int64_t t = Num(req.query_param("t"));
    wasmkeep::alarm::set(t);
    wasmkeep::storage::put_int64("armed", t);
    wasmkeep::storage::put_int64("rearm", Num(req.query_param("rearm")));
    const int64_t count = Num(req.query_param("count"));
    wasmkeep::storage::put_int64("count", count > 0 ? count : 1);
    wasmkeep::storage::put_int64("fail", Num(req.query_param("fail")));
    Log("s" + std::to_string(t));
    res.text(200, "set\n");
    return;
  }
  if (req.method() == "POST" && req.path() == "/del") {
    wasmkeep::alarm::del();
    Log("d");
    res.text(200, "deleted\n");
    return;
  }
  res.text(404, "GET, POST /set?t=<ms>, POST /del\n");
}

int32_t OnAlarm() {
  const int32_t retry = wasmkeep::alarm::retry_count();
  if (retry < wasmkeep::storage::get_int64("fail").value_or(0)) __builtin_trap();
  const int64_t armed = wasmkeep::storage::get_int64("armed").value_or(-1);
  const int64_t now = wasmkeep::now_ms();
  Log("f" + std::to_string(armed) + ":" + std::to_string(retry) + ":" + std::to_string(now));
  const int64_t rearm = wasmkeep::storage::get_int64("rearm").value_or(0);
  wasmkeep::storage::put_int64("fail", 0);
  const int64_t left = wasmkeep::storage::get_int64("count").value_or(1);
  if (rearm > 0 && left > 0) {
    wasmkeep::storage::put_int64("count", left - 1);
    wasmkeep::storage::put_int64("armed", now + rearm);
    wasmkeep::alarm::set(now + rearm);
    Log("s" + std::to_string(now + rearm));
  }
  return 0;
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_ALARM_HANDLER(OnAlarm)
