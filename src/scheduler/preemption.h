// Preemption: a notice (SIGTERM to a role or to the launcher, or PREEMPT from
// a node) becomes an immediate checkpoint, then the end of the job.
//
// With checkpoints on, every live worker is ordered to stop after the
// minibatch it has in flight (again every kOrderInterval: control messages are
// not resent by the transport) and the preemption is over once that checkpoint
// is committed or abandoned, or after the grace without it; with checkpoints
// off it is over at once. The scheduler owns it and ends the job when Over
// says so; it reads the members it is given and sends through the scheduler's
// send function.
//
// Not synchronized: the scheduler calls it under its lock, with the
// CheckpointCoordinator it holds then.
#ifndef KEEL_SCHEDULER_PREEMPTION_H_
#define KEEL_SCHEDULER_PREEMPTION_H_

#include <functional>
#include <string>

#include "io/timeline_writer.h"
#include "keel.pb.h"
#include "kv/message.h"
#include "scheduler/checkpoint_coordinator.h"
#include "scheduler/members.h"

namespace keel {

// How a preempted job ended.
struct PreemptionOutcome {
  bool preempted = false;  // the job ended by preemption
  std::string checkpoint;  // the checkpoint committed for it ("": none)
  std::string uri;         // its store
  double seconds = 0;      // from the notice to the commit (or to the end)
  // Why there is no checkpoint, and the latest usable one ("" with one).
  std::string note;
};

class Preemption {
 public:
  // Sends a control message to a node (the scheduler stamps it).
  using Send = std::function<void(int node_id, Message& message)>;

  // How often the workers are ordered again to stop (and the grace checked).
  static constexpr double kOrderInterval = 0.5;

  // `members`: the scheduler's (read for the live workers); `grace_s`: how
  // long the preemption checkpoint may take to commit after the notice.
  Preemption(const Members& members, TimelineWriter* timeline, double grace_s, Send send);

  // Starts the preemption (`who` sent the notice, for the log); a repeated
  // notice is ignored.
  void Notice(const std::string& who, CheckpointCoordinator& checkpoints);
  // A member's PREEMPT: answered, then the preemption starts.
  void OnPreempt(const proto::Meta& meta, const Member& member, CheckpointCoordinator& checkpoints);
  // Whether a notice came.
  bool noticed() const { return noticed_ > 0; }
  // After a notice: orders the workers again to stop if kOrderInterval passed
  // since the last order.
  void Remind(double now, CheckpointCoordinator& checkpoints);
  // After a notice: whether the preemption is over at `now` (its checkpoint
  // committed or abandoned, the grace ran out, or checkpoints are off); fills
  // outcome() then.
  bool Over(double now, CheckpointCoordinator& checkpoints);
  // How it ended (preempted false until Over returned true).
  const PreemptionOutcome& outcome() const { return outcome_; }

 private:
  // Orders every live worker to stop for the preemption checkpoint.
  void OrderWorkersToStop(CheckpointCoordinator& checkpoints);

  const Members& members_;
  TimelineWriter* timeline_;
  const double grace_s_;
  Send send_;
  double noticed_ = 0;  // MonotonicSeconds() of the notice; 0: none
  double ordered_ = 0;  // ... of the last order to the workers to stop
  PreemptionOutcome outcome_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_PREEMPTION_H_
