#include "cli/train_flags.h"

#include <cstdlib>
#include <sstream>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/launch_flags.h"
#include "flags/flag_rules.h"
#include "launch/indexed_hosts.h"
#include "launch/sagemaker_contract.h"
#include "launch/sagemaker_train.h"

DEFINE_string(sagemaker_root, keel::kSageMakerRoot,
              "train: the folder SageMaker's contract is under (input/config, input/data, "
              "model, output, checkpoints)");
DEFINE_int32(sagemaker_port, keel::kSageMakerSchedulerPort,
             "train: the port of the scheduler on the leading host (index 0: the first of "
             "resourceconfig.json's hosts, sorted, or of --hosts); every host must give the same");
DEFINE_string(sagemaker_addresses, "",
              "train: NAME=ADDRESS,... the address of hosts whose names do not resolve here "
              "(tests on one machine: algo-1=127.0.0.1)");
DEFINE_string(hosts, "",
              "train: NAME,... the job's hosts in index order, in place of resourceconfig.json "
              "(a Kubernetes Indexed Job: keel-train-{0..2}.keel-train; one {FIRST..LAST} range "
              "per name, quoted from a shell); the first leads, none is sorted");
DEFINE_double(leader_resolve_timeout, 600,
              "train: seconds a host other than the leader waits for the leader's name to "
              "resolve before it starts its roles (a Kubernetes pod's name resolves once the pod "
              "has an address)");
DEFINE_string(current_host, "",
              "train: this host's name among --hosts; unset: the one at index "
              "$JOB_COMPLETION_INDEX (Kubernetes sets it in an Indexed Job's pods)");

namespace keel {

std::vector<FlagGroup> TrainFlagGroups() {
  return {{"sagemaker",
           {"sagemaker_root", "sagemaker_port", "sagemaker_addresses", "hosts", "current_host",
            "leader_resolve_timeout"}}};
}

TrainSettings TrainSettingsFromFlags() {
  TrainSettings settings;
  if (FLAGS_sagemaker_root.empty()) throw MakeError("--sagemaker_root must name a folder");
  settings.root = FLAGS_sagemaker_root;
  RequireInRange("sagemaker_port", FLAGS_sagemaker_port, 1, 65535);
  settings.port = FLAGS_sagemaker_port;
  std::istringstream items(FLAGS_sagemaker_addresses);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size()) {
      throw MakeError("--sagemaker_addresses: '", item, "' is not NAME=ADDRESS");
    }
    settings.addresses[item.substr(0, equals)] = item.substr(equals + 1);
  }
  if (!FLAGS_hosts.empty()) {
    const char* index = getenv(kJobCompletionIndexVariable);
    settings.hosts = IndexedHosts(ExpandHostNames(FLAGS_hosts, "--hosts"), FLAGS_current_host,
                                  index ? index : "");
  } else if (!FLAGS_current_host.empty()) {
    throw MakeError("--current_host names a host of --hosts, which is not given");
  }
  RequireInRange("leader_resolve_timeout", FLAGS_leader_resolve_timeout, 0.0, 86400.0);
  settings.leader_resolve_timeout_s = FLAGS_leader_resolve_timeout;
  CheckLaunchOwnFlags();  // --timeout
  settings.timeout_s = FLAGS_timeout;
  return settings;
}

HostWatchSettings HostWatchSettingsFromFlags() {
  HostWatchSettings settings;
  settings.lost_host_ends_job = FLAGS_replication == 0;
  settings.grace_s = FLAGS_heartbeat_timeout;
  return settings;
}

}  // namespace keel
