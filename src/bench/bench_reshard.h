// `keel bench reshard`: pushes' stalls while key ranges move to a joining
// server and off a drained one, with and without pre-copy (see
// bench_reshard.cc).
#ifndef KEEL_BENCH_BENCH_RESHARD_H_
#define KEEL_BENCH_BENCH_RESHARD_H_

#include "bench/bench_options.h"

namespace keel {

// Runs the benchmark `options` describe (key_ranges: at least 3).
int BenchReshard(const BenchReshardOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_RESHARD_H_
