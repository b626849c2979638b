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

#include "worker/control_table.h"

namespace keel {

// Adds this worker's summed training `loss` over `examples` in `epoch` (>= 1)
// to the job's sums. Call once per worker and epoch, before the barrier after
// which ReadEpochLoss is called. Throws Error if a request fails.
void AddEpochLoss(ControlTable* control, int epoch, double loss, uint64_t examples);

// The mean training loss per example of `epoch` across every worker that has
// added its sums; 0 if no examples were added. Kept as float sums on the
// servers: about 7 significant digits. Throws Error if a request fails.
double ReadEpochLoss(ControlTable* control, int epoch);

}  // namespace keel

#endif  // KEEL_WORKER_TRAINING_LOSS_H_
