#include "actor/runtime.h"

#include <algorithm>

#include <fmt/format.h>

#include "actor/abi.h"
#include "actor/v8_executor.h"
#include "base/check.h"

namespace wk::actor {

// ---------------------------------------------------------------------------------------
// Options, classes

Status ValidateLimits(const ActorLimits& l) {
  if (l.max_memory_bytes < engine::kWasmPageBytes || l.max_memory_bytes > (4ull << 30)) {
    return InvalidArgument("actors.max_memory_bytes must be between 64 KiB and 4 GiB");
  }
  if (l.max_memory_bytes % engine::kWasmPageBytes != 0) {
    return InvalidArgument("actors.max_memory_bytes must be a multiple of 65536 (the WebAssembly page size)");
  }
  if (l.max_event_cpu_ms < 1 || l.max_event_cpu_ms > 600'000) {
    return InvalidArgument("actors.max_event_cpu_ms must be between 1 and 600000");
  }
  if (l.max_request_bytes < 1 || l.max_response_bytes < 1) {
    return InvalidArgument("actors.max_request_bytes and actors.max_response_bytes must be at least 1");
  }
  if (l.max_key_bytes < 1 || l.max_key_bytes > (1u << 20)) {
    return InvalidArgument("actors.max_key_bytes must be between 1 and 1048576");
  }
  if (l.max_value_bytes > (64u << 20)) return InvalidArgument("actors.max_value_bytes must be at most 64 MiB");
  if (l.max_stored_bytes < std::uint64_t{l.max_key_bytes} + l.max_value_bytes) {
    return InvalidArgument("actors.max_stored_bytes must hold at least one key of max_key_bytes with a value of max_value_bytes");
  }
  if (l.max_queued_events < 1 || l.max_queued_events > 100'000) {
    return InvalidArgument("actors.max_queued_events must be between 1 and 100000");
  }
  if (l.max_module_bytes < 8 || l.max_module_bytes > kMaxModuleBytesSetting) {
    return InvalidArgument(fmt::format("actors.max_module_bytes must be between 8 and {}", kMaxModuleBytesSetting));
  }
  if (l.max_table_elements > kMaxTableElementsSetting) {
    return InvalidArgument(fmt::format("actors.max_table_elements must be at most {}", kMaxTableElementsSetting));
  }
  return Status::Ok();
}

Status ValidateRuntimeOptions(const RuntimeOptions& o) {
  if (auto s = ValidateLimits(o.limits); !s.ok()) return s;
  if (o.workers < 0 || o.workers > 256) return InvalidArgument("actors.workers must be between 0 (one per core) and 256");
  if (o.spin < Duration::zero() || o.spin > std::chrono::milliseconds(1)) {
    return InvalidArgument("actors.spin_us must be between 0 (off) and 1000");
  }
  if (o.idle_hibernate < std::chrono::milliseconds(1)) return InvalidArgument("actors.idle_hibernate_ms must be at least 1");
  if (o.idle_instance < std::chrono::milliseconds(1)) return InvalidArgument("actors.idle_instance_ms must be at least 1");
  if (o.max_instances < 1 || o.max_instances > kMaxInstancesSetting) {
    return InvalidArgument(fmt::format("actors.max_instances must be between 1 and {}", kMaxInstancesSetting));
  }
  if (o.memory_budget_bytes < o.limits.max_memory_bytes) {
    return InvalidArgument("actors.memory_budget_bytes must be at least actors.max_memory_bytes");
  }
  if (o.sync_timeout < std::chrono::milliseconds(1)) return InvalidArgument("actors.sync_timeout_ms must be at least 1");
  if (o.isolate_heap_limit_bytes < kMinIsolateHeapLimitBytes || o.isolate_heap_limit_bytes > kMaxIsolateHeapLimitBytes) {
    return InvalidArgument(fmt::format("actors.isolate_heap_limit_bytes must be between {} and {}",
                                       kMinIsolateHeapLimitBytes, kMaxIsolateHeapLimitBytes));
  }
  if (o.isolate_gc_floor_bytes && *o.isolate_gc_floor_bytes > o.isolate_heap_limit_bytes / 2) {
    return InvalidArgument(fmt::format("actors.isolate_gc_floor_bytes ({}) must be at most half of "
                                       "actors.isolate_heap_limit_bytes ({})",
                                       *o.isolate_gc_floor_bytes, o.isolate_heap_limit_bytes));
  }
  return Status::Ok();
}

Result<std::shared_ptr<const engine::Module>> CompileActorModule(engine::Engine& engine,
                                                                 std::span<const std::uint8_t> wasm,
                                                                 const ActorLimits& limits,
                                                                 const std::string& tenant) {
  engine::ModuleLimits ml;
  ml.owner = tenant;
  ml.max_memory_bytes = limits.max_memory_bytes;
  ml.max_module_bytes = limits.max_module_bytes;
  ml.max_table_elements = limits.max_table_elements;
  ml.setting_prefix = "actors.";
  return engine.Compile(wasm, AbiHostInterface(), AbiExports(), ml);
}

void ClassRegistry::Set(const std::string& tenant, const std::string& class_name,
                        std::shared_ptr<const engine::Module> module) {
  Class& c = classes_[{tenant, class_name}];
  c = Class{};
  c.versions[0] = Entry{std::move(module), ++use_clock_, true};
}

void ClassRegistry::SetVersion(const std::string& tenant, const std::string& class_name, std::uint32_t version,
                               std::shared_ptr<const engine::Module> module) {
  // Versioned only once SetChooser runs: until then an unversioned class keeps its module.
  WK_CHECK(version != 0, "version 0 is an unversioned class's module (Set)");
  classes_[{tenant, class_name}].versions[version] = Entry{std::move(module), ++use_clock_, true};
}

void ClassRegistry::SetChooser(const std::string& tenant, const std::string& class_name, VersionChooser chooser,
                               std::uint32_t stable) {
  Class& c = classes_[{tenant, class_name}];
  c.versions.erase(0);  // the module it had unversioned is no version of it
  c.versioned = true;
  c.chooser = std::move(chooser);
  c.stable = stable;
}

VersionPick ClassRegistry::Choose(const std::string& tenant, const std::string& class_name, std::string_view name,
                                  std::uint32_t mark, bool empty) const {
  auto it = classes_.find({tenant, class_name});
  if (it == classes_.end() || !it->second.versioned) return VersionPick{};
  if (!it->second.chooser) return VersionPick{it->second.stable, std::nullopt};
  return it->second.chooser(name, mark, empty);
}

bool ClassRegistry::Versioned(const std::string& tenant, const std::string& class_name) const {
  auto it = classes_.find({tenant, class_name});
  return it != classes_.end() && it->second.versioned;
}

ClassRegistry::Entry* ClassRegistry::EntryOf(const std::string& tenant, const std::string& class_name,
                                             std::uint32_t version) {
  auto it = classes_.find({tenant, class_name});
  if (it == classes_.end()) return nullptr;
  auto v = it->second.versions.find(version);
  return v == it->second.versions.end() ? nullptr : &v->second;
}

const ClassRegistry::Entry* ClassRegistry::EntryOf(const std::string& tenant, const std::string& class_name,
                                                   std::uint32_t version) const {
  return const_cast<ClassRegistry*>(this)->EntryOf(tenant, class_name, version);
}

std::shared_ptr<const engine::Module> ClassRegistry::Find(const std::string& tenant, const std::string& class_name) {
  auto it = classes_.find({tenant, class_name});
  if (it == classes_.end()) return nullptr;
  return Find(tenant, class_name, it->second.versioned ? it->second.stable : 0);
}

std::shared_ptr<const engine::Module> ClassRegistry::Find(const std::string& tenant, const std::string& class_name,
                                                          std::uint32_t version) {
  Entry* e = EntryOf(tenant, class_name, version);
  if (e == nullptr) return nullptr;
  e->used = ++use_clock_;
  return e->module;
}

bool ClassRegistry::Dropped(const std::string& tenant, const std::string& class_name) const {
  auto it = classes_.find({tenant, class_name});
  if (it == classes_.end()) return false;
  const Entry* e = EntryOf(tenant, class_name, it->second.versioned ? it->second.stable : 0);
  return e != nullptr && e->set && e->module == nullptr;
}

bool ClassRegistry::Holds(const std::string& tenant, const std::string& class_name,
                          const std::shared_ptr<const engine::Module>& module) const {
  auto it = classes_.find({tenant, class_name});
  if (it == classes_.end() || module == nullptr) return false;
  for (const auto& [v, e] : it->second.versions) {
    if (e.module == module) return true;
  }
  return false;
}

std::uint64_t ClassRegistry::DropUnused(std::uint64_t bytes, const std::string* tenant) {
  // Few classes per node: sorting the candidates costs less than keeping an order.
  std::vector<Entry*> unused;
  for (auto& [key, cls] : classes_) {
    for (auto& [version, entry] : cls.versions) {
      // use_count 1: no resident actor's code, no compile's cache, no caller holds it.
      if (entry.module && entry.module.use_count() == 1 && (tenant == nullptr || key.first == *tenant)) {
        unused.push_back(&entry);
      }
    }
  }
  std::sort(unused.begin(), unused.end(), [](const Entry* a, const Entry* b) { return a->used < b->used; });
  std::uint64_t freed = 0;
  for (Entry* e : unused) {
    if (freed >= bytes) break;
    freed += e->module->compiled_bytes();
    e->module.reset();
    ++dropped_;
  }
  return freed;
}

// ---------------------------------------------------------------------------------------
// The runtime: the core over the V8 workers

ActorRuntime::ActorRuntime(Env& env, engine::Engine& engine, ClassRegistry& classes, StorageProvider& storage,
                           RuntimeOptions options, RuntimeHooks hooks)
    : engine_(engine), classes_(classes), options_(std::move(options)) {
  WK_CHECK(ValidateRuntimeOptions(options_).ok(), "invalid RuntimeOptions (validate before constructing)");
  std::function<void(const ActorId&, UnloadReason)> on_unloaded = std::move(hooks.on_unloaded);
  hooks.on_unloaded = nullptr;
  auto load_version = std::move(hooks.load_version);
  hooks.load_version = nullptr;
  auto on_event_time = std::move(hooks.on_event_time);
  hooks.on_event_time = nullptr;
  auto resident_limit = std::move(hooks.resident_limit);
  hooks.resident_limit = nullptr;
  executor_ = std::make_unique<V8Executor>(env, engine, classes, options_, std::move(hooks));
  RuntimeCoreOptions core;
  core.limits = options_.limits;
  core.idle_hibernate = options_.idle_hibernate;
  core.idle_instance = options_.idle_instance;
  core.max_instances = options_.max_instances;
  core.memory_budget_bytes = options_.memory_budget_bytes;
  core.idempotency_ttl_ms = options_.idempotency_ttl / std::chrono::milliseconds(1);
  core.idempotency_max_answer_bytes = options_.idempotency_max_answer_bytes;
  core.idempotency_max_bytes = options_.idempotency_max_bytes;
  core.wall_clock_ms = options_.wall_clock_ms;
  core.message_wake_after_ms = options_.messages.wake_after_ms;
  core.broken = options_.broken;
  core.load_version = std::move(load_version);
  core.on_event_time = std::move(on_event_time);
  core.resident_limit = std::move(resident_limit);
  core.to_loop = [env = &env](std::function<void()> fn) { env->PostFromAnyThread(std::move(fn)); };
  core_ = std::make_unique<ActorRuntimeCore>(env, *executor_, storage, std::move(core), std::move(on_unloaded));
}

ActorRuntime::~ActorRuntime() {
  core_.reset();  // answers what is left and stops the executor's workers
  executor_.reset();
}

Task<EventResult> ActorRuntime::HandleRequest(ActorId id, Request request) {
  return core_->HandleRequest(std::move(id), std::move(request));
}

Task<EventResult> ActorRuntime::HandleAlarm(ActorId id, AlarmEvent event) {
  return core_->HandleAlarm(std::move(id), event);
}

Task<EventResult> ActorRuntime::HandleMessage(ActorId id, IncomingMessage message) {
  return core_->HandleMessage(std::move(id), std::move(message));
}

Task<EventResult> ActorRuntime::HandleSocket(ActorId id, SocketEvent event) {
  return core_->HandleSocket(std::move(id), std::move(event));
}

void ActorRuntime::SetSocketDirectory(SocketDirectory* sockets) { core_->SetSocketDirectory(sockets); }

Task<Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>>> ActorRuntime::ReadOutbox(ActorId id,
                                                                                             std::size_t max) {
  return core_->ReadOutbox(std::move(id), max);
}

Task<Status> ActorRuntime::CommitSystem(ActorId id, Batch batch) {
  return core_->CommitSystem(std::move(id), std::move(batch));
}

Task<Result<std::uint64_t>> ActorRuntime::ResolveDead(ActorId id, std::uint64_t seq, DeadAction action) {
  return core_->ResolveDead(std::move(id), seq, action);
}

void ActorRuntime::SetOutboxListener(std::function<void(const ActorId&)> fn) {
  core_->SetOutboxListener(std::move(fn));
}

void ActorRuntime::Unload(const ActorId& id) { core_->Unload(id); }
void ActorRuntime::Warm(const ActorId& id) { core_->Warm(id); }
bool ActorRuntime::IsResident(const ActorId& id) const { return core_->IsResident(id); }
std::optional<std::uint32_t> ActorRuntime::VersionOf(const ActorId& id) const { return core_->VersionOf(id); }
std::vector<std::pair<std::string, std::uint64_t>> ActorRuntime::ResidentByVersion() const {
  return core_->ResidentByVersion();
}
Task<bool> ActorRuntime::Shutdown(Duration limit) { return core_->Shutdown(limit); }

Status ActorRuntime::RegisterClass(const std::string& tenant, const std::string& class_name,
                                   std::shared_ptr<const engine::Module> module) {
  if (Status s = MakeRoomForModule(tenant, class_name, *module); !s.ok()) return s;
  classes_.Set(tenant, class_name, std::move(module));
  return Status::Ok();
}

Status ActorRuntime::RegisterVersion(const std::string& tenant, const std::string& class_name, std::uint32_t version,
                                     std::shared_ptr<const engine::Module> module) {
  if (Status s = MakeRoomForModule(tenant, class_name, *module); !s.ok()) return s;
  classes_.SetVersion(tenant, class_name, version, std::move(module));
  return Status::Ok();
}

Status ActorRuntime::MakeRoomForModule(const std::string& tenant, const std::string& class_name,
                                       const engine::Module& module) {
  const std::uint64_t bound = options_.max_compiled_bytes_per_tenant;
  // The engine counts every module alive, this one included (it is held here), and the
  // class's previous one while anything holds it.
  std::uint64_t held = engine_.compiled_bytes_of(tenant);
  if (bound > 0 && held > bound) {
    classes_.DropUnused(held - bound, &tenant);
    held = engine_.compiled_bytes_of(tenant);
  }
  if (bound > 0 && held > bound) {
    ++compiled_refusals_;
    return Retryable(fmt::format(
        "class {}/{} cannot be loaded here: tenant {}'s compiled modules would take {} bytes on this node (this one "
        "{}), over actors.max_compiled_bytes_per_tenant = {}; they are dropped once no actor of their class is "
        "resident",
        tenant, class_name, tenant, held, module.compiled_bytes(), bound));
  }
  if (!core_->MakeRoom()) {
    ++compiled_refusals_;
    return Retryable(fmt::format(
        "class {}/{} cannot be loaded here: its compiled module ({} bytes) does not fit in the node's memory budget "
        "now ({} bytes in use, actors.memory_budget_bytes = {})",
        tenant, class_name, module.compiled_bytes(), core_->stats().memory_bytes, options_.memory_budget_bytes));
  }
  return Status::Ok();
}

void ActorRuntime::SetSpin(Duration spin) {
  WK_CHECK(spin >= Duration::zero() && spin <= std::chrono::milliseconds(1), "spin window out of range");
  options_.spin = spin;
  executor_->SetSpin(spin);
}

RuntimeStats ActorRuntime::stats() const { return core_->stats(); }
std::vector<TenantMemory> ActorRuntime::MemoryByTenant() const { return core_->MemoryByTenant(); }
const Histogram& ActorRuntime::event_seconds() const { return core_->event_seconds(); }
const Histogram& ActorRuntime::fair_share_jobs_ahead() const { return executor_->fair_share_jobs_ahead(); }
const Histogram& ActorRuntime::event_phase_seconds(std::size_t phase) const {
  return core_->event_phase_seconds(phase);
}

void PublishRuntimeMetrics(MetricsRegistry& registry, const ActorRuntime& runtime) {
  // A counter over one field of the runtime's stats (copied per read: loop thread).
  auto counter = [&](std::string name, std::string help, std::uint64_t RuntimeStats::*field, MetricLabels labels) {
    registry.AddCallbackCounter(std::move(name), std::move(help),
                                [&runtime, field] { return static_cast<double>(runtime.stats().*field); },
                                std::move(labels));
  };
  const std::string events = "Actor events by outcome.";
  registry.AddCallbackCounter(
      "wasmkeep_actor_events_total", events,
      [&runtime] {
        const RuntimeStats s = runtime.stats();
        return static_cast<double>(s.events - s.failed_events);
      },
      {{"outcome", "ok"}});
  counter("wasmkeep_actor_events_total", events, &RuntimeStats::failed_events, {{"outcome", "failed"}});
  counter("wasmkeep_actor_events_total", events, &RuntimeStats::overloaded, {{"outcome", "overloaded"}});
  counter("wasmkeep_actor_instantiations_total", "WebAssembly instances created (first events and re-creations).",
          &RuntimeStats::instantiations, {});
  const std::string unloads = "Actors that left memory, by reason.";
  counter("wasmkeep_actor_unloads_total", unloads, &RuntimeStats::hibernations, {{"reason", "hibernated"}});
  counter("wasmkeep_actor_unloads_total", unloads, &RuntimeStats::evictions, {{"reason", "evicted"}});
  registry.AddHistogramView("wasmkeep_actor_event_seconds", "Time from an event's arrival to its released answer.",
                            runtime.event_seconds());
  registry.AddHistogramView(
      "wasmkeep_fair_share_jobs_ahead",
      "For each job of a tenant with nothing queued on its worker, the jobs of other tenants that ran there before it "
      "(docs/tenants.md \"Fair shares\": at most one of each other busy tenant; first come, first served would be all "
      "they had queued).",
      runtime.fair_share_jobs_ahead());
  const std::string phases =
      "Where a dispatched event's time went: queued behind the actor's earlier events (input), waiting for its "
      "worker thread (worker), running there (run: instantiation, the module's call, its batch handed to storage), "
      "then until its answer was released (output: the output gate's durability wait and the hand-back).";
  for (std::size_t i = 0; i < kEventPhases.size(); ++i) {
    registry.AddHistogramView("wasmkeep_actor_event_phase_seconds", phases, runtime.event_phase_seconds(i),
                              {{"phase", std::string(kEventPhases[i])}});
  }
  registry.AddCallbackGauge("wasmkeep_actor_resident", "Actors resident in memory.",
                            [&runtime] { return static_cast<double>(runtime.stats().resident_actors); });
  registry.AddCallbackGauge(
      "wasmkeep_actor_memory_bytes",
      "Memory the budget counts (actors.memory_budget_bytes), in all: instances' linear memory (pages touched), "
      "resident actors' state and bookkeeping, the workers' V8 heaps, and the classes' compiled modules.",
      [&runtime] { return static_cast<double>(runtime.stats().memory_bytes); });
  const std::string parts =
      "wasmkeep_actor_memory_bytes by part: linear memory (pages touched), state (with per-entry overhead), V8 heap, "
      "bookkeeping per resident actor, compiled modules (code, metadata and the wasm bytes V8 keeps).";
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().linear_bytes); },
                            {{"part", "linear"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().state_bytes); },
                            {{"part", "state"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().heap_bytes); },
                            {{"part", "heap"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().bookkeeping_bytes); },
                            {{"part", "bookkeeping"}});
  registry.AddCallbackGauge("wasmkeep_actor_memory_part_bytes", parts,
                            [&runtime] { return static_cast<double>(runtime.stats().compiled_bytes); },
                            {{"part", "compiled"}});
  counter("wasmkeep_actor_compiled_dropped_total",
          "Compiled class modules dropped to meet actors.memory_budget_bytes or a tenant's "
          "actors.max_compiled_bytes_per_tenant (no actor of their class was resident); compiled again on demand.",
          &RuntimeStats::compiled_dropped, {});
  registry.AddCallbackCounter(
      "wasmkeep_actor_compiled_refusals_total",
      "Class modules refused a load: over their tenant's actors.max_compiled_bytes_per_tenant, or the node's budget.",
      [&runtime] { return static_cast<double>(runtime.compiled_refusals()); });
  registry.AddCallbackGaugeBreakdown(
      "wasmkeep_actor_resident_by_version",
      "Resident actors of versioned classes by class and the version they run (tenant/class@version; docs/tenants.md "
      "\"Deploying\"); the 50 largest, then _other.",
      "class_version", [&runtime] {
        const auto counts = runtime.ResidentByVersion();
        MetricsRegistry::Breakdown out;
        double other = 0;
        for (std::size_t i = 0; i < counts.size(); ++i) {
          if (i < 50) {
            out.emplace_back(counts[i].first, static_cast<double>(counts[i].second));
          } else {
            other += static_cast<double>(counts[i].second);
          }
        }
        if (other > 0) out.emplace_back("_other", other);
        return out;
      });
  registry.AddCallbackGaugeBreakdown(
      "wasmkeep_actor_tenant_memory_bytes",
      "wasmkeep_actor_memory_bytes by tenant: its actors' linear memory, state and bookkeeping, their share of "
      "the V8 heaps, and its classes' compiled modules; the tenants with the most, then _other for the rest and "
      "_node for heap no instance holds.",
      "tenant", [&runtime] {
        const std::vector<TenantMemory> tenants = runtime.MemoryByTenant();
        MetricsRegistry::Breakdown out;
        double attributed = 0, other = 0;
        for (std::size_t i = 0; i < tenants.size(); ++i) {
          attributed += tenants[i].bytes;
          if (i < kMaxTenantMemorySeries) {
            out.emplace_back(tenants[i].tenant, tenants[i].bytes);
          } else {
            other += tenants[i].bytes;
          }
        }
        if (tenants.size() > kMaxTenantMemorySeries) out.emplace_back("_other", other);
        out.emplace_back("_node", std::max(0.0, static_cast<double>(runtime.stats().memory_bytes) - attributed));
        return out;
      });
  registry.AddCallbackGauge("wasmkeep_actor_instances",
                            "Resident actors with a WebAssembly instance (the others are warm but not instantiated).",
                            [&runtime] { return static_cast<double>(runtime.stats().instances); });
  registry.AddCallbackGauge(
      "wasmkeep_actor_linear_mapped_bytes",
      "Linear memory of the instances as mapped (their size); the budget counts the pages touched (part=\"linear\").",
      [&runtime] { return static_cast<double>(runtime.stats().linear_mapped_bytes); });
  const std::string dropped = "Instances dropped from resident actors, by reason (idle: actors.idle_instance_ms; "
                              "memory: actors.memory_budget_bytes; limit: actors.max_instances; redeploy: their class's new module runs "
                              "from the next event).";
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_idle,
          {{"reason", "idle"}});
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_memory,
          {{"reason", "memory"}});
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_limit,
          {{"reason", "limit"}});
  counter("wasmkeep_actor_instances_dropped_total", dropped, &RuntimeStats::instances_dropped_redeploy,
          {{"reason", "redeploy"}});
  counter("wasmkeep_actor_idempotent_replays_total",
          "Requests with an Idempotency-Key answered from the key's stored answer, without running the actor.",
          &RuntimeStats::idempotent_replays, {});
  counter("wasmkeep_actor_idempotency_key_reused_total",
          "Requests refused 422 because their Idempotency-Key was first used with another method, path, query or body.",
          &RuntimeStats::idempotency_key_reused, {});
  counter("wasmkeep_actor_idempotency_keys_forgotten_total",
          "Idempotency-Key records dropped before their TTL so that one actor's records stay within "
          "actors.idempotency_max_bytes (a retry of such a key runs again).",
          &RuntimeStats::idempotency_keys_forgotten, {});
  counter("wasmkeep_actor_memory_refusals_total", "Actors refused a start (503) because the memory budget was used up.",
          &RuntimeStats::memory_refusals, {});
  const std::string resident =
      "A tenant's resident_actors quota on this node (docs/tenants.md, \"Quotas\"): starts refused 429 because its "
      "share was full of busy actors (outcome=refused), idle actors hibernated to make room (outcome=hibernated).";
  counter("wasmkeep_quota_resident_actors_total", resident, &RuntimeStats::resident_quota_refusals,
          {{"outcome", "refused"}});
  counter("wasmkeep_quota_resident_actors_total", resident, &RuntimeStats::resident_quota_hibernations,
          {{"outcome", "hibernated"}});
  registry.AddCallbackGauge(
      "wasmkeep_actor_instance_reserved_bytes",
      "Address space the live instances' linear memories reserve (each its maximum), kept within 3/4 of V8's 1 TiB.",
      [&runtime] { return static_cast<double>(runtime.stats().instance_reserved_bytes); });
  counter("wasmkeep_actor_reservation_collections_total",
          "Collections started because the memories of thrown-away instances that V8 had not collected yet reserved "
          "1/8 of V8's 1 TiB of address space, or numbered 4,096.",
          &RuntimeStats::reservation_collections, {});

  // The engine: its workers' garbage collections, instantiations, linear memories.
  auto engine_counter = [&](std::string name, std::string help, auto field, MetricLabels labels) {
    registry.AddCallbackCounter(std::move(name), std::move(help),
                                [&runtime, field] { return static_cast<double>(field(runtime.engine_stats())); },
                                std::move(labels));
  };
  const std::string gcs =
      "Garbage collections of the workers' V8 heaps, by cause: young (scavenge), full (V8's own), external_memory "
      "(memory outside the heap grew), all_available (V8 collected all it could on its own: it could not reserve a "
      "linear memory, or its heap ran out), requested (the runtime asked).";
  const std::string gc_seconds = "Pauses of those collections on the workers' threads, by cause.";
  for (std::size_t i = 0; i < engine::kGcCauses; ++i) {
    const std::string cause(engine::GcCauseName(static_cast<engine::GcCause>(i)));
    engine_counter("wasmkeep_engine_gc_total", gcs, [i](const engine::EngineStats& s) { return s.collections[i]; },
                   {{"cause", cause}});
    engine_counter("wasmkeep_engine_gc_seconds_total", gc_seconds,
                   [i](const engine::EngineStats& s) { return s.collection_seconds[i]; }, {{"cause", cause}});
  }
  engine_counter("wasmkeep_engine_instantiation_seconds_total", "Wall time of the workers' instantiations.",
                 [](const engine::EngineStats& s) { return s.instantiation_seconds; }, {});
  engine_counter("wasmkeep_engine_slow_instantiations_total", "Instantiations that took more than 10 ms.",
                 [](const engine::EngineStats& s) { return s.slow_instantiations; }, {});
  engine_counter("wasmkeep_engine_instantiation_gc_total", "Garbage collections that ran inside instantiations.",
                 [](const engine::EngineStats& s) { return s.collections_in_instantiations; }, {});
  engine_counter("wasmkeep_engine_instantiation_gc_seconds_total", "Their pauses.",
                 [](const engine::EngineStats& s) { return s.collection_seconds_in_instantiations; }, {});
  registry.AddCallbackGauge(
      "wasmkeep_engine_linear_memories",
      "Linear memories V8 holds: live instances', those kept for reuse, and thrown-away ones it has not collected "
      "yet.",
      [&runtime] { return static_cast<double>(runtime.engine_stats().linear_memories); });
  registry.AddCallbackGauge(
      "wasmkeep_engine_linear_memories_pooled",
      "Of those, the memories the workers keep zeroed for their modules' next instances.",
      [&runtime] { return static_cast<double>(runtime.engine_stats().pooled_memories); });
  engine_counter("wasmkeep_engine_linear_memory_reuses_total",
                 "Instantiations given a kept memory (zeroed) instead of a new one.",
                 [](const engine::EngineStats& s) { return static_cast<double>(s.reused_memories); }, {});
  registry.AddCallbackGauge(
      "wasmkeep_engine_linear_reserved_bytes",
      "Address space those memories reserve (each its maximum); V8 refuses more than about 1 TiB.",
      [&runtime] { return static_cast<double>(runtime.engine_stats().linear_reserved_bytes); });
}

}  // namespace wk::actor
