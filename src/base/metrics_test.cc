#include "base/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace wk {
namespace {

TEST(MetricsTest, CounterRendersHelpTypeAndValue) {
  MetricsRegistry registry;
  Counter& c = registry.AddCounter("wk_requests_total", "Requests served.");
  c.Inc();
  c.Inc(41);
  EXPECT_EQ(c.value(), 42);
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_requests_total Requests served.\n"
            "# TYPE wk_requests_total counter\n"
            "wk_requests_total 42\n");
}

TEST(MetricsTest, LabelledGaugeFamilyHasOneHeaderAndSeriesInOrder) {
  MetricsRegistry registry;
  Gauge& a = registry.AddGauge("wk_queue_depth", "Items queued.", {{"queue", "io"}, {"node", "n1"}});
  Gauge& b = registry.AddGauge("wk_queue_depth", "Items queued.", {{"queue", "cpu"}, {"node", "n1"}});
  a.Set(5);
  a.Inc(2);
  a.Dec();
  b.Set(0.25);
  b.Dec(1);
  EXPECT_EQ(a.value(), 6);
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_queue_depth Items queued.\n"
            "# TYPE wk_queue_depth gauge\n"
            "wk_queue_depth{queue=\"io\",node=\"n1\"} 6\n"
            "wk_queue_depth{queue=\"cpu\",node=\"n1\"} -0.75\n");
}

TEST(MetricsTest, FamiliesRenderInRegistrationOrder) {
  MetricsRegistry registry;
  registry.AddGauge("wk_b", "B.");
  registry.AddCounter("wk_a_total", "A.");
  registry.AddGauge("wk_b", "B.", {{"x", "1"}});
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_b B.\n"
            "# TYPE wk_b gauge\n"
            "wk_b 0\n"
            "wk_b{x=\"1\"} 0\n"
            "# HELP wk_a_total A.\n"
            "# TYPE wk_a_total counter\n"
            "wk_a_total 0\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("wk_latency_seconds", "Request latency.",
                                       {0.005, 0.1, 1, 2.5}, {{"op", "put"}});
  h.Observe(0.001);  // first bucket
  h.Observe(0.005);  // le is inclusive: still the first bucket
  h.Observe(0.05);
  h.Observe(2);
  h.Observe(10);  // only +Inf
  EXPECT_EQ(h.count(), 5u);
  EXPECT_EQ(h.CumulativeCount(0), 2u);
  EXPECT_EQ(h.CumulativeCount(2), 3u);
  EXPECT_DOUBLE_EQ(h.sum(), 12.056);
  const std::string text = registry.RenderText();
  const std::string expected_head =
      "# HELP wk_latency_seconds Request latency.\n"
      "# TYPE wk_latency_seconds histogram\n"
      "wk_latency_seconds_bucket{op=\"put\",le=\"0.005\"} 2\n"
      "wk_latency_seconds_bucket{op=\"put\",le=\"0.1\"} 3\n"
      "wk_latency_seconds_bucket{op=\"put\",le=\"1\"} 3\n"
      "wk_latency_seconds_bucket{op=\"put\",le=\"2.5\"} 4\n"
      "wk_latency_seconds_bucket{op=\"put\",le=\"+Inf\"} 5\n"
      "wk_latency_seconds_sum{op=\"put\"} ";
  ASSERT_EQ(text.substr(0, expected_head.size()), expected_head);
  // The sum is whatever the double additions gave; it must parse back to it.
  const std::string rest = text.substr(expected_head.size());
  const std::size_t eol = rest.find('\n');
  ASSERT_NE(eol, std::string::npos);
  EXPECT_DOUBLE_EQ(std::stod(rest.substr(0, eol)), 12.056);
  EXPECT_EQ(rest.substr(eol + 1), "wk_latency_seconds_count{op=\"put\"} 5\n");
}

TEST(MetricsTest, HistogramWithoutLabelsAndNaN) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("wk_size_bytes", "Sizes.", {100});
  h.Observe(50);
  h.Observe(std::nan(""));
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_size_bytes Sizes.\n"
            "# TYPE wk_size_bytes histogram\n"
            "wk_size_bytes_bucket{le=\"100\"} 1\n"
            "wk_size_bytes_bucket{le=\"+Inf\"} 2\n"
            "wk_size_bytes_sum NaN\n"
            "wk_size_bytes_count 2\n");
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry registry;
  registry.AddGauge("wk_escaped", "Help with \\ backslash,\nnewline and \"quotes\".",
                    {{"path", "C:\\dir\n\"x\""}});
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_escaped Help with \\\\ backslash,\\nnewline and \"quotes\".\n"
            "# TYPE wk_escaped gauge\n"
            "wk_escaped{path=\"C:\\\\dir\\n\\\"x\\\"\"} 0\n");
}

TEST(MetricsTest, Utf8LabelValuesRenderVerbatim) {
  MetricsRegistry registry;
  registry.AddGauge("wk_city", "City.", {{"name", "Z\xc3\xbcrich \xe2\x9c\x93 \xf0\x9f\x99\x82"}});
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_city City.\n"
            "# TYPE wk_city gauge\n"
            "wk_city{name=\"Z\xc3\xbcrich \xe2\x9c\x93 \xf0\x9f\x99\x82\"} 0\n");
}

TEST(MetricsTest, CallbackGaugeIsComputedAtScrapeTime) {
  MetricsRegistry registry;
  double source = 3;
  std::function<double()> read = [&source] { return source; };
  GaugeFn& g = registry.AddCallbackGauge("wk_live_actors", "Live actors.", read, {{"node", "n1"}});
  registry.AddGauge("wk_live_actors", "Live actors.", {{"node", "n2"}}).Set(1);
  EXPECT_EQ(g.value(), 3);
  source = 7;
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_live_actors Live actors.\n"
            "# TYPE wk_live_actors gauge\n"
            "wk_live_actors{node=\"n1\"} 7\n"
            "wk_live_actors{node=\"n2\"} 1\n");
}

TEST(MetricsTest, ABreakdownsSeriesAreComputedAtScrapeTime) {
  MetricsRegistry registry;
  MetricsRegistry::Breakdown parts = {{"acme", 3}, {"b\"q", 1.5}};
  registry.AddCallbackGaugeBreakdown("wk_tenant_bytes", "Bytes by tenant.", "tenant", [&parts] { return parts; });
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_tenant_bytes Bytes by tenant.\n"
            "# TYPE wk_tenant_bytes gauge\n"
            "wk_tenant_bytes{tenant=\"acme\"} 3\n"
            "wk_tenant_bytes{tenant=\"b\\\"q\"} 1.5\n");
  parts = {};
  EXPECT_EQ(registry.RenderText(), "# HELP wk_tenant_bytes Bytes by tenant.\n# TYPE wk_tenant_bytes gauge\n")
      << "no series while there is nothing to break down";
}

TEST(MetricsTest, ACounterBreakdownIsACounterFamily) {
  MetricsRegistry registry;
  MetricsRegistry::Breakdown parts = {{"acme", 3}, {"other", 7}};
  registry.AddCallbackCounterBreakdown("wk_tenant_requests_total", "Requests by tenant.", "tenant",
                                       [&parts] { return parts; });
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_tenant_requests_total Requests by tenant.\n"
            "# TYPE wk_tenant_requests_total counter\n"
            "wk_tenant_requests_total{tenant=\"acme\"} 3\n"
            "wk_tenant_requests_total{tenant=\"other\"} 7\n");
}

TEST(MetricsTest, ViewsReadAComponentsOwnStatsAndHistogram) {
  // The publishing pattern: the component owns plain stats and a Histogram; the registry
  // only reads them at scrape time.
  struct Component {
    std::uint64_t writes = 0;
    Histogram latency{{0.1, 1}};
  } component;
  MetricsRegistry registry;
  registry.AddCallbackCounter("wk_writes_total", "Writes.", [&component] { return double(component.writes); },
                              {{"backend", "mem"}});
  registry.AddHistogramView("wk_latency_seconds", "Latency.", component.latency);
  component.writes = 3;
  component.latency.Observe(0.5);
  EXPECT_EQ(registry.RenderText(),
            "# HELP wk_writes_total Writes.\n"
            "# TYPE wk_writes_total counter\n"
            "wk_writes_total{backend=\"mem\"} 3\n"
            "# HELP wk_latency_seconds Latency.\n"
            "# TYPE wk_latency_seconds histogram\n"
            "wk_latency_seconds_bucket{le=\"0.1\"} 0\n"
            "wk_latency_seconds_bucket{le=\"1\"} 1\n"
            "wk_latency_seconds_bucket{le=\"+Inf\"} 1\n"
            "wk_latency_seconds_sum 0.5\n"
            "wk_latency_seconds_count 1\n");
  component.writes = 5;
  EXPECT_NE(registry.RenderText().find("wk_writes_total{backend=\"mem\"} 5\n"), std::string::npos);
}

TEST(MetricsTest, ValueFormatting) {
  EXPECT_EQ(FormatMetricValue(42), "42");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(-0.0), "0");
  EXPECT_EQ(FormatMetricValue(1e6), "1000000");
  EXPECT_EQ(FormatMetricValue(1e20), "100000000000000000000");
  EXPECT_EQ(FormatMetricValue(1e-7), "1e-07");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  // Shortest round trip, not printf's 6 digits.
  EXPECT_EQ(FormatMetricValue(0.1 + 0.2), "0.30000000000000004");
}

TEST(MetricsTest, ConcurrentUpdatesSumExactly) {
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("wk_ops_total", "Ops.");
  Gauge& gauge = registry.AddGauge("wk_level", "Level.");
  Histogram& histogram = registry.AddHistogram("wk_op_seconds", "Op time.", {0.5});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&counter, &gauge, &histogram, t] {
      for (int i = 0; i < kPerThread; ++i) {
        counter.Inc();
        gauge.Inc(2);
        gauge.Dec();
        histogram.Observe(t % 2 == 0 ? 0.25 : 1.0);  // exact in binary: sums exactly
      }
    });
  }
  // Scrapes while the threads count must not crash or tear (TSan-free by design).
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(registry.RenderText().empty());
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter.value(), kThreads * kPerThread);
  EXPECT_EQ(gauge.value(), kThreads * kPerThread);
  EXPECT_EQ(histogram.count(), static_cast<std::uint64_t>(kThreads) * kPerThread);
  EXPECT_EQ(histogram.CumulativeCount(0), static_cast<std::uint64_t>(kThreads / 2) * kPerThread);
  EXPECT_EQ(histogram.sum(), (kThreads / 2) * kPerThread * 1.25);
}

using MetricsDeathTest = ::testing::Test;

TEST_F(MetricsDeathTest, InvalidNamesCrash) {
  MetricsRegistry registry;
  EXPECT_DEATH(registry.AddCounter("", "h"), "invalid metric name");
  EXPECT_DEATH(registry.AddCounter("1abc", "h"), "invalid metric name '1abc'");
  EXPECT_DEATH(registry.AddCounter("a-b", "h"), "invalid metric name 'a-b'");
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"bad:label", "v"}}), "invalid label name 'bad:label'");
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"", "v"}}), "invalid label name");
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"__reserved", "v"}}), "reserved");
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"a", "1"}, {"a", "2"}}), "label 'a' given twice");
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"a", "\xff"}}), "not UTF-8");
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"a", "\xc0\xaf"}}), "not UTF-8");  // overlong '/'
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"a", "x\xe2\x82"}}), "not UTF-8");  // truncated
  EXPECT_DEATH(registry.AddGauge("ok", "h", {{"a", "\xed\xa0\x80"}}), "not UTF-8");  // surrogate
  EXPECT_DEATH(registry.AddHistogram("ok", "h", {1}, {{"le", "1"}}), "'le' is reserved");
  EXPECT_DEATH(registry.AddGauge("ok", ""), "needs a HELP text");
  // Colons are allowed in metric names (recording rules use them).
  registry.AddGauge("job:ok:rate5m", "h");
}

TEST_F(MetricsDeathTest, DuplicateOrConflictingRegistrationCrashes) {
  MetricsRegistry registry;
  registry.AddCounter("wk_x_total", "X.", {{"a", "1"}, {"b", "2"}});
  EXPECT_DEATH(registry.AddCounter("wk_x_total", "X.", {{"a", "1"}, {"b", "2"}}),
               "registered twice with the same labels");
  // Label order does not make a different series.
  EXPECT_DEATH(registry.AddCounter("wk_x_total", "X.", {{"b", "2"}, {"a", "1"}}),
               "registered twice with the same labels");
  EXPECT_DEATH(registry.AddGauge("wk_x_total", "X.", {{"a", "9"}}),
               "registered as counter and again as gauge");
  EXPECT_DEATH(registry.AddCounter("wk_x_total", "Other help.", {{"a", "9"}}), "two HELP texts");
  registry.AddHistogram("wk_h", "H.", {1});
  EXPECT_DEATH(registry.AddCounter("wk_h_count", "C."), "which 'wk_h' already writes");
  // A different label set is a new series of the same family.
  registry.AddCounter("wk_x_total", "X.", {{"a", "1"}});
}

TEST_F(MetricsDeathTest, BadValuesAndBoundsCrash) {
  MetricsRegistry registry;
  Counter& c = registry.AddCounter("wk_c_total", "C.");
  EXPECT_DEATH(c.Inc(-1), "a counter increment must be >= 0");
  EXPECT_DEATH(c.Inc(std::nan("")), "a counter increment must be >= 0");
  EXPECT_DEATH(registry.AddHistogram("wk_h1", "H.", {1, 1}), "strictly increasing");
  EXPECT_DEATH(registry.AddHistogram("wk_h2", "H.", {2, 1}), "strictly increasing");
  EXPECT_DEATH(registry.AddHistogram("wk_h3", "H.", {1, std::numeric_limits<double>::infinity()}),
               "must be finite");
  EXPECT_DEATH(registry.AddHistogram("wk_h4", "H.", std::vector<double>(kMaxHistogramBuckets + 1, 0)),
               "too many buckets");
  EXPECT_DEATH(registry.AddCallbackGauge("wk_g", "G.", nullptr), "needs a function");
  registry.AddCallbackGaugeBreakdown("wk_by", "By.", "tenant", [] { return MetricsRegistry::Breakdown{}; });
  EXPECT_DEATH(registry.AddGauge("wk_by", "By."), "is a breakdown");
  EXPECT_DEATH(registry.AddCallbackGaugeBreakdown("wk_by", "By.", "tenant", [] { return MetricsRegistry::Breakdown{}; }),
               "family of its own");
  c.Inc(0);  // zero is allowed
  EXPECT_EQ(c.value(), 0);
}

}  // namespace
}  // namespace wk
