#include "alarms/format.h"

#include <cstdio>

#include "base/check.h"
#include "base/crc32c.h"

namespace wk::alarms {
namespace {

constexpr int kDueDigits = 19;
constexpr int kGenerationDigits = 20;

std::string Padded(std::uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llu", digits, static_cast<unsigned long long>(v));
  return buf;
}

// Exactly `digits` decimal digits.
bool Digits(std::string_view s, int digits, std::uint64_t* out) {
  if (static_cast<int>(s.size()) != digits) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string ShardText(int shard) { return Padded(static_cast<std::uint64_t>(shard), 2); }

}  // namespace

int ShardOf(const ActorId& actor) { return static_cast<int>(Crc32c(actor.ToString()) % kShards); }

std::string ShardPrefix(int shard) {
  WK_CHECK(shard >= 0 && shard < kShards, "alarm shard out of range");
  return std::string(kAlarmsPrefix) + ShardText(shard) + "/";
}

std::string AlarmPrefix(const ActorId& actor, std::int64_t due_ms) {
  WK_CHECK(due_ms >= 0, "an alarm time is never negative");
  return ShardPrefix(ShardOf(actor)) + Padded(static_cast<std::uint64_t>(due_ms), kDueDigits) + "/" +
         actor.ToString() + "/";
}

std::string EncodeEntryKey(const EntryKey& key) {
  WK_CHECK(ValidateActorId(key.actor).ok(), "alarm entry of an invalid actor");
  WK_CHECK(key.shard == ShardOf(key.actor), "alarm entry in the wrong shard");
  return AlarmPrefix(key.actor, key.due_ms) + Padded(key.generation.value, kGenerationDigits) + "-" +
         Padded(key.batch, kGenerationDigits);
}

Result<EntryKey> ParseEntryKey(std::string_view key) {
  auto bad = [&key]() { return InvalidArgument("not an alarm entry key: '" + std::string(key.substr(0, 200)) + "'"); };
  if (!key.starts_with(kAlarmsPrefix)) return bad();
  std::string_view rest = key.substr(kAlarmsPrefix.size());
  std::string_view parts[6];
  for (int i = 0; i < 6; ++i) {
    const auto slash = rest.find('/');
    if (i < 5 && slash == std::string_view::npos) return bad();
    parts[i] = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  if (!rest.empty()) return bad();
  EntryKey out;
  std::uint64_t v = 0;
  if (!Digits(parts[0], 2, &v) || v >= static_cast<std::uint64_t>(kShards)) return bad();
  out.shard = static_cast<int>(v);
  if (!Digits(parts[1], kDueDigits, &v) || v > static_cast<std::uint64_t>(INT64_MAX)) return bad();
  out.due_ms = static_cast<std::int64_t>(v);
  out.actor = ActorId{std::string(parts[2]), std::string(parts[3]), std::string(parts[4])};
  if (!ValidateActorId(out.actor).ok() || ShardOf(out.actor) != out.shard) return bad();
  const std::string_view tail = parts[5];
  if (tail.size() != 2 * kGenerationDigits + 1 || tail[kGenerationDigits] != '-') return bad();
  if (!Digits(tail.substr(0, kGenerationDigits), kGenerationDigits, &v)) return bad();
  out.generation = Generation{v};
  if (!Digits(tail.substr(kGenerationDigits + 1), kGenerationDigits, &v)) return bad();
  out.batch = v;
  return out;
}

ActorId ShardActor(int shard) {
  WK_CHECK(shard >= 0 && shard < kShards, "alarm shard out of range");
  return ActorId{std::string(kShardTenant), std::string(kShardClass), ShardText(shard)};
}

int ShardOfShardActor(const ActorId& id) {
  if (id.tenant != kShardTenant || id.class_name != kShardClass) return -1;
  std::uint64_t v = 0;
  if (!Digits(id.name, 2, &v) || v >= static_cast<std::uint64_t>(kShards)) return -1;
  return static_cast<int>(v);
}

}  // namespace wk::alarms
