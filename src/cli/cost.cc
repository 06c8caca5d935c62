#include "cli/cost.h"

#include <toml++/toml.h>

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

}  // namespace

PriceTable AwsS3StandardPrices() {
  PriceTable t;
  t.name = "aws-s3";
  t.title = "AWS S3 Standard, us-east-1: PUT and LIST $0.005 per 1,000, GET and HEAD $0.0004 per 1,000, DELETE free";
  t.currency = "USD";
  t.per_request[Index(BucketOp::kPut)] = 0.005 / 1000;
  t.per_request[Index(BucketOp::kList)] = 0.005 / 1000;
  t.per_request[Index(BucketOp::kGet)] = 0.0004 / 1000;
  t.per_request[Index(BucketOp::kHead)] = 0.0004 / 1000;
  t.per_request[Index(BucketOp::kDelete)] = 0;
  return t;
}

PriceTable CloudflareR2Prices() {
  PriceTable t;
  t.name = "r2";
  t.title = "Cloudflare R2 Standard: Class A (PUT, LIST) $4.50 per million, Class B (GET, HEAD) $0.36 per million, "
            "DELETE free";
  t.currency = "USD";
  t.per_request[Index(BucketOp::kPut)] = 4.50 / 1e6;
  t.per_request[Index(BucketOp::kList)] = 4.50 / 1e6;
  t.per_request[Index(BucketOp::kGet)] = 0.36 / 1e6;
  t.per_request[Index(BucketOp::kHead)] = 0.36 / 1e6;
  t.per_request[Index(BucketOp::kDelete)] = 0;
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
    } else if (k != "per_1000_requests") {
      return InvalidArgument(where + ": unknown key " + std::string(k) +
                             " (expected name, currency and [per_1000_requests])");
    }
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

std::string FormatCostText(const CostReport& r) {
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
  return out;
}

std::string FormatCostJson(const CostReport& r) {
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
  return j.dump(2) + "\n";
}

}  // namespace wk::cli
