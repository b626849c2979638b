#include "faults/launch_faults.h"

#include <unistd.h>

namespace keel {

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
