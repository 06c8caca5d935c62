#include "old_formats.h"

#include "cluster/lease_marker.h"
#include "cluster/owner_record.h"

namespace wk::sim {
namespace {

const ActorId kStranded{std::string(kServingTenant), "list", "stranded"};
const ActorId kLegacy{std::string(kServingTenant), "list", "legacy"};
constexpr std::string_view kOldNode = "old-1";

}  // namespace

OldFormats::OldFormats(World& world, ServingCluster& cluster) : w_(world), cluster_(cluster) {
  const std::string long_ago = std::to_string(kOriginMs - 3'600'000);
  MemBucket& bucket = *w_.bucket();
  auto plant = [&bucket](const std::string& key, std::string body) {
    WK_CHECK(bucket.ApplyPut(key, std::move(body), Precondition::None()).ok(), "planting an old-format object");
  };
  plant("nodes/old-1", "wasmkeep-node 1\nnode old-1\nwritten_at_ms " + long_ago + "\n");
  plant("nodes/old-2", "wasmkeep-node 2\nwritten_at " + long_ago + "\n");
  plant(OwnerKey(kStranded),
        EncodeOwnerRecord(OwnerRecord{NodeId(std::string(kOldNode)), InstanceToken("old-instance"),
                                      Generation{static_cast<std::uint64_t>(w_.Uniform(2, 6))}}));
  old_generation_ = static_cast<std::uint64_t>(w_.Uniform(3, 9));
  expires_at_ms_ = kOriginMs + w_.Uniform(20'000, 60'000);
  plant(LeaseMarkerKey(kLegacy), "wasmkeep-lease 1\nnode old-2\ngeneration " + std::to_string(old_generation_) +
                                     "\nexpires_at_ms " + std::to_string(expires_at_ms_) + "\n");
}

std::vector<ActorId> OldFormats::Actors() { return {kStranded, kLegacy}; }

void OldFormats::Start() { cluster_.client_env().Spawn(Client(), "old-format client"); }

void OldFormats::OnLanded(const std::string& key, const std::string& body) {
  if (key == OwnerKey(kStranded)) {
    w_.Violation("O1: " + key + " was written, but it names " + std::string(kOldNode) +
                 ", whose old-format heartbeat is never free");
    return;
  }
  if (key != OwnerKey(kLegacy)) return;
  auto record = DecodeOwnerRecord(body);
  if (!record.ok() || record->names_nobody()) return;
  const std::int64_t now_ms = kOriginMs + World::Ms(w_.Now().time_since_epoch());
  const std::int64_t bound_ms = expires_at_ms_ + World::Ms(w_.timing().grace) - World::Ms(w_.timing().max_skew);
  if (now_ms < bound_ms) {
    w_.Violation("O2: " + kLegacy.name + " taken at " + std::to_string(now_ms - kOriginMs) +
                 " ms, while its old lease holds it until " + std::to_string(bound_ms - kOriginMs) + " ms");
  }
  if (record->generation.value <= old_generation_) {
    w_.Violation("O2: " + kLegacy.name + " taken at generation " + std::to_string(record->generation.value) +
                 ", not above its old lease's " + std::to_string(old_generation_));
  }
}

Task<int> OldFormats::Read(const ActorId& actor, int slot) {
  auto got = co_await cluster_.Send(slot, cluster_.Request("GET", actor.ToString()));
  const int status = got.ok() ? got->status : 0;
  w_.Trace("client reads " + actor.name + " via n" + std::to_string(slot) + ": " +
           (got.ok() ? std::to_string(status) : got.status().ToString()));
  if (actor == kStranded && status == 200) w_.Violation("O1: " + actor.name + " answered 200");
  co_return status;
}

Task<void> OldFormats::Client() {
  for (;;) {
    if (!co_await cluster_.client_env().SleepFor(milliseconds(w_.Uniform(1000, 3000)))) co_return;
    if (w_.Now() >= MonoTime(seconds(150))) co_return;
    const ActorId& actor = w_.Chance(0.5) ? kStranded : kLegacy;
    co_await Read(actor, static_cast<int>(w_.Uniform(0, kSlots - 1)));
  }
}

void OldFormats::FinalChecks() {
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto ran = RunTask(w_.sim(), cluster_.client_env(), Read(kLegacy, attempt % kSlots), kClientTimeout + seconds(5));
    if (ran.has_value() && *ran == 200) return;
    w_.sim().RunFor(seconds(2));
  }
  w_.Violation("O3: " + kLegacy.name + " answered no read after healing, though its old lease expired long ago");
}

}  // namespace wk::sim
