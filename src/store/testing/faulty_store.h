// FaultyStore: an ObjectStore decorator that injects faults into a real backend, for the
// multi-process cluster tests (tests/cluster): the real-runtime sibling of mem://'s fault
// hooks. Never configured in production: `wasmkeep serve` enables it only through the
// WASMKEEP_DEBUG_FAULTS environment variable (a test hook, docs/DEVELOPING.md, "Test
// hooks"), and logs loudly when it does. The faults are FaultSpec's fields below, each
// named as in WASMKEEP_DEBUG_FAULTS (comma-separated NAME=VALUE).
//
// Threading: as the wrapped store; the Env's loop thread.
#pragma once

#include <memory>
#include <string>

#include "env/env.h"
#include "store/store_wrapper.h"

namespace wk {

struct FaultSpec {
  // lose_put_reply=N: every Nth put is applied, then reported kUnknownOutcome (a reply lost
  // after the write landed).
  int lose_put_reply_every = 0;  // 0: never
  // outage_file=PATH: while PATH exists, every request fails kRetryable before it is sent
  // (the bucket unreachable from this node).
  std::string outage_file;       // empty: none
  // outage_prefix=P: limits outage_file to keys starting with P (say owners/).
  std::string outage_prefix;     // empty: every key
  // unknown_first_put=P: the first put to a key starting with P is applied, then reported
  // kUnknownOutcome, and the next read of that key fails kRetryable (an acquisition that
  // cannot tell whether it landed).
  std::string unknown_first_put;  // empty: none
  // lost_first_put=P: the first put to a key starting with P is NOT applied but reported
  // kUnknownOutcome, and the next read of that key fails kRetryable (an acquisition that
  // was lost, and cannot tell).
  std::string lost_first_put;     // empty: none
  // slow_put_ms=MS: every put waits MS milliseconds (on the Env's timers) before it is
  // sent: it lands, and is answered, that much later.
  int slow_put_ms = 0;            // 0: no delay
  // slow_put_prefix=P: limits slow_put_ms to keys starting with P (say wal/).
  std::string slow_put_prefix;    // empty: every key
  // outage_body=TEXT: limits outage_file to puts whose body contains TEXT (say
  // `owner nobody`: releases refused, acquisitions let through).
  std::string outage_body;        // empty: any body
  // hold_file=PATH: while PATH exists, a put waits (polled every 20 ms, on the Env's timers)
  // before it is sent: a write in flight that the test lets go.
  std::string hold_file;          // empty: none
  // hold_prefix=P: limits hold_file to keys starting with P (say nodes/).
  std::string hold_prefix;        // empty: every key
  // slow_reply_ms=MS: every put is applied at once and answered MS milliseconds later.
  int slow_reply_ms = 0;          // 0: no delay
  // slow_reply_prefix=P: limits slow_reply_ms to keys starting with P (say owners/).
  std::string slow_reply_prefix;  // empty: every key
  bool any() const {
    return lose_put_reply_every > 0 || !outage_file.empty() || !unknown_first_put.empty() ||
           !lost_first_put.empty() || slow_put_ms > 0 || !hold_file.empty() || slow_reply_ms > 0;
  }
};

// Parses the WASMKEEP_DEBUG_FAULTS syntax; kInvalidArgument names the bad item.
Result<FaultSpec> ParseFaultSpec(std::string_view text);

class FaultyStore final : public StoreWrapper {
 public:
  // env: the loop whose timers delay slow puts.
  FaultyStore(Env& env, std::unique_ptr<ObjectStore> inner, FaultSpec spec);

  Task<Result<GetOutput>> Get(std::string key, CallOptions options) override;
  Task<Result<ObjectMeta>> Head(std::string key, CallOptions options) override;
  Task<Result<Version>> Put(std::string key, std::string body, Precondition condition,
                            CallOptions options) override;
  Task<Status> Delete(std::string key, Precondition condition, CallOptions options) override;
  Task<Result<ListPage>> List(ListOptions options, CallOptions call) override;
  std::string Describe() const override { return inner().Describe() + " (with injected faults)"; }

  std::uint64_t lost_replies() const { return lost_replies_; }

 private:
  // put_body: the body of a put (outage_body limits the outage to some puts).
  bool InOutage(std::string_view key, const std::string* put_body = nullptr) const;
  // Waits ms milliseconds; false if cancelled first.
  Task<bool> SlowDown(int ms);
  // Waits while hold_file exists; false if cancelled first.
  Task<bool> Hold();
  void PollHold(Latch<bool> released);

  Env& env_;
  FaultSpec spec_;
  std::uint64_t puts_ = 0;
  std::uint64_t lost_replies_ = 0;
  bool unknown_put_done_ = false;
  bool lost_put_done_ = false;
  std::string fail_next_read_of_;  // the key whose next read fails
};

}  // namespace wk
