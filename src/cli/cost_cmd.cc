// `wasmkeep cluster cost [--since DURATION] [--prices aws-s3|r2|FILE] [--metrics URL]...
// [--no-storage] [--json]`: finds the live nodes (their records in nodes/, their metrics
// address in control/endpoints/<node>, cluster/node_endpoints.h), scrapes each one's
// /metrics, lists the bucket, and prints the cluster's bucket requests per second by purpose
// and what they cost per day, and what the bucket stores per tenant and its price per month
// (cli/cost.h; docs/cli.md, "cluster cost").
#include "cli/cost_cmd.h"

#include <cstdio>

#include "cli/cost.h"
#include "cluster/membership.h"
#include "cluster/node_endpoints.h"
#include "net/http_client.h"

namespace wk::cli {
namespace {

// A scrape's deadline: a node that does not answer in this long is left out, named.
constexpr Duration kScrapeTimeout = std::chrono::seconds(5);
// One page of the bucket's listing (1,000 keys).
constexpr Duration kListTimeout = std::chrono::seconds(30);

// The whole bucket, listed page by page: what it stores per tenant.
Task<Result<StorageReport>> ListStorage(ObjectStore* store) {
  StorageTally tally;
  ListOptions options;
  std::uint64_t lists = 0;
  for (;;) {
    auto page = co_await store->List(options, CallOptions{kListTimeout});
    ++lists;
    if (!page.ok()) co_return page.status();
    for (const ListEntry& e : page->entries) tally.Add(e);  // pages come in key order
    if (!page->next_continuation) break;
    options.continuation = std::move(*page->next_continuation);
  }
  StorageReport report = tally.Finish();
  report.lists = lists;
  co_return report;
}

struct Target {
  std::string name;  // the node id, or the URL given with --metrics
  std::string url;
};

struct Sample {
  NodeCounts counts;
  MonoTime at{};
  WallTime wall{};
};

// GET url (http(s)://host:port/path) and read the bucket series of its body.
Task<Result<Sample>> Scrape(RealEnv* env, std::string url) {
  const std::size_t scheme = url.find("://");
  const std::size_t slash = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  auto endpoint = ParseHttpEndpoint(slash == std::string::npos ? url : url.substr(0, slash));
  if (!endpoint.ok()) co_return InvalidArgument("bad metrics URL: " + endpoint.status().message());
  auto client = HttpClient::Create(*env, *endpoint);
  if (!client.ok()) co_return client.status();
  HttpRequest request;
  request.target = slash == std::string::npos ? "/metrics" : url.substr(slash);
  request.idempotent = true;
  auto out = co_await (*client)->Send(std::move(request), env->MonoNow() + kScrapeTimeout);
  (*client)->Shutdown();
  if (!out.ok()) co_return Retryable(std::string(HttpFailureName(out.failure)) + ": " + out.detail);
  if (out.response.status != 200) co_return Retryable("HTTP " + std::to_string(out.response.status));
  auto counts = ParseNodeMetrics(out.response.body);
  if (!counts.ok()) co_return counts.status();
  co_return Sample{std::move(*counts), env->MonoNow(), env->WallNow()};
}

// The live nodes and where their metrics are. Nodes whose address is unknown are named in
// notes.
Task<Result<std::vector<Target>>> FindNodes(RealEnv* env, ObjectStore* store, LeaseTiming timing,
                                            std::vector<std::string>* notes) {
  Membership membership(*env, *store, timing);
  if (Status s = co_await membership.ListOnce(); !s.ok()) co_return s;
  std::vector<Target> targets;
  for (const auto& [id, view] : membership.view()) {
    if (!view.live()) continue;
    auto got = co_await store->Get(EndpointsKey(id), CallOptions{timing.ttl});
    if (!got.ok()) {
      notes->push_back(id.str() + ": no metrics address in " + EndpointsKey(id) + " (" + got.status().ToString() +
                       "); left out");
      continue;
    }
    auto endpoints = DecodeNodeEndpoints(got->body);
    if (!endpoints.ok()) {
      notes->push_back(id.str() + ": " + endpoints.status().message() + "; left out");
      continue;
    }
    if (endpoints->instance != view.record->instance) {
      notes->push_back(id.str() + ": its metrics address names another process (the live one has not written its "
                       "own yet); left out");
      continue;
    }
    targets.push_back(Target{id.str(), endpoints->metrics_url});
  }
  co_return targets;
}

Task<int> Cost(RealEnv* env, ObjectStore* store, LeaseTiming timing, CostArgs args, PriceTable prices,
               std::optional<Duration> since) {
  std::vector<std::string> notes;
  std::vector<Target> targets;
  if (!args.metrics.empty()) {
    for (const std::string& url : args.metrics) targets.push_back(Target{url, url});
  } else {
    auto found = co_await FindNodes(env, store, timing, &notes);
    if (!found.ok()) co_return Fail(found.status());
    targets = std::move(*found);
  }
  std::vector<std::optional<Sample>> first(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto s = co_await Scrape(env, targets[i].url);
    if (s.ok()) {
      first[i] = std::move(*s);
    } else {
      notes.push_back(targets[i].name + ": cannot read " + targets[i].url + ": " + s.status().message() + "; left out");
    }
  }
  std::vector<NodeWindow> windows;
  std::string basis;
  if (since) {
    basis = "rates over the last " + FormatDuration(*since) + " (two scrapes of each node)";
    if (!co_await env->SleepFor(*since)) co_return kExitError;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (!first[i]) continue;
      auto s = co_await Scrape(env, targets[i].url);
      if (!s.ok()) {
        notes.push_back(targets[i].name + ": cannot read it again: " + s.status().message() + "; left out");
        continue;
      }
      if (s->counts.start_time_seconds != first[i]->counts.start_time_seconds) {
        notes.push_back(targets[i].name + ": restarted during the window; left out");
        continue;
      }
      NodeWindow w{NodeId(targets[i].name), {}, ToSeconds(s->at - first[i]->at)};
      for (std::size_t op = 0; op < kBucketOps; ++op) {
        for (std::size_t p = 0; p < kBucketPurposes; ++p) {
          w.counts.requests[op][p] = s->counts.requests[op][p] - first[i]->counts.requests[op][p];
        }
      }
      for (std::size_t p = 0; p < kBucketPurposes; ++p) {
        w.counts.sent_bytes[p] = s->counts.sent_bytes[p] - first[i]->counts.sent_bytes[p];
        w.counts.received_bytes[p] = s->counts.received_bytes[p] - first[i]->counts.received_bytes[p];
      }
      windows.push_back(std::move(w));
    }
  } else {
    basis = "rates since each node's process started";
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (!first[i]) continue;
      if (!first[i]->counts.start_time_seconds) {
        notes.push_back(targets[i].name + ": its metrics have no wasmkeep_process_start_time_seconds; use --since");
        continue;
      }
      const double up = static_cast<double>(ToUnixMs(first[i]->wall)) / 1000 - *first[i]->counts.start_time_seconds;
      windows.push_back(NodeWindow{NodeId(targets[i].name), first[i]->counts, up});
    }
  }
  CostReport report = ComputeCost(windows, std::move(prices), std::move(basis));
  report.notes.insert(report.notes.begin(), notes.begin(), notes.end());
  std::optional<StorageReport> storage;
  std::string storage_note;
  bool storage_failed = false;
  if (store == nullptr) {
    storage_note = "not listed (--metrics reads nothing from the bucket)";
  } else if (args.no_storage) {
    storage_note = "not listed (--no-storage)";
  } else {
    auto listed = co_await ListStorage(store);
    if (listed.ok()) {
      storage = std::move(*listed);
    } else {
      storage_note = "the bucket could not be listed: " + listed.status().ToString();
      storage_failed = true;
    }
  }
  const StorageReport* s = storage ? &*storage : nullptr;
  const std::string text = args.json ? FormatCostJson(report, s, storage_note) : FormatCostText(report, s, storage_note);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!targets.empty() && report.nodes == 0) {
    std::fprintf(stderr, "wasmkeep: no node's metrics could be read\n");
    co_return kExitError;
  }
  if (storage_failed) {
    std::fprintf(stderr, "wasmkeep: %s\n", storage_note.c_str());
    co_return kExitError;
  }
  co_return kExitOk;
}

}  // namespace

Result<PreparedCost> PrepareClusterCost(const CostArgs& args) {
  auto prices = LoadPriceTable(args.prices);
  if (!prices.ok()) return prices.status();
  PreparedCost out{std::move(*prices), std::nullopt};
  if (!args.since.empty()) {
    auto d = ParseDurationArg(args.since);
    if (!d.ok()) return InvalidArgument("--since: " + d.status().message());
    if (*d > std::chrono::hours(24)) return InvalidArgument("--since: at most 24h");
    out.since = *d;
  }
  return out;
}

int RunClusterCost(RealEnv& env, ObjectStore* store, LeaseTiming timing, const CostArgs& args, PreparedCost prepared) {
  WK_CHECK(store != nullptr || !args.metrics.empty(), "cluster cost: no bucket and no --metrics");
  return env.RunMain(Cost(&env, store, timing, args, std::move(prepared.prices), prepared.since));
}

}  // namespace wk::cli
