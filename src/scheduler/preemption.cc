// Preemption: a notice (SIGTERM to a role or to the launcher, or PREEMPT from
// a node) becomes an immediate checkpoint, then the end of the job.
#include <glog/logging.h>

#include <cctype>
#include <iomanip>
#include <sstream>

#include "base/json.h"
#include "base/time.h"
#include "scheduler/control_message.h"
#include "scheduler/scheduler.h"

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

void Scheduler::Preempt(const std::string& who) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  PreemptLocked(who);
  changed_.notify_all();
}

PreemptionOutcome Scheduler::preemption() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return preemption_;
}

void Scheduler::PreemptLocked(const std::string& who) {
  if (preempt_noticed_ > 0) return;  // a repeated notice
  preempt_noticed_ = MonotonicSeconds();
  timeline_.Record("preempt", "\"from\": " + JsonQuote(who));
  if (!checkpoints_->enabled()) {
    LOG(WARNING) << "preemption notice from " << who
                 << ": no checkpoint is possible (--checkpoint_uri is not set); the job ends now";
    return;
  }
  LOG(WARNING) << "preemption notice from " << who
               << ": the workers stop after the minibatch in flight for a checkpoint (grace "
               << options_.preemption_grace_s << " s)";
  checkpoints_->Preempt();
  OrderWorkersToStop();
  preempt_ordered_ = preempt_noticed_;
}

void Scheduler::OnPreempt(const proto::Meta& meta, const Member& member) {
  Message answer = ControlMessage(proto::PREEMPT);
  SendTo(meta.sender(), answer);
  PreemptLocked(NodeName(member));
  changed_.notify_all();
}

void Scheduler::OrderWorkersToStop() {
  if (!checkpoints_->enabled()) return;
  for (int worker : Live(proto::WORKER)) {
    Message order = ControlMessage(proto::PREEMPT);
    order.meta.set_response(false);
    SendTo(worker, order);
  }
}

bool Scheduler::PreemptionOver(double now) {
  PreemptionOutcome outcome;
  outcome.preempted = true;
  outcome.seconds = now - preempt_noticed_;
  std::string latest = checkpoints_->LatestCommitted(&outcome.uri);
  std::string id, error;
  if (!checkpoints_->enabled()) {
    outcome.note = "no checkpoint: --checkpoint_uri is not set";
  } else if (checkpoints_->PreemptionOver(&id, &error)) {
    outcome.checkpoint = id;
    if (id.empty()) {
      outcome.note = "the preemption checkpoint failed (" + error + ")";
    }
  } else if (outcome.seconds >= options_.preemption_grace_s) {
    outcome.note = "no checkpoint committed within --preemption_grace " +
                   Seconds(options_.preemption_grace_s) + " s";
  } else {
    return false;
  }
  if (outcome.checkpoint.empty() && checkpoints_->enabled()) {
    outcome.note += latest.empty() ? "; there is no earlier checkpoint"
                                   : "; the latest usable checkpoint is " + latest;
  }
  preemption_ = outcome;
  timeline_.Record("preempted", "\"checkpoint\": " + JsonQuote(outcome.checkpoint) +
                                    ", \"seconds\": " + Seconds(outcome.seconds));
  LOG(WARNING) << "preempted after " << Seconds(outcome.seconds) << " s: "
               << (outcome.checkpoint.empty() ? outcome.note
                                              : "checkpoint " + outcome.checkpoint + " committed");
  return true;
}

}  // namespace keel
