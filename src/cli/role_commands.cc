// The roles on the command line: `keel scheduler`, `keel server` and
// `keel worker`, each checking its flags before it starts.
#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "bench/kv_bench_job.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/exact_sum_flags.h"
#include "cli/fault_flags.h"
#include "cli/job_flags.h"
#include "cli/key_cache_flags.h"
#include "cli/metrics_flags.h"
#include "cli/role_flags.h"
#include "faults/preemption_notice.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "launch/launcher.h"
#include "metrics/metrics_registry.h"
#include "metrics/role_metrics.h"
#include "metrics/role_probes.h"
#include "metrics/status_page.h"
#include "scheduler/progress_printer.h"
#include "scheduler/scheduler.h"
#include "server/held_copy.h"
#include "server/kv_server.h"
#include "worker/scheduler_link.h"

namespace keel {
namespace {

// A worker the scheduler dropped from the view (it was paused or cut off
// longer than the heartbeat timeout) starts over as a new process with the
// same flags: it registers again, takes its rank back if it is still free,
// and goes on from its rank's last progress report. Its old requests are
// refused by the servers (they are not from a member), so nothing stale is
// applied.
[[noreturn]] void RejoinAsNewProcess(const std::vector<std::string>& argv) {
  const char* previous = getenv("KEEL_REJOINS");
  const int rejoins = previous ? std::atoi(previous) + 1 : 1;
  setenv("KEEL_REJOINS", std::to_string(rejoins).c_str(), 1);
  std::vector<char*> args = ExecArguments(argv);
  const std::string self = SelfPath();
  execv(self.c_str(), args.data());
  throw MakeError("cannot start ", self, " again: ", strerror(errno));
}

// A server starts over as its rank's replacement: with --rank (the rank whose
// ranges it held), without --join (one that joined the running job has a
// rank now).
std::vector<std::string> AsReplacement(const std::vector<std::string>& argv, int rank) {
  std::vector<std::string> again;
  for (const std::string& arg : argv) {
    if (arg != "--join" && arg != "-join" && arg.rfind("--join=", 0) != 0) again.push_back(arg);
  }
  again.push_back("--rank=" + std::to_string(rank));
  return again;
}

// Where a server that starts over finds the copy of its ranges it kept.
constexpr char kHeldCopyEnv[] = "KEEL_SERVER_COPY";

// Removes a folder when it goes out of scope (not when the process is
// replaced by exec: the next process uses the folder).
class FolderRemover {
 public:
  explicit FolderRemover(std::string folder) : folder_(std::move(folder)) {}
  ~FolderRemover() {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }
  FolderRemover(const FolderRemover&) = delete;
  FolderRemover& operator=(const FolderRemover&) = delete;

 private:
  const std::string folder_;
};

// Writes the copy of `server`'s ranges into `folder` for the process that
// replaces this one (kHeldCopyEnv); a copy that cannot be written is logged
// and the server starts over without one.
void KeepCopyForRejoin(const KVServer& server, const std::string& folder) {
  try {
    SaveHeldCopy(server.KeepCopy(folder), folder);
    setenv(kHeldCopyEnv, folder.c_str(), 1);
  } catch (const std::exception& e) {
    LOG(WARNING) << "cannot keep a copy of this server's key ranges: " << e.what();
    unsetenv(kHeldCopyEnv);
  }
}

// Whether a node the scheduler dropped from the view starts over as a new
// process (at most 3 times in a row, so a node that keeps losing its place
// gives up with its error instead).
bool ShouldStartOver(const Node& node) {
  const char* rejoins = getenv("KEEL_REJOINS");
  return node.removed() && (!rejoins || std::atoi(rejoins) < 3);
}

// Runs the worker's job; returns its error (any std::exception's message), or
// "" if it succeeded.
std::string RunWorkerJob(const RoleSettings& settings, Node* node, SchedulerLink* scheduler,
                         KVWorker* client, const KVBenchOptions& bench,
                         TrainingCounters* counters) {
  try {
    if (IsTrainingJob(settings.job)) {
      RunTraining(node, scheduler, client, counters);
    } else if (settings.job == "exact_sum") {
      // On the launch terminal.
      RunExactSum(node, scheduler, client, ExactSumOptionsFromFlags(), &std::cerr);
    } else {
      const auto cases = RunKVBench(node, client, bench);
      WriteFileAtomically(settings.bench_out + "/worker-" + std::to_string(node->rank()) + ".tsv",
                          FormatBenchCases(cases));
    }
  } catch (const std::exception& e) {  // keel::Error, and bad_alloc too: the report goes out
    if (node->preempting()) {
      LOG(WARNING) << "worker " << node->rank() << ": " << e.what();
    } else {
      LOG(ERROR) << "worker " << node->rank() << ": " << e.what();
    }
    return e.what();
  }
  return "";
}

// After a failed job: if the failure came from leaving the view (its requests
// refused), the scheduler says so at the next heartbeat, and the worker
// starts over as a new process.
void StartOverIfRemoved(Node* node, const std::vector<std::string>& argv,
                        double heartbeat_interval_s) {
  const double deadline = MonotonicSeconds() + 3 * heartbeat_interval_s + 1;
  while (!node->removed() && MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ShouldStartOver(*node)) {
    LOG(WARNING) << "worker " << node->rank() << " left the cluster; it joins again";
    node->Stop();
    RejoinAsNewProcess(argv);
  }
}

// After a worker's job stopped with an error: if the job is being preempted
// (this worker asked, was told to stop, or the scheduler ended the job),
// waits for the scheduler's SHUTDOWN (within the grace) and returns whether
// it said the job was preempted, logging the checkpoint it named.
bool EndedByPreemption(Node* node, double preemption_grace_s) {
  if (!node->preempting() && !node->shutdown_requested()) return false;
  node->WaitForShutdown(preemption_grace_s + 10);
  std::string checkpoint, uri;
  if (!node->preempted(&checkpoint, &uri)) return false;
  LOG(WARNING) << "worker " << node->rank() << ": "
               << PreemptedLine(checkpoint, uri, "no checkpoint committed");
  return true;
}

}  // namespace

int RunScheduler() {
  InstallPreemptionHandlers();  // first: a SIGTERM from now on is a preemption notice
  SchedulerOptions options = SchedulerOptionsFromFlags();
  const RoleSettings settings = RoleSettingsFromFlags();
  CheckMetricsFlags();
  if (FlagsCheckedOnly()) return 0;
  Scheduler scheduler(options);
  MetricsRegistry metrics;
  AddSchedulerMetrics(&scheduler, &metrics);
  scheduler.Start();
  const auto endpoint = StartMetricsEndpoint(
      "scheduler", &metrics, SchedulerLive(&scheduler), SchedulerReady(&scheduler),
      [&scheduler](HttpServer* http) { RouteStatusPage(&scheduler, http); });
  if (endpoint) LOG(INFO) << "scheduler: status page on http://" << endpoint->address() << "/";
  if (settings.port_file == "-") {
    std::cout << "scheduler port " << scheduler.port() << std::endl;
  } else if (!settings.port_file.empty()) {
    WriteFileAtomically(settings.port_file, std::to_string(scheduler.port()) + "\n");
  }
  std::optional<ProgressPrinter> printer;
  if (settings.progress_records) printer.emplace(&scheduler.progress(), &std::cout);
  PreemptionWatch watch([&scheduler] { scheduler.Preempt("a SIGTERM to the scheduler"); });
  const int failed = scheduler.WaitForJob(1e9);
  // What the job lost, read once: the end record and the exit status agree.
  const std::vector<LostRange> lost = scheduler.lost_ranges();
  const std::string lost_line = "key range(s) " + JoinRanges(LostRangeIndices(lost)) +
                                " lost every replica during the job (see the membership log)";
  if (failed == Scheduler::kPreempted) {
    const PreemptionOutcome outcome = scheduler.preemption();
    // On standard error: `keel launch` shows it whatever its progress mode.
    std::cerr << PreemptedLine(outcome.checkpoint, outcome.uri, outcome.note) << " (" << std::fixed
              << std::setprecision(3) << outcome.seconds << " s after the notice)" << std::endl;
    // A resumed job does not know it: said here, before the job ends.
    if (!lost.empty()) std::cerr << "before the preemption, " << lost_line << std::endl;
    if (endpoint) endpoint->Stop();
    scheduler.Stop();
    return kPreemptedExitStatus;
  }
  if (printer) printer->Finish(failed, options.checkpoint.uri, LostRangeIndices(lost));
  if (endpoint) endpoint->Stop();
  scheduler.Stop();
  if (failed != 0) return 1;
  // A job that kept backups and still lost a range ends so unless allowed.
  if (!lost.empty() && options.replication > 0 && !options.allow_data_loss) {
    // On standard error: `keel launch` shows it whatever its progress mode.
    std::cerr << "data lost (exit status " << kDataLostExitStatus << "): " << lost_line
              << "; --allow_data_loss lets such a job end with 0" << std::endl;
    return kDataLostExitStatus;
  }
  return 0;
}

int RunServer(const std::vector<std::string>& argv) {
  InstallPreemptionHandlers();  // first: a SIGTERM from now on is a preemption notice
  const OptimizerOptions optimizer = ServerOptimizerFromFlags();
  const NodeOptions node_options = NodeOptionsFromFlags(proto::SERVER);
  const auto tables = JobTablesFromFlags();
  const int64_t staleness = StalenessFromFlags();
  const KeyCacheBounds key_cache = KeyCacheBoundsFromFlags();
  const RoleSettings settings = RoleSettingsFromFlags();
  CheckMetricsFlags();
  if (FlagsCheckedOnly()) return 0;
  MetricsRegistry metrics;  // outlives the node: its receive thread observes into it
  // A server that started over after the scheduler removed it brings the copy
  // of its ranges it kept (server/held_copy.h); the folder goes when it ends.
  const std::string copy_folder = HeldCopyFolder(getpid());
  NodeOptions options_with_copy = node_options;
  if (const char* kept = getenv(kHeldCopyEnv); kept && *kept) {
    try {
      options_with_copy.held_copy = LoadHeldCopy(kept);
    } catch (const std::exception& e) {
      LOG(WARNING) << "the copy of its key ranges this server kept is not used: " << e.what();
    }
  }
  FolderRemover remove_copy(copy_folder);
  Node node(options_with_copy);
  std::optional<KVServer> server(std::in_place, &node, optimizer, tables, staleness);
  server->SetKeyCacheBounds(key_cache);
  AddNodeMetrics(&node, &metrics);
  AddServerMetrics(&*server, &metrics);
  auto endpoint =
      StartMetricsEndpoint("server", &metrics, NodeLive(&node, settings.heartbeat_interval_s),
                           ServerReady(&node, &*server));
  node.Start();
  PreemptionWatch watch([&node] { node.RequestPreemption(); });
  while (!node.WaitForShutdown(1.0)) {
    if (const std::string failure = server->failure(); !failure.empty()) throw Error(failure);
    if (node.SecondsSinceScheduler() > settings.scheduler_timeout_s) {
      throw MakeError("no word from the scheduler at ", settings.scheduler, " for ",
                      settings.scheduler_timeout_s, " s");
    }
    if (ShouldStartOver(node)) {
      // Paused or cut off past the heartbeat timeout: the other replicas took
      // over its ranges. It starts over and takes its rank back as a
      // replacement, copying its ranges from them; it keeps a copy of what
      // it held, which the scheduler uses for a range that lost every other
      // replica meanwhile.
      LOG(WARNING) << "server " << node.rank() << " left the cluster; it joins again";
      const int rank = node.rank();
      endpoint.reset();  // it reads the server
      node.Stop();       // nothing touches the shards from here on
      KeepCopyForRejoin(*server, copy_folder);
      server.reset();
      RejoinAsNewProcess(AsReplacement(argv, rank));
    }
  }
  LOG(INFO) << "server " << node.rank() << " shutting down: served " << server->served_requests()
            << " requests, rejected " << server->rejected_requests() << " (non-finite pushes "
            << server->non_finite_pushes() << ", sequences out of window "
            << server->out_of_window_sequences() << "), repeated " << server->duplicate_pushes()
            << "; key lists kept " << server->key_lists_kept() << ", requests naming one "
            << server->key_list_hits() << ", naming one not held " << server->unknown_key_lists();
  endpoint.reset();
  std::string checkpoint, uri;
  const bool preempted = node.preempted(&checkpoint, &uri);
  node.Stop();
  return preempted ? kPreemptedExitStatus : 0;
}

int RunWorker(const std::vector<std::string>& argv) {
  InstallPreemptionHandlers();  // first: a SIGTERM from now on is a preemption notice
  const KVBenchOptions bench = CheckWorkerJobFlags();  // before joining
  const NodeOptions node_options = NodeOptionsFromFlags(proto::WORKER);
  const RequestRetry retry = RequestRetryFromFlags();
  const KeyCacheOptions key_cache = KeyCacheOptionsFromFlags();
  const RoleSettings settings = RoleSettingsFromFlags();
  CheckMetricsFlags();
  if (FlagsCheckedOnly()) return 0;
  MetricsRegistry metrics;  // outlives the node: its receive thread observes into it
  TrainingCounters counters;
  Node node(node_options);
  SchedulerLink scheduler(node);
  KVWorker client(&node, retry);
  client.SetKeyCache(key_cache);
  AddNodeMetrics(&node, &metrics);
  AddWorkerMetrics(&client, IsTrainingJob(settings.job) ? &counters : nullptr, &metrics);
  auto endpoint = StartMetricsEndpoint(
      "worker", &metrics, NodeLive(&node, settings.heartbeat_interval_s), WorkerReady(&node));
  node.Start();
  PreemptionWatch watch([&node] { node.RequestPreemption(); });
  const std::string error = RunWorkerJob(settings, &node, &scheduler, &client, bench, &counters);
  if (!error.empty() && EndedByPreemption(&node, settings.preemption_grace_s)) {
    endpoint.reset();
    node.Stop();
    return kPreemptedExitStatus;
  }
  if (!error.empty()) {
    endpoint.reset();  // a worker that starts over binds its port again
    StartOverIfRemoved(&node, argv, settings.heartbeat_interval_s);
  }
  scheduler.ReportDone(error);
  if (!node.WaitForShutdown(30)) LOG(WARNING) << "no shutdown from the scheduler; exiting";
  endpoint.reset();
  node.Stop();
  return error.empty() ? 0 : 1;
}

}  // namespace keel
