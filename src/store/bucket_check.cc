#include "store/bucket_check.h"

#include <optional>

namespace wk {
namespace {

std::string Body(const std::string& nonce, int step) {
  return "wasmkeep-bucket-check 1\nnonce " + nonce + "\nstep " + std::to_string(step) + "\n";
}

Status UndecidedStatus(const std::string& what, const Status& s) {
  return Retryable("bucket check: " + what + ": " + s.ToString());
}

// What a write of the probe came to: applied (with a version), refused by its condition,
// or a failure to pass on. A reply that was lost is settled by reading the object back:
// the body tells which step's write it holds.
struct Outcome {
  enum class Kind { kApplied, kRefused, kFailed } kind = Kind::kFailed;
  std::optional<Version> version;  // kApplied (the read's token after a lost reply)
  Status failure;                  // kFailed
  bool read_back = false;          // settled by reading back after a lost reply
};

Task<Outcome> Probe(ObjectStore& store, const std::string& key, const std::string& body, Precondition condition,
                    const std::string& previous_body, const std::string& what, CallOptions call) {
  Outcome out;
  std::string sent = body;
  auto put = co_await store.Put(key, std::move(sent), std::move(condition), call);
  if (put.ok()) {
    out.kind = Outcome::Kind::kApplied;
    out.version = *put;
    co_return out;
  }
  if (put.code() == Code::kPreconditionFailed) {
    out.kind = Outcome::Kind::kRefused;
    co_return out;
  }
  if (put.code() != Code::kUnknownOutcome) {
    out.failure = put.code() == Code::kRetryable ? UndecidedStatus(what, put.status()) : put.status();
    co_return out;
  }
  out.read_back = true;
  auto back = co_await store.Get(key, call);
  if (back.ok() && back->body == body) {
    out.kind = Outcome::Kind::kApplied;
    out.version = back->version;
  } else if (back.ok() && !previous_body.empty() && back->body == previous_body) {
    // Not applied (yet). For a write the bucket must refuse that is what we expect; for
    // one it must apply it is undecided: the caller says which.
    out.kind = Outcome::Kind::kRefused;
  } else {
    out.failure = UndecidedStatus(what + " (its reply was lost)", back.ok() ? Retryable("the probe object changed")
                                                                             : back.status());
  }
  co_return out;
}

}  // namespace

Task<Status> CheckBucketOnce(ObjectStore& store, std::string key, std::string nonce, CallOptions call) {
  const std::string where = store.Describe() + " (" + key + ")";
  const std::string body1 = Body(nonce, 1), body2 = Body(nonce, 2);

  // 1. Writable at all.
  Outcome first = co_await Probe(store, key, body1, Precondition::None(), "", "probe write", call);
  if (first.kind != Outcome::Kind::kApplied) co_return first.failure;
  const Version v1 = *first.version;

  // 2. If-Match with the version the bucket just returned must apply.
  Outcome second = co_await Probe(store, key, body2, Precondition::IfMatch(v1), body1, "If-Match probe", call);
  if (second.kind == Outcome::Kind::kFailed) co_return second.failure;
  if (second.kind == Outcome::Kind::kRefused) {
    // A lost reply that has not landed proves nothing; a 412 is a proof only if nobody
    // changed the object since step 1.
    if (second.read_back) co_return Retryable("bucket check: the If-Match probe's reply was lost; probing again");
    auto now = co_await store.Get(key, call);
    if (!now.ok()) co_return UndecidedStatus("reading back the probe", now.status());
    if (now->body != body1) co_return Retryable("bucket check: the probe object changed meanwhile; probing again");
    std::string hint = store.IfMatchRefusedHint();
    co_return InvalidArgument("the bucket refused a write conditioned (If-Match) on the version it had just returned: " +
                              where + " cannot hold WasmKeep's records as configured" +
                              (hint.empty() ? std::string() : "; " + hint));
  }

  // 3. If-Match on a version that is no longer current must be refused.
  Outcome stale = co_await Probe(store, key, Body(nonce, 3), Precondition::IfMatch(v1), body2, "stale If-Match probe", call);
  if (stale.kind == Outcome::Kind::kFailed) co_return stale.failure;
  if (stale.kind == Outcome::Kind::kApplied) {
    co_return InvalidArgument("the bucket applied a write conditioned (If-Match) on a version that was no longer "
                              "current: " + where + " ignores If-Match, and WasmKeep needs it to keep one owner per actor");
  }

  // 4. If-None-Match: * on an existing key must be refused.
  Outcome create = co_await Probe(store, key, Body(nonce, 4), Precondition::IfNoneMatchAny(), body2, "If-None-Match probe", call);
  if (create.kind == Outcome::Kind::kFailed) co_return create.failure;
  if (create.kind == Outcome::Kind::kApplied) {
    co_return InvalidArgument("the bucket applied a create-only write (If-None-Match: *) over an existing object: " +
                              where + " ignores If-None-Match, and WasmKeep needs it");
  }
  co_return Status::Ok();
}

}  // namespace wk
