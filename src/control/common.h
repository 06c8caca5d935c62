// What the control-plane files (tenants.h, tokens.h, cluster_secret.h, classes.h) share:
// the bounds of their read-modify-write loops and listings, and the helpers of their
// retries and hex fields.
//
// Every control object is a text format FROZEN once written (a change is a new header
// version), read and written with the strict line codec every frozen format shares
// (base/line_format.h): decoders answer kFatal("corrupt ...: line N: ...") for anything
// else, never "empty" or "absent".
//
// Threading: the constants and the pure helpers are usable anywhere; Backoff and ListKeys
// run on the Env loop of the given env or store. No sockets, threads or clocks of their
// own: the control plane runs on mem:// in unit tests and in the simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

// Attempts of one read-modify-write of a tenant record (conflicts with other writers,
// retryable failures, unknown outcomes resolved by re-reading) before giving up.
inline constexpr int kMaxUpdateAttempts = 10;
// Upper bound of the random pause before a retry, per attempt so far (attempt 3 waits up
// to 3 * this): spreads racing writers apart.
inline constexpr Duration kRetryBackoffStep = std::chrono::milliseconds(20);
// Bounds a listing (1000 keys a page): 10 million keys.
inline constexpr int kMaxListPages = 10'000;

// Helpers of the control-plane files only; not an interface for other modules.
// Splits an Authorization header value "Bearer <token>" (scheme case-insensitive, blanks
// around the token trimmed); kInvalidArgument if it is not one. Tenant and operator tokens
// alike (tokens.h, operators.h).
Result<std::string_view> BearerToken(std::string_view authorization);

namespace detail {

// Lowercase hex of n bytes.
std::string Hex(const unsigned char* data, std::size_t n);
// Whether s is exactly n lowercase hex characters.
bool IsLowerHex(std::string_view s, std::size_t n);

// Whether a failed read (or write) may be retried: kRetryable or kUnknownOutcome.
bool IsRetryableRead(Code c);
// A random pause before retry number `attempt` (2, 3, ...), so racing writers spread out.
Task<void> Backoff(Env& env, int attempt);
// The answer after kMaxUpdateAttempts failed attempts of `what`, the last failing with last.
Status GaveUp(const std::string& what, const Status& last);
// Every entry under prefix (key and version), in byte order; kFatal past kMaxListPages pages.
Task<Result<std::vector<ListEntry>>> ListEntries(ObjectStore& store, std::string prefix, CallOptions call);
// Every key under prefix, in byte order (at most kMaxListPages pages).
Task<Result<std::vector<std::string>>> ListKeys(ObjectStore& store, std::string prefix, CallOptions call);

// The listings' loop (ListTenants, ListClasses, ListQuarantine): every object under prefix,
// read and decoded in key order. parse(key) gives the key's Summary, or nullopt for a key
// that is not one of ours (skipped); a Summary whose error parse already set is listed
// without a read. decode(body, summary) fills in the rest or sets summary.error: a corrupt
// object is listed, never skipped. An object removed since the listing is skipped; any
// other failed read ends the listing with its status.
template <typename Summary, typename Parse, typename Decode>
Task<Result<std::vector<Summary>>> ListAndDecode(ObjectStore& store, std::string prefix, CallOptions call,
                                                 Parse parse, Decode decode) {
  auto keys = co_await ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::vector<Summary> out;
  for (const std::string& key : *keys) {
    std::optional<Summary> summary = parse(key);
    if (!summary) continue;
    if (summary->error.empty()) {
      auto got = co_await store.Get(key, call);
      if (!got.ok()) {
        if (got.code() == Code::kNotFound) continue;  // removed since the listing
        co_return got.status();
      }
      decode(std::string_view(got->body), *summary);
    }
    out.push_back(std::move(*summary));
  }
  co_return out;
}

}  // namespace detail
}  // namespace wk::control
