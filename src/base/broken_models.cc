#include "base/broken_models.h"

#include <array>
#include <cstdlib>

#include "base/check.h"

namespace wk {
namespace {

constexpr std::size_t kModels = static_cast<std::size_t>(BrokenModel::kCount);

// One name per switch, in the enum's order (checked below).
constexpr std::array<std::string_view, kModels> kNames = {
    "validity-from-reply",
    "lease-attempt-unbounded",
    "lease-no-retry",
    "lease-write-unconditional",
    "conflict-is-lost",
    "lapse-is-lost",
    "ack-after-lapse-keeps-epoch",
    "start-check-no-wait",
    "no-release-shortcut",
    "own-fence-not-lost",
    "start-check-ignores-changes",
    "stop-keeps-lease-valid",
    "watch-from-listing-start",
    "listing-assumes-renewals",
    "unconditional-fence",
    "no-watch-wait",
    "unbounded-fence-concurrency",
    "operator-fence-unconditional",
    "operator-fence-trusts-clock",
    "unseeded-first-generation",
    "old-lease-ignored",
    "start-guard-off",
    "free-on-view",
    "free-on-absent-node",
    "free-on-old-format",
    "free-ignores-fence-bound",
    "restart-frees-nothing",
    "wake-reuses-generation",
    "no-acquire-read-back",
    "resolver-without-lock",
    "resolver-never-releases",
    "resolver-ignores-lost",
    "unresolved-never-closed",
    "pending-release-adopts-version",
    "unbounded-pending-concurrency",
    "no-refusal-limit",
    "pending-retries-while-invalid",
    "lapse-keeps-holds",
    "drain-ignores-pending",
    "stop-skips-releases",
    "route-to-any-owner",
    "routing-read-unbounded",
    "move-acquires-before-release-lands",
    "take-unconditional",
    "drain-releases-under-actors",
    "ack-before-durable",
    "ack-late-upload",
    "release-without-validity",
    "restore-ignores-fence",
    "gc-deletes-chain",
    "index-entry-removed-before-durable",
    "fire-before-due",
    "drop-handed-alarm",
    "segment-before-entry",
    "earlier-entries-before-fence",
    "pool-skips-zeroing",
    "answer-without-gate",
    "input-gate-concurrent",
    "idempotent-answer-not-in-batch",
    "message-before-durable",
    "applied-record-not-in-batch",
    "outbox-lost-on-restore",
    "messages-out-of-order",
    "outbox-never-wakes",
    "drain-accepts-before-check",
    "shard-rank-includes-drained",
    "alarm-wakes-quarantined",
    "start-skips-quarantine-read",
    "quarantine-cache-keeps-late-answer",
    "quarantine-listing-outlives-ttl",
    "move-outcome-unchecked",
    "wake-acquires-nothing-after-release",
    "sleeping-hold-survives-lease-loss",
    "wake-forgets-own-segments",
    "gc-ignores-retention",
    "restore-without-acquire",
    "history-ignores-fence",
    "ws-send-before-durable",
    "ws-broadcast-at-release",
    "rollout-unstable",
    "upgrade-outside-batch",
    "broken-state-runs",
    "fair-share-off",
    "quota-after-run",
    "stored-quota-unreserved",
    "resident-share-ignored",
    "stored-usage-unconditional",
};
static_assert(kNames.size() == kModels, "one name per BrokenModel");
static_assert(kNames[static_cast<std::size_t>(BrokenModel::kUpgradeOutsideBatch)] == "upgrade-outside-batch",
              "the names follow the enum's order");

}  // namespace

std::string_view BrokenModels::Name(BrokenModel m) { return kNames.at(static_cast<std::size_t>(m)); }

std::vector<std::string_view> BrokenModels::AllNames() { return {kNames.begin(), kNames.end()}; }

Result<BrokenModels> BrokenModels::Parse(std::string_view names) {
  BrokenModels out;
  std::size_t pos = 0;
  while (pos < names.size()) {
    std::size_t comma = names.find(',', pos);
    if (comma == std::string_view::npos) comma = names.size();
    const std::string_view name = names.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) continue;
    if constexpr (!kBuilt) {
      return InvalidArgument("broken model '" + std::string(name) +
                             "' refused: this build has none (configured with WK_BROKEN_MODELS=OFF)");
    }
    std::size_t i = 0;
    while (i < kModels && kNames[i] != name) ++i;
    if (i == kModels) return InvalidArgument("unknown broken model '" + std::string(name) + "'");
    out.bits_.set(i);
  }
  return out;
}

Result<BrokenModels> BrokenModels::FromEnvironment() {
  const char* value = std::getenv(std::string(kEnvironmentVariable).c_str());
  if (value == nullptr) return BrokenModels();
  auto parsed = Parse(value);
  if (!parsed.ok()) return InvalidArgument(std::string(kEnvironmentVariable) + ": " + parsed.status().message());
  return parsed;
}

BrokenModels BrokenModels::Of(std::initializer_list<BrokenModel> models) {
  WK_CHECK(kBuilt, "BrokenModels::Of in a build without broken models");
  BrokenModels out;
  for (BrokenModel m : models) out.bits_.set(static_cast<std::size_t>(m));
  return out;
}

std::string BrokenModels::ToString() const {
  std::string out;
  for (std::size_t i = 0; i < kModels; ++i) {
    if (!on(static_cast<BrokenModel>(i))) continue;
    if (!out.empty()) out += ',';
    out += kNames[i];
  }
  return out;
}

}  // namespace wk
