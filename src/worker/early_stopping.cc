#include "worker/early_stopping.h"

#include <cmath>
#include <limits>

namespace keel {

double StoppingLoss(const MetricSet& validation) {
  auto it = validation.find("objective_loss");
  return it == validation.end() ? std::numeric_limits<double>::infinity() : it->second;
}

namespace {

// Whether some model's loss gained on its reference beyond the tolerance;
// moves the references of those that did.
bool AnyModelGained(const std::vector<double>& model_losses, double tolerance,
                    proto::TrainerState* state) {
  auto* references = state->mutable_model_reference_losses();
  while (references->size() < static_cast<int>(model_losses.size())) {
    references->Add(std::numeric_limits<double>::infinity());
  }
  bool gained = false;
  for (size_t k = 0; k < model_losses.size(); ++k) {
    const double reference = references->Get(static_cast<int>(k));
    const double loss = model_losses[k];
    if (!std::isfinite(loss)) continue;
    if (!std::isfinite(reference) || loss < reference - tolerance * std::fabs(reference)) {
      references->Set(static_cast<int>(k), loss);
      gained = true;
    }
  }
  return gained;
}

}  // namespace

EpochVerdict JudgeEpoch(const MetricSet& validation, const std::vector<double>& model_losses,
                        const Hyperparameters& hyperparameters, proto::TrainerState* state) {
  EpochVerdict verdict;
  const double loss = StoppingLoss(validation);
  const double best = state->best_loss();
  if (!std::isfinite(best) || loss < best) {
    state->set_best_loss(loss);
    verdict.improved = true;
  }
  if (AnyModelGained(model_losses, hyperparameters.early_stopping_tolerance, state)) {
    state->set_epochs_without_gain(0);
    return verdict;
  }
  state->set_epochs_without_gain(state->epochs_without_gain() + 1);
  verdict.stop = state->epochs_without_gain() >= hyperparameters.early_stopping_patience;
  return verdict;
}

}  // namespace keel
