// What each `keel bench` measures, as plain values: one struct per
// benchmark, each field named after the flag it comes from (the command line
// fills them, cli/bench_flags.h, with its checks done: a benchmark takes its
// options as valid). What a benchmark needs from the command line beyond
// values (starting a local cluster, resolving the data's format) comes as a
// function the command line passes in, so nothing here depends on it.
#ifndef KEEL_BENCH_BENCH_OPTIONS_H_
#define KEEL_BENCH_BENCH_OPTIONS_H_

#include <cstdint>
#include <string>

namespace keel {

// `keel bench checkpoint`: full against delta checkpoints of one table.
struct BenchCheckpointOptions {
  uint64_t checkpoint_keys = 10000000;
  double changed_share = 0.01;
  int rounds = 5;
  std::string checkpoint_uri;  // "" for a temporary folder
};

// `keel bench admission`: a table under a power-law key stream.
struct BenchAdmissionOptions {
  uint64_t distinct_keys = 100000000;
};

// `keel bench reshard`: pushes' stalls while key ranges move.
struct BenchReshardOptions {
  uint64_t reshard_keys = 4000000;
  int reshard_width = 8;
  uint64_t sparse_keys = 100000;
  int key_ranges = 8;
};

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_OPTIONS_H_
