#include "store/testing/faulty_store.h"

#include <sys/stat.h>

#include <charconv>

#include "base/log.h"

namespace wk {

Result<FaultSpec> ParseFaultSpec(std::string_view text) {
  FaultSpec spec;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) return InvalidArgument("fault '" + std::string(item) + "' needs =VALUE");
    std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
    if (name == "lose_put_reply") {
      int n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || p != value.data() + value.size() || n < 1) {
        return InvalidArgument("lose_put_reply must be a positive integer (got '" + std::string(value) + "')");
      }
      spec.lose_put_reply_every = n;
    } else if (name == "unknown_first_put") {
      if (value.empty()) return InvalidArgument("unknown_first_put needs a key prefix");
      spec.unknown_first_put = std::string(value);
    } else if (name == "lost_first_put") {
      if (value.empty()) return InvalidArgument("lost_first_put needs a key prefix");
      spec.lost_first_put = std::string(value);
    } else if (name == "slow_put_ms") {
      int n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || p != value.data() + value.size() || n < 1 || n > 60'000) {
        return InvalidArgument("slow_put_ms must be an integer in [1, 60000] (got '" + std::string(value) + "')");
      }
      spec.slow_put_ms = n;
    } else if (name == "slow_put_prefix") {
      spec.slow_put_prefix = std::string(value);
    } else if (name == "slow_reply_ms") {
      int n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || p != value.data() + value.size() || n < 1 || n > 60'000) {
        return InvalidArgument("slow_reply_ms must be an integer in [1, 60000] (got '" + std::string(value) + "')");
      }
      spec.slow_reply_ms = n;
    } else if (name == "slow_reply_prefix") {
      spec.slow_reply_prefix = std::string(value);
    } else if (name == "outage_body") {
      spec.outage_body = std::string(value);
    } else if (name == "hold_file") {
      if (value.empty()) return InvalidArgument("hold_file needs a path");
      spec.hold_file = std::string(value);
    } else if (name == "hold_prefix") {
      spec.hold_prefix = std::string(value);
    } else if (name == "outage_prefix") {
      spec.outage_prefix = std::string(value);
    } else if (name == "outage_file") {
      if (value.empty()) return InvalidArgument("outage_file needs a path");
      spec.outage_file = std::string(value);
    } else {
      return InvalidArgument("unknown fault '" + std::string(name) + "' (known: lose_put_reply, outage_file, outage_prefix, outage_body, unknown_first_put, lost_first_put, slow_put_ms, slow_put_prefix, slow_reply_ms, slow_reply_prefix, hold_file, hold_prefix)");
    }
  }
  return spec;
}

FaultyStore::FaultyStore(Env& env, std::unique_ptr<ObjectStore> inner, FaultSpec spec)
    : StoreWrapper(std::move(inner)), env_(env), spec_(std::move(spec)) {}

// A timer and a Latch rather than Env::SleepFor: a small delayed-write coroutine built on
// SleepFor crashed with SIGILL at its first resume under GCC 12 (docs/DEVELOPING.md).
Task<bool> FaultyStore::SlowDown(int ms) {
  Latch<bool> done(env_, [] { return false; });
  const MonoTime deadline = env_.MonoNow() + std::chrono::milliseconds(ms);
  const Env::TimerId timer = env_.StartTimer(deadline, [done] { done.Set(true); });
  const bool slept = co_await done.Wait();
  if (!slept) env_.CancelTimer(timer);
  co_return slept;
}

namespace {
bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
}  // namespace

// A timer that re-arms itself while the file exists, and one Latch to await: a coroutine
// looping over SleepFor-style awaits crashed with SIGILL at its first resume under GCC 12
// (docs/DEVELOPING.md).
void FaultyStore::PollHold(Latch<bool> released) {
  if (!FileExists(spec_.hold_file)) {
    released.Set(true);
    return;
  }
  env_.StartTimer(env_.MonoNow() + std::chrono::milliseconds(20), [this, released] { PollHold(released); });
}

Task<bool> FaultyStore::Hold() {
  Latch<bool> released(env_, [] { return false; });
  PollHold(released);
  co_return co_await released.Wait();
}

bool FaultyStore::InOutage(std::string_view key, const std::string* put_body) const {
  if (spec_.outage_file.empty() || !key.starts_with(spec_.outage_prefix)) return false;
  // outage_body: only puts whose body holds that text (reads and other writes go through).
  if (!spec_.outage_body.empty() && (put_body == nullptr || put_body->find(spec_.outage_body) == std::string::npos)) {
    return false;
  }
  return FileExists(spec_.outage_file);
}

Task<Result<GetOutput>> FaultyStore::Get(std::string key, CallOptions options) {
  if (InOutage(key)) co_return Retryable("injected outage");
  if (!fail_next_read_of_.empty() && key == fail_next_read_of_) {
    fail_next_read_of_.clear();
    co_return Retryable("injected: read failed after an unknown write");
  }
  co_return co_await inner().Get(std::move(key), options);
}

Task<Result<ObjectMeta>> FaultyStore::Head(std::string key, CallOptions options) {
  if (InOutage(key)) co_return Retryable("injected outage");
  co_return co_await inner().Head(std::move(key), options);
}

Task<Result<Version>> FaultyStore::Put(std::string key, std::string body, Precondition condition,
                                       CallOptions options) {
  if (InOutage(key, &body)) co_return Retryable("injected outage");
  if (!spec_.hold_file.empty() && std::string_view(key).starts_with(spec_.hold_prefix) && FileExists(spec_.hold_file)) {
    WK_LOG_INFO("debug faults: put held", {{"key", key}});
    if (!co_await Hold()) co_return UnknownOutcome("injected hold cancelled before the put was sent");
    WK_LOG_INFO("debug faults: held put sent", {{"key", key}});
  }
  if (spec_.slow_put_ms > 0 && std::string_view(key).starts_with(spec_.slow_put_prefix)) {
    const bool slept = co_await SlowDown(spec_.slow_put_ms);
    if (!slept) co_return UnknownOutcome("injected delay cancelled before the put was sent");
  }
  const bool slow_reply = spec_.slow_reply_ms > 0 && std::string_view(key).starts_with(spec_.slow_reply_prefix);
  if (!spec_.lost_first_put.empty() && !lost_put_done_ && std::string_view(key).starts_with(spec_.lost_first_put)) {
    lost_put_done_ = true;
    fail_next_read_of_ = key;
    co_return UnknownOutcome("injected: the write was lost, its reply is unknown");
  }
  const bool make_unknown = !spec_.unknown_first_put.empty() && !unknown_put_done_ &&
                            std::string_view(key).starts_with(spec_.unknown_first_put);
  std::string written_key = key;
  auto result = co_await inner().Put(std::move(key), std::move(body), std::move(condition), options);
  if (make_unknown && result.ok()) {
    unknown_put_done_ = true;
    fail_next_read_of_ = written_key;
    co_return UnknownOutcome("injected: the write landed, its reply is unknown");
  }
  if (result.ok() && spec_.lose_put_reply_every > 0 && ++puts_ % spec_.lose_put_reply_every == 0) {
    ++lost_replies_;
    co_return UnknownOutcome("injected: reply lost after the write landed");
  }
  if (slow_reply && !co_await SlowDown(spec_.slow_reply_ms)) co_return UnknownOutcome("injected reply delay cancelled");
  co_return result;
}

Task<Status> FaultyStore::Delete(std::string key, Precondition condition, CallOptions options) {
  if (InOutage(key)) co_return Retryable("injected outage");
  co_return co_await inner().Delete(std::move(key), std::move(condition), options);
}

Task<Result<ListPage>> FaultyStore::List(ListOptions options, CallOptions call) {
  if (InOutage(options.prefix)) co_return Retryable("injected outage");
  co_return co_await inner().List(std::move(options), call);
}

}  // namespace wk
