// The job's training loss per epoch (SageMaker's train:objective_loss): the
// mean, over every example the workers trained on in the epoch, of the loss
// each example had when its minibatch's gradients were computed (with the
// weights pulled for that minibatch, before its own update). It is the data
// loss only: weight decay and L1 are applied by the servers and not counted.
//
// Every worker sums its own losses and examples; the sums meet on the servers'
// control table under keys of their own per epoch, so a job resumed from a
// checkpoint does not count an epoch twice.
#ifndef KEEL_WORKER_TRAINING_LOSS_H_
#define KEEL_WORKER_TRAINING_LOSS_H_

#include <cstdint>
#include <vector>

#include "worker/control_table.h"

namespace keel {

// Summed training losses, one per model of the job (num_models).
using ModelLosses = std::vector<double>;

// Adds `add` to `*sum` model by model (`*sum` grows to add's size).
void AddLosses(const ModelLosses& add, ModelLosses* sum);

// Adds this worker's summed training `losses` (one per model) over `examples`
// in `epoch` (>= 1) to the job's sums. Call once per worker and epoch, before
// the barrier after which ReadEpochLosses is called. Throws Error if a
// request fails.
void AddEpochLoss(ControlTable* control, int epoch, const ModelLosses& losses, uint64_t examples);

// The mean training loss per example of `epoch` of each of `num_models`
// models across every worker that has added its sums; 0 if no examples were
// added. Kept as float sums on the servers: about 7 significant digits.
// Throws Error if a request fails.
ModelLosses ReadEpochLosses(ControlTable* control, int epoch, int num_models);

}  // namespace keel

#endif  // KEEL_WORKER_TRAINING_LOSS_H_
