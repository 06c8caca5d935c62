#include "base/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "base/check.h"
#include "base/utf8.h"

namespace wk {

namespace {

bool IsNameStart(char c, bool allow_colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
}
bool IsNameChar(char c, bool allow_colon) {
  return IsNameStart(c, allow_colon) || (c >= '0' && c <= '9');
}

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. Label names: the same without ':'.
bool IsValidName(std::string_view name, bool allow_colon) {
  if (name.empty() || !IsNameStart(name[0], allow_colon)) return false;
  return std::all_of(name.begin(), name.end(),
                     [allow_colon](char c) { return IsNameChar(c, allow_colon); });
}


// HELP text escapes backslash and newline; label values also escape the double quote.
std::string Escape(std::string_view text, bool escape_quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return "0";  // also -0, which would print as "-0"
  // Large enough for any double in fixed notation (DBL_MAX has 309 integral digits).
  char buffer[400];
  std::to_chars_result result;
  if (std::trunc(value) == value) {
    // Integral: never an exponent, so counters read "1000000", not "1e+06".
    result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
  } else {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  }
  WK_CHECK(result.ec == std::errc(), "to_chars failed for a metric value");
  return std::string(buffer, result.ptr);
}

// ---- Counter and Histogram.

void Counter::Inc(double amount) {
  // Written as >= so that NaN fails too.
  WK_CHECK(amount >= 0, "a counter increment must be >= 0");
  value_.Add(amount);
}

namespace {
// REQUIRES of every histogram's bounds (programmer errors).
std::vector<double> CheckedBounds(std::vector<double> bounds, std::string_view what) {
  WK_CHECK(bounds.size() <= kMaxHistogramBuckets, std::string(what) + " has too many buckets");
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    WK_CHECK(std::isfinite(bounds[i]), std::string(what) + ": bucket bounds must be finite (+Inf is implicit)");
    WK_CHECK(i == 0 || bounds[i - 1] < bounds[i], std::string(what) + ": bucket bounds must be strictly increasing");
  }
  return bounds;
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(CheckedBounds(std::move(bounds), "histogram")),
      // Value-initialized: every count starts at 0.
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::Observe(double value) {
  std::size_t bucket = bounds_.size();  // +Inf, also where NaN goes
  if (!std::isnan(value)) {
    bucket = static_cast<std::size_t>(
        std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  }
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.Add(value);
}

std::uint64_t Histogram::CumulativeCount(std::size_t bucket) const {
  WK_CHECK(bucket <= bounds_.size(), "histogram bucket index out of range");
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= bucket; ++i) total += counts_[i].load(std::memory_order_relaxed);
  return total;
}

// ---- The registry.

struct MetricsRegistry::Series {
  MetricLabels sorted_labels;  // for duplicate detection: label order does not matter
  std::string rendered_labels;  // `a="x",b="y"` (escaped, no braces), empty if none
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<GaugeFn> gauge_fn;
  std::function<double()> counter_fn;  // a callback counter
  std::unique_ptr<Histogram> histogram;
  const Histogram* histogram_view = nullptr;  // a histogram its component owns
  // A breakdown (AddCallbackGaugeBreakdown): the label's name and the function of its series.
  std::string breakdown_label;
  std::function<Breakdown()> breakdown_fn;
};

struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  Kind kind = Kind::kCounter;
  // Every sample name this family writes (a histogram writes three), so that no two
  // families can produce lines with the same name.
  std::vector<std::string> exposed_names;
  std::vector<std::unique_ptr<Series>> series;  // registration order
  bool breakdown = false;  // its one series is a breakdown
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

std::string_view MetricsRegistry::KindName(Kind kind) {
  switch (kind) {
    case Kind::kCounter: return "counter";
    case Kind::kGauge: return "gauge";
    case Kind::kHistogram: return "histogram";
  }
  return "untyped";
}

MetricsRegistry::Series& MetricsRegistry::AddSeriesLocked(Kind kind, std::string name,
                                                          std::string help,
                                                          MetricLabels labels) {
  WK_CHECK(IsValidName(name, /*allow_colon=*/true), "invalid metric name '" + name + "'");
  WK_CHECK(!help.empty(), "metric '" + name + "' needs a HELP text");
  WK_CHECK(labels.size() <= kMaxLabelsPerSeries, "metric '" + name + "' has too many labels");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto& [label, value] = labels[i];
    WK_CHECK(IsValidName(label, /*allow_colon=*/false),
             "metric '" + name + "': invalid label name '" + label + "'");
    WK_CHECK(!label.starts_with("__"),
             "metric '" + name + "': label names starting with __ are reserved ('" + label + "')");
    WK_CHECK(kind != Kind::kHistogram || label != "le",
             "histogram '" + name + "': the label 'le' is reserved for buckets");
    // The exposition format is UTF-8; one bad byte in a label value makes Prometheus reject
    // the whole scrape, so it is caught at registration instead.
    WK_CHECK(IsValidUtf8(value), "metric '" + name + "': label '" + label + "' is not UTF-8");
    for (std::size_t j = 0; j < i; ++j) {
      WK_CHECK(labels[j].first != label,
               "metric '" + name + "': label '" + label + "' given twice");
    }
  }

  MetricLabels sorted = labels;
  std::sort(sorted.begin(), sorted.end());

  Family* family = nullptr;
  for (auto& f : families_) {
    if (f->name == name) family = f.get();
  }
  if (family != nullptr) {
    WK_CHECK(family->kind == kind,
             "metric '" + name + "' registered as " + std::string(KindName(family->kind)) +
                 " and again as " + std::string(KindName(kind)));
    WK_CHECK(family->help == help, "metric '" + name + "' registered with two HELP texts");
    WK_CHECK(!family->breakdown, "metric '" + name + "' is a breakdown: it has no other series");
    for (const auto& s : family->series) {
      WK_CHECK(s->sorted_labels != sorted,
               "metric '" + name + "' registered twice with the same labels");
    }
  } else {
    std::vector<std::string> exposed;
    if (kind == Kind::kHistogram) {
      exposed = {name + "_bucket", name + "_sum", name + "_count"};
    } else {
      exposed = {name};
    }
    for (const auto& f : families_) {
      for (const auto& mine : exposed) {
        WK_CHECK(std::find(f->exposed_names.begin(), f->exposed_names.end(), mine) ==
                     f->exposed_names.end(),
                 "metric '" + name + "' would write '" + mine + "', which '" + f->name +
                     "' already writes");
      }
    }
    auto created = std::make_unique<Family>();
    created->name = std::move(name);
    created->help = std::move(help);
    created->kind = kind;
    created->exposed_names = std::move(exposed);
    family = created.get();
    families_.push_back(std::move(created));
  }

  auto series = std::make_unique<Series>();
  for (const auto& [label, value] : labels) {
    if (!series->rendered_labels.empty()) series->rendered_labels += ',';
    series->rendered_labels += label;
    series->rendered_labels += "=\"";
    series->rendered_labels += Escape(value, /*escape_quote=*/true);
    series->rendered_labels += '"';
  }
  series->sorted_labels = std::move(sorted);
  family->series.push_back(std::move(series));
  return *family->series.back();
}

Counter& MetricsRegistry::AddCounter(std::string name, std::string help, MetricLabels labels) {
  std::lock_guard lock(mu_);
  Series& s = AddSeriesLocked(Kind::kCounter, std::move(name), std::move(help), std::move(labels));
  s.counter.reset(new Counter());  // private constructor: make_unique cannot reach it
  return *s.counter;
}

Gauge& MetricsRegistry::AddGauge(std::string name, std::string help, MetricLabels labels) {
  std::lock_guard lock(mu_);
  Series& s = AddSeriesLocked(Kind::kGauge, std::move(name), std::move(help), std::move(labels));
  s.gauge.reset(new Gauge());
  return *s.gauge;
}

GaugeFn& MetricsRegistry::AddCallbackGauge(std::string name, std::string help,
                                           std::function<double()> fn, MetricLabels labels) {
  WK_CHECK(static_cast<bool>(fn), "callback gauge '" + name + "' needs a function");
  std::lock_guard lock(mu_);
  Series& s = AddSeriesLocked(Kind::kGauge, std::move(name), std::move(help), std::move(labels));
  s.gauge_fn.reset(new GaugeFn(std::move(fn)));
  return *s.gauge_fn;
}

Histogram& MetricsRegistry::AddHistogram(std::string name, std::string help,
                                         std::vector<double> bucket_bounds, MetricLabels labels) {
  bucket_bounds = CheckedBounds(std::move(bucket_bounds), "histogram '" + name + "'");
  std::lock_guard lock(mu_);
  Series& s =
      AddSeriesLocked(Kind::kHistogram, std::move(name), std::move(help), std::move(labels));
  s.histogram = std::make_unique<Histogram>(std::move(bucket_bounds));
  return *s.histogram;
}

void MetricsRegistry::AddCallbackCounter(std::string name, std::string help, std::function<double()> fn,
                                         MetricLabels labels) {
  WK_CHECK(static_cast<bool>(fn), "callback counter '" + name + "' needs a function");
  std::lock_guard lock(mu_);
  Series& s = AddSeriesLocked(Kind::kCounter, std::move(name), std::move(help), std::move(labels));
  s.counter_fn = std::move(fn);
}

void MetricsRegistry::AddCallbackGaugeBreakdown(std::string name, std::string help, std::string label,
                                                std::function<Breakdown()> fn) {
  AddBreakdown(Kind::kGauge, std::move(name), std::move(help), std::move(label), std::move(fn));
}

void MetricsRegistry::AddCallbackCounterBreakdown(std::string name, std::string help, std::string label,
                                                  std::function<Breakdown()> fn) {
  AddBreakdown(Kind::kCounter, std::move(name), std::move(help), std::move(label), std::move(fn));
}

void MetricsRegistry::AddBreakdown(Kind kind, std::string name, std::string help, std::string label,
                                   std::function<Breakdown()> fn) {
  WK_CHECK(static_cast<bool>(fn), "breakdown '" + name + "' needs a function");
  WK_CHECK(IsValidName(label, /*allow_colon=*/false) && !label.starts_with("__"),
           "breakdown '" + name + "': invalid label name '" + label + "'");
  std::lock_guard lock(mu_);
  for (const auto& f : families_) {
    WK_CHECK(f->name != name, "breakdown '" + name + "' must be a family of its own");
  }
  Series& s = AddSeriesLocked(kind, name, std::move(help), {});
  s.breakdown_label = std::move(label);
  s.breakdown_fn = std::move(fn);
  for (auto& f : families_) {
    if (f->name == name) f->breakdown = true;
  }
}

void MetricsRegistry::AddHistogramView(std::string name, std::string help, const Histogram& histogram,
                                       MetricLabels labels) {
  std::lock_guard lock(mu_);
  Series& s = AddSeriesLocked(Kind::kHistogram, std::move(name), std::move(help), std::move(labels));
  s.histogram_view = &histogram;
}

namespace {

// `name{labels} value\n`, or `name{labels,extra} value\n` when extra is non-empty.
void AppendSample(std::string& out, std::string_view name, std::string_view labels,
                  std::string_view extra_label, std::string_view value) {
  out += name;
  if (!labels.empty() || !extra_label.empty()) {
    out += '{';
    out += labels;
    if (!labels.empty() && !extra_label.empty()) out += ',';
    out += extra_label;
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

void MetricsRegistry::AppendBreakdown(std::string& out, const std::string& family, const Series& s) {
  for (const auto& [value, sample] : s.breakdown_fn()) {
    WK_CHECK(IsValidUtf8(value), "breakdown '" + family + "': a label value is not UTF-8");
    const std::string label = s.breakdown_label + "=\"" + Escape(value, /*escape_quote=*/true) + "\"";
    AppendSample(out, family, {}, label, FormatMetricValue(sample));
  }
}

std::string MetricsRegistry::RenderText() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& family : families_) {
    out += "# HELP ";
    out += family->name;
    out += ' ';
    out += Escape(family->help, /*escape_quote=*/false);
    out += "\n# TYPE ";
    out += family->name;
    out += ' ';
    out += KindName(family->kind);
    out += '\n';
    for (const auto& s : family->series) {
      switch (family->kind) {
        case Kind::kCounter:
          if (s->breakdown_fn) {
            AppendBreakdown(out, family->name, *s);
            break;
          }
          AppendSample(out, family->name, s->rendered_labels, {},
                       FormatMetricValue(s->counter_fn ? s->counter_fn() : s->counter->value()));
          break;
        case Kind::kGauge: {
          if (s->breakdown_fn) {
            AppendBreakdown(out, family->name, *s);
            break;
          }
          const double v = s->gauge_fn ? s->gauge_fn->value() : s->gauge->value();
          AppendSample(out, family->name, s->rendered_labels, {}, FormatMetricValue(v));
          break;
        }
        case Kind::kHistogram: {
          const Histogram& h = s->histogram ? *s->histogram : *s->histogram_view;
          const std::string bucket_name = family->name + "_bucket";
          // Each bucket is read once and cumulated here, so the lines are monotonic and
          // _count equals the +Inf bucket even while other threads observe.
          std::uint64_t cumulative = 0;
          for (std::size_t i = 0; i <= h.bounds_.size(); ++i) {
            cumulative += h.counts_[i].load(std::memory_order_relaxed);
            const std::string le =
                "le=\"" +
                (i < h.bounds_.size() ? FormatMetricValue(h.bounds_[i]) : std::string("+Inf")) +
                "\"";
            AppendSample(out, bucket_name, s->rendered_labels, le, std::to_string(cumulative));
          }
          AppendSample(out, family->name + "_sum", s->rendered_labels, {},
                       FormatMetricValue(h.sum()));
          AppendSample(out, family->name + "_count", s->rendered_labels, {},
                       std::to_string(cumulative));
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace wk
