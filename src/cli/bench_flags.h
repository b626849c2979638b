// The command line's benchmark flags (bench_flags.cc): the cases `keel bench
// kv|zmq` measure and the kv_bench job runs, and each `keel bench`'s options
// (bench/bench_options.h) read from these and the other flag families. Every
// user of these flags includes this header; the flags are defined nowhere
// else.
#ifndef KEEL_CLI_BENCH_FLAGS_H_
#define KEEL_CLI_BENCH_FLAGS_H_

#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/kv_bench_job.h"
#include "flags/flag_group.h"

DECLARE_string(bench_out);
DECLARE_string(mode);
DECLARE_string(dense_sizes);
DECLARE_string(sparse_widths);
DECLARE_uint64(sparse_keys);
DECLARE_uint64(key_space);
DECLARE_uint64(memory_keys);
DECLARE_double(bench_seconds);
DECLARE_int32(inflight);
DECLARE_bool(small);
DECLARE_bool(zmq_baseline);
DECLARE_bool(curve);
DECLARE_string(workload);
DECLARE_uint64(checkpoint_keys);
DECLARE_double(changed_share);
DECLARE_int32(rounds);
DECLARE_uint64(distinct_keys);
DECLARE_uint64(reshard_keys);
DECLARE_int32(reshard_width);
DECLARE_int32(nodes);
DECLARE_string(transport);
DECLARE_bool(view_deltas);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> BenchFlagGroups();

// The benchmark cases the flags describe. Throws Error naming a bad flag.
KVBenchOptions BenchFlags();
// --memory_keys, checked. Throws Error if out of range.
uint64_t MemoryKeysFromFlags();
// --sparse_widths, each in 1..4096. Throws Error naming a bad one.
std::vector<int> SparseWidthsFromFlags();

// Each benchmark's options from the flags, checked. Each throws Error naming
// a bad flag. What is not a flag's value is left for the command to fill:
// BenchKVOptions::run_cluster, BenchTrainOptions::keel.
BenchKVOptions BenchKVOptionsFromFlags();
BenchZmqOptions BenchZmqOptionsFromFlags();
// Reads the first bytes of --data to settle its format (ResolveDataFormat).
BenchParseOptions BenchParseOptionsFromFlags();
BenchBackendOptions BenchBackendOptionsFromFlags();
// `args`: the command line after `keel bench train`.
BenchTrainOptions BenchTrainOptionsFromFlags(const std::vector<std::string>& args);
BenchCheckpointOptions BenchCheckpointOptionsFromFlags();
BenchAdmissionOptions BenchAdmissionOptionsFromFlags();
BenchReshardOptions BenchReshardOptionsFromFlags();
BenchControlOptions BenchControlOptionsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_BENCH_FLAGS_H_
