// `keel bench admission`: the memory of one server's table under a power-law
// stream of --distinct_keys keys, with and without key admission. Key k is
// pushed n_k times, n drawn (by a hash of k) with P(n) proportional to 1/n^2
// for n in 1..1000 (61% of the keys once, 15% twice, ...: hashed IDs), in
// rounds: round r pushes every key with n_k > r, in pushes of 10^4 keys. Each
// case fills its own table (Adagrad, one weight, the push path a server
// takes: AdmitKeys then Push) and reports its rows, the table's bytes, the
// counters' bytes and the keys it admitted by collision (pushed fewer times
// than --admit_after, yet given a row). Cases: every key; admission after 2
// pushes with the default 8 MiB of counters, and with 2 and 8 bytes of
// counters per distinct key; after 3 pushes with 8 bytes.
#include "bench/bench_admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "bench/bench_checkpoint.h"
#include "kv/keys.h"
#include "server/shard.h"

namespace keel {
namespace {

constexpr uint32_t kMaxPushes = 1000;

// The cumulative distribution of n (P(n) ~ 1/n^2, n in 1..kMaxPushes).
std::vector<double> PushCountCdf() {
  std::vector<double> cdf(kMaxPushes + 1, 0);
  double sum = 0;
  for (uint32_t n = 1; n <= kMaxPushes; ++n) sum += 1.0 / (double(n) * n);
  double running = 0;
  for (uint32_t n = 1; n <= kMaxPushes; ++n) {
    running += 1.0 / (double(n) * n) / sum;
    cdf[n] = running;
  }
  return cdf;
}

// How often key index `k` is pushed.
uint32_t PushesOf(uint64_t k, const std::vector<double>& cdf) {
  const uint64_t hash = MixKey(k ^ 0x5bd1e995ULL) * 0x9E3779B97F4A7C15ULL;
  const double u = static_cast<double>(hash >> 11) * 0x1.0p-53;
  return static_cast<uint32_t>(std::lower_bound(cdf.begin() + 1, cdf.end(), u) - cdf.begin());
}

struct Case {
  uint32_t admit_after = 0;
  uint32_t sketch_mib = 0;
};

struct Result {
  uint64_t rows = 0, table_bytes = 0, sketch_bytes = 0, pushes = 0, by_collision = 0;
  double seconds = 0;
};

// `order`: the key indices by push count, most first, so that round r is a
// prefix of it (the keys pushed more than r times).
Result Fill(const Case& c, const std::vector<uint32_t>& pushes,
            const std::vector<uint32_t>& order) {
  const uint64_t distinct = pushes.size();
  ServerTable table = AdagradBenchTable();
  if (c.admit_after > 1) {
    table.admit_after = c.admit_after;
    table.admission =
        std::make_unique<AdmissionSketch>(AdmissionSketch::WidthFor(uint64_t{c.sketch_mib} << 20));
  }
  Result result;
  const double begin = MonotonicSeconds();
  constexpr size_t kPerPush = 10000;
  std::vector<Key> batch;
  std::vector<size_t> kept;
  std::vector<Key> admitted;
  std::vector<float> gradients(kPerPush, 0.5f);
  auto push = [&] {
    const Key* keys = batch.data();
    size_t count = batch.size();
    if (table.admission) {
      AdmitKeys(batch.data(), batch.size(), table, &kept);
      admitted.clear();
      for (size_t i : kept) admitted.push_back(batch[i]);
      keys = admitted.data();
      count = admitted.size();
    }
    table.rows->Push(keys, count, gradients.data(), table.optimizer.get());
    result.pushes += batch.size();
    batch.clear();
  };
  for (uint32_t round = 0; round < kMaxPushes; ++round) {
    for (uint32_t k : order) {
      if (pushes[k] <= round) break;
      batch.push_back(MixKey(k));
      if (batch.size() == kPerPush) push();
    }
    if (!batch.empty()) push();
  }
  result.seconds = MonotonicSeconds() - begin;
  result.rows = table.rows->size();
  result.table_bytes = table.rows->memory_bytes();
  result.sketch_bytes = table.admission ? table.admission->memory_bytes() : 0;
  if (c.admit_after > 1) {
    for (uint64_t k = 0; k < distinct; ++k) {
      if (pushes[k] < c.admit_after && table.rows->Find(MixKey(k))) ++result.by_collision;
    }
  }
  return result;
}

}  // namespace

int BenchAdmission(const BenchAdmissionOptions& options) {
  const uint64_t distinct = options.distinct_keys;
  const std::vector<double> cdf = PushCountCdf();
  std::vector<uint32_t> pushes(distinct);
  uint64_t total = 0, once = 0;
  for (uint64_t k = 0; k < distinct; ++k) {
    pushes[k] = PushesOf(k, cdf);
    total += pushes[k];
    once += pushes[k] == 1;
  }
  // By push count, most first (a counting sort: counts are at most kMaxPushes).
  std::vector<uint64_t> starts(kMaxPushes + 2, 0);
  for (uint32_t n : pushes) ++starts[kMaxPushes - n + 1];
  for (size_t i = 1; i < starts.size(); ++i) starts[i] += starts[i - 1];
  std::vector<uint32_t> order(distinct);
  for (uint64_t k = 0; k < distinct; ++k)
    order[starts[kMaxPushes - pushes[k]]++] = static_cast<uint32_t>(k);
  std::printf("%llu distinct keys, %llu key pushes, %.1f%% of the keys pushed once\n",
              static_cast<unsigned long long>(distinct), static_cast<unsigned long long>(total),
              100.0 * once / distinct);
  std::printf("%-22s %12s %14s %12s %12s %14s %9s\n", "case", "rows", "table bytes", "counters",
              "bytes/key", "by collision", "seconds");
  // The default counters (8 MiB), then 2 and 8 bytes of counters per
  // distinct key of the stream.
  auto mib = [&](uint64_t bytes_per_key) {
    return static_cast<uint32_t>(std::clamp<uint64_t>(distinct * bytes_per_key >> 20, 1, 2048));
  };
  const std::vector<Case> cases = {{0, 0}, {2, 8}, {2, mib(2)}, {2, mib(8)}, {3, mib(8)}};
  for (const Case& c : cases) {
    const Result r = Fill(c, pushes, order);
    char name[64];
    if (c.admit_after == 0) {
      std::snprintf(name, sizeof(name), "every key");
    } else {
      std::snprintf(name, sizeof(name), "admit_after=%u, %u MiB", c.admit_after, c.sketch_mib);
    }
    std::printf("%-22s %12llu %14llu %12llu %12.2f %14llu %9.1f\n", name,
                static_cast<unsigned long long>(r.rows),
                static_cast<unsigned long long>(r.table_bytes),
                static_cast<unsigned long long>(r.sketch_bytes),
                static_cast<double>(r.table_bytes + r.sketch_bytes) / distinct,
                static_cast<unsigned long long>(r.by_collision), r.seconds);
    const std::string json = JsonObject()
                                 .String("bench", "admission")
                                 .Count("distinct_keys", distinct)
                                 .Count("admit_after", c.admit_after)
                                 .Count("sketch_mib", c.sketch_mib)
                                 .Count("rows", r.rows)
                                 .Count("table_bytes", r.table_bytes)
                                 .Count("sketch_bytes", r.sketch_bytes)
                                 .Count("by_collision", r.by_collision)
                                 .Fixed("seconds", r.seconds, 2)
                                 .Close();
    std::printf("%s\n", json.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace keel
