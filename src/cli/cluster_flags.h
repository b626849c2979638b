// The command line's cluster flags (cluster_flags.cc): where a node is and how
// it reaches the scheduler, the scheduler's settings, the servers' optimizer,
// the worker's job and --check_flags. Every user of these flags includes this
// header; the flags are defined nowhere else.
#ifndef KEEL_CLI_CLUSTER_FLAGS_H_
#define KEEL_CLI_CLUSTER_FLAGS_H_

#include <gflags/gflags.h>

#include <optional>
#include <string>

#include "flags/flag_group.h"
#include "kv/cluster_secret.h"
#include "kv/node.h"
#include "kv/optimizer.h"
#include "scheduler/scheduler.h"

// Where a node is and how it reaches the scheduler.
DECLARE_string(scheduler);
DECLARE_string(bind);
DECLARE_string(advertise);
DECLARE_int32(port);
DECLARE_int32(rank);
DECLARE_bool(join);
DECLARE_int32(key_ranges);
DECLARE_string(rank_env);
DECLARE_double(register_timeout);
DECLARE_double(heartbeat_interval);
DECLARE_double(scheduler_timeout);
DECLARE_string(secret_file);
DECLARE_double(preemption_grace);

// The scheduler.
DECLARE_int32(num_servers);
DECLARE_int32(num_workers);
DECLARE_double(heartbeat_timeout);
DECLARE_int32(heartbeat_relay_from);
DECLARE_bool(detect_closed_connections);
DECLARE_double(worker_replace_timeout);
DECLARE_int32(replication);
DECLARE_string(membership_log);
DECLARE_string(checkpoint_uri);
DECLARE_int32(checkpoint_every);
DECLARE_int32(keep_checkpoints);
DECLARE_bool(takes_over_job);
DECLARE_bool(checkpoint_delta);
DECLARE_int32(checkpoint_full_every);
DECLARE_string(resume);
DECLARE_string(port_file);
DECLARE_bool(progress_records);
DECLARE_double(connect_timeout);
DECLARE_string(server_apply_threads);
DECLARE_bool(check_flags);

// The servers' optimizer (the training jobs read it too). --learning_rate,
// --wd and --l1 are `auto` or a number; the training jobs resolve auto per job
// and optimizer (HyperparametersFromFlags), kv_bench and the servers' default
// optimizer as kServerLearningRate, 0 and 0.
DECLARE_string(optimizer);
DECLARE_string(learning_rate);
DECLARE_string(wd);
DECLARE_string(l1);

// The worker's job: linear_learner, factorization_machines, kv_bench or exact_sum.
DECLARE_string(job);
DECLARE_string(model_dir);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> ClusterFlagGroups();

// A node of `role` as the flags place it. Throws Error naming a bad flag.
NodeOptions NodeOptionsFromFlags(proto::Role role);

// Every server's and worker's node flags but --scheduler (--port, --rank,
// the timeouts, the transport faults): what NodeOptionsFromFlags checks and
// `keel launch` checks before it starts anything. Throws Error naming the
// flag, its value and the rule.
void CheckNodeFlags();

// A cluster's size and the flags it came from, for messages.
struct ClusterSize {
  int servers;
  const char* servers_flag;  // "num_servers" (scheduler), "servers" (launch)
  int workers;
  const char* workers_flag;
};

// The scheduler's flags but where it listens, for a cluster of `size`: each
// count within its bound (flag_rules.h), --replication below the servers,
// positive timeouts, --checkpoint_every and --keep_checkpoints not negative,
// --resume=latest with a --checkpoint_uri. What SchedulerOptionsFromFlags
// checks and `keel launch` checks before it starts anything. Throws Error
// naming the flag, its value and the rule.
void CheckSchedulerFlags(const ClusterSize& size);
// The cluster secret named by --secret_file, else by $KEEL_SECRET_FILE; none
// if neither is set. Throws Error naming the flag (or the variable) and the
// file if it cannot be read, is not private (mode 0600) or is malformed, or
// if this libzmq has no CURVE.
std::optional<ClusterSecret> ClusterSecretFromFlags();

// The scheduler's settings. Throws Error naming a bad flag.
SchedulerOptions SchedulerOptionsFromFlags();

// What --learning_rate=auto is for tables the job does not specify (kv_bench's).
constexpr double kServerLearningRate = 0.01;

// The number a flag that accepts `auto` holds, or `automatic` for auto.
// Throws Error naming the flag (--NAME) if it is neither.
double AutoOr(const char* flag, const std::string& value, double automatic);

// --server_apply_threads: a number, or for auto AutoApplyThreads(UsableCores()).
// Throws Error naming the flag and its value if it is neither auto nor in
// 1..KVServer::kMaxApplyThreads.
int ServerApplyThreadsFromFlags();
// The apply threads of a server that may run on `cores` cores: 1 below 4
// cores (the receive thread, the van's and the other roles on the machine
// need them), else half of them, at most 8.
int AutoApplyThreads(int cores);
// The cores this process may run on (its CPU affinity), at least 1.
int UsableCores();

// The servers' optimizer (and --scheduler_timeout, which only servers use).
// Throws Error naming a bad flag.
OptimizerOptions ServerOptimizerFromFlags();

// Whether --check_flags asks only to check the flags: then prints "flags ok"
// (the flags were checked before) and returns true, for
// `if (FlagsCheckedOnly()) return 0;`.
bool FlagsCheckedOnly();

// Whether --check_flags is given (without printing anything).
bool CheckFlagsGiven();

// --port_file: where the scheduler or the inference service writes the port
// it listens on ("-": standard output; "": nowhere).
std::string PortFileFromFlags();

// `keel admin drain`'s target: the scheduler (--scheduler) and the server
// (--rank). Throws Error naming a flag that is missing or malformed.
struct DrainTarget {
  std::string scheduler;
  int rank = -1;
};
DrainTarget DrainTargetFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_CLUSTER_FLAGS_H_
