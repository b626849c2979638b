#include "worker/model_selection.h"

#include <cmath>
#include <limits>
#include <string>

namespace keel {

double SelectionScore(const Hyperparameters& hyperparameters, const MetricSet& metrics) {
  (void)hyperparameters;
  const auto loss = metrics.find("objective_loss");
  if (loss == metrics.end() || std::isnan(loss->second)) {
    return -std::numeric_limits<double>::infinity();
  }
  return -loss->second;
}

int BestModel(const Hyperparameters& hyperparameters, const std::vector<MetricSet>& per_model) {
  int best = 0;
  double best_score = -std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < per_model.size(); ++k) {
    const double score = SelectionScore(hyperparameters, per_model[k]);
    if (score > best_score) {
      best = static_cast<int>(k);
      best_score = score;
    }
  }
  return best;
}

int BestOnTraining(const ModelLosses& mean_losses) {
  int best = 0;
  for (size_t k = 1; k < mean_losses.size(); ++k) {
    if (std::isnan(mean_losses[k])) continue;
    if (std::isnan(mean_losses[best]) || mean_losses[k] < mean_losses[best]) {
      best = static_cast<int>(k);
    }
  }
  return best;
}

MetricSet OfModel(int k, const MetricSet& metrics) {
  MetricSet named;
  const std::string prefix = "model_" + std::to_string(k) + ":";
  for (const auto& [name, value] : metrics) named[prefix + name] = value;
  return named;
}

}  // namespace keel
