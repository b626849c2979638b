// Early stopping: after each epoch's validation, worker 0 decides whether the
// validation loss improved on the best so far, and whether enough epochs have
// passed without a gain to stop. The figures it keeps (the best loss, the
// epochs without gain) live in proto::TrainerState, so checkpoints carry them.
#ifndef KEEL_WORKER_EARLY_STOPPING_H_
#define KEEL_WORKER_EARLY_STOPPING_H_

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

// Judges an epoch by its `validation` metrics: a gain is a loss below the
// best by more than --early_stopping_tolerance times the best's magnitude.
// Updates state->best_loss (+inf: none yet) and state->epochs_without_gain.
EpochVerdict JudgeEpoch(const MetricSet& validation, const Hyperparameters& hyperparameters,
                        proto::TrainerState* state);

}  // namespace keel

#endif  // KEEL_WORKER_EARLY_STOPPING_H_
