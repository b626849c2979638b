#include "cli/commands.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "cli/fault_flags.h"
#include "cli/fault_runner.h"
#include "cli/launcher.h"
#include "cli/remote.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "worker/kv_bench_job.h"

// Where a node is and how it reaches the scheduler.
DEFINE_string(scheduler, "", "the scheduler's HOST:PORT (server, worker, launch)");
DEFINE_string(bind, "0.0.0.0", "interface to listen on");
DEFINE_string(advertise, "",
              "host other nodes use to reach this one (default: the local address that "
              "routes to the scheduler)");
DEFINE_int32(port, 0, "port to listen on (0: any free port)");
DEFINE_int32(rank, -1, "server/worker: the rank to take (-1: any free rank)");
DEFINE_string(rank_env, "",
              "server/worker: take the rank from this environment variable, a number or a name "
              "ending in -NUMBER (JOB_COMPLETION_INDEX=3, HOSTNAME=keel-server-3)");
DEFINE_double(register_timeout, 30, "seconds to wait for the scheduler's cluster view");
DEFINE_double(heartbeat_interval, 1, "seconds between heartbeats to the scheduler");
DEFINE_double(scheduler_timeout, 60,
              "a server exits with an error after this many seconds without the scheduler");

// Scheduler.
DEFINE_int32(num_servers, 1, "servers in the cluster (scheduler)");
DEFINE_int32(num_workers, 1, "workers in the cluster (scheduler)");
DEFINE_double(heartbeat_timeout, 10, "seconds of silence after which a node is reported");
DEFINE_double(worker_replace_timeout, 30,
              "scheduler: seconds a departed worker's rank waits for a replacement before the "
              "other workers read the rest of its data");
DEFINE_int32(replication, 0,
             "scheduler: backups per key range (chain replication; 0 .. servers - 1): a push is "
             "acknowledged once every replica applied it, and a server that leaves loses nothing");
DEFINE_string(membership_log, "",
              "scheduler: append every join, departure (who, when, why, which backups were "
              "promoted) and view to this file as JSON lines");
DEFINE_string(checkpoint_uri, "",
              "scheduler: where checkpoints go (file:///path, s3://bucket/prefix or a folder)");
DEFINE_int32(checkpoint_every, 0,
             "scheduler: minibatches per worker between checkpoints within an epoch (0: only "
             "between epochs and at the end)");
DEFINE_int32(keep_checkpoints, 0, "scheduler: committed checkpoints to keep (0: all)");
DEFINE_string(resume, "",
              "scheduler: resume from a checkpoint: latest (in --checkpoint_uri), a checkpoint's "
              "URI, or a checkpoint store's URI (its LATEST)");
DEFINE_string(port_file, "",
              "scheduler: write the port it listens on to this file ('-': print 'scheduler port "
              "N' on standard output)");
DEFINE_double(connect_timeout, 5,
              "scheduler: seconds to try connecting back to a registering node's advertised "
              "address before refusing it as unreachable");
DEFINE_bool(check_flags, false,
            "check every flag of the command (the job's hyperparameters too), print 'flags ok' "
            "and exit 0, or say what is wrong and exit 1");

// Server.
DEFINE_string(optimizer, "adam", "server-side optimizer: sgd, adagrad, adam or ftrl");
DEFINE_double(learning_rate, 0.01, "optimizer learning rate");
DEFINE_double(wd, 0, "L2 weight decay");
DEFINE_double(l1, 0, "L1 penalty");

// Worker.
DEFINE_string(job, "", "worker job: linear_learner, factorization_machines or kv_bench");
DEFINE_string(bench_out, "", "kv_bench: folder for each worker's measurements");

// Launch and bench.
DEFINE_int32(servers, 1, "launch/bench: number of servers");
DEFINE_int32(workers, 1, "launch/bench: number of workers");
DEFINE_double(timeout, 0, "launch/bench: stop everything after this many seconds (0: never)");
DEFINE_string(hostfile, "",
              "launch: start the roles over ssh on the hosts this file lists, one line per host: "
              "[user@]host[:sshport] [scheduler] [servers=N] [workers=N] [address=HOST]");
DEFINE_string(ssh_options, "", "launch --hostfile: extra ssh options, split at spaces");
DEFINE_string(remote_keel, "",
              "launch --hostfile: the keel binary on the remote hosts (default: this binary's "
              "absolute path)");
DEFINE_bool(slurm, false,
            "launch: run as one task of an srun step (scripts/slurm/keel.sbatch): task 0 is the "
            "scheduler, the next --servers tasks the servers, the rest the workers");
DEFINE_int32(scheduler_port, 0,
             "launch --hostfile/--slurm: the scheduler's port (0: --hostfile any free port, "
             "--slurm one derived from SLURM_JOB_ID)");
DEFINE_string(mode, "dense", "bench kv: dense, sparse or all");
DEFINE_string(dense_sizes, "64KiB,1MiB,16MiB", "bench: bytes per dense request");
DEFINE_string(sparse_widths, "1,9", "bench kv: row widths of the sparse cases");
DEFINE_uint64(sparse_keys, 100000, "bench kv: keys per sparse request");
DEFINE_uint64(key_space, 10000000, "bench kv: sparse keys are drawn from this many features");
DEFINE_double(bench_seconds, 2, "bench: seconds per case and direction");
DEFINE_int32(inflight, 2, "bench: requests in flight per worker (throughput cases)");
DEFINE_bool(small, true, "bench: include the small-request round trip");
DEFINE_bool(zmq_baseline, true, "bench kv: measure raw ZeroMQ at the same sizes first");

namespace keel {
namespace {

const char kUsage[] =
    "keel: a parameter-server training runtime\n"
    "\n"
    "usage: keel <command> [--flags]\n"
    "\n"
    "commands:\n"
    "  scheduler --port P --num_servers S --num_workers W   run the scheduler\n"
    "  server --scheduler HOST:P                            run a parameter server\n"
    "  worker --scheduler HOST:P --job JOB                  run a worker\n"
    "  launch --servers S --workers W [job flags]           run a local cluster\n"
    "         [--checkpoint_uri URI [--checkpoint_every N] [--resume latest|URI]]\n"
    "  launch --hostfile FILE [job flags]                   run the job over ssh "
    "(docs/OPERATIONS.md)\n"
    "  launch --slurm --servers S [job flags]               one task of an srun step\n"
    "  predict --model_dir D --data F --out P               score a file with a trained model\n"
    "  datagen --model linear|fm --rows N --out DIR         synthetic data from a planted model\n"
    "  bench kv|zmq|parse|backend [flags]                   measure push/pull, ZeroMQ, parsing,\n"
    "                                                       a compute backend (--device, "
    "--threads)\n"
    "  checkpoint ls|show|verify URI                        list, show or verify checkpoints\n"
    "  version                                              build facts (cuda: ...)\n"
    "\n"
    "  guard -- COMMAND...                                  run COMMAND; stop it when stdin "
    "closes\n"
    "\n"
    "--check_flags checks a role's flags (and the job's) without starting it.\n"
    "keel <command> --helpon=commands lists every flag.\n";

std::string SelfPath() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw MakeError("cannot find the keel executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(n));
}

int RankFromFlags() {
  if (FLAGS_rank_env.empty()) return FLAGS_rank;
  if (FLAGS_rank >= 0) throw MakeError("give --rank or --rank_env, not both");
  const char* value = getenv(FLAGS_rank_env.c_str());
  if (!value) throw MakeError("--rank_env: ", FLAGS_rank_env, " is not set");
  const std::string text = value;
  size_t digits = text.size();
  while (digits > 0 && isdigit(static_cast<unsigned char>(text[digits - 1]))) --digits;
  if (digits == text.size() || (digits > 0 && text[digits - 1] != '-') ||
      text.size() - digits > 6) {
    throw MakeError("--rank_env: ", FLAGS_rank_env, "='", text,
                    "' is not a number or a name ending in -NUMBER");
  }
  return std::stoi(text.substr(digits));
}

NodeOptions NodeFlags(proto::Role role) {
  if (FLAGS_scheduler.empty()) throw MakeError("--scheduler HOST:PORT is required");
  ParseHostPort(FLAGS_scheduler, "--scheduler");
  if (FLAGS_port < 0 || FLAGS_port > 65535)
    throw MakeError("--port ", FLAGS_port, " is not in 0..65535");
  if (FLAGS_register_timeout <= 0) throw MakeError("--register_timeout must be positive");
  NodeOptions options;
  options.role = role;
  options.scheduler = FLAGS_scheduler;
  options.bind_host = FLAGS_bind;
  options.port = FLAGS_port;
  options.advertise_host = FLAGS_advertise;
  options.register_timeout_s = FLAGS_register_timeout;
  options.heartbeat_interval_s = FLAGS_heartbeat_interval;
  options.rank = RankFromFlags();
  options.faults = TransportFaultsFromFlags();
  if (options.heartbeat_interval_s <= 0) throw MakeError("--heartbeat_interval must be positive");
  return options;
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << text;
    if (!out) throw MakeError("cannot write ", temporary);
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) throw MakeError("cannot write ", path);
}

bool FlagsOk() {
  std::cout << "flags ok" << std::endl;
  return true;
}

SchedulerOptions SchedulerFlags() {
  if (FLAGS_port == 0 && FLAGS_port_file.empty()) {
    throw MakeError("--port is required (or --port_file to pick a free port and report it)");
  }
  if (FLAGS_port < 0 || FLAGS_port > 65535)
    throw MakeError("--port ", FLAGS_port, " is not in 0..65535");
  if (FLAGS_num_servers < 1 || FLAGS_num_workers < 1) {
    throw MakeError("a cluster needs at least one server and one worker (--num_servers ",
                    FLAGS_num_servers, ", --num_workers ", FLAGS_num_workers, ")");
  }
  if (FLAGS_heartbeat_timeout <= 0) throw MakeError("--heartbeat_timeout must be positive");
  if (FLAGS_connect_timeout <= 0) throw MakeError("--connect_timeout must be positive");
  if (FLAGS_replication < 0 || FLAGS_replication >= FLAGS_num_servers) {
    throw MakeError("--replication ", FLAGS_replication,
                    " needs 0 <= replication < --num_servers (", FLAGS_num_servers,
                    "): a range's backups are other servers");
  }
  SchedulerOptions options;
  options.bind_host = FLAGS_bind;
  options.port = FLAGS_port;
  options.num_servers = FLAGS_num_servers;
  options.num_workers = FLAGS_num_workers;
  options.heartbeat_timeout_s = FLAGS_heartbeat_timeout;
  options.worker_replace_timeout_s = FLAGS_worker_replace_timeout;
  options.replication = FLAGS_replication;
  options.membership_log = FLAGS_membership_log;
  options.checkpoint.uri = FLAGS_checkpoint_uri;
  options.checkpoint.every = FLAGS_checkpoint_every;
  options.checkpoint.keep = FLAGS_keep_checkpoints;
  options.checkpoint.resume = FLAGS_resume;
  options.connect_timeout_s = FLAGS_connect_timeout;
  return options;
}

int RunScheduler() {
  SchedulerOptions options = SchedulerFlags();
  if (FLAGS_check_flags && FlagsOk()) return 0;
  Scheduler scheduler(options);
  scheduler.Start();
  if (FLAGS_port_file == "-") {
    std::cout << "scheduler port " << scheduler.port() << std::endl;
  } else if (!FLAGS_port_file.empty()) {
    WriteFileAtomically(FLAGS_port_file, std::to_string(scheduler.port()) + "\n");
  }
  const int failed = scheduler.WaitForJob(1e9);
  scheduler.Stop();
  return failed == 0 ? 0 : 1;
}

OptimizerOptions ServerOptimizerFlags() {
  OptimizerOptions optimizer;
  optimizer.name = FLAGS_optimizer;
  optimizer.learning_rate = static_cast<float>(FLAGS_learning_rate);
  optimizer.l2 = static_cast<float>(FLAGS_wd);
  optimizer.l1 = static_cast<float>(FLAGS_l1);
  ValidateOptimizerOptions(optimizer);
  MakeOptimizer(optimizer);  // and the name
  if (FLAGS_scheduler_timeout <= 0) throw MakeError("--scheduler_timeout must be positive");
  return optimizer;
}

std::vector<uint64_t> ParseSizes(const std::string& text, const std::string& flag) {
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
    if (unit == "KiB" || unit == "K") {
      value <<= 10;
    } else if (unit == "MiB" || unit == "M") {
      value <<= 20;
    } else if (!unit.empty() && unit != "B") {
      throw MakeError("--", flag, ": unknown unit '", unit, "' in '", item, "'");
    }
    if (value == 0) throw MakeError("--", flag, ": '", item, "' is zero");
    sizes.push_back(value);
  }
  return sizes;
}

}  // namespace

KVBenchOptions BenchFlags() {
  KVBenchOptions options;
  if (FLAGS_mode != "dense" && FLAGS_mode != "sparse" && FLAGS_mode != "all") {
    throw MakeError("--mode '", FLAGS_mode, "' is not dense, sparse or all");
  }
  if (FLAGS_mode != "sparse") options.dense_bytes = ParseSizes(FLAGS_dense_sizes, "dense_sizes");
  if (FLAGS_mode != "dense") {
    for (uint64_t width : ParseSizes(FLAGS_sparse_widths, "sparse_widths")) {
      options.sparse_widths.push_back(static_cast<int>(width));
    }
  }
  options.sparse_keys = FLAGS_sparse_keys;
  options.key_space = FLAGS_key_space;
  if (options.key_space < options.sparse_keys) {
    throw MakeError("--key_space (", options.key_space, ") must be at least --sparse_keys (",
                    options.sparse_keys, ")");
  }
  options.seconds_per_case = FLAGS_bench_seconds;
  options.inflight = FLAGS_inflight;
  if (options.inflight < 1) throw MakeError("--inflight must be at least 1");
  options.small = FLAGS_small && FLAGS_mode != "sparse";
  return options;
}

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
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::string self = SelfPath();
  execv(self.c_str(), args.data());
  throw MakeError("cannot start ", self, " again: ", strerror(errno));
}

// Whether a node the scheduler dropped from the view starts over as a new
// process (at most 3 times in a row, so a node that keeps losing its place
// gives up with its error instead).
bool ShouldStartOver(const Node& node) {
  const char* rejoins = getenv("KEEL_REJOINS");
  return node.removed() && (!rejoins || std::atoi(rejoins) < 3);
}

// The worker's job flags; throws Error if any is wrong.
KVBenchOptions CheckWorkerJobFlags() {
  KVBenchOptions bench;
  if (IsTrainingJob(FLAGS_job)) {
    JobTablesFromFlags();  // the hyperparameters
    CheckComputeFlags();   // and the device: a worker without one fails now
    TrainerOptionsFromFlags();
  } else if (FLAGS_job == "kv_bench") {
    bench = BenchFlags();
    if (FLAGS_bench_out.empty()) throw MakeError("--job=kv_bench needs --bench_out FOLDER");
  } else {
    throw MakeError("--job '", FLAGS_job,
                    "' is not linear_learner, factorization_machines or kv_bench");
  }
  StalenessFromFlags();
  return bench;
}

int RunServer(const std::vector<std::string>& argv) {
  const OptimizerOptions optimizer = ServerOptimizerFlags();
  const NodeOptions node_options = NodeFlags(proto::SERVER);
  const auto tables = JobTablesFromFlags();
  const int64_t staleness = StalenessFromFlags();
  if (FLAGS_check_flags && FlagsOk()) return 0;
  Node node(node_options);
  std::optional<KVServer> server(std::in_place, &node, optimizer, tables, staleness);
  node.Start();
  while (!node.WaitForShutdown(1.0)) {
    if (const std::string failure = server->failure(); !failure.empty()) throw Error(failure);
    if (node.SecondsSinceScheduler() > FLAGS_scheduler_timeout) {
      throw MakeError("no word from the scheduler at ", FLAGS_scheduler, " for ",
                      FLAGS_scheduler_timeout, " s");
    }
    if (ShouldStartOver(node)) {
      // Paused or cut off past the heartbeat timeout: the other replicas took
      // over its ranges. It starts over and takes its rank back as a
      // replacement, copying its ranges from them.
      LOG(WARNING) << "server " << node.rank() << " left the cluster; it joins again";
      server.reset();
      RejoinAsNewProcess(argv);
    }
  }
  LOG(INFO) << "server " << node.rank() << " shutting down: served " << server->served_requests()
            << " requests, rejected " << server->rejected_requests() << ", repeated "
            << server->duplicate_pushes();
  node.Stop();
  return 0;
}

int RunWorker(const std::vector<std::string>& argv) {
  const bool training = IsTrainingJob(FLAGS_job);
  const KVBenchOptions bench = CheckWorkerJobFlags();  // before joining
  const NodeOptions node_options = NodeFlags(proto::WORKER);
  if (FLAGS_check_flags && FlagsOk()) return 0;
  Node node(node_options);
  KVWorker client(&node, RequestRetryFromFlags());
  node.Start();
  std::string error;
  try {
    if (training) {
      RunTraining(&node, &client);
    } else {
      const auto cases = RunKVBench(&node, &client, bench);
      WriteFileAtomically(FLAGS_bench_out + "/worker-" + std::to_string(node.rank()) + ".tsv",
                          FormatBenchCases(cases));
    }
  } catch (const Error& e) {
    error = e.what();
    LOG(ERROR) << "worker " << node.rank() << ": " << error;
  }
  if (!error.empty()) {
    // Refused because it left the view? The scheduler says so at the next heartbeat.
    const double deadline = MonotonicSeconds() + 3 * FLAGS_heartbeat_interval + 1;
    while (!node.removed() && MonotonicSeconds() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (ShouldStartOver(node)) {
      LOG(WARNING) << "worker " << node.rank() << " left the cluster; it joins again";
      node.Stop();
      RejoinAsNewProcess(argv);
    }
  }
  node.ReportDone(error);
  if (!node.WaitForShutdown(30)) LOG(WARNING) << "no shutdown from the scheduler; exiting";
  node.Stop();
  return error.empty() ? 0 : 1;
}

// Flags that belong to `keel launch` itself rather than to the roles.
// Flags that belong to `keel launch` itself rather than to the roles.
const std::set<std::string> kLaunchFlags = {
    "servers",  "workers",     "timeout",     "scheduler",      "num_servers", "num_workers",
    "bind",     "port",        "port_file",   "advertise",      "rank",        "rank_env",
    "hostfile", "ssh_options", "remote_keel", "scheduler_port", "slurm",       "check_flags"};
const std::set<std::string> kBooleanLaunchFlags = {"slurm", "noslurm", "check_flags",
                                                   "nocheck_flags"};

// The arguments of `keel launch` that are for the roles.
std::vector<std::string> RoleFlags(const std::vector<std::string>& args) {
  std::vector<std::string> role_flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t dashes = arg.rfind("--", 0) == 0 ? 2 : arg.rfind("-", 0) == 0 ? 1 : 0;
    const std::string name = arg.substr(dashes, arg.find('=') - dashes);
    if (!dashes || (!kLaunchFlags.count(name) && !kBooleanLaunchFlags.count(name) &&
                    !IsFaultLaunchFlag(name))) {
      role_flags.push_back(arg);
    } else if (arg.find('=') == std::string::npos && !kBooleanLaunchFlags.count(name)) {
      ++i;  // "--servers 2": the value goes too
    }
  }
  return role_flags;
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::istringstream words(text);
  std::vector<std::string> result;
  for (std::string word; words >> word;) result.push_back(word);
  return result;
}

int RunLaunch(const std::vector<std::string>& args) {
  const std::vector<std::string> role_flags = RoleFlags(args);
  if (FLAGS_slurm && !FLAGS_hostfile.empty())
    throw MakeError("give --slurm or --hostfile, not both");
  if (FLAGS_scheduler_port < 0 || FLAGS_scheduler_port > 65535) {
    throw MakeError("--scheduler_port ", FLAGS_scheduler_port, " is not in 0..65535");
  }
  // Every role reads the same flags: check them as each role would.
  ServerOptimizerFlags();
  JobTablesFromFlags();
  CheckWorkerJobFlags();
  if (FLAGS_timeout < 0) throw MakeError("--timeout must not be negative");
  if (FLAGS_slurm) {
    if (FLAGS_servers < 1) throw MakeError("--servers must be at least 1");
    if (FLAGS_check_flags && FlagsOk()) return 0;
    return RunSlurmTask(SelfPath(), FLAGS_servers, FLAGS_scheduler_port, role_flags);
  }
  if (!FLAGS_hostfile.empty()) {
    SshLaunch launch;
    launch.hosts = ParseHostfile(ReadFile(FLAGS_hostfile), FLAGS_hostfile);
    if (FLAGS_check_flags && FlagsOk()) return 0;
    launch.role_flags = role_flags;
    launch.ssh_options = SplitWords(FLAGS_ssh_options);
    launch.remote_keel = FLAGS_remote_keel.empty() ? SelfPath() : FLAGS_remote_keel;
    char folder[4096];
    if (getcwd(folder, sizeof(folder))) launch.remote_folder = folder;
    launch.scheduler_port = FLAGS_scheduler_port;
    launch.timeout_s = FLAGS_timeout;
    return RunSshLaunch(launch);
  }
  LocalCluster cluster;
  cluster.servers = FLAGS_servers;
  cluster.workers = FLAGS_workers;
  cluster.scheduler = FLAGS_scheduler;
  cluster.timeout_s = FLAGS_timeout;
  cluster.faults = FLAGS_faults;
  cluster.event_log = FLAGS_event_log;
  cluster.fault_seed = FLAGS_fault_seed;
  cluster.role_flags = role_flags;
  if (cluster.servers < 1 || cluster.workers < 1) {
    throw MakeError("a cluster needs at least one server and one worker (--servers ",
                    cluster.servers, ", --workers ", cluster.workers, ")");
  }
  if (!cluster.scheduler.empty()) ParseHostPort(cluster.scheduler, "--scheduler");
  if (FLAGS_check_flags && FlagsOk()) return 0;
  return RunLocalCluster(cluster);
}

}  // namespace

int RunLocalCluster(const LocalCluster& cluster) {
  if (cluster.servers < 1 || cluster.workers < 1) {
    throw MakeError("a cluster needs at least one server and one worker (--servers ",
                    cluster.servers, ", --workers ", cluster.workers, ")");
  }
  const std::string self = SelfPath();
  const FaultSchedule faults = ParseFaultSchedule(cluster.faults, cluster.servers, cluster.workers);
  ProcessGroup group;
  std::unique_ptr<FaultRunner> fault_runner;
  if (!faults.empty() || !cluster.event_log.empty()) {
    fault_runner = std::make_unique<FaultRunner>(&group, faults, cluster.servers, cluster.workers,
                                                 cluster.event_log, cluster.fault_seed);
  }
  std::string scheduler = cluster.scheduler;
  if (scheduler.empty()) {
    char folder[] = "/tmp/keel-launch-XXXXXX";
    if (!mkdtemp(folder)) throw MakeError("cannot create a folder under /tmp");
    const std::string port_file = std::string(folder) + "/scheduler.port";
    std::vector<std::string> argv = {self,
                                     "scheduler",
                                     "--bind=127.0.0.1",
                                     "--port_file=" + port_file,
                                     "--num_servers=" + std::to_string(cluster.servers),
                                     "--num_workers=" + std::to_string(cluster.workers)};
    // The job's flags too: logging flags apply, the rest are ignored.
    argv.insert(argv.end(), cluster.role_flags.begin(), cluster.role_flags.end());
    group.Spawn("scheduler", argv);
    std::string port;
    const bool started = group.Pump(15, [&] {
      std::ifstream in(port_file);
      return static_cast<bool>(in >> port);
    });
    unlink(port_file.c_str());
    rmdir(folder);
    if (!started) {
      group.StopAll();
      throw MakeError("the scheduler did not start (see its log above)");
    }
    scheduler = "127.0.0.1:" + port;
  }
  std::vector<std::string> common = {"--scheduler=" + scheduler, "--bind=127.0.0.1"};
  common.insert(common.end(), cluster.role_flags.begin(), cluster.role_flags.end());
  for (int i = 0; i < cluster.servers; ++i) {
    std::vector<std::string> argv = {self, "server", "--rank=" + std::to_string(i)};
    argv.insert(argv.end(), common.begin(), common.end());
    for (auto& flag : faults.TransportFlags("server", i)) argv.push_back(flag);
    group.Spawn("server " + std::to_string(i), argv);
  }
  for (int i = 0; i < cluster.workers; ++i) {
    std::vector<std::string> argv = {self, "worker", "--rank=" + std::to_string(i)};
    argv.insert(argv.end(), common.begin(), common.end());
    for (auto& flag : faults.TransportFlags("worker", i)) argv.push_back(flag);
    group.Spawn("worker " + std::to_string(i), argv);
  }
  const int code = group.Wait(cluster.timeout_s);
  if (fault_runner) fault_runner->Finish(code);
  return code;
}

int RunCommandLine(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "version" || command == "--version") {
    std::cout << VersionText();
    return 0;
  }
  if (command == "guard") {  // keel guard -- COMMAND...: no flags of its own
    if (argc < 4 || std::string(argv[2]) != "--") {
      std::cerr << "usage: keel guard -- COMMAND [ARGS...]\n";
      return 2;
    }
    try {
      return RunGuard(std::vector<std::string>(argv + 3, argv + argc));
    } catch (const Error& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  std::string subcommand;
  std::vector<char*> rest = {argv[0]};
  int first_flag = 2;
  if (command == "bench") {
    if (argc < 3 || argv[2][0] == '-') {
      std::cerr << "keel bench: say what to measure: keel bench kv|zmq|parse|backend [flags]\n";
      return 2;
    }
    subcommand = argv[2];
    first_flag = 3;
  }
  std::string target;  // keel checkpoint <what> URI
  if (command == "checkpoint") {
    if (argc < 4 || argv[2][0] == '-' || argv[3][0] == '-') {
      std::cerr << "keel checkpoint: keel checkpoint ls|show|verify URI\n";
      return 2;
    }
    subcommand = argv[2];
    target = argv[3];
    first_flag = 4;
  }
  std::vector<std::string> args(argv + first_flag, argv + argc);
  for (int i = first_flag; i < argc; ++i) rest.push_back(argv[i]);
  int rest_count = static_cast<int>(rest.size());
  char** rest_argv = rest.data();

  gflags::SetUsageMessage(kUsage);
  gflags::SetVersionString(VersionText());
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::ParseCommandLineFlags(&rest_count, &rest_argv, true);
  const std::string name = "keel " + command + (subcommand.empty() ? "" : " " + subcommand);
  if (rest_count > 1) {
    std::cerr << name << ": unexpected argument '" << rest_argv[1] << "'\n";
    return 2;
  }
  google::InitGoogleLogging(argv[0]);
  try {
    if (command == "scheduler") return RunScheduler();
    if (command == "server") return RunServer(std::vector<std::string>(argv, argv + argc));
    if (command == "worker") return RunWorker(std::vector<std::string>(argv, argv + argc));
    if (command == "launch") return RunLaunch(args);
    if (FLAGS_check_flags && command != "scheduler" && command != "server" && command != "worker" &&
        command != "launch") {
      throw MakeError("--check_flags applies to scheduler, server, worker and launch");
    }
    if (command == "bench") return RunBench(subcommand);
    if (command == "predict") return RunPredict();
    if (command == "datagen") return RunDatagen();
    if (command == "checkpoint") return RunCheckpointCommand(subcommand, target);
    std::cerr << "keel: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const Error& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace keel
