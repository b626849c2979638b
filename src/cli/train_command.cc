// `keel train`: this host's part of a job run as SageMaker runs a training
// container (launch/sagemaker_train.h): the contract read and every flag
// checked here, before any role starts; a failure's reason in
// output/failure.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "cli/cluster_flags.h"
#include "cli/command_flags.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "cli/launch_flags.h"
#include "cli/train_flags.h"
#include "launch/local_cluster.h"
#include "launch/sagemaker_contract.h"
#include "launch/sagemaker_hyperparameters.h"
#include "launch/sagemaker_train.h"

namespace keel {
namespace {

// Whether Keel's roles take --`name` (a hyperparameter may name any of
// them): one of Keel's own flags (not gflags' --flagfile or glog's).
bool IsRoleFlag(const std::string& name) {
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info) ||
      info.filename.find("src/cli/") == std::string::npos) {
    return false;
  }
  return CommandTakes("worker", name) || CommandTakes("server", name) ||
         CommandTakes("scheduler", name);
}

// Sets the roles' flags in this process, so that they are checked here as
// the roles will read them. Throws Error naming a value gflags refuses.
void SetRoleFlagsHere(const std::vector<std::string>& role_flags, const std::string& path) {
  for (const std::string& flag : role_flags) {
    const size_t equals = flag.find('=');
    const std::string name = flag.substr(2, equals - 2);
    const std::string value = flag.substr(equals + 1);
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      throw MakeError(path, ": hyperparameter ", name, " '", value, "' is not a valid value");
    }
  }
}

// Whether `folder` holds a committed checkpoint to resume from (its LATEST).
bool HoldsCheckpoint(const std::string& folder) {
  return access((folder + "/LATEST").c_str(), F_OK) == 0;
}

// The train channel's files against its ContentType (or, without one, what
// they show), before anything starts, as `keel launch` checks a local
// channel. Throws Error naming the channel, its ContentType and the file.
void CheckTrainDataFormat(const SageMakerContract& contract, const std::string& unpacked) {
  const SageMakerChannel* train = contract.Channel("train");
  if (train->mode == SageMakerChannel::InputMode::kPipe) return;  // read once, by the worker
  const std::string folder = train->gzip ? unpacked + "/train" : contract.ChannelFolder("train");
  try {
    std::string note;
    ResolveDataFormat(folder, ReaderOptionsFromFlags(), false, &note);
    if (!note.empty()) LOG(INFO) << note;
  } catch (const Error& e) {
    throw MakeError(
        "channel train",
        train->data_format.empty() ? "" : " (its ContentType reads as " + train->data_format + ")",
        ": ", e.what());
  }
}

// Where this run unpacks its Gzip channels: a folder of its own under
// $TMPDIR (else /tmp), removed when the run ends.
std::string UnpackFolder() {
  const char* tmp = getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/keel-train-" + std::to_string(getpid()) +
         "-unpacked";
}

int Train(const TrainSettings& settings, const std::string& unpacked, std::string* host) {
  const SageMakerContract contract =
      ReadSageMakerContract(settings.root, settings.hosts ? &*settings.hosts : nullptr);
  *host = contract.hosts.current_host;
  if (settings.hosts) {
    std::string listing;
    for (const std::string& name : contract.hosts.hosts) {
      listing += (listing.empty() ? "" : ",") + name;
    }
    LOG(INFO) << "hosts from --hosts, in index order (index 0 leads): " << listing
              << "; this host: " << contract.hosts.current_host << ", index "
              << contract.hosts.CurrentIndex() << " of " << contract.hosts.hosts.size();
  }
  const std::string path = contract.ConfigFile("hyperparameters.json");
  const TrainHyperparameters hyperparameters =
      TranslateHyperparameters(contract.hyperparameters, path, IsRoleFlag);
  for (const Hyperparameter& reserved : hyperparameters.reserved) {
    LOG(INFO) << "SageMaker's hyperparameter " << reserved.name << "=" << reserved.value
              << " (reserved for SageMaker: noted, not used)";
  }
  std::vector<std::string> role_flags;
  if (hyperparameters.job.empty()) role_flags.push_back("--job=linear_learner");
  role_flags.insert(role_flags.end(), hyperparameters.role_flags.begin(),
                    hyperparameters.role_flags.end());
  for (const std::string& flag :
       SageMakerChannelFlags(contract, hyperparameters.workers_per_host, unpacked)) {
    role_flags.push_back(flag);
  }
  role_flags.push_back("--model_dir=" + contract.ModelFolder());
  const std::string checkpoints = hyperparameters.checkpoint_dir.empty()
                                      ? contract.CheckpointFolder()
                                      : hyperparameters.checkpoint_dir;
  role_flags.push_back("--checkpoint_uri=" + checkpoints);
  if (HoldsCheckpoint(checkpoints)) {
    role_flags.push_back("--resume=latest");
    LOG(INFO) << checkpoints << " holds a checkpoint: the job resumes from it";
  }
  SetRoleFlagsHere(role_flags, path);
  SageMakerTrain train;
  train.plan =
      PlanSageMakerHost(contract.hosts, hyperparameters.servers_per_host,
                        hyperparameters.workers_per_host, settings.port, settings.addresses);
  CheckLaunchFlags(
      {train.plan.servers, "servers_per_host", train.plan.workers, "workers_per_host"});
  CheckSageMakerChannelFiles(contract);
  if (FlagsCheckedOnly()) return 0;
  UnpackGzipChannels(contract, unpacked);
  CheckTrainDataFormat(contract, unpacked);
  MakeDirectories(contract.ModelFolder());
  MakeDirectories(checkpoints);
  train.self = SelfPath();
  train.contract = contract;
  train.role_flags = role_flags;
  // keel train's own --preemption_grace, or the hyperparameter's: the roles' too.
  train.preemption_grace_s = LaunchSettingsFromFlags().preemption_grace_s;
  std::ostringstream grace;
  grace << "--preemption_grace=" << train.preemption_grace_s;
  train.role_flags.push_back(grace.str());
  train.timeout_s = settings.timeout_s;
  const HostWatchSettings watch = HostWatchSettingsFromFlags();
  train.lost_host_ends_job = watch.lost_host_ends_job;
  train.host_grace_s = watch.grace_s;
  if (!train.plan.leads) AwaitLeaderName(train.plan, settings.leader_resolve_timeout_s);
  LOG(INFO) << "host " << contract.hosts.current_host << " ("
            << (train.plan.leads ? "the leader: scheduler, " : "") << train.plan.host_servers
            << " server(s), " << train.plan.host_workers << " worker(s)); scheduler at "
            << train.plan.scheduler;
  return RunSageMakerTrain(train);
}

}  // namespace

int RunTrain() {
  const TrainSettings settings = TrainSettingsFromFlags();
  unlink((settings.root + "/output/failure").c_str());  // a former run's
  std::string host;
  const std::string unpacked = UnpackFolder();
  struct RemoveAtTheEnd {
    std::string folder;
    ~RemoveAtTheEnd() {
      std::error_code ignored;
      std::filesystem::remove_all(folder, ignored);
    }
  } remove{unpacked};
  try {
    return Train(settings, unpacked, &host);
  } catch (const Error& e) {
    WriteSageMakerFailure(settings.root, (host.empty() ? "" : host + ": ") + e.what());
    throw;
  }
}

}  // namespace keel
