// The bucket check (ADR 0020 §6, "Start order: the bucket check first"): before a node
// writes anything the protocol relies on, it proves with one probe that the bucket applies
// conditional writes the way WasmKeep needs them. A bucket that refuses a correct If-Match
// (Ceph RGW with a quoted ETag), or ignores one (a server without conditional writes), is
// found at start, with the setting to change, instead of failing later in ways that look
// like fences and lost races.
//
// The probe, on the node's own key control/bucket-check/<node id> (each body unique: a
// nonce and the step, so two writes never share an S3 ETag):
//   1. PUT, unconditional                         -> v1 (the bucket is writable)
//   2. PUT If-Match v1                            -> must apply (v2). Refused: GET; if the
//                                                    object is still step 1's body, the bucket
//                                                    refuses If-Match with the very version it
//                                                    returned: kInvalidArgument with the hint
//   3. PUT If-Match v1 (now stale)                -> must be refused: applied means If-Match
//                                                    is ignored: kInvalidArgument
//   4. PUT If-None-Match: * (the key exists)      -> must be refused: applied means
//                                                    If-None-Match is ignored: kInvalidArgument
// Four writes and at most one read, once per start. A write whose reply was lost is settled
// by reading the object back (its body names the step). A transient failure (kRetryable, an
// object another writer changed meanwhile, a lost reply the read cannot settle) is
// kRetryable: the caller probes again later; kFatal (credentials, a missing bucket) is
// returned as is.
//
// Threading: Env loop thread (it only calls the store). Simulator-clean.
#pragma once

#include <string>

#include "base/status.h"
#include "store/object_store.h"

namespace wk {

inline constexpr std::string_view kBucketCheckPrefix = "control/bucket-check/";

// One probe on key (bodies carry nonce). OK: conditional writes behave. kInvalidArgument:
// the bucket cannot hold WasmKeep's records as configured (the message names the setting
// when the store knows it: ObjectStore::IfMatchRefusedHint). kRetryable: undecided, probe
// again. kFatal and others: from the bucket.
Task<Status> CheckBucketOnce(ObjectStore& store, std::string key, std::string nonce, CallOptions call);

}  // namespace wk
