// The KV benchmark's worker side: push/pull throughput and latency against the
// cluster's servers, case by case, with every worker running the same case at
// the same time (barriers between cases).
#ifndef KEEL_BENCH_KV_BENCH_JOB_H_
#define KEEL_BENCH_KV_BENCH_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_worker.h"
#include "kv/node.h"

namespace keel {

struct KVBenchOptions {
  // Cases: dense sizes are bytes per request, split over one long row per
  // server; sparse cases are `sparse_keys` random keys per request with rows
  // of each width.
  std::vector<uint64_t> dense_bytes;
  std::vector<int> sparse_widths;
  uint64_t sparse_keys = 100000;
  // Sparse keys are drawn from feature indices [0, key_space), then mixed.
  uint64_t key_space = 10000000;
  double seconds_per_case = 2;
  int inflight = 2;  // requests in flight per worker
  // Round-trip cases ("small": one key, one float, one request in flight).
  bool small = true;
  // ps-lite's own benchmark workload for the sparse cases: `sparse_keys` keys
  // evenly spaced over the whole key space (not mixed), the same keys in
  // every request (the servers' tables then sum, SGD at rate 1, as the bench
  // command sets).
  bool pslite_keys = false;
};

// One measured case on one worker.
struct BenchCase {
  std::string name;    // "dense 1MiB push", "sparse 100000x1 pull", ...
  uint64_t bytes = 0;  // value bytes per request (pushed or pulled)
  uint64_t keys = 0;   // keys per request
  double seconds = 0;
  std::vector<double> latencies_us;  // one per request
};

// Runs every case; each case ends with a worker barrier. Throws Error if a
// request fails.
std::vector<BenchCase> RunKVBench(Node* node, KVWorker* client, const KVBenchOptions& options);

// Text form of the results, one case per line, and back.
std::string FormatBenchCases(const std::vector<BenchCase>& cases);
std::vector<BenchCase> ParseBenchCases(const std::string& text, const std::string& source);

// "1MiB", "64KiB", "4B" for byte counts.
std::string FormatBytes(uint64_t bytes);

}  // namespace keel

#endif  // KEEL_BENCH_KV_BENCH_JOB_H_
