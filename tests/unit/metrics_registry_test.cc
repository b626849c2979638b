// MetricsRegistry (metrics/metrics_registry.h): Prometheus's naming rules
// enforced on registration, and the text exposition read back sample by
// sample.
#include "metrics/metrics_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <sstream>
#include <string>

#include "scrape.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;
using testing::ParseExposition;

TEST(MetricsRegistry, ACounterWhoseNameDoesNotEndInTotalIsRefused) {
  MetricsRegistry registry;
  const std::string error = ErrorOf([&] {
    registry.AddCounter("keel_requests", "help", MetricsRegistry::One([] { return 1.0; }));
  });
  EXPECT_EQ(error, "counter keel_requests: a counter's name ends in _total");
}

TEST(MetricsRegistry, AGaugeWhoseNameEndsInTotalIsRefused) {
  MetricsRegistry registry;
  const std::string error = ErrorOf([&] {
    registry.AddGauge("keel_rows_total", "help", MetricsRegistry::One([] { return 1.0; }));
  });
  EXPECT_EQ(error, "metric keel_rows_total: only counters' names end in _total");
}

TEST(MetricsRegistry, AnInvalidOrRepeatedNameIsRefused) {
  MetricsRegistry registry;
  const auto one = MetricsRegistry::One([] { return 1.0; });
  EXPECT_EQ(ErrorOf([&] { registry.AddGauge("keel-rows", "help", one); }),
            "'keel-rows' is not a valid metric name");
  registry.AddGauge("keel_rows", "help", one);
  EXPECT_EQ(ErrorOf([&] { registry.AddGauge("keel_rows", "help", one); }),
            "metric keel_rows is defined twice");
  EXPECT_EQ(ErrorOf([&] { registry.AddHistogram("keel_rows", "help"); }),
            "metric keel_rows is defined twice");
}

TEST(MetricsRegistry, AnInvalidLabelNameFromAReaderFailsTheScrapeNamingIt) {
  MetricsRegistry registry;
  registry.AddGauge("keel_rows", "help", [] {
    return std::vector<MetricSample>{{{{"bad-label", "x"}}, 1}};
  });
  EXPECT_EQ(ErrorOf([&] { registry.TextExposition(); }),
            "metric keel_rows: 'bad-label' is not a valid label name");
}

TEST(MetricsRegistry, ReadersAreReadAtEveryScrape) {
  MetricsRegistry registry;
  std::atomic<uint64_t> served{3};
  registry.AddCounter("keel_served_total", "Served.",
                      MetricsRegistry::One([&] { return static_cast<double>(served.load()); }));
  EXPECT_EQ(ParseExposition(registry.TextExposition())["keel_served_total"], 3);
  served = 7;
  EXPECT_EQ(ParseExposition(registry.TextExposition())["keel_served_total"], 7);
}

TEST(MetricsRegistry, TheExpositionHasHelpTypeAndEveryLabelledSample) {
  MetricsRegistry registry;
  registry.AddGauge("keel_table_rows", "Rows per table.", [] {
    return std::vector<MetricSample>{{{{"table", "0"}}, 12}, {{{"table", "1"}}, 5}};
  });
  const std::string text = registry.TextExposition();
  EXPECT_TRUE(Contains(text, "# HELP keel_table_rows Rows per table.\n")) << text;
  EXPECT_TRUE(Contains(text, "# TYPE keel_table_rows gauge\n")) << text;
  auto samples = ParseExposition(text);
  EXPECT_EQ(samples["keel_table_rows{table=\"0\"}"], 12);
  EXPECT_EQ(samples["keel_table_rows{table=\"1\"}"], 5);
  EXPECT_EQ(samples.size(), 2u) << text;
}

TEST(MetricsRegistry, AHistogramReaderHasCumulativeBucketsUpToInfinity) {
  MetricsRegistry registry;
  registry.AddHistogramReader("keel_staleness_clocks", "Staleness.", [] {
    HistogramSample sample;
    sample.bounds = {0, 1, 2};
    sample.cumulative = {4, 9, 9};
    sample.count = 10;
    sample.sum = 17;
    return std::vector<HistogramSample>{sample};
  });
  auto samples = ParseExposition(registry.TextExposition());
  EXPECT_EQ(samples["keel_staleness_clocks_bucket{le=\"0\"}"], 4);
  EXPECT_EQ(samples["keel_staleness_clocks_bucket{le=\"1\"}"], 9);
  EXPECT_EQ(samples["keel_staleness_clocks_bucket{le=\"2\"}"], 9);
  EXPECT_EQ(samples["keel_staleness_clocks_bucket{le=\"+Inf\"}"], 10);
  EXPECT_EQ(samples["keel_staleness_clocks_count"], 10);
  EXPECT_EQ(samples["keel_staleness_clocks_sum"], 17);
}

TEST(MetricsRegistry, ObservedHistogramsAndCountersAreInTheExposition) {
  MetricsRegistry registry;
  auto& seconds = registry.AddHistogram("keel_request_duration_seconds", "Latency.");
  auto& bytes = registry.AddObservedCounter("keel_request_bytes_total", "Bytes.");
  auto& push = seconds.Add({{"op", "push"}}, LatencyBucketsSeconds());
  push.Observe(0.0003);
  push.Observe(0.2);
  bytes.Add({{"op", "push"}}).Increment(4096);
  auto samples = ParseExposition(registry.TextExposition());
  EXPECT_EQ(samples["keel_request_duration_seconds_count{op=\"push\"}"], 2);
  EXPECT_EQ(samples["keel_request_duration_seconds_bucket{op=\"push\",le=\"0.0005\"}"], 1);
  EXPECT_EQ(samples["keel_request_duration_seconds_bucket{op=\"push\",le=\"0.25\"}"], 2);
  EXPECT_EQ(samples["keel_request_bytes_total{op=\"push\"}"], 4096);
}

TEST(MetricsRegistry, AnEmptyReaderLeavesOnlyItsHelpAndType) {
  MetricsRegistry registry;
  registry.AddGauge("keel_checkpoint_age_seconds", "Age.",
                    [] { return std::vector<MetricSample>{}; });
  const std::string text = registry.TextExposition();
  EXPECT_TRUE(ParseExposition(text).empty()) << text;
}

}  // namespace
}  // namespace keel
