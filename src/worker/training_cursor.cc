#include "worker/training_cursor.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "io/checkpoint.h"
#include "worker/barriers.h"

namespace keel {
namespace {

// The checkpoint the view says to resume from: this worker's cursor (epoch 0
// if none) and, on the leading worker, the job's state.
proto::WorkerCursor ReadResumePoint(Node* node, proto::TrainerState* state) {
  proto::WorkerCursor cursor;
  auto view = node->view();
  if (view->resume_checkpoint().empty()) return cursor;
  CheckpointStore store(view->resume_uri());
  const proto::CheckpointManifest manifest = store.ReadManifest(view->resume_checkpoint());
  const std::string where = store.storage()->UriOf(manifest.id());
  cursor.set_epoch(manifest.epoch());
  if (node->rank() == 0) *state = manifest.trainer();
  // Every worker's statistics follow the rows the job's began with. A state
  // without them that worker 0 reported (its best_loss is never the default
  // 0: +inf is written as 1e308) is a build's before they were kept, whose
  // prior's auto was its cap: the rows not known, 0. With no report of worker
  // 0's (its share ended before the checkpoint's point) they are estimated
  // again, as the job began.
  const proto::TrainerState& saved = manifest.trainer();
  if (saved.has_statistics_rows()) {
    state->set_statistics_rows(saved.statistics_rows());
  } else if (saved.best_loss() != 0) {
    state->set_statistics_rows(0);
  } else {
    state->clear_statistics_rows();
  }
  if (manifest.final()) state->set_stopped(true);
  if (manifest.batch() > 0 && manifest.num_workers() != view->num_workers()) {
    // Its shards were those of another number of workers: the scheduler hands
    // out the rest of them (OrphanedShares::Inherit).
    cursor.set_no_share(true);
    LOG(INFO) << "worker " << node->rank() << " resumes from " << where << " inside epoch "
              << cursor.epoch() << ", which " << manifest.num_workers()
              << " worker(s) began: it reads the rest of their shares as the scheduler hands "
                 "them out, and its own share from the next epoch on";
    return cursor;
  }
  for (const proto::WorkerCursor& saved : manifest.workers()) {
    if (saved.rank() == node->rank() && saved.epoch() == manifest.epoch()) cursor = saved;
  }
  cursor.set_epoch(manifest.epoch());
  LOG(INFO) << "worker " << node->rank() << " resumes from " << where << " at epoch "
            << cursor.epoch() << " after " << cursor.batches() << " minibatch(es)";
  return cursor;
}

// A replacing worker: where the departed worker's last progress report left off.
proto::WorkerCursor TakeoverPoint(const SchedulerLink& scheduler) {
  const Node& node = scheduler.node();
  proto::WorkerCursor cursor = scheduler.takeover();
  if (cursor.epoch() == 0) cursor.set_epoch(1);
  LOG(WARNING) << "worker " << node.rank() << " replaces a worker that left: it goes on at epoch "
               << cursor.epoch() << " after " << cursor.batches()
               << " minibatch(es) (its last progress report; minibatches pushed after that "
                  "report are read again)";
  return cursor;
}

}  // namespace

proto::WorkerCursor CursorAt(int epoch, uint64_t batches, uint64_t examples,
                             const ModelLosses& losses) {
  proto::WorkerCursor cursor;
  cursor.set_epoch(epoch);
  cursor.set_batches(batches);
  cursor.set_examples(examples);
  cursor.set_loss(losses.empty() ? 0.0 : losses[0]);
  if (losses.size() > 1) *cursor.mutable_model_losses() = {losses.begin(), losses.end()};
  return cursor;
}

ModelLosses LossesOf(const proto::WorkerCursor& cursor, int num_models) {
  ModelLosses losses(static_cast<size_t>(std::max(num_models, 1)), 0.0);
  losses[0] = cursor.loss();
  for (int k = 1; k < num_models && k < cursor.model_losses_size(); ++k) {
    losses[k] = cursor.model_losses(k);
  }
  return losses;
}

proto::WorkerCursor StartingPoint(SchedulerLink* scheduler, proto::TrainerState* state) {
  proto::WorkerCursor cursor = ReadResumePoint(&scheduler->node(), state);
  if (scheduler->has_takeover()) cursor = TakeoverPoint(*scheduler);
  return cursor;
}

void StopForCheckpoint(SchedulerLink* scheduler, const proto::WorkerCursor& cursor,
                       const proto::TrainerState& state, bool final) {
  const Node* node = &scheduler->node();
  try {
    scheduler->Checkpoint(cursor, node->rank() == 0 ? &state : nullptr, final, kBarrierTimeoutS);
  } catch (const CheckpointFailed& e) {
    if (scheduler->preempt_checkpointed()) throw;
    // Training goes on: the latest committed checkpoint stays the one to
    // resume from, and the next point tries again.
    LOG(WARNING) << "worker " << node->rank() << ": the " << (final ? "final " : "")
                 << "checkpoint at epoch " << cursor.epoch() << " minibatch " << cursor.batches()
                 << " was not taken (" << e.what() << "); "
                 << (final ? "the job ends without it" : "training goes on");
  }
  if (scheduler->preempt_checkpointed()) {
    throw MakeError("preempted: worker ", node->rank(), " stopped at epoch ", cursor.epoch(),
                    " after minibatch ", cursor.batches(), " (the preemption checkpoint's point)");
  }
}

}  // namespace keel
