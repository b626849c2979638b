#include "cli/command_flags.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "cli/bench_flags.h"
#include "cli/cluster_flags.h"
#include "cli/exact_sum_flags.h"
#include "cli/fault_flags.h"
#include "cli/job_flags.h"
#include "cli/key_cache_flags.h"
#include "cli/launch_flags.h"
#include "cli/serve_flags.h"
#include "cli/train_flags.h"
#include "cli/wire_flags.h"

namespace keel {
namespace {

// The order of --help's headings; a heading not here (a new family's) comes
// after these, alphabetically.
const std::vector<std::string> kHeadingOrder = {"job",
                                                "data",
                                                "compute",
                                                "cluster",
                                                "node",
                                                "scheduler",
                                                "server",
                                                "checkpoints",
                                                "faults",
                                                "resends",
                                                "key caching",
                                                "wire precision",
                                                "consistency",
                                                "optimizer",
                                                "learning rate schedule",
                                                "loss and metrics",
                                                "normalization",
                                                "initialization",
                                                "benchmark",
                                                "exact sum",
                                                "predict",
                                                "serve",
                                                "sagemaker",
                                                "datagen",
                                                "output",
                                                "checking"};

// Headings of commands that are not roles: a role does not take their flags.
const std::set<std::string> kNotRoleHeadings = {"predict", "serve", "sagemaker", "datagen",
                                                "output"};

// Every family's table.
std::vector<FlagGroup> FamilyTables() {
  std::vector<FlagGroup> groups;
  for (const auto& family :
       {ClusterFlagGroups(), LaunchFlagGroups(), FaultFlagGroups(), KeyCacheFlagGroups(),
        WireFlagGroups(), JobFlagGroups(), BenchFlagGroups(), ExactSumFlagGroups(),
        ServeFlagGroups(), TrainFlagGroups()}) {
    groups.insert(groups.end(), family.begin(), family.end());
  }
  return groups;
}

// Whether gflags' `filename` of a flag is one of Keel's command-line files.
bool IsKeelFile(const std::string& filename) {
  return filename.find("src/cli/") != std::string::npos;
}

// The group of a flag no table names: its file's name without the folder,
// ".cc" and "_flags" ("metrics" for src/cli/metrics_flags.cc).
std::string HeadingOfFile(const std::string& filename) {
  std::string name = filename.substr(filename.rfind('/') + 1);
  for (const std::string suffix : {".cc", "_flags"}) {
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      name.resize(name.size() - suffix.size());
    }
  }
  return name;
}

size_t HeadingRank(const std::string& heading) {
  return std::find(kHeadingOrder.begin(), kHeadingOrder.end(), heading) - kHeadingOrder.begin();
}

bool HeadingBefore(const FlagGroup& a, const FlagGroup& b) {
  const size_t rank_a = HeadingRank(a.heading), rank_b = HeadingRank(b.heading);
  return rank_a != rank_b ? rank_a < rank_b : a.heading < b.heading;
}

// The flags of `groups` by name, to their heading.
std::map<std::string, std::string> HeadingsByFlag(const std::vector<FlagGroup>& groups) {
  std::map<std::string, std::string> headings;
  for (const FlagGroup& group : groups) {
    for (const std::string& flag : group.flags) headings[flag] = group.heading;
  }
  return headings;
}

// The headings of every group a role takes.
std::vector<std::string> RoleHeadings() {
  std::vector<std::string> headings;
  for (const FlagGroup& group : KeelFlagGroups()) {
    if (!kNotRoleHeadings.count(group.heading)) headings.push_back(group.heading);
  }
  return headings;
}

// The headings of the groups made of flags no table names (a new family's).
std::vector<std::string> NewFamilyHeadings() {
  std::set<std::string> grouped;
  for (const FlagGroup& group : FamilyTables()) {
    grouped.insert(group.flags.begin(), group.flags.end());
  }
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::set<std::string> headings;
  for (const auto& flag : flags) {
    if (IsKeelFile(flag.filename) && !grouped.count(flag.name)) {
      headings.insert(HeadingOfFile(flag.filename));
    }
  }
  return {headings.begin(), headings.end()};
}

// A role's listed groups, and a new family's.
std::vector<std::string> RoleGroups(std::vector<std::string> groups) {
  for (const std::string& heading : NewFamilyHeadings()) groups.push_back(heading);
  return groups;
}

// "--epochs is for keel launch, keel worker": the commands that list `name`.
std::string CommandsListing(const std::string& name) {
  std::string listing;
  for (const std::string& command : CommandNames()) {
    for (const FlagGroup& group : CommandFlagGroups(command)) {
      if (std::count(group.flags.begin(), group.flags.end(), name)) {
        listing += (listing.empty() ? "keel " : ", keel ") + command;
      }
    }
  }
  return listing;
}

}  // namespace

std::vector<std::string> CommandNames() {
  return {"scheduler", "server", "worker", "launch",     "train",  "predict", "serve",
          "datagen",   "bench",  "keygen", "checkpoint", "report", "admin"};
}

CommandFlags FlagsOfCommand(const std::string& command) {
  if (command == "scheduler") {
    return {"keel scheduler --port P --num_servers S --num_workers W [flags]",
            "runs a cluster's scheduler",
            RoleGroups({"scheduler", "node", "checkpoints", "checking"}),
            {},
            true};
  }
  if (command == "server") {
    return {"keel server --scheduler HOST:PORT [flags]",
            "runs a parameter server",
            RoleGroups({"job", "node", "server", "optimizer", "consistency", "faults",
                        "key caching", "checking"}),
            {},
            true};
  }
  if (command == "worker") {
    return {"keel worker --scheduler HOST:PORT --job JOB [flags]",
            "runs a worker: the job (training, kv_bench or exact_sum) on its share of the data",
            RoleGroups({"job", "data", "compute", "node", "consistency", "loss and metrics",
                        "optimizer", "learning rate schedule", "normalization", "initialization",
                        "faults", "resends", "key caching", "wire precision", "benchmark",
                        "exact sum", "checking"}),
            {},
            true};
  }
  if (command == "launch") {
    return {"keel launch --servers S --workers W --job JOB --train DATA [flags]",
            "runs a job's scheduler, servers and workers on this machine, over ssh "
            "(--hostfile) or as the tasks of a Slurm step (--slurm)",
            RoleHeadings(),
            {},
            true};
  }
  if (command == "train") {
    return {"keel train [--sagemaker_root /opt/ml]",
            "runs this host's part of a job as SageMaker runs a training container: "
            "hyperparameters, hosts and channels from the contract under the root, the model "
            "to model/, a failure's reason to output/failure (docs/guide/sagemaker.md)",
            {"sagemaker"},
            {"timeout", "preemption_grace", "check_flags"},
            false};
  }
  if (command == "predict") {
    return {
        "keel predict --model_dir D --data F --out P [flags]",
        "scores a file with a trained model",
        {"predict", "output"},
        {"model_dir", "data_format", "libsvm_zero_based", "skip_bad_records", "device", "threads",
         "job", "predictor_type", "num_classes", "num_factors", "loss", "f_beta", "accuracy_top_k"},
        false};
  }
  if (command == "serve") {
    return {
        "keel serve --model_dir D|s3://... [--serve_port 8080] [--serve_bind 127.0.0.1] [flags]",
        "answers SageMaker's inference contract for a trained model: GET /ping, POST "
        "/invocations (CSV, JSON, JSON Lines, recordIO-protobuf), GET /metrics; SIGHUP "
        "reloads the model, SIGTERM stops after the requests in flight",
        {"serve"},
        {"model_dir", "device", "port_file"},
        false};
  }
  if (command == "datagen") {
    return {"keel datagen --model linear|fm --rows N --out DIR [flags]",
            "writes synthetic training, validation and test data from a planted model",
            {"datagen", "output"},
            {"seed", "num_factors", "predictor_type", "num_classes", "data_format"},
            false};
  }
  if (command == "bench") {
    return {"keel bench kv|zmq|parse|backend|train|checkpoint|admission|reshard|control [flags]",
            "measures push/pull through a cluster, raw ZeroMQ, parsing, a compute backend, or a "
            "training job launched here (where each epoch's time went, bytes on the wire per "
            "example), or the scheduler under N "
            "simulated members (control)",
            {"benchmark", "cluster"},
            {"data", "data_format", "libsvm_zero_based", "device", "threads", "key_ranges",
             "key_cache", "server_apply_threads"},
            true};
  }
  if (command == "keygen") {
    return {
        "keel keygen --out FILE", "writes a new cluster secret, mode 0600", {"output"}, {}, false};
  }
  if (command == "checkpoint") {
    return {"keel checkpoint ls|show|verify URI",
            "lists, shows or verifies checkpoints",
            {},
            {},
            false};
  }
  if (command == "admin") {
    return {"keel admin drain --scheduler HOST:PORT --rank R [--secret_file F]",
            "asks a running job's scheduler to drain server R: its key ranges move to the other "
            "servers while the job trains, then it leaves the cluster and exits",
            {},
            {"scheduler", "rank", "secret_file"},
            false};
  }
  if (command == "report") {
    return {"keel report MODEL_DIR [--out FILE]",
            "writes a job's HTML report from what its roles recorded in MODEL_DIR",
            {"output"},
            {},
            false};
  }
  throw MakeError("no command '", command, "'");
}

std::vector<FlagGroup> KeelFlagGroups() {
  std::map<std::string, FlagGroup> by_heading;
  std::set<std::string> grouped;
  for (const FlagGroup& group : FamilyTables()) {
    FlagGroup& merged = by_heading[group.heading];
    merged.heading = group.heading;
    merged.flags.insert(merged.flags.end(), group.flags.begin(), group.flags.end());
    grouped.insert(group.flags.begin(), group.flags.end());
  }
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);  // sorted by file, then name
  for (const auto& flag : flags) {
    if (!IsKeelFile(flag.filename) || grouped.count(flag.name)) continue;
    FlagGroup& group = by_heading[HeadingOfFile(flag.filename)];
    group.heading = HeadingOfFile(flag.filename);
    group.flags.push_back(flag.name);
  }
  std::vector<FlagGroup> groups;
  for (auto& [heading, group] : by_heading) groups.push_back(std::move(group));
  std::sort(groups.begin(), groups.end(), HeadingBefore);
  return groups;
}

std::vector<FlagGroup> CommandFlagGroups(const std::string& command) {
  const CommandFlags taken = FlagsOfCommand(command);
  // The command's own groups first, in its order; then the single flags' groups.
  std::vector<FlagGroup> groups;
  for (const FlagGroup& group : KeelFlagGroups()) {
    FlagGroup listed{group.heading, {}};
    const bool whole = std::count(taken.groups.begin(), taken.groups.end(), group.heading) > 0;
    for (const std::string& flag : group.flags) {
      if (whole || std::count(taken.flags.begin(), taken.flags.end(), flag)) {
        listed.flags.push_back(flag);
      }
    }
    if (!listed.flags.empty()) groups.push_back(std::move(listed));
  }
  const auto own_rank = [&](const FlagGroup& group) {
    return std::find(taken.groups.begin(), taken.groups.end(), group.heading) -
           taken.groups.begin();
  };
  std::stable_sort(groups.begin(), groups.end(), [&](const FlagGroup& a, const FlagGroup& b) {
    return own_rank(a) < own_rank(b);
  });
  return groups;
}

bool CommandTakes(const std::string& command, const std::string& name) {
  const std::map<std::string, std::string> headings = HeadingsByFlag(KeelFlagGroups());
  const auto heading = headings.find(name);
  if (heading == headings.end()) return true;  // glog's and gflags' flags
  const CommandFlags taken = FlagsOfCommand(command);
  if (std::count(taken.groups.begin(), taken.groups.end(), heading->second) ||
      std::count(taken.flags.begin(), taken.flags.end(), name)) {
    return true;
  }
  return taken.takes_role_flags && !kNotRoleHeadings.count(heading->second);
}

void CheckCommandTakes(const std::string& command, const std::vector<FlagArgument>& arguments,
                       std::ostream& warnings) {
  for (const FlagArgument& argument : arguments) {
    if (CommandTakes(command, argument.name)) continue;
    const std::string listing = CommandsListing(argument.name);
    const std::string is_for = listing.empty() ? "" : " (it is for " + listing + ")";
    if (!argument.origin.empty()) {
      warnings << "keel " << command << ": " << argument.origin << ": --" << argument.name
               << " does nothing in keel " << command << is_for << "; ignored" << std::endl;
      continue;
    }
    throw MakeError("--", argument.name, " is not a flag of keel ", command, is_for, "; keel ",
                    command, " --help lists its flags");
  }
}

}  // namespace keel
