// The `keel` command line: subcommands and their flags.
#ifndef KEEL_CLI_COMMANDS_H_
#define KEEL_CLI_COMMANDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kv/kv_worker.h"
#include "kv/node.h"
#include "server/kv_server.h"
#include "worker/hyperparameters.h"
#include "worker/kv_bench_job.h"
#include "worker/trainer.h"

namespace keel {

// Runs `keel <command> [flags]`; returns the process exit code.
int RunCommandLine(int argc, char** argv);

// A local cluster: a scheduler (unless `scheduler` names an external one),
// servers and workers as child processes on loopback.
struct LocalCluster {
  int servers = 1;
  int workers = 1;
  std::string scheduler;                // "host:port" of an external scheduler, or empty
  std::vector<std::string> role_flags;  // forwarded to every role
  double timeout_s = 0;                 // 0: none
  std::string faults;                   // fault schedule (cli/fault_schedule.h), or empty
  std::string event_log;                // where fault and process events go, or empty
  uint64_t fault_seed = 1;              // seeds the schedule's random choices
};

// Starts the cluster, forwards its logs and waits; returns 0 when every role
// succeeded. See ProcessGroup::Wait for the other codes.
int RunLocalCluster(const LocalCluster& cluster);

// The benchmark cases the command line's flags describe. Throws Error on bad flags.
KVBenchOptions BenchFlags();

// `keel bench kv` and `keel bench zmq`.
int RunBench(const std::string& what);

// The training jobs (job_commands.cc).
bool IsTrainingJob(const std::string& job);
// The job's hyperparameters from the flags. Throws Error naming a bad flag.
Hyperparameters HyperparametersFromFlags();
// The servers' tables for --job (none for jobs that are not training jobs).
std::map<uint32_t, TableSpec> JobTablesFromFlags();
// Checks --device and --threads: the device exists and this build can use it.
// Throws Error saying why not.
void CheckComputeFlags();
// --staleness as a StalenessGate value. Throws Error if malformed.
int64_t StalenessFromFlags();
// The worker's data and training options from the flags. Throws Error if any
// is wrong (checks only: no file is opened).
TrainerOptions TrainerOptionsFromFlags();
// Runs the training job the flags describe on a started worker node.
int RunTraining(Node* node, KVWorker* client);
int RunPredict();
int RunDatagen();
// `keel checkpoint ls|show|verify URI` (checkpoint_command.cc).
int RunCheckpointCommand(const std::string& what, const std::string& uri);

// "keel 0.1.0 (cuda: compiled|not compiled ...)".
std::string VersionText();

}  // namespace keel

#endif  // KEEL_CLI_COMMANDS_H_
