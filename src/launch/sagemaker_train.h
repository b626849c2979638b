// `keel train`: one host's part of a job run the way SageMaker runs its
// built-in algorithms. Every host runs the same command; the host of index 0
// (SageMakerHosts: resourceconfig.json's first in sorted order, or the first
// of --hosts) leads (runs the scheduler on a fixed port); every host runs
// `servers_per_host` servers and `workers_per_host` workers, ranked by the
// host's index, which reach the scheduler by the leader's host name. The job's flags come from the
// contract (sagemaker_contract.h, sagemaker_hyperparameters.h).
//
// Standard output carries the roles' lines ("[worker 0] ...") and, on the
// leader, each decided epoch's figures as metric lines for SageMaker's
// MetricDefinitions (SageMakerMetricLines).
#ifndef KEEL_LAUNCH_SAGEMAKER_TRAIN_H_
#define KEEL_LAUNCH_SAGEMAKER_TRAIN_H_

#include <map>
#include <string>
#include <vector>

#include "launch/host_watch.h"
#include "launch/sagemaker_contract.h"
#include "scheduler/progress_record.h"

namespace keel {

// The scheduler's port on the leader unless given (--sagemaker_port); every
// host's keel train listens on the next one, for the others to see it is
// there (HostWatch).
constexpr int kSageMakerSchedulerPort = 9800;

// What this host runs.
struct SageMakerHostPlan {
  bool leads = false;
  std::string scheduler;                   // LEADER:PORT, as every role reaches it
  int servers = 0, workers = 0;            // in the whole job
  int first_server = 0, first_worker = 0;  // this host's first ranks
  int host_servers = 0, host_workers = 0;  // on this host
  std::vector<WatchedHost> others;         // every other host, to watch
  int watch_port = 0;                      // the scheduler's port + 1
};

// The plan of `hosts.current_host`. `addresses` maps host names to the
// address to reach them at (for hosts whose names do not resolve: tests);
// a host not in it is reached by its name.
SageMakerHostPlan PlanSageMakerHost(const SageMakerHosts& hosts, int servers_per_host,
                                    int workers_per_host, int port,
                                    const std::map<std::string, std::string>& addresses);

// The roles' channel flags from the contract: --train, --validation and
// --test (File channels: their folders under input/data, or for a Gzip
// channel `unpacked`/CHANNEL, where UnpackGzipChannels puts its files; a
// Pipe channel: a FIFO per pass, pipe:ROOT/input/data/train_{pass}, the
// first one read and kept in the worker's batch cache for the later passes,
// or, when its pass does not fit the cache, each epoch's own),
// --split_within_host for a ShardedByS3Key train channel (each host's files
// are its share, split among its workers) and --data_format when the
// channels give a ContentType. Throws Error naming what keel train does not
// read: channels of different ContentTypes, a Gzip Pipe channel, Pipe mode
// for validation or test or with more than one worker per host,
// ShardedByS3Key for validation or test.
std::vector<std::string> SageMakerChannelFlags(const SageMakerContract& contract,
                                               int workers_per_host, const std::string& unpacked);

// Unpacks every Gzip File channel's files into `unpacked`/CHANNEL (a folder
// of this host's, made if missing). Throws Error naming the channel and file.
void UnpackGzipChannels(const SageMakerContract& contract, const std::string& unpacked);

// Checks that every File channel's folder is there and holds a file. Throws
// Error naming the channel and its folder.
void CheckSageMakerChannelFiles(const SageMakerContract& contract);

// The metric lines of a progress record: for a decided epoch, one line per
// figure, "keel-metric epoch=E NAME=VALUE" (NAME as the job reports it:
// train:objective_loss, validation:roc_auc_score, validation:mse, ...); for
// the job's end, "keel-metric final NAME=VALUE"; none for the others. VALUE
// is printed with %.6g ("nan" when not finite).
std::vector<std::string> SageMakerMetricLines(const ProgressRecord& record);

// Waits until the leader's name (plan.scheduler's host) resolves, checking
// once a second. A pod of a Kubernetes Indexed Job may start before the
// leader's pod has an address and so a DNS name, and a role resolves the
// scheduler's name once, when it starts; on SageMaker every name resolves
// from the start and this returns at once. Throws Error naming the leader if
// it does not resolve within `timeout_s`.
void AwaitLeaderName(const SageMakerHostPlan& plan, double timeout_s);

struct SageMakerTrain {
  std::string self;  // the keel binary
  SageMakerContract contract;
  SageMakerHostPlan plan;
  std::vector<std::string> role_flags;  // every role's flags (the job's)
  double preemption_grace_s = 90;
  double timeout_s = 0;  // 0: none
  // A host other than the leader that is gone ends the job too (no
  // replicas); a host is gone after `host_grace_s` without an answer.
  bool lost_host_ends_job = true;
  double host_grace_s = 10;
};

// Starts this host's roles and waits for them, watching the other hosts
// (HostWatch, on plan.watch_port). On the leader a SIGTERM goes to the
// scheduler (the preemption checkpoint); elsewhere to this host's first role,
// which asks the scheduler for it. Returns 0 when every role succeeded;
// otherwise writes the first cause (a host gone, else the first error a role
// printed, else how a role ended) to the contract's failure file, prefixed
// by the host's name, and returns non-zero (ProcessGroup::Wait's codes, 1
// for a host gone). Throws Error if the watch port cannot be listened on.
int RunSageMakerTrain(const SageMakerTrain& train);

}  // namespace keel

#endif  // KEEL_LAUNCH_SAGEMAKER_TRAIN_H_
