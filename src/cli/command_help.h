// `keel COMMAND --help` and `--helpfull`: a command's flags by group, each
// with its default and what it does; gflags' own help would list every flag
// of every command by source file and exit 1.
#ifndef KEEL_CLI_COMMAND_HELP_H_
#define KEEL_CLI_COMMAND_HELP_H_

#include <ostream>
#include <string>

namespace keel {

// `keel --help`: what keel is, its commands with their usage, and where to
// read more.
const char* KeelUsage();

// The usage of `command` (one of CommandNames(), cli/command_flags.h), then
// the groups of flags it takes (CommandFlagGroups), each flag with its
// default and its description.
void PrintCommandHelp(const std::string& command, std::ostream& out);

// PrintCommandHelp, then every other flag: other commands' groups, then
// glog's logging flags and gflags' own.
void PrintFullHelp(const std::string& command, std::ostream& out);

}  // namespace keel

#endif  // KEEL_CLI_COMMAND_HELP_H_
