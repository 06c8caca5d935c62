// What `wasmkeep cluster cost` computes: the cluster's bucket requests per second by
// purpose (summed over the live nodes' wasmkeep_bucket_requests_total, store/counting_store.h)
// and what they cost per day at a price table (docs/cli.md, "cluster cost").
//
// The pure parts live here (price tables, the TOML price file, reading a node's /metrics
// text, the rates and the report), so tests reach them without a cluster; cluster_cmd.cc
// finds the nodes and scrapes them.
//
// Prices are per request, by operation. Built in (sources and dates in docs/cli.md):
//   aws-s3  AWS S3 Standard, us-east-1: PUT and LIST $0.005 per 1,000, GET and HEAD
//           $0.0004 per 1,000, DELETE free
//   r2      Cloudflare R2 Standard: Class A (PUT, LIST) $4.50 per million, Class B (GET,
//           HEAD) $0.36 per million, DELETE free
// Storage (what the bucket holds, listed once: one LIST per 1,000 objects) is priced per
// GB-month (GB = 2^30 bytes, as AWS bills S3 storage): aws-s3 $0.023 (Standard, the first
// 50 TB), r2 $0.015; per tenant, with the bytes of history (what retention keeps) apart.
// Not priced: data transfer, free tiers.
//
// Threading: pure functions and values.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "base/time.h"
#include "store/counting_store.h"
#include "store/object_store.h"

namespace wk::cli {

struct PriceTable {
  std::string name;      // "aws-s3", "r2", or the file's `name`
  std::string title;     // one line for the report
  std::string currency;  // "USD"
  std::array<double, kBucketOps> per_request{};  // indexed by BucketOp
  std::optional<double> per_gb_month;            // storage; nullopt: not priced by this table
};

PriceTable AwsS3StandardPrices();
PriceTable CloudflareR2Prices();

// A price file (TOML), every operation required, in the currency's units per 1,000 requests:
//   name = "my-store"          # optional (default: the file name)
//   currency = "USD"           # optional (default USD)
//   [per_1000_requests]
//   put = 0.005
//   get = 0.0004
//   head = 0.0004
//   list = 0.005
//   delete = 0
//   [storage]                  # optional: storage is then priced
//   per_gb_month = 0.023
// kInvalidArgument naming the key or the line (origin names the file in messages).
Result<PriceTable> ParsePriceToml(std::string_view text, std::string_view origin);
// "aws-s3", "r2", or a path to a price file.
Result<PriceTable> LoadPriceTable(std::string_view arg);

// "250ms", "30s", "5m", "2h" (a positive whole number and a unit); kInvalidArgument else.
Result<Duration> ParseDurationArg(std::string_view text);

// What one scrape of one node's /metrics says about the bucket.
struct NodeCounts {
  // [op][purpose], every outcome summed (a failed request is sent, and most are billed).
  std::array<std::array<double, kBucketPurposes>, kBucketOps> requests{};
  std::array<double, kBucketPurposes> sent_bytes{};
  std::array<double, kBucketPurposes> received_bytes{};
  std::optional<double> start_time_seconds;  // wasmkeep_process_start_time_seconds
};
// Reads the series of a Prometheus text exposition; other series are ignored, and
// unknown label values (a purpose a newer node has) are counted under "other".
// kInvalidArgument when the text has no wasmkeep_bucket_requests_total at all (not a
// node of this version, or not a node).
Result<NodeCounts> ParseNodeMetrics(std::string_view text);

// One node's contribution: its counts over `seconds` (a rate's denominator).
struct NodeWindow {
  NodeId node_id;
  NodeCounts counts;  // a difference of two scrapes, or since the process started
  double seconds = 0;
};

struct CostReport {
  std::string basis;  // how the rates were taken, for the header
  PriceTable prices;
  int nodes = 0;
  double node_seconds = 0;
  // Cluster-wide requests per second, [op][purpose], and bytes per second per purpose.
  std::array<std::array<double, kBucketPurposes>, kBucketOps> per_second{};
  std::array<double, kBucketPurposes> sent_per_second{};
  std::array<double, kBucketPurposes> received_per_second{};
  std::vector<std::string> notes;  // nodes skipped, and why

  double PerSecond(BucketPurpose p) const;
  double TotalPerSecond() const;
  double MoneyPerDay(BucketPurpose p) const;
  double TotalMoneyPerDay() const;
  // PUTs per node-second, segments excluded: the ADR's measure of the protocol's own writes.
  double NonSegmentPutsPerNodeSecond() const;
};

// What the bucket holds, by owner: a tenant's actors' logs (wal/, snapshot/), its modules
// (classes/) and its records (owners/, leases/, quarantine/, its alarm entries, its tenant
// record); the rest (nodes/, control/, the alarm shards' holds) is the cluster's own.
struct StorageUse {
  std::uint64_t objects = 0;
  std::uint64_t bytes = 0;
  std::uint64_t log_bytes = 0;      // segments and snapshots
  std::uint64_t history_bytes = 0;  // of log_bytes: older than the actor's newest snapshot
  std::uint64_t module_bytes = 0;   // classes/
  void Add(const StorageUse& o);
};
struct StorageReport {
  std::map<std::string, StorageUse, std::less<>> tenants;
  StorageUse cluster;
  std::uint64_t lists = 0;  // LIST requests the listing took
  StorageUse Total() const;
};
// Sums a listing as it arrives, in the bucket's key order (snapshot/ sorts before wal/, and
// one actor's objects are listed together), keeping only a position per actor with a
// snapshot: a bucket of millions of objects is summed page by page.
class StorageTally {
 public:
  void Add(const ListEntry& entry);  // in key order
  StorageReport Finish();

 private:
  void FlushSnapshots();
  StorageReport report_;
  // Each actor's newest snapshot ("tenant/class/name" -> position).
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>, std::less<>> newest_;
  // The actor whose snapshots are being listed: its tenant, their bytes, its newest so far
  // (position and size).
  std::optional<std::string> snap_actor_;
  std::string snap_tenant_;
  std::uint64_t snap_bytes_ = 0;
  std::optional<std::pair<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t>> snap_newest_;
};
// The same over keys and sizes in any order (sorted first).
StorageReport ComputeStorage(const std::vector<ListEntry>& entries);
// Money per month for `bytes` at the table's storage rate (0 when it has none).
double StoragePerMonth(const PriceTable& prices, std::uint64_t bytes);

// Usage records count bucket requests by purpose, not by operation (control/usage.h, a
// frozen format), so `tenant usage --prices` charges one request of a purpose at the
// dearest operation that purpose sends (what the code sends under it, store/object_store.h):
// segment and snapshot are PUTs only, so exact; restore (GET, LIST), gc (GET, LIST, DELETE),
// alarm (PUT, DELETE, LIST) and owner (GET, PUT, LIST) an upper bound. The node's own
// purposes (never a tenant's) have their operations too; control, class, admin and other
// may be any.
bool PurposeSends(BucketPurpose purpose, BucketOp op);
double PricePerRequestOf(const PriceTable& prices, BucketPurpose purpose);
// Money for requests counted by purpose, at PricePerRequestOf.
double RequestsMoney(const PriceTable& prices, const std::array<std::uint64_t, kBucketPurposes>& requests);

// Sums the windows (each node's counts over its own seconds, so nodes started at different
// times are each a rate of their own, then added).
CostReport ComputeCost(const std::vector<NodeWindow>& windows, PriceTable prices, std::string basis);
// storage: nullptr when the bucket was not listed (--metrics, --no-storage); storage_note
// says why then (or why the listing failed).
std::string FormatCostText(const CostReport& report, const StorageReport* storage = nullptr,
                           const std::string& storage_note = "");
std::string FormatCostJson(const CostReport& report, const StorageReport* storage = nullptr,
                           const std::string& storage_note = "");

}  // namespace wk::cli
