// EpochResult: what one worker did in an epoch (examples, losses, where the
// time went, departed workers' shares finished, gradients pushed).
//
// EpochTrainer makes one per epoch share; the Trainer counts it and the
// TimelineRecorder writes its epoch line from it.
#ifndef KEEL_WORKER_EPOCH_RESULT_H_
#define KEEL_WORKER_EPOCH_RESULT_H_

#include <cstdint>

#include "worker/training_health.h"
#include "worker/training_loss.h"

namespace keel {

struct EpochResult {
  uint64_t examples = 0;
  ModelLosses losses;  // per model: the summed training loss of `examples`
  double seconds = 0;
  // Where the training loop's time went (seconds): blocked on reading and
  // preparing minibatches, blocked on the next minibatch's rows, computing
  // gradients, pushing them (waiting for the previous minibatch's pushes
  // included). The rest of `seconds` is bookkeeping and checkpoints.
  double read_wait = 0;
  double pull_wait = 0;
  double compute = 0;
  double push = 0;
  uint64_t epoch_examples = 0;    // read by every worker in the epoch
  uint64_t resumed_examples = 0;  // of `examples`, read before a resume or takeover
  // Read, before they left, by departed workers whose shares this one finished
  // (not in `examples` or `loss`).
  uint64_t departed_examples = 0;
  ModelLosses departed_losses;
  // The gradients this worker pushed (orphaned shares' included).
  EpochGradients gradients;
};

}  // namespace keel

#endif  // KEEL_WORKER_EPOCH_RESULT_H_
