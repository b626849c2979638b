// The command line's launch flags (launch_flags.cc): how `keel launch` and
// `keel bench kv` start a job's roles (locally, over ssh or under Slurm), and
// which of launch's arguments are for the roles. Every user of these flags
// includes this header; the flags are defined nowhere else.
#ifndef KEEL_CLI_LAUNCH_FLAGS_H_
#define KEEL_CLI_LAUNCH_FLAGS_H_

#include <gflags/gflags.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flags/flag_group.h"
#include "launch/role_output.h"

DECLARE_int32(servers);
DECLARE_int32(workers);
DECLARE_double(timeout);
DECLARE_string(hostfile);
DECLARE_string(ssh_options);
DECLARE_string(remote_keel);
DECLARE_bool(slurm);
DECLARE_int32(scheduler_port);
DECLARE_bool(report);
DECLARE_string(progress);
DECLARE_bool(verbose);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> LaunchFlagGroups();

// The arguments of `keel launch` (after the command) that are for the roles:
// all but launch's own flags (these, where the cluster is, --check_flags and
// the fault schedule's) and their values.
std::vector<std::string> RoleFlags(const std::vector<std::string>& args);

// `keel launch`'s own settings (the roles' flags go to them as they are).
struct LaunchSettings {
  int servers = 1;               // --servers
  int workers = 1;               // --workers
  std::string scheduler;         // --scheduler: an external scheduler's HOST:PORT, or ""
  int scheduler_port = 0;        // --scheduler_port
  double timeout_s = 0;          // --timeout
  std::string hostfile;          // --hostfile
  std::string ssh_options;       // --ssh_options
  std::string remote_keel;       // --remote_keel
  bool slurm = false;            // --slurm
  bool report = false;           // --report
  bool check_only = false;       // --check_flags
  std::string job;               // --job
  std::string model_dir;         // --model_dir
  std::string train;             // --train
  bool resumes = false;          // --resume is given
  std::string faults;            // --faults
  std::string event_log;         // --event_log
  uint64_t fault_seed = 1;       // --fault_seed
  double preemption_grace_s = 90;  // --preemption_grace
};
LaunchSettings LaunchSettingsFromFlags();

// Checks --scheduler_port and --timeout. Throws Error naming a bad one.
void CheckLaunchOwnFlags();

// Sets --model_dir in this process (after `keel launch` chose the default
// folder), so the roles' flags are checked here as the roles will see them.
void SetModelDirFlag(const std::string& model_dir);

// How `keel launch` shows its roles' output: from --progress, --verbose (or
// glog's --v above 0) and --log_dir, and whether standard output is a
// terminal. Throws Error naming a bad flag.
LaunchOutputOptions LaunchOutputOptionsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_LAUNCH_FLAGS_H_
