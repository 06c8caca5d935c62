#include "control/quarantine.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "base/check.h"
#include "base/line_format.h"
#include "control/common.h"
#include "control/tenants.h"

namespace wk::control {
namespace {

using detail::Backoff;
using detail::GaveUp;
using detail::IsLowerHex;
using detail::IsRetryableRead;

constexpr std::string_view kKind = "quarantine";
constexpr std::uint64_t kVersion = 1;
constexpr std::uint64_t kMaxMs = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::size_t kStrikeIdHexChars = 16;
// The policy's durations: at least a millisecond, at most a week (a longer quarantine is
// an operator's decision, not a setting's).
constexpr Duration kMaxPolicyDuration = std::chrono::hours(24 * 7);

bool IsPrintable(char c) { return c >= 0x20 && c <= 0x7E; }

bool ValidReason(std::string_view r) {
  return !r.empty() && r.size() <= kMaxReasonBytes && r.front() != ' ' && r.back() != ' ' &&
         std::all_of(r.begin(), r.end(), IsPrintable);
}

bool ValidStrike(const Strike& s) {
  return ToUnixMs(s.at) >= 0 && ValidateNodeId(s.node).ok() && IsLowerHex(s.id, kStrikeIdHexChars);
}

// Every rule of the format, for the writer's check (the decoder checks the same, naming
// the line).
bool ValidRecord(const QuarantineRecord& r) {
  if (!ValidateActorId(r.actor).ok() || ToUnixMs(r.until) < 0 || !ValidReason(r.reason)) return false;
  if (r.strikes.empty() || r.strikes.size() > kMaxStrikes) return false;
  for (std::size_t i = 0; i < r.strikes.size(); ++i) {
    if (!ValidStrike(r.strikes[i])) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (r.strikes[j].id == r.strikes[i].id) return false;
    }
  }
  return true;
}

bool HasStrike(const QuarantineRecord& r, std::string_view id) {
  return std::any_of(r.strikes.begin(), r.strikes.end(), [&](const Strike& s) { return s.id == id; });
}

std::string What(const ActorId& actor) { return "wasmkeep-quarantine 1 record " + QuarantineKey(actor); }

}  // namespace

std::string QuarantineKey(const ActorId& actor) { return std::string(kQuarantinePrefix) + actor.ToString(); }

Status ValidateQuarantinePolicy(const QuarantinePolicy& p) {
  if (p.strikes > kMaxStrikes) {
    return InvalidArgument("actors.quarantine_strikes must be between 0 (off) and " + std::to_string(kMaxStrikes));
  }
  const auto ok = [](Duration d) { return d >= std::chrono::milliseconds(1) && d <= kMaxPolicyDuration; };
  if (!ok(p.window)) return InvalidArgument("actors.quarantine_window_ms must be between 1 and 604800000 (7 days)");
  if (!ok(p.duration)) return InvalidArgument("actors.quarantine_ms must be between 1 and 604800000 (7 days)");
  return Status::Ok();
}

WallTime QuarantineRecord::window_start() const {
  WallTime start = strikes.empty() ? WallTime{} : strikes.front().at;
  for (const Strike& s : strikes) start = std::min(start, s.at);
  return start;
}

std::string CleanReason(std::string_view reason) {
  std::string out;
  out.reserve(std::min(reason.size(), kMaxReasonBytes));
  for (char c : reason) out.push_back(IsPrintable(c) ? c : '?');
  const auto first = out.find_first_not_of(' ');
  if (first == std::string::npos) return "unknown";
  out.erase(0, first);
  if (out.size() > kMaxReasonBytes) out.resize(kMaxReasonBytes);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string EncodeQuarantineRecord(const QuarantineRecord& r) {
  WK_CHECK(ValidRecord(r), "encoding an invalid quarantine record");
  line_format::LineWriter w(kKind, kVersion);
  w.Field("actor", r.actor.ToString());
  w.Field("until_ms", static_cast<std::uint64_t>(ToUnixMs(r.until)));
  w.Field("reason", r.reason);
  w.Field("strikes", static_cast<std::uint64_t>(r.strikes.size()));
  for (const Strike& s : r.strikes) w.BareLine(std::to_string(ToUnixMs(s.at)) + " " + s.node + " " + s.id);
  return std::move(w).Take();
}

Result<QuarantineRecord> DecodeQuarantineRecord(std::string_view body, const ActorId& actor) {
  auto reader = line_format::LineReader::Open(body, kKind, kVersion, What(actor));
  if (!reader.ok()) return reader.status();
  QuarantineRecord r;
  auto name = reader->Field("actor");
  if (!name.ok()) return name.status();
  if (*name != actor.ToString()) return reader->Corrupt("names another actor");
  r.actor = actor;
  auto until = reader->UintField("until_ms", kMaxMs);
  if (!until.ok()) return until.status();
  r.until = FromUnixMs(static_cast<std::int64_t>(*until));
  auto reason = reader->Field("reason");
  if (!reason.ok()) return reason.status();
  if (reason->size() > kMaxReasonBytes) return reader->Corrupt("reason longer than " + std::to_string(kMaxReasonBytes) + " bytes");
  r.reason = std::string(*reason);
  auto count = reader->UintField("strikes", kMaxStrikes);
  if (!count.ok()) return count.status();
  if (*count == 0) return reader->Corrupt("no strikes");
  for (std::uint64_t i = 0; i < *count; ++i) {
    auto line = reader->BareLine();
    if (!line.ok()) return line.status();
    // "<at ms> <node> <id>": exactly three parts, one space apart.
    const auto a = line->find(' ');
    const auto b = a == std::string_view::npos ? a : line->find(' ', a + 1);
    if (b == std::string_view::npos || line->find(' ', b + 1) != std::string_view::npos) {
      return reader->Corrupt("a strike is '<at ms> <node> <id>'");
    }
    auto at = line_format::ParseUint(line->substr(0, a), kMaxMs);
    Strike s{at ? FromUnixMs(static_cast<std::int64_t>(*at)) : WallTime{}, std::string(line->substr(a + 1, b - a - 1)),
             std::string(line->substr(b + 1))};
    if (!at) return reader->Corrupt("bad strike time");
    if (!ValidateNodeId(s.node).ok()) return reader->Corrupt("bad node id in a strike");
    if (!IsLowerHex(s.id, kStrikeIdHexChars)) return reader->Corrupt("a strike id is 16 lowercase hex characters");
    if (HasStrike(r, s.id)) return reader->Corrupt("repeated strike id");
    r.strikes.push_back(std::move(s));
  }
  if (Status s = reader->Finish(); !s.ok()) return s;
  return r;
}

Task<Result<VersionedQuarantine>> ReadQuarantineVersioned(ObjectStore& store, ActorId actor, CallOptions call) {
  if (Status s = ValidateActorId(actor); !s.ok()) co_return s;
  auto got = co_await store.Get(QuarantineKey(actor), call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return VersionedQuarantine{};
    co_return got.status();
  }
  auto r = DecodeQuarantineRecord(got->body, actor);
  if (!r.ok()) co_return r.status();
  co_return VersionedQuarantine{std::move(r).value(), std::move(got->version)};
}

Task<Result<std::optional<QuarantineRecord>>> ReadQuarantine(ObjectStore& store, ActorId actor, CallOptions call) {
  auto got = co_await ReadQuarantineVersioned(store, std::move(actor), call);
  if (!got.ok()) co_return got.status();
  co_return std::move(got->record);
}

Task<Result<StrikeOutcome>> RecordStrike(ObjectStore& store, Env& env, ActorId actor, std::string node,
                                         std::string reason, QuarantinePolicy policy, CallOptions call) {
  if (Status s = ValidateActorId(actor); !s.ok()) co_return s;
  if (Status s = ValidateNodeId(node); !s.ok()) co_return s;
  if (Status s = ValidateQuarantinePolicy(policy); !s.ok()) co_return s;
  if (!policy.enabled()) co_return InvalidArgument("quarantine is off (actors.quarantine_strikes = 0)");
  const std::string key = QuarantineKey(actor);
  const std::string strike_id = env.RandomHex(kStrikeIdHexChars / 2);
  const std::string cleaned = CleanReason(reason);
  // Set once a write of ours had an unknown outcome: every later read looks for our id.
  bool maybe_landed = false;
  bool would_quarantine = false;
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    std::optional<QuarantineRecord> existing;
    Version version;
    auto got = co_await store.Get(key, call);
    if (got.ok()) {
      auto decoded = DecodeQuarantineRecord(got->body, actor);
      if (!decoded.ok()) co_return decoded.status();  // never overwritten: an operator must look
      existing = std::move(decoded).value();
      version = got->version;
    } else if (got.code() != Code::kNotFound) {
      if (!IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    if (maybe_landed && existing && HasStrike(*existing, strike_id)) {
      co_return StrikeOutcome{std::move(*existing), true, would_quarantine};
    }
    const WallTime now = env.WallNow();
    if (existing && existing->QuarantinedAt(now)) co_return StrikeOutcome{std::move(*existing), false, false};

    QuarantineRecord next;
    next.actor = actor;
    next.reason = cleaned;
    if (existing) {
      next.until = existing->until;
      // Strikes older than the window no longer count; strikes at or before the end of an
      // earlier quarantine were spent on it.
      for (const Strike& s : existing->strikes) {
        if (s.at > now - policy.window && s.at > existing->until) next.strikes.push_back(s);
      }
      // Only a lowered setting leaves this many: keep the newest.
      while (next.strikes.size() >= kMaxStrikes) next.strikes.erase(next.strikes.begin());
    }
    next.strikes.push_back(Strike{now, node, strike_id});
    would_quarantine = next.strikes.size() >= policy.strikes;
    if (would_quarantine) next.until = now + std::chrono::duration_cast<std::chrono::milliseconds>(policy.duration);

    std::string body = EncodeQuarantineRecord(next);
    Precondition cond = existing ? Precondition::IfMatch(version) : Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(key, std::move(body), cond, call);
    if (put.ok()) co_return StrikeOutcome{std::move(next), true, would_quarantine};
    switch (put.code()) {
      case Code::kPreconditionFailed:  // another writer (or the operator) came first: re-read
        last = put.status();
        continue;
      case Code::kUnknownOutcome:
        maybe_landed = true;
        last = put.status();
        continue;
      case Code::kRetryable:
        last = put.status();
        continue;
      default:
        co_return put.status();
    }
  }
  if (maybe_landed) co_return UnknownOutcome("recording a strike in " + key + ": " + last.message());
  co_return GaveUp("recording a strike in " + key, last);
}

Task<Status> LiftQuarantine(ObjectStore& store, ActorId actor, CallOptions call) {
  if (Status s = ValidateActorId(actor); !s.ok()) co_return s;
  const std::string key = QuarantineKey(actor);
  auto head = co_await store.Head(key, call);
  if (!head.ok()) {
    if (head.code() == Code::kNotFound) co_return NotFound("no quarantine record for " + actor.ToString());
    co_return head.status();
  }
  // Unconditional: the lift wins over strikes racing with it (they re-read and start anew).
  co_return co_await store.Delete(key, Precondition::None(), call);
}

Task<Result<std::vector<QuarantineSummary>>> ListQuarantine(ObjectStore& store, std::optional<std::string> tenant,
                                                            CallOptions call) {
  std::string prefix(kQuarantinePrefix);
  if (tenant) {
    if (Status s = ValidateTenantName(*tenant); !s.ok()) co_return s;
    prefix += *tenant + "/";
  }
  auto parse = [](const std::string& key) -> std::optional<QuarantineSummary> {
    auto id = ParseActorId(std::string_view(key).substr(kQuarantinePrefix.size()));
    if (!id.ok()) return std::nullopt;  // not one of ours
    return QuarantineSummary{*id, {}, {}};
  };
  auto decode = [](std::string_view body, QuarantineSummary& summary) {
    auto r = DecodeQuarantineRecord(body, summary.actor);
    if (r.ok()) {
      summary.record = std::move(r).value();
    } else {
      summary.error = r.status().message();
    }
  };
  co_return co_await detail::ListAndDecode<QuarantineSummary>(store, std::move(prefix), call, parse, decode);
}

bool QuarantineSpent(const QuarantineRecord& record, WallTime now, const QuarantinePolicy& policy) {
  if (now < record.until + kSpentMargin) return false;
  for (const Strike& strike : record.strikes) {
    if (strike.at > record.until && strike.at + policy.window + kSpentMargin > now) return false;
  }
  return true;
}

Task<Result<std::size_t>> DeleteSpentQuarantines(ObjectStore& store, Env& env, QuarantinePolicy policy,
                                                 CallOptions call) {
  std::size_t deleted = 0;
  if (!store.SupportsConditionalDelete()) co_return deleted;
  std::string continuation;
  do {
    ListOptions options;
    options.prefix = std::string(kQuarantinePrefix);
    options.continuation = continuation;
    auto listed = co_await store.List(std::move(options), call);
    if (!listed.ok()) co_return listed.status();
    for (const ListEntry& e : listed->entries) {
      auto actor = ParseActorId(std::string_view(e.key).substr(kQuarantinePrefix.size()));
      if (!actor.ok()) continue;  // not one of ours
      auto got = co_await store.Get(e.key, call);
      if (!got.ok()) continue;  // gone, or unreadable now: the next sweep
      auto record = DecodeQuarantineRecord(got->body, *actor);
      if (!record.ok() || !QuarantineSpent(*record, env.WallNow(), policy)) continue;
      Status s = co_await store.Delete(e.key, Precondition::IfMatch(got->version), call);
      if (s.ok()) ++deleted;
    }
    continuation = listed->next_continuation.value_or("");
  } while (!continuation.empty());
  co_return deleted;
}

std::string FormatUtc(WallTime t) {
  using namespace std::chrono;
  const std::int64_t ms = ToUnixMs(t);
  const sys_days day = floor<days>(sys_time<milliseconds>(milliseconds(ms)));
  const year_month_day ymd(day);
  const hh_mm_ss<milliseconds> hms(milliseconds(ms) - day.time_since_epoch());
  // Zero-padded to `width` digits (the fields are never negative here: times before 1970
  // print their year as it comes).
  auto pad = [](long long v, std::size_t width) {
    std::string s = std::to_string(v);
    if (s.size() < width) s.insert(0, width - s.size(), '0');
    return s;
  };
  return pad(static_cast<int>(ymd.year()), 4) + "-" + pad(static_cast<unsigned>(ymd.month()), 2) + "-" +
         pad(static_cast<unsigned>(ymd.day()), 2) + "T" + pad(hms.hours().count(), 2) + ":" +
         pad(hms.minutes().count(), 2) + ":" + pad(hms.seconds().count(), 2) + "." +
         pad(hms.subseconds().count(), 3) + "Z";
}

std::string DescribeQuarantine(const QuarantineRecord& r) {
  return "actor " + r.actor.ToString() + " is quarantined until " + FormatUtc(r.until) + " (until_ms " +
         std::to_string(ToUnixMs(r.until)) + ") after " + std::to_string(r.strikes.size()) +
         " strikes (events that ended its instance or its node); last: " + r.reason +
         ". An operator can lift it: wasmkeep actor unquarantine " + r.actor.ToString();
}

std::int64_t RetryAfterSeconds(const QuarantineRecord& r, WallTime now) {
  const std::int64_t left_ms = ToUnixMs(r.until) - ToUnixMs(now);
  return std::max<std::int64_t>(1, (left_ms + 999) / 1000);
}

}  // namespace wk::control
