// MetricsRegistry: one process's Prometheus metrics, on prometheus-cpp's data
// model and text format.
//
// Most of what an operator needs Keel already counts (a server's served and
// refused requests, a worker's resends, the scheduler's members): such a
// metric is registered with a reader, which the registry calls at every
// scrape, so nothing is counted twice and the hot paths do no extra work.
// What nothing else counts (request latencies) is observed into histograms
// the registry owns (prometheus::Histogram: a short lock per observation, per
// label set).
//
// Names and labels follow Prometheus's conventions, checked on registration:
// counters end in _total, units are in the names (_seconds, _bytes), label
// names are valid. A reader's label sets must stay bounded (roles, ranks,
// tables; never keys).
//
// Not a global: each process (or each node of a test) has its own, passed to
// whatever defines metrics. Thread-safe: registration and Collect may be
// called from any thread; readers run on the scraping thread and must be
// safe to call from it.
#ifndef KEEL_METRICS_METRICS_REGISTRY_H_
#define KEEL_METRICS_METRICS_REGISTRY_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace keel {

using MetricLabels = std::map<std::string, std::string>;

// One labelled value of a counter or gauge.
struct MetricSample {
  MetricLabels labels;
  double value = 0;
};

// One labelled histogram read at scrape time: `cumulative[i]` observations
// were <= `bounds[i]` (bounds increasing, without +Inf); `count` in all.
struct HistogramSample {
  MetricLabels labels;
  std::vector<double> bounds;
  std::vector<uint64_t> cumulative;
  uint64_t count = 0;
  double sum = 0;
};

class MetricsRegistry {
 public:
  using Reader = std::function<std::vector<MetricSample>()>;
  using HistogramReader = std::function<std::vector<HistogramSample>()>;

  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Reader of one unlabelled value.
  static Reader One(std::function<double()> value);

  // A counter (`name` ends in _total) or gauge read at scrape time. Throws
  // Error if the name is not a valid metric name, a counter's does not end
  // in _total, or the name is taken.
  void AddCounter(const std::string& name, const std::string& help, Reader read);
  void AddGauge(const std::string& name, const std::string& help, Reader read);
  // A histogram read at scrape time (from buckets counted elsewhere).
  void AddHistogramReader(const std::string& name, const std::string& help, HistogramReader read);

  // A histogram family observed as things happen, with `bounds` (increasing);
  // its members are made with family.Add(labels, bounds). Throws Error as
  // AddCounter does.
  prometheus::Family<prometheus::Histogram>& AddHistogram(const std::string& name,
                                                          const std::string& help);
  // A counter family counted as things happen (atomic increments).
  prometheus::Family<prometheus::Counter>& AddObservedCounter(const std::string& name,
                                                              const std::string& help);

  // Every metric's current samples; a label set a reader gives with an
  // invalid label name is an Error.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in Prometheus's text exposition format (version 0.0.4).
  std::string TextExposition() const;

  // The exposition format's content type.
  static const char* const kContentType;

 private:
  struct Read {
    prometheus::MetricFamily family;  // name, help and type; no samples
    Reader values;
    HistogramReader histograms;
  };
  // Throws Error unless `name` is a valid, unused metric name.
  void Claim(const std::string& name, prometheus::MetricType type);
  void AddRead(const std::string& name, const std::string& help, prometheus::MetricType type,
               Reader values, HistogramReader histograms);
  static prometheus::MetricFamily Sampled(const Read& read);

  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  std::vector<Read> reads_;
  prometheus::Registry observed_;  // what is counted and observed as things happen
};

// Latency buckets in seconds, 100 us .. 10 s, for request round trips.
const std::vector<double>& LatencyBucketsSeconds();

}  // namespace keel

#endif  // KEEL_METRICS_METRICS_REGISTRY_H_
