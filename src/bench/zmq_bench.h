// `keel bench zmq`'s measurement: raw ZeroMQ request/reply over loopback TCP,
// the baseline `keel bench kv` compares push/pull with.
#ifndef KEEL_BENCH_ZMQ_BENCH_H_
#define KEEL_BENCH_ZMQ_BENCH_H_

#include <vector>

#include "bench/kv_bench_job.h"

namespace keel {

// Measures raw ZeroMQ request/reply between this process and a child it forks
// (a DEALER here, a ROUTER there), with the same sizes, window and durations
// as the KV benchmark: the small round trip (if options.small) and each dense
// size, pushed and pulled. Throws Error if the child cannot be started.
std::vector<BenchCase> RunZmqBench(const KVBenchOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_ZMQ_BENCH_H_
