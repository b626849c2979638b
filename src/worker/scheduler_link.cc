#include "worker/scheduler_link.h"

#include <glog/logging.h>

#include <algorithm>

#include "base/utf8.h"

namespace keel {

SchedulerLink::SchedulerLink(Node& node) : node_(node) {
  node_.SetHeartbeatFields([this](proto::Meta* beat) { FillHeartbeat(beat); });
  node_.SetRejoinFields([this](proto::Meta* request) { FillRejoin(request); },
                        [this] { return ResendAfterRejoin(); });
}

SchedulerLink::~SchedulerLink() {
  node_.SetHeartbeatFields(nullptr);
  node_.SetRejoinFields(nullptr, nullptr);
}

void SchedulerLink::SetProgress(const proto::WorkerCursor& cursor, double reading_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  progress_ = cursor;
  progress_reading_seconds_ = reading_seconds;
  has_progress_ = true;
}

void SchedulerLink::SetProgressReport(const proto::ProgressReport& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  progress_report_ = report;
  has_progress_report_ = true;
}

void SchedulerLink::ReportProgress(const proto::ProgressReport& report) {
  {
    // What a restarted scheduler is told again: the latest of each field.
    std::lock_guard<std::mutex> lock(mutex_);
    if (report.epochs() > 0) progress_reported_.set_epochs(report.epochs());
    if (report.share_examples() > 0) {
      progress_reported_.set_share_examples(report.share_examples());
    }
    if (report.has_decided()) *progress_reported_.mutable_decided() = report.decided();
    if (report.has_outcome()) *progress_reported_.mutable_outcome() = report.outcome();
    has_progress_reported_ = true;
  }
  Message message = CommandMessage(proto::PROGRESS);
  *message.meta.mutable_progress() = report;
  try {
    node_.SendToScheduler(message);
  } catch (const Error& e) {
    LOG(WARNING) << "progress report not sent: " << e.what();
  }
}

bool SchedulerLink::has_takeover() const { return node_.registration().has_cursor(); }

proto::WorkerCursor SchedulerLink::takeover() const { return node_.registration().cursor(); }

bool SchedulerLink::TakeOrphanWork(const proto::WorkerCursor& share,
                                   const proto::WorkerCursor* finished, int finished_part,
                                   int finished_parts, proto::WorkerCursor* work, int* part,
                                   int* parts, uint64_t* epoch_examples, double timeout_s) {
  const int epoch = share.epoch();
  Message request = CommandMessage(proto::ORPHANS);
  const uint64_t sequence = node_.NextSequence();
  request.meta.set_sequence(sequence);
  if (finished) {
    *request.meta.mutable_cursor() = *finished;
    request.meta.set_orphan_done(true);
    request.meta.set_orphan_part(finished_part);
    request.meta.set_orphan_parts(finished_parts);
  } else {
    *request.meta.mutable_cursor() = share;
  }
  const Node::ControlAnswer reply =
      node_.Request(request, "orphans " + std::to_string(sequence), timeout_s);
  if (reply.answered && !reply.meta.has_cursor() && reply.meta.error().empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    epoch_ended_ = std::max(epoch_ended_, request.meta.cursor().epoch());
  }
  switch (reply.outcome) {
    case Node::ControlOutcome::kTimedOut:
      throw MakeError("end of epoch ", epoch, ": no answer from the scheduler within ", timeout_s,
                      " s");
    case Node::ControlOutcome::kStopped:
      throw MakeError("stopped at the end of epoch ", epoch);
    case Node::ControlOutcome::kShutdown:
      throw MakeError("end of epoch ", epoch, ": the scheduler ended the job");
    case Node::ControlOutcome::kRemoved:
      throw MakeError("this node left the cluster");
    case Node::ControlOutcome::kAnswered:
      break;
  }
  const proto::Meta& answer = reply.meta;
  if (!answer.error().empty()) throw MakeError("end of epoch ", epoch, ": ", answer.error());
  if (!answer.has_cursor()) {
    *epoch_examples = answer.epoch_examples();
    return false;
  }
  *work = answer.cursor();
  *part = answer.orphan_part();
  *parts = answer.orphan_parts();
  return true;
}

void SchedulerLink::ReportEpochDone(const proto::WorkerCursor& cursor) {
  Message report = CommandMessage(proto::CHECKPOINT);
  const uint64_t sequence = node_.NextSequence();
  report.meta.set_sequence(sequence);
  *report.meta.mutable_cursor() = cursor;
  report.meta.mutable_cursor()->set_epoch_done(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    epoch_done_report_ = report.meta;
  }
  // Sent again if lost; nothing waits for the answer.
  node_.Post(report, "epoch done " + std::to_string(sequence));
}

void SchedulerLink::Checkpoint(const proto::WorkerCursor& cursor,
                               const proto::TrainerState* trainer, bool final, double timeout_s,
                               bool preempt) {
  Message request = CommandMessage(proto::CHECKPOINT);
  const uint64_t sequence = node_.NextSequence();
  request.meta.set_sequence(sequence);
  *request.meta.mutable_cursor() = cursor;
  if (trainer) *request.meta.mutable_trainer() = *trainer;
  request.meta.set_final(final);
  request.meta.set_preempt(preempt);
  const Node::ControlAnswer answer =
      node_.Request(request, "checkpoint " + std::to_string(sequence), timeout_s);
  if (answer.answered && answer.meta.preempt()) preempt_checkpointed_ = true;
  switch (answer.outcome) {
    case Node::ControlOutcome::kTimedOut:
      throw MakeError("checkpoint at epoch ", cursor.epoch(), " minibatch ", cursor.batches(),
                      ": no answer from the scheduler within ", timeout_s, " s");
    case Node::ControlOutcome::kStopped:
      throw MakeError("stopped while waiting for a checkpoint");
    case Node::ControlOutcome::kShutdown:
      throw MakeError("the scheduler ended the job while this worker waited for a checkpoint");
    case Node::ControlOutcome::kRemoved:
      throw MakeError("this node left the cluster");
    case Node::ControlOutcome::kAnswered:
      break;
  }
  if (!answer.meta.error().empty()) {
    throw CheckpointFailed("checkpoint failed: " + answer.meta.error());
  }
}

void SchedulerLink::ReportDone(const std::string& error) {
  Message report = CommandMessage(proto::WORKER_DONE);
  report.meta.set_error(ValidUtf8(error));
  node_.Post(report, "done");
}

void SchedulerLink::FillHeartbeat(proto::Meta* beat) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (has_progress_) {
    *beat->mutable_cursor() = progress_;
    beat->set_reading_seconds(progress_reading_seconds_);
  }
  if (has_progress_report_) *beat->mutable_progress() = progress_report_;
}

void SchedulerLink::FillRejoin(proto::Meta* request) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (has_progress_) *request->mutable_cursor() = progress_;
  request->set_epoch_ended(epoch_ended_);
}

std::vector<proto::Meta> SchedulerLink::ResendAfterRejoin() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<proto::Meta> again;
  if (epoch_done_report_.has_cursor()) again.push_back(epoch_done_report_);
  if (has_progress_reported_) {
    Message progress = CommandMessage(proto::PROGRESS);
    *progress.meta.mutable_progress() = progress_reported_;
    again.push_back(progress.meta);
  }
  return again;
}

}  // namespace keel
