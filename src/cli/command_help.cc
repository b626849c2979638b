#include "cli/command_help.h"

#include <gflags/gflags.h>

#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "cli/command_flags.h"

namespace keel {
namespace {

constexpr char kUsage[] =
    "keel: a parameter-server training runtime\n"
    "\n"
    "usage: keel <command> [--flags]\n"
    "\n"
    "commands:\n"
    "  scheduler --port P --num_servers S --num_workers W   run the scheduler\n"
    "  server --scheduler HOST:P                            run a parameter server\n"
    "  worker --scheduler HOST:P --job JOB                  run a worker\n"
    "  launch --servers S --workers W [job flags]           run a local cluster\n"
    "         [--checkpoint_uri URI [--checkpoint_every N] [--resume latest|URI]]\n"
    "  launch --hostfile FILE [job flags]                   run the job over ssh "
    "(docs/OPERATIONS.md)\n"
    "  launch --slurm --servers S [job flags]               one task of an srun step\n"
    "  train [--sagemaker_root /opt/ml]                     this host's part of a job under\n"
    "                                                       SageMaker's training contract\n"
    "  predict --model_dir D --data F --out P|-             score a file with a trained model\n"
    "  serve --model_dir D [--serve_port 8080]              answer SageMaker's inference "
    "contract\n"
    "  datagen --model linear|fm --rows N --out DIR         synthetic data from a planted model\n"
    "  bench kv|zmq|parse|backend|train|checkpoint|admission|reshard|control\n"
    "                                                       measure push/pull, ZeroMQ, parsing,\n"
    "                                                       a compute backend (--device, "
    "--threads),\n"
    "                                                       a training job's stages (--data),\n"
    "                                                       full against delta checkpoints,\n"
    "                                                       a table's memory with admission,\n"
    "                                                       pushes' stalls while ranges move\n"
    "                                                       the scheduler under N members\n"
    "  checkpoint ls|show|verify URI                        list, show or verify checkpoints\n"
    "  report MODEL_DIR [--out FILE]                        a job's HTML report with plots\n"
    "  keygen --out FILE                                    a new cluster secret (--secret_file)\n"
    "  admin drain --scheduler HOST:P --rank R              move a server's key ranges off it\n"
    "                                                       while the job runs; it then leaves\n"
    "  version                                              version, commit, build facts\n"
    "  completion bash                                      a bash completion script\n"
    "                                                       (source <(keel completion bash))\n"
    "\n"
    "  guard -- COMMAND...                                  run COMMAND; stop it when stdin "
    "closes\n"
    "\n"
    "keel <command> --help lists the command's flags by group (job, data, cluster,\n"
    "checkpoints, faults, ...); --helpfull every flag. --flagfile=FILE reads flags from FILE\n"
    "(--name=value lines); an unknown flag there or on the command line is an error.\n"
    "--check_flags checks a role's flags (and the job's) without starting it.\n";


constexpr size_t kWidth = 100;      // the lines' length
constexpr size_t kTextColumn = 34;  // where descriptions start

// "--name=default" as a user would write it ("" for an empty string).
std::string FlagWithDefault(const gflags::CommandLineFlagInfo& flag) {
  const std::string value =
      flag.type == "string" && flag.default_value.empty() ? "\"\"" : flag.default_value;
  return "  --" + flag.name + "=" + value;
}

// `text`'s words in lines of at most kWidth (a longer word alone on its
// line), each but the first indented to `indent` (the first continues
// `start`, which is at most `indent` long).
std::string Wrap(const std::string& start, const std::string& text, size_t indent = kTextColumn) {
  std::istringstream words(text);
  std::string result, line = start + std::string(indent - start.size(), ' ');
  bool line_empty = true;
  for (std::string word; words >> word;) {
    if (!line_empty && line.size() + 1 + word.size() > kWidth) {
      result += line + "\n";
      line = std::string(indent, ' ');
      line_empty = true;
    }
    line += (line_empty ? "" : " ") + word;
    line_empty = false;
  }
  line.erase(line.find_last_not_of(' ') + 1);
  return result + line + "\n";
}

// A flag's lines: its name and default, then its description from
// kTextColumn on (on the next line when the name is too long).
std::string FlagLines(const gflags::CommandLineFlagInfo& flag) {
  const std::string name = FlagWithDefault(flag);
  if (name.size() + 2 <= kTextColumn) return Wrap(name, flag.description);
  return name + "\n" + Wrap("", flag.description);
}

void PrintGroup(const std::string& heading, const std::vector<std::string>& flags,
                std::ostream& out) {
  out << "\n" << heading << ":\n";
  for (const std::string& name : flags) {
    gflags::CommandLineFlagInfo flag;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &flag)) out << FlagLines(flag);
  }
}

// The heading of a flag Keel does not define, by its file.
std::string ForeignHeading(const std::string& filename) {
  if (filename.find("gflags") != std::string::npos) return "flag parsing (gflags)";
  return "logging (glog)";
}

}  // namespace

void PrintCommandHelp(const std::string& command, std::ostream& out) {
  const CommandFlags taken = FlagsOfCommand(command);
  out << "usage: " << taken.usage << "\n" << Wrap("", taken.summary + ".", 0);
  for (const FlagGroup& group : CommandFlagGroups(command)) {
    PrintGroup(group.heading, group.flags, out);
  }
  out << "\n";
  if (taken.takes_role_flags && command != "launch") {
    out << Wrap("",
                "It also takes every other flag of the job's roles (keel launch --help lists "
                "them), so one flagfile serves every role.",
                0);
  }
  out << Wrap("",
              "keel " + command +
                  " --helpfull lists every flag, logging flags too. --flagfile=FILE reads flags "
                  "from FILE (--name=value lines, # comments); an unknown flag there or here is "
                  "an error.",
              0);
}

void PrintFullHelp(const std::string& command, std::ostream& out) {
  PrintCommandHelp(command, out);
  std::set<std::string> listed;
  for (const FlagGroup& group : CommandFlagGroups(command)) {
    listed.insert(group.flags.begin(), group.flags.end());
  }
  std::set<std::string> keel_flags;
  for (const FlagGroup& group : KeelFlagGroups()) {
    keel_flags.insert(group.flags.begin(), group.flags.end());
    std::vector<std::string> rest;
    for (const std::string& flag : group.flags) {
      if (!listed.count(flag)) rest.push_back(flag);
    }
    if (!rest.empty()) PrintGroup("other commands' " + group.heading + " flags", rest, out);
  }
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::map<std::string, std::vector<std::string>> foreign;
  for (const auto& flag : flags) {
    if (!keel_flags.count(flag.name)) foreign[ForeignHeading(flag.filename)].push_back(flag.name);
  }
  for (const auto& [heading, names] : foreign) PrintGroup(heading, names, out);
}

const char* KeelUsage() { return kUsage; }

}  // namespace keel
