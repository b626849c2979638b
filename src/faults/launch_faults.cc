#include "faults/launch_faults.h"

#include <unistd.h>

#include <algorithm>

#include "base/error.h"

namespace keel {

void CheckFaultTargets(const FaultSchedule& faults, const std::string& scheduler) {
  if (const FaultItem* partition = faults.FirstPartition()) {
    CheckPartitionsPossible(geteuid(), partition->text);
  }
  for (const FaultItem& item : faults.items) {
    if (!scheduler.empty() && item.after_start) {
      throw MakeError("--faults item '", item.text, "': start+ counts from the first progress ",
                      "record of the scheduler this launch starts, and the scheduler at ",
                      scheduler, " (--scheduler) is not");
    }
    const bool names_scheduler =
        item.role == "scheduler" ||
        std::count(item.side_a.begin(), item.side_a.end(), "scheduler") > 0 ||
        std::count(item.side_b.begin(), item.side_b.end(), "scheduler") > 0;
    if (!scheduler.empty() && names_scheduler) {
      throw MakeError("--faults item '", item.text, "': the scheduler at ", scheduler,
                      " (--scheduler) is not started by this launch, so it cannot be ",
                      item.action == FaultAction::kStop        ? "stopped"
                      : item.action == FaultAction::kPartition ? "partitioned"
                                                               : "killed or restarted",
                      " from here");
    }
  }
}

LaunchFaults::LaunchFaults(FaultSchedule schedule, int servers, int workers,
                           const std::string& event_log, uint64_t seed,
                           std::optional<ClusterSecret> secret)
    : schedule_(std::move(schedule)),
      servers_(servers),
      workers_(workers),
      event_log_(event_log),
      seed_(seed),
      secret_(std::move(secret)) {
  if (const FaultItem* partition = schedule_.FirstPartition()) {
    CheckPartitionsPossible(geteuid(), partition->text);
    partitioner_ = std::make_unique<Partitioner>();
  }
}

std::string LaunchFaults::CgroupFolder() const {
  return partitioner_ ? partitioner_->folder() : "";
}

void LaunchFaults::Attach(ProcessGroup* group, TimelineWriter* timeline) {
  if (!schedule_.empty() || !event_log_.empty() || timeline->enabled()) {
    runner_ = std::make_unique<FaultRunner>(group, schedule_, servers_, workers_, event_log_, seed_,
                                            timeline, partitioner_.get());
  }
}

std::vector<std::string> LaunchFaults::RoleFlags(const std::string& role, int rank) const {
  return schedule_.TransportFlags(role, rank);
}

void LaunchFaults::ClusterKnown(const std::string& self, const std::vector<std::string>& common,
                                const std::string& scheduler) {
  if (runner_) runner_->SetCluster(self, common, scheduler, secret_);
}

void LaunchFaults::Finish(int code) {
  if (runner_) runner_->Finish(code);
}

void LaunchFaults::Detach() { runner_.reset(); }

}  // namespace keel
