#include "cli/cluster_cmd.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cost_cmd.h"
#include "cluster/balance.h"
#include "cluster/drain_control.h"
#include "cluster/operator.h"

namespace wk::cli {
namespace {

struct ClusterArgs {
  bool json = false;
  std::string node;
  std::string if_match;
  bool force = false;
  double wait_seconds = 60;
  bool dry_run = false;
  CostArgs cost;
};

Task<int> Status_(RealEnv* env, ObjectStore* store, LeaseTiming timing, bool json) {
  auto nodes = co_await ClusterStatus(*env, *store, timing);
  if (!nodes.ok()) co_return Fail(nodes.status());
  bool errors = false;
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& n : *nodes) {
      nlohmann::json j = {{"node", n.node_id.str()}, {"state", n.state}, {"detail", n.detail},
                          {"instance", n.instance.str()}, {"address", n.address}, {"version", n.software_version},
                          {"error", n.error}};
      if (n.age) j["age_seconds"] = ToSeconds(*n.age);
      out.push_back(j);
      errors |= n.error;
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%-20s %-13s %-8s %-33s %-22s %s\n", "NODE", "STATE", "AGE", "INSTANCE", "ADDRESS", "DETAIL");
    for (const auto& n : *nodes) {
      char age[24] = "-";
      if (n.age) std::snprintf(age, sizeof age, "%.1fs", ToSeconds(*n.age));
      std::printf("%-20s %-13s %-8s %-33s %-22s %s\n", n.node_id.str().c_str(), n.state.c_str(), age,
                  n.instance.empty() ? "-" : n.instance.str().c_str(), n.address.empty() ? "-" : n.address.c_str(),
                  n.detail.c_str());
      errors |= n.error;
    }
    if (nodes->empty()) std::printf("(no nodes in the bucket)\n");
  }
  if (errors) std::fprintf(stderr, "wasmkeep: some nodes need attention (old version running or corrupt object)\n");
  co_return kExitOk;
}

Task<int> Fence(RealEnv* env, ObjectStore* store, LeaseTiming timing, NodeId node, std::string if_match, bool force) {
  std::optional<Version> v;
  if (!if_match.empty()) v = Version(if_match);
  auto out = co_await OperatorFence(*env, *store, node, timing, v, force);
  if (!out.ok()) co_return Fail(out.status());
  if (!out->written) {
    std::printf("nodes/%s is already fenced; nothing written\n", node.str().c_str());
  } else if (out->created) {
    std::printf("fenced nodes/%s (no object existed): records naming it are free from %s\n", node.str().c_str(),
                IsoUtc(out->free_at).c_str());
  } else {
    std::printf("fenced nodes/%s (instance %s, last written %s): its process exits at its next write; "
                "records naming it are free from %s\n",
                node.str().c_str(), out->instance.str().c_str(), IsoUtc(out->written_at).c_str(), IsoUtc(out->free_at).c_str());
  }
  co_return kExitOk;
}

Task<int> Forget(RealEnv* env, ObjectStore* store, LeaseTiming timing, NodeId node) {
  Status s = co_await OperatorForget(*env, *store, node, timing);
  if (!s.ok()) co_return Fail(s);
  std::printf("forgot nodes/%s (a retired old-format heartbeat)\n", node.str().c_str());
  co_return kExitOk;
}

// `cluster drain NODE`: writes the request (control/drain/NODE), then waits for the node to
// report drained (every resident actor released, nothing pending).
Task<int> Drain(RealEnv* env, ObjectStore* store, LeaseTiming timing, NodeId node, double wait_seconds) {
  if (Status s = ValidateNodeId(node); !s.ok()) co_return Fail(s);
  const std::string key = DrainKey(node);
  const CallOptions call{timing.ttl};
  std::string body = EncodeDrainRecord(DrainRecord{DrainState::kRequested, env->WallNow()});
  auto put = co_await store->Put(key, std::move(body), Precondition::IfNoneMatchAny(), call);
  if (!put.ok() && put.code() != Code::kPreconditionFailed) co_return Fail(put.status());
  std::printf(put.ok() ? "drain of %s requested\n" : "a drain of %s was already requested\n", node.str().c_str());
  const MonoTime deadline = env->MonoNow() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait_seconds));
  while (env->MonoNow() < deadline) {
    auto got = co_await store->Get(key, call);
    if (got.ok()) {
      auto rec = DecodeDrainRecord(got->body);
      if (rec.ok() && rec->state == DrainState::kDrained) {
        std::printf("%s is drained: no actor resident, no release pending (undo with `cluster undrain %s`)\n",
                    node.str().c_str(), node.str().c_str());
        co_return kExitOk;
      }
    } else if (got.code() == Code::kNotFound) {
      co_return Fail(PreconditionFailed("the drain request was removed (undrained) before it completed"));
    }
    (void)co_await env->SleepFor(std::chrono::milliseconds(500));
  }
  std::fprintf(stderr, "wasmkeep: %s is not drained yet (a node drains only while its lease is valid and "
               "reports drained once no release is pending); the request stays\n", node.str().c_str());
  co_return kExitUnknownOutcome;
}

Task<int> Undrain(RealEnv*, ObjectStore* store, LeaseTiming timing, NodeId node) {
  if (Status s = ValidateNodeId(node); !s.ok()) co_return Fail(s);
  Status s = co_await store->Delete(DrainKey(node), Precondition::None(), CallOptions{timing.ttl});
  if (!s.ok()) co_return Fail(s);
  std::printf("%s takes actors again at its next listing\n", node.str().c_str());
  co_return kExitOk;
}

// `cluster balance`: moves so that live nodes hold similar counts (cluster/balance.h), each
// a request to the node that holds the actor (control/move/...), carried out at that node's
// [moves] per_second. A move can lose its actor to a third node that a request reached
// between the release and the target's take (docs/node-lease.md, "Moving actors"), so the
// command plans again after each round, until a round plans nothing (at most kBalanceRounds).
constexpr int kBalanceRounds = 3;

Task<int> Balance(RealEnv* env, ObjectStore* store, LeaseTiming timing, bool dry_run, double wait_seconds) {
  const CallOptions call{timing.ttl};
  const MonoTime deadline =
      env->MonoNow() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait_seconds));
  std::map<MoveState, std::size_t> outcomes;
  std::size_t not_requested = 0;
  for (int round = 1; round <= kBalanceRounds; ++round) {
    auto load = co_await ReadClusterLoad(*env, *store, timing);
    if (!load.ok()) co_return Fail(load.status());
    if (load->nodes.empty()) co_return Fail(PreconditionFailed("no live node takes actors (none live, or all draining)"));
    const std::vector<PlannedMove> moves = PlanBalance(*load);
    std::map<NodeId, long> after;
    for (const NodeId& id : load->nodes) after[id] = static_cast<long>(load->held[id].size());
    for (const PlannedMove& m : moves) {
      --after[m.from];
      ++after[m.to];
    }
    if (round == 1 || !moves.empty()) {
      std::printf("%-20s %8s %8s\n", "NODE", "HOLDS", "AFTER");
      for (const NodeId& id : load->nodes) {
        std::printf("%-20s %8zu %8ld\n", id.str().c_str(), load->held[id].size(), after[id]);
      }
    }
    if (moves.empty()) {
      std::printf("balanced: nothing to move\n");
      break;
    }
    for (const PlannedMove& m : moves) {
      std::printf("move %s %s -> %s\n", m.actor.ToString().c_str(), m.from.str().c_str(), m.to.str().c_str());
    }
    if (dry_run) {
      std::printf("%zu moves planned (dry run: nothing requested)\n", moves.size());
      co_return kExitOk;
    }
    if (round == kBalanceRounds) {
      std::fprintf(stderr, "wasmkeep: still %zu moves to make after %d rounds (the cluster keeps changing); run it again\n",
                   moves.size(), kBalanceRounds);
      co_return kExitPreconditionFailed;
    }
    std::vector<PlannedMove> requested;
    for (const PlannedMove& m : moves) {
      Status s = co_await RequestMove(*env, *store, m, call);
      if (s.ok()) {
        requested.push_back(m);
      } else {
        ++not_requested;
        std::fprintf(stderr, "wasmkeep: %s: %s\n", m.actor.ToString().c_str(), s.ToString().c_str());
      }
    }
    std::printf("round %d: %zu moves requested; each node carries out its own at its [moves] per_second\n", round,
                requested.size());
    std::map<MoveState, std::size_t> round_outcomes;
    for (const PlannedMove& m : requested) {
      auto r = co_await AwaitMove(*env, *store, m.from, m.actor, deadline, call);
      const MoveState state = r.ok() ? r->state : MoveState::kRequested;
      ++round_outcomes[state];
      ++outcomes[state];
      if (state != MoveState::kMoved) {
        const std::string detail = r.ok() && !r->detail.empty() ? " (" + r->detail + ")" : "";
        std::fprintf(stderr, "wasmkeep: %s: %s%s\n", m.actor.ToString().c_str(),
                     std::string(MoveStateName(state)).c_str(), detail.c_str());
      }
    }
    std::printf("round %d: moved %zu, refused %zu, released without a taker %zu, pending %zu, not done yet %zu\n", round,
                round_outcomes[MoveState::kMoved], round_outcomes[MoveState::kRefused],
                round_outcomes[MoveState::kReleased], round_outcomes[MoveState::kPending],
                round_outcomes[MoveState::kRequested]);
    // Moves still under way or pending: planning again now would count them twice.
    if (round_outcomes[MoveState::kRequested] > 0 || round_outcomes[MoveState::kPending] > 0) co_return kExitUnknownOutcome;
  }
  if (not_requested > 0) co_return kExitPreconditionFailed;
  co_return kExitOk;
}

int RunCluster(const GlobalOptions& g, const ClusterArgs& a, int which) {
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  if (which == 5) {
    // cluster cost: its options are checked before the bucket is opened, and with --metrics
    // it reads nothing from the bucket, so it needs none.
    auto prepared = PrepareClusterCost(a.cost);
    if (!prepared.ok()) return Fail(prepared.status());
    std::unique_ptr<ObjectStore> bucket;
    if (a.cost.metrics.empty()) {
      auto opened = OpenBucket(env, g, *config, BucketOpen::kMustExist);
      if (!opened.ok()) return FailOpen(opened.status());
      bucket = std::move(*opened);
    }
    return RunClusterCost(env, bucket.get(), config->lease, a.cost, std::move(*prepared));
  }
  auto store = OpenBucket(env, g, *config, BucketOpen::kMustExist);
  if (!store.ok()) return FailOpen(store.status());
  const NodeId node(a.node);  // the command line's text; each command validates it
  switch (which) {
    case 0: return env.RunMain(Status_(&env, store->get(), config->lease, a.json));
    case 1: return env.RunMain(Fence(&env, store->get(), config->lease, node, a.if_match, a.force));
    case 3: return env.RunMain(Drain(&env, store->get(), config->lease, node, a.wait_seconds));
    case 4: return env.RunMain(Undrain(&env, store->get(), config->lease, node));
    case 6: return env.RunMain(Balance(&env, store->get(), config->lease, a.dry_run, a.wait_seconds));
    default: return env.RunMain(Forget(&env, store->get(), config->lease, node));
  }
}

}  // namespace

void AddClusterCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto args = std::make_shared<ClusterArgs>();
  CLI::App* cluster = app.add_subcommand("cluster", "Inspect and manage node leases");
  cluster->require_subcommand(1);

  CLI::App* status = cluster->add_subcommand("status", "Every node's lease: state, instance, age");
  status->add_flag("--json", args->json, "Print JSON");
  status->callback([&globals, args, result] { *result = RunCluster(globals, *args, 0); });

  CLI::App* fence = cluster->add_subcommand("fence", "Fence NODE: its process exits at its next write, its actors become free");
  fence->add_option("node", args->node, "Node id")->required();
  fence->add_option("--if-match", args->if_match, "Fence only if nodes/NODE is still at VERSION");
  fence->add_flag("--force", args->force,
                  "Create the fence of an absent NODE even if this machine's clock differs from the bucket's by more "
                  "than max_skew (it dates the fence)");
  fence->callback([&globals, args, result] { *result = RunCluster(globals, *args, 1); });

  CLI::App* forget = cluster->add_subcommand("forget", "Delete a retired node's stale old-format heartbeat");
  forget->add_option("node", args->node, "Node id")->required();
  forget->callback([&globals, args, result] { *result = RunCluster(globals, *args, 2); });

  CLI::App* drain = cluster->add_subcommand("drain", "Drain NODE: it takes no new actors and hands every resident one over (closed, durable, released); waits until drained");
  drain->add_option("node", args->node, "Node id")->required();
  drain->add_option("--wait", args->wait_seconds, "Seconds to wait for the node to report drained (default 60)");
  drain->callback([&globals, args, result] { *result = RunCluster(globals, *args, 3); });

  CLI::App* balance = cluster->add_subcommand(
      "balance", "Move resident actors so that live nodes hold similar counts (a node that just joined gets its share)");
  balance->add_flag("--dry-run", args->dry_run, "Print the moves, request none");
  balance->add_option("--wait", args->wait_seconds, "Seconds to wait for the moves to be carried out (default 60)");
  balance->callback([&globals, args, result] { *result = RunCluster(globals, *args, 6); });

  CLI::App* undrain = cluster->add_subcommand("undrain", "Put a drained NODE back in service");
  undrain->add_option("node", args->node, "Node id")->required();
  undrain->callback([&globals, args, result] { *result = RunCluster(globals, *args, 4); });

  CLI::App* cost = cluster->add_subcommand(
      "cost",
      "Bucket requests per second by purpose, summed over the live nodes, and their price per day; what the bucket "
      "stores per tenant and its price per month");
  cost->add_option("--since", args->cost.since,
                   "Measure over this long from now (30s, 5m, 1h; default: since each node's process started)");
  cost->add_option("--prices", args->cost.prices, "aws-s3 (default), r2, or a price file (TOML, docs/cli.md)");
  cost->add_option("--metrics", args->cost.metrics,
                   "A node's metrics URL (repeatable); default: every live node's, from the bucket");
  cost->add_flag("--no-storage", args->cost.no_storage,
                 "Do not list the bucket (one LIST per 1,000 objects) for what it stores per tenant");
  cost->add_flag("--json", args->cost.json, "Print JSON");
  cost->callback([&globals, args, result] { *result = RunCluster(globals, *args, 5); });
}

}  // namespace wk::cli
