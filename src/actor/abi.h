// ABI v1 (docs/abi.md): the host functions an actor module imports (`wasmkeep_v1` and the
// WASI preview 1 subset) and the exports it must have, on top of the engine's HostCall.
// Every function reads its event's EventContext; every pointer and length goes through
// HostCall::Range, so a bad one fails the event by name and touches nothing.
//
// Threading: the functions run on the worker thread of the event, inside the module's call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actor/messages.h"
#include "actor/sockets.h"
#include "actor/txn.h"
#include "actor/types.h"
#include "engine/engine.h"

namespace wk::actor {

// Everything one event's host calls need. Owned by the runtime for the event's duration.
struct EventContext {
  const ActorLimits* limits = nullptr;
  std::string actor;  // "tenant/class/name", for log attribution
  const Request* request = nullptr;  // null for an alarm event
  Response response;
  EventTxn* txn = nullptr;
  std::int64_t now_ms = 0;  // wall clock at the event's start (see runtime.h: frozen time)
  // An alarm event's retry count (alarm_retry_count); -1 for a request.
  std::int32_t alarm_retry_count = -1;
  // The actor itself (the sender of what message_send queues), the messages this event
  // sends (committed with its batch; null: message_send fails the event), and the message a
  // message event handles (null for any other event).
  const ActorId* self = nullptr;
  MessageSendBuffer* outbox = nullptr;
  const IncomingMessage* message = nullptr;
  // The event's WebSocket calls (actor/sockets.h): its view of the actor's connections and
  // what it sends; the socket event it handles, if any. Null: socket calls see no
  // connection and send nothing (an event run outside the runtime).
  SocketEventState* sockets = nullptr;
  // exec-durable: commit the batch so far and wait until durable; false if that failed.
  std::function<bool()> sync;
  std::string result;  // the result buffer
  std::string stdout_line, stderr_line;  // partial lines of fd_write
  std::uint64_t response_bytes = 0;
  // Bytes of log output (log and fd_write) this event may still write; beyond it output is
  // dropped with one warning. Host calls cannot be interrupted by the CPU watchdog, so every
  // host call's work is bounded by what the module passes, and this bounds the logging.
  std::uint64_t log_budget_bytes = 64 * 1024;
  bool log_truncated = false;

  // Flushes partial stdout/stderr lines to the log (at the end of an event).
  void FlushOutput();
};

// The import module of the WasmKeep host calls (the rest are WASI's).
inline constexpr std::string_view kAbiModule = "wasmkeep_v1";

// The host functions of ABI v1 plus WASI. One shared, immutable instance.
std::shared_ptr<const engine::HostInterface> AbiHostInterface();

// What an actor module exports: wk_on_request (required), wk_on_alarm, wk_on_message, the
// three wk_on_socket_* and wk_on_upgrade (optional). The
// engine checks "memory" itself; `_initialize` it calls if present.
const std::vector<engine::ExportSpec>& AbiExports();

inline constexpr std::string_view kRequestExport = "wk_on_request";
inline constexpr std::string_view kAlarmExport = "wk_on_alarm";
inline constexpr std::string_view kMessageExport = "wk_on_message";
inline constexpr std::string_view kSocketOpenExport = "wk_on_socket_open";
inline constexpr std::string_view kSocketMessageExport = "wk_on_socket_message";
inline constexpr std::string_view kSocketCloseExport = "wk_on_socket_close";
// wk_on_upgrade(from_version: i32) -> i32 (docs/abi.md, "Class versions"): converts a state
// an older version of the class committed, before the actor's first event on this one.
inline constexpr std::string_view kUpgradeExport = "wk_on_upgrade";

// The statuses an actor may answer (response_set_status): final ones only. A 1xx is not an
// answer, and what the server would make of one (a 500) must keep meaning "the event's
// writes were discarded" (docs/abi.md).
inline constexpr std::int32_t kMinResponseStatus = 200;
inline constexpr std::int32_t kMaxResponseStatus = 599;

}  // namespace wk::actor
