#include "worker/model_selection.h"

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

}  // namespace keel
