// The command line's launch flags (launch_flags.cc): how `keel launch` and
// `keel bench kv` start a job's roles (locally, over ssh or under Slurm), and
// which of launch's arguments are for the roles. Every user of these flags
// includes this header; the flags are defined nowhere else.
#ifndef KEEL_CLI_LAUNCH_FLAGS_H_
#define KEEL_CLI_LAUNCH_FLAGS_H_

#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "cli/flag_group.h"
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

// The headings of `keel COMMAND --help` for this file's flags (cli/flag_group.h).
std::vector<FlagGroup> LaunchFlagGroups();

// The arguments of `keel launch` (after the command) that are for the roles:
// all but launch's own flags (these, where the cluster is, --check_flags and
// the fault schedule's) and their values.
std::vector<std::string> RoleFlags(const std::vector<std::string>& args);

// How `keel launch` shows its roles' output: from --progress, --verbose (or
// glog's --v above 0) and --log_dir, and whether standard output is a
// terminal. Throws Error naming a bad flag.
LaunchOutputOptions LaunchOutputOptionsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_LAUNCH_FLAGS_H_
