// Model selection: how a model is scored on a channel under the job's
// selection criterion (SageMaker Linear Learner's
// binary_classifier_model_selection_criteria), to choose among a num_models
// job's models after each epoch, and the decision threshold a binary
// classifier is given at the end of the job. Pure functions of one model's predictions and labels,
// so they apply to any number of models. Stateless; safe from several threads.
#ifndef KEEL_WORKER_MODEL_SELECTION_H_
#define KEEL_WORKER_MODEL_SELECTION_H_

#include <limits>
#include <string>
#include <vector>

#include "models/metrics.h"
#include "models/threshold_selection.h"
#include "worker/hyperparameters.h"
#include "worker/training_loss.h"

namespace keel {

struct ModelScore {
  // Higher is better: the criterion's value at the tuned threshold, or the
  // objective_loss negated.
  double score = 0.0;
  // The decision threshold the model would be given: tuned (TunesThreshold),
  // else hyperparameters.DecisionThreshold().
  double threshold = 0.0;
  // False when a target precision or recall was out of reach: the score is
  // then 0, below that of any model that reaches it.
  bool target_met = true;

  // The threshold choice this score stands for (TunesThreshold's).
  ThresholdChoice choice() const { return ThresholdChoice{threshold, score, target_met}; }
};

// Whether the job tunes its decision threshold: a linear learner binary
// classifier whose criterion is not loss_function. (SageMaker's
// factorization machines have no such criterion and keep the loss's.)
bool TunesThreshold(const Hyperparameters& hyperparameters);

// One model's score on a channel, from its `predictions` and `labels` (as
// Evaluator::Predict returns them; `mean_loss` its mean training loss there):
// - a binary classifier that TunesThreshold: the threshold ChooseThreshold
//   picks for the criterion (ties nearest DecisionThreshold()) and the
//   criterion's value there;
// - otherwise (loss_function, a factorization machine, regressor,
//   multiclass_classifier: SageMaker selects those by the loss): minus the
//   objective_loss PredictionMetrics reports for these predictions, which is
//   `mean_loss` for the losses that are not their predictor type's default.
// Throws Error as ChooseThreshold and PredictionMetrics do.
ModelScore ScoreModel(const Hyperparameters& hyperparameters, const std::vector<float>& predictions,
                      const std::vector<float>& labels,
                      double mean_loss = std::numeric_limits<double>::quiet_NaN());

// The metrics that record a threshold tuned on `channel` ("validation", or
// "train" for training rows): <channel>:threshold, <channel>:<criterion> (its
// SageMaker name: validation:accuracy, validation:precision_at_target_recall,
// ...), and for the target criteria <channel>:threshold_target_met (1 or 0).
MetricSet ThresholdMetrics(const std::string& channel, const Hyperparameters& hyperparameters,
                           const ThresholdChoice& choice);

// Of a num_models job's models, scored on the same channel, the one with the
// highest score; the lowest index among equals (NaN loses). At least one.
int BestModel(const std::vector<ModelScore>& scores);

// Whether `predictions` beat `baseline`'s (another model's, on the same
// `labels`) by more than `standard_errors` standard errors: the mean of the
// per-row difference of their losses (cross-entropy for a logistic binary
// classifier, squared error for a squared-loss regressor) plus that many of
// its standard errors is below 0. True for any other loss (no per-row loss to
// compare: the selection stands). A factorization machine keeps an
// interaction model selected on validation over its linear model only if it
// is better by InteractionStandardErrors: on a few hundred held-out rows, one
// of seven interaction models that overfit can beat the linear one by luck.
// For a classifier, fewer than kLeastRowsToTellBetter
// rows tell nothing (false): an overconfident model that happens to err on
// none of them looks perfect (breast_cancer's 40 held-out rows gave an
// overfit model a cross-entropy near 0 there and a test AUC of 0.90-0.95, its
// linear model's 0.99). A squared error rewards no overconfidence: a
// regressor's interactions may win on few rows (boston's 38: MSE 29 against
// its linear model's 33).
constexpr size_t kLeastRowsToTellBetter = 200;
// The standard errors by which the best of `interaction_models` interaction
// models must beat a factorization machine's linear model. It is picked on
// the rows that then judge it, so its lead there is biased upwards: the bound
// whose one-sided chance, times `interaction_models` (Bonferroni), is one
// standard error's for a single comparison (16%) keeps the chance of a lucky
// pick no higher than that. 1 for one model, 2.0 for the default's seven, 2.57
// for 31. With one standard error, diabetes' 33 held-out rows picked
// interaction models whose test MSE ran from 3,120 to 3,990 (20 epochs) and
// 3,280 to 3,360 (60) (docs/BENCHMARKS.md, "Real data").
double InteractionStandardErrors(size_t interaction_models);
// Whether ClearlyBetter compares per-row losses for `hyperparameters`' loss
// (logistic for a binary classifier, squared for a regressor).
bool ComparesRowLosses(const Hyperparameters& hyperparameters);
// The validation rows on which a factorization machine's fast-beta models
// compete with the others (BestOnValidation).
constexpr size_t kLeastRowsForFastBeta = 10000;
bool ClearlyBetter(const Hyperparameters& hyperparameters, const std::vector<float>& predictions,
                   const std::vector<float>& baseline, const std::vector<float>& labels,
                   double standard_errors = 1.0);

// Whether a model is one of a factorization machine's fast-beta models
// (SpreadModels: a thousandth of ftrl's beta).
inline bool IsFastBeta(const ModelVariant& variant) { return variant.ftrl_beta_scale != 1.0f; }

// Whether a fast-beta model can be selected on `rows` validation rows: at
// least kLeastRowsForFastBeta of them, under a loss ClearlyBetter compares.
bool FastBetaCanWinOn(const Hyperparameters& hyperparameters, size_t rows);

// BestModel of `scores` (each model's on the same validation rows: its
// `predictions[k]` of `labels`), unless that is a fast-beta model (of
// `variants`, one per model) and the rows are fewer than
// kLeastRowsForFastBeta or it is not ClearlyBetter than the best of the
// others (or the loss has no per-row comparison, ComparesRowLosses): then the
// best of the others. With fewer rows a fast-beta model won on validation and
// lost on test (docs/BENCHMARKS.md, "ftrl's beta on minibatch means": fair).
int BestOnValidation(const Hyperparameters& hyperparameters, const std::vector<ModelScore>& scores,
                     const std::vector<const std::vector<float>*>& predictions,
                     const std::vector<float>& labels);

// The model with the lowest mean training loss: how models compete without a
// validation channel. The lowest index among equals (NaN loses). Fast-beta
// models of `variants` (none when empty) do not compete: nothing held out can
// tell them from overfit.
int BestOnTraining(const ModelLosses& mean_losses, const std::vector<ModelVariant>& variants = {});

// `metrics` of model k as a job of several models names them in
// metrics.json and history.jsonl: "model_<k>:<name>".
MetricSet OfModel(int k, const MetricSet& metrics);

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_SELECTION_H_
