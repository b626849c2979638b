// The `keel` command line: its commands, one function each. Their flags are
// in cli/cluster_flags.h, cli/job_flags.h, cli/launch_flags.h,
// cli/bench_flags.h and cli/fault_flags.h.
#ifndef KEEL_CLI_COMMANDS_H_
#define KEEL_CLI_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/exit_status.h"
#include "bench/kv_bench_job.h"
#include "cli/cluster_flags.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "launch/local_cluster.h"
#include "worker/scheduler_link.h"
#include "worker/training_counters.h"

namespace keel {

// Runs `keel <command> [flags]`; returns the process exit code (commands.cc).
int RunCommandLine(int argc, char** argv);

// The roles (role_commands.cc). Each checks its flags first (and with
// --check_flags stops there), then runs until the job ends; returns the exit
// code, or throws Error. `argv` is the whole command line: a node dropped from
// the cluster starts over with it.
int RunScheduler();
int RunServer(const std::vector<std::string>& argv);
int RunWorker(const std::vector<std::string>& argv);

// `keel launch` with the arguments after the command (launch_command.cc).
int RunLaunch(const std::vector<std::string>& args);
// Checks every role's flags as each role would, for a cluster of `size`,
// before anything starts (launch_command.cc). Throws Error naming a bad one.
void CheckLaunchFlags(const ClusterSize& size);

// `keel train`: this host's part of a job under SageMaker's training
// contract (train_command.cc). Writes a failure's reason to the contract's
// output/failure as well as throwing it.
int RunTrain();


// `keel report MODEL_DIR [--out FILE]` (report_command.cc): writes the job's
// HTML report to `out` (a local file; "" for the default, DefaultReportPath)
// and prints where. Throws Error naming the file and line of bad data.
int RunReport(const std::string& model_dir, const std::string& out);
// Writes the report and returns where it went: `out`, or by default
// <model_dir>/report.html (through Storage), ./report.html for s3://.
std::string WriteReport(const std::string& model_dir, const std::string& out);

// `keel bench WHAT` (bench_command.cc: the options from the flags, the
// benchmarks in src/bench). `args`: the command line after `keel bench WHAT`.
int RunBench(const std::string& what, const std::vector<std::string>& args);

// The training jobs (job_commands.cc).
// Runs the training job the flags describe on a started worker node (and
// its link to the scheduler), keeping its running figures in `counters` (if
// not null) for metrics.
int RunTraining(Node* node, SchedulerLink* scheduler, KVWorker* client,
                TrainingCounters* counters = nullptr);
// `keel predict` and `keel datagen`.
int RunPredict();
// `keel serve` (serve_command.cc).
int RunServe();
int RunDatagen();

// `keel keygen --out FILE`: a new cluster secret, mode 0600 (keygen_command.cc).
int RunKeygen();
// `keel admin drain`: asks a running job's scheduler to drain a server.
int RunAdmin(const std::string& what);

// `keel checkpoint ls|show|verify URI` (checkpoint_command.cc).
int RunCheckpointCommand(const std::string& what, const std::string& uri);

// "keel VERSION", "commit: HASH" and "cuda: compiled|not compiled (...)", a
// line each (build_info.cc).
std::string VersionText();

}  // namespace keel

#endif  // KEEL_CLI_COMMANDS_H_
