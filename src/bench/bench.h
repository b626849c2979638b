// `keel bench kv`: push/pull throughput on a local cluster, beside
// `keel bench zmq`: raw ZeroMQ over loopback at the same message sizes;
// `keel bench parse`: the readers alone; `keel bench backend`: a compute
// backend alone. The other benchmarks have a header each (bench_train.h,
// bench_checkpoint.h, bench_admission.h, bench_reshard.h, bench_memory.h).
// Each prints a table and a JSON line on standard output and returns the
// process's exit status; each throws Error if it cannot run.
#ifndef KEEL_BENCH_BENCH_H_
#define KEEL_BENCH_BENCH_H_

#include "bench/bench_options.h"

namespace keel {

// Starts the local cluster (options.run_cluster) with the kv_bench job on
// every worker and sums the workers' cases, beside raw ZeroMQ at the same
// sizes (options.zmq_baseline); with mode "memory", BenchTableMemory.
int BenchKV(const BenchKVOptions& options);

// Raw ZeroMQ request/reply at the cases' sizes (the dense ones 64KiB, 1MiB
// and 16MiB if none is given).
int BenchZmq(const BenchZmqOptions& options);

// Reads options.data with the data readers alone (no training), one thread,
// three times; prints the median.
int BenchParse(const BenchParseOptions& options);

// The compute backend alone: options.data read once into prepared
// minibatches with random weights, then options.epochs timed passes of
// Gradients over all of them (no servers, no network). Prints the median
// pass.
int BenchBackend(const BenchBackendOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_H_
