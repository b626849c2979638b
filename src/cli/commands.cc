#include "cli/commands.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "cli/fault_flags.h"
#include "cli/fault_runner.h"
#include "cli/launcher.h"
#include "kv/error.h"
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
DEFINE_string(port_file, "", "scheduler: write the port it listens on to this file");
DEFINE_string(checkpoint_uri, "",
              "scheduler: where checkpoints go (file:///path, s3://bucket/prefix or a folder)");
DEFINE_int32(checkpoint_every, 0,
             "scheduler: minibatches per worker between checkpoints within an epoch (0: only "
             "between epochs and at the end)");
DEFINE_int32(keep_checkpoints, 0, "scheduler: committed checkpoints to keep (0: all)");
DEFINE_string(resume, "",
              "scheduler: resume from a checkpoint: latest (in --checkpoint_uri), a checkpoint's "
              "URI, or a checkpoint store's URI (its LATEST)");

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
    "  predict --model_dir D --data F --out P               score a file with a trained model\n"
    "  datagen --model linear|fm --rows N --out DIR         synthetic data from a planted model\n"
    "  bench kv|zmq|parse|backend [flags]                   measure push/pull, ZeroMQ, parsing,\n"
    "                                                       a compute backend (--device, "
    "--threads)\n"
    "  checkpoint ls|show|verify URI                        list, show or verify checkpoints\n"
    "  version                                              build facts (cuda: ...)\n"
    "\n"
    "keel <command> --helpon=commands lists every flag.\n";

std::string SelfPath() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw MakeError("cannot find the keel executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(n));
}

NodeOptions NodeFlags(proto::Role role) {
  if (FLAGS_scheduler.empty()) throw MakeError("--scheduler HOST:PORT is required");
  NodeOptions options;
  options.role = role;
  options.scheduler = FLAGS_scheduler;
  options.bind_host = FLAGS_bind;
  options.port = FLAGS_port;
  options.advertise_host = FLAGS_advertise;
  options.register_timeout_s = FLAGS_register_timeout;
  options.heartbeat_interval_s = FLAGS_heartbeat_interval;
  options.rank = FLAGS_rank;
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

int RunScheduler() {
  if (FLAGS_port == 0 && FLAGS_port_file.empty()) {
    throw MakeError("--port is required (or --port_file to pick a free port and report it)");
  }
  SchedulerOptions options;
  options.bind_host = FLAGS_bind;
  options.port = FLAGS_port;
  options.num_servers = FLAGS_num_servers;
  options.num_workers = FLAGS_num_workers;
  options.heartbeat_timeout_s = FLAGS_heartbeat_timeout;
  options.worker_replace_timeout_s = FLAGS_worker_replace_timeout;
  options.checkpoint.uri = FLAGS_checkpoint_uri;
  options.checkpoint.every = FLAGS_checkpoint_every;
  options.checkpoint.keep = FLAGS_keep_checkpoints;
  options.checkpoint.resume = FLAGS_resume;
  Scheduler scheduler(options);
  scheduler.Start();
  if (!FLAGS_port_file.empty()) {
    WriteFileAtomically(FLAGS_port_file, std::to_string(scheduler.port()) + "\n");
  }
  const int failed = scheduler.WaitForJob(1e9);
  scheduler.Stop();
  return failed == 0 ? 0 : 1;
}

int RunServer() {
  OptimizerOptions optimizer;
  optimizer.name = FLAGS_optimizer;
  optimizer.learning_rate = static_cast<float>(FLAGS_learning_rate);
  optimizer.l2 = static_cast<float>(FLAGS_wd);
  optimizer.l1 = static_cast<float>(FLAGS_l1);
  Node node(NodeFlags(proto::SERVER));
  KVServer server(&node, optimizer, JobTablesFromFlags(), StalenessFromFlags());
  node.Start();
  while (!node.WaitForShutdown(1.0)) {
    if (const std::string failure = server.failure(); !failure.empty()) throw Error(failure);
    if (node.SecondsSinceScheduler() > FLAGS_scheduler_timeout) {
      throw MakeError("no word from the scheduler at ", FLAGS_scheduler, " for ",
                      FLAGS_scheduler_timeout, " s");
    }
  }
  LOG(INFO) << "server " << node.rank() << " shutting down: served " << server.served_requests()
            << " requests, rejected " << server.rejected_requests() << ", repeated "
            << server.duplicate_pushes();
  node.Stop();
  return 0;
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

int RunWorker(const std::vector<std::string>& argv) {
  const bool training = IsTrainingJob(FLAGS_job);
  if (!training && FLAGS_job != "kv_bench") {
    throw MakeError("--job '", FLAGS_job,
                    "' is not linear_learner, factorization_machines or kv_bench");
  }
  KVBenchOptions bench;
  if (training) {
    JobTablesFromFlags();  // check the hyperparameters before joining
    CheckComputeFlags();   // and the device: a worker without one fails now
  } else {
    bench = BenchFlags();
    if (FLAGS_bench_out.empty()) throw MakeError("--job=kv_bench needs --bench_out FOLDER");
  }
  Node node(NodeFlags(proto::WORKER));
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
    const char* rejoins = getenv("KEEL_REJOINS");
    if (node.removed() && (!rejoins || std::atoi(rejoins) < 3)) {
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
bool IsLaunchFlag(const std::string& arg) {
  static const std::set<std::string> kLaunchFlags = {
      "servers", "workers", "timeout",   "scheduler", "num_servers", "num_workers",
      "bind",    "port",    "port_file", "advertise", "rank"};
  if (arg.rfind("--", 0) != 0) return false;
  const std::string name = arg.substr(2, arg.find('=') - 2);
  return kLaunchFlags.count(name) > 0 || IsFaultLaunchFlag(name);
}

int RunLaunch(const std::vector<std::string>& args) {
  LocalCluster cluster;
  cluster.servers = FLAGS_servers;
  cluster.workers = FLAGS_workers;
  cluster.scheduler = FLAGS_scheduler;
  cluster.timeout_s = FLAGS_timeout;
  cluster.faults = FLAGS_faults;
  cluster.event_log = FLAGS_event_log;
  cluster.fault_seed = FLAGS_fault_seed;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!IsLaunchFlag(args[i])) {
      cluster.role_flags.push_back(args[i]);
    } else if (args[i].find('=') == std::string::npos) {
      ++i;  // "--servers 2": the value goes too
    }
  }
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
    if (command == "server") return RunServer();
    if (command == "worker") return RunWorker(std::vector<std::string>(argv, argv + argc));
    if (command == "launch") return RunLaunch(args);
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
