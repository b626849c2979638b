#include "cli/cluster_flags.h"

#include <sched.h>
#include <stdlib.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "base/error.h"
#include "cli/fault_flags.h"
#include "flags/flag_rules.h"
#include "kv/van.h"
#include "server/kv_server.h"

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
DEFINE_bool(join, false,
            "server: join a running job (live resharding): take the rank asked for (--rank; "
            "default: the next free one) and key ranges from the servers there, copied while "
            "the job trains");
DEFINE_string(secret_file, "",
              "the cluster secret made by `keel keygen` (mode 0600): every connection is "
              "encrypted and only holders of the secret may join (default: $KEEL_SECRET_FILE; "
              "neither: plain TCP, for loopback)");

// Scheduler.
DEFINE_int32(num_servers, 1, "servers in the cluster (scheduler)");
DEFINE_int32(num_workers, 1, "workers in the cluster (scheduler)");
DEFINE_double(heartbeat_timeout, 10,
              "scheduler: seconds of silence after which a node leaves the cluster view (how a "
              "stopped or cut-off node is found)");
DEFINE_int32(heartbeat_relay_from, 256,
             "scheduler: in a job of at least this many workers each worker sends its "
             "heartbeats to one server, which passes them on in its own, and one in 30 to the "
             "scheduler, so the scheduler takes a heartbeat a second from each server and one "
             "every 30 seconds from each worker (0: never)");
DEFINE_bool(detect_closed_connections, true,
            "scheduler: a node whose connection closes is probed at once and leaves the view if "
            "its address refuses connections (its process died); false: only heartbeats find "
            "failed nodes");
DEFINE_double(worker_replace_timeout, 30,
              "scheduler: seconds a departed worker's rank waits for a replacement before the "
              "other workers read the rest of its data");
DEFINE_int32(replication, 0,
             "scheduler: backups per key range (chain replication; 0 .. servers - 1): a push is "
             "acknowledged once every replica applied it, and a server that leaves loses nothing");
DEFINE_bool(allow_data_loss, false,
            "scheduler: with --replication >= 1, a job in which a key range lost every replica "
            "(two failures on one chain before its backups were whole) still ends with exit "
            "status 0; without it the job ends with exit status 3 (the loss is announced "
            "either way)");
DEFINE_double(rebuild_wait, 10,
              "scheduler: seconds a key range that lost every replica waits for a server removed "
              "while alive (paused or cut off) that held it, and may come back with its copy, "
              "before an empty replacement rebuilds it from the latest checkpoint");
DEFINE_int32(key_ranges, 0,
             "scheduler: key ranges the key space is split into (0: one per server). More than "
             "--num_servers lets servers join the running job (keel server --join, up to one "
             "per range) and be drained from it (keel admin drain); each range a push touches "
             "is one request");
DEFINE_string(membership_log, "",
              "scheduler: append every join, departure (who, when, why, which backups were "
              "promoted) and view to this file as JSON lines");
DEFINE_string(checkpoint_uri, "",
              "scheduler: where checkpoints go (file:///path, s3://bucket/prefix or a folder)");
DEFINE_int32(checkpoint_every, 0,
             "scheduler: minibatches per worker between checkpoints within an epoch (0: only "
             "between epochs and at the end)");
DEFINE_int32(keep_checkpoints, 0,
             "scheduler: committed checkpoints to keep (0: all); the checkpoints a kept "
             "delta's chain needs are kept with it");
DEFINE_bool(checkpoint_delta, false,
            "scheduler: after a full checkpoint, servers write only the rows changed (or "
            "removed) since the previous one; resume replays the full one and its deltas");
DEFINE_int32(checkpoint_full_every, 10,
             "scheduler: with --checkpoint_delta, every N-th checkpoint is full (1: all)");
DEFINE_string(resume, "",
              "scheduler: resume from a checkpoint: latest (in --checkpoint_uri), a checkpoint's "
              "URI, or a checkpoint store's URI (its LATEST)");
DEFINE_bool(takes_over_job, false,
            "scheduler: this scheduler replaces one that died while its job's nodes run on (keel "
            "launch sets it when a fault restarts the scheduler): the checkpoints in "
            "--checkpoint_uri are the job's own. Without it (or --resume from that store), a "
            "store holding committed checkpoints is refused as an earlier job's");
DEFINE_double(preemption_grace, 90,
              "seconds a preempted job (SIGTERM to any of its processes or to keel launch) waits "
              "for its preemption checkpoint to commit before it exits without one (status 75)");
DEFINE_string(port_file, "",
              "scheduler and serve: write the port it listens on to this file ('-': print "
              "'scheduler port N' or 'serve port N' on standard output)");
DEFINE_bool(progress_records, false,
            "scheduler: print the job's progress on standard output as 'keel-progress {...}' "
            "lines, which keel launch renders (it passes this flag)");
DEFINE_string(server_apply_threads, "auto",
              "server: threads that step a push's rows: the receive thread and up to N - 1 more, "
              "each a contiguous part of at least 4096 of the push's rows (a smaller push takes "
              "one thread; pushes stay applied one at a time, in order): auto (1 with fewer than "
              "4 usable cores, else half the cores this process may run on, at most 8) or 1 to 64");
DEFINE_double(connect_timeout, 5,
              "scheduler: seconds to try connecting back to a registering node's advertised "
              "address before refusing it as unreachable (and to wait for a node to answer a "
              "probe after its connection closed)");
DEFINE_bool(check_flags, false,
            "check every flag of the command (the job's hyperparameters too), print 'flags ok' "
            "and exit 0, or say what is wrong and exit 1");

// Server.
DEFINE_string(optimizer, "auto",
              "server-side optimizer: auto (adam), sgd, adagrad, rmsprop, adam or ftrl");
DEFINE_string(learning_rate, "auto",
              "optimizer learning rate, a positive number or auto (training jobs: per job and "
              "optimizer, see README; kv_bench: 0.01)");
DEFINE_string(wd, "auto", "L2 weight decay, a non-negative number or auto (0)");
DEFINE_string(l1, "auto", "L1 penalty, a non-negative number or auto (0)");

// The worker's job.
DEFINE_string(job, "", "worker job: linear_learner, factorization_machines, kv_bench or exact_sum");
DEFINE_string(model_dir, "",
              "where the model artifact and metrics.json go (training jobs, not given: a new "
              "folder ./keel-model-JOB-TIME, named when the job starts and ends)");

namespace keel {

std::vector<FlagGroup> ClusterFlagGroups() {
  return {
      {"job", {"job"}},
      {"optimizer", {"optimizer", "learning_rate", "wd", "l1"}},
      {"node",
       {"scheduler", "bind", "advertise", "port", "rank", "rank_env", "register_timeout",
        "heartbeat_interval", "scheduler_timeout", "secret_file", "join"}},
      {"scheduler",
       {"num_servers", "num_workers", "heartbeat_timeout", "heartbeat_relay_from",
        "detect_closed_connections", "worker_replace_timeout", "replication", "allow_data_loss",
        "rebuild_wait", "key_ranges", "membership_log", "port_file", "connect_timeout",
        "progress_records", "takes_over_job"}},
      {"checkpoints",
       {"checkpoint_uri", "checkpoint_every", "keep_checkpoints", "checkpoint_delta",
        "checkpoint_full_every", "resume", "preemption_grace"}},
      {"server", {"server_apply_threads"}},
      {"checking", {"check_flags"}},
  };
}

int ServerApplyThreadsFromFlags() {
  const std::string& value = FLAGS_server_apply_threads;
  if (value == "auto") return AutoApplyThreads(UsableCores());
  char* end = nullptr;
  const long threads = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || threads < 1 || threads > KVServer::kMaxApplyThreads) {
    throw MakeError("--server_apply_threads '", value, "' is not auto or an integer in 1..",
                    KVServer::kMaxApplyThreads);
  }
  return static_cast<int>(threads);
}

int AutoApplyThreads(int cores) { return cores < 4 ? 1 : std::min(cores / 2, 8); }

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}
namespace {

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

// --checkpoint_uri and --resume travel in proto string fields (the cluster
// view, SNAPSHOT requests), which hold only UTF-8; --resume=latest reads
// --checkpoint_uri.
void CheckCheckpointPlaces() {
  RequireUtf8("checkpoint_uri", FLAGS_checkpoint_uri);
  RequireUtf8("resume", FLAGS_resume);
  if (FLAGS_resume == "latest" && FLAGS_checkpoint_uri.empty()) {
    throw MakeError("--resume latest needs --checkpoint_uri (the store to take the latest from)");
  }
}

}  // namespace

double AutoOr(const char* flag, const std::string& value, double automatic) {
  if (value == "auto") return automatic;
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(number)) {
    throw MakeError("--", flag, " '", value, "' is not auto or a number");
  }
  return number;
}

void CheckNodeFlags() {
  RequireUtf8("advertise", FLAGS_advertise);
  RequireInRange("port", FLAGS_port, 0, 65535);
  RequireInRange("rank", FLAGS_rank, -1, kMaxWorkers - 1, "-1 (any free rank) or a rank");
  RequirePositive("register_timeout", FLAGS_register_timeout, kMaxSeconds);
  RequirePositive("heartbeat_interval", FLAGS_heartbeat_interval, kMaxSeconds);
  RequirePositive("scheduler_timeout", FLAGS_scheduler_timeout, kMaxSeconds);
  TransportFaultsFromFlags();
}

void CheckSchedulerFlags(const ClusterSize& size) {
  RequireInRange(size.servers_flag, size.servers, 1, kMaxServers);
  RequireInRange(size.workers_flag, size.workers, 1, kMaxWorkers);
  RequireInRange(
      "replication", FLAGS_replication, 0, size.servers - 1,
      "a range's backups are other servers, so fewer than --" + std::string(size.servers_flag));
  if (FLAGS_key_ranges != 0) {
    RequireInRange("key_ranges", FLAGS_key_ranges, size.servers, kMaxKeyRanges,
                   "0 (one per server) or at least --" + std::string(size.servers_flag) +
                       ": each server holds a range");
  }
  RequirePositive("heartbeat_timeout", FLAGS_heartbeat_timeout, kMaxSeconds);
  RequireInRange("heartbeat_relay_from", FLAGS_heartbeat_relay_from, 0, kMaxCount,
                 "workers (0: never)");
  RequirePositive("worker_replace_timeout", FLAGS_worker_replace_timeout, kMaxSeconds);
  RequirePositive("connect_timeout", FLAGS_connect_timeout, kMaxSeconds);
  RequireInRange("checkpoint_every", FLAGS_checkpoint_every, 0, kMaxCount,
                 "minibatches between checkpoints (0: between epochs)");
  RequireInRange("keep_checkpoints", FLAGS_keep_checkpoints, 0, kMaxCount, "0 keeps all");
  RequireInRange("checkpoint_full_every", FLAGS_checkpoint_full_every, 1, kMaxCount,
                 "checkpoints from one full checkpoint to the next");
  RequirePositive("preemption_grace", FLAGS_preemption_grace, kMaxSeconds);
  CheckCheckpointPlaces();
}

std::optional<ClusterSecret> ClusterSecretFromFlags() {
  std::string source = "--secret_file";
  std::string path = FLAGS_secret_file;
  if (path.empty()) {
    const char* from_environment = getenv("KEEL_SECRET_FILE");
    if (from_environment == nullptr || *from_environment == '\0') return std::nullopt;
    source = "KEEL_SECRET_FILE";
    path = from_environment;
  }
  try {
    RequireCurve();
    return ReadClusterSecretFile(path);
  } catch (const Error& e) {
    throw MakeError(source, ": ", e.what());
  }
}

NodeOptions NodeOptionsFromFlags(proto::Role role) {
  if (FLAGS_scheduler.empty()) throw MakeError("--scheduler HOST:PORT is required");
  ParseHostPort(FLAGS_scheduler, "--scheduler");
  CheckNodeFlags();
  NodeOptions options;
  options.role = role;
  options.scheduler = FLAGS_scheduler;
  options.bind_host = FLAGS_bind;
  options.port = FLAGS_port;
  options.advertise_host = FLAGS_advertise;
  options.register_timeout_s = FLAGS_register_timeout;
  options.heartbeat_interval_s = FLAGS_heartbeat_interval;
  options.rank = RankFromFlags();
  if (FLAGS_join && role != proto::SERVER) throw MakeError("--join is for servers");
  options.join = FLAGS_join;
  options.faults = TransportFaultsFromFlags();
  options.secret = ClusterSecretFromFlags();
  return options;
}

SchedulerOptions SchedulerOptionsFromFlags() {
  if (FLAGS_port == 0 && FLAGS_port_file.empty()) {
    throw MakeError("--port is required (or --port_file to pick a free port and report it)");
  }
  RequireInRange("port", FLAGS_port, 0, 65535);
  if (FLAGS_num_servers < 1 || FLAGS_num_workers < 1) {
    throw MakeError("a cluster needs at least one server and one worker (--num_servers ",
                    FLAGS_num_servers, ", --num_workers ", FLAGS_num_workers, ")");
  }
  CheckSchedulerFlags({FLAGS_num_servers, "num_servers", FLAGS_num_workers, "num_workers"});
  SchedulerOptions options;
  options.bind_host = FLAGS_bind;
  options.secret = ClusterSecretFromFlags();
  options.port = FLAGS_port;
  options.num_servers = FLAGS_num_servers;
  options.num_workers = FLAGS_num_workers;
  options.heartbeat_timeout_s = FLAGS_heartbeat_timeout;
  options.heartbeat_relay_from = FLAGS_heartbeat_relay_from;
  options.detect_closed_connections = FLAGS_detect_closed_connections;
  options.worker_replace_timeout_s = FLAGS_worker_replace_timeout;
  options.replication = FLAGS_replication;
  options.allow_data_loss = FLAGS_allow_data_loss;
  options.rebuild_wait_s = FLAGS_rebuild_wait;
  options.key_ranges = FLAGS_key_ranges;
  options.membership_log = FLAGS_membership_log;
  options.model_dir = FLAGS_model_dir;  // its timeline
  options.checkpoint.uri = FLAGS_checkpoint_uri;
  options.checkpoint.every = FLAGS_checkpoint_every;
  options.checkpoint.keep = FLAGS_keep_checkpoints;
  options.checkpoint.delta = FLAGS_checkpoint_delta;
  options.checkpoint.full_every = FLAGS_checkpoint_full_every;
  options.checkpoint.resume = FLAGS_resume;
  options.checkpoint.takes_over = FLAGS_takes_over_job;
  options.connect_timeout_s = FLAGS_connect_timeout;
  options.faults = TransportFaultsFromFlags();
  options.preemption_grace_s = FLAGS_preemption_grace;
  return options;
}

OptimizerOptions ServerOptimizerFromFlags() {
  OptimizerOptions optimizer;
  optimizer.name = FLAGS_optimizer;
  optimizer.learning_rate =
      static_cast<float>(AutoOr("learning_rate", FLAGS_learning_rate, kServerLearningRate));
  optimizer.l2 = static_cast<float>(AutoOr("wd", FLAGS_wd, 0));
  optimizer.l1 = static_cast<float>(AutoOr("l1", FLAGS_l1, 0));
  ValidateOptimizerOptions(optimizer);
  MakeOptimizer(optimizer);  // and the name
  return optimizer;
}

bool FlagsCheckedOnly() {
  if (!FLAGS_check_flags) return false;
  std::cout << "flags ok" << std::endl;
  return true;
}

bool CheckFlagsGiven() { return FLAGS_check_flags; }

std::string PortFileFromFlags() { return FLAGS_port_file; }

DrainTarget DrainTargetFromFlags() {
  if (FLAGS_scheduler.empty()) throw MakeError("--scheduler HOST:PORT is required");
  ParseHostPort(FLAGS_scheduler, "--scheduler");
  if (FLAGS_rank < 0) throw MakeError("--rank R is required: the server to drain");
  return {FLAGS_scheduler, FLAGS_rank};
}

}  // namespace keel
