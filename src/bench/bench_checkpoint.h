// `keel bench checkpoint`: the bytes and seconds of full and delta
// checkpoints of one server's table (see bench_checkpoint.cc).
#ifndef KEEL_BENCH_BENCH_CHECKPOINT_H_
#define KEEL_BENCH_BENCH_CHECKPOINT_H_

#include "bench/bench_options.h"
#include "server/shard.h"

namespace keel {

// A server's table as the table benchmarks fill it: Adagrad, one weight.
ServerTable AdagradBenchTable();

// Runs the benchmark `options` describe (checkpoint_uri: where to write, a
// temporary folder if none). Throws Error naming a failed write.
int BenchCheckpoint(const BenchCheckpointOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_CHECKPOINT_H_
