// `keel bench reshard`: pushes' stalls while key ranges move to a joining
// server and off a drained one, with and without pre-copy (see
// bench_reshard.cc).
#ifndef KEEL_BENCH_BENCH_RESHARD_H_
#define KEEL_BENCH_BENCH_RESHARD_H_

namespace keel {

// Runs the benchmark (--reshard_keys, --reshard_width, --sparse_keys,
// --key_ranges). Throws Error naming a bad flag.
int BenchReshard();

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_RESHARD_H_
