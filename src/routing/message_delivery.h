// MessageDelivery: delivers the messages in the outboxes of the actors this node holds
// (docs/messages.md, "Who delivers"). The runtime tells it when a resident actor's outbox has
// messages (ActorRuntimeCore's on_outbox: an event that sent some is durable, or an actor
// started with some); it then reads the outbox through the actor's gates
// (EventHost::ReadOutbox: only what is durable under a valid hold), delivers each receiver's
// messages in their order through `deliver` (Front::DeliverMessage: routed as a request is,
// to wherever the receiver lives), and records the outcomes in the sender's state
// (EventHost::CommitSystem): delivered (the entry removed, only on the receiver's durable
// answer), failed (attempts, back-off), parked as dead.
//
// Guarantees: one sender's messages to one receiver are delivered one at a time in order;
// a message is never removed from the outbox without a 200 from its receiver; nothing is
// dropped: a handler failure counts towards max_attempts, after which the message is parked
// (msg-dead/), a missing class or handler parks it at once, and unavailability (503, a peer
// that does not answer) is retried with back-off without end.
//
// Threading: the Env loop thread. Simulator-clean: the actor only through an EventHost,
// receivers only through `deliver`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actor/event_host.h"
#include "actor/messages.h"
#include "base/broken_models.h"
#include "base/ids.h"
#include "base/metrics.h"
#include "base/time.h"
#include "env/env.h"
#include "net/http_types.h"

namespace wk {

// The [messages] settings (docs/messages.md, "Settings"; docs/configuration.md).
struct MessageDeliveryOptions {
  // The first back-off after a failed delivery; it doubles per failure up to max_retry.
  Duration first_retry = std::chrono::seconds(1);
  Duration max_retry = std::chrono::seconds(60);
  // Handler failures (500) before a message is parked as dead.
  int max_attempts = 8;
  // Outbox entries one round reads (and may deliver).
  std::size_t round_entries = 256;
};
// Ranges; the error names the setting.
Status ValidateMessageDeliveryOptions(const MessageDeliveryOptions& options);

struct MessageDeliveryStats {
  std::uint64_t delivered = 0;   // 200 "applied": the handler's run committed
  std::uint64_t duplicates = 0;  // 200 "duplicate": applied before (a repeat delivery)
  std::uint64_t failed = 0;      // the handler failed (counted towards max_attempts)
  std::uint64_t unavailable = 0;  // not known (503, no answer): retried
  std::uint64_t parked = 0;      // parked as dead
  std::uint64_t rounds = 0;      // outbox reads
  std::uint64_t settle_failures = 0;  // outcomes that could not be recorded (the sender left)
  // From the sending event's time to the receiver's answer.
  Histogram latency_seconds{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
};

class MessageDelivery {
 public:
  // `deliver`: routes one message to its receiver (Front::DeliverMessage's answers).
  using DeliverFn = std::function<Task<ServerResponse>(ActorId receiver, actor::IncomingMessage message)>;
  MessageDelivery(Env& env, actor::EventHost& host, DeliverFn deliver, MessageDeliveryOptions options,
                  BrokenModels broken = {});
  ~MessageDelivery();
  MessageDelivery(const MessageDelivery&) = delete;
  MessageDelivery& operator=(const MessageDelivery&) = delete;

  // The sender's outbox has messages (the runtime's on_outbox): delivers them, now or as the
  // running round for it ends.
  void Kick(const ActorId& sender);
  // Asked before each message is delivered, with the sender's tenant: nullopt to go on, or
  // how long to wait before asking again (a tenant's messages_per_second, TenantLimits). The
  // lane waits in place, so the order of its messages is kept. Unset: no wait.
  using AdmitFn = std::function<std::optional<Duration>(const std::string& tenant)>;
  void SetAdmission(AdmitFn admit) { admit_ = std::move(admit); }
  // Cancels every delivery (a stopping node); what was not recorded is delivered by the
  // sender's next holder.
  void Stop();

  const MessageDeliveryStats& stats() const { return stats_; }
  const MessageDeliveryOptions& options() const { return options_; }
  std::size_t senders() const { return senders_.size(); }

 private:
  struct Sender {
    TaskHandle task;
    bool again = false;  // kicked while a round ran: read once more
    std::optional<Latch<bool>> wake;  // set while it sleeps until a back-off ends
    // Receivers that were unavailable: not before this wall time (kept here, not in the
    // state: an outage is not the message's fault and costs no write).
    std::map<ActorId, std::pair<std::int64_t, int>> unavailable;
  };
  using Entry = std::pair<std::uint64_t, actor::OutboxMessage>;
  // One receiver's messages of a round, in order: `entries` point into the round's outbox
  // read (its outcomes are written there), `messages` are the lane's own copies.
  struct Lane {
    ActorId to;
    std::vector<Entry*> entries;
    std::vector<Entry> messages;
  };
  // What a round's lane tasks share (kept alive by them, so a cancelled round leaves
  // nothing dangling).
  struct RoundState {
    explicit RoundState(Env& env) : all(env, [] { return false; }) {}
    MessageDelivery* self = nullptr;  // touched only while *alive
    std::shared_ptr<bool> alive;
    ActorId sender;
    std::vector<Lane> lanes;
    std::vector<std::vector<std::pair<Entry*, ServerResponse>>> answers;  // per lane
    std::size_t left = 0;
    Latch<bool> all;
  };
  static Task<ServerResponse> DeliverOne(std::shared_ptr<RoundState> round, const Entry& e);
  static Task<void> RunLane(std::shared_ptr<RoundState> round, std::size_t i, bool out_of_order);
  static Task<void> Drive(std::shared_ptr<bool> alive, MessageDelivery* self, ActorId sender);
  // One round; returns the wall time of the next due retry (nullopt: nothing left), or an
  // error if the outbox could not be read or the outcomes not recorded.
  Task<Result<std::optional<std::int64_t>>> Round(ActorId sender);
  Duration Backoff(int failures) const;
  std::int64_t WallMs() const;
  // wasmkeep_message_latency_seconds, for a message the receiver answered applied or
  // duplicate just now.
  void ObserveLatency(const actor::OutboxMessage& m, const ServerResponse& r);
  void Publish();

  Env& env_;
  actor::EventHost& host_;
  DeliverFn deliver_;
  AdmitFn admit_;
  MessageDeliveryOptions options_;
  BrokenModels broken_;
  std::map<ActorId, Sender> senders_;
  MessageDeliveryStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The answer to one delivery, from the receiver's message event (EventHost::HandleMessage),
// as Front::DeliverMessage gives it: 200 "applied" or "duplicate", 404 (no class, no
// wk_on_message), 413 (too large), 500 (the handler failed), 503 (anything not known).
ServerResponse MessageAnswer(const actor::EventResult& result, std::string_view receiver);

// Publishes wasmkeep_messages_total{outcome} and wasmkeep_message_latency_seconds.
// REQUIRES: delivery outlives every RenderText(), which runs on the loop thread.
void PublishMessageMetrics(MetricsRegistry& registry, const MessageDelivery& delivery);

}  // namespace wk
