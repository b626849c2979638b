// The roles' liveness and readiness rules.
#include "metrics/role_probes.h"

#include <algorithm>
#include <string>

namespace keel {
namespace {

// "" if `age_s` is within the stall bound for a loop of `period_s`.
std::string Stalled(const char* loop, double age_s, double period_s,
                    double min_stall_s = kMinStallSeconds) {
  const double bound = std::max(min_stall_s, kStalledPeriods * period_s);
  if (age_s <= bound) return "";
  return std::string(loop) + " has not run for " + std::to_string(age_s) + " s";
}

// "" once the node is registered and has a view; else why not.
std::string NotInView(const Node* node) {
  if (node->removed()) return "dropped from the cluster view; joining again";
  if (node->id() < 0 || node->rank() < 0) return "registering with the scheduler";
  if (!node->view() || node->epoch() == 0) return "waiting for the cluster view";
  return "";
}

}  // namespace

Probe SchedulerLive(const Scheduler* scheduler) {
  return [scheduler] {
    return Stalled("the failure-detection loop", scheduler->status().monitor_age_s, 1);
  };
}

Probe SchedulerReady(const Scheduler* scheduler) {
  return [scheduler]() -> std::string {
    const SchedulerStatus status = scheduler->status();
    if (status.epoch > 0) return "";
    int servers = 0, workers = 0;
    for (const auto& member : status.members) {
      (member.role == proto::SERVER ? servers : workers) += 1;
    }
    return "no cluster view yet: " + std::to_string(servers) + " of " +
           std::to_string(status.expected_servers) + " server(s) and " + std::to_string(workers) +
           " of " + std::to_string(status.expected_workers) + " worker(s) registered";
  };
}

Probe NodeLive(const Node* node, double heartbeat_interval_s, double min_stall_s) {
  return [node, heartbeat_interval_s, min_stall_s] {
    return Stalled("the heartbeat loop", node->SecondsSinceHeartbeatRound(), heartbeat_interval_s,
                   min_stall_s);
  };
}

Probe ServerReady(const Node* node, const KVServer* server) {
  return [node, server]() -> std::string {
    if (std::string why = NotInView(node); !why.empty()) return why;
    if (std::string failure = server->failure(); !failure.empty()) return failure;
    if (!server->serving()) {
      return std::to_string(server->ranges_waiting()) +
             " key range(s) still waiting for their rows";
    }
    return "";
  };
}

Probe WorkerReady(const Node* node) {
  return [node] { return NotInView(node); };
}

}  // namespace keel
