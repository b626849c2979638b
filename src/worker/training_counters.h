// TrainingCounters: a worker's running training figures, kept for its metrics
// (metrics/worker_metrics.h): examples and minibatches trained, the epoch, and
// the epoch's mean training loss so far, and (worker 0) the last epoch's
// training health. The training loop (EpochTrainer) updates them after every
// minibatch, the Trainer the health after every epoch; any thread may read them.
#ifndef KEEL_WORKER_TRAINING_COUNTERS_H_
#define KEEL_WORKER_TRAINING_COUNTERS_H_

#include <atomic>
#include <cstdint>
#include <limits>

#include "worker/training_health.h"

namespace keel {

struct TrainingCounters {
  // Trained by this process since it started (resumed ones not included).
  std::atomic<uint64_t> examples{0};
  std::atomic<uint64_t> minibatches{0};
  std::atomic<int> epoch{0};
  // Mean training loss (the first model's) of the epoch's examples so far; NaN before any.
  std::atomic<double> epoch_loss{std::numeric_limits<double>::quiet_NaN()};
  // Worker 0's report of the last epoch's training health (the others': none).
  LatestHealth health;

  // A minibatch of `rows` examples pushed.
  void AddBatch(uint64_t rows) {
    examples.fetch_add(rows, std::memory_order_relaxed);
    minibatches.fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace keel

#endif  // KEEL_WORKER_TRAINING_COUNTERS_H_
