// Which flags each `keel` command takes, by group (flags/flag_group.h), and the
// check that reports a flag a command does not take.
//
// The groups are the flag families' tables (cli/*_flags.h) merged by heading.
// A flag defined in src/cli/ that no table names is in a group named after
// its file ("metrics" for metrics_flags.cc), which the roles, launch and
// bench take: a new family's flags work, and show in --help, before a table
// groups them. Flags defined outside src/cli/ (glog's logging flags, gflags'
// own) are taken by every command and listed by --helpfull only.
#ifndef KEEL_CLI_COMMAND_FLAGS_H_
#define KEEL_CLI_COMMAND_FLAGS_H_

#include <ostream>
#include <string>
#include <vector>

#include "flags/flag_arguments.h"
#include "flags/flag_group.h"

namespace keel {

struct CommandFlags {
  std::string usage;                // "keel launch --servers S --workers W [flags]"
  std::string summary;              // what the command does, one line
  std::vector<std::string> groups;  // headings of the groups it takes whole
  std::vector<std::string> flags;   // and single flags of other groups
  // Also takes, without listing them, every flag a role takes: one flagfile
  // serves every role of a job (the scheduler ignores the hyperparameters).
  bool takes_role_flags = false;
};

// The commands that take flags ("launch", "bench", ...), in usage order.
std::vector<std::string> CommandNames();

// The flags of `command` (one of CommandNames()). Throws Error for another.
CommandFlags FlagsOfCommand(const std::string& command);

// Every group of Keel's flags, in the order --help lists groups.
std::vector<FlagGroup> KeelFlagGroups();

// The groups `command` lists in --help, in that order: its groups whole and
// its single flags under their own groups' headings.
std::vector<FlagGroup> CommandFlagGroups(const std::string& command);

// Whether `command` takes the flag `name`.
bool CommandTakes(const std::string& command, const std::string& name);

// Reports each of `arguments` that `command` does not take: throws Error for
// one given on the command line, naming the commands that take it; writes a
// warning to `warnings` for one from a flagfile (a flagfile may serve several
// commands), which the command then ignores.
void CheckCommandTakes(const std::string& command, const std::vector<FlagArgument>& arguments,
                       std::ostream& warnings);

}  // namespace keel

#endif  // KEEL_CLI_COMMAND_FLAGS_H_
