// `keel completion bash`: a bash completion script for keel's commands, their
// operands and the flags each command takes, made from the same tables as
// `keel COMMAND --help` (cli/command_flags.h), so the two never disagree.
// The Debian package installs its output as
// /usr/share/bash-completion/completions/keel.
#ifndef KEEL_CLI_COMPLETION_H_
#define KEEL_CLI_COMPLETION_H_

#include <string>

namespace keel {

// The script: `source <(keel completion bash)` completes `keel` in the shell.
std::string BashCompletionScript();

// `keel completion SHELL`: prints the script for bash; 2 after saying so for
// another shell.
int RunCompletion(int argc, char** argv);

}  // namespace keel

#endif  // KEEL_CLI_COMPLETION_H_
