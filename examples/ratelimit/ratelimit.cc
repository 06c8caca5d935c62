// ratelimit: a token bucket per actor (one actor per client, API key, IP, ...).
//
//   POST /take     takes one token: 200 with the whole tokens left ("9\n"), or 429 with
//                  Retry-After (whole seconds until a token is back) when the bucket is empty
//   GET  /         the whole tokens available now, without taking one
//   POST /config?capacity=C&refill_per_sec=R
//                  this actor's own capacity and refill rate (whole numbers, 1..1,000,000)
//
// The bucket starts full and refills continuously from now_ms(). State, in storage:
//   "milli_tokens"  tokens in thousandths, so a refill of 1 token/s is 1 per ms, exact in
//                   integers ("10000" is a full bucket of 10)
//   "refilled_ms"   the now_ms() up to which "milli_tokens" is refilled
//   "capacity", "refill_per_sec"   set by /config; absent: the constants below
// A 429 writes nothing: the refill it computed follows from the stored state and the clock,
// so the next request computes it again.
#include <string>

#include "wasmkeep.hpp"

namespace {

constexpr int64_t kDefaultCapacityTokens = 10;
constexpr int64_t kDefaultRefillTokensPerSec = 1;
// Bounds of /config; they keep every product below (milli-tokens, elapsed * rate) far from
// int64 overflow.
constexpr int64_t kMaxCapacityTokens = 1'000'000;
constexpr int64_t kMaxRefillTokensPerSec = 1'000'000;
constexpr int64_t kMilli = 1000;  // milli-tokens per token

constexpr std::string_view kMilliTokensKey = "milli_tokens";
constexpr std::string_view kRefilledKey = "refilled_ms";
constexpr std::string_view kCapacityKey = "capacity";
constexpr std::string_view kRefillKey = "refill_per_sec";

struct Bucket {
  int64_t capacity_tokens;
  int64_t refill_tokens_per_sec;
  int64_t milli_tokens;  // after refilling up to refilled_ms
  int64_t refilled_ms;
};

// Reads the bucket and refills it up to now. A clock that went backwards refills nothing
// (and never takes tokens away).
Bucket LoadAndRefill(int64_t now_ms) {
  Bucket b;
  b.capacity_tokens = wasmkeep::storage::get_int64(kCapacityKey).value_or(kDefaultCapacityTokens);
  b.refill_tokens_per_sec = wasmkeep::storage::get_int64(kRefillKey).value_or(kDefaultRefillTokensPerSec);
  const int64_t full = b.capacity_tokens * kMilli;
  b.milli_tokens = wasmkeep::storage::get_int64(kMilliTokensKey).value_or(full);
  b.refilled_ms = wasmkeep::storage::get_int64(kRefilledKey).value_or(now_ms);
  if (now_ms > b.refilled_ms) {
    // R tokens per second is R milli-tokens per millisecond.
    const int64_t elapsed_ms = now_ms - b.refilled_ms;
    const int64_t ms_to_full = full / b.refill_tokens_per_sec + 1;
    b.milli_tokens = elapsed_ms >= ms_to_full ? full : b.milli_tokens + elapsed_ms * b.refill_tokens_per_sec;
    b.refilled_ms = now_ms;
  }
  if (b.milli_tokens > full) b.milli_tokens = full;  // a /config may have lowered the capacity
  return b;
}

void Store(const Bucket& b) {
  wasmkeep::storage::put_int64(kMilliTokensKey, b.milli_tokens);
  wasmkeep::storage::put_int64(kRefilledKey, b.refilled_ms);
}

void Take(wasmkeep::Response& res) {
  Bucket b = LoadAndRefill(wasmkeep::now_ms());
  if (b.milli_tokens >= kMilli) {
    b.milli_tokens -= kMilli;
    Store(b);
    res.text(200, std::to_string(b.milli_tokens / kMilli) + "\n");
    return;
  }
  // Time until one whole token is back, rounded up to whole seconds (at least 1).
  const int64_t wait_ms = (kMilli - b.milli_tokens + b.refill_tokens_per_sec - 1) / b.refill_tokens_per_sec;
  const int64_t wait_seconds = wait_ms <= 0 ? 1 : (wait_ms + 999) / 1000;
  res.header("Retry-After", std::to_string(wait_seconds));
  res.text(429, "rate limited: retry in " + std::to_string(wait_seconds) + " s\n");
}

// Reads query parameter name as a whole number in [1, max]; nullopt (and a 400) otherwise.
std::optional<int64_t> BoundedParam(const wasmkeep::Request& req, wasmkeep::Response& res,
                                    std::string_view name, int64_t max) {
  std::optional<std::string> text = req.query_param(name);
  std::optional<int64_t> value = text ? wasmkeep::parse_int64(*text) : std::nullopt;
  if (!value || *value < 1 || *value > max) {
    res.text(400, std::string(name) + " must be a whole number from 1 to " + std::to_string(max) + "\n");
    return std::nullopt;
  }
  return value;
}

void Configure(const wasmkeep::Request& req, wasmkeep::Response& res) {
  const int64_t now_ms = wasmkeep::now_ms();
  std::optional<int64_t> capacity = BoundedParam(req, res, "capacity", kMaxCapacityTokens);
  if (!capacity) return;
  std::optional<int64_t> refill = BoundedParam(req, res, "refill_per_sec", kMaxRefillTokensPerSec);
  if (!refill) return;
  // Refill at the old rate up to now, then switch: the new rate counts from now on.
  Bucket b = LoadAndRefill(now_ms);
  b.capacity_tokens = *capacity;
  b.refill_tokens_per_sec = *refill;
  if (b.milli_tokens > b.capacity_tokens * kMilli) b.milli_tokens = b.capacity_tokens * kMilli;
  wasmkeep::storage::put_int64(kCapacityKey, b.capacity_tokens);
  wasmkeep::storage::put_int64(kRefillKey, b.refill_tokens_per_sec);
  Store(b);
  res.text(200, "capacity " + std::to_string(*capacity) + ", refill " + std::to_string(*refill) + "/s\n");
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  const std::string& method = req.method();
  const std::string& path = req.path();
  if (method == "POST" && path == "/take") return Take(res);
  if (method == "POST" && path == "/config") return Configure(req, res);
  if (method == "GET" && (path == "/" || path.empty())) {
    Bucket b = LoadAndRefill(wasmkeep::now_ms());
    return (void)res.text(200, std::to_string(b.milli_tokens / kMilli) + "\n");
  }
  if (path == "/take" || path == "/config") {
    res.header("Allow", "POST");
    return (void)res.text(405, "method not allowed\n");
  }
  res.text(404, "use POST /take, GET /, POST /config?capacity=C&refill_per_sec=R\n");
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
