// What each `keel bench` measures, as plain values: one struct per
// benchmark, each field named after the flag it comes from (the command line
// fills them, cli/bench_flags.h, with its checks done: a benchmark takes its
// options as valid). What a benchmark needs from the command line beyond
// values (starting a local cluster, resolving the data's format) comes as a
// function the command line passes in, so nothing here depends on it.
#ifndef KEEL_BENCH_BENCH_OPTIONS_H_
#define KEEL_BENCH_BENCH_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/kv_bench_job.h"
#include "io/readers.h"
#include "worker/hyperparameters.h"

namespace keel {

// The figures' significant digits in every benchmark's JSON lines.
constexpr int kFigureDigits = 6;

// A local cluster as `keel bench kv` runs it: a scheduler, `servers` servers
// and `workers` workers as child processes on loopback, each given
// `role_flags`; `timeout_s` 0 for none.
struct BenchCluster {
  int servers = 1;
  int workers = 1;
  double timeout_s = 0;
  std::vector<std::string> role_flags;
};
// Starts `cluster`, forwards its logs and waits; 0 when every role succeeded.
using BenchClusterRunner = std::function<int(const BenchCluster&)>;

// `keel bench kv --mode=memory` (bench/bench_memory.h).
struct BenchMemoryOptions {
  uint64_t memory_keys = 1000000;
  std::vector<int> sparse_widths = {1, 9};
};

// `keel bench kv`: push/pull on a local cluster, or with --mode=memory a
// server table's bytes per key.
struct BenchKVOptions {
  std::string mode = "dense";  // dense, sparse, all or memory
  BenchMemoryOptions memory;   // for --mode=memory; the rest is for the others
  KVBenchOptions cases;        // the cases the flags below describe, checked
  bool zmq_baseline = true;
  bool curve = false;
  // The flags the cluster's workers are given as they were written
  // (--job=kv_bench reads them again).
  std::string dense_sizes = "64KiB,1MiB,16MiB";
  std::string sparse_widths = "1,9";
  uint64_t sparse_keys = 100000;
  uint64_t key_space = 10000000;
  double bench_seconds = 2;
  int inflight = 2;
  bool small = true;
  std::string workload = "keel";
  bool key_cache = true;  // the workers' --key_cache
  // The cluster.
  int servers = 1;
  int workers = 1;
  double timeout = 0;
  int replication = 0;
  int key_ranges = 0;
  int server_apply_threads = 1;  // the servers' --server_apply_threads
  std::string secret_file;       // "" for none (or a new one with `curve`)
  BenchClusterRunner run_cluster;
};

// `keel bench zmq`: raw ZeroMQ at the KV benchmark's sizes.
struct BenchZmqOptions {
  KVBenchOptions cases;  // the cases, checked
  // Said in the JSON line as `keel bench kv` says them.
  int servers = 1;
  int workers = 1;
  int inflight = 2;
  double bench_seconds = 2;
};

// `keel bench parse`: the readers alone over `data`.
struct BenchParseOptions {
  std::string data;
  ReaderOptions reader;  // the format settled, the labels' rule set
};

// `keel bench backend`: a compute backend alone over `data`.
struct BenchBackendOptions {
  std::string data;
  std::string job;
  std::string device = "cpu";
  int threads = 1;
  int epochs = 15;  // timed passes (at least one)
  Hyperparameters hyperparameters;
  // The reader options for `data` (its format settled by its first bytes);
  // throws Error for a bad format. Called once the backend is made.
  std::function<ReaderOptions()> reader;
};

// `keel bench train`: a training job launched as a user launches it.
struct BenchTrainOptions {
  std::string data;        // a datagen folder (train/, validation/) or the training data
  std::string validation;  // --validation as given ("" if none)
  std::string model_dir;   // "" for a temporary folder
  int workers = 1;         // the launch's workers
  std::string keel;        // the keel executable, to run `keel launch` with
  // The command line after `keel bench train`: given to `keel launch`,
  // without --data.
  std::vector<std::string> args;
};

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

// `keel bench control`: the scheduler under N simulated members.
struct BenchControlOptions {
  int nodes = 1000;
  int key_ranges = 10000;
  // "tcp" (real sockets on loopback), "memory" (MemoryNetwork) or "auto"
  // (tcp where the descriptor limit allows).
  std::string transport = "auto";
  // Over tcp, processes for the members apart from the scheduler's (each then
  // needs only its end's descriptors); -1: none while both ends fit in one
  // process, else as many as the members' descriptors need.
  int member_processes = -1;
  double heartbeat_interval_s = 1;  // Node's default
  bool view_deltas = true;          // SchedulerOptions::view_deltas (false: whole views)
  int heartbeat_relay_from = 256;   // SchedulerOptions::heartbeat_relay_from (0: never)
  double steady_seconds = 5;        // the steady-state window
  double timeout_s = 600;           // each phase's bound
};

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_OPTIONS_H_
