#include "bench/kv_bench_job.h"

#include <glog/logging.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <random>
#include <sstream>

#include "base/error.h"
#include "base/time.h"

namespace keel {
namespace {

constexpr double kBarrierTimeoutS = 600;
constexpr int kWarmupRequests = 3;
constexpr int kMinRequests = 5;

struct Workload {
  std::string name;
  int width = 1;
  uint32_t table = 0;
  int inflight = 1;
  std::vector<SharedArray<const Key>> key_batches;  // cycled through
  SharedArray<const float> values;                  // for the largest batch
};

// Issues requests for `seconds` (and at least kMinRequests), keeping
// `inflight` outstanding, and records each one's latency.
BenchCase Measure(KVWorker* client, const Workload& load, bool push, double seconds) {
  const size_t slots = static_cast<size_t>(load.inflight);
  std::vector<SharedArray<float>> outputs(slots);
  struct Pending {
    KVWorker::Handle handle;
    double start;
  };
  std::deque<Pending> window;
  BenchCase result;
  result.name = load.name + (push ? " push" : " pull");
  const size_t keys = load.key_batches[0].size();
  result.keys = keys;
  result.bytes = keys * load.width * sizeof(float);

  auto issue = [&](size_t n) {
    const auto& batch = load.key_batches[n % load.key_batches.size()];
    if (push) {
      return client->Push(batch, load.values.Slice(0, batch.size() * load.width), load.width,
                          load.table);
    }
    return client->Pull(batch, &outputs[n % slots], load.width, load.table);
  };
  // Warm up with every batch once, so rows exist and tables have grown.
  const size_t warmup = std::max<size_t>(kWarmupRequests, load.key_batches.size());
  for (size_t i = 0; i < warmup; ++i) client->Wait(issue(i));

  const double begin = MonotonicSeconds();
  size_t issued = 0;
  while (true) {
    const double now = MonotonicSeconds();
    const bool more = now - begin < seconds || issued < kMinRequests;
    if (window.size() == slots || (!more && !window.empty())) {
      client->Wait(window.front().handle);
      result.latencies_us.push_back((MonotonicSeconds() - window.front().start) * 1e6);
      window.pop_front();
      continue;
    }
    if (!more) break;
    window.push_back({issue(issued), MonotonicSeconds()});
    ++issued;
  }
  result.seconds = MonotonicSeconds() - begin;
  return result;
}

SharedArray<const float> RandomValues(size_t count, std::mt19937_64* random) {
  auto values = SharedArray<float>::Allocate(count);
  std::uniform_real_distribution<float> uniform(-1e-3f, 1e-3f);
  for (size_t i = 0; i < count; ++i) values[i] = uniform(*random);
  return values;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

std::vector<BenchCase> RunKVBench(Node* node, KVWorker* client, const KVBenchOptions& options) {
  std::mt19937_64 random(1234 + static_cast<uint64_t>(node->rank()));
  auto ranges = node->ranges();
  std::vector<Workload> loads;
  uint32_t next_table = 1;

  if (options.small) {
    Workload load;
    load.name = "small 1x1";
    load.table = next_table++;
    load.key_batches.push_back(SharedArray<const Key>(std::vector<Key>{MixKey(7)}));
    load.values = RandomValues(1, &random);
    loads.push_back(std::move(load));
  }
  for (uint64_t bytes : options.dense_bytes) {
    // One long row in each server's range, so every server carries a share.
    const size_t servers = ranges->num_ranges();
    Workload load;
    load.name = "dense " + FormatBytes(bytes);
    load.width = static_cast<int>(std::max<uint64_t>(1, bytes / sizeof(float) / servers));
    load.table = next_table++;
    load.inflight = options.inflight;
    std::vector<Key> keys;
    for (size_t r = 0; r < servers; ++r) keys.push_back(ranges->begin(r) + 1);
    load.key_batches.push_back(SharedArray<const Key>(std::move(keys)));
    load.values = RandomValues(servers * load.width, &random);
    loads.push_back(std::move(load));
  }
  for (int width : options.sparse_widths) {
    Workload load;
    load.name = "sparse " + std::to_string(options.sparse_keys) + "x" + std::to_string(width);
    load.width = width;
    load.table = next_table++;
    load.inflight = options.inflight;
    std::uniform_int_distribution<uint64_t> index(0, options.key_space - 1);
    size_t largest = 0;
    if (options.pslite_keys) {
      std::vector<Key> keys(options.sparse_keys);
      const Key step = std::numeric_limits<Key>::max() / options.sparse_keys;
      for (uint64_t i = 0; i < options.sparse_keys; ++i) keys[i] = step * i;
      largest = keys.size();
      load.key_batches.push_back(SharedArray<const Key>(std::move(keys)));
    }
    for (int b = 0; b < (options.pslite_keys ? 0 : 4); ++b) {
      std::vector<uint64_t> features(options.sparse_keys);
      for (auto& feature : features) feature = index(random);
      auto keys = MixedKeySet(features);
      largest = std::max(largest, keys.size());
      load.key_batches.push_back(SharedArray<const Key>(std::move(keys)));
    }
    load.values = RandomValues(largest * width, &random);
    loads.push_back(std::move(load));
  }

  std::vector<BenchCase> cases;
  for (const Workload& load : loads) {
    for (bool push : {true, false}) {
      node->Barrier(kWorkerGroup, kBarrierTimeoutS);
      cases.push_back(Measure(client, load, push, options.seconds_per_case));
      LOG(INFO) << "measured " << cases.back().name << ": " << cases.back().latencies_us.size()
                << " requests in " << cases.back().seconds << " s";
    }
  }
  node->Barrier(kWorkerGroup, kBarrierTimeoutS);
  return cases;
}

std::string FormatBenchCases(const std::vector<BenchCase>& cases) {
  std::ostringstream out;
  out.precision(9);
  for (const BenchCase& c : cases) {
    out << c.name << '\t' << c.bytes << '\t' << c.keys << '\t' << c.seconds << '\t';
    for (size_t i = 0; i < c.latencies_us.size(); ++i) {
      out << (i ? "," : "") << c.latencies_us[i];
    }
    out << '\n';
  }
  return out.str();
}

std::vector<BenchCase> ParseBenchCases(const std::string& text, const std::string& source) {
  std::vector<BenchCase> cases;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    BenchCase c;
    std::string bytes, keys, seconds, latencies;
    if (!std::getline(fields, c.name, '\t') || !std::getline(fields, bytes, '\t') ||
        !std::getline(fields, keys, '\t') || !std::getline(fields, seconds, '\t') ||
        !std::getline(fields, latencies)) {
      throw MakeError(source, ":", number, ": expected 5 tab-separated fields");
    }
    try {
      c.bytes = std::stoull(bytes);
      c.keys = std::stoull(keys);
      c.seconds = std::stod(seconds);
      std::istringstream values(latencies);
      std::string value;
      while (std::getline(values, value, ',')) c.latencies_us.push_back(std::stod(value));
    } catch (const std::exception&) {
      throw MakeError(source, ":", number, ": a field is not a number");
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace keel
