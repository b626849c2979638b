// The command line's flags of `keel train` (train_flags.cc): where SageMaker's
// contract is, the leader's scheduler port, addresses for host names that
// do not resolve, and the hosts when no resourceconfig.json gives them (a
// Kubernetes Indexed Job: launch/indexed_hosts.h). Every user of these flags includes this header;
// the flags are defined nowhere else.
#ifndef KEEL_CLI_TRAIN_FLAGS_H_
#define KEEL_CLI_TRAIN_FLAGS_H_

#include <gflags/gflags.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flags/flag_group.h"
#include "launch/sagemaker_contract.h"

DECLARE_string(sagemaker_root);
DECLARE_int32(sagemaker_port);
DECLARE_string(sagemaker_addresses);
DECLARE_string(hosts);
DECLARE_string(current_host);
DECLARE_double(leader_resolve_timeout);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> TrainFlagGroups();

// `keel train`'s own settings.
struct TrainSettings {
  std::string root;                              // --sagemaker_root
  int port = 0;                                  // --sagemaker_port
  std::map<std::string, std::string> addresses;  // --sagemaker_addresses, by host name
  double timeout_s = 0;                          // --timeout
  double leader_resolve_timeout_s = 600;         // --leader_resolve_timeout
  // --hosts, and this host by --current_host or else $JOB_COMPLETION_INDEX;
  // none: resourceconfig.json gives them.
  std::optional<SageMakerHosts> hosts;
};

// Reads and checks them. Throws Error naming a bad flag (--current_host
// without --hosts; a --hosts list, or this host's place in it, that
// IndexedHosts refuses).
TrainSettings TrainSettingsFromFlags();

// How keel train watches the other hosts, from the roles' flags (as the
// hyperparameters set them): a host gone ends the job when no replica
// carries its key ranges (--replication 0); a host is gone after
// --heartbeat_timeout without an answer.
struct HostWatchSettings {
  bool lost_host_ends_job = true;
  double grace_s = 10;
};
HostWatchSettings HostWatchSettingsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_TRAIN_FLAGS_H_
