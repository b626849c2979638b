// MetricsRegistry: readers' samples turned into prometheus::MetricFamily at
// scrape time, merged with the observed histograms' and serialized by
// prometheus::TextSerializer.
#include "metrics/metrics_registry.h"

#include <prometheus/check_names.h>
#include <prometheus/client_metric.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "base/error.h"

namespace keel {
namespace {

bool EndsWith(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

std::vector<prometheus::ClientMetric::Label> LabelsOf(const std::string& metric,
                                                      const MetricLabels& labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  for (const auto& [name, value] : labels) {
    if (!prometheus::CheckLabelName(name) || name.rfind("__", 0) == 0) {
      throw MakeError("metric ", metric, ": '", name, "' is not a valid label name");
    }
    out.push_back({name, value});
  }
  return out;
}

prometheus::ClientMetric HistogramMetric(const std::string& metric, const HistogramSample& sample) {
  if (sample.bounds.size() != sample.cumulative.size()) {
    throw MakeError("metric ", metric, ": ", sample.bounds.size(), " bucket bounds but ",
                    sample.cumulative.size(), " counts");
  }
  prometheus::ClientMetric out;
  out.label = LabelsOf(metric, sample.labels);
  out.histogram.sample_count = sample.count;
  out.histogram.sample_sum = sample.sum;
  for (size_t i = 0; i < sample.bounds.size(); ++i) {
    out.histogram.bucket.push_back({sample.cumulative[i], sample.bounds[i]});
  }
  out.histogram.bucket.push_back({sample.count, std::numeric_limits<double>::infinity()});
  return out;
}

}  // namespace

const char* const MetricsRegistry::kContentType = "text/plain; version=0.0.4; charset=utf-8";

MetricsRegistry::Reader MetricsRegistry::One(std::function<double()> value) {
  return [value = std::move(value)] { return std::vector<MetricSample>{{{}, value()}}; };
}

void MetricsRegistry::Claim(const std::string& name, prometheus::MetricType type) {
  if (!prometheus::CheckMetricName(name)) {
    throw MakeError("'", name, "' is not a valid metric name");
  }
  if (type == prometheus::MetricType::Counter && !EndsWith(name, "_total")) {
    throw MakeError("counter ", name, ": a counter's name ends in _total");
  }
  if (type != prometheus::MetricType::Counter && EndsWith(name, "_total")) {
    throw MakeError("metric ", name, ": only counters' names end in _total");
  }
  if (std::find(names_.begin(), names_.end(), name) != names_.end()) {
    throw MakeError("metric ", name, " is defined twice");
  }
  names_.push_back(name);
}

void MetricsRegistry::AddRead(const std::string& name, const std::string& help,
                              prometheus::MetricType type, Reader values,
                              HistogramReader histograms) {
  std::lock_guard<std::mutex> lock(mutex_);
  Claim(name, type);
  Read read;
  read.family.name = name;
  read.family.help = help;
  read.family.type = type;
  read.values = std::move(values);
  read.histograms = std::move(histograms);
  reads_.push_back(std::move(read));
}

void MetricsRegistry::AddCounter(const std::string& name, const std::string& help, Reader read) {
  AddRead(name, help, prometheus::MetricType::Counter, std::move(read), nullptr);
}

void MetricsRegistry::AddGauge(const std::string& name, const std::string& help, Reader read) {
  AddRead(name, help, prometheus::MetricType::Gauge, std::move(read), nullptr);
}

void MetricsRegistry::AddHistogramReader(const std::string& name, const std::string& help,
                                         HistogramReader read) {
  AddRead(name, help, prometheus::MetricType::Histogram, nullptr, std::move(read));
}

prometheus::Family<prometheus::Histogram>& MetricsRegistry::AddHistogram(const std::string& name,
                                                                         const std::string& help) {
  std::lock_guard<std::mutex> lock(mutex_);
  Claim(name, prometheus::MetricType::Histogram);
  return prometheus::BuildHistogram().Name(name).Help(help).Register(observed_);
}

prometheus::Family<prometheus::Counter>& MetricsRegistry::AddObservedCounter(
    const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lock(mutex_);
  Claim(name, prometheus::MetricType::Counter);
  return prometheus::BuildCounter().Name(name).Help(help).Register(observed_);
}

prometheus::MetricFamily MetricsRegistry::Sampled(const Read& read) {
  prometheus::MetricFamily family = read.family;
  if (read.histograms) {
    for (const HistogramSample& sample : read.histograms()) {
      family.metric.push_back(HistogramMetric(family.name, sample));
    }
    return family;
  }
  for (const MetricSample& sample : read.values()) {
    prometheus::ClientMetric metric;
    metric.label = LabelsOf(family.name, sample.labels);
    if (family.type == prometheus::MetricType::Counter) {
      metric.counter.value = sample.value;
    } else {
      metric.gauge.value = sample.value;
    }
    family.metric.push_back(std::move(metric));
  }
  return family;
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<Read> reads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reads = reads_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const Read& read : reads) families.push_back(Sampled(read));
  for (prometheus::MetricFamily& family : observed_.Collect()) {
    families.push_back(std::move(family));
  }
  std::sort(families.begin(), families.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return families;
}

std::string MetricsRegistry::TextExposition() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, Collect());
  return out.str();
}

const std::vector<double>& LatencyBucketsSeconds() {
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10};
  return kBuckets;
}

}  // namespace keel
