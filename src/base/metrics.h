// Metrics: a small Prometheus registry (counters, gauges, callback views, histograms)
// rendered in the text exposition format 0.0.4. No global registry: main owns one and
// passes it by reference (docs/DEVELOPING.md, "Assertions and global state"); components
// count in stats they own and publish views of them (docs/architecture.md, "Metrics").
// Guarantees: a misuse (bad name, duplicate series, colliding families, a counter going
// down) is a programmer error (WK_CHECK); references from Add* live as long as the registry.
// Threading: updates are lock-free from any thread; registration and RenderText from any
// thread under one mutex; callbacks run inside RenderText and must not call the registry.
// Details: docs/internals.md, "Metrics".
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wk {

// The Content-Type of RenderText()'s output (exposition format 0.0.4).
inline constexpr std::string_view kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// One series' labels, in the order they are rendered. Names are unique within a series.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Limits, with their reasons.
// Every bucket is one line of every scrape of every series; more than this is a mistake
// (Prometheus' own defaults use 11).
inline constexpr std::size_t kMaxHistogramBuckets = 64;
// A series needing more labels than this is a cardinality accident waiting to happen.
inline constexpr std::size_t kMaxLabelsPerSeries = 16;

namespace internal {

// A double that several threads may add to: a compare-exchange loop over
// std::atomic<double> (lock-free on every target we build for).
class AtomicDouble {
 public:
  void Add(double delta) {
    double current = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
    }
  }
  void Store(double v) { value_.store(v, std::memory_order_relaxed); }
  double Load() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace internal

// A value that only goes up (requests served, bytes written). Starts at 0.
class Counter {
 public:
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // REQUIRES: amount >= 0 (a counter that goes down breaks rate(); use a Gauge).
  void Inc(double amount = 1);
  double value() const { return value_.Load(); }

 private:
  friend class MetricsRegistry;
  Counter() = default;
  internal::AtomicDouble value_;
};

// A value that goes up and down (open connections, queue depth). Starts at 0.
class Gauge {
 public:
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v) { value_.Store(v); }
  void Inc(double amount = 1) { value_.Add(amount); }
  void Dec(double amount = 1) { value_.Add(-amount); }
  double value() const { return value_.Load(); }

 private:
  friend class MetricsRegistry;
  Gauge() = default;
  internal::AtomicDouble value_;
};

// A gauge whose value is computed at scrape time by a callback (say, the size of a
// structure owned by the loop thread, which no other thread may touch).
class GaugeFn {
 public:
  GaugeFn(const GaugeFn&) = delete;
  GaugeFn& operator=(const GaugeFn&) = delete;

  // Calls the callback (on the caller's thread; see the threading rules above).
  double value() const { return fn_(); }

 private:
  friend class MetricsRegistry;
  explicit GaugeFn(std::function<double()> fn) : fn_(std::move(fn)) {}
  std::function<double()> fn_;
};

// Counts observations (latencies, sizes) into buckets with fixed upper bounds, plus
// their count and sum. Rendered as cumulative `_bucket{le="..."}` lines ending with
// le="+Inf", then `_sum` and `_count`.
class Histogram {
 public:
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // A histogram of its own (a component's; publish it with AddHistogramView).
  // REQUIRES: bounds finite, strictly increasing, at most kMaxHistogramBuckets.
  explicit Histogram(std::vector<double> bounds);

  // Adds one observation to the first bucket whose bound is >= value (NaN goes to the
  // +Inf bucket only, and makes the sum NaN, as Prometheus' own clients do).
  void Observe(double value);

  // The finite upper bounds, as registered (the +Inf bucket is implicit).
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative count of observations <= bounds()[i]; i == bounds().size() is +Inf.
  std::uint64_t CumulativeCount(std::size_t bucket) const;
  std::uint64_t count() const { return CumulativeCount(bounds_.size()); }
  double sum() const { return sum_.Load(); }

 private:
  friend class MetricsRegistry;

  const std::vector<double> bounds_;
  // Per-bucket (not cumulative) counts, so Observe touches one counter; the last is
  // the +Inf bucket. Cumulated when read.
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  internal::AtomicDouble sum_;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each Add* registers one series of family `name` (created on first use, with this
  // HELP text and type). REQUIRES (programmer errors, see above): name matches
  // [a-zA-Z_:][a-zA-Z0-9_:]*; help is non-empty and the same for every series of the
  // family; label names match [a-zA-Z_][a-zA-Z0-9_]*, do not start with "__", are
  // unique in the series and are at most kMaxLabelsPerSeries; label values are valid
  // UTF-8; no series of the family has the same label set (in any order).
  Counter& AddCounter(std::string name, std::string help, MetricLabels labels = {});
  Gauge& AddGauge(std::string name, std::string help, MetricLabels labels = {});
  // REQUIRES additionally: fn is non-empty. Shares a family with plain gauges of the
  // same name (both are TYPE gauge).
  GaugeFn& AddCallbackGauge(std::string name, std::string help, std::function<double()> fn,
                            MetricLabels labels = {});
  // A counter whose value fn reads at scrape time (a component's stats field).
  // REQUIRES additionally: fn is non-empty and never decreases.
  void AddCallbackCounter(std::string name, std::string help, std::function<double()> fn,
                          MetricLabels labels = {});
  // A gauge family whose series are only known at scrape time (a breakdown by tenant): fn
  // returns (value of `label`, sample) pairs, rendered as name{label="value"} sample in the
  // order returned. fn runs under the same rules as a callback gauge's. REQUIRES
  // additionally: the family is new and gets no other series; `label` is a valid label name;
  // fn is non-empty, and returns each value at most once, as valid UTF-8, and a bounded
  // number of pairs (the caller aggregates a long tail: each pair is a series).
  using Breakdown = std::vector<std::pair<std::string, double>>;
  void AddCallbackGaugeBreakdown(std::string name, std::string help, std::string label,
                                 std::function<Breakdown()> fn);
  // The same as a counter family: REQUIRES additionally that a label value fn returned once
  // is returned at every later call, its sample never decreasing (keep a fixed set of values
  // and fold the rest into one, as "other").
  void AddCallbackCounterBreakdown(std::string name, std::string help, std::string label,
                                   std::function<Breakdown()> fn);
  // REQUIRES additionally: bucket_bounds are finite, strictly increasing and at most
  // kMaxHistogramBuckets; no label is named "le" (it is the bucket's label).
  Histogram& AddHistogram(std::string name, std::string help, std::vector<double> bucket_bounds,
                          MetricLabels labels = {});
  // Publishes a histogram a component owns. REQUIRES additionally: histogram outlives
  // every RenderText(); no label is named "le".
  void AddHistogramView(std::string name, std::string help, const Histogram& histogram,
                        MetricLabels labels = {});

  // The whole exposition (text format 0.0.4): families in registration order, each
  // with one HELP and one TYPE line, then its series in registration order.
  std::string RenderText() const;

 private:
  enum class Kind : std::uint8_t { kCounter, kGauge, kHistogram };
  struct Series;
  struct Family;

  static std::string_view KindName(Kind kind);
  // Validates and appends a series, creating its family if needed. Caller holds mu_.
  Series& AddSeriesLocked(Kind kind, std::string name, std::string help, MetricLabels labels);
  // The breakdowns' registration and rendering (AddCallback*Breakdown).
  void AddBreakdown(Kind kind, std::string name, std::string help, std::string label, std::function<Breakdown()> fn);
  static void AppendBreakdown(std::string& out, const std::string& family, const Series& s);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;  // registration order
};

// Formats a sample value as the exposition format expects: integral values without an
// exponent or fraction ("42", "-3", "100000000000000000000"), others in their shortest
// round-trip form ("0.25", "1e-07"), and "+Inf", "-Inf", "NaN". Exposed for tests.
std::string FormatMetricValue(double value);

}  // namespace wk
