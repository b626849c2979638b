#include "cli/launch_flags.h"

#include <glog/logging.h>

#include <set>

#include "cli/cluster_flags.h"
#include "cli/fault_flags.h"
#include "cli/job_flags.h"
#include "flags/flag_rules.h"

DEFINE_int32(servers, 1, "launch/bench: number of servers");
DEFINE_int32(workers, 1, "launch/bench: number of workers");
DEFINE_double(timeout, 0,
              "launch/bench/train: stop everything after this many seconds (0: never)");
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
DEFINE_bool(report, false,
            "launch: at the end, write the job's HTML report (keel report) to "
            "<model_dir>/report.html (./report.html for an s3:// --model_dir) and print its path");
DEFINE_string(progress, "auto",
              "launch: how the job's progress shows: bar (one line per epoch, rewritten in "
              "place), lines (a plain line every few seconds and at each epoch's end), none, or "
              "auto (bar on a terminal, else lines)");
DEFINE_bool(verbose, false,
            "launch: show every line of every role (by default: progress, warnings, errors and "
            "the closing summary; --log_dir keeps every line)");

namespace keel {

std::vector<FlagGroup> LaunchFlagGroups() {
  return {{"cluster",
           {"servers", "workers", "timeout", "hostfile", "ssh_options", "remote_keel", "slurm",
            "scheduler_port"}},
          {"terminal and report", {"progress", "verbose", "report"}}};
}
namespace {

// Flags that belong to `keel launch` itself rather than to the roles.
const std::set<std::string> kLaunchFlags = {
    "servers",  "workers",     "timeout",     "scheduler",      "num_servers", "num_workers",
    "bind",     "port",        "port_file",   "advertise",      "rank",        "rank_env",
    "hostfile", "ssh_options", "remote_keel", "scheduler_port", "slurm",       "check_flags",
    "report",   "progress",    "verbose",     "noverbose",      "log_dir",     "progress_records",
    "noprogress_records",      "metrics"};
const std::set<std::string> kBooleanLaunchFlags = {
    "slurm",   "noslurm",   "check_flags",      "nocheck_flags",     "report", "noreport",
    "verbose", "noverbose", "progress_records", "noprogress_records"};

}  // namespace

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

LaunchSettings LaunchSettingsFromFlags() {
  LaunchSettings settings;
  settings.servers = FLAGS_servers;
  settings.workers = FLAGS_workers;
  settings.scheduler = FLAGS_scheduler;
  settings.scheduler_port = FLAGS_scheduler_port;
  settings.timeout_s = FLAGS_timeout;
  settings.hostfile = FLAGS_hostfile;
  settings.ssh_options = FLAGS_ssh_options;
  settings.remote_keel = FLAGS_remote_keel;
  settings.slurm = FLAGS_slurm;
  settings.report = FLAGS_report;
  settings.check_only = FLAGS_check_flags;
  settings.job = FLAGS_job;
  settings.model_dir = FLAGS_model_dir;
  settings.train = FLAGS_train;
  settings.resumes = !FLAGS_resume.empty();
  settings.faults = FLAGS_faults;
  settings.event_log = FLAGS_event_log;
  settings.fault_seed = FLAGS_fault_seed;
  settings.preemption_grace_s = FLAGS_preemption_grace;
  return settings;
}

void CheckLaunchOwnFlags() {
  RequireInRange("scheduler_port", FLAGS_scheduler_port, 0, 65535);
  RequireInRange("timeout", FLAGS_timeout, 0.0, kMaxSeconds, "0 waits for ever");
}

void SetModelDirFlag(const std::string& model_dir) { FLAGS_model_dir = model_dir; }

LaunchOutputOptions LaunchOutputOptionsFromFlags() {
  LaunchOutputOptions options;
  options.width = TerminalWidth();
  options.mode = ProgressModeFromFlag(FLAGS_progress, options.width > 0);
  options.verbose = FLAGS_verbose || FLAGS_v > 0;
  options.log_dir = FLAGS_log_dir;
  return options;
}

}  // namespace keel
