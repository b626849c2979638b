// LaunchFaults: a fault schedule acting on a local cluster's processes
// (launch/local_cluster.h's hooks): the schedule's transport flags for each
// role, the cgroups a partition needs, and the runner that fires the faults
// and records every process event (on the terminal, in --event_log and in
// the launcher's timeline). Used from the thread that runs the cluster.
#ifndef KEEL_FAULTS_LAUNCH_FAULTS_H_
#define KEEL_FAULTS_LAUNCH_FAULTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "faults/fault_runner.h"
#include "faults/fault_schedule.h"
#include "faults/partition.h"
#include "kv/cluster_secret.h"
#include "launch/local_cluster.h"

namespace keel {

// Faults act on the processes a launch starts: not on a scheduler given with
// --scheduler (`scheduler`, "" if the launch starts its own). A partition
// needs root (faults/partition.h). Throws Error naming the item.
void CheckFaultTargets(const FaultSchedule& faults, const std::string& scheduler);

class LaunchFaults : public LocalClusterHooks {
 public:
  // Acts out `schedule` (ParseFaultSchedule's, for a cluster of `servers`
  // and `workers`; may be empty); with a partition in it, checks that
  // partitions are possible here and makes the cgroups. `event_log` may be empty; `seed` seeds the
  // schedule's random choices; `secret` goes with a drain request. Throws
  // Error naming the problem.
  LaunchFaults(FaultSchedule schedule, int servers, int workers, const std::string& event_log,
               uint64_t seed, std::optional<ClusterSecret> secret);

  std::string CgroupFolder() const override;
  // Starts the runner when there is anything to fire or record.
  void Attach(ProcessGroup* group, TimelineWriter* timeline) override;
  std::vector<std::string> RoleFlags(const std::string& role, int rank) const override;
  void ClusterKnown(const std::string& self, const std::vector<std::string>& common,
                    const std::string& scheduler) override;
  void Finish(int code) override;
  void Detach() override;

 private:
  const FaultSchedule schedule_;
  const int servers_;
  const int workers_;
  const std::string event_log_;
  const uint64_t seed_;
  const std::optional<ClusterSecret> secret_;
  // Outlives the group: its cgroups are removed once the children are gone.
  std::unique_ptr<Partitioner> partitioner_;
  std::unique_ptr<FaultRunner> runner_;  // between Attach and Detach
};

}  // namespace keel

#endif  // KEEL_FAULTS_LAUNCH_FAULTS_H_
