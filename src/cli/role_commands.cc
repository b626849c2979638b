// The roles on the command line: `keel scheduler`, `keel server` and
// `keel worker`, each checking its flags before it starts.
#include <glog/logging.h>
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <optional>
#include <string>

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
#include "cli/wire_flags.h"
#include "faults/preemption_notice.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "launch/launcher.h"
#include "launch/start_over.h"
#include "metrics/metrics_registry.h"
#include "metrics/role_metrics.h"
#include "metrics/role_probes.h"
#include "metrics/status_page.h"
#include "scheduler/progress_printer.h"
#include "scheduler/scheduler.h"
#include "server/held_copy.h"
#include "server/kv_server.h"
#include "server/server_restart.h"
#include "worker/scheduler_link.h"

namespace keel {
namespace {

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
  const OptimizerOptions optimizer = ServersOptimizerFromFlags();
  const NodeOptions node_options = NodeOptionsFromFlags(proto::SERVER);
  const auto tables = JobTablesFromFlags();
  const int64_t staleness = StalenessFromFlags();
  const KeyCacheBounds key_cache = KeyCacheBoundsFromFlags();
  const int apply_threads = ServerApplyThreadsFromFlags();
  const RoleSettings settings = RoleSettingsFromFlags();
  CheckMetricsFlags();
  if (FlagsCheckedOnly()) return 0;
  MetricsRegistry metrics;  // outlives the node: its receive thread observes into it
  // A server that started over after the scheduler removed it brings the copy
  // of its ranges it kept (server/held_copy.h); the folder goes when it ends.
  const std::string copy_folder = HeldCopyFolder(getpid());
  NodeOptions options_with_copy = node_options;
  if (const std::optional<proto::HeldCopy> held = HeldCopyFromEnvironment()) {
    *options_with_copy.register_fields.mutable_held_copy() = *held;
  }
  FolderRemover remove_copy(copy_folder);
  Node node(options_with_copy);
  std::optional<KVServer> server(std::in_place, &node, optimizer, tables, staleness);
  server->SetKeyCacheBounds(key_cache);
  server->SetApplyThreads(apply_threads);
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
      KeepCopyForRestart(*server, copy_folder);
      server.reset();
      RejoinAsNewProcess(AsReplacement(argv, rank));
    }
  }
  LOG(INFO) << "server " << node.rank() << " shutting down: served " << server->served_requests()
            << " requests, rejected " << server->rejected_requests() << " (non-finite pushes "
            << server->non_finite_pushes() << ", sequences out of window "
            << server->out_of_window_sequences() << "), repeated " << server->duplicate_pushes()
            << "; key lists kept " << server->key_lists_kept() << ", requests naming one "
            << server->key_list_hits() << " (through its slots " << server->key_list_slot_hits()
            << "), naming one not held " << server->unknown_key_lists();
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
  const proto::WirePrecision precision =
      WirePrecisionFromFlags(settings.job, settings.predictor_type);
  CheckMetricsFlags();
  if (FlagsCheckedOnly()) return 0;
  MetricsRegistry metrics;  // outlives the node: its receive thread observes into it
  TrainingCounters counters;
  Node node(node_options);
  SchedulerLink scheduler(node);
  KVWorker client(&node, retry);
  client.SetKeyCache(key_cache);
  // The model's tables only: the control table's counts and sums stay float32.
  client.SetWirePrecision(precision, {kWeightTable, kBiasTable});
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
