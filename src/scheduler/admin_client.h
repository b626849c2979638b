// The admin client: asks a running job's scheduler to act on the cluster
// (`keel admin drain`). It is no member of the cluster: over CURVE its
// connection needs the cluster secret like any node's, which is what lets it
// in.
#ifndef KEEL_SCHEDULER_ADMIN_CLIENT_H_
#define KEEL_SCHEDULER_ADMIN_CLIENT_H_

#include <optional>
#include <string>

#include "kv/cluster_secret.h"

namespace keel {

// Asks the scheduler at `scheduler` ("host:port") to drain server `rank`
// (Scheduler::Drain). Returns once it agreed: the drain has started (it
// ends when the server's key ranges have moved and it has left). Throws
// Error with the scheduler's refusal, or if it does not answer within
// `timeout_s`.
void RequestDrain(const std::string& scheduler, int rank,
                  const std::optional<ClusterSecret>& secret, double timeout_s);

}  // namespace keel

#endif  // KEEL_SCHEDULER_ADMIN_CLIENT_H_
