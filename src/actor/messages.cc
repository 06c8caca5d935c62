#include "actor/messages.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "base/bytes.h"

namespace wk::actor {
namespace {

constexpr std::uint8_t kOutboxVersion = 1;

std::string SeqDigits(std::uint64_t seq) {
  std::string digits = std::to_string(seq);
  return std::string(20 - digits.size(), '0') + digits;
}
std::string OutboxKey(std::uint64_t seq) { return std::string(kOutboxPrefix) + SeqDigits(seq); }
std::string DeadKey(std::uint64_t seq) { return std::string(kDeadPrefix) + SeqDigits(seq); }
std::string AppliedKey(const ActorId& sender) { return std::string(kAppliedPrefix) + sender.ToString(); }

std::optional<std::uint64_t> ParseSeq(std::string_view digits) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return v;
}

std::uint64_t StoredSeq(const ActorStorage& storage, std::string_view key) {
  auto v = storage.GetSystem(key);
  if (!v) return 0;
  return ParseSeq(*v).value_or(0);
}

Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>> ListUnder(const ActorStorage& storage,
                                                                      std::string_view prefix, std::size_t max) {
  // The visitor only copies (it must not call back into the storage).
  std::vector<std::pair<std::string, std::string>> raw;
  ListQuery q;
  q.start = std::string(prefix);
  q.prefix = true;
  storage.ListSystem(q, [&](std::string_view key, std::string_view value) {
    if (raw.size() == max) return false;
    raw.emplace_back(key, value);
    return true;
  });
  std::vector<std::pair<std::uint64_t, OutboxMessage>> out;
  for (auto& [key, value] : raw) {
    auto seq = ParseSeq(std::string_view(key).substr(prefix.size()));
    if (!seq) return Fatal("corrupt message key " + key);
    auto m = DecodeOutboxMessage(value);
    if (!m.ok()) return Fatal(key + ": " + m.status().message());
    out.emplace_back(*seq, std::move(*m));
  }
  return out;
}

}  // namespace

std::string EncodeOutboxMessage(const OutboxMessage& m) {
  std::string out;
  out.push_back(static_cast<char>(kOutboxVersion));
  PutBytes(out, m.to.ToString());
  PutBytes(out, m.body);
  PutI64(out, m.sent_ms);
  PutU32(out, m.attempts);
  PutI64(out, m.next_try_ms);
  PutBytes(out, m.last_error);
  return out;
}

Result<OutboxMessage> DecodeOutboxMessage(std::string_view bytes) {
  auto corrupt = [](std::string_view what) { return Fatal("corrupt outbox entry: " + std::string(what)); };
  ByteReader r(bytes);
  std::uint8_t version = 0;
  if (!r.U8(&version) || version != kOutboxVersion) return corrupt("unknown version");
  OutboxMessage m;
  std::string to;
  if (!r.Bytes(&to)) return corrupt("no receiver");
  auto id = ParseActorId(to);
  if (!id.ok()) return corrupt("bad receiver");
  m.to = std::move(*id);
  if (!r.Bytes(&m.body) || !r.I64(&m.sent_ms) || !r.U32(&m.attempts) || !r.I64(&m.next_try_ms) ||
      !r.Bytes(&m.last_error)) {
    return corrupt("truncated");
  }
  if (!r.empty()) return corrupt("trailing bytes");
  return m;
}

Result<ActorId> MessageTarget(const ActorId& sender, std::string_view to) {
  const std::size_t slashes = static_cast<std::size_t>(std::count(to.begin(), to.end(), '/'));
  std::string full = slashes == 1 ? sender.tenant + "/" + std::string(to) : std::string(to);
  auto id = ParseActorId(full);
  if (!id.ok()) {
    return InvalidArgument("message_send: '" + std::string(to).substr(0, 200) +
                           "' is not an actor's name (class/name or tenant/class/name): " + id.status().message());
  }
  if (id->tenant != sender.tenant) {
    return InvalidArgument("message_send: '" + id->ToString() + "' belongs to another tenant than " + sender.tenant +
                           ": messages stay within a tenant");
  }
  return id;
}

void KeepOutboxWake(const ActorStorage& storage, Batch& batch, std::int64_t now_ms, std::int64_t wake_after_ms,
                    const BrokenModels& broken) {
  // Will the outbox hold anything once the batch applies? A put of an entry says yes; else
  // an entry held now that the batch does not delete (the first such ends the search).
  std::set<std::string_view> deleted;
  bool filled = false;
  for (const Mutation& m : batch.system) {
    if (!m.key.starts_with(kOutboxPrefix)) continue;
    if (m.kind == Mutation::Kind::kPut) filled = true;
    if (m.kind == Mutation::Kind::kDelete) deleted.insert(m.key);
  }
  if (!filled) {
    ListQuery q;
    q.start = std::string(kOutboxPrefix);
    q.prefix = true;
    storage.ListSystem(q, [&](std::string_view key, std::string_view) {
      filled = !deleted.contains(key);
      return !filled;
    });
  }
  const bool held = storage.GetSystem(kWakeKey).has_value();
  if (filled && !held && !broken.on(BrokenModel::kOutboxNeverWakes)) {
    batch.system.push_back({Mutation::Kind::kPut, std::string(kWakeKey), EncodeWake(now_ms + wake_after_ms)});
  } else if (!filled && held) {
    batch.system.push_back({Mutation::Kind::kDelete, std::string(kWakeKey), {}});
  }
}

MessageSendBuffer::MessageSendBuffer(const ActorStorage& storage, MessageLimits limits, BrokenModels broken)
    : storage_(storage), limits_(limits), broken_(broken), last_seq_(StoredSeq(storage, kSendSeqKey)) {}

Result<std::uint64_t> MessageSendBuffer::Send(const ActorId& sender, std::string_view to, std::string_view body,
                                              std::int64_t now_ms) {
  if (queued_.size() >= limits_.max_messages_per_event) {
    return InvalidArgument("message_send: more than " + std::to_string(limits_.max_messages_per_event) +
                           " messages in one event (actors.max_messages_per_event)");
  }
  if (body.size() > limits_.max_message_bytes) {
    return InvalidArgument("message_send: a body of " + std::to_string(body.size()) + " bytes is over " +
                           std::to_string(limits_.max_message_bytes) + " (actors.max_message_bytes)");
  }
  auto target = MessageTarget(sender, to);
  if (!target.ok()) return target.status();
  OutboxMessage m;
  m.to = std::move(*target);
  m.body = std::string(body);
  m.sent_ms = now_ms;
  m.next_try_ms = 0;  // due at once
  if (queued_.empty()) first_sent_ms_ = now_ms;
  queued_.emplace_back(++last_seq_, std::move(m));
  return last_seq_;
}

void MessageSendBuffer::AddTo(Batch& batch) const {
  if (queued_.empty()) return;
  for (const auto& [seq, m] : queued_) {
    batch.system.push_back({Mutation::Kind::kPut, OutboxKey(seq), EncodeOutboxMessage(m)});
  }
  batch.system.push_back({Mutation::Kind::kPut, std::string(kSendSeqKey), std::to_string(last_seq_)});
  KeepOutboxWake(storage_, batch, first_sent_ms_, limits_.wake_after_ms, broken_);
}

Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>> ListOutbox(const ActorStorage& storage, std::size_t max) {
  return ListUnder(storage, kOutboxPrefix, max);
}

Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>> ListDead(const ActorStorage& storage, std::size_t max) {
  return ListUnder(storage, kDeadPrefix, max);
}

Batch OutboxDelivered(std::uint64_t seq) {
  Batch b;
  b.system.push_back({Mutation::Kind::kDelete, OutboxKey(seq), {}});
  return b;
}

Batch OutboxFailed(std::uint64_t seq, const OutboxMessage& updated) {
  Batch b;
  b.system.push_back({Mutation::Kind::kPut, OutboxKey(seq), EncodeOutboxMessage(updated)});
  return b;
}

Batch OutboxParked(std::uint64_t seq, const OutboxMessage& message) {
  Batch b;
  b.system.push_back({Mutation::Kind::kDelete, OutboxKey(seq), {}});
  b.system.push_back({Mutation::Kind::kPut, DeadKey(seq), EncodeOutboxMessage(message)});
  return b;
}

Result<Batch> RetryDead(const ActorStorage& storage, std::uint64_t seq, std::int64_t now_ms) {
  auto raw = storage.GetSystem(DeadKey(seq));
  if (!raw) return NotFound("no dead message " + std::to_string(seq));
  auto m = DecodeOutboxMessage(*raw);
  if (!m.ok()) return m.status();
  const std::uint64_t fresh = StoredSeq(storage, kSendSeqKey) + 1;
  m->attempts = 0;
  m->next_try_ms = 0;  // due at once
  m->sent_ms = now_ms;  // sent again now
  m->last_error.clear();
  Batch b;
  b.system.push_back({Mutation::Kind::kDelete, DeadKey(seq), {}});
  b.system.push_back({Mutation::Kind::kPut, OutboxKey(fresh), EncodeOutboxMessage(*m)});
  b.system.push_back({Mutation::Kind::kPut, std::string(kSendSeqKey), std::to_string(fresh)});
  return b;
}

Result<Batch> DropDead(const ActorStorage& storage, std::uint64_t seq) {
  if (!storage.GetSystem(DeadKey(seq))) return NotFound("no dead message " + std::to_string(seq));
  Batch b;
  b.system.push_back({Mutation::Kind::kDelete, DeadKey(seq), {}});
  return b;
}

std::uint64_t LastSentSeq(const ActorStorage& storage) { return StoredSeq(storage, kSendSeqKey); }

std::uint64_t AppliedSeq(const ActorStorage& storage, const ActorId& sender) {
  return StoredSeq(storage, AppliedKey(sender));
}

void RecordApplied(Batch& batch, const ActorId& sender, std::uint64_t seq) {
  batch.system.push_back({Mutation::Kind::kPut, AppliedKey(sender), std::to_string(seq)});
}

bool MessageListingBuilder::Visit(std::string_view key, std::string_view value) {
  int kind = -1;
  if (key.starts_with(kOutboxPrefix)) {
    kind = 0;
  } else if (key.starts_with(kDeadPrefix)) {
    kind = 1;
  } else if (key.starts_with(kAppliedPrefix)) {
    kind = 2;
  }
  if (kind < 0) return true;  // msg-seq
  if (counts_[kind] == max_) {
    truncated_ = true;
    return true;  // the other lists may still have room
  }
  ++counts_[kind];
  raw_.emplace_back(key, value);
  return true;
}

Result<MessageListing> MessageListingBuilder::Finish() && {
  MessageListing out;
  out.truncated = truncated_;
  for (auto& [key, value] : raw_) {
    if (key.starts_with(kAppliedPrefix)) {
      auto seq = ParseSeq(value);
      if (!seq) return Fatal("corrupt applied record " + key);
      out.applied.emplace_back(key.substr(kAppliedPrefix.size()), *seq);
      continue;
    }
    const bool outbox = key.starts_with(kOutboxPrefix);
    const std::string_view prefix = outbox ? kOutboxPrefix : kDeadPrefix;
    auto seq = ParseSeq(std::string_view(key).substr(prefix.size()));
    if (!seq) return Fatal("corrupt message key " + key);
    auto m = DecodeOutboxMessage(value);
    if (!m.ok()) return Fatal(key + ": " + m.status().message());
    (outbox ? out.outbox : out.dead).emplace_back(*seq, std::move(*m));
  }
  return out;
}

}  // namespace wk::actor
