// The bucket check: before a node writes anything the protocol relies on, four probe writes
// on control/bucket-check/<node id> prove the bucket applies If-Match and If-None-Match as
// WasmKeep needs (docs/node-lease.md, "Upgrading from per-actor leases"). Guarantees: a
// bucket that refuses a correct If-Match or ignores a condition is kInvalidArgument with the
// setting to change; an undecided probe is kRetryable; kFatal is passed through. Threading:
// Env loop thread; simulator-clean. Details (the four steps): docs/internals.md, "The bucket
// check".
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
