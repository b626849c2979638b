// `keel admin drain --scheduler HOST:PORT --rank R`: asks a running job's
// scheduler to drain a server (live resharding).
#include <gflags/gflags.h>

#include <iostream>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "kv/van.h"
#include "scheduler/admin_client.h"

namespace keel {

int RunAdmin(const std::string& what) {
  if (what != "drain") throw MakeError("no admin command '", what, "' (keel admin drain)");
  if (FLAGS_scheduler.empty()) throw MakeError("--scheduler HOST:PORT is required");
  ParseHostPort(FLAGS_scheduler, "--scheduler");
  if (FLAGS_rank < 0) throw MakeError("--rank R is required: the server to drain");
  constexpr double kTimeoutS = 30;
  RequestDrain(FLAGS_scheduler, FLAGS_rank, ClusterSecretFromFlags(), kTimeoutS);
  std::cout << "server " << FLAGS_rank << " is being drained: its key ranges move to the other "
            << "servers while the job runs, then it leaves the cluster and exits\n";
  return 0;
}

}  // namespace keel
