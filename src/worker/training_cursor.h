// Where a worker is in a training job (proto::WorkerCursor: an epoch and the
// minibatches of it already pushed), as its progress reports and checkpoints
// carry it, and where a resumed or replacing worker starts.
#ifndef KEEL_WORKER_TRAINING_CURSOR_H_
#define KEEL_WORKER_TRAINING_CURSOR_H_

#include <cstdint>

#include "checkpoint.pb.h"
#include "worker/scheduler_link.h"
#include "worker/training_loss.h"

namespace keel {

// `batches` minibatches into `epoch`, having read `examples` examples of
// summed training loss `losses` in it (one per model; `loss` holds model 0's,
// model_losses every model's when there are several).
proto::WorkerCursor CursorAt(int epoch, uint64_t batches, uint64_t examples,
                             const ModelLosses& losses);

// The per-model losses `cursor` carries for a job of `num_models` models
// (models it does not carry, as in a cursor of one model: 0).
ModelLosses LossesOf(const proto::WorkerCursor& cursor, int num_models);

// Where this worker starts the job. After the checkpoint the view says to
// resume from: its cursor there (epoch 0 if none), and on worker 0 the job's
// state into `*state`. A worker that took over a departed worker's rank
// instead goes on where that one's last progress report left off (epoch 1 at
// the least). Logs which. Throws Error if the checkpoint cannot be read, or
// was taken inside an epoch by another number of workers.
proto::WorkerCursor StartingPoint(SchedulerLink* scheduler, proto::TrainerState* state);

// Stops at a checkpoint point at `cursor`; worker 0 brings the job's `state`
// (`final`: the job's last checkpoint). Blocks until the scheduler answers. A
// checkpoint the scheduler could not take is logged and training goes on;
// throws Error if there was no answer, or if it was the preemption checkpoint
// (the worker stops training).
void StopForCheckpoint(SchedulerLink* scheduler, const proto::WorkerCursor& cursor,
                       const proto::TrainerState& state, bool final);

}  // namespace keel

#endif  // KEEL_WORKER_TRAINING_CURSOR_H_
