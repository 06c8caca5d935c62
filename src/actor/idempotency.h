// Idempotent requests (docs/http-api.md, "Idempotent requests"): a request with an
// `Idempotency-Key` header runs at most once per actor and key. Its answer is stored as a
// system entry of the actor (storage.h, Batch::system) in the same batch as the event's
// writes, so the record is durable exactly when the writes are; a later request with the
// key is answered from the record without running the actor. Records older than the TTL
// count as absent and are pruned a few at a time by later keyed events.
//
// Guarantees: one record per (actor, key); a record always matches the batch that holds the
// writes it answers for. Threading: pure functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actor/storage.h"
#include "actor/types.h"
#include "base/status.h"

namespace wk::actor {

// The header (the IETF httpapi draft's name).
inline constexpr std::string_view kIdempotencyHeader = "idempotency-key";
// A key is 1..255 bytes of visible ASCII (the draft's sf-string, quoted or bare).
inline constexpr std::size_t kMaxIdempotencyKeyBytes = 255;
// Records deleted by one keyed event at most (expired ones, or the oldest to stay within
// max_bytes): pruning keeps up with any rate of new keys (each event adds one and may remove
// this many) without a long batch.
inline constexpr std::size_t kIdempotencyPrunePerEvent = 16;
// The system entries' prefixes: the record, and the index by creation time used to prune.
inline constexpr std::string_view kIdempotencyRecordPrefix = "idem/";
inline constexpr std::string_view kIdempotencyTimePrefix = "idem-at/";
// Set by the front on an answer served from a record (the original answer, not a new run):
// EventResult::replayed.
inline constexpr std::string_view kReplayedHeader = "X-Wasmkeep-Idempotent-Replay";

// What the core hands the executor for a keyed request.
struct IdempotentRequest {
  std::string key;
  std::string fingerprint;  // RequestFingerprint of the first use
  std::int64_t ttl_ms = 0;
  std::uint64_t max_answer_bytes = 0;  // answer bodies kept up to this; larger ones are not kept
  // The actor's records together (ActorStorage::SystemBytes) stay within this: the oldest
  // go first, before their TTL if need be, so a hot actor's state (and its snapshots) do not
  // grow with its request rate times the TTL.
  std::uint64_t max_bytes = 1 << 20;
};

// The key of request's Idempotency-Key header: nullopt when there is none; an error naming
// the header when it is repeated, empty, too long or not visible ASCII.
Result<std::optional<std::string>> IdempotencyKeyOf(const Request& request);

// SHA-256 over the method, path, query and body: what must match on a retry.
std::string RequestFingerprint(const Request& request);

// A stored answer.
struct IdempotencyRecord {
  std::string fingerprint;
  std::int64_t created_ms = 0;
  Response response;
  bool body_kept = true;  // false: the body was over max_answer_bytes and is not stored
};

std::string EncodeIdempotencyRecord(const IdempotencyRecord& record);
// Strict: an error for anything but a well-formed record of this version.
Result<IdempotencyRecord> DecodeIdempotencyRecord(std::string_view bytes);

// The record for `key` in `storage`, if there is one younger than ttl_ms at now_ms. An
// unreadable record is an error (the actor's storage is damaged: the event is refused
// rather than run a second time).
Result<std::optional<IdempotencyRecord>> FindIdempotencyRecord(const ActorStorage& storage, std::string_view key,
                                                               std::int64_t now_ms, std::int64_t ttl_ms);

// What a retry gets from `record`: its answer, marked replayed (EventResult::replayed).
EventResult ReplayedResult(const IdempotencyRecord& record);

// Adds to `batch` the record of `request`'s answer `response` at now_ms (replacing an
// expired one), and deletes, oldest first and up to kIdempotencyPrunePerEvent, the records
// older than the TTL and those the new one pushes past max_bytes. Returns how many of the
// latter (records forgotten before their TTL).
std::size_t AddIdempotencyRecord(const IdempotentRequest& request, const Response& response, std::int64_t now_ms,
                                 const ActorStorage& storage, Batch& batch);

}  // namespace wk::actor
