#include "cli/cost.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace wk::cli {
namespace {

constexpr double kSecondsPerDay = 86'400;

std::size_t Index(BucketOp op) { return static_cast<std::size_t>(op); }
std::size_t Index(BucketPurpose p) { return static_cast<std::size_t>(p); }

std::optional<BucketOp> OpFromName(std::string_view name) {
  for (std::size_t op = 0; op < kBucketOps; ++op) {
    if (BucketOpName(static_cast<BucketOp>(op)) == name) return static_cast<BucketOp>(op);
  }
  return std::nullopt;
}

BucketPurpose PurposeFromName(std::string_view name) {
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    if (BucketPurposeName(static_cast<BucketPurpose>(p)) == name) return static_cast<BucketPurpose>(p);
  }
  return BucketPurpose::kOther;
}

// Parses `{a="x",b="y"}` (no escapes beyond \" and \\, as our registry writes them).
bool ParseLabels(std::string_view text, std::map<std::string, std::string>* out) {
  if (text.empty()) return true;
  if (text.front() != '{' || text.back() != '}') return false;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq + 1 >= text.size() || text[eq + 1] != '"') return false;
    std::string name(text.substr(0, eq));
    std::string value;
    std::size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      value += text[i];
    }
    if (i >= text.size()) return false;
    (*out)[std::move(name)] = std::move(value);
    text.remove_prefix(i + 1);
    if (!text.empty()) {
      if (text.front() != ',') return false;
      text.remove_prefix(1);
    }
  }
  return true;
}

std::string Money(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : v >= 1 ? "%.2f" : "%.4f", v);
  return buf;
}

std::string Rate(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == 0 ? "0" : v >= 100 ? "%.0f" : "%.3f", v);
  return buf;
}

std::string Bytes(std::uint64_t v) {
  char buf[32];
  if (v < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(v));
  } else {
    const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double d = static_cast<double>(v) / 1024;
    int u = 0;
    while (d >= 1024 && u < 4) {
      d /= 1024;
      ++u;
    }
    std::snprintf(buf, sizeof buf, d >= 100 ? "%.0f %s" : "%.1f %s", d, units[u]);
  }
  return buf;
}

constexpr double kBytesPerGb = 1024.0 * 1024.0 * 1024.0;

// The n-th '/'-separated component of key (0 first), or "" when there are fewer.
std::string_view Component(std::string_view key, int n) {
  for (int i = 0; i < n; ++i) {
    const std::size_t slash = key.find('/');
    if (slash == std::string_view::npos) return {};
    key.remove_prefix(slash + 1);
  }
  return key.substr(0, key.find('/'));
}

// "<generation>-<seq>", both decimal: the position of a segment or a snapshot.
std::optional<std::pair<std::uint64_t, std::uint64_t>> LogPosition(std::string_view name) {
  const std::size_t dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash + 1 >= name.size() || name.size() > 64) return std::nullopt;
  std::uint64_t parts[2] = {0, 0};
  std::string_view texts[2] = {name.substr(0, dash), name.substr(dash + 1)};
  for (int i = 0; i < 2; ++i) {
    for (char c : texts[i]) {
      if (c < '0' || c > '9') return std::nullopt;
      parts[i] = parts[i] * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  return std::make_pair(parts[0], parts[1]);
}

}  // namespace

void StorageUse::Add(const StorageUse& o) {
  objects += o.objects;
  bytes += o.bytes;
  log_bytes += o.log_bytes;
  history_bytes += o.history_bytes;
  module_bytes += o.module_bytes;
}

StorageUse StorageReport::Total() const {
  StorageUse t = cluster;
  for (const auto& [tenant, use] : tenants) t.Add(use);
  return t;
}

void StorageTally::Add(const ListEntry& e) {
  const std::string_view key = e.key;
  const std::string_view top = Component(key, 0);
  std::string_view tenant;
  bool log = false, module = false;
  if (top == "wal" || top == "snapshot") {
    tenant = Component(key, 1);
    log = true;
  } else if (top == "classes") {
    tenant = Component(key, 1);
    module = true;
  } else if (top == "owners" || top == "leases" || top == "quarantine") {
    tenant = Component(key, 1);
    if (tenant.starts_with("_")) tenant = {};  // owners/_alarms/...: the cluster's own
  } else if (top == "alarms") {
    tenant = Component(key, 3);  // alarms/<shard>/<due>/<tenant>/...
  } else if (top == "control" && Component(key, 1) == "tenants") {
    tenant = Component(key, 2);
  } else if (top == "control" && Component(key, 1) == "move") {
    tenant = Component(key, 3);  // control/move/<node>/<tenant>/...
  }
  StorageUse& use = tenant.empty() ? report_.cluster : report_.tenants[std::string(tenant)];
  ++use.objects;
  use.bytes += e.size;
  if (module) use.module_bytes += e.size;
  if (!log) return;
  use.log_bytes += e.size;
  const std::size_t last = key.rfind('/');
  const std::size_t first = key.find('/');
  auto at = LogPosition(key.substr(last + 1));
  if (!at || last <= first) return;  // not a log object's name: counted, never history
  const std::string_view actor = key.substr(first + 1, last - first - 1);
  if (top == "snapshot") {
    // One actor's snapshots are listed together: all but its newest are history.
    if (!snap_actor_ || *snap_actor_ != actor) {
      FlushSnapshots();
      snap_actor_ = std::string(actor);
      snap_tenant_ = std::string(tenant);
      snap_bytes_ = 0;
      snap_newest_.reset();
    }
    snap_bytes_ += e.size;
    if (!snap_newest_ || snap_newest_->first < *at) snap_newest_ = std::make_pair(*at, e.size);
    return;
  }
  // wal/ sorts after snapshot/: every actor's newest snapshot is known by now.
  FlushSnapshots();
  auto it = newest_.find(actor);
  if (it != newest_.end() && *at < it->second) use.history_bytes += e.size;
}

void StorageTally::FlushSnapshots() {
  if (!snap_actor_ || !snap_newest_) return;
  report_.tenants[snap_tenant_].history_bytes += snap_bytes_ - snap_newest_->second;
  newest_[*snap_actor_] = snap_newest_->first;
  snap_actor_.reset();
  snap_newest_.reset();
}

StorageReport StorageTally::Finish() {
  FlushSnapshots();
  return std::move(report_);
}

StorageReport ComputeStorage(const std::vector<ListEntry>& entries) {
  std::vector<const ListEntry*> sorted;
  sorted.reserve(entries.size());
  for (const ListEntry& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const ListEntry* a, const ListEntry* b) { return a->key < b->key; });
  StorageTally tally;
  for (const ListEntry* e : sorted) tally.Add(*e);
  return tally.Finish();
}

double StoragePerMonth(const PriceTable& prices, std::uint64_t bytes) {
  return prices.per_gb_month ? static_cast<double>(bytes) / kBytesPerGb * *prices.per_gb_month : 0;
}

bool PurposeSends(BucketPurpose purpose, BucketOp op) {
  using enum BucketOp;
  switch (purpose) {
    case BucketPurpose::kSegment:
    case BucketPurpose::kSnapshot: return op == kPut;
    case BucketPurpose::kRestore: return op == kGet || op == kList;
    case BucketPurpose::kGc: return op == kGet || op == kList || op == kDelete;
    case BucketPurpose::kAlarm: return op == kPut || op == kDelete || op == kList;
    case BucketPurpose::kOwner: return op == kGet || op == kPut || op == kList;
    case BucketPurpose::kLease:
    case BucketPurpose::kFence: return op == kGet || op == kPut;
    case BucketPurpose::kListing: return op == kGet || op == kList;
    case BucketPurpose::kControl:
    case BucketPurpose::kClass:
    case BucketPurpose::kAdmin:
    case BucketPurpose::kOther:
    case BucketPurpose::kCount: break;
  }
  return true;
}

double PricePerRequestOf(const PriceTable& prices, BucketPurpose purpose) {
  double price = 0;
  for (std::size_t op = 0; op < kBucketOps; ++op) {
    if (PurposeSends(purpose, static_cast<BucketOp>(op))) price = std::max(price, prices.per_request[op]);
  }
  return price;
}

double RequestsMoney(const PriceTable& prices, const std::array<std::uint64_t, kBucketPurposes>& requests) {
  double money = 0;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    money += static_cast<double>(requests[p]) * PricePerRequestOf(prices, static_cast<BucketPurpose>(p));
  }
  return money;
}

PriceTable AwsS3StandardPrices() {
  PriceTable t;
  t.name = "aws-s3";
  t.title =
      "AWS S3 Standard, us-east-1: PUT and LIST $0.005 per 1,000, GET and HEAD $0.0004 per 1,000, DELETE free; "
      "storage $0.023 per GB-month";
  t.currency = "USD";
  t.per_request[Index(BucketOp::kPut)] = 0.005 / 1000;
  t.per_request[Index(BucketOp::kList)] = 0.005 / 1000;
  t.per_request[Index(BucketOp::kGet)] = 0.0004 / 1000;
  t.per_request[Index(BucketOp::kHead)] = 0.0004 / 1000;
  t.per_request[Index(BucketOp::kDelete)] = 0;
  t.per_gb_month = 0.023;
  return t;
}

PriceTable CloudflareR2Prices() {
  PriceTable t;
  t.name = "r2";
  t.title = "Cloudflare R2 Standard: Class A (PUT, LIST) $4.50 per million, Class B (GET, HEAD) $0.36 per million, "
            "DELETE free; storage $0.015 per GB-month";
  t.currency = "USD";
  t.per_request[Index(BucketOp::kPut)] = 4.50 / 1e6;
  t.per_request[Index(BucketOp::kList)] = 4.50 / 1e6;
  t.per_request[Index(BucketOp::kGet)] = 0.36 / 1e6;
  t.per_request[Index(BucketOp::kHead)] = 0.36 / 1e6;
  t.per_request[Index(BucketOp::kDelete)] = 0;
  t.per_gb_month = 0.015;
  return t;
}

Result<PriceTable> ParsePriceToml(std::string_view text, std::string_view origin) {
  const std::string where(origin);
  toml::table root;
  try {
    root = toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << where << ": line " << e.source().begin.line << ": " << e.description();
    return InvalidArgument(msg.str());
  }
  PriceTable t;
  t.name = where;
  t.currency = "USD";
  for (auto&& [key, value] : root) {
    const std::string_view k = key.str();
    if (k == "name" || k == "currency") {
      if (!value.is_string() || value.value<std::string>()->empty()) {
        return InvalidArgument(where + ": " + std::string(k) + " must be a non-empty string");
      }
      (k == "name" ? t.name : t.currency) = *value.value<std::string>();
    } else if (k != "per_1000_requests" && k != "storage") {
      return InvalidArgument(where + ": unknown key " + std::string(k) +
                             " (expected name, currency, [per_1000_requests] and [storage])");
    }
  }
  if (root.contains("storage")) {
    const toml::table* storage = root["storage"].as_table();
    if (storage == nullptr) return InvalidArgument(where + ": storage must be a table ([storage] per_gb_month = ...)");
    for (auto&& [key, value] : *storage) {
      if (key.str() != "per_gb_month") {
        return InvalidArgument(where + ": unknown key storage." + std::string(key.str()) + " (expected per_gb_month)");
      }
      std::optional<double> v = value.is_integer()
                                    ? std::optional<double>(static_cast<double>(*value.value<std::int64_t>()))
                                    : value.value<double>();
      if (!v || !std::isfinite(*v) || *v < 0 || *v > 1e6) {
        return InvalidArgument(where + ": storage.per_gb_month must be a number from 0 to 1000000");
      }
      t.per_gb_month = *v;
    }
    if (!t.per_gb_month) return InvalidArgument(where + ": [storage] needs per_gb_month");
  }
  const toml::table* prices = root["per_1000_requests"].as_table();
  if (prices == nullptr) return InvalidArgument(where + ": missing the [per_1000_requests] table");
  std::array<bool, kBucketOps> seen{};
  for (auto&& [key, value] : *prices) {
    auto op = OpFromName(key.str());
    if (!op) {
      return InvalidArgument(where + ": unknown operation per_1000_requests." + std::string(key.str()) +
                             " (expected put, get, head, list, delete)");
    }
    std::optional<double> v = value.is_integer() ? std::optional<double>(static_cast<double>(*value.value<std::int64_t>()))
                                                 : value.value<double>();
    if (!v || !std::isfinite(*v) || *v < 0 || *v > 1e6) {
      return InvalidArgument(where + ": per_1000_requests." + std::string(key.str()) +
                             " must be a number from 0 to 1000000");
    }
    t.per_request[Index(*op)] = *v / 1000;
    seen[Index(*op)] = true;
  }
  for (std::size_t op = 0; op < kBucketOps; ++op) {
    if (!seen[op]) {
      return InvalidArgument(where + ": missing per_1000_requests." +
                             std::string(BucketOpName(static_cast<BucketOp>(op))) + " (every operation needs a price)");
    }
  }
  char title[256];
  std::snprintf(title, sizeof title, "%s (%s per 1,000: put %g, get %g, head %g, list %g, delete %g)", t.name.c_str(),
                t.currency.c_str(), t.per_request[0] * 1000, t.per_request[1] * 1000, t.per_request[2] * 1000,
                t.per_request[3] * 1000, t.per_request[4] * 1000);
  t.title = title;
  if (t.per_gb_month) {
    std::snprintf(title, sizeof title, "; storage %g per GB-month", *t.per_gb_month);
    t.title += title;
  }
  return t;
}

Result<PriceTable> LoadPriceTable(std::string_view arg) {
  if (arg == "aws-s3") return AwsS3StandardPrices();
  if (arg == "r2") return CloudflareR2Prices();
  if (arg.empty()) return InvalidArgument("--prices needs aws-s3, r2 or a price file");
  std::ifstream in{std::string(arg), std::ios::binary};
  if (!in) {
    return InvalidArgument("--prices: '" + std::string(arg) +
                           "' is neither aws-s3, r2 nor a readable price file (docs/cli.md, \"cluster cost\")");
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParsePriceToml(text.str(), arg);
}

Result<Duration> ParseDurationArg(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  const auto bad = [&] {
    return InvalidArgument("'" + std::string(text) + "' is not a duration (a whole number and ms, s, m or h: 30s, 5m)");
  };
  if (digits == 0 || digits > 9) return bad();
  const std::int64_t n = std::stoll(std::string(text.substr(0, digits)));
  if (n <= 0) return bad();
  if (unit == "ms") return Duration(std::chrono::milliseconds(n));
  if (unit == "s") return Duration(std::chrono::seconds(n));
  if (unit == "m") return Duration(std::chrono::minutes(n));
  if (unit == "h") return Duration(std::chrono::hours(n));
  return bad();
}

Result<NodeCounts> ParseNodeMetrics(std::string_view text) {
  NodeCounts c;
  bool any = false;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    const std::size_t space = line.rfind(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view series = line.substr(0, space);
    const std::string value_text(line.substr(space + 1));
    char* end = nullptr;
    const double value = std::strtod(value_text.c_str(), &end);
    if (end == value_text.c_str() || *end != '\0' || !std::isfinite(value)) continue;
    const std::size_t brace = series.find('{');
    const std::string_view name = series.substr(0, brace);
    std::map<std::string, std::string> labels;
    if (brace != std::string_view::npos && !ParseLabels(series.substr(brace), &labels)) continue;
    if (name == "wasmkeep_process_start_time_seconds") {
      c.start_time_seconds = value;
    } else if (name == "wasmkeep_bucket_requests_total") {
      auto op = OpFromName(labels["op"]);
      if (!op) continue;
      c.requests[Index(*op)][Index(PurposeFromName(labels["purpose"]))] += value;
      any = true;
    } else if (name == "wasmkeep_bucket_sent_bytes_total") {
      c.sent_bytes[Index(PurposeFromName(labels["purpose"]))] += value;
    } else if (name == "wasmkeep_bucket_received_bytes_total") {
      c.received_bytes[Index(PurposeFromName(labels["purpose"]))] += value;
    }
  }
  if (!any) return InvalidArgument("no wasmkeep_bucket_requests_total series: not a WasmKeep node of this version");
  return c;
}

double CostReport::PerSecond(BucketPurpose p) const {
  double n = 0;
  for (std::size_t op = 0; op < kBucketOps; ++op) n += per_second[op][Index(p)];
  return n;
}

double CostReport::TotalPerSecond() const {
  double n = 0;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) n += PerSecond(static_cast<BucketPurpose>(p));
  return n;
}

double CostReport::MoneyPerDay(BucketPurpose p) const {
  double m = 0;
  for (std::size_t op = 0; op < kBucketOps; ++op) m += per_second[op][Index(p)] * prices.per_request[op];
  return m * kSecondsPerDay;
}

double CostReport::TotalMoneyPerDay() const {
  double m = 0;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) m += MoneyPerDay(static_cast<BucketPurpose>(p));
  return m;
}

double CostReport::NonSegmentPutsPerNodeSecond() const {
  if (node_seconds <= 0) return 0;
  double puts = 0;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    if (static_cast<BucketPurpose>(p) != BucketPurpose::kSegment) puts += per_second[Index(BucketOp::kPut)][p];
  }
  // per_second sums the nodes' rates; per node-second divides by how many nodes there were.
  return nodes > 0 ? puts / nodes : 0;
}

CostReport ComputeCost(const std::vector<NodeWindow>& windows, PriceTable prices, std::string basis) {
  CostReport r;
  r.prices = std::move(prices);
  r.basis = std::move(basis);
  for (const NodeWindow& w : windows) {
    if (w.seconds <= 0) {
      r.notes.push_back(w.node_id.str() + ": no time to measure over; left out");
      continue;
    }
    ++r.nodes;
    r.node_seconds += w.seconds;
    for (std::size_t op = 0; op < kBucketOps; ++op) {
      for (std::size_t p = 0; p < kBucketPurposes; ++p) r.per_second[op][p] += w.counts.requests[op][p] / w.seconds;
    }
    for (std::size_t p = 0; p < kBucketPurposes; ++p) {
      r.sent_per_second[p] += w.counts.sent_bytes[p] / w.seconds;
      r.received_per_second[p] += w.counts.received_bytes[p] / w.seconds;
    }
  }
  return r;
}

std::string FormatCostText(const CostReport& r, const StorageReport* storage, const std::string& storage_note) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%d live node%s; %s\nprices: %s\n\n", r.nodes, r.nodes == 1 ? "" : "s",
                r.basis.c_str(), r.prices.title.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-9s %9s %9s %9s %9s %9s %10s %12s\n", "PURPOSE", "PUT/s", "GET/s", "HEAD/s",
                "LIST/s", "DELETE/s", "TOTAL/s", (r.prices.currency + "/DAY").c_str());
  out += line;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    const auto purpose = static_cast<BucketPurpose>(p);
    const double total = r.PerSecond(purpose);
    if (total == 0 && purpose == BucketPurpose::kOther) continue;
    std::snprintf(line, sizeof line, "%-9s %9s %9s %9s %9s %9s %10s %12s\n",
                  std::string(BucketPurposeName(purpose)).c_str(), Rate(r.per_second[Index(BucketOp::kPut)][p]).c_str(),
                  Rate(r.per_second[Index(BucketOp::kGet)][p]).c_str(), Rate(r.per_second[Index(BucketOp::kHead)][p]).c_str(),
                  Rate(r.per_second[Index(BucketOp::kList)][p]).c_str(),
                  Rate(r.per_second[Index(BucketOp::kDelete)][p]).c_str(), Rate(total).c_str(),
                  Money(r.MoneyPerDay(purpose)).c_str());
    out += line;
  }
  double by_op[kBucketOps] = {};
  for (std::size_t op = 0; op < kBucketOps; ++op) {
    for (std::size_t p = 0; p < kBucketPurposes; ++p) by_op[op] += r.per_second[op][p];
  }
  std::snprintf(line, sizeof line, "%-9s %9s %9s %9s %9s %9s %10s %12s\n", "TOTAL", Rate(by_op[0]).c_str(),
                Rate(by_op[1]).c_str(), Rate(by_op[2]).c_str(), Rate(by_op[3]).c_str(), Rate(by_op[4]).c_str(),
                Rate(r.TotalPerSecond()).c_str(), Money(r.TotalMoneyPerDay()).c_str());
  out += line;
  std::snprintf(line, sizeof line, "\nper node-second: %s requests, %s PUTs other than segments\n",
                Rate(r.nodes > 0 ? r.TotalPerSecond() / r.nodes : 0).c_str(), Rate(r.NonSegmentPutsPerNodeSecond()).c_str());
  out += line;
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  if (storage == nullptr) {
    if (!storage_note.empty()) out += "\nstorage: " + storage_note + "\n";
    return out;
  }
  const StorageUse total = storage->Total();
  std::snprintf(line, sizeof line, "\nSTORAGE: %llu objects listed with %llu LIST request%s%s\n",
                static_cast<unsigned long long>(total.objects), static_cast<unsigned long long>(storage->lists),
                storage->lists == 1 ? "" : "s",
                r.prices.per_gb_month ? "" : " (this price table has no storage rate: not priced)");
  out += line;
  const std::string per_month = r.prices.currency + "/MONTH";
  std::snprintf(line, sizeof line, "%-16s %9s %11s %11s %11s %11s %11s %12s\n", "TENANT", "OBJECTS", "LOG", "HISTORY",
                "MODULES", "OTHER", "TOTAL", per_month.c_str());
  out += line;
  const auto row = [&](const std::string& name, const StorageUse& u) {
    std::snprintf(line, sizeof line, "%-16s %9llu %11s %11s %11s %11s %11s %12s\n", name.c_str(),
                  static_cast<unsigned long long>(u.objects), Bytes(u.log_bytes).c_str(), Bytes(u.history_bytes).c_str(),
                  Bytes(u.module_bytes).c_str(), Bytes(u.bytes - u.log_bytes - u.module_bytes).c_str(),
                  Bytes(u.bytes).c_str(), Money(StoragePerMonth(r.prices, u.bytes)).c_str());
    out += line;
  };
  // The largest tenants first; past kTextTenants, the rest in one line (--json has them all).
  constexpr std::size_t kTextTenants = 50;
  std::vector<std::pair<std::string, StorageUse>> sorted(storage->tenants.begin(), storage->tenants.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  StorageUse rest;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i < kTextTenants) {
      row(sorted[i].first, sorted[i].second);
    } else {
      rest.Add(sorted[i].second);
    }
  }
  if (sorted.size() > kTextTenants) row("(" + std::to_string(sorted.size() - kTextTenants) + " more)", rest);
  row("(cluster)", storage->cluster);
  row("TOTAL", total);
  return out;
}

std::string FormatCostJson(const CostReport& r, const StorageReport* storage, const std::string& storage_note) {
  nlohmann::json purposes = nlohmann::json::object();
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    const auto purpose = static_cast<BucketPurpose>(p);
    nlohmann::json ops = nlohmann::json::object();
    for (std::size_t op = 0; op < kBucketOps; ++op) {
      ops[std::string(BucketOpName(static_cast<BucketOp>(op)))] = r.per_second[op][p];
    }
    purposes[std::string(BucketPurposeName(purpose))] = {
        {"requests_per_second", r.PerSecond(purpose)},
        {"by_op_per_second", ops},
        {"sent_bytes_per_second", r.sent_per_second[p]},
        {"received_bytes_per_second", r.received_per_second[p]},
        {"money_per_day", r.MoneyPerDay(purpose)}};
  }
  nlohmann::json j = {{"basis", r.basis},
                      {"prices", r.prices.name},
                      {"currency", r.prices.currency},
                      {"nodes", r.nodes},
                      {"node_seconds", r.node_seconds},
                      {"requests_per_second", r.TotalPerSecond()},
                      {"money_per_day", r.TotalMoneyPerDay()},
                      {"non_segment_puts_per_node_second", r.NonSegmentPutsPerNodeSecond()},
                      {"purposes", purposes},
                      {"notes", r.notes}};
  if (storage == nullptr) {
    j["storage"] = nullptr;
    if (!storage_note.empty()) j["storage_note"] = storage_note;
    return j.dump(2) + "\n";
  }
  const auto use = [&](const StorageUse& u) {
    nlohmann::json o = {{"objects", u.objects},         {"bytes", u.bytes},
                        {"log_bytes", u.log_bytes},     {"history_bytes", u.history_bytes},
                        {"module_bytes", u.module_bytes}, {"other_bytes", u.bytes - u.log_bytes - u.module_bytes}};
    if (r.prices.per_gb_month) {
      o["money_per_month"] = StoragePerMonth(r.prices, u.bytes);
    } else {
      o["money_per_month"] = nullptr;
    }
    return o;
  };
  nlohmann::json tenants = nlohmann::json::object();
  for (const auto& [tenant, u] : storage->tenants) tenants[tenant] = use(u);
  j["storage"] = {{"lists", storage->lists},
                  {"per_gb_month", r.prices.per_gb_month ? nlohmann::json(*r.prices.per_gb_month) : nlohmann::json()},
                  {"total", use(storage->Total())},
                  {"cluster", use(storage->cluster)},
                  {"tenants", tenants}};
  return j.dump(2) + "\n";
}

}  // namespace wk::cli
