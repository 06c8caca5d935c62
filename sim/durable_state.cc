#include "durable_state.h"

#include <memory>

#include "replica/format.h"
#include "replica/restore.h"
#include "store/mem/mem_store.h"

namespace wk::sim {

std::optional<actor::StateMap> DurableState(World& world, const ActorId& actor) {
  auto copy = std::make_shared<MemBucket>();
  const std::string wal = replica::WalPrefix(actor), snap = replica::SnapshotPrefix(actor);
  for (auto it = world.bucket()->objects().lower_bound(wal); it != world.bucket()->objects().end() && it->first.starts_with(wal); ++it) {
    copy->ApplyPut(it->first, it->second.body, Precondition::None(), it->second.modified_ms).status().IgnoreError();
  }
  for (auto it = world.bucket()->objects().lower_bound(snap); it != world.bucket()->objects().end() && it->first.starts_with(snap); ++it) {
    copy->ApplyPut(it->first, it->second.body, Precondition::None(), it->second.modified_ms).status().IgnoreError();
  }
  SimWorld w(1);
  SimEnv env(w, FromUnixMs(kOriginMs));
  MemStore store(env, copy);
  auto r = RunTask(w, env, replica::Restore(env, store, actor, Generation{UINT64_MAX - 1}, {}));
  if (!r || !r->ok()) return std::nullopt;
  return std::move((*r)->state);
}

}  // namespace wk::sim
