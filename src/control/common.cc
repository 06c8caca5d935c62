#include "control/common.h"

#include <algorithm>

#include "base/check.h"
#include "base/digest.h"

namespace wk::control::detail {

std::string Hex(const unsigned char* data, std::size_t n) {
  return ::wk::ToHex(std::string_view(reinterpret_cast<const char*>(data), n));
}

bool IsLowerHex(std::string_view s, std::size_t n) {
  if (s.size() != n) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsRetryableRead(Code c) { return c == Code::kRetryable || c == Code::kUnknownOutcome; }

// A random pause before retry number `attempt` (2, 3, ...), so racing writers spread out.
Task<void> Backoff(Env& env, int attempt) {
  const auto step_ns = static_cast<std::uint64_t>(kRetryBackoffStep.count());
  const Duration pause(static_cast<Duration::rep>(env.RandomBelow(step_ns * static_cast<std::uint64_t>(attempt)) + 1));
  (void)co_await env.SleepFor(pause);
}

Status GaveUp(const std::string& what, const Status& last) {
  if (last.code() == Code::kUnknownOutcome) return UnknownOutcome(what + ": " + last.message());
  return Retryable(what + " after " + std::to_string(kMaxUpdateAttempts) + " attempts: " + last.message());
}

// Every key under prefix, in byte order.
Task<Result<std::vector<ListEntry>>> ListEntries(ObjectStore& store, std::string prefix, CallOptions call) {
  std::vector<ListEntry> entries;
  ListOptions options;
  options.prefix = prefix;
  for (int pages = 0; pages < kMaxListPages; ++pages) {
    auto page = co_await store.List(options, call);
    if (!page.ok()) co_return page.status();
    for (auto& e : page->entries) entries.push_back(std::move(e));
    if (!page->next_continuation) co_return entries;
    options.continuation = *page->next_continuation;
  }
  co_return Fatal("more than " + std::to_string(kMaxListPages) + " pages under " + prefix);
}

Task<Result<std::vector<std::string>>> ListKeys(ObjectStore& store, std::string prefix, CallOptions call) {
  auto entries = co_await ListEntries(store, std::move(prefix), call);
  if (!entries.ok()) co_return entries.status();
  std::vector<std::string> keys;
  keys.reserve(entries->size());
  for (ListEntry& e : *entries) keys.push_back(std::move(e.key));
  co_return keys;
}

}  // namespace wk::control::detail

namespace wk::control {

Result<std::string_view> BearerToken(std::string_view header) {
  if (header.empty()) return InvalidArgument("no Authorization header");
  const std::size_t sp = header.find(' ');
  const std::string_view scheme = header.substr(0, sp);
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  if (sp == std::string_view::npos || scheme.size() != 6 ||
      !std::equal(scheme.begin(), scheme.end(), "bearer", [&](char a, char b) { return lower(a) == b; })) {
    return InvalidArgument("Authorization is not 'Bearer <token>'");
  }
  std::string_view token = header.substr(sp + 1);
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  if (token.empty()) return InvalidArgument("Authorization is not 'Bearer <token>'");
  return token;
}

}  // namespace wk::control
