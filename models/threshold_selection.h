// A binary classifier's decision threshold, chosen by SageMaker Linear
// Learner's model selection criteria (binary_classifier_model_selection_criteria).
//
// An example is labelled positive when its prediction exceeds the threshold
// (PredictedPositive, models/metrics.h): a probability for the logistic loss,
// a margin for hinge_loss; the search works on either. Host only; stateless,
// so safe to call from several threads.
#ifndef KEEL_MODELS_THRESHOLD_SELECTION_H_
#define KEEL_MODELS_THRESHOLD_SELECTION_H_

#include <string>
#include <vector>

namespace keel {

// What a threshold (and, among several models, a model) is chosen for:
//   kAccuracy                 the fraction labelled correctly (SageMaker's default)
//   kFBeta                    the F-beta score, beta = --f_beta
//   kPrecisionAtTargetRecall  precision, among thresholds whose recall reaches the target
//   kRecallAtTargetPrecision  recall, among thresholds whose precision reaches the target
//   kLossFunction             the loss: leaves the threshold at the loss's default
enum class SelectionCriterion {
  kAccuracy,
  kFBeta,
  kPrecisionAtTargetRecall,
  kRecallAtTargetPrecision,
  kLossFunction
};

// SageMaker's name (accuracy, f_beta, precision_at_target_recall,
// recall_at_target_precision, loss_function) to the criterion; throws Error
// naming --binary_classifier_model_selection_criteria and the value otherwise.
SelectionCriterion ParseSelectionCriterion(const std::string& name);
// The inverse of ParseSelectionCriterion.
std::string SelectionCriterionName(SelectionCriterion criterion);

// A criterion with its parameters (SageMaker's f_beta, target_precision,
// target_recall; targets in [0, 1]).
struct ThresholdCriterion {
  SelectionCriterion criterion = SelectionCriterion::kAccuracy;
  double beta = 1.0;
  double target_precision = 0.8;
  double target_recall = 0.8;
};

struct ThresholdChoice {
  // Examples whose prediction is > threshold are positive.
  double threshold = 0.0;
  // The criterion's value at `threshold` on the set it was chosen on: an
  // accuracy, F-beta, precision or recall in [0, 1]; 0 when the target was
  // not met; NaN for kLossFunction (the loss is not the threshold's).
  double value = 0.0;
  // False when no threshold reaches the target precision or recall.
  bool target_met = true;
};

// The threshold that maximises `criterion` over `predictions` and their 0/1
// `labels` (one prediction per example), exactly: the predictions are sorted
// once and every split between two distinct predictions is tried, as are
// "all positive" and "none positive"; examples with equal predictions always
// fall on the same side. Precision is 0 when nothing is predicted positive and
// recall 0 when the set has no positives, as models/metrics.h counts them.
//
// Among splits of equal value, the target criteria prefer the higher
// constrained figure (recall for precision_at_target_recall, precision for
// recall_at_target_precision); remaining ties go to the split nearest
// `default_threshold` (the loss's, DecisionThreshold), so a set with no reason
// to move it keeps it. The threshold returned for a split is
// `default_threshold` when that lies in it, else the midpoint between the two
// predictions it separates; "none positive" uses the highest prediction, "all
// positive" the largest double below the lowest.
//
// When no split meets the target (recall_at_target_precision with every
// split's precision below target_precision; precision_at_target_recall on a
// set without positives), the choice comes closest: the highest precision
// (resp. recall), ties broken as above, with value 0 and target_met false.
// kLossFunction returns `default_threshold` with value NaN.
//
// Throws Error naming ChooseThreshold and the example when the sizes differ,
// the set is empty, a label is not 0 or 1, or a prediction is NaN.
ThresholdChoice ChooseThreshold(const std::vector<float>& predictions,
                                const std::vector<float>& labels,
                                const ThresholdCriterion& criterion, double default_threshold);

}  // namespace keel

#endif  // KEEL_MODELS_THRESHOLD_SELECTION_H_
