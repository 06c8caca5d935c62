#include "server/actor_host.h"

#include "base/log.h"
#include "routing/class_traffic.h"

namespace wk {
namespace {

actor::ModuleCompilerOptions CompilerOptions(const actor::RuntimeOptions& runtime) {
  actor::ModuleCompilerOptions o;
  o.timeout = runtime.compile_timeout;
  return o;
}

}  // namespace

ActorHost::ActorHost(RealEnv& env, ObjectStore& store, ClusterNode& node, MetricsRegistry& metrics,
                     replica::ReplicaTotals& replica_totals, const control::ClusterSecret& secret,
                     PeerTransport& peers, const TlsIdentity& peer_identity, const PeerTrust& peer_trust,
                     ActorHostOptions options)
    : env_(env),
      store_(store),
      options_(std::move(options)),
      compiler_(env, engine_, CompilerOptions(options_.runtime)),
      quarantine_cache_(env, store,
                        control::QuarantineCacheOptions{.broken = node.broken_models(),
                                                        .list_after = options_.quarantine_list_after}),
      quotas_(env, store),
      limits_(env, quotas_, node.membership()),
      quarantine_(env, store, quarantine_cache_,
                  QuarantineServiceOptions{options_.node_id, options_.quarantine, CallOptions{std::chrono::seconds(10)}},
                  options_.journal),
      alarm_index_(env, store, alarms::AlarmIndexOptions{.broken = node.broken_models()}),
      owner_holds_(node.owners()),
      holds_(owner_holds_, options_.quarantine.enabled() ? &quarantine_cache_ : nullptr, node.broken_models()),
      auth_(env, store),
      operators_(env, store),
      forwarder_(env, peers, ForwarderIdentity{options_.node_id, options_.instance}, secret) {
  replica::Replica::Deps deps{env, store, [&env](std::function<void()> fn) { env.PostFromAnyThread(std::move(fn)); },
                              &replica_totals, node.broken_models(), &alarm_index_};
  options_.runtime.broken = node.broken_models();
  stored_.set_broken_models(node.broken_models());
  options_.runtime.stored_quota = &stored_;
  options_.sockets.broken = node.broken_models();
  node.owners().set_sleep_policy(SleepPolicy{options_.runtime.sleeping_hold, options_.runtime.max_sleeping_holds});
  provider_ = std::make_unique<replica::ReplicaProvider>(std::move(deps), deletions_, options_.storage, options_.close_limit);
  actor::RuntimeHooks hooks = quarantine_.Hooks();
  // Class versions (docs/tenants.md): a start loads the version its state needs; each
  // migration is counted, and failures reach the class's rollout.
  hooks.load_version = [this](ActorId id, std::uint32_t version) {
    return LoadVersion(std::move(id.tenant), std::move(id.class_name), version);
  };
  hooks.on_upgrade = [this](const actor::UpgradeReport& report) { OnUpgrade(report); };
  hooks.on_event_time = [this](const ActorId& id, Duration worker_time) { limits_.ChargeCpu(id.tenant, worker_time); };
  hooks.resident_limit = [this](const std::string& tenant) { return limits_.ResidentShare(tenant); };
  hooks.tenant_weight = [this](const std::string& tenant) {
    const control::TenantQuotas* q = quotas_.For(tenant);
    const auto weight = q != nullptr ? q->Get(control::Quota::kCpuWeight) : std::nullopt;
    return weight ? static_cast<double>(*weight) : 1.0;
  };
  // Usage (docs/tenants.md, "Usage"): the runtime's residency, sampled by the meter.
  usage_ = std::make_unique<UsageMeter>(env, store, options_.node_id.str(), options_.usage_flush, [this] {
    std::vector<TenantResidency> out;
    if (!runtime_) return out;
    for (const actor::TenantMemory& m : runtime_->MemoryByTenant()) {
      if (m.actors > 0) out.push_back(TenantResidency{m.tenant, m.actors});
    }
    return out;
  });
  // Stored byte-seconds: integrated by the lowest live node of this node's view (any number
  // at once is safe, control/stored_usage.h; one is the cheap case).
  usage_->IntegrateStoredUsage(
      [&node, self = options_.node_id] {
        for (const auto& [id, view] : node.membership().view()) {
          if (view.live()) return id == self;
        }
        return false;
      },
      node.broken_models());
  hooks = usage_->Wrap(std::move(hooks));
  // Bucket requests per tenant (docs/tenants.md, "Usage"): what the replicas, the alarm index
  // and the ownership records send for a tenant's actors, reported as each completes.
  if (TenantStores* tenants = options_.tenant_stores) {
    provider_->set_tenant_stores(tenants);
    alarm_index_.set_tenant_stores(tenants);
    tenants->set_sink([this](const TenantRequest& r) { usage_->CountBucketRequest(r.tenant, r.purpose); });
  }
  runtime_ = std::make_unique<actor::ActorRuntime>(env, engine_, classes_, *provider_, options_.runtime,
                                                   std::move(hooks));
  sockets_ = std::make_unique<SocketHub>(env, options_.sockets);
  runtime_->SetSocketDirectory(sockets_.get());
  quarantine_.set_unload([this](const ActorId& id) { runtime_->Unload(id); });
  FrontDeps front{*runtime_, node.owners(), node.membership(), forwarder_,
                  [this](std::string authorization) { return auth_.Authenticate(authorization); },
                  [this](std::string tenant, std::string class_name) {
                    return LoadClass(std::move(tenant), std::move(class_name));
                  },
                  options_.quarantine.enabled() ? &quarantine_cache_ : nullptr,
                  [this](ActorId actor, std::string_view body) { return alarms_->ReceiveHandOver(actor, body); },
                  &node.hand_overs(),
                  [this](const std::string& tenant, const std::string& class_name) { RefreshClass(tenant, class_name); }};
  front.sockets = sockets_.get();
  front.limits = &limits_;
  // A handshake for an actor another node holds is relayed to it (docs/websockets.md).
  SocketRelayOptions relay;
  relay.limits = options_.sockets.connection;
  relay.max_connections = options_.sockets.max_connections;
  relay.max_answer_body_bytes = options_.runtime.limits.max_response_bytes + 64 * 1024;
  relay_ = std::make_unique<SocketRelay>(env, forwarder_, peer_identity, peer_trust, relay);
  PublishSocketRelayMetrics(metrics, *relay_);
  front.relay_socket = [this](PeerTarget to, ServerRequest request, std::string tenant, int hops) {
    return relay_->Relay(std::move(to), std::move(request), std::move(tenant), hops);
  };
  FrontOptions fo;
  fo.node_id = options_.node_id;
  fo.check_peer_pins = true;
  fo.max_request_bytes = options_.runtime.limits.max_request_bytes;
  fo.broken = node.broken_models();
  front_ = std::make_unique<Front>(std::move(front), fo);
  // WebSockets (docs/websockets.md): their events are routed as requests are; a hold that
  // ends here closes its actor's connections with 1012 (the clients reconnect to the new
  // owner), and a sleeping hold with connections is kept past its time.
  sockets_->SetRunEvent([this](ActorId id, actor::SocketEvent event) {
    return front_->RunSocketEvent(std::move(id), std::move(event));
  });
  node.owners().set_on_hold_ended_sockets([this](const HoldEnded& ended) {
    sockets_->CloseActor(ended.actor, kCloseRestart, "the actor's owner changed: reconnect");
  });
  node.owners().set_keep_sleeping([this](const ActorId& actor) { return sockets_->HasConnections(actor); });
  owners_ = &node.owners();
  PublishSocketHubMetrics(metrics, *sockets_);
  // Drains and moves close resident actors the way hibernation does, and a move's target
  // is told over the peer network (cluster/hand_over.h).
  HandOverHost hand_over;
  hand_over.unload = [this](const ActorId& id) {
    if (!runtime_->IsResident(id)) return false;
    runtime_->Unload(id);
    return true;
  };
  hand_over.take = [this](NodeId to, ActorId actor, Version released, Generation generation) {
    return front_->SendTake(std::move(to), std::move(actor), std::move(released), generation);
  };
  hand_overs_ = &node.hand_overs();
  hand_overs_->set_host(std::move(hand_over));
  alarms::AlarmServiceDeps alarm_deps{env, node.owners(), node.membership(), *runtime_, alarm_index_, &forwarder_,
                                      [this](std::string tenant, std::string class_name) {
                                        return LoadClass(std::move(tenant), std::move(class_name));
                                      },
                                      options_.quarantine.enabled() ? &quarantine_cache_ : nullptr,
                                      node.broken_models(),
                                      [this](const std::string& tenant, const std::string& class_name) {
                                        RefreshClass(tenant, class_name);
                                      },
                                      [this](const std::string& tenant) {
                                        return limits_.AdmitWork(control::Quota::kAlarmsPerSecond, tenant);
                                      }};
  alarms_ = std::make_unique<alarms::AlarmService>(std::move(alarm_deps), options_.alarms, options_.timing);
  scanner_ = std::make_unique<alarms::ShardScanner>(env, store, node.owners(), node.membership(), node.lease(),
                                                     node.drain_control(), *alarms_);
  scanner_->set_broken_models(node.broken_models());
  scanner_->Start();
  alarms::PublishAlarmMetrics(metrics, *alarms_, alarm_index_, *scanner_);
  // Messages between actors (docs/messages.md): the outboxes of the actors this node holds
  // are delivered through the front, as requests are routed.
  messages_ = std::make_unique<MessageDelivery>(
      env, *runtime_,
      [this](ActorId receiver, actor::IncomingMessage message) {
        return front_->DeliverMessage(std::move(receiver), std::move(message));
      },
      options_.messages, node.broken_models());
  messages_->SetAdmission(
      [this](const std::string& tenant) { return limits_.AdmitWork(control::Quota::kMessagesPerSecond, tenant); });
  runtime_->SetOutboxListener([this](const ActorId& sender) {
    if (messages_) messages_->Kick(sender);
  });
  PublishMessageMetrics(metrics, *messages_);
  admin_ = std::make_unique<ActorAdmin>(ActorAdminDeps{env, store, node, *runtime_, *provider_, deletions_, forwarder_,
                                                       *front_, auth_, operators_, metrics, replica_totals, options_.node_id,
                                                       options_.instance, options_.bucket_requests, &alarms_->stats(),
                                                       &scanner_->stats(), options_.storage.retention,
                                                       node.broken_models(), &quotas_, &usage_->book()});
  actor::PublishRuntimeMetrics(metrics, *runtime_);
  PublishFrontMetrics(metrics, *front_);
  PublishForwarderMetrics(metrics, forwarder_);
  quarantine_.StartSweeps();
  quotas_.Start();
  // The stored-bytes ledger: a tenant with a stored_bytes quota every quota period, the
  // others with the usage flush.
  control::StoredLedgerHooks ledger;
  ledger.own = [this] {
    std::map<std::string, control::StoredLedgerHooks::Own> out;
    for (const auto& [tenant, f] : stored_.All()) out.emplace(tenant, control::StoredLedgerHooks::Own{f.own, f.base_loaded});
    return out;
  };
  ledger.load_base = [this](const std::string& tenant, std::int64_t base) { stored_.LoadBase(tenant, base); };
  ledger.set_others = [this](const std::string& tenant, std::int64_t others) { stored_.SetOthers(tenant, others); };
  // The stored_bytes quotas reach the figures the events check as soon as the cache reads
  // them (not at the ledger's next period).
  quotas_.set_on_refresh([this] {
    const auto limits = quotas_.With(control::Quota::kStoredBytes);
    for (const auto& [tenant, f] : stored_.All()) {
      if (f.limit && !limits.contains(tenant)) stored_.SetLimit(tenant, std::nullopt);  // lifted
    }
    for (const auto& [tenant, limit] : limits) stored_.SetLimit(tenant, limit);
  });
  ledger.limited = [this] {
    std::vector<std::string> out;
    for (const auto& [tenant, limit] : quotas_.With(control::Quota::kStoredBytes)) out.push_back(tenant);
    return out;
  };
  ledger_ = std::make_unique<control::StoredLedger>(env, store, options_.node_id.str(), control::kDefaultQuotaPeriod,
                                                    options_.usage_flush, std::move(ledger));
  ledger_->Start();
  PublishTenantLimitMetrics(metrics, quotas_, limits_);
  metrics.AddCallbackCounter("wasmkeep_quota_stored_bytes_refusals_total",
                             "storage_put calls that failed their event because the tenant's stored bytes would pass its "
                             "stored_bytes quota (docs/tenants.md, \"Quotas\").",
                             [this] { return static_cast<double>(stored_.refusals()); });
  const std::string ledger_help =
      "The stored-bytes ledger's records (control/stored_ledger.h): this node's written, periods whose reads or writes "
      "failed, records that did not decode.";
  metrics.AddCallbackCounter("wasmkeep_stored_ledger_total", ledger_help,
                             [this] { return static_cast<double>(ledger_->stats().writes); }, {{"event", "written"}});
  metrics.AddCallbackCounter("wasmkeep_stored_ledger_total", ledger_help,
                             [this] { return static_cast<double>(ledger_->stats().failed); }, {{"event", "failed"}});
  metrics.AddCallbackCounter("wasmkeep_stored_ledger_total", ledger_help,
                             [this] { return static_cast<double>(ledger_->stats().corrupt); }, {{"event", "corrupt"}});
  usage_->PublishMetrics(metrics);
  usage_->Start();
  control::PublishQuarantineCacheMetrics(metrics, quarantine_cache_);
  PublishQuarantineMetrics(metrics, quarantine_);
  // Migrations of class versions run here (docs/tenants.md, "Migrations").
  const std::string migrations_help = "State migrations (wk_on_upgrade) run on this node, by outcome.";
  metrics.AddCallbackCounter("wasmkeep_class_migrations_total", migrations_help,
                             [this] { return static_cast<double>(upgrade_stats_.migrated); }, {{"outcome", "ok"}});
  metrics.AddCallbackCounter("wasmkeep_class_migrations_total", migrations_help,
                             [this] { return static_cast<double>(upgrade_stats_.failed); }, {{"outcome", "failed"}});
  if (!options_.crashed_during_events.empty()) {
    WK_LOG_WARN("the previous process ended while events ran: one quarantine strike each",
                {{"node", options_.node_id.str()}, {"actors", std::to_string(options_.crashed_during_events.size())}});
    quarantine_.RecordCrashStrikes(options_.crashed_during_events);
  }
}

ActorHost::~ActorHost() {
  *alive_ = false;
  if (options_.tenant_stores != nullptr) options_.tenant_stores->set_sink(nullptr);  // the meter goes with this host
  hand_overs_->set_host({});  // the node outlives this host
  owners_->set_on_hold_ended_sockets(nullptr);
  owners_->set_keep_sleeping(nullptr);
  sockets_->CloseAll(kCloseGoingAway, "the node is stopping");
  relay_->Stop(kCloseGoingAway, "the node is stopping");
  StopAlarms();
}

Task<bool> ActorHost::Shutdown(Duration limit) {
  StopAlarms();
  sockets_->CloseAll(kCloseRestart, "the node is stopping: reconnect");
  relay_->Stop(kCloseRestart, "the node is stopping: reconnect");
  co_return co_await runtime_->Shutdown(limit);
}

void ActorHost::StopAlarms() {
  if (messages_) messages_->Stop();
  if (scanner_) scanner_->Stop();
  if (alarms_) alarms_->Stop();
}

Task<ServerResponse> ActorHost::Handle(ServerRequest request, Via via) {
  if (ActorAdmin::Matches(request.target)) co_return co_await admin_->Handle(std::move(request), via);
  if (via != Via::kClient) co_return co_await front_->Handle(std::move(request), via);
  std::shared_ptr<bool> alive = alive_;
  const MonoTime start = env_.MonoNow();
  std::string target = request.target;
  bool reached_actor = false;
  const std::uint64_t ingress = request.body.size();
  ServerResponse r = co_await front_->Handle(std::move(request), via, &reached_actor);
  if (*alive) {
    // Usage: of a tenant whose class is known deployed only (as the traffic rows), and not
    // a refused token's request (401, 403): anyone can name a tenant in a path, and only its
    // own requests are its usage.
    if (auto named = ClassTrafficTable::ClassOf(target);
        named && r.status != 401 && r.status != 403 && (reached_actor || ClassKnown(named->first, named->second))) {
      usage_->CountRequest(named->first, r.status, ingress, r.body.size());
    }
    // Its class's own row only for a class known to be deployed (routing/class_traffic.h).
    admin_->RecordTraffic(target, r.status, env_.MonoNow() - start,
                          [this, reached_actor](const std::string& tenant, const std::string& class_name) {
                            return reached_actor || ClassKnown(tenant, class_name);
                          });
  }
  co_return r;
}

Task<std::optional<ServerResponse>> ActorHost::CheckBeforeBody(ServerRequest request) {
  if (ActorAdmin::Matches(request.target)) co_return admin_->CheckBeforeBody(request);
  std::shared_ptr<bool> alive = alive_;
  std::string target = request.target;
  auto refused = co_await front_->CheckBeforeBody(std::move(request));
  // Refused before its body was read: Handle never sees it, so it is counted here.
  if (refused && *alive) {
    if (auto named = ClassTrafficTable::ClassOf(target);
        named && refused->status != 401 && refused->status != 403 && ClassKnown(named->first, named->second)) {
      usage_->CountRequest(named->first, refused->status, 0, refused->body.size());
    }
    admin_->RecordTraffic(target, refused->status, Duration(0), [this](const std::string& tenant, const std::string& class_name) {
      return ClassKnown(tenant, class_name);
    });
  }
  co_return refused;
}

void ActorHost::RefreshClass(const std::string& tenant, const std::string& class_name) {
  const auto key = std::make_pair(tenant, class_name);
  const auto it = loaded_.find(key);
  if (it != loaded_.end() && env_.MonoNow() - it->second.checked < options_.class_check) return;
  if (!refreshing_.insert(key).second) return;  // one refresh per class at a time
  auto refresh = [](ActorHost* self, std::shared_ptr<bool> alive, std::string t, std::string c) -> Task<void> {
    Status s = co_await self->LoadClass(t, c);
    if (!*alive) co_return;
    self->refreshing_.erase(std::make_pair(t, c));
    // A failure leaves the resident actors on the code they run; the next event asks again.
    if (!s.ok()) WK_LOG_DEBUG("class refresh failed", {{"class", t + "/" + c}, {"error", s.ToString()}});
  };
  env_.Spawn(refresh(this, alive_, tenant, class_name), "class refresh " + tenant + "/" + class_name);
}

bool ActorHost::ClassKnown(const std::string& tenant, const std::string& class_name) const {
  const auto it = loaded_.find(std::make_pair(tenant, class_name));
  return it != loaded_.end() && it->second.exists;
}

Task<Status> ActorHost::LoadClass(std::string tenant, std::string class_name) {
  std::shared_ptr<bool> alive = alive_;
  const auto key = std::make_pair(tenant, class_name);
  auto it = loaded_.find(key);
  // Trusted for class_check, unless its module was dropped to meet the memory budget (then
  // compiled again below).
  if (it != loaded_.end() && env_.MonoNow() - it->second.checked < options_.class_check &&
      (!it->second.exists || !classes_.Dropped(tenant, class_name))) {
    if (it->second.exists) co_return Status::Ok();
    co_return NotFound("no class " + tenant + "/" + class_name + " (deploy one with `wasmkeep deploy`)");
  }
  const MonoTime checked = env_.MonoNow();
  // A class deployed with versions has a rollout (docs/tenants.md, "Deploying"); one
  // deployed before them only its `current` pointer.
  auto rollout = co_await control::ReadRollout(store_, tenant, class_name, CallOptions{std::chrono::seconds(5)});
  if (!*alive) co_return Cancelled("node stopping");
  if (!rollout.ok()) co_return rollout.status();
  if (rollout->has_value()) {
    const control::Rollout& r = **rollout;
    it = loaded_.find(key);
    if (it != loaded_.end() && it->second.exists && it->second.rollout_revision == r.revision &&
        !classes_.Dropped(tenant, class_name)) {
      it->second.checked = checked;
      co_return Status::Ok();
    }
    // Every version the rollout names, compiled before any is registered, then registered
    // with the chooser in one loop turn: no actor sees the class half-loaded. A version that
    // does not load is left to the actors that need it (each refused, and loading it again
    // at its next event: ActorRuntimeCore's load_version); the others run.
    std::vector<std::pair<control::VersionNumber, std::shared_ptr<const engine::Module>>> compiled;
    for (control::VersionNumber v : control::VersionsInPlay(r)) {
      if (classes_.Find(tenant, class_name, v)) continue;
      auto module = co_await CompileVersion(tenant, class_name, v);
      if (!*alive) co_return Cancelled("node stopping");
      if (!module.ok()) {
        WK_LOG_WARN("class version not loaded", {{"node", options_.node_id.str()},
                                                 {"class", tenant + "/" + class_name},
                                                 {"version", std::to_string(v)},
                                                 {"error", module.status().ToString()}});
        continue;
      }
      compiled.emplace_back(v, std::move(*module));
    }
    for (auto& [v, module] : compiled) {
      if (Status registered = runtime_->RegisterVersion(tenant, class_name, v, std::move(module)); !registered.ok()) {
        WK_LOG_WARN("class version refused", {{"node", options_.node_id.str()},
                                              {"class", tenant + "/" + class_name},
                                              {"version", std::to_string(v)},
                                              {"error", registered.message()}});
      }
    }
    const BrokenModels broken = options_.runtime.broken;
    classes_.SetChooser(
        tenant, class_name,
        [r, broken](std::string_view name, std::uint32_t mark, bool empty) {
          const control::VersionChoice c = control::ChooseVersion(r, name, mark, empty, broken);
          return actor::VersionPick{c.run, c.upgrade_from, c.no_fallback};
        },
        r.stable);
    const bool first = it == loaded_.end() || it->second.rollout_revision != r.revision;
    loaded_[key] = Loaded{{}, checked, true, r.revision};
    if (first) {
      WK_LOG_INFO("class rollout", {{"node", options_.node_id.str()},
                                    {"class", tenant + "/" + class_name},
                                    {"stable", std::to_string(r.stable)},
                                    {"candidate", std::to_string(r.candidate)},
                                    {"percent", std::to_string(r.percent)},
                                    {"paused", r.paused ? "yes" : "no"}});
    }
    co_return Status::Ok();
  }
  auto current = co_await control::CurrentClass(store_, tenant, class_name, CallOptions{std::chrono::seconds(5)});
  if (!*alive) co_return Cancelled("node stopping");
  if (!current.ok()) co_return current.status();
  if (!current->has_value()) {
    // Remembered for class_check, so a burst of requests for a missing class costs one GET;
    // bounded, since any caller can name classes that do not exist.
    if (loaded_.size() >= kMaxRememberedClasses) std::erase_if(loaded_, [](const auto& e) { return !e.second.exists; });
    if (loaded_.size() < kMaxRememberedClasses) loaded_[key] = Loaded{{}, checked, false, 0};
    co_return NotFound("no class " + tenant + "/" + class_name + " (deploy one with `wasmkeep deploy`)");
  }
  const control::ModuleDigest digest = (*current)->module;
  it = loaded_.find(key);
  if (it != loaded_.end() && it->second.exists && it->second.digest == digest &&
      classes_.Find(tenant, class_name) != nullptr) {
    it->second.checked = checked;
    co_return Status::Ok();
  }
  auto module = co_await CompileModule(tenant, class_name, digest, "");
  if (!*alive) co_return Cancelled("node stopping");
  if (!module.ok()) co_return module.status();
  // Charged to the tenant and the node's budget; refused past either (503, Retry-After).
  if (Status registered = runtime_->RegisterClass(tenant, class_name, *module); !registered.ok()) {
    WK_LOG_WARN("class refused", {{"node", options_.node_id.str()},
                                  {"class", tenant + "/" + class_name},
                                  {"error", registered.message()}});
    co_return registered;
  }
  loaded_[key] = Loaded{digest, checked, true, 0};
  co_return Status::Ok();
}

Task<Status> ActorHost::LoadVersion(std::string tenant, std::string class_name, std::uint32_t version) {
  std::shared_ptr<bool> alive = alive_;
  if (!classes_.Versioned(tenant, class_name)) {
    // A state a version committed, of a class this node read before its first rollout: read
    // the class again now (its rollout names its versions).
    loaded_.erase(std::make_pair(tenant, class_name));
    Status s = co_await LoadClass(tenant, class_name);
    if (!*alive) co_return Cancelled("node stopping");
    if (!s.ok()) co_return s;
  }
  if (classes_.Find(tenant, class_name, version)) co_return Status::Ok();
  auto module = co_await CompileVersion(tenant, class_name, version);
  if (!*alive) co_return Cancelled("node stopping");
  if (!module.ok()) co_return module.status();
  if (Status registered = runtime_->RegisterVersion(tenant, class_name, version, *module); !registered.ok()) {
    WK_LOG_WARN("class version refused", {{"node", options_.node_id.str()},
                                          {"class", tenant + "/" + class_name},
                                          {"version", std::to_string(version)},
                                          {"error", registered.message()}});
    co_return registered;
  }
  co_return Status::Ok();
}

Task<Result<std::shared_ptr<const engine::Module>>> ActorHost::CompileVersion(std::string tenant,
                                                                              std::string class_name,
                                                                              std::uint32_t version) {
  std::shared_ptr<bool> alive = alive_;
  auto record = co_await control::ReadVersion(store_, tenant, class_name, version, CallOptions{std::chrono::seconds(5)});
  if (!*alive) co_return Cancelled("node stopping");
  if (!record.ok()) co_return record.status();
  co_return co_await CompileModule(tenant, class_name, record->module, " version " + std::to_string(version));
}

Task<Result<std::shared_ptr<const engine::Module>>> ActorHost::CompileModule(std::string tenant, std::string class_name,
                                                                             control::ModuleDigest digest,
                                                                             std::string what) {
  std::shared_ptr<bool> alive = alive_;
  auto bytes = co_await control::ReadModule(store_, tenant, class_name, digest, CallOptions{std::chrono::seconds(30)});
  if (!*alive) co_return Cancelled("node stopping");
  if (!bytes.ok()) co_return bytes.status();
  const std::size_t size = bytes->size();
  // On the compile threads, never on this loop (the lease keeps being renewed); one compile
  // per module however many requests wait for it.
  auto module = co_await compiler_.Compile(tenant + "/" + class_name + "@" + digest.hex, std::move(*bytes),
                                           options_.runtime.limits, tenant);
  if (!*alive) co_return Cancelled("node stopping");
  if (!module.ok() && module.status().code() != Code::kInvalidArgument) co_return module.status();
  if (!module.ok()) {
    // Deploy checked it with its own limits and host calls; this node's may differ (an
    // older node without a call the module imports: the message names it).
    co_return Fatal("class " + tenant + "/" + class_name + what + " (module " + digest.hex.substr(0, 12) +
                    ") does not compile here: " + module.status().message());
  }
  WK_LOG_INFO("class loaded", {{"node", options_.node_id.str()},
                               {"class", tenant + "/" + class_name + what},
                               {"module", digest.hex.substr(0, 12)},
                               {"bytes", std::to_string(size)},
                               {"compile_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                 (*module)->compile_time())
                                                                 .count())}});
  co_return std::move(*module);
}

void ActorHost::OnUpgrade(const actor::UpgradeReport& report) {
  if (report.ok) {
    ++upgrade_stats_.migrated;
    return;
  }
  ++upgrade_stats_.failed;
  // Counted in the class's rollout, which pauses itself at its failure limit. One write at
  // a time per class: failures meanwhile are added to the next.
  const auto key = std::make_pair(report.id.tenant, report.id.class_name);
  UpgradeFailures& f = upgrade_failures_[key];
  f.pending[report.to] += 1;
  f.last_error = report.error;
  if (f.writing) return;
  f.writing = true;
  auto write = [](ActorHost* self, std::shared_ptr<bool> alive, std::string t, std::string c) -> Task<void> {
    for (;;) {
      UpgradeFailures& f = self->upgrade_failures_[std::make_pair(t, c)];
      if (f.pending.empty()) {
        f.writing = false;
        co_return;
      }
      auto [version, count] = *f.pending.begin();
      f.pending.erase(f.pending.begin());
      auto r = co_await control::UpdateRollout(self->store_, self->env_, t, c,
                                               control::CountFailure(version, f.last_error, count),
                                               CallOptions{std::chrono::seconds(10)});
      if (!*alive) co_return;
      if (!r.ok()) {
        WK_LOG_WARN("migration failures not recorded", {{"class", t + "/" + c}, {"error", r.status().ToString()}});
        // Kept for the next failure's write (not retried here: the bucket may be away).
        self->upgrade_failures_[std::make_pair(t, c)].pending[version] += count;
        self->upgrade_failures_[std::make_pair(t, c)].writing = false;
        co_return;
      } else if (r->paused) {
        WK_LOG_WARN("class rollout paused", {{"class", t + "/" + c}, {"reason", r->paused_reason}});
        self->loaded_.erase(std::make_pair(t, c));  // read again by the next event: the pause applies here
      }
    }
  };
  env_.Spawn(write(this, alive_, report.id.tenant, report.id.class_name),
             "migration failures " + report.id.tenant + "/" + report.id.class_name);
}

Task<Status> ActorHost::FlushUsage() {
  ledger_->Stop();
  Status ledger = co_await ledger_->Tick(/*all=*/true);
  if (!ledger.ok()) WK_LOG_WARN("clean stop: the last stored-bytes ledger write failed", {{"error", ledger.ToString()}});
  co_return co_await usage_->Stop();
}

}  // namespace wk
