#include "cli/completion.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command_flags.h"

namespace keel {
namespace {

// The commands without flags of their own, beside CommandNames().
const char* const kOtherCommands[] = {"version", "guard", "completion", "help"};

// Each command's first operand: what `keel COMMAND` is asked to do.
struct Operands {
  const char* command;
  const char* words;
};
const Operands kOperands[] = {
    {"bench", "kv zmq parse backend train checkpoint admission reshard control"},
    {"checkpoint", "ls show verify"},
    {"admin", "drain"},
    {"completion", "bash"},
};

// "--a --b ...": the flags `command` lists in its --help, with --help,
// --helpfull and --flagfile, which every command takes.
std::string FlagWords(const std::string& command) {
  std::string words = "--help --helpfull --flagfile";
  for (const FlagGroup& group : CommandFlagGroups(command)) {
    for (const std::string& flag : group.flags) words += " --" + flag;
  }
  return words;
}

}  // namespace

std::string BashCompletionScript() {
  std::ostringstream out;
  out << "# bash completion for keel, made by `keel completion bash`.\n"
         "_keel() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} command=${COMP_WORDS[1]} words=\n"
         "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
         "    words=\"";
  std::string commands;
  for (const std::string& command : CommandNames()) commands += command + " ";
  for (const char* command : kOtherCommands) commands += std::string(command) + " ";
  commands.pop_back();
  out << commands
      << "\"\n"
         "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "    return\n"
         "  fi\n"
         "  if [ \"$COMP_CWORD\" -eq 2 ] && [[ $cur != -* ]]; then\n"
         "    case $command in\n";
  for (const Operands& operands : kOperands) {
    out << "      " << operands.command << ") words=\"" << operands.words << "\" ;;\n";
  }
  out << "    esac\n"
         "    if [ -n \"$words\" ]; then\n"
         "      COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "      return\n"
         "    fi\n"
         "  fi\n"
         "  if [[ $cur == -* && $cur != *=* ]]; then\n"
         "    case $command in\n";
  for (const std::string& command : CommandNames()) {
    out << "      " << command << ") words=\"" << FlagWords(command) << "\" ;;\n";
  }
  out << "    esac\n"
         "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "    # A flag takes its value after '='.\n"
         "    [ ${#COMPREPLY[@]} -ne 1 ] || COMPREPLY=(\"${COMPREPLY[0]}=\")\n"
         "    compopt -o nospace 2>/dev/null\n"
         "    return\n"
         "  fi\n"
         "  # Operands and flag values: file names.\n"
         "  COMPREPLY=($(compgen -f -- \"${cur#*=}\"))\n"
         "}\n"
         "complete -o filenames -F _keel keel\n";
  return out.str();
}

int RunCompletion(int argc, char** argv) {
  if (argc == 3 && std::string(argv[2]) == "bash") {
    std::cout << BashCompletionScript();
    return 0;
  }
  std::cerr << "usage: keel completion bash (prints a bash completion script: "
               "source <(keel completion bash))\n";
  return 2;
}

}  // namespace keel
