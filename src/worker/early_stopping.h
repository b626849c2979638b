// Early stopping: after each epoch's validation, worker 0 decides whether the
// selected model's validation loss is the best so far (that epoch's model is
// kept), and whether enough epochs have passed in which no model gained to
// stop. The figures it keeps (the best loss, each model's reference loss, the
// epochs without gain) live in proto::TrainerState, so checkpoints carry them.
#ifndef KEEL_WORKER_EARLY_STOPPING_H_
#define KEEL_WORKER_EARLY_STOPPING_H_

#include <vector>

#include "checkpoint.pb.h"
#include "models/metrics.h"
#include "worker/hyperparameters.h"

namespace keel {

// The metric that decides early stopping (lower is better): objective_loss,
// or +inf when `validation` has none.
double StoppingLoss(const MetricSet& validation);

struct EpochVerdict {
  bool improved = false;  // a new best validation loss (always for the first one)
  bool stop = false;      // --early_stopping_patience epochs without gain: stop now
};

// Judges an epoch by the selected model's `validation` metrics and every
// model's validation loss (`model_losses`, one per model; the selected one's
// included):
// - improved: the selected model's loss is below the best so far, by any
//   amount (the kept model is the best one seen, as SageMaker's is);
// - a gain: some model's loss is below its own reference (its loss at its
//   last gain) by more than --early_stopping_tolerance times the reference's
//   magnitude, SageMaker's relative tolerance. The job stops after
//   --early_stopping_patience epochs without one: while a model of a
//   num_models job still gains (a slower rate, say), it may overtake the
//   selected one, so training goes on for it.
// Updates state->best_loss (+inf: none yet), model_reference_losses and
// epochs_without_gain.
EpochVerdict JudgeEpoch(const MetricSet& validation, const std::vector<double>& model_losses,
                        const Hyperparameters& hyperparameters, proto::TrainerState* state);

}  // namespace keel

#endif  // KEEL_WORKER_EARLY_STOPPING_H_
