#include "worker/early_stopping.h"

#include <cmath>
#include <limits>

namespace keel {

double StoppingLoss(const MetricSet& validation) {
  auto it = validation.find("objective_loss");
  return it == validation.end() ? std::numeric_limits<double>::infinity() : it->second;
}

EpochVerdict JudgeEpoch(const MetricSet& validation, const Hyperparameters& hyperparameters,
                        proto::TrainerState* state) {
  EpochVerdict verdict;
  const double loss = StoppingLoss(validation);
  const double best = state->best_loss();
  if (!std::isfinite(best) ||
      loss < best - hyperparameters.early_stopping_tolerance * std::fabs(best)) {
    state->set_best_loss(loss);
    state->set_epochs_without_gain(0);
    verdict.improved = true;
    return verdict;
  }
  state->set_epochs_without_gain(state->epochs_without_gain() + 1);
  verdict.stop = state->epochs_without_gain() >= hyperparameters.early_stopping_patience;
  return verdict;
}

}  // namespace keel
