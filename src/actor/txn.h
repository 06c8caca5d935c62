// EventTxn: one event's storage operations as one atomic batch over an ActorStorage.
// Reads see the event's own writes (puts, deletes, delete_all) layered over the committed
// state; nothing reaches the storage until TakeBatch, and a failed event simply drops the
// transaction. Also enforces the key, value and stored-bytes limits, and the tenant's
// stored_bytes quota (stored_quota.h: the event's growth reserved before a put takes it,
// settled when the transaction ends), since only here are the event's sizes known.
//
// Threading: used by one event on one worker thread.
#pragma once

#include <map>

#include "actor/storage.h"
#include "actor/stored_quota.h"
#include "actor/types.h"

namespace wk::actor {

class EventTxn {
 public:
  // `quota`: where the tenant's growth is reserved; its tenants outlive this.
  EventTxn(const ActorStorage& storage, const ActorLimits& limits, StoredQuotaScope quota = {});
  // Settles the reservation with what the storage holds now (what the event committed).
  ~EventTxn();
  EventTxn(const EventTxn&) = delete;
  EventTxn& operator=(const EventTxn&) = delete;

  std::optional<std::string> Get(std::string_view key) const;
  // Returns true if the key existed (as this event sees it).
  bool Delete(std::string_view key);
  Status Put(std::string_view key, std::string_view value);
  void DeleteAll();
  // Visits up to `limit` entries (0: no limit) in order, merged with this event's writes.
  void List(const ListQuery& q, std::uint32_t limit, const ListVisitor& visit) const;

  std::optional<std::int64_t> Alarm() const;
  void SetAlarm(std::optional<std::int64_t> time_ms) { alarm_ = time_ms; }

  // Stored bytes as this event sees them (committed state plus its own writes).
  std::uint64_t StoredBytes() const { return stored_bytes_; }

  // Moves the writes out as a batch (empty if nothing was written) and starts afresh over
  // the storage, which the caller is about to Commit the batch to.
  Batch TakeBatch();

  // Checks a key against the limits (non-empty, at most max_key_bytes); the error names
  // `what` (the host call) and the setting.
  Status CheckKey(std::string_view what, std::string_view key) const;

 private:
  const ActorStorage& storage_;
  const ActorLimits& limits_;
  // nullopt: deleted by this event.
  std::map<std::string, std::optional<std::string>, std::less<>> writes_;
  bool cleared_ = false;
  std::optional<std::optional<std::int64_t>> alarm_;
  std::uint64_t stored_bytes_;
  StoredQuotaScope quota_;
  const std::uint64_t base_;   // the storage's stored bytes when the event began
  std::uint64_t reserved_ = 0;  // growth over base_ reserved in quota_
  bool took_writes_ = false;    // TakeBatch moved out writes (the storage may have changed)
};

}  // namespace wk::actor
