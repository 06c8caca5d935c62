// The actor runtime's vocabulary: requests and responses as the actor sees them, the limits
// on one actor (each a setting of the [actors] section, docs/configuration.md), and how an
// event ended. Plain values; no threads, no engine types.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace wk::actor {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method = "GET";
  std::string path;   // after the actor's name: "" or "/..."
  std::string query;  // without '?'
  Headers headers;    // names as received; the ABI lowercases them
  std::string body;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
};

// What an event asks of the actor's WebSockets (actor/sockets.h, docs/abi.md "WebSockets").
struct SocketAction {
  enum class Kind : std::uint8_t { kSend, kBroadcast, kClose };
  Kind kind = Kind::kSend;
  std::int64_t id = 0;  // kSend, kClose
  std::string tag;      // kBroadcast ("" = every connection)
  // kBroadcast: the connections it goes to, as the event saw them (its tag resolved when the
  // event ran): a connection opened since, whose open event sent it what it needed, is not
  // sent it again.
  std::vector<std::int64_t> ids;
  std::shared_ptr<const std::string> data;  // kSend, kBroadcast
  bool binary = false;
  int code = 0;          // kClose
  std::string reason;    // kClose
};

struct SocketTagged {
  std::int64_t id = 0;
  std::string tag;
};

// What one event did with sockets, carried in its EventResult.
struct SocketEffects {
  std::vector<SocketAction> actions;  // released through the output gate, in order
  std::vector<SocketTagged> tags;     // kept once the handler succeeded
  bool empty() const { return actions.empty() && tags.empty(); }
};

// Limits on one actor (docs/abi.md, "Limits"). Each has a reason:
struct ActorLimits {
  // Linear memory per actor; imposed as the module's maximum at compile time.
  std::uint64_t max_memory_bytes = 64ull << 20;
  // CPU time of one event before the watchdog terminates it.
  std::uint32_t max_event_cpu_ms = 1000;
  std::uint64_t max_request_bytes = 1ull << 20;
  std::uint64_t max_response_bytes = 1ull << 20;
  // Keys and values: as Durable Objects (2 KiB keys, 128 KiB values), so one segment can
  // always carry one write.
  std::uint32_t max_key_bytes = 2048;
  std::uint32_t max_value_bytes = 128 * 1024;
  std::uint64_t max_stored_bytes = 64ull << 20;
  // Events waiting behind the running one; beyond it the actor is overloaded (503).
  std::uint32_t max_queued_events = 64;
  // The module file: compiling is done on the node, in time and memory that grow with it.
  std::uint64_t max_module_bytes = 64ull << 20;
  // Elements of all of a module's tables together, grown ones included, and of its element
  // segments (engine::ModuleLimits): tables live on the worker's V8 heap, about 32 bytes an
  // element per actor. Tables get maxima imposed to fit; larger initial sizes are refused.
  std::uint64_t max_table_elements = 65'536;
};

// Ranges of the settings above that have one, with their reasons.
// Deploys refuse larger modules anyway (server/control.h, kMaxModuleBytes).
inline constexpr std::uint64_t kMaxModuleBytesSetting = 64ull << 20;
// The worker's V8 heap must be able to take one table grown to the limit at once (8 bytes an
// element; engine::kHeapLimitSlackBytes is the room V8 gets past its heap limit).
inline constexpr std::uint64_t kMaxTableElementsSetting = 1'000'000;

// Checks relationships and ranges; the error names the setting.
Status ValidateLimits(const ActorLimits& limits);

// How an event ended, as the HTTP front maps it.
enum class EventOutcome : std::uint8_t {
  kOk,            // `response` is the actor's answer, durable
  kBadRequest,    // refused before the actor ran (body too large: 413)
  kNotFound,      // no such class (404)
  kOverloaded,    // the actor's queue is full (503 + Retry-After)
  kActorFailed,   // trap, CPU limit, bad host call, proc_exit, non-zero return (500)
  kUnavailable,   // storage could not restore or make the writes durable (503); retry
  kInvalidHeader, // a header the node reads is malformed, e.g. Idempotency-Key (400)
  kKeyReused,     // an Idempotency-Key first used with another method, path or body (422)
  kOverQuota,     // the tenant's resident_actors quota left no room here (429 + Retry-After)
};
std::string_view EventOutcomeName(EventOutcome o);

struct EventResult {
  EventOutcome outcome = EventOutcome::kOk;
  Response response;
  std::string error;  // for every outcome but kOk: what happened, naming the cause
  // Alarm events only (EventHost::HandleAlarm, alarm_event.h). kOk means the event's answer
  // was released through the output gate: everything it committed is durable. Then
  // `alarm_fired` says whether the handler ran and succeeded, and `alarm_after` is the
  // actor's alarm once the event's batch was committed (nullopt: none), as durable as the
  // answer. An alarm that was not due (or absent) runs nothing: kOk, not fired.
  // `indexed_after` is the indexed time then (the earlier of the alarm and the wake entry's
  // time, storage.h): what the alarm index judges its entries against.
  bool alarm_fired = false;
  std::optional<std::int64_t> alarm_after;
  std::optional<std::int64_t> indexed_after;
  // Requests with an Idempotency-Key (idempotency.h): the answer is the stored one of the
  // key's first use, not a new run ("1"; "body-omitted" when its body was too large to keep).
  std::string replayed;
  // Messages the event sent (actor/messages.h): in its committed batch, so sent once the
  // answer is released.
  std::size_t messages_sent = 0;
  // Message events (EventHost::HandleMessage): kOk with this set means the receiver had
  // applied the message already (its applied record covers it) and nothing ran.
  bool message_duplicate = false;
  // Any event: its socket calls (actor/sockets.h). The runtime hands them to its
  // SocketDirectory (tags once the handler succeeded, the rest once the answer is released).
  SocketEffects sockets;
  bool ok() const { return outcome == EventOutcome::kOk; }
};

}  // namespace wk::actor
