#include "control/common.h"

#include <algorithm>
#include <charconv>

#include "base/check.h"
#include "base/digest.h"
#include "base/line_format.h"

namespace wk::control::detail {

std::string Hex(const unsigned char* data, std::size_t n) {
  return ::wk::ToHex(std::string_view(reinterpret_cast<const char*>(data), n));
}

bool IsLowerHex(std::string_view s, std::size_t n) {
  if (s.size() != n) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A decimal without sign or leading zeros, as the formats write it: the line codec's rule.
bool ParseUint(std::string_view s, std::uint64_t* out) {
  const std::optional<std::uint64_t> v = ::wk::line_format::ParseUint(s);
  if (v) *out = *v;
  return v.has_value();
}

bool ParseMs(std::string_view s, WallTime* out) {
  std::uint64_t ms = 0;
  if (!ParseUint(s, &ms) || ms > static_cast<std::uint64_t>(INT64_MAX)) return false;
  *out = FromUnixMs(static_cast<std::int64_t>(ms));
  return true;
}

// The lines of a newline-terminated body, without their newlines; nullopt if the body is
// empty or does not end in a newline.
std::optional<std::vector<std::string_view>> Lines(std::string_view body) {
  if (body.empty() || body.back() != '\n') return std::nullopt;
  std::vector<std::string_view> lines;
  while (!body.empty()) {
    std::size_t nl = body.find('\n');
    lines.push_back(body.substr(0, nl));
    body.remove_prefix(nl + 1);
  }
  return lines;
}

// The value of "name value", or nullopt.
std::optional<std::string_view> Field(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || !line.starts_with(name) || line[name.size()] != ' ') return std::nullopt;
  return line.substr(name.size() + 1);
}

std::vector<std::string_view> SplitSpaces(std::string_view s) {
  std::vector<std::string_view> parts;
  while (true) {
    std::size_t sp = s.find(' ');
    parts.push_back(s.substr(0, sp));
    if (sp == std::string_view::npos) break;
    s.remove_prefix(sp + 1);
  }
  return parts;
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
Task<Result<std::vector<std::string>>> ListKeys(ObjectStore& store, std::string prefix, CallOptions call) {
  std::vector<std::string> keys;
  ListOptions options;
  options.prefix = prefix;
  for (int pages = 0; pages < kMaxListPages; ++pages) {
    auto page = co_await store.List(options, call);
    if (!page.ok()) co_return page.status();
    for (auto& e : page->entries) keys.push_back(std::move(e.key));
    if (!page->next_continuation) co_return keys;
    options.continuation = *page->next_continuation;
  }
  co_return Fatal("more than " + std::to_string(kMaxListPages) + " pages under " + prefix);
}

}  // namespace wk::control::detail
