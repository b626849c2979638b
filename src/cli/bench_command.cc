// `keel bench WHAT`: each benchmark's options from the flags
// (cli/bench_flags.h), with what the command line supplies beside them (the
// local cluster's launcher, the keel executable), handed to src/bench.
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/bench.h"
#include "bench/bench_admission.h"
#include "bench/bench_checkpoint.h"
#include "bench/bench_control.h"
#include "bench/bench_reshard.h"
#include "bench/bench_train.h"
#include "cli/bench_flags.h"
#include "cli/commands.h"
#include "cli/launch_flags.h"

namespace keel {
namespace {

int RunBenchCluster(const BenchCluster& bench) {
  LocalCluster cluster;
  cluster.servers = bench.servers;
  cluster.workers = bench.workers;
  cluster.timeout_s = bench.timeout_s;
  cluster.role_flags = bench.role_flags;
  cluster.preemption_grace_s = LaunchSettingsFromFlags().preemption_grace_s;
  return RunLocalCluster(cluster);
}

}  // namespace

int RunBench(const std::string& what, const std::vector<std::string>& args) {
  if (what == "train") {
    BenchTrainOptions options = BenchTrainOptionsFromFlags(args);
    options.keel = SelfPath();
    return BenchTrain(options);
  }
  if (what == "backend") return BenchBackend(BenchBackendOptionsFromFlags());
  if (what == "kv") {
    BenchKVOptions options = BenchKVOptionsFromFlags();
    options.run_cluster = RunBenchCluster;
    return BenchKV(options);
  }
  if (what == "zmq") return BenchZmq(BenchZmqOptionsFromFlags());
  if (what == "parse") return BenchParse(BenchParseOptionsFromFlags());
  if (what == "checkpoint") return BenchCheckpoint(BenchCheckpointOptionsFromFlags());
  if (what == "admission") return BenchAdmission(BenchAdmissionOptionsFromFlags());
  if (what == "reshard") return BenchReshard(BenchReshardOptionsFromFlags());
  if (what == "control") return BenchControl(BenchControlOptionsFromFlags());
  throw MakeError("unknown benchmark '", what,
                  "': expected kv, zmq, parse, backend, train, checkpoint, admission, reshard or "
                  "control");
}

}  // namespace keel
