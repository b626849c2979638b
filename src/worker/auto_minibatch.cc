#include "worker/auto_minibatch.h"

#include <algorithm>

#include "io/batch.h"
#include "io/input_split.h"
#include "io/readers.h"
#include "worker/model_selection.h"

namespace keel {
namespace {

// Minibatches an epoch that auto aims at on each worker.
constexpr uint64_t kStepsPerEpoch = 40;

}  // namespace

uint64_t CountTrainingRows(const std::string& channel, const ReaderOptions& reader, int workers,
                           int epochs) {
  // Past this many rows every answer is the same: the minibatch is the most,
  // and the minibatches of `epochs` reach kAutoLeastSteps.
  uint64_t steps = kStepsPerEpoch;
  if (epochs > 0) {
    steps = std::max(steps, (kAutoLeastSteps + static_cast<uint64_t>(epochs) - 1) /
                                static_cast<uint64_t>(epochs));
  }
  const uint64_t enough = kAutoMinibatchMost * steps * static_cast<uint64_t>(workers);
  uint64_t rows = 0;
  Batch batch;
  for (const InputSplit& split : ResolveChannel(channel, 0, 1)) {
    const auto split_reader = OpenReader(split, reader);
    while (rows < enough) {
      batch.Clear();
      const size_t got = split_reader->Read(std::min<uint64_t>(enough - rows, 4096), &batch);
      if (got == 0) break;
      rows += got;
    }
    if (rows >= enough) break;
  }
  return rows;
}

int AutoMinibatchSize(uint64_t rows, int workers) {
  const uint64_t share = rows / static_cast<uint64_t>(std::max(workers, 1));
  return static_cast<int>(std::clamp<uint64_t>(share / kStepsPerEpoch, kAutoMinibatchLeast,
                                               kAutoMinibatchMost));
}

int AutoEpochs(uint64_t rows, int workers, int minibatch, int epochs) {
  const uint64_t share = rows / static_cast<uint64_t>(std::max(workers, 1));
  const uint64_t steps = std::max<uint64_t>(
      1, (share + static_cast<uint64_t>(minibatch) - 1) / static_cast<uint64_t>(minibatch));
  const uint64_t needed = (kAutoLeastSteps + steps - 1) / steps;
  return static_cast<int>(
      std::clamp<uint64_t>(needed, static_cast<uint64_t>(epochs), kAutoMostEpochs));
}

bool RaisesEpochs(const Hyperparameters& h, bool validates) {
  if (h.job == JobKind::kLinearLearner) return true;
  return h.job == JobKind::kFactorizationMachines &&
         h.predictor_type == PredictorType::kRegressor && validates && ComparesRowLosses(h) &&
         h.variants.size() >= 2 && h.variants.back().linear_only;
}

}  // namespace keel
