#include "scheduler/preemption.h"

#include <glog/logging.h>

#include <cctype>
#include <iomanip>
#include <sstream>
#include <utility>

#include "base/json.h"
#include "base/time.h"
#include "scheduler/control_message.h"

namespace keel {
namespace {

std::string Seconds(double seconds) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(3) << seconds;
  return text.str();
}

// "worker 0", "server 1", as the logs name nodes.
std::string NodeName(const Member& member) {
  std::string role = proto::Role_Name(member.info.role());
  for (char& c : role) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return role + " " + std::to_string(member.info.rank());
}

}  // namespace

Preemption::Preemption(const Members& members, TimelineWriter* timeline, double grace_s, Send send)
    : members_(members), timeline_(timeline), grace_s_(grace_s), send_(std::move(send)) {}

void Preemption::Notice(const std::string& who, CheckpointCoordinator& checkpoints) {
  if (noticed_ > 0) return;  // a repeated notice
  noticed_ = MonotonicSeconds();
  timeline_->Record("preempt", "\"from\": " + JsonQuote(who));
  if (!checkpoints.enabled()) {
    LOG(WARNING) << "preemption notice from " << who
                 << ": no checkpoint is possible (--checkpoint_uri is not set); the job ends now";
    return;
  }
  LOG(WARNING) << "preemption notice from " << who
               << ": the workers stop after the minibatch in flight for a checkpoint (grace "
               << grace_s_ << " s)";
  checkpoints.Preempt();
  OrderWorkersToStop(checkpoints);
  ordered_ = noticed_;
}

void Preemption::OnPreempt(const proto::Meta& meta, const Member& member,
                           CheckpointCoordinator& checkpoints) {
  Message answer = ControlMessage(proto::PREEMPT);
  send_(meta.sender(), answer);
  Notice(NodeName(member), checkpoints);
}

void Preemption::Remind(double now, CheckpointCoordinator& checkpoints) {
  if (noticed_ > 0 && now - ordered_ >= kOrderInterval) {
    OrderWorkersToStop(checkpoints);
    ordered_ = now;
  }
}

void Preemption::OrderWorkersToStop(CheckpointCoordinator& checkpoints) {
  if (!checkpoints.enabled()) return;
  for (int worker : MemberIds(members_, proto::WORKER)) {
    Message order = ControlMessage(proto::PREEMPT);
    order.meta.set_response(false);
    send_(worker, order);
  }
}

bool Preemption::Over(double now, CheckpointCoordinator& checkpoints) {
  PreemptionOutcome outcome;
  outcome.preempted = true;
  outcome.seconds = now - noticed_;
  std::string latest = checkpoints.LatestCommitted(&outcome.uri);
  std::string id, error;
  if (!checkpoints.enabled()) {
    outcome.note = "no checkpoint: --checkpoint_uri is not set";
  } else if (checkpoints.PreemptionOver(&id, &error)) {
    outcome.checkpoint = id;
    if (id.empty()) {
      outcome.note = "the preemption checkpoint failed (" + error + ")";
    }
  } else if (outcome.seconds >= grace_s_) {
    outcome.note = "no checkpoint committed within --preemption_grace " + Seconds(grace_s_) + " s";
  } else {
    return false;
  }
  if (outcome.checkpoint.empty() && checkpoints.enabled()) {
    outcome.note += latest.empty() ? "; there is no earlier checkpoint"
                                   : "; the latest usable checkpoint is " + latest;
  }
  outcome_ = outcome;
  timeline_->Record("preempted", "\"checkpoint\": " + JsonQuote(outcome.checkpoint) +
                                     ", \"seconds\": " + Seconds(outcome.seconds));
  LOG(WARNING) << "preempted after " << Seconds(outcome.seconds) << " s: "
               << (outcome.checkpoint.empty() ? outcome.note
                                              : "checkpoint " + outcome.checkpoint + " committed");
  return true;
}

}  // namespace keel
