// Messages between actors, the state side (docs/messages.md, issue 35; the delivery is
// built on this). A message an event sends is an outbox entry of the sender: a system entry
// (storage.h, Batch::system) committed in the event's own batch, so it exists exactly when
// the batch is durable and not at all when the event fails. Its sequence number comes from
// a counter kept beside it in the same batch, so numbers never repeat for a sender (a
// number of a batch that was never durable was never sent either). A receiver keeps, per
// sender, the highest number it applied, written in the batch of the handler's writes: a
// delivery at or below it is answered "applied" without running anything, so a message
// takes effect once however often it is delivered. One sender's messages to one receiver
// are delivered one at a time, in order, so the record stays one number per sender.
//
// Guarantees: an outbox entry and the writes of the event that sent it are in one batch; a
// receiver's applied record and the handler's writes are in one batch. Threading: pure
// functions and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actor/storage.h"
#include "base/broken_models.h"
#include "base/ids.h"
#include "base/status.h"

namespace wk::actor {

// The system entries' prefixes and keys.
inline constexpr std::string_view kOutboxPrefix = "msg-out/";   // msg-out/<seq, 20 digits>
inline constexpr std::string_view kDeadPrefix = "msg-dead/";    // msg-dead/<seq, 20 digits>
inline constexpr std::string_view kSendSeqKey = "msg-seq";      // the last number issued
inline constexpr std::string_view kAppliedPrefix = "msg-in/";   // msg-in/<sender's tenant/class/name>

struct MessageLimits {
  std::size_t max_message_bytes = 64 * 1024;  // actors.max_message_bytes
  std::size_t max_messages_per_event = 64;    // actors.max_messages_per_event
  // messages.wake_after_ms: how long after its outbox filled a sender's wake time is
  // (KeepOutboxWake). While the sender is resident its node delivers, so the wake time only
  // matters once nobody holds it; shorter costs an alarm event that runs nothing for a
  // resident sender whose outbox has not emptied by then.
  std::int64_t wake_after_ms = 5000;
};
inline constexpr std::int64_t kMaxWakeAfterMs = 3'600'000;

// One message waiting in its sender's outbox (or parked dead).
struct OutboxMessage {
  ActorId to;
  std::string body;
  std::int64_t sent_ms = 0;      // the sending event's time
  std::uint32_t attempts = 0;    // deliveries that failed so far
  std::int64_t next_try_ms = 0;  // not before this (back-off after a failure)
  std::string last_error;        // why the last delivery failed
  friend bool operator==(const OutboxMessage&, const OutboxMessage&) = default;
};

std::string EncodeOutboxMessage(const OutboxMessage& message);
// Strict: an error naming what is wrong for anything but a well-formed entry.
Result<OutboxMessage> DecodeOutboxMessage(std::string_view bytes);

// The receiver `to` names, for a message sent by `sender`: "class/name" (the sender's
// tenant) or "tenant/class/name" with the sender's own tenant. kInvalidArgument naming the
// value for anything else (another tenant included: messages stay inside a tenant).
Result<ActorId> MessageTarget(const ActorId& sender, std::string_view to);

// What a message event hands the receiver's handler (wk_on_message).
struct IncomingMessage {
  ActorId from;
  std::uint64_t seq = 0;
  std::string body;
  std::int32_t retry_count = 0;  // earlier runs of this message that failed
};

// The outbox's wake entry (storage.h, kWakeKey; the outbox is its only user): while a sender
// has messages to deliver its state holds a wake time, so the alarm index's scanners start
// it should its node die and nobody call it (docs/messages.md, "When the sender's node
// dies"). Keeps it in step in a batch about to be committed on `storage`: adds one
// (now_ms + wake_after_ms) when the outbox will not be empty and none is held, deletes it
// when the outbox will be empty. The time is not moved while the outbox stays non-empty, so
// a busy sender writes no index entry per message, only one per time its outbox fills.
// The broken model outbox-never-wakes adds none.
void KeepOutboxWake(const ActorStorage& storage, Batch& batch, std::int64_t now_ms, std::int64_t wake_after_ms,
                    const BrokenModels& broken);

// The messages one event sends, collected while it runs and added to its batch at the end.
class MessageSendBuffer {
 public:
  // storage: the sender's (its counter is read once, here; it must outlive the buffer).
  MessageSendBuffer(const ActorStorage& storage, MessageLimits limits, BrokenModels broken = {});
  // Queues a message; returns its sequence number. kInvalidArgument naming the limit or the
  // value (bad name, another tenant, a body over max_message_bytes, more than
  // max_messages_per_event in one event): the event fails, nothing is sent.
  Result<std::uint64_t> Send(const ActorId& sender, std::string_view to, std::string_view body, std::int64_t now_ms);
  // The outbox entries, the counter and the wake entry (KeepOutboxWake), into the event's
  // batch (nothing if none was sent).
  void AddTo(Batch& batch) const;
  std::size_t size() const { return queued_.size(); }

 private:
  const ActorStorage& storage_;
  MessageLimits limits_;
  BrokenModels broken_;
  std::uint64_t last_seq_ = 0;
  std::int64_t first_sent_ms_ = 0;
  std::vector<std::pair<std::uint64_t, OutboxMessage>> queued_;
};

// The sender's outbox, lowest numbers first, at most `max` entries. An unreadable entry is
// an error (the actor's storage is damaged).
Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>> ListOutbox(const ActorStorage& storage, std::size_t max);
// Parked (dead) messages, lowest numbers first, at most `max`.
Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>> ListDead(const ActorStorage& storage, std::size_t max);

// The batch a sender commits when a delivery ended: delivered (the entry removed), failed
// (attempts, back-off and error rewritten), or given up (moved to the dead entries).
Batch OutboxDelivered(std::uint64_t seq);
Batch OutboxFailed(std::uint64_t seq, const OutboxMessage& updated);
Batch OutboxParked(std::uint64_t seq, const OutboxMessage& message);
// An operator's retry of a dead message: it goes back to the outbox under a new number (the
// receiver may have applied later ones from this sender since, so the old number would be
// taken for applied), behind the sender's other messages.
// The wake entry is the committer's (KeepOutboxWake).
Result<Batch> RetryDead(const ActorStorage& storage, std::uint64_t seq, std::int64_t now_ms);
// An operator's drop of a dead message: its entry deleted, nothing sent. kNotFound naming
// the number if the sender has no such dead message.
Result<Batch> DropDead(const ActorStorage& storage, std::uint64_t seq);
// The last sequence number the sender issued (msg-seq; 0: none yet): after a committed
// RetryDead, the retried message's new number.
std::uint64_t LastSentSeq(const ActorStorage& storage);

// The highest number from `sender` this receiver applied (0: none).
std::uint64_t AppliedSeq(const ActorStorage& storage, const ActorId& sender);
// Records in the handler's batch that `seq` from `sender` is applied.
void RecordApplied(Batch& batch, const ActorId& sender, std::uint64_t seq);

// Everything an actor's state holds of messages (its msg-* system entries), as `wasmkeep
// actor messages` and the node's GET .../messages show it (docs/messages.md, "Watching
// it"): at most `max` entries of each list, `truncated` set when one had more.
struct MessageListing {
  std::vector<std::pair<std::uint64_t, OutboxMessage>> outbox;  // lowest numbers first
  std::vector<std::pair<std::uint64_t, OutboxMessage>> dead;    // lowest numbers first
  std::vector<std::pair<std::string, std::uint64_t>> applied;   // sender (tenant/class/name), highest applied
  bool truncated = false;
};
// Collects a listing from visited system entries (ListMessages below).
class MessageListingBuilder {
 public:
  explicit MessageListingBuilder(std::size_t max) : max_(max) {}
  // A ListVisitor's body: copies what it keeps, never calls back into the storage.
  bool Visit(std::string_view key, std::string_view value);
  // kFatal naming the key for an entry that cannot be read (the actor's state is damaged).
  Result<MessageListing> Finish() &&;

 private:
  std::size_t max_;
  std::size_t counts_[3] = {0, 0, 0};
  std::vector<std::pair<std::string, std::string>> raw_;
  bool truncated_ = false;
};
// `state`: anything with ListSystem(ListQuery, ListVisitor) (an ActorStorage, a StateMap);
// read under whatever lock its ListSystem takes.
template <typename State>
Result<MessageListing> ListMessages(const State& state, std::size_t max) {
  MessageListingBuilder builder(max);
  ListQuery q;
  q.start = "msg-";
  q.prefix = true;
  state.ListSystem(q, [&builder](std::string_view key, std::string_view value) { return builder.Visit(key, value); });
  return std::move(builder).Finish();
}

}  // namespace wk::actor
