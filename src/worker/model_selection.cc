#include "worker/model_selection.h"

#include <algorithm>
#include <cmath>

#include "worker/evaluator.h"

namespace keel {

bool TunesThreshold(const Hyperparameters& h) {
  return h.job == JobKind::kLinearLearner && h.predictor_type == PredictorType::kBinaryClassifier &&
         h.selection_criterion != SelectionCriterion::kLossFunction;
}

ModelScore ScoreModel(const Hyperparameters& h, const std::vector<float>& predictions,
                      const std::vector<float>& labels, double mean_loss) {
  ModelScore score;
  if (TunesThreshold(h)) {
    const ThresholdChoice choice =
        ChooseThreshold(predictions, labels, h.threshold_criterion(), h.DecisionThreshold());
    score.score = choice.value;
    score.threshold = choice.threshold;
    score.target_met = choice.target_met;
    return score;
  }
  score.score = -PredictionMetrics(h, predictions, labels, mean_loss).at("objective_loss");
  score.threshold = h.DecisionThreshold();
  return score;
}

MetricSet ThresholdMetrics(const std::string& channel, const Hyperparameters& h,
                           const ThresholdChoice& choice) {
  const std::string prefix = channel + ":";
  MetricSet metrics = {{prefix + "threshold", choice.threshold},
                       {prefix + SelectionCriterionName(h.selection_criterion), choice.value}};
  if (h.selection_criterion == SelectionCriterion::kPrecisionAtTargetRecall ||
      h.selection_criterion == SelectionCriterion::kRecallAtTargetPrecision) {
    metrics[prefix + "threshold_target_met"] = choice.target_met ? 1.0 : 0.0;
  }
  return metrics;
}

int BestModel(const std::vector<ModelScore>& scores) {
  int best = 0;
  for (size_t k = 1; k < scores.size(); ++k) {
    if (std::isnan(scores[k].score)) continue;
    if (std::isnan(scores[best].score) || scores[k].score > scores[best].score) {
      best = static_cast<int>(k);
    }
  }
  return best;
}

bool ComparesRowLosses(const Hyperparameters& h) {
  const LossKind loss = LossKindOf(h.predictor_type, h.loss);
  return (h.predictor_type == PredictorType::kBinaryClassifier && loss == LossKind::kLogistic) ||
         (h.predictor_type == PredictorType::kRegressor && loss == LossKind::kSquared);
}

bool ClearlyBetter(const Hyperparameters& h, const std::vector<float>& predictions,
                   const std::vector<float>& baseline, const std::vector<float>& labels,
                   double standard_errors) {
  const bool logistic = h.predictor_type == PredictorType::kBinaryClassifier;
  const bool squared = !logistic;
  if (!ComparesRowLosses(h) || labels.empty() || predictions.size() != labels.size() ||
      baseline.size() != labels.size()) {
    return true;
  }
  if (logistic && labels.size() < kLeastRowsToTellBetter) return false;
  const auto row_loss = [&](float prediction, float label) {
    if (squared) return (static_cast<double>(prediction) - label) * (prediction - label);
    const double p = std::clamp(static_cast<double>(prediction), 1e-7, 1 - 1e-7);
    return label > 0.5f ? -std::log(p) : -std::log(1 - p);
  };
  double sum = 0, sum_of_squares = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double difference = row_loss(predictions[i], labels[i]) - row_loss(baseline[i], labels[i]);
    sum += difference;
    sum_of_squares += difference * difference;
  }
  const double rows = static_cast<double>(labels.size());
  const double mean = sum / rows;
  // The differences' sample variance (of n - 1), and the mean's standard error.
  const double variance =
      rows > 1 ? std::max(0.0, (sum_of_squares - rows * mean * mean) / (rows - 1)) : 0.0;
  const double standard_error = std::sqrt(variance / rows);
  return mean + standard_errors * standard_error < 0;
}

double InteractionStandardErrors(size_t interaction_models) {
  if (interaction_models <= 1) return 1.0;
  // The one-sided tail of the normal distribution beyond z, P(Z > z).
  const auto tail = [](double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); };
  const double wanted = tail(1.0) / static_cast<double>(interaction_models);
  double low = 1.0, high = 10.0;  // tail(low) > wanted > tail(high)
  for (int step = 0; step < 60; ++step) {
    const double middle = 0.5 * (low + high);
    (tail(middle) > wanted ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

bool FastBetaCanWinOn(const Hyperparameters& h, size_t rows) {
  return rows >= kLeastRowsForFastBeta && ComparesRowLosses(h);
}

int BestOnValidation(const Hyperparameters& h, const std::vector<ModelScore>& scores,
                     const std::vector<const std::vector<float>*>& predictions,
                     const std::vector<float>& labels) {
  const int best = BestModel(scores);
  const std::vector<ModelVariant>& variants = h.variants;
  if (static_cast<size_t>(best) >= variants.size() || !IsFastBeta(variants[best])) return best;
  std::vector<ModelScore> others = scores;
  for (size_t k = 0; k < others.size() && k < variants.size(); ++k) {
    if (IsFastBeta(variants[k])) others[k].score = std::numeric_limits<double>::quiet_NaN();
  }
  const int other = BestModel(others);
  if (std::isnan(others[other].score)) return best;  // no other model scored
  const bool stands = FastBetaCanWinOn(h, labels.size()) &&
                      ClearlyBetter(h, *predictions[best], *predictions[other], labels);
  return stands ? best : other;
}

int BestOnTraining(const ModelLosses& mean_losses, const std::vector<ModelVariant>& variants) {
  std::vector<ModelScore> scores(mean_losses.size());
  for (size_t k = 0; k < mean_losses.size(); ++k) {
    const bool fast = k < variants.size() && IsFastBeta(variants[k]);
    scores[k].score = fast ? std::numeric_limits<double>::quiet_NaN() : -mean_losses[k];
  }
  return BestModel(scores);
}

MetricSet OfModel(int k, const MetricSet& metrics) {
  MetricSet named;
  const std::string prefix = "model_" + std::to_string(k) + ":";
  for (const auto& [name, value] : metrics) named[prefix + name] = value;
  return named;
}

}  // namespace keel
