// `keel launch`: a job's roles started together, on this machine (a local
// cluster), over ssh from a hostfile, or as the tasks of a Slurm step.
#include <glog/logging.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/fault_flags.h"
#include "cli/job_flags.h"
#include "cli/launch_flags.h"
#include "cli/metrics_flags.h"
#include "cli/role_flags.h"
#include "faults/launch_faults.h"
#include "flags/flag_rules.h"
#include "io/storage.h"
#include "kv/van.h"
#include "launch/local_cluster.h"
#include "launch/remote.h"

namespace keel {
namespace {

std::vector<std::string> SplitWords(const std::string& text) {
  std::istringstream words(text);
  std::vector<std::string> result;
  for (std::string word; words >> word;) result.push_back(word);
  return result;
}

// `keel launch --report`: the job's report, whatever the job's outcome (a
// failed job's report shows how far it got). A report that cannot be made
// is said, not fatal: the job's exit code stands.
void ReportAtTheEnd(const std::string& model_dir) {
  try {
    const std::string path = WriteReport(model_dir, "");
    std::cout << "report: " << path << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "keel launch: no report: " << e.what() << std::endl;
  }
}

// `keel launch --slurm`: this task's role. The workers are the step's other
// tasks (SLURM_NTASKS - 1 - servers; the scheduler's task checks their
// count), so one stands for them here.
int LaunchSlurmTask(const LaunchSettings& settings, const std::vector<std::string>& role_flags) {
  CheckLaunchFlags({settings.servers, "servers", 1, "workers"});
  if (FlagsCheckedOnly()) return 0;
  return RunSlurmTask(SelfPath(), settings.servers, settings.scheduler_port, role_flags);
}

// `keel launch --hostfile`: the roles over ssh.
int LaunchOverSsh(const LaunchSettings& settings, const std::vector<std::string>& role_flags,
                  const std::string& model_dir) {
  SshLaunch launch;
  launch.hosts = ParseHostfile(ReadFile(settings.hostfile), settings.hostfile);
  ClusterSize size{0, "hostfile (servers=)", 0, "hostfile (workers=)"};
  for (const HostEntry& host : launch.hosts) {
    size.servers += host.servers;
    size.workers += host.workers;
  }
  CheckLaunchFlags(size);
  launch.output = LaunchOutputOptionsFromFlags();  // checks --progress
  if (FlagsCheckedOnly()) return 0;
  launch.role_flags = role_flags;
  launch.ssh_options = SplitWords(settings.ssh_options);
  launch.remote_keel = settings.remote_keel.empty() ? SelfPath() : settings.remote_keel;
  char folder[4096];
  if (getcwd(folder, sizeof(folder))) launch.remote_folder = folder;
  launch.scheduler_port = settings.scheduler_port;
  launch.timeout_s = settings.timeout_s;
  launch.secret = JobSecret(role_flags);
  launch.show_progress = true;
  const int code = RunSshLaunch(launch);
  // The model folder must be readable here (s3://, or a shared folder).
  if (settings.report) ReportAtTheEnd(model_dir);
  return code;
}

// A training job's (or exact_sum's) model folder when --model_dir is not
// given: the default (DefaultModelDir), added to `role_flags` and to this
// process's flags (the roles' flags are checked here) and announced; "" when
// the job names its own (or writes nothing there). *made: whether it made the
// folder (then a launch that fails early removes it again, if still empty).
std::string ChooseModelDir(const LaunchSettings& settings, std::vector<std::string>* role_flags,
                           bool* made) {
  *made = false;
  const bool writes = IsTrainingJob(settings.job) || settings.job == "exact_sum";
  if (!writes || !settings.model_dir.empty()) return "";
  std::string model_dir = DefaultModelDir(settings.job);
  // On this machine a folder named by the time is made here, so that two
  // launches in the same second take two folders ("-2" after the time, and
  // on). Under Slurm every task names the same folder (by the Slurm job,
  // which a requeued job resumes into); over ssh it is on worker 0's host.
  if (!settings.slurm && settings.hostfile.empty() && !settings.check_only &&
      DefaultModelDirNamedByTime()) {
    const std::string base = model_dir;
    for (int n = 2; mkdir(model_dir.c_str(), 0755) != 0; ++n) {
      if (errno != EEXIST || n > 1000) {
        throw MakeError("cannot make the model folder ", model_dir, ": ", std::strerror(errno),
                        " (give --model_dir)");
      }
      model_dir = base + "-" + std::to_string(n);
    }
    *made = true;
  }
  role_flags->push_back("--model_dir=" + model_dir);
  SetModelDirFlag(model_dir);
  if (!settings.check_only) {
    std::cout << "keel launch: no --model_dir given: the model goes to " << model_dir << std::endl;
  }
  return model_dir;
}

// A local training channel's data format against --data_format, before
// anything starts (ResolveDataFormat; the workers settle it again: a channel
// on S3 is theirs to read). A channel that is not there is left to the
// workers to report.
void CheckLocalDataFormat(const LaunchSettings& settings) {
  const std::string& train = settings.train;
  if (!IsTrainingJob(settings.job) || train.empty() || train.rfind("pipe:", 0) == 0 ||
      IsStorageUri(train) || access(train.c_str(), R_OK) != 0) {
    return;
  }
  std::string note;
  ResolveDataFormat(train, ReaderOptionsFromFlags(), false, &note);
  // The workers' own line says it too, but only with --verbose.
  if (!note.empty()) std::cout << "keel launch: " << note << std::endl;
}

// `keel launch`: the roles on this machine; `model_dir` is the job's model
// folder (given, or the one ChooseModelDir picked; "" for none).
int LaunchLocally(const LaunchSettings& settings, const std::vector<std::string>& role_flags,
                  const std::string& model_dir) {
  LocalCluster cluster;
  cluster.model_dir = model_dir;
  cluster.servers = settings.servers;
  cluster.workers = settings.workers;
  cluster.scheduler = settings.scheduler;
  cluster.timeout_s = settings.timeout_s;
  cluster.role_flags = role_flags;
  cluster.fresh_timeline = !settings.resumes;
  if (settings.report) cluster.report = ReportAtTheEnd;
  cluster.show_progress = true;
  cluster.metrics = LaunchMetricsOn(role_flags);
  cluster.metrics_bind = MetricsBindFromFlags();
  cluster.preemption_grace_s = settings.preemption_grace_s;
  CheckLaunchFlags({cluster.servers, "servers", cluster.workers, "workers"});
  cluster.output = LaunchOutputOptionsFromFlags();  // checks --progress
  CheckLocalClusterSize(cluster);
  if (!cluster.scheduler.empty()) ParseHostPort(cluster.scheduler, "--scheduler");
  FaultSchedule schedule = ParseFaultSchedule(settings.faults, cluster.servers, cluster.workers);
  CheckFaultTargets(schedule, cluster.scheduler);
  if (FlagsCheckedOnly()) return 0;
  CheckLocalDataFormat(settings);
  LaunchFaults faults(std::move(schedule), cluster.servers, cluster.workers, settings.event_log,
                      settings.fault_seed, ClusterSecretFromFlags());
  return RunLocalCluster(cluster, &faults);
}

}  // namespace

// Every role reads the same flags.
void CheckLaunchFlags(const ClusterSize& size) {
  CheckLaunchOwnFlags();
  CheckSchedulerFlags(size);
  CheckNodeFlags();
  ServersOptimizerFromFlags();
  ServerApplyThreadsFromFlags();
  JobTablesFromFlags();
  CheckWorkerJobFlags();
  RequestRetryFromFlags();
  CheckMetricsFlags();
}

int RunLaunch(const std::vector<std::string>& args) {
  const LaunchSettings settings = LaunchSettingsFromFlags();
  std::vector<std::string> role_flags = RoleFlags(args);
  if (settings.slurm && !settings.hostfile.empty())
    throw MakeError("give --slurm or --hostfile, not both");
  bool made = false;
  const std::string chosen = ChooseModelDir(settings, &role_flags, &made);
  const std::string model_dir = chosen.empty() ? settings.model_dir : chosen;
  if (settings.report && model_dir.empty()) {
    throw MakeError(
        "--report needs --model_dir: the report is drawn from what the job records "
        "there");
  }
  int code = 0;
  if (settings.slurm) {
    code = LaunchSlurmTask(settings, role_flags);
  } else if (!settings.hostfile.empty()) {
    code = LaunchOverSsh(settings, role_flags, model_dir);
  } else {
    // A job that failed before writing anything leaves no empty folder
    // behind (rmdir removes only an empty one).
    try {
      code = LaunchLocally(settings, role_flags, model_dir);
    } catch (...) {
      if (made) rmdir(chosen.c_str());
      throw;
    }
    if (code != 0 && made) rmdir(chosen.c_str());
  }
  if (code == 0 && !chosen.empty() && !settings.check_only) {
    std::cout << "keel launch: " << (IsTrainingJob(settings.job) ? "the model" : "the report")
              << " is in " << chosen << (settings.hostfile.empty() ? "" : " on worker 0's host")
              << std::endl;
  }
  return code;
}

}  // namespace keel
