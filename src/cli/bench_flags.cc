#include "cli/bench_flags.h"

#include <algorithm>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/job_flags.h"
#include "cli/key_cache_flags.h"
#include "cli/launch_flags.h"
#include "flags/flag_rules.h"
#include "kv/keys.h"
#include "worker/auto_minibatch.h"
#include "worker/hyperparameters.h"

DEFINE_string(bench_out, "", "kv_bench: folder for each worker's measurements");
DEFINE_string(mode, "dense",
              "bench kv: dense, sparse or all (push/pull on a local cluster), or memory (a "
              "server table's bytes per key for each optimizer and --sparse_widths)");
DEFINE_string(dense_sizes, "64KiB,1MiB,16MiB", "bench: bytes per dense request");
DEFINE_string(sparse_widths, "1,9", "bench kv: row widths of the sparse cases");
DEFINE_uint64(sparse_keys, 100000, "bench kv: keys per sparse request");
DEFINE_uint64(key_space, 10000000, "bench kv: sparse keys are drawn from this many features");
DEFINE_uint64(memory_keys, 1000000,
              "bench kv --mode=memory: distinct keys pushed into each optimizer's table");
DEFINE_double(bench_seconds, 2, "bench: seconds per case and direction");
DEFINE_int32(inflight, 2, "bench: requests in flight per worker (throughput cases)");
DEFINE_bool(small, true, "bench: include the small-request round trip");
DEFINE_bool(zmq_baseline, true, "bench kv: measure raw ZeroMQ at the same sizes first");
DEFINE_string(workload, "keel",
              "bench kv: keel (sparse keys drawn at random from --key_space, mixed, four key "
              "sets in turn) or pslite (ps-lite's own benchmark: --sparse_keys keys evenly "
              "spaced over the key space, the same keys every request, the tables a plain sum; "
              "raw ZeroMQ measured at the same request size)");
DEFINE_uint64(checkpoint_keys, 10000000, "bench checkpoint: rows of the table");
DEFINE_double(changed_share, 0.01,
              "bench checkpoint: share of the keys pushed between two checkpoints");
DEFINE_int32(rounds, 5, "bench checkpoint: checkpoints measured each way");
DEFINE_uint64(distinct_keys, 100000000, "bench admission: distinct keys in the stream");
DEFINE_uint64(reshard_keys, 4000000, "bench reshard: rows of the table whose ranges move");
DEFINE_int32(reshard_width, 8, "bench reshard: floats a row");
DEFINE_int32(nodes, 1000,
             "bench control: simulated members (a tenth servers, the rest workers) registering "
             "with the scheduler at once, heartbeating at --heartbeat_interval, one worker "
             "killed; --key_ranges (default 10000) key ranges, a steady window of "
             "--bench_seconds (at least 5)");
DEFINE_string(transport, "auto",
              "bench control: tcp (the members on loopback sockets, as far as the descriptor "
              "limit allows), memory (an in-process transport, for more members), or auto "
              "(tcp where it fits)");
DEFINE_int32(member_processes, -1,
             "bench control over tcp: processes for the simulated members apart from the "
             "scheduler's, so that each process's descriptors hold only its ends (-1: as many as "
             "the members need, none while they fit beside the scheduler)");
DEFINE_bool(view_deltas, true,
            "bench control: the scheduler sends each view change as a delta from the view "
            "before (false: the whole view to every member, for comparison)");
DEFINE_bool(curve, false,
            "bench kv: run the cluster with a new cluster secret, every connection encrypted "
            "(CURVE); --secret_file=FILE does the same with that secret");

namespace keel {

std::vector<FlagGroup> BenchFlagGroups() {
  return {{"benchmark",
           {"bench_out",    "mode",          "dense_sizes",     "sparse_widths",   "sparse_keys",
            "key_space",    "memory_keys",   "bench_seconds",   "inflight",        "small",
            "zmq_baseline", "workload",      "curve",           "checkpoint_keys", "changed_share",
            "rounds",       "distinct_keys", "reshard_keys",    "reshard_width",   "nodes",
            "transport",    "view_deltas",   "member_processes"}}};
}
namespace {

// The comma-separated sizes in `text`, each in 1..`limit`.
std::vector<uint64_t> ParseSizes(const std::string& text, const std::string& flag, uint64_t limit) {
  std::vector<uint64_t> sizes;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    size_t end = 0;
    uint64_t value = 0;
    try {
      value = std::stoull(item, &end);
    } catch (const std::exception&) {
      throw MakeError("--", flag, ": '", item, "' is not a size (like 4, 64KiB, 1MiB)");
    }
    const std::string unit = item.substr(end);
    int shift = 0;
    if (unit == "KiB" || unit == "K") {
      shift = 10;
    } else if (unit == "MiB" || unit == "M") {
      shift = 20;
    } else if (!unit.empty() && unit != "B") {
      throw MakeError("--", flag, ": unknown unit '", unit, "' in '", item, "'");
    }
    if (value == 0) throw MakeError("--", flag, ": '", item, "' is zero");
    if (value > (limit >> shift)) throw MakeError("--", flag, ": '", item, "' is above ", limit);
    sizes.push_back(value << shift);
  }
  return sizes;
}

}  // namespace

std::vector<int> SparseWidthsFromFlags() {
  std::vector<int> widths;
  for (uint64_t width : ParseSizes(FLAGS_sparse_widths, "sparse_widths", 4096)) {
    widths.push_back(static_cast<int>(width));
  }
  return widths;
}

uint64_t MemoryKeysFromFlags() {
  RequireInRange("memory_keys", FLAGS_memory_keys, uint64_t{1}, uint64_t{1} << 32);
  return FLAGS_memory_keys;
}

KVBenchOptions BenchFlags() {
  KVBenchOptions options;
  // memory is `keel bench kv`'s alone (BenchTableMemory): no cluster runs it.
  if (FLAGS_mode != "dense" && FLAGS_mode != "sparse" && FLAGS_mode != "all") {
    throw MakeError("--mode '", FLAGS_mode, "' is not dense, sparse or all");
  }
  if (FLAGS_mode != "sparse")
    options.dense_bytes = ParseSizes(FLAGS_dense_sizes, "dense_sizes", 1ull << 30);
  if (FLAGS_mode != "dense") options.sparse_widths = SparseWidthsFromFlags();
  RequireInRange("sparse_keys", FLAGS_sparse_keys, uint64_t{1}, uint64_t{100000000});
  options.sparse_keys = FLAGS_sparse_keys;
  options.key_space = FLAGS_key_space;
  if (options.key_space < options.sparse_keys) {
    throw MakeError("--key_space (", options.key_space, ") must be at least --sparse_keys (",
                    options.sparse_keys, ")");
  }
  RequirePositive("bench_seconds", FLAGS_bench_seconds, kMaxSeconds);
  RequireInRange("inflight", FLAGS_inflight, 1, 1024);
  options.seconds_per_case = FLAGS_bench_seconds;
  options.inflight = FLAGS_inflight;
  options.small = FLAGS_small && FLAGS_mode != "sparse";
  if (FLAGS_workload != "keel" && FLAGS_workload != "pslite") {
    throw MakeError("--workload '", FLAGS_workload, "' is not keel or pslite");
  }
  options.pslite_keys = FLAGS_workload == "pslite";
  return options;
}

BenchKVOptions BenchKVOptionsFromFlags() {
  BenchKVOptions options;
  options.mode = FLAGS_mode;
  if (FLAGS_mode == "memory") {
    options.memory.memory_keys = MemoryKeysFromFlags();
    options.memory.sparse_widths = SparseWidthsFromFlags();
    return options;
  }
  if (FLAGS_mode != "dense" && FLAGS_mode != "sparse" && FLAGS_mode != "all") {
    throw MakeError("--mode '", FLAGS_mode, "' is not dense, sparse, all or memory");
  }
  options.cases = BenchFlags();
  options.zmq_baseline = FLAGS_zmq_baseline;
  options.curve = FLAGS_curve;
  options.dense_sizes = FLAGS_dense_sizes;
  options.sparse_widths = FLAGS_sparse_widths;
  options.sparse_keys = FLAGS_sparse_keys;
  options.key_space = FLAGS_key_space;
  options.bench_seconds = FLAGS_bench_seconds;
  options.inflight = FLAGS_inflight;
  options.small = FLAGS_small;
  options.workload = FLAGS_workload;
  options.key_cache = FLAGS_key_cache;
  options.servers = FLAGS_servers;
  options.workers = FLAGS_workers;
  options.timeout = FLAGS_timeout;
  options.replication = FLAGS_replication;
  options.key_ranges = FLAGS_key_ranges;
  options.server_apply_threads = ServerApplyThreadsFromFlags();
  options.secret_file = FLAGS_secret_file;
  return options;
}

BenchZmqOptions BenchZmqOptionsFromFlags() {
  BenchZmqOptions options;
  options.cases = BenchFlags();
  options.servers = FLAGS_servers;
  options.workers = FLAGS_workers;
  options.inflight = FLAGS_inflight;
  options.bench_seconds = FLAGS_bench_seconds;
  return options;
}

BenchParseOptions BenchParseOptionsFromFlags() {
  if (FLAGS_data.empty()) throw MakeError("keel bench parse needs --data FILE_OR_FOLDER");
  // The labels checked as training checks them (--predictor_type, --num_classes).
  Hyperparameters labels;
  labels.predictor_type = ParsePredictorType(FLAGS_predictor_type);
  labels.num_classes = FLAGS_num_classes;
  ReaderOptions reader = WithLabelRule(ReaderOptions(), labels);
  reader.format = ReaderOptionsFromFlags().format;
  reader.zero_based = FLAGS_libsvm_zero_based;
  BenchParseOptions options;
  options.data = FLAGS_data;
  options.reader = ResolveDataFormat(FLAGS_data, reader, true);
  return options;
}

BenchBackendOptions BenchBackendOptionsFromFlags() {
  if (FLAGS_data.empty() || FLAGS_job.empty()) {
    throw MakeError("keel bench backend needs --data FILE_OR_FOLDER and --job");
  }
  BenchBackendOptions options;
  options.data = FLAGS_data;
  options.job = FLAGS_job;
  options.device = FLAGS_device;
  options.threads = FLAGS_threads;
  options.epochs = FLAGS_epochs;
  options.hyperparameters = HyperparametersFromFlags();
  // The benchmarks' data is large: auto is SageMaker's 1,000 there.
  if (options.hyperparameters.mini_batch_size == 0) {
    options.hyperparameters.mini_batch_size = kAutoMinibatchMost;
  }
  options.reader = [] {
    ReaderOptions reader;
    reader.format = ReaderOptionsFromFlags().format;
    reader.zero_based = FLAGS_libsvm_zero_based;
    return ResolveDataFormat(FLAGS_data, reader, true);
  };
  return options;
}

BenchTrainOptions BenchTrainOptionsFromFlags(const std::vector<std::string>& args) {
  if (FLAGS_data.empty()) {
    throw MakeError("keel bench train needs --data DIR (or the training file)");
  }
  if (!FLAGS_train.empty()) {
    throw MakeError("keel bench train: give the data as --data, not --train");
  }
  BenchTrainOptions options;
  options.data = FLAGS_data;
  options.validation = FLAGS_validation;
  options.model_dir = FLAGS_model_dir;
  options.workers = FLAGS_workers;
  options.args = args;
  return options;
}

BenchCheckpointOptions BenchCheckpointOptionsFromFlags() {
  RequireInRange("checkpoint_keys", FLAGS_checkpoint_keys, uint64_t{1000}, uint64_t{1} << 31);
  if (!(FLAGS_changed_share > 0 && FLAGS_changed_share <= 1)) {
    throw MakeError("--changed_share must be in (0, 1], got ", FLAGS_changed_share);
  }
  RequireInRange("rounds", FLAGS_rounds, 1, 1000);
  BenchCheckpointOptions options;
  options.checkpoint_keys = FLAGS_checkpoint_keys;
  options.changed_share = FLAGS_changed_share;
  options.rounds = FLAGS_rounds;
  options.checkpoint_uri = FLAGS_checkpoint_uri;
  return options;
}

BenchAdmissionOptions BenchAdmissionOptionsFromFlags() {
  RequireInRange("distinct_keys", FLAGS_distinct_keys, uint64_t{1000}, uint64_t{1} << 32);
  BenchAdmissionOptions options;
  options.distinct_keys = FLAGS_distinct_keys;
  return options;
}

BenchControlOptions BenchControlOptionsFromFlags() {
  RequireInRange("nodes", FLAGS_nodes, 2, 1000000);
  if (FLAGS_transport != "tcp" && FLAGS_transport != "memory" && FLAGS_transport != "auto") {
    throw MakeError("--transport '", FLAGS_transport, "': expected tcp, memory or auto");
  }
  RequirePositive("heartbeat_interval", FLAGS_heartbeat_interval, 3600.0);
  BenchControlOptions options;
  options.nodes = FLAGS_nodes;
  options.transport = FLAGS_transport;
  options.key_ranges = FLAGS_key_ranges > 0 ? FLAGS_key_ranges : 10000;
  RequireInRange("key_ranges", options.key_ranges, 1, kMaxKeyRanges);
  options.heartbeat_interval_s = FLAGS_heartbeat_interval;
  options.steady_seconds = std::max(5.0, FLAGS_bench_seconds);
  options.view_deltas = FLAGS_view_deltas;
  RequireInRange("member_processes", FLAGS_member_processes, -1, 64);
  options.member_processes = FLAGS_member_processes;
  RequireInRange("heartbeat_relay_from", FLAGS_heartbeat_relay_from, 0, 1000000);
  options.heartbeat_relay_from = FLAGS_heartbeat_relay_from;
  return options;
}

BenchReshardOptions BenchReshardOptionsFromFlags() {
  RequireInRange<uint64_t>("reshard_keys", FLAGS_reshard_keys, 1000, uint64_t{1} << 28);
  RequireInRange("reshard_width", FLAGS_reshard_width, 1, 256);
  RequireInRange<uint64_t>("sparse_keys", FLAGS_sparse_keys, 1, 10000000);
  const int key_ranges = FLAGS_key_ranges > 0 ? FLAGS_key_ranges : 8;
  RequireInRange("key_ranges", key_ranges, 3, kMaxKeyRanges);
  BenchReshardOptions options;
  options.reshard_keys = FLAGS_reshard_keys;
  options.reshard_width = FLAGS_reshard_width;
  options.sparse_keys = FLAGS_sparse_keys;
  options.key_ranges = key_ranges;
  return options;
}

}  // namespace keel
