// `keel admin drain --scheduler HOST:PORT --rank R`: asks a running job's
// scheduler to drain a server (live resharding).
#include <iostream>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "scheduler/admin_client.h"

namespace keel {

int RunAdmin(const std::string& what) {
  if (what != "drain") throw MakeError("no admin command '", what, "' (keel admin drain)");
  const DrainTarget target = DrainTargetFromFlags();
  constexpr double kTimeoutS = 30;
  RequestDrain(target.scheduler, target.rank, ClusterSecretFromFlags(), kTimeoutS);
  std::cout << "server " << target.rank << " is being drained: its key ranges move to the other "
            << "servers while the job runs, then it leaves the cluster and exits\n";
  return 0;
}

}  // namespace keel
