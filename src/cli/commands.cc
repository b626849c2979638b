#include "cli/commands.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "base/edit_distance.h"
#include "base/error.h"
#include "base/exit_status.h"
#include "cli/cluster_flags.h"
#include "cli/command_flags.h"
#include "cli/command_help.h"
#include "cli/completion.h"
#include "cli/job_flags.h"
#include "flags/flag_arguments.h"
#include "launch/remote.h"

namespace keel {
namespace {

// A command line's command and the operands before its flags.
struct Invocation {
  std::string command;
  std::string subcommand;  // keel bench WHAT, keel checkpoint WHAT
  std::string target;      // keel checkpoint WHAT URI
  int first_flag = 2;      // argv's index of the first flag

  // "keel bench kv", for messages.
  std::string Name() const {
    return "keel " + command + (subcommand.empty() ? "" : " " + subcommand);
  }
};

// `keel guard [--secret_from_stdin] -- COMMAND...`: no other flags.
int RunGuardCommand(int argc, char** argv) {
  const bool secret_from_stdin = argc > 2 && std::string(argv[2]) == "--secret_from_stdin";
  const int separator = secret_from_stdin ? 3 : 2;
  if (argc < separator + 2 || std::string(argv[separator]) != "--") {
    std::cerr << "usage: keel guard [--secret_from_stdin] -- COMMAND [ARGS...]\n";
    return 2;
  }
  return ExitCodeOf("keel guard", [&] {
    return RunGuard(std::vector<std::string>(argv + separator + 1, argv + argc), secret_from_stdin);
  });
}

// The commands that take operands before their flags: a subcommand (keel
// bench WHAT), a target (keel report DIR) or both (keel checkpoint WHAT URI),
// and the usage a missing operand prints.
struct OperandRule {
  const char* command;
  bool subcommand;
  bool target;
  const char* usage;
};
constexpr OperandRule kOperandRules[] = {
    {"bench", true, false,
     "keel bench: say what to measure: keel bench "
     "kv|zmq|parse|backend|train|checkpoint|admission|reshard|control [flags]"},
    {"admin", true, false, "keel admin: keel admin drain --scheduler HOST:PORT --rank R"},
    {"report", false, true, "keel report: keel report MODEL_DIR [--out FILE]"},
    {"checkpoint", true, true, "keel checkpoint: keel checkpoint ls|show|verify URI"},
};

// Reads the command and its operands (kOperandRules) into *invocation.
// Returns 0, or 2 after saying what is missing.
int ReadOperands(int argc, char** argv, Invocation* invocation) {
  invocation->command = argv[1];
  for (const OperandRule& rule : kOperandRules) {
    if (invocation->command != rule.command) continue;
    invocation->first_flag = 2 + rule.subcommand + rule.target;
    for (int i = 2; i < invocation->first_flag; ++i) {
      if (i >= argc || argv[i][0] == '-') {
        std::cerr << rule.usage << "\n";
        return 2;
      }
    }
    if (rule.subcommand) invocation->subcommand = argv[2];
    if (rule.target) invocation->target = argv[invocation->first_flag - 1];
  }
  return 0;
}

// Checks the flags of argv's arguments after the operands, and of their
// flagfiles, before gflags sets them (flags/flag_arguments.h): every flag
// exists and the command takes it. Returns 0, or 1 after saying what is wrong.
int CheckFlags(int argc, char** argv, const Invocation& invocation) {
  return ExitCodeOf(invocation.Name(), [&] {
    const std::vector<std::string> args(argv + invocation.first_flag, argv + argc);
    CheckCommandTakes(invocation.command, ReadFlagArguments(args), std::cerr);
    return 0;
  });
}

// Sets the flags from argv's arguments after the operands. Returns 0, or 2
// after naming an argument that is not a flag.
int ParseFlags(int argc, char** argv, const Invocation& invocation) {
  std::vector<char*> rest = {argv[0]};
  for (int i = invocation.first_flag; i < argc; ++i) rest.push_back(argv[i]);
  int rest_count = static_cast<int>(rest.size());
  char** rest_argv = rest.data();
  gflags::SetUsageMessage(KeelUsage());
  gflags::SetVersionString(VersionText());
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::ParseCommandLineFlags(&rest_count, &rest_argv, true);
  if (rest_count > 1) {
    std::cerr << invocation.Name() << ": unexpected argument '" << rest_argv[1] << "'\n";
    return 2;
  }
  return 0;
}

// Runs the command; throws Error if it fails.
int Dispatch(const Invocation& invocation, int argc, char** argv) {
  const std::string& command = invocation.command;
  if (command == "scheduler") return RunScheduler();
  if (command == "server") return RunServer(std::vector<std::string>(argv, argv + argc));
  if (command == "worker") return RunWorker(std::vector<std::string>(argv, argv + argc));
  if (command == "launch") {
    return RunLaunch(std::vector<std::string>(argv + invocation.first_flag, argv + argc));
  }
  if (command == "train") return RunTrain();
  if (CheckFlagsGiven()) {
    throw MakeError("--check_flags applies to scheduler, server, worker, launch and train");
  }
  if (command == "bench") {
    return RunBench(invocation.subcommand,
                    std::vector<std::string>(argv + invocation.first_flag, argv + argc));
  }
  if (command == "predict") return RunPredict();
  if (command == "serve") return RunServe();
  if (command == "datagen") return RunDatagen();
  if (command == "keygen") return RunKeygen();
  if (command == "admin") return RunAdmin(invocation.subcommand);
  if (command == "checkpoint")
    return RunCheckpointCommand(invocation.subcommand, invocation.target);
  if (command == "report") return RunReport(invocation.target, OutFromFlags());
  throw MakeError("no command '", command, "'");
}

// Says that `command` is not one of keel's, and the nearest that is.
int UnknownCommand(const std::string& command) {
  const std::string nearest = NearestName(command, CommandNames());
  std::cerr << "keel: unknown command '" << command << "'"
            << (nearest.empty() ? "" : " (did you mean " + nearest + "?)") << "\n\n"
            << KeelUsage();
  return 2;
}

// Prints `keel COMMAND --help` or --helpfull if argv asks for it (before the
// operands or after them); returns whether it did.
bool PrintHelpIfAsked(int argc, char** argv, const std::string& command) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "--helpshort" || arg == "-helpshort") {
      PrintCommandHelp(command, std::cout);
      return true;
    }
    if (arg == "--helpfull" || arg == "-helpfull") {
      PrintFullHelp(command, std::cout);
      return true;
    }
  }
  return false;
}

}  // namespace

int RunCommandLine(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    std::cout << KeelUsage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "version" || command == "--version") {
    std::cout << VersionText();
    return 0;
  }
  if (command == "guard") return RunGuardCommand(argc, argv);
  if (command == "completion") return RunCompletion(argc, argv);
  const std::vector<std::string> commands = CommandNames();
  if (std::find(commands.begin(), commands.end(), command) == commands.end()) {
    return UnknownCommand(command);
  }
  if (PrintHelpIfAsked(argc, argv, command)) return 0;
  Invocation invocation;
  if (const int usage_error = ReadOperands(argc, argv, &invocation)) return usage_error;
  if (const int flag_error = CheckFlags(argc, argv, invocation)) return flag_error;
  if (const int flag_error = ParseFlags(argc, argv, invocation)) return flag_error;
  google::InitGoogleLogging(argv[0]);
  ReportUncaughtExceptionsAs(invocation.Name());
  return ExitCodeOf(invocation.Name(), [&] { return Dispatch(invocation, argc, argv); });
}

}  // namespace keel
